//! Remedy verdicts judged again, without root, from recorded real runs: each `--remedies`
//! and `--fix` fixture under `tests/data/lab` (recorded as root by `tests/data/lab/record.sh`) holds the
//! baseline's and every remedied run's measurements. Every row is judged again here by the
//! scenario's own code (`driver::row`: harm, prediction, trace counts, reproduction,
//! verdict) from those measurements, and must come out as the live run judged it. A change
//! of judgement (a rule, a threshold, a prediction's arithmetic) then fails here, on the
//! kernel's real evidence, before any root test runs.

use std::path::{Path, PathBuf};

use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::Value;
use tcpdoctor_lab::scenario::driver::{self, Record, Scenario};
use tcpdoctor_lab::scenario::{
    accept_overflow, harness, incast, port_exhaustion, slow_reader, stale_ack, syn_drop, timewait,
    RemedyReport,
};

fn dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/data/lab")
}

/// The parts of a row that are judgement: the check's effect, the verdict, the prediction's
/// value and the agreement with it.
fn judgement(row: &Value) -> Value {
    serde_json::json!({
        "remedy": row["remedy"],
        "effect": row["check"]["effect"],
        "pathology_gone": row["pathology_gone"],
        "verdict": row["verdict"],
        "why": row["why"],
        "prediction": row["prediction"]["value"],
        "agreement": row["agreement"],
    })
}

/// Judges every measured row of fixture `name` again with scenario `s` (built from the
/// recorded config by `make`) and returns the rows whose judgement differs.
fn rejudge<S>(
    name: &str,
    make: impl Fn(&RemedyReport<S::Config, S::Run, S::Facts>) -> S,
) -> (usize, Vec<String>)
where
    S: Scenario,
    S::Run: Clone + DeserializeOwned + Serialize,
    S::Config: DeserializeOwned,
    S::Facts: DeserializeOwned,
{
    rejudge_rows(name, make, |s, name, r, run, base| {
        Some(driver::row(s, name, r, run, base))
    })
}

/// [`rejudge`] with the scenario's own way of making a row of a run (`make_row`).
fn rejudge_rows<S>(
    name: &str,
    make: impl Fn(&RemedyReport<S::Config, S::Run, S::Facts>) -> S,
    make_row: impl Fn(
        &S,
        &str,
        driver::Remedy<S::Variant>,
        S::Run,
        &S::Run,
    ) -> Option<tcpdoctor_model::remedy::Row<S::Run>>,
) -> (usize, Vec<String>)
where
    S: Scenario,
    S::Run: Clone + DeserializeOwned + Serialize,
    S::Config: DeserializeOwned,
    S::Facts: DeserializeOwned,
{
    let text = std::fs::read_to_string(dir().join(format!("{name}.json"))).unwrap();
    let mut report: RemedyReport<S::Config, S::Run, S::Facts> =
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("{name}.json: {e}"));
    // Each run's trace is in the header (`trace.runs`), not in the run's own JSON.
    let traces = report.header.trace.runs.clone();
    let runs = std::iter::once(&mut report.baseline)
        .chain(report.remedies.iter_mut().filter_map(|r| r.run.as_mut()));
    for run in runs {
        if let Some(t) = traces.iter().find(|t| t.run == run.label()) {
            *run.trace_mut() = t.clone();
        }
    }
    let recorded: Value = serde_json::from_str(&text).unwrap();
    let mut s = make(&report);
    let mut judged = 0;
    let mut errors = Vec::new();
    for (i, row) in report.remedies.iter().enumerate() {
        let Some(run) = row.run.clone() else {
            continue; // could not be built here: no measurement to judge
        };
        let r = s
            .remedy(&row.remedy, &report.baseline)
            .unwrap_or_else(|e| panic!("{name}: remedy {}: {e}", row.remedy));
        let Some(again) = make_row(&s, &row.remedy, r, run, &report.baseline) else {
            errors.push(format!(
                "{name}: {}: no baseline run to judge it against",
                row.remedy
            ));
            continue;
        };
        let got = judgement(&serde_json::to_value(&again).unwrap());
        let want = judgement(&recorded["remedies"][i]);
        judged += 1;
        if got != want {
            errors.push(format!(
                "{name}: {}: judged again {got:#}\nrecorded {want:#}",
                row.remedy
            ));
        }
    }
    (judged, errors)
}

/// The kernel release a fixture was recorded on (its provenance).
fn recorded_kernel(name: &str) -> String {
    let text = std::fs::read_to_string(dir().join(format!("{name}.json"))).unwrap();
    let v: Value = serde_json::from_str(&text).unwrap();
    v["kernel_release"].as_str().unwrap_or_default().to_string()
}

#[test]
fn recorded_remedy_runs_are_judged_again_as_they_were_live() {
    let mut judged = 0;
    let mut errors = Vec::new();
    let mut add = |(n, e): (usize, Vec<String>)| {
        judged += n;
        errors.extend(e);
    };
    // `--remedies` and `--fix` (the recommended remedies' rows) print the same report.
    for mode in ["remedies", "fix"] {
        let name = |scenario: &str| format!("{scenario}-{mode}");
        add(rejudge::<syn_drop::SynDrop>(&name("syn-drop"), |r| {
            syn_drop::SynDrop(r.config.clone())
        }));
        add(rejudge::<accept_overflow::AcceptOverflow>(
            &name("accept-overflow"),
            |r| accept_overflow::AcceptOverflow(r.config.clone()),
        ));
        add(rejudge::<slow_reader::SlowReader>(
            &name("slow-reader"),
            |r| slow_reader::SlowReader(r.config.clone()),
        ));
        add(rejudge::<timewait::Timewait>(
            &name("timewait-collision"),
            |r| timewait::Timewait(r.config.clone()),
        ));
        add(rejudge::<port_exhaustion::PortExhaustion>(
            &name("port-exhaustion"),
            |r| port_exhaustion::PortExhaustion::new(r.config.clone()),
        ));
        let stale = name("stale-ack-race");
        add(rejudge::<stale_ack::StaleAck>(&stale, |r| {
            stale_ack::StaleAck::recorded(
                r.config.clone(),
                r.facts.forced.clone(),
                recorded_kernel(&stale),
            )
        }));
        // The baseline of a one-count sweep is its only run (config senders [8] here).
        add(rejudge_rows::<incast::Incast>(
            &name("incast"),
            |r| {
                assert_eq!(
                    r.config.senders.len(),
                    1,
                    "a sweep's other runs are not recorded"
                );
                incast::Incast::recorded(
                    r.config.clone(),
                    vec![r.baseline.clone()],
                    r.facts.clone(),
                )
                .unwrap()
            },
            |s, name, r, run, _| s.row_of(name, &r, run),
        ));
    }
    assert!(errors.is_empty(), "{}", errors.join("\n\n"));
    assert!(judged >= 28, "only {judged} rows judged");
}

/// A syn-drop remedy that keeps the drop is predicted the baseline's rate; its tolerance is
/// the noise of the remedied run's own connects (a 3 s run beside a longer baseline scatters
/// wider), not the baseline's.
#[test]
fn a_kept_syn_drop_is_predicted_within_its_own_runs_noise() {
    let text = std::fs::read_to_string(dir().join("syn-drop-remedies.json")).unwrap();
    let report: RemedyReport<syn_drop::Config, harness::ProbeRun> =
        serde_json::from_str(&text).unwrap();
    let mut s = syn_drop::SynDrop(report.config.clone());
    let p = f64::from(report.config.drop_percent) / 100.0;
    let mut checked = 0;
    for row in &report.remedies {
        let Some(run) = row.run.clone() else { continue };
        let r = s.remedy(&row.remedy, &report.baseline).unwrap();
        let again = serde_json::to_value(driver::row(
            &s,
            &row.remedy,
            r,
            run.clone(),
            &report.baseline,
        ))
        .unwrap();
        let n = run.summary.requests + run.summary.requests_cut;
        if again["prediction"]["value"].as_f64() == Some(0.0) {
            assert_eq!(again["prediction"]["tolerance"]["value"], 0.0, "{again:#}");
            continue;
        }
        let want = 3.0 * (p / (1.0 - p).powi(2) / n as f64).sqrt();
        let got = again["prediction"]["tolerance"]["value"].as_f64().unwrap();
        assert!(
            (got - want).abs() < 1e-9,
            "{}: tolerance {got}, want {want} for {n} connects",
            row.remedy
        );
        let noise = again["prediction"]["noise"].as_str().unwrap();
        assert!(
            noise.contains(&format!("this run's {n} connects")),
            "{noise}"
        );
        assert_ne!(
            n,
            report.baseline.summary.requests + report.baseline.summary.requests_cut
        );
        checked += 1;
    }
    assert!(checked >= 2, "{checked}");
}
