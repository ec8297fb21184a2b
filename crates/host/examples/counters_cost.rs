//! Cost of one `host::counters::snapshot()` (reads /proc/net/snmp, netstat, snmp6 and parses
//! them), measured in a loop: `cargo run --release -p tcpdoctor-host --example counters_cost
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
    ns.sort_unstable();
    let q = |p: f64| ns[((ns.len() - 1) as f64 * p).round() as usize] as f64 / 1000.0;
    let mean = ns.iter().sum::<u128>() as f64 / ns.len() as f64 / 1000.0;
    println!(
        "{{\"iterations\":{n},\"counters\":{counters},\"median_us\":{:.1},\"p90_us\":{:.1},\"p99_us\":{:.1},\"mean_us\":{mean:.1}}}",
        q(0.5),
        q(0.9),
        q(0.99)
    );
}
