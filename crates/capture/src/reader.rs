//! [`Reader`]: streams TCP [`Segment`]s out of a pcap, pcapng or snoop capture (optionally
//! gzip-, xz- or zstd-compressed, from a file or stdin), counting every packet it skips.
//!
//! Memory stays bounded by the largest record: one reusable read buffer, no allocation per
//! packet; a regular file is mapped instead, a few MiB of it resident at a time
//! (`Input::mapped`). Record framing is hand-written (rather than pcap-parser) so that every error
//! carries the exact byte offset and so that framing and decoding share one buffer.
//!
//! Two ways to read: [`Reader::next_segment`] one segment at a time, or
//! [`Reader::read_batch`], which fills a caller's slice in place and is about half the
//! instructions per packet: classic pcap records and pcapng Enhanced Packet Blocks already
//! in the buffer are framed in a tight loop, and everything else (refills, other blocks,
//! errors) goes through the same per-record code `next_segment` uses.

use std::fs::File;
use std::io::{self, Read};
use std::path::Path;

use crate::decode::{self, Link};
use crate::error::{Error, ErrorKind};
use crate::input::Input;
use crate::segment::Segment;

mod pcapng;
mod snoop;
mod stats;

use pcapng::NG_SHB;
pub use stats::{Compression, Format, LinkTypeCount, Stats};

/// The largest record or block accepted. Real captures stay far below (the pcap snap length
/// maximum is 262144); the limit keeps a corrupt length field from allocating gigabytes.
pub const MAX_RECORD_BYTES: usize = 64 << 20;

/// How raw timestamps of a pcapng interface become nanoseconds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum TsScale {
    Mul(u64),
    Div(u64),
    /// 2^-n seconds per unit.
    Pow2(u32),
    /// Units too small to matter (10^-29 s and below).
    Zero,
}

impl TsScale {
    /// From the if_tsresol byte (pcapng section 4.2): MSB clear, 10^-v seconds; set,
    /// 2^-(v & 0x7f) seconds.
    fn from_tsresol(b: u8) -> TsScale {
        if b & 0x80 != 0 {
            return TsScale::Pow2(u32::from(b & 0x7f));
        }
        let k = u32::from(b);
        if k <= 9 {
            TsScale::Mul(10u64.pow(9 - k))
        } else if k - 9 <= 19 {
            TsScale::Div(10u64.pow(k - 9))
        } else {
            TsScale::Zero
        }
    }

    fn ns(self, units: u64, offset_s: i64) -> u64 {
        let ns: u128 = match self {
            TsScale::Mul(m) => u128::from(units) * u128::from(m),
            TsScale::Div(d) => u128::from(units / d),
            TsScale::Pow2(n) => (u128::from(units) * 1_000_000_000) >> n,
            TsScale::Zero => 0,
        };
        let total = ns as i128 + i128::from(offset_s) * 1_000_000_000;
        total.clamp(0, i128::from(u64::MAX)) as u64
    }
}

#[derive(Clone, Copy, Debug)]
struct Iface {
    link: Link,
    link_idx: usize,
    scale: TsScale,
    offset_s: i64,
    snaplen: u32,
}

enum State {
    Pcap {
        big: bool,
        nanos: bool,
        /// Kuznetsov's patched format: 8 more header bytes per record.
        modified: bool,
        iface: Iface,
    },
    PcapNg {
        big: bool,
        ifaces: Vec<Iface>,
        last_ts_ns: u64,
        /// Stats slot for packets naming an interface that was never described.
        unknown_idx: Option<usize>,
    },
    Snoop {
        iface: Iface,
    },
}

/// What [`Reader::step`] did with one packet record.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Step {
    Segment,
    Skipped,
    End,
}

/// One packet record located in the input buffer.
struct Rec {
    start: usize,
    caplen: usize,
    orig_len: u32,
    ts_ns: u64,
    link: Link,
    link_idx: usize,
}

impl crate::Source for Reader {
    fn read_batch(&mut self, out: &mut [Segment]) -> Result<usize, Error> {
        Reader::read_batch(self, out)
    }
    fn stats(&self) -> &Stats {
        Reader::stats(self)
    }
}

/// A streaming capture reader. See the module documentation.
pub struct Reader {
    name: String,
    input: Input,
    state: State,
    stats: Stats,
    done: bool,
    /// An error [`Reader::read_batch`] met after some segments, returned by the next call.
    pending: Option<Error>,
    /// Return a placeholder ([`Segment::is_skipped_packet`]) for every packet that gives no
    /// segment, so a merge can number all packets in time order (set by [`crate::merge`]).
    pub(crate) keep_skipped: bool,
    /// The latest packet time so far (ns), for [`BACK_IN_TIME`].
    latest_ns: u64,
}

/// How far a packet's time may lie before the latest packet's read before it. Packets
/// stamped on several CPUs, or on two interfaces of one capture, come a little out of order
/// (microseconds, at most milliseconds); a packet a second or more older than one before it
/// means the file is not one capture in time order: two captures joined one after the other
/// (measured: a public capture holding its own packets twice, the second copy 44.6 s back in
/// time, read as 655 reused ports, 94 resent SYNs and a CRITICAL port exhaustion), or the
/// clock set back while capturing. Reading stops there with an error naming the frame; the
/// packets before it are analysed.
pub const BACK_IN_TIME: std::time::Duration = std::time::Duration::from_secs(1);
const BACK_IN_TIME_NS: u64 = BACK_IN_TIME.as_nanos() as u64;

const PCAP_US: u32 = 0xa1b2_c3d4;
const PCAP_NS: u32 = 0xa1b2_3c4d;
const PCAP_MODIFIED: u32 = 0xa1b2_cd34;
const SNOOP_MAGIC: &[u8; 8] = b"snoop\0\0\0";

#[inline]
fn u32_at(d: &[u8], at: usize, big: bool) -> u32 {
    let b = [d[at], d[at + 1], d[at + 2], d[at + 3]];
    if big {
        u32::from_be_bytes(b)
    } else {
        u32::from_le_bytes(b)
    }
}

#[inline]
fn u16_at(d: &[u8], at: usize, big: bool) -> u16 {
    let b = [d[at], d[at + 1]];
    if big {
        u16::from_be_bytes(b)
    } else {
        u16::from_le_bytes(b)
    }
}

impl Reader {
    /// Opens a capture file; `-` reads stdin. Gzip, xz and zstd are recognised by their
    /// magic bytes. A regular file is mapped rather than read, and read as long as it was
    /// when opened; one that shrinks meanwhile ends the input with an error naming the offset.
    pub fn open(path: &Path) -> Result<Reader, Error> {
        if path.as_os_str() == "-" {
            return Reader::from_read(Box::new(io::stdin()), "stdin".to_string());
        }
        let name = path.display().to_string();
        let file = File::open(path).map_err(|e| Error::new(&name, 0, ErrorKind::Open(e)))?;
        match Input::mapped(file) {
            Ok(input) => Reader::from_input(input, name),
            Err(file) => Reader::from_read(Box::new(file), name),
        }
    }

    /// Reads a capture from any byte stream; `name` is used in error messages.
    pub fn from_read(r: Box<dyn Read + Send>, name: String) -> Result<Reader, Error> {
        Reader::from_input(Input::new(r), name)
    }

    fn from_input(mut raw: Input, name: String) -> Result<Reader, Error> {
        let io_err = |e: io::Error| Error::new(&name, 0, ErrorKind::Io(e));
        raw.fill(6).map_err(io_err)?;
        let compression = Compression::detect(raw.buffered());
        let mut input = match compression {
            None => raw,
            Some(Compression::Gzip) => Input::new(Box::new(flate2::read::MultiGzDecoder::new(raw))),
            // Concatenated .xz streams (`xz -c a >> b`) decode as one, like `xz -d`.
            Some(Compression::Xz) => {
                Input::new(Box::new(liblzma::read::XzDecoder::new_multi_decoder(raw)))
            }
            Some(Compression::Zstd) => Input::new(Box::new(
                zstd::stream::read::Decoder::new(raw)
                    .map_err(|e| Error::new(&name, 0, ErrorKind::Io(e)))?,
            )),
        };
        let name = if compression.is_some() {
            format!("{name} (decompressed)")
        } else {
            name
        };
        let io_err = |e: io::Error| Error::new(&name, 0, ErrorKind::Io(e));
        input.fill(4).map_err(io_err)?;
        let avail = input.available();
        if avail == 0 {
            return Err(Error::new(&name, 0, ErrorKind::Empty));
        }
        if avail < 4 {
            return Err(Error::new(
                &name,
                0,
                ErrorKind::Truncated {
                    what: "file header",
                    needs: 4,
                    left: avail as u64,
                },
            ));
        }
        let mut magic = [0u8; 4];
        magic.copy_from_slice(input.peek(4));
        let le = u32::from_le_bytes(magic);
        let be = u32::from_be_bytes(magic);
        let mut reader = Reader {
            name,
            input,
            state: State::Snoop {
                iface: Iface {
                    link: Link::Unsupported,
                    link_idx: 0,
                    scale: TsScale::Mul(1000),
                    offset_s: 0,
                    snaplen: 0,
                },
            },
            stats: Stats::new(Format::PcapNg, compression),
            done: false,
            pending: None,
            keep_skipped: false,
            latest_ns: 0,
        };
        if [PCAP_US, PCAP_NS, PCAP_MODIFIED].contains(&le)
            || [PCAP_US, PCAP_NS, PCAP_MODIFIED].contains(&be)
        {
            reader.open_pcap(le, be)?;
        } else if le == NG_SHB {
            reader.stats.format = Format::PcapNg;
            reader.state = State::PcapNg {
                big: false,
                ifaces: Vec::new(),
                last_ts_ns: 0,
                unknown_idx: None,
            };
        } else if &magic == b"snoo" {
            reader.open_snoop()?;
        } else {
            return Err(Error::new(
                &reader.name,
                0,
                ErrorKind::UnknownFormat { magic },
            ));
        }
        Ok(reader)
    }

    fn err(&self, offset: u64, kind: ErrorKind) -> Error {
        Error::new(&self.name, offset, kind)
    }

    fn io(&self, e: io::Error) -> Error {
        self.err(self.input.offset(), ErrorKind::Io(e))
    }

    /// Makes `n` bytes available or reports what is missing as `what`.
    fn need(&mut self, n: usize, what: &'static str) -> Result<(), Error> {
        match self.input.fill(n) {
            Ok(true) => Ok(()),
            Ok(false) => Err(self.err(
                self.input.offset(),
                ErrorKind::Truncated {
                    what,
                    needs: n as u64,
                    left: self.input.available() as u64,
                },
            )),
            Err(e) => Err(self.io(e)),
        }
    }

    fn open_pcap(&mut self, le: u32, be: u32) -> Result<(), Error> {
        self.need(24, "pcap file header")?;
        let big = ![PCAP_US, PCAP_NS, PCAP_MODIFIED].contains(&le);
        let magic = if big { be } else { le };
        let h = self.input.peek(24);
        let major = u16_at(h, 4, big);
        let snaplen = u32_at(h, 16, big);
        // The link-type field carries FCS information in its upper bits (pcap spec 8.2).
        let lt = u32_at(h, 20, big) & 0x03ff_ffff;
        if major != 2 {
            return Err(self.err(
                4,
                ErrorKind::Unsupported {
                    what: "pcap version",
                    detail: format!("major version {major}, expected 2"),
                },
            ));
        }
        self.input.consume(24);
        let nanos = magic == PCAP_NS;
        self.stats.format = Format::Pcap {
            nanos,
            big_endian: big,
        };
        self.stats.interfaces = 1;
        let link_idx = self.stats.link_index(lt);
        self.state = State::Pcap {
            big,
            nanos,
            modified: magic == PCAP_MODIFIED,
            iface: Iface {
                link: Link::from_linktype(lt),
                link_idx,
                scale: TsScale::Mul(if nanos { 1 } else { 1000 }),
                offset_s: 0,
                snaplen,
            },
        };
        Ok(())
    }

    /// The container format.
    pub fn format(&self) -> Format {
        self.stats.format
    }

    /// Counts so far.
    pub fn stats(&self) -> &Stats {
        &self.stats
    }

    /// Bytes consumed so far from the (decompressed) input, for progress reports.
    pub fn bytes_read(&self) -> u64 {
        self.input.offset()
    }

    /// The input's name as used in errors.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The next TCP segment, `Ok(None)` at the end of the capture. Non-TCP and undecodable
    /// packets are counted in [`stats`](Self::stats) and skipped. After an error (truncated
    /// or corrupt input) every later call returns `Ok(None)`; segments returned before the
    /// error remain valid.
    pub fn next_segment(&mut self) -> Result<Option<Segment>, Error> {
        if let Some(e) = self.pending.take() {
            return Err(e);
        }
        self.input.recycle();
        let mut seg = Segment::EMPTY;
        loop {
            match self.step(&mut seg)? {
                Step::Segment => return Ok(Some(seg)),
                Step::Skipped => {}
                Step::End => return Ok(None),
            }
        }
    }

    /// Fills `out` from the start with the next TCP segments and returns how many it wrote:
    /// the same segments, in the same order and with the same counts, as that many calls of
    /// [`next_segment`](Self::next_segment), several times cheaper per packet (classic pcap
    /// records are framed straight from the read buffer, segments decoded in place, counts
    /// kept per call). Slots past the returned count hold unspecified values.
    ///
    /// `Ok(0)` (for a non-empty `out`) is the end of the capture. An error met after some
    /// segments is returned by the next call, so those segments come first; after an error
    /// every later call returns `Ok(0)`. [`Stats::bytes_read`] is brought up to date on return.
    pub fn read_batch(&mut self, out: &mut [Segment]) -> Result<usize, Error> {
        if let Some(e) = self.pending.take() {
            return Err(e);
        }
        // A mapped file that shrinks while it is read gives zeros past its new end: the
        // counts as they were before this batch are kept to go back to.
        let before = (self.input.is_mapped() && !self.done).then(|| self.stats.clone());
        let at = self.input.offset();
        let res = self.fill_batch(out);
        // Zeros read from past the new end inside the last page (no fault) look like a
        // packet of time 0, out of order: ask the file then.
        let odd = matches!(&res.1, Some(e) if matches!(e.kind, ErrorKind::OutOfOrder { .. }));
        if let (Some(stats), Some(len)) = (before, self.input.shrunk_asking(odd)) {
            self.stats = stats;
            return Err(self.shrank(at, len));
        }
        self.input.recycle();
        self.stats.bytes_read = self.input.offset();
        match res {
            (0, Some(e)) => Err(e),
            (n, e) => {
                self.pending = e;
                Ok(n)
            }
        }
    }

    /// Segments written to `out`, and the error that stopped reading early.
    fn fill_batch(&mut self, out: &mut [Segment]) -> (usize, Option<Error>) {
        let mut n = 0;
        while n < out.len() && !self.done {
            match &self.state {
                _ if self.keep_skipped => {}
                &State::Pcap {
                    big,
                    nanos,
                    modified: false,
                    iface,
                } => {
                    n = match (big, iface.link == Link::Ethernet) {
                        (false, true) => self.pcap_run::<false, true>(nanos, iface, out, n),
                        (false, false) => self.pcap_run::<false, false>(nanos, iface, out, n),
                        (true, true) => self.pcap_run::<true, true>(nanos, iface, out, n),
                        (true, false) => self.pcap_run::<true, false>(nanos, iface, out, n),
                    };
                }
                State::PcapNg { big, ifaces, .. } => {
                    let eth = ifaces.iter().all(|i| i.link == Link::Ethernet);
                    n = match (*big, eth) {
                        (false, true) => self.pcapng_run::<false, true>(out, n),
                        (false, false) => self.pcapng_run::<false, false>(out, n),
                        (true, true) => self.pcapng_run::<true, true>(out, n),
                        (true, false) => self.pcapng_run::<true, false>(out, n),
                    };
                }
                _ => {}
            }
            if n == out.len() {
                break;
            }
            // One record the general way: it refills the buffer and reports the end of the
            // input and every error with its offset.
            match self.step(&mut out[n]) {
                Ok(Step::Segment) => n += 1,
                Ok(Step::Skipped) => {}
                Ok(Step::End) => break,
                Err(e) => return (n, Some(e)),
            }
        }
        (n, None)
    }

    /// Frames and decodes the whole classic pcap records already in the read buffer into
    /// `out[n..]` until it is full; returns the new count of segments in `out`. Stops
    /// without consuming at anything unusual (a record not wholly buffered, an impossible
    /// length): the general path then deals with it. `BIG`: big-endian file; `ETH`: the link
    /// is Ethernet (so the link dispatch folds away).
    #[inline(always)]
    fn pcap_run<const BIG: bool, const ETH: bool>(
        &mut self,
        nanos: bool,
        iface: Iface,
        out: &mut [Segment],
        mut n: usize,
    ) -> usize {
        let link = if ETH { Link::Ethernet } else { iface.link };
        let unit_ns = if nanos { 1 } else { 1000 };
        let buf = self.input.buffered();
        let st = &mut self.stats;
        let before = st.packets;
        let mut packets = before;
        let mut cut = 0u64;
        let mut p = 0usize;
        let n0 = n;
        while let Some(seg) = out.get_mut(n) {
            let Some(h) = buf.get(p..p + 16) else { break };
            let caplen = u32_at(h, 8, BIG) as usize;
            if caplen > MAX_RECORD_BYTES {
                break;
            }
            let Some(frame) = buf.get(p + 16..p + 16 + caplen) else {
                break;
            };
            let sec = u64::from(u32_at(h, 0, BIG));
            let frac = u64::from(u32_at(h, 4, BIG));
            let ts_ns = sec * 1_000_000_000 + frac * unit_ns;
            if ts_ns.saturating_add(BACK_IN_TIME_NS) < self.latest_ns {
                // Left to the general path, which reports it.
                break;
            }
            self.latest_ns = self.latest_ns.max(ts_ns);
            let orig_len = u32_at(h, 12, BIG);
            p += 16 + caplen;
            packets += 1;
            cut += u64::from((caplen as u64) < u64::from(orig_len));
            // A successful decode sets every field but these two.
            match decode::decode(link, frame, orig_len.max(caplen as u32), seg) {
                Ok(()) => {
                    seg.frame = packets;
                    seg.ts_ns = ts_ns;
                    n += 1;
                }
                Err(skip) => st.skipped(skip, packets),
            }
        }
        st.tcp_segments += (n - n0) as u64;
        st.packets = packets;
        st.cut_by_snaplen += cut;
        st.link_types[iface.link_idx].packets += packets - before;
        self.input.consume(p);
        n
    }

    /// Reads one packet record the general way (any format) and decodes it into `seg`.
    fn step(&mut self, seg: &mut Segment) -> Result<Step, Error> {
        if self.done {
            return Ok(Step::End);
        }
        let at = self.input.offset();
        let rec = self.next_record();
        if let Some(len) = self.input.shrunk() {
            return Err(self.shrank(at, len));
        }
        let rec = match rec {
            Ok(Some(r)) => r,
            Ok(None) => {
                self.done = true;
                self.stats.bytes_read = self.input.offset();
                return Ok(Step::End);
            }
            Err(e) => {
                self.done = true;
                self.stats.bytes_read = self.input.offset();
                return Err(e);
            }
        };
        if rec.ts_ns.saturating_add(BACK_IN_TIME_NS) < self.latest_ns {
            self.done = true;
            self.stats.bytes_read = self.input.offset();
            let kind = ErrorKind::OutOfOrder {
                frame: self.stats.packets + 1,
                back_ns: self.latest_ns - rec.ts_ns,
            };
            return Err(self.err(at, kind));
        }
        self.latest_ns = self.latest_ns.max(rec.ts_ns);
        let st = &mut self.stats;
        st.packets += 1;
        st.link_types[rec.link_idx].packets += 1;
        if (rec.caplen as u64) < u64::from(rec.orig_len) {
            st.cut_by_snaplen += 1;
        }
        let frame = &self.input.buf[rec.start..rec.start + rec.caplen];
        match decode::decode(rec.link, frame, rec.orig_len.max(rec.caplen as u32), seg) {
            Ok(()) => {
                st.tcp_segments += 1;
                seg.frame = st.packets;
                seg.ts_ns = rec.ts_ns;
                Ok(Step::Segment)
            }
            Err(skip) => {
                st.skipped(skip, st.packets);
                if self.keep_skipped {
                    *seg = Segment::skipped_packet(st.packets, rec.ts_ns);
                    return Ok(Step::Segment);
                }
                Ok(Step::Skipped)
            }
        }
    }

    /// Ends the input at `at`, where the bytes read stopped being the file's: the mapped
    /// file shrank to `len` bytes while it was read.
    #[cold]
    fn shrank(&mut self, at: u64, len: u64) -> Error {
        self.done = true;
        self.pending = None;
        self.stats.bytes_read = at;
        let e = io::Error::new(
            io::ErrorKind::UnexpectedEof,
            format!("the file shrank to {len} bytes while it was read"),
        );
        self.err(at, ErrorKind::Io(e))
    }

    /// Frames the next packet record; `None` at a clean end of input.
    #[inline]
    fn next_record(&mut self) -> Result<Option<Rec>, Error> {
        match self.state {
            State::Pcap {
                big,
                nanos,
                modified,
                iface,
            } => self.pcap_record(big, nanos, modified, iface),
            State::Snoop { iface } => self.snoop_record(iface),
            State::PcapNg { .. } => self.pcapng_record(),
        }
    }

    /// Returns false at a clean end of input (no byte left), an error when the input ends
    /// inside `n` bytes.
    #[inline]
    fn need_or_end(&mut self, n: usize, what: &'static str) -> Result<bool, Error> {
        match self.input.fill(n) {
            Ok(true) => Ok(true),
            Ok(false) if self.input.available() == 0 => Ok(false),
            Ok(false) => Err(self.err(
                self.input.offset(),
                ErrorKind::Truncated {
                    what,
                    needs: n as u64,
                    left: self.input.available() as u64,
                },
            )),
            Err(e) => Err(self.io(e)),
        }
    }

    #[inline]
    fn pcap_record(
        &mut self,
        big: bool,
        nanos: bool,
        modified: bool,
        iface: Iface,
    ) -> Result<Option<Rec>, Error> {
        let hlen = if modified { 24 } else { 16 };
        if !self.need_or_end(hlen, "packet record header")? {
            return Ok(None);
        }
        let h = self.input.peek(hlen);
        let sec = u64::from(u32_at(h, 0, big));
        let frac = u64::from(u32_at(h, 4, big));
        let caplen = u32_at(h, 8, big) as usize;
        let orig_len = u32_at(h, 12, big);
        if caplen > MAX_RECORD_BYTES {
            return Err(self.err(
                self.input.offset() + 8,
                ErrorKind::Corrupt {
                    what: "packet record",
                    detail: format!("captured length {caplen} exceeds {MAX_RECORD_BYTES} bytes"),
                },
            ));
        }
        self.need(hlen + caplen, "packet record")?;
        let start = self.input.pos() + hlen;
        self.input.consume(hlen + caplen);
        let ts_ns = sec * 1_000_000_000 + if nanos { frac } else { frac * 1000 };
        Ok(Some(Rec {
            start,
            caplen,
            orig_len,
            ts_ns,
            link: iface.link,
            link_idx: iface.link_idx,
        }))
    }
}

impl Iterator for Reader {
    type Item = Result<Segment, Error>;

    fn next(&mut self) -> Option<Self::Item> {
        self.next_segment().transpose()
    }
}
