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

/// Linux's two SYN ladders with default sysctls (`tcp_syn_retries=6`; with and without
/// `tcp_syn_linear_timeouts=4`, Linux 6.5+ and older).
pub struct Ladders {
    pub linear: SynLadder,
    pub exponential: SynLadder,
}

impl Default for Ladders {
    fn default() -> Ladders {
        Ladders {
            linear: SynLadder::new(6, Some(4), SYN_INITIAL_RTO),
            exponential: SynLadder::new(6, None, SYN_INITIAL_RTO),
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
    pub fn deadline_ns(&self, c: &Conn) -> u64 {
        let first = c.syn_list().first().map_or(c.first_ts, |s| s.0);
        let next = c.syn_count;
        let latest = |l: &SynLadder| l.latest(next).unwrap_or(l.give_up_latest());
        let wait = latest(&self.linear).max(latest(&self.exponential)) + HALF_OPEN_SLACK;
        first.saturating_add(wait.as_nanos() as u64)
    }
}
