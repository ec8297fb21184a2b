//! SYN retransmissions: connects that waited for the SYN timer, how many times, and which
//! of Linux's SYN ladders the resend times fit.

use std::time::Duration;

use serde::Serialize;
use tcpdoctor_model::{
    timers::SYN_INITIAL_RTO, Evidence, Finding, Pathology, Severity, Source, SynLadder,
};

use super::handshake::{outcome, Outcome};
use super::{us, Conclusion, Context, Detector, Example, EXAMPLES};
use crate::engine::Config;
use crate::flow::Conn;

/// Which SYN ladder the observed retransmission times fit.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum LadderFit {
    /// 1, 2, 3, 4, 5, 7 s: `tcp_syn_linear_timeouts` (Linux 6.10+).
    Linear,
    /// 1, 3, 7, 15, 31 s: doubling (older kernels, or the sysctl at 0).
    Exponential,
    /// Only the first rung (1 s) was seen, which both ladders share.
    FirstRungOnly,
    /// Some connections fit one ladder and some the other.
    Mixed,
    /// The retransmission times fit neither (a non-Linux stack or a changed initial RTO).
    Neither,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct AttemptCount {
    /// Retransmissions of the SYN before the connection was answered (or gave up).
    pub retransmissions: u32,
    pub connections: u64,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct SynDetails {
    pub connections: u64,
    /// Connections whose SYN was never answered within the capture.
    pub unanswered: u64,
    pub by_retransmissions: Vec<AttemptCount>,
    pub ladder: Option<LadderFit>,
    pub max_connect_delay_us: u64,
    pub examples: Vec<Example>,
}

/// Counts connects by SYN retransmissions and ladder fit.
pub(crate) struct SynRetransmits {
    time_wait_ns: u64,
    conns: u64,
    unanswered: u64,
    by_attempt: [u64; 9],
    lin_only: u64,
    exp_only: u64,
    both: u64,
    neither: u64,
    max_delay_ns: u64,
    examples: Vec<Example>,
    linear: SynLadder,
    exponential: SynLadder,
}

impl SynRetransmits {
    pub(crate) fn new(cfg: &Config) -> SynRetransmits {
        SynRetransmits {
            time_wait_ns: cfg.time_wait.as_nanos() as u64,
            conns: 0,
            unanswered: 0,
            by_attempt: [0; 9],
            lin_only: 0,
            exp_only: 0,
            both: 0,
            neither: 0,
            max_delay_ns: 0,
            examples: Vec::new(),
            // Linux defaults: tcp_syn_retries=6, tcp_syn_linear_timeouts=4 (6.10+) or none.
            linear: SynLadder::new(6, Some(4), SYN_INITIAL_RTO),
            exponential: SynLadder::new(6, None, SYN_INITIAL_RTO),
        }
    }

    fn details(&mut self) -> SynDetails {
        let ladder = (self.conns > 0).then_some(match (self.lin_only > 0, self.exp_only > 0) {
            (true, true) => LadderFit::Mixed,
            (true, false) => LadderFit::Linear,
            (false, true) => LadderFit::Exponential,
            (false, false) if self.both > 0 => LadderFit::FirstRungOnly,
            _ => LadderFit::Neither,
        });
        SynDetails {
            connections: self.conns,
            unanswered: self.unanswered,
            by_retransmissions: self
                .by_attempt
                .iter()
                .enumerate()
                .filter(|(_, &n)| n > 0)
                .map(|(i, &n)| AttemptCount {
                    retransmissions: i as u32,
                    connections: n,
                })
                .collect(),
            ladder,
            max_connect_delay_us: self.max_delay_ns / 1_000,
            examples: std::mem::take(&mut self.examples),
        }
    }
}

impl Detector for SynRetransmits {
    fn finished(&mut self, c: &Conn) {
        if outcome(c, self.time_wait_ns) != Some(Outcome::SynRetransmit) {
            return;
        }
        let syns = c.syn_list();
        let t0 = syns[0].0;
        let retrans = c.syn_count - 1;
        self.conns += 1;
        self.by_attempt[(retrans as usize).min(8)] += 1;
        let offsets: Vec<Duration> = syns[1..]
            .iter()
            .map(|&(t, _)| Duration::from_nanos(t.saturating_sub(t0)))
            .collect();
        let fits = |l: &SynLadder| {
            offsets.iter().enumerate().all(|(i, &off)| {
                l.retransmit_at(i as u32 + 1).is_some_and(|rung| {
                    // Timer granularity (4 ms at HZ=250) plus scheduling: 5% or 50 ms.
                    let tol = (rung / 20).max(Duration::from_millis(50));
                    off.abs_diff(rung) <= tol
                })
            })
        };
        let (lin, exp) = (fits(&self.linear), fits(&self.exponential));
        match (lin, exp) {
            (true, true) => self.both += 1,
            (true, false) => self.lin_only += 1,
            (false, true) => self.exp_only += 1,
            (false, false) => self.neither += 1,
        }
        let (delay_ns, answered) = match c.synack {
            Some((t, _)) => (t.saturating_sub(t0), true),
            None => (c.last_ts.saturating_sub(t0), false),
        };
        if !answered {
            self.unanswered += 1;
        }
        self.max_delay_ns = self.max_delay_ns.max(delay_ns);
        if self.examples.len() < EXAMPLES {
            let mut frames: Vec<u64> = syns.iter().map(|s| s.1).collect();
            if let Some((_, f)) = c.synack {
                frames.push(f);
            }
            let at: Vec<String> = offsets
                .iter()
                .map(|o| format!("+{:.3} s", o.as_secs_f64()))
                .collect();
            let fit = match (lin, exp) {
                (true, true) => "first rung of both ladders",
                (true, false) => "linear ladder 1, 2, 3, 4, 5, 7 s",
                (false, true) => "exponential ladder 1, 3, 7, 15 s",
                (false, false) => "no Linux SYN ladder",
            };
            let outcome = if answered {
                format!("SYN-ACK after {}", us(delay_ns / 1_000))
            } else {
                "never answered in the capture".to_string()
            };
            self.examples.push(Example {
                flow: c.label(),
                frames,
                description: format!(
                    "SYN sent {} times (resent at {}; {fit}); {outcome}",
                    c.syn_count,
                    at.join(", ")
                ),
            });
        }
    }

    fn conclude(mut self, _ctx: &Context, out: &mut Conclusion) {
        let d = self.details();
        if let Some(f) = finding(&d) {
            out.findings.push(f);
        }
        out.details.syn_retransmits = d;
    }
}

#[allow(deprecated)]
fn finding(d: &SynDetails) -> Option<Finding> {
    if d.connections == 0 {
        return None;
    }
    let by: Vec<String> = d
        .by_retransmissions
        .iter()
        .map(|a| {
            format!(
                "{} x {} retransmission(s)",
                a.connections, a.retransmissions
            )
        })
        .collect();
    let ladder = match d.ladder {
        Some(LadderFit::Linear) => {
            "timings fit the linear ladder (1, 2, 3, 4, 5, 7 s: tcp_syn_linear_timeouts)"
        }
        Some(LadderFit::Exponential) => "timings fit the exponential ladder (1, 3, 7, 15 s)",
        Some(LadderFit::FirstRungOnly) => "only the 1 s rung was reached (shared by both ladders)",
        Some(LadderFit::Mixed) => {
            "some connections fit the linear ladder and some the exponential one"
        }
        _ => "timings fit no Linux SYN ladder",
    };
    let severe = d.unanswered > 0 || d.by_retransmissions.iter().any(|a| a.retransmissions >= 2);
    let mut f = Finding::legacy(
        Pathology::SynRetransmit,
        if severe {
            Severity::Critical
        } else {
            Severity::Warning
        },
        Source::Analyze,
        format!(
            "{} connection(s) waited for SYN retransmissions ({}); connect delay up to {}; {ladder}",
            d.connections,
            by.join(", "),
            us(d.max_connect_delay_us)
        ),
    )
    .with_evidence(Evidence::Timing {
        what: "connect delay by SYN retransmission".into(),
        count: d.connections,
        value_us: d.max_connect_delay_us,
    });
    for e in &d.examples {
        f = f.with_evidence(e.evidence());
    }
    Some(f)
}
