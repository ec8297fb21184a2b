//! `tcpdoctor exporter` against real components: Debian's `prometheus` server scraping it,
//! `promtool check metrics` on its output, the Grafana dashboard's queries against its
//! metrics, and port exhaustion driven in a network namespace it watches with --netns.
//!
//! Every process a test starts (exporter, prometheus, the connect loop) is ended by its PID;
//! listening ports are outside ip_local_port_range; temporary directories are removed.

mod support;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use support::{require_root, Netns};

fn root_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// A free port outside ip_local_port_range (32768-60999), so that no connect() takes it.
/// Each call starts its search at another port: tests run on threads of one process, and
/// two searches from one start raced to the same port (bound, released, taken twice).
fn free_port() -> u16 {
    static CALLS: std::sync::atomic::AtomicU16 = std::sync::atomic::AtomicU16::new(0);
    let n = CALLS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let start = 19_100 + ((std::process::id() % 400) as u16 * 2 + n * 13) % 800;
    for p in (start..19_900).chain(19_100..start) {
        if TcpListener::bind(("127.0.0.1", p)).is_ok() {
            return p;
        }
    }
    panic!("no free port in 19100-19899");
}

/// A GET over HTTP/1.0 (no chunking): (status, content type, body).
fn get(
    addr: SocketAddr,
    path: &str,
    accept: Option<&str>,
) -> std::io::Result<(u16, String, String)> {
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_secs(2))?;
    s.set_read_timeout(Some(Duration::from_secs(5)))?;
    let accept = accept
        .map(|a| format!("Accept: {a}\r\n"))
        .unwrap_or_default();
    write!(s, "GET {path} HTTP/1.0\r\nHost: {addr}\r\n{accept}\r\n")?;
    let mut raw = Vec::new();
    s.read_to_end(&mut raw)?;
    let text = String::from_utf8_lossy(&raw).into_owned();
    let (head, body) = text
        .split_once("\r\n\r\n")
        .ok_or_else(|| std::io::Error::other(format!("no header end in {text:?}")))?;
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    let ctype = head
        .lines()
        .find_map(|l| {
            let (k, v) = l.split_once(':')?;
            k.eq_ignore_ascii_case("content-type")
                .then(|| v.trim().to_string())
        })
        .unwrap_or_default();
    Ok((status, ctype, body.to_string()))
}

/// A running `tcpdoctor exporter`, ended by its PID when dropped.
struct Exporter {
    child: Child,
    addr: SocketAddr,
}

impl Exporter {
    fn start(extra: &[&str]) -> Exporter {
        Exporter::start_limited(extra, None)
    }

    /// [`Exporter::start`] with its open-file limit (RLIMIT_NOFILE, soft and hard) set to
    /// `nofile`, as a service manager would.
    fn start_limited(extra: &[&str], nofile: Option<u64>) -> Exporter {
        let port = free_port();
        let addr: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
        Exporter::start_at(&addr.to_string(), addr, extra, nofile)
    }

    /// Starts it with `--listen listen`, expected to answer on `addr`.
    fn start_at(listen: &str, addr: SocketAddr, extra: &[&str], nofile: Option<u64>) -> Exporter {
        let mut args = vec!["exporter", "--listen", listen];
        args.extend_from_slice(extra);
        let mut cmd = Command::new(support::bin());
        cmd.args(&args).stdout(Stdio::null()).stderr(Stdio::piped());
        if let Some(n) = nofile {
            use std::os::unix::process::CommandExt;
            // SAFETY: setrlimit is async-signal-safe; it runs in the child before exec.
            unsafe {
                cmd.pre_exec(move || {
                    let l = libc::rlimit {
                        rlim_cur: n,
                        rlim_max: n,
                    };
                    if libc::setrlimit(libc::RLIMIT_NOFILE, &l) != 0 {
                        return Err(std::io::Error::last_os_error());
                    }
                    Ok(())
                });
            }
        }
        let child = cmd.spawn().expect("spawn tcpdoctor exporter");
        let mut e = Exporter { child, addr };
        let t0 = Instant::now();
        while t0.elapsed() < Duration::from_secs(20) {
            if let Ok(Some(st)) = e.child.try_wait() {
                let mut err = String::new();
                let _ = e
                    .child
                    .stderr
                    .take()
                    .map(|mut s| s.read_to_string(&mut err));
                panic!("exporter exited at start ({st}): {err}");
            }
            if matches!(get(addr, "/metrics", None), Ok((200, _, _))) {
                return e;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        panic!("exporter did not answer on {addr} within 20 s");
    }

    fn metrics(&self) -> String {
        let (code, _, body) = get(self.addr, "/metrics", None).expect("GET /metrics");
        assert_eq!(code, 200, "{body}");
        body
    }
}

impl Drop for Exporter {
    fn drop(&mut self) {
        // SAFETY: a signal to the child we started.
        unsafe { libc::kill(self.child.id() as i32, libc::SIGTERM) };
        let t0 = Instant::now();
        while t0.elapsed() < Duration::from_secs(5) {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The value of the sample named exactly `series` (name and labels as printed), if any.
fn value(text: &str, series: &str) -> Option<f64> {
    text.lines()
        .find_map(|l| l.strip_prefix(series)?.strip_prefix(' ')?.parse().ok())
}

/// `promtool` is installed by .ci/run; outside CI a missing one skips with a reason.
fn have(tool: &str, test: &str) -> bool {
    let ok = Command::new(tool)
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !ok {
        if std::env::var("CI").is_ok_and(|v| v == "true") {
            panic!("{test}: {tool} is missing (.ci/run installs it), and CI=true forbids skipping");
        }
        eprintln!("SKIP {test}: {tool} is not installed (apt-get install prometheus)");
    }
    ok
}

fn promtool_check(text: &str) -> (bool, String) {
    let mut c = Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn promtool");
    c.stdin.take().unwrap().write_all(text.as_bytes()).unwrap();
    let out = c.wait_with_output().unwrap();
    (
        out.status.success(),
        format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ),
    )
}

#[test]
fn exporter_output_passes_promtool_check_metrics_in_both_formats() {
    if !have(
        "promtool",
        "exporter_output_passes_promtool_check_metrics_in_both_formats",
    ) {
        return;
    }
    let e = Exporter::start(&["--interval", "1s"]);
    let text = e.metrics();
    let (ok, msg) = promtool_check(&text);
    assert!(ok, "promtool check metrics:\n{msg}");
    for family in [
        "tcpdoctor_tcpext_listen_overflows_total",
        "tcpdoctor_sockets",
        "tcpdoctor_findings",
        "tcpdoctor_census_age_seconds",
        "tcpdoctor_syn_give_up_seconds",
        "tcpdoctor_rto_floor_seconds",
        "tcpdoctor_trace_available",
    ] {
        assert!(
            text.contains(&format!("# TYPE {family} ")),
            "{family} missing"
        );
    }
    assert!(text.contains("# TYPE tcpdoctor_tcpext_listen_overflows_total counter\n"));
    // OpenMetrics when asked, as Prometheus asks.
    let (code, ctype, om) = get(
        e.addr,
        "/metrics",
        Some("application/openmetrics-text;version=1.0.0,text/plain;version=0.0.4;q=0.5"),
    )
    .unwrap();
    assert_eq!(code, 200);
    assert!(ctype.starts_with("application/openmetrics-text"), "{ctype}");
    assert!(om.ends_with("# EOF\n"));
    assert!(om.contains("# TYPE tcpdoctor_tcpext_listen_overflows counter\n"));
    assert!(om.contains("# UNIT tcpdoctor_census_age_seconds seconds\n"));
    let (code, ctype, _) = get(e.addr, "/metrics", None).unwrap();
    assert_eq!(code, 200);
    assert!(ctype.starts_with("text/plain; version=0.0.4"), "{ctype}");
    let (code, _, _) = get(e.addr, "/nothing-here", None).unwrap();
    assert_eq!(code, 404);
}

/// A scrape serves the last complete census and never waits for the next: with a census an
/// hour apart, two scrapes a second apart see the same census, older.
#[test]
fn scrapes_serve_the_last_census_with_its_age() {
    let e = Exporter::start(&["--interval", "1h", "--no-trace"]);
    let a = e.metrics();
    std::thread::sleep(Duration::from_millis(1200));
    let b = e.metrics();
    let age = |t: &str| value(t, "tcpdoctor_census_age_seconds").unwrap();
    assert!(age(&b) >= age(&a) + 1.0, "{} then {}", age(&a), age(&b));
    assert_eq!(value(&a, "tcpdoctor_censuses_total"), Some(1.0));
    assert_eq!(value(&b, "tcpdoctor_censuses_total"), Some(1.0));
    // The kernel counters are read at each scrape, not with the census.
    assert!(
        value(&b, "tcpdoctor_tcp_in_segs_total").unwrap()
            > value(&a, "tcpdoctor_tcp_in_segs_total").unwrap()
    );
    assert!(b.contains("tcpdoctor_trace_available{reason=\"turned off with --no-trace\"} 0\n"));
}

#[test]
fn exporter_listens_on_loopback_unless_told_otherwise() {
    let out = Command::new(support::bin())
        .args(["exporter", "--help"])
        .output()
        .unwrap();
    let help = String::from_utf8_lossy(&out.stdout);
    assert!(help.contains("[default: 127.0.0.1:9977]"), "{help}");
    // Started without --listen: it says where it serves (or why it cannot: port taken).
    let mut c = Command::new(support::bin())
        .args(["exporter", "--no-trace", "--interval", "1h"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut err = c.stderr.take().unwrap();
    let mut line = Vec::new();
    let mut byte = [0u8; 1];
    while err.read(&mut byte).unwrap_or(0) == 1 && byte[0] != b'\n' {
        line.push(byte[0]);
    }
    // SAFETY: a signal to the child we started.
    unsafe { libc::kill(c.id() as i32, libc::SIGTERM) };
    let status = c.wait().unwrap();
    let line = String::from_utf8_lossy(&line);
    assert!(line.contains("127.0.0.1:9977"), "{line}");
    if line.contains("serving") {
        assert_eq!(status.code(), Some(0), "a stop by SIGTERM is a clean exit");
    }
}

/// The arguments of the unit's `ExecStart=` line (after the binary).
fn unit_exec_start(unit: &str) -> Vec<String> {
    let line = unit
        .lines()
        .find_map(|l| l.strip_prefix("ExecStart="))
        .expect("an ExecStart= line");
    let mut words = line.split_whitespace();
    assert_eq!(words.next(), Some("/usr/local/bin/tcpdoctor"), "{line}");
    words.map(str::to_string).collect()
}

#[test]
fn systemd_unit_starts_the_exporter_with_its_exec_start_flags() {
    let path = root_dir().join("docs/systemd/tcpdoctor-exporter.service");
    let unit = std::fs::read_to_string(&path).unwrap();
    let mut args = unit_exec_start(&unit);
    assert_eq!(args[0], "exporter");
    // The unit's flags, on a free port instead of 9977 (which may be taken on this host).
    let i = args.iter().position(|a| a == "--listen").expect("--listen");
    assert_eq!(
        args[i + 1],
        "127.0.0.1:9977",
        "the unit listens on loopback"
    );
    args.drain(i..=i + 1);
    let args: Vec<&str> = args[1..].iter().map(String::as_str).collect();
    let e = Exporter::start(&args);
    let m = e.metrics();
    assert!(value(&m, "tcpdoctor_censuses_total").is_some(), "{m}");
    drop(e);

    // systemd's own check of the unit, with the binary where ExecStart expects it and the
    // man page Documentation= names. Optional: the flags above are the part that matters.
    let Ok(out) = Command::new("systemd-analyze").arg("--version").output() else {
        eprintln!("note: systemd-analyze is not installed; `systemd-analyze verify` not run");
        return;
    };
    assert!(out.status.success());
    let dir = std::env::temp_dir().join(format!("tdoc-unit-{}", std::process::id()));
    let man = dir.join("man/man1");
    let (code, _, err) = support::run(&["man", "--dir", man.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    let copy = dir.join("tcpdoctor-exporter.service");
    std::fs::write(
        &copy,
        unit.replace("/usr/local/bin/tcpdoctor", support::bin().to_str().unwrap()),
    )
    .unwrap();
    let out = Command::new("systemd-analyze")
        .arg("verify")
        .arg(&copy)
        .env("MANPATH", dir.join("man"))
        .output()
        .unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    assert!(
        out.status.success() && out.stderr.is_empty(),
        "systemd-analyze verify: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn bad_flags_and_busy_ports_are_one_line_errors() {
    let busy = TcpListener::bind("127.0.0.1:0").unwrap();
    let busy = busy.local_addr().unwrap().to_string();
    for (args, needle) in [
        (vec!["--interval", "0s"], "--interval 0s"),
        (vec!["--interval", "2h"], "between 1s and 1h"),
        (vec!["--interval", "soon"], "soon"),
        (vec!["--top-destinations", "0"], "--top-destinations 0"),
        (vec!["--max-scrapes", "0"], "--max-scrapes 0"),
        (vec!["--listen", "localhost"], "localhost"),
        (vec!["--listen", &busy], &busy),
        (
            vec!["--listen", "127.0.0.1:0", "--netns", "tdoc-no-such-ns"],
            "tdoc-no-such-ns",
        ),
    ] {
        let mut a = vec!["exporter"];
        a.extend(args.iter());
        let (code, _, err) = support::run(&a);
        assert_eq!(code, 2, "{a:?}: {err}");
        assert!(err.contains(needle), "{a:?}: {err}");
        assert!(!err.contains("panicked"), "{a:?}: {err}");
        if needle != "soon" && needle != "localhost" {
            assert_eq!(err.trim().lines().count(), 1, "{a:?}: {err}");
        }
    }
}

/// The metric names a Grafana dashboard's queries use.
fn dashboard_metrics(path: &Path) -> Vec<String> {
    let text = std::fs::read_to_string(path).unwrap();
    let v: serde_json::Value = serde_json::from_str(&text).expect("dashboard JSON");
    let mut exprs = Vec::new();
    fn walk(v: &serde_json::Value, out: &mut Vec<String>) {
        match v {
            serde_json::Value::Object(m) => {
                for (k, x) in m {
                    if k == "expr" || k == "query" {
                        if let Some(s) = x.as_str() {
                            out.push(s.to_string());
                        }
                    }
                    walk(x, out);
                }
            }
            serde_json::Value::Array(a) => a.iter().for_each(|x| walk(x, out)),
            _ => {}
        }
    }
    walk(&v, &mut exprs);
    assert!(exprs.len() >= 4, "too few queries in {}", path.display());
    let mut names = Vec::new();
    for e in &exprs {
        let mut rest = e.as_str();
        while let Some(i) = rest.find("tcpdoctor_") {
            let tail = &rest[i..];
            let end = tail
                .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                .unwrap_or(tail.len());
            names.push(tail[..end].to_string());
            rest = &tail[end..];
        }
    }
    names.sort();
    names.dedup();
    names
}

#[test]
fn grafana_dashboard_queries_only_metrics_the_exporter_serves() {
    let dash = root_dir().join("docs/grafana/tcpdoctor.json");
    let names = dashboard_metrics(&dash);
    assert!(names.iter().any(|n| n == "tcpdoctor_findings"), "{names:?}");
    let e = Exporter::start(&["--interval", "1s"]);
    let text = e.metrics();
    let trace_on = value(&text, "tcpdoctor_trace_available{reason=\"\"}") == Some(1.0);
    if std::env::var("CI").is_ok_and(|v| v == "true") && unsafe { libc::geteuid() } == 0 {
        assert!(trace_on, "trace should run as root in CI");
    }
    for n in &names {
        // A sample or at least the family's declaration (a counter with no event yet).
        let declared = text.contains(&format!("# TYPE {n} "));
        if n.starts_with("tcpdoctor_trace_") && n != "tcpdoctor_trace_available" && !trace_on {
            eprintln!("{n}: not checked, trace unavailable here");
            continue;
        }
        assert!(
            declared,
            "the dashboard queries {n}, which the exporter does not serve"
        );
    }
}

/// Debian's prometheus server with a temporary config and storage, ended by its PID.
struct Prometheus {
    child: Child,
    addr: SocketAddr,
    dir: PathBuf,
}

impl Prometheus {
    fn start(target: SocketAddr) -> Prometheus {
        let dir = std::env::temp_dir().join(format!("tdoc-prometheus-{}", support::unique_id()));
        std::fs::create_dir_all(&dir).unwrap();
        let config = dir.join("prometheus.yml");
        std::fs::write(
            &config,
            format!(
                "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n  evaluation_interval: 1s\n\
                 scrape_configs:\n  - job_name: tcpdoctor\n    static_configs:\n      - targets: ['{target}']\n"
            ),
        )
        .unwrap();
        let port = free_port();
        let addr: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
        let child = Command::new("prometheus")
            .arg(format!("--config.file={}", config.display()))
            .arg(format!(
                "--storage.tsdb.path={}",
                dir.join("data").display()
            ))
            .arg(format!("--web.listen-address={addr}"))
            .arg("--log.level=warn")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn prometheus");
        let p = Prometheus { child, addr, dir };
        let t0 = Instant::now();
        while t0.elapsed() < Duration::from_secs(30) {
            if matches!(get(addr, "/-/ready", None), Ok((200, _, _))) {
                return p;
            }
            std::thread::sleep(Duration::from_millis(200));
        }
        panic!("prometheus did not become ready on {addr}");
    }

    /// An instant query: (labels, value) per series.
    fn query(&self, expr: &str) -> Vec<(serde_json::Value, f64)> {
        let mut q = String::new();
        for b in expr.bytes() {
            if b.is_ascii_alphanumeric() || b"-_.~".contains(&b) {
                q.push(b as char);
            } else {
                q.push_str(&format!("%{b:02X}"));
            }
        }
        let (code, _, body) =
            get(self.addr, &format!("/api/v1/query?query={q}"), None).expect("prometheus query");
        assert_eq!(code, 200, "{expr}: {body}");
        let v: serde_json::Value = serde_json::from_str(&body).unwrap();
        v["data"]["result"]
            .as_array()
            .cloned()
            .unwrap_or_default()
            .into_iter()
            .map(|r| {
                let x = r["value"][1]
                    .as_str()
                    .unwrap_or("NaN")
                    .parse()
                    .unwrap_or(f64::NAN);
                (r["metric"].clone(), x)
            })
            .collect()
    }

    /// Polls `expr` until `ok` holds for its result (at most `within`).
    fn wait_for(
        &self,
        expr: &str,
        within: Duration,
        ok: impl Fn(&[(serde_json::Value, f64)]) -> bool,
    ) -> Vec<(serde_json::Value, f64)> {
        let t0 = Instant::now();
        loop {
            let r = self.query(expr);
            if ok(&r) {
                return r;
            }
            assert!(
                t0.elapsed() < within,
                "{expr}: still {r:?} after {within:?}"
            );
            std::thread::sleep(Duration::from_millis(500));
        }
    }
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        // SAFETY: a signal to the child we started.
        unsafe { libc::kill(self.child.id() as i32, libc::SIGTERM) };
        let t0 = Instant::now();
        while t0.elapsed() < Duration::from_secs(10) {
            if let Ok(Some(_)) = self.child.try_wait() {
                break;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn sum(r: &[(serde_json::Value, f64)]) -> f64 {
    r.iter().map(|(_, v)| v).sum()
}

/// The whole path a fleet relies on: ports run out toward one destination in a namespace the
/// exporter watches; Prometheus scrapes it (OpenMetrics) and its API shows the destination's
/// TIME_WAIT gauge rise and the port_exhaustion finding become active, then clear once the
/// TIME_WAIT sockets are killed.
#[test]
fn prometheus_sees_port_exhaustion_rise_and_clear_in_a_watched_namespace() {
    let test = "prometheus_sees_port_exhaustion_rise_and_clear_in_a_watched_namespace";
    if !require_root(test) || !have("prometheus", test) || !have("promtool", test) {
        return;
    }
    let ns = Netns::new("exp");
    // 200 ephemeral ports, and no TIME_WAIT reuse (with the default tcp_tw_reuse=2 connect()
    // would take over loopback TIME_WAIT after a second, and the ports would not run out).
    ns.sysctl("net.ipv4.ip_local_port_range", "40000 40199");
    ns.sysctl("net.ipv4.tcp_tw_reuse", "0");
    let e = Exporter::start(&[
        "--interval",
        "1s",
        "--netns",
        &ns.name,
        "--top-destinations",
        "5",
    ]);
    let prom = Prometheus::start(e.addr);
    prom.wait_for("up{job=\"tcpdoctor\"}", Duration::from_secs(20), |r| {
        r.len() == 1 && r[0].1 == 1.0
    });
    let dest = "127.0.0.1:20001";
    let tw = format!("tcpdoctor_destination_time_wait_sockets{{destination=\"{dest}\"}}");
    let active = "tcpdoctor_findings{pathology=\"port_exhaustion\",source=\"observed\",severity=~\"warning|critical\"}";
    // Before: nothing toward the destination, no live port_exhaustion.
    assert!(prom.query(&tw).is_empty());
    let before = prom.wait_for(active, Duration::from_secs(10), |r| r.len() == 2);
    assert_eq!(sum(&before), 0.0);

    // 190 connections to one listener, each closed by the client: 190 ports in TIME_WAIT.
    let script = root_dir().join("bench/sockets/make_time_wait.py");
    ns.exec(&format!("python3 {} 190 1", script.display()));
    let rose = prom.wait_for(&tw, Duration::from_secs(20), |r| {
        r.len() == 1 && r[0].1 >= 190.0
    });
    assert_eq!(rose[0].0["destination"], dest);
    let on = prom.wait_for(active, Duration::from_secs(20), |r| sum(r) >= 1.0);
    // 190 of 200 ports: the policy's critical budget pressure.
    let critical = on
        .iter()
        .find(|(l, _)| l["severity"] == "critical")
        .map(|x| x.1);
    assert_eq!(critical, Some(1.0), "{on:?}");
    let headroom = prom.query(&format!(
        "tcpdoctor_destination_port_headroom{{destination=\"{dest}\"}}"
    ));
    assert_eq!(headroom.len(), 1);
    assert!(headroom[0].1 <= 10.0, "{headroom:?}");

    // Scraped directly: the namespace's counters (read through files opened there), not the
    // host's; and promtool accepts the output with real destinations and findings in it.
    let text = e.metrics();
    let (ok, msg) = promtool_check(&text);
    assert!(ok, "promtool check metrics:\n{msg}");
    let snmp = ns.exec("cat /proc/net/snmp");
    let mut lines = snmp.lines().filter(|l| l.starts_with("Tcp:"));
    let (h, v) = (lines.next().unwrap(), lines.next().unwrap());
    let i = h
        .split_whitespace()
        .position(|w| w == "ActiveOpens")
        .unwrap();
    let ns_opens: f64 = v.split_whitespace().nth(i).unwrap().parse().unwrap();
    assert_eq!(ns_opens, 190.0);
    assert_eq!(
        value(&text, "tcpdoctor_tcp_active_opens_total"),
        Some(ns_opens)
    );

    // Cleanup: kill the TIME_WAIT sockets. The gauge goes (its series ends) and the finding
    // clears to 0.
    ns.exec("ss -K -tan state time-wait >/dev/null");
    prom.wait_for(&tw, Duration::from_secs(20), |r| {
        r.iter().all(|(_, v)| *v == 0.0)
    });
    let off = prom.wait_for(active, Duration::from_secs(20), |r| {
        r.len() == 2 && sum(r) == 0.0
    });
    assert_eq!(off.len(), 2);
    // The settings findings (a range narrower than the default, tcp_tw_reuse=0) are still
    // there: they are about exposure, not about what happened.
    let settings = prom.query(
        "tcpdoctor_findings{pathology=\"port_exhaustion\",source=\"settings\",severity=\"warning\"}",
    );
    assert!(sum(&settings) >= 1.0, "{settings:?}");
}

/// Raises this test process's own open-file limit to its hard limit (the flood tests hold
/// more than 1,024 sockets).
fn raise_own_nofile() {
    let mut l = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: get/setrlimit on structs we own.
    unsafe {
        libc::getrlimit(libc::RLIMIT_NOFILE, &mut l);
        l.rlim_cur = l.rlim_max;
        libc::setrlimit(libc::RLIMIT_NOFILE, &l);
    }
}

/// Issue 24: 1,100 idle connections under the 1,024 descriptors systemd gives by default left
/// 0 of 4 scrapes answered and the census failing with "Too many open files". The exporter
/// now holds at most 256 connections, closing the oldest idle one for a newcomer.
#[test]
fn an_idle_connection_flood_under_1024_descriptors_leaves_scrapes_and_censuses_working() {
    raise_own_nofile();
    let e = Exporter::start_limited(&["--interval", "1s", "--no-trace"], Some(1024));
    let mut idle = Vec::new();
    for i in 0..1100 {
        match TcpStream::connect_timeout(&e.addr, Duration::from_secs(2)) {
            Ok(s) => idle.push(s),
            Err(err) => panic!("connect {i}: {err}"),
        }
    }
    let mut answered = 0;
    for _ in 0..4 {
        if matches!(get(e.addr, "/metrics", None), Ok((200, _, _))) {
            answered += 1;
        }
    }
    assert_eq!(
        answered, 4,
        "scrapes answered with 1,100 idle connections open"
    );
    // Two more diagnosis windows with the flood still open: no census failed.
    std::thread::sleep(Duration::from_millis(2500));
    let text = e.metrics();
    assert_eq!(
        value(&text, "tcpdoctor_census_errors_total"),
        Some(0.0),
        "{text}"
    );
    let dropped = value(&text, "tcpdoctor_http_connections_dropped_total").unwrap();
    assert!(dropped >= 1100.0 - 256.0, "dropped {dropped}");
    drop(idle);
}

/// Issue 24: a client sending its request one byte a second held its connection forever.
/// With --header-timeout 500ms it is closed about then, and so is an idle one.
#[test]
fn a_client_that_trickles_its_request_head_or_idles_is_closed_after_the_header_timeout() {
    let e = Exporter::start(&[
        "--interval",
        "1h",
        "--no-trace",
        "--header-timeout",
        "500ms",
    ]);
    let mut trickle = TcpStream::connect(e.addr).unwrap();
    let idle = TcpStream::connect(e.addr).unwrap();
    let t0 = Instant::now();
    let mut closed_after = None;
    for b in b"GET /metrics HTTP/1.1\r\nHost: x\r\n" {
        if trickle.write_all(&[*b]).is_err() {
            closed_after = Some(t0.elapsed());
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let closed_after = closed_after.unwrap_or_else(|| t0.elapsed());
    // The server closed it: a read sees the end (or a reset), not a timeout.
    trickle
        .set_read_timeout(Some(Duration::from_secs(3)))
        .unwrap();
    let mut buf = [0u8; 512];
    let r = trickle.read(&mut buf);
    assert!(
        matches!(r, Ok(_) | Err(_))
            && !matches!(&r, Err(e) if e.kind() == std::io::ErrorKind::WouldBlock || e.kind() == std::io::ErrorKind::TimedOut),
        "trickling client still open: {r:?}"
    );
    assert!(
        closed_after < Duration::from_secs(3),
        "closed after {closed_after:?}"
    );
    let mut idle = idle;
    idle.set_read_timeout(Some(Duration::from_secs(3))).unwrap();
    let r = idle.read(&mut buf);
    assert!(
        !matches!(&r, Err(e) if e.kind() == std::io::ErrorKind::WouldBlock || e.kind() == std::io::ErrorKind::TimedOut),
        "idle client still open after 3 s: {r:?}"
    );
}

/// Issue 24: 50 clients scraping in a loop took 44 of 50 normal scrapes to 503. Scrapes now
/// wait their turn (up to 2 s) instead of being refused at once.
#[test]
fn a_flood_of_scraping_clients_does_not_refuse_a_normal_scrape() {
    let e = Exporter::start(&["--interval", "1h", "--no-trace"]);
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let addr = e.addr;
    let flood: Vec<_> = (0..50)
        .map(|_| {
            let stop = std::sync::Arc::clone(&stop);
            std::thread::spawn(move || {
                let mut n = 0u32;
                // Bounded: at most 2,000 scrapes per client, or until told to stop.
                while !stop.load(std::sync::atomic::Ordering::Relaxed) && n < 2000 {
                    let _ = get(addr, "/metrics", None);
                    n += 1;
                }
                n
            })
        })
        .collect();
    std::thread::sleep(Duration::from_millis(300));
    let mut codes = Vec::new();
    for _ in 0..50 {
        codes.push(get(addr, "/metrics", None).map(|r| r.0).unwrap_or(0));
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let flooded: u32 = flood.into_iter().map(|h| h.join().unwrap()).sum();
    let refused = codes.iter().filter(|&&c| c != 200).count();
    assert_eq!(
        refused, 0,
        "{refused} of 50 normal scrapes not answered 200 ({codes:?}) beside {flooded} flood scrapes"
    );
}

/// Issue 24: started as root the exporter kept uid 0 and every capability while serving
/// unauthenticated HTTP. Now it loads its eBPF programs, then serves as nobody with none.
#[test]
fn started_as_root_it_serves_as_nobody_with_no_capabilities_after_loading_the_trace() {
    if !require_root(
        "started_as_root_it_serves_as_nobody_with_no_capabilities_after_loading_the_trace",
    ) {
        return;
    }
    let _bpf = support::bpf_exclusive();
    let e = Exporter::start(&["--interval", "1s"]);
    let status = std::fs::read_to_string(format!("/proc/{}/status", e.child.id())).unwrap();
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .map(|v| v.split_whitespace().collect::<Vec<_>>().join(" "))
            .unwrap_or_default()
    };
    assert_eq!(field("Uid:"), "65534 65534 65534 65534", "{status}");
    assert_eq!(field("CapEff:"), "0000000000000000", "{status}");
    assert_eq!(field("CapPrm:"), "0000000000000000", "{status}");
    // The trace was attached before the switch and keeps counting; the census goes on.
    std::thread::sleep(Duration::from_millis(2500));
    let text = e.metrics();
    assert!(
        text.contains("tcpdoctor_trace_available{reason=\"\"} 1\n"),
        "{text}"
    );
    assert_eq!(value(&text, "tcpdoctor_census_errors_total"), Some(0.0));
    assert!(value(&text, "tcpdoctor_censuses_total").unwrap() >= 2.0);
}

/// Issue 24: `tcpdoctor_trace_drops_total` was absent until the first drop (a dashboard
/// panel showed no data), and a findings series could read 2. Every documented family has a
/// sample from the first scrape; findings read 0 or 1.
#[test]
fn every_documented_series_exists_from_the_first_scrape_and_findings_read_0_or_1() {
    if !require_root(
        "every_documented_series_exists_from_the_first_scrape_and_findings_read_0_or_1",
    ) {
        return;
    }
    let _bpf = support::bpf_exclusive();
    let e = Exporter::start(&["--interval", "1s"]);
    let text = e.metrics();
    for family in [
        "tcpdoctor_trace_drops_total",
        "tcpdoctor_trace_events_total",
        "tcpdoctor_findings",
        "tcpdoctor_http_connections_dropped_total",
    ] {
        assert!(
            text.lines()
                .any(|l| l.starts_with(family) && !l.starts_with('#')),
            "{family} has no sample on the first scrape:\n{text}"
        );
    }
    for l in text
        .lines()
        .filter(|l| l.starts_with("tcpdoctor_findings{"))
    {
        let v: f64 = l.rsplit(' ').next().unwrap().parse().unwrap();
        assert!(v == 0.0 || v == 1.0, "{l}");
    }
}

#[test]
fn listen_takes_a_host_name_and_a_bad_one_is_a_one_line_error() {
    let port = free_port();
    let addr: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
    let named = Exporter::start_at(&format!("localhost:{port}"), addr, &["--no-trace"], None);
    drop(named);
    let out = Command::new(support::bin())
        .args(["exporter", "--listen", "no-such-host.invalid:9977"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("no-such-host.invalid:9977"), "{err}");
    assert_eq!(err.trim().lines().count(), 1, "{err}");
}

/// Issue 21, defect 4, as a fleet sees it: a listener with backlog 1 that never accepts, in a
/// namespace the exporter watches. The documented alert
/// (`tcpdoctor_findings{source="observed",severity="critical"} > 0`) fired three series
/// (accept_queue_overflow, syn_retransmit, slow_reader) for one cause; it fires one, and no
/// observed series of the consequences is active at any severity.
#[test]
fn the_exporters_alert_fires_one_series_for_a_listener_that_never_accepts() {
    let test = "the_exporters_alert_fires_one_series_for_a_listener_that_never_accepts";
    if !require_root(test) {
        return;
    }
    let ns = Netns::new("exp21");
    let addr: SocketAddr = "127.0.0.1:5320".parse().unwrap();
    let held = support::in_netns(&ns, move || {
        let l = support::listener(addr, 1, None);
        let mut a = TcpStream::connect(addr).unwrap();
        a.write_all(b"GET / HTTP/1.0\r\n\r\n").unwrap();
        a.shutdown(std::net::Shutdown::Write).unwrap();
        let mut b = TcpStream::connect(addr).unwrap();
        b.write_all(b"GET / HTTP/1.0\r\n\r\n").unwrap();
        // 60 connects whose SYNs the full queue drops; they resend on the SYN ladder.
        let syn: Vec<std::os::fd::OwnedFd> = (0..60)
            .map(|_| support::connect_nonblocking(addr))
            .collect();
        (l, a, b, syn)
    });
    let e = Exporter::start(&["--interval", "1s", "--netns", &ns.name]);
    // Two intervals after the first resends (1 s): every source has seen them.
    std::thread::sleep(Duration::from_millis(3500));
    let text = e.metrics();
    drop(held);
    let active: Vec<&str> = text
        .lines()
        .filter(|l| l.starts_with("tcpdoctor_findings{") && l.contains("source=\"observed\""))
        .filter(|l| !l.ends_with(" 0"))
        .collect();
    assert_eq!(
        active,
        [
            "tcpdoctor_findings{pathology=\"accept_queue_overflow\",severity=\"critical\",source=\"observed\"} 1"
        ],
        "{text}"
    );
}

/// Issue 22 (live): per destination, the exporter serves the round trip of its connections
/// and the shares of their busy time each limit held in the window. A loopback reader that
/// drains slowly holds its writer by the receive window: the destination's receiver_window
/// share is the largest, the three shares add up to 1, and its RTT is served.
#[test]
fn a_destination_held_by_its_readers_window_has_the_largest_receiver_window_share() {
    let test = "a_destination_held_by_its_readers_window_has_the_largest_receiver_window_share";
    if !support::require_root(test) {
        return;
    }
    use support::transfers::{reader, writer};
    let ns = support::Netns::new("exlw");
    let mut r = reader(&ns, "127.0.0.1", 5431, 16384, 4096, "0.01");
    let mut w = writer(&ns, "127.0.0.1", 5431, 0, "-");
    let e = Exporter::start(&["--interval", "1s", "--netns", &ns.name, "--no-trace"]);
    // The first census is short (its window up to 1 s); wait for one taken while writing.
    let dest = "destination=\"127.0.0.1:5431\"";
    let share = |text: &str, limit: &str| {
        value(
            text,
            &format!("tcpdoctor_destination_limited_ratio{{{dest},limit=\"{limit}\"}}"),
        )
    };
    let t0 = Instant::now();
    let text = loop {
        let text = e.metrics();
        if share(&text, "receiver_window").is_some_and(|s| s >= 0.5)
            || t0.elapsed() > Duration::from_secs(6)
        {
            break text;
        }
        std::thread::sleep(Duration::from_millis(300));
    };
    for c in [&mut w, &mut r] {
        let _ = c.kill();
        let _ = c.wait();
    }
    let rwnd = share(&text, "receiver_window").unwrap_or_else(|| panic!("{text}"));
    let sndbuf = share(&text, "send_buffer").unwrap();
    let network = share(&text, "in_flight").unwrap();
    assert!(rwnd >= 0.5 && rwnd > sndbuf && rwnd > network, "{text}");
    assert!((rwnd + sndbuf + network - 1.0).abs() < 1e-6, "{text}");
    let busy = value(
        &text,
        &format!("tcpdoctor_destination_busy_seconds{{{dest}}}"),
    )
    .unwrap();
    assert!(busy > 0.1, "{text}");
    let rtt = value(
        &text,
        &format!("tcpdoctor_destination_rtt_seconds{{{dest}}}"),
    )
    .unwrap();
    assert!(rtt > 0.0, "{text}");
    assert!(text.contains(
        "# HELP tcpdoctor_destination_limited_ratio Share of that busy time each limit held"
    ));
}
