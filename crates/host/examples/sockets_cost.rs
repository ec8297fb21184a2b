//! Cost of one `host::sockets::census()` + `analyze()` in the current network namespace:
//! `cargo run --release -p tcpdoctor-host --example sockets_cost -- [ITERATIONS]`. Prints
//! the socket count and median/p90 census and analysis times in microseconds (JSON line).
//! Used by bench/sockets/run.sh inside a namespace holding many TIME_WAIT sockets.

use std::time::Instant;

use tcpdoctor_host::sockets::{self, Filter};

fn main() {
    let n: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(20);
    let mut census_us = Vec::with_capacity(n);
    let mut analyze_us = Vec::with_capacity(n);
    let mut count = 0;
    for _ in 0..n {
        let t0 = Instant::now();
        let c = sockets::census(&Filter::default()).expect("sock_diag census");
        let t1 = Instant::now();
        let a = sockets::analyze(&c, None);
        let t2 = Instant::now();
        count = a.summary.total_sockets;
        census_us.push((t1 - t0).as_micros() as u64);
        analyze_us.push((t2 - t1).as_micros() as u64);
    }
    census_us.sort_unstable();
    analyze_us.sort_unstable();
    let q = |v: &[u64], p: f64| v[((v.len() - 1) as f64 * p).round() as usize];
    println!(
        "{{\"iterations\":{n},\"sockets\":{count},\"census_median_us\":{},\"census_p90_us\":{},\"analyze_median_us\":{},\"analyze_p90_us\":{}}}",
        q(&census_us, 0.5),
        q(&census_us, 0.9),
        q(&analyze_us, 0.5),
        q(&analyze_us, 0.9)
    );
}
