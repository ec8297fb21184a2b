//! The lab's charts (drawn by `tcpdoctor_report::chart`): the incast sweep (goodput against
//! sender count, one line per RTO floor; also as CSV and a stand-alone SVG), and the
//! connects of a port-exhaustion run per second.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;

use tcpdoctor_report::chart::{Axis, Rgb, Series, Style, Unit, Xy};
use tcpdoctor_report::fmt;

use crate::render::Chart;
use crate::scenario::harness::ProbeRun;
use crate::scenario::incast::Run;
use crate::{Error, Result};

/// CSV header of the sweep file.
pub const CSV_HEADER: &str = "senders,rto_min_us,rounds,slow_rounds,goodput_bits_per_s,round_p50_us,round_p99_us,round_max_us,rto_expiries,loss_probes,retrans_segs,bottleneck_drops";

/// The sweep as CSV text.
pub fn incast_csv(runs: &[Run]) -> String {
    let mut s = String::from(CSV_HEADER);
    s.push('\n');
    for r in runs {
        let _ = writeln!(
            s,
            "{},{},{},{},{:.0},{},{},{},{},{},{},{}",
            r.senders,
            r.rto_min_us,
            r.rounds,
            r.slow_rounds,
            r.goodput_bits_per_s,
            r.round_p50_us,
            r.round_p99_us,
            r.round_max_us,
            r.rto_expiries,
            r.loss_probes,
            r.retrans_segs,
            r.bottleneck_drops
                .map(|d| d.to_string())
                .unwrap_or_default()
        );
    }
    s
}

/// The sweep as a chart: goodput against sender count (log2 steps), one line per RTO floor.
pub fn incast_chart(runs: &[&Run]) -> Xy {
    let mut lines: BTreeMap<u64, Vec<(f64, f64)>> = BTreeMap::new();
    for r in runs {
        lines
            .entry(r.rto_min_us)
            .or_default()
            .push((f64::from(r.senders), r.goodput_bits_per_s));
    }
    let max_n = runs.iter().map(|r| r.senders).max().unwrap_or(1).max(2);
    // Longest floor first (Linux's 200 ms before the remedy), each its own colour.
    let series = lines
        .into_iter()
        .rev()
        .enumerate()
        .map(|(i, (rto, mut points))| {
            points.sort_by(|a, b| a.0.total_cmp(&b.0));
            Series {
                name: format!("rto_min {}", fmt::micros(rto)),
                color: Rgb::PALETTE[i % Rgb::PALETTE.len()],
                style: Style::LinePoints,
                points,
            }
        })
        .collect();
    Xy {
        title: "Incast: goodput vs senders".into(),
        x: Axis::log("senders", Unit::Count).with_range(1.0, f64::from(max_n) * 1.15),
        y: Axis::linear("goodput", Unit::BitsPerSecond),
        series,
    }
}

/// Connects per second of each run that opens a connection per request: those that
/// succeeded, and those that failed with EADDRNOTAVAIL (the range spent) or otherwise, from
/// probe's per-second counts. `None` when no run opens a connection per request.
pub fn connects_per_second(runs: &[&ProbeRun]) -> Option<Chart> {
    let per_request: Vec<&ProbeRun> = runs
        .iter()
        .copied()
        .filter(|r| r.summary.mode == "crr")
        .collect();
    if per_request.is_empty() {
        return None;
    }
    let mut series = Vec::new();
    for (i, r) in per_request.iter().enumerate() {
        let failed: u64 = r.summary.errors.iter().map(|e| e.count).sum();
        let eaddrnotavail = r.errors("EADDRNOTAVAIL");
        // probe counts failures per second, not per errno: they are EADDRNOTAVAIL only when
        // every failure of the run was.
        let failed_name = if eaddrnotavail == failed {
            "EADDRNOTAVAIL"
        } else {
            "failed (EADDRNOTAVAIL and other errors)"
        };
        let points = |f: &dyn Fn(&tcpdoctor_probe::stats::SecondStats) -> u64| {
            r.summary
                .per_second
                .iter()
                .map(|s| (s.second as f64, f(s) as f64))
                .collect::<Vec<_>>()
        };
        let color = Rgb::PALETTE[i % Rgb::PALETTE.len()];
        series.push(Series {
            name: format!("connects ok: {}", r.label),
            color,
            style: Style::LinePoints,
            points: points(&|s| s.ok),
        });
        if failed > 0 {
            series.push(Series {
                name: format!("{failed_name}: {}", r.label),
                color,
                style: Style::Points,
                points: points(&|s| s.failed),
            });
        }
    }
    let left_out: Vec<&str> = runs
        .iter()
        .filter(|r| r.summary.mode != "crr")
        .map(|r| r.label.as_str())
        .collect();
    let mut caption = "Connects per second of each run (by the second they were due): those \
                       that succeeded, and those that found no free local port. Once the range \
                       is spent, only ports leaving TIME_WAIT (or reused) let a connect through."
        .to_string();
    if !left_out.is_empty() {
        caption += &format!(
            " Not drawn (one persistent connection per worker): {}.",
            left_out.join(", ")
        );
    }
    Some(Chart {
        section: "Connects per second".into(),
        xy: Xy {
            title: "Connects per second".into(),
            x: Axis::linear("second of the run", Unit::Seconds),
            y: Axis::linear("connects per second", Unit::Count),
            series,
        },
        caption,
    })
}

/// The sweep as a stand-alone SVG document (legend inside the plot).
pub fn incast_svg(runs: &[Run]) -> Result<String> {
    incast_chart(&runs.iter().collect::<Vec<_>>())
        .standalone_svg()
        .map_err(|e| Error::invalid("incast chart", e.to_string()))
}

/// Writes the CSV and the SVG.
pub fn write_incast_sweep(runs: &[Run], csv: &Path, svg: &Path) -> Result<()> {
    for (path, text) in [(csv, incast_csv(runs)), (svg, incast_svg(runs)?)] {
        std::fs::write(path, text).map_err(|source| Error::Write {
            path: path.to_path_buf(),
            source,
        })?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(n: u32, rto: u64, mbit: f64) -> Run {
        Run {
            senders: n,
            rto_min_us: rto,
            goodput_bits_per_s: mbit * 1e6,
            rounds: 10,
            ..Default::default()
        }
    }

    #[test]
    fn csv_and_svg_have_one_line_per_rto() {
        let runs = vec![
            run(1, 200_000, 900.0),
            run(8, 200_000, 200.0),
            run(1, 5_000, 910.0),
            run(8, 5_000, 600.0),
        ];
        let csv = incast_csv(&runs);
        assert_eq!(csv.lines().count(), 5);
        assert!(csv
            .lines()
            .nth(2)
            .unwrap()
            .starts_with("8,200000,10,0,200000000,"));
        let chart = incast_chart(&runs.iter().collect::<Vec<_>>());
        let names: Vec<&str> = chart.series.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["rto_min 200ms", "rto_min 5.00ms"]);
        assert_eq!(chart.series[1].points, [(1.0, 910e6), (8.0, 600e6)]);
        let svg = incast_svg(&runs).unwrap();
        assert!(
            svg.contains("rto_min 200ms") && svg.contains("rto_min 5.00ms"),
            "legend"
        );
        assert!(svg.contains("<svg") && svg.trim_end().ends_with("</svg>"));
    }
}
