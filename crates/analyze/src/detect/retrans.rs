//! Retransmissions repaired without a timeout: fast retransmit, tail loss probes, other
//! quick repairs, as a share of data segments.

use serde::Serialize;
use tcpdoctor_model::{Finding, Pathology, Severity, Source};

use super::{Conclusion, Context, Detector, Example, EXAMPLES};
use crate::flow::{Conn, RetransKind};

#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct RetransDetails {
    pub fast: u64,
    pub tlp: u64,
    pub other: u64,
    pub flows: u64,
    /// Quick repairs as a share of data segments.
    pub share_of_data_segments: f64,
    pub examples: Vec<Example>,
}

#[derive(Default)]
pub(crate) struct Retransmissions {
    d: RetransDetails,
}

impl Detector for Retransmissions {
    fn finished(&mut self, c: &Conn) {
        let k = |i: RetransKind| u64::from(c.retrans_of(i));
        let quick = k(RetransKind::Fast) + k(RetransKind::Tlp) + k(RetransKind::Other);
        if quick == 0 {
            return;
        }
        let d = &mut self.d;
        d.fast += k(RetransKind::Fast);
        d.tlp += k(RetransKind::Tlp);
        d.other += k(RetransKind::Other);
        d.flows += 1;
        if d.examples.len() < EXAMPLES {
            d.examples.push(Example {
                flow: c.label(),
                frames: vec![c.first_frame],
                description: format!(
                    "{} fast, {} TLP, {} other retransmission(s) of {} data segments",
                    k(RetransKind::Fast),
                    k(RetransKind::Tlp),
                    k(RetransKind::Other),
                    c.half.sum(|h| h.data_packets)
                ),
            });
        }
    }

    #[allow(deprecated)]
    fn conclude(mut self, ctx: &Context, out: &mut Conclusion) {
        let quick = self.d.fast + self.d.tlp + self.d.other;
        self.d.share_of_data_segments = if ctx.totals.data_segments > 0 {
            quick as f64 / ctx.totals.data_segments as f64
        } else {
            0.0
        };
        if quick > 0 {
            let r = &self.d;
            let sev = if r.share_of_data_segments >= 0.01 {
                Severity::Warning
            } else {
                Severity::Info
            };
            let mut f = Finding::legacy(
                Pathology::Retransmission,
                sev,
                Source::Analyze,
                format!(
                    "{quick} segment(s) retransmitted without a timeout ({} fast, {} TLP, {} other) in {} flow(s): {:.2}% of data segments",
                    r.fast,
                    r.tlp,
                    r.other,
                    r.flows,
                    100.0 * r.share_of_data_segments
                ),
            );
            for e in &r.examples {
                f = f.with_evidence(e.evidence());
            }
            out.findings.push(f);
        }
        out.details.retransmissions = self.d;
    }
}
