//! A SYN answered by an ACK of an older connection on its 4-tuple: which old socket answered
//! it, and so which cause it is. Part of the engine ([`Engine`]); pure like it.
//!
//! Two mechanisms give the same packets (SYN -> old ACK -> RST -> SYN) and need different
//! remedies:
//! - a *TIME_WAIT collision*: the peer closed the old connection properly and holds it in
//!   TIME_WAIT; the SYN cannot be proven newer than the old connection (timestamps off, or
//!   not newer), so it is taken for an old duplicate;
//! - a *stale-ACK race*: the peer's old connection never fully ended. The peer closed first
//!   and its socket, orphaned in FIN_WAIT2, lives on as a timewait mini-socket whose
//!   substate is FIN_WAIT2 (measured on Linux 6.18 under report 003's client and server:
//!   `ss -tan state fin-wait-2` lists them with `timer:(timewait,...)` and no inode); the
//!   reset that should have ended it was processed before the ACK of its FIN, or lost. The
//!   SYN is outside its window and it answers with an ACK of the old connection.
//!
//! Both mini-sockets read TIME_WAIT in `sk_state`; the kernel half reads `tw_substate`
//! (bpf/trace.bpf.c, kfree_skb). The evidence, strongest first: the traced peer's
//! mini-socket and its substate (the server's view), then how this end closed the previous
//! connection on the 4-tuple (the client's view: a reset it sent, or the peer closing
//! first). When the two disagree the peer's socket decides, the history is quoted.

use super::*;
use tcpdoctor_model::catalogue::Remedy;

/// The most server-side refusals remembered for the client's side to find (a client that is
/// not traced never takes them).
pub(super) const TW_REFUSED_MAX: usize = 100_000;

/// What the traced peer's timewait socket was, when one refused the SYN.
pub(super) type Refusal = Option<TcpState>;

/// The cause of a SYN answered by an old ACK, from the peer's refusing socket (`peer`: not
/// seen, or seen with its substate, `None` when unknown) and this end's history of the
/// 4-tuple.
pub(super) fn old_ack_cause(peer: Option<Refusal>, previous: Option<PreviousClose>) -> Cause {
    match (peer, previous) {
        (Some(Some(TcpState::FinWait2)), _) => Cause::StaleAckRace,
        (Some(Some(TcpState::TimeWait)), _) => Cause::TimeWaitCollision,
        (_, Some(PreviousClose::Reset)) => Cause::StaleAckRace,
        (_, Some(PreviousClose::PeerClosedFirst)) => Cause::TimeWaitCollision,
        _ => Cause::OldAck,
    }
}

/// The words for the peer's mini-socket.
fn peer_socket(sub: Refusal) -> &'static str {
    match sub {
        Some(TcpState::FinWait2) => "an orphaned FIN_WAIT2 socket (a timewait mini-socket still waiting for the old connection's FIN or reset: the peer closed first and never learned that this end's socket had ended)",
        Some(TcpState::TimeWait) => "a TIME_WAIT socket (the old connection closed normally, the peer closing first)",
        _ => "a timewait mini-socket of unknown substate",
    }
}

impl Engine {
    /// The server's view: a timewait mini-socket did not take a SYN. Remembered for the
    /// client's flow (its local = this event's remote).
    pub(super) fn time_wait_ack(
        &mut self,
        ev: &Event,
        reason: u32,
        substate: Refusal,
        lookup: &mut dyn Lookup,
    ) -> Line {
        let key = (ev.remote, ev.local);
        if self.tw_refused.len() < TW_REFUSED_MAX || self.tw_refused.contains_key(&key) {
            self.tw_refused.insert(key, (ev.ts_ns, substate));
        }
        let why = self.reasons.drop.describe(reason);
        let (cause, pathology, evidence) = match substate {
            Some(TcpState::FinWait2) => (
                Cause::FinWait2RefusedSyn,
                Pathology::StaleAckRace,
                format!("a SYN reached this orphaned FIN_WAIT2 socket (timewait mini-socket; this end closed first and its peer's FIN or reset never took effect here) and lies outside the old connection's window (drop reason {why}): the client gets an ACK of the old connection, a stale ACK"),
            ),
            Some(TcpState::TimeWait) => (
                Cause::TimeWaitRefusedSyn,
                Pathology::TimeWaitCollision,
                format!("a SYN reached this TIME_WAIT socket and was not taken as a new connection (drop reason {why}): the client gets an ACK of the old connection"),
            ),
            _ => (
                Cause::TimeWaitRefusedSyn,
                Pathology::TimeWaitCollision,
                format!("a SYN reached this timewait socket (substate unknown) and was not taken as a new connection (drop reason {why}): the client gets an ACK of the old connection"),
            ),
        };
        if matches!(substate, Some(TcpState::TimeWait)) {
            self.timewait_netns.insert(ev.netns);
        }
        let l = self.line(ev, cause, Some(pathology), evidence, lookup);
        // One 4-tuple, counted as the client sees it (as its own events count it).
        let mut client_view = l.clone();
        (client_view.local, client_view.remote) = (l.remote, l.local);
        let t = self.tally(pathology, &client_view);
        if substate == Some(TcpState::FinWait2) {
            t.detail("SYN answered by the peer's orphaned FIN_WAIT2 socket (ss: FIN-WAIT-2, timer timewait)".into());
        }
        l
    }

    /// The client's view: a connecting socket reset an ACK that did not acknowledge its SYN.
    pub(super) fn reset_sent(
        &mut self,
        ev: &Event,
        _reason: u32,
        previous: Option<PreviousClose>,
        age_ms: Option<u32>,
        lookup: &mut dyn Lookup,
    ) -> Option<Line> {
        if ev.state != Some(TcpState::SynSent) {
            return None;
        }
        let peer = self
            .tw_refused
            .remove(&(ev.local, ev.remote))
            .map(|(_, sub)| sub);
        let cause = old_ack_cause(peer, previous);
        let age = age_ms
            .map(|a| format!(" {a} ms earlier"))
            .unwrap_or_default();
        let history = match previous {
            Some(PreviousClose::Reset) => Some(format!("this end closed it with a reset{age}")),
            Some(PreviousClose::PeerClosedFirst) => Some(format!("the peer closed it first{age}")),
            Some(PreviousClose::ClosedFirst) => Some(format!("this end closed it first{age}")),
            Some(PreviousClose::Failed) => Some(format!("it never completed{age}")),
            Some(PreviousClose::Other) => Some(format!("it ended otherwise{age}")),
            None => None,
        };
        let evidence = match (peer, cause) {
            (Some(sub), _) => format!(
                "SYN answered by an ACK of the previous connection on this 4-tuple, sent by the traced peer's old socket, {}{}; the SYN is reset and resent",
                peer_socket(sub),
                history.map(|h| format!("; {h}")).unwrap_or_default()
            ),
            (None, Cause::StaleAckRace) => format!("SYN answered by an ACK of the previous connection on this 4-tuple, which this end closed with a reset{age}: the peer had not processed the reset; the SYN is reset and resent"),
            (None, Cause::TimeWaitCollision) => format!("SYN answered by an ACK of the previous connection on this 4-tuple, which the peer closed first{age}: the peer holds it in TIME_WAIT and took the SYN for an old duplicate"),
            (None, _) => match history {
                Some(h) => format!("SYN answered by an ACK of an older connection on this 4-tuple ({h}); the SYN is reset and resent"),
                None => "SYN answered by an ACK of an older connection on this 4-tuple; how that connection ended was not traced".into(),
            },
        };
        if cause == Cause::TimeWaitCollision {
            self.timewait_netns.insert(ev.netns);
        }
        let hs = self.handshakes.entry(ev.sk).or_default();
        hs.cause = Some(cause);
        hs.last_ts_ns = ev.ts_ns;
        let p = Self::pathology_of(cause);
        let l = self.line(ev, cause, p, evidence, lookup);
        if let Some(p) = p {
            self.tally(p, &l);
        }
        Some(l)
    }

    /// The explanation and remedies of a stale-ACK race or TIME_WAIT collision finding that
    /// fit what was traced: a race whose peer socket was seen as an orphaned FIN_WAIT2
    /// mini-socket is explained as such; the timestamps remedy of a collision only where
    /// timestamps are off (with them on, a collision is not for want of them).
    pub(super) fn old_ack_advice(&self, f: Finding, lookup: &mut dyn Lookup) -> Finding {
        match f.pathology {
            Pathology::StaleAckRace => {
                let fw2 = self
                    .summary
                    .causes
                    .get(&Cause::FinWait2RefusedSyn)
                    .copied()
                    .unwrap_or(0);
                if fw2 == 0 {
                    return f;
                }
                f.with_explanation(format!("The peer closed the previous connection on the 4-tuple first and its socket, orphaned in FIN_WAIT2, lives on as a timewait mini-socket (ss: FIN-WAIT-2, timer timewait, no inode) until tcp_fin_timeout: the reset that ended this end's socket never took effect there (processed before the ACK of the peer's FIN, or lost). {fw2} SYN(s) reusing the 4-tuple reached such a socket; outside its window, each was answered by an ACK of the old connection, which the client reset before sending its SYN again. Not a TIME_WAIT collision: timestamps cannot help."))
            }
            Pathology::TimeWaitCollision => {
                let settings: Vec<(u32, Option<bool>)> = self
                    .timewait_netns
                    .iter()
                    .map(|&ns| (ns, lookup.tcp_timestamps(ns)))
                    .collect();
                let off: Vec<String> = settings
                    .iter()
                    .filter(|(_, on)| *on == Some(false))
                    .map(|&(ns, _)| lookup.netns_name(ns).unwrap_or_else(|| ns.to_string()))
                    .collect();
                let all_on =
                    !settings.is_empty() && settings.iter().all(|(_, on)| *on == Some(true));
                let timestamps = |r: &Remedy| r.action.contains("tcp_timestamps");
                let mut f = f;
                if !off.is_empty() {
                    f = f.setting(
                        "net.ipv4.tcp_timestamps",
                        format!("0 in {}", off.join(", ")),
                    );
                } else if all_on {
                    // Timestamps were on: the SYN's timestamp was not newer than the old
                    // connection's (another host behind the same address, a clock reset).
                    f.remedies.retain(|r| !timestamps(r));
                    f = f.setting(
                        "net.ipv4.tcp_timestamps",
                        "1 in every traced namespace of the collision",
                    );
                }
                f
            }
            _ => f,
        }
    }

    /// A SYN resent with no old ACK seen, after the traced peer's timewait socket refused
    /// the previous one (its ACK of the old connection rate-limited, or not traced): the
    /// cause and the evidence, or `None` when no refusal is known.
    pub(super) fn refused_by_timewait(
        &mut self,
        ev: &Event,
        rung: &str,
    ) -> Option<(Cause, String)> {
        let &(_, sub) = self.tw_refused.get(&(ev.local, ev.remote))?;
        let cause = old_ack_cause(Some(sub), None);
        if cause == Cause::TimeWaitCollision {
            self.timewait_netns.insert(ev.netns);
        }
        Some((
            cause,
            format!(
                "SYN resent: the previous one reached the traced peer's old socket, {}, which did not take it (no ACK of the old connection reached this end: rate-limited){rung}",
                peer_socket(sub)
            ),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_peers_socket_decides_and_the_history_decides_without_it() {
        use PreviousClose::*;
        let fw2 = Some(Some(TcpState::FinWait2));
        let tw = Some(Some(TcpState::TimeWait));
        // Report 003: this end reset the old connection, the peer's socket is an orphaned
        // FIN_WAIT2 mini-socket: a stale-ACK race, not a TIME_WAIT collision.
        assert_eq!(old_ack_cause(fw2, Some(Reset)), Cause::StaleAckRace);
        assert_eq!(old_ack_cause(fw2, None), Cause::StaleAckRace);
        assert_eq!(
            old_ack_cause(tw, Some(PeerClosedFirst)),
            Cause::TimeWaitCollision
        );
        assert_eq!(old_ack_cause(tw, Some(Reset)), Cause::TimeWaitCollision);
        assert_eq!(old_ack_cause(None, Some(Reset)), Cause::StaleAckRace);
        assert_eq!(old_ack_cause(Some(None), Some(Reset)), Cause::StaleAckRace);
        assert_eq!(
            old_ack_cause(None, Some(PeerClosedFirst)),
            Cause::TimeWaitCollision
        );
        assert_eq!(old_ack_cause(Some(None), None), Cause::OldAck);
        assert_eq!(old_ack_cause(None, Some(ClosedFirst)), Cause::OldAck);
    }
}
