//! [`Input`]: a byte source with one large reusable buffer, so record framing reads
//! slices in place without a copy or an allocation per packet, and always knows the absolute
//! byte offset for error messages.

use std::io::{self, Read};

/// Buffer size once a capture proves larger than [`FIRST`]. Loopback frames can be 64 KiB
/// and more; 2 MiB amortises read calls.
const INITIAL: usize = 2 << 20;
/// Buffer size at first, so small inputs (tests, fuzzing, short captures) stay cheap.
const FIRST: usize = 64 << 10;

pub(crate) struct Input {
    src: Box<dyn Read + Send>,
    pub(crate) buf: Vec<u8>,
    pos: usize,
    end: usize,
    /// Absolute offset of `buf[0]`.
    base: u64,
    eof: bool,
}

impl Input {
    pub(crate) fn new(src: Box<dyn Read + Send>) -> Input {
        Input {
            src,
            buf: vec![0; FIRST],
            pos: 0,
            end: 0,
            base: 0,
            eof: false,
        }
    }

    /// Absolute offset of the next unread byte.
    #[inline]
    pub(crate) fn offset(&self) -> u64 {
        self.base + self.pos as u64
    }

    /// Bytes buffered and not yet consumed.
    #[inline]
    pub(crate) fn available(&self) -> usize {
        self.end - self.pos
    }

    /// Makes at least `n` bytes available. Returns false when the input ends first (then
    /// [`available`](Self::available) says how many bytes were left).
    #[inline]
    pub(crate) fn fill(&mut self, n: usize) -> io::Result<bool> {
        if self.end - self.pos >= n {
            return Ok(true);
        }
        self.fill_slow(n)
    }

    #[cold]
    fn fill_slow(&mut self, n: usize) -> io::Result<bool> {
        if self.eof {
            return Ok(false);
        }
        if self.pos + n > self.buf.len() {
            self.buf.copy_within(self.pos..self.end, 0);
            self.base += self.pos as u64;
            self.end -= self.pos;
            self.pos = 0;
        }
        while self.end - self.pos < n {
            if self.end == self.buf.len() {
                // Grow step by step as bytes arrive, so a corrupt length field in a short
                // input never allocates the whole claimed size.
                let want = (self.buf.len() * 2)
                    .max(INITIAL)
                    .min((self.pos + n).next_power_of_two().max(INITIAL));
                self.buf.resize(want, 0);
            }
            match self.src.read(&mut self.buf[self.end..]) {
                Ok(0) => {
                    self.eof = true;
                    return Ok(false);
                }
                Ok(k) => self.end += k,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok(true)
    }

    /// The next `n` bytes; the caller has made them available with [`fill`](Self::fill).
    #[inline]
    pub(crate) fn peek(&self, n: usize) -> &[u8] {
        &self.buf[self.pos..self.pos + n]
    }

    /// Every byte buffered and not yet consumed (valid until the next `fill`).
    #[inline]
    pub(crate) fn buffered(&self) -> &[u8] {
        &self.buf[self.pos..self.end]
    }

    /// Position in `buf` of the next unread byte (valid until the next `fill`).
    #[inline]
    pub(crate) fn pos(&self) -> usize {
        self.pos
    }

    #[inline]
    pub(crate) fn consume(&mut self, n: usize) {
        debug_assert!(n <= self.end - self.pos);
        self.pos += n;
    }
}

/// Reading an `Input` drains its buffer first, then reads its source directly (used to put
/// a gzip decoder behind the bytes already peeked at for format detection).
impl Read for Input {
    fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
        if self.pos < self.end {
            let n = out.len().min(self.end - self.pos);
            out[..n].copy_from_slice(&self.buf[self.pos..self.pos + n]);
            self.pos += n;
            return Ok(n);
        }
        self.src.read(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A reader that hands out at most 3 bytes per call, like a slow pipe.
    struct Trickle(Vec<u8>, usize);
    impl Read for Trickle {
        fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
            let n = out.len().min(3).min(self.0.len() - self.1);
            out[..n].copy_from_slice(&self.0[self.1..self.1 + n]);
            self.1 += n;
            Ok(n)
        }
    }

    #[test]
    fn fills_across_short_reads_and_tracks_offsets() {
        let data: Vec<u8> = (0..=255u8).collect();
        let mut inp = Input::new(Box::new(Trickle(data, 0)));
        assert!(inp.fill(10).unwrap());
        assert_eq!(inp.peek(2), &[0, 1]);
        inp.consume(10);
        assert_eq!(inp.offset(), 10);
        assert!(inp.fill(246).unwrap());
        assert_eq!(inp.peek(1), &[10]);
        inp.consume(246);
        assert!(!inp.fill(1).unwrap());
        assert_eq!(inp.available(), 0);
        assert_eq!(inp.offset(), 256);
    }

    #[test]
    fn grows_for_records_larger_than_the_buffer() {
        let data = vec![7u8; INITIAL * 2 + 5];
        let mut inp = Input::new(Box::new(io::Cursor::new(data)));
        assert!(inp.fill(3).unwrap());
        inp.consume(3);
        assert!(inp.fill(INITIAL * 2).unwrap());
        inp.consume(INITIAL * 2);
        assert!(!inp.fill(3).unwrap());
        assert_eq!(inp.available(), 2);
        assert_eq!(inp.offset(), INITIAL as u64 * 2 + 3);
    }
}
