//! Incast judged from a fan-in as the lab measures it: rounds of simultaneous replies from
//! several senders, each sender's kernel counters (timer-driven repairs, retransmissions) and
//! the bottleneck queue's drops. The packet detector (`detect/incast.rs`) finds the same
//! pathology in a capture; both live here so that incast is judged in one crate.
//!
//! Pure: counts and round durations in, findings out. It reasons from evidence only, never
//! from which scenario ran, so a run that fails to reproduce its pathology gets no finding
//! for it. Nothing here measures: the lab (`tcpdoctor-lab`) hands in what it measured.

use std::time::Duration;

use tcpdoctor_model::{units, Evidence, Finding, Impact, Pathology, Source};

pub struct FanIn {
    pub senders: u32,
    pub rounds: u32,
    pub slow_rounds: u32,
    pub slow_threshold: Duration,
    pub round_p99: Duration,
    /// Every round's duration, in order.
    pub round_us: Vec<u64>,
    /// How long a round takes at the bottleneck's rate, when known.
    pub line_round: Option<Duration>,
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

impl FanIn {
    /// What a round costs here when nothing waits for a timer: the median round, or, when
    /// more than half of the rounds stalled (the median is 1.5 times the fastest or more),
    /// the fastest; never more than 1.25 times the round at the bottleneck's line rate, so a
    /// run whose every round stalled is not its own reference. Against the median, the lab's
    /// own jitter (scheduling on a busy machine) does not count as time lost.
    pub fn reference_round(&self) -> Duration {
        reference_round_us(&self.round_us, self.line_round_us())
            .map_or(Duration::ZERO, Duration::from_micros)
    }

    /// The longest wait beyond the reference round.
    pub fn worst_stall(&self) -> Duration {
        let max = self.round_us.iter().copied().max().unwrap_or(0);
        Duration::from_micros(max).saturating_sub(self.reference_round())
    }

    /// Share of the run's time spent beyond the reference round:
    /// sum(max(0, round - reference)) / sum(round).
    pub fn time_lost_share(&self) -> f64 {
        time_lost_share(&self.round_us, self.line_round_us())
    }

    fn line_round_us(&self) -> Option<u64> {
        self.line_round.map(|d| d.as_micros() as u64)
    }

    /// What the stalls cost, for the policy: rounds stalled beyond the threshold out of all
    /// rounds, the longest wait, and the share of time lost.
    pub fn impact(&self) -> Impact {
        Impact::stalls(
            u64::from(self.slow_rounds),
            Some(u64::from(self.rounds)),
            Some(self.worst_stall()),
        )
        .with_time_lost(self.time_lost_share())
    }
}

/// Incast when the losses are spread over the fan-in (at least half of the senders, and at
/// least two, lost segments: a shared buffer overflowed, not one bad path) and were repaired
/// by the senders' timers (RTO, tail loss probe), whatever the RTO floor: with a lowered
/// floor the stalls are short and the finding says what they still cost. A retransmission
/// timeout when the losses belong to one sender; plain retransmissions when losses were
/// repaired without a timer. Severity follows from the measured cost ([`FanIn::impact`]).
pub fn fan_in(o: &FanIn) -> Vec<Finding> {
    let timeouts: i64 = o.timeouts_per_sender.iter().sum();
    let hit = o.timeouts_per_sender.iter().filter(|&&t| t > 0).count() as u32;
    let lossy = o.retrans_per_sender.iter().filter(|&&r| r > 0).count() as u32;
    let share = if o.rounds > 0 {
        f64::from(o.slow_rounds) / f64::from(o.rounds)
    } else {
        0.0
    };
    let lost = o.time_lost_share();
    let mut out = Vec::new();
    let timing = Evidence::Timing {
        what: format!(
            "rounds slower than {} ms (of {}), 99th percentile of all rounds",
            o.slow_threshold.as_millis(),
            o.rounds
        ),
        count: u64::from(o.slow_rounds),
        value_us: o.round_p99.as_micros() as u64,
    };
    let lost_evidence = Evidence::Arithmetic {
        formula: format!(
            "time lost = sum(round - reference round {}) / sum(round), {} rounds (reference: the median round, or the fastest when most rounds stalled)",
            units::ms_or_s(o.reference_round()),
            o.round_us.len()
        ),
        result: lost,
    };
    let drops = o.bottleneck_drops.map(|d| Evidence::Arithmetic {
        formula: "packets dropped by the bottleneck queue".into(),
        result: d as f64,
    });
    let floor = if o.rto_min < tcpdoctor_model::policy::STALL_WARNING {
        format!(
            "RTO floor {} ms, lowered: the rto_min remedy is in effect",
            o.rto_min.as_millis()
        )
    } else {
        format!("RTO floor {} ms", o.rto_min.as_millis())
    };
    if o.bottleneck_drops == Some(0) && o.retrans_segs > 0 {
        // Nothing was dropped at the shared queue: the timers fired because the queue's
        // delay outran them (a loss probe waits 2 x srtt), not because segments were lost.
        out.push(
            Finding::new(
                Pathology::SpuriousRetransmission,
                Source::Lab,
                format!(
                    "{} segments retransmitted ({timeouts} by timers) while the bottleneck dropped nothing: the queue's delay outran the senders' probe timers",
                    o.retrans_segs
                ),
                Impact::stalls(o.retrans_segs as u64, None, None),
            )
            .counter("TcpRetransSegs", o.retrans_segs)
            .arithmetic("packets dropped by the bottleneck queue", 0.0),
        );
        return out;
    }
    if o.senders >= 2 && lossy >= 2 && 2 * lossy >= o.senders && timeouts > 0 {
        let mut f = Finding::new(
            Pathology::Incast,
            Source::Lab,
            format!(
                "{lossy} of {} senders lost segments at the shared bottleneck; {timeouts} \
                 timer-driven repairs (RTO, tail loss probe) on {hit} of them ({floor}); {} of \
                 {} rounds ({:.1}%) stalled >{} ms, longest wait {}, {:.0}% of the time lost",
                o.senders,
                o.slow_rounds,
                o.rounds,
                share * 100.0,
                o.slow_threshold.as_millis(),
                units::ms_or_s(o.worst_stall()),
                lost * 100.0,
            ),
            o.impact(),
        )
        .arithmetic(
            "timer-driven repairs (TcpExtTCPTimeouts + TcpExtTCPSackRecoveryFail + TcpExtTCPSackFailures + TcpExtTCPLossFailures + TcpExtTCPLossProbes)",
            timeouts as f64,
        )
        .counter("TcpRetransSegs", o.retrans_segs)
        .with_evidence(timing)
        .with_evidence(lost_evidence)
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
    } else if timeouts > 0 {
        out.push(
            Finding::new(
                Pathology::RetransmitTimeout,
                Source::Lab,
                format!(
                    "{timeouts} timer-driven repairs (RTO, tail loss probe) on {hit} of {} \
                     senders ({floor}); {} of {} rounds stalled >{} ms, longest wait {}",
                    o.senders,
                    o.slow_rounds,
                    o.rounds,
                    o.slow_threshold.as_millis(),
                    units::ms_or_s(o.worst_stall()),
                ),
                o.impact(),
            )
            .arithmetic(
                "timer-driven repairs (RTO expiries + tail loss probes)",
                timeouts as f64,
            )
            .with_evidence(timing)
            .with_evidence(lost_evidence),
        );
    } else if o.retrans_segs > 0 {
        out.push(
            Finding::new(
                Pathology::Retransmission,
                Source::Lab,
                format!(
                    "{} segments retransmitted without a timer (fast retransmit)",
                    o.retrans_segs
                ),
                // Repaired within a round trip: no stall is known, and segments sent are
                // not counted here, so the share is unknown.
                Impact::stalls(o.retrans_segs as u64, None, None),
            )
            .counter("TcpRetransSegs", o.retrans_segs),
        );
    }
    out
}

/// The reference round of [`FanIn::reference_round`], from round durations and the round at
/// line rate.
pub fn reference_round_us(round_us: &[u64], line_round_us: Option<u64>) -> Option<u64> {
    let mut sorted = round_us.to_vec();
    sorted.sort_unstable();
    let fastest = *sorted.first()?;
    let median = sorted[sorted.len() / 2];
    let measured = if median * 2 >= fastest * 3 {
        fastest
    } else {
        median
    };
    Some(match line_round_us {
        Some(line) if line > 0 => measured.min(line + line / 4),
        _ => measured,
    })
}

/// [`FanIn::time_lost_share`] from round durations and the round at line rate.
pub fn time_lost_share(round_us: &[u64], line_round_us: Option<u64>) -> f64 {
    let total: u64 = round_us.iter().sum();
    let Some(reference) = reference_round_us(round_us, line_round_us) else {
        return 0.0;
    };
    if total == 0 {
        return 0.0;
    }
    let lost: u64 = round_us.iter().map(|r| r.saturating_sub(reference)).sum();
    lost as f64 / total as f64
}

#[cfg(test)]
mod tests {
    use super::*;
    use tcpdoctor_model::merge::merge_trace_into_incast;
    use tcpdoctor_model::Severity;

    fn obs(timeouts: Vec<i64>, slow: u32) -> FanIn {
        // 100 rounds of 22 ms, `slow` of them waited a 200 ms timer on top.
        let mut round_us = vec![22_000u64; 100];
        for r in round_us.iter_mut().take(slow as usize) {
            *r += 204_000;
        }
        FanIn {
            senders: timeouts.len() as u32,
            rounds: 100,
            slow_rounds: slow,
            slow_threshold: Duration::from_millis(100),
            round_p99: Duration::from_millis(226),
            round_us,
            line_round: Some(Duration::from_millis(21)),
            rto_min: Duration::from_millis(200),
            retrans_segs: timeouts.iter().sum::<i64>() * 3,
            retrans_per_sender: timeouts.iter().map(|t| t * 3).collect(),
            timeouts_per_sender: timeouts,
            bottleneck_drops: Some(40),
        }
    }

    #[test]
    fn synchronized_timeouts_are_incast_judged_by_time_lost() {
        let mut o = obs(vec![2, 0, 1, 3, 0, 0, 1, 0], 6);
        o.retrans_per_sender = vec![9, 4, 3, 9, 0, 0, 3, 0];
        let f = fan_in(&o);
        assert_eq!(f.len(), 1);
        assert_eq!(f[0].pathology, Pathology::Incast);
        // 6 rounds of 100 waited 204 ms: 6 x 204 / (100 x 22 + 6 x 204) = 36% of the time.
        let lost = o.time_lost_share();
        assert!((lost - 1224.0 / 3424.0).abs() < 1e-9, "{lost}");
        assert_eq!(f[0].severity, Severity::Critical);
        assert_eq!(f[0].severity_rule, tcpdoctor_model::policy::Rule::TimeLost);
        assert!(
            f[0].summary.contains("5 of 8 senders lost"),
            "{}",
            f[0].summary
        );
        assert!(f[0].summary.contains("on 4 of them"), "{}", f[0].summary);
    }

    #[test]
    fn one_rare_timeout_stall_is_a_warning_a_second_is_critical() {
        // One round of 1000 waited 204 ms: 0.9% of the time, a 200 ms stall.
        let mut o = obs(vec![1, 1], 1);
        o.rounds = 1000;
        o.round_us = vec![22_000; 1000];
        o.round_us[0] += 204_000;
        let f = fan_in(&o);
        assert_eq!(f[0].pathology, Pathology::Incast);
        assert_eq!(f[0].severity, Severity::Warning);
        // The same round backed off to 1.2 s: critical however rare (the policy's long stall).
        o.round_us[0] = 22_000 + 1_200_000;
        assert_eq!(fan_in(&o)[0].severity, Severity::Critical);
    }

    #[test]
    fn low_rto_min_incast_is_still_named_with_its_cost() {
        // rto_min 5 ms: no round beyond 100 ms, but every sender lost and timers fired:
        // a fifth of the rounds waited 8 ms for a timer, the rest jittered by up to 1 ms.
        let mut o = obs(vec![3, 2, 4, 1], 0);
        o.rto_min = Duration::from_millis(5);
        o.round_us = (0..100)
            .map(|i| 22_000 + (i % 2) * 1_000 + if i % 5 == 0 { 8_000 } else { 0 })
            .collect();
        let f = fan_in(&o);
        assert_eq!(f[0].pathology, Pathology::Incast);
        assert!(
            f[0].summary.contains("rto_min remedy is in effect"),
            "{}",
            f[0].summary
        );
        // Against the median round (23 ms) the jitter does not count; the 20 stalled rounds
        // lost 7-8 ms each: 150 ms of 2,410 ms = 6% of the time, a warning.
        let lost = o.time_lost_share();
        assert!((lost - 150_000.0 / 2_410_000.0).abs() < 1e-9, "{lost}");
        assert_eq!(f[0].severity, Severity::Warning);
    }

    #[test]
    fn jitter_is_not_time_lost_but_a_stalled_majority_is() {
        // Rounds of 21-23 ms: the median is the reference, only the 23 ms rounds count.
        let r = [21_000, 22_000, 22_000, 23_000];
        assert_eq!(reference_round_us(&r, None), Some(22_000));
        assert!((time_lost_share(&r, Some(21_000)) - 1_000.0 / 88_000.0).abs() < 1e-12);
        // Most rounds waited 200 ms: the fastest round is the reference.
        let r = [21_000, 221_000, 222_000];
        assert_eq!(reference_round_us(&r, None), Some(21_000));
        assert!((time_lost_share(&r, None) - 401_000.0 / 464_000.0).abs() < 1e-12);
        // Every round waited: the line rate caps the reference.
        let r = [240_000, 280_000, 300_000];
        assert_eq!(reference_round_us(&r, Some(88_000)), Some(110_000));
        assert_eq!(reference_round_us(&[], None), None);
    }

    #[test]
    fn retransmissions_without_a_drop_at_the_bottleneck_are_spurious() {
        let mut o = obs(vec![2, 3], 0);
        o.bottleneck_drops = Some(0);
        let f = fan_in(&o);
        assert_eq!(f.len(), 1);
        assert_eq!(f[0].pathology, Pathology::SpuriousRetransmission);
        assert_eq!(f[0].severity, Severity::Info);
    }

    #[test]
    fn one_sender_or_no_timer_is_not_incast() {
        // Losses on one sender of four: one bad path, not a fan-in overflow.
        let f = fan_in(&obs(vec![2, 0, 0, 0], 2));
        assert_eq!(f[0].pathology, Pathology::RetransmitTimeout);
        let f = fan_in(&obs(vec![0, 0, 0, 0], 0));
        assert!(f.is_empty());
        let mut o = obs(vec![0, 0], 0);
        o.retrans_segs = 5;
        let f = fan_in(&o);
        assert_eq!(f[0].pathology, Pathology::Retransmission);
        assert_eq!(f[0].severity, Severity::Info);
    }

    #[test]
    fn the_traces_timeouts_fold_into_the_incast_the_run_measured() {
        let traced = || {
            vec![
                Finding::new(
                    Pathology::RetransmitTimeout,
                    Source::Trace,
                    "retransmission timeouts on 8 flow(s), 35 timeout(s)",
                    Impact::stalls(35, Some(8), Some(Duration::from_millis(204))),
                ),
                Finding::new(
                    Pathology::PacketDrop,
                    Source::Trace,
                    "3687 TCP packet(s) dropped for lack of room",
                    Impact::default(),
                ),
            ]
        };
        let mut f = fan_in(&obs(vec![2, 0, 1, 3, 0, 0, 1, 0], 6));
        merge_trace_into_incast(&mut f, traced());
        let names: Vec<Pathology> = f.iter().map(|f| f.pathology).collect();
        assert_eq!(names, [Pathology::Incast, Pathology::PacketDrop]);
        assert!(f[0].summary.contains("35 timeout(s)"), "{}", f[0].summary);
        // Without incast measured, the timeouts stand as a finding of their own.
        let mut f = Vec::new();
        merge_trace_into_incast(&mut f, traced());
        assert!(f
            .iter()
            .any(|f| f.pathology == Pathology::RetransmitTimeout));
    }
}
