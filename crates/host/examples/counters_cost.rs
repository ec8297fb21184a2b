//! Cost of one `host::counters::snapshot()` (reads /proc/net/snmp, netstat, snmp6 and parses
//! them, opening the files each time) and of one `Sampler::sample()` (files kept open),
//! measured in a loop: `cargo run --release -p tcpdoctor-host --example counters_cost
//! -- [ITERATIONS]`. Prints median, p90, p99 and mean in microseconds as one JSON line.
//! Used by bench/sockets/run.sh; not a test (timings belong in bench/ only).

use std::time::Instant;

fn main() {
    let n: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(5000);
    // Warm the page cache and allocator.
    for _ in 0..100 {
        let _ = tcpdoctor_host::counters::snapshot();
    }
    let mut ns: Vec<u128> = Vec::with_capacity(n);
    let mut counters = 0;
    for _ in 0..n {
        let t0 = Instant::now();
        let s = tcpdoctor_host::counters::snapshot().expect("read /proc/net");
        ns.push(t0.elapsed().as_nanos());
        counters = s.values.len();
    }
    // Steady state: one open Sampler re-read for each snapshot (what --watch and doctor do).
    let mut sampler = tcpdoctor_host::counters::Source::default()
        .sampler()
        .expect("open /proc/net counters");
    let mut sampler_ns: Vec<u128> = Vec::with_capacity(n);
    for _ in 0..n {
        let t0 = Instant::now();
        let s = sampler.sample().expect("read /proc/net");
        sampler_ns.push(t0.elapsed().as_nanos());
        std::hint::black_box(s);
    }
    sampler_ns.sort_unstable();
    // The kernel's share: reading the same three files without parsing.
    let mut read_ns: Vec<u128> = Vec::with_capacity(n);
    let mut buf = Vec::with_capacity(16 * 1024);
    for _ in 0..n {
        let t0 = Instant::now();
        for f in ["/proc/net/snmp", "/proc/net/netstat", "/proc/net/snmp6"] {
            buf.clear();
            if let Ok(mut file) = std::fs::File::open(f) {
                let _ = std::io::Read::read_to_end(&mut file, &mut buf);
            }
        }
        read_ns.push(t0.elapsed().as_nanos());
    }
    ns.sort_unstable();
    read_ns.sort_unstable();
    let q = |v: &[u128], p: f64| v[((v.len() - 1) as f64 * p).round() as usize] as f64 / 1000.0;
    let mean = ns.iter().sum::<u128>() as f64 / ns.len() as f64 / 1000.0;
    println!(
        "{{\"iterations\":{n},\"counters\":{counters},\"median_us\":{:.1},\"p90_us\":{:.1},\"p99_us\":{:.1},\"mean_us\":{mean:.1},\"read_only_median_us\":{:.1},\"sampler_median_us\":{:.1},\"sampler_p99_us\":{:.1}}}",
        q(&ns, 0.5),
        q(&ns, 0.9),
        q(&ns, 0.99),
        q(&read_ns, 0.5),
        q(&sampler_ns, 0.5),
        q(&sampler_ns, 0.99)
    );
}
