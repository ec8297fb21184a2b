//! [`Segment`]: one TCP segment as the capture readers produce it and the analyzer consumes
//! it. Small and `Copy`: readers build one per packet without allocating.

use std::net::IpAddr;

/// TCP header flags (RFC 9293 section 3.1), as the low 8 bits of the flags field.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct TcpFlags(pub u8);

impl TcpFlags {
    pub const FIN: u8 = 0x01;
    pub const SYN: u8 = 0x02;
    pub const RST: u8 = 0x04;
    pub const PSH: u8 = 0x08;
    pub const ACK: u8 = 0x10;
    pub const URG: u8 = 0x20;
    pub const ECE: u8 = 0x40;
    pub const CWR: u8 = 0x80;

    pub fn has(self, bit: u8) -> bool {
        self.0 & bit != 0
    }
    pub fn syn(self) -> bool {
        self.has(Self::SYN)
    }
    pub fn ack(self) -> bool {
        self.has(Self::ACK)
    }
    pub fn fin(self) -> bool {
        self.has(Self::FIN)
    }
    pub fn rst(self) -> bool {
        self.has(Self::RST)
    }
}

/// The TCP options tcpdoctor uses (RFC 9293, RFC 7323, RFC 2018). `repr(C)` in this order:
/// the fields every segment's analysis reads (`sack_count`, the window scale) come first, so
/// they share a cache line with [`Segment`]'s fixed header fields.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[repr(C)]
pub struct TcpOptions {
    /// `sack_count` of the `sack` blocks are valid.
    pub sack_count: u8,
    pub window_scale: Option<u8>,
    pub sack_permitted: bool,
    pub mss: Option<u16>,
    /// (TSval, TSecr)
    pub timestamps: Option<(u32, u32)>,
    /// Up to 4 SACK blocks (left, right).
    pub sack: [(u32, u32); 4],
}

/// One TCP segment from a capture.
///
/// `repr(C)` with the fields the flow engine reads for every segment in the first 40 bytes
/// (one cache line), then the options, then the addresses (read when a connection starts):
/// segments are decoded on one thread and analysed on another, and every cache line a
/// segment spans has to move between the two cores.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(C)]
pub struct Segment {
    /// 1-based frame number in the capture, as Wireshark counts it.
    pub frame: u64,
    /// Capture timestamp, nanoseconds since the Unix epoch.
    pub ts_ns: u64,
    pub seq: u32,
    pub ack: u32,
    /// TCP payload length computed from the IP lengths, not from the captured bytes.
    pub payload_len: u32,
    pub src_port: u16,
    pub dst_port: u16,
    /// Raw window field (unscaled).
    pub window: u16,
    pub flags: TcpFlags,
    pub options: TcpOptions,
    pub src: IpAddr,
    pub dst: IpAddr,
    /// IPv4 Identification; 0 for IPv6. Stacks number each datagram they send (Linux per
    /// connected socket, Windows globally), so a TCP segment seen twice with the same
    /// non-zero one is one datagram captured twice, not a retransmission.
    pub ip_id: u16,
}

impl Segment {
    /// All fields zero (unspecified IPv4 addresses): the starting point a decoder fills in.
    pub const EMPTY: Segment = Segment {
        frame: 0,
        ts_ns: 0,
        src: IpAddr::V4(std::net::Ipv4Addr::UNSPECIFIED),
        dst: IpAddr::V4(std::net::Ipv4Addr::UNSPECIFIED),
        src_port: 0,
        dst_port: 0,
        seq: 0,
        ack: 0,
        flags: TcpFlags(0),
        window: 0,
        payload_len: 0,
        ip_id: 0,
        options: TcpOptions {
            sack_count: 0,
            window_scale: None,
            sack_permitted: false,
            mss: None,
            timestamps: None,
            sack: [(0, 0); 4],
        },
    };
}

impl Segment {
    /// A stand-in for a packet that gave no segment (not TCP, undecodable), carrying only its
    /// frame number and timestamp: readers return these to [`crate::merge`] only, which
    /// needs every packet's time to number the merged capture's frames.
    pub(crate) fn skipped_packet(frame: u64, ts_ns: u64) -> Segment {
        Segment {
            frame,
            ts_ns,
            payload_len: SKIPPED,
            src_port: 0,
            dst_port: 0,
            ..Segment::EMPTY
        }
    }

    /// Whether this is a [`skipped_packet`](Self::skipped_packet) stand-in.
    pub(crate) fn is_skipped_packet(&self) -> bool {
        self.payload_len == SKIPPED && self.src_port == 0 && self.dst_port == 0
    }
}

/// `payload_len` of a skipped-packet stand-in: no TCP segment can carry 4 GiB - 1 bytes
/// (an IPv6 jumbogram's payload includes the TCP header).
const SKIPPED: u32 = u32::MAX;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn per_segment_fields_share_the_first_cache_line() {
        let s = Segment::EMPTY;
        let base = &s as *const Segment as usize;
        let at = |p: *const u8| p as usize - base;
        assert!(at(&s.options.sack_count) < 40);
        assert!(at(&s.flags as *const TcpFlags as *const u8) < 40);
        assert!(std::mem::size_of::<Segment>() <= 128);
    }
}
