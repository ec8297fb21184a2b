//! [`Input`]: a byte source with one large reusable buffer, so record framing reads
//! slices in place without a copy or an allocation per packet, and always knows the absolute
//! byte offset for error messages. A regular file can instead be mapped whole
//! ([`Input::mapped`]): its bytes are then the buffer, and no read copies them.

use std::fs::File;
use std::io::{self, Read};
use std::ops::Deref;

mod guard;

/// Buffer size once a capture proves larger than [`FIRST`]. Loopback frames can be 64 KiB
/// and more; 2 MiB amortises read calls.
const INITIAL: usize = 2 << 20;
/// Buffer size at first, so small inputs (tests, fuzzing, short captures) stay cheap.
const FIRST: usize = 64 << 10;
/// How much of a mapped file is read between two [`Input::recycle`]s.
const RECYCLE: usize = 4 << 20;
/// How much of a mapped file is mapped in at a time ahead of reading (once reading is within
/// half of it of the mapped end). Mapping in is work of the reading thread, and the engine
/// thread waits while it is done (a few batches are in flight, `tcpdoctor_analyze::pipeline`):
/// 1 MiB at a time rather than 4 MiB made `analyze --json` on the analyze benchmark's 1 M-packet
/// prefix 2 to 7% faster in wall time (median per-pair ratio of 4 interleaved runs of 40 to 60
/// pairs: 0.928, 0.947, 0.970, 0.984) and used 2 to 4% less CPU; 256 KiB and 2 MiB gained less.
const AHEAD: usize = 1 << 20;

/// Where an [`Input`]'s bytes are: a buffer that reads refill, or a whole mapped file.
pub(crate) enum Bytes {
    Owned(Vec<u8>),
    Mapped(Mapped),
}

/// A file mapped whole, guarded against shrinking while mapped ([`guard`]; the guard is
/// dropped first, before the map is unmapped).
pub(crate) struct Mapped {
    guard: guard::Guard,
    map: memmap2::Mmap,
    file: File,
}

impl Deref for Bytes {
    type Target = [u8];
    #[inline]
    fn deref(&self) -> &[u8] {
        match self {
            Bytes::Owned(v) => v,
            Bytes::Mapped(m) => &m.map,
        }
    }
}

pub(crate) struct Input {
    src: Box<dyn Read + Send>,
    pub(crate) buf: Bytes,
    pos: usize,
    end: usize,
    /// Absolute offset of `buf[0]`.
    base: u64,
    eof: bool,
    /// Mapped input: the pages before this offset were handed back ([`recycle`](Self::recycle)).
    dropped: usize,
    /// Mapped input: the pages before this offset were mapped in ahead of reading.
    ahead: usize,
}

impl Input {
    pub(crate) fn new(src: Box<dyn Read + Send>) -> Input {
        Input {
            src,
            buf: Bytes::Owned(vec![0; FIRST]),
            pos: 0,
            end: 0,
            base: 0,
            eof: false,
            dropped: 0,
            ahead: 0,
        }
    }

    /// An input over the whole of `file` mapped into memory, when it is a non-empty regular
    /// file and the map succeeds (otherwise `Err` gives the file back, to be read). Every byte
    /// is available at once and the end of the map is the end of the input: framing and
    /// decoding read the page cache directly, with no copy into a buffer.
    ///
    /// A file that shrinks while mapped is told by [`shrunk`](Self::shrunk): the bytes past
    /// its new end read as zeros instead of killing the process ([`guard`]).
    pub(crate) fn mapped(file: File) -> Result<Input, File> {
        let Ok(meta) = file.metadata() else {
            return Err(file);
        };
        if !meta.is_file() || meta.len() == 0 {
            return Err(file);
        }
        // SAFETY: the map is read only and read only through slices of it; a concurrent
        // truncation is caught by the guard (see above).
        let Ok(map) = (unsafe { memmap2::Mmap::map(&file) }) else {
            return Err(file);
        };
        let Some(guard) = guard::Guard::new(map.as_ptr(), map.len()) else {
            return Err(file);
        };
        let _ = map.advise(memmap2::Advice::Sequential);
        let end = map.len();
        Ok(Input {
            src: Box::new(io::empty()),
            buf: Bytes::Mapped(Mapped { guard, map, file }),
            pos: 0,
            end,
            base: 0,
            eof: true,
            dropped: 0,
            ahead: 0,
        })
    }

    pub(crate) fn is_mapped(&self) -> bool {
        matches!(self.buf, Bytes::Mapped(_))
    }

    /// Mapped input: the file's length now, if it shrank below the mapping while mapped (the
    /// bytes read from past its new end were zeros, not the file's). `None` for a read input.
    pub(crate) fn shrunk(&self) -> Option<u64> {
        self.shrunk_asking(false)
    }

    /// [`shrunk`](Self::shrunk), asking the file for its length wherever reading is (`ask`),
    /// not only near the end: for a record that looks wrong (zeros read from past a new end
    /// inside the last page raise no fault).
    pub(crate) fn shrunk_asking(&self, ask: bool) -> Option<u64> {
        let Bytes::Mapped(m) = &self.buf else {
            return None;
        };
        let faulted = m.guard.shrunk();
        // Shrinking inside the last page raises no fault (that page reads zeros past the
        // end): near the end, ask the file.
        if faulted.is_none() && !ask && self.pos + guard::page() < self.end {
            return None;
        }
        let len = m.file.metadata().map(|md| md.len()).ok();
        let mapped = m.map.len() as u64;
        match (faulted, len) {
            (_, Some(l)) if l < mapped => Some(l),
            (Some(at), _) => Some(at as u64),
            _ => None,
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
        let Bytes::Owned(buf) = &mut self.buf else {
            // A mapped file is buffered whole: nothing more to read.
            self.eof = true;
            return Ok(false);
        };
        if self.pos + n > buf.len() {
            buf.copy_within(self.pos..self.end, 0);
            self.base += self.pos as u64;
            self.end -= self.pos;
            self.pos = 0;
        }
        while self.end - self.pos < n {
            if self.end == buf.len() {
                // Grow step by step as bytes arrive, so a corrupt length field in a short
                // input never allocates the whole claimed size.
                let want = (buf.len() * 2)
                    .max(INITIAL)
                    .min((self.pos + n).next_power_of_two().max(INITIAL));
                buf.resize(want, 0);
            }
            match self.src.read(&mut buf[self.end..]) {
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

    /// Mapped input: unmaps the pages wholly read, every [`RECYCLE`] bytes, so that the
    /// process's resident memory holds a few MiB of the file, not all of it (the pages stay
    /// in the page cache). Call it where no slice of the input is held. A read input keeps
    /// its one buffer: nothing to do.
    pub(crate) fn recycle(&mut self) {
        let Bytes::Mapped(Mapped { map: m, .. }) = &self.buf else {
            return;
        };
        if self.pos + AHEAD / 2 >= self.ahead && self.ahead < self.end {
            let n = AHEAD.min(self.end - self.ahead);
            let _ = m.advise_range(memmap2::Advice::PopulateRead, self.ahead, n);
            self.ahead += n;
        }
        if self.pos < self.dropped + RECYCLE {
            return;
        }
        let upto = self.pos & !(guard::page() - 1);
        // SAFETY: the map is of a file and read only: a dropped page that is read again is
        // read again from the file, so no byte changes (MADV_DONTNEED only loses writes to
        // private pages, and there are none).
        let _ = unsafe {
            m.unchecked_advise_range(
                memmap2::UncheckedAdvice::DontNeed,
                self.dropped,
                upto - self.dropped,
            )
        };
        self.dropped = upto;
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
            // A mapped compressed file: its pages read so far need not stay resident.
            self.recycle();
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
