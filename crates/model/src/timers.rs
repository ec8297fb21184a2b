//! Kernel TCP timers as arithmetic: the SYN retransmission ladder and timer constants.
//!
//! Values come from sysctls read by the caller (`host::sysctl`); nothing here reads the host.

use std::time::Duration;

/// Initial retransmission timeout for a SYN: 1 s (RFC 6298 section 2.1; `TCP_TIMEOUT_INIT`
/// in include/net/tcp.h).
pub const SYN_INITIAL_RTO: Duration = Duration::from_secs(1);

/// Upper bound of any RTO: 120 s (`TCP_RTO_MAX`, include/net/tcp.h).
pub const RTO_MAX: Duration = Duration::from_secs(120);

/// Default floor of a data RTO: 200 ms (`TCP_RTO_MIN`, overridable by `net.ipv4.tcp_rto_min_us`
/// and a route's `rto_min`).
pub const RTO_MIN_DEFAULT: Duration = Duration::from_millis(200);

/// Linux's delayed-ACK ceiling when the connection is not in quick-ack mode: 40 ms
/// (`TCP_DELACK_MIN`, include/net/tcp.h).
pub const DELACK_MIN: Duration = Duration::from_millis(40);

/// When a connecting socket sends each SYN retransmission, from the first SYN.
///
/// Linux (net/ipv4/tcp_timer.c, `tcp_retransmit_timer`) keeps the SYN timeout at the initial
/// RTO while the number of timeouts so far is at most `tcp_syn_linear_timeouts` (6.10+), then
/// doubles it. With `tcp_syn_retries=6` and `tcp_syn_linear_timeouts=4` the retransmissions go
/// out at 1, 2, 3, 4, 5, 7 s and the connect fails at 11 s; without linear timeouts (older
/// kernels, or the sysctl at 0) at 1, 3, 7, 15, 31, 63 s, failing at 127 s.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SynLadder {
    /// `at[i]` is when retransmission `i + 1` is sent.
    at: Vec<Duration>,
    give_up: Duration,
}

impl SynLadder {
    /// `linear_timeouts` is `None` when the kernel has no `tcp_syn_linear_timeouts`.
    pub fn new(syn_retries: u32, linear_timeouts: Option<u32>, initial_rto: Duration) -> SynLadder {
        let linear = linear_timeouts.unwrap_or(0);
        let mut rto = initial_rto;
        let mut t = Duration::ZERO;
        let mut at = Vec::with_capacity(syn_retries as usize);
        for timeouts in 1..=syn_retries {
            t += rto;
            at.push(t);
            if timeouts > linear {
                rto = (rto * 2).min(RTO_MAX);
            }
        }
        SynLadder {
            at,
            give_up: t + rto,
        }
    }

    /// When retransmission `attempt` (1-based) is sent, or `None` past `tcp_syn_retries`.
    pub fn retransmit_at(&self, attempt: u32) -> Option<Duration> {
        attempt
            .checked_sub(1)
            .and_then(|i| self.at.get(i as usize).copied())
    }

    /// When connect() gives up with ETIMEDOUT.
    pub fn give_up_at(&self) -> Duration {
        self.give_up
    }

    /// All rungs, in order.
    pub fn rungs(&self) -> &[Duration] {
        &self.at
    }

    /// The retransmission that explains a connect that took `delay`: the last rung at or below
    /// `delay` if `delay` exceeds it by less than `slack` (the round trip after the resend,
    /// plus timer granularity). `None` when no rung fits.
    pub fn attempt_for(&self, delay: Duration, slack: Duration) -> Option<u32> {
        let idx = self.at.iter().rposition(|&t| t <= delay)?;
        (delay - self.at[idx] <= slack).then_some(idx as u32 + 1)
    }
}

impl std::fmt::Display for SynLadder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let rungs: Vec<String> = self
            .at
            .iter()
            .map(|d| format!("{}", d.as_secs_f64()))
            .collect();
        write!(
            f,
            "{} s, fail at {} s",
            rungs.join(", "),
            self.give_up.as_secs_f64()
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn secs(v: &[u64]) -> Vec<Duration> {
        v.iter().map(|&s| Duration::from_secs(s)).collect()
    }

    #[test]
    fn linear_ladder_of_current_kernels() {
        let l = SynLadder::new(6, Some(4), SYN_INITIAL_RTO);
        assert_eq!(l.rungs(), secs(&[1, 2, 3, 4, 5, 7]).as_slice());
        assert_eq!(l.give_up_at(), Duration::from_secs(11));
    }

    #[test]
    fn exponential_ladder_of_older_kernels() {
        let l = SynLadder::new(6, None, SYN_INITIAL_RTO);
        assert_eq!(l.rungs(), secs(&[1, 3, 7, 15, 31, 63]).as_slice());
        assert_eq!(l.give_up_at(), Duration::from_secs(127));
        assert_eq!(l, SynLadder::new(6, Some(0), SYN_INITIAL_RTO));
    }

    #[test]
    fn attempt_matching_uses_slack() {
        let l = SynLadder::new(6, Some(4), SYN_INITIAL_RTO);
        let slack = Duration::from_millis(100);
        assert_eq!(l.attempt_for(Duration::from_millis(1_004), slack), Some(1));
        assert_eq!(l.attempt_for(Duration::from_millis(3_010), slack), Some(3));
        assert_eq!(l.attempt_for(Duration::from_millis(1_500), slack), None);
        assert_eq!(l.attempt_for(Duration::from_millis(900), slack), None);
        let old = SynLadder::new(6, None, SYN_INITIAL_RTO);
        assert_eq!(
            old.attempt_for(Duration::from_millis(3_020), slack),
            Some(2)
        );
    }

    #[test]
    fn fewer_retries_and_capped_rto() {
        let l = SynLadder::new(2, Some(1), SYN_INITIAL_RTO);
        assert_eq!(l.rungs(), secs(&[1, 2]).as_slice());
        assert_eq!(l.give_up_at(), Duration::from_secs(4));
        let l = SynLadder::new(10, None, SYN_INITIAL_RTO);
        assert_eq!(
            l.give_up_at(),
            Duration::from_secs(1 + 2 + 4 + 8 + 16 + 32 + 64 + 120 + 120 + 120 + 120)
        );
    }
}
