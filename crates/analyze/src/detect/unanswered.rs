//! SYNs never answered: connection attempts that got neither a SYN-ACK nor a reset, whose
//! client stopped resending (the engine ends such an attempt when its SYN ladder says the
//! next resend is overdue, [`crate::ladder`]). Many sources each sending one SYN is the
//! shape of a SYN flood; SYNs resent on a ladder toward one address is a server (or a route,
//! a firewall) that does not answer. Memory is bounded: counts, a distinct-source estimate,
//! a few destinations and examples.

use std::time::Duration;

use serde::Serialize;
use tcpdoctor_model::{Evidence, Finding, Impact, Pathology, Source};

use super::syn::{fit_words, ladder_words, LadderFit};
use super::{us, Conclusion, Context, Detector, Example, EXAMPLES};
use crate::engine::Config;
use crate::flow::{CloseKind, Conn, Endpoint, FastHasher};
use crate::ladder::Ladders;

/// Destinations counted one by one; SYNs toward others are counted together.
const DESTINATIONS: usize = 64;

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct DestinationCount {
    pub server: String,
    pub connections: u64,
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
    /// Distinct source addresses of the unanswered SYNs (an estimate within about 2%).
    pub distinct_sources: u64,
    /// The destinations they were sent to, most first (up to 5).
    pub destinations: Vec<DestinationCount>,
    /// Longest time from a first SYN to the last sign of its attempt.
    pub longest_wait_us: u64,
    /// Attempts still waiting for an answer when the capture ended, not counted above.
    pub waiting_at_end: u64,
    /// Of those, attempts that had resent their SYN (a stall already).
    pub waiting_resent: u64,
    /// Attempts summarised before their ladder ended because too many waited at once (a
    /// flood): a resend of one of them after that would count as a new attempt.
    pub summarised_early: u64,
    pub examples: Vec<Example>,
}

/// A HyperLogLog estimate of distinct values (Flajolet et al. 2007) with 4096 one-byte
/// registers: about 1.6% standard error, 4 KiB whatever the count.
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

/// A 64-bit hash of an address, mixed well enough for [`Distinct`] (SplitMix64's finaliser
/// over the FxHash of the address bytes).
fn addr_hash(e: &Endpoint) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = FastHasher::default();
    e.addr.hash(&mut h);
    let mut z = h.finish();
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

pub(crate) struct Unanswered {
    d: UnansweredDetails,
    sources: Distinct,
    dests: Vec<(Endpoint, u64)>,
    other_dests: u64,
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
            ladders: Ladders::default(),
            lin_only: 0,
            exp_only: 0,
            both: 0,
            neither: 0,
        }
    }
}

impl Detector for Unanswered {
    fn finished(&mut self, c: &Conn) {
        let failed = c.close == CloseKind::Unanswered;
        let waiting = c.close == CloseKind::Open && c.half_open();
        if !(failed || waiting) {
            return;
        }
        let syns = c.syn_list();
        let t0 = syns[0].0;
        let wait_ns = c.last_ts.saturating_sub(t0);
        let offsets: Vec<Duration> = syns[1..]
            .iter()
            .map(|&(t, _)| Duration::from_nanos(t.saturating_sub(t0)))
            .collect();
        let d = &mut self.d;
        if waiting {
            d.waiting_at_end += 1;
            if c.syn_count > 1 {
                d.waiting_resent += 1;
                d.longest_wait_us = d.longest_wait_us.max(wait_ns / 1_000);
            }
            return;
        }
        d.connections += 1;
        d.longest_wait_us = d.longest_wait_us.max(wait_ns / 1_000);
        self.sources.add(addr_hash(&c.client));
        match self.dests.iter().position(|(e, _)| *e == c.server) {
            Some(i) => self.dests[i].1 += 1,
            None if self.dests.len() < DESTINATIONS => self.dests.push((c.server, 1)),
            None => self.other_dests += 1,
        }
        if c.syn_count <= 1 {
            d.sent_once += 1;
        } else {
            d.resent += 1;
            let fit = self.ladders.fit(&offsets);
            match (fit.linear, fit.exponential) {
                (true, true) => self.both += 1,
                (true, false) => self.lin_only += 1,
                (false, true) => self.exp_only += 1,
                (false, false) => self.neither += 1,
            }
        }
        if d.examples.len() < EXAMPLES {
            let frames: Vec<u64> = syns.iter().map(|s| s.1).collect();
            let description = if c.syn_count <= 1 {
                "SYN sent once, never answered, never resent".to_string()
            } else {
                let at: Vec<String> = offsets
                    .iter()
                    .map(|o| format!("+{:.3} s", o.as_secs_f64()))
                    .collect();
                let fit = self.ladders.fit(&offsets);
                format!(
                    "SYN sent {} times (resent at {}; {}), never answered",
                    c.syn_count,
                    at.join(", "),
                    fit_words(fit.linear, fit.exponential)
                )
            };
            d.examples.push(Example {
                flow: c.label(),
                frames,
                description,
            });
        }
    }

    fn conclude(mut self, ctx: &Context, out: &mut Conclusion) {
        self.d.summarised_early = ctx.totals.half_open_summarised_early;
        self.d.distinct_sources = if self.d.connections == 0 {
            0
        } else {
            self.sources.estimate().clamp(1, self.d.connections)
        };
        self.d.ladder =
            (self.d.resent > 0).then_some(match (self.lin_only > 0, self.exp_only > 0) {
                (true, true) => LadderFit::Mixed,
                (true, false) => LadderFit::Linear,
                (false, true) => LadderFit::Exponential,
                (false, false) if self.both > 0 => LadderFit::FirstRungOnly,
                _ => LadderFit::Neither,
            });
        self.dests.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
        self.d.destinations = self
            .dests
            .iter()
            .take(5)
            .map(|(e, n)| DestinationCount {
                server: e.to_string(),
                connections: *n,
            })
            .collect();
        if let Some(f) = finding(&self.d, self.other_dests, ctx.totals.connection_attempts) {
            out.findings.push(f);
        }
        out.details.unanswered_syns = self.d;
    }
}

fn finding(d: &UnansweredDetails, other_dests: u64, attempts: u64) -> Option<Finding> {
    if d.connections == 0 && d.waiting_resent == 0 {
        return None;
    }
    let attempts = attempts.max(d.connections + d.waiting_at_end);
    let worst = Duration::from_micros(d.longest_wait_us);
    let toward = match d.destinations.as_slice() {
        [] => String::new(),
        [one] if other_dests == 0 => format!(" toward {}", one.server),
        [first, ..] => format!(
            " toward {} destinations ({} of them to {})",
            d.destinations.len() as u64 + u64::from(other_dests > 0),
            first.connections,
            first.server
        ),
    };
    let shape = if d.connections > 0 && d.sent_once * 10 >= d.connections * 9 {
        format!(
            "{} of them sent their SYN once and never again, from about {} distinct source address(es): the shape of a SYN flood (or of clients that give up after one SYN)",
            d.sent_once, d.distinct_sources
        )
    } else if d.resent >= d.sent_once {
        format!(
            "{} of them resent their SYN ({}) and got no answer: the server, a route or a firewall does not answer",
            d.resent,
            ladder_words(d.ladder)
        )
    } else if d.connections > 0 {
        format!(
            "{} sent their SYN once, {} resent it; from about {} distinct source address(es)",
            d.sent_once, d.resent, d.distinct_sources
        )
    } else {
        String::new()
    };
    // A SYN sent once tells nothing of how long its client waited before giving up.
    let wait = if d.longest_wait_us > 0 {
        format!("; longest wait seen {}", us(d.longest_wait_us))
    } else {
        String::new()
    };
    let mut summary = if d.connections > 0 {
        format!(
            "{} of {} connection attempt(s){toward} were never answered (no SYN-ACK, no reset) and given up; {shape}{wait}",
            d.connections, attempts
        )
    } else {
        format!(
            "{} connection attempt(s){toward} were still resending unanswered SYNs when the capture ended; longest wait {}",
            d.waiting_resent,
            us(d.longest_wait_us)
        )
    };
    if d.connections > 0 && d.waiting_at_end > 0 {
        summary.push_str(&format!(
            "; {} more were still waiting for an answer when the capture ended ({} of them had resent)",
            d.waiting_at_end, d.waiting_resent
        ));
    }
    if d.summarised_early > 0 {
        summary.push_str(&format!(
            "; {} summarised before their SYN ladder ended ({} waited at once)",
            d.summarised_early,
            crate::engine::HALF_OPEN_MAX
        ));
    }
    let mut impact = Impact::failures(d.connections, Some(attempts));
    if d.longest_wait_us > 0 {
        impact = impact.with_stall(worst);
    }
    let impact = Impact {
        affected: d.connections + d.waiting_resent,
        ..impact
    };
    let mut f = Finding::new(Pathology::UnansweredSyn, Source::Analyze, summary, impact);
    if d.longest_wait_us > 0 {
        f = f.with_evidence(Evidence::Timing {
            what: "longest wait for an answer to a SYN (first to last SYN)".into(),
            count: d.connections + d.waiting_resent,
            value_us: d.longest_wait_us,
        });
    }
    for e in &d.examples {
        f = f.with_evidence(e.evidence());
    }
    Some(f)
}

#[cfg(test)]
mod tests {
    use super::Distinct;

    #[test]
    fn distinct_estimate_is_within_a_few_percent() {
        for n in [1u64, 10, 1000, 100_000] {
            let mut d = Distinct::default();
            for i in 0..n {
                let e = crate::flow::Endpoint {
                    addr: std::net::IpAddr::V4(std::net::Ipv4Addr::from(0x0a00_0000 + i as u32)),
                    port: 1,
                };
                // Each address twice: duplicates do not count.
                d.add(super::addr_hash(&e));
                d.add(super::addr_hash(&e));
            }
            let est = d.estimate() as f64;
            assert!(
                (est - n as f64).abs() <= (n as f64 * 0.05).max(1.0),
                "{n}: {est}"
            );
        }
    }
}
