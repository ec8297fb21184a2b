//! `tcpdoctor counters`: the JSON document ([`Body`]: live or saved, snapshot or delta, one
//! [`Row`] per counter) and its human text.

use std::collections::BTreeMap;
use std::io::{self, Write};
use std::path::PathBuf;

use serde::Serialize;
use std::time::Duration;

use tcpdoctor_model::counters::{self as meaning, COUNTERS};
use tcpdoctor_model::{Measured, Pathology, Report};
use tcpdoctor_report::{findings, table};

use crate::counters::Snapshot;
use crate::saved::{Format, Saved, Unparsed};

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
            "TCP counters{ns}: change over {}",
            tcpdoctor_model::units::ms_or_s_coarse(std::time::Duration::from_millis(ms))
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

fn row(name: &str) -> Row {
    let info = meaning::info(name);
    Row {
        name: name.to_string(),
        value: None,
        delta: None,
        rate_per_s: None,
        meaning: info.map(|i| i.meaning),
        pathology: info.and_then(|i| i.pathology),
        native_name: None,
    }
}

/// The report of one snapshot (totals since boot: nothing judged), every counter with
/// `all`, else the relevant ones; `saved` names the file's own names of the counters.
pub fn snapshot_report(
    all: bool,
    netns: Option<String>,
    snap: &Snapshot,
    saved: Option<&Saved>,
    files: Vec<FileInfo>,
) -> Report<Body> {
    let names: Vec<String> = if all {
        snap.values.keys().cloned().collect()
    } else {
        COUNTERS
            .iter()
            .filter(|c| snap.values.contains_key(c.name))
            .map(|c| c.name.to_string())
            .collect()
    };
    let counters = names
        .iter()
        .map(|n| Row {
            value: snap.get(n),
            native_name: saved.and_then(|s| s.mapped.get(n).cloned()),
            ..row(n)
        })
        .collect();
    Report::new(
        "counters",
        Vec::new(),
        Body {
            mode: Mode::Snapshot,
            source: "live",
            netns,
            interval_ms: None,
            sample: None,
            snapshot_duration_us: None,
            rto_floor_us: None,
            counters,
            unchanged: 0,
            files,
        },
        Measured::Nothing(
            "a snapshot holds totals since boot; judge a window with --interval or --from/--to"
                .into(),
        ),
    )
}

/// The report of saved counter files: `from` alone (a snapshot) or `from` to `to` (a delta),
/// each with the name it is shown by. Refused, with the reason, when the two were saved by
/// tools that name and cover different counters, or when a counter went backwards between
/// them (files swapped, or a reboot in between).
pub fn saved_report(
    all: bool,
    netns: Option<String>,
    from: (&Saved, &str),
    to: Option<(&Saved, &str)>,
) -> Result<Report<Body>, String> {
    let (a, a_name) = from;
    let mut files = vec![file_info(a_name, a)];
    let mut report = match to {
        None => snapshot_report(all, netns, &a.snapshot, Some(a), files),
        Some((b, b_name)) => {
            if !a.format.comparable(b.format) {
                return Err(format!(
                    "cannot compare {a_name} ({}) with {b_name} ({}): different tools name and cover different counters; save both with the same command",
                    a.format.name(),
                    b.format.name()
                ));
            }
            let back = b.snapshot.went_backwards(&a.snapshot);
            if let Some(first) = back
                .iter()
                .find(|b| b.name.starts_with("Tcp"))
                .or(back.first())
            {
                let more = match back.len() {
                    1 => String::new(),
                    n => format!(" and {} more", n - 1),
                };
                return Err(format!(
                    "counters went backwards from {a_name} to {b_name} ({} {} -> {}{more}): files swapped or host rebooted?",
                    first.name, first.before, first.after
                ));
            }
            files.push(file_info(b_name, b));
            let mut r = delta_report(all, netns, &a.snapshot, &b.snapshot, None, None, files);
            for row in &mut r.body.counters {
                row.native_name = b.mapped.get(&row.name).cloned();
            }
            r
        }
    };
    report.body.source = "saved";
    Ok(report)
}

/// What the report says of one saved file, shown as `name`.
fn file_info(name: &str, s: &Saved) -> FileInfo {
    FileInfo {
        path: PathBuf::from(name),
        format: s.format,
        format_name: s.format.name(),
        mapped: s.mapped.clone(),
        unmapped: s.unmapped.clone(),
        unparsed: s.unparsed.clone(),
    }
}

/// The report of the change between two snapshots `elapsed` apart (unknown between two
/// saved files): each counter's change and rate (none for a level), the findings of the
/// counters that moved, timeouts judged against `rto_floor`.
pub fn delta_report(
    all: bool,
    netns: Option<String>,
    before: &Snapshot,
    after: &Snapshot,
    elapsed: Option<Duration>,
    rto_floor: Option<Duration>,
    files: Vec<FileInfo>,
) -> Report<Body> {
    let delta = after.delta_since(before);
    let secs = elapsed.map(|e| e.as_secs_f64()).filter(|s| *s > 0.0);
    // A level (TcpCurrEstab) has a change but no rate: connections per second "established"
    // would read as a rate of new connections, which it is not.
    let gauge = |n: &str| tcpdoctor_model::counters::info(n).is_some_and(|c| c.gauge);
    let mk = |n: &str| Row {
        value: after.get(n),
        delta: Some(delta.get(n)),
        rate_per_s: secs.filter(|_| !gauge(n)).map(|s| delta.get(n) as f64 / s),
        ..row(n)
    };
    let (counters, unchanged): (Vec<Row>, u64) = if all {
        (delta.changed.keys().map(|n| mk(n)).collect(), 0)
    } else {
        let present: Vec<&str> = COUNTERS
            .iter()
            .map(|c| c.name)
            .filter(|n| after.values.contains_key(*n) || before.values.contains_key(*n))
            .collect();
        let unchanged = present.iter().filter(|n| delta.get(n) == 0).count() as u64;
        (present.into_iter().map(mk).collect(), unchanged)
    };
    let window_ms = elapsed.map(|e| e.as_millis() as u64);
    let findings = meaning::findings(
        &delta.changed,
        meaning::Window {
            length: elapsed,
            rto_floor,
        },
    );
    let measured = Measured::Something(match elapsed {
        Some(e) => format!(
            "counter deltas over {}",
            tcpdoctor_model::units::ms_or_s_coarse(e)
        ),
        None => "counter deltas between two saved snapshots".into(),
    });
    Report::new(
        "counters",
        findings,
        Body {
            mode: Mode::Delta,
            source: "live",
            netns,
            interval_ms: window_ms,
            sample: None,
            snapshot_duration_us: None,
            rto_floor_us: rto_floor.map(|d| d.as_micros() as u64),
            counters,
            unchanged,
            files,
        },
        measured,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Issue 24: counters gave TcpCurrEstab, a level, a rate per second.
    #[test]
    fn a_level_gets_a_change_but_no_rate() {
        let snap = |estab: u64, opens: u64| Snapshot {
            values: [
                ("TcpCurrEstab".to_string(), estab),
                ("TcpActiveOpens".to_string(), opens),
            ]
            .into(),
        };
        let r = delta_report(
            true,
            None,
            &snap(10, 100),
            &snap(30, 300),
            Some(Duration::from_secs(2)),
            None,
            Vec::new(),
        );
        let row = |n: &str| r.body.counters.iter().find(|c| c.name == n).unwrap();
        assert_eq!(row("TcpCurrEstab").delta, Some(20));
        assert_eq!(row("TcpCurrEstab").rate_per_s, None);
        assert_eq!(row("TcpActiveOpens").rate_per_s, Some(100.0));
    }
}
