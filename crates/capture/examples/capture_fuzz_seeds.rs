//! Writes the seed corpus for the fuzz targets: `capture_fuzz_seeds fuzz/seeds`.
//! Each target's seeds are in the shape that target expects (see `fuzzing::*_input`).

use std::net::IpAddr;
use std::path::Path;

use tcpdoctor_capture::write::{build_frame, PcapNgWriter, PcapWriter, SnoopWriter, WriteLink};
use tcpdoctor_capture::{Segment, TcpFlags, TcpOptions};

fn segs() -> Vec<Segment> {
    (0..6u32)
        .map(|i| {
            let v6 = i % 3 == 2;
            let (src, dst): (IpAddr, IpAddr) = if v6 {
                ("fd00::1".parse().unwrap(), "fd00::2".parse().unwrap())
            } else {
                ("10.77.0.1".parse().unwrap(), "10.77.0.2".parse().unwrap())
            };
            let mut options = TcpOptions {
                timestamps: Some((i, i + 1)),
                ..Default::default()
            };
            if i == 0 {
                options.mss = Some(1460);
                options.window_scale = Some(7);
                options.sack_permitted = true;
            }
            if i == 4 {
                options.sack = [(1, 2), (3, 4), (5, 6), (0, 0)];
                options.sack_count = 3;
            }
            Segment {
                frame: 0,
                ts_ns: 1_700_000_000_000_000_000 + u64::from(i) * 1_234_567,
                src,
                dst,
                src_port: 40000,
                dst_port: 5001,
                seq: i * 1000,
                ack: 9,
                flags: TcpFlags(if i == 0 { TcpFlags::SYN } else { TcpFlags::ACK }),
                window: 100,
                payload_len: i * 100,
                ip_id: 0,
                options,
            }
        })
        .collect()
}

fn main() -> std::io::Result<()> {
    let dir = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "fuzz/seeds".into());
    let dir = Path::new(&dir);
    for t in ["pcap", "pcapng", "snoop", "any"] {
        std::fs::create_dir_all(dir.join(t))?;
    }
    let s = segs();
    // pcap: selector bytes, then records. One seed per link type with a matching frame.
    let ip = |seg: &Segment| {
        let mut f = Vec::new();
        build_frame(seg, WriteLink::RawIp, &mut f);
        f
    };
    let heads: [(u8, Vec<u8>); 11] = [
        (0, vec![]),                                                  // ethernet (built whole)
        (1, vec![0, 0, 3, 4, 0, 6, 1, 2, 3, 4, 5, 6, 0, 0, 0x08, 0]), // SLL
        (
            2,
            vec![
                0x08, 0, 0, 0, 0, 0, 0, 1, 0, 1, 0, 6, 1, 2, 3, 4, 5, 6, 0, 0,
            ],
        ), // SLL2
        (3, vec![]),
        (4, vec![]),
        (5, vec![]),
        (6, vec![]),
        (7, vec![]),
        (8, 2u32.to_le_bytes().to_vec()),
        (9, 2u32.to_be_bytes().to_vec()),
        (10, [vec![1, 2, 0, 0], vec![0; 20]].concat()),
    ];
    for (idx, head) in heads {
        let frames: Vec<(u64, Vec<u8>)> = s
            .iter()
            .map(|seg| {
                let frame = match idx {
                    0 => {
                        let mut f = Vec::new();
                        build_frame(seg, WriteLink::Ethernet, &mut f);
                        f
                    }
                    1 | 2 | 8 | 9 | 10 => {
                        let mut h = head.clone();
                        if idx <= 2 && seg.src.is_ipv6() {
                            let at = if idx == 1 { 14 } else { 0 };
                            h[at..at + 2].copy_from_slice(&[0x86, 0xdd]);
                        }
                        [h, ip(seg)].concat()
                    }
                    _ => ip(seg),
                };
                (seg.ts_ns, frame)
            })
            .collect();
        for sel in [0u8, 1, 2, 0x80, 0x81] {
            let mut seed = vec![sel, idx];
            seed.extend_from_slice(&pcap_records(&frames, sel));
            std::fs::write(
                dir.join("pcap").join(format!("link{idx}-sel{sel}.bin")),
                seed,
            )?;
        }
    }
    // pcapng: byte-order selector, then the blocks after the section header.
    for tsresol in [6u8, 9, 0x80 | 20] {
        let mut w = PcapNgWriter::new(Vec::new(), WriteLink::Ethernet, tsresol)?;
        for seg in &s {
            w.write_segment(seg)?;
        }
        let file = w.into_inner()?;
        let seed = [vec![0u8], file[28..].to_vec()].concat();
        std::fs::write(
            dir.join("pcapng").join(format!("tsresol{tsresol}.bin")),
            &seed,
        )?;
        std::fs::write(
            dir.join("any").join(format!("tsresol{tsresol}.pcapng.bin")),
            &file,
        )?;
    }
    // snoop: datalink selector, then records.
    let mut w = SnoopWriter::new(Vec::new())?;
    for seg in &s {
        w.write_segment(seg)?;
    }
    let file = w.into_inner()?;
    std::fs::write(
        dir.join("snoop").join("ethernet.bin"),
        [vec![0u8], file[16..].to_vec()].concat(),
    )?;
    std::fs::write(dir.join("any").join("ethernet.snoop.bin"), &file)?;
    // any: whole files, plain and gzipped.
    let mut w = PcapWriter::new(Vec::new(), WriteLink::Ethernet, true, 96)?;
    for seg in &s {
        w.write_segment(seg)?;
    }
    let file = w.into_inner()?;
    std::fs::write(dir.join("any").join("ns-s96.pcap.bin"), &file)?;
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    std::io::Write::write_all(&mut gz, &file)?;
    std::fs::write(dir.join("any").join("ns-s96.pcap.gz.bin"), gz.finish()?)?;
    Ok(())
}

/// Record bytes of a pcap body as `fuzzing::pcap_input` interprets selector `sel`:
/// sel % 3 picks micro/nano/modified, bit 7 big-endian.
fn pcap_records(frames: &[(u64, Vec<u8>)], sel: u8) -> Vec<u8> {
    let big = sel & 0x80 != 0;
    let w32 = |v: u32| {
        if big {
            v.to_be_bytes()
        } else {
            v.to_le_bytes()
        }
    };
    let mut b = Vec::new();
    for (ts, f) in frames {
        let frac = match sel % 3 {
            1 => ts % 1_000_000_000,
            _ => ts % 1_000_000_000 / 1000,
        };
        b.extend_from_slice(&w32((ts / 1_000_000_000) as u32));
        b.extend_from_slice(&w32(frac as u32));
        b.extend_from_slice(&w32(f.len() as u32));
        b.extend_from_slice(&w32(f.len() as u32));
        if sel % 3 == 2 {
            b.extend_from_slice(&[0; 8]);
        }
        b.extend_from_slice(f);
    }
    b
}
