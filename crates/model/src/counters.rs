//! Meanings of the kernel TCP counters tcpdoctor reports, and the pathology each signals.
//!
//! Pure data plus one pure function ([`findings`]) that turns counter deltas into findings,
//! so `counters`, `doctor` and saved-text parsing all explain a counter with the same words.
//! Names are exactly as `nstat` prints them (`TcpExtTCPSynRetrans`): the MIB prefix (`Tcp`,
//! `TcpExt`) followed by the kernel's field name (include/uapi/linux/snmp.h and the
//! `snmp4_tcp_list`/`snmp4_net_list` tables of net/ipv4/proc.c).

use std::collections::BTreeMap;
use std::time::Duration;

use crate::finding::{Evidence, Finding, Pathology, Source};
use crate::policy::Impact;
use crate::timers::SYN_INITIAL_RTO;

/// What one increment of a counter proves happened. The severity of a counter finding comes
/// from the policy ([`crate::policy`]) applied to what the increments prove, never from the
/// counter's name alone.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Signal {
    /// Context only: never a finding by itself (connection counts, resets sent).
    Context,
    /// An event whose cost the counter does not show. Judged by its share of the counter
    /// named in `per` when that moved too (e.g. retransmitted over sent segments), else rare.
    Event { per: Option<&'static str> },
    /// Each increment is a stall of at least this long (a SYN or SYN-ACK waiting for the
    /// initial 1 s timer).
    Stall(Duration),
    /// Each increment is a stall of at least the host's RTO floor (given by the caller in
    /// [`Window::rto_floor`]; judged as an event when unknown).
    Timeout,
    /// Each increment is an operation that failed outright.
    Failure,
}

/// What one counter means and what its movement signals.
#[derive(Debug)]
pub struct CounterInfo {
    /// nstat name.
    pub name: &'static str,
    /// One line, in tcpdoctor's words.
    pub meaning: &'static str,
    /// The pathology its movement points at, if any.
    pub pathology: Option<Pathology>,
    /// What each increment proves.
    pub signal: Signal,
    /// A level (e.g. `TcpCurrEstab`), not a cumulative count: its delta may be negative.
    pub gauge: bool,
}

const fn ctx(name: &'static str, meaning: &'static str) -> CounterInfo {
    CounterInfo {
        name,
        meaning,
        pathology: None,
        signal: Signal::Context,
        gauge: false,
    }
}

const fn sig(
    name: &'static str,
    meaning: &'static str,
    pathology: Pathology,
    signal: Signal,
) -> CounterInfo {
    CounterInfo {
        name,
        meaning,
        pathology: Some(pathology),
        signal,
        gauge: false,
    }
}

use Pathology as P;
use Signal::{Context as CTX, Failure as FAIL, Timeout as RTO};

/// An event judged by its share of `per`.
const fn ev(per: &'static str) -> Signal {
    Signal::Event { per: Some(per) }
}

/// An event of unknown share.
const EV: Signal = Signal::Event { per: None };

/// A stall of one initial SYN timeout.
const SYN_STALL: Signal = Signal::Stall(SYN_INITIAL_RTO);

/// The relevant TCP counters, grouped by concern. `tcpdoctor counters` shows these (all
/// others only with `--all`).
#[rustfmt::skip]
pub static COUNTERS: &[CounterInfo] = &[
    // Connection life cycle (context).
    ctx("TcpActiveOpens", "connect() calls that sent a SYN (client-side connection attempts)"),
    ctx("TcpPassiveOpens", "SYNs accepted by listeners that answered with a SYN-ACK"),
    sig("TcpAttemptFails", "connection attempts that ended before ESTABLISHED (refused, reset, or timed out)", P::ConnectFailure, ev("TcpActiveOpens")),
    sig("TcpEstabResets", "established connections ended by a reset (sent or received)", P::ConnectFailure, EV),
    CounterInfo { name: "TcpCurrEstab", meaning: "connections now ESTABLISHED or CLOSE_WAIT (a level, not a count)", pathology: None, signal: Signal::Context, gauge: true },
    ctx("TcpInSegs", "segments received, including those in error"),
    ctx("TcpOutSegs", "segments sent, excluding retransmissions"),
    sig("TcpRetransSegs", "segments retransmitted, for any reason (timeouts, fast retransmit, loss probes)", P::Retransmission, ev("TcpOutSegs")),
    ctx("TcpInErrs", "segments received with errors (bad checksum, malformed header)"),
    sig("TcpOutRsts", "resets sent (refused connects, aborts, replies to unknown segments)", P::ConnectFailure, CTX),
    // Listener queues.
    sig("TcpExtListenOverflows", "a completed handshake or a SYN met a full accept queue and was dropped", P::AcceptQueueOverflow, SYN_STALL),
    sig("TcpExtListenDrops", "SYNs or handshakes a listener dropped for any reason (includes every ListenOverflows)", P::AcceptQueueOverflow, SYN_STALL),
    sig("TcpExtTCPReqQFullDrop", "SYNs dropped because the SYN queue was full and SYN cookies were off", P::AcceptQueueOverflow, SYN_STALL),
    sig("TcpExtTCPReqQFullDoCookies", "SYN queue full: answered with a SYN cookie instead of queueing", P::AcceptQueueOverflow, EV),
    sig("TcpExtSyncookiesSent", "SYN cookies sent because the SYN queue overflowed", P::AcceptQueueOverflow, EV),
    ctx("TcpExtSyncookiesRecv", "valid SYN cookies returned by clients"),
    ctx("TcpExtSyncookiesFailed", "ACKs that carried an invalid SYN cookie"),
    // SYN retransmission and handshake trouble.
    sig("TcpExtTCPSynRetrans", "SYNs and SYN-ACKs retransmitted after the handshake timer fired (1 s, then the ladder)", P::SynRetransmit, ev("TcpActiveOpens")),
    sig("TcpExtEmbryonicRsts", "resets received for sockets still in SYN_RECV", P::ConnectFailure, CTX),
    // TIME_WAIT and 4-tuple reuse.
    sig("TcpExtTW", "sockets put in TIME_WAIT: the side that closed first holds the 4-tuple for 60 s", P::PortExhaustion, CTX),
    sig("TcpExtTWRecycled", "TIME_WAIT 4-tuples reused early for a new connection (tcp_tw_reuse, timestamps)", P::PortExhaustion, CTX),
    sig("TcpExtTWKilled", "TIME_WAIT sockets ended early (e.g. by a reset, RFC 1337 allows it when tcp_rfc1337=0)", P::TimeWaitCollision, CTX),
    sig("TcpExtTCPTimeWaitOverflow", "sockets that skipped TIME_WAIT because tcp_max_tw_buckets was reached", P::PortExhaustion, EV),
    sig("TcpExtPAWSEstab", "segments dropped by the timestamp check (PAWS) on established connections", P::TimeWaitCollision, EV),
    sig("TcpExtPAWSActive", "SYN-ACKs rejected by the timestamp check while connecting", P::TimeWaitCollision, SYN_STALL),
    sig("TcpExtTCPChallengeACK", "challenge ACKs sent in answer to a suspicious SYN or RST (RFC 5961)", P::StaleAckRace, EV),
    sig("TcpExtTCPACKSkippedTimeWait", "challenge ACKs from TIME_WAIT suppressed by the rate limit", P::TimeWaitCollision, CTX),
    // Data retransmission.
    sig("TcpExtTCPTimeouts", "retransmission timer expiries (data RTO and SYN timeouts): each is a stall of at least the RTO", P::RetransmitTimeout, RTO),
    sig("TcpExtTCPSlowStartRetrans", "retransmissions sent in loss recovery after a timeout", P::RetransmitTimeout, CTX),
    sig("TcpExtTCPLostRetransmit", "retransmitted segments that were lost again", P::RetransmitTimeout, EV),
    sig("TcpExtTCPSpuriousRTOs", "timeouts later proven unnecessary (F-RTO): the RTO was too short for the path", P::SpuriousRetransmission, EV),
    sig("TcpExtTCPAbortOnTimeout", "connections given up after too many retransmission timeouts", P::RetransmitTimeout, FAIL),
    sig("TcpExtTCPFastRetrans", "segments resent by fast retransmit (three duplicate ACKs or SACK), no timeout", P::Retransmission, ev("TcpOutSegs")),
    sig("TcpExtTCPLossProbes", "tail loss probes sent (RACK-TLP) to avoid waiting for a timeout", P::Retransmission, CTX),
    sig("TcpExtTCPLossProbeRecovery", "losses repaired by a tail loss probe instead of a timeout", P::Retransmission, CTX),
    sig("TcpExtTCPDSACKRecv", "duplicate-SACK blocks received: the peer got a segment twice (spurious retransmission)", P::SpuriousRetransmission, CTX),
    sig("TcpExtTCPRetransFail", "retransmissions the local stack failed to send (qdisc full, no memory)", P::Retransmission, EV),
    // Slow readers and receive-side pressure.
    sig("TcpExtTCPToZeroWindowAdv", "times this host closed its advertised window to zero (its reader fell behind)", P::SlowReader, EV),
    sig("TcpExtTCPFromZeroWindowAdv", "times this host reopened a window it had closed to zero", P::SlowReader, CTX),
    sig("TcpExtTCPWantZeroWindowAdv", "times the receive buffer would have allowed only a zero window", P::SlowReader, EV),
    sig("TcpExtTCPZeroWindowDrop", "segments dropped because the receive window was zero", P::SlowReader, EV),
    sig("TcpExtTCPWinProbe", "zero-window probes sent: the peer advertised no room", P::SlowReader, EV),
    sig("TcpExtTCPRcvQDrop", "segments dropped because the receive queue was over its memory limit", P::SlowReader, EV),
    sig("TcpExtPruneCalled", "receive queues pruned because the socket ran over its buffer", P::SlowReader, EV),
    sig("TcpExtRcvPruned", "segments discarded from a receive queue by pruning", P::SlowReader, EV),
    sig("TcpExtOfoPruned", "out-of-order segments discarded to free receive memory", P::SlowReader, EV),
    sig("TcpExtTCPRcvCollapsed", "segments merged in a receive queue to save memory (buffer nearly full)", P::SlowReader, CTX),
    sig("TcpExtTCPBacklogDrop", "segments dropped because the socket's backlog was full while the application held it", P::SlowReader, EV),
    // Delayed ACKs.
    sig("TcpExtDelayedACKs", "delayed ACKs sent when the delayed-ACK timer fired", P::DelayedAck, CTX),
    sig("TcpExtDelayedACKLocked", "delayed ACKs postponed further because the application held the socket", P::DelayedAck, CTX),
    sig("TcpExtDelayedACKLost", "duplicate data received (our ACK was lost or late): quick-ACK mode entered", P::Retransmission, CTX),
    // Aborts.
    sig("TcpExtTCPAbortOnData", "connections reset because data arrived after the application closed", P::ConnectFailure, CTX),
    sig("TcpExtTCPAbortOnClose", "connections reset because the application closed with unread data", P::ConnectFailure, CTX),
    sig("TcpExtTCPAbortOnMemory", "connections reset because TCP memory (tcp_mem) ran out", P::ConnectFailure, FAIL),
    sig("TcpExtTCPAbortFailed", "resets that could not be sent (no memory)", P::ConnectFailure, EV),
    sig("TcpExtTCPMemoryPressures", "times TCP entered memory pressure (tcp_mem middle threshold)", P::SlowReader, EV),
];

/// The meaning of one counter (by nstat name).
pub fn info(name: &str) -> Option<&'static CounterInfo> {
    COUNTERS.iter().find(|c| c.name == name)
}

/// SYN retransmissions also count as timeouts and retransmitted segments
/// (`tcp_retransmit_timer` handles SYN_SENT, net/ipv4/tcp_timer.c): when SYN retransmissions
/// explain a data-loss counter's movement, it is not evidence of data loss.
fn explained_by_syn_retransmits(name: &str, delta: &BTreeMap<String, i64>) -> bool {
    let get = |n: &str| delta.get(n).copied().unwrap_or(0);
    let syn = get("TcpExtTCPSynRetrans");
    match name {
        "TcpExtTCPTimeouts" | "TcpRetransSegs" => get(name) <= syn,
        "TcpExtTCPLostRetransmit" => get("TcpExtTCPTimeouts") <= syn,
        _ => false,
    }
}

/// What the caller knows about the window a delta covers.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Window {
    /// How long the delta covers; `None` between two saved snapshots of unknown spacing.
    pub length: Option<Duration>,
    /// The host's smallest retransmission timeout (sysctl or route `rto_min`), when known:
    /// each `TcpExtTCPTimeouts` increment is a stall at least this long.
    pub rto_floor: Option<Duration>,
}

/// The impact that `d` increments of counter `c` prove, given the other counters' deltas.
fn impact_of(c: &CounterInfo, d: i64, delta: &BTreeMap<String, i64>, w: Window) -> Impact {
    let n = d as u64;
    match c.signal {
        Signal::Context => Impact::none(),
        Signal::Event { per } => {
            let observed = per
                .and_then(|p| delta.get(p).copied())
                .filter(|&t| t > 0)
                .map(|t| t as u64);
            Impact::stalls(n, observed, None)
        }
        Signal::Stall(at_least) => Impact::stalls(n, None, Some(at_least)),
        Signal::Timeout => Impact::stalls(n, None, w.rto_floor),
        Signal::Failure => Impact::failures(n, None),
    }
}

/// The merged impact of one pathology's counters and the counters that moved.
type Moved = (Impact, Vec<(&'static str, i64)>);

/// Findings from counter deltas (`name -> change`), `Source::Counters`: for each pathology,
/// the counters that signal it and moved, as evidence; the impacts they prove are merged and
/// judged by the policy. `window` says how long the delta covers and the RTO floor.
pub fn findings(delta: &BTreeMap<String, i64>, window: Window) -> Vec<Finding> {
    let mut by: BTreeMap<Pathology, Moved> = BTreeMap::new();
    for c in COUNTERS {
        let Some(p) = c.pathology else {
            continue;
        };
        if c.signal == Signal::Context || c.gauge {
            continue;
        }
        let d = delta.get(c.name).copied().unwrap_or(0);
        if d <= 0 || explained_by_syn_retransmits(c.name, delta) {
            continue;
        }
        let impact = impact_of(c, d, delta, window);
        let e = by.entry(p).or_insert((impact.clone(), Vec::new()));
        e.0 = e.0.merge(&impact);
        e.1.push((c.name, d));
    }
    let over = match window.length {
        Some(l) => format!(" in {}", crate::units::ms_or_s_coarse(l)),
        None => " between the two snapshots".to_string(),
    };
    by.into_iter()
        .map(|(p, (impact, moved))| {
            let list: Vec<String> = moved.iter().map(|(n, d)| format!("{n} +{d}")).collect();
            let mut f = Finding::new(
                p,
                Source::Counters,
                format!("{}{over}", list.join(", ")),
                impact,
            );
            for (n, d) in moved {
                f = f.with_evidence(Evidence::Counter {
                    name: n.to_string(),
                    delta: d,
                });
            }
            f
        })
        .collect::<Vec<Finding>>()
        .into_iter()
        .fold(Vec::new(), crate::merge::join_loss_repairs)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::finding::Severity;

    #[test]
    fn names_are_unique_nstat_names_with_meanings() {
        let mut seen = std::collections::BTreeSet::new();
        for c in COUNTERS {
            assert!(seen.insert(c.name), "duplicate {}", c.name);
            assert!(
                c.name.starts_with("Tcp") || c.name.starts_with("TcpExt"),
                "{}",
                c.name
            );
            assert!(!c.meaning.is_empty());
            assert!(
                c.signal == Signal::Context || c.pathology.is_some(),
                "{}",
                c.name
            );
        }
        assert_eq!(
            info("TcpExtListenOverflows").unwrap().pathology,
            Some(Pathology::AcceptQueueOverflow)
        );
        assert!(info("TcpCurrEstab").unwrap().gauge);
    }

    #[test]
    fn timeouts_and_fast_retransmits_of_one_window_are_one_finding() {
        let d: BTreeMap<String, i64> = [
            ("TcpRetransSegs", 50),
            ("TcpExtTCPTimeouts", 2),
            ("TcpExtTCPLostRetransmit", 2),
            ("TcpExtTCPFastRetrans", 37),
            ("TcpOutSegs", 9000),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect();
        let w = Window {
            length: Some(Duration::from_secs(1)),
            rto_floor: Some(Duration::from_millis(200)),
        };
        let f = findings(&d, w);
        assert_eq!(f.len(), 1, "{f:#?}");
        assert_eq!(f[0].pathology, Pathology::RetransmitTimeout);
        assert!(
            f[0].summary.contains("TcpExtTCPFastRetrans +37"),
            "{}",
            f[0].summary
        );
        assert!(f[0].evidence.iter().any(
            |e| matches!(e, Evidence::Counter { name, .. } if name == "TcpExtTCPFastRetrans")
        ));
        // Without a timeout, the repairs are their own finding.
        let mut d = d;
        d.remove("TcpExtTCPTimeouts");
        d.remove("TcpExtTCPLostRetransmit");
        let ps: Vec<Pathology> = findings(&d, w).iter().map(|f| f.pathology).collect();
        assert_eq!(ps, [Pathology::Retransmission]);
    }

    #[test]
    fn delta_becomes_grouped_findings() {
        let mut d = BTreeMap::new();
        d.insert("TcpExtListenOverflows".to_string(), 108);
        d.insert("TcpExtListenDrops".to_string(), 108);
        d.insert("TcpExtTCPSynRetrans".to_string(), 90);
        d.insert("TcpExtTCPAbortOnTimeout".to_string(), 1);
        d.insert("TcpActiveOpens".to_string(), 72);
        d.insert("TcpExtTCPToZeroWindowAdv".to_string(), 0);
        let w = Window {
            length: Some(Duration::from_secs(2)),
            rto_floor: Some(Duration::from_millis(200)),
        };
        let mut f = findings(&d, w);
        crate::finding::rank(&mut f);
        let ps: Vec<Pathology> = f.iter().map(|f| f.pathology).collect();
        // The cause (a full accept queue: 1 s per drop) first, then the symptoms.
        assert_eq!(
            ps,
            vec![
                Pathology::AcceptQueueOverflow,
                Pathology::RetransmitTimeout,
                Pathology::SynRetransmit,
            ]
        );
        let aq = &f[0];
        assert_eq!(aq.severity, Severity::Critical);
        assert_eq!(aq.evidence.len(), 2);
        assert!(
            aq.summary.contains("TcpExtListenOverflows +108"),
            "{}",
            aq.summary
        );
        assert!(aq.summary.contains("in 2.0 s"));
        // One connection given up on: a failure.
        assert_eq!(f[1].severity, Severity::Critical);
        // 90 SYN retransmissions for 72 connects: common, but how long each waited is not in
        // the counters.
        assert_eq!(f[2].severity, Severity::Warning);
        assert!(findings(&BTreeMap::new(), Window::default()).is_empty());
        // Timeouts fully explained by SYN retransmissions are not data timeouts.
        let mut d = BTreeMap::new();
        d.insert("TcpExtTCPTimeouts".to_string(), 90);
        d.insert("TcpExtTCPSynRetrans".to_string(), 90);
        d.insert("TcpExtTCPLostRetransmit".to_string(), 40);
        d.insert("TcpRetransSegs".to_string(), 90);
        let ps: Vec<Pathology> = findings(&d, Window::default())
            .iter()
            .map(|f| f.pathology)
            .collect();
        assert_eq!(ps, vec![Pathology::SynRetransmit]);
        d.insert("TcpExtTCPTimeouts".to_string(), 95);
        assert_eq!(findings(&d, Window::default()).len(), 2);
    }
}
