//! Tail-loss probes that repeated data the receiver already had: not a loss repaired. A
//! probe resends the last segment when its ACK is late (RFC 8985 section 7); when the
//! receiver had that segment, the receiving host drops the copy as `TCP_OLD_DATA` (its
//! sequence is below what the socket already took), and the trace sees that drop when it
//! traces the receiver's namespace too. Such probes are taken out of the loss tally:
//!
//! - on a connection whose receive window the trace saw shut (a slow reader), they are the
//!   reader's consequence: its ACKs come late while its buffer is full. Measured: a
//!   `lab slow-reader` run (16 KiB receive buffer, reader at 1 MiB/s, writer at 8 MiB/s)
//!   traced 58 tail-loss probes from the writer and 60 `TCP_OLD_DATA` drops at the reader,
//!   none once the reader kept up; they stood as a "loss repaired" finding beside the slow
//!   reader;
//! - elsewhere they are spurious retransmissions, not loss.
//!
//! Part of the engine ([`Engine`]); pure like it.

use super::*;

/// The drop reason of a segment wholly below what the receiving socket already took.
const OLD_DATA: &str = "TCP_OLD_DATA";

impl Engine {
    /// Drops of old data sent on `flow` (the writer's (local, remote)): a drop's record
    /// names the packet's source and destination, wherever it was dropped.
    fn old_data_drops(&self, flow: (SocketAddr, SocketAddr)) -> u64 {
        self.drop_flows
            .iter()
            .filter(|((l, r, reason, _), _)| (*l, *r) == flow && reason == OLD_DATA)
            .map(|(_, n)| n)
            .sum()
    }

    /// Moves `flow`'s tail-loss probes that the receiver dropped as old data (at most as
    /// many as such drops) from the loss tally to the slow reader's (its window was seen
    /// shut) or to spurious retransmissions, and counts them as that pathology's resends
    /// (so that the counters' resends they account for are its evidence, not a loss).
    pub(super) fn fold_repeated_probes(
        &self,
        tallies: &mut BTreeMap<Pathology, Tally>,
        resent: &mut BTreeMap<Pathology, Resent>,
        flow: (SocketAddr, SocketAddr),
        u: &never_taken::Unfolded,
    ) {
        let n = u.tlp.min(self.old_data_drops(flow));
        let Some(loss) = tallies
            .get_mut(&Pathology::Retransmission)
            .filter(|_| n > 0)
        else {
            return;
        };
        loss.events = loss.events.saturating_sub(n);
        if n >= u.other {
            loss.flows.remove(&flow);
        }
        if let Some(c) = u.process.as_ref().and_then(|k| loss.processes.get_mut(k)) {
            *c = c.saturating_sub(n);
        }
        loss.processes.retain(|_, c| *c > 0);
        if loss.events == 0 && loss.flows.is_empty() {
            tallies.remove(&Pathology::Retransmission);
        }
        let (to, what) = if self.windows.seen_shut(flow.0, flow.1) {
            (
                Pathology::SlowReader,
                format!("tail-loss probes into the reader's full buffer on {}, each dropped there as data it already had ({OLD_DATA}): its late ACKs, not a loss", flow_text(flow.0, flow.1)),
            )
        } else {
            (
                Pathology::SpuriousRetransmission,
                format!("tail-loss probes on {} the receiver dropped as data it already had ({OLD_DATA}): not a loss", flow_text(flow.0, flow.1)),
            )
        };
        let t = tallies.entry(to).or_default();
        if to == Pathology::SpuriousRetransmission {
            t.events += n;
            t.flows.insert(flow);
            if let Some(k) = &u.process {
                *t.processes.entry(k.clone()).or_default() += n;
            }
        }
        for _ in 0..n {
            t.detail(what.clone());
        }
        resent.entry(to).or_default().other += n;
    }
}
