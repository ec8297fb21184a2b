//! Detectors the lab applies to what it measured. They reason from evidence only (counter
//! deltas per namespace, per-round and per-connection timings), never from which scenario ran,
//! so a scenario that fails to reproduce its pathology gets no finding for it.

use std::time::Duration;

use tcpdoctor_model::{Evidence, Finding, Pathology, Severity, Source};

/// A many-to-one exchange as measured: rounds of simultaneous replies from `senders` flows.
#[derive(Clone, Debug, PartialEq)]
pub struct FanIn {
    pub senders: u32,
    pub rounds: u32,
    pub slow_rounds: u32,
    pub slow_threshold: Duration,
    pub round_p99: Duration,
    /// The senders' RTO floor.
    pub rto_min: Duration,
    /// Timer-driven repairs of each sender's namespace: retransmission timer expiries
    /// (`TcpExtTCPTimeouts` plus the recovery-state variants `tcp_retransmit_timer` counts
    /// instead) and tail loss probes (with one segment in flight a probe waits 2 x srtt +
    /// the RTO floor, `tcp_schedule_loss_probe` in net/ipv4/tcp_output.c).
    pub timeouts_per_sender: Vec<i64>,
    /// `TcpRetransSegs` summed over the senders.
    pub retrans_segs: i64,
    /// `TcpRetransSegs` delta of each sender's namespace.
    pub retrans_per_sender: Vec<i64>,
    /// Drops counted by the bottleneck qdisc, if known.
    pub bottleneck_drops: Option<u64>,
}

/// Incast when the losses are spread over the fan-in (at least half of the senders, and at
/// least two, lost segments: a shared buffer overflowed, not one bad path) and retransmission
/// timeouts stalled rounds beyond the threshold; a retransmission timeout when the losses
/// belong to one sender; plain retransmissions when losses were repaired without a timer.
pub fn fan_in(o: &FanIn) -> Vec<Finding> {
    let timeouts: i64 = o.timeouts_per_sender.iter().sum();
    let hit = o.timeouts_per_sender.iter().filter(|&&t| t > 0).count() as u32;
    let lossy = o.retrans_per_sender.iter().filter(|&&r| r > 0).count() as u32;
    let share = if o.rounds > 0 {
        f64::from(o.slow_rounds) / f64::from(o.rounds)
    } else {
        0.0
    };
    let mut out = Vec::new();
    let timing = Evidence::Timing {
        what: format!(
            "rounds slower than {} ms (of {})",
            o.slow_threshold.as_millis(),
            o.rounds
        ),
        count: u64::from(o.slow_rounds),
        value_us: o.round_p99.as_micros() as u64,
    };
    let drops = o.bottleneck_drops.map(|d| Evidence::Arithmetic {
        formula: "packets dropped by the bottleneck queue".into(),
        result: d as f64,
    });
    if o.senders >= 2 && lossy >= 2 && 2 * lossy >= o.senders && timeouts > 0 && o.slow_rounds > 0 {
        // A round that stalls this often costs more than it carries: the senders'
        // synchronized losses end in timeouts of at least the RTO floor.
        let severity = if share >= 0.05 {
            Severity::Critical
        } else {
            Severity::Warning
        };
        let mut f = Finding::legacy(
            Pathology::Incast,
            severity,
            Source::Lab,
            format!(
                "{} of {} rounds ({:.1}%) stalled >{} ms; {lossy} of {} senders lost segments \
                 at the shared bottleneck; {timeouts} timer-driven repairs (RTO, tail loss probe) on \
                 {hit} of them (RTO floor {} ms)",
                o.slow_rounds,
                o.rounds,
                share * 100.0,
                o.slow_threshold.as_millis(),
                o.senders,
                o.rto_min.as_millis()
            ),
        )
        .arithmetic(
            "timer-driven repairs (TcpExtTCPTimeouts + TcpExtTCPSackRecoveryFail + TcpExtTCPSackFailures + TcpExtTCPLossFailures + TcpExtTCPLossProbes)",
            timeouts as f64,
        )
        .counter("TcpRetransSegs", o.retrans_segs)
        .with_evidence(timing)
        .with_evidence(Evidence::Examples {
            what: "timer-driven repairs per sender".into(),
            items: o
                .timeouts_per_sender
                .iter()
                .enumerate()
                .map(|(i, t)| format!("s{i}={t}"))
                .collect(),
        })
        .setting("rto_min (route)", format!("{}ms", o.rto_min.as_millis()));
        if let Some(d) = drops {
            f = f.with_evidence(d);
        }
        out.push(f);
    } else if timeouts > 0 && o.slow_rounds > 0 {
        out.push(
            Finding::legacy(
                Pathology::RetransmitTimeout,
                Severity::Warning,
                Source::Lab,
                format!(
                    "{timeouts} timer-driven repairs (RTO, tail loss probe) stalled {} of {} rounds",
                    o.slow_rounds, o.rounds
                ),
            )
            .arithmetic("timer-driven repairs (RTO expiries + tail loss probes)", timeouts as f64)
            .with_evidence(timing),
        );
    } else if o.retrans_segs > 0 {
        out.push(
            Finding::legacy(
                Pathology::Retransmission,
                Severity::Info,
                Source::Lab,
                format!(
                    "{} segments retransmitted without stalling rounds (fast retransmit or loss probes)",
                    o.retrans_segs
                ),
            )
            .counter("TcpRetransSegs", o.retrans_segs),
        );
    }
    out
}

/// Findings of `tcpdoctor analyze`'s detectors on a capture the lab made, and how many
/// segments they read. A capture that ends in a damaged record keeps the findings so far.
pub fn capture(path: &std::path::Path) -> crate::Result<(Vec<Finding>, u64)> {
    let mut reader =
        tcpdoctor_capture::reader::Reader::open(path).map_err(|e| crate::Error::Invalid {
            what: format!("capture {}", path.display()),
            detail: e.to_string(),
        })?;
    let mut engine = tcpdoctor_analyze::Analyzer::new(tcpdoctor_analyze::Config::default());
    while let Ok(Some(seg)) = reader.next_segment() {
        engine.push(&seg);
    }
    let segments = engine.segments();
    Ok((engine.finish().findings, segments))
}

/// Appends `more` to `findings`, skipping pathologies already named, and ranks the result.
pub fn merge(findings: &mut Vec<Finding>, more: Vec<Finding>) {
    for f in more {
        if !findings.iter().any(|g| g.pathology == f.pathology) {
            findings.push(f);
        }
    }
    tcpdoctor_model::finding::rank(findings);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn obs(timeouts: Vec<i64>, slow: u32) -> FanIn {
        FanIn {
            senders: timeouts.len() as u32,
            rounds: 100,
            slow_rounds: slow,
            slow_threshold: Duration::from_millis(100),
            round_p99: Duration::from_millis(210),
            rto_min: Duration::from_millis(200),
            retrans_segs: timeouts.iter().sum::<i64>() * 3,
            retrans_per_sender: timeouts.iter().map(|t| t * 3).collect(),
            timeouts_per_sender: timeouts,
            bottleneck_drops: Some(40),
        }
    }

    #[test]
    fn synchronized_timeouts_are_incast() {
        let mut o = obs(vec![2, 0, 1, 3, 0, 0, 1, 0], 6);
        o.retrans_per_sender = vec![9, 4, 3, 9, 0, 0, 3, 0];
        let f = fan_in(&o);
        assert_eq!(f.len(), 1);
        assert_eq!(f[0].pathology, Pathology::Incast);
        assert_eq!(f[0].severity, Severity::Critical);
        assert!(
            f[0].summary.contains("5 of 8 senders lost"),
            "{}",
            f[0].summary
        );
        assert!(f[0].summary.contains("on 4 of them"), "{}", f[0].summary);
    }

    #[test]
    fn one_sender_or_no_stall_is_not_incast() {
        // Losses on one sender of four: one bad path, not a fan-in overflow.
        let f = fan_in(&obs(vec![2, 0, 0, 0], 2));
        assert_eq!(f[0].pathology, Pathology::RetransmitTimeout);
        let f = fan_in(&obs(vec![0, 0, 0, 0], 0));
        assert!(f.is_empty());
        let mut o = obs(vec![0, 0], 0);
        o.retrans_segs = 5;
        assert_eq!(fan_in(&o)[0].pathology, Pathology::Retransmission);
    }
}
