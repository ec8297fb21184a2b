//! Issue 22, "live": what limited a busy connection, on real bulk transfers between processes
//! this test starts (perl, so each end is a process of its own with a pid to name). A reader
//! that drains slowly is the receiver's window, naming the reader; a writer with a tiny
//! SO_SNDBUF and a fast reader is the send buffer; a writer behind a shallow 20 Mbit/s tbf is
//! the network, with its retransmissions. Each test fails if `sockets` names another limit.

use std::process::Child;
use std::time::Duration;

use serde_json::Value;

use crate::support::transfers::{reader, writer};
use crate::support::{self, Netns};

/// `sockets --watch 1s --count 2` in `ns` for `port`, after the transfer has run a second:
/// the second sample's report (a window between the two censuses).
fn watch(ns: &Netns, port: u16) -> Value {
    std::thread::sleep(Duration::from_secs(1));
    let (code, out, err) = support::run(&[
        "sockets",
        "--netns",
        &ns.name,
        "--json",
        "--port",
        &port.to_string(),
        "--watch",
        "1s",
        "--count",
        "2",
    ]);
    assert!(code == 0 || code == 1, "exit {code}: {err}\n{out}");
    let last = out.lines().rfind(|l| !l.trim().is_empty()).unwrap_or("");
    support::json(last, &err)
}

/// The busy transfer toward `port` in a report.
fn transfer(v: &Value, port: u16) -> &Value {
    v["transfers"]["busy"]
        .as_array()
        .unwrap_or_else(|| panic!("no transfers: {v:#}"))
        .iter()
        .find(|t| {
            t["remote"]
                .as_str()
                .is_some_and(|r| r.ends_with(&format!(":{port}")))
        })
        .unwrap_or_else(|| panic!("no busy transfer toward port {port}: {:#}", v["transfers"]))
}

fn share(t: &Value, field: &str) -> f64 {
    t[field].as_u64().unwrap() as f64 / t["observed_us"].as_u64().unwrap() as f64
}

fn pids(owners: &Value) -> Vec<u64> {
    owners
        .as_array()
        .map(|a| a.iter().filter_map(|o| o["pid"].as_u64()).collect())
        .unwrap_or_default()
}

fn finding<'a>(v: &'a Value, pathology: &str) -> Option<&'a Value> {
    v["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["pathology"] == pathology)
}

fn stop(children: Vec<Child>) {
    for mut c in children {
        let _ = c.kill();
        let _ = c.wait();
    }
}

/// A reader with a 16 KiB SO_RCVBUF that reads 4 KiB every 10 ms (at most ~400 KB/s) while
/// the writer could send at loopback speed: the writer's socket is held by the reader's window
/// (measured on 6.18: 916 ms of 1008 ms busy, 91%), and the reader is named.
#[test]
fn a_slow_reader_is_the_receiver_window_naming_the_reader() {
    if !support::require_root("a_slow_reader_is_the_receiver_window_naming_the_reader") {
        return;
    }
    let ns = Netns::new("lrw");
    let r = reader(&ns, "127.0.0.1", 5611, 16384, 4096, "0.01");
    let w = writer(&ns, "127.0.0.1", 5611, 0, "-");
    let v = watch(&ns, 5611);
    let (rp, wp) = (u64::from(r.id()), u64::from(w.id()));
    stop(vec![w, r]);

    assert_eq!(v["transfers"]["span"], "window", "{v:#}");
    let t = transfer(&v, 5611);
    assert_eq!(t["limit"], "receiver_window", "{t:#}");
    assert!(share(t, "rwnd_limited_us") >= 0.5, "{t:#}");
    assert!(share(t, "sndbuf_limited_us") < 0.1, "{t:#}");
    assert_eq!(pids(&t["owners"]), vec![wp], "the writer: {t:#}");
    assert_eq!(pids(&t["reader"]["owners"]), vec![rp], "the reader: {t:#}");
    let f = finding(&v, "slow_reader").unwrap_or_else(|| panic!("{v:#}"));
    let summary = f["summary"].as_str().unwrap();
    assert!(
        summary.contains("held by the receiver's window"),
        "{summary}"
    );
    assert!(
        summary.contains(&format!("not reading: perl pid {rp}")),
        "{summary}"
    );
    assert_ne!(f["severity"], "info", "{f:#}");
    assert!(finding(&v, "send_buffer_limited").is_none(), "{v:#}");
}

/// A writer with SO_SNDBUF 16384 (32 KiB in the kernel) over a 30 to 50 ms round trip to a
/// fast reader: at most about twice the buffer is in flight (46 segments) while the congestion
/// window allows 115 or more, so the transfer runs at buffer / round trip (about 1.5 MB/s, the
/// path taking 1 Gbit/s and more). The round trip is real delay without netem: the reader's
/// ACKs queue behind a bulk flow the other way in a 10 Mbit/s tbf (latency 50 ms) on the
/// reader's link. The writer runs cubic, so that its congestion window follows loss only (BBR
/// sizes it from the fastest round trip, 1 ms when the queue drains, and is then held by it:
/// the network). Measured on 6.18: `tcpi_sndbuf_limited` 0 to 13% of the busy time (the
/// chronograph stops as soon as a third of the buffer is free), the buffer full and nothing
/// unsent at every census: the send buffer, from the census state.
#[test]
fn a_send_buffer_smaller_than_the_path_is_the_send_buffer_naming_the_writer() {
    let test = "a_send_buffer_smaller_than_the_path_is_the_send_buffer_naming_the_writer";
    if !support::require_root(test) {
        return;
    }
    // The premise, that the path takes more than the buffer, is checked at the two censuses
    // (`holding`): in full suites beside the other lane's load, a census sometimes found the
    // congestion window full (134 segments unacknowledged of 134 at the later one, 45% of the
    // busy time send-buffer limited; or at the earlier one, 1 s into the transfer, the later
    // one finding 46 of 404), and `sockets` said the network, as its rule for such evidence
    // says (any census that saw the network). Such a run is judged as the network and the
    // transfer measured again (at most three runs).
    let mut runs = 0;
    let (v, wp) = loop {
        runs += 1;
        let (v, wp) = send_buffer_run();
        let t = transfer(&v, 5614);
        let network_seen = t["holding"]
            .as_array()
            .is_some_and(|h| h.iter().any(|h| h == "network"));
        // The kernel's times decide first: a census that saw the network does not matter
        // when the send buffer held the most time (964 of 1,004 ms once).
        if !network_seen || t["limit"] == "send_buffer" || runs == 3 {
            break (v, wp);
        }
        assert_eq!(t["limit"], "network", "a census saw the network: {t:#}");
    };
    let t = transfer(&v, 5614);
    assert_eq!(t["limit"], "send_buffer", "{t:#}");
    assert_eq!(t["sndbuf_bytes"], 32768, "{t:#}");
    assert!(share(t, "rwnd_limited_us") < 0.1, "{t:#}");
    assert!(
        t["min_rtt_us"].as_u64().unwrap() >= 1000,
        "a delayed path: {t:#}"
    );
    assert_eq!(pids(&t["owners"]), vec![wp], "{t:#}");
    let f = finding(&v, "send_buffer_limited").unwrap_or_else(|| panic!("{v:#}"));
    assert!(
        f["summary"]
            .as_str()
            .unwrap()
            .contains(&format!("writer: perl pid {wp}")),
        "{f:#}"
    );
    assert!(finding(&v, "slow_reader").is_none(), "{v:#}");
}

/// One run of [`a_send_buffer_smaller_than_the_path_is_the_send_buffer_naming_the_writer`]:
/// the census (`watch`) and the writer's pid.
fn send_buffer_run() -> (Value, u64) {
    let a = Netns::new("lsba");
    let b = Netns::new("lsbb");
    let (_, ib) = support::veth(&a, "10.77.23.1/24", &b, "10.77.23.2/24");
    b.exec(&format!(
        "tc qdisc add dev {ib} root tbf rate 10mbit burst 8kb latency 50ms"
    ));
    // The flow that keeps the reader's link queue standing (cubic fills it to the tbf limit).
    let filler_reader = reader(&a, "10.77.23.1", 5615, 0, 65536, "0");
    let filler = writer(&b, "10.77.23.1", 5615, 1 << 20, "cubic");
    let r = reader(&b, "10.77.23.2", 5614, 0, 65536, "0");
    std::thread::sleep(Duration::from_millis(500));
    let w = writer(&a, "10.77.23.2", 5614, 16384, "cubic");
    let v = watch(&a, 5614);
    let wp = u64::from(w.id());
    stop(vec![w, r, filler, filler_reader]);
    (v, wp)
}

/// A writer in one namespace, a fast reader in another, a 20 Mbit/s tbf with a 20 KB queue on
/// the writer's link: the network holds the data (the congestion window or pacing at the
/// bottleneck, segments dropped by the tbf and resent). Measured on 6.18: 100% of the busy time
/// neither receive-window- nor send-buffer-limited, 8 (cubic) to 195 (bbr) segments resent in
/// one second. The reader is in another namespace: not in this census, said so.
#[test]
fn a_shaped_link_is_the_network_with_its_retransmissions() {
    if !support::require_root("a_shaped_link_is_the_network_with_its_retransmissions") {
        return;
    }
    let a = Netns::new("lnwa");
    let b = Netns::new("lnwb");
    let (ia, _) = support::veth(&a, "10.77.22.1/24", &b, "10.77.22.2/24");
    a.exec(&format!(
        "tc qdisc add dev {ia} root tbf rate 20mbit burst 8kb limit 20kb"
    ));
    let r = reader(&b, "10.77.22.2", 5613, 0, 65536, "0");
    let w = writer(&a, "10.77.22.2", 5613, 0, "-");
    let v = watch(&a, 5613);
    let wp = u64::from(w.id());
    stop(vec![w, r]);

    let t = transfer(&v, 5613);
    assert_eq!(t["limit"], "network", "{t:#}");
    assert!(share(t, "in_flight_us") >= 0.8, "{t:#}");
    assert!(t["retrans_segs"].as_u64().unwrap() > 0, "{t:#}");
    assert!(t.get("reader").is_none(), "{t:#}");
    assert_eq!(pids(&t["owners"]), vec![wp], "{t:#}");
    // 20 Mbit/s for about a second: 2.5 MB at most, about 2 MB at least.
    let acked = t["bytes_acked"].as_u64().unwrap();
    assert!((1 << 20..=3 << 20).contains(&acked), "{t:#}");
    let f = finding(&v, "retransmission").unwrap_or_else(|| panic!("{v:#}"));
    assert_eq!(f["source"], "sockets");
    // The reader is fast, but a census can catch its window at zero for an instant when it
    // waits for a CPU (once in a full suite beside the other lane: "1 at a zero window ...
    // not yet seen persisting across censuses", info): true, and never above info here.
    assert!(
        finding(&v, "slow_reader").is_none_or(|f| f["severity"] == "info"),
        "{v:#}"
    );
    assert!(finding(&v, "send_buffer_limited").is_none(), "{v:#}");
}
