//! The probe's HTML report: latency over time with every slow request coloured by its cause,
//! the latency histogram, and the tables and findings of the text report. Built from the
//! records and spikes of a run; pure (no clock, no files).

use std::collections::BTreeMap;

use tcpdoctor_model::Report;
use tcpdoctor_report::chart::{self, Axis, Bars, Rgb, Series, Style, Unit, Xy};
use tcpdoctor_report::fmt;
use tcpdoctor_report::html::Page;

use crate::classify::{Spike, SpikeCause};
use crate::record::{Outcome, Record};
use crate::stats::{Stage, Summary};

/// At most this many time buckets on the latency-over-time chart.
const BUCKETS: u64 = 200;
/// At most this many dots per series (the rest are counted in the caption).
const MAX_DOTS: usize = 4_000;

/// The colour of a cause, the same in every chart.
pub fn cause_color(c: &SpikeCause) -> Rgb {
    match c {
        SpikeCause::SynRetransmit { .. } => Rgb::RED,
        SpikeCause::StaleAckResend => Rgb::PURPLE,
        SpikeCause::DataRto => Rgb::ORANGE,
        SpikeCause::DelayedAck => Rgb::TEAL,
        SpikeCause::AcceptQueueOverflow => Rgb::BROWN,
        SpikeCause::Unexplained => Rgb::GREY,
    }
}

/// Nanoseconds to microseconds, the charts' unit.
fn us(ns: u64) -> f64 {
    ns as f64 / 1e3
}

/// The whole page.
pub fn page(report: &Report<Summary>, records: &[Record], spikes: &[Spike]) -> String {
    let s = &report.body;
    let mut p = Page::new("tcpdoctor probe");
    let mode = match (&s.url, s.keepalive) {
        (Some(u), Some(k)) => format!("http {u} keep-alive {}", if k { "on" } else { "off" }),
        _ => s.mode.clone(),
    };
    let server = if s.embedded_server.is_some() {
        " (embedded server)"
    } else {
        ""
    };
    p.header(
        report,
        &format!(
            "{mode} to {}{server}, {} workers, {}",
            s.target,
            s.concurrency,
            fmt::micros(s.elapsed_us)
        ),
    );
    let mut facts = vec![
        (
            "requests ok",
            format!("{} ({}/s)", s.requests_ok, fmt::count(s.requests_ok_per_s)),
        ),
        ("failed", s.requests_failed.to_string()),
        ("cut at the end", s.requests_cut.to_string()),
        (
            "connections opened",
            format!(
                "{} ({}/s)",
                s.connections_opened,
                fmt::count(s.connections_per_s)
            ),
        ),
        ("local ports used", s.local_ports_used.to_string()),
        (
            "slow requests",
            format!(
                "{} (total above {})",
                s.spikes.count,
                fmt::micros(s.spikes.threshold_us)
            ),
        ),
    ];
    if let Some(c) = s.cpu_wait {
        facts.push(("CPU contention", crate::render::cpu_wait_text(&c)));
    }
    p.facts(&facts);

    p.section("Latency over time");
    let (over_time, dropped) = latency_over_time(s, records, spikes);
    let mut caption = format!(
        "Total latency of each request (from its scheduled start) by when it started: median, \
         p99 and maximum of the successful ones per {}; slow requests (above {}) as dots \
         coloured by cause; failed and unanswered requests at the time they waited.",
        fmt::micros(bucket_us(s)),
        fmt::micros(s.spikes.threshold_us)
    );
    if dropped > 0 {
        caption += &format!(" {dropped} dots beyond {MAX_DOTS} per series are not drawn.");
    }
    p.chart(over_time.draw(), &caption);

    p.section("Latency histogram");
    let totals: Vec<u64> = records
        .iter()
        .filter(|r| r.is_ok())
        .map(|r| r.total_ns() / 1_000)
        .collect();
    if totals.is_empty() {
        p.note("No request completed: nothing to draw.");
    } else {
        let h = Bars::histogram(
            "Total latency of successful requests",
            &chart::log_buckets_us(&totals),
            Axis::log("requests", Unit::Count),
            "total latency (bucket lower bound)",
        );
        p.chart(
            h.draw(),
            "Requests per latency bucket (1-2-5 steps per decade), count on a log scale so \
             that a handful of slow requests stays visible next to thousands of fast ones.",
        );
    }

    if !s.phases.is_empty() && s.requests_ok > 0 {
        p.section("Latency of successful requests");
        let rows: Vec<Vec<String>> = s
            .phases
            .iter()
            .map(|ph| {
                let mut r = vec![ph.phase.to_string(), ph.count.to_string()];
                for us in [
                    ph.min_us,
                    ph.p50_us,
                    ph.p90_us,
                    ph.p99_us,
                    ph.p999_us,
                    ph.p9999_us,
                    ph.max_us,
                ] {
                    r.push(fmt::micros(us));
                }
                r
            })
            .collect();
        p.table(
            &[
                "phase", "count", "min", "p50", "p90", "p99", "p99.9", "p99.99", "max",
            ],
            &rows,
            &[1, 2, 3, 4, 5, 6, 7, 8],
        );
    }
    if !s.spikes.groups.is_empty() {
        p.section("Slow requests by cause");
        let rows: Vec<Vec<String>> = s
            .spikes
            .groups
            .iter()
            .map(|g| {
                vec![
                    g.label.clone(),
                    g.count.to_string(),
                    g.corroborated.to_string(),
                    fmt::micros(g.typical_phase_us),
                    fmt::micros(g.max_total_us),
                ]
            })
            .collect();
        p.table(
            &[
                "cause",
                "count",
                "corroborated by counters",
                "typical slow phase",
                "max total",
            ],
            &rows,
            &[1, 2, 3, 4],
        );
    }
    if !s.unanswered.is_empty() {
        p.section("Unanswered");
        let rows: Vec<Vec<String>> = s
            .unanswered
            .iter()
            .map(|u| {
                vec![
                    match u.stage {
                        Stage::Handshake => "SYN-ACK".into(),
                        Stage::Reply => "reply".into(),
                    },
                    u.count.to_string(),
                    u.timed_out.to_string(),
                    u.cut.to_string(),
                    format!(
                        "{}..{}",
                        fmt::micros(u.min_wait_us),
                        fmt::micros(u.max_wait_us)
                    ),
                ]
            })
            .collect();
        p.table(
            &["waiting for", "count", "timed out", "cut at end", "waited"],
            &rows,
            &[1, 2, 3],
        );
    }
    if !s.errors.is_empty() {
        p.section("Errors");
        let rows: Vec<Vec<String>> = s
            .errors
            .iter()
            .map(|e| {
                vec![
                    e.errno.clone(),
                    format!("{:?}", e.phase).to_lowercase(),
                    e.count.to_string(),
                    fmt::micros(e.first_at_us),
                ]
            })
            .collect();
        p.table(&["error", "phase", "count", "first at"], &rows, &[2, 3]);
    }
    if !s.counters.is_empty() {
        p.section("Kernel counters that moved");
        let rows: Vec<Vec<String>> = s
            .counters
            .iter()
            .map(|c| vec![c.name.clone(), format!("{:+}", c.delta), c.meaning.clone()])
            .collect();
        p.table(&["counter", "delta", "meaning"], &rows, &[1]);
    }
    p.findings(&report.findings);
    p.finish()
}

/// Width of one time bucket: the run split in at most [`BUCKETS`], at least 10 ms.
fn bucket_us(s: &Summary) -> u64 {
    (s.elapsed_us / BUCKETS).max(10_000)
}

/// The chart, and how many dots were left out.
fn latency_over_time(s: &Summary, records: &[Record], spikes: &[Spike]) -> (Xy, usize) {
    let width_ns = bucket_us(s) * 1_000;
    let mut buckets: BTreeMap<u64, Vec<u64>> = BTreeMap::new();
    for r in records.iter().filter(|r| r.is_ok()) {
        buckets
            .entry(r.scheduled_ns / width_ns)
            .or_default()
            .push(r.total_ns());
    }
    let (mut p50, mut p99, mut max) = (Vec::new(), Vec::new(), Vec::new());
    let mut previous = None;
    for (b, mut v) in buckets {
        v.sort_unstable();
        let x = (b as f64 + 0.5) * width_ns as f64 / 1e9;
        // No request completed in the buckets between: break the lines there.
        if previous.is_some_and(|p| b > p + 1) {
            for l in [&mut p50, &mut p99, &mut max] {
                l.push((x, f64::NAN));
            }
        }
        previous = Some(b);
        let at = |q: f64| v[((v.len() - 1) as f64 * q).round() as usize];
        p50.push((x, us(at(0.5))));
        p99.push((x, us(at(0.99))));
        max.push((x, us(at(1.0))));
    }
    let line = |name: &str, color, points| Series {
        name: name.into(),
        color,
        style: Style::Line,
        points,
    };
    let mut series = vec![
        line("maximum", Rgb(0xa9, 0xc8, 0xe8), max),
        line("p99", Rgb(0x5d, 0x9c, 0xd6), p99),
        line("median", Rgb::BLUE, p50),
    ];
    let mut dropped = 0;
    let mut dots: BTreeMap<String, (Rgb, Vec<(f64, f64)>)> = BTreeMap::new();
    let mut push = |label: String, color: Rgb, x: f64, y: f64| {
        let e = dots.entry(label).or_insert((color, Vec::new()));
        if e.1.len() < MAX_DOTS {
            e.1.push((x, y));
        } else {
            dropped += 1;
        }
    };
    for sp in spikes {
        if let Some(r) = records.get(sp.record) {
            let label = match sp.cause {
                SpikeCause::SynRetransmit { .. } => "SYN retransmission".to_string(),
                c => c.label(),
            };
            push(
                label,
                cause_color(&sp.cause),
                r.scheduled_ns as f64 / 1e9,
                us(r.total_ns()),
            );
        }
    }
    for r in records {
        let label = match r.outcome {
            Outcome::Ok => continue,
            Outcome::Error { .. } => "failed",
            // Cut requests that waited briefly are the run's end, not a symptom.
            Outcome::Cut { .. } if r.stopped_phase_wait_ns() / 1_000 < s.spikes.threshold_us => {
                continue
            }
            Outcome::Cut { .. } => "unanswered, cut at the end",
        };
        let color = if label == "failed" {
            Rgb::PINK
        } else {
            Rgb::GOLD
        };
        push(
            label.to_string(),
            color,
            r.scheduled_ns as f64 / 1e9,
            us(r.total_ns()),
        );
    }
    for (name, (color, points)) in dots {
        series.push(Series {
            name,
            color,
            style: Style::Points,
            points,
        });
    }
    let chart = Xy {
        title: "Latency over time".into(),
        x: Axis::linear("time since the start of the run", Unit::Seconds)
            .with_range(0.0, (s.elapsed_us as f64 / 1e6).max(0.001)),
        y: Axis::log("total latency", Unit::Micros),
        series,
    };
    (chart, dropped)
}
