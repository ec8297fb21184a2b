//! One `burst` run, from a checked configuration to its report: sample the interface, bin
//! the samples at every time scale, judge them, and say what was measured. The command line
//! parses and checks the flags and prints the report ([`crate::render::burst`]).

use std::sync::atomic::AtomicBool;
use std::time::Duration;

use tcpdoctor_model::{Measured, Report};

use super::{analyze, findings, interval_stats, sample, Config, Thresholds, RESOLUTIONS};
use crate::netdev::{self, Stat};
use crate::render::burst::{Body, IfaceChosenBy, LinkSpeedSource};
use crate::Error;

/// What a run needs besides the sampler's [`Config`].
pub struct Run {
    pub cfg: Config,
    /// How the interface was chosen.
    pub chosen_by: IfaceChosenBy,
    /// The link speed (bit/s), when known, and where it came from.
    pub link_bits_per_s: Option<f64>,
    pub link_source: LinkSpeedSource,
    /// The max/avg ratio at 1 ms that raises a microburst finding.
    pub threshold: f64,
}

/// Samples `run.cfg.iface` for its duration (or until `stop`) and reports the bursts found.
pub fn run(run: Run, stop: &AtomicBool) -> Result<Report<Body>, Error> {
    let Run {
        cfg,
        chosen_by,
        link_bits_per_s: link,
        link_source,
        threshold,
    } = run;
    let samples = sample(&cfg, stop)?;
    let sampling = interval_stats(&samples.t_ns, cfg.interval, samples.missed_slots);
    let reports = analyze(
        &samples,
        &cfg.directions,
        &RESOLUTIONS,
        sampling.p50_ns,
        link,
    );
    let th = Thresholds {
        ratio: threshold,
        ..Thresholds::default()
    };
    let found = findings(&cfg.iface, &reports, &th);
    let body = Body {
        iface: cfg.iface,
        iface_chosen_by: chosen_by,
        link_speed_bits_per_s: link,
        link_speed_source: link_source,
        mode: cfg.mode,
        pinned_cpu: samples.cpu,
        realtime: samples.realtime,
        duration_ns: samples.t_ns.last().copied().unwrap_or(0),
        read_cost_p50_ns: samples.read_cost_p50_ns,
        uncertain_samples: samples.uncertain_samples,
        sampling,
        threshold_ratio: threshold,
        directions: reports,
    };
    let measured = measured(&body);
    Ok(Report::new("burst", found, body, measured).interrupted(samples.interrupted))
}

/// The interface other than `lo` that moved the most bytes (both directions) over `window`,
/// `None` when there is none.
pub fn busiest(window: Duration) -> Result<Option<String>, Error> {
    let names: Vec<String> = netdev::interfaces()?
        .into_iter()
        .filter(|n| n != "lo")
        .collect();
    let total = |n: &str| -> u64 {
        [Stat::RxBytes, Stat::TxBytes]
            .iter()
            .map(|&s| netdev::read_stat(n, s).unwrap_or(0))
            .sum()
    };
    let before: Vec<u64> = names.iter().map(|n| total(n)).collect();
    std::thread::sleep(window);
    Ok(names
        .iter()
        .zip(before)
        .map(|(n, b)| {
            let a = total(n);
            (a.saturating_sub(b), a, n)
        })
        .max()
        .map(|(_, _, n)| n.clone()))
}

/// What a run measured: nothing with fewer than two samples or no packet at all.
fn measured(body: &Body) -> Measured {
    let n = body.sampling.samples;
    if n < 2 {
        return Measured::Nothing("fewer than two samples of the interface counters".into());
    }
    let packets: u64 = body.directions.iter().map(|d| d.total_packets).sum();
    let secs = body.duration_ns as f64 / 1e9;
    if packets == 0 {
        return Measured::Nothing(format!(
            "no packets on {} in {secs:.3} s: no traffic to measure bursts of",
            body.iface
        ));
    }
    Measured::Something(format!("{n} samples, {packets} packets"))
}
