//! `tcpdoctor burst`: the JSON document of one sampling run ([`Body`]) and its human text.

use std::io::{self, Write};

use serde::Serialize;
use tcpdoctor_model::{units, Report};
use tcpdoctor_report::{findings, fmt, table};

use crate::burst::{DirectionReport, IntervalStats, Mode};

/// How the sampled interface was chosen. JSON values: `argument`, `busiest`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum IfaceChosenBy {
    /// Named on the command line.
    Argument,
    /// The busiest non-loopback interface over 200 ms.
    Busiest,
}

/// Where the link speed came from. JSON values: `argument`, `sysfs`, `unknown`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum LinkSpeedSource {
    /// `--link-speed`.
    Argument,
    /// /sys/class/net/IFACE/speed.
    Sysfs,
    /// Neither (virtual devices): no utilisation.
    Unknown,
}

impl std::fmt::Display for LinkSpeedSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            LinkSpeedSource::Argument => "argument",
            LinkSpeedSource::Sysfs => "sysfs",
            LinkSpeedSource::Unknown => "unknown",
        })
    }
}

/// The JSON body of `burst`.
#[derive(Serialize)]
pub struct Body {
    pub iface: String,
    pub iface_chosen_by: IfaceChosenBy,
    pub link_speed_bits_per_s: Option<f64>,
    pub link_speed_source: LinkSpeedSource,
    pub mode: Mode,
    pub pinned_cpu: Option<usize>,
    /// The sampler ran as SCHED_FIFO (--realtime, when permitted).
    pub realtime: bool,
    pub duration_ns: u64,
    pub read_cost_p50_ns: u64,
    /// Samples dropped because a read was preempted (time of the reading unknown).
    pub uncertain_samples: u64,
    pub sampling: IntervalStats,
    pub threshold_ratio: f64,
    pub directions: Vec<DirectionReport>,
}

/// The human text: how the run sampled, a table of time scales per direction, then the
/// findings and the verdict.
pub fn text(w: &mut dyn Write, r: &Report<Body>) -> io::Result<()> {
    write_text(w, &r.body)?;
    writeln!(w)?;
    findings::write(w, &r.findings)?;
    writeln!(w)?;
    findings::verdict(w, r)
}

fn write_text(w: &mut dyn Write, b: &Body) -> io::Result<()> {
    let how = match (b.mode, b.pinned_cpu) {
        (Mode::BusyPoll { .. }, Some(c)) => format!("busy-poll pinned to CPU {c}"),
        (Mode::BusyPoll { .. }, None) => "busy-poll".to_string(),
        (Mode::Hybrid { .. }, Some(c)) => format!("sleep then spin, pinned to CPU {c}"),
        (Mode::Hybrid { .. }, None) => "sleep then spin".to_string(),
        (Mode::Sleep, _) => "sleeping between samples".to_string(),
    };
    let how = if b.realtime {
        format!("{how}, SCHED_FIFO")
    } else {
        how
    };
    let chosen = if b.iface_chosen_by == IfaceChosenBy::Busiest {
        " (busiest interface; name another as an argument)"
    } else {
        ""
    };
    writeln!(
        w,
        "burst: {}{chosen}, {} samples over {}, {how}",
        b.iface,
        b.sampling.samples,
        fmt::micros(b.duration_ns / 1000)
    )?;
    let s = &b.sampling;
    writeln!(
        w,
        "sampling interval: target {}, achieved p50 {}, p99 {}, max {}; error vs target p50 {}, p99 {}; {} missed, {} dropped (read preempted); one read {}",
        units::nanos(s.target_ns),
        units::nanos(s.p50_ns),
        units::nanos(s.p99_ns),
        units::nanos(s.max_ns),
        units::nanos(s.error_p50_ns),
        units::nanos(s.error_p99_ns),
        s.missed_slots,
        b.uncertain_samples,
        units::nanos(b.read_cost_p50_ns)
    )?;
    // Preempted more than 10 targets' worth at the 99th percentile: say how to do better.
    if s.error_p99_ns > 10 * s.target_ns {
        let fix = match (b.mode, b.realtime) {
            (Mode::Sleep, _) => "--mode busy --realtime (root) spins at a real-time priority",
            (_, false) => "--realtime (root) keeps the sampler from being preempted",
            (_, true) => "a less loaded CPU (--cpu N) may do better",
        };
        writeln!(
            w,
            "note: the sampler was delayed (p99 error {}); time scales below {} are smoothed; {fix}",
            units::nanos(s.error_p99_ns),
            units::nanos(s.p99_ns)
        )?;
    }
    match b.link_speed_bits_per_s {
        Some(l) => writeln!(
            w,
            "link speed: {} ({})",
            fmt::bitrate(l),
            b.link_speed_source
        )?,
        None => writeln!(
            w,
            "link speed: unknown (virtual device?); pass --link-speed for utilisation"
        )?,
    }
    for d in &b.directions {
        writeln!(w)?;
        writeln!(
            w,
            "{}: {} in {} packets",
            d.direction,
            fmt::bytes(d.total_bytes),
            d.total_packets
        )?;
        let mut t = table::new([
            "scale",
            "max/avg",
            "peak rate",
            "avg rate",
            "peak pkt/s",
            "peak util",
            "avg util",
        ]);
        let pct = |u: Option<f64>| u.map_or("-".to_string(), |u| format!("{:.1}%", u * 100.0));
        for r in &d.resolutions {
            t.add_row([
                units::time_scale(r.resolution_ns),
                r.max_avg_ratio
                    .map_or("-".to_string(), |v| format!("{v:.1}x")),
                fmt::bitrate(r.peak_rate_bits_per_s),
                fmt::bitrate(r.avg_rate_bits_per_s),
                fmt::count(r.peak_packets_per_s),
                pct(r.peak_utilisation),
                pct(r.avg_utilisation),
            ]);
        }
        table::align_right(&mut t, &[1, 2, 3, 4, 5, 6]);
        writeln!(w, "{t}")?;
    }
    Ok(())
}
