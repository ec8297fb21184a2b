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
    /// [`Ladders::deadline_ns`]'s wait after the first SYN (ns) by the number of SYNs sent,
    /// on Linux's ladders and on the classic one, worked out once (the engine asks for every
    /// connection): the last entry stands for every count past the ladders' ends.
    waits_ns: Vec<u64>,
    classic_waits_ns: Vec<u64>,
}

impl Default for Ladders {
    fn default() -> Ladders {
        let linear = SynLadder::new(6, Some(4), SYN_INITIAL_RTO);
        let exponential = SynLadder::new(6, None, SYN_INITIAL_RTO);
        let classic = SynLadder::new(2, None, CLASSIC_INITIAL_RTO);
        let last = linear.rungs().len().max(exponential.rungs().len()) + 1;
        let table = |ladders: &[&SynLadder]| -> Vec<u64> {
            (0..=last)
                .map(|next| {
                    let latest =
                        |l: &SynLadder| l.latest(next as u32).unwrap_or(l.give_up_latest());
                    let wait = ladders.iter().map(|l| latest(l)).max().unwrap_or_default();
                    (wait + HALF_OPEN_SLACK).as_nanos() as u64
                })
                .collect()
        };
        Ladders {
            waits_ns: table(&[&linear, &exponential]),
            classic_waits_ns: table(&[&classic]),
            linear,
            exponential,
            classic,
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
        let next = (c.syn_count as usize).min(self.waits_ns.len() - 1);
        let mut wait = self.waits_ns[next];
        if classic && fits_classic(syns, first) {
            wait = wait.max(self.classic_waits_ns[next]);
        }
        first.saturating_add(wait)
    }
}

/// Whether SYNs sent at `syns` (from `first`) may be on the classic ladder: no resend yet, or
/// the first no earlier than its 3 s.
fn fits_classic(syns: &[(u64, u64)], first: u64) -> bool {
    syns.get(1).is_none_or(|s| {
        Duration::from_nanos(s.0.saturating_sub(first)) + Duration::from_millis(1)
            >= CLASSIC_INITIAL_RTO
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::flow::Endpoint;

    /// The tables give what the ladders give, for every SYN count (past the ends too), with
    /// and without the classic ladder.
    #[test]
    fn deadline_table_matches_the_ladders() {
        let l = Ladders::default();
        let e = |port| Endpoint {
            addr: std::net::Ipv4Addr::LOCALHOST.into(),
            port,
        };
        for second_at in [4_000_000_000u64, 8_000_000_000] {
            let mut c = Conn::new(1, 1, e(40000), e(80), true, 5_000_000_000);
            for n in 0..40u32 {
                c.syn_count = n;
                if n > 0 && (n as usize) <= c.syns.len() {
                    let t = if n == 1 {
                        5_000_000_000
                    } else {
                        second_at + u64::from(n)
                    };
                    c.syns[n as usize - 1] = (t, u64::from(n));
                }
                let first = c.syn_list().first().map_or(c.first_ts, |s| s.0);
                let latest = |x: &SynLadder| x.latest(n).unwrap_or(x.give_up_latest());
                let linux = latest(&l.linear).max(latest(&l.exponential));
                let classic = if fits_classic(c.syn_list(), first) {
                    linux.max(latest(&l.classic))
                } else {
                    linux
                };
                for (on, wait) in [(false, linux), (true, classic)] {
                    assert_eq!(
                        l.deadline_ns(&c, on),
                        first.saturating_add((wait + HALF_OPEN_SLACK).as_nanos() as u64),
                        "{n} SYNs, classic {on}, second SYN at {second_at}"
                    );
                }
            }
        }
    }
}
