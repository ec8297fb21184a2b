//! What the engine reports: its counts so far ([`Summary`]) and, at the end, the findings of
//! the shared model. Part of the engine ([`Engine`]); pure like it.

use super::*;

impl Engine {
    /// Counts so far (for the rolling summary and the report).
    pub fn summary(&self) -> Summary {
        let mut s = self.summary.clone();
        s.consequence_resends = self.folded_tallies().1;
        let mut flows: Vec<DropFlow> = self
            .drop_flows
            .iter()
            .map(|((src, dst, reason, ifname), &count)| DropFlow {
                src: *src,
                dst: *dst,
                reason: reason.clone(),
                ifname: ifname.clone(),
                count,
            })
            .collect();
        // A total order: the flows are kept in a HashMap, whose order differs run to run.
        flows.sort_by(|a, b| {
            let key = |f: &DropFlow| (f.src, f.dst, f.reason.clone(), f.ifname.clone());
            b.count.cmp(&a.count).then_with(|| key(a).cmp(&key(b)))
        });
        flows.truncate(20);
        s.drop_flows = flows;
        s.no_local_port = self
            .port_failures
            .iter()
            .map(|((dest, _), (process, n, _, budget))| PortFailure {
                process: process.clone(),
                destination: *dest,
                failures: *n,
                budget: budget.clone(),
            })
            .collect();
        s.local_tuple_refusals = self.tuple_refusals.values().cloned().collect();
        s
    }

    /// Findings of the shared model from everything attributed so far. `connects`: sockets
    /// that started a connect in the traced namespaces (the kernel-side counter), the
    /// denominator of connect-related shares. `budgets`: per (netns, destination) the port
    /// budget, asked of the caller once at the end.
    pub fn findings(&self, connects: u64, lookup: &mut dyn Lookup) -> Vec<Finding> {
        let kernel = KernelCounts {
            connects,
            ..KernelCounts::default()
        };
        self.findings_with(&kernel, lookup)
    }

    /// [`Engine::findings`] with the kernel's counts: with records lost, counts built from
    /// records are said to be lower bounds, and the kernel's exact counts are used where it
    /// has them ([`KernelCounts`]).
    pub fn findings_with(&self, kernel: &KernelCounts, lookup: &mut dyn Lookup) -> Vec<Finding> {
        let mut out = Vec::new();
        let (tallies, _) = self.folded_tallies();
        for (&p, t) in &tallies {
            if t.events == 0 && t.flows.is_empty() {
                continue;
            }
            let Some((impact, summary)) = self.impact_and_summary(p, t, kernel) else {
                continue;
            };
            let mut f = Finding::new(p, Source::Trace, summary, impact);
            f = self.old_ack_advice(f, lookup);
            f = self.local_refusal_advice(f, lookup);
            out.push(self.with_tally_evidence(f, p, t, lookup));
        }
        out.into_iter()
            .fold(Vec::new(), tcpdoctor_model::merge::join_loss_repairs)
    }

    /// What a pathology's tally cost and the finding's summary, or `None` when it makes no
    /// finding of its own (connects only the application abandoned; pathologies the trace
    /// does not report).
    fn impact_and_summary(
        &self,
        p: Pathology,
        t: &Tally,
        kernel: &KernelCounts,
    ) -> Option<(Impact, String)> {
        let connects = kernel.connects;
        let lost = kernel.lost > 0;
        let observed = (connects > 0).then_some(connects);
        let worst = (t.worst_us > 0).then(|| Duration::from_micros(t.worst_us));
        let flows = t.flows.len() as u64;
        Some(match p {
            Pathology::StaleAckRace | Pathology::TimeWaitCollision => {
                self.old_ack_summary(p, t, observed, worst, lost)
            }
            Pathology::SynRetransmit => (
                Impact::stalls(flows, observed, worst).with_failed(t.failed),
                format!(
                    "SYN resent with no answer or dropped: {flows} connection(s), {} resend(s)",
                    t.resends
                ),
            ),
            Pathology::AcceptQueueOverflow => (
                Impact::stalls(flows, observed, worst).with_failed(t.failed),
                format!(
                    "SYNs dropped by a full accept queue: {flows} connection(s), {} resend(s)",
                    t.resends
                ),
            ),
            Pathology::PortExhaustion => self.port_exhaustion(t, kernel),
            // Connects the application itself abandoned (closed while SYN-SENT, errno
            // 0) are not failures the kernel reported: no finding for them alone.
            Pathology::ConnectFailure => return self.connect_failure(t, kernel, observed),
            Pathology::RetransmitTimeout => (
                Impact::stalls(flows, None, worst),
                format!(
                    "retransmission timeouts on {flows} flow(s), {} timeout(s)",
                    t.events
                ),
            ),
            // Worded as the lab words it ("up to N flows": the largest episode), with
            // the distinct flows of all episodes apart (issue 21, defect 8).
            Pathology::Incast => self.incast_summary(t, worst),
            Pathology::Retransmission => (
                Impact::stalls(t.events, None, None),
                format!(
                    "{} fast retransmission(s) or tail-loss probe(s) on {flows} flow(s)",
                    t.events
                ),
            ),
            Pathology::SlowReader => self.slow_reader_summary(t),
            // A probe repeating what the receiver had is the probe working as designed:
            // named, not harm (as analyze judges the same copies in a capture).
            Pathology::SpuriousRetransmission => (
                Impact::none(),
                format!(
                    "{} tail-loss probe(s) on {flows} flow(s) repeated data the receiver already had (dropped there as TCP_OLD_DATA): not loss",
                    t.events
                ),
            ),
            Pathology::PacketDrop => (
                Impact::stalls(t.events, None, None),
                format!("{} TCP packet(s) dropped for lack of room", t.events),
            ),
            _ => return None,
        })
    }

    /// The impact and summary of a SYN answered by the previous connection's stale ACK or
    /// TIME_WAIT socket, with what this host refused locally for the same reason.
    fn old_ack_summary(
        &self,
        p: Pathology,
        t: &Tally,
        observed: Option<u64>,
        worst: Option<Duration>,
        lost: bool,
    ) -> (Impact, String) {
        let flows = t.flows.len() as u64;
        let what = if p == Pathology::StaleAckRace {
            "SYN answered by a stale ACK of the previous connection on the same 4-tuple"
        } else {
            "SYN collided with the peer's TIME_WAIT socket of the previous connection"
        };
        let local = self.refused_locally_text(p, lost);
        let mut parts = Vec::new();
        if local.is_none() || t.resends > 0 || !t.flows.is_empty() {
            parts.push(format!(
                "{what}: {} SYN(s) resent ({flows} distinct 4-tuple(s) as seen by the traced ends)",
                at_least(t.resends, lost)
            ));
        }
        parts.extend(local);
        (
            Impact::stalls(flows, observed, worst).with_failed(t.failed),
            parts.join("; "),
        )
    }

    /// The impact and summary of incast: its episodes, the largest one's flows, and the
    /// distinct flows timed out across them.
    fn incast_summary(&self, t: &Tally, worst: Option<Duration>) -> (Impact, String) {
        let flows = t.flows.len() as u64;
        (
            Impact::stalls(flows, None, worst),
            format!(
                "{} incast episode(s): timeouts of up to {} flows into one receiver within {} ms; {flows} distinct flows timed out across them",
                self.summary.incast_episodes.len(),
                self.summary
                    .incast_episodes
                    .iter()
                    .map(|e| e.flows)
                    .max()
                    .unwrap_or(0),
                self.cfg.incast_window.as_millis(),
            ),
        )
    }

    /// The impact and summary of receivers not reading: the longest closed window and the
    /// first reader named.
    fn slow_reader_summary(&self, t: &Tally) -> (Impact, String) {
        let flows = t.flows.len() as u64;
        // From the window closing to the last event that proves it still closed
        // (windows.rs): the same measure of the same stall as `sockets` takes
        // from tcp_info, judged by the same policy.
        let closed = self.windows.worst();
        let longest = closed.map_or(
            "; no closed window seen to last (a window probe or a timer resend into it after it closed)".to_string(),
            |(d, (a, b))| format!(
                "; the longest closed window lasted {} or more ({a} <-> {b}, from the window closing to the last probe that found it closed)",
                units::duration(d)
            ),
        );
        let readers: Vec<&String> = self.windows.readers.keys().collect();
        let not_reading = match readers.first() {
            Some(r) => format!("; not reading: {r}"),
            None => String::new(),
        };
        (
            Impact::stalls(flows, None, closed.map(|(d, _)| d)),
            format!(
                "receivers not reading: {} zero-window event(s) on {flows} flow(s){longest}{not_reading}",
                t.events
            ),
        )
    }

    /// Adds a tally's evidence to its finding: example flows, the processes, the kernel's
    /// evidence and, for port exhaustion, the port budgets.
    fn with_tally_evidence(
        &self,
        mut f: Finding,
        p: Pathology,
        t: &Tally,
        lookup: &mut dyn Lookup,
    ) -> Finding {
        let flows = t.flows.len() as u64;
        let mut examples: Vec<String> = t
            .flows
            .iter()
            .take(5)
            .map(|&(a, b)| flow_text(a, b))
            .collect();
        if flows > 5 {
            examples.push(format!("... {} more", flows - 5));
        }
        if !examples.is_empty() {
            f = f.with_evidence(Evidence::Examples {
                what: "flows (local -> remote)".into(),
                items: examples,
            });
        }
        if !t.processes.is_empty() {
            f = f.with_evidence(Evidence::Examples {
                what: if p == Pathology::SlowReader {
                    "processes not reading (zero-window probes that reached them)".into()
                } else {
                    "processes (events)".into()
                },
                items: t
                    .processes
                    .iter()
                    .take(8)
                    .map(|(p, n)| format!("{p}: {n}"))
                    .collect(),
            });
        }
        if !t.details.is_empty() {
            f = f.with_evidence(Evidence::Examples {
                what: "kernel evidence (count)".into(),
                items: t
                    .details
                    .iter()
                    .take(8)
                    .map(|(d, n)| format!("{d}: {n}"))
                    .collect(),
            });
        }
        if p == Pathology::PortExhaustion {
            f = self.port_evidence(f, lookup);
        }
        f
    }
}
