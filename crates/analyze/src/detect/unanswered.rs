//! SYNs never answered: connection attempts that got neither a SYN-ACK nor a reset, whose
//! client stopped resending (the engine ends such an attempt when its SYN ladder says the
//! next resend is overdue, [`crate::ladder`]), and those still waiting when the capture ended.
//!
//! Three shapes, told apart because they mean different things:
//! - SYNs resent on a ladder and never answered: clients that waited and failed; the server,
//!   a route or a firewall does not answer.
//! - Many SYNs from many sources, each sent once, at a high rate: a SYN flood, also when it
//!   is still going on as the capture ends (its SYNs then are "waiting", [`FLOOD_MIN_SYNS`]).
//! - A few SYNs sent once and never resent, not a flood: their sender did not wait (a connect
//!   timeout under the first SYN timeout, a probe) or the capture missed the resends; no
//!   connection is known to have failed, and the finding says so.
//!
//! Probes of a port scan are the scan's ([`super::scan`]). Memory is bounded: counts, a
//! distinct-source estimate, the first destinations, the attempts still waiting at the end
//! (at most as many as the engine holds half-open), a few examples.

use std::net::IpAddr;
use std::time::Duration;

use serde::Serialize;
use tcpdoctor_model::{merge, Evidence, Finding, Impact, Pathology, Source};

use super::syn::{fit_words, ladder_words, LadderFit};
use super::{us, Conclusion, Context, Detector, Example, EXAMPLES};
use crate::engine::Config;
use crate::flow::{CloseKind, Conn, Endpoint, FastHasher};
use crate::ladder::Ladders;
use tcpdoctor_model::timers::SYN_INITIAL_RTO;

/// Destinations counted one by one; SYNs toward others are counted together.
const DESTINATIONS: usize = 64;

/// SYNs sent once from distinct sources, none answered, that make a flood: fewer are a few
/// clients or probes, whatever their share.
pub const FLOOD_MIN_SYNS: u64 = 100;

/// Distinct source addresses of a flood: many sources each sending once (often spoofed).
pub const FLOOD_MIN_SOURCES: u64 = 100;

/// The flood's SYNs per second (first to last): scanners and stray clients over a day of
/// capture also come from many sources, but not at this rate.
pub const FLOOD_MIN_RATE_PER_S: f64 = 100.0;

/// A SYN still waiting when the capture ended counts as unanswered once it waited this long
/// and twice the slowest answer to a first SYN seen in the capture: any round trip short of
/// a satellite path's has answered by then.
pub const ANSWER_OVERDUE: Duration = Duration::from_millis(200);

/// Attempts still waiting at the end remembered one by one (the engine holds at most
/// [`crate::engine::HALF_OPEN_MAX`] half-open at once); past it they are only counted.
const WAITING_MAX: usize = 1 << 17;

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct DestinationCount {
    pub server: String,
    pub connections: u64,
}

/// What the unanswered SYNs look like (module docs).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Shape {
    /// Many sources each sending once, at a high rate: a SYN flood.
    Flood,
    /// Most attempts resent their SYN on a ladder: the destination does not answer.
    NotAnswering,
    /// SYNs sent once and never resent, too few or too slow for a flood.
    SentOnce,
    /// Some resent, more sent once.
    Mixed,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct UnansweredDetails {
    /// Connection attempts whose SYNs got no answer and whose client stopped resending.
    pub connections: u64,
    /// Of them, attempts that sent their SYN once and never again.
    pub sent_once: u64,
    /// Of them, attempts that resent their SYN.
    pub resent: u64,
    /// Which SYN ladder the resends fit (for the resent ones).
    pub ladder: Option<LadderFit>,
    /// Distinct source addresses of the unanswered SYNs, the overdue ones at the end
    /// included (an estimate within about 2%).
    pub distinct_sources: u64,
    /// Distinct destinations (address and port) they were sent to; an estimate past 64.
    pub distinct_destinations: u64,
    /// The destinations they were sent to, most first (up to 5).
    pub destinations: Vec<DestinationCount>,
    /// Longest time from a first SYN to the last sign of its attempt.
    pub longest_wait_us: u64,
    /// Attempts still waiting for an answer when the capture ended, not counted above.
    pub waiting_at_end: u64,
    /// Of those, attempts that had resent their SYN (a stall already).
    pub waiting_resent: u64,
    /// Of those, attempts that sent their SYN once and had waited past `overdue_after_us`:
    /// unanswered, though their client might still have resent.
    pub waiting_overdue: u64,
    /// Of those, attempts that sent their SYN once and had waited past `overdue_after_us`
    /// but less than the first SYN timeout (1 s), in a capture whose other attempts resent
    /// their SYNs on the ladder (a `syn_retransmit` finding): not overdue, their first resend
    /// simply not due yet when the capture ended; counted as inside their ladder.
    pub waiting_first_rung: u64,
    /// How long a SYN waiting at the end must have waited to count as unanswered
    /// ([`ANSWER_OVERDUE`], or twice the slowest answer to a first SYN in the capture).
    pub overdue_after_us: u64,
    /// The shape of the unanswered SYNs, when there are any.
    pub shape: Option<Shape>,
    /// SYNs sent once and unanswered (given up, or overdue at the end) per second, first to
    /// last.
    pub sent_once_per_s: f64,
    /// Attempts summarised before their ladder ended because too many waited at once (a
    /// flood): a resend of one of them after that would count as a new attempt.
    pub summarised_early: u64,
    pub examples: Vec<Example>,
}

/// A HyperLogLog estimate of distinct values (Flajolet et al. 2007) with 4096 one-byte
/// registers: about 1.6% standard error, 4 KiB whatever the count.
#[derive(Clone)]
struct Distinct {
    registers: Box<[u8; 4096]>,
}

impl Default for Distinct {
    fn default() -> Distinct {
        Distinct {
            registers: Box::new([0; 4096]),
        }
    }
}

impl Distinct {
    fn add(&mut self, h: u64) {
        // The hash's low 12 bits pick the register, the rank of the rest is kept.
        let i = (h & 4095) as usize;
        let rank = ((h >> 12) | (1 << 52)).trailing_zeros() as u8 + 1;
        if rank > self.registers[i] {
            self.registers[i] = rank;
        }
    }

    fn estimate(&self) -> u64 {
        let m = 4096.0_f64;
        let sum: f64 = self
            .registers
            .iter()
            .map(|&r| 2f64.powi(-i32::from(r)))
            .sum();
        let zeros = self.registers.iter().filter(|&&r| r == 0).count();
        let raw = 0.7213 / (1.0 + 1.079 / m) * m * m / sum;
        let e = if raw <= 2.5 * m && zeros > 0 {
            // Small range: linear counting.
            m * (m / zeros as f64).ln()
        } else {
            raw
        };
        e.round() as u64
    }
}

/// A 64-bit hash of an address, mixed well enough for [`Distinct`].
fn addr_hash(a: &IpAddr) -> u64 {
    mix(a)
}

/// A 64-bit hash of an endpoint (address and port) for [`Distinct`].
fn endpoint_hash(e: &Endpoint) -> u64 {
    mix(e)
}

/// SplitMix64's finaliser over the FxHash of `v`.
fn mix<T: std::hash::Hash>(v: &T) -> u64 {
    use std::hash::Hasher;
    let mut h = FastHasher::default();
    v.hash(&mut h);
    let mut z = h.finish();
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// An attempt still waiting for an answer when the capture ended.
struct Waiting {
    client: Endpoint,
    server: Endpoint,
    first_ts: u64,
    frame: u64,
}

pub(crate) struct Unanswered {
    d: UnansweredDetails,
    sources: Distinct,
    dests: Vec<(Endpoint, u64)>,
    /// Attempts toward destinations past the first [`DESTINATIONS`], and their distinct count.
    other_dests: u64,
    other_distinct: Distinct,
    /// Sent-once attempts given up: first and last SYN.
    once_first_ts: u64,
    once_last_ts: u64,
    /// Slowest SYN-ACK to a first SYN (no resend) in the capture.
    answer_max_ns: u64,
    /// Sent-once attempts still waiting at the end (their client may yet resend).
    waiting: Vec<Waiting>,
    /// (client, server) address of each example, to take back a port scan's.
    example_pairs: Vec<(IpAddr, IpAddr)>,
    ladders: Ladders,
    lin_only: u64,
    exp_only: u64,
    both: u64,
    neither: u64,
}

impl Unanswered {
    pub(crate) fn new(_cfg: &Config) -> Unanswered {
        Unanswered {
            d: UnansweredDetails::default(),
            sources: Distinct::default(),
            dests: Vec::new(),
            other_dests: 0,
            other_distinct: Distinct::default(),
            once_first_ts: u64::MAX,
            once_last_ts: 0,
            answer_max_ns: 0,
            waiting: Vec::new(),
            example_pairs: Vec::new(),
            ladders: Ladders::default(),
            lin_only: 0,
            exp_only: 0,
            both: 0,
            neither: 0,
        }
    }

    /// Counts one more unanswered attempt toward `server`.
    fn destination(&mut self, server: Endpoint) {
        match self.dests.iter().position(|(e, _)| *e == server) {
            Some(i) => self.dests[i].1 += 1,
            None if self.dests.len() < DESTINATIONS => self.dests.push((server, 1)),
            None => {
                self.other_dests += 1;
                self.other_distinct.add(endpoint_hash(&server));
            }
        }
    }

    fn example(&mut self, c: &Conn, offsets: &[Duration]) {
        if self.d.examples.len() >= EXAMPLES {
            return;
        }
        let frames: Vec<u64> = c.syn_list().iter().map(|s| s.1).collect();
        let description = if c.syn_count <= 1 {
            "SYN sent once, never answered, never resent".to_string()
        } else {
            let at: Vec<String> = offsets
                .iter()
                .map(|o| format!("+{:.3} s", o.as_secs_f64()))
                .collect();
            let fit = self.ladders.fit(offsets);
            format!(
                "SYN sent {} times (resent at {}; {}), never answered",
                c.syn_count,
                at.join(", "),
                fit_words(fit.linear, fit.exponential)
            )
        };
        self.example_pairs.push((c.client.addr, c.server.addr));
        self.d.examples.push(Example {
            flow: c.label(),
            frames,
            description,
        });
    }

    /// Takes back what a port scan's probes added before the scan was known.
    fn take_back_scans(&mut self, ctx: &Context) {
        for ((client, server), l) in ctx.scans {
            let d = &mut self.d;
            d.connections = d
                .connections
                .saturating_sub(l.unanswered_once + l.unanswered_resent);
            d.sent_once = d.sent_once.saturating_sub(l.unanswered_once);
            d.resent = d.resent.saturating_sub(l.unanswered_resent);
            for &(port, n) in &l.unanswered_ports {
                let e = Endpoint {
                    addr: *server,
                    port,
                };
                if let Some(i) = self.dests.iter().position(|(x, _)| *x == e) {
                    self.dests[i].1 = self.dests[i].1.saturating_sub(u64::from(n));
                }
            }
            self.waiting
                .retain(|w| (w.client.addr, w.server.addr) != (*client, *server));
            let pairs = &self.example_pairs;
            let mut i = 0;
            self.d.examples.retain(|_| {
                i += 1;
                pairs[i - 1] != (*client, *server)
            });
            self.example_pairs.retain(|p| *p != (*client, *server));
        }
        self.dests.retain(|(_, n)| *n > 0);
    }
}

impl Detector for Unanswered {
    fn finished(&mut self, c: &Conn) {
        if c.syn_count == 1 {
            if let Some((answer, _)) = c.synack {
                let first = c.syn_list()[0].0;
                self.answer_max_ns = self.answer_max_ns.max(answer.saturating_sub(first));
            }
        }
        let failed = c.close == CloseKind::Unanswered;
        let waiting = c.close == CloseKind::Open && c.half_open();
        if !(failed || waiting) || c.in_scan {
            return;
        }
        let syns = c.syn_list();
        let t0 = syns[0].0;
        let wait_ns = c.last_ts.saturating_sub(t0);
        let offsets: Vec<Duration> = syns[1..]
            .iter()
            .map(|&(t, _)| Duration::from_nanos(t.saturating_sub(t0)))
            .collect();
        if waiting {
            let d = &mut self.d;
            d.waiting_at_end += 1;
            if c.syn_count > 1 {
                d.waiting_resent += 1;
                d.longest_wait_us = d.longest_wait_us.max(wait_ns / 1_000);
            } else if self.waiting.len() < WAITING_MAX {
                self.waiting.push(Waiting {
                    client: c.client,
                    server: c.server,
                    first_ts: t0,
                    frame: syns[0].1,
                });
            }
            return;
        }
        let d = &mut self.d;
        d.connections += 1;
        d.longest_wait_us = d.longest_wait_us.max(wait_ns / 1_000);
        self.sources.add(addr_hash(&c.client.addr));
        self.destination(c.server);
        if c.syn_count <= 1 {
            self.d.sent_once += 1;
            self.once_first_ts = self.once_first_ts.min(t0);
            self.once_last_ts = self.once_last_ts.max(t0);
        } else {
            self.d.resent += 1;
            let fit = self.ladders.fit(&offsets);
            match (fit.linear, fit.exponential) {
                (true, true) => self.both += 1,
                (true, false) => self.lin_only += 1,
                (false, true) => self.exp_only += 1,
                (false, false) => self.neither += 1,
            }
        }
        self.example(c, &offsets);
    }

    fn conclude(mut self, ctx: &Context, out: &mut Conclusion) {
        self.take_back_scans(ctx);
        // SYNs sent once and still waiting at the end count once they are overdue.
        let overdue = ANSWER_OVERDUE.max(Duration::from_nanos(self.answer_max_ns * 2));
        self.d.overdue_after_us = overdue.as_micros() as u64;
        let overdue_ns = overdue.as_nanos() as u64;
        // Waited from its SYN to the end of the capture.
        let end = ctx.first_ts_ns + ctx.span_ns;
        let mut late: Vec<Waiting> = std::mem::take(&mut self.waiting)
            .into_iter()
            .filter(|w| end.saturating_sub(w.first_ts) >= overdue_ns)
            .collect();
        // Where the capture shows clients resending their SYNs on the ladder, a SYN that has
        // waited less than the ladder's first timeout is not overdue: its resend was not due.
        if out
            .findings
            .iter()
            .any(|f| f.pathology == Pathology::SynRetransmit)
        {
            let rung_ns = SYN_INITIAL_RTO.as_nanos() as u64;
            let before = late.len();
            late.retain(|w| end.saturating_sub(w.first_ts) >= rung_ns);
            self.d.waiting_first_rung = (before - late.len()) as u64;
        }
        self.d.waiting_overdue = late.len() as u64;
        let mut sources = self.sources.clone();
        for w in &late {
            sources.add(addr_hash(&w.client.addr));
            self.destination(w.server);
            self.once_first_ts = self.once_first_ts.min(w.first_ts);
            self.once_last_ts = self.once_last_ts.max(w.first_ts);
        }
        for w in late
            .iter()
            .take(EXAMPLES.saturating_sub(self.d.examples.len()))
        {
            self.d.examples.push(Example {
                flow: format!("{} > {}", w.client, w.server),
                frames: vec![w.frame],
                description: format!(
                    "SYN sent once, unanswered after {} when the capture ended",
                    us(end.saturating_sub(w.first_ts) / 1_000)
                ),
            });
        }
        let once = self.d.sent_once + self.d.waiting_overdue;
        self.d.distinct_sources = if once + self.d.resent == 0 {
            0
        } else {
            sources.estimate().clamp(1, once + self.d.resent)
        };
        self.d.sent_once_per_s = if once > 1 && self.once_last_ts > self.once_first_ts {
            once as f64 / ((self.once_last_ts - self.once_first_ts) as f64 / 1e9)
        } else {
            0.0
        };
        self.d.summarised_early = ctx.totals.half_open_summarised_early;
        self.d.ladder =
            (self.d.resent > 0).then_some(match (self.lin_only > 0, self.exp_only > 0) {
                (true, true) => LadderFit::Mixed,
                (true, false) => LadderFit::Linear,
                (false, true) => LadderFit::Exponential,
                (false, false) if self.both > 0 => LadderFit::FirstRungOnly,
                _ => LadderFit::Neither,
            });
        self.dests.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
        self.d.distinct_destinations = self.dests.len() as u64
            + if self.other_dests > 0 {
                self.other_distinct.estimate().clamp(1, self.other_dests)
            } else {
                0
            };
        self.d.destinations = self
            .dests
            .iter()
            .take(5)
            .map(|(e, n)| DestinationCount {
                server: e.to_string(),
                connections: *n,
            })
            .collect();
        self.d.shape = shape(&self.d);
        if let Some(f) = finding(&self.d, ctx.totals.connection_attempts) {
            fold_or_push(&self.d, f, &mut out.findings);
        }
        out.details.unanswered_syns = self.d;
    }
}

/// One cause, one finding: when the only unanswered attempts are ones still inside their SYN
/// ladder as the capture ended (resending, or sent once less than the first SYN timeout
/// before the end: `waiting_first_rung`), and other attempts of the capture completed
/// after SYN resends (a `syn_retransmit` finding, concluded before this one), they are the same
/// SYN loss caught mid-ladder: the finding folds into the resends' as a consequence
/// ([`merge::fold_consequences`]). Attempts that gave up, or SYNs overdue that were never resent, stay a
/// finding of their own. Measured: a syn-drop lab capture (30% of SYNs dropped) ranked "1
/// connection attempt(s) were still resending unanswered SYNs when the capture ended; longest
/// wait 1.023 s" as a CRITICAL unanswered_syn before its syn_retransmit (conformance, 2 of 11
/// full-suite runs).
fn fold_or_push(d: &UnansweredDetails, f: Finding, out: &mut Vec<Finding>) {
    let in_ladder = d.waiting_resent + d.waiting_first_rung;
    let only_in_ladder = d.connections + d.waiting_overdue == 0 && in_ladder > 0;
    if only_in_ladder && out.iter().any(|g| g.pathology == Pathology::SynRetransmit) {
        out.push(f.consequence_of(Pathology::SynRetransmit));
        merge::fold_consequences(out);
    } else {
        out.push(f);
    }
}

/// The shape of the unanswered attempts (module docs), if any.
fn shape(d: &UnansweredDetails) -> Option<Shape> {
    let once = d.sent_once + d.waiting_overdue;
    if once + d.resent == 0 {
        return None;
    }
    Some(
        if once >= FLOOD_MIN_SYNS
            && d.distinct_sources >= FLOOD_MIN_SOURCES
            && once * 10 >= (once + d.resent) * 9
            && d.sent_once_per_s >= FLOOD_MIN_RATE_PER_S
        {
            Shape::Flood
        } else if d.resent >= once {
            Shape::NotAnswering
        } else if d.resent == 0 {
            Shape::SentOnce
        } else {
            Shape::Mixed
        },
    )
}

fn finding(d: &UnansweredDetails, attempts: u64) -> Option<Finding> {
    let once = d.sent_once + d.waiting_overdue;
    let unanswered = d.connections + d.waiting_overdue;
    if unanswered == 0 && d.waiting_resent + d.waiting_first_rung == 0 {
        return None;
    }
    let attempts = attempts.max(d.connections + d.waiting_at_end);
    let toward = match d.destinations.as_slice() {
        [] => String::new(),
        [one] if d.distinct_destinations <= 1 => format!(" toward {}", one.server),
        [first, ..] => format!(
            " toward {}{} destinations (the most, {}, to {})",
            if d.distinct_destinations > DESTINATIONS as u64 {
                "about "
            } else {
                ""
            },
            d.distinct_destinations,
            first.connections,
            first.server
        ),
    };
    let at_end = if d.waiting_overdue > 0 {
        format!(
            " ({} of them still unanswered after {} or more when the capture ended)",
            d.waiting_overdue,
            us(d.overdue_after_us)
        )
    } else {
        String::new()
    };
    let shape = d.shape.unwrap_or(Shape::SentOnce);
    let what = match shape {
        Shape::Flood => format!(
            "{once} SYN(s) from about {} distinct source address(es){toward}, about {} a second, each sent once and never answered{at_end}: the shape of a SYN flood",
            d.distinct_sources,
            rate3(d.sent_once_per_s)
        ),
        Shape::NotAnswering => format!(
            "{} of {attempts} connection attempt(s){toward} resent their SYN ({}) and got no answer before their clients gave up: the server, a route or a firewall does not answer",
            d.resent,
            ladder_words(d.ladder)
        ),
        Shape::SentOnce => format!(
            "{once} of {attempts} connection attempt(s){toward} sent their SYN once and got no answer (no SYN-ACK, no reset){at_end}, from about {} source address(es); none was resent: their senders did not wait for an answer (a connect timeout under the first SYN timeout of 1 s, a probe) or the capture missed the resends; unexplained by the capture, and no connection is known to have failed",
            d.distinct_sources
        ),
        Shape::Mixed => format!(
            "{unanswered} of {attempts} connection attempt(s){toward} got no answer (no SYN-ACK, no reset){at_end}: {} resent their SYN ({}) before their clients gave up, {once} sent it once and never again; from about {} source address(es)",
            d.resent,
            ladder_words(d.ladder),
            d.distinct_sources
        ),
    };
    let mut summary = if unanswered > 0 {
        what
    } else {
        let first = match d.waiting_first_rung {
            0 => String::new(),
            n => format!(
                " ({n} of them had sent one SYN, less than the first SYN timeout of {} before the end)",
                us(SYN_INITIAL_RTO.as_micros() as u64)
            ),
        };
        let longest = match d.longest_wait_us {
            0 => String::new(),
            w => format!("; longest wait {}", us(w)),
        };
        format!(
            "{} connection attempt(s){toward} were still inside their SYN ladder, unanswered, when the capture ended{first}{longest}",
            d.waiting_resent + d.waiting_first_rung,
        )
    };
    // A SYN sent once tells nothing of how long its client waited before giving up.
    if unanswered > 0 && d.longest_wait_us > 0 && d.resent + d.waiting_resent > 0 {
        summary.push_str(&format!("; longest wait seen {}", us(d.longest_wait_us)));
    }
    let waiting_rest = d.waiting_at_end - d.waiting_overdue;
    if unanswered > 0 && waiting_rest > 0 {
        summary.push_str(&format!(
            "; {waiting_rest} more were still waiting for an answer when the capture ended ({} of them had resent)",
            d.waiting_resent
        ));
    }
    if d.summarised_early > 0 {
        summary.push_str(&format!(
            "; {} summarised before their SYN ladder ended ({} waited at once)",
            d.summarised_early,
            crate::engine::HALF_OPEN_MAX
        ));
    }
    // Failed: attempts whose clients resent and gave up (they waited), and a flood's SYNs
    // (the destination answered none). A SYN sent once outside a flood is an attempt nobody
    // is known to have waited on: affected, not failed.
    let failed = d.resent + if shape == Shape::Flood { once } else { 0 };
    let affected = unanswered + d.waiting_resent + d.waiting_first_rung;
    let stall = (d.resent + d.waiting_resent > 0 && d.longest_wait_us > 0)
        .then(|| Duration::from_micros(d.longest_wait_us));
    let mut impact = if failed > 0 {
        Impact::failures(failed, Some(attempts))
    } else {
        Impact::stalls(affected, Some(attempts), None)
    };
    if let Some(s) = stall {
        impact = impact.with_stall(s);
    }
    impact.affected = affected;
    let mut f = Finding::new(Pathology::UnansweredSyn, Source::Analyze, summary, impact);
    if let Some(s) = stall {
        f = f.with_evidence(Evidence::Timing {
            what: "longest wait for an answer to a SYN (first to last SYN)".into(),
            count: d.resent + d.waiting_resent,
            value_us: s.as_micros() as u64,
        });
    }
    for e in &d.examples {
        f = f.with_evidence(e.evidence());
    }
    Some(f)
}

/// A rate to three significant digits, thousands grouped: `100,000`, `1,230`, `45.6`.
fn rate3(v: f64) -> String {
    if v < 100.0 {
        return format!("{v:.1}");
    }
    let digits = v.log10().floor() as i32 + 1;
    let unit = 10f64.powi((digits - 3).max(0));
    let n = ((v / unit).round() * unit) as u64;
    let s = n.to_string();
    let mut out = String::new();
    for (i, ch) in s.chars().enumerate() {
        if i > 0 && (s.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(ch);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::Distinct;

    #[test]
    fn rates_read_to_three_digits() {
        assert_eq!(super::rate3(100_003.0), "100,000");
        assert_eq!(super::rate3(1_234.0), "1,230");
        assert_eq!(super::rate3(999.6), "1,000");
        assert_eq!(super::rate3(45.61), "45.6");
    }

    #[test]
    fn distinct_estimate_is_within_a_few_percent() {
        for n in [1u64, 10, 1000, 100_000] {
            let mut d = Distinct::default();
            for i in 0..n {
                let a = std::net::IpAddr::V4(std::net::Ipv4Addr::from(0x0a00_0000 + i as u32));
                // Each address twice: duplicates do not count.
                d.add(super::addr_hash(&a));
                d.add(super::addr_hash(&a));
            }
            let est = d.estimate() as f64;
            assert!(
                (est - n as f64).abs() <= (n as f64 * 0.05).max(1.0),
                "{n}: {est}"
            );
        }
    }
}
