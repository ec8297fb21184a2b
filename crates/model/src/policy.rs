//! The severity policy: the one place where what a pathology cost becomes a [`Severity`].
//!
//! Detectors in every command (probe, analyze, sockets, counters, check, doctor, lab, trace)
//! describe the harm they measured as an [`Impact`] and never pick a severity themselves, so the
//! same evidence gets the same severity whichever command saw it. [`Impact::judge`] applies the
//! rules below, first match wins, and names the rule ([`Rule`]) so a reader can see why.
//!
//! | rule | condition | severity |
//! |---|---|---|
//! | `failures` | operations failed and at least 1% of those observed did (or the share is unknown) | critical |
//! | `long_stall` | a stall of [`STALL_CRITICAL`] (1 s) or more | critical |
//! | `budget_exhausted` | a finite pool [`BUDGET_CRITICAL`] (90%) used, or demand at or above its sustainable rate | critical |
//! | `time_lost` | [`LOST_CRITICAL`] (10%) or more of the observed time lost to stalls, resting on a pattern of stalls or (when the time lost is known) on 1 s or more of it | critical |
//! | `rare_failures` | operations failed, under 1% of those observed | warning |
//! | `timeout_stall` | a stall of [`STALL_WARNING`] (200 ms, Linux's default RTO floor) or more | warning |
//! | `budget_pressure` | a finite pool [`BUDGET_WARNING`] (50%) used | warning |
//! | `some_time_lost` | [`LOST_WARNING`] (1%) or more of the observed time lost, resting on a pattern of stalls or (when known) on 200 ms or more of it | warning |
//! | `negligible` | short stalls whose time was measured: under 1% of the observed time lost, or under 200 ms in all | info |
//! | `common` | short or unknown stalls hurting at least 1% of what was observed, out of a sample that can show it ([`SAMPLE_MIN`] observed or [`PATTERN_MIN`] hurt) | warning |
//! | `rare` | short or unknown stalls, rarer than 1%, of unknown share, or too few to tell | info |
//! | `context` | nothing was hurt: a fact worth knowing (a budget, a ladder) | info |
//!
//! Severity follows absolute harm backed by enough evidence, never a share of a tiny sample:
//! - A share of time lost is a rate of harm; it needs a pattern behind it, or enough time.
//!   A zero window that reopened after 10 ms is 90% of an 11 ms capture but one 10 ms stall
//!   to its writer. When the absolute time lost is known ([`Impact::with_time_lost_of`]) and
//!   fewer than [`PATTERN_MIN`] stalls make it, the share rules also need the time to reach
//!   the stall that would be judged the same alone: 1 s ([`STALL_CRITICAL`]) for
//!   `time_lost`, 200 ms ([`STALL_WARNING`]) for `some_time_lost`. Twenty stalls of 8 ms in
//!   100 rounds (6% of a 2.4 s run) are a pattern: the share is judged. A share given alone
//!   ([`Impact::with_time_lost`], e.g. an exposure: no time lost yet) is judged by itself.
//! - A share of operations tells "common" from "rare" only out of enough of them: under
//!   [`SAMPLE_MIN`] (100) observed, one hurt operation is 1% or more by construction, so the
//!   `common` rule also needs [`PATTERN_MIN`] (10) hurt operations (a pattern, not an event).
//!   One tail-loss probe among five data segments is one short stall, not 20% of anything.
//!   Failures are not sampled this way: one connection that failed is harm in itself.
//!
//! An [`Impact::exposure`] (a setting or state that *would* cause the harm, not harm seen) is
//! judged one level below the harm it exposes to: a risk of multi-second stalls is a warning.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::finding::Severity;

/// A stall a user sees as "a second": the initial SYN retransmission timeout (RFC 6298 2.1,
/// `TCP_TIMEOUT_INIT`). Anything this long is critical, however rare.
pub const STALL_CRITICAL: Duration = Duration::from_secs(1);

/// A stall as long as Linux's default retransmission-timeout floor (`TCP_RTO_MIN`, 200 ms).
pub const STALL_WARNING: Duration = Duration::from_millis(200);

/// Share of observed operations from which a short stall or a failure stops being rare.
pub const SHARE_COMMON: f64 = 0.01;

/// Operations to observe before a share of them hurt can tell 1% ([`SHARE_COMMON`]) from
/// none: `1 / SHARE_COMMON`.
pub const SAMPLE_MIN: u64 = 100;

/// Hurt operations that make a pattern rather than an event, out of a sample smaller than
/// [`SAMPLE_MIN`]: ten short stalls in a few dozen operations are common; one is an event.
pub const PATTERN_MIN: u64 = 10;

/// Share of a finite pool (ephemeral ports toward a destination, accept-queue slots) in use
/// from which new work is about to fail.
pub const BUDGET_CRITICAL: f64 = 0.9;

/// Share of a finite pool in use from which a burst could exhaust it.
pub const BUDGET_WARNING: f64 = 0.5;

/// Share of the observed time lost to stalls that makes throughput collapse.
pub const LOST_CRITICAL: f64 = 0.10;

/// Share of the observed time lost to stalls worth fixing.
pub const LOST_WARNING: f64 = 0.01;

/// What a pathology cost, as measured. Every field is optional evidence; fill in what the
/// command could see and leave the rest at its default.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Impact {
    /// Operations (connects, requests, connections, flows, segments) the pathology hurt.
    pub affected: u64,
    /// Out of how many observed of the same kind; `None` when unknown (a kernel counter).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub observed: Option<u64>,
    /// Operations that failed outright: an error, a timeout that gave up, no answer at all.
    pub failed: u64,
    /// The longest single stall it caused, in microseconds.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub worst_stall_us: Option<u64>,
    /// Share (0..=1) of a finite pool in use (ports toward a destination, an accept queue).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub budget_used: Option<f64>,
    /// Demand divided by the sustainable rate (e.g. connects/s over ports / TIME_WAIT);
    /// 1 or more exhausts the pool.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rate_vs_budget: Option<f64>,
    /// Share (0..=1) of the observed time lost to stalls.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub time_lost_share: Option<f64>,
    /// The time lost to stalls in all, in microseconds, when measured (summed over the
    /// operations: two flows stalled 300 ms each lost 600 ms).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time_lost_us: Option<u64>,
    /// True when nothing was hurt yet: a setting or state exposes the host to the harm above.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub exposure: bool,
}

/// The rule of the policy that set a severity (module docs). Serialized snake_case.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Rule {
    Failures,
    RareFailures,
    LongStall,
    BudgetExhausted,
    TimeLost,
    TimeoutStall,
    BudgetPressure,
    SomeTimeLost,
    Negligible,
    Common,
    Rare,
    Context,
}

impl Rule {
    /// One line for human output: why this severity.
    pub fn describe(self) -> &'static str {
        match self {
            Rule::Failures => "operations failed (1% or more of those observed)",
            Rule::RareFailures => "a few operations failed (under 1% of those observed)",
            Rule::LongStall => "a stall of 1 s or more",
            Rule::BudgetExhausted => {
                "a finite budget is used up (90% or more, or demand above the sustainable rate)"
            }
            Rule::TimeLost => "10% or more of the time lost to stalls (1 s or more in all)",
            Rule::TimeoutStall => "a stall of 200 ms or more",
            Rule::BudgetPressure => "half or more of a finite budget in use",
            Rule::SomeTimeLost => "1% or more of the time lost to stalls (200 ms or more in all)",
            Rule::Negligible => {
                "short stalls that cost under 1% of the measured time, or under 200 ms in all"
            }
            Rule::Common => "short stalls hurting 1% or more of what was observed",
            Rule::Rare => "short stalls, rare, of unknown share, or too few to tell",
            Rule::Context => "nothing hurt: context",
        }
    }
}

/// A severity and the rule that chose it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Judgement {
    pub severity: Severity,
    pub rule: Rule,
}

impl Impact {
    /// Context only: nothing hurt (a budget, a ladder, a rate well under its limit).
    pub fn none() -> Impact {
        Impact::default()
    }

    /// `affected` of `observed` operations were hurt by stalls of up to `worst`.
    pub fn stalls(affected: u64, observed: Option<u64>, worst: Option<Duration>) -> Impact {
        Impact {
            affected,
            observed,
            worst_stall_us: worst.map(duration_us),
            ..Impact::default()
        }
    }

    /// `failed` of `observed` operations failed outright.
    pub fn failures(failed: u64, observed: Option<u64>) -> Impact {
        Impact {
            affected: failed,
            observed,
            failed,
            ..Impact::default()
        }
    }

    /// A finite pool `used` (0..=1) full.
    pub fn budget(used: f64) -> Impact {
        Impact {
            budget_used: Some(used),
            ..Impact::default()
        }
    }

    /// Demand at `ratio` times the sustainable rate.
    pub fn rate(ratio: f64) -> Impact {
        Impact {
            rate_vs_budget: Some(ratio),
            ..Impact::default()
        }
    }

    /// Marks the impact as a risk not yet realised (judged one level lower).
    pub fn exposure(mut self) -> Impact {
        self.exposure = true;
        self
    }

    pub fn with_failed(mut self, failed: u64) -> Impact {
        self.failed = failed;
        self.affected = self.affected.max(failed);
        self
    }

    pub fn with_stall(mut self, worst: Duration) -> Impact {
        self.worst_stall_us = Some(duration_us(worst));
        self
    }

    pub fn with_observed(mut self, observed: u64) -> Impact {
        self.observed = Some(observed);
        self
    }

    /// The share of the observed time lost, without the time itself (an exposure, or a
    /// share measured in rounds): judged by the share alone.
    pub fn with_time_lost(mut self, share: f64) -> Impact {
        self.time_lost_share = Some(share);
        self
    }

    /// `lost` of `observed` time lost to stalls: the share and the absolute time, so a large
    /// share of a short observation is judged by the little time it is (module docs).
    pub fn with_time_lost_of(mut self, lost: Duration, observed: Duration) -> Impact {
        let share = if observed.is_zero() {
            0.0
        } else {
            (lost.as_secs_f64() / observed.as_secs_f64()).min(1.0)
        };
        self.time_lost_share = Some(share);
        self.time_lost_us = Some(duration_us(lost));
        self
    }

    pub fn with_budget(mut self, used: f64) -> Impact {
        self.budget_used = Some(used);
        self
    }

    pub fn with_rate(mut self, ratio: f64) -> Impact {
        self.rate_vs_budget = Some(ratio);
        self
    }

    /// The longest stall, if known.
    pub fn worst_stall(&self) -> Option<Duration> {
        self.worst_stall_us.map(Duration::from_micros)
    }

    /// The time lost, if measured.
    pub fn time_lost(&self) -> Option<Duration> {
        self.time_lost_us.map(Duration::from_micros)
    }

    /// The share of time lost, when it is at least `share` and rests on a pattern of stalls
    /// ([`PATTERN_MIN`]) or on at least `floor` of time (or the time is unknown).
    fn lost_at_least(&self, share: f64, floor: Duration) -> bool {
        self.time_lost_share.is_some_and(|s| s >= share)
            && (self.affected >= PATTERN_MIN || self.time_lost().is_none_or(|t| t >= floor))
    }

    /// `part` as a share of `observed`, when `observed` is known and non-zero.
    fn share(&self, part: u64) -> Option<f64> {
        match self.observed {
            Some(n) if n > 0 => Some(part as f64 / n as f64),
            _ => None,
        }
    }

    /// Applies the policy (module docs): the severity and the rule that chose it.
    pub fn judge(&self) -> Judgement {
        let harm = self.judge_harm();
        if !self.exposure {
            return harm;
        }
        let severity = match harm.severity {
            Severity::Critical => Severity::Warning,
            _ => Severity::Info,
        };
        Judgement {
            severity,
            rule: harm.rule,
        }
    }

    fn judge_harm(&self) -> Judgement {
        use Rule::*;
        use Severity::*;
        let j = |severity, rule| Judgement { severity, rule };
        let stall = self.worst_stall();
        if self.failed > 0 && self.share(self.failed).is_none_or(|s| s >= SHARE_COMMON) {
            return j(Critical, Failures);
        }
        if stall.is_some_and(|s| s >= STALL_CRITICAL) {
            return j(Critical, LongStall);
        }
        if self.budget_used.is_some_and(|u| u >= BUDGET_CRITICAL)
            || self.rate_vs_budget.is_some_and(|r| r >= 1.0)
        {
            return j(Critical, BudgetExhausted);
        }
        if self.lost_at_least(LOST_CRITICAL, STALL_CRITICAL) {
            return j(Critical, TimeLost);
        }
        // Rare failures are a warning at least; a pool used up or a long stall beside them
        // (rules above) is critical whatever the share: report 004's load test failed 10
        // connects of 51,209 with all 1,000 ports held, and wrk stopped.
        if self.failed > 0 {
            return j(Warning, RareFailures);
        }
        if stall.is_some_and(|s| s >= STALL_WARNING) {
            return j(Warning, TimeoutStall);
        }
        if self.budget_used.is_some_and(|u| u >= BUDGET_WARNING) {
            return j(Warning, BudgetPressure);
        }
        if self.lost_at_least(LOST_WARNING, STALL_WARNING) {
            return j(Warning, SomeTimeLost);
        }
        // The stalls' cost was measured (rules above: under 200 ms each, under 1% of the
        // time or under 200 ms in all): however many operations they touched, they are flow
        // control or scheduling at work, not harm worth a warning.
        if self.affected > 0 && self.time_lost_share.is_some() {
            return j(Info, Negligible);
        }
        if self.affected > 0 {
            // A share out of a small sample is evidence only for a pattern (module docs).
            let sample =
                self.observed.is_some_and(|n| n >= SAMPLE_MIN) || self.affected >= PATTERN_MIN;
            return match self.share(self.affected) {
                Some(s) if s >= SHARE_COMMON && sample => j(Warning, Common),
                _ => j(Info, Rare),
            };
        }
        j(Info, Context)
    }

    /// The severity alone.
    pub fn severity(&self) -> Severity {
        self.judge().severity
    }

    /// Combines two impacts of one pathology (e.g. the same finding from two commands):
    /// counts add where they describe the same operations is unknowable, so the larger is
    /// kept; stalls, budgets and shares take the worse.
    pub fn merge(&self, other: &Impact) -> Impact {
        let max_f = |a: Option<f64>, b: Option<f64>| match (a, b) {
            (Some(x), Some(y)) => Some(x.max(y)),
            (x, None) => x,
            (None, y) => y,
        };
        Impact {
            affected: self.affected.max(other.affected),
            observed: match (self.observed, other.observed) {
                (Some(a), Some(b)) => Some(a.max(b)),
                (a, None) => a,
                (None, b) => b,
            },
            failed: self.failed.max(other.failed),
            worst_stall_us: self.worst_stall_us.max(other.worst_stall_us),
            budget_used: max_f(self.budget_used, other.budget_used),
            rate_vs_budget: max_f(self.rate_vs_budget, other.rate_vs_budget),
            time_lost_share: max_f(self.time_lost_share, other.time_lost_share),
            // The time behind the share stays known only if every share came with it.
            time_lost_us: if [self, other]
                .iter()
                .any(|i| i.time_lost_share.is_some() && i.time_lost_us.is_none())
            {
                None
            } else {
                self.time_lost_us.max(other.time_lost_us)
            },
            exposure: self.exposure && other.exposure,
        }
    }
}

fn duration_us(d: Duration) -> u64 {
    u64::try_from(d.as_micros()).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;
    use Severity::*;

    fn ms(v: u64) -> Option<Duration> {
        Some(Duration::from_millis(v))
    }

    #[test]
    fn a_stall_of_a_second_is_critical_however_many_were_observed() {
        // The same SYN drop, seen as 2 connects of 2.04 s in a capture and as 15 connects of
        // 2.05 s out of 2000 in the lab, is one severity.
        let capture = Impact::stalls(2, Some(2), ms(2_040));
        let lab = Impact::stalls(15, Some(2_000), ms(2_050));
        assert_eq!(capture.judge(), lab.judge());
        assert_eq!(lab.judge().severity, Critical);
        assert_eq!(lab.judge().rule, Rule::LongStall);
    }

    #[test]
    fn failures_are_critical_unless_rare() {
        assert_eq!(Impact::failures(3, None).severity(), Critical);
        assert_eq!(Impact::failures(3, Some(100)).severity(), Critical);
        let j = Impact::failures(3, Some(10_000)).judge();
        assert_eq!((j.severity, j.rule), (Warning, Rule::RareFailures));
    }

    #[test]
    fn rare_failures_with_their_pool_used_up_are_critical() {
        // Report 004's load test: 10 connects of 51,209 failed, all 1,000 ports held.
        let j = Impact::failures(10, Some(51_209)).with_budget(1.0).judge();
        assert_eq!((j.severity, j.rule), (Critical, Rule::BudgetExhausted));
        let j = Impact::failures(10, Some(51_209)).with_budget(0.6).judge();
        assert_eq!((j.severity, j.rule), (Warning, Rule::RareFailures));
    }

    #[test]
    fn timeouts_warn_short_stalls_depend_on_share() {
        assert_eq!(Impact::stalls(1, None, ms(200)).severity(), Warning);
        assert_eq!(Impact::stalls(5, Some(100), ms(40)).severity(), Warning);
        assert_eq!(Impact::stalls(5, Some(10_000), ms(40)).severity(), Info);
        // A counter moved, no share and no stall length known: rare.
        assert_eq!(Impact::stalls(5, None, None).judge().rule, Rule::Rare);
    }

    #[test]
    fn budgets_and_rates() {
        assert_eq!(Impact::budget(0.95).severity(), Critical);
        assert_eq!(Impact::budget(0.6).severity(), Warning);
        assert_eq!(Impact::budget(0.2).severity(), Info);
        assert_eq!(Impact::rate(19.7).severity(), Critical);
        // A rate under the budget is never a warning.
        assert_eq!(Impact::rate(0.8).severity(), Info);
    }

    #[test]
    fn time_lost() {
        let i = Impact::stalls(40, Some(400), ms(204)).with_time_lost(0.2);
        assert_eq!(i.judge().rule, Rule::TimeLost);
        // Low rto_min: short stalls, but a real share of time still lost.
        let i = Impact::stalls(40, Some(400), ms(6)).with_time_lost(0.03);
        assert_eq!(
            i.judge(),
            Judgement {
                severity: Warning,
                rule: Rule::SomeTimeLost
            }
        );
    }

    #[test]
    fn short_stalls_measured_to_cost_under_one_percent_of_the_time_are_info() {
        // 3 of 20 flows met a zero window, the writer waited 59 us at worst, 0.0% of the
        // flows' time: flow control at work, not a warning, however common.
        let i = Impact::stalls(3, Some(20), Some(Duration::from_micros(59))).with_time_lost(0.0);
        assert_eq!(
            i.judge(),
            Judgement {
                severity: Info,
                rule: Rule::Negligible
            }
        );
        // The same stalls with their time unknown stay judged by their share, which 3 of 20
        // cannot show (too few to tell); 10 of 40 can.
        let i = Impact::stalls(3, Some(20), Some(Duration::from_micros(59)));
        assert_eq!(i.judge().rule, Rule::Rare);
        let i = Impact::stalls(10, Some(40), Some(Duration::from_micros(59)));
        assert_eq!(i.judge().rule, Rule::Common);
        // A measured share of 1% or more is still a warning.
        let i = Impact::stalls(3, Some(20), ms(5)).with_time_lost(0.01);
        assert_eq!(i.judge().rule, Rule::SomeTimeLost);
    }

    #[test]
    fn a_large_share_of_a_short_observation_is_judged_by_the_time_lost() {
        // Issue 21: a zero window that reopened after 10 ms in an 11 ms capture is 90.9% of
        // the time, and 10 ms: info, not critical.
        let tiny = Impact::stalls(1, Some(1), ms(10))
            .with_time_lost_of(Duration::from_millis(10), Duration::from_millis(11));
        assert!(tiny.time_lost_share.unwrap() > 0.9);
        assert_eq!(
            tiny.judge(),
            Judgement {
                severity: Info,
                rule: Rule::Negligible
            }
        );
        // The same share of a long observation: 1.8 s lost in short stalls is critical;
        // 300 ms lost (30% of 1 s) is a warning.
        let long = Impact::stalls(90, Some(100), ms(20))
            .with_time_lost_of(Duration::from_millis(1_800), Duration::from_secs(2));
        assert_eq!(long.judge().rule, Rule::TimeLost);
        let some = Impact::stalls(2, Some(100), ms(150))
            .with_time_lost_of(Duration::from_millis(300), Duration::from_secs(1));
        assert_eq!(
            (some.judge().severity, some.judge().rule),
            (Warning, Rule::SomeTimeLost)
        );
        // A pattern of short stalls: 20 rounds of 100 waited 8 ms, 6% of a 2.41 s run
        // (150 ms): the share is a rate, backed by the pattern.
        let pattern = Impact::stalls(20, Some(100), ms(8))
            .with_time_lost_of(Duration::from_millis(150), Duration::from_millis(2_410));
        assert_eq!(pattern.judge().rule, Rule::SomeTimeLost);
        // A share given alone (an exposure, rounds) is judged by itself.
        assert_eq!(
            Impact::none().with_time_lost(0.2).judge().rule,
            Rule::TimeLost
        );
        // Merged with a share whose time is unknown, the time lost is unknown too.
        let m = tiny.merge(&Impact::none().with_time_lost(0.5));
        assert_eq!(m.time_lost_us, None);
        assert_eq!(m.judge().rule, Rule::TimeLost);
    }

    #[test]
    fn one_event_in_a_tiny_sample_is_not_common() {
        // Issue 21: one tail-loss probe among five data segments is 20%, and one short stall.
        let j = Impact::stalls(1, Some(5), None).judge();
        assert_eq!((j.severity, j.rule), (Info, Rule::Rare));
        // A pattern in a small sample, or a share out of enough operations, is common.
        assert_eq!(
            Impact::stalls(10, Some(40), None).judge().rule,
            Rule::Common
        );
        assert_eq!(
            Impact::stalls(2, Some(150), None).judge().rule,
            Rule::Common
        );
        // Failures are harm in themselves, however few were observed.
        assert_eq!(Impact::failures(1, Some(2)).severity(), Critical);
    }

    #[test]
    fn exposure_is_one_level_below_the_harm() {
        let risk = Impact::stalls(0, None, ms(3_000)).exposure();
        assert_eq!(risk.severity(), Warning);
        assert_eq!(Impact::budget(0.6).exposure().severity(), Info);
        assert_eq!(Impact::none().severity(), Info);
        assert_eq!(Impact::none().judge().rule, Rule::Context);
    }

    #[test]
    fn merge_keeps_the_worse() {
        let a = Impact::stalls(2, Some(10), ms(300));
        let b = Impact::failures(1, None);
        let m = a.merge(&b);
        assert_eq!(m.failed, 1);
        assert_eq!(m.worst_stall(), ms(300));
        assert_eq!(m.severity(), Critical);
    }

    #[test]
    fn serializes_only_what_is_known() {
        let v = serde_json::to_value(Impact::stalls(2, None, ms(1_000))).unwrap();
        assert_eq!(v["affected"], 2);
        assert_eq!(v["worst_stall_us"], 1_000_000);
        assert!(v.get("observed").is_none());
        assert!(v.get("exposure").is_none());
        let r = serde_json::to_value(Rule::LongStall).unwrap();
        assert_eq!(r, "long_stall");
        // What is printed reads back (a report's impact can be judged again).
        let i = Impact::stalls(2, Some(10), ms(300))
            .with_time_lost_of(Duration::from_millis(300), Duration::from_secs(2));
        let back: Impact = serde_json::from_value(serde_json::to_value(&i).unwrap()).unwrap();
        assert_eq!(back, i);
    }
}
