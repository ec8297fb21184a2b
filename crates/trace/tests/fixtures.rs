//! Trace recordings of real root runs (`tests/data/trace/NAME.rec.jsonl`, made by
//! `tests/data/trace/record.sh` as root: `tcpdoctor trace --record` over traffic in a
//! namespace of its own) replayed without root. Each goes through the live command's path:
//! the kernel's bytes decoded, attributed with the live system's recorded answers, the
//! outcome assembled from the recorded counts and counters' window ([`recording::replay`]),
//! printed by `render` as `tcpdoctor trace` prints it; then its findings reconciled with the
//! kernel counters' findings as doctor and the lab merge them ([`reconcile::reconcile`]).
//!
//! Nothing here needs root or touches the host: no BPF is loaded, no namespace entered, no
//! socket, sysctl or /proc file read (the recording answers every question the engine asks,
//! and the test fails when one goes unanswered).
//!
//! Two kinds of check: goldens (the text printed, `NAME.txt`; the JSON report, `NAME.report.json`;
//! the findings after reconciliation, `NAME.merged.txt`), which catch any change of the
//! output; and the judgement asserted per scenario (each SYN resend attributed, the cause
//! named, the severity), which says what must not change. `TDOC_BLESS=1 cargo test -p
//! tcpdoctor-trace --test fixtures` writes the goldens anew (after a deliberate change of the
//! output, or new recordings); the judgement assertions are not blessed.

#[path = "../../../tests/support/golden.rs"]
mod golden;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use tcpdoctor_model::{Finding, Pathology, Report, Severity};
use tcpdoctor_trace::attribute::{Cause, Line};
use tcpdoctor_trace::reconcile;
use tcpdoctor_trace::recording::{self, Replayed};
use tcpdoctor_trace::render::{self, Body};

fn dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/data/trace")
}

/// The recordings, by name.
fn fixtures() -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir())
        .expect("tests/data/trace")
        .filter_map(|e| {
            let name = e.ok()?.file_name().into_string().ok()?;
            name.strip_suffix(".rec.jsonl").map(str::to_string)
        })
        .collect();
    v.sort();
    v
}

/// A recording replayed, its report as the live command builds it, and its findings
/// reconciled with the kernel counters'.
struct Run {
    replayed: Replayed,
    report: Report<Body>,
    merged: Vec<Finding>,
}

impl Run {
    fn of(name: &str) -> Run {
        let text = std::fs::read_to_string(dir().join(format!("{name}.rec.jsonl"))).unwrap();
        let replayed = recording::replay(&text).unwrap_or_else(|e| panic!("{name}.rec.jsonl: {e}"));
        let report = render::report(replayed.outcome.clone(), replayed.lines.len() as u64, false);
        let merged = merged(&replayed);
        Run {
            replayed,
            report,
            merged,
        }
    }

    fn count(&self, name: &str) -> u64 {
        self.replayed.outcome.counts.get(name).copied().unwrap_or(0)
    }

    fn lines(&self, cause: Cause) -> Vec<&Line> {
        self.replayed
            .lines
            .iter()
            .filter(|l| l.cause == cause)
            .collect()
    }

    fn finding(&self, p: Pathology) -> &Finding {
        self.report
            .findings
            .iter()
            .find(|f| f.pathology == p)
            .unwrap_or_else(|| panic!("no {p:?} finding: {:#?}", self.report.findings))
    }

    /// The SYN and SYN-ACK resends the namespace's kernel counted in the counters' window.
    fn syn_retrans_counted(&self) -> i64 {
        self.replayed
            .outcome
            .kernel_counters
            .values()
            .map(|c| c.get("TcpExtTCPSynRetrans").copied().unwrap_or(0))
            .sum()
    }
}

/// The trace's findings and the counters' findings over the trace's counter window, merged
/// as doctor and the lab merge them: the counters' reconciled with the trace's first (SYN
/// resends the trace attributed are its findings' evidence, not a second finding), then the
/// pathologies the trace did not name added, all ranked.
fn merged(r: &Replayed) -> Vec<Finding> {
    let o = &r.outcome;
    let mut delta: BTreeMap<String, i64> = BTreeMap::new();
    for counters in o.kernel_counters.values() {
        for (k, v) in counters {
            *delta.entry(k.clone()).or_default() += v;
        }
    }
    let w = tcpdoctor_model::counters::Window {
        length: Some(Duration::from_millis(o.duration_ms)),
        rto_floor: None,
    };
    let mut traced = o.findings.clone();
    let counted = reconcile::reconcile(
        tcpdoctor_model::counters::findings(&delta, w),
        &mut traced,
        &o.summary.syn_resends,
        &delta,
        &o.missed_events,
        o.not_traced.values().sum(),
        o.syn_traced_at_edges,
        w,
    );
    let counted = reconcile::consequences(
        counted,
        &mut traced,
        &o.summary.consequence_resends,
        &delta,
        w,
    );
    tcpdoctor_model::merge::add_new(&mut traced, counted);
    tcpdoctor_model::finding::rank(&mut traced);
    traced
}

/// Compares `got` with the golden file `name.ext` (writes it with `TDOC_BLESS=1`).
fn golden(name: &str, ext: &str, got: &str) -> Result<(), String> {
    golden::compare(&dir(), name, ext, got)
}

/// Each recording's replay, printed as the live command prints it, against its goldens.
fn check_goldens(name: &str) -> Vec<String> {
    let run = Run::of(name);
    let mut text = Vec::new();
    for l in &run.replayed.lines {
        render::write_line(&mut text, l, false).unwrap();
    }
    render::text(&mut text, &run.report).unwrap();
    let json = serde_json::to_string_pretty(&run.report).unwrap() + "\n";
    let mut merged = Vec::new();
    tcpdoctor_report::findings::write(&mut merged, &run.merged).unwrap();
    [
        golden(name, "txt", &String::from_utf8(text).unwrap()),
        golden(name, "report.json", &json),
        golden(name, "merged.txt", &String::from_utf8(merged).unwrap()),
    ]
    .into_iter()
    .filter_map(Result::err)
    .collect()
}

#[test]
fn recorded_traces_replay_as_their_goldens() {
    let names = fixtures();
    assert!(names.len() >= 4, "{names:?}");
    let errors: Vec<String> = names.iter().flat_map(|n| check_goldens(n)).collect();
    assert!(errors.is_empty(), "{}", errors.join("\n"));
}

#[test]
fn each_replay_follows_the_recorded_sessions_path() {
    for name in fixtures() {
        let run = Run::of(&name);
        let r = &run.replayed;
        // Every question the engine asked has its recorded answer, and every recorded answer
        // was asked for: the replay took the live session's path.
        assert!(r.unanswered.is_empty(), "{name}: {:?}", r.unanswered);
        assert_eq!(r.unused_answers, 0, "{name}");
        // Every record the kernel sent is in the recording, and decodes.
        assert_eq!(run.count("lost"), 0, "{name}");
        assert_eq!(r.records, run.count("records"), "{name}");
        assert_eq!(r.outcome.summary.undecoded, 0, "{name}");
        // The recording is of the kernel it names, on the namespace it traced.
        assert!(!r.header.kernel_release.is_empty(), "{name}");
        let ns = &r.header.netns[0];
        assert_eq!(ns.name.as_deref(), Some(&*format!("tdoc-rec-{name}")));
        // What the kernel measured is what the live command reported while it recorded
        // (NAME.live.json: its --json output); the attribution may change since, not these.
        let live = std::fs::read_to_string(dir().join(format!("{name}.live.json"))).unwrap();
        let live: serde_json::Value = serde_json::from_str(live.lines().last().unwrap()).unwrap();
        let replayed = serde_json::to_value(&run.report).unwrap();
        for field in [
            "duration_ms",
            "netns",
            "counts",
            "lost_events",
            "missed_events",
            "not_traced",
            "drops_by_reason",
            "benign_drops_by_reason",
            "kernel_counters",
            "unavailable",
        ] {
            assert_eq!(replayed[field], live[field], "{name}: {field}");
        }
    }
}

/// A listener with a backlog of 1 accepting every 300 ms, four workers connecting: each SYN
/// resend is put down to the full accept queue, and so is every data or FIN resend on a
/// connection the listener never took (its handshake ACK refused, its segments then dropped
/// for want of a socket): one finding for one cause, the counters' retransmissions its
/// evidence rather than a "loss" of their own. Before, the trace ranked a retransmission
/// timeout (warning) beside the overflow and the counters a retransmission warning.
#[test]
fn resends_into_connections_a_full_accept_queue_never_took_are_the_overflows() {
    // accept-overflow-late: the trace attached 1 s into the load, so resends come before its
    // first sign of the overflow and are folded at the end (before: a timeout warning stayed).
    for name in ["accept-overflow", "accept-overflow-late"] {
        one_finding_for_the_overflow(name);
    }
}

fn one_finding_for_the_overflow(name: &str) {
    let run = Run::of(name);
    let resent = run.count("retransmit_syn");
    assert!(resent > 0, "{name}");
    // Every SYN resend (and SYN-ACK resend) is the full queue's, as many as the kernel counted.
    let syn = &run.replayed.outcome.summary.syn_resends;
    assert_eq!(
        syn.keys().collect::<Vec<_>>(),
        [&Pathology::AcceptQueueOverflow],
        "{name}"
    );
    assert_eq!(
        run.syn_retrans_counted(),
        syn[&Pathology::AcceptQueueOverflow] as i64,
        "{name}"
    );
    // The resends after the handshake: every one on a connection the listener never took,
    // put on the overflow at once or, before the trace's first sign of it, at the end.
    let folded = run.replayed.outcome.summary.consequence_resends[&Pathology::AcceptQueueOverflow];
    let after: Vec<_> = run
        .replayed
        .lines
        .iter()
        .filter(|l| matches!(l.cause, Cause::Timeout | Cause::TailLossProbe))
        .collect();
    assert!(!after.is_empty(), "{name}");
    assert_eq!(after.len() as u64, folded.timeouts + folded.other, "{name}");
    let at_once = after
        .iter()
        .filter(|l| l.pathology == Some(Pathology::AcceptQueueOverflow))
        .count();
    assert!(at_once > 0, "{name}");
    for l in after
        .iter()
        .filter(|l| l.pathology == Some(Pathology::AcceptQueueOverflow))
    {
        assert!(
            l.evidence.contains("never took this connection"),
            "{}",
            l.evidence
        );
    }
    let names = |fs: &[Finding]| fs.iter().map(|f| f.pathology).collect::<Vec<_>>();
    assert_eq!(
        names(&run.report.findings),
        [Pathology::AcceptQueueOverflow],
        "{name}: {:#?}",
        run.report.findings
    );
    // Merged with the counters: the only finding above info (a counter's context, such as
    // timeouts a little past what the trace explained in its narrower window, stays info).
    let serious: Vec<Finding> = run
        .merged
        .iter()
        .filter(|f| f.severity > Severity::Info)
        .cloned()
        .collect();
    assert_eq!(
        names(&serious),
        [Pathology::AcceptQueueOverflow],
        "{name}: {:#?}",
        run.merged
    );
    assert_eq!(run.merged[0].severity, Severity::Critical, "{name}");
}

#[test]
fn every_syn_resend_of_a_dropped_syn_is_attributed_to_the_drop() {
    let run = Run::of("syn-drop");
    let resent = run.count("retransmit_syn");
    assert!(resent > 0);
    // Each resend the kernel counted (in the trace and in TcpExtTCPSynRetrans) is a line
    // naming the firewall's drop and the rung of the SYN ladder.
    let dropped = run.lines(Cause::SynDropped);
    assert_eq!(dropped.len() as u64, resent);
    assert_eq!(run.syn_retrans_counted(), resent as i64);
    assert!(run.replayed.outcome.not_traced.is_empty());
    for l in &dropped {
        assert!(l.evidence.contains("NETFILTER_DROP"), "{}", l.evidence);
        // A SYN dropped again is resent on the next rung: 1 s apart while the ladder is
        // linear (tcp_syn_linear_timeouts=4 on the recorded kernel).
        assert!(
            (1..=4).any(|n| l.evidence.contains(&format!(
                "rung {n} of this host's SYN ladder ({n} s after the first SYN)"
            ))),
            "{}",
            l.evidence
        );
        assert_eq!(l.pathology, Some(Pathology::SynRetransmit));
    }
    assert!(run.lines(Cause::SynLost).is_empty());
    // Every SYN the rule dropped (the first and the resent) was traced with its reason.
    let drops = run.replayed.outcome.drops_by_reason.get("NETFILTER_DROP");
    assert_eq!(drops.copied(), Some(run.lines(Cause::Drop).len() as u64));
    // One finding, critical: connects stalled a full second on the ladder's first rung.
    let f = run.finding(Pathology::SynRetransmit);
    assert_eq!(f.severity, Severity::Critical);
    assert!(f.impact.worst_stall_us >= Some(1_000_000), "{:?}", f.impact);
    assert_eq!(
        run.replayed.outcome.summary.syn_resends,
        BTreeMap::from([(Pathology::SynRetransmit, resent)])
    );
    // Reconciled with the counters: still one finding for the resends, the counter's
    // evidence in it (no second "SYN retransmitted" of the counters beside it).
    let syn: Vec<_> = run
        .merged
        .iter()
        .filter(|f| f.pathology == Pathology::SynRetransmit)
        .collect();
    assert_eq!(syn.len(), 1, "{:#?}", run.merged);
    assert!(
        syn[0]
            .evidence
            .contains(&counter("TcpExtTCPSynRetrans", resent as i64)),
        "{:#?}",
        syn[0].evidence
    );
    assert_eq!(syn[0].severity, Severity::Critical);
}

#[test]
fn each_eaddrnotavail_is_port_exhaustion_with_the_ports_it_had() {
    let run = Run::of("port-exhaustion");
    let failed = run.count("connect_eaddrnotavail");
    assert!(failed > 0);
    assert_eq!(run.lines(Cause::NoLocalPort).len() as u64, failed);
    let per = &run.replayed.outcome.summary.no_local_port;
    assert_eq!(per.len(), 1, "{per:#?}");
    assert_eq!(per[0].failures, failed);
    assert_eq!(per[0].destination, "127.0.0.1:5202".parse().unwrap());
    // The 10 ports of the range, all held toward the server in TIME_WAIT at the first failure.
    let budget = per[0].budget.as_ref().unwrap();
    assert_eq!((budget.in_use, budget.time_wait), (10, 10));
    assert_eq!(budget.range.to_string(), "40000-40009");
    let first = &run.report.findings[0];
    assert_eq!(first.pathology, Pathology::PortExhaustion);
    assert_eq!(first.severity, Severity::Critical);
    assert_eq!(run.merged[0].pathology, Pathology::PortExhaustion);
}

#[test]
fn a_reader_that_does_not_read_is_named_and_its_writer_is_not_blamed() {
    let run = Run::of("slow-reader");
    let probed = run.lines(Cause::NotReading);
    assert_eq!(probed.len() as u64, run.count("window_probes"));
    for l in &probed {
        assert_eq!(l.process.as_ref().unwrap().comm, "tdoc-reader");
    }
    let closed = run.lines(Cause::ZeroWindow);
    assert!(!closed.is_empty());
    assert_eq!(closed[0].process.as_ref().unwrap().comm, "tdoc-writer");
    let f = run.finding(Pathology::SlowReader);
    assert!(
        f.summary.contains("not reading: tdoc-reader"),
        "{}",
        f.summary
    );
    // The window stayed closed for seconds: a stall judged critical.
    assert_eq!(f.severity, Severity::Critical);
    assert!(f.impact.worst_stall_us >= Some(1_000_000), "{:?}", f.impact);
    // Blamed: the reader; the writer only waits (named as waiting, never as a culprit).
    let blamed = f
        .evidence
        .iter()
        .find_map(|e| match e {
            tcpdoctor_model::Evidence::Examples { what, items }
                if what.starts_with("processes") =>
            {
                Some(items.join(", "))
            }
            _ => None,
        })
        .unwrap();
    assert!(
        blamed.contains("tdoc-reader") && !blamed.contains("tdoc-writer"),
        "{blamed}"
    );
}

#[test]
fn syn_resends_into_the_peers_time_wait_are_a_collision_not_a_race_nor_loss() {
    let run = Run::of("timewait-collision");
    let resent = run.count("retransmit_syn");
    assert!(resent > 0);
    assert_eq!(run.syn_retrans_counted(), resent as i64);
    // Each resend attributed to the collision (none to loss, none to a stale-ACK race), and
    // the server's view of each: its TIME_WAIT socket refused the SYN.
    assert_eq!(
        run.replayed.outcome.summary.syn_resends,
        BTreeMap::from([(Pathology::TimeWaitCollision, resent)])
    );
    assert!(run.lines(Cause::StaleAckRace).is_empty());
    assert!(run.lines(Cause::SynLost).is_empty());
    assert_eq!(
        run.lines(Cause::TimeWaitRefusedSyn).len() as u64,
        run.count("time_wait_acks")
    );
    let f = run.finding(Pathology::TimeWaitCollision);
    // Its remedy's setting, as the traced namespace had it.
    assert!(
        f.evidence.iter().any(|e| matches!(e,
            tcpdoctor_model::Evidence::Setting { name, value }
                if name == "net.ipv4.tcp_timestamps" && value.starts_with("0 in "))),
        "{:?}",
        f.evidence
    );
    // This kernel resent each SYN ms after the reset, not after the 1 s timer: info.
    assert!(f.impact.worst_stall_us < Some(100_000), "{:?}", f.impact);
    assert_eq!(f.severity, Severity::Info);
    // Reconciled: the counter's SYN resends are the collision's evidence, no finding of
    // their own.
    assert!(
        run.merged
            .iter()
            .all(|f| f.pathology != Pathology::SynRetransmit),
        "{:#?}",
        run.merged
    );
    let f = run
        .merged
        .iter()
        .find(|f| f.pathology == Pathology::TimeWaitCollision)
        .unwrap();
    assert!(
        f.evidence
            .contains(&counter("TcpExtTCPSynRetrans", resent as i64)),
        "{:#?}",
        f.evidence
    );
}

/// A kernel counter's evidence, as the counters' findings give it.
fn counter(name: &str, delta: i64) -> tcpdoctor_model::Evidence {
    tcpdoctor_model::Evidence::Counter {
        name: name.into(),
        delta,
    }
}
