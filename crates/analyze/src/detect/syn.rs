//! SYN retransmissions: connects that waited for the SYN timer and were answered in the end,
//! how many times they resent, and which of Linux's SYN ladders the resend times fit.
//! Connects never answered are [`super::unanswered`]'s.

use std::time::Duration;

use serde::Serialize;
use tcpdoctor_model::{Evidence, Finding, Impact, Pathology, Source};

use super::handshake::{outcome, Outcome};
use super::{us, Conclusion, Context, Detector, Example, EXAMPLES};
use crate::engine::Config;
use crate::flow::Conn;
use crate::ladder::Ladders;

/// Which SYN ladder the observed retransmission times fit.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum LadderFit {
    /// 1, 2, 3, 4, 5, 7, 11, 19, 35, 67 s: `tcp_syn_linear_timeouts` (Linux 6.5+).
    Linear,
    /// 1, 3, 7, 15, 31, 63 s: doubling (older kernels, or the sysctl at 0).
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
    /// Connects answered after at least one SYN retransmission.
    pub connections: u64,
    pub by_retransmissions: Vec<AttemptCount>,
    pub ladder: Option<LadderFit>,
    pub max_connect_delay_us: u64,
    pub examples: Vec<Example>,
}

/// Counts connects by SYN retransmissions and ladder fit.
pub(crate) struct SynRetransmits {
    time_wait_ns: u64,
    conns: u64,
    by_attempt: [u64; 9],
    lin_only: u64,
    exp_only: u64,
    both: u64,
    neither: u64,
    max_delay_ns: u64,
    examples: Vec<Example>,
    ladders: Ladders,
}

impl SynRetransmits {
    pub(crate) fn new(cfg: &Config) -> SynRetransmits {
        SynRetransmits {
            time_wait_ns: cfg.time_wait.as_nanos() as u64,
            conns: 0,
            by_attempt: [0; 9],
            lin_only: 0,
            exp_only: 0,
            both: 0,
            neither: 0,
            max_delay_ns: 0,
            examples: Vec::new(),
            ladders: Ladders::default(),
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
        if c.in_scan || outcome(c, self.time_wait_ns) != Some(Outcome::SynRetransmit) {
            return;
        }
        let Some((answered_ts, answer_frame)) = c.synack else {
            return;
        };
        let syns = c.syn_list();
        let t0 = syns[0].0;
        let retrans = c.syn_count - 1;
        self.conns += 1;
        self.by_attempt[(retrans as usize).min(8)] += 1;
        let offsets: Vec<Duration> = syns[1..]
            .iter()
            .map(|&(t, _)| Duration::from_nanos(t.saturating_sub(t0)))
            .collect();
        let fit = self.ladders.fit(&offsets);
        match (fit.linear, fit.exponential) {
            (true, true) => self.both += 1,
            (true, false) => self.lin_only += 1,
            (false, true) => self.exp_only += 1,
            (false, false) => self.neither += 1,
        }
        // The connect ends when the client acknowledges a SYN-ACK: when the first SYN-ACK
        // was lost after the capture point, the client resent its SYN and connected on a
        // later one (the capture holds both SYN-ACKs; the first says nothing of the wait).
        let connected_ts = c
            .established_ts
            .filter(|&t| t >= answered_ts)
            .unwrap_or(answered_ts);
        let delay_ns = connected_ts.saturating_sub(t0);
        self.max_delay_ns = self.max_delay_ns.max(delay_ns);
        if self.examples.len() < EXAMPLES {
            let mut frames: Vec<u64> = syns.iter().map(|s| s.1).collect();
            frames.push(answer_frame);
            let at: Vec<String> = offsets
                .iter()
                .map(|o| format!("+{:.3} s", o.as_secs_f64()))
                .collect();
            self.examples.push(Example {
                flow: c.label(),
                frames,
                description: format!(
                    "SYN sent {} times (resent at {}; {}); connected after {}",
                    c.syn_count,
                    at.join(", "),
                    fit_words(fit.linear, fit.exponential),
                    us(delay_ns / 1_000)
                ),
            });
        }
    }

    fn conclude(mut self, ctx: &Context, out: &mut Conclusion) {
        let d = self.details();
        if let Some(f) = finding(&d, ctx.totals.connection_attempts) {
            out.findings.push(f);
        }
        out.details.syn_retransmits = d;
    }
}

/// What a connection's resend times fit, in words.
pub(crate) fn fit_words(linear: bool, exponential: bool) -> &'static str {
    match (linear, exponential) {
        (true, true) => "first rung of both ladders",
        (true, false) => "linear ladder 1, 2, 3, 4, 5, 7, 11 s",
        (false, true) => "exponential ladder 1, 3, 7, 15 s",
        (false, false) => "no Linux SYN ladder",
    }
}

/// The ladder a set of connections fit, in words.
pub(crate) fn ladder_words(l: Option<LadderFit>) -> &'static str {
    match l {
        Some(LadderFit::Linear) => {
            "timings fit the linear ladder (1, 2, 3, 4, 5, 7, 11, 19, 35, 67 s: tcp_syn_linear_timeouts)"
        }
        Some(LadderFit::Exponential) => "timings fit the exponential ladder (1, 3, 7, 15, 31, 63 s)",
        Some(LadderFit::FirstRungOnly) => "only the 1 s rung was reached (shared by both ladders)",
        Some(LadderFit::Mixed) => {
            "some connections fit the linear ladder and some the exponential one"
        }
        _ => "timings fit no Linux SYN ladder",
    }
}

/// Connects that waited: each delayed by its SYN ladder (the stall), out of every connect.
fn finding(d: &SynDetails, attempts: u64) -> Option<Finding> {
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
    let impact = Impact::stalls(
        d.connections,
        Some(attempts.max(d.connections)),
        Some(Duration::from_micros(d.max_connect_delay_us)),
    );
    let mut f = Finding::new(
        Pathology::SynRetransmit,
        Source::Analyze,
        format!(
            "{} of {} connection attempt(s) waited for SYN retransmissions ({}); connect delay up to {}; {}",
            d.connections,
            attempts.max(d.connections),
            by.join(", "),
            us(d.max_connect_delay_us),
            ladder_words(d.ladder)
        ),
        impact,
    )
    .with_evidence(Evidence::Timing {
        what: "longest connect delay by SYN retransmission".into(),
        count: d.connections,
        value_us: d.max_connect_delay_us,
    });
    for e in &d.examples {
        f = f.with_evidence(e.evidence());
    }
    Some(f)
}
