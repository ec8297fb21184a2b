//! Writes a synthetic headers-only capture for read benchmarks:
//! `capture_synth OUT.pcap PACKETS` (Ethernet, IPv4 and 10% IPv6, snap length 128,
//! a mix of handshakes, bulk data with timestamps and SACK, 1% UDP-like non-TCP frames).

use std::io::BufWriter;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use tcpdoctor_capture::write::{PcapWriter, WriteLink};
use tcpdoctor_capture::{Segment, TcpFlags, TcpOptions};

fn main() -> std::io::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let (Some(out), Some(n)) = (args.get(1), args.get(2).and_then(|s| s.parse::<u64>().ok()))
    else {
        eprintln!("usage: capture_synth OUT.pcap PACKETS");
        std::process::exit(2);
    };
    let f = std::fs::File::create(out)?;
    let mut w = PcapWriter::new(
        BufWriter::with_capacity(1 << 20, f),
        WriteLink::Ethernet,
        true,
        128,
    )?;
    // A small xorshift generator: deterministic, no dependency.
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut rnd = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let mut ts = 1_700_000_000_000_000_000u64;
    for i in 0..n {
        let r = rnd();
        ts += r % 2000;
        let flow = (r >> 16) % 5000;
        let v6 = flow % 10 == 0;
        let (src, dst) = if v6 {
            (
                IpAddr::V6(Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 1, flow as u16)),
                IpAddr::V6(Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 2, 1)),
            )
        } else {
            (
                IpAddr::V4(Ipv4Addr::new(10, 77, (flow >> 8) as u8, flow as u8)),
                IpAddr::V4(Ipv4Addr::new(10, 77, 200, 1)),
            )
        };
        let kind = r % 100;
        if kind == 0 {
            // Non-TCP: an ARP frame.
            w.write_frame(
                ts,
                &[&[0xff; 6][..], &[2; 6], &[8, 6], &[0; 28]].concat(),
                42,
            )?;
            continue;
        }
        let mut options = TcpOptions {
            timestamps: Some((i as u32, i as u32 / 2)),
            ..Default::default()
        };
        let flags = if kind < 10 {
            options.mss = Some(1460);
            options.sack_permitted = true;
            options.window_scale = Some(7);
            TcpFlags(TcpFlags::SYN)
        } else if kind < 15 {
            options.sack = [(1, 2), (3, 4), (0, 0), (0, 0)];
            options.sack_count = 2;
            TcpFlags(TcpFlags::ACK)
        } else {
            TcpFlags(TcpFlags::ACK | TcpFlags::PSH)
        };
        let seg = Segment {
            frame: 0,
            ts_ns: ts,
            src,
            dst,
            src_port: 32768 + flow as u16,
            dst_port: 8080,
            seq: (i as u32).wrapping_mul(1448),
            ack: r as u32,
            flags,
            window: 512,
            payload_len: if kind < 15 { 0 } else { 1448 },
            ip_id: 0,
            options,
        };
        w.write_segment(&seg)?;
    }
    w.into_inner()?;
    Ok(())
}
