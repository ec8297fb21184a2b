//! The incast sweep as CSV and as a hand-written SVG line chart: goodput against sender
//! count, one line per RTO floor.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;

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

const COLORS: [&str; 6] = [
    "#d62728", "#1f77b4", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b",
];

/// The sweep as an SVG line chart (x: senders on a log2 axis, y: goodput in Mbit/s).
pub fn incast_svg(runs: &[Run]) -> String {
    let (w, h, left, right, top, bottom) = (640.0, 400.0, 70.0, 150.0, 40.0, 50.0);
    let pw = w - left - right;
    let ph = h - top - bottom;
    let mut lines: BTreeMap<u64, Vec<(u32, f64)>> = BTreeMap::new();
    for r in runs {
        lines
            .entry(r.rto_min_us)
            .or_default()
            .push((r.senders, r.goodput_bits_per_s / 1e6));
    }
    let max_n = runs.iter().map(|r| r.senders).max().unwrap_or(1).max(2);
    let max_y = runs
        .iter()
        .map(|r| r.goodput_bits_per_s / 1e6)
        .fold(0.0, f64::max)
        .max(1.0);
    let y_top = (max_y / 100.0).ceil() * 100.0;
    let x_of = |n: u32| left + pw * (f64::from(n).log2() / f64::from(max_n).log2());
    let y_of = |v: f64| top + ph * (1.0 - v / y_top);
    let mut s = String::new();
    let _ = writeln!(
        s,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" font-family="sans-serif" font-size="12">"#
    );
    let _ = writeln!(s, r#"<rect width="{w}" height="{h}" fill="white"/>"#);
    let _ = writeln!(
        s,
        r#"<text x="{}" y="22" text-anchor="middle" font-size="14">incast: goodput vs senders</text>"#,
        left + pw / 2.0
    );
    // Axes and grid.
    for i in 0..=4 {
        let v = y_top * f64::from(i) / 4.0;
        let y = y_of(v);
        let _ = writeln!(
            s,
            r##"<line x1="{left}" y1="{y:.1}" x2="{:.1}" y2="{y:.1}" stroke="#ddd"/><text x="{:.1}" y="{:.1}" text-anchor="end">{v:.0}</text>"##,
            left + pw,
            left - 6.0,
            y + 4.0
        );
    }
    let mut n = 1;
    while n <= max_n {
        let x = x_of(n);
        let _ = writeln!(
            s,
            r##"<line x1="{x:.1}" y1="{top}" x2="{x:.1}" y2="{:.1}" stroke="#eee"/><text x="{x:.1}" y="{:.1}" text-anchor="middle">{n}</text>"##,
            top + ph,
            top + ph + 16.0
        );
        n *= 2;
    }
    let _ = writeln!(
        s,
        r##"<line x1="{left}" y1="{top}" x2="{left}" y2="{:.1}" stroke="black"/><line x1="{left}" y1="{:.1}" x2="{:.1}" y2="{:.1}" stroke="black"/>"##,
        top + ph,
        top + ph,
        left + pw,
        top + ph
    );
    let _ = writeln!(
        s,
        r#"<text x="{:.1}" y="{:.1}" text-anchor="middle">senders</text>"#,
        left + pw / 2.0,
        h - 12.0
    );
    let _ = writeln!(
        s,
        r#"<text transform="translate(18,{:.1}) rotate(-90)" text-anchor="middle">goodput (Mbit/s)</text>"#,
        top + ph / 2.0
    );
    for (i, (rto, pts)) in lines.iter().enumerate() {
        let color = COLORS[i % COLORS.len()];
        let path: Vec<String> = pts
            .iter()
            .map(|&(n, v)| format!("{:.1},{:.1}", x_of(n), y_of(v)))
            .collect();
        let _ = writeln!(
            s,
            r#"<polyline fill="none" stroke="{color}" stroke-width="2" points="{}"/>"#,
            path.join(" ")
        );
        for &(n, v) in pts {
            let _ = writeln!(
                s,
                r#"<circle cx="{:.1}" cy="{:.1}" r="3" fill="{color}"/>"#,
                x_of(n),
                y_of(v)
            );
        }
        let ly = top + 10.0 + 20.0 * i as f64;
        let _ = writeln!(
            s,
            r#"<line x1="{:.1}" y1="{ly:.1}" x2="{:.1}" y2="{ly:.1}" stroke="{color}" stroke-width="2"/><text x="{:.1}" y="{:.1}">rto_min {}</text>"#,
            left + pw + 15.0,
            left + pw + 35.0,
            left + pw + 40.0,
            ly + 4.0,
            fmt_us(*rto)
        );
    }
    s.push_str("</svg>\n");
    s
}

fn fmt_us(us: u64) -> String {
    if us >= 1000 && us.is_multiple_of(1000) {
        format!("{} ms", us / 1000)
    } else {
        format!("{us} us")
    }
}

/// Writes the CSV and the SVG.
pub fn write_incast_sweep(runs: &[Run], csv: &Path, svg: &Path) -> Result<()> {
    for (path, text) in [(csv, incast_csv(runs)), (svg, incast_svg(runs))] {
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
        let svg = incast_svg(&runs);
        assert_eq!(svg.matches("<polyline").count(), 2);
        assert!(svg.contains("rto_min 200 ms") && svg.contains("rto_min 5 ms"));
        assert!(svg.trim_end().ends_with("</svg>"));
    }
}
