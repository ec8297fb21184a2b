//! `tcpdoctor sockets` against real sockets in network namespaces made by each test:
//! TIME_WAIT per destination (compared with `ss`), a full accept queue, a slow reader; what
//! limited a bulk transfer ([`limits`]).

#[path = "sockets/limits.rs"]
mod limits;
mod support;

use support::{connect_nonblocking, in_netns, listener};

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::fd::OwnedFd;
use std::os::unix::fs::MetadataExt;
use std::time::{Duration, Instant};

use serde_json::Value;
use support::Netns;
use tcpdoctor_trace::history;

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
    assert!(
        text.contains("200 ports - (120 in use - 0 reusable TIME_WAIT)"),
        "{text}"
    );
    assert!(text.contains("net.ipv4.ip_local_port_range"), "{text}");
    assert_eq!(pe["impact"]["budget_used"], 0.6);
    drop(held);
}

/// `n` connects to `addr` that must all succeed or all fail; returns how many succeeded and
/// the error of the first failure.
fn try_connects(l: &TcpListener, n: usize) -> (usize, Option<std::io::ErrorKind>) {
    let addr = l.local_addr().unwrap();
    let (mut ok, mut first_err) = (0, None);
    for _ in 0..n {
        match TcpStream::connect(addr) {
            Ok(c) => {
                let (s, _) = l.accept().expect("accept");
                drop(c);
                drop(s);
                ok += 1;
            }
            Err(e) => {
                first_err.get_or_insert(e.kind());
            }
        }
    }
    (ok, first_err)
}

/// Issue 16: with `tcp_tw_reuse=2` (the default) connect() reuses TIME_WAIT ports toward
/// loopback once they are `tcp_tw_reuse_delay` (1 s) old, so a range full of them is not
/// exhausted; `sockets` and `doctor` must not say it is. With `tcp_tw_reuse=0` the same
/// sockets do exhaust it, and the kernel agrees in both cases.
#[test]
fn loopback_time_wait_under_tw_reuse_2_is_not_port_exhaustion() {
    if !support::require_root("loopback_time_wait_under_tw_reuse_2") {
        return;
    }
    for reuse in ["2", "0"] {
        let ns = Netns::new("sktr");
        ns.sysctl("net.ipv4.ip_local_port_range", "40000 40199");
        ns.sysctl("net.ipv4.tcp_tw_reuse", reuse);
        let l = in_netns(&ns, || {
            let l = listener("127.0.0.1:5000".parse().unwrap(), 128, None);
            churn(&l, 200);
            l
        });
        // Older than the reuse delay (1000 ms).
        std::thread::sleep(Duration::from_millis(1300));
        let (code, out, err) = support::run_in(&ns, &["sockets", "--json"]);
        let v = support::json(&out, &err);
        let d = destination(&v, "127.0.0.1:5000");
        assert_eq!(d["time_wait"], 200, "{d}");
        let exhausted = v["findings"]
            .as_array()
            .unwrap()
            .iter()
            .find(|f| f["pathology"] == "port_exhaustion");
        let (doc_code, doc, doc_err) =
            support::run_in(&ns, &["doctor", "--json", "--quick", "--window", "200ms"]);
        let doc = support::json(&doc, &doc_err);
        let doc_exhausted = doc["findings"]
            .as_array()
            .unwrap()
            .iter()
            // The narrow range itself is a setting finding of the audit: only the live
            // census is judged here.
            .find(|f| f["pathology"] == "port_exhaustion" && f["source"] != "check")
            .cloned();
        // What the kernel does with the next 200 connects.
        let l2 = l.try_clone().unwrap();
        let (ok, first_err) = in_netns(&ns, move || try_connects(&l2, 200));
        if reuse == "2" {
            assert_eq!(d["tw_reuse"], true, "{d}");
            assert_eq!(d["time_wait_reusable"], 200, "{d}");
            assert_eq!(d["headroom_ports"], 200, "{d}");
            assert!(exhausted.is_none(), "{exhausted:?}");
            assert_eq!(code, 0, "{err}\n{out}");
            assert!(doc_exhausted.is_none(), "{doc_exhausted:?}");
            assert!(doc_code == 0 || doc_code == 1, "{doc_err}\n{doc}");
            assert_eq!((ok, first_err), (200, None), "the kernel reused them");
        } else {
            assert_eq!(d["tw_reuse"], false, "{d}");
            assert_eq!(d["headroom_ports"], 0, "{d}");
            let f = exhausted.unwrap_or_else(|| panic!("no port_exhaustion: {v}"));
            assert_eq!(f["severity"], "critical", "{f}");
            assert_eq!(code, 1);
            let f = doc_exhausted.unwrap_or_else(|| panic!("doctor: {doc}"));
            assert_eq!(f["severity"], "critical", "{f}");
            assert_eq!(ok, 0, "no port was free");
            assert_eq!(first_err, Some(std::io::ErrorKind::AddrNotAvailable));
        }
        drop(l);
    }
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

/// Issue 24: `sockets --watch` printed every finding's explanation and remedies again at
/// every sample. They are printed once, at the sample that first shows the finding; later
/// samples print its headline and evidence (what may change) and point back.
#[test]
fn watch_explains_each_finding_once_then_prints_what_changed() {
    if !support::require_root("watch_explains_each_finding_once") {
        return;
    }
    let ns = Netns::new("skwe");
    let addr: SocketAddr = "127.0.0.1:5101".parse().unwrap();
    let held = in_netns(&ns, move || {
        let l = listener(addr, 1, None);
        let clients: Vec<OwnedFd> = (0..20).map(|_| connect_nonblocking(addr)).collect();
        (l, clients)
    });
    std::thread::sleep(Duration::from_millis(300));
    let (code, out, err) = support::run_in(
        &ns,
        &[
            "sockets", "--port", "5101", "--watch", "100ms", "--count", "3",
        ],
    );
    drop(held);
    assert_eq!(code, 1, "{out}{err}");
    assert_eq!(out.matches("--- sample").count(), 3, "{out}");
    let title = "] Listener accept queue overflowed";
    // The finding in every sample, explained in the first only.
    assert_eq!(out.matches(title).count(), 3, "{out}");
    let lines = |start: &str| {
        out.lines()
            .filter(|l| l.trim_start().starts_with(start))
            .count()
    };
    assert_eq!(lines("why: "), 1, "{out}");
    assert_eq!(lines("what to do: "), 1, "{out}");
    assert_eq!(
        out.matches("why, what to do: as in sample 1").count(),
        2,
        "{out}"
    );
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

/// A reader that has stopped reading: data queued before the first sample stays unread
/// while more arrives. The second sample flags it (Recv-Q grew and the earlier data was
/// not consumed over the interval), with the interval as the stall seen.
#[test]
fn watch_flags_a_growing_receive_queue_and_stops_at_count() {
    if !support::require_root("watch_growing_recv_q") {
        return;
    }
    // Its watch traces closes (eBPF): see bpf_exclusive.
    let _bpf = support::bpf_exclusive();
    let ns = Netns::new("skwg");
    let addr: SocketAddr = "127.0.0.1:5300".parse().unwrap();
    let (l, c, s) = in_netns(&ns, move || {
        let l = listener(addr, 16, None);
        let c = TcpStream::connect(addr).unwrap();
        let (s, _) = l.accept().unwrap();
        (l, c, s)
    });
    let mut w = c.try_clone().unwrap();
    w.write_all(&[1u8; 1000]).unwrap();
    std::thread::sleep(Duration::from_millis(100));
    let child = std::process::Command::new("ip")
        .args(["netns", "exec", &ns.name])
        .arg(support::bin())
        .args([
            "sockets", "--json", "--port", "5300", "--watch", "700ms", "--count", "2",
        ])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Between the two samples the writer sends 1000 more bytes; the reader reads nothing.
    std::thread::sleep(Duration::from_millis(300));
    w.write_all(&[1u8; 1000]).unwrap();
    let out = child.wait_with_output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    let lines: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).expect("JSON line"))
        .collect();
    assert_eq!(lines.len(), 2, "{text}");
    assert_eq!(lines[1]["sample"], 2);
    // 1000 unread bytes in one census prove nothing.
    assert!(
        lines[0]["slow_readers"].as_array().unwrap().is_empty(),
        "{}",
        lines[0]
    );
    let grew = lines[1]["slow_readers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["sign"] == "receive_queue_growing")
        .unwrap_or_else(|| panic!("no growth flagged: {}", lines[1]));
    assert_eq!(grew["recv_q_growth_bytes"], 1000);
    assert_eq!(grew["recv_q_bytes"], 2000);
    let stalled = grew["stalled_at_least_us"].as_u64().unwrap();
    assert!((600_000..3_000_000).contains(&stalled), "{grew}");
    let f = lines[1]["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["pathology"] == "slow_reader")
        .unwrap_or_else(|| panic!("{}", lines[1]));
    // A stall of the census interval (700 ms): the policy's timeout_stall.
    assert_eq!(f["severity"], "warning", "{f}");
    assert_eq!(out.status.code(), Some(1));
    drop((l, c, s));
}

/// True when `tool` is on PATH; otherwise the test skips with a printed reason (a failure
/// in CI, where the tools are installed).
fn have(test: &str, tool: &str) -> bool {
    let found = std::process::Command::new("sh")
        .args(["-c", &format!("command -v {tool}")])
        .output()
        .is_ok_and(|o| o.status.success());
    if !found {
        if std::env::var("CI").is_ok_and(|v| v == "true") {
            panic!("{test}: needs {tool}, and CI=true forbids skipping");
        }
        eprintln!("SKIP {test}: needs {tool} (apt-get install {tool})");
    }
    found
}

/// nginx serving a fixed 200 on 127.0.0.1:`port` inside `ns`, with its files in a `tdoc`
/// temporary directory; on drop the master process (which we started) is stopped and the
/// directory removed (the namespace's drop also kills anything left inside it).
struct Nginx {
    dir: std::path::PathBuf,
    master: std::process::Child,
}

impl Nginx {
    fn start(ns: &Netns, port: u16) -> Nginx {
        let dir = std::env::temp_dir().join(format!("tdoc-nginx-{}", support::unique_id()));
        std::fs::create_dir_all(&dir).unwrap();
        let d = dir.display();
        let conf = format!(
            "worker_processes 1;\ndaemon off;\npid {d}/nginx.pid;\nerror_log {d}/error.log;\n\
             events {{ worker_connections 1024; }}\n\
             http {{\n access_log off;\n client_body_temp_path {d}/body;\n proxy_temp_path {d}/proxy;\n\
             fastcgi_temp_path {d}/fcgi;\n uwsgi_temp_path {d}/uwsgi;\n scgi_temp_path {d}/scgi;\n\
             server {{ listen 127.0.0.1:{port} backlog=511; location / {{ return 200 \"ok\\n\"; }} }}\n}}\n"
        );
        std::fs::write(dir.join("nginx.conf"), conf).unwrap();
        // `ip netns exec` and `sh -c exec` both exec: the child is nginx's master process.
        let master = ns.spawn(&format!(
            "exec nginx -e {d}/error.log -p {d} -c {d}/nginx.conf"
        ));
        let addr: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
        let up = in_netns(ns, move || {
            let t0 = Instant::now();
            while t0.elapsed() < Duration::from_secs(5) {
                if TcpStream::connect(addr).is_ok() {
                    return true;
                }
                std::thread::sleep(Duration::from_millis(50));
            }
            false
        });
        assert!(up, "nginx did not listen on {addr}");
        Nginx { dir, master }
    }
}

impl Drop for Nginx {
    fn drop(&mut self) {
        // SIGTERM: nginx's fast shutdown, which also ends its workers.
        unsafe { libc::kill(self.master.id() as i32, libc::SIGTERM) };
        let _ = self.master.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Issue 17: under ordinary churn (wrk against nginx on loopback) a census often catches
/// requests nginx has not read yet. `sockets --watch` must not call them slow readers, and
/// must still find, in the same namespace, a reader that stopped reading (zero window) and
/// one whose unread data keeps growing with the window still open.
#[test]
fn watch_under_wrk_nginx_churn_flags_only_real_slow_readers() {
    let test = "watch_under_wrk_nginx_churn_flags_only_real_slow_readers";
    if !support::require_root_and_tools(test, &["wrk", "nginx"])
        || !have(test, "wrk")
        || !have(test, "nginx")
    {
        return;
    }
    // Its watch traces closes (eBPF): see bpf_exclusive.
    let _bpf = support::bpf_exclusive();
    let ns = Netns::new("skng");
    let nginx = Nginx::start(&ns, 8080);
    let stuck: SocketAddr = "127.0.0.1:5600".parse().unwrap();
    let slow: SocketAddr = "127.0.0.1:5601".parse().unwrap();
    // A peer that stopped reading: small buffer, filled until the window closes.
    let held = in_netns(&ns, move || {
        let l = listener(stuck, 16, Some(4096));
        let mut c = TcpStream::connect(stuck).unwrap();
        let (s, _) = l.accept().unwrap();
        c.set_nonblocking(true).unwrap();
        let chunk = [0x5au8; 4096];
        let t0 = Instant::now();
        let mut blocked = 0;
        while t0.elapsed() < Duration::from_secs(3) && blocked < 5 {
            match c.write(&chunk) {
                Ok(_) => {}
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                    blocked += 1;
                    std::thread::sleep(Duration::from_millis(20));
                }
                Err(e) => panic!("write: {e}"),
            }
        }
        (l, c, s)
    });
    // A reader that stopped reading while its window is still open: 2000 bytes every
    // 200 ms for at most 6 s (30 writes, 60 KB: far below the default receive buffer).
    let slow_pair = in_netns(&ns, move || {
        let l = listener(slow, 16, None);
        let c = TcpStream::connect(slow).unwrap();
        let (s, _) = l.accept().unwrap();
        (l, c, s)
    });
    let mut w = slow_pair.1.try_clone().unwrap();
    let writer = std::thread::spawn(move || {
        for _ in 0..30 {
            if w.write_all(&[3u8; 2000]).is_err() {
                break;
            }
            std::thread::sleep(Duration::from_millis(200));
        }
    });
    let wrk = std::process::Command::new("ip")
        .args(["netns", "exec", &ns.name])
        .args(["wrk", "-t1", "-c20", "-d6s", "http://127.0.0.1:8080/"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("spawn wrk");
    std::thread::sleep(Duration::from_millis(500));
    let (code, out, err) = support::run_in(
        &ns,
        &["sockets", "--json", "--watch", "500ms", "--count", "8"],
    );
    let wrk = wrk.wait_with_output().unwrap();
    writer.join().unwrap();
    let wrk_out = String::from_utf8_lossy(&wrk.stdout);
    let requests: u64 = wrk_out
        .lines()
        .find(|l| l.contains("requests in"))
        .and_then(|l| l.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("wrk output: {wrk_out}"));
    assert!(requests > 5_000, "too little churn: {wrk_out}");
    assert_eq!(code, 1, "{err}");
    let samples: Vec<Value> = out
        .lines()
        .map(|l| serde_json::from_str(l).expect("JSON line"))
        .collect();
    assert_eq!(samples.len(), 8, "{out}");
    let port = |v: &Value, k: &str| -> u16 {
        v[k].as_str().unwrap().parse::<SocketAddr>().unwrap().port()
    };
    let mut growth_seen = 0;
    for (i, v) in samples.iter().enumerate() {
        let flagged = v["slow_readers"].as_array().unwrap();
        for f in flagged {
            assert!(
                port(f, "local") != 8080 && port(f, "remote") != 8080,
                "sample {}: nginx churn flagged as a slow reader: {f}",
                i + 1
            );
        }
        // The stopped reader is found in every sample.
        assert!(
            flagged
                .iter()
                .any(|f| f["local"] == "127.0.0.1:5600" && f["sign"] == "zero_receive_window"),
            "sample {}: {flagged:?}",
            i + 1
        );
        if flagged
            .iter()
            .any(|f| f["local"] == "127.0.0.1:5601" && f["sign"] == "receive_queue_growing")
        {
            growth_seen += 1;
        }
    }
    // Every later sample sees the open-window reader's queue grow with old data unread.
    assert!(
        growth_seen >= 6,
        "growth flagged in {growth_seen} of 7 samples\n{out}"
    );
    drop((held, slow_pair, nginx));
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

/// The comm (`/proc/<pid>/comm`) of this test process.
fn own_comm() -> String {
    std::fs::read_to_string("/proc/self/comm")
        .unwrap()
        .trim_end()
        .to_string()
}

/// Issue 10 (process attribution): the pid and comm printed for a socket are those of the
/// process that made the connection (a child this test starts, whose pid it knows), as
/// `ss -p` shows them; a listener with a full accept queue names its process; a destination
/// short of ports names the processes with live sockets toward it and says that its
/// TIME_WAIT sockets' last owner needs `trace`.
#[test]
fn sockets_names_the_process_that_made_the_connection() {
    if !support::require_root("sockets_names_the_process_that_made_the_connection") {
        return;
    }
    let ns = Netns::new("skpid");
    ns.sysctl("net.ipv4.ip_local_port_range", "40000 40199");
    ns.sysctl("net.ipv4.tcp_tw_reuse", "0");
    let full: SocketAddr = "127.0.0.1:5700".parse().unwrap();
    let busy: SocketAddr = "127.0.0.1:5701".parse().unwrap();
    let (lf, lb) = in_netns(&ns, move || {
        let lf = listener(full, 1, None);
        let lb = listener(busy, 128, None);
        // 120 client-closed connections: 120 TIME_WAIT toward 127.0.0.1:5701.
        churn(&lb, 120);
        (lf, lb)
    });
    // The child opens one connection to each listener and keeps them (bash's /dev/tcp,
    // then exec: the process holding them is `sleep`, with the pid we spawned).
    let mut child = std::process::Command::new("ip")
        .args(["netns", "exec", &ns.name, "bash", "-c"])
        .arg("exec 4<>/dev/tcp/127.0.0.1/5701 3<>/dev/tcp/127.0.0.1/5700; exec sleep 30")
        .spawn()
        .expect("spawn child");
    let pid = child.id();
    let child_ready = |v: &Value| {
        v["sockets"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|s| s["owners"][0]["pid"] == pid && s["owners"][0]["comm"] == "sleep")
            .count()
            == 2
    };
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let (_, out, err) = support::run_in(&ns, &["sockets", "--json", "--list"]);
        if child_ready(&support::json(&out, &err)) {
            break;
        }
        assert!(Instant::now() < deadline, "the child's connections: {out}");
        std::thread::sleep(Duration::from_millis(50));
    }
    // Then fill the backlog-1 queue from this process (the child's connection holds a slot).
    let extra: Vec<OwnedFd> = in_netns(&ns, move || {
        (0..3).map(|_| connect_nonblocking(full)).collect()
    });
    std::thread::sleep(Duration::from_millis(200));
    let (_, out, err) = support::run_in(&ns, &["sockets", "--json", "--list"]);
    let v = support::json(&out, &err);
    let list = v["sockets"].as_array().unwrap();
    let mine: Vec<&Value> = list
        .iter()
        .filter(|s| s["owners"][0]["pid"] == pid)
        .collect();
    assert_eq!(mine.len(), 2, "child's sockets: {v}");
    for s in &mine {
        assert_eq!(s["owners"][0]["comm"], "sleep", "{s}");
        assert_eq!(s["owners"].as_array().unwrap().len(), 1, "{s}");
        assert!([5700, 5701].contains(
            &s["remote"]
                .as_str()
                .unwrap()
                .parse::<SocketAddr>()
                .unwrap()
                .port()
        ));
        assert!(
            matches!(s["owners"][0]["fd"].as_u64(), Some(3) | Some(4)),
            "{s}"
        );
    }
    // ss -tanp agrees on the owner of the child's connection to 5701.
    let local = mine
        .iter()
        .find(|s| s["remote"] == "127.0.0.1:5701")
        .unwrap()["local"]
        .as_str()
        .unwrap()
        .to_string();
    let ss = ns.exec("ss -Htanp state established");
    let line = ss
        .lines()
        // Recv-Q Send-Q Local Peer Process (the state column is left out by the filter).
        .find(|l| l.split_whitespace().nth(2) == Some(local.as_str()))
        .unwrap_or_else(|| panic!("{local} not in ss:\n{ss}"));
    assert!(line.contains(&format!("pid={pid},")), "{line}");
    // The full listener names this test process.
    let l = v["listeners"]
        .as_array()
        .unwrap()
        .iter()
        .find(|l| l["local"] == "127.0.0.1:5700")
        .unwrap();
    assert_eq!(l["full"], true, "{l}");
    assert_eq!(l["owners"][0]["pid"], std::process::id(), "{l}");
    assert_eq!(l["owners"][0]["comm"], own_comm().as_str(), "{l}");
    let findings = v["findings"].as_array().unwrap();
    let aq = findings
        .iter()
        .find(|f| f["pathology"] == "accept_queue_overflow")
        .unwrap_or_else(|| panic!("{v}"));
    let who = format!("{} pid {}", own_comm(), std::process::id());
    assert!(aq["summary"].as_str().unwrap().contains(&who), "{aq}");
    // 121 of 200 ports toward 127.0.0.1:5701: the finding names the child as the process
    // with a live socket toward it, and says TIME_WAIT needs trace.
    let d = destination(&v, "127.0.0.1:5701");
    assert_eq!(d["processes"][0]["pid"], pid, "{d}");
    assert_eq!(d["processes"][0]["sockets"], 1, "{d}");
    let pe = findings
        .iter()
        .find(|f| f["pathology"] == "port_exhaustion")
        .unwrap_or_else(|| panic!("{v}"));
    assert!(
        pe["summary"]
            .as_str()
            .unwrap()
            .contains(&format!("sleep pid {pid}")),
        "{pe}"
    );
    assert!(pe.to_string().contains("sockets --watch` as root"), "{pe}");
    // Without the scan nothing is attributed.
    let (_, out, err) = support::run_in(&ns, &["sockets", "--json", "--no-processes"]);
    let v = support::json(&out, &err);
    assert!(v.get("attribution").is_none(), "{v}");
    assert!(destination(&v, "127.0.0.1:5701").get("processes").is_none());
    let _ = child.kill();
    let _ = child.wait();
    drop((lf, lb, extra));
}

/// Accepts on `l` until `stop`, one thread per connection reading to EOF and then closing:
/// the clients close first, so each connection leaves its TIME_WAIT at the client.
fn serve_until_eof(
    l: TcpListener,
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
) -> std::thread::JoinHandle<()> {
    use std::sync::atomic::Ordering;
    l.set_nonblocking(true).unwrap();
    std::thread::spawn(move || {
        let deadline = Instant::now() + Duration::from_secs(120);
        while !stop.load(Ordering::SeqCst) && Instant::now() < deadline {
            match l.accept() {
                Ok((mut s, _)) => {
                    s.set_nonblocking(false).unwrap();
                    std::thread::spawn(move || {
                        let mut buf = [0u8; 64];
                        while matches!(s.read(&mut buf), Ok(n) if n > 0) {}
                    });
                }
                Err(_) => std::thread::sleep(Duration::from_millis(5)),
            }
        }
    })
}

/// The local ports of the TIME_WAIT sockets toward `remote` in `ns`, once no connection
/// toward it is still closing (FIN_WAIT*, CLOSING, LAST_ACK) and the set held still for
/// 100 ms.
fn settled_time_wait(ns: &Netns, remote: &str) -> std::collections::BTreeSet<u16> {
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut last = None;
    loop {
        let closing = ns.exec(&format!(
            "ss -Htan state fin-wait-1 state fin-wait-2 state closing state last-ack dst {remote}"
        ));
        let tw: std::collections::BTreeSet<u16> = ns
            .exec(&format!("ss -Htan state time-wait dst {remote}"))
            .lines()
            .map(|l| {
                let local = l.split_whitespace().nth(2).expect("local column");
                local.rsplit(':').next().unwrap().parse().unwrap()
            })
            .collect();
        if closing.trim().is_empty() && last.as_ref() == Some(&tw) {
            return tw;
        }
        assert!(Instant::now() < deadline, "still closing: {closing}");
        last = Some(tw);
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Issue 10 (process attribution): the last owner of TIME_WAIT sockets. `sockets --watch`
/// traces the closes in its namespace; two bash processes this test starts (pids known)
/// open and close connections to a server in the namespace, one after the other, and the
/// second exits; a third holds a connection open and closes nothing. Which TIME_WAIT socket
/// each closer left is read from `ss` after each. Every TIME_WAIT socket is named after the
/// process that left it and each closer's count is what it left (less the closes whose
/// history slot a later close took, which the test works out from the slot hash: a few per
/// hundred); the one that exited is marked so; sockets closed before the watch started are
/// counted as unknown, never given an owner; the holder and this test process (the server,
/// and the pre-watch closer) are not named. A socket is named only when the slot the
/// user-space hash computes holds its 4-tuple as the kernel wrote it, so the counts check
/// that hash against the kernel's too.
#[test]
fn time_wait_sockets_are_attributed_to_the_process_that_closed_them() {
    use std::io::BufRead;
    use std::process::{Command, Stdio};
    if !support::require_root("time_wait_sockets_are_attributed_to_the_process_that_closed_them") {
        return;
    }
    // Its watch traces closes (eBPF): see bpf_exclusive.
    let _bpf = support::bpf_exclusive();
    let ns = Netns::new("sklast");
    // 200 ports, no reuse: 5 + 100 + 10 TIME_WAIT and 1 live socket hold 116 of them, past
    // half the range (port_exhaustion, which then names the closers) with room to spare.
    ns.sysctl("net.ipv4.ip_local_port_range", "40000 40199");
    ns.sysctl("net.ipv4.tcp_tw_reuse", "0");
    let dst: SocketAddr = "127.0.0.1:5702".parse().unwrap();
    let (before, a, b) = (5usize, 100usize, 10usize);
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let l = in_netns(&ns, move || listener(dst, 128, None));
    let server = serve_until_eof(l, stop.clone());
    // Closed by this process before the watch: their close is not traced.
    let before_ports: Vec<u16> = in_netns(&ns, move || {
        (0..before)
            .map(|_| {
                let c = TcpStream::connect(dst).expect("connect");
                c.local_addr().unwrap().port()
            })
            .collect()
    });

    let mut watch = Command::new("ip")
        .args(["netns", "exec", &ns.name])
        .arg(support::bin())
        .args([
            "sockets", "--watch", "200ms", "--count", "300", "--json", "--list",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn sockets --watch");
    let (tx, rx) = std::sync::mpsc::channel::<String>();
    let out = watch.stdout.take().unwrap();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(out).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let next = |what: &str| -> Value {
        let line = rx
            .recv_timeout(Duration::from_secs(20))
            .unwrap_or_else(|e| panic!("no sample ({what}): {e}"));
        serde_json::from_str(&line).unwrap_or_else(|e| panic!("not JSON ({e}): {line}"))
    };
    // The trace attaches beside the first census; closes are recorded once a sample says so.
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let v = next("traced");
        if v["last_owners"]["status"] == "traced" {
            break;
        }
        assert_eq!(
            v["last_owners"]["reason"], "the trace of closes is still attaching",
            "{v}"
        );
        assert!(Instant::now() < deadline, "the trace never attached: {v}");
    }

    let bash = |script: &str| {
        Command::new("ip")
            .args(["netns", "exec", &ns.name, "bash", "-c", script])
            .stdout(Stdio::piped())
            .spawn()
            .expect("spawn bash")
    };
    let open_close = |n: usize| {
        format!(
            "for i in $(seq {n}); do exec 3<>/dev/tcp/127.0.0.1/5702 || exit 1; exec 3>&-; done"
        )
    };
    // The holder connects and keeps its connection; it closes nothing.
    let mut holder = bash("exec 3<>/dev/tcp/127.0.0.1/5702; echo ready; sleep 60");
    let mut ready = String::new();
    std::io::BufReader::new(holder.stdout.take().unwrap())
        .read_line(&mut ready)
        .unwrap();
    assert_eq!(ready.trim(), "ready");
    // A closes `a` connections and stays; then B closes `b` and exits. One after the other,
    // so that which TIME_WAIT socket each left is known from `ss` (the set grown by each),
    // and so is the order of their closes (for slots two 4-tuples share, below).
    let mut closer_a = bash(&format!("{}; echo done; sleep 60", open_close(a)));
    let pid_a = closer_a.id();
    let mut done = String::new();
    std::io::BufReader::new(closer_a.stdout.take().unwrap())
        .read_line(&mut done)
        .unwrap();
    assert_eq!(done.trim(), "done", "closer A failed");
    let after_a = settled_time_wait(&ns, "127.0.0.1:5702");
    let closer_b = bash(&format!("{}; echo done", open_close(b)));
    let pid_b = closer_b.id();
    assert!(
        closer_b.wait_with_output().unwrap().status.success(),
        "closer B failed"
    );
    let after_b = settled_time_wait(&ns, "127.0.0.1:5702");
    let pid_holder = holder.id();
    // What each left, as the kernel holds it (a connection reset under load leaves none).
    let left_a: Vec<u16> = after_a
        .iter()
        .copied()
        .filter(|p| !before_ports.contains(p))
        .collect();
    let left_b: Vec<u16> = after_b
        .iter()
        .copied()
        .filter(|p| !after_a.contains(p))
        .collect();
    // Under the full suite's load some of bash's connections once left no TIME_WAIT socket
    // (83 of 90; cause not established, not reproduced in targeted runs under load): what
    // each closer left is what the rest of the test checks, so only most must be there.
    assert!(
        left_a.len() * 10 >= a * 9 && left_b.len() + 2 >= b,
        "{left_a:?} {left_b:?}"
    );
    // bash -c runs its last command by exec: A is now `sleep`, the same process (pid and
    // start time). The trace names it as it was when it connected and closed: bash.
    let comm = || std::fs::read_to_string(format!("/proc/{pid_a}/comm")).unwrap();
    let deadline = Instant::now() + Duration::from_secs(5);
    while comm().trim_end() != "sleep" {
        assert!(
            Instant::now() < deadline,
            "A never became sleep: {}",
            comm()
        );
        std::thread::sleep(Duration::from_millis(10));
    }

    // The first sample that saw every TIME_WAIT socket.
    let tw = after_b.len() as u64;
    let deadline = Instant::now() + Duration::from_secs(20);
    let v = loop {
        let v = next("all TIME_WAIT");
        let seen = v["destinations"]
            .as_array()
            .unwrap()
            .iter()
            .find(|d| d["remote"] == "127.0.0.1:5702")
            .map(|d| d["time_wait"].as_u64().unwrap());
        if seen == Some(tw) {
            break v;
        }
        assert!(
            Instant::now() < deadline,
            "TIME_WAIT never reached {tw}: {v}"
        );
    };

    // The history is direct-mapped: of the traced closes whose 4-tuples share a slot, only
    // the last is kept (B's, when B's is among them: B ran after A). Which tuples share one
    // follows from the slot hash, checked against the kernel's writes by the counts below
    // (a wrong hash finds nothing).
    let netns_ino = std::fs::metadata(format!("/run/netns/{}", ns.name))
        .unwrap()
        .ino() as u32;
    let slot = |port: u16| {
        let local = SocketAddr::new(dst.ip(), port);
        history::tuple_slot(&history::tuple_bytes(netns_ino, local, dst))
    };
    let slots_of = |unrecorded: &[u16]| {
        let mut slots: BTreeMap<u32, (u64, bool)> = BTreeMap::new();
        for &p in left_a.iter().filter(|p| !unrecorded.contains(p)) {
            slots.entry(slot(p)).or_default().0 += 1;
        }
        for &p in left_b.iter().filter(|p| !unrecorded.contains(p)) {
            let e = slots.entry(slot(p)).or_default();
            e.0 += 1;
            e.1 = true;
        }
        slots
    };
    let slots = slots_of(&[]);
    // A traced close whose slot no other tuple shares, yet unnamed: the kernel did not run the
    // program for its connect or its close (README, "Not every event the trace misses is a
    // counted skip"; seen here about once in ten full-suite runs, also with no other trace
    // attaching). The tool then says unknown, which is true; at most one is allowed, and
    // the counts below leave it out.
    let mut unrecorded: Vec<u16> = Vec::new();
    // Socket by socket: named after the process whose set it is in, never one from before.
    for s in v["sockets"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| s["state"] == "TIME_WAIT" && s["remote"] == "127.0.0.1:5702")
    {
        let port = s["local"]
            .as_str()
            .unwrap()
            .parse::<SocketAddr>()
            .unwrap()
            .port();
        match s.get("last_owner") {
            Some(o) if left_a.contains(&port) => assert_eq!(o["pid"], pid_a, "{s}"),
            Some(o) if left_b.contains(&port) => assert_eq!(o["pid"], pid_b, "{s}"),
            Some(_) => panic!("closed before the trace, yet named: {s}"),
            None if before_ports.contains(&port) || slots[&slot(port)].0 > 1 => {}
            None => {
                unrecorded.push(port);
                eprintln!(
                "a traced close not named, its slot not shared: {s}; slot {}: {}",
                slot(port),
                support::sh(&format!(
                    "for f in /proc/{}/fdinfo/*; do grep -q 'value_size:.88' $f && id=$(sed -n 's/map_id:.//p' $f); done; \
                     bpftool map lookup id $id key {} 2>&1; grep -h recursion /proc/{}/fdinfo/* || true",
                    watch.id(),
                    slot(port).to_le_bytes().iter().map(|b| b.to_string()).collect::<Vec<_>>().join(" "),
                    watch.id()
                ))
            );
            }
        }
    }
    assert!(
        unrecorded.len() <= 1,
        "traced closes not named: {unrecorded:?}"
    );
    let slots = slots_of(&unrecorded);
    let want_b = slots.values().filter(|(_, b)| *b).count() as u64;
    let want_a = slots.len() as u64 - want_b;
    let replaced = (left_a.len() + left_b.len() - unrecorded.len()) as u64 - slots.len() as u64;
    let unknown = before as u64 + replaced + unrecorded.len() as u64;
    let d = destination(&v, "127.0.0.1:5702");
    let closed_by = d["closed_by"].as_array().unwrap_or_else(|| panic!("{d}"));
    assert_eq!(closed_by.len(), 2, "{d}");
    let by_pid = |pid: u32| {
        closed_by
            .iter()
            .find(|c| c["pid"] == pid)
            .unwrap_or_else(|| panic!("pid {pid} not named: {d}"))
    };
    let (ca, cb) = (by_pid(pid_a), by_pid(pid_b));
    assert_eq!(
        (ca["comm"].as_str(), ca["exited"].as_bool()),
        (Some("bash"), Some(false))
    );
    assert_eq!(
        (cb["comm"].as_str(), cb["exited"].as_bool()),
        (Some("bash"), Some(true))
    );
    let (na, nb) = (
        ca["time_wait_sockets"].as_u64().unwrap(),
        cb["time_wait_sockets"].as_u64().unwrap(),
    );
    assert_eq!((na, nb), (want_a, want_b), "replaced {replaced}: {d}");
    assert_eq!(d["closed_by_unknown"], unknown, "{d}");
    assert_eq!(d["closed_by_unknown_before_trace"], before as u64, "{d}");
    for c in closed_by {
        assert_ne!(c["pid"], pid_holder, "the holder closed nothing: {d}");
        assert_ne!(c["pid"], std::process::id(), "{d}");
    }
    // The holder's live socket is attributed as a live one.
    assert!(
        d["processes"]
            .as_array()
            .unwrap()
            .iter()
            .any(|p| p["pid"] == pid_holder),
        "{d}"
    );
    let lo = &v["last_owners"];
    assert_eq!(lo["time_wait_sockets"], tw, "{lo}");
    assert_eq!(lo["found"], na + nb, "{lo}");
    assert_eq!(lo["before_trace"], before as u64, "{lo}");
    let pe = v["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["pathology"] == "port_exhaustion")
        .unwrap_or_else(|| panic!("{v}"));
    let line =
        format!("closed by: bash[{pid_a}] {na}, bash[{pid_b}] {nb} (exited); {unknown} unknown");
    assert!(pe["summary"].as_str().unwrap().contains(&line), "{pe}");

    // SAFETY: signalling the child we spawned, by its pid.
    unsafe { libc::kill(watch.id() as i32, libc::SIGINT) };
    let status = watch.wait().unwrap();
    assert!(matches!(status.code(), Some(0) | Some(1)), "{status:?}");

    // A one-shot census cannot know: it says so in one line and names no closer.
    let (code, out, err) = support::run_in(&ns, &["sockets", "--json"]);
    assert_eq!(code, 1, "{err}");
    let v = support::json(&out, &err);
    assert_eq!(v["last_owners"]["status"], "untraced", "{v}");
    assert!(destination(&v, "127.0.0.1:5702").get("closed_by").is_none());
    let (_, text, _) = support::run_in(&ns, &["sockets"]);
    let lines: Vec<&str> = text
        .lines()
        .filter(|l| l.contains("TIME_WAIT last owners"))
        .collect();
    assert_eq!(lines.len(), 1, "{text}");
    assert!(
        lines[0].contains("one-shot") && lines[0].contains("`--watch` as root"),
        "{text}"
    );

    for c in [&mut holder, &mut closer_a] {
        let _ = c.kill();
        let _ = c.wait();
    }
    stop.store(true, std::sync::atomic::Ordering::SeqCst);
    server.join().unwrap();
}

/// The findings of `pathology` in a report (any source).
fn findings_of<'a>(v: &'a Value, pathology: &str) -> Vec<&'a Value> {
    v["findings"]
        .as_array()
        .unwrap_or_else(|| panic!("no findings in {v}"))
        .iter()
        .filter(|f| f["pathology"] == pathology)
        .collect()
}

/// Issue 21, defect 5: a writer blocked on a reader that stopped reading was a WARNING in
/// `sockets` ("one census: how long it lasts is unknown"), CRITICAL in `doctor`, and info in
/// `trace` ("Verdict: healthy", exit 0, the writer's pid among the processes). The same
/// stall is now measured by each (sockets: the reader's data unread since it arrived,
/// tcpi_last_data_recv; doctor: that and its two censuses; trace: from the window closing to
/// the last probe that found it closed) and judged alike, and the reader is named, the writer
/// only as the one waiting. The reader is a process of its own (perl), the writer this test.
#[test]
fn a_stopped_reader_is_one_long_stall_in_sockets_doctor_and_trace_naming_the_reader() {
    let test = "a_stopped_reader_is_one_long_stall_in_sockets_doctor_and_trace_naming_the_reader";
    if !support::require_root(test) {
        return;
    }
    let _bpf = support::bpf_exclusive();
    let ns = Netns::new("sr21");
    // Reads 64 KiB, then stops reading for at most 60 s (the namespace's end kills it).
    let mut reader = ns.spawn(
        "exec perl -MIO::Socket::INET -e '$l = IO::Socket::INET->new(LocalAddr => \"127.0.0.1:5410\", Listen => 4, ReuseAddr => 1) or die \"listen: $!\"; $c = $l->accept; $n = 0; while ($n < 65536) { $r = sysread($c, $b, 65536); last if !$r; $n += $r } sleep 60'",
    );
    let deadline = Instant::now() + Duration::from_secs(5);
    while !ns.exec("ss -Hltn sport = :5410").contains("5410") {
        assert!(Instant::now() < deadline, "the reader did not listen");
        std::thread::sleep(Duration::from_millis(50));
    }
    // The trace watches from before the window closes (it takes about a second to attach).
    let trace = std::process::Command::new(support::bin())
        .args(["trace", "--netns", &ns.name, "--duration", "8s", "--json"])
        .env("COLUMNS", support::COLUMNS)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("spawn trace");
    std::thread::sleep(Duration::from_secs(2));
    let writer = in_netns(&ns, || {
        let mut c = TcpStream::connect("127.0.0.1:5410").unwrap();
        c.set_nonblocking(true).unwrap();
        let chunk = vec![0x5au8; 16 * 1024];
        let t0 = Instant::now();
        let mut blocked = 0;
        while t0.elapsed() < Duration::from_secs(3) && blocked < 5 {
            match c.write(&chunk) {
                Ok(_) => {}
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                    blocked += 1;
                    std::thread::sleep(Duration::from_millis(20));
                }
                Err(e) => panic!("write: {e}"),
            }
        }
        c
    });
    // The window has been closed about 2.5 s: probes went out at about 0.2, 0.6 and 1.4 s.
    std::thread::sleep(Duration::from_millis(2500));
    let (scode, sout, serr) = support::run(&["sockets", "--netns", &ns.name, "--json"]);
    // Without its own trace: two traces attaching at once can make one miss events.
    let (dcode, dout, derr) = support::run(&[
        "doctor",
        "--netns",
        &ns.name,
        "--json",
        "--quick",
        "--no-trace",
        "--window",
        "500ms",
    ]);
    let t = trace.wait_with_output().expect("trace");
    drop(writer);
    let stdout = String::from_utf8_lossy(&t.stdout);
    let report: Value = stdout
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .find(|v| v["type"] == "report")
        .unwrap_or_else(|| {
            panic!(
                "no trace report:\n{stdout}\n{}",
                String::from_utf8_lossy(&t.stderr)
            )
        });
    let sockets = support::json(&sout, &serr);
    let doctor = support::json(&dout, &derr);
    let reader_pid = reader.id();
    let me = std::process::id();
    let mut severities = Vec::new();
    for (what, code, v) in [
        ("sockets", scode, &sockets),
        ("doctor", dcode, &doctor),
        ("trace", t.status.code().unwrap_or(-1), &report),
    ] {
        let f = findings_of(v, "slow_reader");
        assert_eq!(f.len(), 1, "{what}: {v:#}");
        let f = f[0];
        assert_eq!(
            (&f["severity"], &f["severity_rule"]),
            (&Value::from("critical"), &Value::from("long_stall")),
            "{what}: {f:#}"
        );
        assert!(
            f["impact"]["worst_stall_us"].as_u64().unwrap() >= 1_000_000,
            "{what}: {f:#}"
        );
        assert_eq!(code, 1, "{what}: a stall of a second or more is a finding");
        let summary = f["summary"].as_str().unwrap();
        assert!(
            summary.contains(&format!("not reading: perl pid {reader_pid}"))
                || summary.contains(&format!("not reading: perl (pid {reader_pid})")),
            "{what}: {summary}"
        );
        assert!(
            !summary.contains(&format!("not reading: {} pid {me}", own_comm())),
            "{what}: {summary}"
        );
        severities.push(f["severity"].clone());
    }
    // sockets and doctor name the writer as the one waiting.
    for v in [&sockets, &doctor] {
        let summary = findings_of(v, "slow_reader")[0]["summary"]
            .as_str()
            .unwrap();
        assert!(
            summary.contains(&format!("writer waiting: {} pid {me}", own_comm())),
            "{summary}"
        );
    }
    // The trace blames only the process its probes reached.
    let blamed: Vec<String> = findings_of(&report, "slow_reader")[0]["evidence"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| {
            e["what"]
                .as_str()
                .is_some_and(|w| w.starts_with("processes not reading"))
        })
        .flat_map(|e| e["items"].as_array().unwrap().clone())
        .map(|i| i.as_str().unwrap().to_string())
        .collect();
    assert!(!blamed.is_empty(), "{report:#}");
    assert!(
        blamed
            .iter()
            .all(|b| b.starts_with(&format!("perl (pid {reader_pid})"))),
        "{blamed:?}"
    );
    assert!(
        severities.windows(2).all(|w| w[0] == w[1]),
        "{severities:?}"
    );
    // The reader, by its pid (the namespace's end would kill it too).
    let _ = reader.kill();
    let _ = reader.wait();
}

/// SO_LINGER 0 on `s`: its close sends a reset and frees it at once.
fn set_linger0(s: &TcpStream) {
    use std::os::fd::AsRawFd;
    let l = libc::linger {
        l_onoff: 1,
        l_linger: 0,
    };
    // SAFETY: setsockopt on a valid fd with a correctly sized value.
    unsafe {
        libc::setsockopt(
            s.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_LINGER,
            &l as *const _ as *const libc::c_void,
            std::mem::size_of::<libc::linger>() as libc::socklen_t,
        );
    }
}

/// A client socket bound to `from` (SO_REUSEADDR), connected to `to`.
fn connect_from(from: SocketAddr, to: SocketAddr) -> std::io::Result<TcpStream> {
    let s = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None)?;
    s.set_reuse_address(true)?;
    s.bind(&from.into())?;
    s.connect_timeout(&to.into(), Duration::from_secs(5))?;
    Ok(s.into())
}

#[test]
fn an_orphaned_fin_wait2_socket_whose_peer_is_gone_is_named_and_answers_the_next_syn_with_a_stale_ack(
) {
    const TEST: &str = "an_orphaned_fin_wait2_socket_whose_peer_is_gone_is_named_and_answers_the_next_syn_with_a_stale_ack";
    if !support::require_root(TEST) {
        return;
    }
    let _bpf = support::bpf_exclusive();
    let ns = Netns::new("skfw2");
    let (client, server): (SocketAddr, SocketAddr) = (
        "127.0.0.1:20041".parse().unwrap(),
        "127.0.0.1:5341".parse().unwrap(),
    );
    // Report 003's leftover, built on purpose: the server closes first, the client
    // acknowledges the FIN, then closes with a reset that is lost (dropped here), so the
    // server's orphaned FIN_WAIT2 socket waits for a FIN or reset that never comes.
    ns.exec("nft add table inet tdoc && nft add chain inet tdoc out { type filter hook output priority 0 \\; } && nft add rule inet tdoc out tcp sport 20041 tcp flags \\& \\(rst \\| ack\\) == \\(rst \\| ack\\) drop");
    // Listening before the first connect (a socket belongs to the namespace it was made in).
    let l = in_netns(&ns, move || listener(server, 16, None));
    let accepted = std::thread::spawn(move || {
        for _ in 0..2 {
            let (mut c, _) = l.accept().unwrap();
            let mut b = [0u8; 4];
            c.read_exact(&mut b).unwrap();
            drop(c);
        }
    });
    in_netns(&ns, move || {
        let mut s = connect_from(client, server).expect("first connect");
        s.write_all(b"ping").unwrap();
        let mut rest = Vec::new();
        s.read_to_end(&mut rest).unwrap();
        // The FIN is acknowledged well before the close (no delayed ACK holds it 100 ms).
        std::thread::sleep(Duration::from_millis(100));
        set_linger0(&s);
    });
    // Older than the second it may take a reset in flight to arrive.
    std::thread::sleep(Duration::from_millis(1500));
    let ss = ns.exec("ss -Htanoe state fin-wait-2");
    assert!(ss.contains("timewait") && ss.contains(":20041"), "{ss}");
    let (code, out, err) = support::run(&["sockets", "--json", "--netns", &ns.name]);
    let v = support::json(&out, &err);
    assert_eq!(code, 0, "{err}\n{v:#}");
    let stale = v["stale_fin_wait2"].as_array().unwrap();
    assert_eq!(stale.len(), 1, "{v:#}");
    assert_eq!(stale[0]["local"], server.to_string());
    assert_eq!(stale[0]["remote"], client.to_string());
    let f = v["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["pathology"] == "stale_ack_race")
        .unwrap_or_else(|| panic!("{v:#}"));
    assert_eq!(f["severity"], "info", "{f:#}");
    assert!(
        f["summary"]
            .as_str()
            .unwrap()
            .contains("1 orphaned FIN_WAIT2"),
        "{f:#}"
    );
    // What it claims, checked: the next connect from the client's port meets a stale ACK
    // from that socket, and the trace names it so.
    let mut trace = std::process::Command::new(support::bin())
        .args(["trace", "--json", "--duration", "4s", "--netns", &ns.name])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("spawn trace");
    let mut stderr = std::io::BufReader::new(trace.stderr.take().unwrap());
    let mut line = String::new();
    while !line.contains("tracing started") {
        line.clear();
        use std::io::BufRead;
        assert!(
            stderr.read_line(&mut line).unwrap() > 0,
            "trace ended: {line}"
        );
    }
    let resent_before = ns.exec("nstat -az TcpExtTCPSynRetrans");
    in_netns(&ns, move || {
        let mut s = connect_from(client, server).expect("reconnect from the same port");
        s.write_all(b"ping").unwrap();
    });
    accepted.join().unwrap();
    let out = trace.wait_with_output().expect("trace");
    let text = String::from_utf8_lossy(&out.stdout);
    let events: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|e| e["type"] == "event")
        .collect();
    let cause = |c: &str| events.iter().filter(|e| e["cause"] == c).count();
    assert_eq!(
        cause("fin_wait2_refused_syn"),
        1,
        "{events:#?}\n{resent_before}"
    );
    assert!(cause("stale_ack_race") >= 1, "{events:#?}");
    assert_eq!(
        cause("time_wait_collision") + cause("time_wait_refused_syn"),
        0,
        "{events:#?}"
    );
}
