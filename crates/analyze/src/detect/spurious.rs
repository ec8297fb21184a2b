//! Spurious retransmissions: data sent again although the receiver already had it: it had
//! acknowledged the data before the copy went out, or it reported the copy back in a D-SACK
//! (RFC 2883). Nothing was lost; a timeout among them stalled its sender for nothing.
//!
//! A flow whose receiver advertised a zero window and whose only spurious copies are tail-loss
//! probes shows a slow reader's consequence: with its buffer full the reader's ACKs come late,
//! later than the sender's probe timeout. Those copies are a finding folded into the slow
//! reader's ([`merge::fold_consequences`]). Measured: a `lab slow-reader` capture (16 KiB
//! receive buffer, reader at 1 MiB/s) held 54 such probes on its one flow, none once the
//! reader kept up; they stood as a finding of their own beside the slow reader.

use std::time::Duration;

use serde::Serialize;
use tcpdoctor_model::{merge, Finding, Impact, Pathology, Source};

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
    /// Every spurious copy: the details the analysis reports.
    d: SpuriousDetails,
    /// The flows whose only spurious copies were tail-loss probes into a receiver that
    /// advertised a zero window (module docs), and the other flows: one finding each.
    reader: SpuriousDetails,
    rest: SpuriousDetails,
}

impl SpuriousDetails {
    fn add(&mut self, c: &Conn, [rto, fast, tlp, other]: [u64; 4]) {
        let n = rto + fast + tlp + other;
        self.count += n;
        self.rto += rto;
        self.fast += fast;
        self.tlp += tlp;
        self.other += other;
        self.flows += 1;
        if rto > 0 && !held_nothing_back(c) {
            self.max_gap_us = self.max_gap_us.max(c.rare().spurious_max_gap_ns / 1_000);
        }
        if self.examples.len() < EXAMPLES {
            self.examples.push(Example {
                flow: c.label(),
                frames: c.rare().spurious_frames.as_slice().to_vec(),
                description: format!(
                    "{n} segment(s) sent again that the receiver already had ({rto} after a timeout, {fast} fast, {tlp} TLP, {other} other)"
                ),
            });
        }
    }

    fn summary(&self) -> String {
        let d = self;
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
        )
    }

    /// A spurious copy out of all data segments; a spurious timeout's wait is a stall. A
    /// tail loss probe that repeats delivered data is the probe working as designed (it
    /// resends the tail when the ACK is late, RFC 8985 section 7): named, not counted as harm.
    fn finding(&self, ctx: &Context, summary: String) -> Finding {
        let d = self;
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
            summary,
            impact,
        );
        for e in &d.examples {
            f = f.with_evidence(e.evidence());
        }
        f
    }
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
        let kinds = [
            k(RetransKind::Rto),
            k(RetransKind::Fast),
            k(RetransKind::Tlp),
            k(RetransKind::Other),
        ];
        if kinds.iter().sum::<u64>() == 0 {
            return;
        }
        self.d.add(c, kinds);
        // Each direction's probes into a receiver that advertised a zero window: the
        // window of the other direction's segments.
        let into_shut = [Dir::C2s, Dir::S2c].into_iter().all(|d| {
            r.dir(d).spurious_by_kind[RetransKind::Tlp.index()] == 0
                || r.dir(d.rev()).zero_window_ads > 0
        });
        if kinds[0] + kinds[1] + kinds[3] == 0 && into_shut {
            self.reader.add(c, kinds);
        } else {
            self.rest.add(c, kinds);
        }
    }

    /// Copies into a slow reader (module docs) fold into its finding; the others make one.
    fn conclude(self, ctx: &Context, out: &mut Conclusion) {
        let Spurious { d, reader, rest } = self;
        if rest.count > 0 {
            out.findings.push(rest.finding(ctx, rest.summary()));
        }
        if reader.count > 0 {
            let summary = format!(
                "{} tail-loss probe(s) on {} flow(s) repeated data the reader already had: its ACKs came late while its buffer was full (it had advertised a zero window), not loss",
                reader.tlp, reader.flows
            );
            let f = reader.finding(ctx, summary);
            out.findings.push(f.consequence_of(Pathology::SlowReader));
            merge::fold_consequences(&mut out.findings);
        }
        out.details.spurious_retransmissions = d;
    }
}
