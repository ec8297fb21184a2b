use super::*;
use crate::classify::{classify, Signatures};
use crate::record::{Outcome, Record};
use crate::stats::summarize;
use crate::Config;
use std::collections::BTreeMap;
use std::time::Duration;
use tcpdoctor_host::sysctl::TcpSettings;
use tcpdoctor_model::{PortRange, Severity, SynLadder};

fn settings() -> TcpSettings {
    TcpSettings {
        ip_local_port_range: PortRange::new(40000, 40199).unwrap(),
        tcp_tw_reuse: Some(0),
        tcp_timestamps: Some(1),
        tcp_rfc1337: Some(0),
        tcp_syn_retries: 6,
        tcp_syn_linear_timeouts: Some(4),
        tcp_synack_retries: Some(5),
        tcp_rto_min_us: None,
        tcp_fin_timeout: Some(60),
        tcp_max_tw_buckets: Some(262144),
        tcp_max_syn_backlog: Some(4096),
        somaxconn: Some(4096),
    }
}

pub(crate) fn rec(i: u64, connect_ms: u64, outcome: Outcome) -> Record {
    let s = i * 1_000_000;
    Record {
        worker: 0,
        local_port: if outcome == Outcome::Ok {
            40000 + i as u16
        } else {
            0
        },
        status: 0,
        reused: false,
        received_bytes: 0,
        outcome,
        scheduled_ns: s,
        start_ns: s,
        connected_ns: (outcome == Outcome::Ok).then_some(s + connect_ms * 1_000_000 + 30_000),
        tls_done_ns: None,
        first_byte_ns: (outcome == Outcome::Ok).then_some(s + connect_ms * 1_000_000 + 60_000),
        end_ns: s + connect_ms * 1_000_000 + 80_000,
        kernel_rtt_us: 0,
        handshake_rtt_us: 0,
        cpu_wait_us: None,
    }
}

fn findings_of(records: &[Record], delta: &Delta) -> Vec<Finding> {
    findings_with(&Config::default(), records, delta, None)
}

fn findings_with(
    cfg: &Config,
    records: &[Record],
    delta: &Delta,
    ports_toward_target: Option<crate::stats::PortsInUse>,
) -> Vec<Finding> {
    findings_in(cfg, records, delta, ports_toward_target, None)
}

/// As [`findings_with`], with the host's CPU wait during the run (PSI) given.
fn findings_in(
    cfg: &Config,
    records: &[Record],
    delta: &Delta,
    ports_toward_target: Option<crate::stats::PortsInUse>,
    cpu_wait_us: Option<u64>,
) -> Vec<Finding> {
    let waits = crate::split::CpuWaits::default();
    findings_full(
        cfg,
        records,
        delta,
        ports_toward_target,
        cpu_wait_us,
        &waits,
    )
}

/// As [`findings_in`], with the CPU waits of the workers and the embedded server given
/// (the time split names the server or the path only under their bound).
pub(crate) fn findings_full(
    cfg: &Config,
    records: &[Record],
    delta: &Delta,
    ports_toward_target: Option<crate::stats::PortsInUse>,
    cpu_wait_us: Option<u64>,
    waits: &crate::split::CpuWaits,
) -> Vec<Finding> {
    let at = Probed {
        target_here: false,
        ports_toward_target,
        cpu_wait_us,
    };
    findings_at(cfg, records, delta, at, waits)
}

/// Where the probed target was and what the run saw around it.
struct Probed {
    target_here: bool,
    ports_toward_target: Option<crate::stats::PortsInUse>,
    cpu_wait_us: Option<u64>,
}

fn findings_at(
    cfg: &Config,
    records: &[Record],
    delta: &Delta,
    at: Probed,
    waits: &crate::split::CpuWaits,
) -> Vec<Finding> {
    let Probed {
        target_here,
        ports_toward_target,
        cpu_wait_us,
    } = at;
    let st = settings();
    let sig = Signatures {
        ladder: SynLadder::new(6, Some(4), Duration::from_secs(1)),
        synack_ladder: SynLadder::new(5, None, Duration::from_secs(1)),
        rto_min: Duration::from_millis(200),
        delack_min: Duration::from_millis(40),
        nodelay: false,
    };
    let threshold = Duration::from_millis(5);
    let mut spikes = classify(records, threshold, &sig, delta);
    let base =
        crate::split::Baseline::of(records, &spikes, crate::classify::delack_seen(&sig, delta));
    crate::split::assign(records, &mut spikes, &base, waits);
    let ctx = Context {
        cfg,
        target: "10.77.1.2:5001".parse().unwrap(),
        embedded_server: None,
        elapsed: cfg.duration,
        settings: &st,
        route_rto_min: None,
        threshold,
        ports_toward_target,
        cpu_wait_us,
        baseline: &base,
        cpu_waits: waits,
        target_here,
    };
    let s = summarize(&ctx, records, &spikes, delta, &sig);
    build(&ctx, &s, &spikes, delta)
}

#[test]
fn eaddrnotavail_is_port_exhaustion_with_the_arithmetic() {
    let enoaddr = Outcome::Error {
        kind: ErrorKind::AddrNotAvail,
        phase: Phase::Connect,
    };
    let mut rs: Vec<Record> = (0..200).map(|i| rec(i, 0, Outcome::Ok)).collect();
    rs.extend((200..210).map(|i| rec(i, 0, enoaddr)));
    let f = findings_of(&rs, &Delta::default());
    assert_eq!(f.len(), 1);
    assert_eq!(f[0].pathology, Pathology::PortExhaustion);
    assert_eq!(f[0].severity, Severity::Critical);
    assert!(f[0]
        .summary
        .contains("10 connects failed with EADDRNOTAVAIL after 200"));
    assert!(f[0].evidence.iter().any(|e| matches!(e,
        Evidence::Arithmetic { result, .. } if (*result - 200.0 / 60.0).abs() < 1e-9)));
    assert!(f[0].remedies[0].action.starts_with("Reuse connections"));
}

#[test]
fn an_unexplained_delay_shows_how_contended_the_hosts_cpus_were() {
    // 5 connects of 50 ms among 100 of 0 ms: no SYN ladder, no counter.
    let rs: Vec<Record> = (0..105)
        .map(|i| rec(i, if i % 21 == 20 { 50 } else { 0 }, Outcome::Ok))
        .collect();
    let cfg = Config::default();
    let run_us = cfg.duration.as_micros() as u64;
    let f = findings_in(&cfg, &rs, &Delta::default(), None, Some(run_us / 4));
    let u = f
        .iter()
        .find(|f| f.pathology == Pathology::UnexplainedDelay)
        .unwrap_or_else(|| panic!("{f:#?}"));
    let pressure = u.evidence.iter().find_map(|e| match e {
        Evidence::Arithmetic { formula, result } if formula.contains("/proc/pressure/cpu") => {
            Some(*result)
        }
        _ => None,
    });
    assert_eq!(pressure, Some(25.0), "{u:#?}");
    // Context, not a cause: without PSI the finding is the same, minus the line.
    let without = findings_in(&cfg, &rs, &Delta::default(), None, None);
    let w = without
        .iter()
        .find(|f| f.pathology == Pathology::UnexplainedDelay)
        .expect("same finding");
    assert_eq!(w.severity, u.severity);
    assert_eq!(w.evidence.len() + 1, u.evidence.len());
}

#[test]
fn syn_spikes_make_one_finding_with_counter_evidence() {
    let rs = vec![
        rec(0, 0, Outcome::Ok),
        rec(1, 1_000, Outcome::Ok),
        rec(3000, 2_000, Outcome::Ok),
    ];
    let delta = Delta {
        changed: BTreeMap::from([("TcpExtTCPSynRetrans".to_string(), 3)]),
    };
    let f = findings_of(&rs, &delta);
    assert_eq!(f.len(), 1, "{f:?}");
    assert_eq!(f[0].pathology, Pathology::SynRetransmit);
    assert!(f[0]
        .summary
        .contains("1 x SYN retransmission #1, 1 x SYN retransmission #2"));
    assert!(f[0].evidence.contains(&Evidence::Counter {
        name: "TcpExtTCPSynRetrans".into(),
        delta: 3
    }));
}

/// A request that was still waiting when the run ended: connected or not, with the
/// bytes of reply it had received.
fn cut(i: u64, connected: bool, wait_ms: u64, received: u32) -> Record {
    let s = i * 1_000_000;
    let c = s + 100_000;
    Record {
        worker: i as u16,
        local_port: 40000 + i as u16,
        status: 0,
        reused: false,
        received_bytes: received,
        outcome: Outcome::Cut {
            phase: if connected {
                Phase::Reply
            } else {
                Phase::Connect
            },
        },
        scheduled_ns: s,
        start_ns: s,
        connected_ns: connected.then_some(c),
        tls_done_ns: None,
        first_byte_ns: (received > 0).then_some(c + 1_000_000),
        end_ns: if connected { c } else { s } + wait_ms * 1_000_000,
        kernel_rtt_us: 0,
        handshake_rtt_us: 0,
        cpu_wait_us: None,
    }
}

fn short_run() -> Config {
    Config {
        duration: Duration::from_secs(2),
        ..Config::default()
    }
}

#[test]
fn a_run_whose_every_request_was_cut_names_what_it_waited_for() {
    // Accepted, never replied.
    let f = findings_with(
        &short_run(),
        &[cut(0, true, 2_000, 0), cut(1, true, 2_000, 0)],
        &Delta::default(),
        None,
    );
    assert_eq!(f.len(), 1, "{f:?}");
    assert_eq!(f[0].pathology, Pathology::NoReply);
    assert!(
        f[0].summary.contains("accepted, never replied"),
        "{}",
        f[0].summary
    );
    assert!(f[0].summary.contains("2.00 s"), "{}", f[0].summary);
    assert!(f[0].severity >= Severity::Warning);
    // No SYN-ACK (a blackholed port): the SYNs of the ladder that went unanswered.
    let f = findings_with(
        &short_run(),
        &[cut(0, false, 2_000, 0), cut(1, false, 2_000, 0)],
        &Delta::default(),
        None,
    );
    assert_eq!(f.len(), 1, "{f:?}");
    assert_eq!(f[0].pathology, Pathology::UnansweredSyn);
    assert!(
        f[0].summary.contains("no SYN-ACK in 2.00 s"),
        "{}",
        f[0].summary
    );
    assert!(
        f[0].summary
            .contains("at 0, 1 s on this host's SYN ladder, perhaps again at 2 s"),
        "{}",
        f[0].summary
    );
    assert_eq!(f[0].severity, Severity::Critical);
    // Dribbling: 2 of 64 bytes in 2 s.
    let f = findings_with(
        &short_run(),
        &[cut(0, true, 2_000, 2)],
        &Delta::default(),
        None,
    );
    assert_eq!(f[0].pathology, Pathology::NoReply);
    assert!(
        f[0].summary.contains("the reply dribbled"),
        "{}",
        f[0].summary
    );
    assert!(
        f[0].summary
            .contains("at most 2 of 64 bytes in 2.00 s (~1.0 bytes/s)"),
        "{}",
        f[0].summary
    );
}

#[test]
fn requests_in_flight_briefly_at_the_end_are_not_unanswered() {
    let mut rs: Vec<Record> = (0..100).map(|i| rec(i, 0, Outcome::Ok)).collect();
    rs.push(cut(100, true, 0, 0));
    rs.push(cut(101, false, 0, 0));
    assert!(findings_with(&short_run(), &rs, &Delta::default(), None).is_empty());
    // One stuck for 2 s while the others took under a millisecond: a stall.
    rs.push(cut(102, true, 2_000, 0));
    let f = findings_with(&short_run(), &rs, &Delta::default(), None);
    assert_eq!(f.len(), 1, "{f:?}");
    assert_eq!(f[0].pathology, Pathology::NoReply);
    assert_eq!(f[0].impact.affected, 1);
    assert_eq!(f[0].impact.failed, 0);
}

#[test]
fn a_reply_timeout_is_no_reply_with_the_time_it_fired() {
    let cfg = Config {
        reply_timeout: Duration::from_secs(1),
        ..Config::default()
    };
    let timed_out = |i: u64| {
        let mut r = cut(i, true, 1_000, 0);
        r.outcome = Outcome::Error {
            kind: ErrorKind::ReplyTimeout,
            phase: Phase::Reply,
        };
        r
    };
    let f = findings_with(&cfg, &[timed_out(0), timed_out(1)], &Delta::default(), None);
    assert_eq!(f.len(), 1, "{f:?}");
    assert_eq!(f[0].pathology, Pathology::NoReply);
    let sum = &f[0].summary;
    assert!(sum.contains("accepted, never replied"), "{sum}");
    assert!(sum.contains("cut by --timeout 1.00 s"), "{sum}");
    assert!(
        sum.contains("the first timeout fired 1.00 s into the run"),
        "{sum}"
    );
    assert!(!sum.contains("refused"), "{sum}");
    assert_eq!(f[0].impact.failed, 2);
    assert_eq!(f[0].severity, Severity::Critical);
}

#[test]
fn eaddrnotavail_without_used_ports_is_not_port_exhaustion() {
    let enoaddr = Outcome::Error {
        kind: ErrorKind::AddrNotAvail,
        phase: Phase::Connect,
    };
    let rs: Vec<Record> = (0..20).map(|i| rec(i, 0, enoaddr)).collect();
    let none = crate::stats::PortsInUse {
        time_wait: 0,
        total: 0,
    };
    let f = findings_with(&Config::default(), &rs, &Delta::default(), Some(none));
    assert_eq!(f.len(), 1, "{f:?}");
    assert_eq!(f[0].pathology, Pathology::ConnectFailure);
    assert!(
        f[0].summary.contains("not port exhaustion"),
        "{}",
        f[0].summary
    );
    // The same failures with the range's ports held by TIME_WAIT toward the target.
    let full = crate::stats::PortsInUse {
        time_wait: 190,
        total: 200,
    };
    let f = findings_with(&Config::default(), &rs, &Delta::default(), Some(full));
    assert_eq!(f[0].pathology, Pathology::PortExhaustion);
}

#[test]
fn unexpected_http_statuses_are_failures() {
    let mut rs: Vec<Record> = (0..10).map(|i| rec(i, 0, Outcome::Ok)).collect();
    for r in rs.iter_mut() {
        r.status = 200;
    }
    for r in rs.iter_mut().take(4) {
        r.status = 404;
        r.outcome = Outcome::Error {
            kind: ErrorKind::HttpStatus { status: 404 },
            phase: Phase::Reply,
        };
    }
    let f = findings_of(&rs, &Delta::default());
    assert_eq!(f.len(), 1, "{f:?}");
    assert_eq!(f[0].pathology, Pathology::HttpError);
    assert!(
        f[0].summary.contains("4 of 10 HTTP responses"),
        "{}",
        f[0].summary
    );
    assert!(f[0].summary.contains("4 x HTTP 404"), "{}", f[0].summary);
    assert_eq!(f[0].severity, Severity::Critical);
}

#[test]
fn retransmission_timeouts_that_fill_the_run_are_time_lost() {
    // 10 replies of 100 waited 203 ms for the RTO: 2 s of the 4 worker-seconds.
    let mut rs: Vec<Record> = (0..100).map(|i| rec(i, 0, Outcome::Ok)).collect();
    for r in rs.iter_mut().take(10) {
        r.first_byte_ns = r.first_byte_ns.map(|f| f + 203_000_000);
        r.end_ns += 203_000_000;
    }
    let d = Delta {
        changed: BTreeMap::from([("TcpExtTCPTimeouts".to_string(), 10)]),
    };
    let f = findings_with(&short_run(), &rs, &d, None);
    assert_eq!(f[0].pathology, Pathology::RetransmitTimeout);
    let lost = f[0].impact.time_lost_share.unwrap();
    assert!((lost - 0.5075).abs() < 0.01, "{lost}");
    assert_eq!(f[0].severity, Severity::Critical);
    assert_eq!(f[0].severity_rule, tcpdoctor_model::Rule::TimeLost);
}

/// Issue 24: a range spent before the run gave "0 connects in 0.001 s before the first
/// failure / 3.3 per s sustainable = rate vs budget = 0".
#[test]
fn no_rate_is_computed_from_no_success() {
    use super::ports::rate_vs_budget;
    assert_eq!(rate_vs_budget(0, 0.001, 3.3), None);
    let burst = rate_vs_budget(198, 0.02, 3.3).unwrap();
    assert!((burst - 9900.0 / 3.3).abs() < 1e-6, "{burst}");
    let r = rate_vs_budget(400, 2.0, 3.3).unwrap();
    assert!((r - 200.0 / 3.3).abs() < 1e-9, "{r}");
}

/// A connect still waiting for its SYN-ACK inside the ladder when the run ended, in a run
/// whose other connects completed after SYN resends: the same SYN loss caught mid-ladder, one
/// finding (syn_retransmit) holding the unanswered connect as its consequence.
#[test]
fn a_connect_caught_in_its_syn_ladder_at_the_end_is_the_resends_consequence() {
    let rs = vec![
        rec(0, 0, Outcome::Ok),
        rec(1, 1_000, Outcome::Ok),
        rec(2, 1_000, Outcome::Ok),
        cut(40, false, 1_960, 0),
    ];
    let delta = Delta {
        changed: BTreeMap::from([("TcpExtTCPSynRetrans".to_string(), 4)]),
    };
    let f = findings_with(&short_run(), &rs, &delta, None);
    let names: Vec<Pathology> = f.iter().map(|f| f.pathology).collect();
    assert_eq!(names, [Pathology::SynRetransmit], "{f:#?}");
    let s = &f[0].summary;
    assert!(s.contains("; consequence: "), "{s}");
    assert!(s.contains("got no SYN-ACK"), "{s}");
}

/// A saturated server on this host whose queue overflowed while no connect of the run
/// completed after a resend: the overflow is still the finding, and the connects caught in
/// their ladder at the end are its consequence (not an unanswered_syn of their own).
#[test]
fn a_local_overflow_seen_only_by_the_counters_takes_the_connects_in_their_ladder() {
    let rs = vec![
        rec(0, 0, Outcome::Ok),
        rec(1, 0, Outcome::Ok),
        cut(40, false, 1_960, 0),
        cut(41, false, 1_950, 0),
    ];
    let delta = Delta {
        changed: BTreeMap::from([
            ("TcpExtTCPSynRetrans".to_string(), 2),
            ("TcpExtListenOverflows".to_string(), 9),
            ("TcpExtListenDrops".to_string(), 9),
        ]),
    };
    let run = |here: bool| {
        let at = Probed {
            target_here: here,
            ports_toward_target: None,
            cpu_wait_us: None,
        };
        let waits = crate::split::CpuWaits::default();
        findings_at(&short_run(), &rs, &delta, at, &waits)
    };
    let f = run(true);
    let names: Vec<Pathology> = f.iter().map(|f| f.pathology).collect();
    assert_eq!(names, [Pathology::AcceptQueueOverflow], "{f:#?}");
    assert!(f[0].summary.contains("got no SYN-ACK"), "{}", f[0].summary);
    assert_ne!(f[0].severity, Severity::Info, "{f:#?}");
    // A remote target: this host's listeners say nothing about it.
    let names: Vec<Pathology> = run(false).iter().map(|f| f.pathology).collect();
    assert_eq!(names, [Pathology::UnansweredSyn]);
}
