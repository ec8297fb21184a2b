//! `tcpdoctor doctor` in network namespaces holding known problems, and in a fresh one.

mod support;

use std::io::Write;
use std::net::{SocketAddrV4, TcpStream};
use std::os::fd::OwnedFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::Value;
use support::Netns;

fn pathologies(v: &Value) -> Vec<(String, String, String)> {
    v["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            (
                f["pathology"].as_str().unwrap().to_string(),
                f["severity"].as_str().unwrap().to_string(),
                f["source"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

#[test]
fn doctor_names_accept_queue_overflow() {
    if !support::require_root("doctor_names_accept_queue_overflow") {
        return;
    }
    let _bpf = support::bpf_shared();
    let ns = Netns::new("draq");
    let addr: SocketAddrV4 = "127.0.0.1:5300".parse().unwrap();
    // A listener with backlog 1 that never accepts.
    let listener = support::in_netns(&ns, move || support::listener(addr.into(), 1, None));
    // Flood it for the whole run: a connect every 20 ms, at most 300 (bounded in count and
    // time), from a thread inside the namespace.
    let stop = Arc::new(AtomicBool::new(false));
    let flood = {
        let stop = stop.clone();
        support::spawn_in_netns(&ns, move || {
            let mut held: Vec<OwnedFd> = Vec::new();
            let t0 = Instant::now();
            while !stop.load(Ordering::Relaxed)
                && held.len() < 300
                && t0.elapsed() < Duration::from_secs(20)
            {
                held.push(support::connect_nonblocking(addr.into()));
                std::thread::sleep(Duration::from_millis(20));
            }
            held.len()
        })
    };
    std::thread::sleep(Duration::from_millis(200));
    let (code, out, err) = support::run_in(&ns, &["doctor", "--json", "--quick", "--window", "1s"]);
    stop.store(true, Ordering::SeqCst);
    let flooded = flood.join().unwrap();
    let v = support::json(&out, &err);
    assert!(flooded > 10);
    assert_eq!(code, 1, "{err}\n{out}");
    assert_eq!(v["command"], "doctor");
    let p = pathologies(&v);
    // Named from the census (queue > backlog) and from the counters (ListenOverflows moved).
    assert!(
        p.iter()
            .any(|(n, s, src)| n == "accept_queue_overflow" && s != "info" && src == "sockets"),
        "{p:?}"
    );
    assert!(
        v["counters_moved"]["TcpExtListenOverflows"]
            .as_i64()
            .unwrap_or(0)
            > 0,
        "{v}"
    );
    // One finding carries both sides: the census and the counter.
    let aq = &v["findings"][0];
    assert!(
        aq["evidence"]
            .as_array()
            .unwrap()
            .iter()
            .any(|e| e["kind"] == "counter" && e["name"] == "TcpExtListenOverflows"),
        "{aq}"
    );
    // Ranked: the overflow is the first finding.
    assert_eq!(
        v["findings"][0]["pathology"], "accept_queue_overflow",
        "{p:?}"
    );
    // The audit saw the listener's backlog from the census.
    assert!(v["skipped"]
        .as_array()
        .unwrap()
        .iter()
        .any(|s| s["step"] == "probe"));
    // Human output names it too.
    let (_, text, _) = support::run_in(&ns, &["doctor", "--quick", "--window", "200ms"]);
    assert!(text.contains("accept queue overflowed"), "{text}");
    drop(listener);
}

#[test]
fn doctor_names_a_slow_reader() {
    if !support::require_root("doctor_names_a_slow_reader") {
        return;
    }
    let _bpf = support::bpf_shared();
    let ns = Netns::new("drsr");
    let addr: SocketAddrV4 = "127.0.0.1:5400".parse().unwrap();
    let held = support::in_netns(&ns, move || {
        // A small receive buffer, and a reader that never reads.
        let l = support::listener(addr.into(), 16, Some(4096));
        let mut c = TcpStream::connect(addr).unwrap();
        let (s, _) = l.accept().unwrap();
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
        std::thread::sleep(Duration::from_millis(300));
        (l, c, s)
    });
    let (code, out, err) =
        support::run_in(&ns, &["doctor", "--json", "--quick", "--window", "500ms"]);
    let v = support::json(&out, &err);
    assert_eq!(code, 1, "{err}\n{out}");
    let p = pathologies(&v);
    assert!(
        p.iter()
            .any(|(n, s, src)| n == "slow_reader" && s != "info" && src == "sockets"),
        "{p:?}"
    );
    let slow = v["sockets"]["slow_readers"].as_array().unwrap();
    assert!(
        slow.iter().any(|s| s["local"] == "127.0.0.1:5400"),
        "{slow:?}"
    );
    drop(held);
}

/// Decision (documented in docs/examples/doctor.md): a fresh namespace with kernel defaults
/// is healthy. Doctor exits 0; it may list informational findings (the port budget, the SYN
/// ladder, the RTO floor) but nothing of severity warning or above.
#[test]
fn doctor_in_a_fresh_namespace_is_healthy() {
    if !support::require_root("doctor_in_a_fresh_namespace_is_healthy") {
        return;
    }
    let _bpf = support::bpf_shared();
    let ns = Netns::new("drok");
    let (code, out, err) = support::run_in(&ns, &["doctor", "--json", "--window", "500ms"]);
    let v = support::json(&out, &err);
    for (n, s, src) in pathologies(&v) {
        assert_eq!(s, "info", "{n} from {src}: {v}");
    }
    assert_eq!(v["verdict"], "healthy");
    assert_eq!(code, 0, "{err}");
    // Issue 15: doctor prints the SYN ladder bounded by time, as the kernel runs it.
    let ladder = v["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["pathology"] == "syn_retransmit" && f["source"] == "check")
        .unwrap_or_else(|| panic!("no ladder: {v}"));
    let give_up = v["settings"]["syn_give_up_s"].as_f64().unwrap();
    assert!(
        ladder["summary"]
            .as_str()
            .unwrap()
            .contains(&format!("fail at {give_up} s")),
        "{ladder}"
    );
    if v["settings"]["settings"]["tcp"]["tcp_syn_linear_timeouts"] == 4
        && v["settings"]["settings"]["tcp"]["tcp_syn_retries"] == 6
    {
        assert_eq!(give_up, 131.0, "{ladder}");
    }
    let steps: Vec<&str> = v["steps"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| s["ran"] == true)
        .map(|s| s["step"].as_str().unwrap())
        .collect();
    for s in ["check", "sockets", "counters", "probe"] {
        assert!(steps.contains(&s), "{s} did not run: {v}");
    }
    // The same through --netns from outside.
    let (code, out, err) = support::run(&[
        "doctor", "--json", "--quick", "--window", "200ms", "--netns", &ns.name,
    ]);
    let v = support::json(&out, &err);
    assert_eq!(code, 0, "{err}\n{out}");
    assert_eq!(v["netns"], ns.name.as_str());
}

/// Without root every step still runs (sock_diag, /proc, the loopback probe need none) but
/// the eBPF trace, whose absence is recorded with what it needs.
#[test]
fn doctor_runs_without_root() {
    if !support::require_root("doctor_runs_without_root") {
        return;
    }
    let _bpf = support::bpf_shared();
    let ns = Netns::new("drnr");
    let out = std::process::Command::new("ip")
        .args([
            "netns",
            "exec",
            &ns.name,
            "setpriv",
            "--reuid=65534",
            "--regid=65534",
            "--clear-groups",
        ])
        .arg(support::bin())
        .args(["doctor", "--json", "--window", "300ms"])
        .output()
        .expect("spawn setpriv");
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    let v = support::json(&stdout, &stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}\n{stdout}");
    assert_eq!(v["root"], false);
    let skipped: Vec<&str> = v["skipped"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["step"].as_str().unwrap())
        .collect();
    assert_eq!(skipped, ["trace"], "{v}");
    assert_eq!(v["window_source"], "counters_only", "{v}");
    assert!(v["probe"]["requests_ok"].as_u64().unwrap() > 0, "{v}");
}

#[test]
fn doctor_rejects_bad_input_in_one_line() {
    let (code, _, err) = support::run(&["doctor", "--window", "5ms"]);
    assert_eq!(code, 2);
    assert!(err.contains("--window"), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    let (code, _, err) = support::run(&["doctor", "--netns", "tdoc-none-here"]);
    assert_eq!(code, 2);
    assert!(err.contains("tdoc-none-here"), "{err}");
}

/// Issue 18: Ctrl-C during the window printed "healthy (interrupted)" and exit 0. An
/// interrupted run is never healthy: doctor stops promptly, skips the probe, reports what it
/// measured so far (settings, both censuses, the counters over the shortened window), and
/// with nothing found its verdict is inconclusive, exit 3.
#[test]
fn doctor_interrupted_mid_window_is_inconclusive_not_healthy() {
    if !support::require_root("doctor_interrupted_mid_window_is_inconclusive_not_healthy") {
        return;
    }
    let _bpf = support::bpf_shared();
    // A fresh namespace has nothing to find: only the interruption decides the verdict.
    let ns = Netns::new("drint");
    for json in [true, false] {
        let mut args = vec!["doctor", "--window", "20s", "--netns", &ns.name];
        if json {
            args.push("--json");
        }
        let child = std::process::Command::new(support::bin())
            .args(&args)
            .env("COLUMNS", support::COLUMNS)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("spawn doctor");
        std::thread::sleep(Duration::from_millis(1500));
        unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
        let t0 = Instant::now();
        let out = child.wait_with_output().expect("wait doctor");
        assert!(
            t0.elapsed() < Duration::from_secs(5),
            "doctor did not stop promptly"
        );
        let (stdout, stderr) = (
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr),
        );
        assert_eq!(out.status.code(), Some(3), "{stderr}\n{stdout}");
        if !json {
            assert!(!stdout.contains("healthy"), "{stdout}");
            assert!(stdout.contains("Verdict: inconclusive"), "{stdout}");
            assert!(stdout.contains("interrupted after"), "{stdout}");
            continue;
        }
        let v = support::json(&stdout, &stderr);
        assert_eq!(v["interrupted"], true, "{v}");
        assert_eq!(v["verdict"], "inconclusive", "{v}");
        let window = v["window_ms"].as_u64().unwrap();
        // Cut short: the signal came 1.5 s after the start, minus the setup before the window
        // (settings, census, attaching the eBPF trace: longer on a loaded machine).
        assert!((1..5000).contains(&window), "{v}");
        assert_eq!(v["window_requested_ms"], 20_000);
        // What was measured before the interruption is said, and kept.
        let reason = v["verdict_reason"].as_str().unwrap();
        for what in [
            "cut short",
            "TCP settings",
            "socket censuses",
            "kernel counters",
        ] {
            assert!(reason.contains(what), "{what}: {reason}");
        }
        assert!(reason.contains("of the 20s window"), "{reason}");
        let ran: Vec<&str> = v["steps"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|s| s["ran"] == true)
            .map(|s| s["step"].as_str().unwrap())
            .collect();
        // As root the eBPF trace observed the window too (and says so).
        let mut want = vec!["sockets", "check", "counters"];
        if v["window_source"] == "trace_and_counters" {
            want.push("trace");
        }
        assert_eq!(ran, want, "{v}");
        assert!(v["settings"].is_object() && v["sockets"].is_object(), "{v}");
        let probe = v["steps"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["step"] == "probe")
            .unwrap();
        assert_eq!(probe["ran"], false);
        assert_eq!(probe["detail"], "interrupted");
    }
}

#[test]
fn doctor_skips_the_probe_when_loopback_is_down() {
    if !support::require_root("doctor_skips_the_probe_when_loopback_is_down") {
        return;
    }
    let _bpf = support::bpf_shared();
    let ns = Netns::new("drlo");
    ns.exec("ip link set lo down");
    let (code, out, err) = support::run_in(&ns, &["doctor", "--json", "--window", "200ms"]);
    let v = support::json(&out, &err);
    assert_eq!(code, 0, "{err}\n{out}");
    let skipped = v["skipped"].as_array().unwrap();
    assert_eq!(skipped.len(), 1, "{v}");
    assert_eq!(skipped[0]["step"], "probe");
    assert!(skipped[0]["reason"]
        .as_str()
        .unwrap()
        .contains("lo is down"));
}

/// SO_LINGER 0 on a socket: close() sends a reset.
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

#[test]
fn doctor_names_the_stale_ack_race_the_trace_attributes_not_just_syn_retransmitted() {
    if !support::require_root(
        "doctor_names_the_stale_ack_race_the_trace_attributes_not_just_syn_retransmitted",
    ) {
        return;
    }
    let _bpf = support::bpf_exclusive();
    use std::io::Read;
    let ns = Netns::new("drst");
    // The client's reset at close (RST+ACK, SO_LINGER 0) is lost, so the server keeps the old
    // connection and answers the next SYN from the same port with a stale ACK; the bare RST
    // the connecting socket sends for it passes.
    ns.exec("nft add table inet tdoc && nft add chain inet tdoc out { type filter hook output priority 0 \\; } && nft add rule inet tdoc out tcp flags \\& \\(rst \\| ack\\) == \\(rst \\| ack\\) drop");
    const N: usize = 40;
    let stop = Arc::new(AtomicBool::new(false));
    let server = {
        let stop = stop.clone();
        support::spawn_in_netns(&ns, move || {
            let l = support::listener("127.0.0.1:5310".parse().unwrap(), 64, None);
            l.set_nonblocking(true).unwrap();
            let mut kept = Vec::new();
            let t0 = Instant::now();
            while !stop.load(Ordering::Relaxed) && t0.elapsed() < Duration::from_secs(30) {
                match l.accept() {
                    Ok((mut c, _)) => {
                        c.set_nonblocking(false).unwrap();
                        // A client that gave up on its connect resets it, and the rule above
                        // drops that reset: the read must not wait for a ping forever.
                        c.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
                        let mut b = [0u8; 4];
                        if c.read_exact(&mut b).is_ok() {
                            let _ = c.write_all(b"pong");
                        }
                        kept.push(c);
                    }
                    Err(_) => std::thread::sleep(Duration::from_millis(5)),
                }
            }
            kept.len()
        })
    };
    // Reconnects from one fixed port every 100 ms, bounded in count and time, across the
    // whole window (the trace attaches within it; what happens before is in no counter delta
    // the doctor reads either).
    let client = {
        let stop = stop.clone();
        support::spawn_in_netns(&ns, move || {
            std::thread::sleep(Duration::from_millis(300));
            let t0 = Instant::now();
            let mut done = 0;
            while done < N && !stop.load(Ordering::Relaxed) && t0.elapsed() < Duration::from_secs(8)
            {
                let s = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None)
                    .unwrap();
                s.set_reuse_address(true).unwrap();
                s.bind(
                    &"127.0.0.1:20031"
                        .parse::<std::net::SocketAddr>()
                        .unwrap()
                        .into(),
                )
                .unwrap();
                let to: std::net::SocketAddr = "127.0.0.1:5310".parse().unwrap();
                if s.connect_timeout(&to.into(), Duration::from_secs(3))
                    .is_ok()
                {
                    let mut s: TcpStream = s.into();
                    s.set_nodelay(true).unwrap();
                    s.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
                    let _ = s.write_all(b"ping");
                    let mut b = [0u8; 4];
                    let _ = s.read_exact(&mut b);
                    set_linger0(&s);
                }
                done += 1;
                std::thread::sleep(Duration::from_millis(100));
            }
            done
        })
    };
    let (code, out, err) = support::run(&[
        "doctor", "--json", "--quick", "--window", "3s", "--netns", &ns.name,
    ]);
    stop.store(true, Ordering::SeqCst);
    let reconnects = client.join().unwrap();
    server.join().unwrap();
    let v = support::json(&out, &err);
    assert_eq!(code, 1, "{err}\n{v:#}");
    assert!(reconnects > 10, "{reconnects}");
    // The window was traced, and the report says so.
    assert_eq!(v["window_source"], "trace_and_counters", "{v:#}");
    assert_eq!(v["trace"]["used"], true, "{v:#}");
    let resent = v["counters_moved"]["TcpExtTCPSynRetrans"]
        .as_i64()
        .unwrap_or(0);
    assert!(resent >= 3, "SYNs resent in the window: {v:#}");
    // Every SYN the counters saw resent in the window was attributed, and to the race.
    let attributed: i64 = v["trace"]["syn_resends"]
        .as_object()
        .unwrap()
        .values()
        .map(|n| n.as_i64().unwrap())
        .sum();
    // (Less any resend the kernel skipped tracing, which the report counts.)
    let skipped = (support::skipped(&v["trace"], "tcp_retransmit_skb")
        + support::not_traced(&v["trace"])) as i64;
    assert!(attributed + skipped >= resent, "{v:#}");
    assert!(
        v["trace"]["syn_resends"]["stale_ack_race"]
            .as_i64()
            .unwrap()
            + skipped
            >= resent - 1,
        "{v:#}"
    );
    // The cause is named first, from the trace, with the counter's delta as evidence; no
    // second, unexplained "SYN retransmitted" finding counts the same resends again.
    let f = pathologies(&v);
    assert_eq!(f[0].0, "stale_ack_race", "{f:?}");
    assert_eq!(f[0].2, "trace", "{f:?}");
    let first = &v["findings"][0];
    assert!(
        first["evidence"]
            .as_array()
            .unwrap()
            .iter()
            .any(|e| e.to_string().contains("TcpExtTCPSynRetrans")),
        "{first:#}"
    );
    if attributed >= resent {
        assert!(
            !f.iter()
                .any(|(p, _, src)| p == "syn_retransmit" && src == "counters"),
            "{f:?}"
        );
    }
}

#[test]
fn doctor_on_seed_003s_programs_names_the_stale_ack_race_not_a_time_wait_collision() {
    const TEST: &str =
        "doctor_on_seed_003s_programs_names_the_stale_ack_race_not_a_time_wait_collision";
    if !support::require_root(TEST) {
        return;
    }
    let Some(seed) = support::seeds::Seed::build(support::seeds::STALE_ACK_RACE, TEST) else {
        return;
    };
    let _bpf = support::bpf_exclusive();
    let ns = Netns::new("d003");
    let mut server = seed.spawn_on(&ns, "server", Some(0));
    std::thread::sleep(Duration::from_millis(300));
    let mut client = seed.spawn_on(&ns, "client", Some(1));
    // Report 003's programs as published. How often the race fires depends on how the two
    // programs are scheduled: under doctor's trace, 22 to 66 times per 15 s window in 4
    // runs on an idle machine (2 CPUs), but 0, 0, 1, 4, 15, 19 and 108 times in 7 windows
    // while other builds ran. What is tested is what doctor says once it fired: up to three
    // windows are watched, until one saw it.
    let mut watched = None;
    for _ in 0..3 {
        let (code, out, err) = support::run(&[
            "doctor", "--json", "--quick", "--window", "15s", "--netns", &ns.name,
        ]);
        let v = support::json(&out, &err);
        assert!(code == 0 || code == 1, "{err}\n{v:#}");
        assert_eq!(v["trace"]["used"], true, "{v:#}");
        let resent = v["counters_moved"]["TcpExtTCPSynRetrans"]
            .as_i64()
            .unwrap_or(0);
        eprintln!("{TEST}: {resent} SYN resend(s) in the window");
        let fired = resent >= 1;
        watched = Some(v);
        if fired {
            break;
        }
    }
    let _ = client.kill();
    let _ = client.wait();
    let _ = server.kill();
    let _ = server.wait();
    let v = watched.unwrap();
    assert!(
        v["counters_moved"]["TcpExtTCPSynRetrans"]
            .as_i64()
            .unwrap_or(0)
            >= 1,
        "the race did not fire in three 15 s windows: {v:#}"
    );
    let causes = &v["trace"]["causes"];
    for bad in ["time_wait_collision", "time_wait_refused_syn"] {
        assert!(causes.get(bad).is_none(), "{bad}: {causes:#}");
    }
    assert!(
        causes["fin_wait2_refused_syn"].as_u64().unwrap_or(0) >= 1,
        "{causes:#}"
    );
    assert!(
        v["trace"]["syn_resends"]
            .get("time_wait_collision")
            .is_none(),
        "{v:#}"
    );
    // The trace attributed the resends to the race; the census may have seen an orphaned
    // FIN_WAIT2 socket waiting for its SYN too: one finding either way (doctor merges them).
    assert!(
        v["trace"]["syn_resends"]["stale_ack_race"]
            .as_u64()
            .unwrap_or(0)
            >= 1,
        "{v:#}"
    );
    let f = pathologies(&v);
    assert_eq!(
        f.iter().filter(|(p, _, _)| p == "stale_ack_race").count(),
        1,
        "{f:?}"
    );
    assert!(
        f.iter().all(|(p, _, _)| p != "time_wait_collision"),
        "{f:?}"
    );
    let race = v["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["pathology"] == "stale_ack_race")
        .unwrap();
    assert!(
        !race["remedies"].to_string().contains("timestamps"),
        "{race:#}"
    );
}

#[test]
fn doctor_without_the_trace_says_counters_only_and_why() {
    if !support::require_root("doctor_without_the_trace_says_counters_only_and_why") {
        return;
    }
    let _bpf = support::bpf_shared();
    // Turned off by the flag.
    let (code, out, err) = support::run(&["doctor", "--quick", "--window", "200ms", "--no-trace"]);
    assert!(code == 0 || code == 1, "{err}\n{out}");
    assert!(
        out.contains("window observed by the counters only (--no-trace)"),
        "{out}"
    );
    let (_, out, err) = support::run(&[
        "doctor",
        "--json",
        "--quick",
        "--window",
        "200ms",
        "--no-trace",
    ]);
    let v = support::json(&out, &err);
    assert_eq!(v["window_source"], "counters_only", "{v:#}");
    assert_eq!(v["trace"]["used"], false);
    assert_eq!(v["trace"]["missing"], "--no-trace");
    assert!(v["skipped"]
        .as_array()
        .unwrap()
        .iter()
        .any(|s| s["step"] == "trace" && s["reason"].as_str().unwrap().contains("counters only")));
    // Not allowed: without root or CAP_BPF the trace cannot load, and the report says what
    // is missing while the counters still observe the window.
    let out = std::process::Command::new("setpriv")
        .args([
            "--reuid=65534",
            "--regid=65534",
            "--clear-groups",
            "--inh-caps=-all",
        ])
        .arg(support::bin())
        .args(["doctor", "--json", "--quick", "--window", "200ms"])
        .output()
        .expect("setpriv");
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    let v = support::json(&stdout, &stderr);
    assert_eq!(v["window_source"], "counters_only", "{v:#}");
    let missing = v["trace"]["missing"].as_str().unwrap();
    assert!(
        missing.contains("CAP_BPF") && missing.contains("root"),
        "{missing}"
    );
    assert!(v["counters_moved"].is_object(), "{v:#}");
    assert!(v["steps"]
        .as_array()
        .unwrap()
        .iter()
        .any(|s| s["step"] == "counters" && s["ran"] == true));
}

/// Issue 21, defect 4: a listener with backlog 1 that never accepts, clients connecting. Doctor
/// printed three CRITICAL findings: accept_queue_overflow (right), syn_retransmit (the SYNs it
/// dropped) and slow_reader (the connections in its queue, holding a request and a FIN,
/// which nobody accepted: no reader at all). One cause is one finding: the resent SYNs and
/// the waiting connections are its evidence, with the trace and without it; "Findings (1)"
/// and the verdict count the same findings.
#[test]
fn doctor_gives_a_listener_that_never_accepts_one_finding_with_its_consequences() {
    if !support::require_root(
        "doctor_gives_a_listener_that_never_accepts_one_finding_with_its_consequences",
    ) {
        return;
    }
    let _bpf = support::bpf_shared();
    let ns = Netns::new("d21a");
    let addr: SocketAddrV4 = "127.0.0.1:5310".parse().unwrap();
    // Backlog 1: two connections fill the queue; each sends a request, one also its FIN.
    let held = support::in_netns(&ns, move || {
        let l = support::listener(addr.into(), 1, None);
        let mut a = TcpStream::connect(addr).unwrap();
        a.write_all(b"GET / HTTP/1.0\r\n\r\n").unwrap();
        a.shutdown(std::net::Shutdown::Write).unwrap();
        let mut b = TcpStream::connect(addr).unwrap();
        b.write_all(b"GET / HTTP/1.0\r\n\r\n").unwrap();
        (l, a, b)
    });
    // Then a connect every 20 ms (at most 300, at most 20 s): SYNs the full queue drops.
    let stop = Arc::new(AtomicBool::new(false));
    let flood = {
        let stop = stop.clone();
        support::spawn_in_netns(&ns, move || {
            let mut held: Vec<OwnedFd> = Vec::new();
            let t0 = Instant::now();
            while !stop.load(Ordering::Relaxed)
                && held.len() < 300
                && t0.elapsed() < Duration::from_secs(20)
            {
                held.push(support::connect_nonblocking(addr.into()));
                std::thread::sleep(Duration::from_millis(20));
            }
            held.len()
        })
    };
    // Long enough for the first connects to resend their SYN (1 s).
    std::thread::sleep(Duration::from_millis(1500));
    let mut runs = Vec::new();
    for extra in [&[][..], &["--no-trace"][..]] {
        let mut args = vec!["doctor", "--json", "--quick", "--window", "1s"];
        args.extend_from_slice(extra);
        let (code, out, err) = support::run_in(&ns, &args);
        runs.push((extra.to_vec(), code, support::json(&out, &err)));
    }
    let (_, text, _) = support::run_in(&ns, &["doctor", "--quick", "--window", "500ms"]);
    stop.store(true, Ordering::SeqCst);
    assert!(flood.join().unwrap() > 10);
    drop(held);
    for (extra, code, v) in &runs {
        assert_eq!(*code, 1, "{extra:?}: {v:#}");
        let p = pathologies(v);
        let serious: Vec<&(String, String, String)> =
            p.iter().filter(|(_, s, _)| s != "info").collect();
        assert_eq!(serious.len(), 1, "{extra:?}: {p:?}");
        assert_eq!(serious[0].0, "accept_queue_overflow", "{extra:?}: {p:?}");
        // No finding of any severity for the consequences, from any live source.
        for gone in ["slow_reader", "syn_retransmit"] {
            assert!(
                !p.iter().any(|(n, _, src)| n == gone && src != "check"),
                "{extra:?}: {gone} is the overflow's consequence: {p:?}"
            );
        }
        let aq = &v["findings"][0];
        let summary = aq["summary"].as_str().unwrap();
        assert!(
            summary
                .contains("2 never accepted: 36 bytes of requests unread, 1 closed by the client"),
            "{extra:?}: {summary}"
        );
        assert!(
            summary.contains("consequence: SYN retransmitted"),
            "{extra:?}: {summary}"
        );
        let l = v["sockets"]["listeners"]
            .as_array()
            .unwrap()
            .iter()
            .find(|l| l["local"] == "127.0.0.1:5310")
            .unwrap();
        assert_eq!(l["unaccepted"]["connections"], 2, "{l}");
        assert!(v["sockets"]["slow_readers"].as_array().unwrap().is_empty());
    }
    // Without the trace, the counter's resends are the overflow's by the censuses' count.
    let no_trace = &runs[1].2["findings"][0];
    assert!(
        no_trace["evidence"]
            .as_array()
            .unwrap()
            .iter()
            .any(|e| e["kind"] == "arithmetic"
                && e["formula"]
                    .as_str()
                    .unwrap()
                    .starts_with("SYN resends the censuses saw")),
        "{no_trace:#}"
    );
    assert!(text.contains("Findings (1), causes first:"), "{text}");
    assert!(
        text.contains("Verdict: 1 finding(s) above info (1 critical, 0 warning)"),
        "{text}"
    );
}

/// Issue 22 (live): doctor compares the two censuses' sending chronographs, so what limited a
/// transfer is about its window, not the connection's life. A reader with a 16 KiB buffer
/// reading 4 KiB every 10 ms holds a loopback writer by its window most of the 2 s window:
/// one slow_reader finding (the counters' zero-window signs merged into it), critical (held
/// half the window or more: time lost), naming the reader as not reading and the writer as
/// waiting.
#[test]
fn doctor_says_what_limited_a_transfer_in_its_window_and_names_the_reader() {
    let test = "doctor_says_what_limited_a_transfer_in_its_window_and_names_the_reader";
    if !support::require_root(test) {
        return;
    }
    use support::transfers::{reader, writer};
    let ns = Netns::new("drlw");
    let mut r = reader(&ns, "127.0.0.1", 5421, 16384, 4096, "0.01");
    let mut w = writer(&ns, "127.0.0.1", 5421, 0, "-");
    std::thread::sleep(Duration::from_millis(500));
    let (code, out, err) = support::run(&[
        "doctor",
        "--netns",
        &ns.name,
        "--json",
        "--quick",
        "--no-trace",
        "--window",
        "2s",
    ]);
    let (rp, wp) = (r.id(), w.id());
    for c in [&mut w, &mut r] {
        let _ = c.kill();
        let _ = c.wait();
    }
    let v = support::json(&out, &err);
    assert_eq!(code, 1, "{err}\n{out}");
    let transfers = &v["sockets"]["transfers"];
    assert_eq!(transfers["span"], "window", "{transfers:#}");
    let t = transfers["busy"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["remote"] == "127.0.0.1:5421")
        .unwrap_or_else(|| panic!("{transfers:#}"));
    assert_eq!(t["limit"], "receiver_window", "{t:#}");
    assert_eq!(t["owners"][0]["pid"], wp, "{t:#}");
    assert_eq!(t["reader"]["owners"][0]["pid"], rp, "{t:#}");
    // The window, not the life: the transfer ran 0.5 s before the first census.
    assert!(t["busy_us"].as_u64().unwrap() <= 2_500_000, "{t:#}");
    let slow: Vec<&Value> = v["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["pathology"] == "slow_reader")
        .collect();
    assert_eq!(slow.len(), 1, "{:#}", v["findings"]);
    let f = slow[0];
    assert_eq!(f["severity"], "critical", "{f:#}");
    assert!(
        f["impact"]["time_lost_share"].as_f64().unwrap() >= 0.5,
        "{f:#}"
    );
    let summary = f["summary"].as_str().unwrap();
    assert!(
        summary.contains("held by the receiver's window"),
        "{summary}"
    );
    assert!(
        summary.contains(&format!("not reading: perl pid {rp}")),
        "{summary}"
    );
    assert!(
        summary.contains(&format!("writer waiting: perl pid {wp}")),
        "{summary}"
    );
}
