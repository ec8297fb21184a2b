//! Connects refused: a SYN answered by a reset that is not a collision with an older
//! connection on the same 4-tuple, nor a probe of a port scan ([`super::scan`]).

use serde::Serialize;
use tcpdoctor_model::{Finding, Impact, Pathology, Source};

use super::handshake::{outcome, Outcome};
use super::{Conclusion, Context, Detector, Example, EXAMPLES};
use crate::engine::Config;
use crate::flow::Conn;

#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct RefusedDetails {
    pub count: u64,
    pub examples: Vec<Example>,
}

pub(crate) struct Refused {
    time_wait_ns: u64,
    d: RefusedDetails,
    /// (client, server) address of each example, to take back a scan's.
    example_pairs: Vec<(std::net::IpAddr, std::net::IpAddr)>,
}

impl Refused {
    pub(crate) fn new(cfg: &Config) -> Refused {
        Refused {
            time_wait_ns: cfg.time_wait.as_nanos() as u64,
            d: RefusedDetails::default(),
            example_pairs: Vec::new(),
        }
    }
}

impl Detector for Refused {
    fn finished(&mut self, c: &Conn) {
        if c.in_scan || outcome(c, self.time_wait_ns) != Some(Outcome::Refused) {
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
        if self.d.count > 0 {
            let attempts = ctx.totals.connection_attempts.max(self.d.count);
            let mut f = Finding::new(
                Pathology::ConnectFailure,
                Source::Analyze,
                format!(
                    "{} of {} connection attempt(s) refused: the SYN was answered by a reset that acknowledged it",
                    self.d.count, attempts
                ),
                Impact::failures(self.d.count, Some(attempts)),
            );
            for e in &self.d.examples {
                f = f.with_evidence(e.evidence());
            }
            out.findings.push(f);
        }
        out.details.refused_connects = self.d;
    }
}
