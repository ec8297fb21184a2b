//! `tcpdoctor probe` against real sockets: the embedded server on loopback, a listener that
//! never answers, closed ports, and (as root) network namespaces with a narrowed port range
//! or an nftables rule that drops SYNs. Assertions are on the `--json` report.

mod support;

use std::net::TcpListener;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;
use support::{json, Netns};

fn probe_in(ns: &Netns, args: &[&str]) -> (i32, Value, String) {
    let full: Vec<&str> = std::iter::once("probe")
        .chain(args.iter().copied())
        .collect();
    let (code, out, err) = support::run_in(ns, &full);
    let v = json(&out, &err);
    (code, v, err)
}

/// `tcpdoctor probe` against its embedded server, inside a namespace of its own: the
/// thousands of connections a run makes, and their TIME_WAIT sockets, stay off the host (and
/// the embedded server's ephemeral listening port out of the host's range). `None` when the
/// test is skipped (not root, outside CI).
fn probe_embedded(test: &str, tag: &str, args: &[&str]) -> Option<(i32, Value, String)> {
    if !support::require_root(test) {
        return None;
    }
    let ns = Netns::new(tag);
    Some(probe_in(&ns, args))
}

fn phase<'a>(v: &'a Value, name: &str) -> &'a Value {
    v["phases"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["phase"] == name)
        .unwrap_or_else(|| panic!("no phase {name} in {v}"))
}

fn pathologies(v: &Value) -> Vec<String> {
    v["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["pathology"].as_str().unwrap().to_string())
        .collect()
}

/// Waits until something listens on `port` inside `ns` (the `--serve` child started).
fn wait_listening(ns: &Netns, port: u16) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while Instant::now() < deadline {
        let out = ns.exec(&format!("ss -Hltn 'sport = :{port}'"));
        if !out.trim().is_empty() {
            return;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    panic!("nothing listens on port {port} in {}", ns.name);
}

/// A client and a server namespace joined by a veth (10.77.x.1 <-> 10.77.x.2), with
/// `tcpdoctor probe --serve` running in the server namespace on port 5001.
/// The `--serve` process; killed (by its PID) and reaped on drop.
struct Served(std::process::Child);

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn client_server(tag: &str, serve_args: &[&str]) -> (Netns, Netns, String, Served) {
    let cli = Netns::new(&format!("{tag}c"));
    let srv = Netns::new(&format!("{tag}s"));
    let net = 77;
    support::veth(
        &cli,
        &format!("10.{net}.1.1/24"),
        &srv,
        &format!("10.{net}.1.2/24"),
    );
    let addr = format!("10.{net}.1.2:5001");
    let mut cmd = format!("exec {} probe --serve {addr}", support::bin().display());
    for a in serve_args {
        cmd.push(' ');
        cmd.push_str(a);
    }
    let served = Served(srv.spawn(&format!("{cmd} >/dev/null 2>&1")));
    wait_listening(&srv, 5001);
    (cli, srv, addr, served)
}

#[test]
fn default_run_measures_every_phase() {
    let Some((code, v, _)) = probe_embedded(
        "default_run_measures_every_phase",
        "dflt",
        &["-d", "1s", "-c", "2", "--json"],
    ) else {
        return;
    };
    assert!(code == 0 || code == 1, "exit {code}");
    assert_eq!(v["schema_version"], 1);
    assert_eq!(v["command"], "probe");
    assert_eq!(v["mode"], "crr");
    assert_eq!(v["interrupted"], false);
    let ok = v["requests_ok"].as_u64().unwrap();
    assert!(ok > 50, "only {ok} requests in 1 s");
    assert_eq!(v["requests_failed"], 0);
    assert_eq!(v["connections_opened"].as_u64().unwrap(), ok);
    assert_eq!(
        v["embedded_server"]["connections_accepted"]
            .as_u64()
            .unwrap(),
        ok
    );
    for name in ["connect", "first_byte", "total"] {
        let p = phase(&v, name);
        assert_eq!(p["count"].as_u64().unwrap(), ok, "{name}");
        let (p50, p99, max) = (
            p["p50_us"].as_u64().unwrap(),
            p["p99_us"].as_u64().unwrap(),
            p["max_us"].as_u64().unwrap(),
        );
        assert!(p50 > 0 && p50 <= p99 && p99 <= max, "{name}: {p}");
    }
    assert!(v["local_ports_used"].as_u64().unwrap() > 0);
    let seconds: u64 = v["per_second"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["ok"].as_u64().unwrap())
        .sum();
    assert_eq!(seconds, ok);
    assert!(!v["settings"]["syn_ladder_ms"]
        .as_array()
        .unwrap()
        .is_empty());
}

#[test]
fn refused_target_is_measured_not_a_crash() {
    if !support::require_root("refused_target_is_measured_not_a_crash") {
        return;
    }
    // Nothing listens in a fresh namespace.
    let ns = Netns::new("refu");
    let (code, v, _) = probe_in(&ns, &["127.0.0.1:5999", "-n", "20", "--json"]);
    assert_eq!(code, 1);
    assert_eq!(v["requests_ok"], 0);
    assert_eq!(v["requests_failed"], 20);
    assert_eq!(v["errors"][0]["errno"], "ECONNREFUSED");
    assert_eq!(v["errors"][0]["kind"], "refused");
    assert_eq!(v["errors"][0]["count"], 20);
    assert_eq!(pathologies(&v), vec!["connect_failure"]);
}

#[test]
fn hanging_server_is_cut_by_the_reply_timeout() {
    if !support::require_root("hanging_server_is_cut_by_the_reply_timeout") {
        return;
    }
    // Accepted by the kernel (backlog), never read, never answered.
    let ns = Netns::new("hang");
    let l = support::in_netns(&ns, || TcpListener::bind("127.0.0.1:5998").unwrap());
    let t = Instant::now();
    let (code, v, _) = probe_in(
        &ns,
        &[
            "127.0.0.1:5998",
            "-n",
            "4",
            "-c",
            "4",
            "--timeout",
            "300ms",
            "--json",
        ],
    );
    assert!(t.elapsed() < Duration::from_secs(5));
    assert_eq!(code, 1);
    assert_eq!(v["errors"][0]["kind"], "reply_timeout");
    assert_eq!(v["errors"][0]["count"], 4);
    assert_eq!(v["connections_opened"], 4);
    drop(l);
}

#[test]
fn bad_input_is_a_one_line_error_with_exit_2() {
    for args in [
        vec!["127.0.0.1:99999"],
        vec!["not an address"],
        vec!["http://127.0.0.1:0/"],
        vec!["--local-ports", "5000-4000"],
        vec!["--local-ports", "0-10"],
        vec!["-d", "10"],
        vec!["-d", "5parsecs"],
        vec!["--connect-timeout", "x"],
        vec!["--rate", "0"],
        vec!["-c", "0"],
        vec!["--close-first", "both"],
        vec!["--reply-size", "1G"],
        vec!["--serve", "127.0.0.1"],
    ] {
        let mut full = vec!["probe"];
        full.extend(&args);
        let (code, out, err) = support::run(&full);
        assert_eq!(code, 2, "{args:?}: {err}");
        assert!(out.is_empty(), "{args:?}: {out}");
        let first = err.lines().next().unwrap_or("");
        assert!(first.starts_with("error:"), "{args:?}: {err}");
        assert!(!err.contains("panicked"), "{args:?}: {err}");
        // The error names the offending value.
        assert!(first.contains(args.last().unwrap()), "{args:?}: {first}");
    }
    // Unresolvable host: caught after parsing, still one line and exit 2.
    let (code, _, err) = support::run(&["probe", "no-such-host.invalid:80"]);
    assert_eq!(code, 2, "{err}");
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(err.contains("no-such-host.invalid"), "{err}");
}

#[test]
fn http_keepalive_uses_one_connection_per_worker() {
    let Some((_, v, _)) = probe_embedded(
        "http_keepalive_uses_one_connection_per_worker",
        "hka",
        &["--mode", "http", "-n", "300", "-c", "3", "--json"],
    ) else {
        return;
    };
    assert_eq!(v["mode"], "http");
    assert_eq!(v["keepalive"], true);
    assert_eq!(v["requests_ok"], 300);
    assert_eq!(v["connections_opened"], 3);
    assert_eq!(v["embedded_server"]["connections_accepted"], 3);
    assert_eq!(v["status_codes"]["200"], 300);

    let Some((_, v, _)) = probe_embedded(
        "http_keepalive_uses_one_connection_per_worker",
        "hkb",
        &[
            "--mode",
            "http",
            "--keepalive",
            "off",
            "-n",
            "300",
            "-c",
            "3",
            "--json",
        ],
    ) else {
        return;
    };
    assert_eq!(v["keepalive"], false);
    assert_eq!(v["requests_ok"], 300);
    assert_eq!(v["connections_opened"], 300);
    assert_eq!(v["embedded_server"]["connections_accepted"], 300);
    assert_eq!(v["status_codes"]["200"], 300);
}

#[test]
fn http_status_codes_are_counted() {
    let Some((_, v, _)) = probe_embedded(
        "http_status_codes_are_counted",
        "hsc",
        &[
            "--mode",
            "http",
            "--path",
            "/status/503",
            "-n",
            "50",
            "--json",
        ],
    ) else {
        return;
    };
    assert_eq!(v["status_codes"]["503"], 50);
    assert!(v["status_codes"].get("200").is_none());
}

#[test]
fn ctrl_c_reports_what_was_measured() {
    if !support::require_root("ctrl_c_reports_what_was_measured") {
        return;
    }
    // In a namespace of its own, like the other embedded-server runs; `ip netns exec`
    // execs tcpdoctor, so the child's PID is tcpdoctor's.
    let ns = Netns::new("ctlc");
    let child = Command::new("ip")
        .args(["netns", "exec", &ns.name])
        .arg(support::bin())
        .args(["probe", "-d", "20s", "--json"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(1500));
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let t = Instant::now();
    let out = child.wait_with_output().unwrap();
    assert!(t.elapsed() < Duration::from_secs(5));
    let v = json(
        &String::from_utf8_lossy(&out.stdout),
        &String::from_utf8_lossy(&out.stderr),
    );
    assert_eq!(v["interrupted"], true);
    assert!(v["requests_ok"].as_u64().unwrap() > 0);
    assert!(v["elapsed_us"].as_u64().unwrap() < 10_000_000);
}

#[test]
fn narrowed_port_range_runs_out_with_eaddrnotavail() {
    if !support::require_root("narrowed_port_range_runs_out_with_eaddrnotavail") {
        return;
    }
    let (cli, _srv, addr, _served) = client_server("pe", &[]);
    cli.sysctl("net.ipv4.ip_local_port_range", "40000 40199");
    cli.sysctl("net.ipv4.tcp_tw_reuse", "0");
    let (code, v, _) = probe_in(
        &cli,
        &[
            &addr,
            "--close-first",
            "client",
            "-n",
            "400",
            "-c",
            "4",
            "-d",
            "20s",
            "--json",
        ],
    );
    assert_eq!(code, 1);
    let ok = v["requests_ok"].as_u64().unwrap();
    assert!(
        (150..=200).contains(&ok),
        "{ok} connections succeeded with 200 ports"
    );
    let e = &v["errors"][0];
    assert_eq!(e["errno"], "EADDRNOTAVAIL", "{}", v["errors"]);
    assert_eq!(e["phase"], "connect");
    assert!(e["count"].as_u64().unwrap() >= 200);
    assert_eq!(v["settings"]["ports_available"], 200);
    let f = v["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["pathology"] == "port_exhaustion")
        .unwrap_or_else(|| panic!("no port_exhaustion finding: {}", v["findings"]));
    assert_eq!(f["severity"], "critical");
    let arith = f["evidence"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["kind"] == "arithmetic")
        .unwrap();
    let rate = arith["result"].as_f64().unwrap();
    assert!((rate - 200.0 / 60.0).abs() < 1e-9, "{arith}");
    assert!(arith["formula"]
        .as_str()
        .unwrap()
        .contains("200 ports / 60 s"));
    let remedies: Vec<&str> = f["remedies"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["action"].as_str().unwrap())
        .collect();
    assert!(remedies[0].contains("Reuse connections"), "{remedies:?}");
    assert!(
        f["evidence"]
            .as_array()
            .unwrap()
            .iter()
            .any(|e| e["name"] == "net.ipv4.tcp_tw_reuse" && e["value"] == "0"),
        "{f}"
    );
}

#[test]
fn server_closing_first_keeps_client_ports_free() {
    if !support::require_root("server_closing_first_keeps_client_ports_free") {
        return;
    }
    // Same narrow range, but TIME_WAIT lands on the server: no port runs out.
    let (cli, _srv, addr, _served) = client_server("sc", &["--close-first", "server"]);
    cli.sysctl("net.ipv4.ip_local_port_range", "40000 40199");
    cli.sysctl("net.ipv4.tcp_tw_reuse", "0");
    let (code, v, _) = probe_in(
        &cli,
        &[
            &addr,
            "--close-first",
            "server",
            "-n",
            "400",
            "-c",
            "4",
            "-d",
            "20s",
            "--json",
        ],
    );
    assert_eq!(v["requests_ok"], 400, "{}", v["errors"]);
    assert!(!pathologies(&v).contains(&"port_exhaustion".to_string()));
    assert!(code == 0 || code == 1);
}

#[test]
fn dropped_syns_are_classified_with_their_attempt_number() {
    if !support::require_root("dropped_syns_are_classified_with_their_attempt_number") {
        return;
    }
    let (cli, srv, addr, _served) = client_server("syn", &[]);
    // Exponential ladder in the client namespace when the kernel has linear timeouts: the
    // second retransmission then comes at 3 s, not 2 s. The probe must read it, not assume.
    let linear = std::path::Path::new("/proc/sys/net/ipv4/tcp_syn_linear_timeouts").exists();
    if linear {
        cli.sysctl("net.ipv4.tcp_syn_linear_timeouts", "0");
    }
    // Drop the first SYN of every connection, and the second one too when bit 1 of the client
    // port is set (connect() prefers ports of one parity, so bit 0 would not split them):
    // those connect after retransmission 2, the others after retransmission 1 (1 s).
    srv.exec(
        "nft -f - <<EOF
table inet tdoc {
  set seen1 { type ipv4_addr . inet_service; flags dynamic,timeout; timeout 60s; }
  set seen2 { type ipv4_addr . inet_service; flags dynamic,timeout; timeout 60s; }
  chain in {
    type filter hook input priority 0;
    tcp dport 5001 tcp flags & (syn|ack) == syn ip saddr . tcp sport @seen2 accept
    tcp dport 5001 tcp flags & (syn|ack) == syn tcp sport & 2 == 2 ip saddr . tcp sport @seen1 add @seen2 { ip saddr . tcp sport } drop
    tcp dport 5001 tcp flags & (syn|ack) == syn ip saddr . tcp sport @seen1 accept
    tcp dport 5001 tcp flags & (syn|ack) == syn add @seen1 { ip saddr . tcp sport } drop
  }
}
EOF",
    );
    let (_, v, _) = probe_in(&cli, &[&addr, "-n", "8", "-c", "8", "--json"]);
    assert_eq!(v["requests_ok"], 8, "{}", v["errors"]);
    let ladder: Vec<u64> = v["settings"]["syn_ladder_ms"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_u64().unwrap())
        .collect();
    if linear {
        assert_eq!(&ladder[..2], &[1000, 3000]);
    }
    assert_eq!(v["spikes"]["count"], 8, "{}", v["spikes"]);
    let mut attempts = 0;
    let mut seen = [false; 2];
    for g in v["spikes"]["groups"].as_array().unwrap() {
        assert_eq!(g["cause"], "syn_retransmit", "{g}");
        let attempt = g["attempt"].as_u64().unwrap();
        attempts += attempt * g["count"].as_u64().unwrap();
        for p in g["example_local_ports"].as_array().unwrap() {
            let twice = p.as_u64().unwrap() & 2 == 2;
            assert_eq!(attempt, if twice { 2 } else { 1 }, "port {p} in {g}");
            seen[attempt as usize - 1] = true;
        }
        assert_eq!(g["corroborated"], g["count"]);
        // The slow phase is the connect, at the ladder's rung (plus the round trip).
        let rung = ladder[attempt as usize - 1] * 1000;
        let typical = g["typical_phase_us"].as_u64().unwrap();
        assert!(typical >= rung && typical < rung + 100_000, "{g}");
    }
    assert_eq!(seen, [true, true], "both rungs expected: {}", v["spikes"]);
    let syn_retrans = v["counters"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "TcpExtTCPSynRetrans")
        .unwrap_or_else(|| panic!("TcpExtTCPSynRetrans did not move: {}", v["counters"]));
    assert_eq!(syn_retrans["delta"].as_u64().unwrap(), attempts);
    let f = v["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["pathology"] == "syn_retransmit")
        .unwrap();
    assert!(f["evidence"]
        .as_array()
        .unwrap()
        .iter()
        .any(|e| e["name"] == "TcpExtTCPSynRetrans"));
}

#[test]
fn rr_mode_keeps_one_connection_per_worker() {
    let Some((_, v, _)) = probe_embedded(
        "rr_mode_keeps_one_connection_per_worker",
        "rr",
        &["--mode", "rr", "-n", "200", "-c", "2", "--json"],
    ) else {
        return;
    };
    assert_eq!(v["requests_ok"], 200);
    assert_eq!(v["connections_opened"], 2);
    assert_eq!(v["embedded_server"]["requests_served"], 200);
}

#[test]
fn open_loop_rate_paces_the_requests() {
    let Some((_, v, _)) = probe_embedded(
        "open_loop_rate_paces_the_requests",
        "rate",
        &["--rate", "100", "-n", "50", "-c", "2", "--json"],
    ) else {
        return;
    };
    assert_eq!(v["requests_ok"], 50);
    assert_eq!(v["rate_limit_per_s"], 100.0);
    // 50 requests at 100/s: the last is due at 0.49 s.
    let elapsed = v["elapsed_us"].as_u64().unwrap();
    assert!(elapsed >= 480_000, "{elapsed}");
}

#[test]
fn explicit_local_ports_run_out_with_eaddrinuse() {
    if !support::require_root("explicit_local_ports_run_out_with_eaddrinuse") {
        return;
    }
    // Own namespace, so the ports cannot collide with anything else on the host.
    let ns = Netns::new("lp");
    let (code, v, _) = probe_in(
        &ns,
        &[
            "--local-ports",
            "20000-20009",
            "-n",
            "30",
            "-c",
            "1",
            "--json",
        ],
    );
    assert_eq!(code, 1);
    assert_eq!(v["requests_ok"], 10, "{}", v["errors"]);
    assert_eq!(v["local_ports_used"], 10);
    assert_eq!(v["errors"][0]["errno"], "EADDRINUSE");
    assert_eq!(v["errors"][0]["phase"], "bind");
    assert_eq!(v["settings"]["ports_available"], 10);
    let f = &v["findings"][0];
    assert_eq!(f["pathology"], "port_exhaustion");
    assert!(f["evidence"]
        .as_array()
        .unwrap()
        .iter()
        .any(|e| e["name"] == "--local-ports" && e["value"] == "20000-20009"));
}

#[test]
fn linger0_leaves_no_time_wait_to_run_out_of() {
    if !support::require_root("linger0_leaves_no_time_wait_to_run_out_of") {
        return;
    }
    let ns = Netns::new("l0");
    ns.sysctl("net.ipv4.ip_local_port_range", "40000 40099");
    ns.sysctl("net.ipv4.tcp_tw_reuse", "0");
    // SO_LINGER 0: close() sends RST, no TIME_WAIT, so 100 ports carry 300 connections.
    let (_, v, _) = probe_in(
        &ns,
        &["--linger0", "--nodelay", "-n", "300", "-c", "2", "--json"],
    );
    assert_eq!(v["linger0"], true);
    assert_eq!(v["nodelay"], true);
    assert_eq!(v["requests_ok"], 300, "{}", v["errors"]);
    assert!(!pathologies(&v).contains(&"port_exhaustion".to_string()));
    // The same without it runs out after about 100.
    let (_, v, _) = probe_in(&ns, &["-n", "300", "-c", "2", "--json"]);
    let ok = v["requests_ok"].as_u64().unwrap();
    assert!(ok <= 100, "{ok}");
    assert_eq!(v["errors"][0]["errno"], "EADDRNOTAVAIL");
}

#[test]
fn route_rto_min_sets_the_rto_floor() {
    if !support::require_root("route_rto_min_sets_the_rto_floor") {
        return;
    }
    let ns = Netns::new("rto");
    let (_, v, _) = probe_in(&ns, &["-n", "20", "--json"]);
    assert_ne!(
        v["settings"]["rto_min_source"], "route",
        "{}",
        v["settings"]
    );
    // The embedded server listens on 127.0.0.1: give its host route an rto_min.
    ns.exec("ip route replace local 127.0.0.1 dev lo table local rto_min 7ms");
    let (_, v, _) = probe_in(&ns, &["-n", "20", "--json"]);
    assert_eq!(
        v["settings"]["rto_min_source"], "route",
        "{}",
        v["settings"]
    );
    assert_eq!(v["settings"]["rto_min_us"], 7000);
}

#[test]
fn dropped_requests_are_classified_as_data_rto() {
    if !support::require_root("dropped_requests_are_classified_as_data_rto") {
        return;
    }
    let (cli, srv, addr, _served) = client_server("rto", &[]);
    // No tail loss probe, so the lost request waits for the retransmission timer
    // (tcp_rto_min, 200 ms) instead of a probe after ~2 RTT.
    cli.sysctl("net.ipv4.tcp_early_retrans", "0");
    // Drop the first data segment (the 64-byte request) of every connection.
    srv.exec(
        "nft -f - <<EOF
table inet tdoc {
  set seen { type ipv4_addr . inet_service; flags dynamic,timeout; timeout 60s; }
  chain in {
    type filter hook input priority 0;
    tcp dport 5001 ip length > 100 ip saddr . tcp sport @seen accept
    tcp dport 5001 ip length > 100 add @seen { ip saddr . tcp sport } drop
  }
}
EOF",
    );
    let (_, v, _) = probe_in(&cli, &[&addr, "-n", "6", "-c", "3", "--json"]);
    assert_eq!(v["requests_ok"], 6, "{}", v["errors"]);
    let groups = v["spikes"]["groups"].as_array().unwrap();
    assert_eq!(groups.len(), 1, "{}", v["spikes"]);
    assert_eq!(groups[0]["cause"], "data_rto");
    assert_eq!(groups[0]["count"], 6);
    let typical = groups[0]["typical_phase_us"].as_u64().unwrap();
    let floor = v["settings"]["rto_min_us"].as_u64().unwrap();
    assert!(
        typical >= floor && typical < floor + 100_000,
        "{typical} vs {floor}"
    );
    assert!(pathologies(&v).contains(&"retransmit_timeout".to_string()));
}

#[test]
fn connect_mode_measures_the_handshake_only() {
    let Some((_, v, _)) = probe_embedded(
        "connect_mode_measures_the_handshake_only",
        "conn",
        &["--mode", "connect", "-n", "200", "--json"],
    ) else {
        return;
    };
    assert_eq!(v["mode"], "connect");
    assert_eq!(v["requests_ok"], 200);
    let phases: Vec<&str> = v["phases"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["phase"].as_str().unwrap())
        .collect();
    assert_eq!(phases, ["connect", "total"]);
    assert_eq!(v["embedded_server"]["requests_served"], 0);
}
