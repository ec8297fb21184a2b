//! Doctor's printers: the human text ([`text`]) and the HTML page ([`html::page`]), built on
//! `tcpdoctor_report`'s printers. Write to any `io::Write` (or return the page); they read no
//! terminal: the width and colour come from `tcpdoctor_report::style`.

pub mod html;

use std::io::{self, Write};

use tcpdoctor_model::{Finding, Report, Severity};
use tcpdoctor_report::{findings, fmt};

use crate::{Body, WindowSource};

/// The human text: the steps, how the window was observed, the census by state, the serious
/// findings in full and the informational ones in one line each, then the verdict.
pub fn text(w: &mut dyn Write, r: &Report<Body>) -> io::Result<()> {
    let b = &r.body;
    let where_ = b.netns.as_ref().map_or_else(
        || "this host".to_string(),
        |n| format!("network namespace {n}"),
    );
    writeln!(
        w,
        "tcpdoctor doctor: {where_}{}",
        if b.root {
            ""
        } else {
            " (not root: no step here needs it; --netns would)"
        }
    )?;
    for s in &b.steps {
        if s.ran {
            writeln!(
                w,
                "  {:<9} {} ({})",
                s.step,
                s.detail,
                fmt::micros(s.duration_us)
            )?;
        } else {
            writeln!(w, "  {:<9} skipped: {}", s.step, s.detail)?;
        }
    }
    match (b.window_source, &b.trace.missing) {
        (WindowSource::TraceAndCounters, _) => writeln!(
            w,
            "  window observed by the eBPF trace (events attributed to causes) and the counters; {} trace record(s) lost{}",
            b.trace.lost_events,
            [
                tcpdoctor_trace::render::missed_text(&b.trace.missed_events),
                tcpdoctor_trace::render::not_traced_text(&b.trace.not_traced)
            ]
            .into_iter()
            .flatten()
            .map(|m| format!("\n  {m}"))
            .collect::<String>()
        )?,
        (WindowSource::CountersOnly, why) => writeln!(
            w,
            "  window observed by the counters only ({})",
            why.as_deref().unwrap_or("trace not run")
        )?,
    }
    if let Some(s) = &b.sockets {
        if !s.by_state.is_empty() {
            writeln!(w, "  sockets by state: {}", fmt::tally(&s.by_state))?;
        }
        let t = &s.transfers;
        if !t.busy.is_empty() {
            writeln!(
                w,
                "  busy connections in the window, by what limited them: {} (sockets --json: transfers)",
                fmt::tally(t.by_limit.iter().map(|(l, n)| (l.describe(), n)))
            )?;
        }
    }
    if r.interrupted {
        writeln!(
            w,
            "  interrupted after {} of the {} window: what follows covers only what was measured",
            fmt::micros(b.window_ms * 1000),
            fmt::micros(b.window_requested_ms * 1000)
        )?;
    }
    writeln!(w)?;
    let (serious, info): (Vec<Finding>, Vec<Finding>) = r
        .findings
        .iter()
        .cloned()
        .partition(|f| f.severity >= Severity::Warning);
    if serious.is_empty() && r.interrupted {
        writeln!(
            w,
            "No problems found in what was measured before the interruption."
        )?;
    } else if serious.is_empty() {
        writeln!(w, "No problems found.")?;
    } else {
        findings::write(w, &serious)?;
    }
    if !info.is_empty() {
        writeln!(w)?;
        writeln!(
            w,
            "Also noted ({}; details with `tcpdoctor check` or --json):",
            info.len()
        )?;
        for f in &info {
            writeln!(w, "  - {}: {}", f.title(), f.summary)?;
        }
    }
    writeln!(w)?;
    findings::verdict(w, r)
}
