//! The lab's human text and HTML pages. A scenario says what its run shows in one [`View`]
//! (a headline, tables, lines, charts), written once for both; the text ([`text`]) and the
//! page ([`html::page`]) lay it out with the parts every scenario shares (the trace, the
//! diagnosis, the remedies' outcomes, the capture, whether the pathology was reproduced,
//! the verdict). `--remedies` and `--fix` print the remedies table ([`remedies`],
//! [`html::remedies_page`]); `--fix` with the scenario's view of its runs beside it.
//! Built on `tcpdoctor_report`'s printers; writes to any `io::Write` and reads no terminal
//! (the width and colour come from `tcpdoctor_report::style`).

pub mod html;
pub mod views;

use std::io::{self, Write};

use tcpdoctor_model::remedy::Check;
use tcpdoctor_model::{Finding, Report};
use tcpdoctor_report::chart::Xy;
use tcpdoctor_report::{findings, fmt, table};
use tcpdoctor_trace::run::{LabTrace, RunTrace};

use crate::scenario;

/// What a scenario's run report shows of its own, the same in text and HTML.
pub struct View<'a> {
    /// The scenario's name (`port-exhaustion`).
    pub scenario: &'a str,
    pub header: &'a scenario::Header,
    /// One line: what was run (`nftables in the server namespace drops 10% of SYNs`).
    pub headline: String,
    /// The measurement: the runs side by side, and any table of the scenario's own.
    pub tables: Vec<Cells>,
    /// Lines after the tables (arithmetic, a forced check).
    pub lines: Vec<String>,
    /// Charts of the page (the text has none).
    pub charts: Vec<Chart>,
    /// The findings the diagnosis shows: the baseline's.
    pub diagnosis: &'a [Finding],
    /// The last RTO floor judged against the first (an incast run of several floors).
    pub checks: &'a [Check],
}

impl<'a> View<'a> {
    /// The view of scenario `scenario`'s runs under `headline`: their `table` side by side and
    /// the baseline's `diagnosis`; no lines, charts or checks yet.
    pub fn new(
        (scenario, header): (&'a str, &'a scenario::Header),
        headline: String,
        table: Cells,
        diagnosis: &'a [Finding],
    ) -> View<'a> {
        View {
            scenario,
            header,
            headline,
            tables: vec![table],
            lines: Vec::new(),
            charts: Vec::new(),
            diagnosis,
            checks: &[],
        }
    }
}

/// A table: an optional caption, the header, the rows, the right-aligned columns.
#[derive(Clone, Debug, Default)]
pub struct Cells {
    pub caption: Option<String>,
    pub header: Vec<String>,
    pub rows: Vec<Vec<String>>,
    pub right: Vec<usize>,
}

impl Cells {
    pub fn new<S: Into<String>>(header: impl IntoIterator<Item = S>) -> Cells {
        Cells {
            header: header.into_iter().map(Into::into).collect(),
            ..Cells::default()
        }
    }

    fn text(&self) -> table::Table {
        let mut t = table::new(self.header.clone());
        for row in &self.rows {
            t.add_row(row.clone());
        }
        table::align_right(&mut t, &self.right);
        t
    }
}

/// A chart of the page, in its own section.
pub struct Chart {
    pub section: String,
    pub xy: Xy,
    pub caption: String,
}

/// The text of a scenario's run: the headline, its tables and lines, then the trace, the
/// diagnosis of the baseline, the remedies' outcomes, the capture, whether each run
/// reproduced the pathology, and the verdict.
pub fn text<B>(w: &mut dyn Write, r: &Report<B>, v: &View) -> io::Result<()> {
    writeln!(
        w,
        "lab {}: {} (run {})",
        v.scenario, v.headline, v.header.run_id
    )?;
    writeln!(w)?;
    measurement(w, v)?;
    trace_lines(w, &v.header.trace)?;
    diagnosis(w, v.header, v.diagnosis)?;
    remedy_lines(w, v.checks)?;
    capture_line(w, &v.header.capture)?;
    reproduction_lines(w, &v.header.reproduction)?;
    verdict(w, r, v.checks)
}

/// A view's tables, then its lines.
fn measurement(w: &mut dyn Write, v: &View) -> io::Result<()> {
    for t in &v.tables {
        if let Some(c) = &t.caption {
            writeln!(w, "{c}")?;
        }
        writeln!(w, "{}", t.text())?;
        writeln!(w)?;
    }
    for l in &v.lines {
        writeln!(w, "{l}")?;
    }
    if !v.lines.is_empty() {
        writeln!(w)?;
    }
    Ok(())
}

/// The findings of the first run, in full.
fn diagnosis(w: &mut dyn Write, h: &scenario::Header, findings: &[Finding]) -> io::Result<()> {
    writeln!(
        w,
        "Diagnosis of the first run (by {}{}):",
        h.diagnosed_by.join("; "),
        if h.trace.used {
            "; the eBPF trace's attribution of each event"
        } else {
            ""
        }
    )?;
    writeln!(w)?;
    findings::write(w, findings)?;
    writeln!(w)
}

/// The text of `lab cleanup`: what was removed, kept or could not be removed.
pub fn cleanup(
    w: &mut dyn Write,
    r: &Report<tcpdoctor_sandbox::cleanup::Cleaned>,
) -> io::Result<()> {
    let c = &r.body;
    writeln!(
        w,
        "Removed {} namespace(s), {} interface(s), {} temporary file(s); killed {} process(es) inside them and {} orphaned tcpdump(s).",
        c.namespaces_removed.len(),
        c.interfaces_removed.len(),
        c.files_removed.len(),
        c.processes_killed.len(),
        c.captures_killed.len()
    )?;
    for n in &c.namespaces_removed {
        writeln!(w, "  namespace {n}")?;
    }
    for n in &c.interfaces_removed {
        writeln!(w, "  interface {n}")?;
    }
    for n in &c.files_removed {
        writeln!(w, "  file {n}")?;
    }
    for n in &c.captures_killed {
        writeln!(w, "  tcpdump pid {n}")?;
    }
    for n in &c.namespaces_in_use {
        writeln!(w, "  kept {n} (its run is alive; --force removes it)")?;
    }
    for n in &c.failed {
        writeln!(w, "  FAILED to remove {n}")?;
    }
    Ok(())
}

/// [`text`] of the view `view` makes of a report's body.
pub fn run_text<B>(
    w: &mut dyn Write,
    r: &Report<B>,
    view: for<'a> fn(&'a B) -> View<'a>,
) -> io::Result<()> {
    text(w, r, &view(&r.body))
}

/// [`html::page`] of the view `view` makes of a report's body.
pub fn run_page<B>(r: &Report<B>, view: for<'a> fn(&'a B) -> View<'a>) -> String {
    html::page(r, &view(&r.body))
}

/// Whether each run reproduced the scenario's pathology, with the counts of its signature,
/// what was tried and what it cost ([`crate::reproduce`]).
fn reproduction_lines(
    w: &mut dyn Write,
    r: &tcpdoctor_model::reproduce::Reproductions,
) -> io::Result<()> {
    let Some(first) = r.baseline() else {
        return Ok(());
    };
    let layout = tcpdoctor_report::style::current();
    writeln!(
        w,
        "Reproduced? ({}: its own signature, counted in each run)",
        first.pathology
    )?;
    for run in &r.reproduction {
        let line = format!("{}: {}", run.run, run.line);
        writeln!(
            w,
            "{}",
            tcpdoctor_report::wrap::fill(&line, layout.width, "  ", "    ")
        )?;
    }
    writeln!(w)
}

/// The verdict line; after a judged run, first which run it follows.
fn verdict<B>(w: &mut dyn Write, r: &Report<B>, checks: &[Check]) -> io::Result<()> {
    if let Some(i) = tcpdoctor_model::remedy::followed(checks) {
        writeln!(
            w,
            "The verdict and exit status follow the remedied run \"{}\"{}.",
            checks[i].run,
            match above_info(r) {
                0 => String::new(),
                n => format!(" ({n} finding(s) above info left in it)"),
            }
        )?;
    }
    verdict_line(w, r)
}

/// The closing verdict line, with its reason: "reproduced" when the run the verdict follows
/// reproduced the pathology, even when no finding is above info (the harm on this kernel was
/// small); "inconclusive" when it was not reproduced and nothing else was found
/// ([`tcpdoctor_model::reproduce::verdict`]).
fn verdict_line<B>(w: &mut dyn Write, r: &Report<B>) -> io::Result<()> {
    use tcpdoctor_report::{style, wrap};
    let layout = style::current();
    let word =
        tcpdoctor_model::reproduce::verdict_word(r.verdict, &r.verdict_reason, above_info(r));
    let painted = layout.paint(style::verdict(r.verdict), &word);
    // "reproduced stale_ack_race: ..." reads as the verdict itself.
    let line = match r.verdict_reason.strip_prefix("reproduced ") {
        Some(rest) if word == "reproduced" => format!("Verdict: {painted} {rest}"),
        _ => format!("Verdict: {painted} ({})", r.verdict_reason),
    };
    writeln!(w, "{}", wrap::fill(&line, layout.width, "", "  "))
}

/// How many of the report's findings are above info.
fn above_info<B>(r: &Report<B>) -> usize {
    let above = |f: &&Finding| f.severity > tcpdoctor_model::Severity::Info;
    r.findings.iter().filter(above).count()
}

/// The pathologies a run's findings name with their severity, `none` when there are none.
pub(crate) fn pathology_names(findings: &[Finding]) -> String {
    if findings.is_empty() {
        return "none".into();
    }
    findings
        .iter()
        .map(|f| format!("{} ({})", f.pathology.name(), f.severity))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The `--pcap` line: where the capture went and what tcpdump counted.
fn capture_line(
    w: &mut dyn Write,
    capture: &Option<tcpdoctor_sandbox::capture::CaptureSummary>,
) -> io::Result<()> {
    let Some(cap) = capture else {
        return Ok(());
    };
    let known = |n: Option<u64>| n.map(|n| n.to_string()).unwrap_or_else(|| "?".into());
    writeln!(
        w,
        "Capture: {} ({} packets, {} dropped by kernel)",
        cap.path.display(),
        known(cap.packets_captured),
        known(cap.packets_dropped_by_kernel)
    )?;
    writeln!(w)
}

/// `--remedies`: the baseline, the table of remedies (prediction, measurement, agreement,
/// pathology gone, verdict), the notes the predictions rest on, and the verdict. `--fix`
/// (`view`: the scenario's view of the baseline and the remedied runs): first the headline,
/// each remedy's effect on the harm and the runs side by side, and the baseline's findings in
/// full after the trace.
pub fn remedies<C, R, F>(
    w: &mut dyn Write,
    r: &Report<scenario::RemedyReport<C, R, F>>,
    scenario: &str,
    view: Option<&View>,
) -> io::Result<()> {
    let b = &r.body;
    match view {
        None => writeln!(w, "lab {scenario} --remedies (run {})\n", b.header.run_id)?,
        Some(v) => {
            let run = b.header.run_id;
            writeln!(w, "lab {scenario} --fix: {} (run {run})", v.headline)?;
            writeln!(w)?;
            for row in &b.remedies {
                writeln!(w, "{}", effect_line(row))?;
            }
            writeln!(w)?;
            measurement(w, v)?;
        }
    }
    writeln!(w, "Baseline: {}", b.baseline_label)?;
    writeln!(w, "  measured: {}", b.baseline_harm)?;
    writeln!(
        w,
        "  diagnosis (by {}): {}",
        b.header.diagnosed_by.join("; "),
        pathology_names(&b.baseline_findings)
    )?;
    writeln!(w)?;
    let mut t = table::new(REMEDY_COLUMNS);
    table::wrap(&mut t, 200);
    for row in &b.remedies {
        t.add_row(remedy_cells(row, "\n=> "));
    }
    writeln!(w, "{t}")?;
    writeln!(w)?;
    if !b.notes.is_empty() {
        writeln!(w, "What the predictions rest on:")?;
        for n in &b.notes {
            writeln!(w, "  - {n}")?;
        }
        writeln!(w)?;
    }
    if let Some(l) = &b.syn_ladder {
        ladder_table(w, l)?;
    }
    trace_lines(w, &b.header.trace)?;
    if view.is_some() {
        diagnosis(w, &b.header, &b.baseline_findings)?;
    }
    capture_line(w, &b.header.capture)?;
    reproduction_lines(w, &b.header.reproduction)?;
    if let Some(i) = tcpdoctor_model::remedy::followed_row(&b.remedies) {
        writeln!(
            w,
            "The verdict and exit status follow the remedy \"{}\" (the first that works, else the first measured).",
            b.remedies[i].remedy
        )?;
    }
    verdict_line(w, r)
}

/// What a remedy did to the harm, in one line: `remove-drop: remedy worked: SYN
/// retransmissions (TcpExtTCPSynRetrans) fell from 12 to 0`, with what the trace saw; the
/// verdict's reason when the arithmetic overrode the check, or when nothing was measured.
pub(crate) fn effect_line<R>(row: &tcpdoctor_model::remedy::Row<R>) -> String {
    use tcpdoctor_model::remedy::Verdict;
    let Some(c) = &row.check else {
        return format!("{}: {}", row.remedy, row.why);
    };
    let (a, b) = (c.before.shown(), c.after.shown());
    let moved = match c.after.amount.partial_cmp(&c.before.amount) {
        Some(std::cmp::Ordering::Less) => format!("fell from {a} to {b}"),
        Some(std::cmp::Ordering::Greater) => format!("rose from {a} to {b}"),
        _ => format!("stayed at {b}"),
    };
    let what = match c.before.what.strip_prefix("of ") {
        Some(rest) => format!("the share of {rest}"),
        None => c.before.what.clone(),
    };
    let word = match row.verdict {
        Verdict::Works => "remedy worked",
        Verdict::Partial => "remedy partial",
        v => v.name(),
    };
    let mut line = format!("{}: {word}: {what} {moved}", row.remedy);
    if let Some(t) = &c.trace {
        line += &format!(" ({t})");
    }
    if row.verdict != Verdict::Works {
        line += &format!("\n  {}", row.why);
    }
    line
}

/// What the SYN ladder cost the baseline: connects per rung, predicted and measured.
fn ladder_table(w: &mut dyn Write, l: &tcpdoctor_probe::ladder::LadderCost) -> io::Result<()> {
    writeln!(
        w,
        "What the SYN ladder costs per lost SYN (baseline, {} connects):",
        l.connects
    )?;
    writeln!(w, "{}", ladder_cells(l).text())?;
    match (l.predicted_delay_per_connect_us, l.tolerance_us, l.drop_share) {
        (Some(p), Some(tol), Some(share)) => writeln!(
            w,
            "Added delay per connect: predicted sum p^k (1 - p) x rung k = {} (p = {share:.2}), measured {}: {} (within {}, three standard deviations over {} connects).",
            fmt::micros(p as u64),
            fmt::micros(l.measured_delay_per_connect_us as u64),
            if l.agrees == Some(true) { "agrees" } else { "disagrees" },
            fmt::micros(tol as u64),
            l.connects
        )?,
        _ => writeln!(
            w,
            "Added delay per connect: measured {}; each lost SYN costs the connect its rung.",
            fmt::micros(l.measured_delay_per_connect_us as u64)
        )?,
    }
    writeln!(w)
}

/// The columns of the remedies table (text and page).
pub(crate) const REMEDY_COLUMNS: [&str; 7] = [
    "remedy",
    "what it changes",
    "predicted (tcpdoctor's arithmetic)",
    "measured",
    "prediction vs measurement",
    "gone",
    "verdict",
];

/// The SYN ladder's cost per lost SYN, a row per rung (text and page).
pub(crate) fn ladder_cells(l: &tcpdoctor_probe::ladder::LadderCost) -> Cells {
    let mut t = Cells::new([
        "lost SYNs",
        "rung (model)",
        "connects",
        "predicted connects",
        "measured connect",
    ]);
    t.right = vec![0, 1, 2, 3, 4];
    t.rows = l
        .rungs
        .iter()
        .map(|r| {
            vec![
                r.attempt.to_string(),
                format!("{} ms", r.rung_ms),
                r.connects.to_string(),
                r.predicted_connects
                    .map(|p| format!("{p:.1}"))
                    .unwrap_or_else(|| "-".into()),
                fmt::micros(r.typical_connect_us),
            ]
        })
        .collect();
    t
}

/// The remedy lines of an incast run of several RTO floors: the last floor judged from its
/// measurement against the first.
fn remedy_lines(w: &mut dyn Write, checks: &[Check]) -> io::Result<()> {
    if checks.is_empty() {
        return Ok(());
    }
    writeln!(
        w,
        "Did the remedy work? (judged from the measurement of each remedied run)"
    )?;
    for c in checks {
        match &c.trace {
            Some(t) if !c.line.contains(t.as_str()) => {
                writeln!(w, "  {}: {} ({t})", c.run, c.line)?
            }
            _ => writeln!(w, "  {}: {}", c.run, c.line)?,
        }
    }
    writeln!(w)
}

/// Per namespace of a traced run: `client: cause=n, ...` (each namespace named in words by
/// its role, [`tcpdoctor_sandbox::naming::role_words`]).
pub(crate) fn netns_lines(r: &RunTrace) -> Vec<String> {
    r.causes_by_netns
        .iter()
        .map(|(ns, m)| {
            let c: Vec<String> = m.iter().map(|(c, n)| format!("{}={n}", c.name())).collect();
            format!(
                "{}: {}",
                tcpdoctor_sandbox::naming::role_words(ns),
                c.join(", ")
            )
        })
        .collect()
}

/// What the eBPF trace attributed in each run (its own namespaces and window), beside the
/// kernel counters; or, in one line, what is missing to trace.
fn trace_lines(w: &mut dyn Write, t: &LabTrace) -> io::Result<()> {
    if !t.used {
        writeln!(
            w,
            "Trace (eBPF): not used: {}; the diagnosis rests on the lab's own measurements.",
            t.missing.as_deref().unwrap_or("no run was traced")
        )?;
        return writeln!(w);
    }
    writeln!(
        w,
        "Trace (eBPF, each run's own namespaces and window; attributed events per cause):"
    )?;
    for r in t.listed_runs() {
        writeln!(w, "  {}: {}", r.run, r.line())?;
        for l in netns_lines(r) {
            writeln!(w, "    {l}")?;
        }
    }
    writeln!(w)
}

/// The cells of one row of the remedies table, as the text and the HTML page print it:
/// `arrow` joins a prediction's formula to its effect ("\n=> " in a text cell, " => " in
/// HTML).
pub(crate) fn remedy_cells<R>(row: &tcpdoctor_model::remedy::Row<R>, arrow: &str) -> Vec<String> {
    let predicted = match (&row.prediction, &row.not_predicted) {
        (Some(p), _) => format!("{}{arrow}{}", p.formula, p.effect),
        (None, Some(why)) => format!("no prediction: {why}"),
        (None, None) => "-".into(),
    };
    vec![
        row.remedy.clone(),
        row.changes.clone(),
        predicted,
        row.measured
            .as_ref()
            .map(|m| m.text.clone())
            .unwrap_or_else(|| "-".into()),
        row.agreement_note.clone(),
        match row.pathology_gone {
            Some(true) => "yes".into(),
            Some(false) => "no".into(),
            None => "-".into(),
        },
        row.why.clone(),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;
    use tcpdoctor_trace::attribute::Cause;

    #[test]
    fn per_namespace_lines_name_the_role() {
        let mut by = BTreeMap::new();
        by.insert(
            "tdoc-lab-7-cl".to_string(),
            BTreeMap::from([(Cause::NoLocalPort, 5)]),
        );
        let traced = RunTrace {
            used: true,
            causes_by_netns: by,
            ..RunTrace::default()
        };
        assert_eq!(netns_lines(&traced), vec!["client: no_local_port=5"]);
        assert_eq!(
            tcpdoctor_sandbox::naming::role_of("tdoc-lab-12-svfx"),
            "svfx"
        );
        assert_eq!(tcpdoctor_sandbox::naming::role_of("other"), "other");
    }
}
