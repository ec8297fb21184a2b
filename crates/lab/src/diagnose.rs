//! A run's kernel counters and eBPF trace merged into its own findings. The rules are the
//! model's ([`tcpdoctor_model::merge`]) and the trace's reconciliation
//! ([`tcpdoctor_trace::reconcile`]); what is left here needs the run's [`crate::trace::RunTrace`].

use tcpdoctor_model::merge::{absorb, add_new, merge_trace, Judge};
use tcpdoctor_model::{Finding, Pathology};

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
    add_new(findings, counted);
    tcpdoctor_model::finding::rank(findings);
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;
    use tcpdoctor_model::{Impact, Source};

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
}
