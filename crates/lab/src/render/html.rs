//! The lab report as one HTML page: a scenario's view (its headline, charts, the runs side by
//! side), the harm before and after each remedy as a chart, the remedies table of `--fix` and
//! `--remedies` with its predictions, and the diagnosis of the baseline.

use super::View;
use crate::scenario;
use tcpdoctor_model::remedy::{Harm, HarmKind, Row};
use tcpdoctor_model::Report;
use tcpdoctor_report::chart::{Axis, Bars, Rgb, Unit};
use tcpdoctor_report::html::Page;

/// The harm's amount in the chart's unit (a share as percent).
fn amount(h: &Harm) -> f64 {
    match h.kind {
        HarmKind::Count => h.amount,
        HarmKind::Share => h.amount * 100.0,
    }
}

/// Bars: the baseline's harm, then each remedied run's (`None`: not measured, drawn as 0 and
/// said in the caption).
fn harm_chart(p: &mut Page, baseline: &Harm, after: &[(String, Option<&Harm>)]) {
    let mut categories = vec!["baseline".to_string()];
    let mut values = vec![amount(baseline)];
    let mut missing = Vec::new();
    for (name, h) in after {
        categories.push(name.clone());
        match h {
            Some(h) => values.push(amount(h)),
            None => {
                values.push(0.0);
                missing.push(name.as_str());
            }
        }
    }
    let unit = match baseline.kind {
        HarmKind::Count => "",
        HarmKind::Share => " (%)",
    };
    let bars = Bars {
        title: "The harm before and after each remedy".into(),
        categories,
        series: vec![("harm".into(), Rgb::RED, values)],
        y: Axis::linear(&format!("{}{unit}", baseline.what), Unit::Count),
        x_label: "run".into(),
    };
    let mut caption = format!(
        "What the scenario reproduces ({}), measured in the baseline and in each remedied \
         run, each in fresh namespaces; lower is better.",
        baseline.what
    );
    if !missing.is_empty() {
        caption += &format!(" Not measured (drawn as 0): {}.", missing.join(", "));
    }
    p.chart(bars.draw(), &caption);
}

/// The page of a plain scenario run: the view's headline, charts, tables and lines, then
/// (an incast run of several RTO floors) the harm before and after the last floor, the
/// capture, the trace and the baseline's diagnosis.
pub fn page<B>(report: &Report<B>, v: &View) -> String {
    let header = v.header;
    let mut p = Page::new(&format!("tcpdoctor lab {}", header.scenario));
    p.header(report, &format!("{} (run {})", v.headline, header.run_id));
    measurement(&mut p, v);
    let checks = v.checks;
    if !checks.is_empty() {
        p.section("Before and after the remedy");
        let after: Vec<(String, Option<&Harm>)> = checks
            .iter()
            .map(|c| (c.run.clone(), Some(&c.after)))
            .collect();
        harm_chart(&mut p, &checks[0].before, &after);
        let rows: Vec<Vec<String>> = checks
            .iter()
            .map(|c| {
                vec![
                    c.run.clone(),
                    c.before.to_string(),
                    c.after.to_string(),
                    c.effect.name().to_string(),
                    c.line.clone(),
                ]
            })
            .collect();
        p.table(
            &["remedied run", "baseline", "after", "effect", "judged"],
            &rows,
            &[],
        );
    }
    let note = "The verdict above follows the remedied run (the first remedy that worked, else the first).";
    close(
        p,
        header,
        v.diagnosis,
        (!checks.is_empty()).then(|| note.to_string()),
    )
}

/// A view's charts, then its tables and lines under "Measurement".
fn measurement(p: &mut Page, v: &View) {
    for c in &v.charts {
        p.section(&c.section);
        p.chart(c.xy.draw(), &c.caption);
    }
    p.section("Measurement");
    for t in &v.tables {
        if let Some(c) = &t.caption {
            p.paragraph(c);
        }
        table(p, t);
    }
    for l in &v.lines {
        p.paragraph(l);
    }
}

/// How every page ends: the capture, the trace, the baseline's diagnosis, a note on the
/// verdict and the footer.
fn close(
    mut p: Page,
    header: &scenario::Header,
    diagnosis: &[tcpdoctor_model::Finding],
    note: Option<String>,
) -> String {
    capture(&mut p, header);
    trace(&mut p, header);
    p.section(&format!(
        "Diagnosis of the baseline (by {})",
        header.diagnosed_by.join("; ")
    ));
    p.findings(diagnosis);
    if let Some(n) = note {
        p.note(&n);
    }
    p.footer(
        "Written by tcpdoctor lab: every run in its own network namespaces, removed after it.",
    );
    p.finish()
}

/// The page of `--remedies`; of `--fix` with `view`, the scenario's view of the baseline and
/// the remedied runs: its headline, charts, tables and lines first.
pub fn remedies_page<C, R, F>(
    report: &Report<scenario::RemedyReport<C, R, F>>,
    view: Option<&View>,
) -> String {
    let b = &report.body;
    let (mode, run) = (
        if view.is_some() { "fix" } else { "remedies" },
        b.header.run_id,
    );
    let mut p = Page::new(&format!("tcpdoctor lab {} --{mode}", b.header.scenario));
    match view {
        None => p.header(
            report,
            &format!(
                "baseline and {} remedies, each in fresh namespaces (run {run})",
                b.remedies.len(),
            ),
        ),
        Some(v) => {
            p.header(report, &format!("{} (run {run})", v.headline));
            for row in &b.remedies {
                p.paragraph(&super::effect_line(row));
            }
            measurement(&mut p, v);
        }
    }
    p.section("Baseline");
    p.facts(&[
        ("baseline", b.baseline_label.clone()),
        ("measured", b.baseline_harm.to_string()),
    ]);
    p.section("Before and after each remedy");
    let after: Vec<(String, Option<&Harm>)> = b
        .remedies
        .iter()
        .map(|r| (r.remedy.clone(), r.check.as_ref().map(|c| &c.after)))
        .collect();
    harm_chart(&mut p, &b.baseline_harm, &after);
    let rows: Vec<Vec<String>> = b.remedies.iter().map(remedy_row).collect();
    p.table(&super::REMEDY_COLUMNS, &rows, &[]);
    if !b.notes.is_empty() {
        p.section("What the predictions rest on");
        for n in &b.notes {
            p.paragraph(n);
        }
    }
    if let Some(l) = &b.syn_ladder {
        p.section(&format!(
            "What the SYN ladder costs per lost SYN (baseline, {} connects)",
            l.connects
        ));
        table(&mut p, &super::ladder_cells(l));
    }
    let note = tcpdoctor_model::remedy::followed_row(&b.remedies).map(|i| {
        format!(
            "The verdict above follows the remedy \"{}\" (the first that works, else the first measured).",
            b.remedies[i].remedy
        )
    });
    close(p, &b.header, &b.baseline_findings, note)
}

/// A table of the text report, on the page.
fn table(p: &mut Page, t: &super::Cells) {
    let h: Vec<&str> = t.header.iter().map(String::as_str).collect();
    p.table(&h, &t.rows, &t.right);
}

fn remedy_row<R>(row: &Row<R>) -> Vec<String> {
    super::remedy_cells(row, " => ")
}

/// What the eBPF trace attributed in each run (the text report's "Trace" lines), or why it
/// was not used.
fn trace(p: &mut Page, h: &scenario::Header) {
    p.section("Trace (eBPF)");
    let t = &h.trace;
    if !t.used {
        p.paragraph(&format!(
            "Not used: {}; the diagnosis rests on the lab's own measurements.",
            t.missing.as_deref().unwrap_or("no run was traced")
        ));
        return;
    }
    let rows: Vec<Vec<String>> = t
        .listed_runs()
        .map(|r| vec![r.run.clone(), r.line(), super::netns_lines(r).join("; ")])
        .collect();
    p.table(
        &[
            "run",
            "attributed in its own namespaces and window",
            "per namespace: cause=events",
        ],
        &rows,
        &[],
    );
}

fn capture(p: &mut Page, h: &scenario::Header) {
    if let Some(cap) = &h.capture {
        let known = |n: Option<u64>| n.map(|n| n.to_string()).unwrap_or_else(|| "?".into());
        p.note(&format!(
            "Capture: {} ({} packets, {} dropped by the kernel).",
            cap.path.display(),
            known(cap.packets_captured),
            known(cap.packets_dropped_by_kernel)
        ));
    }
}
