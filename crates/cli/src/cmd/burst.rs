//! `tcpdoctor burst [IFACE]`: microburst sampler of interface counters.

use std::sync::atomic::Ordering;
use std::time::Duration;

use anyhow::{bail, Context};
use tcpdoctor_host::burst::{self, report, Direction, Mode};
use tcpdoctor_host::netdev;
use tcpdoctor_host::render::burst::{self as render, IfaceChosenBy, LinkSpeedSource};

/// The long help of `tcpdoctor burst --help` (what it needs, overhead, fields, example).
const ABOUT: &str = r#"Prints, per time scale (100us, 1ms, 10ms, 100ms, 1s), the busiest interval over the
average (max/avg), the peak and average rate, and utilisation against the link speed.
A max/avg of 10 at 1ms means the busiest millisecond carried ten times the average: a
buffer sized for the average overflows there while per-second graphs look idle.

Reads /sys/class/net/IFACE/statistics/{rx,tx}_{bytes,packets} with pread on open files.
Needs no root (except --netns). Overhead: in busy-poll mode (the default below 1ms) one
CPU is fully used for --duration; in sleep mode a few percent of one CPU at 100us.
The achieved sampling interval (p50/p99, error against the target) is printed so you know
which resolution was real; time scales finer than the achieved median are left out.

JSON fields: `iface`, `link_speed_bits_per_s`, `sampling` (`target_ns`, `p50_ns`,
`p99_ns`, `max_ns`, `error_p50_ns`, `error_p99_ns`, `missed_slots`), and per direction
`resolutions[]` (`resolution_ns`, `max_avg_ratio`, `peak_rate_bits_per_s`,
`avg_rate_bits_per_s`, `peak_packets_per_s`, `peak_utilisation`, ...). A microburst
finding is raised when max/avg at 1ms reaches --threshold and the busiest millisecond
holds at least 10 packets.

Example: tcpdoctor burst eth0 --duration 10s --direction rx"#;

/// Sample an interface's byte and packet counters at sub-millisecond resolution.
#[derive(clap::Args, Debug)]
#[command(after_long_help = ABOUT)]
pub struct Args {
    /// Interface to sample. Default: the busiest non-loopback interface over 200 ms
    /// (list them with `ip -s link`).
    pub iface: Option<String>,
    /// How long to sample (e.g. 5s, 500ms).
    #[arg(long, default_value = "5s", value_parser = crate::args::duration)]
    pub duration: Duration,
    /// Target sampling interval, 100us .. 1s.
    #[arg(long, default_value = "100us", value_parser = crate::args::duration)]
    pub interval: Duration,
    /// Which counters: rx, tx or both.
    #[arg(long, value_enum, default_value = "both")]
    pub direction: Dir,
    /// How to wait between samples: busy (spin pinned to one CPU; finest), sleep, or auto
    /// (busy below 1ms).
    #[arg(long, value_enum, default_value = "auto")]
    pub mode: ModeArg,
    /// CPU to pin the busy-poll or hybrid sampler to (default: the last allowed CPU); one
    /// this process may run on, or the run is refused.
    #[arg(long)]
    pub cpu: Option<usize>,
    /// Busy and hybrid modes: run the sampler as SCHED_FIFO priority 1 (needs root or
    /// CAP_SYS_NICE) so other tasks cannot preempt it; the kernel still keeps ~5% of that
    /// CPU for them (kernel.sched_rt_runtime_us). Best resolution on a loaded host.
    /// Caution: per-CPU kernel work on that CPU (ksoftirqd, kworkers) waits too; on a
    /// production host pick a quiet CPU with --cpu.
    #[arg(long)]
    pub realtime: bool,
    /// Link speed when sysfs does not know it (virtual devices): e.g. 10G, 1000M, 25Gbit.
    #[arg(long, value_parser = crate::args::bit_rate)]
    pub link_speed: Option<f64>,
    /// Max/avg ratio at 1ms from which traffic is flagged as bursty.
    #[arg(long, default_value_t = 5.0)]
    pub threshold: f64,
    /// Print JSON instead of text.
    #[arg(long)]
    pub json: bool,
    /// Sample inside network namespace NAME (needs root).
    #[arg(long, value_name = "NAME")]
    pub netns: Option<String>,
}

#[derive(clap::ValueEnum, Clone, Copy, Debug)]
pub enum Dir {
    Rx,
    Tx,
    Both,
}

#[derive(clap::ValueEnum, Clone, Copy, Debug)]
pub enum ModeArg {
    Auto,
    Busy,
    Hybrid,
    Sleep,
}

/// The busiest non-loopback interface over `window`, by bytes moved; ties (and an idle
/// host) fall back to the largest total.
pub fn run(args: Args) -> anyhow::Result<i32> {
    if let Some(ns) = &args.netns {
        crate::netns::enter(ns)?;
    }
    if args.interval < Duration::from_micros(10) || args.interval > Duration::from_secs(1) {
        bail!(
            "--interval {}: must be between 10us and 1s",
            humantime::format_duration(args.interval)
        );
    }
    if args.duration < args.interval * 4 {
        bail!("--duration must cover at least 4 intervals");
    }
    if args.duration > Duration::from_secs(3600) {
        bail!("--duration: at most 1h");
    }
    if args.duration.as_nanos() / args.interval.as_nanos() > 50_000_000 {
        bail!("--duration / --interval: more than 50 M samples; lengthen the interval");
    }
    if args.threshold.is_nan() || args.threshold <= 1.0 {
        bail!("--threshold {}: must be above 1", args.threshold);
    }
    let (iface, chosen_by) = match &args.iface {
        Some(i) => {
            if !netdev::exists(i) {
                bail!("interface '{i}' not found here (see `ip link`)");
            }
            (i.clone(), IfaceChosenBy::Argument)
        }
        None => match report::busiest(Duration::from_millis(200))? {
            Some(i) => (i, IfaceChosenBy::Busiest),
            None => bail!("no interface other than lo here; name one: tcpdoctor burst IFACE"),
        },
    };
    // What the sampler would otherwise ignore silently is refused before the run.
    let pinned = match args.mode {
        ModeArg::Sleep => false,
        ModeArg::Auto => args.interval < Duration::from_millis(1),
        ModeArg::Busy | ModeArg::Hybrid => true,
    };
    if let Some(c) = args.cpu {
        let allowed = burst::allowed_cpus();
        if !allowed.contains(&c) {
            bail!(
                "--cpu {c}: this process may run on CPUs {} only",
                allowed
                    .iter()
                    .map(usize::to_string)
                    .collect::<Vec<_>>()
                    .join(",")
            );
        }
        if !pinned {
            bail!("--cpu {c}: only busy and hybrid modes pin the sampler (this run sleeps)");
        }
    }
    if args.realtime {
        if !pinned {
            bail!("--realtime: only busy and hybrid modes run the sampler as SCHED_FIFO (this run sleeps)");
        }
        if !burst::realtime_permitted() {
            bail!("--realtime: SCHED_FIFO is not permitted here (needs root, CAP_SYS_NICE or an RLIMIT_RTPRIO above 0)");
        }
    }
    let directions = match args.direction {
        Dir::Rx => vec![Direction::Rx],
        Dir::Tx => vec![Direction::Tx],
        Dir::Both => vec![Direction::Rx, Direction::Tx],
    };
    let mode = match args.mode {
        ModeArg::Busy => Mode::BusyPoll { cpu: args.cpu },
        ModeArg::Hybrid => Mode::Hybrid { cpu: args.cpu },
        ModeArg::Sleep => Mode::Sleep,
        ModeArg::Auto if args.interval < Duration::from_millis(1) => {
            Mode::BusyPoll { cpu: args.cpu }
        }
        ModeArg::Auto => Mode::Sleep,
    };
    let (link, link_source) = match (args.link_speed, netdev::link_speed_mbps(&iface)) {
        (Some(v), _) => (Some(v), LinkSpeedSource::Argument),
        (None, Some(m)) => (Some(m as f64 * 1e6), LinkSpeedSource::Sysfs),
        (None, None) => (None, LinkSpeedSource::Unknown),
    };
    let cfg = burst::Config {
        iface: iface.clone(),
        directions,
        interval: args.interval,
        duration: args.duration,
        mode,
        realtime: args.realtime,
    };
    let bar = crate::output::progress(
        None,
        &format!(
            "sampling {iface} every {} for {}",
            humantime::format_duration(args.interval),
            humantime::format_duration(args.duration)
        ),
    );
    let stop = crate::output::stop_flag();
    let run = report::Run {
        cfg,
        chosen_by,
        link_bits_per_s: link,
        link_source,
        threshold: args.threshold,
    };
    let report = report::run(run, stop).with_context(|| format!("sampling {iface}"))?;
    bar.finish_and_clear();
    let interrupted = report.interrupted || stop.load(Ordering::SeqCst);
    crate::output::emit(&report.interrupted(interrupted), args.json, render::text)
}

#[cfg(test)]
mod tests {
    #[test]
    fn speeds() {
        let speed = crate::args::bit_rate;
        assert_eq!(speed("10G"), Ok(10e9));
        assert_eq!(speed("1000M"), Ok(1e9));
        assert_eq!(speed("25Gbit"), Ok(25e9));
        assert_eq!(speed("100mbit/s"), Ok(100e6));
        assert!(speed("fast").is_err());
        assert!(speed("-1G").is_err());
    }
}
