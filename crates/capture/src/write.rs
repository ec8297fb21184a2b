//! [`PcapWriter`]: a tiny classic-pcap writer that builds IPv4/IPv6 + TCP frames from a
//! [`Segment`], for tests and golden captures. Payload bytes are zeros; checksums are
//! correct so Wireshark/tshark show no checksum warnings.

use std::io::{self, Write};
use std::net::IpAddr;

use crate::decode::linktype;
use crate::segment::Segment;

/// The link layer of frames written.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WriteLink {
    /// Ethernet II with fixed MAC addresses (LINKTYPE_ETHERNET).
    Ethernet,
    /// Bare IPv4/IPv6 (LINKTYPE_RAW).
    RawIp,
}

impl WriteLink {
    pub fn linktype(self) -> u32 {
        match self {
            WriteLink::Ethernet => linktype::ETHERNET,
            WriteLink::RawIp => linktype::RAW,
        }
    }
}

/// Writes a little-endian pcap file.
pub struct PcapWriter<W: Write> {
    out: W,
    link: WriteLink,
    nanos: bool,
    snaplen: u32,
    frame: Vec<u8>,
}

impl<W: Write> PcapWriter<W> {
    /// Writes the file header. `snaplen` cuts every frame to that many captured bytes, like
    /// `tcpdump -s` (0 or 65535 and above keep whole frames).
    pub fn new(mut out: W, link: WriteLink, nanos: bool, snaplen: u32) -> io::Result<Self> {
        let snap = if snaplen == 0 { 262_144 } else { snaplen };
        let magic: u32 = if nanos { 0xa1b2_3c4d } else { 0xa1b2_c3d4 };
        let mut h = Vec::with_capacity(24);
        h.extend_from_slice(&magic.to_le_bytes());
        h.extend_from_slice(&2u16.to_le_bytes());
        h.extend_from_slice(&4u16.to_le_bytes());
        h.extend_from_slice(&0i32.to_le_bytes());
        h.extend_from_slice(&0u32.to_le_bytes());
        h.extend_from_slice(&snap.to_le_bytes());
        h.extend_from_slice(&link.linktype().to_le_bytes());
        out.write_all(&h)?;
        Ok(PcapWriter {
            out,
            link,
            nanos,
            snaplen: snap,
            frame: Vec::with_capacity(2048),
        })
    }

    /// Writes one TCP segment (its `frame` field is ignored; `payload_len` zero bytes follow
    /// the header, cut to the snap length).
    pub fn write_segment(&mut self, seg: &Segment) -> io::Result<()> {
        let mut frame = std::mem::take(&mut self.frame);
        build_frame(seg, self.link, &mut frame);
        let r = self.write_frame(seg.ts_ns, &frame, frame.len() as u32);
        self.frame = frame;
        r
    }

    /// Writes arbitrary frame bytes with the given original (wire) length.
    pub fn write_frame(&mut self, ts_ns: u64, data: &[u8], orig_len: u32) -> io::Result<()> {
        let cap = data.len().min(self.snaplen as usize);
        let sec = (ts_ns / 1_000_000_000) as u32;
        let frac = if self.nanos {
            (ts_ns % 1_000_000_000) as u32
        } else {
            (ts_ns % 1_000_000_000 / 1000) as u32
        };
        let mut h = [0u8; 16];
        h[0..4].copy_from_slice(&sec.to_le_bytes());
        h[4..8].copy_from_slice(&frac.to_le_bytes());
        h[8..12].copy_from_slice(&(cap as u32).to_le_bytes());
        h[12..16].copy_from_slice(&orig_len.to_le_bytes());
        self.out.write_all(&h)?;
        self.out.write_all(&data[..cap])
    }

    pub fn flush(&mut self) -> io::Result<()> {
        self.out.flush()
    }

    pub fn into_inner(mut self) -> io::Result<W> {
        self.out.flush()?;
        Ok(self.out)
    }
}

/// Writes a pcapng file (little-endian): one section, one interface, Enhanced Packet
/// Blocks; timestamps in units of 10^-`tsresol` seconds (6 = microseconds, 9 = nanoseconds).
pub struct PcapNgWriter<W: Write> {
    out: W,
    link: WriteLink,
    tsresol: u8,
    frame: Vec<u8>,
}

impl<W: Write> PcapNgWriter<W> {
    pub fn new(mut out: W, link: WriteLink, tsresol: u8) -> io::Result<Self> {
        // Section Header Block: byte-order magic, version 1.0, section length unknown (-1).
        let mut shb = Vec::new();
        shb.extend_from_slice(&0x1a2b_3c4du32.to_le_bytes());
        shb.extend_from_slice(&1u16.to_le_bytes());
        shb.extend_from_slice(&0u16.to_le_bytes());
        shb.extend_from_slice(&(-1i64).to_le_bytes());
        ng_block(&mut out, 0x0a0d_0d0a, &shb)?;
        // Interface Description Block with if_tsresol (code 9) and opt_endofopt.
        let mut idb = Vec::new();
        idb.extend_from_slice(&(link.linktype() as u16).to_le_bytes());
        idb.extend_from_slice(&0u16.to_le_bytes());
        idb.extend_from_slice(&0u32.to_le_bytes());
        idb.extend_from_slice(&[9, 0, 1, 0, tsresol, 0, 0, 0, 0, 0, 0, 0]);
        ng_block(&mut out, 1, &idb)?;
        Ok(PcapNgWriter {
            out,
            link,
            tsresol: tsresol.min(19),
            frame: Vec::with_capacity(2048),
        })
    }

    pub fn write_segment(&mut self, seg: &Segment) -> io::Result<()> {
        let mut frame = std::mem::take(&mut self.frame);
        build_frame(seg, self.link, &mut frame);
        let r = self.write_frame(seg.ts_ns, &frame, frame.len() as u32);
        self.frame = frame;
        r
    }

    pub fn write_frame(&mut self, ts_ns: u64, data: &[u8], orig_len: u32) -> io::Result<()> {
        let units = if self.tsresol <= 9 {
            ts_ns / 10u64.pow(9 - u32::from(self.tsresol))
        } else {
            ts_ns.saturating_mul(10u64.pow(u32::from(self.tsresol) - 9))
        };
        let mut b = Vec::with_capacity(20 + data.len() + 3);
        b.extend_from_slice(&0u32.to_le_bytes());
        b.extend_from_slice(&((units >> 32) as u32).to_le_bytes());
        b.extend_from_slice(&(units as u32).to_le_bytes());
        b.extend_from_slice(&(data.len() as u32).to_le_bytes());
        b.extend_from_slice(&orig_len.to_le_bytes());
        b.extend_from_slice(data);
        ng_block(&mut self.out, 6, &b)
    }

    pub fn into_inner(mut self) -> io::Result<W> {
        self.out.flush()?;
        Ok(self.out)
    }
}

fn ng_block(out: &mut impl Write, btype: u32, body: &[u8]) -> io::Result<()> {
    let pad = (4 - body.len() % 4) % 4;
    let len = (12 + body.len() + pad) as u32;
    out.write_all(&btype.to_le_bytes())?;
    out.write_all(&len.to_le_bytes())?;
    out.write_all(body)?;
    out.write_all(&[0u8; 3][..pad])?;
    out.write_all(&len.to_le_bytes())
}

/// Writes a snoop file (RFC 1761): big-endian, Ethernet (datalink type 4), microseconds.
pub struct SnoopWriter<W: Write> {
    out: W,
    frame: Vec<u8>,
}

impl<W: Write> SnoopWriter<W> {
    pub fn new(mut out: W) -> io::Result<Self> {
        out.write_all(b"snoop\0\0\0")?;
        out.write_all(&2u32.to_be_bytes())?;
        out.write_all(&4u32.to_be_bytes())?;
        Ok(SnoopWriter {
            out,
            frame: Vec::with_capacity(2048),
        })
    }

    pub fn write_segment(&mut self, seg: &Segment) -> io::Result<()> {
        let mut frame = std::mem::take(&mut self.frame);
        build_frame(seg, WriteLink::Ethernet, &mut frame);
        let r = self.write_frame(seg.ts_ns, &frame, frame.len() as u32);
        self.frame = frame;
        r
    }

    pub fn write_frame(&mut self, ts_ns: u64, data: &[u8], orig_len: u32) -> io::Result<()> {
        let pad = (4 - data.len() % 4) % 4;
        let mut h = [0u8; 24];
        h[0..4].copy_from_slice(&orig_len.to_be_bytes());
        h[4..8].copy_from_slice(&(data.len() as u32).to_be_bytes());
        h[8..12].copy_from_slice(&((24 + data.len() + pad) as u32).to_be_bytes());
        h[16..20].copy_from_slice(&((ts_ns / 1_000_000_000) as u32).to_be_bytes());
        h[20..24].copy_from_slice(&((ts_ns % 1_000_000_000 / 1000) as u32).to_be_bytes());
        self.out.write_all(&h)?;
        self.out.write_all(data)?;
        self.out.write_all(&[0u8; 3][..pad])
    }

    pub fn into_inner(mut self) -> io::Result<W> {
        self.out.flush()?;
        Ok(self.out)
    }
}

/// TCP option bytes for `seg.options`, in the order Linux sends them, NOP-padded to a
/// multiple of 4 and at most 40 bytes (SACK blocks that do not fit are left out).
pub fn tcp_options(seg: &Segment) -> Vec<u8> {
    let o = &seg.options;
    let mut v = Vec::with_capacity(40);
    if let Some(mss) = o.mss {
        v.extend_from_slice(&[2, 4]);
        v.extend_from_slice(&mss.to_be_bytes());
    }
    match (o.sack_permitted, o.timestamps) {
        (true, Some(_)) => v.extend_from_slice(&[4, 2]),
        (true, None) => v.extend_from_slice(&[1, 1, 4, 2]),
        (false, Some(_)) => v.extend_from_slice(&[1, 1]),
        (false, None) => {}
    }
    if let Some((val, ecr)) = o.timestamps {
        v.extend_from_slice(&[8, 10]);
        v.extend_from_slice(&val.to_be_bytes());
        v.extend_from_slice(&ecr.to_be_bytes());
    }
    if let Some(ws) = o.window_scale {
        v.extend_from_slice(&[1, 3, 3, ws]);
    }
    let n = usize::from(o.sack_count).min(4);
    let room = 40usize.saturating_sub(v.len() + 4) / 8;
    let n = n.min(room);
    if n > 0 {
        v.extend_from_slice(&[1, 1, 5, (2 + 8 * n) as u8]);
        for &(l, r) in &o.sack[..n] {
            v.extend_from_slice(&l.to_be_bytes());
            v.extend_from_slice(&r.to_be_bytes());
        }
    }
    while v.len() % 4 != 0 {
        v.push(1);
    }
    v
}

fn checksum_add(mut sum: u32, data: &[u8]) -> u32 {
    let mut chunks = data.chunks_exact(2);
    for c in &mut chunks {
        sum += u32::from(u16::from_be_bytes([c[0], c[1]]));
    }
    if let [last] = chunks.remainder() {
        sum += u32::from(*last) << 8;
    }
    sum
}

fn checksum_fold(mut sum: u32) -> u16 {
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !(sum as u16)
}

/// Builds the whole frame (link header, IP, TCP with options, zero payload) into `out`.
/// IPv4 when both addresses are IPv4, IPv6 otherwise (an IPv4 address is then mapped).
pub fn build_frame(seg: &Segment, link: WriteLink, out: &mut Vec<u8>) {
    out.clear();
    let v6 = seg.src.is_ipv6() || seg.dst.is_ipv6();
    if link == WriteLink::Ethernet {
        out.extend_from_slice(&[0x02, 0, 0, 0, 0, 2, 0x02, 0, 0, 0, 0, 1]);
        out.extend_from_slice(if v6 { &[0x86, 0xdd] } else { &[0x08, 0x00] });
    }
    let opts = tcp_options(seg);
    let tcp_len = 20 + opts.len() + seg.payload_len as usize;
    let ip_start = out.len();
    let to6 = |a: IpAddr| match a {
        IpAddr::V4(a) => a.to_ipv6_mapped().octets(),
        IpAddr::V6(a) => a.octets(),
    };
    let pseudo: u32;
    if v6 {
        let (s, d) = (to6(seg.src), to6(seg.dst));
        out.extend_from_slice(&[0x60, 0, 0, 0]);
        out.extend_from_slice(&(tcp_len as u16).to_be_bytes());
        out.extend_from_slice(&[6, 64]);
        out.extend_from_slice(&s);
        out.extend_from_slice(&d);
        let mut p = checksum_add(0, &s);
        p = checksum_add(p, &d);
        pseudo = p + (tcp_len as u32 >> 16) + (tcp_len as u32 & 0xffff) + 6;
    } else {
        let (IpAddr::V4(s), IpAddr::V4(d)) = (seg.src, seg.dst) else {
            unreachable!("both IPv4 when not v6")
        };
        let total = (20 + tcp_len).min(0xffff) as u16;
        out.extend_from_slice(&[0x45, 0]);
        out.extend_from_slice(&total.to_be_bytes());
        out.extend_from_slice(&seg.ip_id.to_be_bytes());
        out.extend_from_slice(&[0x40, 0, 64, 6, 0, 0]);
        out.extend_from_slice(&s.octets());
        out.extend_from_slice(&d.octets());
        let c = checksum_fold(checksum_add(0, &out[ip_start..ip_start + 20]));
        out[ip_start + 10..ip_start + 12].copy_from_slice(&c.to_be_bytes());
        let mut p = checksum_add(0, &s.octets());
        p = checksum_add(p, &d.octets());
        pseudo = p + tcp_len as u32 + 6;
    }
    let tcp_start = out.len();
    out.extend_from_slice(&seg.src_port.to_be_bytes());
    out.extend_from_slice(&seg.dst_port.to_be_bytes());
    out.extend_from_slice(&seg.seq.to_be_bytes());
    out.extend_from_slice(&seg.ack.to_be_bytes());
    out.push((((20 + opts.len()) / 4) as u8) << 4);
    out.push(seg.flags.0);
    out.extend_from_slice(&seg.window.to_be_bytes());
    out.extend_from_slice(&[0, 0, 0, 0]);
    out.extend_from_slice(&opts);
    out.resize(out.len() + seg.payload_len as usize, 0);
    let c = checksum_fold(checksum_add(pseudo, &out[tcp_start..]));
    out[tcp_start + 16..tcp_start + 18].copy_from_slice(&c.to_be_bytes());
}
