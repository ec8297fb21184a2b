//! Whether a run reproduced its scenario's pathology, apart from the severity of its harm: the
//! events of the pathology's own signature counted in the run (by the lab's measurement, the
//! namespaces' kernel counters, the eBPF trace), what the run tried (attempts and time), and,
//! when it happened, what it cost on this kernel. Every scenario builds one [`Reproduction`]
//! per run here, and [`verdict`] turns them into the lab's verdict and exit status.
//!
//! The rule (a lab run exists to reproduce a pathology, or to show a remedy removing it):
//! - a plain run that reproduced the pathology: `findings` (exit 1), even when the harm on
//!   this kernel is small enough that no finding is above info (the reason says what it
//!   cost); one that did not: `inconclusive` (exit 3, "not reproduced in this run", with what
//!   was tried), unless a finding above info was drawn anyway (exit 1);
//! - with `--fix` or `--remedies`, of the remedied run the verdict follows: the pathology
//!   still reproduced, or a finding above info: `findings` (exit 1); neither, while the
//!   baseline reproduced it: `healthy` (exit 0, the remedy removed it); neither, while the
//!   baseline did not reproduce it either: `inconclusive` (exit 3, the remedy could not be
//!   judged).
//!
//! A run cut short (Ctrl-C) is never healthy: the model's rule ([`crate::Report`])
//! then stands unless the pathology was reproduced before the cut.
//!
//! Nothing here measures or prints: scenarios hand in their counts, renderers print the
//! records.

use crate::units::thousands;
use crate::{Finding, Pathology, Severity, Verdict};
use serde::{Deserialize, Serialize};

/// One count of the pathology's own signature in one run.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Event {
    /// What was counted: `SYNs answered by a stale ACK and resent`.
    pub what: String,
    /// Who counted it: `eBPF trace`, `probe's classifier`, `client TcpExtTCPSynRetrans`.
    pub source: String,
    pub count: u64,
}

impl Event {
    pub fn new(count: u64, what: impl Into<String>, source: impl Into<String>) -> Event {
        Event {
            what: what.into(),
            source: source.into(),
            count,
        }
    }
}

/// What a run tried: how many attempts of what, over how long.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Tried {
    pub attempts: u64,
    /// What an attempt is: `connects`, `rounds`, `reconnects from one port`.
    pub what: String,
    pub duration_ms: u64,
}

impl Tried {
    pub fn new(attempts: u64, what: impl Into<String>, duration_ms: u64) -> Tried {
        Tried {
            attempts,
            what: what.into(),
            duration_ms,
        }
    }
}

impl std::fmt::Display for Tried {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} {} over {:.1} s",
            thousands(self.attempts),
            self.what,
            self.duration_ms as f64 / 1000.0
        )
    }
}

/// Whether one run reproduced the scenario's pathology, with its evidence.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Reproduction {
    /// The run's label (as in the measurement table and the trace's runs).
    pub run: String,
    /// The remedy this run applied (`--fix`, `--remedies`); none for the baseline.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub remedy: Option<String>,
    pub pathology: Pathology,
    /// At least one event of the signature was counted.
    pub reproduced: bool,
    /// The pathology's own signature as each source counted it in this run.
    pub signature: Vec<Event>,
    pub tried: Tried,
    /// What the pathology cost on this kernel in this run, when it was reproduced.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cost: Option<String>,
    /// One line: `reproduced: ...` or `not reproduced in this run: ...`.
    pub line: String,
}

impl Reproduction {
    /// Run `run` reproduced `pathology` when any event of `signature` was counted. `cost`
    /// says what it cost (asked only when reproduced); `note` is added either way (e.g. what
    /// a forced check showed of this kernel).
    pub fn of(
        run: &str,
        pathology: Pathology,
        signature: Vec<Event>,
        tried: Tried,
        cost: impl FnOnce() -> Option<String>,
        note: Option<String>,
    ) -> Reproduction {
        let reproduced = signature.iter().any(|e| e.count > 0);
        let cost = if reproduced { cost() } else { None };
        let events = signature
            .iter()
            .map(|e| format!("{} {} ({})", thousands(e.count), e.what, e.source))
            .collect::<Vec<_>>()
            .join(", ");
        let mut line = if reproduced {
            format!("reproduced: {events} in {tried}")
        } else if events.is_empty() {
            format!(
                "not reproduced in this run: nothing of its signature could be counted in {tried}"
            )
        } else {
            format!("not reproduced in this run: {events} in {tried}")
        };
        for extra in cost.iter().chain(note.iter()) {
            line.push_str("; ");
            line.push_str(extra);
        }
        Reproduction {
            run: run.to_string(),
            remedy: None,
            pathology,
            reproduced,
            signature,
            tried,
            cost,
            line,
        }
    }

    /// The same record, for a run that applied `remedy`.
    pub fn remedy(mut self, remedy: &str) -> Reproduction {
        self.remedy = Some(remedy.to_string());
        self
    }

    /// The signature's events in words: `3 SYNs ... (eBPF trace), 3 connects ... (probe)`.
    pub fn evidence(&self) -> String {
        self.signature
            .iter()
            .map(|e| format!("{} {} ({})", thousands(e.count), e.what, e.source))
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// Whether each run of a scenario reproduced its pathology: the `reproduced` and
/// `reproduction` fields of every lab report.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Reproductions {
    /// Whether the baseline (the run made to reproduce the pathology) reproduced it.
    pub reproduced: bool,
    /// One record per run: the baseline first, then each remedied run (or sweep point).
    pub reproduction: Vec<Reproduction>,
}

impl Reproductions {
    /// `baseline` first, then `others`.
    pub fn of(baseline: Reproduction, others: impl IntoIterator<Item = Reproduction>) -> Self {
        let mut runs = vec![baseline];
        runs.extend(others);
        Reproductions {
            reproduced: runs[0].reproduced,
            reproduction: runs,
        }
    }

    /// The baseline's record.
    pub fn baseline(&self) -> Option<&Reproduction> {
        self.reproduction.first()
    }
}

/// The verdict of a lab run and its reason, when the rule of this module decides it (module
/// doc); `None` leaves the model's verdict from the findings. `baseline`: the baseline's
/// record; `remedied`: the record of the remedied run the verdict follows (`--fix`,
/// `--remedies`); `findings`: the findings the verdict follows (the remedied run's, else the
/// baseline's).
pub fn verdict(
    baseline: Option<&Reproduction>,
    remedied: Option<(&str, Option<&Reproduction>)>,
    findings: &[Finding],
    interrupted: bool,
) -> Option<(Verdict, String)> {
    let baseline = baseline?;
    let serious: Vec<&Finding> = findings
        .iter()
        .filter(|f| f.severity >= Severity::Warning)
        .collect();
    let worst = serious
        .iter()
        .max_by_key(|f| f.severity)
        .map(|f| format!("{} ({})", f.pathology, f.severity));
    let worst_part = match &worst {
        Some(w) => format!("; worst finding: {w}"),
        None => "; no finding above info".to_string(),
    };
    let others = |w: &str| format!("{} finding(s) above info, worst: {w}", serious.len());
    let cut = if interrupted { " (cut short)" } else { "" };
    let p = baseline.pathology;
    match remedied {
        None if baseline.reproduced => Some((
            Verdict::Findings,
            format!(
                "reproduced {p}: {}{}{worst_part}{cut}",
                baseline.evidence(),
                cost_part(baseline)
            ),
        )),
        None => match &worst {
            Some(w) => Some((
                Verdict::Findings,
                format!(
                    "{p} not reproduced in this run ({}), but {}{cut}",
                    baseline.tried,
                    others(w)
                ),
            )),
            // Cut short before anything was found: the model's inconclusive stands.
            None if interrupted => None,
            None => Some((
                Verdict::Inconclusive,
                format!(
                    "{p} not reproduced in this run ({}): nothing to judge",
                    baseline.line.trim_start_matches("not reproduced in this run: ")
                ),
            )),
        },
        // A remedied run without a measured record (not built): the model's rule.
        Some((_, None)) => None,
        Some((name, Some(r))) if r.reproduced => Some((
            Verdict::Findings,
            format!(
                "the remedied run \"{name}\" still reproduced {p}: {}{}{worst_part}{cut}",
                r.evidence(),
                cost_part(r)
            ),
        )),
        Some((name, Some(r))) => match &worst {
            Some(w) => Some((
                Verdict::Findings,
                format!(
                    "the remedied run \"{name}\" did not reproduce {p} ({}), but {}{cut}",
                    r.tried,
                    others(w)
                ),
            )),
            None if interrupted => None,
            None if baseline.reproduced => Some((
                Verdict::Healthy,
                format!(
                    "the remedy \"{name}\" removed {p}: the baseline reproduced it ({} in {}), the remedied run did not ({}), nothing above info",
                    baseline.evidence(),
                    baseline.tried,
                    r.tried
                ),
            )),
            None => Some((
                Verdict::Inconclusive,
                format!(
                    "the baseline did not reproduce {p} ({}): the remedy \"{name}\" could not be judged",
                    baseline.tried
                ),
            )),
        },
    }
}

/// The word the verdict line shows for a verdict [`verdict`] decided: `reproduced` when the
/// run the verdict follows reproduced the pathology, else the verdict's own word
/// (`N finding(s)`, `healthy`, `inconclusive`).
pub fn verdict_word(verdict: Verdict, reason: &str, findings_above_info: usize) -> String {
    match verdict {
        Verdict::Findings
            if reason.starts_with("reproduced") || reason.contains(" still reproduced ") =>
        {
            "reproduced".to_string()
        }
        Verdict::Findings => format!("{findings_above_info} finding(s)"),
        Verdict::Healthy => "healthy".to_string(),
        Verdict::Inconclusive => "inconclusive".to_string(),
    }
}

fn cost_part(r: &Reproduction) -> String {
    match &r.cost {
        Some(c) => format!(" in {}; {c}", r.tried),
        None => format!(" in {}", r.tried),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Impact, Source};
    use std::time::Duration;

    fn race(count: u64) -> Reproduction {
        Reproduction::of(
            "before",
            Pathology::StaleAckRace,
            vec![Event::new(
                count,
                "SYNs answered by a stale ACK and resent",
                "eBPF trace",
            )],
            Tried::new(40_000, "connects", 4_000),
            || Some("each connect delayed ~11 ms".into()),
            None,
        )
    }

    fn finding(severity_stall: Duration) -> Finding {
        Finding::new(
            Pathology::StaleAckRace,
            Source::Probe,
            "x",
            Impact::stalls(3, Some(40_000), Some(severity_stall)),
        )
    }

    #[test]
    fn a_reproduced_race_is_never_healthy_even_when_its_harm_is_info() {
        let f = finding(Duration::from_millis(11));
        assert_eq!(f.severity, Severity::Info, "{f:?}");
        let (v, why) = verdict(Some(&race(3)), None, &[f], false).unwrap();
        assert_eq!(v, Verdict::Findings);
        assert_eq!(v.exit_code(), 1);
        assert!(why.starts_with("reproduced stale_ack_race: 3 SYNs answered by a stale ACK and resent (eBPF trace) in 40,000 connects over 4.0 s; each connect delayed ~11 ms; no finding above info"), "{why}");
        assert_eq!(verdict_word(v, &why, 0), "reproduced");
    }

    #[test]
    fn a_run_that_did_not_reproduce_is_inconclusive_with_what_was_tried() {
        let r = race(0);
        assert!(!r.reproduced);
        assert_eq!(r.cost, None);
        assert_eq!(
            r.line,
            "not reproduced in this run: 0 SYNs answered by a stale ACK and resent (eBPF trace) in 40,000 connects over 4.0 s"
        );
        let (v, why) = verdict(Some(&r), None, &[], false).unwrap();
        assert_eq!(v, Verdict::Inconclusive);
        assert_eq!(v.exit_code(), 3);
        assert!(why.contains("40,000 connects over 4.0 s"), "{why}");
        // A finding above info drawn anyway: findings, and the reason says the pathology was
        // not reproduced.
        let f = finding(Duration::from_secs(2));
        assert!(f.severity >= Severity::Warning);
        let (v, why) = verdict(Some(&r), None, &[f], false).unwrap();
        assert_eq!(v, Verdict::Findings);
        assert!(why.starts_with("stale_ack_race not reproduced in this run (40,000 connects over 4.0 s), but 1 finding(s) above info"), "{why}");
        assert_eq!(verdict_word(v, &why, 1), "1 finding(s)");
        // Cut short before anything: the model's inconclusive stands.
        assert_eq!(verdict(Some(&r), None, &[], true), None);
    }

    #[test]
    fn a_remedied_run_is_healthy_only_when_the_pathology_is_gone_and_was_there_before() {
        let (v, why) = verdict(
            Some(&race(3)),
            Some(("graceful close", Some(&race(0).remedy("graceful-close")))),
            &[],
            false,
        )
        .unwrap();
        assert_eq!(v, Verdict::Healthy, "{why}");
        assert!(why.contains("removed stale_ack_race"), "{why}");
        // Still reproduced after the remedy: findings, whatever the severity.
        let (v, why) = verdict(
            Some(&race(3)),
            Some(("graceful close", Some(&race(1)))),
            &[],
            false,
        )
        .unwrap();
        assert_eq!(v, Verdict::Findings);
        assert!(why.contains("still reproduced"), "{why}");
        assert_eq!(verdict_word(v, &why, 0), "reproduced");
        // The baseline never reproduced it: the remedy cannot be judged.
        let (v, why) = verdict(
            Some(&race(0)),
            Some(("graceful close", Some(&race(0)))),
            &[],
            false,
        )
        .unwrap();
        assert_eq!(v, Verdict::Inconclusive);
        assert!(why.contains("could not be judged"), "{why}");
        // A remedy that could not be built: the model decides.
        assert_eq!(
            verdict(Some(&race(3)), Some(("dctcp", None)), &[], false),
            None
        );
    }

    #[test]
    fn an_empty_signature_says_nothing_could_be_counted() {
        let r = Reproduction::of(
            "x",
            Pathology::Incast,
            Vec::new(),
            Tried::new(0, "rounds", 0),
            || None,
            None,
        );
        assert!(!r.reproduced);
        assert!(r.line.contains("nothing of its signature could be counted"));
    }
}
