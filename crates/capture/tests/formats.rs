//! Readers against byte fixtures built in the test: every container format and link type,
//! both byte orders, timestamp resolutions, and truncated or corrupt input.

use std::io::Cursor;
use std::net::IpAddr;

use tcpdoctor_capture::write::{build_frame, PcapWriter, WriteLink};
use tcpdoctor_capture::{linktype, ErrorKind, Format, Reader, Segment, TcpFlags, TcpOptions};

fn seg(i: u32, v6: bool) -> Segment {
    let (src, dst): (IpAddr, IpAddr) = if v6 {
        ("fd00::1".parse().unwrap(), "fd00::2".parse().unwrap())
    } else {
        ("10.1.2.3".parse().unwrap(), "10.9.8.7".parse().unwrap())
    };
    let mut options = TcpOptions::default();
    if i == 0 {
        options.mss = Some(1460);
        options.window_scale = Some(7);
        options.sack_permitted = true;
    }
    options.timestamps = Some((1000 + i, 2000 + i));
    if i == 3 {
        options.sack = [(10, 20), (30, 40), (0, 0), (0, 0)];
        options.sack_count = 2;
    }
    Segment {
        frame: 0,
        ts_ns: 1_700_000_000_123_456_789 + u64::from(i) * 1_000_001,
        src,
        dst,
        src_port: 40000 + i as u16,
        dst_port: 80,
        seq: 1_000_000 * i,
        ack: 77 + i,
        flags: TcpFlags(if i == 0 {
            TcpFlags::SYN
        } else {
            TcpFlags::ACK | TcpFlags::PSH
        }),
        window: 500 + i as u16,
        payload_len: 100 * i,
        ip_id: 0,
        options,
    }
}

fn read_all(bytes: Vec<u8>) -> (Vec<Segment>, Reader, Option<tcpdoctor_capture::Error>) {
    let mut r = Reader::from_read(Box::new(Cursor::new(bytes)), "t.pcap".into()).unwrap();
    let mut out = Vec::new();
    let err = loop {
        match r.next_segment() {
            Ok(Some(s)) => out.push(s),
            Ok(None) => break None,
            Err(e) => break Some(e),
        }
    };
    (out, r, err)
}

fn pcap_file(link: WriteLink, nanos: bool, snaplen: u32, segs: &[Segment]) -> Vec<u8> {
    let mut w = PcapWriter::new(Vec::new(), link, nanos, snaplen).unwrap();
    for s in segs {
        w.write_segment(s).unwrap();
    }
    w.into_inner().unwrap()
}

fn same(got: &Segment, want: &Segment, frame: u64, ts_ns: u64) {
    let mut want = *want;
    want.frame = frame;
    want.ts_ns = ts_ns;
    assert_eq!(*got, want);
}

#[test]
fn pcap_round_trip_micro_and_nano_ipv4_and_ipv6() {
    let segs: Vec<Segment> = (0..5).map(|i| seg(i, i % 2 == 1)).collect();
    for nanos in [false, true] {
        for link in [WriteLink::Ethernet, WriteLink::RawIp] {
            let (got, r, err) = read_all(pcap_file(link, nanos, 0, &segs));
            assert!(err.is_none());
            assert_eq!(
                r.format(),
                Format::Pcap {
                    nanos,
                    big_endian: false
                }
            );
            assert_eq!(got.len(), 5);
            for (i, (g, w)) in got.iter().zip(&segs).enumerate() {
                let ts = if nanos {
                    w.ts_ns
                } else {
                    w.ts_ns / 1000 * 1000
                };
                same(g, w, i as u64 + 1, ts);
            }
            let st = r.stats();
            assert_eq!(
                (st.packets, st.tcp_segments, st.non_tcp, st.undecodable),
                (5, 5, 0, 0)
            );
            assert_eq!(st.link_types[0].link_type, link.linktype());
            assert_eq!(st.link_types[0].packets, 5);
        }
    }
}

#[test]
fn headers_only_capture_keeps_true_payload_length() {
    let mut s = seg(2, false);
    s.payload_len = 1448;
    let (got, r, _) = read_all(pcap_file(WriteLink::Ethernet, false, 96, &[s]));
    assert_eq!(got[0].payload_len, 1448);
    assert_eq!(r.stats().cut_by_snaplen, 1);
}

/// Swaps every header field of a little-endian pcap built by the writer to big-endian.
fn pcap_to_big_endian(le: &[u8]) -> Vec<u8> {
    let mut b = le.to_vec();
    let swap4 = |b: &mut Vec<u8>, at: usize| b[at..at + 4].reverse();
    swap4(&mut b, 0);
    b[4..6].reverse();
    b[6..8].reverse();
    for at in [8, 12, 16, 20] {
        swap4(&mut b, at);
    }
    let mut at = 24;
    while at < b.len() {
        let cap = u32::from_le_bytes(le[at + 8..at + 12].try_into().unwrap()) as usize;
        for f in 0..4 {
            swap4(&mut b, at + 4 * f);
        }
        at += 16 + cap;
    }
    b
}

#[test]
fn pcap_big_endian() {
    let segs: Vec<Segment> = (0..3).map(|i| seg(i, false)).collect();
    let be = pcap_to_big_endian(&pcap_file(WriteLink::Ethernet, true, 0, &segs));
    let (got, r, err) = read_all(be);
    assert!(err.is_none(), "{err:?}");
    assert_eq!(
        r.format(),
        Format::Pcap {
            nanos: true,
            big_endian: true
        }
    );
    assert_eq!(got.len(), 3);
    same(&got[2], &segs[2], 3, segs[2].ts_ns);
}

#[test]
fn truncated_pcap_returns_segments_then_names_the_offset() {
    let segs: Vec<Segment> = (0..4).map(|i| seg(i, false)).collect();
    let full = pcap_file(WriteLink::Ethernet, false, 0, &segs);
    // Cut in the middle of the third record's data.
    let rec_len = |i: usize| {
        let mut f = Vec::new();
        build_frame(&segs[i], WriteLink::Ethernet, &mut f);
        16 + f.len()
    };
    let third = 24 + rec_len(0) + rec_len(1);
    let cut = third + 16 + 10;
    let (got, r, err) = read_all(full[..cut].to_vec());
    assert_eq!(got.len(), 2);
    let err = err.expect("truncation is an error");
    assert_eq!(err.offset, third as u64);
    let msg = err.to_string();
    assert_eq!(
        msg,
        format!(
            "t.pcap: byte offset {third}: truncated packet record (needs {} bytes, 26 left)",
            rec_len(2)
        )
    );
    assert_eq!(r.stats().packets, 2);
    // Cut inside a record header.
    let (got, _, err) = read_all(full[..third + 5].to_vec());
    assert_eq!(got.len(), 2);
    assert!(err
        .unwrap()
        .to_string()
        .contains("truncated packet record header (needs 16 bytes, 5 left)"));
    // Cut exactly at a record boundary is a clean end.
    let (got, _, err) = read_all(full[..third].to_vec());
    assert_eq!(got.len(), 2);
    assert!(err.is_none());
}

#[test]
fn corrupt_and_unknown_headers_are_errors_not_panics() {
    let full = pcap_file(WriteLink::Ethernet, false, 0, &[seg(1, false)]);
    let mut bad = full.clone();
    bad[24 + 8..24 + 12].copy_from_slice(&0xffff_fff0u32.to_le_bytes());
    let (_, _, err) = read_all(bad);
    let err = err.unwrap();
    assert!(matches!(err.kind, ErrorKind::Corrupt { .. }), "{err}");
    assert_eq!(err.offset, 32);

    let r = Reader::from_read(Box::new(Cursor::new(b"GIF89a....".to_vec())), "x".into());
    assert!(r
        .err()
        .unwrap()
        .to_string()
        .starts_with("x: byte offset 0: not a pcap, pcapng or snoop capture"));
    let r = Reader::from_read(Box::new(Cursor::new(Vec::new())), "x".into());
    assert!(matches!(r.err().unwrap().kind, ErrorKind::Empty));
    let r = Reader::from_read(Box::new(Cursor::new(full[..10].to_vec())), "x".into());
    assert_eq!(
        r.err().unwrap().to_string(),
        "x: byte offset 0: truncated pcap file header (needs 24 bytes, 10 left)"
    );
}

#[test]
fn gzip_is_detected() {
    use std::io::Write;
    let segs: Vec<Segment> = (0..3).map(|i| seg(i, true)).collect();
    let plain = pcap_file(WriteLink::RawIp, true, 0, &segs);
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    gz.write_all(&plain).unwrap();
    let (got, r, err) = read_all(gz.finish().unwrap());
    assert!(err.is_none());
    assert_eq!(got.len(), 3);
    assert!(r.stats().gzip);
}

/// Builds frames for each link type around the same IPv4 packet.
fn ip_packet(s: &Segment) -> Vec<u8> {
    let mut f = Vec::new();
    build_frame(s, WriteLink::RawIp, &mut f);
    f
}

fn pcap_with_link(lt: u32, frames: &[Vec<u8>]) -> Vec<u8> {
    let mut b = Vec::new();
    b.extend_from_slice(&0xa1b2c3d4u32.to_le_bytes());
    b.extend_from_slice(&[2, 0, 4, 0, 0, 0, 0, 0, 0, 0, 0, 0]);
    b.extend_from_slice(&65535u32.to_le_bytes());
    b.extend_from_slice(&lt.to_le_bytes());
    for (i, f) in frames.iter().enumerate() {
        b.extend_from_slice(&(i as u32 + 1).to_le_bytes());
        b.extend_from_slice(&0u32.to_le_bytes());
        b.extend_from_slice(&(f.len() as u32).to_le_bytes());
        b.extend_from_slice(&(f.len() as u32).to_le_bytes());
        b.extend_from_slice(f);
    }
    b
}

#[test]
fn every_link_type() {
    let s4 = seg(2, false);
    let s6 = seg(3, true);
    let p4 = ip_packet(&s4);
    let p6 = ip_packet(&s6);
    let cat = |h: &[u8], p: &[u8]| [h, p].concat();
    let sll = |et: [u8; 2]| [vec![0, 0, 3, 4, 0, 6, 1, 2, 3, 4, 5, 6, 0, 0], et.to_vec()].concat();
    let sll2 = |et: [u8; 2]| {
        [
            et.to_vec(),
            vec![0, 0, 0, 0, 0, 1, 0, 1, 0, 6, 1, 2, 3, 4, 5, 6, 0, 0],
        ]
        .concat()
    };
    let eth = |tags: &[u8], et: [u8; 2]| [vec![2; 12], tags.to_vec(), et.to_vec()].concat();
    let ipnet = |fam: u8| [vec![1, fam, 0, 0], vec![0; 20]].concat();
    let cases: Vec<(u32, Vec<Vec<u8>>)> = vec![
        (
            linktype::ETHERNET,
            vec![
                cat(&eth(&[], [8, 0]), &p4),
                cat(&eth(&[], [0x86, 0xdd]), &p6),
            ],
        ),
        (
            linktype::ETHERNET,
            vec![
                cat(&eth(&[0x81, 0, 0, 5], [8, 0]), &p4),
                cat(&eth(&[0x88, 0xa8, 0, 5, 0x81, 0, 0, 6], [0x86, 0xdd]), &p6),
            ],
        ),
        (
            linktype::LINUX_SLL,
            vec![cat(&sll([8, 0]), &p4), cat(&sll([0x86, 0xdd]), &p6)],
        ),
        (
            linktype::LINUX_SLL2,
            vec![cat(&sll2([8, 0]), &p4), cat(&sll2([0x86, 0xdd]), &p6)],
        ),
        (linktype::RAW, vec![p4.clone(), p6.clone()]),
        (linktype::RAW_12, vec![p4.clone(), p6.clone()]),
        (linktype::RAW_14, vec![p4.clone(), p6.clone()]),
        (linktype::IPV4, vec![p4.clone(), p6.clone()]),
        (linktype::IPV6, vec![p4.clone(), p6.clone()]),
        (
            linktype::NULL,
            vec![
                cat(&2u32.to_le_bytes(), &p4),
                cat(&30u32.to_le_bytes(), &p6),
            ],
        ),
        (
            linktype::NULL,
            vec![
                cat(&2u32.to_be_bytes(), &p4),
                cat(&10u32.to_be_bytes(), &p6),
            ],
        ),
        (
            linktype::LOOP,
            vec![
                cat(&2u32.to_be_bytes(), &p4),
                cat(&24u32.to_be_bytes(), &p6),
            ],
        ),
        (
            linktype::IPNET,
            vec![cat(&ipnet(2), &p4), cat(&ipnet(26), &p6)],
        ),
    ];
    for (lt, frames) in cases {
        let (got, r, err) = read_all(pcap_with_link(lt, &frames));
        assert!(err.is_none(), "link type {lt}: {err:?}");
        assert_eq!(got.len(), 2, "link type {lt}: {:?}", r.stats());
        same(&got[0], &s4, 1, 1_000_000_000);
        same(&got[1], &s6, 2, 2_000_000_000);
    }
    // Unsupported link types and non-IP frames are counted, not silently dropped.
    let (got, r, _) = read_all(pcap_with_link(147, std::slice::from_ref(&p4)));
    assert!(got.is_empty());
    assert_eq!(
        (r.stats().undecodable, r.stats().undecodable_link_type),
        (1, 1)
    );
    assert_eq!(r.stats().first_undecodable_frame, Some(1));
    let arp = cat(&eth(&[], [8, 6]), &[0; 28]);
    let short = eth(&[], [8, 0]);
    let (got, r, _) = read_all(pcap_with_link(
        linktype::ETHERNET,
        &[arp, short, cat(&eth(&[], [8, 0]), &p4)],
    ));
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].frame, 3);
    let st = r.stats();
    assert_eq!(
        (
            st.packets,
            st.tcp_segments,
            st.non_tcp,
            st.undecodable,
            st.undecodable_truncated
        ),
        (3, 1, 1, 1, 1)
    );
}

/// A pcapng builder in either byte order.
struct Ng {
    big: bool,
    out: Vec<u8>,
}

impl Ng {
    fn new(big: bool) -> Ng {
        let mut n = Ng {
            big,
            out: Vec::new(),
        };
        n.shb();
        n
    }
    fn u16(&self, v: u16) -> [u8; 2] {
        if self.big {
            v.to_be_bytes()
        } else {
            v.to_le_bytes()
        }
    }
    fn u32(&self, v: u32) -> [u8; 4] {
        if self.big {
            v.to_be_bytes()
        } else {
            v.to_le_bytes()
        }
    }
    fn block(&mut self, btype: u32, body: &[u8]) {
        let mut body = body.to_vec();
        while !body.len().is_multiple_of(4) {
            body.push(0);
        }
        let len = 12 + body.len() as u32;
        let mut b = Vec::new();
        b.extend_from_slice(&self.u32(btype));
        b.extend_from_slice(&self.u32(len));
        b.extend_from_slice(&body);
        b.extend_from_slice(&self.u32(len));
        self.out.extend_from_slice(&b);
    }
    fn shb(&mut self) {
        let mut body = Vec::new();
        body.extend_from_slice(&self.u32(0x1a2b3c4d));
        body.extend_from_slice(&self.u16(1));
        body.extend_from_slice(&self.u16(0));
        body.extend_from_slice(&[0xff; 8]);
        self.block(0x0a0d0d0a, &body);
    }
    fn option(&self, body: &mut Vec<u8>, code: u16, v: &[u8]) {
        body.extend_from_slice(&self.u16(code));
        body.extend_from_slice(&self.u16(v.len() as u16));
        body.extend_from_slice(v);
        while !body.len().is_multiple_of(4) {
            body.push(0);
        }
    }
    fn idb(&mut self, lt: u16, snaplen: u32, tsresol: Option<u8>, tsoffset: Option<i64>) {
        let mut body = Vec::new();
        body.extend_from_slice(&self.u16(lt));
        body.extend_from_slice(&[0, 0]);
        body.extend_from_slice(&self.u32(snaplen));
        self.option(&mut body, 2, b"eth0"); // if_name, to be skipped
        if let Some(r) = tsresol {
            self.option(&mut body, 9, &[r]);
        }
        if let Some(o) = tsoffset {
            let v = if self.big {
                o.to_be_bytes()
            } else {
                o.to_le_bytes()
            };
            self.option(&mut body, 14, &v);
        }
        self.option(&mut body, 0, &[]);
        self.block(1, &body);
    }
    fn epb(&mut self, iface: u32, units: u64, frame: &[u8], orig: u32) {
        let mut body = Vec::new();
        body.extend_from_slice(&self.u32(iface));
        body.extend_from_slice(&self.u32((units >> 32) as u32));
        body.extend_from_slice(&self.u32(units as u32));
        body.extend_from_slice(&self.u32(frame.len() as u32));
        body.extend_from_slice(&self.u32(orig));
        body.extend_from_slice(frame);
        while !body.len().is_multiple_of(4) {
            body.push(0);
        }
        self.option(&mut body, 1, b"a comment");
        self.block(6, &body);
    }
    fn spb(&mut self, frame: &[u8]) {
        let mut body = Vec::new();
        body.extend_from_slice(&self.u32(frame.len() as u32));
        body.extend_from_slice(frame);
        self.block(3, &body);
    }
    fn opb(&mut self, iface: u16, units: u64, frame: &[u8]) {
        let mut body = Vec::new();
        body.extend_from_slice(&self.u16(iface));
        body.extend_from_slice(&self.u16(0));
        body.extend_from_slice(&self.u32((units >> 32) as u32));
        body.extend_from_slice(&self.u32(units as u32));
        body.extend_from_slice(&self.u32(frame.len() as u32));
        body.extend_from_slice(&self.u32(frame.len() as u32));
        body.extend_from_slice(frame);
        self.block(2, &body);
    }
}

fn eth_frame(s: &Segment) -> Vec<u8> {
    let mut f = Vec::new();
    build_frame(s, WriteLink::Ethernet, &mut f);
    f
}

#[test]
fn pcapng_interfaces_resolutions_offsets_and_block_kinds() {
    for big in [false, true] {
        let s: Vec<Segment> = (0..6).map(|i| seg(i, i % 2 == 0)).collect();
        let mut n = Ng::new(big);
        n.idb(1, 0, None, None); // 0: Ethernet, microseconds
        n.idb(101, 0, Some(9), None); // 1: raw IP, nanoseconds
        n.idb(1, 0, Some(0x80 | 20), Some(-10)); // 2: 2^-20 s units, 10 s earlier
        n.idb(276, 0, Some(3), Some(100)); // 3: SLL2, milliseconds, +100 s
        n.block(4, &[0, 0, 0, 0]); // name resolution block: skipped
                                   // In time order (a packet a second older than one before it ends the input).
        n.epb(2, 3 << 20 | 1 << 19, &eth_frame(&s[2]), 0); // 3.5 s
        n.epb(7, 1, &eth_frame(&s[0]), 0); // no such interface: counted undecodable
        n.opb(1, 42, &ip_packet(&s[3]));
        let sll2 = [
            vec![
                0x86, 0xdd, 0, 0, 0, 0, 0, 1, 0, 1, 0, 6, 1, 2, 3, 4, 5, 6, 0, 0,
            ],
            ip_packet(&s[4]),
        ]
        .concat();
        n.epb(3, 2_500, &sll2, 0);
        n.spb(&eth_frame(&s[5])); // interface 0, timestamp of the previous packet
        n.epb(0, 1_700_000_000_123_456, &eth_frame(&s[0]), 0);
        n.epb(1, 1_700_000_000_123_456_789, &ip_packet(&s[1]), 0);
        let mut isb = Vec::new();
        isb.extend_from_slice(&n.u32(0));
        isb.extend_from_slice(&[0; 8]);
        let drops = if big {
            17u64.to_be_bytes()
        } else {
            17u64.to_le_bytes()
        };
        n.option(&mut isb, 5, &drops);
        n.option(&mut isb, 0, &[]);
        n.block(5, &isb);
        let (got, r, err) = read_all(n.out);
        assert!(err.is_none(), "{err:?}");
        assert_eq!(r.format(), Format::PcapNg);
        assert_eq!(got.len(), 6, "{:?}", r.stats());
        same(&got[0], &s[2], 1, 0); // 3.5 s - 10 s clamps at the epoch
        same(&got[1], &s[3], 3, 42);
        same(&got[2], &s[4], 4, 102_500_000_000);
        same(&got[3], &s[5], 5, 102_500_000_000);
        same(&got[4], &s[0], 6, 1_700_000_000_123_456_000);
        same(&got[5], &s[1], 7, 1_700_000_000_123_456_789);
        let st = r.stats();
        assert_eq!(st.interfaces, 4);
        assert_eq!(
            (st.packets, st.undecodable, st.undecodable_link_type),
            (7, 1, 1)
        );
        assert_eq!(st.capture_drops, 17);
        let names: Vec<_> = st.link_types.iter().map(|c| (c.name, c.packets)).collect();
        assert_eq!(
            names,
            [
                ("ethernet", 3),
                ("raw", 2),
                ("linux_sll2", 1),
                ("unsupported", 1)
            ]
        );
    }
}

#[test]
fn pcapng_power_of_two_resolution_keeps_fractions() {
    let s = seg(1, false);
    let mut n = Ng::new(false);
    n.idb(1, 0, Some(0x80 | 30), Some(5));
    n.epb(0, (1 << 30) + (1 << 29) + (1 << 28), &eth_frame(&s), 0);
    let (got, _, _) = read_all(n.out);
    assert_eq!(got[0].ts_ns, 6_750_000_000);
}

#[test]
fn pcapng_sections_may_change_byte_order() {
    let s = seg(1, false);
    let mut a = Ng::new(false);
    a.idb(1, 0, None, None);
    a.epb(0, 5, &eth_frame(&s), 0);
    let mut b = Ng::new(true);
    b.idb(101, 0, None, None);
    b.epb(0, 6, &ip_packet(&s), 0);
    let (got, r, err) = read_all([a.out, b.out].concat());
    assert!(err.is_none(), "{err:?}");
    assert_eq!(got.len(), 2);
    assert_eq!((got[0].ts_ns, got[1].ts_ns), (5000, 6000));
    assert_eq!(r.stats().interfaces, 2);
}

#[test]
fn pcapng_truncated_and_corrupt_blocks() {
    let s = seg(1, false);
    let mut n = Ng::new(false);
    n.idb(1, 0, None, None);
    n.epb(0, 5, &eth_frame(&s), 0);
    let good_end = n.out.len();
    n.epb(0, 6, &eth_frame(&s), 0);
    let full = n.out.clone();
    // Truncated inside the second packet block.
    let (got, _, err) = read_all(full[..good_end + 30].to_vec());
    assert_eq!(got.len(), 1);
    let err = err.unwrap();
    assert_eq!(err.offset, good_end as u64);
    assert!(err.to_string().contains("truncated pcapng block"), "{err}");
    // Trailing length differs from the leading one.
    let mut bad = full.clone();
    let last = bad.len() - 4;
    bad[last] ^= 0x40;
    let (got, _, err) = read_all(bad);
    assert_eq!(got.len(), 1);
    assert!(err.unwrap().to_string().contains("trailing length"));
    // Length not a multiple of 4.
    let mut bad = full.clone();
    bad[good_end + 4] = 0x43;
    let (got, _, err) = read_all(bad);
    assert_eq!(got.len(), 1);
    let err = err.unwrap();
    assert_eq!(err.offset, good_end as u64 + 4);
    // Captured length larger than the block.
    let mut bad = full;
    bad[good_end + 20] = 0xff;
    let (_, _, err) = read_all(bad);
    assert!(err.unwrap().to_string().contains("exceeds the block"));
}

fn snoop_file(datalink: u32, frames: &[(Vec<u8>, u32)]) -> Vec<u8> {
    let mut b = b"snoop\0\0\0".to_vec();
    b.extend_from_slice(&2u32.to_be_bytes());
    b.extend_from_slice(&datalink.to_be_bytes());
    for (i, (f, orig)) in frames.iter().enumerate() {
        let pad = (4 - f.len() % 4) % 4;
        b.extend_from_slice(&orig.to_be_bytes());
        b.extend_from_slice(&(f.len() as u32).to_be_bytes());
        b.extend_from_slice(&((24 + f.len() + pad) as u32).to_be_bytes());
        b.extend_from_slice(&(i as u32).to_be_bytes()); // cumulative drops
        b.extend_from_slice(&(1_600_000_000 + i as u32).to_be_bytes());
        b.extend_from_slice(&(250_000u32).to_be_bytes());
        b.extend_from_slice(f);
        b.extend(std::iter::repeat_n(0u8, pad));
    }
    b
}

#[test]
fn snoop_ethernet_and_ipnet() {
    let s4 = seg(1, false);
    let s6 = seg(2, true);
    let (f4, f6) = (eth_frame(&s4), eth_frame(&s6));
    let (got, r, err) = read_all(snoop_file(
        4,
        &[(f4.clone(), f4.len() as u32), (f6.clone(), f6.len() as u32)],
    ));
    assert!(err.is_none(), "{err:?}");
    assert_eq!(r.format(), Format::Snoop);
    same(&got[0], &s4, 1, 1_600_000_000_250_000_000);
    same(&got[1], &s6, 2, 1_600_000_001_250_000_000);
    assert_eq!(r.stats().capture_drops, 1);
    // ipnet (illumos loopback captures, `snoop -I lo0`): 24-byte header, then IP.
    let ipnet = |fam: u8, p: Vec<u8>| [vec![1, fam, 0, 0], vec![0; 20], p].concat();
    let frames = [
        (ipnet(2, ip_packet(&s4)), 0),
        (ipnet(26, ip_packet(&s6)), 0),
    ];
    let (got, r, err) = read_all(snoop_file(0x8000_0005, &frames));
    assert!(err.is_none());
    assert_eq!(got.len(), 2);
    assert_eq!(r.stats().link_types[0].name, "ipnet");
    // Headers-only snoop (snoop -s 96): true payload length.
    let mut big = seg(3, false);
    big.payload_len = 1448;
    let f = eth_frame(&big);
    let (got, r, _) = read_all(snoop_file(4, &[(f[..96].to_vec(), f.len() as u32)]));
    assert_eq!(got[0].payload_len, 1448);
    assert_eq!(r.stats().cut_by_snaplen, 1);
}

#[test]
fn snoop_truncated_and_corrupt() {
    let s = seg(1, false);
    let f = eth_frame(&s);
    let full = snoop_file(4, &[(f.clone(), 0), (f.clone(), 0)]);
    let second = 16 + 24 + f.len().div_ceil(4) * 4;
    let (got, _, err) = read_all(full[..second + 30].to_vec());
    assert_eq!(got.len(), 1);
    let err = err.unwrap();
    assert_eq!(err.offset, second as u64);
    assert!(err.to_string().contains("truncated snoop record"), "{err}");
    let mut bad = full.clone();
    bad[second + 8..second + 12].copy_from_slice(&10u32.to_be_bytes()); // record shorter than data
    let (got, _, err) = read_all(bad);
    assert_eq!(got.len(), 1);
    assert!(matches!(err.unwrap().kind, ErrorKind::Corrupt { .. }));
    let mut bad = full;
    bad[11] = 9; // version 9
    let r = Reader::from_read(Box::new(Cursor::new(bad)), "s.snoop".into());
    assert_eq!(
        r.err().unwrap().to_string(),
        "s.snoop: byte offset 8: unsupported snoop version: version 9, expected 2"
    );
}

#[test]
fn corrupt_gzip_names_the_decompressed_offset_and_keeps_earlier_segments() {
    use std::io::Write;
    let segs: Vec<Segment> = (0..200).map(|i| seg(i % 5, false)).collect();
    let plain = pcap_file(WriteLink::Ethernet, false, 0, &segs);
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::none());
    gz.write_all(&plain).unwrap();
    let mut bytes = gz.finish().unwrap();
    // Stored (uncompressed) deflate blocks: cutting the stream in the middle ends the data early.
    bytes.truncate(bytes.len() / 2);
    let (got, r, err) = read_all(bytes);
    assert!(!got.is_empty() && got.len() < 200);
    let err = err.expect("cut gzip stream is an error");
    let msg = err.to_string();
    assert!(
        msg.starts_with("t.pcap (decompressed): byte offset "),
        "{msg}"
    );
    assert!(r.stats().gzip);
}

#[test]
fn open_errors_name_the_file() {
    let e = Reader::open(std::path::Path::new("/nonexistent/tdoc-x.pcap"))
        .err()
        .unwrap();
    assert!(matches!(e.kind, ErrorKind::Open(_)));
    assert!(
        e.to_string()
            .starts_with("/nonexistent/tdoc-x.pcap: cannot open: "),
        "{e}"
    );
    assert!(!e.to_string().contains('\n'));
}

#[test]
fn reader_is_fused_after_an_error_and_usable_as_iterator() {
    let segs: Vec<Segment> = (0..3).map(|i| seg(i, false)).collect();
    let full = pcap_file(WriteLink::Ethernet, false, 0, &segs);
    let mut r = Reader::from_read(
        Box::new(Cursor::new(full[..full.len() - 3].to_vec())),
        "t".into(),
    )
    .unwrap();
    let items: Vec<_> = r.by_ref().collect();
    assert_eq!(items.len(), 3);
    assert!(items[0].is_ok() && items[1].is_ok() && items[2].is_err());
    assert!(r.next_segment().unwrap().is_none());
    assert_eq!(r.stats().packets, 2);
}
