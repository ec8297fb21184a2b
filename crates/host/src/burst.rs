//! Microburst sampler of interface counters, and the per-resolution analysis of its samples.
//!
//! [`sample`] reads an interface's byte and packet counters (sysfs, `pread` on open files,
//! see [`crate::netdev`]) every `interval`, either sleeping to absolute deadlines
//! (`clock_nanosleep(TIMER_ABSTIME)` with a 1 ns timer slack) or busy-polling the clock
//! pinned to one CPU (`sched_setaffinity`), which reaches ~100 us with a few us of error.
//! Every sample carries its own timestamp, so the analysis uses the real times, and
//! [`IntervalStats`] reports the resolution actually achieved.
//!
//! [`analyze`] and [`findings`] are pure: counter readings in, rates and findings out.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use serde::Serialize;
use tcpdoctor_model::{units, Evidence, Finding, Impact, Pathology, Source};

use crate::netdev::{CounterFiles, Stat};
use crate::Error;

/// Which way traffic flows through the interface.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Direction {
    Rx,
    Tx,
}

impl Direction {
    pub fn stats(self) -> [Stat; 2] {
        match self {
            Direction::Rx => [Stat::RxBytes, Stat::RxPackets],
            Direction::Tx => [Stat::TxBytes, Stat::TxPackets],
        }
    }
}

impl std::fmt::Display for Direction {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Direction::Rx => "rx",
            Direction::Tx => "tx",
        })
    }
}

/// How the sampler waits between samples.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum Mode {
    /// Sleep until each deadline. Cheap; resolution limited by timer wake-up latency.
    Sleep,
    /// Spin on the clock, pinned to `cpu` (default: the last CPU allowed). Uses one core
    /// fully for the duration.
    BusyPoll { cpu: Option<usize> },
    /// Sleep until shortly before each deadline, then spin to it, pinned to `cpu`. On a busy
    /// host the scheduler favours a thread that sleeps, so this keeps the busy-poll precision
    /// without being preempted at the end of a time slice.
    Hybrid { cpu: Option<usize> },
}

/// How long before a deadline the hybrid mode stops sleeping and starts spinning: covers
/// the usual wake-up latency (tens of us) of an idle-to-running switch.
pub const HYBRID_SPIN_NS: u64 = 40_000;

/// What to sample.
#[derive(Clone, Debug)]
pub struct Config {
    pub iface: String,
    pub directions: Vec<Direction>,
    pub interval: Duration,
    pub duration: Duration,
    pub mode: Mode,
    /// In busy-poll and hybrid modes, run the sampling thread as SCHED_FIFO priority 1 so
    /// ordinary tasks cannot preempt it at the end of a time slice. Needs CAP_SYS_NICE;
    /// without it sampling continues at normal priority. The kernel still gives other tasks
    /// their share (RT throttling, `kernel.sched_rt_runtime_us`; the fair server on 6.12+),
    /// which shows up as rare gaps of tens of ms in `max_ns`.
    pub realtime: bool,
}

/// Raw samples: `t_ns[i]` (from the first sample) and, per direction, bytes and packets.
#[derive(Clone, Debug, Default)]
pub struct Samples {
    pub t_ns: Vec<u64>,
    /// `[direction][i]` cumulative bytes.
    pub bytes: Vec<Vec<u64>>,
    /// `[direction][i]` cumulative packets.
    pub packets: Vec<Vec<u64>>,
    /// Deadlines skipped because a read or a wake-up came later than the next deadline.
    pub missed_slots: u64,
    /// Samples dropped because their reads took longer than [`MAX_READ_NS`]: the thread was
    /// preempted between its timestamps, so the time of the reading is unknown.
    pub uncertain_samples: u64,
    /// Median cost of one sample (all preads), ns.
    pub read_cost_p50_ns: u64,
    /// The CPU the sampler was pinned to (busy-poll mode).
    pub cpu: Option<usize>,
    /// Stopped by the stop flag before the duration elapsed.
    pub interrupted: bool,
    /// The sampling thread ran as SCHED_FIFO.
    pub realtime: bool,
}

/// Makes the calling thread SCHED_FIFO priority 1; returns the previous policy and priority
/// to restore, or `None` when not permitted.
fn enter_realtime() -> Option<(libc::c_int, libc::sched_param)> {
    // SAFETY: plain syscalls on the calling thread (tid 0) with valid pointers.
    unsafe {
        let old_policy = libc::sched_getscheduler(0);
        let mut old = std::mem::zeroed::<libc::sched_param>();
        if old_policy < 0 || libc::sched_getparam(0, &mut old) != 0 {
            return None;
        }
        let p = libc::sched_param { sched_priority: 1 };
        (libc::sched_setscheduler(0, libc::SCHED_FIFO, &p) == 0).then_some((old_policy, old))
    }
}

fn leave_realtime(old: (libc::c_int, libc::sched_param)) {
    // SAFETY: restores what sched_getscheduler/sched_getparam returned for this thread.
    unsafe { libc::sched_setscheduler(0, old.0, &old.1) };
}

fn mono_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: valid pointer to a timespec; CLOCK_MONOTONIC always exists on Linux.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

fn sleep_until(abs_ns: u64) {
    let ts = libc::timespec {
        tv_sec: (abs_ns / 1_000_000_000) as libc::time_t,
        tv_nsec: (abs_ns % 1_000_000_000) as libc::c_long,
    };
    // SAFETY: valid timespec; EINTR simply returns early and the caller re-checks the time.
    unsafe {
        libc::clock_nanosleep(
            libc::CLOCK_MONOTONIC,
            libc::TIMER_ABSTIME,
            &ts,
            std::ptr::null_mut(),
        )
    };
}

/// Whether this process may make a thread SCHED_FIFO (root, CAP_SYS_NICE or an RLIMIT_RTPRIO
/// above 0): tried on a short-lived thread of its own, so the caller's policy is untouched.
pub fn realtime_permitted() -> bool {
    std::thread::spawn(|| enter_realtime().is_some())
        .join()
        .unwrap_or(false)
}

/// CPUs this thread may run on (`sched_getaffinity`).
pub fn allowed_cpus() -> Vec<usize> {
    // SAFETY: cpu_set_t is plain data; sched_getaffinity fills it.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        if libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) != 0 {
            return Vec::new();
        }
        (0..libc::CPU_SETSIZE as usize)
            .filter(|&c| libc::CPU_ISSET(c, &set))
            .collect()
    }
}

fn set_affinity(cpus: &[usize]) -> bool {
    // SAFETY: cpu_set_t is plain data; CPU_SET stays within CPU_SETSIZE.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        for &c in cpus {
            if c < libc::CPU_SETSIZE as usize {
                libc::CPU_SET(c, &mut set);
            }
        }
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) == 0
    }
}

/// A sample whose reads took longer than this is dropped: a pread of a sysfs counter takes
/// 2-5 us, so a longer one means the sampler was preempted between its two timestamps and
/// the counter values cannot be placed in time (placing them at the midpoint would move
/// bytes by up to half the preemption and invent bursts).
pub const MAX_READ_NS: u64 = 50_000;

/// Samples until `duration` elapses or `stop` is set. Samples taken so far are kept.
pub fn sample(cfg: &Config, stop: &AtomicBool) -> Result<Samples, Error> {
    let mut stats = Vec::new();
    for d in &cfg.directions {
        stats.extend(d.stats());
    }
    let mut files = CounterFiles::open(&cfg.iface, &stats)?;
    let interval_ns = (cfg.interval.as_nanos() as u64).max(1);
    let duration_ns = cfg.duration.as_nanos() as u64;
    let slots = (duration_ns / interval_ns + 1) as usize;
    let nd = cfg.directions.len();
    let mut out = Samples {
        t_ns: Vec::with_capacity(slots),
        bytes: vec![Vec::with_capacity(slots); nd],
        packets: vec![Vec::with_capacity(slots); nd],
        ..Samples::default()
    };
    let mut costs: Vec<u32> = Vec::with_capacity(slots);
    let mut buf = vec![0u64; stats.len()];

    let previous_cpus = allowed_cpus();
    let (busy, hybrid) = match cfg.mode {
        Mode::BusyPoll { cpu } | Mode::Hybrid { cpu } => {
            let cpu = cpu.or_else(|| previous_cpus.last().copied());
            if let Some(c) = cpu {
                if set_affinity(&[c]) {
                    out.cpu = Some(c);
                }
            }
            // SAFETY: prctl with an integer argument.
            unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong) };
            (true, matches!(cfg.mode, Mode::Hybrid { .. }))
        }
        Mode::Sleep => {
            // Timer slack (default 50 us) would be added to every wake-up.
            // SAFETY: prctl with an integer argument.
            unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong) };
            (false, false)
        }
    };
    let previous_sched = if busy && cfg.realtime {
        enter_realtime()
    } else {
        None
    };
    out.realtime = previous_sched.is_some();
    // Touch every page up front so the loop never faults.
    out.t_ns.resize(slots, 0);
    out.t_ns.clear();

    let base = mono_ns();
    let mut k: u64 = 0;
    let mut result = Ok(());
    loop {
        let deadline = k * interval_ns;
        if deadline > duration_ns {
            break;
        }
        if busy {
            if hybrid && deadline > HYBRID_SPIN_NS {
                let now = mono_ns() - base;
                if now + HYBRID_SPIN_NS < deadline {
                    sleep_until(base + deadline - HYBRID_SPIN_NS);
                }
            }
            while mono_ns() - base < deadline {
                std::hint::spin_loop();
            }
        } else {
            sleep_until(base + deadline);
            if mono_ns() - base < deadline {
                continue; // woken early (signal): wait again for the same deadline
            }
        }
        if stop.load(Ordering::Relaxed) {
            out.interrupted = true;
            break;
        }
        let t0 = mono_ns();
        if let Err(e) = files.read(&mut buf) {
            result = Err(e);
            break;
        }
        let t1 = mono_ns();
        costs.push((t1 - t0).min(u64::from(u32::MAX)) as u32);
        if t1 - t0 <= MAX_READ_NS {
            out.t_ns.push((t0 + t1) / 2 - base);
            for d in 0..nd {
                out.bytes[d].push(buf[2 * d]);
                out.packets[d].push(buf[2 * d + 1]);
            }
        } else {
            out.uncertain_samples += 1;
        }
        k += 1;
        let now_slot = (t1 - base) / interval_ns;
        if now_slot >= k {
            out.missed_slots += now_slot - k + 1;
            k = now_slot + 1;
        }
    }
    if let Some(old) = previous_sched {
        leave_realtime(old);
    }
    if busy && !previous_cpus.is_empty() {
        set_affinity(&previous_cpus);
    }
    costs.sort_unstable();
    out.read_cost_p50_ns = costs.get(costs.len() / 2).copied().unwrap_or(0).into();
    // A read error after some samples keeps them: the caller reports what was measured.
    match result {
        Err(e) if out.t_ns.len() < 2 => Err(e),
        _ => Ok(out),
    }
}

/// Achieved spacing of samples against the target.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct IntervalStats {
    pub target_ns: u64,
    pub samples: u64,
    pub p50_ns: u64,
    pub p99_ns: u64,
    pub max_ns: u64,
    /// |achieved - target|, median and 99th percentile.
    pub error_p50_ns: u64,
    pub error_p99_ns: u64,
    pub missed_slots: u64,
}

fn percentile(sorted: &[u64], p: f64) -> u64 {
    if sorted.is_empty() {
        return 0;
    }
    let i = ((sorted.len() - 1) as f64 * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

/// Statistics of the gaps between consecutive sample times.
pub fn interval_stats(t_ns: &[u64], target: Duration, missed_slots: u64) -> IntervalStats {
    let target_ns = target.as_nanos() as u64;
    let mut gaps: Vec<u64> = t_ns.windows(2).map(|w| w[1] - w[0]).collect();
    let mut errs: Vec<u64> = gaps.iter().map(|&g| g.abs_diff(target_ns)).collect();
    gaps.sort_unstable();
    errs.sort_unstable();
    IntervalStats {
        target_ns,
        samples: t_ns.len() as u64,
        p50_ns: percentile(&gaps, 0.50),
        p99_ns: percentile(&gaps, 0.99),
        max_ns: gaps.last().copied().unwrap_or(0),
        error_p50_ns: percentile(&errs, 0.50),
        error_p99_ns: percentile(&errs, 0.99),
        missed_slots,
    }
}

/// Traffic seen at one time scale.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Resolution {
    pub resolution_ns: u64,
    pub bins: u64,
    pub avg_bytes_per_bin: f64,
    pub max_bytes_per_bin: u64,
    /// Busiest bin over the average bin; `None` without traffic.
    pub max_avg_ratio: Option<f64>,
    pub avg_rate_bits_per_s: f64,
    pub peak_rate_bits_per_s: f64,
    /// Packets in the busiest (by bytes) bin, and that as a rate.
    pub peak_bin_packets: u64,
    pub peak_packets_per_s: f64,
    /// Start of the busiest bin, from the first sample.
    pub peak_at_ns: u64,
    /// Average and peak rate over the link speed (0..1); `None` when the speed is unknown.
    pub avg_utilisation: Option<f64>,
    pub peak_utilisation: Option<f64>,
}

/// The counter at time `x`, linearly interpolated between samples. `j` is a cursor that
/// only moves forward (bin edges are visited in order).
fn at(t: &[u64], v: &[u64], x: f64, j: &mut usize) -> f64 {
    while *j + 2 < t.len() && (t[*j + 1] as f64) < x {
        *j += 1;
    }
    let (t0, t1) = (t[*j] as f64, t[*j + 1] as f64);
    let (v0, v1) = (v[*j] as f64, v[*j + 1] as f64);
    if t1 <= t0 {
        return v1;
    }
    let f = ((x - t0) / (t1 - t0)).clamp(0.0, 1.0);
    v0 + (v1 - v0) * f
}

/// Bins counters at `resolution`; `None` when fewer than 2 bins fit or fewer than 2 samples.
pub fn bin(
    t_ns: &[u64],
    bytes: &[u64],
    packets: &[u64],
    resolution: Duration,
    link_bits_per_s: Option<f64>,
) -> Option<Resolution> {
    let r = resolution.as_nanos() as u64;
    if t_ns.len() < 2 || r == 0 {
        return None;
    }
    let span = t_ns[t_ns.len() - 1] - t_ns[0];
    let n = span / r;
    if n < 2 {
        return None;
    }
    let start = t_ns[0] as f64;
    let (mut jb, mut jp) = (0, 0);
    let mut prev_b = at(t_ns, bytes, start, &mut jb);
    let mut prev_p = at(t_ns, packets, start, &mut jp);
    let (mut total, mut max, mut max_k, mut max_pk) = (0.0f64, 0.0f64, 0u64, 0.0f64);
    for k in 1..=n {
        let x = start + (k * r) as f64;
        let b = at(t_ns, bytes, x, &mut jb);
        let p = at(t_ns, packets, x, &mut jp);
        let db = b - prev_b;
        if db > max {
            max = db;
            max_k = k - 1;
            max_pk = p - prev_p;
        }
        total += db;
        prev_b = b;
        prev_p = p;
    }
    let secs = resolution.as_secs_f64();
    let avg = total / n as f64;
    let avg_rate = avg * 8.0 / secs;
    let peak_rate = max * 8.0 / secs;
    Some(Resolution {
        resolution_ns: r,
        bins: n,
        avg_bytes_per_bin: (avg * 10.0).round() / 10.0,
        max_bytes_per_bin: max.round() as u64,
        max_avg_ratio: (avg > 0.0).then(|| ((max / avg) * 100.0).round() / 100.0),
        avg_rate_bits_per_s: avg_rate.round(),
        peak_rate_bits_per_s: peak_rate.round(),
        peak_bin_packets: max_pk.round() as u64,
        peak_packets_per_s: (max_pk / secs).round(),
        peak_at_ns: max_k * r,
        avg_utilisation: link_bits_per_s.map(|l| avg_rate / l),
        peak_utilisation: link_bits_per_s.map(|l| peak_rate / l),
    })
}

/// The default time scales: 100 us .. 1 s, as in file 001's table.
pub const RESOLUTIONS: [Duration; 5] = [
    Duration::from_micros(100),
    Duration::from_millis(1),
    Duration::from_millis(10),
    Duration::from_millis(100),
    Duration::from_secs(1),
];

/// One direction's analysis.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct DirectionReport {
    pub direction: Direction,
    pub total_bytes: u64,
    pub total_packets: u64,
    pub resolutions: Vec<Resolution>,
}

/// Bins every direction at every resolution not finer than the achieved median interval
/// (a resolution finer than the samples would only show interpolation).
pub fn analyze(
    samples: &Samples,
    directions: &[Direction],
    resolutions: &[Duration],
    achieved_p50_ns: u64,
    link_bits_per_s: Option<f64>,
) -> Vec<DirectionReport> {
    directions
        .iter()
        .enumerate()
        .map(|(d, &direction)| {
            let b = &samples.bytes[d];
            let p = &samples.packets[d];
            let delta = |v: &Vec<u64>| match (v.first(), v.last()) {
                (Some(a), Some(z)) => z.saturating_sub(*a),
                _ => 0,
            };
            DirectionReport {
                direction,
                total_bytes: delta(b),
                total_packets: delta(p),
                resolutions: resolutions
                    .iter()
                    .filter(|r| r.as_nanos() as u64 * 10 >= achieved_p50_ns * 9)
                    .filter_map(|&r| bin(&samples.t_ns, b, p, r, link_bits_per_s))
                    .collect(),
            }
        })
        .collect()
}

/// When a burst is worth a finding.
#[derive(Clone, Copy, Debug)]
pub struct Thresholds {
    /// Max/avg ratio at the judged resolution at or above which traffic is bursty.
    pub ratio: f64,
    /// The judged resolution: the 1 ms of file 001's finest reliable column by default.
    pub resolution: Duration,
    /// The busiest bin must hold at least this many packets; one stray packet on an idle
    /// link gives any ratio and is not a burst.
    pub min_packets: u64,
}

impl Default for Thresholds {
    /// 5x: in file 001 the incast traffic that overflowed switch buffers reached line rate
    /// (950-998 Mbit/s on 1 Gbit/s at ~190 Mbit/s average) at a max/avg of about 5 in 2 ms
    /// windows; its 1 ms column (8-9x, peaks "above" line rate) was the polling script's
    /// timer error, which is why the achieved interval is reported here. 10 packets: fewer
    /// cannot fill a buffer of any switch. How much the burst matters is the share of the
    /// link it used at its peak, judged by the policy's budget rules (below half the line
    /// rate a burst drains as fast as it arrives).
    fn default() -> Self {
        Thresholds {
            ratio: 5.0,
            resolution: Duration::from_millis(1),
            min_packets: 10,
        }
    }
}

/// Microburst findings: one per direction whose traffic at the judged resolution (or the
/// finest measured above it) peaks at `ratio` times its average or more.
pub fn findings(iface: &str, reports: &[DirectionReport], th: &Thresholds) -> Vec<Finding> {
    let mut out = Vec::new();
    let target = th.resolution.as_nanos() as u64;
    for d in reports {
        let judged = d
            .resolutions
            .iter()
            .filter(|r| r.resolution_ns >= target)
            .min_by_key(|r| r.resolution_ns);
        let Some(r) = judged else { continue };
        let Some(ratio) = r.max_avg_ratio else {
            continue;
        };
        if ratio < th.ratio || r.peak_bin_packets < th.min_packets {
            continue;
        }
        let res = units::time_scale(r.resolution_ns);
        // The link's capacity is the finite budget a burst spends: the share of it used in
        // the busiest bin is what the policy judges (half or more: pressure; 90%: used up,
        // queues build and drop). Without a link speed there is no budget to judge against:
        // the ratio alone is context.
        let impact = match r.peak_utilisation {
            Some(u) => Impact::budget(u),
            None => Impact::none(),
        };
        let util = match (r.peak_utilisation, r.avg_utilisation) {
            (Some(p), Some(a)) => format!(
                ", {:.1}% of the link at peak vs {:.2}% on average",
                p * 100.0,
                a * 100.0
            ),
            _ => "; link speed unknown (give --link-speed to judge the peak)".to_string(),
        };
        let mut f = Finding::new(
            Pathology::Microburst,
            Source::Burst,
            format!(
                "{iface} {}: the busiest {res} carried {ratio:.1}x the average ({:.1} vs {:.1} Mbit/s){util}",
                d.direction,
                r.peak_rate_bits_per_s / 1e6,
                r.avg_rate_bits_per_s / 1e6
            ),
            impact,
        )
        .arithmetic(
            format!(
                "max/avg at {res} = {} B / {:.1} B per bin",
                r.max_bytes_per_bin, r.avg_bytes_per_bin
            ),
            ratio,
        )
        .arithmetic(
            format!(
                "peak Mbit/s = {} B x 8 / {res}",
                r.max_bytes_per_bin
            ),
            (r.peak_rate_bits_per_s / 1e4).round() / 100.0,
        );
        f = f.with_evidence(Evidence::Examples {
            what: format!("max/avg per time scale ({})", d.direction),
            items: d
                .resolutions
                .iter()
                .map(|x| {
                    format!(
                        "{}: {}",
                        units::time_scale(x.resolution_ns),
                        x.max_avg_ratio
                            .map_or("-".to_string(), |v| format!("{v:.1}x"))
                    )
                })
                .collect(),
        });
        out.push(f);
    }
    out
}

pub mod report;
#[cfg(test)]
mod tests;
