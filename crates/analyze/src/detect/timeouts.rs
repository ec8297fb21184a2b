//! Retransmission timeouts: data resent after an idle gap of at least the RTO floor, that
//! repaired a loss (spurious ones are [`super::spurious`]'s; those of flows caught in an
//! incast episode are the incast finding's evidence).
//!
//! A client's first data resent to a server that had acknowledged none of it and sent nothing
//! since its SYN-ACK ([`super::incast::handshake_maybe_not_taken`]) is counted apart: the
//! server may not have taken the handshake (a full accept queue drops the final ACK and the
//! data after it), or the data was lost on the way; the capture cannot tell which, so the
//! finding says so and names the counter that would.

use std::time::Duration;

use serde::Serialize;
use tcpdoctor_model::{Evidence, Finding, Impact, Pathology, Source};

use super::incast::handshake_maybe_not_taken;
use super::{us, Conclusion, Context, Detector, Example, Retransmission, EXAMPLES};
use crate::flow::{Conn, FastMap, RetransKind};

/// Connections remembered, until summarised, as having resent first data the server never
/// acknowledged.
const UNTAKEN_MAX: usize = 1 << 16;

#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct RtoDetails {
    pub count: u64,
    pub flows: u64,
    pub max_gap_us: u64,
    /// Sum of the idle gaps the timeouts ended.
    pub total_gap_us: u64,
    /// Of the flows, those that resent their first data to a server that had acknowledged
    /// none of it and sent nothing since its SYN-ACK (the handshake may not have been taken).
    pub first_data_unacknowledged_flows: u64,
    /// FINs (no data) resent after a timeout, not counted above: the close waited, no data
    /// did (it matters only to a peer that waits for the end of the stream).
    pub close_timeouts: u64,
    /// Flows with such a FIN, and the longest wait before one.
    pub close_flows: u64,
    /// Of `close_flows`, those whose every resent FIN came after the peer's own FIN.
    pub close_flows_after_peer: u64,
    pub close_max_gap_us: u64,
    pub examples: Vec<Example>,
}

#[derive(Default)]
pub(crate) struct Timeouts {
    d: RtoDetails,
    /// Connections that resent first data the server never acknowledged (until summarised).
    untaken: FastMap<u64, ()>,
}

impl Detector for Timeouts {
    fn retransmitted(&mut self, x: &Retransmission) {
        if x.kind == RetransKind::Rto
            && self.untaken.len() < UNTAKEN_MAX
            && handshake_maybe_not_taken(x.conn, x.dir)
        {
            self.untaken.insert(x.conn.id, ());
        }
    }

    fn finished(&mut self, c: &Conn) {
        let untaken = !self.untaken.is_empty() && self.untaken.remove(&c.id).is_some();
        if c.rare().close_rto > 0 && !c.in_incast {
            let d = &mut self.d;
            d.close_timeouts += u64::from(c.rare().close_rto);
            d.close_flows += 1;
            // A flow counts as waiting at its close only if a resent FIN was its first.
            d.close_flows_after_peer +=
                u64::from(c.rare().close_rto_after_peer == c.rare().close_rto);
            d.close_max_gap_us = d
                .close_max_gap_us
                .max(c.rare().close_rto_max_gap_ns / 1_000);
        }
        if c.rare().rto.is_empty() || c.in_incast {
            return;
        }
        let d = &mut self.d;
        d.flows += 1;
        d.first_data_unacknowledged_flows += u64::from(untaken);
        d.count += u64::from(c.rare().rto.total);
        d.max_gap_us = d.max_gap_us.max(c.rare().rto_max_gap_ns / 1_000);
        d.total_gap_us += c.rare().rto_gap_total_ns / 1_000;
        if d.examples.len() < EXAMPLES {
            d.examples.push(Example {
                flow: c.label(),
                frames: c.rare().rto.as_slice().to_vec(),
                description: format!(
                    "{} retransmission(s) after idle gaps up to {}",
                    c.rare().rto.total,
                    us(c.rare().rto_max_gap_ns / 1_000)
                ),
            });
        }
    }

    /// The flows that timed out, out of the flows that carried data; each stalled by its
    /// idle gap; the gaps as a share of those flows' time.
    fn conclude(self, ctx: &Context, out: &mut Conclusion) {
        let r = self.d;
        let closes = match r.close_timeouts {
            0 => String::new(),
            n => format!(
                "{n} FIN(s) of {} flow(s) resent after a timeout (waited up to {}): the close waited, no data did",
                r.close_flows,
                us(r.close_max_gap_us)
            ),
        };
        if r.count == 0 && r.close_timeouts > 0 {
            // Only closes waited: affected flows, no data stall (judged by how common). A FIN
            // resent after the peer's own FIN closes a stream nobody reads any more.
            let flows = ctx.observed.flows_with_data.max(r.close_flows);
            let waiting = r.close_flows - r.close_flows_after_peer;
            let who = match (waiting, r.close_flows_after_peer) {
                (0, _) => "each after its peer had closed first: no application was waiting for it".to_string(),
                (_, 0) => "whether anyone waited for the end of the stream the capture cannot tell".to_string(),
                (w, p) => format!("{p} flow(s) after their peer had closed first (no application waiting); for the other {w}, whether anyone waited for the end of the stream the capture cannot tell"),
            };
            let f = Finding::new(
                Pathology::RetransmitTimeout,
                Source::Analyze,
                format!("{closes}; {who}"),
                if waiting == 0 {
                    Impact::none()
                } else {
                    Impact::stalls(waiting, Some(flows), None)
                },
            )
            .with_evidence(Evidence::Timing {
                what: "longest wait before a FIN was resent".into(),
                count: r.close_timeouts,
                value_us: r.close_max_gap_us,
            });
            out.findings.push(f);
        }
        if r.count > 0 {
            let flows = ctx.observed.flows_with_data.max(r.flows);
            let impact = Impact::stalls(
                r.flows,
                Some(flows),
                Some(Duration::from_micros(r.max_gap_us)),
            )
            .with_time_lost_of(
                Duration::from_micros(r.total_gap_us),
                Duration::from_nanos(ctx.observed.flow_time_ns),
            );
            let share = impact.time_lost_share.unwrap_or(0.0);
            let mut f = Finding::new(
                Pathology::RetransmitTimeout,
                Source::Analyze,
                format!(
                    "{} retransmission timeout(s) in {} of {} flow(s): idle gaps up to {} ended by a retransmission, {} in all ({:.1}% of the flows' time){}{}",
                    r.count,
                    r.flows,
                    flows,
                    us(r.max_gap_us),
                    us(r.total_gap_us),
                    100.0 * share,
                    match r.first_data_unacknowledged_flows {
                        0 => String::new(),
                        n => format!(
                            "; {n} of the flows resent their first data to a server that had acknowledged none of it and sent nothing since its SYN-ACK: the server may not have taken the handshake (a full accept queue drops the final ACK and the data after it) or the data was lost on the way; unexplained by the capture: the server's counters (TcpExtListenOverflows) would tell"
                        ),
                    },
                    if closes.is_empty() {
                        String::new()
                    } else {
                        format!("; besides, {closes}")
                    }
                ),
                impact,
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
