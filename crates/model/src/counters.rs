//! Meanings of the kernel TCP counters tcpdoctor reports, and the pathology each signals.
//!
//! Pure data plus one pure function ([`findings`]) that turns counter deltas into findings,
//! so `counters`, `doctor` and saved-text parsing all explain a counter with the same words.
//! Names are exactly as `nstat` prints them (`TcpExtTCPSynRetrans`): the MIB prefix (`Tcp`,
//! `TcpExt`) followed by the kernel's field name (include/uapi/linux/snmp.h and the
//! `snmp4_tcp_list`/`snmp4_net_list` tables of net/ipv4/proc.c).

use std::collections::BTreeMap;

use crate::finding::{Evidence, Finding, Pathology, Severity, Source};

/// What one counter means and what its movement signals.
#[derive(Debug)]
pub struct CounterInfo {
    /// nstat name.
    pub name: &'static str,
    /// One line, in tcpdoctor's words.
    pub meaning: &'static str,
    /// The pathology its movement points at, if any.
    pub pathology: Option<Pathology>,
    /// Severity of a finding when it moves within a delta; `None`: context only, never a
    /// finding by itself (e.g. connection counts).
    pub moved: Option<Severity>,
    /// A level (e.g. `TcpCurrEstab`), not a cumulative count: its delta may be negative.
    pub gauge: bool,
}

const fn ctx(name: &'static str, meaning: &'static str) -> CounterInfo {
    CounterInfo {
        name,
        meaning,
        pathology: None,
        moved: None,
        gauge: false,
    }
}

const fn sig(
    name: &'static str,
    meaning: &'static str,
    pathology: Pathology,
    moved: Option<Severity>,
) -> CounterInfo {
    CounterInfo {
        name,
        meaning,
        pathology: Some(pathology),
        moved,
        gauge: false,
    }
}

use Pathology as P;
use Severity as S;

/// The relevant TCP counters, grouped by concern. `tcpdoctor counters` shows these (all
/// others only with `--all`).
#[rustfmt::skip]
pub static COUNTERS: &[CounterInfo] = &[
    // Connection life cycle (context).
    ctx("TcpActiveOpens", "connect() calls that sent a SYN (client-side connection attempts)"),
    ctx("TcpPassiveOpens", "SYNs accepted by listeners that answered with a SYN-ACK"),
    sig("TcpAttemptFails", "connection attempts that ended before ESTABLISHED (refused, reset, or timed out)", P::ConnectFailure, Some(S::Info)),
    sig("TcpEstabResets", "established connections ended by a reset (sent or received)", P::ConnectFailure, Some(S::Info)),
    CounterInfo { name: "TcpCurrEstab", meaning: "connections now ESTABLISHED or CLOSE_WAIT (a level, not a count)", pathology: None, moved: None, gauge: true },
    ctx("TcpInSegs", "segments received, including those in error"),
    ctx("TcpOutSegs", "segments sent, excluding retransmissions"),
    sig("TcpRetransSegs", "segments retransmitted, for any reason (timeouts, fast retransmit, loss probes)", P::Retransmission, Some(S::Info)),
    ctx("TcpInErrs", "segments received with errors (bad checksum, malformed header)"),
    sig("TcpOutRsts", "resets sent (refused connects, aborts, replies to unknown segments)", P::ConnectFailure, None),
    // Listener queues.
    sig("TcpExtListenOverflows", "a completed handshake or a SYN met a full accept queue and was dropped", P::AcceptQueueOverflow, Some(S::Warning)),
    sig("TcpExtListenDrops", "SYNs or handshakes a listener dropped for any reason (includes every ListenOverflows)", P::AcceptQueueOverflow, Some(S::Warning)),
    sig("TcpExtTCPReqQFullDrop", "SYNs dropped because the SYN queue was full and SYN cookies were off", P::AcceptQueueOverflow, Some(S::Warning)),
    sig("TcpExtTCPReqQFullDoCookies", "SYN queue full: answered with a SYN cookie instead of queueing", P::AcceptQueueOverflow, Some(S::Info)),
    sig("TcpExtSyncookiesSent", "SYN cookies sent because the SYN queue overflowed", P::AcceptQueueOverflow, Some(S::Info)),
    ctx("TcpExtSyncookiesRecv", "valid SYN cookies returned by clients"),
    ctx("TcpExtSyncookiesFailed", "ACKs that carried an invalid SYN cookie"),
    // SYN retransmission and handshake trouble.
    sig("TcpExtTCPSynRetrans", "SYNs and SYN-ACKs retransmitted after the handshake timer fired (1 s, then the ladder)", P::SynRetransmit, Some(S::Warning)),
    sig("TcpExtEmbryonicRsts", "resets received for sockets still in SYN_RECV", P::ConnectFailure, None),
    // TIME_WAIT and 4-tuple reuse.
    sig("TcpExtTW", "sockets put in TIME_WAIT: the side that closed first holds the 4-tuple for 60 s", P::PortExhaustion, None),
    sig("TcpExtTWRecycled", "TIME_WAIT 4-tuples reused early for a new connection (tcp_tw_reuse, timestamps)", P::PortExhaustion, None),
    sig("TcpExtTWKilled", "TIME_WAIT sockets ended early (e.g. by a reset, RFC 1337 allows it when tcp_rfc1337=0)", P::TimeWaitCollision, None),
    sig("TcpExtTCPTimeWaitOverflow", "sockets that skipped TIME_WAIT because tcp_max_tw_buckets was reached", P::PortExhaustion, Some(S::Warning)),
    sig("TcpExtPAWSEstab", "segments dropped by the timestamp check (PAWS) on established connections", P::TimeWaitCollision, Some(S::Info)),
    sig("TcpExtPAWSActive", "SYN-ACKs rejected by the timestamp check while connecting", P::TimeWaitCollision, Some(S::Warning)),
    sig("TcpExtTCPChallengeACK", "challenge ACKs sent in answer to a suspicious SYN or RST (RFC 5961)", P::StaleAckRace, Some(S::Info)),
    sig("TcpExtTCPACKSkippedTimeWait", "challenge ACKs from TIME_WAIT suppressed by the rate limit", P::TimeWaitCollision, None),
    // Data retransmission.
    sig("TcpExtTCPTimeouts", "retransmission timer expiries (data RTO and SYN timeouts): each is a stall of at least the RTO", P::RetransmitTimeout, Some(S::Warning)),
    sig("TcpExtTCPSlowStartRetrans", "retransmissions sent in loss recovery after a timeout", P::RetransmitTimeout, None),
    sig("TcpExtTCPLostRetransmit", "retransmitted segments that were lost again", P::RetransmitTimeout, Some(S::Info)),
    sig("TcpExtTCPSpuriousRTOs", "timeouts later proven unnecessary (F-RTO): the RTO was too short for the path", P::RetransmitTimeout, Some(S::Info)),
    sig("TcpExtTCPAbortOnTimeout", "connections given up after too many retransmission timeouts", P::RetransmitTimeout, Some(S::Critical)),
    sig("TcpExtTCPFastRetrans", "segments resent by fast retransmit (three duplicate ACKs or SACK), no timeout", P::Retransmission, Some(S::Info)),
    sig("TcpExtTCPLossProbes", "tail loss probes sent (RACK-TLP) to avoid waiting for a timeout", P::Retransmission, None),
    sig("TcpExtTCPLossProbeRecovery", "losses repaired by a tail loss probe instead of a timeout", P::Retransmission, None),
    sig("TcpExtTCPDSACKRecv", "duplicate-SACK blocks received: the peer got a segment twice (spurious retransmission)", P::Retransmission, None),
    sig("TcpExtTCPRetransFail", "retransmissions the local stack failed to send (qdisc full, no memory)", P::Retransmission, Some(S::Warning)),
    // Slow readers and receive-side pressure.
    sig("TcpExtTCPToZeroWindowAdv", "times this host closed its advertised window to zero (its reader fell behind)", P::SlowReader, Some(S::Warning)),
    sig("TcpExtTCPFromZeroWindowAdv", "times this host reopened a window it had closed to zero", P::SlowReader, None),
    sig("TcpExtTCPWantZeroWindowAdv", "times the receive buffer would have allowed only a zero window", P::SlowReader, Some(S::Info)),
    sig("TcpExtTCPZeroWindowDrop", "segments dropped because the receive window was zero", P::SlowReader, Some(S::Warning)),
    sig("TcpExtTCPWinProbe", "zero-window probes sent: the peer advertised no room", P::SlowReader, Some(S::Warning)),
    sig("TcpExtTCPRcvQDrop", "segments dropped because the receive queue was over its memory limit", P::SlowReader, Some(S::Warning)),
    sig("TcpExtPruneCalled", "receive queues pruned because the socket ran over its buffer", P::SlowReader, Some(S::Warning)),
    sig("TcpExtRcvPruned", "segments discarded from a receive queue by pruning", P::SlowReader, Some(S::Warning)),
    sig("TcpExtOfoPruned", "out-of-order segments discarded to free receive memory", P::SlowReader, Some(S::Info)),
    sig("TcpExtTCPRcvCollapsed", "segments merged in a receive queue to save memory (buffer nearly full)", P::SlowReader, None),
    sig("TcpExtTCPBacklogDrop", "segments dropped because the socket's backlog was full while the application held it", P::SlowReader, Some(S::Warning)),
    // Delayed ACKs.
    sig("TcpExtDelayedACKs", "delayed ACKs sent when the delayed-ACK timer fired", P::DelayedAck, None),
    sig("TcpExtDelayedACKLocked", "delayed ACKs postponed further because the application held the socket", P::DelayedAck, None),
    sig("TcpExtDelayedACKLost", "duplicate data received (our ACK was lost or late): quick-ACK mode entered", P::Retransmission, None),
    // Aborts.
    sig("TcpExtTCPAbortOnData", "connections reset because data arrived after the application closed", P::ConnectFailure, None),
    sig("TcpExtTCPAbortOnClose", "connections reset because the application closed with unread data", P::ConnectFailure, None),
    sig("TcpExtTCPAbortOnMemory", "connections reset because TCP memory (tcp_mem) ran out", P::ConnectFailure, Some(S::Critical)),
    sig("TcpExtTCPAbortFailed", "resets that could not be sent (no memory)", P::ConnectFailure, Some(S::Warning)),
    sig("TcpExtTCPMemoryPressures", "times TCP entered memory pressure (tcp_mem middle threshold)", P::SlowReader, Some(S::Warning)),
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

/// The worst severity seen for one pathology and the counters that moved.
type Moved = (Severity, Vec<(&'static str, i64)>);

/// Findings from counter deltas (`name -> change`), `Source::Counters`: for each pathology,
/// the counters that signal it and moved, as evidence; the finding takes the highest
/// severity among them. `window_ms` (how long the delta covers) is quoted in the summary.
pub fn findings(delta: &BTreeMap<String, i64>, window_ms: Option<u64>) -> Vec<Finding> {
    let mut by: BTreeMap<Pathology, Moved> = BTreeMap::new();
    for c in COUNTERS {
        let (Some(p), Some(sev)) = (c.pathology, c.moved) else {
            continue;
        };
        let d = delta.get(c.name).copied().unwrap_or(0);
        if d <= 0 || c.gauge {
            continue;
        }
        if explained_by_syn_retransmits(c.name, delta) {
            continue;
        }
        let e = by.entry(p).or_insert((sev, Vec::new()));
        e.0 = e.0.max(sev);
        e.1.push((c.name, d));
    }
    let over = match window_ms {
        Some(ms) => format!(" in {:.1} s", ms as f64 / 1000.0),
        None => " between the two snapshots".to_string(),
    };
    by.into_iter()
        .map(|(p, (sev, moved))| {
            let list: Vec<String> = moved.iter().map(|(n, d)| format!("{n} +{d}")).collect();
            let mut f = Finding::new(
                p,
                sev,
                Source::Counters,
                format!("{}{over}", list.join(", ")),
            );
            for (n, d) in moved {
                f = f.with_evidence(Evidence::Counter {
                    name: n.to_string(),
                    delta: d,
                });
            }
            f
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

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
            assert!(!(c.moved.is_some() && c.pathology.is_none()), "{}", c.name);
        }
        assert_eq!(
            info("TcpExtListenOverflows").unwrap().pathology,
            Some(Pathology::AcceptQueueOverflow)
        );
        assert!(info("TcpCurrEstab").unwrap().gauge);
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
        let f = findings(&d, Some(2000));
        let ps: Vec<Pathology> = f.iter().map(|f| f.pathology).collect();
        assert_eq!(
            ps,
            vec![
                Pathology::SynRetransmit,
                Pathology::AcceptQueueOverflow,
                Pathology::RetransmitTimeout
            ]
        );
        let aq = &f[1];
        assert_eq!(aq.evidence.len(), 2);
        assert!(
            aq.summary.contains("TcpExtListenOverflows +108"),
            "{}",
            aq.summary
        );
        assert!(aq.summary.contains("in 2.0 s"));
        assert_eq!(f[2].severity, Severity::Critical);
        assert!(findings(&BTreeMap::new(), None).is_empty());
        // Timeouts fully explained by SYN retransmissions are not data timeouts.
        let mut d = BTreeMap::new();
        d.insert("TcpExtTCPTimeouts".to_string(), 90);
        d.insert("TcpExtTCPSynRetrans".to_string(), 90);
        d.insert("TcpExtTCPLostRetransmit".to_string(), 40);
        d.insert("TcpRetransSegs".to_string(), 90);
        let ps: Vec<Pathology> = findings(&d, None).iter().map(|f| f.pathology).collect();
        assert_eq!(ps, vec![Pathology::SynRetransmit]);
        d.insert("TcpExtTCPTimeouts".to_string(), 95);
        assert_eq!(findings(&d, None).len(), 2);
    }
}
