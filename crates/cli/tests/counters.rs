//! `tcpdoctor counters`: saved outputs of five tools (tests/data/counters), malformed lines,
//! deltas of two snapshots, and live deltas in a namespace flooded at a backlog-1 listener.

mod support;

use std::net::SocketAddr;
use std::os::fd::OwnedFd;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::Duration;

use serde_json::Value;
use support::Netns;
use support::{connect_nonblocking, in_netns, listener};

fn data(name: &str) -> String {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/data/counters")
        .join(name)
        .to_string_lossy()
        .into_owned()
}

fn saved(args: &[&str]) -> (i32, Value) {
    let files: Vec<String> = args.iter().map(|a| data(a)).collect();
    let mut argv = vec!["counters", "--json", "--from", &files[0]];
    if files.len() > 1 {
        argv.extend(["--to", &files[1]]);
    }
    let (code, out, err) = support::run(&argv);
    (code, support::json(&out, &err))
}

fn row<'a>(v: &'a Value, name: &str) -> &'a Value {
    v["counters"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == name)
        .unwrap_or_else(|| panic!("no counter {name}"))
}

fn delta(v: &Value, name: &str) -> i64 {
    row(v, name)["delta"].as_i64().unwrap()
}

fn pathologies(v: &Value) -> Vec<String> {
    v["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["pathology"].as_str().unwrap().to_string())
        .collect()
}

#[test]
fn the_three_linux_formats_agree_on_every_delta() {
    let (c1, text) = saved(&["linux-nstat-a.1.txt", "linux-nstat-a.2.txt"]);
    let (c2, json) = saved(&["linux-nstat.1.json", "linux-nstat.2.json"]);
    let (c3, netstat) = saved(&["linux-netstat-s.1.txt", "linux-netstat-s.2.txt"]);
    assert_eq!((c1, c2, c3), (1, 1, 1));
    assert_eq!(text["files"][0]["format"], "nstat_text");
    assert_eq!(json["files"][0]["format"], "nstat_json");
    assert_eq!(netstat["files"][1]["format"], "linux_netstat");
    assert_eq!(text["mode"], "delta");
    assert_eq!(text["source"], "saved");
    // The same moments seen by nstat (text and JSON) and netstat: identical deltas for every
    // counter netstat prints, whether as a sentence or as `Name: value`.
    for name in [
        "TcpActiveOpens",
        "TcpPassiveOpens",
        "TcpRetransSegs",
        "TcpExtListenOverflows",
        "TcpExtListenDrops",
        "TcpExtTCPSynRetrans",
        "TcpExtTCPTimeouts",
        "TcpExtTCPToZeroWindowAdv",
        "TcpExtTW",
    ] {
        let d = delta(&text, name);
        assert_eq!(d, delta(&json, name), "{name}: nstat text vs json");
        assert_eq!(d, delta(&netstat, name), "{name}: nstat vs netstat -s");
    }
    // The scenario moved what it was built to move.
    assert!(delta(&text, "TcpExtListenOverflows") > 0);
    assert!(delta(&text, "TcpExtTW") >= 50);
    assert_eq!(
        netstat["files"][1]["mapped"]["TcpExtListenOverflows"],
        "TcpExt: N times the listen queue of a socket overflowed"
    );
    for v in [&text, &json, &netstat] {
        let p = pathologies(v);
        for want in ["accept_queue_overflow", "syn_retransmit", "slow_reader"] {
            assert!(p.iter().any(|x| x == want), "{want} missing from {p:?}");
        }
    }
    let f = text["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["pathology"] == "accept_queue_overflow")
        .unwrap();
    assert_eq!(f["source"], "counters");
    assert_eq!(f["evidence"][0]["name"], "TcpExtListenOverflows");
    assert_eq!(
        f["evidence"][0]["delta"].as_i64().unwrap(),
        delta(&text, "TcpExtListenOverflows")
    );
    // Meanings come from the shared table.
    assert!(row(&text, "TcpExtListenOverflows")["meaning"]
        .as_str()
        .unwrap()
        .contains("accept queue"));
}

#[test]
fn macos_and_illumos_map_to_nstat_names() {
    let (code, mac) = saved(&["macos-netstat-s-p-tcp.1.txt", "macos-netstat-s-p-tcp.2.txt"]);
    assert_eq!(code, 1);
    assert_eq!(mac["files"][0]["format"], "macos_netstat");
    assert_eq!(delta(&mac, "TcpExtListenOverflows"), 37);
    assert_eq!(delta(&mac, "TcpExtTCPTimeouts"), 45);
    assert_eq!(delta(&mac, "TcpRetransSegs"), 84);
    assert_eq!(
        row(&mac, "TcpExtListenOverflows")["native_name"],
        "tcp: N listen queue overflows"
    );
    let p = pathologies(&mac);
    assert!(p.contains(&"accept_queue_overflow".to_string()), "{p:?}");
    assert!(p.contains(&"retransmit_timeout".to_string()), "{p:?}");
    assert!(mac["files"][0]["unparsed"].as_array().unwrap().is_empty());
    assert!(!mac["files"][0]["unmapped"].as_array().unwrap().is_empty());

    let (code, ill) = saved(&[
        "illumos-netstat-sP-tcp.1.txt",
        "illumos-netstat-sP-tcp.2.txt",
    ]);
    assert_eq!(code, 1);
    assert_eq!(ill["files"][0]["format"], "illumos_netstat");
    assert_eq!(delta(&ill, "TcpRetransSegs"), 245);
    assert_eq!(row(&ill, "TcpRetransSegs")["native_name"], "tcpRetransSegs");
    assert_eq!(delta(&ill, "TcpExtListenOverflows"), 9);
    assert_eq!(delta(&ill, "TcpExtTCPTimeouts"), 313);
    assert!(ill["files"][0]["unparsed"].as_array().unwrap().is_empty());
    // Names without an nstat equivalent are kept, and --all shows their delta too.
    let unmapped = ill["files"][0]["unmapped"].as_array().unwrap();
    assert!(unmapped.iter().any(|n| n == "tcpRetransBytes"));
    let (code, out, err) = support::run(&[
        "counters",
        "--json",
        "--all",
        "--from",
        &data("illumos-netstat-sP-tcp.1.txt"),
        "--to",
        &data("illumos-netstat-sP-tcp.2.txt"),
    ]);
    assert_eq!(code, 1, "{err}");
    let all = support::json(&out, &err);
    assert_eq!(delta(&all, "tcpRetransBytes"), 398810 - 160716);
}

#[test]
fn a_single_file_is_a_snapshot_with_its_values() {
    let (code, v) = saved(&["linux-nstat-a.2.txt"]);
    // Totals since boot judge nothing: no findings, and no claim of health either.
    assert_eq!(code, 3, "a snapshot is inconclusive");
    assert_eq!(v["verdict"], "inconclusive");
    assert!(v["findings"].as_array().unwrap().is_empty());
    assert_eq!(v["mode"], "snapshot");
    let file = std::fs::read_to_string(data("linux-nstat-a.2.txt")).unwrap();
    let expect: u64 = file
        .lines()
        .find(|l| l.starts_with("TcpExtListenOverflows "))
        .and_then(|l| l.split_whitespace().nth(1))
        .unwrap()
        .parse()
        .unwrap();
    assert_eq!(row(&v, "TcpExtListenOverflows")["value"], expect);
}

#[test]
fn malformed_lines_are_reported_not_dropped() {
    for (file, lines, kept) in [
        (
            "malformed-nstat-a.txt",
            vec![6, 10],
            "TcpExtListenOverflows",
        ),
        (
            "malformed-netstat-s.txt",
            vec![3, 37],
            "TcpExtListenOverflows",
        ),
        (
            "malformed-macos-netstat-s-p-tcp.txt",
            vec![4],
            "TcpExtListenOverflows",
        ),
        (
            "malformed-illumos-netstat-sP-tcp.txt",
            vec![5],
            "TcpRetransSegs",
        ),
    ] {
        let (code, v) = saved(&[file]);
        assert_eq!(code, 3, "{file}: a snapshot is inconclusive");
        let got: Vec<u64> = v["files"][0]["unparsed"]
            .as_array()
            .unwrap()
            .iter()
            .map(|u| u["line"].as_u64().unwrap())
            .collect();
        assert_eq!(got, lines, "{file}");
        assert!(row(&v, kept)["value"].as_u64().is_some(), "{file}: {kept}");
        // Human output lists them too.
        let (_, out, _) = support::run(&["counters", "--from", &data(file)]);
        assert!(out.contains("not understood"), "{file}:\n{out}");
    }
    // The illumos line had one good pair after the bad one: kept.
    let (_, v) = saved(&["malformed-illumos-netstat-sP-tcp.txt"]);
    assert!(v["files"][0]["unmapped"]
        .as_array()
        .unwrap()
        .iter()
        .any(|n| n == "tcpAlsoFine"));
    // A cut JSON file and an unknown format: one-line errors naming the file, exit 2.
    for (file, what) in [
        ("malformed-nstat.json", "invalid JSON"),
        ("README.md", "not nstat"),
    ] {
        let (code, _, err) = support::run(&["counters", "--from", &data(file)]);
        assert_eq!(code, 2, "{file}");
        assert!(err.contains(file) && err.contains(what), "{err}");
        assert_eq!(err.trim().lines().count(), 1, "{err}");
    }
    let (code, _, err) = support::run(&["counters", "--from", "/nonexistent/tdoc.txt"]);
    assert_eq!(code, 2);
    assert!(err.contains("/nonexistent/tdoc.txt"), "{err}");
}

#[test]
fn live_snapshot_and_all() {
    let (code, out, err) = support::run(&["counters", "--json"]);
    assert_eq!(code, 3, "a snapshot is inconclusive: {err}");
    let v = support::json(&out, &err);
    assert_eq!(v["source"], "live");
    assert!(row(&v, "TcpActiveOpens")["value"].as_u64().is_some());
    assert!(v["snapshot_duration_us"].as_u64().is_some());
    assert!(!v["counters"]
        .as_array()
        .unwrap()
        .iter()
        .any(|c| c["name"] == "IpInReceives"));
    let (_, out, err) = support::run(&["counters", "--json", "--all"]);
    let v = support::json(&out, &err);
    assert!(row(&v, "IpInReceives")["value"].as_u64().is_some());
}

#[test]
fn flooded_backlog_1_listener_full_in_sockets_and_listen_overflows_in_counters() {
    if !support::require_root("flooded_listener_counters") {
        return;
    }
    let ns = Netns::new("ctaq");
    let addr: SocketAddr = "127.0.0.1:5500".parse().unwrap();
    let l = in_netns(&ns, move || listener(addr, 1, None));
    // The delta runs while the flood happens: start it first.
    let counters = Command::new("ip")
        .args(["netns", "exec", &ns.name])
        .arg(support::bin())
        .args(["counters", "--json", "--interval", "2500ms"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(300));
    let clients: Vec<OwnedFd> = in_netns(&ns, move || {
        (0..20).map(|_| connect_nonblocking(addr)).collect()
    });
    // SYNs beyond the queue are dropped at once and again at the 1 s retransmission.
    std::thread::sleep(Duration::from_millis(300));
    let (code, out, err) = support::run_in(&ns, &["sockets", "--json", "--port", "5500"]);
    let s = support::json(&out, &err);
    assert_eq!(code, 1, "{err}");
    let lst = &s["listeners"][0];
    assert_eq!(
        (lst["full"].as_bool(), lst["backlog"].as_u64()),
        (Some(true), Some(1))
    );
    assert_eq!(s["findings"][0]["pathology"], "accept_queue_overflow");

    let out = counters.wait_with_output().unwrap();
    let (so, se) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    let v = support::json(&so, &se);
    assert_eq!(out.status.code(), Some(1), "{se}");
    assert_eq!(v["mode"], "delta");
    let ms = v["interval_ms"].as_u64().unwrap();
    assert!((2500..4000).contains(&ms), "{ms}");
    // The namespace's RTO floor (the 200 ms default) is known for a live delta.
    assert_eq!(v["rto_floor_us"], 200_000, "{v}");
    let overflows = delta(&v, "TcpExtListenOverflows");
    assert!(
        overflows >= 18,
        "18 connects found the queue full: {overflows}"
    );
    assert!(delta(&v, "TcpExtTCPSynRetrans") > 0);
    let p = pathologies(&v);
    assert!(p.contains(&"accept_queue_overflow".to_string()), "{p:?}");
    assert!(p.contains(&"syn_retransmit".to_string()), "{p:?}");

    // --netns from outside reads the namespace's counters, not ours.
    drop(clients);
    let (code, out, err) = support::run(&["counters", "--json", "--netns", &ns.name]);
    assert_eq!(code, 3, "a snapshot is inconclusive: {err}");
    let v = support::json(&out, &err);
    let inside: u64 = ns
        .exec("nstat -a -s -z TcpExtListenOverflows")
        .lines()
        .find(|l| l.starts_with("TcpExtListenOverflows"))
        .and_then(|l| l.split_whitespace().nth(1))
        .unwrap()
        .parse()
        .unwrap();
    assert_eq!(row(&v, "TcpExtListenOverflows")["value"], inside);
    assert!(inside >= overflows as u64);
    drop(l);
}

/// A SYN resend moves `TcpRetransSegs` (/proc/net/snmp) and `TcpExtTCPSynRetrans`
/// (/proc/net/netstat) together, and the kernel resends SYNs in batches (one per timer
/// tick). Read one file after the other, a batch landing between the two reads made a delta
/// of `TcpRetransSegs +15` with the SYN resends unmoved: "segments retransmitted" (a loss
/// finding) from a namespace where nothing but SYNs was ever resent (measured: 2 of 800 10 ms
/// deltas; it also failed doctor's accept-queue test once in 7 suite runs). Under a flood of
/// connects resending SYNs (hundreds a second) every delta must move both counters alike.
#[test]
fn syn_resends_move_both_files_alike_in_every_delta() {
    if !support::require_root("syn_resends_move_both_files_alike_in_every_delta") {
        return;
    }
    let ns = Netns::new("ctsr");
    let addr: SocketAddr = "127.0.0.1:5501".parse().unwrap();
    let l = in_netns(&ns, move || listener(addr, 1, None));
    // 600 connects 2 ms apart; each resends its SYN every second for 5 s (the linear
    // rungs), so from 1 s on the namespace resends about 600 SYNs a second.
    let flood = support::spawn_in_netns(&ns, move || {
        (0..600)
            .map(|_| {
                std::thread::sleep(Duration::from_millis(2));
                connect_nonblocking(addr)
            })
            .collect::<Vec<OwnedFd>>()
    });
    std::thread::sleep(Duration::from_millis(1000));
    let (_, out, err) = support::run_in(
        &ns,
        &["counters", "--json", "--watch", "10ms", "--count", "500"],
    );
    let held = flood.join().unwrap();
    let moved = support::counter_delta;
    let mut resent = 0;
    let mut reports = 0;
    for line in out.lines() {
        let v = support::json(line, &err);
        reports += 1;
        let (segs, syns) = (
            moved(&v, "TcpRetransSegs"),
            moved(&v, "TcpExtTCPSynRetrans"),
        );
        assert_eq!(segs, syns, "report {reports}: {v}");
        let p = pathologies(&v);
        assert!(
            p.iter()
                .all(|p| p == "syn_retransmit" || p == "accept_queue_overflow"),
            "report {reports}: {p:?}"
        );
        resent += syns;
    }
    assert_eq!(reports, 500, "{err}");
    // The flood did resend: at least a second of it at about 600 a second.
    assert!(resent > 500, "{resent} SYN resends counted");
    drop((held, l));
}

/// Issue 19: the later file first (swapped) made every running total go down; the delta
/// printed negative changes and "healthy". Refused, one line, exit 2.
#[test]
fn swapped_files_are_refused_because_counters_went_backwards() {
    for (a, b) in [
        ("linux-nstat-a.2.txt", "linux-nstat-a.1.txt"),
        ("linux-nstat.2.json", "linux-nstat.1.json"),
        ("linux-netstat-s.2.txt", "linux-netstat-s.1.txt"),
        ("macos-netstat-s-p-tcp.2.txt", "macos-netstat-s-p-tcp.1.txt"),
        (
            "illumos-netstat-sP-tcp.2.txt",
            "illumos-netstat-sP-tcp.1.txt",
        ),
    ] {
        let (code, out, err) = support::run(&["counters", "--from", &data(a), "--to", &data(b)]);
        assert_eq!(code, 2, "{a} -> {b}: {out}");
        assert!(out.is_empty(), "{out}");
        assert!(
            err.contains("counters went backwards")
                && err.contains("files swapped or host rebooted?"),
            "{err}"
        );
        assert!(err.contains(a) && err.contains(b), "{err}");
        assert_eq!(err.trim().lines().count(), 1, "{err}");
        // The right order still works.
        let (code, _) = saved(&[b, a]);
        assert_ne!(code, 2, "{b} -> {a}");
    }
}

/// Issue 19: a Linux nstat file against a macOS `netstat -s` file compares counters of two
/// systems as if one had changed into the other. Refused; nstat's text and JSON forms of the
/// same counters still compare.
#[test]
fn files_of_two_different_tools_are_refused() {
    let (code, _, err) = support::run(&[
        "counters",
        "--from",
        &data("linux-nstat-a.1.txt"),
        "--to",
        &data("macos-netstat-s-p-tcp.2.txt"),
    ]);
    assert_eq!(code, 2);
    assert!(
        err.contains("cannot compare") && err.contains("nstat") && err.contains("macOS"),
        "{err}"
    );
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    let (code, _, err) = support::run(&[
        "counters",
        "--from",
        &data("linux-netstat-s.1.txt"),
        "--to",
        &data("illumos-netstat-sP-tcp.2.txt"),
    ]);
    assert_eq!(code, 2, "{err}");
    let (code, v) = saved(&["linux-nstat-a.1.txt", "linux-nstat.2.json"]);
    assert_eq!(code, 1, "nstat text and JSON compare: {v}");
    assert_eq!(v["mode"], "delta");
}

/// Issue 19: `--interval 0s` and `--watch --count 0` measured nothing and said so with a
/// verdict; they are input errors.
#[test]
fn zero_interval_and_zero_count_are_refused() {
    for args in [
        vec!["counters", "--interval", "0s"],
        vec!["counters", "--watch", "1s", "--count", "0"],
        vec!["counters", "--watch", "0s"],
    ] {
        let t0 = std::time::Instant::now();
        let (code, out, err) = support::run(&args);
        assert_eq!(code, 2, "{args:?}: {out}");
        assert_eq!(err.trim().lines().count(), 1, "{err}");
        assert!(err.contains("0"), "{err}");
        assert!(t0.elapsed() < Duration::from_secs(5), "{args:?} waited");
    }
}

/// Issue 19: `--from -` (and `--to -`) read standard input, as a pipe from another host
/// would provide.
#[test]
fn from_dash_reads_standard_input() {
    use std::io::Write;
    let run_with_stdin = |args: &[&str], input: &str| {
        let mut child = Command::new(support::bin())
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        child
            .stdin
            .take()
            .unwrap()
            .write_all(input.as_bytes())
            .unwrap();
        let out = child.wait_with_output().unwrap();
        (
            out.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let later = std::fs::read_to_string(data("linux-nstat-a.2.txt")).unwrap();
    let earlier = data("linux-nstat-a.1.txt");
    let (code, out, err) = run_with_stdin(
        &["counters", "--json", "--from", &earlier, "--to", "-"],
        &later,
    );
    let piped = support::json(&out, &err);
    let (code2, from_files) = saved(&["linux-nstat-a.1.txt", "linux-nstat-a.2.txt"]);
    assert_eq!(code, code2, "{err}");
    assert_eq!(piped["counters"], from_files["counters"]);
    assert_eq!(piped["files"][1]["path"], "(standard input)");
    // A snapshot from standard input.
    let (code, out, err) = run_with_stdin(&["counters", "--json", "--from", "-"], &later);
    assert_eq!(code, 3, "{err}");
    assert_eq!(support::json(&out, &err)["mode"], "snapshot");
    // Garbage on standard input: one line naming it.
    let (code, _, err) = run_with_stdin(&["counters", "--from", "-"], "hello\n");
    assert_eq!(code, 2);
    assert!(err.contains("(standard input)"), "{err}");
}

/// A live delta judges each timeout against the namespace's RTO floor, lowered by a
/// route's rto_min.
#[test]
fn live_delta_reports_the_rto_floor_of_routes() {
    if !support::require_root("live_delta_reports_the_rto_floor_of_routes") {
        return;
    }
    let ns = Netns::new("ctrt");
    ns.exec("ip route add 10.99.0.0/24 dev lo rto_min 5ms");
    let (code, out, err) = support::run(&[
        "counters",
        "--json",
        "--interval",
        "100ms",
        "--netns",
        &ns.name,
    ]);
    let v = support::json(&out, &err);
    assert_eq!(code, 0, "{err}\n{out}");
    assert_eq!(v["rto_floor_us"], 5_000, "{v}");
}

/// Issue 24: `counters --from /dev/zero --to x` read without bound (24 GB resident, then the
/// OOM killer). Saved counter files are kilobytes: more than 4 MiB is refused in one line,
/// from a file or from standard input, without reading on.
#[test]
fn an_endless_saved_file_is_refused_in_one_line_without_reading_it_all() {
    let t0 = std::time::Instant::now();
    let (code, _, err) = support::run(&["counters", "--from", "/dev/zero", "--to", "/dev/zero"]);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("/dev/zero") && err.contains("4194304 bytes"),
        "{err}"
    );
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    // Bounded by the cap, not by the input: well under the time to read gigabytes.
    assert!(t0.elapsed() < std::time::Duration::from_secs(20));
    let mut child = std::process::Command::new(support::bin())
        .args(["counters", "--from", "-", "--to", "/dev/null"])
        .stdin(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    // Writes until the reader stops reading (a broken pipe ends it), at most 64 MiB.
    let writer = std::thread::spawn(move || {
        use std::io::Write;
        let block = vec![b'0'; 1 << 16];
        for _ in 0..1024 {
            if stdin.write_all(&block).is_err() {
                return;
            }
        }
    });
    let out = child.wait_with_output().unwrap();
    writer.join().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("(standard input)") && err.contains("4194304 bytes"),
        "{err}"
    );
}
