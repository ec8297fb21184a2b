//! Repeated events rolled up for a person reading the trace's text (issue 24: 780 identical
//! `no_local_port` lines in 8 s). Pure: lines in, decisions and roll-ups out; time comes from
//! the lines.
//!
//! Events are grouped by namespace, process, cause, drop reason and socket state. Within one
//! summary interval, the first event of a group toward each destination is printed at once,
//! for up to [`SHOWN_PER_GROUP`] destinations; every later event of the group is held and
//! counted. At the end of the interval (and of the run) each group with held events prints
//! one line: how many, over how long, at what rate, toward which flows, and the last one's
//! evidence. The next interval starts afresh, so an event that comes back after a quiet
//! interval is printed at once again.
//!
//! The JSON output keeps every event (one line each): programs count them exactly; the final
//! report's counts are exact either way.

use std::collections::BTreeMap;
use std::net::SocketAddr;

use crate::attribute::{Cause, Line};

/// Destinations of one group printed at once per interval: enough to show a handful of
/// distinct flows, few enough that a flood toward many ports (drops at TIME_WAIT sockets,
/// each on its own client port) stays a few lines.
pub const SHOWN_PER_GROUP: usize = 3;

#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct Group {
    netns: u32,
    process: Option<(u32, String)>,
    cause: Cause,
    drop_reason: Option<String>,
    state: &'static str,
}

impl Group {
    fn of(l: &Line) -> Group {
        Group {
            netns: l.netns,
            process: l.process.as_ref().map(|p| (p.pid, p.comm.clone())),
            cause: l.cause,
            drop_reason: l.drop_reason.clone(),
            state: l.state.map(|s| s.name()).unwrap_or("-"),
        }
    }
}

/// What one group did in the current interval.
#[derive(Clone, Debug, Default)]
struct Interval {
    /// Destinations printed at once.
    shown: Vec<SocketAddr>,
    held: Option<RollUp>,
}

/// Events of one group held back in one interval, printed as one line.
#[derive(Clone, Debug, PartialEq)]
pub struct RollUp {
    /// How many were held.
    pub count: u64,
    /// Since the trace started, microseconds: the first and the last held.
    pub first_us: u64,
    pub last_us: u64,
    /// The local end they share, `None` when they differ.
    pub local: Option<SocketAddr>,
    /// The remote end they share, `None` when they differ.
    pub remote: Option<SocketAddr>,
    /// Distinct flows among them (counted up to [`FLOWS_COUNTED`]).
    pub flows: u64,
    /// The last one held (its time, process, state, cause and evidence).
    pub last: Line,
    flow_set: std::collections::BTreeSet<(SocketAddr, SocketAddr)>,
}

/// Distinct flows counted per roll-up (beyond it, "N or more").
pub const FLOWS_COUNTED: usize = 10_000;

impl RollUp {
    fn new(l: &Line) -> RollUp {
        RollUp {
            count: 0,
            first_us: l.t_us,
            last_us: l.t_us,
            local: Some(l.local),
            remote: Some(l.remote),
            flows: 0,
            last: l.clone(),
            flow_set: Default::default(),
        }
    }

    fn add(&mut self, l: &Line) {
        self.count += 1;
        self.first_us = self.first_us.min(l.t_us);
        self.last_us = self.last_us.max(l.t_us);
        if self.local != Some(l.local) {
            self.local = None;
        }
        if self.remote != Some(l.remote) {
            self.remote = None;
        }
        if self.flow_set.len() < FLOWS_COUNTED {
            self.flow_set.insert((l.local, l.remote));
        }
        self.flows = self.flow_set.len() as u64;
        self.last = l.clone();
    }

    /// Events per second over the time they spanned; `None` for one event or a span under a
    /// millisecond (a burst has no meaningful rate).
    pub fn rate_per_s(&self) -> Option<f64> {
        let span_us = self.last_us - self.first_us;
        (self.count > 1 && span_us >= 1_000).then(|| self.count as f64 * 1e6 / span_us as f64)
    }
}

/// The roll-up state of a running trace.
#[derive(Debug, Default)]
pub struct Repeats {
    groups: BTreeMap<Group, Interval>,
}

impl Repeats {
    pub fn new() -> Repeats {
        Repeats::default()
    }

    /// Whether to print `l` now (`true`), or hold it for the interval's roll-up.
    pub fn admit(&mut self, l: &Line) -> bool {
        let g = self.groups.entry(Group::of(l)).or_default();
        if !g.shown.contains(&l.remote) && g.shown.len() < SHOWN_PER_GROUP {
            g.shown.push(l.remote);
            return true;
        }
        g.held.get_or_insert_with(|| RollUp::new(l)).add(l);
        false
    }

    /// Ends the interval: the roll-ups of the groups that held events, in the order of their
    /// last event; every group starts afresh.
    pub fn roll_up(&mut self) -> Vec<RollUp> {
        let mut out: Vec<RollUp> = std::mem::take(&mut self.groups)
            .into_values()
            .filter_map(|g| g.held)
            .collect();
        out.sort_by_key(|r| r.last_us);
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::raw::{Process, ProcessSource, TcpState};

    fn line(t_ms: u64, cause: Cause, local: &str, remote: &str) -> Line {
        Line {
            t_us: t_ms * 1000,
            netns: 7,
            netns_name: None,
            process: Some(Process {
                pid: 42,
                comm: "client".into(),
                source: ProcessSource::Current,
            }),
            local: local.parse().unwrap(),
            remote: remote.parse().unwrap(),
            state: Some(TcpState::SynSent),
            cause,
            pathology: None,
            evidence: format!("event at {t_ms} ms"),
            drop_reason: None,
        }
    }

    #[test]
    fn a_flood_toward_one_destination_is_its_first_line_and_one_roll_up_per_interval() {
        let mut r = Repeats::new();
        // 780 failures in 8 s (issue 24), one interval.
        let printed = (0..780)
            .filter(|i| {
                r.admit(&line(
                    i * 10,
                    Cause::NoLocalPort,
                    "127.0.0.1:0",
                    "127.0.0.1:5104",
                ))
            })
            .count();
        assert_eq!(printed, 1);
        let ups = r.roll_up();
        assert_eq!(ups.len(), 1);
        let u = &ups[0];
        assert_eq!((u.count, u.first_us, u.last_us), (779, 10_000, 7_790_000));
        assert_eq!(u.remote, Some("127.0.0.1:5104".parse().unwrap()));
        assert_eq!(u.local, Some("127.0.0.1:0".parse().unwrap()));
        assert_eq!(u.flows, 1);
        assert_eq!(u.last.evidence, "event at 7790 ms");
        // 779 events over 7.78 s.
        let rate = u.rate_per_s().unwrap();
        assert!((rate - 779.0 / 7.78).abs() < 1e-9, "{rate}");
        // The next interval prints its first event again; nothing held, nothing rolled up.
        assert!(r.admit(&line(
            8_000,
            Cause::NoLocalPort,
            "127.0.0.1:0",
            "127.0.0.1:5104"
        )));
        assert!(r.roll_up().is_empty());
    }

    #[test]
    fn causes_and_processes_are_kept_apart_and_many_flows_are_a_few_lines() {
        let mut r = Repeats::new();
        let mut printed = 0;
        for i in 0..50u64 {
            // Drops toward 50 client ports: 3 printed, 47 held.
            let mut l = line(
                i,
                Cause::Drop,
                "127.0.0.1:8080",
                &format!("127.0.0.1:{}", 40000 + i),
            );
            l.process = None;
            l.drop_reason = Some("NOT_SPECIFIED".into());
            printed += usize::from(r.admit(&l));
        }
        assert_eq!(printed, SHOWN_PER_GROUP);
        // Another cause, and the same cause from another process: printed at once.
        assert!(r.admit(&line(60, Cause::SynLost, "127.0.0.1:1", "127.0.0.1:2")));
        let mut other = line(61, Cause::NoLocalPort, "127.0.0.1:0", "127.0.0.1:5104");
        other.process.as_mut().unwrap().pid = 43;
        assert!(r.admit(&other));
        let ups = r.roll_up();
        assert_eq!(ups.len(), 1);
        assert_eq!((ups[0].count, ups[0].flows), (47, 47));
        assert_eq!(ups[0].remote, None);
        assert_eq!(ups[0].local, Some("127.0.0.1:8080".parse().unwrap()));
        assert_eq!(ups[0].rate_per_s(), Some(47.0 * 1e6 / 46_000.0));
    }

    #[test]
    fn a_burst_within_a_millisecond_has_no_rate() {
        let mut r = Repeats::new();
        for _ in 0..3 {
            r.admit(&line(5, Cause::SynLost, "127.0.0.1:1", "127.0.0.1:2"));
        }
        let ups = r.roll_up();
        assert_eq!(ups[0].count, 2);
        assert_eq!(ups[0].rate_per_s(), None);
    }
}
