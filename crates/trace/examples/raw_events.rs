//! Prints the raw decoded records of every namespace for N seconds, then the kernel-side
//! counters: `cargo run -p tcpdoctor-trace --example raw_events -- 5` (root).
fn main() {
    let mut p =
        tcpdoctor_trace::loader::Probe::load(None, &[], tcpdoctor_trace::loader::Hooks::All, false)
            .unwrap_or_else(|e| panic!("{e}"));
    println!("unavailable: {:?}", p.unavailable());
    let secs: u64 = std::env::args()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(3);
    let end = std::time::Instant::now() + std::time::Duration::from_secs(secs);
    while std::time::Instant::now() < end {
        std::thread::sleep(std::time::Duration::from_millis(50));
        p.drain(|e| println!("{e:?}"));
    }
    println!("{:?}", p.counters().unwrap());
    println!("{:?}", p.drop_reasons().unwrap());
}
