//! Every scenario's runs: one driver runs the baseline ([`plain`]), or the baseline and then
//! each selected remedy in fresh namespaces (`--remedies`; `--fix`: the scenario's
//! recommended remedy, [`Scenario::FIX`]), judges each against the baseline and its
//! prediction, and assembles the [`RemedyReport`]. A scenario supplies what is its own through [`Scenario`]: how one
//! variant runs, its remedies as data (label, change, prediction) and the report's words.
//! Nothing here prints.

use std::sync::atomic::{AtomicBool, Ordering};

use tcpdoctor_model::remedy::{self, Check, Harm, Measured, Prediction, Verdict};
use tcpdoctor_model::reproduce::{Reproduction, Reproductions};
use tcpdoctor_model::{Finding, Pathology};

use super::{harness, Common, Header, NoFacts, Outcome, Plain, Remedied, RemedyReport};
use crate::Result;
use tcpdoctor_sandbox::capture::CaptureSummary;
use tcpdoctor_trace::run::{LabTrace, RunTrace};

/// What the driver reads of a scenario's record of one run.
pub trait Record {
    /// The run's label (its column in the remedy table).
    fn label(&self) -> &str;
    /// The findings tcpdoctor's detectors produced from the run.
    fn findings(&self) -> &[Finding];
    /// What the eBPF trace saw in the run.
    fn trace(&self) -> &RunTrace;
    /// The same, to restore it in a run read back from JSON (where the header keeps it).
    fn trace_mut(&mut self) -> &mut RunTrace;
}

/// [`Record`] for run types that keep their `label`, `findings` and `trace` as fields (`=>
/// run`: in their field `run`).
macro_rules! record {
    ($($run:ty $(=> $inner:ident)?),*) => {$(
        impl Record for $run {
            fn label(&self) -> &str {
                &self$(.$inner)?.label
            }
            fn findings(&self) -> &[Finding] {
                &self$(.$inner)?.findings
            }
            fn trace(&self) -> &RunTrace {
                &self$(.$inner)?.trace
            }
            fn trace_mut(&mut self) -> &mut RunTrace {
                &mut self$(.$inner)?.trace
            }
        }
    )*};
}

record!(
    harness::ProbeRun,
    super::slow_reader::Run,
    super::timewait::Run,
    super::incast::Run,
    super::stale_ack::LoopRun => run
);

/// One variant as run: the scenario's record, the namespaces it used and, for the
/// baseline, the capture it saved.
pub struct Ran<R> {
    pub run: R,
    pub namespaces: Vec<String>,
    pub capture: Option<CaptureSummary>,
}

impl<R> Ran<R> {
    /// The same run with its record made into another.
    pub fn map<S>(self, f: impl FnOnce(R) -> S) -> Ran<S> {
        Ran {
            run: f(self.run),
            namespaces: self.namespaces,
            capture: self.capture,
        }
    }
}

/// Where a variant tagged `tag` saves its capture: `--pcap`'s file for the baseline (the
/// empty tag), nowhere for a remedy's run.
pub fn baseline_pcap<'a>(common: &'a Common, tag: &str) -> Option<&'a std::path::Path> {
    if tag.is_empty() {
        common.pcap.as_deref()
    } else {
        None
    }
}

/// One remedy as data: the run's label, the variant that builds it, tcpdoctor's
/// prediction (or why there is none) and what it changes, in words.
pub struct Remedy<V> {
    pub label: String,
    pub variant: V,
    pub prediction: std::result::Result<Prediction, String>,
    pub changes: String,
}

impl<V> Remedy<V> {
    /// Remedy `label`: its run is `variant`, predicted by `prediction`; it `changes` that.
    pub fn new(
        label: impl Into<String>,
        variant: V,
        prediction: Prediction,
        changes: impl Into<String>,
    ) -> Remedy<V> {
        Remedy {
            label: label.into(),
            variant,
            prediction: Ok(prediction),
            changes: changes.into(),
        }
    }
}

/// The report's words about the baseline, from the baseline's measurement.
pub struct Tail<F> {
    /// What the baseline is, in words.
    pub baseline_label: String,
    /// Measured facts the predictions rest on.
    pub notes: Vec<String>,
    /// What the SYN ladder cost the baseline (connection scenarios).
    pub syn_ladder: Option<tcpdoctor_probe::ladder::LadderCost>,
    /// What was measured besides the runs.
    pub facts: F,
}

impl<F> Tail<F> {
    /// A tail with `facts` measured besides the runs, and no SYN ladder.
    pub fn of(baseline_label: String, notes: Vec<String>, facts: F) -> Tail<F> {
        Tail {
            baseline_label,
            notes,
            syn_ladder: None,
            facts,
        }
    }
}

impl Tail<NoFacts> {
    /// A tail with no facts beyond the runs.
    pub fn new(baseline_label: String, notes: Vec<String>) -> Tail<NoFacts> {
        Tail::of(baseline_label, notes, NoFacts {})
    }
}

/// A scenario as `--remedies` drives it: built from a validated config, it runs one variant
/// at a time and names its remedies.
pub trait Scenario {
    /// The config, as the report carries it.
    type Config: Clone;
    /// The record of one run.
    type Run: Record;
    /// What differs between the baseline and a remedy (a server side, a sysctl, ...).
    type Variant;
    /// What the scenario measures besides its runs.
    type Facts;

    /// The scenario's name, as `tcpdoctor lab` takes it and the header carries it.
    const NAME: &'static str;
    /// The pathology the scenario reproduces and its remedies are judged on.
    const PATHOLOGY: Pathology;
    /// What diagnosed each run, in words.
    const DIAGNOSED_BY: &'static [&'static str];
    /// The remedies `--remedies` measures, in table order.
    const REMEDIES: &'static [&'static str];
    /// The remedies `--fix` applies: what the scenario recommends.
    const FIX: &'static [&'static str];

    fn config(&self) -> &Self::Config;

    /// Rejects a config the scenario cannot run.
    fn validate(&self) -> Result<()> {
        Ok(())
    }

    /// The baseline: its run's label and variant.
    fn baseline(&self) -> (String, Self::Variant);

    /// Runs one variant in fresh namespaces tagged `tag` (`""`: the baseline, which saves
    /// the capture `common` asks for, and may keep what it measured of its namespaces).
    fn run(
        &mut self,
        common: &Common,
        tag: &'static str,
        label: &str,
        variant: &Self::Variant,
        stop: &AtomicBool,
    ) -> Result<Ran<Self::Run>>;

    /// Measures what the remedies rest on besides the baseline (after it); returns the
    /// namespaces it used.
    fn after_baseline(&mut self, _common: &Common, _base: &Self::Run) -> Result<Vec<String>> {
        Ok(Vec::new())
    }

    /// The harm the remedies are judged on, as measured in `run`.
    fn harm(&self, run: &Self::Run) -> Harm;

    /// Whether `run` reproduced the pathology.
    fn reproduction(&self, run: &Self::Run) -> Reproduction;

    /// The remedy `name` (an error for a name the scenario does not know).
    fn remedy(&mut self, name: &str, base: &Self::Run) -> Result<Remedy<Self::Variant>>;

    /// Completes the prediction of remedy `name` from its own run, where the prediction's
    /// noise is the run's resolution (one event in this run's connections).
    fn complete(
        &self,
        _name: &str,
        prediction: std::result::Result<Prediction, String>,
        _run: &Self::Run,
    ) -> std::result::Result<Prediction, String> {
        prediction
    }

    /// What the remedy `name` measured in `run`.
    fn measured(&self, name: &str, run: &Self::Run, base: &Self::Run) -> Measured;

    /// A verdict the arithmetic imposes beyond the check's (see [`remedy::Outcome`]).
    fn override_verdict(
        &self,
        _name: &str,
        _variant: &Self::Variant,
        _check: &Check,
        _run: &Self::Run,
        _base: &Self::Run,
    ) -> Option<(Verdict, String)> {
        None
    }

    /// Why a measurement may disagree with its prediction, when the scenario knows.
    fn disagreement_reason(&self, _name: &str, _run: &Self::Run) -> Option<String> {
        None
    }

    /// The rows of remedy `name`, measured in namespaces tagged `tag`, and the namespaces
    /// they used: by default its variant run once and judged against the baseline
    /// ([`variant_row`]). A scenario that sweeps (incast) measures a row per run.
    fn rows(
        &mut self,
        common: &Common,
        tag: &'static str,
        name: &str,
        base: &Self::Run,
        stop: &AtomicBool,
    ) -> Result<Rows<Self::Run>>
    where
        Self: Sized,
    {
        variant_row(self, common, tag, name, base, stop)
    }

    /// The traces of the baseline's runs, first in the header (incast: every run of its
    /// sweep); each measured row's follow.
    fn base_traces(&self, base: &Self::Run) -> Vec<RunTrace> {
        vec![base.trace().clone()]
    }

    /// Traces of runs the scenario measured besides its variants (stale-ack-race's forced
    /// check), last in the header.
    fn more_traces(&self) -> Vec<RunTrace> {
        Vec::new()
    }

    /// The report's words about the baseline (`rows`: the remedies as measured).
    fn tail(&self, base: &Self::Run, rows: &[remedy::Row<Self::Run>]) -> Tail<Self::Facts>;
}

/// Namespace tags of the remedied runs, in table order.
const TAGS: [&str; 9] = ["r0", "r1", "r2", "r3", "r4", "r5", "r6", "r7", "r8"];

/// The report of `--remedies`.
pub type Remedies<S> =
    RemedyReport<<S as Scenario>::Config, <S as Scenario>::Run, <S as Scenario>::Facts>;

/// `--remedies`: the baseline and each selected remedy in fresh namespaces.
pub fn remedies<S: Scenario>(
    mut s: S,
    common: &Common,
    selected: &[String],
    stop: &AtomicBool,
) -> Result<Outcome<Remedies<S>>> {
    s.validate()?;
    let (label, variant) = s.baseline();
    let Ran {
        run: base,
        mut namespaces,
        capture,
    } = s.run(common, "", &label, &variant, stop)?;
    namespaces.extend(s.after_baseline(common, &base)?);
    let mut rows = Vec::new();
    for (i, name) in selected.iter().enumerate() {
        let r = s.rows(common, TAGS[i.min(TAGS.len() - 1)], name, &base, stop)?;
        namespaces.extend(r.namespaces);
        rows.extend(r.rows);
    }
    let tail = s.tail(&base, &rows);
    // Whether each measured row's run still reproduced the pathology, named by its remedy.
    let reproductions: Vec<Option<Reproduction>> = rows
        .iter()
        .map(|row| {
            row.run
                .as_ref()
                .map(|r| s.reproduction(r).remedy(&row.remedy))
        })
        .collect();
    // The remedied run the verdict and exit status follow.
    let remedied = remedy::followed_row(&rows).map(|i| Remedied {
        run: rows[i].remedy.clone(),
        findings: rows[i]
            .run
            .as_ref()
            .map(|r| r.findings().to_vec())
            .unwrap_or_default(),
        reproduction: reproductions[i].clone(),
    });
    let trace = LabTrace::of(
        s.base_traces(&base)
            .into_iter()
            .chain(
                rows.iter()
                    .filter_map(|r| r.run.as_ref().map(|r| r.trace().clone())),
            )
            .chain(s.more_traces())
            .collect(),
    );
    let report = RemedyReport {
        header: Header::of(
            S::NAME,
            common,
            namespaces,
            capture,
            trace,
            S::DIAGNOSED_BY,
            Reproductions::of(s.reproduction(&base), reproductions.into_iter().flatten()),
        ),
        config: s.config().clone(),
        facts: tail.facts,
        baseline_label: tail.baseline_label,
        baseline_harm: s.harm(&base),
        baseline_findings: base.findings().to_vec(),
        baseline: base,
        remedies: rows,
        notes: tail.notes,
        syn_ladder: tail.syn_ladder,
    };
    Ok(Outcome {
        reproduction: report.header.reproduction.baseline().cloned(),
        findings: report.baseline.findings().to_vec(),
        interrupted: stop.load(Ordering::Relaxed),
        remedied,
        body: report,
    })
}

/// The rows of one remedy and the namespaces they used.
pub struct Rows<R> {
    pub rows: Vec<remedy::Row<R>>,
    pub namespaces: Vec<String>,
}

/// Remedy `name` as most scenarios measure it: its variant run once in namespaces tagged
/// `tag` and judged against the baseline.
pub fn variant_row<S: Scenario>(
    s: &mut S,
    common: &Common,
    tag: &'static str,
    name: &str,
    base: &S::Run,
    stop: &AtomicBool,
) -> Result<Rows<S::Run>> {
    let r = s.remedy(name, base)?;
    let ran = s.run(common, tag, &r.label, &r.variant, stop)?;
    Ok(Rows {
        rows: vec![row(s, name, r, ran.run, base)],
        namespaces: ran.namespaces,
    })
}

/// `run` judged against `base` on the harm of pathology `p` (each run's harm as given), with
/// what the trace counted of it in each and whether `run` still reproduced the pathology.
pub fn check<R: Record>(
    p: Pathology,
    (base, base_harm): (&R, Harm),
    (run, run_harm): (&R, Harm),
    reproduction: &Reproduction,
) -> Check {
    remedy::judge(
        run.label(),
        p,
        base_harm,
        base.findings(),
        run_harm,
        run.findings(),
    )
    .with_trace(base.trace().harm(p), run.trace().harm(p))
    .with_reproduction(reproduction)
}

/// A plain run: the baseline alone, in fresh namespaces (`--remedies` with none selected).
pub fn plain<S: Scenario>(
    s: S,
    common: &Common,
    stop: &AtomicBool,
) -> Result<Outcome<Plain<S::Config, S::Run>>> {
    Ok(remedies(s, common, &[], stop)?.map(|r| Plain {
        header: r.header,
        config: r.config,
        before: r.baseline,
        unfixed: Default::default(),
    }))
}

/// The table row of remedy `name`: its run judged against `base` and its prediction.
pub fn row<S: Scenario>(
    s: &S,
    name: &str,
    r: Remedy<S::Variant>,
    run: S::Run,
    base: &S::Run,
) -> remedy::Row<S::Run> {
    let Remedy {
        variant,
        prediction,
        changes,
        ..
    } = r;
    let check = check(
        S::PATHOLOGY,
        (base, s.harm(base)),
        (&run, s.harm(&run)),
        &s.reproduction(&run),
    );
    remedy::row(remedy::Outcome {
        remedy: name.to_string(),
        changes,
        prediction: s.complete(name, prediction, &run),
        measured: s.measured(name, &run, base),
        override_verdict: s.override_verdict(name, &variant, &check, &run, base),
        disagreement_reason: s.disagreement_reason(name, &run),
        check,
        run,
    })
}

/// The error for a remedy name a scenario does not know (`what`: "a syn-drop").
pub fn unknown(name: &str, what: &str) -> crate::Error {
    crate::Error::invalid(format!("remedy {name}"), format!("not {what} remedy"))
}
