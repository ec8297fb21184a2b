//! `tcpdoctor burst` on a veth carrying a known on/off pattern.

mod support;

use std::net::UdpSocket;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A UDP socket created inside network namespace `ns` (setns on a short-lived thread).
fn udp_in(ns: &support::Netns) -> UdpSocket {
    support::in_netns(ns, || UdpSocket::bind("0.0.0.0:0").expect("bind in netns"))
}

/// Every `period`, sends `count` datagrams of 1000 bytes at once, until `stop` or `limit`.
/// A tbf on the sender's veth spreads each batch at its rate, in the kernel, so the on-time
/// does not depend on how this thread is scheduled. Returns the number sent.
fn batch_sender(
    sock: UdpSocket,
    to: &str,
    count: u32,
    period: Duration,
    limit: Duration,
    stop: Arc<AtomicBool>,
) -> u64 {
    let payload = [0x5au8; 1000];
    let start = Instant::now();
    let mut sent = 0;
    let mut k = 0u32;
    while !stop.load(Ordering::Relaxed) && start.elapsed() < limit {
        if let Some(wait) = (start + period * k).checked_duration_since(Instant::now()) {
            std::thread::sleep(wait);
        }
        for _ in 0..count {
            if sock.send_to(&payload, to).is_ok() {
                sent += 1;
            }
        }
        // A late wake-up skips periods instead of sending two batches back to back.
        k = (start.elapsed().as_nanos() / period.as_nanos()) as u32 + 1;
    }
    sent
}

#[test]
fn burst_measures_a_ten_percent_duty_cycle_at_1ms() {
    if !support::require_root("burst_measures_a_ten_percent_duty_cycle_at_1ms") {
        return;
    }
    let a = support::Netns::new("bsa");
    let b = support::Netns::new("bsb");
    let (ia, ib) = support::veth(&a, "10.77.40.1/24", &b, "10.77.40.2/24");
    // 60 datagrams of 1000 B payload are 60 x 1042 B on the wire (UDP 8 + IPv4 20 +
    // Ethernet 14); at 100 Mbit/s that takes 5.0 ms. One batch every 50 ms: on 10% of the
    // time, so the busiest 1 ms carries 10x the average.
    a.exec(&format!(
        "tc qdisc add dev {ia} root tbf rate 100mbit burst 3000 limit 200000"
    ));
    let sock = udp_in(&a);
    let stop = Arc::new(AtomicBool::new(false));
    let sender = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            batch_sender(
                sock,
                "10.77.40.2:9100",
                60,
                Duration::from_millis(50),
                Duration::from_secs(6),
                stop,
            )
        })
    };
    std::thread::sleep(Duration::from_millis(200));
    let (code, out, err) = support::run_in(
        &b,
        &[
            "burst",
            &ib,
            "--direction",
            "rx",
            "--duration",
            "2s",
            "--interval",
            "100us",
            "--json",
        ],
    );
    stop.store(true, Ordering::SeqCst);
    let sent = sender.join().unwrap();
    let v = support::json(&out, &err);
    assert!(sent > 1000, "sender sent only {sent}");
    assert_eq!(v["command"], "burst");
    assert_eq!(v["iface"], ib.as_str());
    let d = &v["directions"][0];
    assert_eq!(d["direction"], "rx");
    let res = d["resolutions"].as_array().unwrap();
    let ms = res
        .iter()
        .find(|r| r["resolution_ns"] == 1_000_000)
        .unwrap_or_else(|| panic!("no 1ms row: {v}"));
    let ratio = ms["max_avg_ratio"].as_f64().unwrap();
    eprintln!("max/avg at 1ms: {ratio}; sampling {}", v["sampling"]);
    // True ratio: 5 ms on in every 50 ms = 10x.
    assert!(
        (5.0..=15.0).contains(&ratio),
        "max/avg at 1ms = {ratio}\n{v}"
    );
    // At 100 ms each bin holds two bursts: the traffic looks smooth.
    let slow = res
        .iter()
        .find(|r| r["resolution_ns"] == 100_000_000)
        .unwrap();
    assert!(slow["max_avg_ratio"].as_f64().unwrap() < 2.0, "{v}");
    // The finding names the burst. Its severity is the policy's budget judgement of the
    // link share used at the peak when the link speed is known (veth reports one on recent
    // kernels), and context when it is not: a ratio alone does not show a full link.
    let f = v["findings"].as_array().unwrap();
    assert_eq!(f.len(), 1, "{v}");
    assert_eq!(f[0]["pathology"], "microburst");
    assert_eq!(f[0]["source"], "burst");
    match ms["peak_utilisation"].as_f64() {
        Some(u) => {
            assert_eq!(f[0]["impact"]["budget_used"].as_f64(), Some(u), "{v}");
            let expect = if u >= 0.9 {
                "critical"
            } else if u >= 0.5 {
                "warning"
            } else {
                "info"
            };
            assert_eq!(f[0]["severity"], expect, "{v}");
            assert_eq!(code, if expect == "info" { 0 } else { 1 }, "{err}");
        }
        None => {
            assert_eq!(f[0]["severity"], "info", "{v}");
            assert_eq!(code, 0, "{err}");
        }
    }
    // The achieved interval is reported.
    assert!(v["sampling"]["p50_ns"].as_u64().unwrap() >= 90_000, "{v}");
    assert!(v["sampling"]["samples"].as_u64().unwrap() > 1000, "{v}");
}

#[test]
fn burst_rejects_bad_input() {
    let (code, _, err) = support::run(&["burst", "tdoc-no-such-if", "--duration", "1s"]);
    assert_eq!(code, 2);
    assert!(err.contains("tdoc-no-such-if"), "{err}");
    let (code, _, err) = support::run(&["burst", "lo", "--interval", "5s"]);
    assert_eq!(code, 2);
    assert!(err.contains("--interval"), "{err}");
    let (code, _, err) = support::run(&["burst", "lo", "--link-speed", "fast"]);
    assert_eq!(code, 2);
    assert!(err.contains("fast"), "{err}");
}

/// Issue 24: `burst lo` said healthy with 0 packets. An interface without traffic (the
/// loopback of a fresh namespace) is inconclusive: nothing to measure bursts of.
#[test]
fn burst_of_an_interface_without_traffic_is_inconclusive() {
    if !support::require_root("burst_of_an_interface_without_traffic_is_inconclusive") {
        return;
    }
    let ns = support::Netns::new("bidle");
    let (code, out, err) = support::run_in(
        &ns,
        &[
            "burst",
            "lo",
            "--duration",
            "300ms",
            "--interval",
            "1ms",
            "--json",
        ],
    );
    let v = support::json(&out, &err);
    assert_eq!(v["mode"]["kind"], "sleep");
    assert_eq!(v["directions"].as_array().unwrap().len(), 2);
    assert_eq!(v["verdict"], "inconclusive", "{v}");
    assert!(
        v["verdict_reason"]
            .as_str()
            .unwrap()
            .contains("no packets on lo"),
        "{v}"
    );
    assert_eq!(code, 3, "{err}");
}

#[test]
fn burst_without_iface_picks_the_busiest_and_works_through_netns() {
    if !support::require_root("burst_without_iface_picks_the_busiest_and_works_through_netns") {
        return;
    }
    let a = support::Netns::new("bba");
    let b = support::Netns::new("bbb");
    let (_ia, ib) = support::veth(&a, "10.77.42.1/24", &b, "10.77.42.2/24");
    // A second, idle interface in b.
    let c = support::Netns::new("bbc");
    let (_ic, _idle) = support::veth(&c, "10.77.43.1/24", &b, "10.77.43.2/24");
    let sock = udp_in(&a);
    let stop = Arc::new(AtomicBool::new(false));
    let sender = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            batch_sender(
                sock,
                "10.77.42.2:9100",
                10,
                Duration::from_millis(10),
                Duration::from_secs(5),
                stop,
            )
        })
    };
    std::thread::sleep(Duration::from_millis(100));
    let (code, out, err) = support::run(&[
        "burst",
        "--netns",
        &b.name,
        "--duration",
        "500ms",
        "--interval",
        "1ms",
        "--json",
    ]);
    stop.store(true, Ordering::SeqCst);
    sender.join().unwrap();
    let v = support::json(&out, &err);
    assert!(code == 0 || code == 1, "{err}");
    assert_eq!(v["iface_chosen_by"], "busiest", "{v}");
    assert_eq!(v["iface"], ib.as_str(), "{v}");
    assert!(
        v["directions"][0]["total_packets"].as_u64().unwrap() > 100,
        "{v}"
    );
}

/// Ctrl-C: burst stops and reports the samples taken so far.
#[test]
fn burst_interrupted_keeps_its_samples() {
    let child = std::process::Command::new(support::bin())
        .args([
            "burst",
            "lo",
            "--duration",
            "30s",
            "--interval",
            "1ms",
            "--json",
        ])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("spawn burst");
    std::thread::sleep(Duration::from_millis(700));
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let out = child.wait_with_output().expect("wait burst");
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    let v = support::json(&stdout, &stderr);
    assert_eq!(v["interrupted"], true, "{v}");
    assert!(v["sampling"]["samples"].as_u64().unwrap() > 100, "{v}");
    assert!(v["duration_ns"].as_u64().unwrap() < 5_000_000_000, "{v}");
}
