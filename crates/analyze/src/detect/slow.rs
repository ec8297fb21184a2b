//! Slow readers: a receiver that advertised a zero window, the writer's stall while it was
//! closed, and the window probes sent meanwhile.

use std::time::Duration;

use serde::Serialize;
use tcpdoctor_model::{Evidence, Finding, Impact, Pathology, Source};

use super::{us, Conclusion, Context, Detector, Example, EXAMPLES};
use crate::flow::Conn;

#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct SlowReaderDetails {
    pub flows: u64,
    pub zero_window_ads: u64,
    pub window_probes: u64,
    pub stall_total_us: u64,
    pub stall_max_us: u64,
    pub window_full: u64,
    pub examples: Vec<Example>,
}

#[derive(Default)]
pub(crate) struct SlowReaders {
    d: SlowReaderDetails,
}

impl Detector for SlowReaders {
    fn finished(&mut self, c: &Conn) {
        // Either side advertised a zero window.
        let ads = u64::from(c.rare().sum(|h| h.zero_window_ads));
        if ads == 0 {
            return;
        }
        let probes = u64::from(c.rare().sum(|h| h.probes));
        let total = c.rare().sum(|h| h.zero_total_ns);
        let max = c.rare().c2s.zero_max_ns.max(c.rare().s2c.zero_max_ns);
        let s = &mut self.d;
        s.flows += 1;
        s.zero_window_ads += ads;
        s.window_probes += probes;
        s.stall_total_us += total / 1_000;
        s.stall_max_us = s.stall_max_us.max(max / 1_000);
        s.window_full += u64::from(c.half.sum(|h| h.window_full));
        if s.examples.len() < EXAMPLES {
            // s2c holds what the server sent: its zero windows make it the reader.
            let reader = if c.rare().s2c.zero_window_ads >= c.rare().c2s.zero_window_ads {
                c.server
            } else {
                c.client
            };
            let mut frames = c.rare().zero_frames.as_slice().to_vec();
            frames.extend_from_slice(c.rare().probe_frames.as_slice());
            frames.sort_unstable();
            s.examples.push(Example {
                flow: c.label(),
                frames,
                description: format!(
                    "receiver {reader} advertised a zero window {ads} time(s); writer stalled {} in all (longest {}), {probes} window probe(s)",
                    us(total / 1_000),
                    us(max / 1_000)
                ),
            });
        }
    }

    /// Flows whose writer stalled on a closed window, out of the flows that carried data;
    /// the longest stall; the stalls as a share of those flows' time.
    fn conclude(self, ctx: &Context, out: &mut Conclusion) {
        if self.d.flows > 0 {
            let s = &self.d;
            let flows = ctx.observed.flows_with_data.max(s.flows);
            let impact = Impact::stalls(
                s.flows,
                Some(flows),
                Some(Duration::from_micros(s.stall_max_us)),
            )
            .with_time_lost_of(
                Duration::from_micros(s.stall_total_us),
                Duration::from_nanos(ctx.observed.flow_time_ns),
            );
            let share = impact.time_lost_share.unwrap_or(0.0);
            let mut f = Finding::new(
                Pathology::SlowReader,
                Source::Analyze,
                format!(
                    "{} of {} flow(s) advertised a zero window {} time(s): writers stalled {} in all (longest {}; {:.1}% of the flows' time), {} window probe(s)",
                    s.flows,
                    flows,
                    s.zero_window_ads,
                    us(s.stall_total_us),
                    us(s.stall_max_us),
                    100.0 * share,
                    s.window_probes
                ),
                impact,
            )
            .with_evidence(Evidence::Timing {
                what: "longest zero-window stall".into(),
                count: s.flows,
                value_us: s.stall_max_us,
            });
            for e in &s.examples {
                f = f.with_evidence(e.evidence());
            }
            out.findings.push(f);
        }
        out.details.slow_readers = self.d;
    }
}
