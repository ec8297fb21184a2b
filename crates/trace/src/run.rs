//! The eBPF trace over one run of a workload in named network namespaces (a lab scenario's
//! baseline, each remedied run): attached once the namespaces exist and before the traffic
//! starts, drained on a thread every [`POLL`] while the traffic runs, detached when it ends.
//! Each run has its own trace window and its own counts ([`RunTrace`]), so a remedy is judged
//! on what the trace saw after it, never on the baseline's events.
//!
//! What it must not do: trace outside the run's namespaces, or stop the run when tracing is
//! not possible here (no root or CAP_BPF, no kernel BTF): the run's [`RunTrace`] then says
//! what is missing and the run goes on untraced. `tcpdoctor-lab` starts a [`Tracer`] per run;
//! its counters and findings are merged with the trace's in [`crate::reconcile`].

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::thread::JoinHandle;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use tcpdoctor_model::remedy::Harm;
use tcpdoctor_model::{Finding, Pathology};
use tcpdoctor_report::fmt::tally;

use crate::attribute::{Cause, IncastEpisode, PortFailure};
use crate::loader::Unavailable;
use crate::session::{Options, Outcome, Scope, Session};

/// How often the trace's ring buffer is drained: the session's documented cadence ("every
/// few tens of milliseconds"), as doctor drains it.
pub const POLL: Duration = Duration::from_millis(50);

/// The kernel counter every SYN and SYN-ACK resend increments (`tcp_retransmit_skb` on a
/// SYN, net/ipv4/tcp_output.c): what the trace's attributed SYN resends are checked against.
pub const SYN_RETRANS: &str = "TcpExtTCPSynRetrans";

/// The kernel's drop reason for a packet a full accept queue refused
/// (`SKB_DROP_REASON_TCP_LISTEN_OVERFLOW`, include/net/dropreason-core.h), as the trace names it.
pub const LISTEN_OVERFLOW: &str = "TCP_LISTEN_OVERFLOW";

/// Whether the lab's runs are traced.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum Mode {
    /// Trace when this host allows it; else record what is missing and run untraced.
    #[default]
    Auto,
    /// Do not trace, with the reason recorded (e.g. `--no-trace`).
    Off(String),
}

/// What the trace saw in one run, or why it did not run.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct RunTrace {
    /// The run's label (`before: ...`, `after: ...`, a remedy's name).
    pub run: String,
    pub used: bool,
    /// What is missing (privileges, BTF) or why tracing was off, when not used.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub missing: Option<String>,
    /// The namespaces traced: this run's only.
    pub namespaces: Vec<String>,
    pub duration_ms: u64,
    /// Records the ring buffer had no room for: their events are counted in the kernel
    /// (`counts`) but not attributed.
    pub lost_events: u64,
    /// Events the kernel skipped per tracepoint, its program already running on that CPU:
    /// neither counted nor attributed (a SYN resend skipped this way is in
    /// `syn_retrans_counted` and not in `syn_resends_attributed`).
    pub missed_events: BTreeMap<String, u64>,
    /// Resends TcpExtTCPSynRetrans counted that the trace did not see and no skip explains
    /// ([`Outcome::not_traced`]).
    pub not_traced: BTreeMap<String, u64>,
    /// SYN and SYN-ACK resends traced at the counters' window's edges, which may be outside
    /// `syn_retrans_counted` ([`Outcome::syn_traced_at_edges`]).
    #[serde(default, skip_serializing_if = "crate::session::is_zero")]
    pub syn_traced_at_edges: u64,
    /// Events attributed to a cause, all namespaces.
    pub attributed_events: u64,
    /// Attributed events per namespace and cause.
    pub causes_by_netns: BTreeMap<String, BTreeMap<Cause, u64>>,
    /// SYN and SYN-ACK resends per pathology they were attributed to.
    pub syn_resends: BTreeMap<Pathology, u64>,
    /// Their sum: the events `TcpExtTCPSynRetrans` counts.
    pub syn_resends_attributed: u64,
    /// Data and FIN resends the trace put down to another pathology as its consequence
    /// (connections a full accept queue never took), per that pathology.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub consequence_resends: BTreeMap<Pathology, crate::attribute::Resent>,
    /// `TcpExtTCPSynRetrans` summed over the traced namespaces, over the trace's window.
    pub syn_retrans_counted: i64,
    /// connect() calls that failed with EADDRNOTAVAIL, all processes and destinations.
    pub eaddrnotavail: u64,
    /// The same per process and destination.
    pub no_local_port: Vec<PortFailure>,
    /// Several flows' retransmission timeouts into one receiver within a window.
    pub incast_episodes: Vec<IncastEpisode>,
    /// TCP drops per kernel drop-reason name, counted in the kernel.
    pub drops_by_reason: BTreeMap<String, u64>,
    /// Kernel-side event counts (exact, also for events whose records were lost).
    pub counts: BTreeMap<String, u64>,
    /// Kernel counters (nstat names) that moved in each traced namespace over the window.
    pub kernel_counters: BTreeMap<String, BTreeMap<String, i64>>,
    /// Hooks this kernel could not attach: the evidence they give is missing.
    pub unavailable: Vec<Unavailable>,
    /// The trace's findings (merged into the run's diagnosis, [`tcpdoctor_model::merge::merge_trace`]).
    #[serde(skip)]
    pub findings: Vec<Finding>,
}

impl RunTrace {
    fn missing(run: &str, namespaces: &[String], why: String) -> RunTrace {
        RunTrace {
            run: run.to_string(),
            missing: Some(why),
            namespaces: namespaces.to_vec(),
            ..RunTrace::default()
        }
    }

    fn of(
        run: &str,
        namespaces: &[String],
        o: Outcome,
        causes_by_netns: BTreeMap<String, BTreeMap<Cause, u64>>,
    ) -> RunTrace {
        let syn_resends_attributed = o.summary.syn_resends.values().sum();
        let syn_retrans_counted = o
            .kernel_counters
            .values()
            .filter_map(|c| c.get(SYN_RETRANS))
            .sum();
        RunTrace {
            run: run.to_string(),
            used: true,
            missing: None,
            namespaces: namespaces.to_vec(),
            duration_ms: o.duration_ms,
            lost_events: o.lost_events,
            missed_events: o.missed_events,
            not_traced: o.not_traced,
            syn_traced_at_edges: o.syn_traced_at_edges,
            attributed_events: o.summary.causes.values().sum(),
            causes_by_netns,
            syn_resends: o.summary.syn_resends.clone(),
            consequence_resends: o.summary.consequence_resends.clone(),
            syn_resends_attributed,
            syn_retrans_counted,
            eaddrnotavail: o.summary.no_local_port.iter().map(|p| p.failures).sum(),
            no_local_port: o.summary.no_local_port,
            incast_episodes: o.summary.incast_episodes,
            drops_by_reason: o.drops_by_reason,
            counts: o
                .counts
                .into_iter()
                .map(|(k, v)| (k.to_string(), v))
                .collect(),
            kernel_counters: o.kernel_counters,
            unavailable: o.unavailable,
            findings: o.findings,
        }
    }

    /// Attributed events of `cause`, all namespaces.
    pub fn cause(&self, cause: Cause) -> u64 {
        self.causes_by_netns
            .values()
            .filter_map(|m| m.get(&cause))
            .sum()
    }

    /// The harm of `pathology` as the trace counts it, when the trace ran and counts it:
    /// what a remedy verdict cites beside the scenario's own measurement.
    pub fn harm(&self, pathology: Pathology) -> Option<Harm> {
        if !self.used {
            return None;
        }
        let syn = |p: Pathology| self.syn_resends.get(&p).copied().unwrap_or(0);
        Some(match pathology {
            Pathology::PortExhaustion => {
                Harm::count(self.eaddrnotavail, "connects failed with EADDRNOTAVAIL")
            }
            Pathology::StaleAckRace => Harm::count(
                syn(Pathology::StaleAckRace),
                "SYNs resent after a stale ACK",
            ),
            Pathology::TimeWaitCollision => Harm::count(
                syn(Pathology::TimeWaitCollision),
                "SYNs resent after an ACK of the peer's TIME_WAIT connection",
            ),
            // What the kernel dropped for a full accept queue, counted per drop reason in the
            // kernel (SYN resends are attributed to the queue only when the listener is seen
            // full at the resend).
            Pathology::AcceptQueueOverflow => Harm::count(
                self.drops_by_reason
                    .get(LISTEN_OVERFLOW)
                    .copied()
                    .unwrap_or(0)
                    .max(syn(Pathology::AcceptQueueOverflow)),
                "packets dropped by a full accept queue (drop reason TCP_LISTEN_OVERFLOW)",
            ),
            Pathology::SynRetransmit => Harm::count(self.syn_resends_attributed, "SYNs resent"),
            Pathology::SlowReader => Harm::count(
                self.cause(Cause::ZeroWindow) + self.cause(Cause::NotReading),
                "zero-window advertisements and probes of a reader not reading",
            ),
            Pathology::Incast | Pathology::RetransmitTimeout => {
                Harm::count(self.cause(Cause::Timeout), "retransmission timeouts")
            }
            _ => return None,
        })
    }

    /// One line: what the trace attributed in this run, beside the kernel counters.
    pub fn line(&self) -> String {
        if !self.used {
            return format!(
                "not traced: {}",
                self.missing.as_deref().unwrap_or("unknown reason")
            );
        }
        let mut parts = vec![format!(
            "{} event(s) attributed, {} lost",
            self.attributed_events, self.lost_events
        )];
        if !self.missed_events.is_empty() {
            parts.push(format!(
                "skipped by the kernel (hook already running on that CPU): {}",
                tally(&self.missed_events)
            ));
        }
        if !self.not_traced.is_empty() {
            parts.push(format!(
                "counted by the kernel, not seen by the trace (no skip reported): {}",
                tally(&self.not_traced)
            ));
        }
        if self.syn_resends_attributed > 0 || self.syn_retrans_counted != 0 {
            let by = tally(self.syn_resends.iter().filter(|(_, &n)| n > 0));
            parts.push(format!(
                "{} SYN resend(s) attributed ({by}) of {SYN_RETRANS} +{}",
                self.syn_resends_attributed, self.syn_retrans_counted
            ));
        }
        if self.eaddrnotavail > 0 {
            let who: Vec<String> = self
                .no_local_port
                .iter()
                .map(|p| {
                    let proc_ = p
                        .process
                        .as_ref()
                        .map(|p| format!("{} (pid {})", p.comm, p.pid))
                        .unwrap_or_else(|| "unknown process".into());
                    format!("{proc_} -> {} x{}", p.destination, p.failures)
                })
                .collect();
            parts.push(format!(
                "{} EADDRNOTAVAIL ({})",
                self.eaddrnotavail,
                who.join(", ")
            ));
        }
        if !self.incast_episodes.is_empty() {
            parts.push(incast_part(&self.incast_episodes));
        }
        // A closing socket freeing its own queues (QUEUE_PURGE) is not a drop on the path.
        let drops = tally(
            self.drops_by_reason
                .iter()
                .filter(|(r, _)| r.as_str() != "QUEUE_PURGE"),
        );
        if !drops.is_empty() {
            parts.push(format!("drops: {drops}"));
        }
        parts.join("; ")
    }
}

/// The trace line's part on incast episodes: how many, and how many flows each counted (one
/// episode: the retransmission timeouts of several flows into one receiver within the
/// trace's window). The flows of all episodes together, as the trace's incast finding counts
/// them, can be more than any one episode's.
fn incast_part(episodes: &[IncastEpisode]) -> String {
    let flows = episodes.iter().map(|e| e.flows);
    let (least, most) = (flows.clone().min().unwrap_or(0), flows.max().unwrap_or(0));
    let each = if least == most {
        format!("{most} flows each")
    } else {
        format!("{least}-{most} flows each")
    };
    format!(
        "{} incast episode(s), {each} (an episode: timeouts of several flows into one receiver within the trace's window)",
        episodes.len()
    )
}

/// The trace of a whole scenario: one entry per run, in run order.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct LabTrace {
    /// At least one run was traced.
    pub used: bool,
    /// What is missing when no run was traced.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub missing: Option<String>,
    pub runs: Vec<RunTrace>,
}

impl LabTrace {
    pub fn of(runs: Vec<RunTrace>) -> LabTrace {
        let used = runs.iter().any(|r| r.used);
        let missing = if used {
            None
        } else {
            runs.iter().find_map(|r| r.missing.clone())
        };
        LabTrace {
            used,
            missing,
            runs,
        }
    }

    /// The runs a report lists: all but placeholders (a run with no label that was neither
    /// traced nor refused a trace).
    pub fn listed_runs(&self) -> impl Iterator<Item = &RunTrace> {
        self.runs
            .iter()
            .filter(|r| !(r.run.is_empty() && !r.used && r.missing.is_none()))
    }
}

/// A trace running over one run's namespaces.
pub struct Tracer {
    run: String,
    namespaces: Vec<String>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<Option<Collected>>>,
    missing: Option<String>,
}

type Collected = (Outcome, BTreeMap<String, BTreeMap<Cause, u64>>);

impl Tracer {
    /// Attaches the trace to `namespaces` (returns once attached, or once it is known that
    /// it cannot be) and drains it on a thread until [`Tracer::finish`].
    pub fn start(mode: &Mode, run: &str, namespaces: &[String]) -> Tracer {
        let mut t = Tracer {
            run: run.to_string(),
            namespaces: namespaces.to_vec(),
            stop: Arc::new(AtomicBool::new(false)),
            thread: None,
            missing: None,
        };
        if let Mode::Off(why) = mode {
            t.missing = Some(why.clone());
            return t;
        }
        let (tx, rx) = mpsc::channel::<Result<(), String>>();
        let stop = Arc::clone(&t.stop);
        let scope = Scope::Named(namespaces.to_vec());
        let spawned = std::thread::Builder::new().name("tdoc-trace".into()).spawn(
            move || -> Option<Collected> {
                let mut s = match Session::start(Options {
                    scope,
                    ..Options::default()
                }) {
                    Ok(s) => {
                        let _ = tx.send(Ok(()));
                        s
                    }
                    Err(e) => {
                        let _ = tx.send(Err(e.to_string()));
                        return None;
                    }
                };
                let mut by: BTreeMap<String, BTreeMap<Cause, u64>> = BTreeMap::new();
                loop {
                    let last = stop.load(Ordering::SeqCst);
                    for l in s.poll() {
                        let ns = l.netns_name.unwrap_or_else(|| l.netns.to_string());
                        *by.entry(ns).or_default().entry(l.cause).or_default() += 1;
                    }
                    if last {
                        break;
                    }
                    std::thread::sleep(POLL);
                }
                Some((s.finish(), by))
            },
        );
        let handle = match spawned {
            Ok(h) => h,
            Err(e) => {
                t.missing = Some(format!("cannot start the trace thread: {e}"));
                return t;
            }
        };
        match rx.recv() {
            Ok(Ok(())) => t.thread = Some(handle),
            Ok(Err(why)) => {
                let _ = handle.join();
                t.missing = Some(why);
            }
            Err(_) => {
                let _ = handle.join();
                t.missing = Some("the trace thread ended before attaching".into());
            }
        }
        t
    }

    /// Drains what is left, detaches, and reports this run's trace.
    pub fn finish(mut self) -> RunTrace {
        self.stop.store(true, Ordering::SeqCst);
        match self.thread.take().map(|h| h.join()) {
            Some(Ok(Some((o, by)))) => RunTrace::of(&self.run, &self.namespaces, o, by),
            Some(_) => RunTrace::missing(
                &self.run,
                &self.namespaces,
                "the trace thread failed".into(),
            ),
            None => RunTrace::missing(
                &self.run,
                &self.namespaces,
                self.missing.take().unwrap_or_default(),
            ),
        }
    }
}

impl Drop for Tracer {
    fn drop(&mut self) {
        // An error path that never called finish: stop the thread (it detaches on drop).
        self.stop.store(true, Ordering::SeqCst);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tcpdoctor_model::remedy::{judge, Effect};
    use tcpdoctor_model::{Impact, Source};

    fn traced(eaddrnotavail: u64) -> RunTrace {
        let mut causes = BTreeMap::new();
        causes.insert(Cause::NoLocalPort, eaddrnotavail);
        let mut by = BTreeMap::new();
        by.insert("tdoc-lab-7-cl".to_string(), causes);
        RunTrace {
            run: "r".into(),
            used: true,
            eaddrnotavail,
            causes_by_netns: by,
            ..RunTrace::default()
        }
    }

    #[test]
    fn incast_episodes_say_how_many_flows_each_counted_not_up_to() {
        let ep = |flows| IncastEpisode {
            receiver: "10.77.0.1".parse().unwrap(),
            start_us: 0,
            flows,
            worst_wait_us: 200_000,
        };
        let t = RunTrace {
            used: true,
            incast_episodes: vec![ep(2), ep(3), ep(3)],
            ..RunTrace::default()
        };
        let line = t.line();
        assert!(
            line.contains("3 incast episode(s), 2-3 flows each (an episode: timeouts of several flows into one receiver within the trace's window)"),
            "{line}"
        );
        assert!(!line.contains("up to"), "{line}");
        let one = RunTrace {
            used: true,
            incast_episodes: vec![ep(4)],
            ..RunTrace::default()
        };
        assert!(one.line().contains("1 incast episode(s), 4 flows each"));
    }

    #[test]
    fn an_untraced_run_has_no_trace_harm_and_says_why() {
        let t = RunTrace::missing("before", &[], "the kernel has no BTF".into());
        assert_eq!(t.harm(Pathology::PortExhaustion), None);
        assert_eq!(t.line(), "not traced: the kernel has no BTF");
        let all = LabTrace::of(vec![t]);
        assert!(!all.used);
        assert_eq!(all.missing.as_deref(), Some("the kernel has no BTF"));
    }

    #[test]
    fn a_remedy_is_not_worked_while_its_own_trace_still_saw_the_harm() {
        let p = Pathology::PortExhaustion;
        let before = Harm::count(40, "connects failed with EADDRNOTAVAIL");
        let none = Harm::count(0, "connects failed with EADDRNOTAVAIL");
        // The measurement saw none, the remedied run's trace saw 3: insufficient.
        let c = judge("after", p, before.clone(), &[], none.clone(), &[])
            .with_trace(traced(40).harm(p), traced(3).harm(p));
        assert_eq!(c.effect, Effect::Insufficient);
        assert_eq!(
            c.trace.as_deref(),
            Some("trace saw 3 connects failed with EADDRNOTAVAIL (was 40)")
        );
        // Its trace saw none: worked, and the line cites the trace's counts.
        let c = judge("after", p, before.clone(), &[], none.clone(), &[])
            .with_trace(traced(40).harm(p), traced(0).harm(p));
        assert_eq!(c.effect, Effect::Worked);
        assert_eq!(
            c.trace.as_deref(),
            Some("trace saw 0 connects failed with EADDRNOTAVAIL (was 40)")
        );
        // Untraced: the verdict is the measurement's alone.
        let c = judge("after", p, before, &[], none, &[]).with_trace(traced(40).harm(p), None);
        assert_eq!((c.effect, c.trace), (Effect::Worked, None));
    }

    #[test]
    fn trace_findings_merge_into_the_labs_and_cite_the_trace() {
        let lab = Finding::new(
            Pathology::PortExhaustion,
            Source::Probe,
            "4839 connects failed",
            Impact::failures(4839, Some(5039)),
        );
        let t = Finding::new(
            Pathology::PortExhaustion,
            Source::Trace,
            "connect() failed with EADDRNOTAVAIL 4839 time(s)",
            Impact::failures(4839, Some(5039)),
        )
        .counter("x", 1);
        let only_trace = Finding::new(
            Pathology::SlowReader,
            Source::Trace,
            "zero windows",
            Impact::stalls(1, None, None),
        );
        let mut f = vec![lab];
        tcpdoctor_model::merge::merge_trace(&mut f, vec![t, only_trace]);
        assert_eq!(f.len(), 2);
        assert_eq!(f[0].pathology, Pathology::PortExhaustion);
        assert_eq!(f[0].source, Source::Probe);
        assert!(f[0]
            .summary
            .ends_with("; trace: connect() failed with EADDRNOTAVAIL 4839 time(s)"));
        assert_eq!(f[0].evidence.len(), 1);
        assert_eq!(f[1].source, Source::Trace);
    }
}
