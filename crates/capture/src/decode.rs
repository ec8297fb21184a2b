//! Link layer, IPv4/IPv6 and TCP decoding of one captured frame into a [`Segment`].
//!
//! Hand-written for speed: every function checks the captured length once before reading
//! a header, so no byte sequence can make it panic, and nothing allocates. The TCP payload
//! length comes from the IP length fields (RFC 791 Total Length, RFC 8200 Payload Length),
//! not from the captured bytes, so headers-only captures (`tcpdump -s 128`) still give the
//! true payload length.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use crate::segment::{Segment, TcpFlags, TcpOptions};

/// Link-layer header types (the LINKTYPE_* registry of tcpdump.org; snoop types are
/// mapped onto these by the snoop reader).
pub mod linktype {
    pub const NULL: u32 = 0;
    pub const ETHERNET: u32 = 1;
    /// DLT_RAW as most BSDs and Linux number it, found in some files.
    pub const RAW_12: u32 = 12;
    /// DLT_RAW as OpenBSD numbers it.
    pub const RAW_14: u32 = 14;
    pub const RAW: u32 = 101;
    pub const LOOP: u32 = 108;
    pub const LINUX_SLL: u32 = 113;
    /// Solaris/illumos ipnet(4D): a 24-byte dl_ipnetinfo header, then IP.
    pub const IPNET: u32 = 226;
    pub const IPV4: u32 = 228;
    pub const IPV6: u32 = 229;
    pub const LINUX_SLL2: u32 = 276;

    /// A short name for reports.
    pub fn name(lt: u32) -> &'static str {
        match lt {
            NULL => "null",
            ETHERNET => "ethernet",
            RAW_12 | RAW_14 | RAW => "raw",
            LOOP => "loop",
            LINUX_SLL => "linux_sll",
            IPNET => "ipnet",
            IPV4 => "ipv4",
            IPV6 => "ipv6",
            LINUX_SLL2 => "linux_sll2",
            _ => "unsupported",
        }
    }
}

/// How a frame's link layer is decoded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Link {
    Ethernet,
    Sll,
    Sll2,
    /// Raw IP, version from the first nibble.
    Raw,
    /// BSD loopback: 4-byte address family in the writer's byte order (LINKTYPE_NULL) or
    /// network byte order (LINKTYPE_LOOP); either way the IP version nibble decides.
    Null,
    /// illumos ipnet: 24-byte header (version, family, htype, pktlen, ifindex, grifindex,
    /// zone ids), then IP.
    Ipnet,
    Unsupported,
}

impl Link {
    pub(crate) fn from_linktype(lt: u32) -> Link {
        match lt {
            linktype::ETHERNET => Link::Ethernet,
            linktype::LINUX_SLL => Link::Sll,
            linktype::LINUX_SLL2 => Link::Sll2,
            linktype::RAW
            | linktype::RAW_12
            | linktype::RAW_14
            | linktype::IPV4
            | linktype::IPV6 => Link::Raw,
            linktype::NULL | linktype::LOOP => Link::Null,
            linktype::IPNET => Link::Ipnet,
            _ => Link::Unsupported,
        }
    }
}

/// Why a frame gave no segment.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Skip {
    /// Not IP, or IP but not TCP.
    NonTcp,
    /// An IP fragment other than the first: no TCP header in it.
    LaterFragment,
    /// Headers cut off (by the snap length) before the end of the 20-byte TCP header.
    Truncated,
    /// Header fields that cannot be right (bad version, lengths smaller than headers).
    Malformed,
    /// The interface's link type is not one this crate decodes.
    UnsupportedLink,
}

#[inline(always)]
fn be16(d: &[u8], at: usize) -> u16 {
    u16::from_be_bytes([d[at], d[at + 1]])
}

#[inline(always)]
fn be32(d: &[u8], at: usize) -> u32 {
    u32::from_be_bytes([d[at], d[at + 1], d[at + 2], d[at + 3]])
}

/// Decodes one frame. `wire_len` is the frame's original length on the wire; it is used
/// only when an IP length field is 0 (TSO/GSO super-packets, IPv6 jumbograms).
#[inline]
pub(crate) fn decode(
    link: Link,
    frame: &[u8],
    wire_len: u32,
    seg: &mut Segment,
) -> Result<(), Skip> {
    let wire = wire_len as usize;
    match link {
        Link::Ethernet => {
            if frame.len() < 14 {
                return Err(Skip::Truncated);
            }
            let et = be16(frame, 12);
            // Untagged IPv4, the common case, without the tag-walking loop.
            if et == 0x0800 {
                return ipv4(frame, 14, wire, seg);
            }
            ethertype(et, frame, 14, wire, seg)
        }
        Link::Sll => {
            // Linux cooked v1: packet type, ARPHRD, address length, 8 address bytes, protocol.
            if frame.len() < 16 {
                return Err(Skip::Truncated);
            }
            ethertype(be16(frame, 14), frame, 16, wire, seg)
        }
        Link::Sll2 => {
            // Linux cooked v2: protocol, reserved, ifindex, ARPHRD, type, address length, address.
            if frame.len() < 20 {
                return Err(Skip::Truncated);
            }
            ethertype(be16(frame, 0), frame, 20, wire, seg)
        }
        Link::Raw => ip_by_version(frame, 0, wire, seg),
        Link::Null => {
            if frame.len() < 4 {
                return Err(Skip::Truncated);
            }
            // AF_INET is 2 everywhere; AF_INET6 is 10, 24, 28 or 30 depending on the OS. The
            // IP version nibble is unambiguous, so use the family only to reject non-IP.
            let le = u32::from_le_bytes([frame[0], frame[1], frame[2], frame[3]]);
            let be = be32(frame, 0);
            let is_ip = |f: u32| matches!(f, 2 | 10 | 24 | 28 | 30);
            if !is_ip(le) && !is_ip(be) {
                return Err(Skip::NonTcp);
            }
            ip_by_version(frame, 4, wire, seg)
        }
        Link::Ipnet => {
            if frame.len() < 24 {
                return Err(Skip::Truncated);
            }
            ip_by_version(frame, 24, wire, seg)
        }
        Link::Unsupported => Err(Skip::UnsupportedLink),
    }
}

/// Dispatches on an Ethernet type, walking 802.1Q/802.1ad tags (QinQ), MPLS labels and
/// PPPoE session headers first.
#[inline]
fn ethertype(
    mut et: u16,
    d: &[u8],
    mut off: usize,
    wire: usize,
    seg: &mut Segment,
) -> Result<(), Skip> {
    loop {
        match et {
            0x0800 => return ipv4(d, off, wire, seg),
            0x86dd => return ipv6(d, off, wire, seg),
            // 802.1Q, 802.1ad, and the pre-standard QinQ types: 2-byte TCI then the next type.
            0x8100 | 0x88a8 | 0x9100 | 0x9200 => {
                if d.len() < off + 4 {
                    return Err(Skip::Truncated);
                }
                et = be16(d, off + 2);
                off += 4;
            }
            // MPLS unicast/multicast (RFC 3032): labels until bottom-of-stack, then IP.
            0x8847 | 0x8848 => {
                loop {
                    if d.len() < off + 4 {
                        return Err(Skip::Truncated);
                    }
                    let bottom = d[off + 2] & 1 == 1;
                    off += 4;
                    if bottom {
                        break;
                    }
                }
                return ip_by_version(d, off, wire, seg);
            }
            // PPPoE session (RFC 2516): 6-byte header, then the 2-byte PPP protocol.
            0x8864 => {
                if d.len() < off + 8 {
                    return Err(Skip::Truncated);
                }
                let ppp = be16(d, off + 6);
                off += 8;
                return match ppp {
                    0x0021 => ipv4(d, off, wire, seg),
                    0x0057 => ipv6(d, off, wire, seg),
                    _ => Err(Skip::NonTcp),
                };
            }
            _ => return Err(Skip::NonTcp),
        }
    }
}

#[inline]
fn ip_by_version(d: &[u8], off: usize, wire: usize, seg: &mut Segment) -> Result<(), Skip> {
    match d.get(off).map(|b| b >> 4) {
        None => Err(Skip::Truncated),
        Some(4) => ipv4(d, off, wire, seg),
        Some(6) => ipv6(d, off, wire, seg),
        Some(_) => Err(Skip::NonTcp),
    }
}

/// IPv4 (RFC 791). `off` is where the IP header starts in `d`.
#[inline]
fn ipv4(d: &[u8], off: usize, wire: usize, seg: &mut Segment) -> Result<(), Skip> {
    if d.len() < off + 20 {
        return Err(Skip::Truncated);
    }
    let h = &d[off..];
    if h[0] >> 4 != 4 {
        return Err(Skip::Malformed);
    }
    let ihl = usize::from(h[0] & 0x0f) * 4;
    if ihl < 20 {
        return Err(Skip::Malformed);
    }
    if h.len() < ihl {
        return Err(Skip::Truncated);
    }
    let total = usize::from(be16(h, 2));
    // Total Length 0: a TSO super-packet captured on the sending host; use the wire length.
    let ip_len = if total == 0 {
        wire.saturating_sub(off)
    } else {
        total
    };
    if ip_len < ihl {
        return Err(Skip::Malformed);
    }
    // Fragment offset != 0: no transport header in this fragment (RFC 791 section 3.2).
    if be16(h, 6) & 0x1fff != 0 {
        return Err(Skip::LaterFragment);
    }
    let mut proto = h[9];
    let mut at = ihl;
    // IPsec AH (RFC 4302): skip it to reach TCP. Payload Len is in 4-byte units minus 2.
    while proto == 51 {
        if h.len() < at + 2 {
            return Err(Skip::Truncated);
        }
        let len = (usize::from(h[at + 1]) + 2) * 4;
        proto = h[at];
        at += len;
        if at > ip_len {
            return Err(Skip::Malformed);
        }
    }
    if proto != 6 {
        return Err(Skip::NonTcp);
    }
    seg.ip_id = be16(h, 4);
    seg.src = IpAddr::V4(Ipv4Addr::new(h[12], h[13], h[14], h[15]));
    seg.dst = IpAddr::V4(Ipv4Addr::new(h[16], h[17], h[18], h[19]));
    tcp(&h[at.min(h.len())..], ip_len - at, seg)
}

/// IPv6 (RFC 8200) with its extension headers. `off` is where the IP header starts in `d`.
#[inline]
fn ipv6(d: &[u8], off: usize, wire: usize, seg: &mut Segment) -> Result<(), Skip> {
    if d.len() < off + 40 {
        return Err(Skip::Truncated);
    }
    let h = &d[off..];
    if h[0] >> 4 != 6 {
        return Err(Skip::Malformed);
    }
    let plen = usize::from(be16(h, 4));
    // Payload Length 0: a jumbogram (RFC 2675) or a GSO super-packet; use the wire length.
    let ip_len = 40
        + if plen == 0 {
            wire.saturating_sub(off + 40)
        } else {
            plen
        };
    let mut next = h[6];
    let mut at = 40;
    loop {
        match next {
            6 => break,
            // Hop-by-hop, routing, destination options, mobility, HIP, shim6 (RFC 8200 4.
            // and RFC 7045): Hdr Ext Len in 8-byte units, not counting the first 8.
            0 | 43 | 60 | 135 | 139 | 140 => {
                if h.len() < at + 2 {
                    return Err(Skip::Truncated);
                }
                next = h[at];
                at += (usize::from(h[at + 1]) + 1) * 8;
            }
            // Fragment (RFC 8200 4.5): only the first fragment carries the TCP header.
            44 => {
                if h.len() < at + 8 {
                    return Err(Skip::Truncated);
                }
                next = h[at];
                let frag_off = be16(h, at + 2) & 0xfff8;
                at += 8;
                if frag_off != 0 {
                    return Err(Skip::LaterFragment);
                }
            }
            // AH (RFC 4302 2.2): Payload Len in 4-byte units minus 2.
            51 => {
                if h.len() < at + 2 {
                    return Err(Skip::Truncated);
                }
                next = h[at];
                at += (usize::from(h[at + 1]) + 2) * 4;
            }
            _ => return Err(Skip::NonTcp),
        }
        if at > ip_len {
            return Err(Skip::Malformed);
        }
    }
    let mut src = [0u8; 16];
    src.copy_from_slice(&h[8..24]);
    let mut dst = [0u8; 16];
    dst.copy_from_slice(&h[24..40]);
    seg.ip_id = 0;
    seg.src = IpAddr::V6(Ipv6Addr::from(src));
    seg.dst = IpAddr::V6(Ipv6Addr::from(dst));
    tcp(&h[at.min(h.len())..], ip_len - at, seg)
}

/// TCP (RFC 9293 section 3.1). `t` holds the captured bytes from the TCP header on;
/// `l4_len` is the TCP length the IP header says (header + payload).
// Always inlined (into `ipv4`, `ipv6`): the call cost ~12 instructions a packet (saved
// registers, arguments) of the ~80 of a timestamped segment's TCP header.
#[inline(always)]
fn tcp(t: &[u8], l4_len: usize, seg: &mut Segment) -> Result<(), Skip> {
    if t.len() < 20 {
        return Err(Skip::Truncated);
    }
    let doff = usize::from(t[12] >> 4) * 4;
    if doff < 20 || l4_len < doff {
        return Err(Skip::Malformed);
    }
    seg.src_port = be16(t, 0);
    seg.dst_port = be16(t, 2);
    seg.seq = be32(t, 4);
    seg.ack = be32(t, 8);
    seg.flags = TcpFlags(t[13]);
    seg.window = be16(t, 14);
    seg.payload_len = (l4_len - doff) as u32;
    seg.options = TcpOptions::default();
    // What Linux puts on nearly every segment once timestamps are on: NOP, NOP, TS (12
    // bytes). Read it directly; the general walk below gives the same result, slower.
    if doff == 32 && t.len() >= 32 && t[20..24] == [1, 1, 8, 10] {
        seg.options.timestamps = Some((be32(t, 24), be32(t, 28)));
    } else if doff > 20 {
        // Options the snap length cut off are simply absent.
        options(&t[20..doff.min(t.len())], &mut seg.options);
    }
    Ok(())
}

/// TCP options: MSS (RFC 9293 3.2), window scale and timestamps (RFC 7323), SACK-permitted
/// and SACK blocks (RFC 2018). Unknown kinds are skipped by their length; a bad length ends
/// the walk.
#[inline]
fn options(mut o: &[u8], out: &mut TcpOptions) {
    while let Some(&kind) = o.first() {
        match kind {
            0 => return,
            1 => {
                o = &o[1..];
                continue;
            }
            _ => {}
        }
        if o.len() < 2 {
            return;
        }
        let len = usize::from(o[1]);
        if len < 2 || len > o.len() {
            return;
        }
        let v = &o[2..len];
        match (kind, len) {
            (2, 4) => out.mss = Some(be16(v, 0)),
            (3, 3) => out.window_scale = Some(v[0]),
            (4, 2) => out.sack_permitted = true,
            (5, _) => {
                let n = (v.len() / 8).min(out.sack.len());
                for i in 0..n {
                    out.sack[i] = (be32(v, i * 8), be32(v, i * 8 + 4));
                }
                out.sack_count = n as u8;
            }
            (8, 10) => out.timestamps = Some((be32(v, 0), be32(v, 4))),
            _ => {}
        }
        o = &o[len..];
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn blank() -> Segment {
        Segment::EMPTY
    }

    /// A SYN from 10.0.0.1:40000 to 10.0.0.2:80 with MSS 1460, SACK-permitted, timestamps
    /// (1, 0), NOP, window scale 7: exactly what Linux sends.
    fn ipv4_syn() -> Vec<u8> {
        let mut p = vec![
            0x45, 0, 0, 60, 0x12, 0x34, 0x40, 0, 64, 6, 0, 0, 10, 0, 0, 1, 10, 0, 0, 2,
        ];
        p.extend_from_slice(&[
            0x9c, 0x40, 0, 80, 0, 0, 0, 100, 0, 0, 0, 0, 0xa0, 0x02, 0xff, 0xff, 0, 0, 0, 0,
        ]);
        p.extend_from_slice(&[
            2, 4, 0x05, 0xb4, 4, 2, 8, 10, 0, 0, 0, 1, 0, 0, 0, 0, 1, 3, 3, 7,
        ]);
        p
    }

    fn eth(et: u16, payload: &[u8]) -> Vec<u8> {
        let mut f = vec![0u8; 12];
        f.extend_from_slice(&et.to_be_bytes());
        f.extend_from_slice(payload);
        f
    }

    #[test]
    fn ethernet_ipv4_syn_with_options() {
        let f = eth(0x0800, &ipv4_syn());
        let mut s = blank();
        decode(Link::Ethernet, &f, f.len() as u32, &mut s).unwrap();
        assert_eq!(s.src, "10.0.0.1".parse::<IpAddr>().unwrap());
        assert_eq!(s.dst_port, 80);
        assert_eq!(s.src_port, 40000);
        assert_eq!(s.seq, 100);
        assert!(s.flags.syn() && !s.flags.ack());
        assert_eq!(s.window, 0xffff);
        assert_eq!(s.payload_len, 0);
        assert_eq!(s.options.mss, Some(1460));
        assert_eq!(s.options.window_scale, Some(7));
        assert!(s.options.sack_permitted);
        assert_eq!(s.options.timestamps, Some((1, 0)));
    }

    #[test]
    fn payload_length_comes_from_ip_not_capture() {
        let mut p = ipv4_syn();
        p[2..4].copy_from_slice(&1500u16.to_be_bytes());
        let f = eth(0x0800, &p); // only the headers captured
        let mut s = blank();
        decode(Link::Ethernet, &f, 1514, &mut s).unwrap();
        assert_eq!(s.payload_len, 1500 - 20 - 40);
        // Total Length 0 (TSO): the wire length decides.
        p[2..4].copy_from_slice(&0u16.to_be_bytes());
        let f = eth(0x0800, &p);
        decode(Link::Ethernet, &f, 14 + 9000, &mut s).unwrap();
        assert_eq!(s.payload_len, 9000 - 60);
    }

    #[test]
    fn vlan_qinq_and_sll_and_sll2_and_null() {
        let mut q = vec![0u8; 12];
        q.extend_from_slice(&[0x88, 0xa8, 0, 10, 0x81, 0x00, 0, 20, 0x08, 0x00]);
        q.extend_from_slice(&ipv4_syn());
        let mut s = blank();
        decode(Link::Ethernet, &q, q.len() as u32, &mut s).unwrap();
        assert_eq!(s.options.mss, Some(1460));

        let mut sll = vec![0, 0, 3, 4, 0, 6, 1, 2, 3, 4, 5, 6, 0, 0, 0x08, 0x00];
        sll.extend_from_slice(&ipv4_syn());
        decode(Link::Sll, &sll, sll.len() as u32, &mut s).unwrap();
        assert_eq!(s.dst_port, 80);

        let mut sll2 = vec![
            0x08, 0x00, 0, 0, 0, 0, 0, 1, 3, 4, 0, 6, 1, 2, 3, 4, 5, 6, 0, 0,
        ];
        sll2.extend_from_slice(&ipv4_syn());
        decode(Link::Sll2, &sll2, sll2.len() as u32, &mut s).unwrap();
        assert_eq!(s.seq, 100);

        for fam in [[2, 0, 0, 0], [0, 0, 0, 2]] {
            let mut n = fam.to_vec();
            n.extend_from_slice(&ipv4_syn());
            decode(Link::Null, &n, n.len() as u32, &mut s).unwrap();
        }
        let mut n = vec![0, 0, 0, 7];
        n.extend_from_slice(&ipv4_syn());
        assert_eq!(decode(Link::Null, &n, 0, &mut s), Err(Skip::NonTcp));
    }

    fn ipv6_with(ext: &[u8], first_next: u8, tcp: &[u8]) -> Vec<u8> {
        let plen = (ext.len() + tcp.len()) as u16;
        let mut p = vec![0x60, 0, 0, 0];
        p.extend_from_slice(&plen.to_be_bytes());
        p.extend_from_slice(&[first_next, 64]);
        p.extend_from_slice(&[0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1]);
        p.extend_from_slice(&[0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2]);
        p.extend_from_slice(ext);
        p.extend_from_slice(tcp);
        p
    }

    fn tcp_ack_with_sack() -> Vec<u8> {
        let mut t = vec![
            0, 22, 0xc3, 0x50, 0, 0, 0, 5, 0, 0, 0, 9, 0xd0, 0x10, 1, 0, 0, 0, 0, 0,
        ];
        // NOP NOP SACK(2 blocks) NOP NOP TS
        t.extend_from_slice(&[
            1, 1, 5, 18, 0, 0, 0, 10, 0, 0, 0, 20, 0, 0, 0, 30, 0, 0, 0, 40,
        ]);
        t.extend_from_slice(&[1, 1, 8, 10, 0, 0, 0, 7, 0, 0, 0, 8]);
        t.extend_from_slice(&[0u8; 100]); // payload
        t
    }

    #[test]
    fn ipv6_extension_headers_down_to_tcp() {
        // Hop-by-hop (8 bytes, next routing), routing (16 bytes, next dest opts), destination
        // options (8 bytes, next AH), AH (12 bytes, next fragment), fragment (first, next TCP).
        let mut ext = vec![43, 0, 1, 4, 0, 0, 0, 0];
        ext.extend_from_slice(&[60, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]);
        ext.extend_from_slice(&[51, 0, 1, 4, 0, 0, 0, 0]);
        ext.extend_from_slice(&[44, 1, 0, 0, 0, 0, 0, 1, 0, 0, 0, 2]);
        ext.extend_from_slice(&[6, 0, 0, 1, 0, 0, 0, 9]);
        let p = ipv6_with(&ext, 0, &tcp_ack_with_sack());
        let f = eth(0x86dd, &p);
        let mut s = blank();
        decode(Link::Ethernet, &f, f.len() as u32, &mut s).unwrap();
        assert_eq!(s.src_port, 22);
        assert_eq!(s.dst_port, 50000);
        assert_eq!(s.payload_len, 100);
        assert_eq!(s.options.sack_count, 2);
        assert_eq!(s.options.sack[1], (30, 40));
        assert_eq!(s.options.timestamps, Some((7, 8)));
        assert!(s.dst.is_ipv6());

        // A later fragment carries no TCP header.
        let later = ipv6_with(&[6, 0, 0x00, 0x10, 0, 0, 0, 9], 44, &[0u8; 40]);
        assert_eq!(
            decode(Link::Raw, &later, 0, &mut s),
            Err(Skip::LaterFragment)
        );
        // No next header.
        let none = ipv6_with(&[], 59, &[]);
        assert_eq!(decode(Link::Raw, &none, 0, &mut s), Err(Skip::NonTcp));
    }

    #[test]
    fn ipv4_fragments_and_other_protocols() {
        let mut p = ipv4_syn();
        p[6] = 0x00;
        p[7] = 0x10; // offset 16*8
        let mut s = blank();
        assert_eq!(decode(Link::Raw, &p, 0, &mut s), Err(Skip::LaterFragment));
        let mut p = ipv4_syn();
        p[6] = 0x20; // MF, offset 0: first fragment, has TCP
        assert!(decode(Link::Raw, &p, 0, &mut s).is_ok());
        let mut p = ipv4_syn();
        p[9] = 17;
        assert_eq!(decode(Link::Raw, &p, 0, &mut s), Err(Skip::NonTcp));
        assert_eq!(
            decode(Link::Ethernet, &eth(0x0806, &[0; 28]), 0, &mut s),
            Err(Skip::NonTcp)
        );
    }

    #[test]
    fn every_truncation_of_every_frame_is_handled_without_panic() {
        let frames = [
            (Link::Ethernet, eth(0x0800, &ipv4_syn())),
            (
                Link::Raw,
                ipv6_with(&[6, 0, 0, 1, 0, 0, 0, 9], 44, &tcp_ack_with_sack()),
            ),
        ];
        let mut s = blank();
        for (link, f) in frames {
            for cut in 0..f.len() {
                let r = decode(link, &f[..cut], f.len() as u32, &mut s);
                // Options may be cut (still a segment), headers may not.
                if let Err(e) = r {
                    assert_eq!(e, Skip::Truncated, "cut at {cut}");
                }
            }
        }
    }

    #[test]
    fn malformed_lengths_are_rejected() {
        let mut s = blank();
        let mut p = ipv4_syn();
        p[0] = 0x44; // IHL 16 bytes
        assert_eq!(decode(Link::Raw, &p, 0, &mut s), Err(Skip::Malformed));
        let mut p = ipv4_syn();
        p[2..4].copy_from_slice(&30u16.to_be_bytes()); // shorter than IP+TCP headers
        assert_eq!(decode(Link::Raw, &p, 0, &mut s), Err(Skip::Malformed));
        let mut p = ipv4_syn();
        p[32] = 0x30; // data offset 12 bytes
        assert_eq!(decode(Link::Raw, &p, 0, &mut s), Err(Skip::Malformed));
        // Options with a zero length, or longer than the header, stop the walk.
        let mut p = ipv4_syn();
        p[41] = 0;
        decode(Link::Raw, &p, 0, &mut s).unwrap();
        assert_eq!(s.options.mss, None);
        let mut p = ipv4_syn();
        p[41] = 200;
        decode(Link::Raw, &p, 0, &mut s).unwrap();
        assert_eq!(s.options.mss, None);
    }
}
