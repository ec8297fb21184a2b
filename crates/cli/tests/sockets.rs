//! `tcpdoctor sockets` against real sockets in network namespaces made by each test:
//! TIME_WAIT per destination (compared with `ss`), a full accept queue, a slow reader.

mod support;

use support::{connect_nonblocking, in_netns, listener};

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::fd::OwnedFd;
use std::time::{Duration, Instant};

use serde_json::Value;
use support::Netns;

/// `n` connections to `l`, each closed by the client first, so each leaves one client-side
/// TIME_WAIT socket (the server side closes after reading EOF and leaves nothing).
fn churn(l: &TcpListener, n: usize) {
    let addr = l.local_addr().unwrap();
    for _ in 0..n {
        let c = TcpStream::connect(addr).expect("connect");
        let (mut s, _) = l.accept().expect("accept");
        drop(c);
        let mut buf = [0u8; 16];
        assert_eq!(s.read(&mut buf).expect("read EOF"), 0);
        drop(s);
    }
}

fn tw_by_destination_from_ss(ns: &Netns) -> BTreeMap<String, u64> {
    let mut m = BTreeMap::new();
    for line in ns.exec("ss -Htan state time-wait").lines() {
        // Recv-Q Send-Q Local Peer (state column omitted by the filter)
        let cols: Vec<&str> = line.split_whitespace().collect();
        let peer = cols.last().expect("peer column").to_string();
        *m.entry(peer).or_default() += 1;
    }
    m
}

fn destination<'a>(v: &'a Value, remote: &str) -> &'a Value {
    v["destinations"]
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["remote"] == remote)
        .unwrap_or_else(|| panic!("no destination {remote} in {}", v["destinations"]))
}

#[test]
fn time_wait_per_destination_equals_ss_and_headroom_follows_port_range() {
    if !support::require_root("time_wait_per_destination") {
        return;
    }
    let ns = Netns::new("sktw");
    // 200 ephemeral ports; no TIME_WAIT reuse, so every connect takes a fresh port.
    ns.sysctl("net.ipv4.ip_local_port_range", "40000 40199");
    ns.sysctl("net.ipv4.tcp_tw_reuse", "0");
    let have_v6 = ns.exec("ip -6 addr show dev lo").contains("::1");
    let (a, b, c) = (40usize, 25usize, 15usize);
    let held = in_netns(&ns, move || {
        let l1 = listener("127.0.0.1:5000".parse().unwrap(), 128, None);
        let l2 = listener("127.0.0.1:5001".parse().unwrap(), 128, None);
        churn(&l1, a);
        churn(&l2, b);
        let l6 = have_v6.then(|| {
            let l = listener("[::1]:5000".parse().unwrap(), 128, None);
            churn(&l, c);
            l
        });
        (l1, l2, l6)
    });

    let ss = tw_by_destination_from_ss(&ns);
    let (code, out, err) = support::run_in(&ns, &["sockets", "--json"]);
    let v = support::json(&out, &err);
    assert!(code == 0 || code == 1, "exit {code}: {err}");
    assert_eq!(v["command"], "sockets");
    assert_eq!(v["port_range"]["low"], 40000);
    assert_eq!(v["ephemeral_ports"], 200);

    let d1 = destination(&v, "127.0.0.1:5000");
    assert_eq!(d1["time_wait"], a as u64);
    assert_eq!(ss["127.0.0.1:5000"], a as u64, "ss agrees");
    assert_eq!(d1["ephemeral_ports_in_use"], a as u64);
    assert_eq!(d1["headroom_ports"], 200 - a as i64);
    let rate = d1["sustainable_connect_rate_per_s"].as_f64().unwrap();
    assert!((rate - 200.0 / 60.0).abs() < 1e-9, "{rate}");
    let tw_rate = d1["time_wait_rate_per_s"].as_f64().unwrap();
    assert!((tw_rate - a as f64 / 60.0).abs() < 1e-9, "{tw_rate}");

    let d2 = destination(&v, "127.0.0.1:5001");
    assert_eq!(d2["time_wait"], b as u64);
    assert_eq!(ss["127.0.0.1:5001"], b as u64);
    assert_eq!(d2["headroom_ports"], 200 - b as i64);
    let mut total = (a + b) as u64;
    if have_v6 {
        let d6 = destination(&v, "[::1]:5000");
        assert_eq!(d6["time_wait"], c as u64);
        assert_eq!(ss["[::1]:5000"], c as u64);
        total += c as u64;
    }
    assert_eq!(v["by_state"]["TIME_WAIT"], total);
    assert_eq!(ss.values().sum::<u64>(), total);
    // 40 of 200 ports is below the warning share: no port_exhaustion yet.
    assert!(!v["findings"]
        .as_array()
        .unwrap()
        .iter()
        .any(|f| f["pathology"] == "port_exhaustion"));

    // The same census from outside with --netns, filtered to one destination port and state.
    let (code, out, err) = support::run(&[
        "sockets",
        "--json",
        "--netns",
        &ns.name,
        "--state",
        "time-wait",
        "--port",
        "5001",
    ]);
    let f = support::json(&out, &err);
    assert_eq!(code, 0, "{err}");
    assert_eq!(f["netns"], ns.name.as_str());
    assert_eq!(f["total_sockets"], b as u64);
    assert_eq!(f["destinations"].as_array().unwrap().len(), 1);
    assert_eq!(destination(&f, "127.0.0.1:5001")["time_wait"], b as u64);

    // Push one destination past half the range: port_exhaustion with the arithmetic.
    let l1 = held.0.try_clone().unwrap();
    in_netns(&ns, move || churn(&l1, 80));
    let (code, out, err) = support::run_in(&ns, &["sockets", "--json"]);
    let v = support::json(&out, &err);
    assert_eq!(code, 1, "{err}");
    let d1 = destination(&v, "127.0.0.1:5000");
    assert_eq!(d1["time_wait"], (a + 80) as u64);
    assert_eq!(d1["headroom_ports"], 200 - (a + 80) as i64);
    let pe = v["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["pathology"] == "port_exhaustion")
        .expect("port_exhaustion finding");
    assert_eq!(pe["severity"], "warning");
    let text = pe.to_string();
    assert!(text.contains("200 ports - 120 in use"), "{text}");
    assert!(text.contains("net.ipv4.ip_local_port_range"), "{text}");
    drop(held);
}

#[test]
fn full_accept_queue_is_reported() {
    if !support::require_root("full_accept_queue") {
        return;
    }
    let ns = Netns::new("skaq");
    let addr: SocketAddr = "127.0.0.1:5100".parse().unwrap();
    let held = in_netns(&ns, move || {
        let l = listener(addr, 1, None);
        let clients: Vec<OwnedFd> = (0..20).map(|_| connect_nonblocking(addr)).collect();
        (l, clients)
    });
    // Handshakes complete in softirq context right away on loopback; give them a moment.
    let deadline = Instant::now() + Duration::from_secs(5);
    let v = loop {
        let (code, out, err) = support::run_in(&ns, &["sockets", "--json", "--port", "5100"]);
        let v = support::json(&out, &err);
        if code == 1 || Instant::now() > deadline {
            break v;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    let l = v["listeners"]
        .as_array()
        .unwrap()
        .iter()
        .find(|l| l["local"] == "127.0.0.1:5100" && l["listening"] == true)
        .expect("listener");
    assert_eq!(l["backlog"], 1);
    assert_eq!(l["accept_queue"], 2, "kernel admits backlog + 1: {l}");
    assert_eq!(l["full"], true);
    let f = &v["findings"][0];
    assert_eq!(f["pathology"], "accept_queue_overflow");
    assert_eq!(f["source"], "sockets");
    assert_eq!(v["verdict"], "findings");
    drop(held);
}

#[test]
fn slow_reader_is_flagged_with_zero_window() {
    if !support::require_root("slow_reader") {
        return;
    }
    let ns = Netns::new("sksr");
    let addr: SocketAddr = "127.0.0.1:5200".parse().unwrap();
    let held = in_netns(&ns, move || {
        let l = listener(addr, 16, Some(4096));
        let mut c = TcpStream::connect(addr).unwrap();
        let (s, _) = l.accept().unwrap();
        // The reader (s) never reads; the writer fills its window and its send buffer.
        c.set_nonblocking(true).unwrap();
        let chunk = vec![0x5au8; 16 * 1024];
        let t0 = Instant::now();
        let mut sent = 0usize;
        while t0.elapsed() < Duration::from_secs(3) && sent < 64 << 20 {
            match c.write(&chunk) {
                Ok(n) => sent += n,
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                    std::thread::sleep(Duration::from_millis(20));
                    if c.write(&chunk).is_err() {
                        break;
                    }
                }
                Err(e) => panic!("write: {e}"),
            }
        }
        // Let the zero window reach the writer.
        std::thread::sleep(Duration::from_millis(300));
        (l, c, s)
    });
    let (code, out, err) = support::run_in(&ns, &["sockets", "--json", "--port", "5200"]);
    let v = support::json(&out, &err);
    assert_eq!(code, 1, "{err}\n{out}");
    let slow = v["slow_readers"].as_array().unwrap();
    let reader = slow
        .iter()
        .find(|f| f["local"] == "127.0.0.1:5200")
        .unwrap_or_else(|| panic!("reader not flagged: {slow:?}"));
    assert!(reader["recv_q_bytes"].as_u64().unwrap() > 0);
    assert_eq!(reader["sign"], "zero_receive_window", "{reader}");
    assert_eq!(reader["rcv_wnd_bytes"], 0);
    let writer = slow
        .iter()
        .find(|f| f["remote"] == "127.0.0.1:5200")
        .unwrap_or_else(|| panic!("writer not flagged: {slow:?}"));
    assert_eq!(writer["sign"], "peer_zero_window", "{writer}");
    assert!(v["findings"]
        .as_array()
        .unwrap()
        .iter()
        .any(|f| f["pathology"] == "slow_reader"));
    drop(held);
}

#[test]
fn watch_flags_a_growing_receive_queue_and_stops_at_count() {
    if !support::require_root("watch_growing_recv_q") {
        return;
    }
    let ns = Netns::new("skwg");
    let addr: SocketAddr = "127.0.0.1:5300".parse().unwrap();
    let (l, c, s) = in_netns(&ns, move || {
        let l = listener(addr, 16, None);
        let c = TcpStream::connect(addr).unwrap();
        let (s, _) = l.accept().unwrap();
        (l, c, s)
    });
    let child = std::process::Command::new("ip")
        .args(["netns", "exec", &ns.name])
        .arg(support::bin())
        .args([
            "sockets", "--json", "--port", "5300", "--watch", "700ms", "--count", "2",
        ])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Between the two samples the writer sends 1000 bytes the reader never reads.
    std::thread::sleep(Duration::from_millis(300));
    let mut w = c.try_clone().unwrap();
    w.write_all(&[1u8; 1000]).unwrap();
    let out = child.wait_with_output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    let lines: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).expect("JSON line"))
        .collect();
    assert_eq!(lines.len(), 2, "{text}");
    assert_eq!(lines[1]["sample"], 2);
    let grew = lines[1]["slow_readers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["sign"] == "receive_queue_growing")
        .unwrap_or_else(|| panic!("no growth flagged: {}", lines[1]));
    assert_eq!(grew["recv_q_growth_bytes"], 1000);
    assert_eq!(out.status.code(), Some(1));
    drop((l, c, s));
}

#[test]
fn bad_input_is_one_line_exit_2() {
    let (code, _, err) = support::run(&["sockets", "--state", "bogus"]);
    assert_eq!(code, 2);
    assert!(err.contains("bogus"), "{err}");
    let (code, _, err) = support::run(&["sockets", "--netns", "tdoc-no-such-ns"]);
    assert_eq!(code, 2);
    assert!(err.contains("tdoc-no-such-ns"), "{err}");
    assert_eq!(err.trim().lines().count(), 1, "{err}");
}

#[test]
fn dropped_data_shows_retransmission_backoff() {
    if !support::require_root("retransmission_backoff") {
        return;
    }
    let ns = Netns::new("skrt");
    let addr: SocketAddr = "127.0.0.1:5400".parse().unwrap();
    let (l, c, s) = in_netns(&ns, move || {
        let l = listener(addr, 16, None);
        let c = TcpStream::connect(addr).unwrap();
        let (s, _) = l.accept().unwrap();
        (l, c, s)
    });
    // Drop every segment toward the server on input (an output drop would fail the send
    // locally instead of losing it): the client's data is retransmitted on its RTO
    // timer (200 ms floor, doubling: 200, 400, 800 ms).
    ns.exec(
        "printf 'table inet tdoc_rt {\\n chain inp {\\n  type filter hook input priority 0; tcp dport 5400 drop\\n }\\n}\\n' | nft -f -",
    );
    let mut w = c.try_clone().unwrap();
    w.write_all(&[7u8; 1000]).unwrap();
    std::thread::sleep(Duration::from_millis(900));
    let (code, out, err) = support::run_in(&ns, &["sockets", "--json", "--port", "5400"]);
    let v = support::json(&out, &err);
    assert_eq!(code, 1, "{err}");
    let r = v["retransmitting"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["remote"] == "127.0.0.1:5400")
        .unwrap_or_else(|| panic!("client not in backoff: {}", v["retransmitting"]));
    assert_eq!(r["sign"], "retransmit_backoff");
    assert!(r["backoff"].as_u64().unwrap() >= 1, "{r}");
    assert!(r["rto_us"].as_u64().unwrap() >= 400_000, "RTO doubled: {r}");
    assert!(v["findings"]
        .as_array()
        .unwrap()
        .iter()
        .any(|f| f["pathology"] == "retransmit_timeout"));
    drop((l, c, s));
}
