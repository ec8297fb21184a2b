//! Judging a remedy by what it measured: the scenario names the harm it reproduces (a count
//! such as failed connects or SYN retransmissions, or a share such as the time lost to
//! stalls) and the pathology it demonstrates; a remedied run is compared with the baseline
//! on both. Used by `--fix` (one line per remedied run) and by the remedy tables.
//!
//! The rules, in order:
//! - *nothing to fix*: the baseline showed no harm and did not name the pathology;
//! - *worked*: no harm left and the pathology no longer named above info;
//! - *insufficient*: less harm than the baseline, or none left while the pathology is still
//!   named above info (its finding says what it still costs);
//! - *no effect*: as much harm as the baseline, or more.

use serde::Serialize;
use tcpdoctor_model::{Finding, Pathology, Severity};

/// The outcome of one remedy, from its measurement.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Effect {
    Worked,
    Insufficient,
    NoEffect,
    /// The baseline did not reproduce the harm: the remedy could not be judged.
    NothingToFix,
}

impl Effect {
    pub fn name(self) -> &'static str {
        match self {
            Effect::Worked => "remedy worked",
            Effect::Insufficient => "remedy insufficient",
            Effect::NoEffect => "no effect",
            Effect::NothingToFix => "nothing to fix",
        }
    }
}

/// How a harm is counted.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum HarmKind {
    /// Events (failed connects, retransmissions).
    Count,
    /// A share (0..=1) of time or operations.
    Share,
}

/// The harm a scenario reproduces, as measured in one run.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Harm {
    pub kind: HarmKind,
    /// The count, or the share (0..=1).
    pub amount: f64,
    /// What is counted: "connects failed with EADDRNOTAVAIL", "of the time lost to stalls".
    pub what: String,
}

impl Harm {
    pub fn count(n: u64, what: impl Into<String>) -> Harm {
        Harm {
            kind: HarmKind::Count,
            amount: n as f64,
            what: what.into(),
        }
    }

    pub fn share(share: f64, what: impl Into<String>) -> Harm {
        Harm {
            kind: HarmKind::Share,
            amount: share,
            what: what.into(),
        }
    }

    /// The amount as printed: `6,587` or `35%`.
    pub fn shown(&self) -> String {
        match self.kind {
            HarmKind::Count => thousands(self.amount.round() as u64),
            HarmKind::Share => format!("{:.0}%", self.amount * 100.0),
        }
    }

    fn is_zero(&self) -> bool {
        match self.kind {
            HarmKind::Count => self.amount < 0.5,
            // Under half a percent rounds to 0% as printed.
            HarmKind::Share => self.amount < 0.005,
        }
    }
}

impl std::fmt::Display for Harm {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {}", self.shown(), self.what)
    }
}

/// `6587` -> `6,587`.
pub fn thousands(n: u64) -> String {
    let s = n.to_string();
    let mut out = String::with_capacity(s.len() + s.len() / 3);
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// A remedied run judged against the baseline.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Check {
    /// The remedied run's label (its column).
    pub run: String,
    pub effect: Effect,
    pub before: Harm,
    pub after: Harm,
    /// The scenario's pathology is not named above info in the remedied run.
    pub pathology_gone: bool,
    /// Pathologies named above info in the remedied run (the scenario's own included).
    pub remaining: Vec<Pathology>,
    /// One line: `remedy worked: 0 connects failed with EADDRNOTAVAIL`.
    pub line: String,
}

fn serious(findings: &[Finding]) -> impl Iterator<Item = &Finding> {
    findings.iter().filter(|f| f.severity >= Severity::Warning)
}

/// Judges run `label` (harm `after`, findings `after_findings`) against the baseline (harm
/// `before`, findings `before_findings`) for `pathology` (module rules).
pub fn judge(
    label: &str,
    pathology: Pathology,
    before: Harm,
    before_findings: &[Finding],
    after: Harm,
    after_findings: &[Finding],
) -> Check {
    let named_before = serious(before_findings).any(|f| f.pathology == pathology);
    let still = serious(after_findings).find(|f| f.pathology == pathology);
    let remaining: Vec<Pathology> = serious(after_findings).map(|f| f.pathology).collect();
    let effect = if before.is_zero() && !named_before {
        Effect::NothingToFix
    } else if after.is_zero() && still.is_none() {
        Effect::Worked
    } else if after.amount < before.amount {
        Effect::Insufficient
    } else {
        Effect::NoEffect
    };
    let mut line = match effect {
        Effect::NothingToFix => {
            format!("nothing to fix: the baseline showed {before} and no {pathology} finding")
        }
        Effect::Worked => format!("remedy worked: {after}"),
        Effect::Insufficient | Effect::NoEffect => match (after.kind, &still) {
            (HarmKind::Count, _) if !after.is_zero() => format!(
                "{}: {after} remain (baseline: {})",
                effect.name(),
                before.shown()
            ),
            (HarmKind::Share, _) if !after.is_zero() => format!(
                "{}: still {after} (baseline: {})",
                effect.name(),
                before.shown()
            ),
            (_, Some(f)) => format!(
                "{}: {after}, but {pathology} is still named ({}): {}",
                effect.name(),
                f.severity,
                f.summary
            ),
            (_, None) => format!("{}: {after}", effect.name()),
        },
    };
    let others: Vec<String> = serious(after_findings)
        .filter(|f| f.pathology != pathology)
        .map(|f| format!("{} ({})", f.pathology, f.severity))
        .collect();
    if !others.is_empty() {
        line.push_str(&format!("; also named: {}", others.join(", ")));
    }
    Check {
        run: label.to_string(),
        effect,
        pathology_gone: still.is_none(),
        before,
        after,
        remaining,
        line,
    }
}

/// The remedied run the verdict and exit status follow: the first that worked, else the
/// first one (the scenario's recommended remedy comes first).
pub fn followed(checks: &[Check]) -> Option<usize> {
    if checks.is_empty() {
        return None;
    }
    Some(
        checks
            .iter()
            .position(|c| c.effect == Effect::Worked)
            .unwrap_or(0),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;
    use tcpdoctor_model::{Impact, Source};

    fn exhaustion(failed: u64) -> Finding {
        Finding::new(
            Pathology::PortExhaustion,
            Source::Probe,
            "ports",
            Impact::failures(failed, Some(failed + 200)),
        )
    }

    fn eaddrnotavail(n: u64) -> Harm {
        Harm::count(n, "connects failed with EADDRNOTAVAIL")
    }

    #[test]
    fn verdict_follows_the_measured_harm() {
        let before = [exhaustion(6151)];
        let c = judge(
            "keep-alive",
            Pathology::PortExhaustion,
            eaddrnotavail(6151),
            &before,
            eaddrnotavail(0),
            &[],
        );
        assert_eq!(c.effect, Effect::Worked);
        assert_eq!(
            c.line,
            "remedy worked: 0 connects failed with EADDRNOTAVAIL"
        );
        assert!(c.pathology_gone);
        let c = judge(
            "tw_reuse=1",
            Pathology::PortExhaustion,
            eaddrnotavail(6151),
            &before,
            eaddrnotavail(6587),
            &[exhaustion(6587)],
        );
        assert_eq!(c.effect, Effect::NoEffect);
        let c = judge(
            "tw_reuse=1",
            Pathology::PortExhaustion,
            eaddrnotavail(7000),
            &before,
            eaddrnotavail(6587),
            &[exhaustion(6587)],
        );
        assert_eq!(c.effect, Effect::Insufficient);
        assert_eq!(
            c.line,
            "remedy insufficient: 6,587 connects failed with EADDRNOTAVAIL remain (baseline: 7,000)"
        );
        assert_eq!(c.remaining, vec![Pathology::PortExhaustion]);
    }

    #[test]
    fn no_harm_left_but_still_named_is_insufficient() {
        let incast = |ms: u64, lost: f64| {
            Finding::new(
                Pathology::Incast,
                Source::Lab,
                "incast",
                Impact::stalls(0, Some(100), Some(Duration::from_millis(ms))).with_time_lost(lost),
            )
        };
        let c = judge(
            "rto_min 5ms",
            Pathology::Incast,
            Harm::count(44, "rounds stalled > 100 ms"),
            &[incast(250, 0.8)],
            Harm::count(0, "rounds stalled > 100 ms"),
            &[incast(70, 0.3)],
        );
        assert_eq!(c.effect, Effect::Insufficient);
        assert!(
            c.line.contains("but incast is still named (critical)"),
            "{}",
            c.line
        );
        let c = judge(
            "rto_min 5ms",
            Pathology::Incast,
            Harm::share(0.8, "of the time lost"),
            &[incast(250, 0.8)],
            Harm::share(0.3, "of the time lost"),
            &[incast(70, 0.3)],
        );
        assert_eq!(
            c.line,
            "remedy insufficient: still 30% of the time lost (baseline: 80%)"
        );
    }

    #[test]
    fn a_baseline_without_harm_cannot_judge_a_remedy() {
        let c = judge(
            "graceful close",
            Pathology::StaleAckRace,
            Harm::count(0, "SYN resends"),
            &[],
            Harm::count(0, "SYN resends"),
            &[],
        );
        assert_eq!(c.effect, Effect::NothingToFix);
        assert_eq!(followed(std::slice::from_ref(&c)), Some(0));
        assert_eq!(followed(&[]), None);
    }

    #[test]
    fn groups_thousands() {
        assert_eq!(thousands(0), "0");
        assert_eq!(thousands(999), "999");
        assert_eq!(thousands(6587), "6,587");
        assert_eq!(thousands(1234567), "1,234,567");
    }
}
