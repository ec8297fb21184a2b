//! Retransmission timeouts: data resent after an idle gap of at least the RTO floor.

use serde::Serialize;
use tcpdoctor_model::{Evidence, Finding, Pathology, Severity, Source};

use super::{us, Conclusion, Context, Detector, Example, EXAMPLES};
use crate::flow::Conn;

#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct RtoDetails {
    pub count: u64,
    pub flows: u64,
    pub max_gap_us: u64,
    pub examples: Vec<Example>,
}

#[derive(Default)]
pub(crate) struct Timeouts {
    d: RtoDetails,
}

impl Detector for Timeouts {
    fn finished(&mut self, c: &Conn) {
        if c.rto.is_empty() {
            return;
        }
        let d = &mut self.d;
        d.flows += 1;
        d.count += u64::from(c.rto.total);
        d.max_gap_us = d.max_gap_us.max(c.rto_max_gap_ns / 1_000);
        if d.examples.len() < EXAMPLES {
            d.examples.push(Example {
                flow: c.label(),
                frames: c.rto.as_slice().to_vec(),
                description: format!(
                    "{} retransmission(s) after idle gaps up to {}",
                    c.rto.total,
                    us(c.rto_max_gap_ns / 1_000)
                ),
            });
        }
    }

    #[allow(deprecated)]
    fn conclude(self, _ctx: &Context, out: &mut Conclusion) {
        let r = self.d;
        if r.count > 0 {
            let mut f = Finding::legacy(
                Pathology::RetransmitTimeout,
                if r.count >= 10 {
                    Severity::Critical
                } else {
                    Severity::Warning
                },
                Source::Analyze,
                format!(
                    "{} retransmission timeout(s) in {} flow(s): idle gaps up to {} ended by a retransmission",
                    r.count,
                    r.flows,
                    us(r.max_gap_us)
                ),
            )
            .with_evidence(Evidence::Timing {
                what: "longest idle gap before a retransmission".into(),
                count: r.count,
                value_us: r.max_gap_us,
            });
            for e in &r.examples {
                f = f.with_evidence(e.evidence());
            }
            out.findings.push(f);
        }
        out.details.retransmit_timeouts = r;
    }
}
