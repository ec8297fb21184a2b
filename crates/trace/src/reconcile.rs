//! Kernel counters reconciled with what the trace saw: counter findings with the trace's
//! attributions, so that no event is counted twice (doctor, the lab), and the counted events
//! the trace did not see ([`not_traced`], every trace report). Pure: counts in, findings and
//! counts out.

use std::collections::BTreeMap;

use tcpdoctor_model::{Evidence, Finding, Pathology};

use crate::attribute::Resent;

/// The tracepoint every SYN resend passes (as [`crate::loader`] attaches it).
const RETRANSMIT_HOOK: &str = "tcp_retransmit_skb";
/// The tracepoint every SYN-ACK resend passes.
const SYNACK_HOOK: &str = "tcp_retransmit_synack";
/// The kernel counter of SYN and SYN-ACK resends.
const SYN: &str = "TcpExtTCPSynRetrans";

/// The SYN and SYN-ACK resends `TcpExtTCPSynRetrans` counted over `kernel_counters` (per
/// namespace) beyond the `traced` ones and those the kernel skipped tracing (`missed`, per
/// tracepoint): by counter name, empty when there are none or the counters were not read.
/// The kernel sometimes runs no program for a resend and counts no skip (README, "Not every
/// event the trace misses is a counted skip").
pub fn not_traced(
    kernel_counters: &BTreeMap<String, BTreeMap<String, i64>>,
    traced: u64,
    missed: &BTreeMap<String, u64>,
) -> BTreeMap<String, u64> {
    let counted: u64 = kernel_counters
        .values()
        .map(|c| c.get(SYN).copied().unwrap_or(0).max(0) as u64)
        .sum();
    let skipped = [RETRANSMIT_HOOK, SYNACK_HOOK]
        .iter()
        .map(|h| missed.get(*h).copied().unwrap_or(0))
        .sum::<u64>();
    let gap = counted.saturating_sub(traced + skipped);
    if gap == 0 {
        return BTreeMap::new();
    }
    BTreeMap::from([(SYN.to_string(), gap)])
}

/// Counter findings reconciled with the trace's, so that no event is counted twice. The
/// SYN and SYN-ACK resends `TcpExtTCPSynRetrans` counted are the events the trace attributed
/// one by one (`syn_resends`, per pathology: a stale-ACK race, a TIME_WAIT collision, a full
/// accept queue, or unexplained): the counter's own "SYN retransmitted" finding gives way
/// to the trace's findings. When one pathology explains every resend, the counter finding
/// merges into it (both evidences, the merged impact judged by the policy); when several
/// share them, each gets its part as evidence. Resends the trace did not attribute (records
/// lost, resends the kernel skipped tracing: `missed`, per tracepoint, as
/// [`crate::session::Outcome::missed_events`], or resends it ran no program for with no
/// skip reported: `unseen`, as [`not_traced`] gives them) stay a counter finding of their
/// own, judged on their number only, which says how many the trace could not see and why.
/// `at_edges`: SYN resends the trace saw outside the counters' window (before it opened or
/// after it closed, [`crate::session::Outcome::syn_traced_at_edges`]): the trace's counts
/// exceed the counter's by up to that many, and the evidence says so.
#[allow(clippy::too_many_arguments)]
pub fn reconcile(
    counted: Vec<Finding>,
    traced: &mut [Finding],
    syn_resends: &BTreeMap<Pathology, u64>,
    delta: &BTreeMap<String, i64>,
    missed: &BTreeMap<String, u64>,
    unseen: u64,
    at_edges: u64,
    window: tcpdoctor_model::counters::Window,
) -> Vec<Finding> {
    let syn = delta.get(SYN).copied().unwrap_or(0).max(0) as u64;
    let attributed: u64 = syn_resends.values().sum();
    let explained = attributed.min(syn);
    if explained == 0 {
        return counted;
    }
    let (syn_findings, mut out): (Vec<Finding>, Vec<Finding>) = counted
        .into_iter()
        .partition(|f| f.pathology == Pathology::SynRetransmit);
    let causes: Vec<(Pathology, u64)> = syn_resends
        .iter()
        .filter(|(_, &n)| n > 0)
        .map(|(&p, &n)| (p, n))
        .collect();
    let sole = (causes.len() == 1 && explained == syn).then(|| causes[0].0);
    for f in traced.iter_mut() {
        let Some(&(_, n)) = causes.iter().find(|(p, _)| *p == f.pathology) else {
            continue;
        };
        // Issue 21, defect 8: "16 resend(s)" beside "TcpExtTCPSynRetrans +10" said nothing
        // of what each counts.
        let edges = if at_edges > 0 {
            format!(
                "; up to {at_edges} SYN resend(s) traced at its edges, after the trace attached and before the counters opened or after they closed"
            )
        } else {
            String::new()
        };
        let mut g = f.clone().arithmetic(
            format!(
                "resends the trace attributed to this cause over its whole span ({SYN} counted +{syn} in the counters' window inside it{edges})"
            ),
            n as f64,
        );
        if sole == Some(f.pathology) {
            for c in &syn_findings {
                tcpdoctor_model::merge::take_evidence(&mut g, c);
            }
        }
        *f = g;
    }
    let residual = syn - explained;
    if residual > 0 {
        let mut rest = BTreeMap::new();
        rest.insert(SYN.to_string(), residual as i64);
        if let Some(&opens) = delta.get("TcpActiveOpens") {
            rest.insert("TcpActiveOpens".to_string(), opens);
        }
        for f in tcpdoctor_model::counters::findings(&rest, window) {
            if f.pathology == Pathology::SynRetransmit {
                let mut f = f.arithmetic(
                    format!("{SYN} +{syn} - {explained} resends the trace attributed to a cause"),
                    residual as f64,
                );
                f.summary = format!("{} (not attributed by the trace)", f.summary);
                // Why the trace did not see them: each kind it can tell, when there were any.
                let hook = |h: &str| missed.get(h).copied().unwrap_or(0);
                let gaps = [
                    (
                        hook(RETRANSMIT_HOOK),
                        format!("retransmissions of any kind the kernel did not trace ({RETRANSMIT_HOOK} already running on that CPU)"),
                    ),
                    (
                        hook(SYNACK_HOOK),
                        format!("SYN-ACK resends the kernel did not trace ({SYNACK_HOOK} already running on that CPU)"),
                    ),
                    (
                        unseen,
                        format!("SYN and SYN-ACK resends {SYN} counted that the kernel did not trace, no skip reported (it ran no trace program for them)"),
                    ),
                ];
                for (n, why) in gaps {
                    if n > 0 {
                        f = f.arithmetic(why, n as f64);
                    }
                }
                out.push(f);
            }
        }
    }
    out
}

/// Counter findings of data loss whose every counted event the trace explained as another
/// finding's consequence, folded into that finding as evidence. `TcpRetransSegs` counts SYN
/// resends and every data or FIN resend, `TcpExtTCPTimeouts` SYN resends and timer resends;
/// when the SYN resends (`TcpExtTCPSynRetrans`) and the resends the trace put down to one cause
/// (`resent`, [`crate::attribute::Summary::consequence_resends`]: data sent into a connection a
/// full accept queue never took) make up the whole count, the counter's "retransmission"
/// finding names a loss that was not one: its counters become the cause's evidence. Call after
/// [`reconcile`], on the counter findings it left.
pub fn consequences(
    counted: Vec<Finding>,
    traced: &mut [Finding],
    resent: &BTreeMap<Pathology, Resent>,
    delta: &BTreeMap<String, i64>,
    window: tcpdoctor_model::counters::Window,
) -> Vec<Finding> {
    let (timeouts, other) = resent
        .values()
        .fold((0, 0), |(t, o), r| (t + r.timeouts, o + r.other));
    // One cause only: with several, which counted event is whose cannot be told.
    let cause = match resent.keys().collect::<Vec<_>>()[..] {
        [&p] if timeouts + other > 0 => p,
        _ => return counted,
    };
    let get = |n: &str| delta.get(n).copied().unwrap_or(0).max(0) as u64;
    let syn = get(SYN);
    // What of each counter the SYN resends and the cause's resends account for; a lost
    // retransmission is theirs when every timeout is (the connection was never taken).
    let timeouts_left = get(TIMEOUTS).saturating_sub(syn + timeouts);
    let explained = |name: &str, d: u64| match name {
        RETRANS_SEGS => Some((syn + timeouts + other).min(d)),
        TIMEOUTS => Some((syn + timeouts).min(d)),
        LOST_RETRANSMIT => Some(if timeouts_left == 0 { d } else { 0 }),
        _ => None,
    };
    let Some(at) = traced.iter().position(|g| g.pathology == cause) else {
        return counted;
    };
    let mut out = Vec::new();
    for f in counted {
        let counters: Vec<(String, u64)> = f
            .evidence
            .iter()
            .filter_map(|e| match e {
                Evidence::Counter { name, delta } => Some((name.clone(), (*delta).max(0) as u64)),
                _ => None,
            })
            .collect();
        let loss = matches!(
            f.pathology,
            Pathology::Retransmission | Pathology::RetransmitTimeout
        );
        let parts: Option<Vec<(String, u64, u64)>> = counters
            .iter()
            .map(|(n, d)| explained(n, *d).map(|x| (n.clone(), *d, x)))
            .collect();
        let Some(parts) = parts.filter(|p| loss && !p.is_empty()) else {
            out.push(f);
            continue;
        };
        let g = &mut traced[at];
        let mut rest = delta.clone();
        rest.insert(SYN.to_string(), 0);
        for (name, d, x) in &parts {
            if *x == 0 {
                continue;
            }
            *g = g.clone().arithmetic(
                format!(
                    "{name} +{d}: {x} of them {}, the resends of data or a FIN the trace found on connections this cause left without a peer (none of them a loss of its own)",
                    match name.as_str() {
                        LOST_RETRANSMIT => "lost again on those connections".to_string(),
                        TIMEOUTS => format!("{SYN} +{syn} and {timeouts} timer resend(s)"),
                        _ => format!("{SYN} +{syn} and {timeouts} timer and {other} other resend(s)"),
                    }
                ),
                *x as f64,
            );
            rest.insert(name.clone(), (d - x) as i64);
        }
        // What is left is judged on its own count, as the counters judge any delta.
        if parts.iter().any(|(_, d, x)| d > x) {
            if let Some(left) = tcpdoctor_model::counters::findings(&rest, window)
                .into_iter()
                .find(|h| h.pathology == f.pathology)
            {
                let formula = parts
                    .iter()
                    .filter(|(_, d, x)| d > x)
                    .map(|(n, d, x)| format!("{n} +{d} - {x} put down to {}", cause.name()))
                    .collect::<Vec<_>>()
                    .join(", ");
                let n: u64 = parts.iter().map(|(_, d, x)| d - x).sum();
                out.push(left.arithmetic(formula, n as f64));
            }
        }
    }
    out
}

/// Segments retransmitted for any reason (SYNs included).
const RETRANS_SEGS: &str = "TcpRetransSegs";
/// Retransmission timer expiries (SYNs included).
const TIMEOUTS: &str = "TcpExtTCPTimeouts";
/// Retransmissions lost again.
const LOST_RETRANSMIT: &str = "TcpExtTCPLostRetransmit";

#[cfg(test)]
mod tests {
    fn syn_counted(per_ns: &[i64]) -> BTreeMap<String, BTreeMap<String, i64>> {
        per_ns
            .iter()
            .enumerate()
            .map(|(i, &n)| (format!("ns{i}"), BTreeMap::from([(SYN.to_string(), n)])))
            .collect()
    }

    #[test]
    fn resends_the_kernel_counted_beyond_the_traced_and_skipped_are_not_traced() {
        let none = BTreeMap::new();
        // 5 counted over two namespaces, 4 traced, none skipped: 1 unseen.
        assert_eq!(
            not_traced(&syn_counted(&[3, 2]), 4, &none),
            BTreeMap::from([(SYN.to_string(), 1)])
        );
        // The same with one skip on the SYN-ACK hook: all explained.
        let skipped = BTreeMap::from([(SYNACK_HOOK.to_string(), 1)]);
        assert!(not_traced(&syn_counted(&[3, 2]), 4, &skipped).is_empty());
        // More traced than counted (a resend straddling the window): nothing unseen.
        assert!(not_traced(&syn_counted(&[2]), 4, &none).is_empty());
        // Counters not read (--all-netns): unknown, so nothing is claimed.
        assert!(not_traced(&BTreeMap::new(), 4, &none).is_empty());
    }

    use super::*;
    use std::time::Duration;
    use tcpdoctor_model::{Impact, Source};

    #[test]
    fn syn_resends_the_trace_attributed_are_not_counted_twice() {
        let w = tcpdoctor_model::counters::Window {
            length: Some(Duration::from_secs(2)),
            rto_floor: None,
        };
        let delta: BTreeMap<String, i64> = [
            ("TcpExtTCPSynRetrans".to_string(), 5),
            ("TcpActiveOpens".to_string(), 40),
        ]
        .into();
        let counted = || tcpdoctor_model::counters::findings(&delta, w);
        assert!(counted()
            .iter()
            .any(|f| f.pathology == Pathology::SynRetransmit));
        let race = || {
            vec![Finding::new(
                Pathology::StaleAckRace,
                Source::Trace,
                "stale ACK",
                Impact::stalls(5, Some(40), Some(Duration::from_millis(3))),
            )]
        };
        // Every resend attributed to the race: one finding, the trace's, with the counter.
        let mut traced = race();
        let all: BTreeMap<Pathology, u64> = [(Pathology::StaleAckRace, 5)].into();
        let rest = reconcile(
            counted(),
            &mut traced,
            &all,
            &delta,
            &BTreeMap::new(),
            0,
            0,
            w,
        );
        assert!(rest.iter().all(|f| f.pathology != Pathology::SynRetransmit));
        let ev = format!("{:?}", traced[0].evidence);
        assert!(ev.contains("TcpExtTCPSynRetrans"), "{ev}");
        assert_eq!(traced[0].severity, traced[0].impact.severity());
        // Issue 21, defect 8: more resends traced than counted says where the others were.
        let mut traced = race();
        let more: BTreeMap<Pathology, u64> = [(Pathology::StaleAckRace, 7)].into();
        reconcile(
            counted(),
            &mut traced,
            &more,
            &delta,
            &BTreeMap::new(),
            0,
            2,
            w,
        );
        let ev = format!("{:?}", traced[0].evidence);
        assert!(
            ev.contains("over its whole span (TcpExtTCPSynRetrans counted +5 in the counters' window inside it; up to 2 SYN resend(s) traced at its edges"),
            "{ev}"
        );
        // Three of five attributed, the kernel having skipped two retransmissions: the other
        // two stay a counter finding of their own, which says what the trace could not see.
        let mut traced = race();
        let some: BTreeMap<Pathology, u64> = [(Pathology::StaleAckRace, 3)].into();
        let skipped: BTreeMap<String, u64> = [("tcp_retransmit_skb".to_string(), 2)].into();
        let rest = reconcile(counted(), &mut traced, &some, &delta, &skipped, 0, 0, w);
        let syn: Vec<_> = rest
            .iter()
            .filter(|f| f.pathology == Pathology::SynRetransmit)
            .collect();
        assert_eq!(syn.len(), 1);
        assert!(
            syn[0].summary.contains("not attributed by the trace"),
            "{}",
            syn[0].summary
        );
        assert_eq!(syn[0].impact.affected, 2, "{:?}", syn[0].impact);
        let ev = format!("{:?}", syn[0].evidence);
        assert!(ev.contains("did not trace"), "{ev}");
        // The evidence of the counter finding left when `unseen` resends had no program run.
        let evidence = |unseen: u64| {
            let rest = reconcile(
                counted(),
                &mut race(),
                &some,
                &delta,
                &BTreeMap::new(),
                unseen,
                0,
                w,
            );
            format!("{:?}", rest.iter().map(|f| &f.evidence).collect::<Vec<_>>())
        };
        // Nothing skipped: no such evidence.
        assert!(!evidence(0).contains("did not trace"), "{}", evidence(0));
        // Two the kernel ran no program for, no skip reported: the finding says so.
        assert!(
            evidence(2).contains("did not trace, no skip reported"),
            "{}",
            evidence(2)
        );
        // Nothing attributed: the counters' findings as they were.
        let rest = reconcile(
            counted(),
            &mut race(),
            &BTreeMap::new(),
            &delta,
            &BTreeMap::new(),
            0,
            0,
            w,
        );
        assert_eq!(rest.len(), counted().len());
    }
}
