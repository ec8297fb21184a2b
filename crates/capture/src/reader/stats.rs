//! What a [`Reader`](super::Reader) counts as it reads: the container format, the
//! compression, packets by what became of them, and per link type.

use serde::Serialize;

use crate::decode::{linktype, Skip};

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
    pub(crate) fn skipped(&mut self, skip: Skip, frame: u64) {
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
    pub(crate) fn link_index(&mut self, lt: u32) -> usize {
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
