//! Connects refused: a SYN answered by a reset that is not a collision with an older
//! connection on the same 4-tuple, nor a probe of a port scan ([`super::scan`]).
//!
//! A refusal the client got over at once is not a failure it saw: `localhost` resolving to
//! `::1` first, refused there, then reached on `127.0.0.1` (a happy-eyeballs fallback), or a
//! connect retried that the server then took. A refusal followed within [`RECOVERY_WINDOW`]
//! by a new attempt from the same client host to the same server host and port that was
//! answered counts as recovered: its cost is the delay until that answer, judged as a stall,
//! not as a failure. Told in capture order (the close and open hooks), so the result does
//! not depend on when connections are summarised.

use std::net::IpAddr;
use std::time::Duration;

use serde::Serialize;
use tcpdoctor_model::{Finding, Impact, Pathology, Source};

use super::handshake::{outcome, Outcome};
use super::{us, Conclusion, Context, Detector, Example, EXAMPLES};
use crate::engine::Config;
use crate::flow::{Conn, FastMap};

/// How long after a refusal a new attempt of the same client host to the same service counts
/// as its retry. Generous: the retry's delay is then the stall, judged by the policy (a
/// retry 3 s later is a 3 s stall, critical), so a long window does not hide harm.
pub const RECOVERY_WINDOW: Duration = Duration::from_secs(10);

/// Refusals remembered at once for their retry (the oldest are forgotten first).
const RECENT_MAX: usize = 4096;

#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct RefusedDetails {
    pub count: u64,
    /// Of them, refusals whose client reached the same service on a new attempt within
    /// [`RECOVERY_WINDOW`] (another address of the same host, or a retry).
    pub recovered: u64,
    /// Longest time from a recovered refusal's SYN to the answer of its retry.
    pub recovery_max_us: u64,
    pub examples: Vec<Example>,
}

/// A host as a refusal's retry is matched: loopback addresses (`::1`, `127.0.0.0/8`) are one
/// host, other addresses themselves.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Host {
    Loopback,
    Addr(IpAddr),
}

fn host(a: IpAddr) -> Host {
    let a = match a {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(a, IpAddr::V4),
        v4 => v4,
    };
    if a.is_loopback() {
        Host::Loopback
    } else {
        Host::Addr(a)
    }
}

/// (client host, server host, server port).
type Service = (Host, Host, u16);

fn service(c: &Conn) -> Service {
    (host(c.client.addr), host(c.server.addr), c.server.port)
}

pub(crate) struct Refused {
    time_wait_ns: u64,
    d: RefusedDetails,
    /// (client, server) address of each example, to take back a scan's.
    example_pairs: Vec<(IpAddr, IpAddr)>,
    /// Refusals not yet retried: their SYN's time, by service (capture order).
    recent: FastMap<Service, u64>,
    /// Attempts opened within the window after a refusal of their service: the refusal's SYN
    /// time, until the attempt is summarised.
    retries: FastMap<u64, u64>,
}

impl Refused {
    pub(crate) fn new(cfg: &Config) -> Refused {
        Refused {
            time_wait_ns: cfg.time_wait.as_nanos() as u64,
            d: RefusedDetails::default(),
            example_pairs: Vec::new(),
            recent: FastMap::default(),
            retries: FastMap::default(),
        }
    }
}

impl Detector for Refused {
    fn opened(&mut self, c: &Conn, ts: u64) {
        if self.recent.is_empty() {
            return;
        }
        let key = service(c);
        if let Some(refused_ts) = self.recent.remove(&key) {
            if ts.saturating_sub(refused_ts) <= RECOVERY_WINDOW.as_nanos() as u64 {
                self.retries.insert(c.id, refused_ts);
            }
        }
    }

    fn closed(&mut self, c: &mut Conn) {
        // A refusal is a reset answering the SYN, which only the rare record holds.
        if c.rare.is_none() || c.in_scan || outcome(c, self.time_wait_ns) != Some(Outcome::Refused)
        {
            return;
        }
        if self.recent.len() >= RECENT_MAX {
            // Forget the oldest refusals (they are past their window, or the table is a
            // flood of them): they stay failures.
            let window = RECOVERY_WINDOW.as_nanos() as u64;
            let newest = self.recent.values().copied().max().unwrap_or(0);
            self.recent
                .retain(|_, &mut t| newest.saturating_sub(t) <= window / 2);
            if self.recent.len() >= RECENT_MAX {
                return;
            }
        }
        self.recent.insert(service(c), c.syn_list()[0].0);
    }

    fn finished(&mut self, c: &Conn) {
        // Most captures hold no retry of a refused connect: no hash of every connection.
        if let Some(refused_ts) = (!self.retries.is_empty())
            .then(|| self.retries.remove(&c.id))
            .flatten()
        {
            if let Some((answer_ts, _)) = c.synack {
                self.d.recovered += 1;
                self.d.recovery_max_us = self
                    .d
                    .recovery_max_us
                    .max(answer_ts.saturating_sub(refused_ts) / 1_000);
            }
        }
        // A refusal is a reset answering the SYN, which only the rare record holds.
        if c.rare.is_none() || c.in_scan || outcome(c, self.time_wait_ns) != Some(Outcome::Refused)
        {
            return;
        }
        self.d.count += 1;
        if self.d.examples.len() < EXAMPLES {
            let mut frames = vec![c.syn_list()[0].1];
            frames.extend_from_slice(c.rare().rst_answer.as_slice());
            self.example_pairs.push((c.client.addr, c.server.addr));
            self.d.examples.push(Example {
                flow: c.label(),
                frames,
                description: "SYN answered by a reset that acknowledged it: connect() failed (nothing listening, or rejected)".into(),
            });
        }
    }

    fn conclude(mut self, ctx: &Context, out: &mut Conclusion) {
        // Refusals of a port scan counted before it was known as one are the scan's.
        for ((client, server), leaked) in ctx.scans {
            self.d.count = self.d.count.saturating_sub(leaked.refused);
            let pairs = &self.example_pairs;
            let mut i = 0;
            self.d.examples.retain(|_| {
                i += 1;
                pairs[i - 1] != (*client, *server)
            });
            self.example_pairs.retain(|p| *p != (*client, *server));
        }
        self.d.recovered = self.d.recovered.min(self.d.count);
        if self.d.count > 0 {
            let attempts = ctx.totals.connection_attempts.max(self.d.count);
            let failed = self.d.count - self.d.recovered;
            let recovered = match self.d.recovered {
                0 => String::new(),
                n if n == self.d.count => format!(
                    "; {} recovered: the same client host reached the same service on a new attempt, answered at most {} after the refused SYN (another address of the host, or a retry): a delay, not a failure",
                    if n == 1 { "it was" } else { "all were" },
                    us(self.d.recovery_max_us)
                ),
                n => format!(
                    "; {n} of them recovered (the same client host reached the same service on a new attempt, answered at most {} after the refused SYN)",
                    us(self.d.recovery_max_us)
                ),
            };
            let delay =
                (self.d.recovered > 0).then(|| Duration::from_micros(self.d.recovery_max_us));
            let mut impact = if failed > 0 {
                Impact::failures(failed, Some(attempts))
            } else {
                Impact::stalls(self.d.recovered, Some(attempts), delay)
            };
            if let Some(d) = delay {
                impact = impact.with_stall(d);
            }
            impact.affected = self.d.count;
            let mut f = Finding::new(
                Pathology::ConnectFailure,
                Source::Analyze,
                format!(
                    "{} of {} connection attempt(s) refused: the SYN was answered by a reset that acknowledged it{recovered}",
                    self.d.count, attempts
                ),
                impact,
            );
            for e in &self.d.examples {
                f = f.with_evidence(e.evidence());
            }
            out.findings.push(f);
        }
        out.details.refused_connects = self.d;
    }
}
