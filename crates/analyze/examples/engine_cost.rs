//! Time per segment of the flow engine alone: decodes up to N segments of a capture into
//! memory first, then runs [`Analyzer`] over them R times and prints the fastest run (the
//! least disturbed by other load on the machine), so engine changes can be measured apart
//! from reading and decoding.
//!
//! Usage: cargo run --release -p tcpdoctor-analyze --example engine_cost -- FILE [N] [R]

use std::time::Instant;

use tcpdoctor_analyze::{Analyzer, Config};
use tcpdoctor_capture::Reader;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let Some(path) = args.get(1) else {
        eprintln!("usage: engine_cost FILE [N] [R]");
        std::process::exit(2);
    };
    let max: usize = args
        .get(2)
        .and_then(|a| a.parse().ok())
        .unwrap_or(usize::MAX);
    let runs: usize = args.get(3).and_then(|a| a.parse().ok()).unwrap_or(5);
    let mut r = match Reader::open(std::path::Path::new(path)) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("{e}");
            std::process::exit(2);
        }
    };
    let mut segs = Vec::new();
    while segs.len() < max {
        match r.next_segment() {
            Ok(Some(s)) => segs.push(s),
            Ok(None) => break,
            Err(e) => {
                eprintln!("{e}");
                break;
            }
        }
    }
    let mut best = f64::INFINITY;
    let mut conns = 0;
    for _ in 0..runs {
        let mut a = Analyzer::new(Config::default());
        // As `tcpdoctor analyze` splits the work: only the engine's side is timed (the
        // `Prepare` side runs on the reading thread there).
        let mut prep = tcpdoctor_analyze::Prepare::default();
        let (mut keys, mut released) = (Vec::new(), Vec::new());
        let mut engine_s = 0.0;
        // Batches of the pipeline's size, taken by `push_batch` as the pipeline does.
        for chunk in segs.chunks(1024) {
            prep.release(&released);
            released.clear();
            prep.keys(chunk, &mut keys);
            let t0 = Instant::now();
            a.push_batch(chunk, &keys);
            a.released(&mut released);
            engine_s += t0.elapsed().as_secs_f64();
        }
        let t0 = Instant::now();
        let out = a.finish_prepared(prep);
        best = best.min(engine_s + t0.elapsed().as_secs_f64());
        conns = out.totals.connections;
    }
    println!(
        "{} segments, {} connections: best of {} runs {:.3} s, {:.1} ns/segment",
        segs.len(),
        conns,
        runs,
        best,
        best * 1e9 / segs.len() as f64
    );
}
