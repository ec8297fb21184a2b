//! The SYN ladders a client in a capture may follow, as the engine and the SYN detectors use
//! them: which ladder the resend times fit, and until when a SYN still waiting for an answer
//! can expect another resend (after which the client has given up on it).

use std::time::Duration;

use tcpdoctor_model::timers::{SynLadder, SYN_INITIAL_RTO};

use crate::flow::Conn;

/// After the latest time the ladder allows for the next SYN, how much longer a half-open
/// connection is kept: the path's round trip and scheduling, and stacks whose resend comes a
/// little after Linux's (illumos resends after 1.1 s, then 3.4 s after the first SYN).
pub const HALF_OPEN_SLACK: Duration = Duration::from_secs(1);

/// The initial retransmission timeout of RFC 2988 (RFC 6298 lowered it to 1 s), which
/// Windows and other stacks still use for a SYN: their first resend comes after 3 s.
pub const CLASSIC_INITIAL_RTO: Duration = Duration::from_secs(3);

/// Attempts waiting for an answer at once up to which a SYN may wait for a resend on the
/// classic ladder ([`Ladders::deadline_ns`]); beyond, Linux's ladders alone (a SYN flood).
pub const CLASSIC_WAIT_MAX: usize = 4096;

/// Linux's two SYN ladders with default sysctls (`tcp_syn_retries=6`; with and without
/// `tcp_syn_linear_timeouts=4`, Linux 6.5+ and older), and the classic one of stacks on a 3 s
/// initial timeout (Windows: two resends, after 3 s and 6 s more), which only says how long a
/// SYN may wait for its resend: the ladder a client follows is named from Linux's.
pub struct Ladders {
    pub linear: SynLadder,
    pub exponential: SynLadder,
    pub classic: SynLadder,
}

impl Default for Ladders {
    fn default() -> Ladders {
        Ladders {
            linear: SynLadder::new(6, Some(4), SYN_INITIAL_RTO),
            exponential: SynLadder::new(6, None, SYN_INITIAL_RTO),
            classic: SynLadder::new(2, None, CLASSIC_INITIAL_RTO),
        }
    }
}

/// Which ladders a list of resend times fits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Fit {
    pub linear: bool,
    pub exponential: bool,
}

impl Ladders {
    /// Whether resends at `offsets` (from the first SYN) fit each ladder: every resend no
    /// earlier than its rung (1 ms of clock skew) and no later than the rung's timer lateness
    /// ([`SynLadder::latest`]) plus 50 ms (the capture point's view, scheduling).
    pub fn fit(&self, offsets: &[Duration]) -> Fit {
        let fits = |l: &SynLadder| {
            offsets.iter().enumerate().all(|(i, &off)| {
                let n = i as u32 + 1;
                match (l.retransmit_at(n), l.latest(n)) {
                    (Some(rung), Some(latest)) => {
                        off + Duration::from_millis(1) >= rung
                            && off <= latest + Duration::from_millis(50)
                    }
                    _ => false,
                }
            })
        };
        Fit {
            linear: fits(&self.linear),
            exponential: fits(&self.exponential),
        }
    }

    /// Capture time (ns) after which a connection that has sent only `c.syn_count` SYNs and
    /// got no answer will send no more: the latest the next resend could come on either
    /// ladder (or the latest give-up once the ladder is done), plus [`HALF_OPEN_SLACK`].
    /// The classic ladder counts while the client's resends fit it: always before the first
    /// resend (a Windows client's comes after 3 s: measured on two public captures, where the
    /// attempt waiting for it was ended at 2 s as unanswered and its resend, the same ISN,
    /// taken for a new connection), and not once a resend came before its 3 s; and only when
    /// `classic` (the engine holds at most [`CLASSIC_WAIT_MAX`] attempts for it at once: in a
    /// flood of SYNs, holding each twice as long would double its half-open state for a rare
    /// stack).
    pub fn deadline_ns(&self, c: &Conn, classic: bool) -> u64 {
        let syns = c.syn_list();
        let first = syns.first().map_or(c.first_ts, |s| s.0);
        let next = c.syn_count;
        let latest = |l: &SynLadder| l.latest(next).unwrap_or(l.give_up_latest());
        let mut wait = latest(&self.linear).max(latest(&self.exponential));
        let fits = syns.get(1).is_none_or(|s| {
            Duration::from_nanos(s.0.saturating_sub(first)) + Duration::from_millis(1)
                >= CLASSIC_INITIAL_RTO
        });
        if classic && fits {
            wait = wait.max(latest(&self.classic));
        }
        first.saturating_add((wait + HALF_OPEN_SLACK).as_nanos() as u64)
    }
}
