//! Detectors the lab applies to what it measured. They reason from evidence only (counter
//! deltas per namespace, per-round and per-connection timings), never from which scenario ran,
//! so a scenario that fails to reproduce its pathology gets no finding for it.

use std::time::Duration;

use tcpdoctor_model::merge::{absorb, Judge};
use tcpdoctor_model::{units, Evidence, Finding, Impact, Pathology, Source};

/// A many-to-one exchange as measured: rounds of simultaneous replies from `senders` flows.
#[derive(Clone, Debug, PartialEq)]
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
            "rounds slower than {} ms (of {})",
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

/// Findings of `tcpdoctor analyze`'s detectors on a capture the lab made, and how many
/// segments they read. A capture that ends in a damaged record keeps the findings so far.
pub fn capture(path: &std::path::Path) -> crate::Result<(Vec<Finding>, u64)> {
    let reader =
        tcpdoctor_capture::reader::Reader::open(path).map_err(|e| crate::Error::Invalid {
            what: format!("capture {}", path.display()),
            detail: e.to_string(),
        })?;
    // The same two-thread path as `tcpdoctor analyze`; never stopped early.
    let stop = std::sync::atomic::AtomicBool::new(false);
    let run = tcpdoctor_analyze::pipeline::run(
        reader,
        tcpdoctor_analyze::Config::default(),
        &stop,
        |_| {},
    );
    let segments = run.analysis.totals.segments;
    Ok((run.analysis.findings, segments))
}

/// Appends `more` to `findings`, skipping pathologies already named, and ranks the result.
pub fn merge(findings: &mut Vec<Finding>, more: Vec<Finding>) {
    tcpdoctor_model::merge::add_new(findings, more);
    tcpdoctor_model::finding::rank(findings);
}

/// Merges a namespace's counter findings and the run's trace findings into the run's own,
/// the counters first reconciled with the trace ([`tcpdoctor_trace::reconcile`], as doctor
/// does): SYN resends the trace attributed to a cause (a TIME_WAIT collision, a stale ACK,
/// a full accept queue) are that cause's evidence, not a second "SYN retransmitted" finding.
/// The trace counts resends in every namespace of the run, so the counter it is reconciled
/// with is `TcpExtTCPSynRetrans` summed over the same namespaces.
pub fn merge_counted_and_traced(
    findings: &mut Vec<Finding>,
    counted: Vec<Finding>,
    counters: &std::collections::BTreeMap<String, i64>,
    window: tcpdoctor_model::counters::Window,
    trace: &crate::trace::RunTrace,
) {
    let mut traced = trace.findings.clone();
    let mut delta = counters.clone();
    if trace.missing.is_none() {
        delta.insert(
            "TcpExtTCPSynRetrans".to_string(),
            trace.syn_retrans_counted.max(0),
        );
    }
    let counted = tcpdoctor_trace::reconcile::reconcile(
        counted,
        &mut traced,
        &trace.syn_resends,
        &delta,
        &trace.missed_events,
        trace.not_traced.values().sum(),
        trace.syn_traced_at_edges,
        window,
    );
    let counted = tcpdoctor_trace::reconcile::consequences(
        counted,
        &mut traced,
        &trace.consequence_resends,
        &delta,
        window,
    );
    // Once the trace attributed resends, a "SYN retransmitted" counter finding is the
    // resends it did not (and why): its evidence joins the run's own finding of that name
    // (the probe's waits) rather than being dropped as a duplicate.
    let (residual, counted): (Vec<Finding>, Vec<Finding>) = counted.into_iter().partition(|f| {
        f.pathology == Pathology::SynRetransmit && trace.syn_resends.values().any(|&n| n > 0)
    });
    merge(findings, counted);
    match findings
        .iter_mut()
        .find(|g| g.pathology == Pathology::SynRetransmit)
    {
        Some(g) => absorb(g, "kernel counters", residual, Judge::Keep),
        None => findings.extend(residual),
    }
    merge_trace_folding_syn_cost(findings, traced, trace);
}

/// [`merge_trace`], and the run's own "connects waited for SYN retransmissions" finding
/// folded into the cause the trace put every SYN resend down to ([`syn_cost_explained`]).
pub fn merge_trace_folding_syn_cost(
    findings: &mut Vec<Finding>,
    traced: Vec<Finding>,
    trace: &crate::trace::RunTrace,
) {
    let symptom = syn_cost_explained(findings, trace);
    merge_trace(findings, traced);
    if let Some((s, cause)) = symptom {
        // The cause's own finding (from counters or the trace) may carry no time measure:
        // the waits are its cost, judged with it.
        match findings.iter_mut().find(|g| g.pathology == cause) {
            Some(g) => absorb(g, "what the resent SYNs cost", vec![s], Judge::Again),
            None => findings.push(s),
        }
        tcpdoctor_model::finding::rank(findings);
    }
}

/// Folds `others` into `g`: their summaries after `label`, their evidence appended, and
/// with `judge` their impacts merged into `g`'s and the severity judged again by the policy.
/// The capture of a run sees every packet: when analyze names the resent SYNs a collision
/// with an old connection (`time_wait_collision` or `stale_ack_race`) and finds no SYN resent
/// without an answer, a `syn_retransmit` finding from another source (the trace's "SYN
/// resent with no answer seen", when it missed the old ACK's records, or the counters' count
/// of resends) is that collision's evidence, not a second cause: folded into it, its severity
/// unchanged. Measured: a `lab timewait-collision` run whose trace saw 2 of 3 collisions
/// ranked a CRITICAL syn_retransmit before the capture's time_wait_collision.
pub fn fold_resends_the_capture_explains(findings: &mut Vec<Finding>) {
    let from_capture =
        |f: &Finding, p: &[Pathology]| f.source == Source::Analyze && p.contains(&f.pathology);
    if findings
        .iter()
        .any(|f| from_capture(f, &[Pathology::SynRetransmit]))
    {
        return;
    }
    let collision = [Pathology::TimeWaitCollision, Pathology::StaleAckRace];
    if !findings.iter().any(|f| from_capture(f, &collision)) {
        return;
    }
    let (resends, rest): (Vec<Finding>, Vec<Finding>) = std::mem::take(findings)
        .into_iter()
        .partition(|f| f.pathology == Pathology::SynRetransmit);
    *findings = rest;
    if let Some(g) = findings.iter_mut().find(|f| from_capture(f, &collision)) {
        absorb(
            g,
            "SYN resends whose answer another source did not see (the capture saw it)",
            resends,
            Judge::Keep,
        );
    }
    tcpdoctor_model::finding::rank(findings);
}

/// The run's own "connects waited for SYN retransmissions" finding (the probe's latency
/// classification) taken out when the trace put every SYN resend it saw down to one cause
/// and the kernel's count holds no other resend than ones the trace could not see (its hook
/// skipped, or no program run and no skip reported): that waiting is the cause's cost,
/// folded into its finding (cause before symptom), with the resends the trace did not see
/// as evidence whose cause is not shown. With resends the trace saw and could not
/// attribute, lost records or several causes it stays. Measured: a `lab accept-overflow`
/// run whose trace attributed 26 of 27 resends to the full queue and did not see the 27th
/// ranked the probe's CRITICAL syn_retransmit beside the overflow (1 of 3 runs beside other
/// builds).
fn syn_cost_explained(
    findings: &mut Vec<Finding>,
    trace: &crate::trace::RunTrace,
) -> Option<(Finding, Pathology)> {
    if trace.missing.is_some() || trace.syn_retrans_counted <= 0 || trace.lost_events > 0 {
        return None;
    }
    let mut causes = trace.syn_resends.iter().filter(|(_, &n)| n > 0);
    let (&cause, &n) = causes.next()?;
    let unseen = syn_resends_unseen(trace);
    if causes.next().is_some()
        || cause == Pathology::SynRetransmit
        || (n + unseen) < trace.syn_retrans_counted as u64
    {
        return None;
    }
    let i = findings
        .iter()
        .position(|f| f.pathology == Pathology::SynRetransmit)?;
    let mut cost = findings.remove(i);
    let missed = (trace.syn_retrans_counted as u64).saturating_sub(n);
    if missed > 0 {
        cost = cost.arithmetic(
            "SYN resends TcpExtTCPSynRetrans counted that the trace did not see (the kernel skipped its hook, or ran no trace program and reported no skip): their cause is not shown",
            missed as f64,
        );
    }
    Some((cost, cause))
}

/// SYN and SYN-ACK resends the kernel counted and the trace could not see: its retransmit
/// hooks skipped (their program already running on that CPU) and the resends no skip
/// explains.
fn syn_resends_unseen(trace: &crate::trace::RunTrace) -> u64 {
    let hooks: u64 = ["tcp_retransmit_skb", "tcp_retransmit_synack"]
        .iter()
        .filter_map(|h| trace.missed_events.get(*h))
        .sum();
    hooks + trace.not_traced.values().sum::<u64>()
}

/// One cause, one finding: a full accept queue on the run's server (its `TcpExtListenOverflows`
/// in `server_counters`, already a finding) drops the handshake's last ACK, so a client that
/// believes it is connected sends its request into a connection the server never accepted.
/// The probe then sees that request wait for its retransmission timer (`retransmit_timeout`)
/// or go unanswered until the run ended (`no_reply`). When the overflows are at least as many
/// as the connections those two findings touched, they are the overflow's consequences,
/// folded into its finding as evidence; more touched connections than overflows leave them
/// standing. Measured: `lab accept-overflow --duration 3s` ranked no_reply (8 requests never
/// answered, CRITICAL) and retransmit_timeout (3 replies after ~423 ms, CRITICAL) beside the
/// overflow (88 overflows) in 2 of 6 runs.
pub fn fold_overflow_consequences(
    findings: &mut Vec<Finding>,
    server_counters: &std::collections::BTreeMap<String, i64>,
) {
    let overflows = server_counters
        .get("TcpExtListenOverflows")
        .copied()
        .unwrap_or(0)
        .max(0) as u64;
    if overflows == 0
        || !findings
            .iter()
            .any(|f| f.pathology == Pathology::AcceptQueueOverflow)
    {
        return;
    }
    let consequence = |f: &Finding| {
        f.source == Source::Probe
            && matches!(
                f.pathology,
                Pathology::NoReply | Pathology::RetransmitTimeout
            )
    };
    let touched: u64 = findings
        .iter()
        .filter(|f| consequence(f))
        .map(|f| f.impact.affected)
        .sum();
    if touched == 0 || touched > overflows {
        return;
    }
    for f in findings.iter_mut().filter(|f| consequence(f)) {
        f.consequence_of = Some(Pathology::AcceptQueueOverflow);
    }
    tcpdoctor_model::merge::fold_consequences(findings);
    tcpdoctor_model::finding::rank(findings);
}

/// [`merge_trace`] for an incast run: when the run's own measurement named incast, the
/// trace's retransmission timeouts and other loss repairs are the incast's (every flow of the
/// scenario is a sender's flow into the one receiver, through the shared bottleneck), so they
/// fold into the incast finding as its evidence instead of standing as symptoms of their own.
/// As analyze folds them: evidence only, the incast's severity staying the one its measured
/// time lost gives (which already holds the timeouts' stalls), so that the same run is judged
/// alike by the lab and by analyze on its capture.
pub fn merge_trace_into_incast(findings: &mut Vec<Finding>, traced: Vec<Finding>) {
    const REPAIRS: [Pathology; 2] = [Pathology::RetransmitTimeout, Pathology::Retransmission];
    let Some(incast) = findings
        .iter_mut()
        .find(|f| f.pathology == Pathology::Incast)
    else {
        return merge_trace(findings, traced);
    };
    let (repairs, rest): (Vec<Finding>, Vec<Finding>) = traced
        .into_iter()
        .partition(|t| REPAIRS.contains(&t.pathology));
    absorb(
        incast,
        "trace, the incast's loss repairs",
        repairs,
        Judge::Keep,
    );
    merge_trace(findings, rest);
}

/// Merges the eBPF trace's findings of a run into the run's own: a pathology the lab already
/// named keeps its finding and gains the trace's summary and evidence, the two impacts merged
/// and judged by the policy (as doctor merges its sources); a pathology only the trace saw
/// is added as the trace's finding. Ranks the result.
pub fn merge_trace(findings: &mut Vec<Finding>, traced: Vec<Finding>) {
    for t in traced {
        match findings.iter_mut().find(|g| g.pathology == t.pathology) {
            Some(g) => absorb(g, "trace", vec![t], Judge::Again),
            None => findings.push(t),
        }
    }
    tcpdoctor_model::finding::rank(findings);
}

#[cfg(test)]
mod tests {
    use super::*;
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

    #[test]
    fn syn_resends_the_trace_did_not_see_are_said_on_the_runs_own_finding() {
        // The probe saw connects wait for SYN resends; the kernel counted 24, the trace
        // attributed 23 to the full accept queue and saw no skip for the 24th.
        let probe = || {
            vec![Finding::new(
                Pathology::SynRetransmit,
                Source::Probe,
                "15 of 14594 connects waited for SYN retransmissions",
                Impact::stalls(15, Some(14594), Some(Duration::from_millis(2040))),
            )]
        };
        let counters: std::collections::BTreeMap<String, i64> = [
            ("TcpExtTCPSynRetrans".to_string(), 24),
            ("TcpActiveOpens".to_string(), 14594),
        ]
        .into();
        let w = tcpdoctor_model::counters::Window {
            length: Some(Duration::from_secs(3)),
            rto_floor: None,
        };
        let trace = |unseen: u64| crate::trace::RunTrace {
            used: true,
            syn_resends: [(Pathology::AcceptQueueOverflow, 24 - unseen)].into(),
            syn_resends_attributed: 24 - unseen,
            syn_retrans_counted: 24,
            not_traced: [("TcpExtTCPSynRetrans".to_string(), unseen)]
                .into_iter()
                .filter(|(_, n)| *n > 0)
                .collect(),
            findings: vec![Finding::new(
                Pathology::AcceptQueueOverflow,
                Source::Trace,
                "SYNs dropped by a full accept queue",
                Impact::default(),
            )],
            ..Default::default()
        };
        let counted = || tcpdoctor_model::counters::findings(&counters, w);
        // The 24th unseen: the waits are still the one cause's cost, the unseen resend its
        // evidence, whose cause is not shown; no second finding for it.
        let mut f = probe();
        merge_counted_and_traced(&mut f, counted(), &counters, w, &trace(1));
        assert!(
            f.iter().all(|f| f.pathology != Pathology::SynRetransmit),
            "{f:#?}"
        );
        let ev = format!("{:?}", f[0].evidence);
        assert_eq!(f[0].pathology, Pathology::AcceptQueueOverflow);
        assert!(ev.contains("did not trace, no skip reported"), "{ev}");
        assert!(ev.contains("their cause is not shown"), "{ev}");
        // A resend the trace saw and could not attribute keeps the waits a finding of
        // their own.
        let mut seen = trace(0);
        seen.syn_resends.insert(Pathology::AcceptQueueOverflow, 22);
        seen.syn_resends.insert(Pathology::SynRetransmit, 2);
        let mut f = probe();
        merge_counted_and_traced(&mut f, counted(), &counters, w, &seen);
        assert!(
            f.iter().any(|f| f.pathology == Pathology::SynRetransmit),
            "{f:#?}"
        );
        // Every resend attributed to the one cause: the waits are its cost, folded into it.
        let mut f = probe();
        merge_counted_and_traced(&mut f, counted(), &counters, w, &trace(0));
        assert!(
            f.iter().all(|f| f.pathology != Pathology::SynRetransmit),
            "{f:#?}"
        );
        assert!(format!("{f:?}").contains("connects waited"));
    }
    #[test]
    fn a_full_queues_unanswered_and_timed_out_requests_are_its_consequences() {
        let overflow = || {
            Finding::new(
                Pathology::AcceptQueueOverflow,
                Source::Counters,
                "server namespace: TcpExtListenOverflows +88",
                Impact::stalls(88, None, None),
            )
        };
        let no_reply = || {
            Finding::new(
                Pathology::NoReply,
                Source::Probe,
                "8 requests to 10.77.0.2:5001 were accepted, never replied",
                Impact::failures(8, Some(9727)),
            )
        };
        let rto = || {
            Finding::new(
                Pathology::RetransmitTimeout,
                Source::Probe,
                "3 of 9727 replies waited ~423 ms for a retransmission timeout",
                Impact::stalls(3, Some(9727), Some(Duration::from_millis(423))),
            )
        };
        let counters = |n: i64| -> std::collections::BTreeMap<String, i64> {
            [("TcpExtListenOverflows".to_string(), n)].into()
        };
        let mut f = vec![no_reply(), rto(), overflow()];
        fold_overflow_consequences(&mut f, &counters(88));
        assert_eq!(f.len(), 1, "{f:#?}");
        assert_eq!(f[0].pathology, Pathology::AcceptQueueOverflow);
        assert!(f[0].summary.contains("never replied"), "{}", f[0].summary);
        assert!(f[0].summary.contains("423 ms"), "{}", f[0].summary);
        // More connections touched than the queue dropped handshakes of: not all its doing.
        let mut f = vec![no_reply(), rto(), overflow()];
        fold_overflow_consequences(&mut f, &counters(10));
        assert_eq!(f.len(), 3, "{f:#?}");
        // No overflow finding: nothing to fold into.
        let mut f = vec![no_reply(), rto()];
        fold_overflow_consequences(&mut f, &counters(88));
        assert_eq!(f.len(), 2, "{f:#?}");
    }

    /// docs/examples/lab.md's timewait-collision run: the trace saw 2 of 3 collisions and
    /// called the third resend a SYN with no answer (a CRITICAL syn_retransmit ranked first);
    /// the capture saw the old ACK answer every resend.
    #[test]
    fn resends_the_capture_attributes_to_a_collision_are_its_evidence() {
        let collision = Finding::new(
            Pathology::TimeWaitCollision,
            Source::Analyze,
            "3 of 4 connection attempt(s) reused a 4-tuple into TIME_WAIT",
            Impact::stalls(3, Some(4), Some(Duration::from_millis(13))),
        );
        let unanswered = Finding::new(
            Pathology::SynRetransmit,
            Source::Trace,
            "SYN resent with no answer or dropped: 1 connection(s), 1 resend(s)",
            Impact::stalls(1, None, Some(Duration::from_secs(1))),
        );
        assert_eq!(unanswered.severity, Severity::Critical);
        let mut f = vec![unanswered.clone(), collision.clone()];
        fold_resends_the_capture_explains(&mut f);
        assert_eq!(f.len(), 1, "{f:#?}");
        assert_eq!(f[0].pathology, Pathology::TimeWaitCollision);
        assert_eq!(f[0].severity, collision.severity);
        assert!(
            f[0].summary.contains("no answer or dropped"),
            "{}",
            f[0].summary
        );
        // A capture that itself saw a SYN resent without an answer keeps both findings.
        let lost = Finding::new(
            Pathology::SynRetransmit,
            Source::Analyze,
            "1 connection attempt waited for a SYN retransmission",
            Impact::stalls(1, Some(4), Some(Duration::from_secs(1))),
        );
        let mut f = vec![unanswered, collision, lost];
        fold_resends_the_capture_explains(&mut f);
        assert_eq!(f.len(), 3);
    }
}
