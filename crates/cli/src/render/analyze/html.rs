//! The analyze report as one HTML page: the verdict and the ranked findings, then capture
//! facts, a timeline of the connections that waited longest (SYNs resent along the ladder,
//! idle gaps ended by a timeout, zero windows) and the microburst chart per time scale.

use tcpdoctor_analyze::timeline::{ConnTimeline, MarkKind};
use tcpdoctor_analyze::{Analysis, BurstRow};
use tcpdoctor_model::Report;
use tcpdoctor_report::chart::{self, Axis, Rgb, Series, Style, Unit, Xy};
use tcpdoctor_report::fmt;
use tcpdoctor_report::html::Page;

/// Connections shown on the timeline.
pub const WORST: usize = 8;

/// Lane labels longer than this are cut (the chart leaves ~30 characters for them).
const LABEL_CHARS: usize = 30;

/// The colour of a mark kind, the same in every analyze chart.
fn color(k: MarkKind) -> Rgb {
    match k {
        MarkKind::Syn => Rgb::BLUE,
        MarkKind::SynResent => Rgb::RED,
        MarkKind::SynAck => Rgb::GREEN,
        MarkKind::TimeoutGap => Rgb::ORANGE,
        MarkKind::ZeroWindow => Rgb::PURPLE,
        MarkKind::QuickRetransmission => Rgb::GOLD,
        MarkKind::Reset => Rgb::BROWN,
    }
}

/// The whole page. `capture` names the input and says what was read.
pub fn page<B>(report: &Report<B>, a: &Analysis, capture: &str, link_speed: Option<u64>) -> String {
    let mut p = Page::new("tcpdoctor analyze");
    p.header(
        report,
        &format!("{capture}, {}", fmt::micros(a.duration_us)),
    );
    // Findings first: what is wrong and what to do, before the evidence drawn below.
    p.findings(&report.findings);
    p.section("The capture");
    let t = &a.totals;
    p.facts(&[
        (
            "connections",
            format!(
                "{} ({} with handshake, {} reused 4-tuples)",
                t.connections, t.connections_with_handshake, t.reused_ports
            ),
        ),
        (
            "payload",
            format!(
                "{} in {} data segments",
                fmt::bytes(t.payload_bytes),
                t.data_segments
            ),
        ),
        (
            "retransmissions",
            format!(
                "{} ({} after timeout, {} fast, {} TLP, {} SYN, {} other)",
                t.retransmissions,
                t.retransmissions_rto,
                t.retransmissions_fast,
                t.retransmissions_tlp,
                t.retransmissions_syn,
                t.retransmissions_other
            ),
        ),
        ("zero-window ads", t.zero_window_ads.to_string()),
        ("resets", t.resets.to_string()),
    ]);

    p.section("Connections that waited longest");
    worst(&mut p, &a.worst_connections, a.first_ts_ns.unwrap_or(0));

    p.section("Microbursts");
    bursts(&mut p, &a.microbursts, link_speed);

    p.footer(
        "Written by tcpdoctor analyze from the capture alone: nothing here was measured live.",
    );
    p.finish()
}

/// `client > :port` (the server's address is in the table below the chart).
fn lane_label(w: &ConnTimeline) -> String {
    let port = w.server.rsplit(':').next().unwrap_or_default();
    let mut s = format!("{} > :{port}", w.client);
    if w.incarnation > 1 {
        s += &format!(" #{}", w.incarnation);
    }
    if s.chars().count() > LABEL_CHARS {
        s = s.chars().take(LABEL_CHARS - 1).collect::<String>() + "…";
    }
    s
}

/// The timeline chart (each connection from its own first packet, so that the SYN ladder's
/// rungs line up) and a table of the same connections.
fn worst(p: &mut Page, worst: &[ConnTimeline], origin_ns: u64) {
    if worst.is_empty() {
        p.note("No connection waited on a resent SYN, a retransmission timeout or a zero window.");
        return;
    }
    let s = |ns: u64| ns as f64 / 1e9;
    let kinds: Vec<MarkKind> = MarkKind::ALL
        .into_iter()
        .filter(|k| worst.iter().any(|w| w.marks.iter().any(|m| m.kind == *k)))
        .collect();
    let lanes = worst
        .iter()
        .map(|w| chart::Lane {
            label: lane_label(w),
            span_s: (0.0, s(w.last_ts_ns.saturating_sub(w.first_ts_ns))),
            marks: w
                .marks
                .iter()
                .filter_map(|m| {
                    Some(chart::Mark {
                        start_s: s(m.start_ns.saturating_sub(w.first_ts_ns)),
                        end_s: m.end_ns.map(|e| s(e.saturating_sub(w.first_ts_ns))),
                        kind: kinds.iter().position(|k| *k == m.kind)?,
                    })
                })
                .collect(),
        })
        .collect();
    let tl = chart::Timeline {
        title: match worst.len() {
            1 => "The connection that waited longest".to_string(),
            n => format!("The {n} connections that waited longest"),
        },
        kinds: kinds
            .iter()
            .map(|k| (k.label().to_string(), color(*k)))
            .collect(),
        lanes,
    };
    p.chart(
        tl.draw(),
        "Each connection from its own first packet (grey: its life in the capture), longest \
         wait on top. Waiting counts the connect time after a resent SYN, idle gaps that a \
         retransmission timeout ended, and zero-window time.",
    );
    let rows: Vec<Vec<String>> = worst
        .iter()
        .map(|w| {
            let n = |k: MarkKind| w.marks.iter().filter(|m| m.kind == k).count().to_string();
            vec![
                format!("{} > {}", w.client, w.server),
                w.incarnation.to_string(),
                fmt::micros(w.first_ts_ns.saturating_sub(origin_ns) / 1_000),
                fmt::micros(w.last_ts_ns.saturating_sub(w.first_ts_ns) / 1_000),
                fmt::micros(w.stalled_ns / 1_000),
                n(MarkKind::SynResent),
                n(MarkKind::TimeoutGap),
                n(MarkKind::ZeroWindow),
                n(MarkKind::QuickRetransmission),
                w.marks
                    .first()
                    .map_or_else(|| "-".into(), |m| m.frame.to_string()),
            ]
        })
        .collect();
    p.table(
        &[
            "connection",
            "incarnation",
            "started at",
            "lasted",
            "waited",
            "SYN resends",
            "timeouts",
            "zero windows",
            "quick retransmissions",
            "first marked frame",
        ],
        &rows,
        &[1, 2, 3, 4, 5, 6, 7, 8, 9],
    );
    let dropped: u32 = worst.iter().map(|w| w.marks_dropped).sum();
    if dropped > 0 {
        p.note(&format!(
            "{dropped} later marks of these connections are not drawn (each keeps its first {}).",
            tcpdoctor_analyze::timeline::MARKS_MAX
        ));
    }
}

/// Peak and average rate per time scale against the link speed.
fn bursts(p: &mut Page, rows: &[BurstRow], link_speed: Option<u64>) {
    if rows.is_empty() {
        p.note("No payload: nothing to measure.");
        return;
    }
    let pts = |f: &dyn Fn(&BurstRow) -> f64| -> Vec<(f64, f64)> {
        rows.iter()
            .map(|r| (r.resolution_us as f64, f(r)))
            .collect()
    };
    let mut series = vec![
        Series {
            name: "peak rate in one bin".into(),
            color: Rgb::RED,
            style: Style::LinePoints,
            points: pts(&|r| r.max_bits_per_s),
        },
        Series {
            name: "average rate".into(),
            color: Rgb::BLUE,
            style: Style::LinePoints,
            points: pts(&|r| r.avg_bits_per_s),
        },
    ];
    if let Some(l) = link_speed {
        series.push(Series {
            name: format!("link speed {}", fmt::bitrate(l as f64)),
            color: Rgb::GREY,
            style: Style::Line,
            points: pts(&|_| l as f64),
        });
    }
    let chart = Xy {
        title: "Rate per time scale".into(),
        x: Axis::log("bin width", Unit::Micros),
        y: Axis::log("payload rate", Unit::BitsPerSecond),
        series,
    };
    let caption = match link_speed {
        Some(_) => {
            "TCP payload of the busiest bin of each width as a rate, against the average \
                    and the link speed: a peak at the link speed in short bins with a low \
                    average is a microburst that fills queues."
        }
        None => {
            "TCP payload of the busiest bin of each width as a rate, against the average \
                 (give --link-speed to compare them with the link)."
        }
    };
    p.chart(chart.draw(), caption);
    let table: Vec<Vec<String>> = rows
        .iter()
        .map(|m| {
            vec![
                fmt::micros(m.resolution_us),
                fmt::bytes(m.max_bytes),
                fmt::bytes(m.avg_bytes as u64),
                fmt::bitrate(m.max_bits_per_s),
                fmt::bitrate(m.avg_bits_per_s),
                format!("{:.1}", m.max_to_avg_ratio),
                m.peak_link_share
                    .map(|v| format!("{:.0}%", 100.0 * v))
                    .unwrap_or_else(|| "-".into()),
            ]
        })
        .collect();
    p.table(
        &[
            "bin",
            "max",
            "avg",
            "max rate",
            "avg rate",
            "max/avg",
            "peak/link",
        ],
        &table,
        &[0, 1, 2, 3, 4, 5, 6],
    );
}
