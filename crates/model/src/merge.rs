//! One cause, one finding: how findings of several sources (a census, the kernel counters, the
//! trace, a probe, the settings audit) become the list a command prints. Pure.
//!
//! Three rules, applied by [`merge`] in this order:
//!
//! 1. **A consequence is evidence of its cause.** A finding a detector proved to be the
//!    consequence of another pathology ([`Finding::consequence_of`]: SYNs resent toward a
//!    listener whose accept queue is full) folds into the finding of that cause ([`fold`]):
//!    its summary after the cause's, its evidence appended, the impacts merged and judged
//!    again by the policy (the waits it measured are the cause's cost). Without a finding of
//!    the cause beside it, it stays a finding of its own.
//! 2. **One pathology seen live is one finding.** Live findings of one pathology (the census
//!    and the counters see a full accept queue from two sides) merge: summaries joined,
//!    evidence appended, impacts merged ([`crate::Impact::merge`]) and judged by the policy,
//!    so the severity is what the combined evidence earns, never a detector's pick.
//! 3. **A setting behind harm seen is evidence, not a second finding.** A settings finding
//!    (`Source::Check`: an exposure or a budget) of a pathology that was also seen happening,
//!    judged at least as severe, folds into the live finding as evidence, without changing its
//!    impact: a critical "ports exhausted" is not followed by "Risk of ephemeral port
//!    exhaustion". Settings findings of pathologies not seen (or seen only more mildly) stay
//!    apart: they describe exposure, not events.
//!
//! Remedies are unioned, each at most once ([`crate::catalogue::same_remedy`]).
//!
//! The same primitives serve the other places that put findings together, so that each is
//! written once: [`absorb`] (the lab folds a trace's or a capture's findings into its own
//! under a label), [`take_evidence`] (the trace's reconciliation folds the counters' "SYN
//! retransmitted" into the one cause it attributed every resend to), [`join_new_parts`] (the
//! sockets census joins its busy-connection limits into a finding of the same pathology) and
//! [`add_new`] (a source's findings of pathologies not yet named).
//!
//! The lab's rules for one run live here too, beside the primitives they use: the trace's
//! findings merged into the run's own ([`merge_trace`]; for an incast run,
//! [`merge_trace_into_incast`]), resends a capture explains folded into its collision
//! ([`fold_resends_the_capture_explains`]), and a full accept queue's unanswered requests
//! folded into it ([`fold_overflow_consequences`]).

use crate::finding::{Evidence, Finding, Pathology, Source};

/// Folds `consequence` into `cause`: the cause's summary gains "consequence: <title>:
/// <summary>", its evidence gains the consequence's, and its impact is the two merged, judged
/// again by the policy. The cause's explanation and remedies stay: fixing the cause is the
/// remedy of its consequences.
pub fn fold(cause: &mut Finding, consequence: Finding) {
    let impact = cause.impact.merge(&consequence.impact);
    let mut merged = cause.clone().with_impact(impact);
    merged.summary = format!(
        "{}; consequence: {}: {}",
        cause.summary,
        consequence.pathology.entry().title,
        consequence.summary
    );
    merged.evidence.extend(consequence.evidence);
    *cause = merged;
}

/// Merges two live findings of one pathology into `g` (rule 2).
fn join(g: &mut Finding, f: Finding) {
    let impact = g.impact.merge(&f.impact);
    let mut merged = g.clone().with_impact(impact);
    merged.summary = format!("{}; {}", g.summary, f.summary);
    merged.evidence.extend(f.evidence);
    merged.add_remedies(&f.remedies);
    *g = merged;
}

/// Folds a settings finding into the live finding of its pathology (rule 3): evidence only.
fn attach_setting(g: &mut Finding, s: Finding) {
    g.evidence.push(Evidence::Examples {
        what: format!("{} (settings audit)", s.title()),
        items: vec![s.summary],
    });
    g.evidence.extend(s.evidence);
    g.add_remedies(&s.remedies);
}

/// Whether folding a finding into another judges the impact again.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Judge {
    /// The impacts are merged and the policy judges the result.
    Again,
    /// The host finding's impact stays (the folded findings are evidence only).
    Keep,
}

/// Folds `others` into `g`: `g`'s summary gains "; <label>: <their summaries, joined by '; '>",
/// its evidence theirs, and with [`Judge::Again`] its impact theirs merged and judged again.
/// Nothing happens when `others` is empty.
pub fn absorb(g: &mut Finding, label: &str, others: Vec<Finding>, judge: Judge) {
    if others.is_empty() {
        return;
    }
    let summaries: Vec<&str> = others.iter().map(|o| o.summary.as_str()).collect();
    let mut merged = g.clone();
    merged.summary = format!("{}; {label}: {}", g.summary, summaries.join("; "));
    for o in others {
        if judge == Judge::Again {
            let impact = merged.impact.merge(&o.impact);
            merged = merged.with_impact(impact);
        }
        merged.evidence.extend(o.evidence);
    }
    *g = merged;
}

/// Adds `other`'s evidence to `g` and merges its impact, judged again; `g`'s summary stays.
pub fn take_evidence(g: &mut Finding, other: &Finding) {
    let impact = g.impact.merge(&other.impact);
    *g = g.clone().with_impact(impact);
    g.evidence.extend(other.evidence.iter().cloned());
}

/// Joins `f` into `g` (one pathology): the impacts merged and judged again, the evidence
/// appended, and of `f`'s summary (parts separated by "; ") the parts `g`'s does not already
/// say appended, so each thing is said once.
pub fn join_new_parts(g: &mut Finding, f: Finding) {
    let extra: Vec<&str> = f
        .summary
        .split("; ")
        .filter(|part| !g.summary.contains(part))
        .collect();
    let mut joined = g.clone().with_impact(g.impact.merge(&f.impact));
    joined.summary = format!("{}; {}", g.summary, extra.join("; "));
    joined.evidence.extend(f.evidence);
    *g = joined;
}

/// Appends the findings of `more` whose pathology `findings` does not name yet (unranked).
pub fn add_new(findings: &mut Vec<Finding>, more: Vec<Finding>) {
    for f in more {
        if !findings.iter().any(|g| g.pathology == f.pathology) {
            findings.push(f);
        }
    }
}

fn live(f: &Finding) -> bool {
    f.source != Source::Check
}

/// Rule 1 alone, for a command that builds its own list: every finding proved a consequence
/// of a cause ([`Finding::consequence_of`]) whose finding is in `findings` folds into it
/// ([`fold`]); a consequence without its cause beside it stays a finding of its own. Used
/// where a command proves the consequence from its own evidence: analyze (a connect still in
/// its SYN ladder at the capture's end beside completed resends), probe (the same at the
/// run's end) and the lab (requests into connections a full accept queue never accepted).
pub fn fold_consequences(findings: &mut Vec<Finding>) {
    let causes: Vec<_> = findings
        .iter()
        .filter(|f| live(f) && f.consequence_of.is_none())
        .map(|f| f.pathology)
        .collect();
    let (consequences, rest): (Vec<Finding>, Vec<Finding>) = std::mem::take(findings)
        .into_iter()
        .partition(|f| f.consequence_of.is_some_and(|c| causes.contains(&c)));
    *findings = rest;
    fold_each(findings, consequences);
}

/// Folds each consequence into the first live finding of its cause, which must be there.
fn fold_each(out: &mut [Finding], consequences: Vec<Finding>) {
    for c in consequences {
        let cause = c.consequence_of.expect("a consequence");
        let g = out
            .iter_mut()
            .find(|g| live(g) && g.pathology == cause)
            .expect("a cause present among the live findings");
        fold(g, c);
    }
}

/// The findings of several sources as one list: one finding per cause (module docs).
/// Unranked: the report ranks them.
pub fn merge(found: Vec<Finding>) -> Vec<Finding> {
    // Rule 2 first, over what is not a consequence of a cause that is present, so that each
    // consequence folds into the one merged finding of its cause.
    let causes: Vec<_> = found
        .iter()
        .filter(|f| live(f) && f.consequence_of.is_none())
        .map(|f| f.pathology)
        .collect();
    let (consequences, rest): (Vec<Finding>, Vec<Finding>) = found
        .into_iter()
        .partition(|f| f.consequence_of.is_some_and(|c| causes.contains(&c)));
    let mut out: Vec<Finding> = Vec::with_capacity(rest.len());
    let mut settings: Vec<Finding> = Vec::new();
    for f in rest {
        if !live(&f) {
            settings.push(f);
            continue;
        }
        match out.iter_mut().find(|g| g.pathology == f.pathology) {
            Some(g) => join(g, f),
            None => out.push(f),
        }
    }
    // Rule 1.
    fold_each(&mut out, consequences);
    // Rule 3.
    for s in settings {
        // Only into harm judged at least as severe: a warning exposure is not hidden under an
        // informational count of the same pathology.
        match out
            .iter_mut()
            .find(|g| live(g) && g.pathology == s.pathology && g.severity >= s.severity)
        {
            Some(g) => attach_setting(g, s),
            None => out.push(s),
        }
    }
    out
}

// The rules of a lab run: its own measurement, the eBPF trace over its namespaces, the
// kernel counters of each namespace and a capture of its traffic, put together as one finding
// per cause (`tcpdoctor-lab` measures, these judge).

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
    crate::finding::rank(findings);
}

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
    crate::finding::rank(findings);
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
///
/// The requests a probe saw wait for the server (`server_response`) waited in the same
/// queue: a server that takes connections more slowly than they come both keeps them queued
/// and overflows the queue. One cause (the server cannot keep up with the offered load), so
/// that finding folds into the overflow's whatever its count. Measured: a one-thread server
/// (backlog 2, 100 ms per request) under `probe --mode crr -c 8` named
/// accept_queue_overflow (CRITICAL) and server_response (48 of 59 requests waited ~401 ms,
/// WARNING) as two findings.
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
    let dropped = touched > 0 && touched <= overflows;
    let queued =
        |f: &Finding| f.source == Source::Probe && f.pathology == Pathology::ServerResponse;
    if !dropped && !findings.iter().any(queued) {
        return;
    }
    for f in findings.iter_mut() {
        if (dropped && consequence(f)) || queued(f) {
            f.consequence_of = Some(Pathology::AcceptQueueOverflow);
        }
    }
    fold_consequences(findings);
    crate::finding::rank(findings);
}

/// One cause, one finding: retransmission timeouts and retransmissions without a timeout
/// (fast retransmit, loss probes) of one source and window are one host's losses repaired
/// two ways; that source cannot tell one loss from another, so the repairs join the
/// timeouts' finding (the stall is the harm) as evidence, their impacts judged together.
/// A fold step: `out` holds the findings so far, `f` is the next. Measured: a sender of
/// `lab incast --senders 8` named retransmit_timeout (TcpExtTCPTimeouts +2) and
/// retransmission (TcpExtTCPFastRetrans +37) as two warnings for the bottleneck's drops, in
/// its counters and in its trace.
pub fn join_loss_repairs(mut out: Vec<Finding>, f: Finding) -> Vec<Finding> {
    let pair = |a: Pathology, b: Pathology| {
        (a == Pathology::RetransmitTimeout && b == Pathology::Retransmission)
            || (a == Pathology::Retransmission && b == Pathology::RetransmitTimeout)
    };
    match out
        .iter()
        .position(|g| g.source == f.source && pair(g.pathology, f.pathology))
    {
        Some(i) => {
            let other = out.remove(i);
            let (mut timeouts, repairs) = if f.pathology == Pathology::RetransmitTimeout {
                (f, other)
            } else {
                (other, f)
            };
            absorb(
                &mut timeouts,
                "losses also repaired without a timeout",
                vec![repairs],
                Judge::Again,
            );
            out.insert(i, timeouts);
        }
        None => out.push(f),
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::finding::Severity;
    use crate::policy::{Impact, Rule};
    use std::time::Duration;

    fn f(p: Pathology, impact: Impact, src: Source, s: &str) -> Finding {
        Finding::new(p, src, s, impact).counter(s, 1)
    }

    #[test]
    fn absorb_labels_the_folded_summaries_and_judges_only_when_asked() {
        let host = || {
            f(
                Pathology::Incast,
                Impact::stalls(1, Some(100), None),
                Source::Lab,
                "incast",
            )
        };
        let long = || {
            f(
                Pathology::RetransmitTimeout,
                Impact::stalls(20, None, Some(Duration::from_secs(3))),
                Source::Trace,
                "rto",
            )
        };
        let mut kept = host();
        absorb(&mut kept, "trace", vec![long(), long()], Judge::Keep);
        assert_eq!(kept.summary, "incast; trace: rto; rto");
        assert_eq!(kept.evidence.len(), 3);
        assert_eq!(kept.severity, host().severity);
        let mut judged = host();
        absorb(&mut judged, "trace", vec![long()], Judge::Again);
        assert!(judged.severity > host().severity, "{:?}", judged.severity);
        let mut none = host();
        absorb(&mut none, "trace", Vec::new(), Judge::Again);
        assert_eq!(none.summary, "incast");
    }

    #[test]
    fn take_evidence_keeps_the_summary_and_join_new_parts_says_each_part_once() {
        let mut g = f(
            Pathology::SlowReader,
            Impact::stalls(1, Some(40), None),
            Source::Sockets,
            "zero window; reader pid 7",
        );
        let other = f(
            Pathology::SlowReader,
            Impact::stalls(5, None, Some(Duration::from_secs(2))),
            Source::Counters,
            "reader pid 7; writer blocked",
        );
        let mut t = g.clone();
        take_evidence(&mut t, &other);
        assert_eq!(t.summary, g.summary);
        assert_eq!(t.evidence.len(), 2);
        assert_eq!(t.impact, g.impact.merge(&other.impact));
        join_new_parts(&mut g, other);
        assert_eq!(g.summary, "zero window; reader pid 7; writer blocked");
        let mut list = vec![g];
        add_new(
            &mut list,
            vec![
                f(
                    Pathology::SlowReader,
                    Impact::none(),
                    Source::Trace,
                    "again",
                ),
                f(Pathology::Incast, Impact::none(), Source::Trace, "new"),
            ],
        );
        assert_eq!(list.len(), 2);
        assert_eq!(list[1].summary, "new");
    }

    #[test]
    fn live_findings_of_one_pathology_merge_settings_stay_apart() {
        let merged = merge(vec![
            // One census: 1 of 40 sockets at a zero window, no stall seen yet (warning).
            f(
                Pathology::SlowReader,
                Impact::stalls(1, Some(40), None),
                Source::Sockets,
                "zero window",
            ),
            f(
                Pathology::RiskySetting,
                Impact::none(),
                Source::Check,
                "rmem_max",
            ),
            f(
                Pathology::SynRetransmit,
                Impact::stalls(3, Some(1000), None),
                Source::Counters,
                "syn",
            ),
            // The counters saw zero-window drops for 2 s: the merged impact is judged anew.
            f(
                Pathology::SlowReader,
                Impact::stalls(5, None, Some(Duration::from_secs(2))),
                Source::Counters,
                "drops",
            ),
        ]);
        assert_eq!(merged.len(), 3);
        let sr = &merged[0];
        assert_eq!(sr.source, Source::Sockets);
        assert_eq!(sr.severity, Severity::Critical);
        assert_eq!(sr.severity_rule, Rule::LongStall);
        assert_eq!(sr.impact.affected, 5);
        assert_eq!(sr.summary, "zero window; drops");
        assert_eq!(sr.evidence.len(), 2);
        assert_eq!(merged[2].source, Source::Check);
        assert_eq!(merged[2].severity, Severity::Info);
        // A merge never leaves a severity the policy would not give the merged impact.
        for m in &merged {
            assert_eq!(m.severity, m.impact.severity(), "{m:?}");
        }
    }

    #[test]
    fn syn_resends_proven_caused_by_a_full_accept_queue_are_evidence_of_the_overflow() {
        // Issue 21, defect 4: a listener with backlog 1 that never accepts. The census names
        // the overflow (1 s per dropped SYN) and the connects in SYN_SENT toward it (waiting
        // 5 s and more); the counters add ListenOverflows.
        let overflow = f(
            Pathology::AcceptQueueOverflow,
            Impact::stalls(1, None, Some(Duration::from_secs(1))),
            Source::Sockets,
            "full accept queue",
        );
        let counted = f(
            Pathology::AcceptQueueOverflow,
            Impact::stalls(462, None, Some(Duration::from_secs(1))),
            Source::Counters,
            "TcpExtListenOverflows +462",
        );
        let resent = f(
            Pathology::SynRetransmit,
            Impact::stalls(216, Some(216), Some(Duration::from_secs(5))),
            Source::Sockets,
            "216 connects in SYN_SENT toward it",
        )
        .consequence_of(Pathology::AcceptQueueOverflow);
        let merged = merge(vec![resent, overflow, counted]);
        assert_eq!(merged.len(), 1, "{merged:#?}");
        let m = &merged[0];
        assert_eq!(m.pathology, Pathology::AcceptQueueOverflow);
        assert!(
            m.summary
                .contains("consequence: SYN retransmitted: 216 connects"),
            "{}",
            m.summary
        );
        // The connects' 5 s wait is the overflow's cost.
        assert_eq!(m.impact.worst_stall(), Some(Duration::from_secs(5)));
        assert_eq!(m.impact.affected, 462);
        assert_eq!(m.severity, m.impact.severity());
        assert_eq!(m.evidence.len(), 3);
        assert_eq!(m.consequence_of, None);
    }

    #[test]
    fn settings_findings_of_a_pathology_not_seen_stay_apart() {
        let budget = f(
            Pathology::PortExhaustion,
            Impact::none(),
            Source::Check,
            "budget",
        );
        let reuse = f(
            Pathology::PortExhaustion,
            Impact::none(),
            Source::Check,
            "reuse",
        );
        let merged = merge(vec![budget, reuse]);
        assert_eq!(merged.len(), 2, "{merged:#?}");
    }

    #[test]
    fn a_risk_is_not_hidden_under_a_milder_finding_of_its_pathology() {
        // TcpExtTCPTimeWaitOverflow moved once (info) and the range is narrow (a warning).
        let counted = f(
            Pathology::PortExhaustion,
            Impact::stalls(1, None, None),
            Source::Counters,
            "TcpExtTCPTimeWaitOverflow +1",
        );
        let risk = f(
            Pathology::PortExhaustion,
            Impact::budget(1.0).exposure(),
            Source::Check,
            "200 ports",
        );
        assert_eq!(counted.severity, Severity::Info);
        assert_eq!(risk.severity, Severity::Warning);
        let merged = merge(vec![counted, risk]);
        assert_eq!(merged.len(), 2, "{merged:#?}");
        assert!(merged.iter().any(|m| m.severity == Severity::Warning));
    }

    #[test]
    fn a_consequence_without_its_cause_stays_a_finding() {
        let resent = f(
            Pathology::SynRetransmit,
            Impact::stalls(2, Some(2), Some(Duration::from_secs(1))),
            Source::Sockets,
            "syn",
        )
        .consequence_of(Pathology::AcceptQueueOverflow);
        // A settings finding of the cause is not the cause seen.
        let setting = f(
            Pathology::AcceptQueueOverflow,
            Impact::none(),
            Source::Check,
            "backlog 1",
        );
        let merged = merge(vec![resent, setting]);
        assert_eq!(merged.len(), 2);
        assert_eq!(merged[0].pathology, Pathology::SynRetransmit);
        assert_eq!(
            merged[0].consequence_of,
            Some(Pathology::AcceptQueueOverflow)
        );
    }

    #[test]
    fn a_setting_behind_harm_seen_is_evidence_not_a_second_finding() {
        // Issue 21, defect 7: ports exhausted (critical) and the narrow range that exposes
        // the host to it (a risk) are one finding; the remedies say each thing once.
        let seen = Finding::new(
            Pathology::PortExhaustion,
            Source::Sockets,
            "200 of 200 ports toward 10.0.0.1:80 held",
            Impact::budget(1.0),
        );
        let risk = Finding::new(
            Pathology::PortExhaustion,
            Source::Check,
            "200 ports in 40000-40199",
            Impact::budget(1.0).exposure(),
        )
        .setting("net.ipv4.ip_local_port_range", "40000 40199")
        .with_first_remedy(crate::Remedy::new(
            "Widen the range: sysctl -w net.ipv4.ip_local_port_range=\"32768 60999\".",
        ));
        let merged = merge(vec![risk, seen]);
        assert_eq!(merged.len(), 1, "{merged:#?}");
        let m = &merged[0];
        assert_eq!(m.source, Source::Sockets);
        assert_eq!(m.severity, Severity::Critical);
        assert!(!m.impact.exposure);
        assert!(m.evidence.iter().any(|e| matches!(
            e,
            Evidence::Setting { name, .. } if name == "net.ipv4.ip_local_port_range"
        )));
        let ranges = m
            .remedies
            .iter()
            .filter(|r| r.action.contains("ip_local_port_range"))
            .count();
        assert_eq!(ranges, 1, "{:#?}", m.remedies);
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
        // The server's time is the same queue's, whatever the count.
        let slow = Finding::new(
            Pathology::ServerResponse,
            Source::Probe,
            "48 of 59 requests waited ~401ms for the server",
            Impact::stalls(48, Some(59), Some(Duration::from_millis(800))),
        );
        let mut f = vec![no_reply(), rto(), overflow(), slow];
        fold_overflow_consequences(&mut f, &counters(10));
        assert_eq!(f.len(), 3, "{f:#?}");
        let o = f
            .iter()
            .find(|f| f.pathology == Pathology::AcceptQueueOverflow);
        assert!(
            o.unwrap().summary.contains("~401ms for the server"),
            "{f:#?}"
        );
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
