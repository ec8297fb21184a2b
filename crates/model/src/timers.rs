//! Kernel TCP timers as arithmetic: the SYN retransmission ladder, its give-up time, how late
//! the kernel's timer wheel may fire each rung, and timer constants.
//!
//! Values come from sysctls read by the caller (`host::sysctl`); nothing here reads the host.

use std::time::Duration;

/// Initial retransmission timeout for a SYN: 1 s (RFC 6298 section 2.1; `TCP_TIMEOUT_INIT`
/// in include/net/tcp.h).
pub const SYN_INITIAL_RTO: Duration = Duration::from_secs(1);

/// Upper bound of any RTO: 120 s (`TCP_RTO_MAX`, include/net/tcp.h). Since Linux 6.15 a
/// namespace may lower it with `net.ipv4.tcp_rto_max_ms` (see [`SynLadder::with_rto_max`]).
pub const RTO_MAX: Duration = Duration::from_secs(120);

/// Default floor of a data RTO: 200 ms (`TCP_RTO_MIN`, overridable by `net.ipv4.tcp_rto_min_us`
/// and a route's `rto_min`).
pub const RTO_MIN_DEFAULT: Duration = Duration::from_millis(200);

/// Linux's delayed-ACK ceiling when the connection is not in quick-ack mode: 40 ms
/// (`TCP_DELACK_MIN`, include/net/tcp.h).
pub const DELACK_MIN: Duration = Duration::from_millis(40);

/// One jiffy at the coarsest kernel tick (`CONFIG_HZ=100`): the granularity of the timer
/// wheel's finest level whatever the kernel's HZ.
pub const JIFFY_MAX: Duration = Duration::from_millis(10);

/// How much later than asked a kernel timer of `delay` may fire.
///
/// The timer wheel (kernel/time/timer.c, `calc_wheel_index`) files a timer in the level whose
/// range holds its delay and rounds the expiry up to that level's granularity: level `n >= 1`
/// holds delays from `63 x 8^(n-1)` jiffies and has a granularity of `8^n` jiffies
/// (`LVL_CLK_SHIFT` 3, `LVL_SIZE` 64), so a timer lands at most `8/63` (12.7%) of its delay
/// late; level 0 (under 63 jiffies) rounds to one jiffy. This bound holds for any `CONFIG_HZ`.
/// Measured here (HZ=250): a 1 s SYN timer fires 6-32 ms late, a 64 s one about 1.8 s late.
pub fn timer_lag_max(delay: Duration) -> Duration {
    (delay * 8 / 63).max(JIFFY_MAX)
}

/// What ended a SYN ladder (net/ipv4/tcp_timer.c, `tcp_write_timeout`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum GiveUp {
    /// `tcp_syn_retries + tcp_syn_linear_timeouts` retransmissions were sent.
    Count,
    /// The time since the first SYN reached the budget of [`SynLadder::time_budget`].
    Time,
}

/// When a connecting socket sends each SYN retransmission, and when connect() gives up, from
/// the first SYN.
///
/// Linux (net/ipv4/tcp_timer.c):
/// * the SYN timer starts at the initial RTO (1 s) and stays there while the retransmissions
///   sent so far are at most `tcp_syn_linear_timeouts` (6.5+, default 4); after each later one
///   it doubles, up to `TCP_RTO_MAX` (`tcp_retransmit_timer`);
/// * at each expiry, before resending, `tcp_write_timeout` gives up when
///   `tcp_syn_retries + tcp_syn_linear_timeouts` retransmissions were sent, or when the time
///   since the first SYN reached `tcp_model_timeout(tcp_syn_retries, 1 s)`: the time an
///   exponential ladder of `tcp_syn_retries` would take, `(2^(retries+1) - 1) x 1 s` while that
///   stays under `TCP_RTO_MAX`, then `TCP_RTO_MAX` per further retry (`retransmits_timed_out`).
///   connect() fails with ETIMEDOUT at that expiry.
///
/// With the defaults (`tcp_syn_retries=6`, `tcp_syn_linear_timeouts=4`) the retransmissions go
/// out at 1, 2, 3, 4, 5, 7, 11, 19, 35 and 67 s and connect() fails at 131 s (127 s budget,
/// first expiry after it). Measured on 6.18 with the SYNs dropped: 1.03, 2.06, 3.08, 4.11,
/// 5.13, 7.14, 11.2, 19.4, 35.5, 69.3 s, ETIMEDOUT at 134.9 s: every timer fires a little late
/// ([`timer_lag_max`]) and the lateness adds up along the ladder, which [`SynLadder::latest`]
/// bounds rung by rung. Without linear timeouts (older kernels, or the sysctl at 0): 1, 3, 7,
/// 15, 31, 63 s, failing at 127 s.
///
/// Serialized as its computed rungs (a recorded trace keeps the ladder its namespace had:
/// `tcpdoctor_trace::recording`).
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct SynLadder {
    /// `at[i]` is when retransmission `i + 1` is sent (nominal).
    at: Vec<Duration>,
    /// `late[i]`: how much later than `at[i]` it may be sent (timer wheel, accumulated).
    late: Vec<Duration>,
    give_up: Duration,
    give_up_late: Duration,
    /// Earlier than `give_up` when a late timer may reach the time budget one expiry sooner.
    give_up_early: Duration,
    budget: Duration,
    ended_by: GiveUp,
}

impl SynLadder {
    /// `linear_timeouts` is `None` when the kernel has no `tcp_syn_linear_timeouts`. The RTO
    /// is capped at [`RTO_MAX`].
    pub fn new(syn_retries: u32, linear_timeouts: Option<u32>, initial_rto: Duration) -> SynLadder {
        SynLadder::with_rto_max(syn_retries, linear_timeouts, initial_rto, RTO_MAX)
    }

    /// As [`SynLadder::new`] with the RTO capped at `rto_max` (`net.ipv4.tcp_rto_max_ms`,
    /// Linux 6.15+, 1 s to 120 s; it also enters the time budget).
    pub fn with_rto_max(
        syn_retries: u32,
        linear_timeouts: Option<u32>,
        initial_rto: Duration,
        rto_max: Duration,
    ) -> SynLadder {
        let initial_rto = initial_rto.max(Duration::from_millis(1));
        let rto_max = rto_max.max(initial_rto);
        let linear = linear_timeouts.unwrap_or(0);
        let max_retransmits = syn_retries.saturating_add(linear);
        let budget = model_timeout(syn_retries, initial_rto, rto_max);
        let mut at = Vec::new();
        let mut late = Vec::new();
        let (mut t, mut lag, mut rto) = (Duration::ZERO, Duration::ZERO, initial_rto);
        let mut sent = 0u32;
        let mut early = None;
        let ended_by = loop {
            // The timer expires.
            t += rto;
            lag += timer_lag_max(rto);
            if sent >= max_retransmits {
                break GiveUp::Count;
            }
            if sent > 0 && t >= budget {
                break GiveUp::Time;
            }
            if sent > 0 && t + lag >= budget && early.is_none() {
                // Fired late enough, this expiry would already be past the budget.
                early = Some(budget);
            }
            sent += 1;
            at.push(t);
            late.push(lag);
            if sent > linear {
                rto = (rto * 2).min(rto_max);
            }
        };
        SynLadder {
            at,
            late,
            give_up: t,
            give_up_late: lag,
            give_up_early: early.unwrap_or(t).min(t),
            budget,
            ended_by,
        }
    }

    /// When retransmission `attempt` (1-based) is sent, or `None` past the last one.
    pub fn retransmit_at(&self, attempt: u32) -> Option<Duration> {
        self.index(attempt).map(|i| self.at[i])
    }

    /// The latest time retransmission `attempt` can be sent: its rung plus the lateness the
    /// timer wheel may add to it and every earlier timer ([`timer_lag_max`]).
    pub fn latest(&self, attempt: u32) -> Option<Duration> {
        self.index(attempt).map(|i| self.at[i] + self.late[i])
    }

    fn index(&self, attempt: u32) -> Option<usize> {
        let i = attempt.checked_sub(1)? as usize;
        (i < self.at.len()).then_some(i)
    }

    /// When connect() gives up with ETIMEDOUT (the nominal timer expiry).
    pub fn give_up_at(&self) -> Duration {
        self.give_up
    }

    /// The latest connect() can give up: [`SynLadder::give_up_at`] plus the timer lateness.
    pub fn give_up_latest(&self) -> Duration {
        self.give_up + self.give_up_late
    }

    /// The earliest connect() can give up. Equal to [`SynLadder::give_up_at`] unless an
    /// earlier expiry, fired late, could already pass the time budget (long linear ladders:
    /// 1 s steps fired 12% late reach 127 s by the 113th); the rungs after this time may then
    /// not be sent.
    pub fn give_up_earliest(&self) -> Duration {
        self.give_up_early
    }

    /// The time budget since the first SYN (`tcp_model_timeout`): the kernel gives up at the
    /// first timer expiry at or after it, if the retransmission count has not ended it first.
    pub fn time_budget(&self) -> Duration {
        self.budget
    }

    /// Which bound ended the ladder.
    pub fn ended_by(&self) -> GiveUp {
        self.ended_by
    }

    /// All rungs, in order.
    pub fn rungs(&self) -> &[Duration] {
        &self.at
    }

    /// The retransmission that explains a connect that took `delay`: the last rung at or below
    /// `delay` (1 ms of clock skew allowed), if `delay` is within the rung's timer lateness
    /// ([`SynLadder::latest`]) plus `slack` (the round trip after the resend, scheduling).
    /// `None` when no rung fits.
    pub fn attempt_for(&self, delay: Duration, slack: Duration) -> Option<u32> {
        let skew = Duration::from_millis(1);
        let idx = self.at.iter().rposition(|&t| t <= delay + skew)?;
        (delay <= self.at[idx] + self.late[idx] + slack).then_some(idx as u32 + 1)
    }
}

/// `tcp_model_timeout(boundary = retries, rto_base = initial)` of net/ipv4/tcp_timer.c.
fn model_timeout(retries: u32, base: Duration, rto_max: Duration) -> Duration {
    let ratio = (rto_max.as_micros() / base.as_micros().max(1)).max(1);
    let thresh = ratio.ilog2();
    if retries <= thresh {
        base * ((2u32 << retries) - 1)
    } else {
        base * ((2u32 << thresh) - 1) + rto_max * (retries - thresh)
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

    fn ms(v: u64) -> Duration {
        Duration::from_millis(v)
    }

    #[test]
    fn default_ladder_runs_past_the_linear_part_until_the_time_budget() {
        let l = SynLadder::new(6, Some(4), SYN_INITIAL_RTO);
        assert_eq!(
            l.rungs(),
            secs(&[1, 2, 3, 4, 5, 7, 11, 19, 35, 67]).as_slice()
        );
        assert_eq!(l.time_budget(), Duration::from_secs(127));
        assert_eq!(l.give_up_at(), Duration::from_secs(131));
        assert_eq!(l.ended_by(), GiveUp::Count);
        assert_eq!(
            l.to_string(),
            "1, 2, 3, 4, 5, 7, 11, 19, 35, 67 s, fail at 131 s"
        );
    }

    #[test]
    fn exponential_ladder_of_older_kernels() {
        let l = SynLadder::new(6, None, SYN_INITIAL_RTO);
        assert_eq!(l.rungs(), secs(&[1, 3, 7, 15, 31, 63]).as_slice());
        assert_eq!(l.give_up_at(), Duration::from_secs(127));
        assert_eq!(l, SynLadder::new(6, Some(0), SYN_INITIAL_RTO));
    }

    #[test]
    fn the_time_budget_ends_short_ladders_before_the_count() {
        // tcp_syn_retries=2: budget (2^3 - 1) x 1 s = 7 s, reached at the 7 s expiry before
        // the 6 retransmissions the count allows.
        let l = SynLadder::new(2, Some(4), SYN_INITIAL_RTO);
        assert_eq!(l.rungs(), secs(&[1, 2, 3, 4, 5]).as_slice());
        assert_eq!(l.give_up_at(), Duration::from_secs(7));
        assert_eq!(l.ended_by(), GiveUp::Time);
        let l = SynLadder::new(1, Some(4), SYN_INITIAL_RTO);
        assert_eq!(l.rungs(), secs(&[1, 2]).as_slice());
        assert_eq!(l.give_up_at(), Duration::from_secs(3));
        // Count first: 4 + 2 retransmissions, then the 33 s expiry (budget 31 s).
        let l = SynLadder::new(4, Some(2), SYN_INITIAL_RTO);
        assert_eq!(l.rungs(), secs(&[1, 2, 3, 5, 9, 17]).as_slice());
        assert_eq!(l.give_up_at(), Duration::from_secs(33));
        assert_eq!(l.ended_by(), GiveUp::Count);
    }

    #[test]
    fn rto_max_caps_the_steps_and_enters_the_budget() {
        let l = SynLadder::with_rto_max(3, Some(0), SYN_INITIAL_RTO, Duration::from_secs(3));
        assert_eq!(l.rungs(), secs(&[1, 3, 6]).as_slice());
        assert_eq!(l.give_up_at(), Duration::from_secs(9));
        // Budget 3 x 1 s + 3 x 2 s = 9 s ends it before the sixth retransmission.
        let l = SynLadder::with_rto_max(4, Some(2), SYN_INITIAL_RTO, Duration::from_secs(2));
        assert_eq!(l.rungs(), secs(&[1, 2, 3, 5, 7]).as_slice());
        assert_eq!(l.time_budget(), Duration::from_secs(9));
        assert_eq!(l.give_up_at(), Duration::from_secs(9));
        assert_eq!(l.ended_by(), GiveUp::Time);
        // Many retries: the steps stop growing at 120 s.
        let l = SynLadder::new(10, None, SYN_INITIAL_RTO);
        assert_eq!(
            l.give_up_at(),
            Duration::from_secs(1 + 2 + 4 + 8 + 16 + 32 + 64 + 120 + 120 + 120 + 120)
        );
        assert_eq!(l.time_budget(), l.give_up_at());
    }

    /// SYN send times and ETIMEDOUT measured on this machine kind (6.18, HZ=250): a namespace
    /// with the sysctls set, an nft rule dropping the SYNs, tcpdump -tt on lo, and a Python
    /// connect() (see the integration test `syn_ladder_measured_in_a_namespace_matches_the_model`
    /// in crates/cli/tests/probe.rs, which repeats this on every run).
    #[test]
    fn measured_ladders_fit_the_model_rung_by_rung() {
        let cases: [(u32, u32, u64, &[u64], u64); 5] = [
            (
                6,
                4,
                120_000,
                &[
                    1_029, 2_057, 3_077, 4_105, 5_129, 7_141, 11_205, 19_397, 35_529, 69_321,
                ],
                134_857,
            ),
            (2, 4, 120_000, &[1_031, 2_055, 3_079, 4_103, 5_127], 7_142),
            (3, 0, 120_000, &[1_031, 3_047, 7_144], 15_339),
            (
                4,
                2,
                120_000,
                &[1_006, 2_034, 3_058, 5_074, 9_102, 17_294],
                33_426,
            ),
            (4, 2, 2_000, &[1_027, 2_047, 3_071, 5_087, 7_103], 9_119),
        ];
        for (retries, linear, rto_max_ms, measured, failed_ms) in cases {
            let l = SynLadder::with_rto_max(retries, Some(linear), SYN_INITIAL_RTO, ms(rto_max_ms));
            assert_eq!(l.rungs().len(), measured.len(), "{retries}/{linear}: {l}");
            for (i, &m) in measured.iter().enumerate() {
                let attempt = i as u32 + 1;
                let (lo, hi) = (
                    l.retransmit_at(attempt).unwrap(),
                    l.latest(attempt).unwrap(),
                );
                assert!(
                    ms(m) >= lo && ms(m) <= hi,
                    "{retries}/{linear} rung {attempt}: {m} ms not in {lo:?}..{hi:?}"
                );
                assert_eq!(l.attempt_for(ms(m), ms(5)), Some(attempt));
            }
            let failed = ms(failed_ms);
            assert!(failed >= l.give_up_at() && failed <= l.give_up_latest());
        }
    }

    #[test]
    fn timer_lag_is_an_eighth_of_the_delay_at_most() {
        assert_eq!(timer_lag_max(ms(40)), JIFFY_MAX);
        assert_eq!(
            timer_lag_max(Duration::from_secs(63)),
            Duration::from_secs(8)
        );
        let l = SynLadder::new(6, Some(4), SYN_INITIAL_RTO);
        // Rung 10 (67 s) may be up to 1/8 of the time before it late.
        let late = l.latest(10).unwrap() - l.retransmit_at(10).unwrap();
        assert!(late <= Duration::from_secs(67) * 8 / 63 + 10 * JIFFY_MAX);
        assert!(l.give_up_latest() > l.give_up_at());
        assert_eq!(l.give_up_earliest(), l.give_up_at());
        // 1 s steps up to the 127 s budget: late timers may reach it sooner.
        let long = SynLadder::new(6, Some(200), SYN_INITIAL_RTO);
        assert_eq!(long.give_up_at(), Duration::from_secs(127));
        assert_eq!(long.rungs().len(), 126);
        assert!(long.give_up_earliest() == long.time_budget());
        let long = SynLadder::new(6, Some(119), SYN_INITIAL_RTO);
        assert!(long.give_up_earliest() < long.give_up_at(), "{long}");
    }

    #[test]
    fn attempt_matching_uses_the_rung_tolerance_and_slack() {
        let l = SynLadder::new(6, Some(4), SYN_INITIAL_RTO);
        let slack = ms(20);
        assert_eq!(l.attempt_for(ms(1_004), slack), Some(1));
        assert_eq!(l.attempt_for(ms(3_010), slack), Some(3));
        assert_eq!(l.attempt_for(ms(999), slack), Some(1));
        assert_eq!(l.attempt_for(ms(1_500), slack), None);
        assert_eq!(l.attempt_for(ms(900), slack), None);
        // Past the linear part: 11 s, 19 s, 35 s with their growing tolerance.
        assert_eq!(l.attempt_for(ms(11_300), slack), Some(7));
        assert_eq!(l.attempt_for(ms(19_500), slack), Some(8));
        assert_eq!(l.attempt_for(ms(35_700), slack), Some(9));
        assert_eq!(l.attempt_for(ms(50_000), slack), None);
        let old = SynLadder::new(6, None, SYN_INITIAL_RTO);
        assert_eq!(old.attempt_for(ms(3_020), slack), Some(2));
    }
}
