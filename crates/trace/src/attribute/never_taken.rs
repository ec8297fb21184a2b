//! Data and FINs resent into connections a full accept queue never took: the overflow's
//! consequence, not a loss of their own. A full queue drops the handshake's last ACK, so the
//! client believes it is connected and sends into a connection the server does not have; its
//! timer and tail-loss probe resend what the server dropped. Never taken: the peer
//! acknowledged nothing and sent nothing (`peer_silent`), or the listener's host dropped the
//! flow's segments for want of a socket (NO_SOCKET), or refused its handshake ACK
//! (TCP_LISTEN_OVERFLOW). The resends are put on the overflow's finding as its evidence when
//! the listener was seen refusing connections: at once when it already had been, else at the
//! end ([`Engine::folded_tallies`]), since a resend may come before the first sign of the
//! overflow (measured: live runs of a backlog-1 listener left 2-3 such resends as their own
//! warnings beside the overflow).

use super::*;

/// The resends of one flow tallied as losses, kept to be folded at the end.
#[derive(Clone, Debug, Default)]
pub(super) struct Unfolded {
    timeouts: u64,
    pub(super) other: u64,
    /// Tail-loss probes (of `other`).
    pub(super) tlp: u64,
    peer_silent: bool,
    /// The longest wait of its timeouts (us).
    worst_us: u64,
    /// The process the resends' lines named (as the tallies count it).
    pub(super) process: Option<String>,
}

/// Flows kept in [`Engine::unfolded`].
const UNFOLDED_MAX: usize = 100_000;

impl Engine {
    /// Why the connection of `flow` was never taken, when its listener was seen refusing
    /// connections for a full accept queue; `None` otherwise.
    fn never_taken_why(
        &self,
        flow: (SocketAddr, SocketAddr),
        peer_silent: bool,
    ) -> Option<&'static str> {
        let remote = flow.1;
        // A listener bound to the wildcard address takes this port on every address.
        let listener = |l: &SocketAddr| {
            l.port() == remote.port() && (l.ip() == remote.ip() || l.ip().is_unspecified())
        };
        if !self.overflowing.iter().any(listener) {
            return None;
        }
        if self.no_socket.contains(&flow) {
            Some("the listener's host dropped its segments for want of a socket (NO_SOCKET)")
        } else if self.listen_acks_refused.contains(&flow) {
            Some("the listener refused its handshake ACK (TCP_LISTEN_OVERFLOW)")
        } else if peer_silent {
            Some("the peer acknowledged none of its data and sent none")
        } else {
            None
        }
    }

    /// Data or a FIN resent (by `cause`) on a connection the listener at `ev.remote` never
    /// took, while that listener refused connections for a full accept queue: the line, put on
    /// the overflow's finding. `None` when that is not (yet) shown.
    pub(super) fn never_taken(
        &mut self,
        ev: &Event,
        cause: Cause,
        peer_silent: bool,
        lookup: &mut dyn Lookup,
    ) -> Option<Line> {
        let why = self.never_taken_why((ev.local, ev.remote), peer_silent)?;
        let what = what(cause);
        let l = self.line(
            ev,
            cause,
            Some(Pathology::AcceptQueueOverflow),
            format!(
                "{what}: the listener {} never took this connection ({why}) while its accept queue was full: the overflow's consequence",
                ev.remote
            ),
            lookup,
        );
        let timer = cause == Cause::Timeout;
        fold(
            &mut self.tallies,
            &mut self.summary.consequence_resends,
            ev.remote,
            if timer { (1, 0) } else { (0, 1) },
        );
        Some(l)
    }

    /// A resend tallied as a loss, kept per flow for the end's second look.
    pub(super) fn unfolded(
        &mut self,
        ev: &Event,
        cause: Cause,
        peer_silent: bool,
        waited_us: Option<u32>,
    ) {
        let flow = (ev.local, ev.remote);
        if self.unfolded.len() >= UNFOLDED_MAX && !self.unfolded.contains_key(&flow) {
            return;
        }
        let u = self.unfolded.entry(flow).or_default();
        if cause == Cause::Timeout {
            u.timeouts += 1;
            u.worst_us = u.worst_us.max(waited_us.map_or(0, u64::from));
        } else {
            u.other += 1;
            u.tlp += u64::from(cause == Cause::TailLossProbe);
        }
        u.peer_silent |= peer_silent;
        u.process = ev
            .process
            .as_ref()
            .map(|p| format!("{} (pid {})", p.comm, p.pid));
    }

    /// The tallies and the consequence counts with the resends kept in
    /// [`Engine::unfolded`] that the end shows were into connections a full accept queue
    /// never took moved from the loss tallies to the overflow's, and the tail-loss probes the
    /// receiver already had moved to what they were ([`Engine::fold_repeated_probes`]).
    pub(super) fn folded_tallies(
        &self,
    ) -> (BTreeMap<Pathology, Tally>, BTreeMap<Pathology, Resent>) {
        let mut tallies = self.tallies.clone();
        let mut resent = self.summary.consequence_resends.clone();
        let mut keys: Vec<_> = self.unfolded.keys().copied().collect();
        keys.sort();
        for flow in keys {
            let u = &self.unfolded[&flow];
            if self.never_taken_why(flow, u.peer_silent).is_none() {
                self.fold_repeated_probes(&mut tallies, &mut resent, flow, u);
                continue;
            }
            for (p, n) in [
                (Pathology::RetransmitTimeout, u.timeouts),
                (Pathology::Retransmission, u.other),
            ] {
                let Some(t) = tallies.get_mut(&p).filter(|_| n > 0) else {
                    continue;
                };
                t.events = t.events.saturating_sub(n);
                t.flows.remove(&flow);
                if let Some(c) = u.process.as_ref().and_then(|k| t.processes.get_mut(k)) {
                    *c = c.saturating_sub(n);
                }
                t.processes.retain(|_, c| *c > 0);
                if t.events == 0 && t.flows.is_empty() {
                    tallies.remove(&p);
                }
            }
            fold(&mut tallies, &mut resent, flow.1, (u.timeouts, u.other));
        }
        // The longest timeout wait left: of the flows still a loss.
        if let Some(t) = tallies.get_mut(&Pathology::RetransmitTimeout) {
            let left = t
                .flows
                .iter()
                .filter_map(|f| self.unfolded.get(f))
                .map(|u| u.worst_us)
                .max();
            if let Some(w) = left {
                t.worst_us = w;
            }
        }
        (tallies, resent)
    }
}

fn what(cause: Cause) -> &'static str {
    match cause {
        Cause::Timeout => "retransmission timeout",
        Cause::TailLossProbe => "tail-loss probe",
        Cause::FastRetransmit => "fast retransmit",
        _ => "resent",
    }
}

/// Puts `timeouts` timer resends and `other` other resends toward `listener` on the
/// overflow's tally and counts.
fn fold(
    tallies: &mut BTreeMap<Pathology, Tally>,
    resent: &mut BTreeMap<Pathology, Resent>,
    listener: SocketAddr,
    (timeouts, other): (u64, u64),
) {
    let t = tallies.entry(Pathology::AcceptQueueOverflow).or_default();
    for (n, what) in [
        (timeouts, "retransmission timeout"),
        (other, "tail-loss probe or fast retransmit"),
    ] {
        for _ in 0..n {
            t.detail(format!(
                "data or FIN resent on connections the listener {listener} never took ({what})"
            ));
        }
    }
    let r = resent.entry(Pathology::AcceptQueueOverflow).or_default();
    r.timeouts += timeouts;
    r.other += other;
}
