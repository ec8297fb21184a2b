//! How an incarnation's handshake went, decided once for the detectors that report on
//! handshakes: a collision with an older connection's state (two forms), a refusal, SYN
//! retransmissions, or nothing to report. Each incarnation lands in one of them, so a
//! collision is never also counted as a refusal or a plain SYN retransmission.

use crate::flow::{CloseKind, Conn};

/// The outcome of an incarnation's handshake, when it is worth a detector's attention.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Outcome {
    /// The SYN met state of an older connection on the same 4-tuple.
    Collision(Collision),
    /// The SYN was answered by a reset (nothing listening, or rejected).
    Refused,
    /// The SYN was resent (lost, dropped, or ignored) before an answer or the end.
    SynRetransmit,
}

/// Whose state a colliding SYN met.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Collision {
    /// The side that closed first still holds TIME_WAIT for the 4-tuple.
    TimeWait,
    /// The previous incarnation was reset by the client (SO_LINGER 0), and the server's side
    /// of it had not gone away: the stale-ACK race.
    StaleAck,
}

/// Classifies `c`'s handshake; `time_wait_ns` is the TIME_WAIT length.
///
/// A reset that acknowledges the SYN is a refusal: the client accepts it and connect()
/// fails. A reset that does not (no ACK bit, or an ACK of something else) is ignored by the
/// client (RFC 9293 section 3.10.7.3), which resends the SYN on its timer: the reset came
/// from older state on the 4-tuple (illumos answers a SYN that lands in its TIME_WAIT with
/// an old sequence number this way), a collision, when the client did resend after it or
/// the 4-tuple had carried a connection within the TIME_WAIT length.
pub(crate) fn outcome(c: &Conn, time_wait_ns: u64) -> Option<Outcome> {
    if c.syn_list().is_empty() {
        return None;
    }
    if !c.rare().stale.is_empty() {
        return Some(Outcome::Collision(collision_kind(c)));
    }
    if !c.rare().rst_answer.is_empty() {
        if c.rst_answer_acks_syn {
            return Some(Outcome::Refused);
        }
        let recent = c.reuse.is_some_and(|r| r.interval_ns < time_wait_ns);
        let resent = c.syn_list().iter().any(|s| s.0 > c.rare().first_answer_ts)
            || c.syn_count as usize > c.syns.len();
        return Some(if recent || resent {
            Outcome::Collision(collision_kind(c))
        } else {
            Outcome::Refused
        });
    }
    (c.syn_count >= 2).then_some(Outcome::SynRetransmit)
}

/// Whose state answered? A previous incarnation reset by the client (SO_LINGER 0) leaves the
/// server in FIN_WAIT_2/CLOSE_WAIT: the stale-ACK race. A clean close leaves the active
/// closer in TIME_WAIT.
fn collision_kind(c: &Conn) -> Collision {
    let syns = c.syn_list();
    let race = matches!(
        c.reuse.map(|r| r.prev_close),
        Some(CloseKind::Rst { by_client: true })
    ) || (c.reuse.is_none() && !c.rare().client_rst.is_empty() && {
        let resend = syns
            .get(1)
            .map(|s| s.0.saturating_sub(c.rare().client_rst_ts));
        resend.is_some_and(|d| d < 200_000_000)
    });
    if race {
        Collision::StaleAck
    } else {
        Collision::TimeWait
    }
}
