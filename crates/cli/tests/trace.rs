//! `tcpdoctor trace`: each pathology built in the test's own network namespaces while the
//! real binary traces them (`--netns ... --json`, stopped with SIGINT as a person would with
//! Ctrl-C); each test checks the cause trace names and that its counts equal the
//! namespace's kernel counters or the test's own count of failures.

mod support;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::os::fd::AsRawFd;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;
use support::{in_netns, listener, spawn_in_netns, Netns};

/// A running `tcpdoctor trace --json` over some namespaces.
struct Trace {
    child: Child,
    stdout: Option<std::thread::JoinHandle<String>>,
}

impl Trace {
    fn start(namespaces: &[&Netns], extra: &[&str]) -> Trace {
        let mut cmd = Command::new(support::bin());
        cmd.args(["trace", "--json", "--every", "1h"]);
        for ns in namespaces {
            cmd.args(["--netns", &ns.name]);
        }
        cmd.args(extra);
        let mut child = cmd
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn tcpdoctor trace");
        let mut out = child.stdout.take().unwrap();
        let stdout = std::thread::spawn(move || {
            let mut s = String::new();
            let _ = out.read_to_string(&mut s);
            s
        });
        // Wait until the programs are attached.
        let mut err = BufReader::new(child.stderr.take().unwrap());
        let mut line = String::new();
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            line.clear();
            if err.read_line(&mut line).unwrap_or(0) == 0 || Instant::now() > deadline {
                let _ = child.kill();
                let out = stdout.join().unwrap_or_default();
                panic!("trace did not start: {line}\nstdout: {out}");
            }
            if line.contains("tracing started") {
                break;
            }
        }
        std::thread::spawn(move || {
            let mut rest = String::new();
            let _ = err.read_to_string(&mut rest);
            if !rest.is_empty() {
                eprintln!("trace stderr: {rest}");
            }
        });
        Trace {
            child,
            stdout: Some(stdout),
        }
    }

    /// Ctrl-C, then the JSON lines it printed: (events, final report).
    fn stop(self) -> (Vec<Value>, Value, i32) {
        let (events, (_, report), code) = self.stop_with_connections();
        (events, report, code)
    }

    /// [`Trace::stop`], with the connection lines (`--connections`) beside the report.
    fn stop_with_connections(mut self) -> (Vec<Value>, (Vec<Value>, Value), i32) {
        // SAFETY: signalling the child we spawned, by its pid.
        unsafe { libc::kill(self.child.id() as i32, libc::SIGINT) };
        let status = self.child.wait().expect("wait trace");
        let out = self.stdout.take().unwrap().join().expect("stdout reader");
        let mut events = Vec::new();
        let mut connections = Vec::new();
        let mut report = Value::Null;
        for l in out.lines() {
            let v: Value =
                serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}"));
            match v["type"].as_str() {
                Some("event") => events.push(v),
                Some("connection") => connections.push(v),
                Some("report") => report = v,
                _ => {}
            }
        }
        assert!(!report.is_null(), "no final report in:\n{out}");
        (events, (connections, report), status.code().unwrap_or(-1))
    }
}

impl Drop for Trace {
    fn drop(&mut self) {
        let _ = self.child.kill();
    }
}

/// A `TcpExt` counter of the namespace (/proc/net/netstat read inside it).
fn tcpext(ns: &Netns, name: &str) -> i64 {
    let text = ns.exec("cat /proc/net/netstat");
    let lines: Vec<&str> = text.lines().collect();
    for pair in lines.chunks(2) {
        if pair.len() == 2 && pair[0].starts_with("TcpExt:") {
            let names: Vec<&str> = pair[0].split_whitespace().collect();
            let values: Vec<&str> = pair[1].split_whitespace().collect();
            if let Some(i) = names.iter().position(|n| *n == name) {
                return values[i].parse().unwrap();
            }
        }
    }
    panic!("no TcpExt counter {name}");
}

/// Packets this host's CPUs dropped from their input backlog (`/proc/net/softnet_stat`,
/// second column, summed; the whole host, not one namespace): a packet sent over loopback
/// and counted by its sender can be lost there before any TCP hook sees it.
fn softnet_dropped() -> u64 {
    std::fs::read_to_string("/proc/net/softnet_stat")
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.split_whitespace().nth(1))
        .filter_map(|h| u64::from_str_radix(h, 16).ok())
        .sum()
}

fn causes<'a>(events: &'a [Value], cause: &str) -> Vec<&'a Value> {
    events.iter().filter(|e| e["cause"] == cause).collect()
}

fn pathologies(report: &Value) -> Vec<String> {
    report["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["pathology"].as_str().unwrap().to_string())
        .collect()
}

fn set_linger0(s: &impl AsRawFd) {
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

/// A socket bound to a fixed local address (SO_REUSEADDR), connected to `to`.
fn connect_from(from: SocketAddr, to: SocketAddr, timeout: Duration) -> std::io::Result<TcpStream> {
    let s = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None)?;
    s.set_reuse_address(true)?;
    s.bind(&from.into())?;
    s.connect_timeout(&to.into(), timeout)?;
    Ok(s.into())
}

#[test]
fn stale_ack_race_is_named_and_its_syn_resends_equal_tcpsynretrans() {
    if !support::require_root("stale_ack_race_is_named_and_its_syn_resends_equal_tcpsynretrans") {
        return;
    }
    let _bpf = support::bpf_exclusive();
    let ns = Netns::new("trst");
    // The client's reset at close (RST+ACK, SO_LINGER 0) is lost, so the server keeps the
    // old connection; the reset a connecting socket sends for a stale ACK is a bare RST and
    // passes (net/ipv4/tcp_ipv4.c, tcp_v4_send_reset: no ACK flag when answering an ACK).
    ns.exec("nft add table inet tdoc && nft add chain inet tdoc out { type filter hook output priority 0 \\; } && nft add rule inet tdoc out tcp flags \\& \\(rst \\| ack\\) == \\(rst \\| ack\\) drop");
    let before = tcpext(&ns, "TCPSynRetrans");
    let trace = Trace::start(&[&ns], &[]);
    const N: usize = 6;
    // Listening before the first connect: a SYN that finds no socket is answered by a
    // RST+ACK, which the rule above drops, and the connect resends after 1 s. That happened
    // once in a full suite when the listener was made on the server's own thread (the trace
    // rightly named a SYN "dropped, reason NO_SOCKET" and ranked its 1 s stall first).
    let l = in_netns(&ns, || {
        listener("127.0.0.1:5101".parse().unwrap(), 16, None)
    });
    let server = spawn_in_netns(&ns, move || {
        let mut kept = Vec::new();
        for _ in 0..N {
            let (mut c, _) = l.accept().unwrap();
            let mut b = [0u8; 4];
            c.read_exact(&mut b).unwrap();
            c.write_all(b"pong").unwrap();
            kept.push(c);
        }
        kept
    });
    in_netns(&ns, || {
        for _ in 0..N {
            let mut s = connect_from(
                "127.0.0.1:20011".parse().unwrap(),
                "127.0.0.1:5101".parse().unwrap(),
                Duration::from_secs(5),
            )
            .expect("reconnect from the fixed port");
            s.set_nodelay(true).unwrap();
            s.write_all(b"ping").unwrap();
            let mut b = [0u8; 4];
            s.read_exact(&mut b).unwrap();
            set_linger0(&s);
            drop(s);
        }
    });
    let _kept = server.join().unwrap();
    std::thread::sleep(Duration::from_millis(300));
    let (events, report, code) = trace.stop();
    let resent = tcpext(&ns, "TCPSynRetrans") - before;
    let races = causes(&events, "stale_ack_race");
    let is_resend = |e: &&Value| e["evidence"].as_str().unwrap().starts_with("SYN resent");
    let all_resends = events.iter().filter(is_resend).count() as i64;
    let race_resends = races.iter().copied().filter(is_resend).count();
    // Each reconnect meets the stale ACK at least once; on a loaded machine a resend can
    // meet it again or be lost. Every SYN the kernel resent is traced, and each reconnect's
    // resend is named a stale-ACK race.
    assert!(
        resent >= (N - 1) as i64,
        "each reconnect met the stale ACK: {resent}"
    );
    // The kernel counted every resend; the trace sees each one, less the runs the kernel
    // reported skipping and those it reports as not traced (rarely, under CPU load, the
    // kernel runs no program for a resend and counts no skip: 16 of 2,354 in one stress run).
    let skipped = support::skipped(&report, "tcp_retransmit_skb")
        + support::skipped(&report, "tcp_retransmit_synack");
    let unseen = support::not_traced(&report);
    let kernel_side = report["counts"]["retransmit_syn"].as_i64().unwrap()
        + report["counts"]["synack_retransmits"].as_i64().unwrap();
    assert_eq!(
        unseen as i64,
        (resent - kernel_side - skipped as i64).max(0),
        "not_traced must be what TcpExtTCPSynRetrans counted beyond the traced and skipped: {report:#}"
    );
    assert!(
        unseen * 2 < resent as u64,
        "most resends are traced: {unseen} of {resent} not seen: {report:#}"
    );
    support::assert_traced_count(
        all_resends,
        resent,
        skipped + unseen,
        &format!("SYN resends traced vs TcpExtTCPSynRetrans: {events:#?}\n{report:#}"),
    );
    assert!(
        race_resends + (skipped + unseen) as usize >= N - 1,
        "{events:#?}"
    );
    assert!(
        races.len() - race_resends >= N - 1,
        "one stale-ACK reset per reconnect"
    );
    assert_eq!(
        pathologies(&report).first().map(String::as_str),
        Some("stale_ack_race"),
        "{report:#}"
    );
    // Five reconnects, each a few milliseconds late (the resend follows the stale ACK at
    // once): short stalls, fewer than the policy's pattern (PATTERN_MIN, 10), judged info,
    // and a trace with nothing above info exits 0 (the policy's `rare` rule).
    let worst = &report["findings"][0];
    assert_eq!(worst["severity"], "info", "{report:#}");
    assert!(
        worst["impact"]["worst_stall_us"].as_u64().unwrap_or(0) < 200_000,
        "{report:#}"
    );
    assert_eq!(code, 0);
    assert_eq!(report["lost_events"], 0);
    support::assert_traced_count(
        report["counts"]["retransmit_syn"].as_i64().unwrap(),
        resent,
        skipped + unseen,
        "retransmit_syn vs TcpExtTCPSynRetrans",
    );
}

#[test]
fn syn_dropped_by_a_firewall_names_the_drop_reason_and_the_ladder_rung() {
    if !support::require_root("syn_dropped_by_a_firewall_names_the_drop_reason_and_the_ladder_rung")
    {
        return;
    }
    let _bpf = support::bpf_exclusive();
    let ns = Netns::new("trsyn");
    ns.exec("nft add table inet tdoc && nft add chain inet tdoc in { type filter hook input priority 0 \\; } && nft add rule inet tdoc in tcp dport 5102 tcp flags syn drop");
    let _l = in_netns(&ns, || {
        listener("127.0.0.1:5102".parse().unwrap(), 16, None)
    });
    let before = tcpext(&ns, "TCPSynRetrans");
    let trace = Trace::start(&[&ns], &[]);
    // SYN at 0 s, resends at 1, 2 and 3 s (linear ladder); give up once the kernel has
    // resent three, not at a fixed time (timers run late on a busy machine).
    let connecting = in_netns(&ns, || {
        support::connect_nonblocking("127.0.0.1:5102".parse().unwrap())
    });
    let deadline = Instant::now() + Duration::from_secs(15);
    while tcpext(&ns, "TCPSynRetrans") - before < 3 {
        assert!(
            Instant::now() < deadline,
            "fewer than 3 SYNs resent in 15 s"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    drop(connecting);
    let (events, report, _) = trace.stop();
    let resent = tcpext(&ns, "TCPSynRetrans") - before;
    let dropped = causes(&events, "syn_dropped");
    assert!(resent >= 3, "{resent}");
    // Each resend, less any the kernel skipped tracing (a timer's resend nested in the
    // program already running on that CPU: seen here while other tests ran).
    let skipped = support::skipped(&report, "tcp_retransmit_skb") + support::not_traced(&report);
    support::assert_traced_count(
        dropped.len() as i64,
        resent,
        skipped,
        &format!("{events:#?}\n{report:#}"),
    );
    for e in &dropped {
        assert!(
            e["evidence"].as_str().unwrap().contains("NETFILTER_DROP"),
            "{e}"
        );
    }
    if skipped == 0 {
        assert!(
            dropped[0]["evidence"].as_str().unwrap().contains("rung 1"),
            "{}",
            dropped[0]
        );
        // The connect() was traced: how long before the resend it came (the ladder's 1 s).
        let evidence = dropped[0]["evidence"].as_str().unwrap();
        assert!(evidence.contains("s after connect()"), "{evidence}");
    }
    // Every SYN (the first and the resends) dropped, counted per reason in the kernel.
    support::assert_traced_count(
        report["drops_by_reason"]["NETFILTER_DROP"]
            .as_i64()
            .unwrap(),
        resent + 1,
        support::skipped(&report, "kfree_skb"),
        &format!("{report:#}"),
    );
    assert!(
        pathologies(&report).contains(&"syn_retransmit".to_string()),
        "{report:#}"
    );
}

#[test]
fn full_accept_queue_names_the_listener_and_its_process() {
    if !support::require_root("full_accept_queue_names_the_listener_and_its_process") {
        return;
    }
    let _bpf = support::bpf_exclusive();
    let ns = Netns::new("tracc");
    let l = in_netns(&ns, || listener("127.0.0.1:5103".parse().unwrap(), 1, None));
    let before = tcpext(&ns, "TCPSynRetrans");
    let overflows_before = tcpext(&ns, "ListenOverflows");
    let trace = Trace::start(&[&ns], &[]);
    let conns = in_netns(&ns, || {
        (0..5)
            .map(|_| support::connect_nonblocking("127.0.0.1:5103".parse().unwrap()))
            .collect::<Vec<_>>()
    });
    std::thread::sleep(Duration::from_millis(2_400));
    let (events, report, _) = trace.stop();
    drop(conns);
    drop(l);
    let resent = tcpext(&ns, "TCPSynRetrans") - before;
    assert!(tcpext(&ns, "ListenOverflows") > overflows_before);
    let full = causes(&events, "accept_queue_full");
    assert!(resent >= 3, "{resent}");
    support::assert_traced_count(
        full.len() as i64,
        resent,
        support::skipped(&report, "tcp_retransmit_skb") + support::not_traced(&report),
        &format!("{events:#?}"),
    );
    let me = std::process::id();
    for e in &full {
        let ev = e["evidence"].as_str().unwrap();
        assert!(
            ev.contains("127.0.0.1:5103") && ev.contains("backlog 1"),
            "{ev}"
        );
        assert!(
            ev.contains(&format!("pid {me}")),
            "the listener's process: {ev}"
        );
    }
    assert_eq!(
        pathologies(&report).first().map(String::as_str),
        Some("accept_queue_overflow"),
        "{report:#}"
    );
}

/// A listener that drains its accept queue, slowly: the queue is full when SYNs arrive and
/// may not be when their resends do, and the SYNs it refused leave no drop record (the
/// kernel frees them with consume_skb). Every SYN resend is still put down to the full
/// queue, none to "lost", and the count matches the kernel's.
#[test]
fn syns_refused_by_a_draining_accept_queue_are_not_called_lost() {
    if !support::require_root("syns_refused_by_a_draining_accept_queue_are_not_called_lost") {
        return;
    }
    let _bpf = support::bpf_exclusive();
    let ns = Netns::new("trdrain");
    let l = in_netns(&ns, || listener("127.0.0.1:5110".parse().unwrap(), 1, None));
    let before = tcpext(&ns, "TCPSynRetrans");
    let overflows_before = tcpext(&ns, "ListenOverflows");
    let trace = Trace::start(&[&ns], &[]);
    let acceptor = spawn_in_netns(&ns, move || {
        let until = Instant::now() + Duration::from_millis(2_600);
        l.set_nonblocking(true).unwrap();
        let mut accepted = 0;
        // Empty the queue every 40 ms: full when a burst of SYNs lands, empty soon after.
        while Instant::now() < until {
            while let Ok((c, _)) = l.accept() {
                accepted += 1;
                drop(c);
            }
            std::thread::sleep(Duration::from_millis(40));
        }
        accepted
    });
    let conns = in_netns(&ns, || {
        (0..30)
            .map(|_| support::connect_nonblocking("127.0.0.1:5110".parse().unwrap()))
            .collect::<Vec<_>>()
    });
    let accepted = acceptor.join().unwrap();
    // The kernel's count just before and just after the stop: a resend may fall between.
    let resent = tcpext(&ns, "TCPSynRetrans") - before;
    let (events, report, _) = trace.stop();
    let resent_after = tcpext(&ns, "TCPSynRetrans") - before;
    drop(conns);
    let overflows = tcpext(&ns, "ListenOverflows") - overflows_before;
    assert!(accepted > 0 && overflows > 0, "{accepted} {overflows}");
    let full = causes(&events, "accept_queue_full");
    let lost = causes(&events, "syn_lost");
    let synack = causes(&events, "synack_resend");
    assert!(lost.is_empty(), "{lost:#?}");
    // Once in 8 full suites (this stop) the trace printed no event at all here: what was
    // counted and what the trace reports of itself, for the next occurrence.
    assert!(
        !full.is_empty(),
        "{events:#?}\nTCPSynRetrans +{resent}..{resent_after}, ListenOverflows +{overflows}, \
         {accepted} accepted; the trace's report: {report:#}"
    );
    let traced = (full.len() + synack.len()) as i64;
    let skipped = support::skipped(&report, "tcp_retransmit_skb")
        + support::skipped(&report, "tcp_retransmit_synack")
        + support::not_traced(&report);
    assert!(
        (resent - skipped as i64..=resent_after).contains(&traced),
        "{traced} traced, {resent}..{resent_after} counted, {skipped} skipped: {events:#?}"
    );
    assert!(
        full.len() as i64 <= overflows,
        "{} > {overflows}",
        full.len()
    );
    assert_eq!(
        pathologies(&report).first().map(String::as_str),
        Some("accept_queue_overflow"),
        "{report:#}"
    );
}

/// Another namespace's listener on the same port (another lab, another container) is not
/// this connection's server: a SYN lost on its way is not put down to that listener's full
/// accept queue. The traced namespace sends its SYNs to a peer namespace (not traced) that
/// does not own the destination address and drops them unseen.
#[test]
fn a_full_listener_in_an_untraced_namespace_is_not_the_cause() {
    if !support::require_root("a_full_listener_in_an_untraced_namespace_is_not_the_cause") {
        return;
    }
    let _bpf = support::bpf_exclusive();
    let client = Netns::new("trlc");
    let sink = Netns::new("trls");
    let other = Netns::new("trlo");
    let (_, sink_if) = support::veth(&client, "10.9.7.1/24", &sink, "10.9.7.3/24");
    let mac = sink.exec(&format!("cat /sys/class/net/{sink_if}/address"));
    let client_if = client.exec("ls /sys/class/net | grep '^tdoc'");
    client.exec(&format!(
        "ip neigh replace 10.9.7.2 lladdr {} dev {} nud permanent",
        mac.trim(),
        client_if.trim()
    ));
    // In the other namespace: a listener on the same port, its accept queue full.
    let l = in_netns(&other, || {
        listener("0.0.0.0:5112".parse().unwrap(), 1, None)
    });
    let held = in_netns(&other, || {
        (0..4)
            .map(|_| support::connect_nonblocking("127.0.0.1:5112".parse().unwrap()))
            .collect::<Vec<_>>()
    });
    std::thread::sleep(Duration::from_millis(200));
    let trace = Trace::start(&[&client], &[]);
    let before = tcpext(&client, "TCPSynRetrans");
    let conn = in_netns(&client, || {
        support::connect_nonblocking("10.9.7.2:5112".parse().unwrap())
    });
    std::thread::sleep(Duration::from_millis(2_300));
    // The kernel's count just before and just after the stop: a resend may fall between.
    let resent = tcpext(&client, "TCPSynRetrans") - before;
    let (events, report, _) = trace.stop();
    let resent_after = tcpext(&client, "TCPSynRetrans") - before;
    drop((conn, held, l));
    assert!(resent >= 2, "{resent}");
    let lost = causes(&events, "syn_lost").len() as i64;
    let skipped =
        (support::skipped(&report, "tcp_retransmit_skb") + support::not_traced(&report)) as i64;
    assert!(
        (resent - skipped..=resent_after).contains(&lost),
        "{lost} traced, {resent}..{resent_after} counted, {skipped} skipped: {events:#?}"
    );
    assert!(
        causes(&events, "accept_queue_full").is_empty(),
        "{events:#?}"
    );
}

#[test]
fn eaddrnotavail_counts_equal_the_clients_failed_connects() {
    if !support::require_root("eaddrnotavail_counts_equal_the_clients_failed_connects") {
        return;
    }
    let _bpf = support::bpf_exclusive();
    let ns = Netns::new("trport");
    ns.sysctl("net.ipv4.ip_local_port_range", "40000 40001");
    let server = spawn_in_netns(&ns, || {
        let l = listener("127.0.0.1:5104".parse().unwrap(), 16, None);
        l.set_nonblocking(true).unwrap();
        let mut kept = Vec::new();
        let until = Instant::now() + Duration::from_secs(2);
        while Instant::now() < until {
            if let Ok((c, _)) = l.accept() {
                kept.push(c);
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        kept
    });
    let trace = Trace::start(&[&ns], &[]);
    let failed = in_netns(&ns, || {
        let mut open = Vec::new();
        let mut failed = 0;
        for _ in 0..10 {
            match TcpStream::connect("127.0.0.1:5104") {
                Ok(s) => open.push(s),
                Err(e) if e.raw_os_error() == Some(libc::EADDRNOTAVAIL) => failed += 1,
                Err(e) => panic!("unexpected connect error {e}"),
            }
        }
        failed
    });
    std::thread::sleep(Duration::from_millis(200));
    let (events, report, _) = trace.stop();
    let _ = server.join();
    assert!(failed >= 7, "{failed}");
    // Exact: connect() fails in process context, where the kernel never skips the program
    // (it skips a run nested in one already running on that CPU: one in a softirq).
    let no_port = causes(&events, "no_local_port");
    assert_eq!(no_port.len(), failed, "{events:#?}");
    assert_eq!(report["counts"]["connect_eaddrnotavail"], failed as u64);
    let per = &report["summary"]["no_local_port"][0];
    assert_eq!(per["destination"], "127.0.0.1:5104");
    assert_eq!(per["failures"], failed as u64);
    assert_eq!(per["process"]["pid"], std::process::id());
    // Both ports of the range were held toward it when connects started failing.
    assert_eq!(per["budget"]["in_use"], 2, "{per:#}");
    assert_eq!(per["budget"]["range"]["low"], 40000);
    assert_eq!(
        pathologies(&report).first().map(String::as_str),
        Some("port_exhaustion"),
        "{report:#}"
    );
}

#[test]
fn eaddrnotavail_from_a_fixed_source_port_into_its_own_time_wait_is_not_port_exhaustion() {
    const TEST: &str =
        "eaddrnotavail_from_a_fixed_source_port_into_its_own_time_wait_is_not_port_exhaustion";
    if !support::require_root(TEST) {
        return;
    }
    let _bpf = support::bpf_exclusive();
    let ns = Netns::new("trtuple");
    // Timestamps off: the kernel may not let a connect take over its own TIME_WAIT 4-tuple
    // (measured: with them on, the same reconnects succeed).
    ns.sysctl("net.ipv4.tcp_timestamps", "0");
    const N: usize = 8;
    let server = spawn_in_netns(&ns, || {
        let l = listener("127.0.0.1:5108".parse().unwrap(), 16, None);
        l.set_nonblocking(true).unwrap();
        let until = Instant::now() + Duration::from_secs(3);
        while Instant::now() < until {
            match l.accept() {
                Ok((mut c, _)) => {
                    c.set_nonblocking(false).unwrap();
                    let mut b = Vec::new();
                    let _ = c.read_to_end(&mut b);
                }
                Err(_) => std::thread::sleep(Duration::from_millis(5)),
            }
        }
    });
    let trace = Trace::start(&[&ns], &[]);
    let failed = in_netns(&ns, || {
        let mut failed = 0;
        for _ in 0..N {
            // The client binds its source port, sends, and closes first: its own previous
            // connection holds the 4-tuple in TIME_WAIT for 60 s.
            match connect_from(
                "127.0.0.1:20013".parse().unwrap(),
                "127.0.0.1:5108".parse().unwrap(),
                Duration::from_secs(2),
            ) {
                Ok(mut s) => s.write_all(b"ping").unwrap(),
                Err(e) if e.raw_os_error() == Some(libc::EADDRNOTAVAIL) => failed += 1,
                Err(e) => panic!("unexpected connect error {e}"),
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        failed
    });
    std::thread::sleep(Duration::from_millis(200));
    let (events, report, code) = trace.stop();
    server.join().unwrap();
    assert_eq!(failed, N - 1, "every reconnect after the first is refused");
    // Exact: connect() fails in process context (never a skipped run).
    let refused = causes(&events, "tuple_in_use");
    assert_eq!(refused.len(), failed, "{events:#?}");
    assert!(causes(&events, "no_local_port").is_empty(), "{events:#?}");
    assert!(
        refused
            .iter()
            .all(|e| e["pathology"] == "time_wait_collision"
                && e["local"] == "127.0.0.1:20013"
                && e["evidence"].as_str().unwrap().contains("in TIME_WAIT")),
        "{refused:#?}"
    );
    let r = &report["summary"]["local_tuple_refusals"][0];
    assert_eq!(r["failures"], failed as u64, "{report:#}");
    assert_eq!(r["holder"], "TIME_WAIT", "{report:#}");
    assert!(report["summary"]["no_local_port"]
        .as_array()
        .unwrap()
        .is_empty());
    let names = pathologies(&report);
    assert!(
        !names.contains(&"port_exhaustion".to_string()),
        "{report:#}"
    );
    assert_eq!(
        names.first().map(String::as_str),
        Some("time_wait_collision"),
        "{report:#}"
    );
    let f = &report["findings"][0];
    assert_eq!(f["severity"], "critical", "{f:#}");
    assert_eq!(f["impact"]["failed"], failed as u64, "{f:#}");
    let summary = f["summary"].as_str().unwrap();
    assert!(
        summary.contains("refused locally") && summary.contains("source port 20013"),
        "{f:#}"
    );
    assert!(
        f["remedies"][0]["action"]
            .as_str()
            .unwrap()
            .contains("IP_BIND_ADDRESS_NO_PORT"),
        "{f:#}"
    );
    assert_eq!(code, 1);
}

#[test]
fn each_refused_connect_is_counted_once() {
    if !support::require_root("each_refused_connect_is_counted_once") {
        return;
    }
    let _bpf = support::bpf_exclusive();
    let ns = Netns::new("trrefuse");
    let fails_before = ns_snmp(&ns, "AttemptFails");
    let trace = Trace::start(&[&ns], &[]);
    let refused = in_netns(&ns, || {
        (0..3)
            .filter(|_| {
                matches!(TcpStream::connect("127.0.0.1:5107"),
                    Err(e) if e.raw_os_error() == Some(libc::ECONNREFUSED))
            })
            .count()
    });
    std::thread::sleep(Duration::from_millis(200));
    let (events, report, _) = trace.stop();
    assert_eq!(refused, 3);
    assert_eq!(ns_snmp(&ns, "AttemptFails") - fails_before, 3);
    let f = report["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["pathology"] == "connect_failure")
        .unwrap_or_else(|| panic!("no connect_failure: {report:#}"));
    // Once each (never twice), less any state change the kernel skipped tracing.
    let skipped = support::skipped(&report, "inet_sock_set_state");
    let failed = f["impact"]["failed"].as_i64().unwrap();
    support::assert_traced_count(failed, 3, skipped, &format!("{f:#}"));
    assert!(
        f["summary"]
            .as_str()
            .unwrap()
            .starts_with(&format!("{failed} connect(s) failed")),
        "{f:#}"
    );
    support::assert_traced_count(
        causes(&events, "refused").len() as i64,
        3,
        skipped,
        &format!("{events:#?}"),
    );
}

#[test]
fn with_records_lost_failed_connects_are_the_kernels_count_not_the_records() {
    const TEST: &str = "with_records_lost_failed_connects_are_the_kernels_count_not_the_records";
    if !support::require_root(TEST) {
        return;
    }
    let _bpf = support::bpf_exclusive();
    let ns = Netns::new("trlost");
    let fails_before = ns_snmp(&ns, "AttemptFails");
    let trace = Trace::start(&[&ns], &[]);
    // The trace stopped (SIGSTOP, by its pid) while refused connects fill its ring buffer:
    // each is three records (the SYN dropped for NO_SOCKET, the reset received, the failed
    // connect), 3 x 30,000 beyond the 8 MiB buffer's ~65,000, so records are lost for sure.
    // SAFETY: signalling the child we spawned, by its pid.
    unsafe { libc::kill(trace.child.id() as i32, libc::SIGSTOP) };
    const N: usize = 30_000;
    let refused = in_netns(&ns, || {
        (0..N)
            .filter(|_| {
                matches!(TcpStream::connect("127.0.0.1:5109"),
                    Err(e) if e.raw_os_error() == Some(libc::ECONNREFUSED))
            })
            .count() as u64
    });
    // SAFETY: as above.
    unsafe { libc::kill(trace.child.id() as i32, libc::SIGCONT) };
    std::thread::sleep(Duration::from_millis(500));
    let (_, report, code) = trace.stop();
    let attempt_fails = (ns_snmp(&ns, "AttemptFails") - fails_before) as u64;
    assert_eq!(refused, N as u64);
    assert_eq!(attempt_fails, refused);
    let lost = report["lost_events"].as_u64().unwrap();
    assert!(lost > 0, "the ring buffer overflowed: {report:#}");
    // The kernel-side count is exact (less a state change the kernel skipped tracing).
    let skipped = support::skipped(&report, "inet_sock_set_state");
    let counted = report["counts"]["connect_failed"].as_i64().unwrap();
    support::assert_traced_count(counted, refused as i64, skipped, "connect_failed");
    let f = report["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["pathology"] == "connect_failure")
        .unwrap_or_else(|| panic!("{report:#}"));
    // The finding counts what the kernel counted, not the records that reached user space,
    // and says how many it could not attribute.
    assert_eq!(f["impact"]["failed"].as_i64().unwrap(), counted, "{f:#}");
    let summary = f["summary"].as_str().unwrap();
    eprintln!("{TEST}: {lost} records lost; {summary}");
    assert!(
        summary.starts_with(&format!("{counted} connect(s) failed"))
            && summary.contains("with their record lost"),
        "{f:#}"
    );
    assert_eq!(code, 1);
}

/// A `Tcp:` counter of the namespace (/proc/net/snmp read inside it).
fn ns_snmp(ns: &Netns, name: &str) -> i64 {
    let text = ns.exec("cat /proc/net/snmp");
    let lines: Vec<&str> = text.lines().filter(|l| l.starts_with("Tcp:")).collect();
    let names: Vec<&str> = lines[0].split_whitespace().collect();
    let values: Vec<&str> = lines[1].split_whitespace().collect();
    let i = names.iter().position(|n| *n == name).expect("Tcp counter");
    values[i].parse().unwrap()
}

#[test]
fn plain_churn_gives_no_finding() {
    if !support::require_root("plain_churn_gives_no_finding") {
        return;
    }
    let _bpf = support::bpf_exclusive();
    let ns = Netns::new("trchurn");
    let server = spawn_in_netns(&ns, || {
        let l = listener("127.0.0.1:5105".parse().unwrap(), 128, None);
        for _ in 0..300 {
            let (mut c, _) = l.accept().unwrap();
            let mut b = [0u8; 4];
            c.read_exact(&mut b).unwrap();
            c.write_all(b"pong").unwrap();
        }
    });
    let trace = Trace::start(&[&ns], &[]);
    in_netns(&ns, || {
        for _ in 0..300 {
            let mut s = TcpStream::connect("127.0.0.1:5105").unwrap();
            s.write_all(b"ping").unwrap();
            let mut b = [0u8; 4];
            s.read_exact(&mut b).unwrap();
        }
    });
    server.join().unwrap();
    std::thread::sleep(Duration::from_millis(200));
    let (events, report, code) = trace.stop();
    // Nothing above info. On a loaded machine an ACK can come late enough for a tail-loss
    // probe: a real retransmission, traced as such, and informational.
    let serious: Vec<_> = report["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["severity"] != "info")
        .collect();
    assert!(serious.is_empty(), "{report:#}");
    // Any event printed is one of those, or a drop that names no pathology (a late segment
    // reaching a TIME_WAIT socket under load).
    for e in &events {
        let c = e["cause"].as_str().unwrap();
        let benign_drop = c == "drop" && e.get("pathology").is_none();
        assert!(
            benign_drop || ["tail_loss_probe", "fast_retransmit", "retransmission"].contains(&c),
            "{e:#}"
        );
    }
    support::assert_traced_count(
        report["counts"]["connects"].as_i64().unwrap(),
        300,
        support::skipped(&report, "inet_sock_set_state"),
        "connects traced",
    );
    assert_eq!(report["verdict"], "healthy");
    assert_eq!(code, 0);
}

#[test]
fn without_privileges_one_line_names_what_is_missing_and_exits_2() {
    if !support::require_root("without_privileges_one_line_names_what_is_missing_and_exits_2") {
        return;
    }
    let _bpf = support::bpf_shared();
    let out = Command::new("setpriv")
        .args([
            "--reuid=65534",
            "--regid=65534",
            "--clear-groups",
            "--inh-caps=-all",
        ])
        .arg(support::bin())
        .args(["trace", "--duration", "1s"])
        .output()
        .expect("setpriv");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(err.contains("CAP_BPF") && err.contains("root"), "{err}");
}

#[test]
fn time_wait_collision_is_told_apart_from_a_stale_ack_race() {
    if !support::require_root("time_wait_collision_is_told_apart_from_a_stale_ack_race") {
        return;
    }
    let _bpf = support::bpf_exclusive();
    let ns = Netns::new("trtw");
    // Without timestamps the TIME_WAIT socket can only compare sequence numbers; the upload
    // pushes the old connection's sequence past the next connection's clock-driven ISN
    // (64 ns per step, net/core/secure_seq.c), so the new SYN looks like an old duplicate.
    ns.sysctl("net.ipv4.tcp_timestamps", "0");
    const N: usize = 4;
    const UPLOAD: usize = 4 << 20;
    let server = spawn_in_netns(&ns, || {
        let l = listener("127.0.0.1:5106".parse().unwrap(), 16, None);
        for _ in 0..N {
            let (mut c, _) = l.accept().unwrap();
            let mut buf = vec![0u8; 64 << 10];
            let mut got = 0;
            while got < UPLOAD {
                let n = c.read(&mut buf).unwrap();
                assert!(n > 0);
                got += n;
            }
            c.write_all(b"done").unwrap();
            // The server closes first: it keeps the 4-tuple in TIME_WAIT.
            drop(c);
        }
    });
    let before = tcpext(&ns, "TCPSynRetrans");
    let trace = Trace::start(&[&ns], &[]);
    in_netns(&ns, || {
        let data = vec![7u8; UPLOAD];
        for _ in 0..N {
            let mut s = connect_from(
                "127.0.0.1:20012".parse().unwrap(),
                "127.0.0.1:5106".parse().unwrap(),
                Duration::from_secs(5),
            )
            .expect("reconnect from the fixed port");
            s.write_all(&data).unwrap();
            let mut reply = Vec::new();
            s.read_to_end(&mut reply).unwrap();
            assert_eq!(reply, b"done");
        }
    });
    server.join().unwrap();
    std::thread::sleep(Duration::from_millis(300));
    let (events, report, _) = trace.stop();
    let resent = tcpext(&ns, "TCPSynRetrans") - before;
    let collisions = causes(&events, "time_wait_collision");
    let resends: Vec<_> = collisions
        .iter()
        .filter(|e| e["evidence"].as_str().unwrap().starts_with("SYN resent"))
        .collect();
    assert!(
        resent >= (N - 1) as i64,
        "every reconnect collided: {resent}"
    );
    support::assert_traced_count(
        resends.len() as i64,
        resent,
        support::skipped(&report, "tcp_retransmit_skb") + support::not_traced(&report),
        &format!("{events:#?}"),
    );
    assert!(causes(&events, "stale_ack_race").is_empty(), "{events:#?}");
    // The server's view: its TIME_WAIT socket (TIME_WAIT proper, not an orphaned FIN_WAIT2
    // mini-socket) refused each colliding SYN.
    let refused = causes(&events, "time_wait_refused_syn");
    assert!(!refused.is_empty(), "{events:#?}");
    assert!(
        refused.iter().all(|e| e["state"] == "TIME_WAIT"),
        "{refused:#?}"
    );
    assert!(
        causes(&events, "fin_wait2_refused_syn").is_empty(),
        "{events:#?}"
    );
    assert_eq!(
        pathologies(&report).first().map(String::as_str),
        Some("time_wait_collision"),
        "{report:#}"
    );
    // Timestamps are off in this namespace: turning them on is the fitting remedy, and the
    // finding says they are off.
    let f = &report["findings"][0];
    assert!(
        f["remedies"][0]["action"]
            .as_str()
            .unwrap()
            .contains("tcp_timestamps"),
        "{f:#}"
    );
    assert!(
        f["evidence"]
            .to_string()
            .contains("net.ipv4.tcp_timestamps"),
        "{f:#}"
    );
}

/// Report 003's programs as published (server on port 4242, client looping connect, send,
/// read, SO_LINGER 0 close), run in `ns` until the namespace's kernel has counted `want` SYN
/// resends or `limit` has passed: (server, client, resends counted, time it took).
fn run_seed_003(
    seed: &support::seeds::Seed,
    ns: &Netns,
    want: i64,
    limit: Duration,
    started: impl FnOnce(),
) -> (Child, Child, i64, Duration) {
    let server = seed.spawn_on(ns, "server", Some(0));
    std::thread::sleep(Duration::from_millis(300));
    started();
    let before = tcpext(ns, "TCPSynRetrans");
    let client = seed.spawn_on(ns, "client", Some(1));
    let t0 = Instant::now();
    let mut resent = 0;
    while t0.elapsed() < limit {
        std::thread::sleep(Duration::from_millis(500));
        resent = tcpext(ns, "TCPSynRetrans") - before;
        if resent >= want {
            break;
        }
    }
    (server, client, resent, t0.elapsed())
}

#[test]
fn seed_003s_programs_meet_a_stale_ack_race_not_a_time_wait_collision() {
    const TEST: &str = "seed_003s_programs_meet_a_stale_ack_race_not_a_time_wait_collision";
    if !support::require_root(TEST) {
        return;
    }
    let Some(seed) = support::seeds::Seed::build(support::seeds::STALE_ACK_RACE, TEST) else {
        return;
    };
    let _bpf = support::bpf_exclusive();
    let ns = Netns::new("tr003");
    // The race fires when the client's reset is processed before its ACK of the server's
    // FIN, leaving the server's old socket an orphaned FIN_WAIT2 mini-socket until the
    // client reuses the port. Measured here on 2 CPUs with the trace attached: 10 to 53
    // SYN resends per 20 s; 3 of them took 2.6 to 12.1 s in 6 runs of this test. 90 s
    // bounds a machine where it fires several times more rarely.
    let mut trace = None;
    let (mut server, mut client, resent, took) =
        run_seed_003(&seed, &ns, 3, Duration::from_secs(90), || {
            trace = Some(Trace::start(&[&ns], &[]));
        });
    let _ = client.kill();
    let _ = client.wait();
    std::thread::sleep(Duration::from_millis(200));
    let (events, report, code) = trace.unwrap().stop();
    let _ = server.kill();
    let _ = server.wait();
    eprintln!("{TEST}: {resent} SYN resend(s) in {took:?}");
    assert!(
        resent >= 1,
        "the race did not fire in {took:?}: no SYN resent (TcpExtTCPSynRetrans)"
    );
    // Every SYN answered by an old ACK, and every resend, is the race: the server's socket
    // was an orphaned FIN_WAIT2 mini-socket, never a TIME_WAIT one.
    for bad in ["time_wait_collision", "time_wait_refused_syn", "old_ack"] {
        assert!(causes(&events, bad).is_empty(), "{bad}: {events:#?}");
    }
    let server_side = causes(&events, "fin_wait2_refused_syn");
    assert!(!server_side.is_empty(), "{events:#?}");
    assert!(
        server_side.iter().all(|e| e["state"] == "FIN_WAIT2"),
        "{server_side:#?}"
    );
    let resends: Vec<_> = events
        .iter()
        .filter(|e| {
            e["state"] == "SYN_SENT" && e["evidence"].as_str().unwrap().starts_with("SYN resent")
        })
        .collect();
    assert!(
        resends.iter().all(|e| e["cause"] == "stale_ack_race"),
        "{resends:#?}"
    );
    assert!(!causes(&events, "stale_ack_race").is_empty(), "{events:#?}");
    let names = pathologies(&report);
    assert!(names.contains(&"stale_ack_race".to_string()), "{report:#}");
    assert!(
        !names.contains(&"time_wait_collision".to_string()),
        "{report:#}"
    );
    let f = report["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["pathology"] == "stale_ack_race")
        .unwrap();
    // Its remedies are the race's: no advice about timestamps, which are on and irrelevant.
    assert!(!f["remedies"].to_string().contains("timestamps"), "{f:#}");
    assert!(
        f["explanation"].as_str().unwrap().contains("FIN_WAIT2"),
        "{f:#}"
    );
    // The summary counts 4-tuples once, however many traced ends saw them.
    let flows = server_side
        .iter()
        .map(|e| (e["local"].to_string(), e["remote"].to_string()))
        .collect::<std::collections::BTreeSet<_>>()
        .len();
    assert!(
        f["summary"]
            .as_str()
            .unwrap()
            .contains(&format!("({flows} distinct")),
        "{flows} refusals: {f:#}"
    );
    assert!(code == 0 || code == 1, "{code}");
}

#[test]
fn a_reader_that_stops_reading_is_named_by_its_process() {
    if !support::require_root("a_reader_that_stops_reading_is_named_by_its_process") {
        return;
    }
    let _bpf = support::bpf_exclusive();
    let ns = Netns::new("trslow");
    let l = in_netns(&ns, || {
        listener("127.0.0.1:5107".parse().unwrap(), 16, Some(4096))
    });
    let probes_before = tcpext(&ns, "TCPWinProbe");
    let zero_before = tcpext(&ns, "TCPToZeroWindowAdv");
    let softnet_before = softnet_dropped();
    let trace = Trace::start(&[&ns], &[]);
    let (client, accepted) = in_netns(&ns, move || {
        let mut c = TcpStream::connect("127.0.0.1:5107").unwrap();
        let (accepted, _) = l.accept().unwrap();
        c.set_nonblocking(true).unwrap();
        let chunk = [1u8; 16 << 10];
        let until = Instant::now() + Duration::from_secs(2);
        // Fill the reader's window and our send buffer; the reader never reads.
        while Instant::now() < until {
            match c.write(&chunk) {
                Ok(_) => {}
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
                Err(e) => panic!("{e}"),
            }
        }
        (c, accepted)
    });
    // Zero-window probes back off from the RTO (200 ms floor): several in 3 s. They go on
    // while the trace stops: the kernel's counts are read just before and just after the
    // stop, and the trace must have seen at least the first and at most the second (a probe
    // at the 3 s mark was counted once but missed by a check that read them after the stop).
    std::thread::sleep(Duration::from_secs(3));
    let counted = || {
        (
            tcpext(&ns, "TCPWinProbe") - probes_before,
            tcpext(&ns, "TCPToZeroWindowAdv") - zero_before,
        )
    };
    let (probes, zero) = counted();
    let (events, report, _) = trace.stop();
    let (probes_after, zero_after) = counted();
    drop((client, accepted));
    let not_reading = causes(&events, "not_reading");
    assert!(probes >= 2, "{probes}");
    // Both are seen by the program on tcp:tcp_probe, which runs for every segment any
    // namespace receives: while other tests' traffic runs, the kernel can skip it for a
    // segment of this test (already running on that CPU), and the report counts the skips.
    // Rarely (about once in six full-suite runs, never alone) the trace saw no zero-window
    // advertisement where the receiver counted one, before skips were reported; such a skip
    // fits (unconfirmed: those runs did not record them).
    let skipped = support::skipped(&report, "tcp_probe") as i64;
    let traced = not_reading.len() as i64;
    // Diagnostics for the rare run that traces one probe fewer than counted with no skip
    // reported (once in about nine full suites, never alone; cause not yet measured): the
    // host's backlog drops and the drops the trace saw, by reason, for the next occurrence.
    assert!(
        (probes - skipped..=probes_after).contains(&traced),
        "{traced} traced, {probes}..{probes_after} counted, {skipped} skipped; softnet backlog drops +{}; drops traced by reason {}: {events:#?}",
        softnet_dropped() - softnet_before,
        report["drops_by_reason"]
    );
    let traced = causes(&events, "zero_window").len() as i64;
    assert!(
        (zero - skipped..=zero_after).contains(&traced),
        "{traced} traced, {zero}..{zero_after} counted, {skipped} skipped; TCPFromZeroWindowAdv {}, \
         TCPWantZeroWindowAdv {}, TCPBacklogCoalesce {}, TCPRcvCollapsed {}, TCPRcvQDrop {}: \
         {events:#?}",
        tcpext(&ns, "TCPFromZeroWindowAdv"),
        tcpext(&ns, "TCPWantZeroWindowAdv"),
        tcpext(&ns, "TCPBacklogCoalesce"),
        tcpext(&ns, "TCPRcvCollapsed"),
        tcpext(&ns, "TCPRcvQDrop"),
    );
    let me = std::process::id();
    for e in &not_reading {
        assert_eq!(e["process"]["pid"], me, "{e}");
        assert_eq!(e["process"]["source"], "file_descriptor", "{e}");
        assert_eq!(e["local"], "127.0.0.1:5107", "the reader's socket: {e}");
    }
    assert_eq!(
        pathologies(&report).first().map(String::as_str),
        Some("slow_reader"),
        "{report:#}"
    );
}

#[test]
fn a_resend_while_the_first_copy_is_still_queued_here_is_counted_as_sending_nothing() {
    if !support::require_root(
        "a_resend_while_the_first_copy_is_still_queued_here_is_counted_as_sending_nothing",
    ) {
        return;
    }
    let _bpf = support::bpf_exclusive();
    let (a, b) = (Netns::new("trbusya"), Netns::new("trbusyb"));
    let (ia, _) = support::veth(&a, "10.91.0.1/24", &b, "10.91.0.2/24");
    // 1,000 bytes/s out of the client: a full segment waits 1.5 s in the qdisc, far longer
    // than the retransmission timer (20 ms floor on this route), which fires while the first
    // copy is still queued here: the kernel resends nothing (-EBUSY) and backs off.
    // Offloads off: every resend is one segment, as RetransSegs counts them (with GSO a
    // resend after a timeout carried two once: 2 sent, RetransSegs +3).
    a.exec(&format!(
        "ethtool -K {ia} tso off gso off >/dev/null && \
         tc qdisc add dev {ia} root tbf rate 8kbit burst 1600 limit 100000 && \
         ip route replace 10.91.0.0/24 dev {ia} rto_min 20ms"
    ));
    let l = in_netns(&b, || listener("10.91.0.2:5109".parse().unwrap(), 4, None));
    let segs_before = ns_snmp(&a, "RetransSegs");
    let fail_before = tcpext(&a, "TCPRetransFail");
    let trace = Trace::start(&[&a], &[]);
    let client = in_netns(&a, || {
        let mut c =
            TcpStream::connect_timeout(&"10.91.0.2:5109".parse().unwrap(), Duration::from_secs(5))
                .unwrap();
        c.write_all(&[1u8; 20_000]).unwrap();
        c
    });
    let (server, _) = l.accept().unwrap();
    std::thread::sleep(Duration::from_secs(4));
    let segs = ns_snmp(&a, "RetransSegs") - segs_before;
    let fails = tcpext(&a, "TCPRetransFail") - fail_before;
    let (events, report, _) = trace.stop();
    drop((client, server));
    let counts = &report["counts"];
    let attempts: i64 = [
        "retransmit_syn",
        "retransmit_timeout",
        "retransmit_tail_loss_probe",
        "retransmit_fast",
        "retransmit_after_timeout",
        "retransmit_other",
        "retransmit_zero_window",
    ]
    .iter()
    .map(|k| counts[k].as_i64().unwrap())
    .sum();
    let unsent = counts["retransmit_unsent"].as_i64().unwrap();
    eprintln!("{attempts} resend attempts, {unsent} sent nothing; RetransSegs +{segs}, TCPRetransFail +{fails}");
    assert!(
        unsent >= 1,
        "no resend was refused while queued: {report:#}"
    );
    // EBUSY is not a failure the kernel counts (TcpExtTCPRetransFail), nor a segment it
    // resent (RetransSegs): the attempts that sent something are exactly RetransSegs.
    assert_eq!(fails, 0, "{report:#}");
    support::assert_traced_count(
        attempts - unsent,
        segs,
        support::skipped(&report, "tcp_retransmit_skb"),
        &format!("resends that sent something vs RetransSegs: {report:#}"),
    );
    let busy: Vec<_> = events
        .iter()
        .filter(|e| {
            e["evidence"]
                .as_str()
                .is_some_and(|t| t.contains("nothing sent: EBUSY"))
        })
        .collect();
    assert!(
        !busy.is_empty() && busy.len() as i64 <= unsent,
        "{} EBUSY lines, {unsent} counted: {events:#?}",
        busy.len()
    );
    for e in &busy {
        assert_eq!(
            e["local"].as_str().unwrap().split(':').next(),
            Some("10.91.0.1"),
            "{e}"
        );
    }
}

#[test]
fn the_process_printed_is_the_child_that_connected() {
    if !support::require_root("the_process_printed_is_the_child_that_connected") {
        return;
    }
    let _bpf = support::bpf_exclusive();
    let ns = Netns::new("trproc");
    ns.exec("nft add table inet tdoc && nft add chain inet tdoc in { type filter hook input priority 0 \\; } && nft add rule inet tdoc in tcp dport 5108 tcp flags syn drop");
    let trace = Trace::start(&[&ns], &[]);
    // `ip netns exec` replaces itself with bash: the child's pid is bash's.
    let mut child = Command::new("ip")
        .args([
            "netns",
            "exec",
            &ns.name,
            "bash",
            "-c",
            "exec 3<>/dev/tcp/127.0.0.1/5108",
        ])
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn bash");
    let pid = child.id();
    // SYN resends at 1, 2, 3 s after bash connects; bash itself may take a few hundred ms to
    // start on a loaded machine (2.3 s once saw fewer than two).
    std::thread::sleep(Duration::from_millis(3_300));
    let _ = child.kill();
    let _ = child.wait();
    let (events, _, _) = trace.stop();
    let syn = causes(&events, "syn_dropped");
    assert!(syn.len() >= 2, "{events:#?}");
    for e in &syn {
        assert_eq!(e["process"]["pid"], pid, "{e}");
        assert_eq!(e["process"]["comm"], "bash", "{e}");
        assert_eq!(e["process"]["source"], "connect", "{e}");
    }
}

/// A process is named as ps and ss -p name it (its thread-group leader's comm), not by the
/// name of the thread that happened to call connect().
#[test]
fn a_process_is_named_by_its_leader_not_by_the_connecting_thread() {
    if !support::require_root("a_process_is_named_by_its_leader_not_by_the_connecting_thread") {
        return;
    }
    let _bpf = support::bpf_exclusive();
    let ns = Netns::new("trlead");
    ns.exec("nft add table inet tdoc && nft add chain inet tdoc in { type filter hook input priority 0 \\; } && nft add rule inet tdoc in tcp dport 5109 tcp flags syn drop");
    let resent_before = tcpext(&ns, "TCPSynRetrans");
    let trace = Trace::start(&[&ns], &[]);
    let connecting = in_netns(&ns, || {
        let name = std::ffi::CString::new("tdoc-wkr").unwrap();
        assert_eq!(unsafe { libc::prctl(libc::PR_SET_NAME, name.as_ptr()) }, 0);
        let thread_comm = std::fs::read_to_string("/proc/thread-self/comm").unwrap();
        assert_eq!(thread_comm.trim(), "tdoc-wkr");
        support::connect_nonblocking("127.0.0.1:5109".parse().unwrap())
    });
    // Every SYN is dropped; give up once the kernel has resent one (its timer is 1 s here; a
    // fixed 1.5 s wait once saw no resend in a full-suite loop, the kernel's count unread).
    let deadline = Instant::now() + Duration::from_secs(10);
    while tcpext(&ns, "TCPSynRetrans") == resent_before {
        assert!(Instant::now() < deadline, "no SYN resent in 10 s");
        std::thread::sleep(Duration::from_millis(20));
    }
    drop(connecting);
    let (events, _, _) = trace.stop();
    let leader = std::fs::read_to_string("/proc/self/comm").unwrap();
    assert_ne!(leader.trim(), "tdoc-wkr");
    let syn = causes(&events, "syn_dropped");
    assert!(!syn.is_empty(), "{events:#?}");
    for e in &syn {
        assert_eq!(e["process"]["pid"], std::process::id(), "{e}");
        assert_eq!(e["process"]["comm"], leader.trim(), "{e}");
    }
}

#[test]
fn incast_through_a_shallow_bottleneck_names_qdisc_drops_timeouts_and_incast() {
    if !support::require_root(
        "incast_through_a_shallow_bottleneck_names_qdisc_drops_timeouts_and_incast",
    ) {
        return;
    }
    let _bpf = support::bpf_exclusive();
    const SENDERS: u16 = 8;
    const BLOCK: usize = 64 << 10;
    const ROUNDS: usize = 10;
    let tx = Netns::new("trinc-s");
    let rx = Netns::new("trinc-r");
    let (tx_if, _) = support::veth(&tx, "10.77.0.1/24", &rx, "10.77.0.2/24");
    // The receiver's port: a shallow token bucket every sender shares (the switch buffer of
    // many-to-one replies).
    tx.exec(&format!(
        "tc qdisc add dev {tx_if} root tbf rate 100mbit burst 16384 limit 16384"
    ));
    let servers: Vec<_> = (0..SENDERS)
        .map(|i| {
            spawn_in_netns(&tx, move || {
                let l = listener(SocketAddr::from(([10, 77, 0, 1], 5200 + i)), 4, None);
                let (mut c, _) = l.accept().unwrap();
                let block = vec![3u8; BLOCK];
                let mut ask = [0u8; 1];
                while c.read_exact(&mut ask).is_ok() {
                    c.write_all(&block).unwrap();
                }
            })
        })
        .collect();
    std::thread::sleep(Duration::from_millis(200));
    let timeouts_before = tcpext(&tx, "TCPTimeouts");
    let trace = Trace::start(&[&tx, &rx], &[]);
    in_netns(&rx, || {
        let mut conns: Vec<TcpStream> = (0..SENDERS)
            .map(|i| TcpStream::connect(SocketAddr::from(([10, 77, 0, 1], 5200 + i))).unwrap())
            .collect();
        let mut buf = vec![0u8; BLOCK];
        let until = Instant::now() + Duration::from_secs(8);
        for _ in 0..ROUNDS {
            for c in &mut conns {
                c.write_all(b"?").unwrap();
            }
            for c in &mut conns {
                c.read_exact(&mut buf).unwrap();
            }
            if Instant::now() > until {
                break;
            }
        }
    });
    for s in servers {
        let _ = s.join();
    }
    std::thread::sleep(Duration::from_millis(300));
    let (events, report, _) = trace.stop();
    let timeouts = tcpext(&tx, "TCPTimeouts") - timeouts_before;
    eprintln!(
        "incast test: {timeouts} timeouts, episodes {}, drops {}",
        report["summary"]["incast_episodes"], report["drops_by_reason"]
    );
    let traced_timeouts: Vec<_> = causes(&events, "timeout")
        .into_iter()
        .filter(|e| e["netns_name"] == tx.name.as_str())
        .collect();
    let rx_timeouts = tcpext(&rx, "TCPTimeouts");
    eprintln!(
        "rx timeouts {rx_timeouts}, traced in rx: {}",
        causes(&events, "timeout").len() - traced_timeouts.len()
    );
    // The kernel counts a timeout (TcpExtTCPTimeouts) also when its retransmission cannot
    // leave the host (the sender's own queue full: TcpExtTCPRetransFail). On 6.18
    // tcp:tcp_retransmit_skb fires for those too (with the error; counts.retransmit_unsent),
    // so each timeout is traced unless the kernel skipped the hook (the program already
    // running on that CPU: counted in the report). Before the tests that trace ran one at a
    // time, 1 of 78 and 1 of 88 timeouts went untraced with no skip counted, in runs with
    // thousands of local failures; the bound below still allows as many as those failures.
    let retrans_fail = tcpext(&tx, "TCPRetransFail");
    let skipped = support::skipped(&report, "tcp_retransmit_skb") as i64;
    let traced = traced_timeouts.len() as i64;
    let untraced = timeouts - traced;
    assert!(
        untraced >= 0 && untraced <= retrans_fail + skipped && untraced * 20 <= timeouts,
        "traced timeouts {traced} vs TcpExtTCPTimeouts {timeouts} (TcpExtTCPRetransFail {retrans_fail}, skipped {skipped}, lost records {}, kernel-side counts {})",
        report["lost_events"],
        report["counts"]
    );
    if retrans_fail == 0 {
        support::assert_traced_count(
            traced,
            timeouts,
            skipped as u64,
            "timeouts traced vs TcpExtTCPTimeouts",
        );
    }
    assert!(timeouts > 0, "the bottleneck caused no timeout: {report:#}");
    let qdisc: Vec<_> = events
        .iter()
        .filter(|e| e["drop_reason"] == "QDISC_DROP")
        .collect();
    assert!(!qdisc.is_empty(), "{report:#}");
    for e in &qdisc {
        assert!(e["evidence"].as_str().unwrap().contains(&tx_if), "{e}");
    }
    let p = pathologies(&report);
    assert!(p.contains(&"packet_drop".to_string()), "{p:?}");
    assert!(p.contains(&"retransmit_timeout".to_string()), "{p:?}");
    if report["summary"]["incast_episodes"]
        .as_array()
        .unwrap()
        .is_empty()
    {
        eprintln!("no incast episode: timeouts were not synchronized this run ({timeouts})");
    } else {
        assert!(p.contains(&"incast".to_string()), "{p:?}");
    }
}

#[test]
fn port_filter_and_human_output_with_rolling_summaries() {
    if !support::require_root("port_filter_and_human_output_with_rolling_summaries") {
        return;
    }
    let _bpf = support::bpf_shared();
    let ns = Netns::new("trfilt");
    ns.exec("nft add table inet tdoc && nft add chain inet tdoc in { type filter hook input priority 0 \\; } && nft add rule inet tdoc in tcp dport { 5111, 5112 } tcp flags syn drop");
    let mut child = Command::new(support::bin())
        .args([
            "trace",
            "--netns",
            &ns.name,
            "--port",
            "5112",
            "--every",
            "500ms",
            "--duration",
            "2600ms",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn trace");
    std::thread::sleep(Duration::from_millis(800));
    let socks = in_netns(&ns, || {
        [5111u16, 5112].map(|p| support::connect_nonblocking(SocketAddr::from(([127, 0, 0, 1], p))))
    });
    let mut out = String::new();
    child
        .stdout
        .take()
        .unwrap()
        .read_to_string(&mut out)
        .unwrap();
    let status = child.wait().unwrap();
    drop(socks);
    assert!(out.starts_with("tracing TCP in "), "{out}");
    assert!(
        out.lines().filter(|l| l.starts_with("-- ")).count() >= 3,
        "rolling summaries:\n{out}"
    );
    // Event lines start with the time since the trace started ("    1.803s ...").
    let events: Vec<&str> = out
        .lines()
        .filter(|l| {
            let t = l.trim_start();
            t.split_whitespace()
                .next()
                .is_some_and(|w| w.ends_with('s') && w[..w.len() - 1].parse::<f64>().is_ok())
        })
        .collect();
    assert!(!events.is_empty(), "{out}");
    assert!(events.iter().any(|l| l.contains("syn_dropped")), "{out}");
    assert!(
        events.iter().all(|l| l.contains(":5112")),
        "only port 5112:\n{out}"
    );
    assert!(out.contains("Lost events (ring buffer full): 0"), "{out}");
    assert!(out.contains("SYN retransmitted"), "the finding:\n{out}");
    assert!(out.contains("Verdict:"), "{out}");
    assert_eq!(status.code(), Some(1), "{out}");
}

/// `recursion_misses` of each BPF program the process `pid` holds, by the tracepoint its
/// link attaches it to, from /proc/<pid>/fdinfo (the kernel's own report, read apart from
/// the bpf() call tcpdoctor makes).
fn skipped_by_tracepoint(pid: u32) -> std::collections::BTreeMap<String, u64> {
    let mut misses = std::collections::HashMap::new();
    let mut links = Vec::new();
    for e in std::fs::read_dir(format!("/proc/{pid}/fdinfo"))
        .unwrap()
        .flatten()
    {
        let Ok(text) = std::fs::read_to_string(e.path()) else {
            continue;
        };
        let field = |k: &str| {
            text.lines()
                .find_map(|l| l.strip_prefix(k).map(|v| v.trim().to_string()))
        };
        match (
            field("prog_id:"),
            field("tp_name:"),
            field("recursion_misses:"),
        ) {
            (Some(id), Some(tp), _) => links.push((id, tp)),
            (Some(id), None, Some(n)) => {
                misses.insert(id, n.parse::<u64>().unwrap());
            }
            _ => {}
        }
    }
    assert!(!links.is_empty(), "no BPF links held by pid {pid}");
    links
        .into_iter()
        .filter_map(|(id, tp)| Some((tp, *misses.get(&id)?)))
        .filter(|(_, n)| *n > 0)
        .collect()
}

#[test]
fn events_the_kernel_skipped_are_reported_per_hook_as_the_kernel_counts_them() {
    if !support::require_root(
        "events_the_kernel_skipped_are_reported_per_hook_as_the_kernel_counts_them",
    ) {
        return;
    }
    let _bpf = support::bpf_exclusive();
    // Fast churn: each connection changes state several times in process context (connect,
    // close), where an interrupt's softirq can hit the same tracepoint while the program runs;
    // the kernel then skips the nested run and counts it.
    const CLIENTS: usize = 4;
    const PER_CLIENT: usize = 6_000;
    // Through a veth pair: each segment is received in a softirq of its own, which is
    // what interrupts a program running in process context.
    let client = Netns::new("trskipc");
    let server_ns = Netns::new("trskips");
    support::veth(&client, "10.79.0.1/24", &server_ns, "10.79.0.2/24");
    let l = in_netns(&server_ns, || {
        listener("10.79.0.2:5106".parse().unwrap(), 4096, None)
    });
    let server = std::thread::spawn(move || {
        let deadline = Instant::now() + Duration::from_secs(20);
        let mut n = 0;
        while n < CLIENTS * PER_CLIENT && Instant::now() < deadline {
            if let Ok((c, _)) = l.accept() {
                drop(c);
                n += 1;
            }
        }
    });
    let trace = Trace::start(&[&client, &server_ns], &[]);
    let clients: Vec<_> = (0..CLIENTS)
        .map(|_| {
            spawn_in_netns(&client, || {
                let deadline = Instant::now() + Duration::from_secs(8);
                let mut made = 0u64;
                for _ in 0..PER_CLIENT {
                    if Instant::now() > deadline {
                        break;
                    }
                    let addr: SocketAddr = "10.79.0.2:5106".parse().unwrap();
                    if let Ok(mut s) = TcpStream::connect_timeout(&addr, Duration::from_secs(2)) {
                        made += 1;
                        let _ = s.set_read_timeout(Some(Duration::from_secs(2)));
                        let mut b = [0u8; 1];
                        let _ = s.read(&mut b);
                    }
                }
                made
            })
        })
        .collect();
    let made: u64 = clients.into_iter().map(|c| c.join().unwrap()).sum();
    // Unblock the acceptor if a client gave up early.
    let _ = in_netns(&client, || TcpStream::connect("10.79.0.2:5106").map(|_| ()));
    let _ = server.join();
    // The traffic is over. The programs also run for every other namespace's events (they
    // filter after the kernel's check), so other tests' traffic can still add skips: equal
    // when the count held still over 300 ms, else at least what the kernel counted.
    let settled = skipped_by_tracepoint(trace.child.id());
    std::thread::sleep(Duration::from_millis(300));
    let kernel = skipped_by_tracepoint(trace.child.id());
    let (_, report, _) = trace.stop();
    let reported: std::collections::BTreeMap<String, u64> =
        serde_json::from_value(report["missed_events"].clone()).expect("missed_events");
    eprintln!("{made} connections; skipped by the kernel: {kernel:?} (300 ms before: {settled:?})");
    if settled == kernel {
        assert_eq!(reported, kernel, "{report:#}");
    } else {
        for (hook, n) in &kernel {
            assert!(
                reported.get(hook).is_some_and(|r| r >= n),
                "{hook}: the kernel counted {n} skips: {report:#}"
            );
        }
    }
    // A connect whose state change was skipped is not counted, and nothing is counted twice.
    let connects = report["counts"]["connects"].as_u64().unwrap();
    let skipped = kernel.get("inet_sock_set_state").copied().unwrap_or(0);
    assert!(connects <= made + 1, "{connects} > {made} + 1");
    assert!(
        connects + skipped >= made,
        "{connects} + {skipped} < {made}"
    );
}

/// The inode of a namespace file (/proc/PID/ns/net, /run/netns/NAME).
fn ns_inode(path: &str) -> u64 {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata(path).unwrap().ino()
}

/// Issue 24: the header said "tracing TCP in current". It names the namespace: the host's
/// (or tcpdoctor's own) with its inode, or an `ip netns` one by its name and inode.
#[test]
fn the_header_names_the_traced_namespace() {
    if !support::require_root("the_header_names_the_traced_namespace") {
        return;
    }
    let _bpf = support::bpf_shared();
    let ns = Netns::new("trhead");
    let here = ns_inode("/proc/self/ns/net");
    let first_line = |args: &[&str]| {
        let (_, out, err) = support::run(args);
        out.lines()
            .next()
            .unwrap_or_else(|| panic!("no output: {err}"))
            .to_string()
    };
    // The host's: the initial namespace's fixed inode (NET_NS_INIT_INO, Linux 6.18), or PID
    // 1's namespace (not readable in every sandbox).
    let pid1 = std::fs::metadata("/proc/1/ns/net")
        .ok()
        .map(|_| ns_inode("/proc/1/ns/net"));
    let mine = if here == 0xEFFF_FFF9 || pid1 == Some(here) {
        format!("this host's network namespace (inode {here})")
    } else if pid1.is_some() {
        format!("tcpdoctor's own network namespace (inode {here}; not the host's, no name in /run/netns)")
    } else {
        format!("tcpdoctor's own network namespace (inode {here}; no name in /run/netns)")
    };
    assert_eq!(
        first_line(&["trace", "--duration", "300ms"]),
        format!("tracing TCP in {mine} for 300ms")
    );
    let theirs = ns_inode(&format!("/run/netns/{}", ns.name));
    assert_eq!(
        first_line(&["trace", "--duration", "300ms", "--netns", &ns.name]),
        format!(
            "tracing TCP in network namespace {} (inode {theirs}) for 300ms",
            ns.name
        )
    );
}

/// Issue 24: a healthy wrk run showed "111,222 TCP drops", all QUEUE_PURGE: buffers a
/// closing socket frees with it (the peer's FIN left in its receive queue, freed in
/// sk_stream_kill_queues; measured with perf's skb:kfree_skb location). They are counted
/// apart as benign, never among the TCP drops.
#[test]
fn buffers_freed_with_their_socket_are_benign_not_tcp_drops() {
    if !support::require_root("buffers_freed_with_their_socket_are_benign_not_tcp_drops") {
        return;
    }
    let _bpf = support::bpf_exclusive();
    let ns = Netns::new("trpurge");
    let server = spawn_in_netns(&ns, || {
        let l = listener("127.0.0.1:5113".parse().unwrap(), 128, None);
        for _ in 0..200 {
            let (mut c, _) = l.accept().unwrap();
            let mut b = [0u8; 4];
            c.read_exact(&mut b).unwrap();
            c.write_all(b"pong").unwrap();
        }
    });
    let trace = Trace::start(&[&ns], &[]);
    in_netns(&ns, || {
        // The client reads its 4 bytes, never the end of the stream: the server's FIN is
        // left in its receive queue when it closes.
        for _ in 0..200 {
            let mut s = TcpStream::connect("127.0.0.1:5113").unwrap();
            s.write_all(b"ping").unwrap();
            let mut b = [0u8; 4];
            s.read_exact(&mut b).unwrap();
        }
    });
    server.join().unwrap();
    std::thread::sleep(Duration::from_millis(200));
    let (events, report, _) = trace.stop();
    let benign = report["counts"]["benign_drops"].as_u64().unwrap();
    assert!(benign > 0, "{report:#}");
    assert_eq!(
        report["benign_drops_by_reason"]["QUEUE_PURGE"], benign,
        "{report:#}"
    );
    assert!(
        report["drops_by_reason"].get("QUEUE_PURGE").is_none(),
        "{report:#}"
    );
    let by_reason: u64 = report["drops_by_reason"]
        .as_object()
        .unwrap()
        .values()
        .map(|v| v.as_u64().unwrap())
        .sum();
    assert_eq!(report["counts"]["tcp_drops"], by_reason, "{report:#}");
    assert!(causes(&events, "drop")
        .iter()
        .all(|e| e["drop_reason"] != "QUEUE_PURGE"));
}

/// Issue 24: `trace` printed 780 identical `no_local_port` lines in 8 s. The text prints the
/// first of each process, cause and destination at once and rolls the rest of the interval
/// into one line with their count and rate; every event is either printed or counted there.
#[test]
fn repeated_events_are_rolled_up_into_one_line_per_interval_with_their_count() {
    if !support::require_root(
        "repeated_events_are_rolled_up_into_one_line_per_interval_with_their_count",
    ) {
        return;
    }
    let _bpf = support::bpf_exclusive();
    let ns = Netns::new("trroll");
    ns.sysctl("net.ipv4.ip_local_port_range", "40000 40001");
    let child = Command::new(support::bin())
        .args([
            "trace",
            "--netns",
            &ns.name,
            "--duration",
            "3s",
            "--every",
            "1s",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn trace");
    std::thread::sleep(Duration::from_millis(700));
    let failed = in_netns(&ns, || {
        let l = listener("127.0.0.1:5114".parse().unwrap(), 16, None);
        let held: Vec<TcpStream> = (0..2)
            .map(|_| TcpStream::connect("127.0.0.1:5114").unwrap())
            .collect();
        let mut failed = 0u64;
        let until = Instant::now() + Duration::from_millis(1800);
        while Instant::now() < until {
            match TcpStream::connect("127.0.0.1:5114") {
                Err(e) if e.raw_os_error() == Some(libc::EADDRNOTAVAIL) => failed += 1,
                other => panic!("expected EADDRNOTAVAIL: {other:?}"),
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        drop((held, l));
        failed
    });
    let out = child.wait_with_output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(failed >= 100, "{failed}");
    // Event lines start with the time since the trace started ("    0.667s ...").
    let lines: Vec<&str> = text
        .lines()
        .filter(|l| {
            let t = l.split_whitespace().next().unwrap_or_default();
            t.strip_suffix('s')
                .is_some_and(|v| v.parse::<f64>().is_ok())
                && l.contains(" no_local_port ")
        })
        .collect();
    let (rolled, first): (Vec<&str>, Vec<&str>) =
        lines.iter().partition(|l| l.contains(" more since "));
    // One first line and at most one roll-up per interval (3 of 1 s, the end included).
    assert!(!first.is_empty() && first.len() <= 4, "{text}");
    assert!(rolled.len() <= 4, "{text}");
    let held: u64 = rolled
        .iter()
        .map(|l| {
            let after = l.split(" no_local_port ").nth(1).unwrap().trim_start();
            after.split(' ').next().unwrap().parse::<u64>().unwrap()
        })
        .sum();
    assert_eq!(first.len() as u64 + held, failed, "{text}");
    // Each roll-up names the destination, and its rate when it spans a millisecond or more.
    assert!(
        rolled.iter().all(|l| l.contains("127.0.0.1:5114")),
        "{text}"
    );
    assert!(
        rolled.iter().any(|l| l.contains("/s); the last: ")),
        "{text}"
    );
}

/// Issue 24: `--connections` reports each connection as it closes, as bcc's tcplife users
/// expect: its lifetime, payload bytes each way and process, for both ends; and how it
/// ended (a reset sent by one end is a reset received by the other, whose process still
/// holds the socket and is named through its file).
#[test]
fn connections_mode_reports_each_connections_lifetime_bytes_and_process() {
    if !support::require_root(
        "connections_mode_reports_each_connections_lifetime_bytes_and_process",
    ) {
        return;
    }
    let _bpf = support::bpf_exclusive();
    let ns = Netns::new("trconn");
    let addr: SocketAddr = "127.0.0.1:5115".parse().unwrap();
    let server = spawn_in_netns(&ns, move || {
        let l = listener(addr, 16, None);
        // First connection: read 1,000 bytes, answer 300, close after the client.
        let (mut c, _) = l.accept().unwrap();
        let mut b = vec![0u8; 1000];
        c.read_exact(&mut b).unwrap();
        c.write_all(&[7u8; 300]).unwrap();
        let mut rest = Vec::new();
        c.read_to_end(&mut rest).unwrap();
        drop(c);
        // Second: the client resets it; keep the socket open a while after.
        let (mut c, _) = l.accept().unwrap();
        let mut b = [0u8; 10];
        c.read_exact(&mut b).unwrap();
        let gone = c.read(&mut b);
        std::thread::sleep(Duration::from_millis(500));
        drop(c);
        gone.map_err(|e| e.raw_os_error())
    });
    std::thread::sleep(Duration::from_millis(100));
    let trace = Trace::start(&[&ns], &["--connections"]);
    let ports = in_netns(&ns, move || {
        let mut s = TcpStream::connect(addr).unwrap();
        let first = s.local_addr().unwrap().port();
        s.write_all(&[1u8; 1000]).unwrap();
        let mut b = vec![0u8; 300];
        s.read_exact(&mut b).unwrap();
        std::thread::sleep(Duration::from_millis(100));
        drop(s);
        let s = TcpStream::connect(addr).unwrap();
        let second = s.local_addr().unwrap().port();
        (&s).write_all(b"0123456789").unwrap();
        std::thread::sleep(Duration::from_millis(100));
        set_linger0(&s);
        drop(s);
        (first, second)
    });
    let reset_seen = server.join().unwrap();
    std::thread::sleep(Duration::from_millis(200));
    let (_, report, _) = trace.stop_with_connections();
    let (conns, report) = report;
    assert_eq!(reset_seen, Err(Some(libc::ECONNRESET)));
    let me = std::process::id();
    let find = |local: u16, remote: u16| {
        conns
            .iter()
            .find(|c| {
                c["local"].as_str().unwrap().ends_with(&format!(":{local}"))
                    && c["remote"]
                        .as_str()
                        .unwrap()
                        .ends_with(&format!(":{remote}"))
            })
            .unwrap_or_else(|| panic!("no connection {local} -> {remote}: {conns:#?}"))
    };
    let client = find(ports.0, 5115);
    assert_eq!(client["opened"], "connect", "{client:#}");
    assert_eq!(
        (&client["tx_bytes"], &client["rx_bytes"]),
        (&1000.into(), &300.into())
    );
    assert_eq!(client["process"]["pid"], me, "{client:#}");
    assert_eq!(client["ended"], "closed_first", "{client:#}");
    // It lived from connect() through the 100 ms the client waited before closing.
    assert!(
        client["duration_us"].as_u64().unwrap() >= 100_000,
        "{client:#}"
    );
    let served = find(5115, ports.0);
    assert_eq!(served["opened"], "accept", "{served:#}");
    assert_eq!(
        (&served["tx_bytes"], &served["rx_bytes"]),
        (&300.into(), &1000.into())
    );
    assert_eq!(served["process"]["pid"], me, "{served:#}");
    assert_eq!(served["process"]["source"], "closer", "{served:#}");
    assert_eq!(served["ended"], "peer_closed_first", "{served:#}");
    let reset = find(ports.1, 5115);
    assert_eq!(reset["ended"], "reset_sent", "{reset:#}");
    assert_eq!(reset["tx_bytes"], 10, "{reset:#}");
    let reset_there = find(5115, ports.1);
    assert_eq!(reset_there["ended"], "reset_received", "{reset_there:#}");
    assert_eq!(reset_there["rx_bytes"], 10, "{reset_there:#}");
    assert_eq!(reset_there["process"]["pid"], me, "{reset_there:#}");
    assert_eq!(reset_there["process"]["source"], "file_descriptor");
    // The totals are the lines' sums.
    let totals = &report["connections"];
    assert_eq!(totals["connections"], conns.len() as u64, "{report:#}");
    let tx: u64 = conns.iter().map(|c| c["tx_bytes"].as_u64().unwrap()).sum();
    assert_eq!(totals["tx_bytes"], tx, "{report:#}");
}

/// A recording cut mid-line (a copy interrupted, a disk filled) is refused in one line that
/// names the file and the line; no root is needed to replay.
#[test]
fn a_cut_recording_is_a_one_line_error_naming_the_file_and_its_line() {
    let src = format!(
        "{}/../../tests/data/trace/syn-drop.rec.jsonl",
        env!("CARGO_MANIFEST_DIR")
    );
    let text = std::fs::read_to_string(&src).unwrap();
    let second = text.find('\n').unwrap() + 1;
    let cut = &text[..second + (text[second..].find('\n').unwrap() / 2)];
    let path = std::env::temp_dir().join(format!("tdoc-cut-{}.jsonl", std::process::id()));
    std::fs::write(&path, cut).unwrap();
    let p = path.display().to_string();
    let (code, out, err) = support::run(&["trace", "--replay", &p]);
    let _ = std::fs::remove_file(&path);
    assert_eq!(code, 2, "{out}{err}");
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(err.contains(&p) && err.contains("line 2"), "{err}");
    // The whole recording replays.
    let (code, out, err) = support::run(&["trace", "--replay", &src, "--json"]);
    assert!(code == 0 || code == 1, "{code}: {err}");
    assert!(out.contains("\"syn_resends\""), "{out}");
}
