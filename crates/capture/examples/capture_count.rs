//! Read throughput: `capture_count FILE [--pcap-parser]` reads every TCP segment of FILE
//! (in batches of 4096, as `tcpdoctor analyze` does) and prints packets/s. `--pcap-parser` runs the same loop with pcap-parser 0.17 framing and
//! etherparse 0.21 `LaxSlicedPacket` decoding (pcap, Ethernet only), for comparison.

use std::path::Path;
use std::time::Instant;

use tcpdoctor_capture::{Reader, Segment};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let Some(file) = args.get(1) else {
        eprintln!("usage: capture_count FILE [--pcap-parser]");
        std::process::exit(2);
    };
    let t0 = Instant::now();
    let (packets, tcp, checksum) = if args.iter().any(|a| a == "--pcap-parser") {
        crates_path(file)
    } else {
        let mut r = match Reader::open(Path::new(file)) {
            Ok(r) => r,
            Err(e) => {
                eprintln!("{e}");
                std::process::exit(2);
            }
        };
        let mut sum = 0u64;
        let mut batch = vec![Segment::EMPTY; 4096];
        loop {
            match r.read_batch(&mut batch) {
                Ok(0) => break,
                Ok(n) => {
                    for s in &batch[..n] {
                        sum = sum.wrapping_add(u64::from(s.seq) + u64::from(s.payload_len));
                    }
                }
                Err(e) => {
                    eprintln!("{e}");
                    break;
                }
            }
        }
        (r.stats().packets, r.stats().tcp_segments, sum)
    };
    let s = t0.elapsed().as_secs_f64();
    println!(
        "packets={packets} tcp={tcp} checksum={checksum} elapsed_s={s:.3} packets_per_s={:.0}",
        packets as f64 / s
    );
}

fn crates_path(file: &str) -> (u64, u64, u64) {
    use etherparse::{LaxNetSlice, LaxSlicedPacket, TransportSlice};
    use pcap_parser::traits::PcapReaderIterator;
    use pcap_parser::{LegacyPcapReader, PcapBlockOwned, PcapError};
    let f = std::fs::File::open(file).expect("open");
    let mut reader = LegacyPcapReader::new(2 << 20, f).expect("pcap header");
    let (mut packets, mut tcp, mut sum) = (0u64, 0u64, 0u64);
    loop {
        match reader.next() {
            Ok((off, block)) => {
                if let PcapBlockOwned::Legacy(b) = block {
                    packets += 1;
                    if let Ok(p) = LaxSlicedPacket::from_ethernet(b.data) {
                        if let Some(TransportSlice::Tcp(t)) = &p.transport {
                            tcp += 1;
                            let ip_payload = match &p.net {
                                Some(LaxNetSlice::Ipv4(ip)) => {
                                    ip.header().total_len() as u64
                                        - ip.header().slice().len() as u64
                                }
                                Some(LaxNetSlice::Ipv6(ip)) => ip.header().payload_length() as u64,
                                _ => 0,
                            };
                            let payload = ip_payload
                                .saturating_sub(t.slice().len() as u64 - t.payload().len() as u64);
                            sum = sum.wrapping_add(u64::from(t.sequence_number()) + payload);
                        }
                    }
                }
                reader.consume(off);
            }
            Err(PcapError::Eof) => break,
            Err(PcapError::Incomplete(_)) => {
                if let Err(e) = reader.refill() {
                    eprintln!("refill: {e:?}");
                    break;
                }
            }
            Err(e) => {
                eprintln!("{e:?}");
                break;
            }
        }
    }
    (packets, tcp, sum)
}
