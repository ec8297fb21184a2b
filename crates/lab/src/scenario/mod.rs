//! The scenarios: each builds its topology, measures the pathology with the lab's own traffic
//! code, hands the evidence (kernel counter deltas per namespace, per-connection timings,
//! optionally a capture) to tcpdoctor's detectors (`tcpdoctor_analyze::fan_in`, analyze's on a
//! capture, the counters', the trace's), merged by `tcpdoctor_model::merge`; `--fix` and
//! `--remedies` measure again after each remedy ([`driver::remedies`]). Each returns a record;
//! nothing here prints.

pub mod accept_overflow;
pub mod driver;
pub mod harness;
pub mod incast;
pub mod port_exhaustion;
pub mod slow_reader;
pub mod stale_ack;
pub mod syn_drop;
pub mod timewait;

use std::path::PathBuf;

use serde::{Deserialize, Serialize};
use tcpdoctor_model::remedy;
use tcpdoctor_model::reproduce::{self, Reproduction, Reproductions};
use tcpdoctor_model::{Finding, Measured, Report};

use tcpdoctor_sandbox::capture::CaptureSummary;
use tcpdoctor_sandbox::subnet::LabSubnet;

/// `items` separated by commas (`1000, 3000, 7000`).
pub fn listed<T: std::fmt::Display>(items: &[T]) -> String {
    items
        .iter()
        .map(T::to_string)
        .collect::<Vec<_>>()
        .join(", ")
}

/// Options every scenario takes.
#[derive(Clone, Debug, Default)]
pub struct Common {
    pub subnet: LabSubnet,
    /// Save the scenario's traffic here (tcpdump inside the lab).
    pub pcap: Option<PathBuf>,
    /// Whether each run is traced with eBPF ([`tcpdoctor_trace::run`]).
    pub trace: tcpdoctor_trace::run::Mode,
}

/// What a scenario returns: the findings tcpdoctor's detectors produced from the baseline's
/// measurement, the scenario's record, and whether Ctrl-C cut it short.
#[derive(Clone, Debug)]
pub struct Outcome<B> {
    pub findings: Vec<Finding>,
    pub body: B,
    pub interrupted: bool,
    /// With a remedy: the remedied run the verdict follows ([`tcpdoctor_model::remedy::followed_row`]).
    pub remedied: Option<Remedied>,
    /// Whether the baseline reproduced the scenario's pathology (also in the body's header).
    pub reproduction: Option<Reproduction>,
}

impl<B> Outcome<B> {
    /// The same outcome with its body made into another.
    pub fn map<C>(self, f: impl FnOnce(B) -> C) -> Outcome<C> {
        Outcome {
            findings: self.findings,
            body: f(self.body),
            interrupted: self.interrupted,
            remedied: self.remedied,
            reproduction: self.reproduction,
        }
    }
}

/// The remedied run a verdict and exit status follow, with its findings and whether
/// it still reproduced the pathology (`None`: the remedy was not measured).
#[derive(Clone, Debug, PartialEq)]
pub struct Remedied {
    pub run: String,
    pub findings: Vec<Finding>,
    pub reproduction: Option<Reproduction>,
}

/// The report of a scenario: the findings (with `--fix` or `--remedies`, those of the
/// remedied run the verdict follows; the baseline's diagnosis stays in the body), and the
/// verdict of [`tcpdoctor_model::reproduce::verdict`]: whether the pathology was reproduced (and, with
/// a remedy, whether it is gone) decides it beside the findings' severities.
pub fn report<B>(o: Outcome<B>) -> Report<B> {
    let (findings, remedied) = match o.remedied {
        Some(r) => (r.findings, Some((r.run, r.reproduction))),
        None => (o.findings, None),
    };
    let mut report = Report::new(
        "lab",
        findings,
        o.body,
        Measured::Something("the scenario's traffic".into()),
    )
    .interrupted(o.interrupted);
    if let Some((verdict, reason)) = reproduce::verdict(
        o.reproduction.as_ref(),
        remedied.as_ref().map(|(run, r)| (run.as_str(), r.as_ref())),
        &report.findings,
        o.interrupted,
    ) {
        report.verdict = verdict;
        report.verdict_reason = reason;
    }
    report
}

/// Fields common to every scenario's JSON body.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Header {
    pub scenario: String,
    /// Process id carried by every namespace name of this run (`tdoc-lab-<run_id>-...`).
    pub run_id: u32,
    pub subnet: String,
    pub namespaces: Vec<String>,
    pub capture: Option<CaptureSummary>,
    /// Which detectors produced the findings.
    pub diagnosed_by: Vec<String>,
    /// What the eBPF trace attributed in each run (its own window and counts), or what is
    /// missing to trace.
    pub trace: tcpdoctor_trace::run::LabTrace,
    /// Whether each run reproduced the scenario's pathology, with the counts of its
    /// signature (`reproduced`: the baseline; `reproduction[]`: every run).
    #[serde(flatten)]
    pub reproduction: Reproductions,
}

impl Header {
    /// The header of scenario `name`'s run in `common`'s subnet, this process's run id.
    pub fn of(
        name: &str,
        common: &Common,
        namespaces: Vec<String>,
        capture: Option<CaptureSummary>,
        trace: tcpdoctor_trace::run::LabTrace,
        diagnosed_by: &[&str],
        reproduction: Reproductions,
    ) -> Header {
        Header {
            scenario: name.into(),
            run_id: std::process::id(),
            subnet: common.subnet.to_string(),
            namespaces,
            capture,
            diagnosed_by: diagnosed_by.iter().map(|s| s.to_string()).collect(),
            trace,
            reproduction,
        }
    }
}

/// A plain run: the baseline alone ([`driver::plain`]).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Plain<C, R> {
    #[serde(flatten)]
    pub header: Header,
    pub config: C,
    pub before: R,
    #[serde(flatten)]
    pub unfixed: Unfixed,
}

/// The `after` and `fix_results` of a plain run's JSON, always empty: `--fix` prints the
/// remedies report ([`RemedyReport`]) with the scenario's recommended remedy. Kept so that a
/// plain run's JSON keeps its shape (`A`: `Option<()>`, `null`; or `Vec<()>`, `[]`).
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Unfixed<A = Option<()>> {
    after: A,
    fix_results: Vec<()>,
}

/// `--remedies` and `--fix`: the baseline and each selected remedy (with `--fix`, the
/// scenario's recommended one, [`driver::Scenario::FIX`]), measured in fresh namespaces, each
/// remedy predicted by tcpdoctor's arithmetic and judged from its measurement.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct RemedyReport<C, R, F = NoFacts> {
    #[serde(flatten)]
    pub header: Header,
    pub config: C,
    /// What was measured besides the runs (a kernel's behaviour, a sysctl of a namespace):
    /// the predictions and the verdicts rest on it.
    #[serde(flatten)]
    pub facts: F,
    /// What the baseline is, in words.
    pub baseline_label: String,
    pub baseline: R,
    /// The harm the remedies are judged on, as the baseline measured it.
    pub baseline_harm: remedy::Harm,
    /// The baseline's findings (also in `baseline`); the report's own findings follow the
    /// remedy the verdict follows.
    #[serde(skip)]
    pub baseline_findings: Vec<Finding>,
    pub remedies: Vec<remedy::Row<R>>,
    /// Measured facts the predictions rest on (kernel behaviour, what this kernel lacks).
    pub notes: Vec<String>,
    /// What the SYN ladder cost the baseline (connection scenarios).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub syn_ladder: Option<tcpdoctor_probe::ladder::LadderCost>,
}

/// A scenario that measures nothing besides its runs.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct NoFacts {}

/// A report's runs side by side, as a scenario's view shows them: a plain run's baseline, or
/// the baseline and each measured remedy's run.
pub trait Runs<C, R> {
    fn header(&self) -> &Header;
    fn config(&self) -> &C;
    fn runs(&self) -> Vec<&R>;
}

impl<C, R> Runs<C, R> for Plain<C, R> {
    fn header(&self) -> &Header {
        &self.header
    }
    fn config(&self) -> &C {
        &self.config
    }
    fn runs(&self) -> Vec<&R> {
        vec![&self.before]
    }
}

impl<C, R, F> Runs<C, R> for RemedyReport<C, R, F> {
    fn header(&self) -> &Header {
        &self.header
    }
    fn config(&self) -> &C {
        &self.config
    }
    fn runs(&self) -> Vec<&R> {
        std::iter::once(&self.baseline)
            .chain(self.remedies.iter().filter_map(|r| r.run.as_ref()))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::driver::Scenario;
    use super::*;

    /// Calls `$check::<S>()` for every scenario `S`.
    macro_rules! each_scenario {
        ($check:ident) => {
            $check::<accept_overflow::AcceptOverflow>();
            $check::<incast::Incast>();
            $check::<port_exhaustion::PortExhaustion>();
            $check::<slow_reader::SlowReader>();
            $check::<stale_ack::StaleAck>();
            $check::<syn_drop::SynDrop>();
            $check::<timewait::Timewait>();
        };
    }

    #[test]
    fn diagnosis_headings_say_what_diagnosed_in_words_not_module_paths() {
        // Issue 24: a heading said "model::counters findings".
        fn check<S: Scenario>() {
            for by in S::DIAGNOSED_BY {
                assert!(!by.contains("::") && !by.contains("model"), "{by}");
            }
        }
        each_scenario!(check);
    }

    #[test]
    fn fix_applies_remedies_of_the_scenarios_own_table() {
        // --fix is --remedies restricted to FIX: a name missing from REMEDIES would fail
        // only when run as root.
        fn check<S: Scenario>() {
            assert!(!S::FIX.is_empty(), "{}", S::NAME);
            for name in S::FIX {
                assert!(S::REMEDIES.contains(name), "{}: {name}", S::NAME);
            }
        }
        each_scenario!(check);
    }
}
