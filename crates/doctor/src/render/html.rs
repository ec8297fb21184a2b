//! The doctor report as one HTML page: the verdict and the ranked findings, then the steps
//! that ran (or why not), the budgets and settings behind the findings, the socket census by
//! state and the counters that moved over the window as charts (when they hold data).

use crate::Body;
use tcpdoctor_model::Report;
use tcpdoctor_report::chart::{Axis, Bars, Rgb, Unit};
use tcpdoctor_report::fmt;
use tcpdoctor_report::html::Page;

/// Counters drawn on the window chart (the ones that moved most).
const COUNTERS_DRAWN: usize = 12;

pub fn page(report: &Report<Body>) -> String {
    let b = &report.body;
    let mut p = Page::new("tcpdoctor doctor");
    let where_ = b.netns.as_ref().map_or_else(
        || "this host".to_string(),
        |n| format!("network namespace {n}"),
    );
    p.header(
        report,
        &format!(
            "{where_}, counters and queues watched for {}{}",
            fmt::micros(b.window_ms * 1000),
            if b.root { "" } else { " (not root)" }
        ),
    );
    // Findings first: what is wrong and what to do, before the evidence drawn below.
    p.findings(&report.findings);
    p.section("Steps");
    let rows: Vec<Vec<String>> = b
        .steps
        .iter()
        .map(|s| {
            vec![
                s.step.to_string(),
                if s.ran { "ran" } else { "skipped" }.to_string(),
                if s.ran {
                    fmt::micros(s.duration_us)
                } else {
                    "-".into()
                },
                s.detail.clone(),
            ]
        })
        .collect();
    p.table(&["step", "", "took", "detail"], &rows, &[2]);

    if let Some(a) = &b.settings {
        p.section("Budgets");
        let ladder: Vec<String> = a.syn_ladder_s.iter().map(|s| format!("{s}")).collect();
        p.facts(&[
            (
                "new connections per second to one destination",
                format!(
                    "{} (ports / TIME_WAIT)",
                    a.connect_rate_per_destination_per_s
                ),
            ),
            (
                "SYN resent after (s)",
                if ladder.is_empty() {
                    "-".into()
                } else {
                    ladder.join(", ")
                },
            ),
            ("connect() gives up after", format!("{} s", a.syn_give_up_s)),
            ("retransmission timeout floor", fmt::micros(a.rto_floor_us)),
        ]);
        p.section("Settings");
        let rows: Vec<Vec<String>> = tcpdoctor_host::render::check::settings_rows(a)
            .into_iter()
            .map(Vec::from)
            .collect();
        p.table(&["setting", "value"], &rows, &[]);
    }

    p.section("Sockets by state");
    match &b.sockets {
        Some(s) if s.total_sockets > 0 && !s.by_state.is_empty() => {
            let bars = Bars {
                title: format!("{} TCP sockets by state", s.total_sockets),
                categories: s.by_state.keys().map(|k| k.to_string()).collect(),
                series: vec![(
                    "sockets".into(),
                    Rgb::BLUE,
                    s.by_state.values().map(|v| *v as f64).collect(),
                )],
                y: Axis::log("sockets", Unit::Count),
                x_label: "state".into(),
            };
            p.chart(
                bars.draw(),
                "The socket census at the end of the window (sock_diag, as ss), on a log \
                 scale so that a few sockets in a bad state stay visible next to thousands \
                 in TIME_WAIT.",
            );
        }
        Some(_) => p.note("No TCP socket in the census."),
        None => p.note("The socket census did not run (see Steps)."),
    }

    p.section("Counters that moved over the window");
    let mut moved: Vec<(&String, i64)> = b
        .counters_moved
        .iter()
        .filter(|(_, d)| **d > 0)
        .map(|(k, d)| (k, *d))
        .collect();
    moved.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
    if moved.is_empty() {
        p.note("No kernel TCP counter moved over the window.");
    } else {
        let shown = &moved[..moved.len().min(COUNTERS_DRAWN)];
        let bars = Bars {
            title: "Kernel counters over the window".into(),
            categories: shown
                .iter()
                .map(|(k, _)| k.trim_start_matches("TcpExt").to_string())
                .collect(),
            series: vec![(
                "increase".into(),
                Rgb::ORANGE,
                shown.iter().map(|(_, d)| *d as f64).collect(),
            )],
            y: Axis::log("increase", Unit::Count),
            x_label: "counter (TcpExt prefix left out)".into(),
        };
        let mut caption = format!(
            "How much each counter rose during the {} window, most first, on a log scale.",
            fmt::micros(b.window_ms * 1000)
        );
        if moved.len() > shown.len() {
            caption += &format!(
                " {} smaller ones are in the table.",
                moved.len() - shown.len()
            );
        }
        p.chart(bars.draw(), &caption);
        let rows: Vec<Vec<String>> = moved
            .iter()
            .map(|(k, d)| vec![k.to_string(), format!("{d:+}")])
            .collect();
        p.table(&["counter", "delta"], &rows, &[1]);
    }
    p.footer("Written by tcpdoctor doctor.");
    p.finish()
}
