//! The findings active now: doctor's checks over one collection window, without its
//! loopback self-probe.
//!
//! [`active`] is the one place the exporter decides what is wrong; it runs the same library
//! code `tcpdoctor doctor` runs: the settings audit (`host::check::audit`, with the
//! listeners' backlogs from the census), the census analysis against the previous census
//! (`host::sockets::analyze`), the counter findings over the window
//! (`model::counters::findings` with the RTO floor), and the merge of live findings of one
//! pathology into one, judged again by the policy.
//!
//! No self-probe: it opens up to 1000 loopback connections, each leaving a TIME_WAIT socket
//! for 60 s; run every interval it would load the host it watches and show up in the census
//! and the counters the exporter reports.

use std::collections::BTreeMap;
use std::time::Duration;

use tcpdoctor_host::check::{self, Inputs};
use tcpdoctor_model::counters::{self, Window};
use tcpdoctor_model::{Finding, Source};

/// What one collection saw.
pub struct Observed<'a> {
    /// Settings and routes, with the census's listener backlogs filled in; `None` when they
    /// could not be read (the audit is then skipped).
    pub inputs: Option<&'a Inputs>,
    /// Findings of the census analysis (against the previous census when there was one).
    pub sockets: Vec<Finding>,
    /// Counter deltas over the window (nstat name -> change); `None` on the first collection.
    pub counters: Option<&'a BTreeMap<String, i64>>,
    /// The window's length.
    pub window: Option<Duration>,
}

/// Findings active now, unranked.
pub fn active(o: Observed) -> Vec<Finding> {
    let mut found = Vec::new();
    let mut rto_floor = None;
    if let Some(i) = o.inputs {
        found.extend(check::audit(i));
        rto_floor = Some(i.rto_floor());
    }
    found.extend(o.sockets);
    if let Some(delta) = o.counters {
        found.extend(counters::findings(
            delta,
            Window {
                length: o.window,
                rto_floor,
            },
        ));
    }
    merge(found)
}

/// One finding per pathology among live observations (sockets, counters): the census and
/// the counters often see one problem from two sides. The impacts merge and the policy judges
/// the merged impact; settings findings stay apart (they describe exposure, not events).
/// The same rule as `tcpdoctor doctor`'s merge.
pub fn merge(found: Vec<Finding>) -> Vec<Finding> {
    let mut out: Vec<Finding> = Vec::with_capacity(found.len());
    for f in found {
        let live = f.source != Source::Check;
        let twin = out
            .iter_mut()
            .find(|g| live && g.source != Source::Check && g.pathology == f.pathology);
        match twin {
            Some(g) => {
                let impact = g.impact.merge(&f.impact);
                let mut merged = g.clone().with_impact(impact);
                merged.summary = format!("{}; {}", g.summary, f.summary);
                merged.evidence.extend(f.evidence);
                *g = merged;
            }
            None => out.push(f),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use tcpdoctor_model::{Impact, Pathology, Severity};

    #[test]
    fn live_findings_of_one_pathology_merge_and_are_judged_again() {
        let a = Finding::new(
            Pathology::AcceptQueueOverflow,
            Source::Sockets,
            "full queue",
            Impact::stalls(1, Some(100), None),
        );
        let b = Finding::new(
            Pathology::AcceptQueueOverflow,
            Source::Counters,
            "ListenOverflows +40",
            Impact::stalls(40, None, Some(Duration::from_secs(1))),
        );
        let s = Finding::new(
            Pathology::AcceptQueueOverflow,
            Source::Check,
            "small backlog",
            Impact::none(),
        );
        let m = merge(vec![a, s, b]);
        assert_eq!(m.len(), 2);
        assert_eq!(m[0].summary, "full queue; ListenOverflows +40");
        assert_eq!(m[0].severity, m[0].impact.severity());
        assert_eq!(m[0].severity, Severity::Critical);
        assert_eq!(m[1].source, Source::Check);
    }

    #[test]
    fn counter_window_turns_timeouts_into_stalls_of_the_rto_floor() {
        let mut delta = BTreeMap::new();
        delta.insert("TcpExtTCPTimeouts".to_string(), 3);
        let f = active(Observed {
            inputs: None,
            sockets: Vec::new(),
            counters: Some(&delta),
            window: Some(Duration::from_secs(15)),
        });
        assert_eq!(f.len(), 1);
        assert_eq!(f[0].pathology, Pathology::RetransmitTimeout);
        assert_eq!(f[0].source, Source::Counters);
        // No counters on the first collection: nothing to judge.
        let none = active(Observed {
            inputs: None,
            sockets: Vec::new(),
            counters: None,
            window: None,
        });
        assert!(none.is_empty());
    }
}
