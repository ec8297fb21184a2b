//! Spurious retransmissions: data sent again although the receiver already had it: it had
//! acknowledged the data before the copy went out, or it reported the copy back in a D-SACK
//! (RFC 2883). Nothing was lost; a timeout among them stalled its sender for nothing.

use std::time::Duration;

use serde::Serialize;
use tcpdoctor_model::{Finding, Impact, Pathology, Source};

use super::{us, Conclusion, Context, Detector, Example, EXAMPLES};
use crate::flow::{Conn, Dir, RetransKind};

#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct SpuriousDetails {
    pub count: u64,
    /// By how they were sent: after a timeout, as a fast retransmit, as a tail loss probe,
    /// other quick repairs.
    pub rto: u64,
    pub fast: u64,
    pub tlp: u64,
    pub other: u64,
    pub flows: u64,
    /// Longest idle gap a spurious timeout ended (the sender waited for nothing).
    pub max_gap_us: u64,
    pub examples: Vec<Example>,
}

#[derive(Default)]
pub(crate) struct Spurious {
    d: SpuriousDetails,
}

/// Whether every spurious timeout of `c` was its direction's last word: the direction's one
/// resend, sent after its last new data, with nothing new after it. Its timer then held
/// nothing back: the receiver had all the data and the sender none left to send (measured:
/// Wireshark's http.cap, where an ad server resent its answer's first segment 861 ms after
/// sending it, 821 ms after the client had acknowledged the whole answer, an ACK lost past the
/// capture point; named a warning for an 821 ms "stall" nobody waited through).
fn held_nothing_back(c: &Conn) -> bool {
    let r = c.rare();
    [Dir::C2s, Dir::S2c].into_iter().all(|d| {
        let h = r.dir(d);
        let spurious_rto = h.spurious_by_kind[RetransKind::Rto.index()];
        spurious_rto == 0
            || (spurious_rto == 1
                && h.by_kind.iter().sum::<u32>() + h.bare_repeats == 1
                && c.half[d].last_data_ts > c.half[d].next_seq_ts)
    })
}

impl Detector for Spurious {
    fn finished(&mut self, c: &Conn) {
        // In a connection the incast detector took as evidence of an episode, a copy the
        // incast's receiver sent after a timeout that the sender already had is its request
        // resent because the sender's whole answer was lost in the burst (the incast's
        // `request_timeouts`): the incast's consequence, not a timer shorter than the path.
        // The senders' own spurious copies (a lowered rto_min firing early) still count.
        if c.rare.is_none() {
            // Spurious copies are counted in the rare record: none without one.
            return;
        }
        let r = c.rare();
        let receiver = match (c.in_incast, c.incast_receiver_is_client) {
            (false, _) => None,
            (true, true) => Some(&r.c2s),
            (true, false) => Some(&r.s2c),
        };
        let k = |i: RetransKind| {
            let by_receiver = match receiver {
                Some(h) if i == RetransKind::Rto => h.spurious_by_kind[i.index()],
                _ => 0,
            };
            u64::from(c.spurious_of(i) - by_receiver)
        };
        let n = k(RetransKind::Rto)
            + k(RetransKind::Fast)
            + k(RetransKind::Tlp)
            + k(RetransKind::Other);
        if n == 0 {
            return;
        }
        let d = &mut self.d;
        d.count += n;
        d.rto += k(RetransKind::Rto);
        d.fast += k(RetransKind::Fast);
        d.tlp += k(RetransKind::Tlp);
        d.other += k(RetransKind::Other);
        d.flows += 1;
        if k(RetransKind::Rto) > 0 && !held_nothing_back(c) {
            d.max_gap_us = d.max_gap_us.max(c.rare().spurious_max_gap_ns / 1_000);
        }
        if d.examples.len() < EXAMPLES {
            d.examples.push(Example {
                flow: c.label(),
                frames: c.rare().spurious_frames.as_slice().to_vec(),
                description: format!(
                    "{n} segment(s) sent again that the receiver already had ({} after a timeout, {} fast, {} TLP, {} other)",
                    k(RetransKind::Rto),
                    k(RetransKind::Fast),
                    k(RetransKind::Tlp),
                    k(RetransKind::Other)
                ),
            });
        }
    }

    /// Spurious copies out of all data segments; a spurious timeout's wait is a stall. A
    /// tail loss probe that repeats delivered data is the probe working as designed (it
    /// resends the tail when the ACK is late, RFC 8985 section 7): named, not counted as harm.
    fn conclude(self, ctx: &Context, out: &mut Conclusion) {
        let d = self.d;
        if d.count > 0 {
            let segments = ctx.totals.data_segments.max(d.count);
            let stall = (d.rto > 0).then(|| Duration::from_micros(d.max_gap_us));
            let needless = d.count - d.tlp;
            let impact = if needless == 0 {
                Impact::none()
            } else {
                Impact::stalls(needless, Some(segments), stall)
            };
            let mut f = Finding::new(
                Pathology::SpuriousRetransmission,
                Source::Analyze,
                format!(
                    "{} segment(s) in {} flow(s) were sent again although the receiver already had them ({} after a timeout{}, {} fast, {} TLP, {} other): not loss",
                    d.count,
                    d.flows,
                    d.rto,
                    match (d.rto, d.max_gap_us) {
                        (0, _) => String::new(),
                        (_, 0) => ", the sender's last word: it held nothing back".to_string(),
                        (_, gap) => format!(" that waited up to {}", us(gap)),
                    },
                    d.fast,
                    d.tlp,
                    d.other
                ),
                impact,
            );
            for e in &d.examples {
                f = f.with_evidence(e.evidence());
            }
            out.findings.push(f);
        }
        out.details.spurious_retransmissions = d;
    }
}
