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
