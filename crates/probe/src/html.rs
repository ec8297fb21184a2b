//! The probe's HTML report: the verdict and the findings first, then latency over time with
//! every slow request coloured by its cause, the latency histogram, where the time went (a
//! waterfall of the slowest requests with each part coloured, TCP's timers by cause, and the
//! histogram of the server's time), and the tables of the text report. Built from the
//! records and spikes of a run; pure (no clock, no files).

use std::collections::BTreeMap;

use tcpdoctor_model::Report;
use tcpdoctor_report::chart::{
    self, Axis, Bars, Lane, Mark, Rgb, Series, Style, Timeline, Unit, Xy,
};
use tcpdoctor_report::fmt;
use tcpdoctor_report::html::Page;

use crate::classify::{Spike, SpikeCause};
use crate::record::{Outcome, Record};
use crate::split::{self, Component};
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
        SpikeCause::ServerResponse => component_color(Component::Server),
        SpikeCause::NetworkLatency => component_color(Component::Network),
        SpikeCause::Unexplained => Rgb::GREY,
    }
}

/// The colour of a part of a request's time (TCP timer parts take their cause's colour).
pub fn component_color(c: Component) -> Rgb {
    match c {
        Component::Network => Rgb(0x5d, 0x9c, 0xd6),
        Component::Tls => Rgb(0x34, 0x49, 0x5e),
        Component::Server => Rgb::GREEN,
        Component::Transfer => Rgb::GOLD,
        Component::TcpTimer => Rgb::RED,
        Component::Client => Rgb(0xbd, 0xbd, 0xbd),
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
    header(&mut p, report);
    // Findings first: what is wrong and what to do, before the evidence drawn below.
    p.findings(&report.findings);
    run_facts(&mut p, s);
    over_time_section(&mut p, s, records, spikes);
    histogram_section(&mut p, records);
    time_split(&mut p, s, records, spikes);
    phases_table(&mut p, s);
    causes_table(&mut p, s);
    unanswered_table(&mut p, s);
    errors_table(&mut p, s);
    counters_table(&mut p, s);
    p.finish()
}

/// The page's header: the verdict, and what was probed (mode, target, workers, duration).
fn header(p: &mut Page, report: &Report<Summary>) {
    let s = &report.body;
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
}

/// "The run": requests, failures, connections, ports, slow requests, CPU contention.
fn run_facts(p: &mut Page, s: &Summary) {
    p.section("The run");
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
}

/// "Latency over time": the chart of each request's latency by when it started, slow ones
/// coloured by cause.
fn over_time_section(p: &mut Page, s: &Summary, records: &[Record], spikes: &[Spike]) {
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
}

/// "Latency histogram" of the successful requests, on a log count scale.
fn histogram_section(p: &mut Page, records: &[Record]) {
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
}

/// The table of phase latencies of the successful requests (when any succeeded).
fn phases_table(p: &mut Page, s: &Summary) {
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
}

/// The table of slow requests by cause (when any).
fn causes_table(p: &mut Page, s: &Summary) {
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
}

/// The table of requests left unanswered, by what they waited for (when any).
fn unanswered_table(p: &mut Page, s: &Summary) {
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
}

/// The table of errors by errno and phase (when any).
fn errors_table(p: &mut Page, s: &Summary) {
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
}

/// The table of kernel counters that moved during the run (when any).
fn counters_table(p: &mut Page, s: &Summary) {
    if !s.counters.is_empty() {
        p.section("Kernel counters that moved");
        let rows: Vec<Vec<String>> = s
            .counters
            .iter()
            .map(|c| vec![c.name.clone(), format!("{:+}", c.delta), c.meaning.clone()])
            .collect();
        p.table(&["counter", "delta", "meaning"], &rows, &[1]);
    }
}

/// At most this many slow requests get a lane in the waterfall (the slowest).
const WATERFALL_LANES: usize = 24;

/// Where the time went: the headline, the parts' table, a waterfall of the slowest requests
/// (each part coloured, TCP's timer parts by cause) and the histogram of the server's time.
fn time_split(p: &mut Page, s: &Summary, records: &[Record], spikes: &[Spike]) {
    let t = &s.time_split;
    if t.requests == 0 {
        return;
    }
    p.section("Where the time went");
    p.paragraph(&t.headline);
    // Without a slow request the slow columns would show latencies nobody measured.
    let slow = t.slow_requests > 0;
    let rows: Vec<Vec<String>> = t
        .components
        .iter()
        .filter(|c| c.max_us > 0 || c.slow_dominated > 0)
        .map(|c| {
            let mut row = vec![
                c.component.to_string(),
                c.component.describe().to_string(),
                fmt::micros(c.p50_us),
                fmt::micros(c.p99_us),
                fmt::micros(c.max_us),
                format!("{:.0}%", c.share * 100.0),
            ];
            if slow {
                row.extend([
                    c.slow_dominated.to_string(),
                    fmt::micros(c.slow_p50_us),
                    fmt::micros(c.slow_p99_us),
                ]);
            }
            row
        })
        .collect();
    let mut head = vec!["part", "covers", "p50", "p99", "max", "share of the time"];
    if slow {
        head.extend(["largest part of slow requests", "slow p50", "slow p99"]);
    }
    let right: Vec<usize> = (2..head.len()).collect();
    p.table(&head, &rows, &right);
    if spikes.is_empty() {
        p.note(&format!(
            "No request was slower than {}: no waterfall.",
            fmt::micros(s.spikes.threshold_us)
        ));
    } else {
        let (tl, shown) = waterfall(spikes);
        p.chart(
            tl.draw_along("time since the request started"),
            &format!(
                "The {shown} slowest of {} slow requests, each from its own start, slowest on \
                 top, labelled by local port and cause. Network: the handshake and the \
                 request's round trip (the kernel's round trip of the connection where it was \
                 read, else the handshake); server: the first-byte wait less that round trip; \
                 TCP's timer parts in the colour of their cause. Inside the first-byte wait the \
                 round trip is drawn before the server's time: a client cannot see their \
                 order.",
                spikes.len()
            ),
        );
    }
    // The server's part needs only the path's round trip of the baseline (the rest splits
    // timer parts, which only spikes have).
    let base = split::Baseline {
        path_rtt_ns: t.path_rtt_us * 1_000,
        ..split::Baseline::default()
    };
    let spike_of: BTreeMap<usize, &Spike> = spikes.iter().map(|sp| (sp.record, sp)).collect();
    let server_us: Vec<u64> = records
        .iter()
        .enumerate()
        .filter(|(_, r)| r.is_ok())
        .map(|(i, r)| {
            let b = spike_of
                .get(&i)
                .map_or_else(|| split::attribute(r, &base, None), |sp| sp.split);
            b.server_ns / 1_000
        })
        .collect();
    if server_us.iter().any(|&us| us > 0) {
        let h = Bars::histogram(
            "Server time of the completed requests",
            &chart::log_buckets_us(&server_us),
            Axis::log("requests", Unit::Count),
            "server time: first-byte wait less the path's round trip (bucket lower bound)",
        );
        p.chart(
            h.draw(),
            "Requests per bucket of server time (1-2-5 steps per decade; count on a log scale).",
        );
    }
}

/// The waterfall of the slowest spikes, and how many it shows.
fn waterfall(spikes: &[Spike]) -> (Timeline, usize) {
    let mut slowest: Vec<&Spike> = spikes.iter().collect();
    slowest.sort_by_key(|sp| std::cmp::Reverse(sp.total_us));
    slowest.truncate(WATERFALL_LANES);
    // Mark kinds: the parts, then each TCP cause seen.
    let mut kinds: Vec<(String, Rgb)> = Vec::new();
    let mut kind_of = |label: String, color: Rgb| -> usize {
        match kinds.iter().position(|k| k.0 == label) {
            Some(i) => i,
            None => {
                kinds.push((label, color));
                kinds.len() - 1
            }
        }
    };
    let mut lanes = Vec::new();
    for sp in &slowest {
        let mut at = 0.0;
        let mut marks = Vec::new();
        for (part, cause, ns) in sp.split.segments() {
            let (label, color) = match (part, cause) {
                (Component::TcpTimer, Some(c)) => {
                    (format!("TCP: {}", timer_label(&c)), cause_color(&c))
                }
                (c, _) => (format!("{c} ({})", c.describe()), component_color(c)),
            };
            let d = ns as f64 / 1e9;
            marks.push(Mark {
                start_s: at,
                end_s: Some(at + d),
                kind: kind_of(label, color),
            });
            at += d;
        }
        lanes.push(Lane {
            label: format!(
                "{} {} {}",
                sp.local_port,
                short_cause(&sp.cause),
                fmt::micros(sp.total_us)
            ),
            span_s: (0.0, sp.total_us as f64 / 1e6),
            marks,
        });
    }
    let shown = lanes.len();
    let tl = Timeline {
        title: format!("Where the time of the {shown} slowest requests went"),
        kinds,
        lanes,
    };
    (tl, shown)
}

/// A TCP cause without its attempt number (one colour per cause).
fn timer_label(c: &SpikeCause) -> String {
    match c {
        SpikeCause::SynRetransmit { .. } => "SYN retransmission".into(),
        c => c.label(),
    }
}

/// A lane's cause, short enough for the lane label.
fn short_cause(c: &SpikeCause) -> String {
    match c {
        SpikeCause::SynRetransmit { attempt } => format!("SYN #{attempt}"),
        SpikeCause::StaleAckResend => "stale ACK".into(),
        SpikeCause::DataRto => "RTO".into(),
        SpikeCause::DelayedAck => "delayed ACK".into(),
        SpikeCause::AcceptQueueOverflow => "accept queue".into(),
        SpikeCause::ServerResponse => "server".into(),
        SpikeCause::NetworkLatency => "network".into(),
        SpikeCause::Unexplained => "unexplained".into(),
    }
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
