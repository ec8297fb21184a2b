//! The analyze report as one HTML page: the verdict and the ranked findings, then capture
//! facts, where the time went (the services table, a waterfall of the slow exchanges the
//! findings named, each service's histogram of server time), a timeline of the connections
//! that waited longest (SYNs resent along the ladder, idle gaps ended by a timeout, zero
//! windows) and the microburst chart per time scale.

use crate::detect::SlowExchange;
use crate::timeline::{ConnTimeline, MarkKind};
use crate::{Analysis, BurstRow};
use tcpdoctor_model::Report;
use tcpdoctor_report::chart::{self, Axis, Bars, Rgb, Series, Style, Unit, Xy};
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

    p.section("Where the time went");
    time(&mut p, a);

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
            crate::timeline::MARKS_MAX
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
    let table: Vec<Vec<String>> = rows.iter().map(super::burst_cells).collect();
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

/// Services drawn with their histogram of server time (the busiest).
const HISTOGRAM_SERVICES: usize = 4;

/// The colour of an exchange's part, the same on every page (probe's waterfall uses these).
fn part_color(part: &str) -> Rgb {
    match part {
        "handshake" => Rgb::BLUE,
        "client" => Rgb::GOLD,
        "network" => Rgb::GREEN,
        "server" => Rgb::ORANGE,
        "transfer" => Rgb::PURPLE,
        _ => Rgb::RED,
    }
}

/// Where the time went: the services table, the waterfall of the slow exchanges the findings
/// named, and the busiest services' histograms of server time.
fn time(p: &mut Page, a: &Analysis) {
    if a.services.is_empty() {
        p.note("No exchange (payload one way answered by payload the other): no service to time.");
        return;
    }
    let opt = |v: Option<u64>| v.map_or_else(|| "-".to_string(), fmt::micros);
    let rows: Vec<Vec<String>> = a
        .services
        .iter()
        .map(|r| {
            vec![
                r.server.clone(),
                r.connections.to_string(),
                r.exchanges.to_string(),
                fmt::micros(r.response_p50_us),
                fmt::micros(r.response_p99_us),
                fmt::micros(r.response_max_us),
                opt(r.rtt_p50_us),
                opt(r.rtt_p99_us),
                opt(r.client_delay_p50_us),
                fmt::micros(r.transfer_p50_us),
                r.capture_point
                    .map_or_else(|| "-".into(), |c| c.name().to_string()),
            ]
        })
        .collect();
    p.table(
        &[
            "service",
            "connections",
            "exchanges",
            "server p50",
            "server p99",
            "server max",
            "RTT p50",
            "RTT p99",
            "client wait p50",
            "transfer p50",
            "capture point",
        ],
        &rows,
        &[1, 2, 3, 4, 5, 6, 7, 8, 9],
    );
    let slow = &a.details.time.slow_exchanges;
    if slow.is_empty() {
        p.note("No exchange was slow enough for a finding: no waterfall.");
    } else {
        p.chart(
            waterfall(slow).draw_along("time since the connection's first packet"),
            &format!(
                "The {} slowest exchanges the findings named, slowest on top, each from its \
                 connection's first packet: the handshake (a connection's first exchange), the \
                 client's wait before its request, the path's share of the wait for the \
                 answer, the server's time, the transfer, and what TCP waited within it (a \
                 timeout or a zero window), as measured at the capture point.",
                slow.len()
            ),
        );
    }
    for r in a
        .services
        .iter()
        .filter(|r| !r.response_histogram.is_empty())
        .take(HISTOGRAM_SERVICES)
    {
        let buckets: Vec<(String, f64)> = r
            .response_histogram
            .iter()
            .map(|&(lo, n)| (format!("≥{}", fmt::micros(lo)), n as f64))
            .collect();
        let h = Bars::histogram(
            &format!("Server time at {}", r.server),
            &buckets,
            Axis::log("exchanges", Unit::Count),
            "server time: request's last byte to response's first, less the path (bucket lower bound)",
        );
        p.chart(
            h.draw(),
            &format!(
                "Exchanges of {} per bucket of server time (1-2-5 steps per decade; count on a \
                 log scale): {} exchanges, p50 {}, p99 {}, max {}.",
                r.server,
                r.exchanges,
                fmt::micros(r.response_p50_us),
                fmt::micros(r.response_p99_us),
                fmt::micros(r.response_max_us)
            ),
        );
    }
}

/// One lane per slow exchange, its parts end to end.
fn waterfall(slow: &[SlowExchange]) -> chart::Timeline {
    let mut kinds: Vec<(String, Rgb)> = Vec::new();
    let lanes = slow
        .iter()
        .map(|x| {
            let mut at = 0.0;
            let mut marks = Vec::new();
            for (part, us) in x.parts() {
                if us == 0 {
                    continue;
                }
                let kind = match kinds.iter().position(|k| k.0 == part) {
                    Some(i) => i,
                    None => {
                        kinds.push((part.to_string(), part_color(part)));
                        kinds.len() - 1
                    }
                };
                let d = us as f64 / 1e6;
                marks.push(chart::Mark {
                    start_s: at,
                    end_s: Some(at + d),
                    kind,
                });
                at += d;
            }
            // The client's end (the server is in the table above) and the total.
            let client = x.flow.split(" > ").next().unwrap_or(&x.flow);
            let mut label = format!("{client} {}", fmt::micros(x.total_us()));
            if label.chars().count() > LABEL_CHARS {
                label = label.chars().take(LABEL_CHARS - 1).collect::<String>() + "…";
            }
            chart::Lane {
                label,
                span_s: (0.0, at),
                marks,
            }
        })
        .collect();
    chart::Timeline {
        title: format!(
            "Where the time of the {} slowest exchanges went",
            slow.len()
        ),
        kinds,
        lanes,
    }
}
