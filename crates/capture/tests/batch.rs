//! `Reader::read_batch` against `Reader::next_segment` on captures large enough to cross
//! many read-buffer refills, delivered in uneven chunks, truncated and corrupted: the batch
//! path must give the same segments, counts and errors (with the same byte offsets).

use std::io::{self, Cursor, Read};
use std::net::IpAddr;

use tcpdoctor_capture::write::{build_frame, PcapNgWriter, PcapWriter, WriteLink};
use tcpdoctor_capture::{Reader, Segment, Stats, TcpFlags, TcpOptions};

/// A source that hands out at most `chunk` bytes per read, like a pipe.
struct Chunked {
    data: Vec<u8>,
    at: usize,
    chunk: usize,
}

impl Read for Chunked {
    fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
        let n = out.len().min(self.chunk).min(self.data.len() - self.at);
        out[..n].copy_from_slice(&self.data[self.at..self.at + n]);
        self.at += n;
        Ok(n)
    }
}

fn open(data: &[u8], chunk: usize) -> Reader {
    let src: Box<dyn Read + Send> = if chunk == 0 {
        Box::new(Cursor::new(data.to_vec()))
    } else {
        Box::new(Chunked {
            data: data.to_vec(),
            at: 0,
            chunk,
        })
    };
    Reader::from_read(src, "t.pcap".into()).unwrap()
}

type Outcome = (Vec<Segment>, Stats, Option<(u64, String)>);

fn one_by_one(data: &[u8], chunk: usize) -> Outcome {
    let mut r = open(data, chunk);
    let mut segs = Vec::new();
    let err = loop {
        match r.next_segment() {
            Ok(Some(s)) => segs.push(s),
            Ok(None) => break None,
            Err(e) => break Some((e.offset, e.to_string())),
        }
    };
    (segs, r.stats().clone(), err)
}

fn batched(data: &[u8], chunk: usize, batch: usize) -> Outcome {
    let mut r = open(data, chunk);
    // Slots start out dirty: read_batch must overwrite every field of a segment it returns.
    let mut dirty = Segment::EMPTY;
    dirty.options.mss = Some(1);
    dirty.options.sack_count = 3;
    dirty.src = "fd00::9".parse().unwrap();
    let mut buf = vec![dirty; batch];
    let mut segs = Vec::new();
    let err = loop {
        match r.read_batch(&mut buf) {
            Ok(0) => break None,
            Ok(n) => segs.extend_from_slice(&buf[..n]),
            Err(e) => break Some((e.offset, e.to_string())),
        }
    };
    assert!(matches!(r.read_batch(&mut buf), Ok(0)), "fused");
    (segs, r.stats().clone(), err)
}

fn seg(i: u32) -> Segment {
    let v6 = i % 5 == 4;
    let (src, dst): (IpAddr, IpAddr) = if v6 {
        ("fd00::1".parse().unwrap(), "fd00::2".parse().unwrap())
    } else {
        ("10.1.2.3".parse().unwrap(), "10.9.8.7".parse().unwrap())
    };
    let mut options = TcpOptions::default();
    match i % 4 {
        0 => options.timestamps = Some((i, i + 1)),
        1 => {
            options.mss = Some(1460);
            options.window_scale = Some(7);
            options.sack_permitted = true;
            options.timestamps = Some((i, 0));
        }
        2 => {
            options.sack = [(i, i + 10), (0, 0), (0, 0), (0, 0)];
            options.sack_count = 1;
        }
        _ => {}
    }
    Segment {
        frame: 0,
        ts_ns: 1_700_000_000_000_000_000 + u64::from(i) * 1_234_567,
        src,
        dst,
        src_port: 40000 + (i % 1000) as u16,
        dst_port: 80,
        seq: i.wrapping_mul(2_654_435_761),
        ack: i,
        flags: TcpFlags(TcpFlags::ACK | (i % 3) as u8),
        window: 500,
        payload_len: (i % 1400) * u32::from(!i.is_multiple_of(7)),
        ip_id: 0,
        options,
    }
}

/// A pcap of `n` records: TCP segments with a non-TCP frame (ARP), an undecodable one
/// (cut inside the IP header) and a frame longer than the snap length sprinkled in.
fn pcap(n: u32, link: WriteLink, nanos: bool) -> Vec<u8> {
    let mut w = PcapWriter::new(Vec::new(), link, nanos, 0).unwrap();
    let mut f = Vec::new();
    for i in 0..n {
        let s = seg(i);
        match i % 97 {
            13 if link == WriteLink::Ethernet => {
                let mut arp = vec![0xffu8; 12];
                arp.extend_from_slice(&[0x08, 0x06]);
                arp.extend_from_slice(&[0; 28]);
                w.write_frame(s.ts_ns, &arp, 42).unwrap();
            }
            29 => {
                f.clear();
                build_frame(&s, link, &mut f);
                w.write_frame(s.ts_ns, &f[..f.len().min(20)], f.len() as u32)
                    .unwrap();
            }
            41 => {
                f.clear();
                build_frame(&s, link, &mut f);
                w.write_frame(s.ts_ns, &f, f.len() as u32 + 1000).unwrap();
            }
            _ => w.write_segment(&s).unwrap(),
        }
    }
    w.into_inner().unwrap()
}

fn assert_same(data: &[u8], what: &str) {
    for chunk in [0, 997, 65_536 + 3] {
        let want = one_by_one(data, chunk);
        for batch in [1, 3, 4096] {
            let got = batched(data, chunk, batch);
            assert_eq!(got.2, want.2, "{what}: error, chunk {chunk} batch {batch}");
            assert_eq!(got.1, want.1, "{what}: stats, chunk {chunk} batch {batch}");
            assert!(
                got.0 == want.0,
                "{what}: segments, chunk {chunk} batch {batch}"
            );
        }
    }
}

#[test]
fn batches_equal_single_segments_across_buffer_refills() {
    // ~60k records, more than 2 MiB: several refills and buffer compactions.
    let data = pcap(60_000, WriteLink::Ethernet, false);
    assert!(data.len() > 4 << 20);
    let (segs, st, err) = one_by_one(&data, 0);
    assert!(err.is_none());
    assert!(st.non_tcp > 0 && st.undecodable > 0 && st.cut_by_snaplen > 0);
    assert_eq!(segs.len() as u64, st.tcp_segments);
    assert_same(&data, "ethernet");
    assert_same(&pcap(3000, WriteLink::RawIp, true), "raw ip, ns");
}

#[test]
fn big_endian_pcap_batches_equal_single_segments() {
    // Rewrite the little-endian file big-endian: magic, header fields, record headers.
    let le = pcap(3000, WriteLink::Ethernet, false);
    let mut be = le.clone();
    let swap = |b: &mut [u8], at: usize, n: usize| b[at..at + n].reverse();
    for (at, n) in [(0, 4), (4, 2), (6, 2), (8, 4), (12, 4), (16, 4), (20, 4)] {
        swap(&mut be, at, n);
    }
    let mut at = 24;
    while at < le.len() {
        let caplen = u32::from_le_bytes(le[at + 8..at + 12].try_into().unwrap()) as usize;
        for k in 0..4 {
            swap(&mut be, at + 4 * k, 4);
        }
        at += 16 + caplen;
    }
    assert_eq!(one_by_one(&be, 0).0, one_by_one(&le, 0).0);
    assert_same(&be, "big-endian");
}

#[test]
fn truncated_and_corrupt_pcap_give_the_same_segments_then_the_same_error() {
    let data = pcap(5000, WriteLink::Ethernet, false);
    // Cut inside the last record, inside a record header, and exactly between records.
    for cut in [data.len() - 7, data.len() - 70, data.len() - 90, 1000, 25] {
        let d = &data[..cut];
        let (_, _, err) = one_by_one(d, 0);
        assert!(err.is_some() || cut == 24, "cut at {cut} is an error");
        assert_same(d, "truncated");
    }
    // An impossible captured length in the middle names its offset.
    let mut bad = data.clone();
    let mut at = 24;
    for _ in 0..2500 {
        let caplen = u32::from_le_bytes(bad[at + 8..at + 12].try_into().unwrap()) as usize;
        at += 16 + caplen;
    }
    bad[at + 8..at + 12].copy_from_slice(&0xffff_fff0u32.to_le_bytes());
    let (segs, _, err) = one_by_one(&bad, 0);
    assert_eq!(err.unwrap().0, at as u64 + 8);
    assert!(segs.len() > 2000);
    assert_same(&bad, "corrupt caplen");
}

#[test]
fn pcapng_batches_equal_single_segments() {
    let mut w = PcapNgWriter::new(Vec::new(), WriteLink::Ethernet, 9).unwrap();
    for i in 0..20_000 {
        w.write_segment(&seg(i)).unwrap();
    }
    let data = w.into_inner().unwrap();
    assert_same(&data, "pcapng");
    assert_same(&data[..data.len() - 5], "pcapng truncated");
}

/// pcapng blocks in either byte order (pcapng sections 4.1-4.4, 4.6).
struct Ng {
    big: bool,
    out: Vec<u8>,
}

impl Ng {
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
    fn block(&mut self, btype: u32, mut body: Vec<u8>) {
        while !body.len().is_multiple_of(4) {
            body.push(0);
        }
        let len = self.u32(12 + body.len() as u32);
        let t = self.u32(btype);
        self.out.extend_from_slice(&t);
        self.out.extend_from_slice(&len);
        self.out.extend_from_slice(&body);
        self.out.extend_from_slice(&len);
    }
    /// A section header: switches the byte order and forgets the interfaces.
    fn shb(&mut self, big: bool) {
        self.big = big;
        let mut b = self.u32(0x1a2b_3c4d).to_vec();
        b.extend_from_slice(&self.u16(1));
        b.extend_from_slice(&self.u16(0));
        b.extend_from_slice(&[0xff; 8]);
        self.block(0x0a0d_0d0a, b);
    }
    fn idb(&mut self, lt: u16, tsresol: Option<u8>, tsoffset_s: Option<i64>) {
        let mut b = self.u16(lt).to_vec();
        b.extend_from_slice(&[0, 0, 0, 0, 0, 0]);
        if let Some(r) = tsresol {
            b.extend_from_slice(&self.u16(9));
            b.extend_from_slice(&self.u16(1));
            b.extend_from_slice(&[r, 0, 0, 0]);
        }
        if let Some(o) = tsoffset_s {
            b.extend_from_slice(&self.u16(14));
            b.extend_from_slice(&self.u16(8));
            b.extend_from_slice(&if self.big {
                o.to_be_bytes()
            } else {
                o.to_le_bytes()
            });
        }
        self.block(1, b);
    }
    fn epb(&mut self, iface: u32, units: u64, frame: &[u8], orig: u32) {
        let mut b = self.u32(iface).to_vec();
        b.extend_from_slice(&self.u32((units >> 32) as u32));
        b.extend_from_slice(&self.u32(units as u32));
        b.extend_from_slice(&self.u32(frame.len() as u32));
        b.extend_from_slice(&self.u32(orig));
        b.extend_from_slice(frame);
        self.block(6, b);
    }
    fn spb(&mut self, frame: &[u8]) {
        let mut b = self.u32(frame.len() as u32).to_vec();
        b.extend_from_slice(frame);
        self.block(3, b);
    }
    fn isb(&mut self, drops: u64) {
        let mut b = self.u32(0).to_vec();
        b.extend_from_slice(&[0; 8]);
        b.extend_from_slice(&self.u16(5));
        b.extend_from_slice(&self.u16(8));
        b.extend_from_slice(&if self.big {
            drops.to_be_bytes()
        } else {
            drops.to_le_bytes()
        });
        self.block(5, b);
    }
}

#[test]
fn pcapng_mixed_blocks_interfaces_and_sections_batch_like_single_segments() {
    let mut ng = Ng {
        big: false,
        out: Vec::new(),
    };
    let (mut eth, mut raw) = (Vec::new(), Vec::new());
    for i in 0..12_000u32 {
        if i % 4000 == 0 {
            // A new section, in the other byte order every time: Ethernet in microseconds,
            // raw IP in nanoseconds with an offset, Ethernet in 2^-10 s.
            ng.shb(i % 8000 == 4000);
            ng.idb(1, None, None);
            ng.idb(101, Some(9), Some(-5));
            ng.idb(1, Some(0x8a), None);
        }
        let s = seg(i);
        eth.clear();
        build_frame(&s, WriteLink::Ethernet, &mut eth);
        raw.clear();
        build_frame(&s, WriteLink::RawIp, &mut raw);
        // The same moment, 10 s + i ms, in each interface's units (packets in time order: a
        // packet a second older than one before it ends the input, `BACK_IN_TIME`).
        let ms = 10_000 + u64::from(i);
        let (us, ns_plus_5s, k) = (ms * 1_000, ms * 1_000_000 + 5_000_000_000, ms * 1024 / 1000);
        if i == 11_999 {
            // A timestamp too large for nanoseconds in 64 bits (clamped), last.
            ng.epb(0, u64::MAX - 5, &eth, eth.len() as u32);
            continue;
        }
        match i % 53 {
            // The previous packet's timestamp, interface 0.
            7 => ng.spb(&eth),
            // An interface never described.
            11 => ng.epb(9, us, &eth, eth.len() as u32),
            19 => ng.isb(u64::from(i)),
            23 => ng.epb(0, us, &eth[..30], eth.len() as u32),
            _ => match i % 3 {
                0 => ng.epb(0, us, &eth, eth.len() as u32 + 7),
                1 => ng.epb(1, ns_plus_5s, &raw, raw.len() as u32),
                _ => ng.epb(2, k, &eth, eth.len() as u32),
            },
        }
    }
    let data = ng.out;
    let (segs, st, err) = one_by_one(&data, 0);
    assert!(err.is_none());
    assert!(segs.len() > 10_000 && st.undecodable_link_type > 0 && st.capture_drops > 0);
    assert_same(&data, "pcapng mixed");
    assert_same(&data[..data.len() / 2 + 3], "pcapng mixed, truncated");
}

/// A file in the temporary directory, removed when dropped.
struct TempFile(std::path::PathBuf);

impl TempFile {
    fn new(name: &str, data: &[u8]) -> TempFile {
        let p = std::env::temp_dir().join(format!("tdoc-{}-{name}", std::process::id()));
        std::fs::write(&p, data).unwrap();
        TempFile(p)
    }
}

impl Drop for TempFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// `Reader::open` maps a regular file: the same segments, counts and errors (with the same
/// byte offsets) as reading the same bytes, whole or cut anywhere.
#[test]
fn mapped_files_read_like_streams() {
    let data = pcap(60_000, WriteLink::Ethernet, false);
    for cut in [
        data.len(),
        data.len() - 7,
        data.len() - 90,
        4 << 20,
        1000,
        25,
    ] {
        let d = &data[..cut];
        let f = TempFile::new("mapped.pcap", d);
        let mut r = Reader::open(&f.0).unwrap_or_else(|e| panic!("cut {cut}: {e}"));
        let mut buf = vec![Segment::EMPTY; 1024];
        let mut segs = Vec::new();
        let err = loop {
            match r.read_batch(&mut buf) {
                Ok(0) => break None,
                Ok(n) => segs.extend_from_slice(&buf[..n]),
                Err(e) => {
                    break Some((
                        e.offset,
                        e.to_string().replace(&*f.0.to_string_lossy(), "t.pcap"),
                    ))
                }
            }
        };
        let want = batched(d, 0, 1024);
        assert_eq!(err, want.2, "cut {cut}: error");
        assert_eq!(r.stats(), &want.1, "cut {cut}: stats");
        assert!(segs == want.0, "cut {cut}: segments");
    }
    let f = TempFile::new("short.pcap", &data[..3]);
    let e = Reader::open(&f.0).err().unwrap().to_string();
    assert!(
        e.ends_with("byte offset 0: truncated file header (needs 4 bytes, 3 left)"),
        "{e}"
    );
}

/// A mapped file cut short while it is read (another process truncates it) ends the input
/// with a one-line error naming the offset where reading stopped, instead of SIGBUS; the
/// segments before it are the file's.
#[test]
fn a_mapped_file_that_shrinks_while_read_is_an_error_not_a_crash() {
    let data = pcap(60_000, WriteLink::Ethernet, false);
    let whole = batched(&data, 0, 1024);
    // Far from the end (reading faults past the new end), and inside the last page (no
    // fault: the file is asked at the end).
    for keep in [data.len() / 3, data.len() - 10] {
        let f = TempFile::new("shrinks.pcap", &data);
        let mut r = Reader::open(&f.0).unwrap();
        let mut buf = vec![Segment::EMPTY; 1024];
        let mut segs = Vec::new();
        let mut cut = false;
        let err = loop {
            if !cut && segs.len() > 3000 {
                std::fs::OpenOptions::new()
                    .write(true)
                    .open(&f.0)
                    .unwrap()
                    .set_len(keep as u64)
                    .unwrap();
                cut = true;
            }
            match r.read_batch(&mut buf) {
                Ok(0) => break None,
                Ok(n) => segs.extend_from_slice(&buf[..n]),
                Err(e) => break Some(e),
            }
        };
        let e = err.unwrap_or_else(|| panic!("keep {keep}: no error"));
        let msg = e.to_string();
        assert!(
            msg.contains(&format!("shrank to {keep} bytes")) && !msg.contains('\n'),
            "{msg}"
        );
        assert!(e.offset <= keep as u64 && e.offset > 0, "{msg}");
        assert_eq!(r.stats().bytes_read, e.offset);
        assert!(
            segs.len() > 3000 && segs[..] == whole.0[..segs.len()],
            "keep {keep}"
        );
        assert!(matches!(r.read_batch(&mut buf), Ok(0)), "fused");
    }
}
