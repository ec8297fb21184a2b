//! [`Reader`]: streams TCP [`Segment`]s out of a pcap, pcapng or snoop capture (optionally
//! gzip-, xz- or zstd-compressed, from a file or stdin), counting every packet it skips.
//!
//! Memory stays bounded by the largest record: one reusable read buffer, no allocation per
//! packet. Record framing is hand-written (rather than pcap-parser) so that every error
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

use serde::Serialize;

use crate::decode::{self, linktype, Link, Skip};
use crate::error::{Error, ErrorKind};
use crate::input::Input;
use crate::segment::Segment;

/// The largest record or block accepted. Real captures stay far below (the pcap snap length
/// maximum is 262144); the limit keeps a corrupt length field from allocating gigabytes.
pub const MAX_RECORD_BYTES: usize = 64 << 20;

/// The container format of a capture.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Format {
    /// Classic libpcap: microsecond or nanosecond timestamps, either byte order.
    Pcap { nanos: bool, big_endian: bool },
    /// pcapng; the byte order may change per section.
    PcapNg,
    /// Solaris/illumos snoop (RFC 1761), big-endian, microsecond timestamps.
    Snoop,
}

/// Packets per link-layer header type.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct LinkTypeCount {
    /// LINKTYPE_* value (snoop datalink types are mapped onto these).
    pub link_type: u32,
    pub name: &'static str,
    pub packets: u64,
}

/// What a [`Reader`] has seen so far. `packets = tcp_segments + non_tcp + undecodable`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Stats {
    pub format: Format,
    /// Packet records read (frames, as Wireshark numbers them).
    pub packets: u64,
    /// Packets decoded to a TCP segment.
    pub tcp_segments: u64,
    /// Packets that are not TCP: other link or IP protocols, and IP fragments after the
    /// first (they carry no TCP header).
    pub non_tcp: u64,
    /// Of `non_tcp`: IP fragments with a non-zero offset.
    pub ip_later_fragments: u64,
    /// Packets that could not be decoded down to the TCP header.
    pub undecodable: u64,
    /// Of `undecodable`: headers cut off by the snap length before the end of the TCP header.
    pub undecodable_truncated: u64,
    /// Of `undecodable`: a link type (or pcapng interface) this crate does not decode.
    pub undecodable_link_type: u64,
    /// Frame number of the first undecodable packet, to look at it in Wireshark.
    pub first_undecodable_frame: Option<u64>,
    /// Packets whose captured length is shorter than their length on the wire (snap length).
    pub cut_by_snaplen: u64,
    /// pcapng interfaces described so far (1 for pcap and snoop).
    pub interfaces: u32,
    /// Drops the capture tool recorded (snoop cumulative drops; pcapng `isb_ifdrop`).
    pub capture_drops: u64,
    pub link_types: Vec<LinkTypeCount>,
    /// Bytes consumed from the (decompressed) input.
    pub bytes_read: u64,
    /// The input is gzip-compressed (kept beside `compression` for older readers of the JSON).
    pub gzip: bool,
    /// The compression the input was decompressed from (absent when not compressed).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub compression: Option<Compression>,
    /// Each input of a [`crate::Merge`] (absent for a single capture).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub inputs: Vec<crate::merge::InputStats>,
}

/// A compression a capture can be wrapped in, recognised by its magic bytes (never by the
/// file name, so `capture.bin` and stdin work alike).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Compression {
    /// gzip (RFC 1952): `1f 8b`; concatenated members are read as one stream.
    Gzip,
    /// xz (the .xz file format, section 2.1.1.1): `fd 37 7a 58 5a 00`.
    Xz,
    /// Zstandard (RFC 8878 section 3.1.1): frame magic `28 b5 2f fd`.
    Zstd,
}

impl Compression {
    /// The compression whose magic bytes start `head`, if any.
    pub fn detect(head: &[u8]) -> Option<Compression> {
        if head.starts_with(&[0x1f, 0x8b]) {
            Some(Compression::Gzip)
        } else if head.starts_with(&[0xfd, b'7', b'z', b'X', b'Z', 0x00]) {
            Some(Compression::Xz)
        } else if head.starts_with(&[0x28, 0xb5, 0x2f, 0xfd]) {
            Some(Compression::Zstd)
        } else {
            None
        }
    }
}

impl Stats {
    pub(crate) fn new(format: Format, compression: Option<Compression>) -> Stats {
        Stats {
            format,
            packets: 0,
            tcp_segments: 0,
            non_tcp: 0,
            ip_later_fragments: 0,
            undecodable: 0,
            undecodable_truncated: 0,
            undecodable_link_type: 0,
            first_undecodable_frame: None,
            cut_by_snaplen: 0,
            interfaces: 0,
            capture_drops: 0,
            link_types: Vec::new(),
            bytes_read: 0,
            gzip: compression == Some(Compression::Gzip),
            compression,
            inputs: Vec::new(),
        }
    }

    /// Counts a packet (already counted in `packets`) that gave no segment; `frame` is its
    /// frame number.
    fn skipped(&mut self, skip: Skip, frame: u64) {
        match skip {
            Skip::NonTcp => self.non_tcp += 1,
            Skip::LaterFragment => {
                self.non_tcp += 1;
                self.ip_later_fragments += 1;
            }
            Skip::Truncated | Skip::Malformed | Skip::UnsupportedLink => {
                self.undecodable += 1;
                self.first_undecodable_frame.get_or_insert(frame);
                match skip {
                    Skip::Truncated => self.undecodable_truncated += 1,
                    Skip::UnsupportedLink => self.undecodable_link_type += 1,
                    _ => {}
                }
            }
        }
    }

    /// Index of `lt` in `link_types`, adding it when new.
    fn link_index(&mut self, lt: u32) -> usize {
        if let Some(i) = self.link_types.iter().position(|c| c.link_type == lt) {
            return i;
        }
        self.link_types.push(LinkTypeCount {
            link_type: lt,
            name: linktype::name(lt),
            packets: 0,
        });
        self.link_types.len() - 1
    }
}

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
}

const PCAP_US: u32 = 0xa1b2_c3d4;
const PCAP_NS: u32 = 0xa1b2_3c4d;
const PCAP_MODIFIED: u32 = 0xa1b2_cd34;
const NG_SHB: u32 = 0x0a0d_0d0a;
const NG_BOM: u32 = 0x1a2b_3c4d;
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
    /// magic bytes.
    pub fn open(path: &Path) -> Result<Reader, Error> {
        if path.as_os_str() == "-" {
            return Reader::from_read(Box::new(io::stdin()), "stdin".to_string());
        }
        let name = path.display().to_string();
        let file = File::open(path).map_err(|e| Error::new(&name, 0, ErrorKind::Open(e)))?;
        Reader::from_read(Box::new(file), name)
    }

    /// Reads a capture from any byte stream; `name` is used in error messages.
    pub fn from_read(r: Box<dyn Read + Send>, name: String) -> Result<Reader, Error> {
        let mut raw = Input::new(r);
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

    fn open_snoop(&mut self) -> Result<(), Error> {
        self.need(16, "snoop file header")?;
        let h = self.input.peek(16);
        if &h[..8] != SNOOP_MAGIC {
            let mut magic = [0u8; 4];
            magic.copy_from_slice(&h[..4]);
            return Err(self.err(0, ErrorKind::UnknownFormat { magic }));
        }
        let version = u32_at(h, 8, true);
        let datalink = u32_at(h, 12, true);
        if !(2..=5).contains(&version) {
            return Err(self.err(
                8,
                ErrorKind::Unsupported {
                    what: "snoop version",
                    detail: format!("version {version}, expected 2"),
                },
            ));
        }
        self.input.consume(16);
        // RFC 1761 datalink types; 0x80000000 and up are Solaris/illumos private types
        // (sys/dlpi.h): DL_IPV4 and DL_IPV6 tunnels carry bare IP, DL_IPNET an ipnet header.
        let lt = match datalink {
            0 | 4 => linktype::ETHERNET,
            0x8000_0001 | 0x8000_0002 => linktype::RAW,
            0x8000_0005 => linktype::IPNET,
            other => other | 0x4000_0000, // not a LINKTYPE: counted as unsupported
        };
        self.stats.format = Format::Snoop;
        self.stats.interfaces = 1;
        let link_idx = self.stats.link_index(lt);
        self.state = State::Snoop {
            iface: Iface {
                link: Link::from_linktype(lt),
                link_idx,
                scale: TsScale::Mul(1000),
                offset_s: 0,
                snaplen: 0,
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
        let res = self.fill_batch(out);
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
            let orig_len = u32_at(h, 12, BIG);
            p += 16 + caplen;
            packets += 1;
            cut += u64::from((caplen as u64) < u64::from(orig_len));
            // A successful decode sets every field but these two.
            match decode::decode(link, frame, orig_len.max(caplen as u32), seg) {
                Ok(()) => {
                    seg.frame = packets;
                    seg.ts_ns = sec * 1_000_000_000 + frac * unit_ns;
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

    /// The pcapng counterpart of [`pcap_run`](Self::pcap_run): decodes the Enhanced Packet
    /// Blocks of described interfaces already in the read buffer into `out[n..]`; any other
    /// block, or anything unusual, is left to the general path. `BIG`: the section's byte
    /// order; `ETH`: every interface described so far is Ethernet.
    #[inline(always)]
    fn pcapng_run<const BIG: bool, const ETH: bool>(
        &mut self,
        out: &mut [Segment],
        mut n: usize,
    ) -> usize {
        let State::PcapNg {
            ifaces, last_ts_ns, ..
        } = &mut self.state
        else {
            return n;
        };
        let buf = self.input.buffered();
        let st = &mut self.stats;
        let before = st.packets;
        let mut packets = before;
        let mut cut = 0u64;
        let mut p = 0usize;
        let n0 = n;
        while let Some(seg) = out.get_mut(n) {
            // Block type, total length, interface id, timestamp (high, low), captured and
            // original lengths (pcapng 4.3).
            let Some(h) = buf.get(p..p + 28) else { break };
            let blen = u32_at(h, 4, BIG) as usize;
            if u32_at(h, 0, BIG) != 6
                || blen < 32
                || !blen.is_multiple_of(4)
                || blen > MAX_RECORD_BYTES
            {
                break;
            }
            let Some(b) = buf.get(p..p + blen) else { break };
            let caplen = u32_at(h, 20, BIG) as usize;
            if u32_at(b, blen - 4, BIG) as usize != blen || caplen > blen - 32 {
                break;
            }
            let Some(iface) = ifaces.get(u32_at(h, 8, BIG) as usize) else {
                break;
            };
            let units = (u64::from(u32_at(h, 12, BIG)) << 32) | u64::from(u32_at(h, 16, BIG));
            let orig_len = u32_at(h, 24, BIG);
            let frame = &b[28..28 + caplen];
            p += blen;
            packets += 1;
            cut += u64::from((caplen as u64) < u64::from(orig_len));
            st.link_types[iface.link_idx].packets += 1;
            let ts_ns = match iface.scale {
                TsScale::Mul(m) if iface.offset_s == 0 => match units.checked_mul(m) {
                    Some(ns) => ns,
                    None => iface.scale.ns(units, 0),
                },
                scale => scale.ns(units, iface.offset_s),
            };
            *last_ts_ns = ts_ns;
            let link = if ETH { Link::Ethernet } else { iface.link };
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
        self.input.consume(p);
        n
    }

    /// Reads one packet record the general way (any format) and decodes it into `seg`.
    fn step(&mut self, seg: &mut Segment) -> Result<Step, Error> {
        if self.done {
            return Ok(Step::End);
        }
        let rec = match self.next_record() {
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

    fn snoop_record(&mut self, iface: Iface) -> Result<Option<Rec>, Error> {
        if !self.need_or_end(24, "snoop record header")? {
            return Ok(None);
        }
        let h = self.input.peek(24);
        let orig_len = u32_at(h, 0, true);
        let caplen = u32_at(h, 4, true) as usize;
        let rec_len = u32_at(h, 8, true) as usize;
        let drops = u32_at(h, 12, true);
        let sec = u64::from(u32_at(h, 16, true));
        let usec = u64::from(u32_at(h, 20, true));
        if rec_len > MAX_RECORD_BYTES || rec_len < 24 + caplen {
            return Err(self.err(
                self.input.offset() + 8,
                ErrorKind::Corrupt {
                    what: "snoop record",
                    detail: format!(
                        "record length {rec_len} does not hold 24 + {caplen} captured bytes"
                    ),
                },
            ));
        }
        self.need(rec_len, "snoop record")?;
        let start = self.input.pos() + 24;
        self.input.consume(rec_len);
        // Cumulative drops since the capture started (RFC 1761 section 3.2).
        self.stats.capture_drops = u64::from(drops);
        Ok(Some(Rec {
            start,
            caplen,
            orig_len,
            ts_ns: sec * 1_000_000_000 + usec * 1000,
            link: iface.link,
            link_idx: iface.link_idx,
        }))
    }

    fn pcapng_record(&mut self) -> Result<Option<Rec>, Error> {
        loop {
            if !self.need_or_end(12, "pcapng block header")? {
                return Ok(None);
            }
            let off = self.input.offset();
            let h = self.input.peek(12);
            let btype_le = u32_at(h, 0, false);
            let State::PcapNg { big, .. } = self.state else {
                unreachable!("pcapng_record called on another format")
            };
            let big = if btype_le == NG_SHB {
                // The byte-order magic decides the byte order of this whole section.
                match u32_at(h, 8, false) {
                    NG_BOM => false,
                    0x4d3c_2b1a => true,
                    other => {
                        return Err(self.err(
                            off + 8,
                            ErrorKind::Corrupt {
                                what: "pcapng section header",
                                detail: format!("byte-order magic {other:#010x}"),
                            },
                        ))
                    }
                }
            } else {
                big
            };
            let btype = u32_at(h, 0, big);
            let blen = u32_at(h, 4, big) as usize;
            if blen < 12 || !blen.is_multiple_of(4) || blen > MAX_RECORD_BYTES {
                return Err(self.err(
                    off + 4,
                    ErrorKind::Corrupt {
                        what: "pcapng block",
                        detail: format!("block length {blen} (type {btype:#x})"),
                    },
                ));
            }
            self.need(blen, "pcapng block")?;
            let start = self.input.pos();
            let b = &self.input.buf[start..start + blen];
            if u32_at(b, blen - 4, big) as usize != blen {
                return Err(self.err(
                    off + blen as u64 - 4,
                    ErrorKind::Corrupt {
                        what: "pcapng block",
                        detail: format!(
                            "trailing length {} differs from leading length {blen}",
                            u32_at(b, blen - 4, big)
                        ),
                    },
                ));
            }
            let body = start + 8..start + blen - 4;
            self.input.consume(blen);
            let State::PcapNg {
                big: sec_big,
                ifaces,
                last_ts_ns,
                unknown_idx,
            } = &mut self.state
            else {
                unreachable!()
            };
            let b = &self.input.buf[body.clone()];
            let corrupt = |what: &'static str, detail: String| {
                Error::new(&self.name, off, ErrorKind::Corrupt { what, detail })
            };
            match btype {
                NG_SHB => {
                    if b.len() < 16 {
                        return Err(corrupt(
                            "pcapng section header",
                            format!("body of {} bytes", b.len()),
                        ));
                    }
                    let major = u16_at(b, 4, big);
                    if major != 1 {
                        return Err(Error::new(
                            &self.name,
                            off + 12,
                            ErrorKind::Unsupported {
                                what: "pcapng version",
                                detail: format!("major version {major}, expected 1"),
                            },
                        ));
                    }
                    *sec_big = big;
                    ifaces.clear();
                }
                // Interface Description Block (pcapng 4.2).
                1 => {
                    if b.len() < 8 {
                        return Err(corrupt(
                            "pcapng interface description",
                            format!("body of {} bytes", b.len()),
                        ));
                    }
                    let lt = u32::from(u16_at(b, 0, big));
                    let snaplen = u32_at(b, 4, big);
                    let mut scale = TsScale::Mul(1000); // default if_tsresol 6: microseconds
                    let mut offset_s = 0i64;
                    let mut o = &b[8..];
                    while o.len() >= 4 {
                        let code = u16_at(o, 0, big);
                        let len = usize::from(u16_at(o, 2, big));
                        let padded = (len + 3) & !3;
                        if code == 0 || o.len() < 4 + padded {
                            break;
                        }
                        let v = &o[4..4 + len];
                        match (code, len) {
                            (9, 1..) => scale = TsScale::from_tsresol(v[0]),
                            (14, 8) => {
                                let raw = [v[0], v[1], v[2], v[3], v[4], v[5], v[6], v[7]];
                                offset_s = if big {
                                    i64::from_be_bytes(raw)
                                } else {
                                    i64::from_le_bytes(raw)
                                };
                            }
                            _ => {}
                        }
                        o = &o[4 + padded..];
                    }
                    let link_idx = self.stats.link_index(lt);
                    self.stats.interfaces += 1;
                    ifaces.push(Iface {
                        link: Link::from_linktype(lt),
                        link_idx,
                        scale,
                        offset_s,
                        snaplen,
                    });
                }
                // Enhanced Packet Block (4.3) and the obsolete Packet Block (appendix A).
                6 | 2 => {
                    if b.len() < 20 {
                        return Err(corrupt(
                            "pcapng packet block",
                            format!("body of {} bytes", b.len()),
                        ));
                    }
                    let id = if btype == 6 {
                        u32_at(b, 0, big) as usize
                    } else {
                        usize::from(u16_at(b, 0, big))
                    };
                    let units = (u64::from(u32_at(b, 4, big)) << 32) | u64::from(u32_at(b, 8, big));
                    let caplen = u32_at(b, 12, big) as usize;
                    let orig_len = u32_at(b, 16, big);
                    if caplen > b.len() - 20 {
                        return Err(corrupt(
                            "pcapng packet block",
                            format!(
                                "captured length {caplen} exceeds the block's {} data bytes",
                                b.len() - 20
                            ),
                        ));
                    }
                    let (link, link_idx, ts_ns) = match ifaces.get(id) {
                        Some(i) => (i.link, i.link_idx, i.scale.ns(units, i.offset_s)),
                        None => {
                            let idx =
                                *unknown_idx.get_or_insert_with(|| self.stats.link_index(u32::MAX));
                            (Link::Unsupported, idx, *last_ts_ns)
                        }
                    };
                    *last_ts_ns = ts_ns;
                    return Ok(Some(Rec {
                        start: body.start + 20,
                        caplen,
                        orig_len,
                        ts_ns,
                        link,
                        link_idx,
                    }));
                }
                // Simple Packet Block (4.4): interface 0, no timestamp (the previous packet's
                // is used), captured length implied by the block length and snap length.
                3 => {
                    if b.len() < 4 {
                        return Err(corrupt(
                            "pcapng simple packet block",
                            format!("body of {} bytes", b.len()),
                        ));
                    }
                    let orig_len = u32_at(b, 0, big);
                    let (link, link_idx, snaplen) = match ifaces.first() {
                        Some(i) => (i.link, i.link_idx, i.snaplen),
                        None => {
                            let idx =
                                *unknown_idx.get_or_insert_with(|| self.stats.link_index(u32::MAX));
                            (Link::Unsupported, idx, 0)
                        }
                    };
                    let mut caplen = (orig_len as usize).min(b.len() - 4);
                    if snaplen != 0 {
                        caplen = caplen.min(snaplen as usize);
                    }
                    return Ok(Some(Rec {
                        start: body.start + 4,
                        caplen,
                        orig_len,
                        ts_ns: *last_ts_ns,
                        link,
                        link_idx,
                    }));
                }
                // Interface Statistics Block (4.6): isb_ifdrop (option 5) per interface.
                5 if b.len() >= 12 => {
                    let mut o = &b[12..];
                    while o.len() >= 4 {
                        let code = u16_at(o, 0, big);
                        let len = usize::from(u16_at(o, 2, big));
                        let padded = (len + 3) & !3;
                        if code == 0 || o.len() < 4 + padded {
                            break;
                        }
                        if code == 5 && len == 8 {
                            let mut raw = [0u8; 8];
                            raw.copy_from_slice(&o[4..12]);
                            let drops = if big {
                                u64::from_be_bytes(raw)
                            } else {
                                u64::from_le_bytes(raw)
                            };
                            self.stats.capture_drops = self.stats.capture_drops.max(drops);
                        }
                        o = &o[4 + padded..];
                    }
                }
                // Name resolution, decryption secrets, custom blocks...: nothing for TCP.
                _ => {}
            }
        }
    }
}

impl Iterator for Reader {
    type Item = Result<Segment, Error>;

    fn next(&mut self) -> Option<Self::Item> {
        self.next_segment().transpose()
    }
}
