//! `tcpdoctor counters`: the JSON document ([`Body`]: live or saved, snapshot or delta, one
//! [`Row`] per counter) and its human text.

use std::collections::BTreeMap;
use std::io::{self, Write};
use std::path::PathBuf;

use serde::Serialize;
use tcpdoctor_model::{Pathology, Report};
use tcpdoctor_report::{findings, table};

use crate::saved::{Format, Unparsed};

#[derive(Serialize, Clone, Copy, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum Mode {
    Snapshot,
    Delta,
}

#[derive(Serialize)]
pub struct Row {
    pub name: String,
    /// Absolute value (snapshot mode, or the later snapshot of a delta).
    pub value: Option<u64>,
    pub delta: Option<i64>,
    pub rate_per_s: Option<f64>,
    pub meaning: Option<&'static str>,
    pub pathology: Option<Pathology>,
    /// The name the saved file used, when it differs.
    pub native_name: Option<String>,
}

#[derive(Serialize)]
pub struct FileInfo {
    pub path: PathBuf,
    pub format: Format,
    pub format_name: &'static str,
    pub mapped: BTreeMap<String, String>,
    pub unmapped: Vec<String>,
    pub unparsed: Vec<Unparsed>,
}

#[derive(Serialize)]
pub struct Body {
    pub mode: Mode,
    pub source: &'static str,
    pub netns: Option<String>,
    pub interval_ms: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sample: Option<u64>,
    /// What one snapshot read cost (live only).
    pub snapshot_duration_us: Option<u64>,
    /// Live deltas: the smallest RTO of the host (tcp_rto_min_us, route rto_min), the least
    /// stall of each data retransmission timeout.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rto_floor_us: Option<u64>,
    pub counters: Vec<Row>,
    /// Relevant counters that did not move (delta mode, human output hides them).
    pub unchanged: u64,
    pub files: Vec<FileInfo>,
}

/// The human text: where saved files came from, the counters table (a delta hides counters
/// that did not move unless `all`), then the findings and the verdict.
pub fn text(w: &mut dyn Write, r: &Report<Body>, all: bool) -> io::Result<()> {
    let b = &r.body;
    for f in &b.files {
        writeln!(w, "{}: {}", f.path.display(), f.format_name)?;
        if !f.unmapped.is_empty() {
            writeln!(
                w,
                "  {} counter(s) without an nstat equivalent kept under their own names",
                f.unmapped.len()
            )?;
        }
        if !f.unparsed.is_empty() {
            writeln!(w, "  {} line(s) not understood:", f.unparsed.len())?;
            for u in &f.unparsed {
                writeln!(w, "    line {}: {} ({})", u.line, u.text.trim(), u.reason)?;
            }
        }
    }
    let ns = b
        .netns
        .as_deref()
        .map(|n| format!(" in netns {n}"))
        .unwrap_or_default();
    match (b.mode, b.interval_ms) {
        (Mode::Snapshot, _) => writeln!(
            w,
            "TCP counters{ns} (absolute, since boot or namespace creation; --interval for a delta)"
        )?,
        (Mode::Delta, Some(ms)) => writeln!(
            w,
            "TCP counters{ns}: change over {:.1} s",
            ms as f64 / 1000.0
        )?,
        (Mode::Delta, None) => writeln!(w, "TCP counters: change between the two files")?,
    }
    let shown: Vec<&Row> = b
        .counters
        .iter()
        .filter(|c| b.mode == Mode::Snapshot || all || c.delta != Some(0))
        .collect();
    let mut t = match b.mode {
        Mode::Snapshot => table::new(["COUNTER", "VALUE", "SIGNALS", "MEANING"]),
        Mode::Delta => table::new(["COUNTER", "DELTA", "PER_S", "SIGNALS", "MEANING"]),
    };
    for c in &shown {
        let signals = c
            .pathology
            .map(|p| p.name().to_string())
            .unwrap_or_default();
        let meaning = c.meaning.unwrap_or("");
        let name = match &c.native_name {
            Some(n) => format!("{} ({n})", c.name),
            None => c.name.clone(),
        };
        match b.mode {
            Mode::Snapshot => t.add_row(vec![
                name,
                c.value.map(|v| v.to_string()).unwrap_or_default(),
                signals,
                meaning.to_string(),
            ]),
            Mode::Delta => t.add_row(vec![
                name,
                c.delta.map(|d| format!("{d:+}")).unwrap_or_default(),
                c.rate_per_s.map(|r| format!("{r:.1}")).unwrap_or_default(),
                signals,
                meaning.to_string(),
            ]),
        };
    }
    table::align_right(
        &mut t,
        if b.mode == Mode::Snapshot {
            &[1]
        } else {
            &[1, 2]
        },
    );
    if shown.is_empty() {
        writeln!(w, "  (no relevant counter moved)")?;
    } else {
        writeln!(w, "{t}")?;
    }
    if b.unchanged > 0 && !all {
        writeln!(
            w,
            "  {} relevant counter(s) unchanged; --all shows every counter",
            b.unchanged
        )?;
    }
    writeln!(w)?;
    findings::write(w, &r.findings)?;
    writeln!(w)?;
    findings::verdict(w, r)
}
