//! Judging a remedy by what it measured: the scenario names the harm it reproduces (a count
//! such as failed connects or SYN retransmissions, or a share such as the time lost to
//! stalls) and the pathology it demonstrates; a remedied run is compared with the baseline
//! on both. Used by the remedies table of `--fix` and `--remedies`, and by incast's plain run of
//! several RTO floors (the last judged against the first).
//!
//! The rules, in order:
//! - *nothing to fix*: the baseline showed no harm and did not name the pathology;
//! - *worked*: no harm left and the pathology no longer named above info;
//! - *insufficient*: less harm than the baseline, or none left while the pathology is still
//!   named above info (its finding says what it still costs);
//! - *no effect*: as much harm as the baseline, or more (also when the baseline had none and
//!   the remedied run has some: worse).

use serde::{Deserialize, Serialize};

use crate::units::thousands;
use crate::{Finding, Pathology, Severity};

/// The outcome of one remedy, from its measurement.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
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
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum HarmKind {
    /// Events (failed connects, retransmissions).
    Count,
    /// A share (0..=1) of time or operations.
    Share,
}

/// The harm a scenario reproduces, as measured in one run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Harm {
    pub kind: HarmKind,
    /// The count, or the share (0..=1).
    pub amount: f64,
    /// What is counted: "connects failed with EADDRNOTAVAIL", "of the time lost to stalls".
    pub what: String,
    /// Up to this amount counts as none: the measure's own noise (0 for counts).
    pub noise: f64,
}

impl Harm {
    pub fn count(n: u64, what: impl Into<String>) -> Harm {
        Harm {
            kind: HarmKind::Count,
            amount: n as f64,
            what: what.into(),
            noise: 0.0,
        }
    }

    pub fn share(share: f64, what: impl Into<String>) -> Harm {
        Harm {
            kind: HarmKind::Share,
            amount: share,
            what: what.into(),
            noise: 0.0,
        }
    }

    /// Counts amounts up to `noise` as none (a share measured with jitter).
    pub fn within(mut self, noise: f64) -> Harm {
        self.noise = noise;
        self
    }

    /// The amount as printed: `6,587` or `35%`.
    pub fn shown(&self) -> String {
        match self.kind {
            HarmKind::Count => thousands(self.amount.round() as u64),
            HarmKind::Share => format!("{:.0}%", self.amount * 100.0),
        }
    }

    /// No harm beyond the measure's noise.
    pub fn is_zero(&self) -> bool {
        match self.kind {
            HarmKind::Count => self.amount < 0.5 + self.noise,
            // Under half a percent rounds to 0% as printed.
            HarmKind::Share => self.amount < 0.005_f64.max(self.noise),
        }
    }
}

impl std::fmt::Display for Harm {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {}", self.shown(), self.what)
    }
}

/// A remedied run judged against the baseline.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
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
    /// What the eBPF trace counted of the harm in the remedied run (its own trace window)
    /// and in the baseline, when both were traced: `trace saw 0 SYNs resent after a stale
    /// ACK (was 37)`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub trace: Option<String>,
}

impl Check {
    /// Adds the trace's count of the harm: the baseline's (`before`) and the remedied run's
    /// (`after`), each from its own trace window. A remedy the measurement calls worked is
    /// insufficient when the trace still saw the harm after it: the trace sees every event,
    /// the scenario's own measure may not.
    pub fn with_trace(mut self, before: Option<Harm>, after: Option<Harm>) -> Check {
        let (Some(before), Some(after)) = (before, after) else {
            return self;
        };
        let saw = format!(
            "trace saw {} {} (was {})",
            after.shown(),
            after.what,
            before.shown()
        );
        if self.effect == Effect::Worked && !after.is_zero() {
            self.effect = Effect::Insufficient;
            self.pathology_gone = false;
            self.line = format!(
                "{}: {}, but the {saw}",
                Effect::Insufficient.name(),
                self.after
            );
        }
        self.trace = Some(saw);
        self
    }

    /// A remedy the measurement calls worked is insufficient while the remedied run still
    /// reproduced the pathology (`after`, [`crate::reproduce`]): less harm, or harm below
    /// the measure's noise, is not the pathology gone.
    pub fn with_reproduction(mut self, after: &crate::reproduce::Reproduction) -> Check {
        if self.effect == Effect::Worked && after.reproduced {
            self.effect = Effect::Insufficient;
            self.pathology_gone = false;
            self.line = format!(
                "{}: {}, but {} is still reproduced: {}",
                Effect::Insufficient.name(),
                self.after,
                after.pathology,
                after.evidence()
            );
        }
        self
    }
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
    let worse = before.is_zero() && !named_before && !(after.is_zero() && still.is_none());
    let effect = if before.is_zero() && !named_before && !worse {
        Effect::NothingToFix
    } else if worse {
        Effect::NoEffect
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
        Effect::Worked if after.noise > 0.0 && after.amount >= 0.005 => format!(
            "remedy worked: {after}, within the measure's noise ({:.0}%)",
            after.noise * 100.0
        ),
        Effect::Worked => format!("remedy worked: {after}"),
        Effect::NoEffect if worse => format!(
            "no effect: worse than the baseline, {after} (baseline: {})",
            before.shown()
        ),
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
        trace: None,
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

/// How close a measurement must come to its prediction to agree with it.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "kind", content = "value")]
pub enum Tolerance {
    /// |measured - predicted| <= share x predicted.
    Relative(f64),
    /// |measured - predicted| <= this, in the quantity's unit.
    Absolute(f64),
}

impl Tolerance {
    fn holds(self, predicted: f64, measured: f64) -> bool {
        let d = (measured - predicted).abs();
        match self {
            Tolerance::Relative(r) => d <= r * predicted.abs() + 1e-9,
            Tolerance::Absolute(a) => d <= a + 1e-9,
        }
    }

    fn describe(self, unit: &str) -> String {
        match self {
            Tolerance::Relative(r) => format!("within {:.0}%", r * 100.0),
            Tolerance::Absolute(0.0) => "exactly".to_string(),
            Tolerance::Absolute(a) => format!("within {} {unit}", num(a)),
        }
    }
}

/// What tcpdoctor's arithmetic predicts a remedy does, before it is measured.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Prediction {
    /// The formula with its inputs and result:
    /// `200 ports / 1.0 s (tcp_tw_reuse_delay) = 200 connects/s`.
    pub formula: String,
    /// The predicted effect in words.
    pub effect: String,
    /// The compared quantity, when the prediction is numeric.
    pub value: Option<f64>,
    /// Its unit (`connects/s`, `Mbit/s`, `%`).
    pub unit: String,
    pub tolerance: Option<Tolerance>,
    /// Where the tolerance comes from (the run-to-run spread measured here, a timer's
    /// granularity).
    pub noise: String,
}

impl Prediction {
    /// A numeric prediction compared within `tolerance`.
    pub fn value(
        formula: impl Into<String>,
        effect: impl Into<String>,
        value: f64,
        unit: &str,
        tolerance: Tolerance,
        noise: impl Into<String>,
    ) -> Prediction {
        Prediction {
            formula: formula.into(),
            effect: effect.into(),
            value: Some(value),
            unit: unit.to_string(),
            tolerance: Some(tolerance),
            noise: noise.into(),
        }
    }

    /// An exact count: `value` in `unit`, no noise.
    pub fn count(
        formula: impl Into<String>,
        effect: impl Into<String>,
        value: f64,
        unit: &str,
    ) -> Prediction {
        let exact = Tolerance::Absolute(0.0);
        Prediction::value(formula, effect, value, unit, exact, "a count: no noise")
    }
}

/// Whether a measurement agrees with its prediction.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Agreement {
    Agrees,
    Disagrees,
    /// The model makes no numeric prediction for this remedy (the row says why).
    NotPredicted,
}

/// The one-word verdict of a remedy in a table.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    Works,
    Partial,
    NoEffect,
    /// The baseline did not reproduce the harm: nothing to judge against.
    NothingToFix,
    /// This kernel or lab cannot build the remedy (the row says why).
    CannotBuild,
}

impl Verdict {
    pub fn name(self) -> &'static str {
        match self {
            Verdict::Works => "works",
            Verdict::Partial => "partial",
            Verdict::NoEffect => "no effect",
            Verdict::NothingToFix => "nothing to fix",
            Verdict::CannotBuild => "cannot build",
        }
    }

    fn of(effect: Effect) -> Verdict {
        match effect {
            Effect::Worked => Verdict::Works,
            Effect::Insufficient => Verdict::Partial,
            Effect::NoEffect => Verdict::NoEffect,
            Effect::NothingToFix => Verdict::NothingToFix,
        }
    }
}

/// The measured effect of a remedy: a line for people and the compared quantity.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Measured {
    pub text: String,
    pub value: Option<f64>,
}

/// One remedy, predicted, measured and judged. `R` is the scenario's record of the run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Row<R> {
    /// The remedy's name (`keep-alive`), as `--remedies` takes it.
    pub remedy: String,
    /// What it changes, concretely (`net.ipv4.tcp_tw_reuse=1 in the client namespace`).
    pub changes: String,
    /// `None` when the model makes no numeric prediction; `not_predicted` says why.
    pub prediction: Option<Prediction>,
    pub not_predicted: Option<String>,
    pub measured: Option<Measured>,
    pub agreement: Agreement,
    /// Why the measurement disagrees with the prediction (or a note when it agrees).
    pub agreement_note: String,
    /// The remedied run against the baseline; `None` when the remedy could not be built.
    pub check: Option<Check>,
    pub pathology_gone: Option<bool>,
    pub verdict: Verdict,
    /// One line: the verdict and why.
    pub why: String,
    /// The remedied run's record.
    pub run: Option<R>,
}

/// A remedy that can be measured: its prediction (or why there is none), the run, the
/// measured effect and, optionally, a verdict the arithmetic imposes beyond the harm count
/// (e.g. no failures in a short run but a demand above the sustainable rate: partial).
pub struct Outcome<R> {
    pub remedy: String,
    pub changes: String,
    pub prediction: std::result::Result<Prediction, String>,
    pub measured: Measured,
    pub check: Check,
    pub override_verdict: Option<(Verdict, String)>,
    /// Why a disagreement happened, when the scenario knows.
    pub disagreement_reason: Option<String>,
    pub run: R,
}

/// A table row from a measured remedy: agreement of prediction and measurement, and the
/// verdict (from the check's effect unless the arithmetic overrides it).
pub fn row<R>(o: Outcome<R>) -> Row<R> {
    let (prediction, not_predicted) = match o.prediction {
        Ok(p) => (Some(p), None),
        Err(why) => (None, Some(why)),
    };
    let (agreement, agreement_note) = match (&prediction, o.measured.value) {
        (Some(p), Some(m)) => match (p.value, p.tolerance) {
            (Some(v), Some(t)) if t.holds(v, m) => (
                Agreement::Agrees,
                format!(
                    "measured {} vs predicted {} {}: agrees ({})",
                    num(m),
                    num(v),
                    p.unit,
                    t.describe(&p.unit)
                ),
            ),
            (Some(v), Some(t)) => (
                Agreement::Disagrees,
                format!(
                    "measured {} vs predicted {} {}: disagrees (not {}){}",
                    num(m),
                    num(v),
                    p.unit,
                    t.describe(&p.unit),
                    o.disagreement_reason
                        .as_ref()
                        .map(|r| format!(": {r}"))
                        .unwrap_or_default()
                ),
            ),
            _ => (Agreement::NotPredicted, "no numeric prediction".to_string()),
        },
        (Some(_), None) => (
            Agreement::NotPredicted,
            "nothing comparable was measured".to_string(),
        ),
        (None, _) => (
            Agreement::NotPredicted,
            not_predicted.clone().unwrap_or_default(),
        ),
    };
    let (verdict, why) = match o.override_verdict {
        Some((v, why)) => (v, format!("{}: {why}", v.name())),
        None => {
            let v = Verdict::of(o.check.effect);
            let line = o.check.line.clone();
            // The check's line starts with its effect's name; the verdict names it again.
            let rest = line
                .split_once(": ")
                .map(|(_, r)| r.to_string())
                .unwrap_or(line);
            (v, format!("{}: {rest}", v.name()))
        }
    };
    Row {
        remedy: o.remedy,
        changes: o.changes,
        prediction,
        not_predicted,
        measured: Some(o.measured),
        agreement,
        agreement_note,
        pathology_gone: Some(o.check.pathology_gone),
        check: Some(o.check),
        verdict,
        why,
        run: Some(o.run),
    }
}

/// A row for a remedy this kernel or lab cannot build.
pub fn cannot_build<R>(remedy: &str, changes: &str, why: &str) -> Row<R> {
    Row {
        remedy: remedy.to_string(),
        changes: changes.to_string(),
        prediction: None,
        not_predicted: Some("not built".to_string()),
        measured: None,
        agreement: Agreement::NotPredicted,
        agreement_note: String::new(),
        check: None,
        pathology_gone: None,
        verdict: Verdict::CannotBuild,
        why: format!("cannot build: {why}"),
        run: None,
    }
}

/// A number as printed in agreement notes: integers plainly, others with 3 significant
/// digits.
pub fn num(v: f64) -> String {
    if v.fract() == 0.0 && v.abs() < 1e15 {
        thousands(v.abs() as u64)
    } else if v.abs() >= 100.0 {
        format!("{v:.0}")
    } else if v.abs() >= 10.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    }
}

/// The remedied row the verdict and exit status follow: the first that works, else the
/// first measured one.
pub fn followed_row<R>(rows: &[Row<R>]) -> Option<usize> {
    rows.iter()
        .position(|r| r.verdict == Verdict::Works)
        .or_else(|| rows.iter().position(|r| r.check.is_some()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Impact, Source};
    use std::time::Duration;

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
        // A remedy that brings harm where the baseline had none made things worse.
        let c = judge(
            "bbr",
            Pathology::Incast,
            Harm::share(0.0, "of the time lost").within(0.05),
            &[],
            Harm::share(0.21, "of the time lost").within(0.05),
            &[],
        );
        assert_eq!(c.effect, Effect::NoEffect);
        assert_eq!(
            c.line,
            "no effect: worse than the baseline, 21% of the time lost (baseline: 0%)"
        );
        assert_eq!(followed(&[]), None);
    }

    fn check(effect: Effect) -> Check {
        Check {
            run: "r".into(),
            effect,
            before: Harm::count(10, "x"),
            after: Harm::count(if effect == Effect::Worked { 0 } else { 4 }, "x"),
            pathology_gone: effect == Effect::Worked,
            remaining: vec![],
            line: format!("{}: 4 x remain", effect.name()),
            trace: None,
        }
    }

    #[test]
    fn rows_compare_prediction_and_measurement() {
        let p = Prediction::value(
            "200 ports / 1 s",
            "200 connects/s",
            200.0,
            "connects/s",
            Tolerance::Relative(0.2),
            "timer",
        );
        let r = row(Outcome {
            remedy: "tw-reuse".into(),
            changes: "tcp_tw_reuse=1".into(),
            prediction: Ok(p.clone()),
            measured: Measured {
                text: "199.8/s".into(),
                value: Some(199.8),
            },
            check: check(Effect::Insufficient),
            override_verdict: None,
            disagreement_reason: None,
            run: (),
        });
        assert_eq!(r.agreement, Agreement::Agrees);
        assert_eq!(r.verdict, Verdict::Partial);
        assert_eq!(r.why, "partial: 4 x remain");
        let r = row(Outcome {
            remedy: "tw-reuse".into(),
            changes: String::new(),
            prediction: Ok(p),
            measured: Measured {
                text: "120/s".into(),
                value: Some(120.0),
            },
            check: check(Effect::Worked),
            override_verdict: Some((Verdict::Partial, "demand above budget".into())),
            disagreement_reason: Some("timestamps off".into()),
            run: (),
        });
        assert_eq!(r.agreement, Agreement::Disagrees);
        assert!(
            r.agreement_note.ends_with(": timestamps off"),
            "{}",
            r.agreement_note
        );
        assert_eq!(r.why, "partial: demand above budget");
        let c: Row<()> = cannot_build("dctcp", "congestion control dctcp", "not in this kernel");
        assert_eq!(c.verdict, Verdict::CannotBuild);
        assert_eq!(followed_row(&[c.clone(), r.clone()]), Some(1));
        assert_eq!(followed_row::<()>(&[c]), None);
    }
}
