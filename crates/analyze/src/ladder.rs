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
    /// [`Ladders::deadline_ns`]'s wait after the first SYN (ns) by the number of SYNs sent,
    /// worked out once (the engine asks for every connection): the last entry stands for
    /// every count past both ladders' ends.
    waits_ns: Vec<u64>,
}

impl Default for Ladders {
    fn default() -> Ladders {
        let linear = SynLadder::new(6, Some(4), SYN_INITIAL_RTO);
        let exponential = SynLadder::new(6, None, SYN_INITIAL_RTO);
        let last = linear.rungs().len().max(exponential.rungs().len()) + 1;
        let waits_ns = (0..=last)
            .map(|next| {
                let latest = |l: &SynLadder| l.latest(next as u32).unwrap_or(l.give_up_latest());
                let wait = latest(&linear).max(latest(&exponential)) + HALF_OPEN_SLACK;
                wait.as_nanos() as u64
            })
            .collect();
        Ladders {
            linear,
            exponential,
            waits_ns,
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
        let next = (c.syn_count as usize).min(self.waits_ns.len() - 1);
        first.saturating_add(self.waits_ns[next])
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::flow::Endpoint;

    /// The table gives what the ladders give, for every SYN count (past the ends too).
    #[test]
    fn deadline_table_matches_the_ladders() {
        let l = Ladders::default();
        let e = |port| Endpoint {
            addr: std::net::Ipv4Addr::LOCALHOST.into(),
            port,
        };
        let mut c = Conn::new(1, 1, e(40000), e(80), true, 5_000_000_000);
        for n in 0..40u32 {
            c.syn_count = n;
            if n > 0 && (n as usize) <= c.syns.len() {
                c.syns[n as usize - 1] = (7_000_000_000, u64::from(n));
            }
            let first = c.syn_list().first().map_or(c.first_ts, |s| s.0);
            let latest = |x: &SynLadder| x.latest(n).unwrap_or(x.give_up_latest());
            let wait = latest(&l.linear).max(latest(&l.exponential)) + HALF_OPEN_SLACK;
            assert_eq!(
                l.deadline_ns(&c),
                first.saturating_add(wait.as_nanos() as u64),
                "{n} SYNs"
            );
        }
    }
}
