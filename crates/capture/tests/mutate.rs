//! Stable-Rust fuzzing: feeds mutated and truncated variants of the seed captures in
//! `fuzz/seeds` through every reader (the same input builders as the `cargo fuzz` targets)
//! and checks that nothing panics and the counting invariants hold
//! (`tcpdoctor_capture::fuzzing::read_all`). Deterministic (seeded). The number of variants
//! per run is `TDOC_FUZZ_ITERS` (default 30000, a few seconds).

use std::path::Path;

use tcpdoctor_capture::fuzzing::{read_all, TARGETS};

struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: usize) -> usize {
        if n == 0 {
            0
        } else {
            (self.next() % n as u64) as usize
        }
    }
}

const INTERESTING: [u32; 10] = [
    0,
    1,
    3,
    4,
    11,
    12,
    0x7fff_ffff,
    0x8000_0000,
    0xffff_fffc,
    0xffff_ffff,
];

fn mutate(rng: &mut Rng, seed: &[u8]) -> Vec<u8> {
    let mut d = seed.to_vec();
    for _ in 0..1 + rng.below(4) {
        match rng.below(7) {
            // Flip bits in a byte.
            0 if !d.is_empty() => {
                let i = rng.below(d.len());
                d[i] ^= 1 << rng.below(8);
            }
            // Overwrite a byte.
            1 if !d.is_empty() => {
                let i = rng.below(d.len());
                d[i] = rng.next() as u8;
            }
            // Overwrite a 32-bit field (lengths!) with an interesting value, either order.
            2 if d.len() >= 4 => {
                let i = rng.below(d.len() - 3);
                let v = INTERESTING[rng.below(INTERESTING.len())];
                let b = if rng.next() & 1 == 0 {
                    v.to_le_bytes()
                } else {
                    v.to_be_bytes()
                };
                d[i..i + 4].copy_from_slice(&b);
            }
            // Small 16-bit value (header lengths, option lengths).
            3 if d.len() >= 2 => {
                let i = rng.below(d.len() - 1);
                d[i..i + 2].copy_from_slice(&(rng.below(80) as u16).to_be_bytes());
            }
            // Delete a chunk.
            4 if !d.is_empty() => {
                let i = rng.below(d.len());
                let n = rng.below(d.len() - i).min(64);
                d.drain(i..i + n);
            }
            // Duplicate a chunk.
            5 if !d.is_empty() => {
                let i = rng.below(d.len());
                let n = rng.below(d.len() - i).min(256);
                let chunk = d[i..i + n].to_vec();
                let at = rng.below(d.len());
                d.splice(at..at, chunk);
            }
            // Truncate.
            _ => {
                let n = rng.below(d.len() + 1);
                d.truncate(n);
            }
        }
    }
    d
}

#[test]
fn mutated_and_truncated_seeds_never_panic() {
    let iters: usize = std::env::var("TDOC_FUZZ_ITERS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(30_000);
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/seeds");
    let mut rng = Rng(0x5eed_cafe_f00d_d00d);
    let mut total = 0usize;
    for (t, build) in TARGETS {
        let mut seeds = Vec::new();
        for e in std::fs::read_dir(dir.join(t)).unwrap() {
            seeds.push(std::fs::read(e.unwrap().path()).unwrap());
        }
        seeds.sort();
        // Every truncation of every seed.
        let mut segments = 0u64;
        for s in &seeds {
            for cut in 0..=s.len() {
                segments += read_all(&build(&s[..cut]));
                total += 1;
            }
        }
        // Random mutations, weighted equally across targets.
        for _ in 0..iters / TARGETS.len() {
            let s = &seeds[rng.below(seeds.len())];
            segments += read_all(&build(&mutate(&mut rng, s)));
            total += 1;
        }
        assert!(segments > 0, "{t}: mutations never reached a TCP segment");
    }
    eprintln!("mutated_and_truncated_seeds_never_panic: {total} inputs, no panic");
}
