//! `--remedies` for incast: each selected remedy built in a fresh topology and run at every
//! sender count, its effect predicted from the baseline's rounds and counters, then judged
//! against what was measured.

use std::sync::atomic::{AtomicBool, Ordering};

use serde::{Deserialize, Serialize};

use super::measure::measure;
use super::{
    build, fan_in_of, harm, payload_share, reproduction, set_pacing, set_rto_min, validate, Config,
    Pacing, Run, Setup, DIAGNOSED_BY, PACING_BURST_BYTES,
};
use crate::diagnose;
use crate::scenario::{
    remedy_reproductions, row_reproduction, Common, Header, Outcome, RemedyReport,
};
use crate::topo::Lab;
use crate::{Error, Result};

/// What `--remedies` measured besides the runs, when a selected remedy needed it.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Facts {
    /// `net.ipv4.tcp_available_congestion_control` (asked for `bbr` and `dctcp`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub congestion_controls_available: Option<String>,
    /// Whether this kernel builds a qdisc (`red`, `fq_codel`), tried in a scratch namespace.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub qdiscs_available: std::collections::BTreeMap<String, bool>,
    /// One sender paced at 80% of the bottleneck by tbf: the rate measured on the wire
    /// (`pace-80`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pace_80_wire_bits_per_s: Option<f64>,
}

/// The remedies `--remedies` measures for incast, in table order: those this lab builds,
/// then those that need what this kernel may lack (each row says whether it could be built).
pub const REMEDIES: [&str; 9] = [
    "rto-min-5ms",
    "pace-80",
    "pace-share",
    "bbr",
    "deeper-buffer",
    "fewer-senders",
    "dctcp",
    "red-ecn",
    "fq-codel",
];

/// The RTO floor of the `rto-min-5ms` remedy.
pub const REMEDY_RTO_MIN_US: u64 = 5_000;

/// Whether this kernel offers congestion control `cc`.
fn cc_available(cc: &str) -> (bool, String) {
    let list = std::fs::read_to_string("/proc/sys/net/ipv4/tcp_available_congestion_control")
        .unwrap_or_default();
    (
        list.split_whitespace().any(|c| c == cc),
        list.trim().to_string(),
    )
}

/// Whether this kernel can build qdisc `kind` (tried on the loopback of a scratch namespace).
fn qdisc_available(kind: &str) -> Result<bool> {
    let mut lab = Lab::new()?;
    let ns = lab.add_ns(&format!("q{}", kind.replace('_', "")))?;
    Ok(lab
        .tc(
            &ns,
            "try a qdisc",
            &["qdisc", "add", "dev", "lo", "root", kind],
        )
        .is_ok())
}

/// Runs every sender count of `cfg` once, in a fresh topology built with `setup`, at RTO
/// floor `rto_min_us`, paced per `pacing`.
fn run_setup(
    common: &Common,
    cfg: &Config,
    setup: &Setup,
    rto_min_us: u64,
    senders: &[u32],
    stop: &AtomicBool,
) -> Result<(Vec<Run>, Vec<String>)> {
    let max = senders.iter().copied().max().unwrap_or(1);
    let topo = build(common, cfg, max, setup)?;
    let rate = cfg.rate_bits_per_s()?;
    let mut runs = Vec::new();
    for &n in senders {
        if stop.load(Ordering::Relaxed) {
            break;
        }
        set_rto_min(&topo, n, rto_min_us)?;
        let pace = match setup.pacing {
            Pacing::None => None,
            Pacing::EachAt(share) => Some(share * rate),
            Pacing::SharedAt(share) => Some(share * rate / f64::from(n)),
        };
        set_pacing(&topo, cfg, n, pace)?;
        let mut r = measure(&topo, cfg, n, rto_min_us, pace, stop)?;
        let fan = fan_in_of(&r);
        r.time_lost_share = fan.time_lost_share();
        r.findings = diagnose::fan_in(&fan);
        diagnose::merge_trace_into_incast(&mut r.findings, r.trace.findings.clone());
        r.congestion_control = setup
            .congestion_control
            .clone()
            .unwrap_or_else(|| cfg.congestion_control.clone());
        r.bottleneck_limit_bytes = setup.limit_bytes.unwrap_or(cfg.limit_bytes);
        r.sender_rate_bits_per_s = pace;
        runs.push(r);
    }
    Ok((runs, topo.lab.namespaces().to_vec()))
}

/// How accurately a tbf on one sender holds `bits_per_s` here: one sender alone sends
/// about one second's worth through it; returns the rate measured on the wire.
fn tbf_accuracy(
    common: &Common,
    cfg: &Config,
    bits_per_s: f64,
    stop: &AtomicBool,
) -> Result<(f64, Vec<String>)> {
    let topo = build(common, cfg, 1, &Setup::default())?;
    set_rto_min(&topo, 1, 200_000)?;
    set_pacing(&topo, cfg, 1, Some(bits_per_s))?;
    let cal = Config {
        rounds: 1,
        block_bytes: (bits_per_s / 8.0) as u64,
        max_run_duration_ms: 10_000,
        ..cfg.clone()
    };
    let r = measure(&topo, &cal, 1, 200_000, Some(bits_per_s), stop)?;
    let mss = r.per_sender.first().map(|s| s.tcp.mss_bytes).unwrap_or(0);
    let secs = r.round_us.first().copied().unwrap_or(0) as f64 / 1e6;
    let wire = if secs > 0.0 {
        cal.block_bytes as f64 * 8.0 / secs / payload_share(mss)
    } else {
        0.0
    };
    Ok((wire, topo.lab.namespaces().to_vec()))
}

fn mbit(bits: f64) -> String {
    format!("{:.1} Mbit/s", bits / 1e6)
}

fn measured_text(r: &Run, base: &Run) -> crate::remedy::Measured {
    crate::remedy::Measured {
        text: format!(
            "{} senders: goodput {} (baseline {}); {} of {} rounds stalled > {} ms; p99 round {:.0} ms; {} RTO + {} TLP; {} bottleneck drops; {:.0}% of the time lost",
            r.senders,
            mbit(r.goodput_bits_per_s),
            mbit(base.goodput_bits_per_s),
            r.slow_rounds,
            r.rounds,
            r.slow_round_threshold_us / 1000,
            r.round_p99_us as f64 / 1e3,
            r.rto_expiries,
            r.loss_probes,
            r.bottleneck_drops
                .map(|d| d.to_string())
                .unwrap_or_else(|| "?".into()),
            r.time_lost_share * 100.0
        ),
        value: Some(r.goodput_bits_per_s / 1e6),
    }
}

/// `--remedies` over the fan-in sweep: the baseline (the configured congestion control, the
/// first RTO floor given, 200 ms by default) and each selected remedy, each in a fresh topology, at every sender count.
pub fn remedies(
    common: &Common,
    cfg: &Config,
    selected: &[String],
    stop: &AtomicBool,
) -> Result<Outcome<RemedyReport<Config, Run, Facts>>> {
    use crate::remedy::{self, Prediction, Tolerance};
    validate(cfg)?;
    let rate = cfg.rate_bits_per_s()?;
    // The baseline's RTO floor: the first --rto-min (200 ms, Linux's default, unless given).
    let base_rto = cfg.rto_min_us.first().copied().unwrap_or(200_000);
    let (base_runs, mut namespaces) =
        run_setup(common, cfg, &Setup::default(), base_rto, &cfg.senders, stop)?;
    let by_n = |n: u32| base_runs.iter().find(|r| r.senders == n);
    let mut notes = vec![
        format!(
            "Baseline: {} senders, {} bytes each round split over them, bottleneck tbf {} burst {} B limit {} B; senders run {}, rto_min {} ms on their routes.",
            cfg.senders
                .iter()
                .map(|n| n.to_string())
                .collect::<Vec<_>>()
                .join(", "),
            crate::remedy::thousands(cfg.block_bytes),
            mbit(rate),
            cfg.burst_bytes,
            cfg.limit_bytes,
            cfg.congestion_control,
            base_rto / 1000
        ),
        "Time lost = sum(max(0, round - reference)) / sum(round), the reference being the median round (the fastest when most rounds stalled): the lab's own jitter does not count.".to_string(),
        "Goodput of repeated runs of the same setting varies by about a fifth here (BENCHMARKS: 3 sweeps), so predictions of goodput are compared within 30%.".to_string(),
    ];
    let mut rows: Vec<remedy::Row<Run>> = Vec::new();
    let mut facts = Facts::default();
    for (idx, name) in selected.iter().enumerate() {
        if stop.load(Ordering::Relaxed) {
            break;
        }
        let _ = idx;
        // Remedies that need what the kernel may lack.
        let missing = match name.as_str() {
            "dctcp" => {
                let (ok, list) = cc_available("dctcp");
                facts.congestion_controls_available = Some(list.clone());
                (!ok)
                    .then(|| {
                        format!(
                            "this kernel has no dctcp (tcp_available_congestion_control: {list})"
                        )
                    })
                    .or_else(|| {
                        Some("the lab builds no ECN-marking bottleneck for DCTCP".to_string())
                    })
            }
            "red-ecn" => (!*facts
                .qdiscs_available
                .entry("red".into())
                .or_insert(qdisc_available("red")?))
            .then(|| {
                "this kernel has no sch_red (tc qdisc add ... red: unknown qdisc kind)".to_string()
            })
            .or_else(|| Some("the lab does not build RED marking yet".to_string())),
            "fq-codel" => (!*facts
                .qdiscs_available
                .entry("fq_codel".into())
                .or_insert(qdisc_available("fq_codel")?))
            .then(|| "this kernel has no sch_fq_codel (nor sch_fq, sch_codel)".to_string())
            .or_else(|| Some("the lab does not build fq_codel at the bottleneck yet".to_string())),
            "bbr" => {
                let (ok, list) = cc_available("bbr");
                facts.congestion_controls_available = Some(list.clone());
                (!ok).then(|| {
                    format!("this kernel has no bbr (tcp_available_congestion_control: {list})")
                })
            }
            _ => None,
        };
        let changes_of = |name: &str| -> String {
            match name {
                "rto-min-5ms" => "ip route ... rto_min 5ms on each sender's route to the receiver".into(),
                "pace-80" => format!("tbf rate {} (80% of the bottleneck) burst {} B on each sender's interface", mbit(0.8 * rate), PACING_BURST_BYTES),
                "pace-share" => format!("tbf on each sender at 80% of the bottleneck / N ({} / N), burst {} B", mbit(0.8 * rate), PACING_BURST_BYTES),
                "bbr" => format!("ip route ... congctl bbr on each sender's route to the receiver (baseline: {})", cfg.congestion_control),
                "deeper-buffer" => "bottleneck tbf limit raised to hold a whole round".into(),
                "fewer-senders" => "half the senders (N / 2) answer the same block per round".into(),
                "dctcp" => "DCTCP on the senders with ECN marking at the bottleneck".into(),
                "red-ecn" => "RED with ECN marking at the bottleneck".into(),
                "fq-codel" => "fq_codel at the bottleneck".into(),
                _ => String::new(),
            }
        };
        if let Some(why) = missing {
            rows.push(remedy::cannot_build(name, &changes_of(name), &why));
            continue;
        }
        let round_bytes = |n: u32| (cfg.block_bytes / u64::from(n) * u64::from(n)) as f64;
        let frame_share = payload_share(
            base_runs
                .first()
                .map(|r| r.median_tcp(|t| t.mss_bytes))
                .unwrap_or(0),
        );
        let deep_limit =
            ((cfg.block_bytes as f64 / frame_share) as u64).div_ceil(1024) * 1024 + cfg.burst_bytes;
        let (setup, rto, senders): (Setup, u64, Vec<u32>) = match name.as_str() {
            "rto-min-5ms" => (Setup::default(), REMEDY_RTO_MIN_US, cfg.senders.clone()),
            "pace-80" => (
                Setup {
                    pacing: Pacing::EachAt(0.8),
                    ..Setup::default()
                },
                base_rto,
                cfg.senders.clone(),
            ),
            "pace-share" => (
                Setup {
                    pacing: Pacing::SharedAt(0.8),
                    ..Setup::default()
                },
                base_rto,
                cfg.senders.clone(),
            ),
            "bbr" => (
                Setup {
                    congestion_control: Some("bbr".into()),
                    ..Setup::default()
                },
                base_rto,
                cfg.senders.clone(),
            ),
            "deeper-buffer" => (
                Setup {
                    limit_bytes: Some(deep_limit),
                    ..Setup::default()
                },
                base_rto,
                cfg.senders.clone(),
            ),
            "fewer-senders" => {
                let halves: Vec<u32> = cfg
                    .senders
                    .iter()
                    .filter(|&&n| n >= 2)
                    .map(|n| n / 2)
                    .collect();
                if halves.is_empty() {
                    rows.push(remedy::cannot_build(
                        name,
                        &changes_of(name),
                        "every sender count of this run is 1: there is nothing to halve",
                    ));
                    continue;
                }
                (Setup::default(), base_rto, halves)
            }
            other => {
                return Err(Error::invalid(
                    format!("remedy {other}"),
                    "not an incast remedy",
                ))
            }
        };
        let (runs, ns) = run_setup(common, cfg, &setup, rto, &senders, stop)?;
        namespaces.extend(ns);
        if name == "pace-80" {
            let (wire, ns) = tbf_accuracy(common, cfg, 0.8 * rate, stop)?;
            facts.pace_80_wire_bits_per_s = Some(wire);
            namespaces.extend(ns);
            notes.push(format!(
                "tbf accuracy here: one sender paced at {} (burst {} B) sent {} on the wire ({:+.1}%).",
                mbit(0.8 * rate),
                PACING_BURST_BYTES,
                mbit(wire),
                (wire / (0.8 * rate) - 1.0) * 100.0
            ));
        }
        for run in runs {
            // The baseline this run is judged against: the same sender count, except for
            // fewer-senders, judged against the count it halves.
            let base_n = if name == "fewer-senders" {
                cfg.senders
                    .iter()
                    .copied()
                    .find(|&n| n / 2 == run.senders && n >= 2)
            } else {
                Some(run.senders)
            };
            let Some(base) = base_n.and_then(by_n) else {
                continue;
            };
            let n = base.senders;
            let rb = round_bytes(n);
            let reference = diagnose::reference_round_us(&base.round_us, base.line_round_us)
                .unwrap_or(0) as f64;
            // Each round: its typical part and what it lost beyond the reference.
            let parts: Vec<(f64, f64)> = base
                .round_us
                .iter()
                .map(|&r| {
                    let r = r as f64;
                    (r.min(reference), (r - reference).max(0.0))
                })
                .collect();
            let goodput_of =
                |time_us: f64| rb * f64::from(base.rounds) * 8.0 / (time_us / 1e6) / 1e6;
            let tol = Tolerance::Relative(0.3);
            let noise = "run-to-run spread of goodput here (about a fifth)";
            let prediction: std::result::Result<Prediction, String> = match name.as_str() {
                "rto-min-5ms" => {
                    let srtt = f64::from(base.median_tcp(|t| t.srtt_us));
                    let rttvar = f64::from(base.median_tcp(|t| t.rttvar_us));
                    let rto_old = f64::from(base.median_tcp(|t| t.rto_us)).max(base_rto as f64);
                    let rto_new = srtt + (4.0 * rttvar).max(REMEDY_RTO_MIN_US as f64);
                    let scale = rto_new / rto_old;
                    let time: f64 = parts.iter().map(|(t, lost)| t + lost * scale).sum();
                    Ok(Prediction::value(
                        format!(
                            "each timer wait shrinks from the senders' RTO {:.0} ms to srtt + max(4 x rttvar, rto_min) = {:.1} + max(4 x {:.1}, 5) = {:.1} ms (tcp_set_rto); the baseline's time lost beyond its reference round ({:.1} ms) scales by {:.3}: goodput {}",
                            rto_old / 1e3, srtt / 1e3, rttvar / 1e3, rto_new / 1e3, reference / 1e3, scale, mbit(goodput_of(time) * 1e6)
                        ),
                        "the same losses, each costing milliseconds instead of 200 ms",
                        goodput_of(time),
                        "Mbit/s",
                        tol,
                        noise,
                    ))
                }
                "pace-80" if n >= 2 => Ok(Prediction::value(
                    format!(
                        "{n} senders x 80% = {:.0}% of the bottleneck arrive at once: the queue still grows at ({:.1} - 1) x {} whenever they send together, so the same overflow and timer waits: goodput as the baseline's {}",
                        0.8 * f64::from(n) * 100.0, 0.8 * f64::from(n), mbit(rate), mbit(base.goodput_bits_per_s)
                    ),
                    "no effect: the cap is per sender, the overflow is of their sum",
                    base.goodput_bits_per_s / 1e6,
                    "Mbit/s",
                    tol,
                    noise,
                )),
                "pace-80" => Ok(Prediction::value(
                    format!("one sender capped at 80% of {}: goodput at most 80% x {} x {:.3} payload per frame", mbit(rate), mbit(rate), frame_share),
                    "slower: a single sender cannot overflow the queue anyway",
                    (0.8 * rate * frame_share / 1e6).min(base.goodput_bits_per_s / 1e6),
                    "Mbit/s",
                    tol,
                    noise,
                )),
                "pace-share" => {
                    let frames = f64::from(n) * (PACING_BURST_BYTES as f64 / 1514.0);
                    let room = (cfg.limit_bytes + cfg.burst_bytes) as f64 / 1514.0;
                    Ok(Prediction::value(
                        format!(
                            "together 80% of the bottleneck: the queue holds only the senders' tbf bursts, {n} x {:.0} frames = {frames:.0} of the {room:.0} the bottleneck takes ({} + {} B): {}; a round takes its bytes at 80% of {} x {frame_share:.3}: goodput {}",
                            PACING_BURST_BYTES as f64 / 1514.0,
                            cfg.limit_bytes,
                            cfg.burst_bytes,
                            if frames <= room { "no overflow" } else { "the bursts at a round's start can still overflow" },
                            mbit(rate),
                            mbit(0.8 * rate * frame_share)
                        ),
                        "no loss at the bottleneck, at 80% of its rate",
                        0.8 * rate * frame_share / 1e6,
                        "Mbit/s",
                        Tolerance::Relative(0.15),
                        "the tbf accuracy and the per-round request time (the fastest 1-sender rounds here reach about 90% of the line)",
                    ))
                }
                "bbr" => Err("BBR paces each flow from its own bandwidth and RTT estimates (startup at 2.89x, probing at 1.25x); tcpdoctor has no model of how N BBR flows share a shallow queue in short rounds".to_string()),
                "deeper-buffer" => Ok(Prediction::value(
                    format!(
                        "a round never has more than its {} bytes in flight: a queue of {} bytes (block / {frame_share:.3} + burst) holds all of it, so nothing is dropped and no sender waits for a timer; goodput is the line's payload rate, {} x {frame_share:.3} = {} (each round also queues up to {:.1} ms)",
                        crate::remedy::thousands(rb as u64),
                        crate::remedy::thousands(deep_limit),
                        mbit(rate),
                        mbit(rate * frame_share),
                        deep_limit as f64 * 8.0 / rate * 1e3
                    ),
                    "no loss, no timer wait; more queueing delay",
                    rate * frame_share / 1e6,
                    "Mbit/s",
                    Tolerance::Relative(0.15),
                    "the per-round request time: the fastest 1-sender rounds here reach about 90% of the line",
                )),
                "fewer-senders" => {
                    let events: i64 = base.per_sender.iter().map(|s| s.timer_events).sum();
                    let q = (events as f64 / (f64::from(n) * f64::from(base.rounds))).min(1.0);
                    let half = f64::from(run.senders);
                    let p_half = 1.0 - (1.0 - q).powf(half);
                    // Stalled rounds: those that lost a quarter of a round or more.
                    let stalls: Vec<f64> = parts
                        .iter()
                        .filter(|(_, lost)| *lost >= reference / 4.0)
                        .map(|(_, lost)| *lost)
                        .collect();
                    let p_base = stalls.len() as f64 / parts.len().max(1) as f64;
                    let mean_stall = if stalls.is_empty() { 0.0 } else { stalls.iter().sum::<f64>() / stalls.len() as f64 };
                    let typical: f64 = parts.iter().map(|(t, _)| t).sum();
                    let time = typical + parts.len() as f64 * p_half * mean_stall;
                    Ok(Prediction::value(
                        format!(
                            "each of the {n} senders waited on a timer in {:.1}% of the rounds (q = {events} timer events / ({n} x {} rounds)); with {} senders a round stalls with 1 - (1 - q)^{} = {:.0}% (baseline: {:.0}% of the rounds lost a quarter round or more, {:.1} ms each): goodput {}",
                            q * 100.0, base.rounds, run.senders, run.senders, p_half * 100.0,
                            p_base * 100.0,
                            mean_stall / 1e3, mbit(goodput_of(time) * 1e6)
                        ),
                        "fewer stalled rounds, if each sender's chance of a tail loss stays the same",
                        goodput_of(time),
                        "Mbit/s",
                        tol,
                        noise,
                    ))
                }
                _ => Err("no model".to_string()),
            };
            let check = remedy::judge(
                &run.label,
                tcpdoctor_model::Pathology::Incast,
                harm(base),
                &base.findings,
                harm(&run),
                &run.findings,
            )
            .with_trace(
                base.trace.harm(tcpdoctor_model::Pathology::Incast),
                run.trace.harm(tcpdoctor_model::Pathology::Incast),
            )
            .with_reproduction(&reproduction(&run));
            let disagreement_reason = match name.as_str() {
                "fewer-senders" => Some("a sender's chance of a timer wait is not independent of the fan-in: fewer flows overflow the same buffer less often".to_string()),
                "rto-min-5ms" => Some("a lower floor also changes how often timers fire (repeated and spurious timeouts) and the slow start after each".to_string()),
                "pace-share" | "deeper-buffer" => Some("the senders' own pacing or the per-round request time, not the bottleneck, set the pace".to_string()),
                "pace-80" => Some("each sender's tbf also caps its burst at 10 frames instead of a whole flight at veth speed, so fewer segments meet at the bottleneck than the sum of the rates suggests".to_string()),
                _ => None,
            };
            let mut changes = changes_of(name);
            if name == "deeper-buffer" {
                changes = format!(
                    "bottleneck tbf limit {} bytes instead of {} (a whole round)",
                    crate::remedy::thousands(deep_limit),
                    crate::remedy::thousands(cfg.limit_bytes)
                );
            }
            if name == "fewer-senders" {
                changes = format!(
                    "{} senders instead of {n}, same block per round",
                    run.senders
                );
            }
            rows.push(remedy::row(remedy::Outcome {
                remedy: name.clone(),
                changes,
                prediction,
                measured: measured_text(&run, base),
                check,
                override_verdict: None,
                disagreement_reason,
                run,
            }));
        }
    }
    let baseline = base_runs
        .iter()
        .max_by_key(|r| r.senders)
        .cloned()
        .unwrap_or_default();
    if base_runs.len() > 1 {
        notes.push(format!(
            "Baseline per sender count: {}.",
            base_runs
                .iter()
                .map(|r| format!(
                    "{} senders {} ({:.0}% of the time lost)",
                    r.senders,
                    mbit(r.goodput_bits_per_s),
                    r.time_lost_share * 100.0
                ))
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    let report = RemedyReport {
        header: Header {
            scenario: "incast".into(),
            run_id: std::process::id(),
            subnet: common.subnet.to_string(),
            namespaces,
            capture: None,
            trace: crate::trace::LabTrace::of(
                base_runs
                    .iter()
                    .chain(rows.iter().filter_map(|r| r.run.as_ref()))
                    .map(|r| r.trace.clone())
                    .collect(),
            ),
            diagnosed_by: DIAGNOSED_BY.map(String::from).to_vec(),
            reproduction: remedy_reproductions(&baseline, &rows, reproduction),
        },
        config: cfg.clone(),
        facts,
        baseline_label: format!(
            "{} senders, {} rounds of {} bytes, bottleneck {} (limit {} B), {}, rto_min {} ms",
            baseline.senders,
            cfg.rounds,
            crate::remedy::thousands(cfg.block_bytes),
            mbit(rate),
            cfg.limit_bytes,
            cfg.congestion_control,
            base_rto / 1000
        ),
        baseline_harm: harm(&baseline),
        baseline_findings: baseline.findings.clone(),
        baseline,
        remedies: rows,
        notes,
        syn_ladder: None,
    };
    let remedied = report.remedied(
        |r| r.findings.clone(),
        |row| row_reproduction(row, reproduction),
    );
    Ok(Outcome {
        reproduction: report.header.reproduction.baseline().cloned(),
        findings: report.baseline.findings.clone(),
        interrupted: stop.load(Ordering::Relaxed),
        remedied,
        body: report,
    })
}
