//! Retransmissions repaired without a timeout (fast retransmit, tail loss probes, other
//! quick repairs) that repaired a loss, as a share of data segments. Spurious ones are
//! [`super::spurious`]'s; those of flows caught in an incast episode are the incast
//! finding's evidence.

use serde::Serialize;
use tcpdoctor_model::{Finding, Impact, Pathology, Source};

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
        // Retransmissions are counted in the rare record: none without one.
        if c.in_incast || c.rare.is_none() {
            return;
        }
        let k = |i: RetransKind| u64::from(c.lost_of(i));
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
                frames: c.rare().quick_frames.as_slice().to_vec(),
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

    /// Quick repairs out of all data segments: short stalls, rare or common.
    fn conclude(mut self, ctx: &Context, out: &mut Conclusion) {
        let quick = self.d.fast + self.d.tlp + self.d.other;
        let segments = ctx.totals.data_segments;
        self.d.share_of_data_segments = if segments > 0 {
            quick as f64 / segments as f64
        } else {
            0.0
        };
        if quick > 0 {
            let r = &self.d;
            let mut f = Finding::new(
                Pathology::Retransmission,
                Source::Analyze,
                format!(
                    "{quick} segment(s) retransmitted without a timeout ({} fast, {} TLP, {} other) in {} flow(s): {:.2}% of data segments",
                    r.fast,
                    r.tlp,
                    r.other,
                    r.flows,
                    100.0 * r.share_of_data_segments
                ),
                Impact::stalls(quick, Some(segments.max(quick)), None),
            );
            for e in &r.examples {
                f = f.with_evidence(e.evidence());
            }
            out.findings.push(f);
        }
        out.details.retransmissions = self.d;
    }
}
