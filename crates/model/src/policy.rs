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
//! | `time_lost` | [`LOST_CRITICAL`] (10%) or more of the observed time lost to stalls | critical |
//! | `rare_failures` | operations failed, under 1% of those observed | warning |
//! | `timeout_stall` | a stall of [`STALL_WARNING`] (200 ms, Linux's default RTO floor) or more | warning |
//! | `budget_pressure` | a finite pool [`BUDGET_WARNING`] (50%) used | warning |
//! | `some_time_lost` | [`LOST_WARNING`] (1%) or more of the observed time lost | warning |
//! | `negligible` | short stalls whose time was measured: under 1% of the observed time lost | info |
//! | `common` | short or unknown stalls hurting at least 1% of what was observed | warning |
//! | `rare` | short or unknown stalls, rarer than 1%, or of unknown share | info |
//! | `context` | nothing was hurt: a fact worth knowing (a budget, a ladder) | info |
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
    /// True when nothing was hurt yet: a setting or state exposes the host to the harm above.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
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
            Rule::TimeLost => "10% or more of the time lost to stalls",
            Rule::TimeoutStall => "a stall of 200 ms or more",
            Rule::BudgetPressure => "half or more of a finite budget in use",
            Rule::SomeTimeLost => "1% or more of the time lost to stalls",
            Rule::Negligible => "short stalls that cost under 1% of the measured time",
            Rule::Common => "short stalls hurting 1% or more of what was observed",
            Rule::Rare => "short stalls, rare or of unknown share",
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

    pub fn with_time_lost(mut self, share: f64) -> Impact {
        self.time_lost_share = Some(share);
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
        if self.time_lost_share.is_some_and(|s| s >= LOST_CRITICAL) {
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
        if self.time_lost_share.is_some_and(|s| s >= LOST_WARNING) {
            return j(Warning, SomeTimeLost);
        }
        // The stalls' cost was measured (rules above: under 200 ms each, under 1% of the
        // time): however many operations they touched, they are flow control or scheduling
        // at work, not harm worth a warning.
        if self.affected > 0 && self.time_lost_share.is_some() {
            return j(Info, Negligible);
        }
        if self.affected > 0 {
            return match self.share(self.affected) {
                Some(s) if s >= SHARE_COMMON => j(Warning, Common),
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
        // The same stalls with their time unknown stay judged by their share.
        let i = Impact::stalls(3, Some(20), Some(Duration::from_micros(59)));
        assert_eq!(i.judge().rule, Rule::Common);
        // A measured share of 1% or more is still a warning.
        let i = Impact::stalls(3, Some(20), ms(5)).with_time_lost(0.01);
        assert_eq!(i.judge().rule, Rule::SomeTimeLost);
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
    }
}
