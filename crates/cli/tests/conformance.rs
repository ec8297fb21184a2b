//! The conformance matrix: every lab scenario, the field reports' own loops, and a clean
//! baseline, seen by every command that can see a pathology, and a check that they agree.
//!
//! Lab rows run `tcpdoctor lab <scenario> --pcap FILE --json`; report rows run the report's
//! programs as published (003's `client.c` and `server.c`, built by support::seeds) or its
//! loop as described with real tools (004: nginx closing every connection, loaded by wrk,
//! through a client port range of 1,000 ports). While the traffic runs, `counters --netns NS
//! --interval`, `doctor --netns NS --quick --window`, `trace --netns NS --duration` and
//! `sockets --netns NS --watch 300ms` (the first sample at the window's worst severity above
//! info, else the last) watch the namespace where the pathology lives (the client's for most
//! rows, the server's for accept-overflow and slow-reader, a sender's for incast). After the
//! run `analyze` reads the row's capture. probe's classification is the lab's own: the
//! findings whose source is probe (the lab drives its churn with probe's engine and spike
//! classifier). The lab column is the lab's merged diagnosis (its own detectors, probe's,
//! analyze's on its capture, the counters of its namespaces).
//!
//! A command's answer is its primary finding: the first finding above info in its own ranking
//! (harm seen before a risk, causes before symptoms, then severity, then harm), or, when
//! nothing is above info, the row's pathology named at info (a harm too small for more, e.g.
//! report 003's races cost each connect ~10 ms on this kernel). Each (row, command) cell is one of
//! - judges: the command sees the pathology and what it cost: it must name it first, with the
//!   same severity as every other judging command;
//! - names: it sees the pathology but not its cost (e.g. counters count resent SYNs, not how
//!   long each connect waited): it must name it first, severity not compared;
//! - cannot see (why): recorded in the matrix, not compared.
//!
//! Disagreements that are known and not fixed yet are listed in [`KNOWN`] with what is wrong;
//! their cells are recorded as such and not asserted (a fix does not fail the test). Any other
//! disagreement fails it. Each scenario also lists causes its evidence does not show
//! (`false_causes`, each with the highest severity allowed): no command may name one above
//! it, whatever its vantage; those still named are listed in [`KNOWN_FALSE`] and recorded,
//! not asserted. The clean baseline (crr churn at a modest rate, through a veth,
//! against probe's embedded server) must be healthy in every command: exit 0, verdict healthy.
//!
//! The matrix is written as Markdown to `$TDOC_CONFORMANCE_OUT` when set
//! (`bench/conformance/run.sh` sets it to docs/conformance.md), else only printed in the test's
//! output; `TDOC_CONFORMANCE_ROWS=part,part` runs only the rows whose names contain a part;
//! `TDOC_CONFORMANCE_KEEP=DIR` keeps every command's whole output (and report 003's capture)
//! in DIR, to diagnose a disagreement from.
//! Root only; outside CI the test skips with a reason, with CI=true a skip fails.

mod support;

use std::fmt::Write as _;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use serde_json::Value;
use support::Netns;

/// The commands of the matrix, in column order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Cmd {
    Lab,
    Analyze,
    Trace,
    Counters,
    Sockets,
    Probe,
    Doctor,
}

const COLUMNS: [Cmd; 7] = [
    Cmd::Lab,
    Cmd::Analyze,
    Cmd::Trace,
    Cmd::Counters,
    Cmd::Sockets,
    Cmd::Probe,
    Cmd::Doctor,
];

impl Cmd {
    fn name(self) -> &'static str {
        match self {
            Cmd::Lab => "lab",
            Cmd::Analyze => "analyze",
            Cmd::Trace => "trace",
            Cmd::Counters => "counters",
            Cmd::Sockets => "sockets",
            Cmd::Probe => "probe",
            Cmd::Doctor => "doctor",
        }
    }
}

/// What a command can see of a scenario's pathology, by construction.
#[derive(Clone, Copy, Debug)]
enum Vantage {
    /// Sees the pathology and its cost: names it first, with the common severity.
    Judges,
    /// Sees the pathology but not its cost (the reason): names it first, or, when nothing is
    /// above info, names it at info.
    Names(&'static str),
    /// Cannot see it (the reason).
    Blind(&'static str),
}

/// What produces a row's traffic.
#[derive(Clone, Copy, Debug)]
enum Driver {
    /// `tcpdoctor lab ARGS` (`--pcap` and `--json` are added), observed inside the lab's
    /// namespace of role `observe` (`tdoc-lab-<pid>-<role>...`).
    Lab {
        args: &'static [&'static str],
        observe: &'static str,
    },
    /// Report 003's `client.c` and `server.c` as published (support::seeds), both in one
    /// namespace over its loopback, observed there; tcpdump on `lo`.
    Report003,
    /// Report 004's load test as described: one new connection per request, the server
    /// closing each (nginx, `keepalive_timeout 0`), `wrk` as the load generator, the client's
    /// `ip_local_port_range` cut to 1,000 ports, through a veth; observed in the client's
    /// namespace, tcpdump on its interface.
    Report004,
}

struct Scenario {
    name: &'static str,
    /// The field report whose loop the row runs ("000" ... "004"), if any.
    report: Option<&'static str>,
    driver: Driver,
    /// The pathology the scenario reproduces (None: nothing above info is expected).
    pathology: Option<&'static str>,
    /// The pathology is rare and a run may miss it: when the lab says it did not reproduce
    /// it, the row expects nothing (no command may name it, nor another cause).
    rare: bool,
    /// How long counters, doctor and the trace watch: must end before the traffic does.
    window_ms: u64,
    /// Vantage of lab, analyze, trace, counters, sockets, probe, doctor.
    vantage: [Vantage; 7],
    /// Causes the scenario's evidence does not show, each with the highest severity a
    /// command may give it ("info": none above info), whatever its vantage (a command blind
    /// to the pathology may name its symptoms).
    false_causes: &'static [(&'static str, &'static str)],
}

const NO_PROBE: &str = "the scenario's traffic is not probe's (its own sender and reader)";
const NOT_LAB: &str = "not a lab scenario";
const SHARE_UNSEEN: &str = "it sees each race's ~10 ms stall, not the share of the client's time the stalls cost, which decides their severity and only the lab's probe measures";
const NOT_PROBE: &str = "the traffic is the report's own programs, not probe's";

fn scenarios() -> Vec<Scenario> {
    use Vantage::*;
    vec![
        Scenario {
            name: "port-exhaustion",
            report: Some("004"),
            driver: Driver::Lab {
                args: &["port-exhaustion", "--duration", "4s"],
                observe: "cl",
            },
            pathology: Some("port_exhaustion"),
            rare: false,
            window_ms: 1500,
            vantage: [
                Judges,
                Judges,
                Judges,
                Blind("no kernel counter counts EADDRNOTAVAIL or ports held in TIME_WAIT"),
                Judges,
                Judges,
                Judges,
            ],
            false_causes: &[],
        },
        Scenario {
            name: "report 004's load test (nginx and wrk, 1,000 ports)",
            report: Some("004"),
            driver: Driver::Report004,
            // Who closes first is a race here: nginx sends its FIN right after the reply, and
            // wrk closes as soon as it has read the reply. Measured on this machine: one run
            // had the server close first in every connection (65,318 requests in 8 s through
            // 1,000 ports, no error); others had the client close first in 640 connections of
            // 5 s (128/s against a budget of 17/s), and its ports run out within seconds.
            // So the run's own ground truth decides the row (`Report004Truth`), measured by
            // tools other than tcpdoctor: wrk's connect errors and `ss`'s count of the
            // client's TIME_WAIT sockets at the end of the window.
            pathology: Some("port_exhaustion"),
            rare: true,
            window_ms: 11000,
            vantage: [
                Blind(NOT_LAB),
                Judges,
                Judges,
                Blind("no kernel counter counts EADDRNOTAVAIL or ports held in TIME_WAIT"),
                Judges,
                Blind(NOT_PROBE),
                Judges,
            ],
            false_causes: &[],
        },
        Scenario {
            name: "timewait-collision",
            report: Some("000"),
            driver: Driver::Lab {
                args: &["timewait-collision", "--connections", "20"],
                observe: "cl",
            },
            pathology: Some("time_wait_collision"),
            rare: false,
            window_ms: 500,
            vantage: [
                Judges,
                Judges,
                // Measured: in its 500 ms window the trace saw fewer than the 10 collisions
                // the policy needs to call short stalls a pattern (PATTERN_MIN), and said info
                // where the capture of the whole run (20 connects) says warning.
                Names("its 500 ms window sees a part of the run's collisions: fewer than the whole run's pattern"),
                Blind("TcpExtTCPSynRetrans counts the resent SYNs (it says syn_retransmit), not that an old ACK answered them"),
                Blind("the collision lasts milliseconds: its samples, taken at instants, do not see it"),
                Blind("the collision is answered within milliseconds here: no connect is slow enough for the spike classifier"),
                Names("its settings audit names the exposure (timestamps off); its counter window sees the resent SYNs, not their cause or cost"),
            ],
            false_causes: &[],
        },
        Scenario {
            name: "report 003's client and server as published",
            report: Some("003"),
            driver: Driver::Report003,
            pathology: Some("stale_ack_race"),
            rare: false,
            // The race fires about once a second here (21 in 20 s, 178,028 connections):
            // a 10 s window misses it with odds of about e^-10.
            window_ms: 10_000,
            vantage: [
                Blind(NOT_LAB),
                Judges,
                Judges,
                Blind("TcpExtTCPSynRetrans counts the resent SYNs (it says syn_retransmit), not that a stale ACK answered them"),
                Blind("a race lasts milliseconds: its samples, taken at instants, do not see it"),
                Blind(NOT_PROBE),
                Judges,
            ],
            false_causes: &[("time_wait_collision", "info"), ("port_exhaustion", "info")],
        },
        Scenario {
            name: "stale-ack-race",
            report: Some("003"),
            // The lab's default 10 s: about one race per 8,000 connects here, 1-3 per 10 s
            // run (4 s missed it in 2 of 6 runs).
            driver: Driver::Lab {
                args: &["stale-ack-race"],
                observe: "cl",
            },
            pathology: Some("stale_ack_race"),
            rare: true,
            window_ms: 7000,
            // Each race costs its connect ~10 ms: short stalls, judged by the share of the
            // client's time they took (severity policy: 1% or more over a pattern of 10 is a
            // warning). Only the lab's probe measures that share (its workers' time); the
            // others see the stalls, not what share of the client's time they cost. Measured,
            // 8 standalone `lab stale-ack-race` runs: 12-35 races at 1.2-3.6% of the worker's
            // time (warning) in 5, 2-8 races at 0.1-0.75% (info) in 3; analyze said info for
            // the capture of a warning run (1 of 4 matrix runs this stop).
            vantage: [
                Judges,
                Names(SHARE_UNSEEN),
                Names(SHARE_UNSEEN),
                Blind("TcpExtTCPSynRetrans counts the resent SYNs (it says syn_retransmit), not that a stale ACK answered them"),
                Blind("a race lasts milliseconds: its samples, taken at instants, do not see it"),
                Blind("probe times each connect on a busy machine: its unexplained delays measure the load, which the other commands cannot see"),
                Names(SHARE_UNSEEN),
            ],
            false_causes: &[("time_wait_collision", "info")],
        },
        Scenario {
            name: "slow-reader",
            report: Some("002"),
            driver: Driver::Lab {
                args: &["slow-reader", "--duration", "4s"],
                observe: "sv",
            },
            pathology: Some("slow_reader"),
            rare: false,
            window_ms: 1500,
            vantage: [
                Judges,
                Judges,
                Blind("in the reader's namespace it sees zero-window probes, which come only when a window stays shut for an RTO; this reader reopens its window within milliseconds (the zero-window advertisements are seen from the writer's side)"),
                Names("TcpExtTCPToZeroWindowAdv counts zero windows, not how long the writer waited"),
                Names("its samples see a full receive queue at a zero window when they catch one, not how long the writer waited"),
                Blind(NO_PROBE),
                Names("its counter window counts zero windows (TcpExtTCPToZeroWindowAdv); its two censuses see one only when they catch it; neither sees the writer's wait"),
            ],
            false_causes: &[],
        },
        Scenario {
            name: "syn-drop",
            report: None,
            driver: Driver::Lab {
                args: &["syn-drop", "--duration", "4s"],
                observe: "cl",
            },
            pathology: Some("syn_retransmit"),
            rare: false,
            window_ms: 1500,
            vantage: [
                Judges,
                Judges,
                Names("it sees each resent SYN and its drop, not always how long each connect waited in the end"),
                Names("TcpExtTCPSynRetrans counts resent SYNs, not how long each connect waited"),
                Blind("its samples catch a connect waiting on a resent SYN only by chance (SYN_SENT with retransmits)"),
                Judges,
                Names("its counter window sees the resent SYNs, not how long each connect waited"),
            ],
            false_causes: &[],
        },
        Scenario {
            name: "accept-overflow",
            report: None,
            driver: Driver::Lab {
                args: &["accept-overflow", "--duration", "4s"],
                observe: "sv",
            },
            pathology: Some("accept_queue_overflow"),
            rare: false,
            window_ms: 1500,
            vantage: [
                Judges,
                Blind("the accept queue is inside the server: a capture shows its effect (SYNs and requests resent)"),
                Blind("in the server's namespace a SYN refused for a full queue leaves no record; it sees a refused handshake's last ACK (TCP_LISTEN_OVERFLOW) only when one falls in its window (named accept_queue_overflow at info in some runs, nothing in others)"),
                Judges,
                Blind("a backlog of 1 is full only between accept() calls: its samples catch it some of the time"),
                Blind("the accept queue is inside the server: probe sees its effect (SYN retransmissions)"),
                Judges,
            ],
            // No bottleneck dropped the clients' resent requests: the server did not take
            // them. The client's ports did not run out; its churn (up to ~3,000 connections/s
            // here) may hold half its range in TIME_WAIT within the run: budget pressure, a
            // warning as sockets would judge it in the client's namespace, no more.
            false_causes: &[("port_exhaustion", "warning"), ("incast", "info")],
        },
        Scenario {
            name: "incast",
            report: Some("001"),
            driver: Driver::Lab {
                args: &["incast", "--senders", "8", "--rounds", "30"],
                observe: "s0",
            },
            pathology: Some("incast"),
            rare: false,
            window_ms: 1000,
            vantage: [
                Judges,
                Judges,
                Blind("one sender's trace cannot show that the senders' losses are synchronized"),
                Blind("one sender's counters cannot show that the senders' losses are synchronized"),
                Blind("its samples see one sender's sockets at instants: not that the senders' losses are synchronized"),
                Blind(NO_PROBE),
                Blind("one sender's counters and sockets cannot show that the senders' losses are synchronized"),
            ],
            false_causes: &[],
        },
    ]
}

/// Disagreements seen on this machine and not fixed yet: (scenario, command, what is wrong).
/// Their cells are recorded, not asserted.
const KNOWN: &[(&str, Cmd, &str)] = &[
    (
        "timewait-collision",
        Cmd::Doctor,
        "tracing only the client's namespace, it once (1 of 4 matrix runs) named a collision's resent SYN stale_ack_race: without the server's timewait socket in view it falls back on how the client's previous connection ended, which it recorded as a reset",
    ),
    (
        "stale-ack-race",
        Cmd::Trace,
        "the race fires 1-3 times in the lab's 10 s run and the lab counts it over the whole run, the trace over its 7 s window: a run whose races all fell outside the window leaves it nothing to name (1 of 5 matrix runs this stop)",
    ),
    (
        "stale-ack-race",
        Cmd::Doctor,
        "as the trace: its 7 s window over a 10 s run with 1-3 races can miss them all (1 of 5 matrix runs this stop)",
    ),
    (
        "timewait-collision",
        Cmd::Trace,
        "its 500 ms window opens mid-run: a SYN resent just after it opened, whose first SYN and stale ACK came before, read as a SYN with no answer (syn_retransmit critical, 1 of 3 matrix runs, before 45b7893: a resend within 200 ms of the trace's start whose connect() it did not see is now left unattributed; kept here until matrix runs show the disagreement gone); it cannot tell a connect begun before the trace from one whose owner record it lost (naming such resends 'before_trace' also silenced the syn-drop row's, whose owner records are missing too: reverted)",
    ),
];

/// False causes seen on this machine and not fixed yet: (scenario, command, pathology, what
/// is wrong). Recorded in the matrix, not asserted. None at present (the trace naming incast
/// on accept-overflow was fixed in fe5a364: timeouts toward a peer that never took the
/// connection are left out of incast).
const KNOWN_FALSE: &[(&str, Cmd, &str, &str)] = &[];

/// One command's answer.
#[derive(Clone, Debug)]
struct Answer {
    /// Exit status of the command (None for the probe column: its findings are the lab's).
    exit: Option<i32>,
    verdict: String,
    /// Every finding, in order, for the record: (pathology, severity, source).
    all: Vec<(String, String, String)>,
    /// The first finding above info that the settings audit made (source check): an
    /// exposure, not harm seen.
    settings_primary: Option<(String, String, String)>,
    /// The first finding above info seen in the traffic (any source but check).
    observed_primary: Option<(String, String, String)>,
    /// The summaries of the findings above info, for failure messages.
    details: Vec<String>,
}

impl Answer {
    fn of(exit: i32, v: &Value, only_source: Option<&str>) -> Answer {
        let findings: Vec<&Value> = v["findings"]
            .as_array()
            .map(|a| a.iter().collect())
            .unwrap_or_default();
        let findings: Vec<&Value> = findings
            .into_iter()
            .filter(|f| only_source.is_none_or(|s| f["source"] == s))
            .collect();
        let s = |f: &Value, k: &str| f[k].as_str().unwrap_or("").to_string();
        let primary = findings
            .iter()
            .find(|f| f["severity"] != "info")
            .map(|f| (s(f, "pathology"), s(f, "severity"), s(f, "source")));
        let verdict = match (only_source, &primary) {
            (Some(_), Some(_)) => "findings".into(),
            (Some(src), None) => format!("no {src} finding above info"),
            (None, _) => v["verdict"].as_str().unwrap_or("?").to_string(),
        };
        let first_where = |settings: bool| {
            findings
                .iter()
                .find(|f| f["severity"] != "info" && (f["source"] == "check") == settings)
                .map(|f| (s(f, "pathology"), s(f, "severity"), s(f, "source")))
        };
        Answer {
            settings_primary: first_where(true),
            observed_primary: first_where(false),
            // With their evidence (drop reasons, attributed resends, counters): a failure
            // seen once in many runs must say why from its message alone.
            details: findings
                .iter()
                .filter(|f| f["severity"] != "info")
                .map(|f| {
                    let evidence = f["evidence"].to_string();
                    let cut = evidence
                        .char_indices()
                        .nth(3000)
                        .map_or(evidence.len(), |(i, _)| i);
                    format!("{}; evidence: {}", s(f, "summary"), &evidence[..cut])
                })
                .collect(),
            exit: if only_source.is_some() {
                None
            } else {
                Some(exit)
            },
            verdict,
            all: findings
                .iter()
                .map(|f| (s(f, "pathology"), s(f, "severity"), s(f, "source")))
                .collect(),
        }
    }

    fn cell(&self) -> String {
        let one = |(p, s, src): &(String, String, String)| {
            if src.is_empty() {
                format!("{p} ({s})")
            } else {
                format!("{p} ({s}, from {src})")
            }
        };
        let mut t = match (&self.observed_primary, &self.settings_primary) {
            (Some(o), _) => one(o),
            (None, Some(_)) => match self.exit {
                Some(e) => format!("nothing above info in the traffic (exit {e})"),
                None => "nothing above info in the traffic".into(),
            },
            (None, None) => match self.exit {
                Some(e) => format!("{} (exit {e})", self.verdict),
                None => self.verdict.clone(),
            },
        };
        if let Some((p, sev, _)) = &self.settings_primary {
            t.push_str(&format!("; settings audit: {p} ({sev}, an exposure)"));
        }
        t.push_str(&self.also());
        t
    }

    /// The other findings above info seen in the traffic, after the primary: one cause
    /// should be one finding, so each is either a second cause or a symptom not yet folded.
    fn also(&self) -> String {
        let rest: Vec<String> = self
            .all
            .iter()
            .filter(|(_, sev, src)| sev != "info" && src != "check")
            .skip(1)
            .map(|(p, sev, _)| format!("{p} ({sev})"))
            .collect();
        if rest.is_empty() {
            String::new()
        } else {
            format!("; also above info: {}", rest.join(", "))
        }
    }
}

/// A command started in the background with its stdout collected.
struct Bg {
    child: Child,
    what: String,
    /// Readers of stdout and stderr, drained as the command runs: a command that prints
    /// more than a pipe holds (the trace's event lines) must not block on it.
    streams: Option<(thread::JoinHandle<String>, thread::JoinHandle<String>)>,
}

fn drain(mut r: impl Read + Send + 'static) -> thread::JoinHandle<String> {
    thread::spawn(move || {
        let mut s = String::new();
        let _ = r.read_to_string(&mut s);
        s
    })
}

impl Bg {
    /// Starts `tcpdoctor args` after `delay`, inside namespace `netns` when given.
    fn start(what: &str, args: &[&str], netns: Option<&str>, delay: Duration) -> Bg {
        let mut cmd = Command::new("sh");
        let mut line = format!("sleep {:.3}; exec", delay.as_secs_f64());
        if let Some(ns) = netns {
            line.push_str(&format!(" ip netns exec {ns}"));
        }
        line.push(' ');
        line.push_str(&support::bin().display().to_string());
        for a in args {
            line.push(' ');
            line.push_str(a);
        }
        cmd.arg("-c")
            .arg(line)
            .env("COLUMNS", support::COLUMNS)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = cmd.spawn().expect("spawn tcpdoctor");
        let streams = Some((
            drain(child.stdout.take().expect("piped stdout")),
            drain(child.stderr.take().expect("piped stderr")),
        ));
        Bg {
            child,
            what: what.to_string(),
            streams,
        }
    }

    /// Waits (bounded) and parses; panics with the streams when the output is not JSON.
    fn finish(self, limit: Duration) -> (i32, Value) {
        let (code, out, err) = self.finish_raw(limit);
        (code, support::json(&out, &err))
    }

    /// `trace --json` output (JSON Lines): its final report.
    fn finish_trace(self, limit: Duration) -> (i32, Value) {
        let (code, out, err) = self.finish_raw(limit);
        let report = out
            .lines()
            .rev()
            .map(|l| support::json(l, &err))
            .find(|v| v["type"] == "report")
            .unwrap_or_else(|| panic!("trace printed no report\n{err}"));
        (code, report)
    }

    /// `--watch --json` output (one report per line): the first report whose most severe
    /// finding is the most severe of the window (what a user watching the samples saw at
    /// worst: a range filling up is a warning on the way to critical), else the last.
    fn finish_watch(self, limit: Duration) -> (i32, Value) {
        let (code, out, err) = self.finish_raw(limit);
        let reports: Vec<Value> = out.lines().map(|l| support::json(l, &err)).collect();
        let worst = |v: &Value| {
            v["findings"].as_array().map_or(0, |a| {
                a.iter()
                    .filter_map(|f| match f["severity"].as_str() {
                        Some("warning") => Some(1),
                        Some("critical") => Some(2),
                        _ => None,
                    })
                    .max()
                    .unwrap_or(0)
            })
        };
        let top = reports.iter().map(worst).max().unwrap_or(0);
        let pick = reports
            .iter()
            .find(|v| top > 0 && worst(v) == top)
            .or(reports.last())
            .unwrap_or_else(|| panic!("sockets --watch printed nothing\n{err}"));
        (code, pick.clone())
    }

    /// Waits (bounded); (exit code, stdout, stderr). Panics when killed or on an error exit.
    fn finish_raw(mut self, limit: Duration) -> (i32, String, String) {
        let deadline = Instant::now() + limit;
        loop {
            if self.child.try_wait().expect("wait").is_some() {
                break;
            }
            if Instant::now() > deadline {
                let _ = self.child.kill();
                let _ = self.child.wait();
                panic!("{}: still running after {limit:?}", self.what);
            }
            thread::sleep(Duration::from_millis(50));
        }
        let (o, e) = self.streams.take().expect("streams taken once");
        let out = o.join().expect("stdout reader");
        let err = e.join().expect("stderr reader");
        let code = self.child.wait().unwrap().code().unwrap_or(-1);
        if code == -1 {
            panic!(
                "{}: killed before it finished (the scenario ended before its window?)\n{err}",
                self.what
            );
        }
        assert!(code != 2, "{}: error exit\n{out}\n{err}", self.what);
        keep(&self.what, "out", &out);
        keep(&self.what, "err", &err);
        (code, out, err)
    }
}

/// The directory named by `TDOC_CONFORMANCE_KEEP` (made if missing), where the commands'
/// whole outputs and report 003's capture are kept: what a disagreement is diagnosed from
/// when it does not recur on demand. `None` when unset.
fn keep_dir() -> Option<PathBuf> {
    let dir = PathBuf::from(std::env::var_os("TDOC_CONFORMANCE_KEEP")?);
    std::fs::create_dir_all(&dir).expect("TDOC_CONFORMANCE_KEEP directory");
    Some(dir)
}

/// Writes a command's whole output (every JSON line of a trace, not only its report) to
/// `DIR/<what>.<kind>` of [`keep_dir`], where `what` names the command and the row.
fn keep(what: &str, kind: &str, text: &str) {
    let Some(dir) = keep_dir() else {
        return;
    };
    let name: String = what
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .collect();
    std::fs::write(dir.join(format!("{name}.{kind}")), text).expect("write kept output");
}

/// A temporary capture file, removed on drop.
struct TempFile(PathBuf);

impl TempFile {
    fn new(tag: &str) -> TempFile {
        let p = std::env::temp_dir().join(format!("tdoc-conf-{tag}-{}.pcap", support::unique_id()));
        let _ = std::fs::remove_file(&p);
        TempFile(p)
    }
    fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// Waits until namespace `tdoc-lab-<pid>-<role>...` exists with a 10.77 address; its name.
fn wait_for_lab_netns(pid: u32, role: &str, lab: &mut Child) -> String {
    let prefix = format!("tdoc-lab-{pid}-{role}");
    let deadline = Instant::now() + Duration::from_secs(20);
    while Instant::now() < deadline {
        let list = support::sh("ip netns list");
        if let Some(ns) = list
            .lines()
            .filter_map(|l| l.split_whitespace().next())
            .find(|n| n.starts_with(&prefix))
        {
            let addrs = Command::new("ip")
                .args(["-n", ns, "-4", "-o", "addr"])
                .output()
                .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
                .unwrap_or_default();
            if addrs.contains("10.77.") {
                return ns.to_string();
            }
        }
        if let Ok(Some(st)) = lab.try_wait() {
            let mut err = String::new();
            if let Some(mut e) = lab.stderr.take() {
                let _ = e.read_to_string(&mut err);
            }
            let mut out = String::new();
            if let Some(mut o) = lab.stdout.take() {
                let _ = o.read_to_string(&mut out);
            }
            panic!("lab ended ({st}) before namespace {prefix}* appeared\n{err}\n{out}");
        }
        thread::sleep(Duration::from_millis(20));
    }
    panic!("namespace {prefix}* did not appear within 20 s");
}

/// Interval of the sockets samples.
const SOCKETS_EVERY_MS: u64 = 300;

/// The commands that watch a namespace while a row's traffic runs.
struct Observers {
    counters: Bg,
    doctor: Bg,
    sockets: Bg,
    trace: Bg,
}

/// The observers' answers: (trace, counters, sockets, doctor).
struct Observed {
    trace: Answer,
    counters: Answer,
    sockets: Answer,
    doctor: Answer,
}

impl Observers {
    /// Starts counters, doctor, the trace and sockets (`--watch`, a sample every
    /// [`SOCKETS_EVERY_MS`] within the window) inside `ns`; `row` names them in failures.
    fn start(ns: &str, window_ms: u64, row: &str) -> Observers {
        let window = format!("{window_ms}ms");
        let mut o = Observers {
            counters: Bg::start(
                "counters",
                &["counters", "--netns", ns, "--interval", &window, "--json"],
                None,
                Duration::ZERO,
            ),
            doctor: Bg::start(
                "doctor",
                &[
                    "doctor", "--netns", ns, "--quick", "--window", &window, "--json",
                ],
                None,
                Duration::ZERO,
            ),
            trace: Bg::start(
                "trace",
                &["trace", "--netns", ns, "--duration", &window, "--json"],
                None,
                Duration::ZERO,
            ),
            sockets: Bg::start(
                "sockets",
                &[
                    "sockets",
                    "--netns",
                    ns,
                    "--watch",
                    &format!("{SOCKETS_EVERY_MS}ms"),
                    "--count",
                    &(window_ms / SOCKETS_EVERY_MS).max(2).to_string(),
                    // The census is what is compared; the trace of closes (last owners of
                    // TIME_WAIT) would load BPF programs at the start of the window, CPU the
                    // scenario's own reader and writer then lack on a 2-core machine.
                    "--no-trace",
                    "--json",
                ],
                None,
                Duration::from_millis(window_ms / 4),
            ),
        };
        for b in [&mut o.counters, &mut o.doctor, &mut o.sockets, &mut o.trace] {
            b.what = format!("{} in {row}", b.what);
        }
        o
    }

    fn finish(self) -> Observed {
        let limit = Duration::from_secs(90);
        let (cc, cv) = self.counters.finish(limit);
        let (dc, dv) = self.doctor.finish(limit);
        let (tc, tv) = self.trace.finish_trace(limit);
        let (sc, sv) = self.sockets.finish_watch(limit);
        Observed {
            trace: Answer::of(tc, &tv, None),
            counters: Answer::of(cc, &cv, None),
            sockets: Answer::of(sc, &sv, None),
            doctor: Answer::of(dc, &dv, None),
        }
    }
}

/// A column the row's traffic gives nothing to (not a lab run, not probe's traffic).
fn absent(why: &str) -> Answer {
    Answer {
        exit: None,
        verdict: why.into(),
        all: Vec::new(),
        settings_primary: None,
        observed_primary: None,
        details: Vec::new(),
    }
}

fn analyze(pcap: &Path) -> Answer {
    let (code, out, err) = support::run(&["analyze", &pcap.display().to_string(), "--json"]);
    assert!(code != 2, "analyze {}: {err}", pcap.display());
    Answer::of(code, &support::json(&out, &err), None)
}

/// The answers of one row, in column order.
struct Row {
    scenario: String,
    answers: Vec<Answer>,
    observed: String,
    /// The lab's own word on whether it reproduced the pathology (lab rows), or the run's
    /// ground truth measured by other tools (report 004's row).
    reproduced: Option<bool>,
    /// Why the row's answers are recorded but not judged, when its ground truth is neither
    /// outcome (report 004's row).
    undecided: Option<String>,
}

impl Row {
    /// A row in column order from its parts.
    fn new(
        s: &Scenario,
        lab: Answer,
        analyze: Answer,
        probe: Answer,
        o: Observed,
        observed: String,
    ) -> Row {
        Row {
            scenario: s.name.to_string(),
            answers: vec![
                lab, analyze, o.trace, o.counters, o.sockets, probe, o.doctor,
            ],
            observed,
            reproduced: None,
            undecided: None,
        }
    }
}

fn run_scenario(s: &Scenario) -> Option<Row> {
    match s.driver {
        Driver::Lab { args, observe } => Some(run_lab(s, args, observe)),
        Driver::Report003 => run_report003(s),
        Driver::Report004 => run_report004(s),
    }
}

fn run_lab(s: &Scenario, lab_args: &[&str], observe: &str) -> Row {
    let pcap = TempFile::new(s.name);
    let mut args: Vec<String> = vec!["lab".into()];
    args.extend(lab_args.iter().map(|a| a.to_string()));
    args.extend([
        "--pcap".into(),
        pcap.path().display().to_string(),
        "--json".into(),
    ]);
    let mut lab = Command::new(support::bin())
        .args(&args)
        .env("COLUMNS", support::COLUMNS)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn lab");
    let pid = lab.id();
    let ns = wait_for_lab_netns(pid, observe, &mut lab);
    // The windows open on traffic, not on the namespace: the lab sets up its servers,
    // capture and trace after creating the namespace, and a window opened before the churn
    // started saw nothing (syn-drop's counters once said healthy for that).
    wait_for_traffic(&ns, &mut lab);
    let observed = Observers::start(&ns, s.window_ms, s.name).finish();
    let out = lab.wait_with_output().expect("wait lab");
    let (lo, le) = (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    );
    let lc = out.status.code().unwrap_or(-1);
    // A plain lab run exits 1 when it reproduced its pathology (or found something above
    // info), 3 when it did not reproduce it and found nothing: never 0 (`lab --help`).
    assert!(lc == 1 || lc == 3, "lab {}: exit {lc}\n{le}", s.name);
    let lv = support::json(&lo, &le);
    let _ = support::run(&["lab", "cleanup", "--pid", &pid.to_string()]);
    let mut row = Row::new(
        s,
        Answer::of(lc, &lv, None),
        analyze(pcap.path()),
        Answer::of(lc, &lv, Some("probe")),
        observed,
        format!(
            "`lab {}`; counters, doctor, trace and sockets in namespace `{}` (role {observe}) during the run, windows {} ms",
            lab_args.join(" "),
            ns.replace(&pid.to_string(), "PID"),
            s.window_ms
        ),
    );
    row.reproduced = lv["reproduced"].as_bool();
    row
}

/// TcpInSegs of namespace `ns`.
fn in_segs(ns: &str) -> u64 {
    support::mib(ns, "/proc/net/snmp", "Tcp:", "InSegs")
}

/// Waits (at most 20 s) until namespace `ns` has received at least 20 TCP segments since the
/// call: the row's traffic has started.
fn wait_for_traffic(ns: &str, lab: &mut Child) {
    let start = in_segs(ns);
    let deadline = Instant::now() + Duration::from_secs(20);
    while in_segs(ns) < start + 20 {
        if let Ok(Some(st)) = lab.try_wait() {
            panic!("lab ended ({st}) before traffic started in {ns}");
        }
        assert!(Instant::now() < deadline, "no traffic in {ns} within 20 s");
        thread::sleep(Duration::from_millis(20));
    }
}

/// tcpdump writing `pcap` from interface `iface` of `ns` (filter `filter`), started and
/// listening when this returns.
fn tcpdump(ns: &Netns, iface: &str, pcap: &Path, filter: &str) -> Child {
    let mut dump = Command::new("ip")
        .args([
            "netns", "exec", &ns.name, "tcpdump", "-i", iface, "-s", "128",
        ])
        .args(["-B", "16384", "--immediate-mode", "-U", "-n", "-w"])
        .arg(pcap)
        .arg(filter)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn tcpdump");
    use std::io::BufRead;
    let mut err = std::io::BufReader::new(dump.stderr.take().unwrap());
    let mut line = String::new();
    while err.read_line(&mut line).unwrap_or(0) > 0 && !line.contains("listening on") {
        line.clear();
    }
    assert!(line.contains("listening on"), "tcpdump did not start");
    thread::spawn(move || {
        let mut sink = String::new();
        let _ = err.read_to_string(&mut sink);
    });
    dump
}

/// Stops a tcpdump this test started (SIGINT flushes its file).
fn stop_tcpdump(mut dump: Child) {
    thread::sleep(Duration::from_millis(300));
    // SAFETY: kill(2) on the tcpdump this test started, by its PID.
    unsafe { libc::kill(dump.id() as i32, libc::SIGINT) };
    let _ = dump.wait();
}

/// Waits until something in `ns` listens on `port`.
fn wait_listening(ns: &Netns, port: u16) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !ns.exec("ss -Htln").contains(&format!(":{port} ")) {
        assert!(
            Instant::now() < deadline,
            "nothing listens on {port} in {}",
            ns.name
        );
        thread::sleep(Duration::from_millis(20));
    }
}

/// Report 003's programs as published, in one namespace, for the window and a little more.
fn run_report003(s: &Scenario) -> Option<Row> {
    let test = "conformance row: report 003";
    let seed = support::seeds::Seed::build(support::seeds::STALE_ACK_RACE, test)?;
    let ns = Netns::new("conf3");
    let pcap = TempFile::new("r003");
    let mut server = seed.spawn_on(&ns, "server", Some(0));
    wait_listening(&ns, 4242);
    let dump = tcpdump(&ns, "lo", pcap.path(), "tcp port 4242");
    let mut client = seed.spawn_on(&ns, "client", Some(1));
    // Let the loop reach its pace before the windows open.
    thread::sleep(Duration::from_millis(500));
    // The ground truth: a race resends the SYN (nothing else does here); read around the
    // windows, by cat. The race fires 0 to 108 times per 15 s window depending on the
    // machine's load (measured): a window it skipped tells nothing about the commands.
    let resends = || support::mib(&ns.name, "/proc/net/netstat", "TcpExt:", "TCPSynRetrans");
    let before = resends();
    let observed = Observers::start(&ns.name, s.window_ms, s.name).finish();
    let raced = resends() - before;
    for c in [&mut client, &mut server] {
        let _ = c.kill();
        let _ = c.wait();
    }
    stop_tcpdump(dump);
    if let Some(dir) = keep_dir() {
        std::fs::copy(pcap.path(), dir.join("report-003.pcap")).expect("keep the capture");
    }
    let mut row = Row::new(
        s,
        absent(NOT_LAB),
        analyze(pcap.path()),
        absent(NOT_PROBE),
        observed,
        format!(
            "report 003's `server.c` and `client.c` built from the report as published (crates/cli/tests/support/seeds.rs) and run in one namespace over its loopback, the server on CPU 0 and the client on CPU 1 (taskset); tcpdump on `lo`; counters, doctor, trace and sockets in that namespace, windows {} ms",
            s.window_ms
        ),
    );
    if raced == 0 {
        row.undecided = Some(
            "the race did not fire while the commands watched (TcpExtTCPSynRetrans +0 in the namespace, read by cat): the commands' answers are recorded, not judged".into(),
        );
    }
    Some(row)
}

/// Report 004's load test as described: nginx closing every connection, wrk through a veth
/// from a client namespace whose port range holds 1,000 ports.
fn run_report004(s: &Scenario) -> Option<Row> {
    let test = "conformance row: report 004";
    for tool in ["nginx", "wrk"] {
        if Command::new("sh")
            .args(["-c", &format!("command -v {tool}")])
            .output()
            .map(|o| !o.status.success())
            .unwrap_or(true)
        {
            if std::env::var("CI").is_ok_and(|v| v == "true") {
                panic!("{test}: {tool} is not installed, and CI=true forbids skipping");
            }
            eprintln!("SKIP {test}: {tool} is not installed");
            return None;
        }
    }
    let cl = Netns::new("conf4c");
    let sv = Netns::new("conf4s");
    let (ic, _) = support::veth(&cl, "10.77.252.1/24", &sv, "10.77.252.2/24");
    cl.sysctl("net.ipv4.ip_local_port_range", "40000 40999");
    let dir = std::env::temp_dir().join(format!("tdoc-conf-nginx-{}", support::unique_id()));
    std::fs::create_dir_all(&dir).expect("nginx dir");
    let d = dir.display();
    let conf = format!(
        "worker_processes 1;\npid {d}/nginx.pid;\nerror_log {d}/error.log;\ndaemon off;\n\
         events {{ worker_connections 4096; }}\n\
         http {{ access_log off; keepalive_timeout 0;\n\
         client_body_temp_path {d}; proxy_temp_path {d}; fastcgi_temp_path {d}; uwsgi_temp_path {d}; scgi_temp_path {d};\n\
         server {{ listen 10.77.252.2:3779; location / {{ return 200 \"hello world\\n\"; }} }} }}\n"
    );
    std::fs::write(dir.join("nginx.conf"), conf).expect("nginx.conf");
    let mut server = sv.spawn(&format!("exec nginx -c {d}/nginx.conf"));
    wait_listening(&sv, 3779);
    let pcap = TempFile::new("r004");
    let dump = tcpdump(&cl, &ic, pcap.path(), "tcp port 3779");
    // The report's own 10 s, and 2 s more so that the windows end before the load does.
    let secs = 12;
    let wrk_out = TempFile::new("r004-wrk");
    let mut wrk = cl.spawn(&format!(
        "exec wrk -t1 -c10 -d{secs}s http://10.77.252.2:3779/ > {}",
        wrk_out.path().display()
    ));
    // The windows cover the load from 0.5 s to 11.5 s: when the client closes first, its
    // 1,000 ports run out within them (1,000 at 128/s measured: under 8 s), and wrk stops at
    // its connections' first failed connect (measured: 10 connect errors, one per
    // connection), so a window opened after that sees no connect at all.
    thread::sleep(Duration::from_millis(500));
    let observed = Observers::start(&cl.name, s.window_ms, s.name).finish();
    let time_wait = cl_time_wait(&cl.name);
    let _ = wrk.wait();
    let wrk_text = std::fs::read_to_string(wrk_out.path()).unwrap_or_default();
    let connect_errors = wrk_connect_errors(&wrk_text);
    eprintln!(
        "{test}: wrk's connect errors {connect_errors}, the client's TIME_WAIT sockets at the window's end {time_wait}\n{wrk_text}"
    );
    stop_tcpdump(dump);
    let _ = server.kill();
    let _ = server.wait();
    let _ = std::fs::remove_dir_all(&dir);
    let mut row = Row::new(
        s,
        absent(NOT_LAB),
        analyze(pcap.path()),
        absent(NOT_PROBE),
        observed,
        format!(
            "nginx (`keepalive_timeout 0`: it closes each connection) in a server namespace, `wrk -t1 -c10 -d{secs}s` in a client namespace with `ip_local_port_range` 40000-40999, through a veth; tcpdump on the client's interface; counters, doctor, trace and sockets in the client namespace, windows {} ms from 0.5 s into the load; this run: wrk counted {connect_errors} connect error(s), `ss` {time_wait} client socket(s) in TIME_WAIT at the window's end",
            s.window_ms
        ),
    );
    match Report004Truth::of(connect_errors, time_wait) {
        Report004Truth::Exhausted => row.reproduced = Some(true),
        Report004Truth::ServerClosed => row.reproduced = Some(false),
        Report004Truth::Between => row.undecided = Some(format!(
            "the run ended between the two outcomes (no connect error, {time_wait} of 1,000 ports in TIME_WAIT): the commands' answers are recorded, not judged"
        )),
    }
    Some(row)
}

/// What report 004's run did, by tools other than tcpdoctor.
enum Report004Truth {
    /// wrk's connects failed: the client's ports ran out.
    Exhausted,
    /// No connect failed and the client held few ports in TIME_WAIT (under 100 of 1,000):
    /// the server closed first and kept the TIME_WAIT.
    ServerClosed,
    /// Neither: ports held but none ran out by the window's end.
    Between,
}

impl Report004Truth {
    fn of(connect_errors: u64, time_wait: u64) -> Report004Truth {
        if connect_errors > 0 {
            Report004Truth::Exhausted
        } else if time_wait < 100 {
            Report004Truth::ServerClosed
        } else {
            Report004Truth::Between
        }
    }
}

/// `Socket errors: connect N, ...` of wrk's report (0 when it has none).
fn wrk_connect_errors(text: &str) -> u64 {
    text.lines()
        .find_map(|l| l.trim().strip_prefix("Socket errors: connect "))
        .and_then(|rest| rest.split(',').next())
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or(0)
}

/// The client's sockets in TIME_WAIT in namespace `ns`, counted by `ss`.
fn cl_time_wait(ns: &str) -> u64 {
    Command::new("ip")
        .args(["netns", "exec", ns, "ss", "-Htan", "state", "time-wait"])
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).lines().count() as u64)
        .unwrap_or(0)
}

/// The clean baseline: crr churn at 200 connections/s through a veth against probe's embedded
/// server, captured by tcpdump on the client's interface, observed like a scenario.
fn run_clean() -> Row {
    let cl = Netns::new("confc");
    let sv = Netns::new("confs");
    let (ic, _) = support::veth(&cl, "10.77.251.1/24", &sv, "10.77.251.2/24");
    let mut server = sv.spawn(&format!(
        "exec {} probe --serve 10.77.251.2:5199",
        support::bin().display()
    ));
    wait_listening(&sv, 5199);
    let pcap = TempFile::new("clean");
    let dump = tcpdump(&cl, &ic, pcap.path(), "tcp");
    let window_ms = 1500;
    let probe = Bg::start(
        "probe",
        &[
            "probe",
            "10.77.251.2:5199",
            "--mode",
            "crr",
            "-c",
            "2",
            "--rate",
            "200",
            "-d",
            "4s",
            "--json",
        ],
        Some(&cl.name),
        Duration::ZERO,
    );
    // Let the churn start before the windows open.
    thread::sleep(Duration::from_millis(500));
    let observed = Observers::start(&cl.name, window_ms, "clean baseline").finish();
    let (pc, pv) = probe.finish(Duration::from_secs(60));
    stop_tcpdump(dump);
    let _ = server.kill();
    let _ = server.wait();
    Row {
        scenario: "clean baseline".into(),
        answers: vec![
            absent(NOT_LAB),
            analyze(pcap.path()),
            observed.trace,
            observed.counters,
            observed.sockets,
            Answer::of(pc, &pv, None),
            observed.doctor,
        ],
        reproduced: None,
        undecided: None,
        observed: format!(
            "`probe 10.77.251.2:5199 --mode crr -c 2 --rate 200 -d 4s` from a client namespace through a veth to `probe --serve` in a server namespace; tcpdump on the client's interface; counters, doctor, trace and sockets in the client namespace during the run, windows {window_ms} ms"
        ),
    }
}

/// Whether answer `a` names `pathology` as a command with vantage `v` must: first above
/// info (judges, names), or at info when nothing is above info (names). `None`: nothing above
/// info.
fn names(a: &Answer, pathology: Option<&str>, v: Vantage) -> bool {
    let _ = v;
    // What the command saw in the traffic comes first; the settings audit's exposures (a
    // short port range, timestamps off) are judged apart: they may warn beside any row
    // (report 004's 1,000-port range, the stale-ack lab's 2,000-port client range).
    let observed = a.observed_primary.as_ref().map(|p| p.0.as_str());
    match pathology {
        None => observed.is_none(),
        Some(p) if observed == Some(p) => true,
        // Nothing above info seen: the pathology named at info (a harm too small for more),
        // or the exposure that leads to it named by the settings audit.
        Some(p) if observed.is_none() => a.all.iter().any(|f| f.0 == p),
        Some(_) => false,
    }
}

/// The severity `a` gives `pathology` as seen in the traffic: its observed primary finding's
/// when that names it, else that of its first finding of the pathology not from the settings
/// audit (at info when nothing observed is above info).
fn severity_of(a: &Answer, pathology: Option<&str>) -> Option<String> {
    let p = pathology?;
    match &a.observed_primary {
        Some(f) if f.0 == p => Some(f.1.clone()),
        Some(_) => None,
        None => a
            .all
            .iter()
            .find(|f| f.0 == p && f.2 != "check")
            .or_else(|| a.all.iter().find(|f| f.0 == p))
            .map(|f| f.1.clone()),
    }
}

/// Checks one row against its scenario; returns the cells' texts and the failures.
fn judge(s: &Scenario, row: &Row) -> (Vec<String>, Vec<String>) {
    // A rare pathology the lab says it did not reproduce in this run: nothing is expected.
    let missed = s.rare && row.reproduced == Some(false);
    let scenario = Scenario {
        pathology: if missed { None } else { s.pathology },
        ..*s
    };
    let s = &scenario;
    let mut cells = Vec::new();
    let mut failures = Vec::new();
    let mut severities: Vec<(Cmd, String)> = Vec::new();
    let is_known = |cmd: &Cmd| KNOWN.iter().any(|(n, c, _)| *n == s.name && c == cmd);
    // The severity of the first judging command that agrees and is not a known disagreement:
    // a known judging cell agrees only when it names the pathology with this severity.
    let reference = COLUMNS.iter().enumerate().find_map(|(i, cmd)| {
        let a = &row.answers[i];
        match s.vantage[i] {
            Vantage::Judges if !is_known(cmd) && names(a, s.pathology, s.vantage[i]) => {
                severity_of(a, s.pathology)
            }
            _ => None,
        }
    });
    for (i, cmd) in COLUMNS.iter().enumerate() {
        let a = &row.answers[i];
        let known = KNOWN
            .iter()
            .find(|(n, c, _)| *n == s.name && c == cmd)
            .map(|k| k.2);
        let text = match s.vantage[i] {
            Vantage::Blind(why) => format!("cannot see: {why}; said {}", a.cell()),
            v => {
                let agrees = names(a, s.pathology, v);
                let sev = severity_of(a, s.pathology);
                let same_severity = match (v, &sev, &reference) {
                    (Vantage::Judges, Some(x), Some(r)) => x == r,
                    _ => true,
                };
                let mut t = a.cell();
                if let (Some(p), true) = (s.pathology, a.observed_primary.is_none() && agrees) {
                    t = match a.exit {
                        Some(e) => format!("{p} (info; verdict {}, exit {e})", a.verdict),
                        None => format!("{p} (info)"),
                    };
                    if let Some((sp, sev, _)) = &a.settings_primary {
                        t.push_str(&format!("; settings audit: {sp} ({sev}, an exposure)"));
                    }
                }
                if let Vantage::Names(why) = v {
                    t.push_str(&format!("; severity not compared: {why}"));
                }
                match (agrees, known) {
                    (true, Some(bug)) if same_severity => t.push_str(&format!(
                        " (agreed in this run; **known to disagree at times: {bug}**)"
                    )),
                    (_, Some(bug)) => t.push_str(&format!(" **known disagreement: {bug}**")),
                    (false, None) => failures.push(format!(
                        "{} / {}: expected {:?} first, got {} (all: {:?}; {:?})",
                        s.name,
                        cmd.name(),
                        s.pathology,
                        a.cell(),
                        a.all,
                        a.details
                    )),
                    (true, None) => {
                        if let (Vantage::Judges, Some(x)) = (v, sev) {
                            severities.push((*cmd, x));
                        }
                    }
                }
                t
            }
        };
        let mut text = text;
        let rank = |sev: &str| {
            ["info", "warning", "critical"]
                .iter()
                .position(|x| *x == sev)
        };
        for (p, sev, source) in &a.all {
            // A settings exposure is not a claim about the traffic (rows with no pathology
            // show it in their cell).
            if source == "check" && s.pathology.is_none() {
                continue;
            }
            let allowed = s
                .false_causes
                .iter()
                .find(|f| f.0 == p.as_str())
                .map(|f| f.1);
            if allowed.is_none_or(|up_to| rank(sev) <= rank(up_to)) {
                continue;
            }
            let known = KNOWN_FALSE
                .iter()
                .find(|(n, c, kp, _)| *n == s.name && c == cmd && kp == p);
            match known {
                Some((.., bug)) => text.push_str(&format!(
                    " **known false cause: names {p} ({sev}): {bug}**"
                )),
                None => failures.push(format!(
                    "{} / {}: names {p} ({sev}), a cause the scenario's evidence does not show (all: {:?})",
                    s.name,
                    cmd.name(),
                    a.all
                )),
            }
        }
        cells.push(text);
    }
    if let Some((first, sev)) = severities.first() {
        for (cmd, other) in &severities[1..] {
            if other != sev {
                failures.push(format!(
                    "{}: {} says {sev}, {} says {other} for {:?}",
                    s.name,
                    first.name(),
                    cmd.name(),
                    s.pathology
                ));
            }
        }
    }
    (cells, failures)
}

fn markdown(rows: &[(String, Vec<String>, String)]) -> String {
    let mut md = String::new();
    let host = support::sh("uname -n").trim().to_string();
    let kernel = support::sh("uname -r").trim().to_string();
    let cpus = thread::available_parallelism().map_or(0, |n| n.get());
    let _ = writeln!(
        md,
        "# Conformance matrix: what each command tells of each lab scenario and field report's loop\n"
    );
    let _ = writeln!(
        md,
        "Generated by `crates/cli/tests/conformance.rs` (`cargo test -p tcpdoctor --test conformance`, as root), \
         here through `bench/conformance/run.sh`, which sets `TDOC_CONFORMANCE_OUT=docs/conformance.md`; \
         without that variable the test only prints the matrix in its output. \
         Machine: {host}, Linux {kernel}, {cpus} CPUs, {}.\n",
        support::sh("date -u +%Y-%m-%dT%H:%MZ").trim()
    );
    let _ = writeln!(
        md,
        "Rows are the lab's scenarios and the field reports' own loops: report 003's client and \
         server built from the report as published, report 004's load test as described (nginx, \
         wrk), and the lab scenarios that run reports 000, 001 and 004's loops. \
         Each cell is the command's primary finding: the first above info in its own ranking (harm \
         seen before a risk, causes before symptoms, then severity, then harm), with its severity and source; when nothing is above info, \
         the row's pathology named at info, or the verdict and exit status. \"cannot see\" marks a command that cannot see the \
         scenario's pathology by construction (with why; what it said is kept). \"severity not \
         compared\" marks a command that sees the pathology but not its cost. Among the others the \
         test asserts one pathology and one severity; **known disagreement** marks a disagreement \
         that is not fixed yet. Each scenario also lists causes its evidence does not show \
         (accept-overflow: incast above info, port_exhaustion above warning, the budget pressure \
         its client's churn can build), which no command may name, whatever it can see; \
         **known false cause** marks one still named, with why. The lab column is the lab's merged diagnosis (its own detectors, probe's, \
         analyze's on its capture, the counters of its namespaces); the probe column is the lab's \
         findings whose source is probe (the lab's churn is probe's engine and spike classifier); \
         sockets is `--watch 300ms` over the window, the first sample at the window's worst severity \
         above info, else the last.\n"
    );
    let _ = write!(md, "| scenario |");
    for c in COLUMNS {
        let _ = write!(md, " {} |", c.name());
    }
    let _ = writeln!(md);
    let _ = writeln!(md, "|{}", "---|".repeat(COLUMNS.len() + 1));
    for (name, cells, _) in rows {
        let _ = write!(md, "| {name} |");
        for c in cells {
            let _ = write!(md, " {} |", c.replace('|', "/"));
        }
        let _ = writeln!(md);
    }
    let _ = writeln!(md, "\n## How each row was produced\n");
    for (name, _, how) in rows {
        let _ = writeln!(
            md,
            "- {name}: {how}; then `tcpdoctor analyze` on the capture."
        );
    }
    md
}

#[test]
fn commands_that_can_see_a_pathology_agree_on_it_and_a_clean_run_is_healthy_everywhere() {
    // Every row captures with tcpdump; report 004's row also checks nginx and wrk.
    if !support::require_root_and_tools(
        "commands_that_can_see_a_pathology_agree_on_it_and_a_clean_run_is_healthy_everywhere",
        &["tcpdump"],
    ) {
        return;
    }
    // Its rows trace (support::bpf_exclusive): no other test binary's trace meanwhile.
    let _bpf = support::bpf_exclusive();
    let mut rows = Vec::new();
    let mut failures = Vec::new();
    // TDOC_CONFORMANCE_ROWS=a,b runs only the rows whose names contain one of the parts (to
    // work on one row); a partial matrix is never written to a file.
    let only: Option<Vec<String>> = std::env::var("TDOC_CONFORMANCE_ROWS")
        .ok()
        .map(|v| v.split(',').map(str::to_string).collect());
    let wanted = |name: &str| {
        only.as_ref()
            .is_none_or(|parts| parts.iter().any(|p| name.contains(p.as_str())))
    };
    assert!(
        only.is_none() || std::env::var_os("TDOC_CONFORMANCE_OUT").is_none(),
        "TDOC_CONFORMANCE_ROWS and TDOC_CONFORMANCE_OUT together would write a partial matrix"
    );

    if wanted("clean baseline") {
        let clean = run_clean();
        let mut cells = vec!["(not a lab scenario)".to_string()];
        for (i, cmd) in COLUMNS.iter().enumerate().skip(1) {
            let a = &clean.answers[i];
            cells.push(a.cell());
            if a.exit != Some(0) || a.verdict != "healthy" {
                failures.push(format!(
                    "clean baseline / {}: expected healthy with exit 0, got {} exit {:?} ({:?}; {:?})",
                    cmd.name(),
                    a.verdict,
                    a.exit,
                    a.all,
                    a.details
                ));
            }
        }
        rows.push((clean.scenario.clone(), cells, clean.observed.clone()));
    }

    for s in scenarios().into_iter().filter(|s| wanted(s.name)) {
        let title = match (s.report, s.driver) {
            (Some(r), Driver::Lab { .. }) => format!("{} (report {r}'s loop)", s.name),
            _ => s.name.to_string(),
        };
        let Some(row) = run_scenario(&s) else {
            // Outside CI only (support::seeds and the tools' checks fail in CI): recorded.
            rows.push((
                title,
                vec!["skipped: see the test's output".into(); COLUMNS.len()],
                String::new(),
            ));
            continue;
        };
        let title = if s.rare && row.reproduced == Some(false) {
            format!("{title}: not reproduced in this run, so nothing may be named")
        } else {
            title
        };
        let (cells, f) = judge(&s, &row);
        let title = match &row.undecided {
            Some(why) => {
                eprintln!("{title}: not judged: {why}; would have failed: {f:?}");
                format!("{title}: {why}")
            }
            None => {
                failures.extend(f);
                title
            }
        };
        rows.push((title, cells, row.observed.clone()));
    }

    let md = markdown(&rows);
    // Without a destination the matrix goes to the test's output only: nothing is left behind.
    match std::env::var_os("TDOC_CONFORMANCE_OUT").map(PathBuf::from) {
        Some(out) => {
            std::fs::write(&out, &md).unwrap_or_else(|e| panic!("write {}: {e}", out.display()));
            eprintln!("conformance matrix written to {}\n{md}", out.display());
        }
        None => eprintln!("conformance matrix (TDOC_CONFORMANCE_OUT not set):\n{md}"),
    }
    assert!(
        failures.is_empty(),
        "disagreements:\n{}",
        failures.join("\n")
    );
}
