//! Support for the fuzz targets in `fuzz/` and the stable-Rust mutation test: read a whole
//! capture from bytes and check the invariants that must hold for any input.
//! Not part of the stable API.

use std::io::Cursor;

use crate::reader::{Reader, Stats};
use crate::segment::Segment;

/// Reads every segment of `data`; panics only if an invariant is broken (which is a bug).
/// Returns the number of segments read. Reads twice: segment by segment, and in batches
/// (of a size picked from the input), which must agree on every segment, count and error.
pub fn read_all(data: &[u8]) -> u64 {
    let Ok(mut r) = Reader::from_read(Box::new(Cursor::new(data.to_vec())), "fuzz".into()) else {
        return 0;
    };
    let mut n = 0u64;
    let mut last_frame = 0;
    let mut segs = Vec::new();
    let mut error = None;
    loop {
        match r.next_segment() {
            Ok(Some(s)) => {
                segs.push(s);
                n += 1;
                assert!(s.frame > last_frame, "frame numbers increase");
                last_frame = s.frame;
                assert!(usize::from(s.options.sack_count) <= s.options.sack.len());
            }
            Ok(None) => break,
            Err(e) => {
                assert!(
                    e.offset <= data.len() as u64 || r.stats().gzip,
                    "error offset inside input"
                );
                assert!(!e.to_string().contains('\n'), "one-line error");
                error = Some((e.offset, e.to_string()));
                break;
            }
        }
    }
    // Fused after the end or an error.
    assert!(matches!(r.next_segment(), Ok(None)));
    let st = r.stats();
    assert_eq!(st.packets, st.tcp_segments + st.non_tcp + st.undecodable);
    assert_eq!(st.tcp_segments, n);
    assert_eq!(
        st.packets,
        st.link_types.iter().map(|c| c.packets).sum::<u64>()
    );
    let batch = 1 + data.len() % 5;
    let (b_segs, b_stats, b_error) = read_batched(data, batch);
    assert_eq!(
        b_segs, segs,
        "read_batch({batch}) gives the segments next_segment gives"
    );
    assert_eq!(
        &b_stats, st,
        "read_batch({batch}) counts as next_segment does"
    );
    assert_eq!(
        b_error, error,
        "read_batch({batch}) ends as next_segment does"
    );
    n
}

/// Every segment of `data` read with [`Reader::read_batch`] in batches of `batch`, the
/// final counts, and the error (offset, message) that ended reading, if any.
pub fn read_batched(data: &[u8], batch: usize) -> (Vec<Segment>, Stats, Option<(u64, String)>) {
    let mut r = Reader::from_read(Box::new(Cursor::new(data.to_vec())), "fuzz".into())
        .expect("opened once already");
    let mut buf = vec![Segment::EMPTY; batch];
    let mut segs = Vec::new();
    let error = loop {
        match r.read_batch(&mut buf) {
            Ok(0) => break None,
            Ok(k) => {
                assert!(k <= batch, "no more segments than slots");
                segs.extend_from_slice(&buf[..k]);
            }
            Err(e) => break Some((e.offset, e.to_string())),
        }
    };
    // Fused after the end or an error.
    assert!(matches!(r.read_batch(&mut buf), Ok(0)));
    (segs, r.stats().clone(), error)
}

/// Builds a whole capture from a fuzz input.
pub type InputBuilder = fn(&[u8]) -> Vec<u8>;

fn whole(data: &[u8]) -> Vec<u8> {
    data.to_vec()
}

/// The fuzz targets (as named in `fuzz/Cargo.toml` and `fuzz/seeds/`) and their inputs.
pub const TARGETS: [(&str, InputBuilder); 4] = [
    ("pcap", pcap_input),
    ("pcapng", pcapng_input),
    ("snoop", snoop_input),
    ("any", whole),
];

/// Link types the fuzz inputs pick from (by one selector byte).
const LINKS: [u32; 12] = [1, 113, 276, 101, 12, 14, 228, 229, 0, 108, 226, 147];

/// A pcap file: `data[0]` picks the magic (micro/nano/modified) and byte order, `data[1]`
/// the link type; the rest is records.
pub fn pcap_input(data: &[u8]) -> Vec<u8> {
    let sel = data.first().copied().unwrap_or(0);
    let lt = LINKS[usize::from(data.get(1).copied().unwrap_or(0)) % LINKS.len()];
    let magic: u32 = [0xa1b2_c3d4, 0xa1b2_3c4d, 0xa1b2_cd34][usize::from(sel % 3)];
    let big = sel & 0x80 != 0;
    let w32 = |v: u32| {
        if big {
            v.to_be_bytes()
        } else {
            v.to_le_bytes()
        }
    };
    let w16 = |v: u16| {
        if big {
            v.to_be_bytes()
        } else {
            v.to_le_bytes()
        }
    };
    let mut f = Vec::with_capacity(24 + data.len());
    f.extend_from_slice(&w32(magic));
    f.extend_from_slice(&w16(2));
    f.extend_from_slice(&w16(4));
    f.extend_from_slice(&[0; 8]);
    f.extend_from_slice(&w32(65535));
    f.extend_from_slice(&w32(lt));
    f.extend_from_slice(data.get(2..).unwrap_or(&[]));
    f
}

/// A pcapng file: a section header in the byte order `data[0]` picks, then `data[1..]` as
/// blocks.
pub fn pcapng_input(data: &[u8]) -> Vec<u8> {
    let big = data.first().is_some_and(|b| b & 1 == 1);
    let w32 = |v: u32| {
        if big {
            v.to_be_bytes()
        } else {
            v.to_le_bytes()
        }
    };
    let w16 = |v: u16| {
        if big {
            v.to_be_bytes()
        } else {
            v.to_le_bytes()
        }
    };
    let mut f = Vec::with_capacity(28 + data.len());
    f.extend_from_slice(&w32(0x0a0d_0d0a));
    f.extend_from_slice(&w32(28));
    f.extend_from_slice(&w32(0x1a2b_3c4d));
    f.extend_from_slice(&w16(1));
    f.extend_from_slice(&w16(0));
    f.extend_from_slice(&[0xff; 8]);
    f.extend_from_slice(&w32(28));
    f.extend_from_slice(data.get(1..).unwrap_or(&[]));
    f
}

/// A snoop file: `data[0]` picks the datalink type; the rest is records.
pub fn snoop_input(data: &[u8]) -> Vec<u8> {
    let dl: u32 = [4, 0, 0x8000_0001, 0x8000_0002, 0x8000_0005, 8]
        [usize::from(data.first().copied().unwrap_or(0)) % 6];
    let mut f = b"snoop\0\0\0".to_vec();
    f.extend_from_slice(&2u32.to_be_bytes());
    f.extend_from_slice(&dl.to_be_bytes());
    f.extend_from_slice(data.get(1..).unwrap_or(&[]));
    f
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The committed seeds decode to segments through their targets' input builders, so the
    /// fuzzers start from inputs that reach deep into every reader and link type.
    #[test]
    fn seeds_reach_tcp_in_every_target() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/seeds");
        for (t, build) in TARGETS {
            let mut files = 0;
            for e in std::fs::read_dir(dir.join(t)).unwrap() {
                let p = e.unwrap().path();
                let data = std::fs::read(&p).unwrap();
                assert_eq!(read_all(&build(&data)), 6, "{}", p.display());
                files += 1;
            }
            assert!(files > 0, "{t}: no seeds");
        }
    }
}
