//! Writes the captures of the analyze memory benchmark (bench/analyze/memory.sh):
//!
//! * `memory_captures clients N OUT.pcap RATE`: N distinct client addresses, each opening
//!   one connection to 10.200.0.1:80 (handshake, a 100-byte request, a 300-byte answer,
//!   the client closes first), RATE new connections a second;
//! * `memory_captures synflood N OUT.pcap RATE`: N SYNs from N distinct addresses to
//!   10.200.0.1:80, RATE a second, none answered, none resent.
//!
//! Ethernet, microsecond pcap, payload bytes zero (headers only matter).

use std::io::BufWriter;
use std::net::{IpAddr, Ipv4Addr};

use tcpdoctor_capture::write::{PcapWriter, WriteLink};
use tcpdoctor_capture::{Segment, TcpFlags, TcpOptions};

const A: u8 = TcpFlags::ACK;
const S: u8 = TcpFlags::SYN;
const F: u8 = TcpFlags::FIN;
const P: u8 = TcpFlags::PSH;

fn main() -> std::io::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let usage = || {
        eprintln!("usage: memory_captures clients|synflood N OUT.pcap RATE_PER_S");
        std::process::exit(2);
    };
    let (Some(mode), Some(n), Some(out), Some(rate)) = (
        args.get(1),
        args.get(2).and_then(|s| s.parse::<u32>().ok()),
        args.get(3),
        args.get(4).and_then(|s| s.parse::<u64>().ok()),
    ) else {
        usage();
        unreachable!()
    };
    if rate == 0 {
        usage();
    }
    let mut w = PcapWriter::new(
        BufWriter::with_capacity(1 << 20, std::fs::File::create(out)?),
        WriteLink::Ethernet,
        false,
        128,
    )?;
    let server = IpAddr::V4(Ipv4Addr::new(10, 200, 0, 1));
    let t0 = 1_700_000_000_000_000_000u64;
    let every_ns = 1_000_000_000 / rate;
    for i in 0..n {
        // Client addresses from 11.0.0.0 up, one each.
        let client = IpAddr::V4(Ipv4Addr::from(0x0b00_0000 + i));
        let cport = 32768 + (i % 28_000) as u16;
        let t = t0 + u64::from(i) * every_ns;
        let isn = i.wrapping_mul(2_654_435_761);
        let seg = |dt_us: u64, c2s: bool, flags: u8, seq: u32, ack: u32, len: u32| {
            let (src, dst, sp, dp) = if c2s {
                (client, server, cport, 80)
            } else {
                (server, client, 80, cport)
            };
            Segment {
                frame: 0,
                ts_ns: t + dt_us * 1_000,
                src,
                dst,
                src_port: sp,
                dst_port: dp,
                seq,
                ack,
                flags: TcpFlags(flags),
                window: 64240,
                payload_len: len,
                ip_id: 0,
                options: TcpOptions {
                    mss: (flags & S != 0).then_some(1460),
                    ..TcpOptions::default()
                },
            }
        };
        if mode == "synflood" {
            w.write_segment(&seg(0, true, S, isn, 0, 0))?;
            continue;
        }
        if mode != "clients" {
            usage();
        }
        let sisn = isn ^ 0x5555_5555;
        let (c1, s1) = (isn.wrapping_add(1), sisn.wrapping_add(1));
        let (c2, s2) = (c1.wrapping_add(100), s1.wrapping_add(300));
        for x in [
            seg(0, true, S, isn, 0, 0),
            seg(100, false, S | A, sisn, c1, 0),
            seg(200, true, A | P, c1, s1, 100),
            seg(300, false, A | P, s1, c2, 300),
            seg(400, true, F | A, c2, s2, 0),
            seg(500, false, F | A, s2, c2.wrapping_add(1), 0),
            seg(600, true, A, c2.wrapping_add(1), s2.wrapping_add(1), 0),
        ] {
            w.write_segment(&x)?;
        }
    }
    w.into_inner()?;
    Ok(())
}
