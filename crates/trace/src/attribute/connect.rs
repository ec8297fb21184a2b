//! connect() failing before its SYN (EADDRNOTAVAIL), and the counts of failed connects when
//! records were lost. Part of the engine ([`Engine`]); pure like it.
//!
//! EADDRNOTAVAIL from connect() has two causes, told apart by the port the socket had when
//! it failed (`sport` of the kernel's record, verified on Linux 6.18: 0 when connect() was to
//! choose the port, the bound port otherwise):
//! - no free local port toward the destination: connect() chose the port and found none
//!   (`__inet_hash_connect`): *port exhaustion*;
//! - a port bound before connect(): the kernel does not move it, and refuses the connect
//!   because this host already holds that 4-tuple (`__inet_check_established`). Measured on
//!   6.18: a client that binds a fixed port and reconnects to one server after closing first
//!   (its own previous connection in TIME_WAIT) gets EADDRNOTAVAIL with timestamps off, with
//!   28,231 of 28,232 ports free; with timestamps on the connect takes the TIME_WAIT 4-tuple
//!   over (`tcp_twsk_unique`); with IP_BIND_ADDRESS_NO_PORT (or no bind) connect() picks
//!   another port.
//!
//! Decision: the second is not port exhaustion. When the 4-tuple's holder is this host's own
//! TIME_WAIT socket it is a `time_wait_collision` (a 4-tuple reused while its previous
//! connection is in TIME_WAIT; here the collision is refused locally, before any SYN, instead
//! of by the peer), cause `tuple_in_use`; when the holder is a live socket (two sockets bound
//! to one port connecting to one destination) or is gone by the time it is looked up, the
//! failure is a `connect_failure` with the same cause: no pathology names that better, and a
//! new one for a rare misuse would split the catalogue for little.

use super::*;
use tcpdoctor_model::catalogue::Remedy;

/// Kernel-side counts over the trace (per-CPU counters: exact, also for events whose record
/// was lost), for the findings.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct KernelCounts {
    /// Sockets that started a connect (the denominator of connect shares).
    pub connects: u64,
    /// Records the ring buffer had no room for: counts built from records are lower bounds.
    pub lost: u64,
    /// Connects that ended with an error after their SYN ([`crate::raw::Counter::ConnectFailed`]).
    pub connect_failed: Option<u64>,
    /// connect() EADDRNOTAVAIL ([`crate::raw::Counter::ConnectEaddrnotavail`]).
    pub eaddrnotavail: Option<u64>,
}

impl KernelCounts {
    /// From the probe's counters.
    pub fn from_counters(c: &BTreeMap<crate::raw::Counter, u64>) -> KernelCounts {
        use crate::raw::Counter;
        KernelCounts {
            connects: c.get(&Counter::Connects).copied().unwrap_or(0),
            lost: c.get(&Counter::Lost).copied().unwrap_or(0),
            connect_failed: c.get(&Counter::ConnectFailed).copied(),
            eaddrnotavail: c.get(&Counter::ConnectEaddrnotavail).copied(),
        }
    }
}

/// connect() refused because this host holds the 4-tuple of the port bound before it.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct TupleRefusal {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub process: Option<Process>,
    /// The bound source (address 0.0.0.0 when only the port was bound).
    pub local: SocketAddr,
    pub destination: SocketAddr,
    pub failures: u64,
    /// The state of the socket holding the 4-tuple when the first refusal was attributed
    /// (`None`: no socket held it any more).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub holder: Option<TcpState>,
    /// The ports toward the destination then: free ports show it is not exhaustion.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub budget: Option<PortBudget>,
}

/// A count built from records: "at least" when records were lost.
pub(super) fn at_least(n: u64, lost: bool) -> String {
    if lost {
        format!("at least {n}")
    } else {
        n.to_string()
    }
}

impl Engine {
    /// connect() failed with `errno` before its SYN.
    pub(super) fn no_port(&mut self, ev: &Event, errno: u32, lookup: &mut dyn Lookup) -> Line {
        if ev.local.port() != 0 {
            return self.tuple_in_use(ev, errno, lookup);
        }
        let key = (ev.remote, ev.process.as_ref().map(|p| p.pid));
        let entry =
            self.port_failures
                .entry(key)
                .or_insert((ev.process.clone(), 0, ev.netns, None));
        entry.1 += 1;
        let first = entry.1 == 1;
        let budget = if first {
            lookup.port_budget(ev.netns, ev.remote)
        } else {
            None
        };
        let extra = budget
            .as_ref()
            .map(|b| {
                format!(
                    ": {} sockets hold a port toward it ({} in TIME_WAIT), port range {} ({} ports)",
                    b.in_use,
                    b.time_wait,
                    b.range,
                    b.range.len()
                )
            })
            .unwrap_or_default();
        if budget.is_some() {
            if let Some(e) = self.port_failures.get_mut(&key) {
                e.3 = budget;
            }
        }
        let l = self.line(
            ev,
            Cause::NoLocalPort,
            Some(Pathology::PortExhaustion),
            format!("connect() to {} failed before its SYN: no free local port (errno {errno}, EADDRNOTAVAIL){extra}", ev.remote),
            lookup,
        );
        self.tally(Pathology::PortExhaustion, &l).failed += 1;
        l
    }

    /// connect() from a port bound before it failed: this host holds the 4-tuple.
    fn tuple_in_use(&mut self, ev: &Event, errno: u32, lookup: &mut dyn Lookup) -> Line {
        let key = (ev.local, ev.remote, ev.process.as_ref().map(|p| p.pid));
        let r = self
            .tuple_refusals
            .entry(key)
            .or_insert_with(|| TupleRefusal {
                process: ev.process.clone(),
                local: ev.local,
                destination: ev.remote,
                failures: 0,
                holder: lookup.tuple_holder(ev.netns, ev.local, ev.remote),
                budget: lookup.port_budget(ev.netns, ev.remote),
            });
        r.failures += 1;
        let (holder, budget) = (r.holder, r.budget.clone());
        let port = ev.local.port();
        let held = match holder {
            Some(TcpState::TimeWait) => "in TIME_WAIT: its own previous connection, which closed first and which connect() may not take over without timestamps".to_string(),
            Some(s) => format!("by another socket, in {}", s.name()),
            None => "(no socket held it any more when looked up)".to_string(),
        };
        let free = budget
            .map(|b| {
                format!(
                    "; {} of {} ports toward it free: not port exhaustion",
                    u64::from(b.range.len()).saturating_sub(b.in_use),
                    b.range.len()
                )
            })
            .unwrap_or_default();
        let pathology = if holder == Some(TcpState::TimeWait) {
            Pathology::TimeWaitCollision
        } else {
            Pathology::ConnectFailure
        };
        if pathology == Pathology::TimeWaitCollision {
            self.timewait_netns.insert(ev.netns);
        }
        let l = self.line(
            ev,
            Cause::TupleInUse,
            Some(pathology),
            format!("connect() from {} to {} failed before its SYN (errno {errno}, EADDRNOTAVAIL): source port {port} was bound before connect(), and this host holds that 4-tuple {held}{free}", ev.local, ev.remote),
            lookup,
        );
        // Counted as a failure of its pathology; its 4-tuple is not one a SYN collided on.
        let t = self.tallies.entry(pathology).or_default();
        t.events += 1;
        t.failed += 1;
        if let Some(p) = &l.process {
            *t.processes
                .entry(format!("{} (pid {})", p.comm, p.pid))
                .or_default() += 1;
        }
        l
    }

    /// connect() refusals of a bound port's 4-tuple attributed to `p`.
    fn refused_locally(&self, p: Pathology) -> Vec<&TupleRefusal> {
        self.tuple_refusals
            .values()
            .filter(|r| {
                (r.holder == Some(TcpState::TimeWait)) == (p == Pathology::TimeWaitCollision)
            })
            .collect()
    }

    /// The summary part of the local refusals of `p` ("" when none).
    pub(super) fn refused_locally_text(&self, p: Pathology, lost: bool) -> Option<String> {
        let refused = self.refused_locally(p);
        let n: u64 = refused.iter().map(|r| r.failures).sum();
        if n == 0 {
            return None;
        }
        let ports: BTreeSet<u16> = refused.iter().map(|r| r.local.port()).collect();
        let ports: Vec<String> = ports.iter().map(u16::to_string).collect();
        let held = if p == Pathology::TimeWaitCollision {
            "in TIME_WAIT by this host's own previous connection"
        } else {
            "by another socket on this host"
        };
        Some(format!(
            "connect() refused locally with EADDRNOTAVAIL {} time(s): the 4-tuple of source port {} (bound before connect()) was held {held}; not port exhaustion",
            at_least(n, lost),
            ports.join(", ")
        ))
    }

    /// The port exhaustion finding's impact and summary.
    pub(super) fn port_exhaustion(&self, t: &Tally, kernel: &KernelCounts) -> (Impact, String) {
        let lost = kernel.lost > 0;
        let attempts = kernel.connects.max(t.failed);
        let mut summary = format!(
            "connect() failed with EADDRNOTAVAIL {} time(s): no free local port toward the destination",
            at_least(t.failed, lost)
        );
        if let Some(n) = kernel.eaddrnotavail.filter(|_| lost && self.unfiltered()) {
            let refused: u64 = self.tuple_refusals.values().map(|r| r.failures).sum();
            let unknown = n.saturating_sub(t.failed + refused);
            if unknown > 0 {
                summary.push_str(&format!(
                    " ({n} EADDRNOTAVAIL counted in the kernel, {unknown} of them with their record lost)"
                ));
            }
        }
        (
            Impact::failures(t.failed, (attempts > 0).then_some(attempts)),
            summary,
        )
    }

    /// The connect failure finding's impact and summary; `None` when there is none (only
    /// connects the application abandoned, errno 0: not failures the kernel reported).
    /// With records lost the kernel's count of failed connects decides: those not attributed
    /// to a cause are this finding's.
    pub(super) fn connect_failure(
        &self,
        t: &Tally,
        kernel: &KernelCounts,
        observed: Option<u64>,
    ) -> Option<(Impact, String)> {
        let lost = kernel.lost > 0;
        let refused: u64 = self
            .refused_locally(Pathology::ConnectFailure)
            .iter()
            .map(|r| r.failures)
            .sum();
        let traced = t.failed - refused.min(t.failed);
        let mut failed = traced;
        let mut unknown = 0;
        if let Some(k) = kernel.connect_failed.filter(|_| lost && self.unfiltered()) {
            // Every failed connect the kernel counted whose record was lost.
            unknown = k.saturating_sub(self.connect_failed_records);
            failed += unknown;
        }
        if failed + refused == 0 {
            return None;
        }
        let mut parts = Vec::new();
        if failed > 0 {
            let mut s = format!("{failed} connect(s) failed (refused or given up)");
            if unknown > 0 {
                s.push_str(&format!(
                    ", {unknown} of them counted in the kernel with their record lost (cause not traced)"
                ));
            } else if lost {
                s = format!("at least {s}");
            }
            parts.push(s);
        }
        parts.extend(self.refused_locally_text(Pathology::ConnectFailure, lost));
        Some((
            Impact::failures(failed + refused, observed),
            parts.join("; "),
        ))
    }

    /// The kernel's counts cover every event of the traced namespaces; the records only
    /// those the filter kept.
    fn unfiltered(&self) -> bool {
        self.cfg.filter == EventFilter::default()
    }

    /// Per process and destination: the failures and the ports toward it.
    pub(super) fn port_evidence(&self, mut f: Finding, lookup: &mut dyn Lookup) -> Finding {
        for ((dest, _), (process, n, netns, seen)) in &self.port_failures {
            let who = process
                .as_ref()
                .map(|p| format!("{} (pid {})", p.comm, p.pid))
                .unwrap_or_else(|| "unknown process".into());
            let mut items = vec![format!("{who} -> {dest}: {n} EADDRNOTAVAIL")];
            if let Some(b) = seen.clone().or_else(|| lookup.port_budget(*netns, *dest)) {
                let ports = b.range.len();
                items.push(format!(
                    "at the first failure {} sockets held a port toward {dest} ({} in TIME_WAIT) of {ports} ports in {}: headroom {}",
                    b.in_use,
                    b.time_wait,
                    b.range,
                    u64::from(ports).saturating_sub(b.in_use)
                ));
                let used = (b.in_use as f64 / f64::from(ports)).min(1.0);
                f = f.arithmetic(format!("{} ports in use / {ports} ports", b.in_use), used);
                let imp = f.impact.clone().with_budget(used);
                f = f.with_impact(imp);
            }
            f = f.with_evidence(Evidence::Examples {
                what: "per process and destination".into(),
                items,
            });
        }
        f
    }

    /// The evidence, explanation and remedies of local refusals in finding `f` (of
    /// `time_wait_collision` or `connect_failure`).
    pub(super) fn local_refusal_advice(&self, mut f: Finding, lookup: &mut dyn Lookup) -> Finding {
        let refused = self.refused_locally(f.pathology);
        if refused.is_empty() {
            return f;
        }
        let items = refused
            .iter()
            .map(|r| {
                let who = r
                    .process
                    .as_ref()
                    .map(|p| format!("{} (pid {})", p.comm, p.pid))
                    .unwrap_or_else(|| "unknown process".into());
                let holder = r
                    .holder
                    .map(|s| format!("held in {}", s.name()))
                    .unwrap_or_else(|| "holder gone when looked up".into());
                let free = r
                    .budget
                    .as_ref()
                    .map(|b| {
                        format!(
                            ", {} of {} ports toward it free",
                            u64::from(b.range.len()).saturating_sub(b.in_use),
                            b.range.len()
                        )
                    })
                    .unwrap_or_default();
                format!(
                    "{who}: {} -> {}: {} EADDRNOTAVAIL, 4-tuple {holder}{free}",
                    r.local, r.destination, r.failures
                )
            })
            .collect();
        f = f.with_evidence(Evidence::Examples {
            what: "connects refused locally: the bound source -> destination".into(),
            items,
        });
        let only_local = f.pathology == Pathology::ConnectFailure
            || self
                .tallies
                .get(&Pathology::TimeWaitCollision)
                .is_none_or(|t| t.resends == 0 && t.flows.is_empty());
        let timestamps_off = self
            .timewait_netns
            .iter()
            .any(|&ns| lookup.tcp_timestamps(ns) == Some(false));
        let mut remedies = vec![
            Remedy::new("Do not bind a source port for outgoing connections: let connect() choose one (it picks a port whose 4-tuple is free); to fix only the source address, set IP_BIND_ADDRESS_NO_PORT before bind()."),
            Remedy::new("Reuse the connection instead of reconnecting on the same 4-tuple."),
        ];
        if f.pathology == Pathology::TimeWaitCollision && timestamps_off {
            remedies.insert(1, Remedy::new("Turn TCP timestamps on (net.ipv4.tcp_timestamps=1): connect() from a bound port may then take over its own TIME_WAIT 4-tuple (tcp_twsk_unique)."));
        }
        if only_local {
            if f.pathology == Pathology::TimeWaitCollision {
                f = f.with_explanation("This host closed the previous connection on the 4-tuple first and holds it in TIME_WAIT. The new connect() had its source port bound beforehand, so the kernel cannot pick another port; without timestamps it cannot tell the new connection's segments from the old one's, so it refuses the 4-tuple with EADDRNOTAVAIL before sending a SYN (__inet_check_established). Other ports stay free: this is not port exhaustion.");
            } else {
                f = f.with_explanation("The connect()'s source port was bound beforehand and another socket on this host holds the same 4-tuple (or held it), so the kernel refused it with EADDRNOTAVAIL before sending a SYN (__inet_check_established). Other ports stay free: this is not port exhaustion.");
            }
            f.remedies = remedies;
        } else {
            // With SYN collisions in the same finding: the catalogue's remedies follow,
            // each once.
            let rest: Vec<Remedy> = std::mem::take(&mut f.remedies)
                .into_iter()
                .filter(|r| !r.action.contains("tcp_timestamps") || !timestamps_off)
                .collect();
            remedies.extend(rest);
            f.remedies = remedies;
        }
        f
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::raw::ProcessSource;

    const CLIENT: &str = "127.0.0.1:20070";
    const SERVER: &str = "127.0.0.1:5400";

    fn eaddrnotavail(ts_ms: u64, local: &str) -> Event {
        Event {
            ts_ns: ts_ms * 1_000_000,
            sk: ts_ms,
            netns: 7,
            process: Some(Process {
                pid: 42,
                comm: "client".into(),
                source: ProcessSource::Connect,
            }),
            ino: 0,
            state: Some(TcpState::SynSent),
            local: local.parse().unwrap(),
            remote: SERVER.parse().unwrap(),
            detail: Detail::ConnectError { errno: 99 },
        }
    }

    /// This host: the client's previous connection in TIME_WAIT, every other port free,
    /// timestamps off.
    struct OwnTimeWait;

    impl Lookup for OwnTimeWait {
        fn tuple_holder(&mut self, _: u32, local: SocketAddr, _: SocketAddr) -> Option<TcpState> {
            (local.port() == 20070).then_some(TcpState::TimeWait)
        }
        fn port_budget(&mut self, _: u32, _: SocketAddr) -> Option<PortBudget> {
            Some(PortBudget {
                in_use: 1,
                time_wait: 1,
                range: PortRange::new(32768, 60999).unwrap(),
            })
        }
        fn tcp_timestamps(&mut self, _: u32) -> Option<bool> {
            Some(false)
        }
    }

    fn engine() -> Engine {
        Engine::new(Config::default(), 0, crate::btf::Reasons::default())
    }

    #[test]
    fn eaddrnotavail_from_a_bound_port_whose_4_tuple_is_in_time_wait_is_not_port_exhaustion() {
        let mut e = engine();
        for i in 0..19 {
            let l = e.push(eaddrnotavail(i, CLIENT), &mut OwnTimeWait).unwrap();
            assert_eq!(l.cause, Cause::TupleInUse);
            assert_eq!(l.pathology, Some(Pathology::TimeWaitCollision));
            assert!(
                l.evidence
                    .contains("source port 20070 was bound before connect()")
                    && l.evidence.contains("28231 of 28232 ports toward it free"),
                "{}",
                l.evidence
            );
        }
        let f = e.findings(20, &mut OwnTimeWait);
        assert_eq!(f.len(), 1, "{f:#?}");
        let f = &f[0];
        assert_eq!(f.pathology, Pathology::TimeWaitCollision);
        assert_eq!(f.impact.failed, 19);
        assert_eq!(f.severity, tcpdoctor_model::Severity::Critical);
        assert!(
            f.summary
                .contains("refused locally with EADDRNOTAVAIL 19 time(s)")
                && f.summary.contains("source port 20070")
                && !f.summary.contains("SYN(s) resent"),
            "{}",
            f.summary
        );
        assert!(
            f.explanation.contains("not port exhaustion"),
            "{}",
            f.explanation
        );
        let actions: Vec<&str> = f.remedies.iter().map(|r| r.action.as_str()).collect();
        assert!(
            actions[0].contains("IP_BIND_ADDRESS_NO_PORT"),
            "{actions:#?}"
        );
        assert!(
            actions.iter().any(|a| a.contains("tcp_timestamps=1")),
            "{actions:#?}"
        );
        // Nothing about ports to widen or a server to close first.
        assert!(
            actions
                .iter()
                .all(|a| !a.contains("ip_local_port_range") && !a.contains("close first")),
            "{actions:#?}"
        );
        assert!(e.summary().no_local_port.is_empty());
        assert_eq!(e.summary().local_tuple_refusals[0].failures, 19);
    }

    #[test]
    fn eaddrnotavail_with_no_port_bound_stays_port_exhaustion() {
        let mut e = engine();
        let l = e
            .push(eaddrnotavail(1, "127.0.0.1:0"), &mut OwnTimeWait)
            .unwrap();
        assert_eq!(l.cause, Cause::NoLocalPort);
        let f = e.findings(1, &mut OwnTimeWait);
        assert_eq!(f[0].pathology, Pathology::PortExhaustion);
    }

    #[test]
    fn a_bound_4_tuple_held_by_a_live_socket_is_a_connect_failure() {
        struct Live;
        impl Lookup for Live {
            fn tuple_holder(&mut self, _: u32, _: SocketAddr, _: SocketAddr) -> Option<TcpState> {
                Some(TcpState::Established)
            }
        }
        let mut e = engine();
        let l = e.push(eaddrnotavail(1, CLIENT), &mut Live).unwrap();
        assert_eq!(l.pathology, Some(Pathology::ConnectFailure));
        let f = e.findings(2, &mut Live);
        assert_eq!(f.len(), 1, "{f:#?}");
        assert_eq!(f[0].pathology, Pathology::ConnectFailure);
        assert!(f[0].summary.contains("refused locally"), "{}", f[0].summary);
        assert!(
            !f[0].summary.contains("connect(s) failed (refused"),
            "{}",
            f[0].summary
        );
    }

    fn refused(ts_ms: u64) -> Event {
        Event {
            detail: Detail::ConnectFailed {
                flags: 0,
                after_us: 30,
                errno: 111,
            },
            local: "127.0.0.1:40000".parse().unwrap(),
            ..eaddrnotavail(ts_ms, CLIENT)
        }
    }

    #[test]
    fn with_records_lost_failed_connects_are_the_kernels_count() {
        let mut e = engine();
        for i in 0..870 {
            e.push(refused(i), &mut NoLookup);
        }
        // The figures, scaled: 1,000 refused connects, 130 records lost.
        let kernel = KernelCounts {
            connects: 1000,
            lost: 130,
            connect_failed: Some(1000),
            eaddrnotavail: Some(0),
        };
        let f = e.findings_with(&kernel, &mut NoLookup);
        assert_eq!(f[0].pathology, Pathology::ConnectFailure);
        assert_eq!(f[0].impact.failed, 1000);
        assert!(
            f[0].summary.starts_with("1000 connect(s) failed")
                && f[0]
                    .summary
                    .contains("130 of them counted in the kernel with their record lost"),
            "{}",
            f[0].summary
        );
        // Without the kernel's count, a lower bound, said as one.
        let kernel = KernelCounts {
            connect_failed: None,
            ..kernel
        };
        let f = e.findings_with(&kernel, &mut NoLookup);
        assert_eq!(f[0].impact.failed, 870);
        assert!(
            f[0].summary.starts_with("at least 870 connect(s) failed"),
            "{}",
            f[0].summary
        );
        // Nothing lost: the records' count, as it is.
        let f = e.findings(1000, &mut NoLookup);
        assert!(
            f[0].summary.starts_with("870 connect(s) failed"),
            "{}",
            f[0].summary
        );
    }

    #[test]
    fn with_records_lost_eaddrnotavail_counts_are_lower_bounds() {
        let mut e = engine();
        for i in 0..7 {
            e.push(eaddrnotavail(i, "127.0.0.1:0"), &mut NoLookup);
        }
        let kernel = KernelCounts {
            connects: 10,
            lost: 3,
            connect_failed: Some(0),
            eaddrnotavail: Some(10),
        };
        let f = e.findings_with(&kernel, &mut NoLookup);
        assert!(
            f[0].summary.contains("at least 7 time(s)")
                && f[0].summary.contains(
                    "10 EADDRNOTAVAIL counted in the kernel, 3 of them with their record lost"
                ),
            "{}",
            f[0].summary
        );
    }
}
