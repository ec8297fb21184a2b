//! `--remedies` for incast: each selected remedy built in a fresh topology and run at every
//! sender count, its effect predicted from the baseline's rounds and counters, then judged
//! against what was measured.

use std::sync::atomic::{AtomicBool, Ordering};

use serde::{Deserialize, Serialize};
use tcpdoctor_model::remedy::{self, Harm, Measured, Prediction, Row, Tolerance};
use tcpdoctor_model::reproduce::Reproduction;
use tcpdoctor_model::Pathology;

use super::measure::measure;
use super::{
    build, harm, payload_share, reproduction, run_setup, set_pacing, set_rto_min, validate, Config,
    Pacing, Run, Setup, PACING_BURST_BYTES,
};
use crate::scenario::driver::{self, Ran, Remedy, Rows, Scenario, Tail};
use crate::scenario::Common;
use crate::Result;

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

/// Why congestion control `cc` cannot be used, if this kernel lacks it (the list it has goes
/// into `facts`).
fn cc_missing(facts: &mut Facts, cc: &str) -> Option<String> {
    let (ok, list) = cc_available(cc);
    let why = format!("this kernel has no {cc} (tcp_available_congestion_control: {list})");
    facts.congestion_controls_available = Some(list);
    (!ok).then_some(why)
}

/// `lacks` (what this kernel has not), if it cannot build qdisc `kind` (tried once, the
/// answer kept in `facts`).
fn qdisc_missing(facts: &mut Facts, kind: &str, lacks: &str) -> Result<Option<String>> {
    let available = tcpdoctor_sandbox::topo::qdisc_available(kind)?;
    let ok = *facts
        .qdiscs_available
        .entry(kind.into())
        .or_insert(available);
    Ok((!ok).then(|| format!("this kernel has {lacks}")))
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
    set_pacing(&topo, cfg, 1, bits_per_s)?;
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

fn measured_text(r: &Run, base: &Run) -> tcpdoctor_model::remedy::Measured {
    tcpdoctor_model::remedy::Measured {
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

/// Incast as `--remedies` drives it: the baseline is the fan-in sweep (the configured
/// congestion control, the first RTO floor given, 200 ms by default), and each selected
/// remedy is built in a fresh topology and run at every sender count, each run judged
/// against the baseline's run at the same count.
pub struct Incast {
    cfg: Config,
    /// The baseline's RTO floor: the first --rto-min (200 ms, Linux's default, unless given).
    base_rto: u64,
    /// The bottleneck's rate, bits/s.
    rate: f64,
    /// The baseline's runs, one per sender count.
    base_runs: Vec<Run>,
    facts: Facts,
    /// Notes measured on the way (tbf accuracy).
    notes: Vec<String>,
}

/// A sweep as run: the topology's deviation, the RTO floor, the sender counts.
#[derive(Clone, Debug)]
pub struct Sweep {
    setup: Setup,
    rto_min_us: u64,
    senders: Vec<u32>,
}

impl Incast {
    pub fn new(cfg: Config) -> Incast {
        Incast {
            base_rto: cfg.rto_min_us.first().copied().unwrap_or(200_000),
            rate: 0.0,
            base_runs: Vec::new(),
            facts: Facts::default(),
            notes: Vec::new(),
            cfg,
        }
    }

    /// The scenario as a recorded `--remedies` run left it after its baseline (the
    /// baseline's runs, what it measured of the host), to judge the recorded remedy runs
    /// again without root (crates/lab/tests/verdicts.rs).
    pub fn recorded(cfg: Config, base_runs: Vec<Run>, facts: Facts) -> Result<Incast> {
        let mut s = Incast::new(cfg);
        s.rate = s.cfg.rate_bits_per_s()?;
        s.base_runs = base_runs;
        s.facts = facts;
        Ok(s)
    }

    /// The row of `run`, one run of remedy `name`'s sweep (`r`), judged against the
    /// baseline's run at its sender count; `None` when the baseline has none.
    pub fn row_of(&self, name: &str, r: &Remedy<Sweep>, run: Run) -> Option<Row<Run>> {
        let base = self.base_of(name, &run)?;
        let n = base.senders;
        let changes = match name {
            "deeper-buffer" => format!(
                "bottleneck tbf limit {} bytes instead of {} (a whole round)",
                tcpdoctor_model::units::thousands(self.deep_limit()),
                tcpdoctor_model::units::thousands(self.cfg.limit_bytes)
            ),
            "fewer-senders" => {
                format!(
                    "{} senders instead of {n}, same block per round",
                    run.senders
                )
            }
            _ => self.changes_of(name),
        };
        let remedy = Remedy {
            label: r.label.clone(),
            variant: r.variant.clone(),
            prediction: self.prediction(name, &run, base),
            changes,
        };
        Some(driver::row(self, name, remedy, run, base))
    }

    /// Why this kernel or lab cannot build remedy `name`, if it cannot (what it looked at
    /// goes into the facts).
    fn missing(&mut self, name: &str) -> Result<Option<String>> {
        let facts = &mut self.facts;
        let not_yet = |why: &str| Some(why.to_string());
        Ok(match name {
            "dctcp" => cc_missing(facts, "dctcp")
                .or_else(|| not_yet("the lab builds no ECN-marking bottleneck for DCTCP")),
            "red-ecn" => qdisc_missing(
                facts,
                "red",
                "no sch_red (tc qdisc add ... red: unknown qdisc kind)",
            )?
            .or_else(|| not_yet("the lab does not build RED marking yet")),
            "fq-codel" => {
                qdisc_missing(facts, "fq_codel", "no sch_fq_codel (nor sch_fq, sch_codel)")?
                    .or_else(|| not_yet("the lab does not build fq_codel at the bottleneck yet"))
            }
            "bbr" => cc_missing(facts, "bbr"),
            _ => None,
        })
    }

    /// What remedy `name` changes, in words.
    fn changes_of(&self, name: &str) -> String {
        let (cfg, rate) = (&self.cfg, self.rate);
        match name {
            "rto-min-5ms" => {
                "ip route ... rto_min 5ms on each sender's route to the receiver".into()
            }
            "pace-80" => format!(
                "tbf rate {} (80% of the bottleneck) burst {} B on each sender's interface",
                mbit(0.8 * rate),
                PACING_BURST_BYTES
            ),
            "pace-share" => format!(
                "tbf on each sender at 80% of the bottleneck / N ({} / N), burst {} B",
                mbit(0.8 * rate),
                PACING_BURST_BYTES
            ),
            "bbr" => format!(
                "ip route ... congctl bbr on each sender's route to the receiver (baseline: {})",
                cfg.congestion_control
            ),
            "deeper-buffer" => "bottleneck tbf limit raised to hold a whole round".into(),
            "fewer-senders" => "half the senders (N / 2) answer the same block per round".into(),
            "dctcp" => "DCTCP on the senders with ECN marking at the bottleneck".into(),
            "red-ecn" => "RED with ECN marking at the bottleneck".into(),
            "fq-codel" => "fq_codel at the bottleneck".into(),
            _ => String::new(),
        }
    }

    /// The payload share of a frame, from the baseline's MSS.
    fn frame_share(&self) -> f64 {
        payload_share(
            self.base_runs
                .first()
                .map(|r| r.median_tcp(|t| t.mss_bytes))
                .unwrap_or(0),
        )
    }

    /// The `deeper-buffer` remedy's bottleneck limit: a whole round, in frames, plus burst.
    fn deep_limit(&self) -> u64 {
        let cfg = &self.cfg;
        ((cfg.block_bytes as f64 / self.frame_share()) as u64).div_ceil(1024) * 1024
            + cfg.burst_bytes
    }

    /// The baseline run remedy `name`'s `run` is judged against: the same sender count,
    /// except for fewer-senders, judged against the count it halves.
    fn base_of(&self, name: &str, run: &Run) -> Option<&Run> {
        let base_n = if name == "fewer-senders" {
            self.cfg
                .senders
                .iter()
                .copied()
                .find(|&n| n / 2 == run.senders && n >= 2)
        } else {
            Some(run.senders)
        };
        base_n.and_then(|n| self.base_runs.iter().find(|r| r.senders == n))
    }

    /// tcpdoctor's prediction of remedy `name` for `run`, from its baseline run `base`.
    fn prediction(
        &self,
        name: &str,
        run: &Run,
        base: &Run,
    ) -> std::result::Result<Prediction, String> {
        let (cfg, rate, base_rto) = (&self.cfg, self.rate, self.base_rto);
        let frame_share = self.frame_share();
        let deep_limit = self.deep_limit();
        let n = base.senders;
        let rb = base.round_bytes(cfg.block_bytes) as f64;
        let reference =
            tcpdoctor_analyze::fan_in::reference_round_us(&base.round_us, base.line_round_us)
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
        let goodput_of = |time_us: f64| rb * f64::from(base.rounds) * 8.0 / (time_us / 1e6) / 1e6;
        let tol = Tolerance::Relative(0.3);
        let noise = "run-to-run spread of goodput here (about a fifth)";
        match name {
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
                    tcpdoctor_model::units::thousands(rb as u64),
                    tcpdoctor_model::units::thousands(deep_limit),
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
        }
    }
}

impl Scenario for Incast {
    type Config = Config;
    type Run = Run;
    type Variant = Sweep;
    type Facts = Facts;
    const NAME: &'static str = "incast";
    const PATHOLOGY: Pathology = Pathology::Incast;
    const DIAGNOSED_BY: &'static [&'static str] = &[
        "the lab's fan-in detector (each sender's retransmission-timer counters and the round times)",
    ];
    /// Those this lab builds, then those that need what this kernel may lack (each row says
    /// whether it could be built).
    const REMEDIES: &'static [&'static str] = &[
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
    const FIX: &'static [&'static str] = &["rto-min-5ms"];

    fn config(&self) -> &Config {
        &self.cfg
    }

    fn validate(&self) -> Result<()> {
        validate(&self.cfg)
    }

    fn baseline(&self) -> (String, Sweep) {
        let sweep = Sweep {
            setup: Setup::default(),
            rto_min_us: self.base_rto,
            senders: self.cfg.senders.clone(),
        };
        (String::new(), sweep)
    }

    /// Runs the sweep; the run with the most senders stands for it (the baseline's sweep is
    /// kept whole: each remedy's run is judged against the baseline's at its count).
    fn run(
        &mut self,
        common: &Common,
        tag: &'static str,
        _label: &str,
        sweep: &Sweep,
        stop: &AtomicBool,
    ) -> Result<Ran<Run>> {
        self.rate = self.cfg.rate_bits_per_s()?;
        let Ran {
            run: runs,
            namespaces,
            capture,
        } = run_setup(
            common,
            &self.cfg,
            (&sweep.setup, &[sweep.rto_min_us], &sweep.senders),
            driver::baseline_pcap(common, tag),
            stop,
        )?;
        let most = runs
            .iter()
            .max_by_key(|r| r.senders)
            .cloned()
            .unwrap_or_default();
        if tag.is_empty() {
            self.base_runs = runs;
        }
        Ok(Ran {
            run: most,
            namespaces,
            capture,
        })
    }

    fn harm(&self, run: &Run) -> Harm {
        harm(run)
    }

    fn reproduction(&self, run: &Run) -> Reproduction {
        reproduction(run)
    }

    /// The remedy table: what each remedy builds (its prediction is made per sender count,
    /// in [`Incast::prediction`]).
    fn remedy(&mut self, name: &str, _base: &Run) -> Result<Remedy<Sweep>> {
        let (senders, base_rto) = (self.cfg.senders.clone(), self.base_rto);
        let sweep = |setup: Setup| Sweep {
            setup,
            rto_min_us: base_rto,
            senders: senders.clone(),
        };
        let variant = match name {
            "rto-min-5ms" => Sweep {
                rto_min_us: REMEDY_RTO_MIN_US,
                ..sweep(Setup::default())
            },
            "pace-80" => sweep(Setup {
                pacing: Pacing::EachAt(0.8),
                ..Setup::default()
            }),
            "pace-share" => sweep(Setup {
                pacing: Pacing::SharedAt(0.8),
                ..Setup::default()
            }),
            "bbr" => sweep(Setup {
                congestion_control: Some("bbr".into()),
                ..Setup::default()
            }),
            "deeper-buffer" => sweep(Setup {
                limit_bytes: Some(self.deep_limit()),
                ..Setup::default()
            }),
            "fewer-senders" => Sweep {
                senders: senders.iter().filter(|&&n| n >= 2).map(|n| n / 2).collect(),
                ..sweep(Setup::default())
            },
            other => return Err(driver::unknown(other, "an incast")),
        };
        Ok(Remedy {
            label: name.to_string(),
            variant,
            prediction: Err("predicted per sender count".into()),
            changes: self.changes_of(name),
        })
    }

    /// Remedy `name` built once, run at every sender count, a row per run judged against
    /// the baseline's run at its count; a row saying why when it cannot be built.
    fn rows(
        &mut self,
        common: &Common,
        _tag: &'static str,
        name: &str,
        base: &Run,
        stop: &AtomicBool,
    ) -> Result<Rows<Run>> {
        let mut rows = Rows {
            rows: Vec::new(),
            namespaces: Vec::new(),
        };
        if stop.load(Ordering::Relaxed) {
            return Ok(rows);
        }
        let changes = self.changes_of(name);
        let cannot = |why: &str| remedy::cannot_build(name, &changes, why);
        if let Some(why) = self.missing(name)? {
            rows.rows.push(cannot(&why));
            return Ok(rows);
        }
        let r = self.remedy(name, base)?;
        if r.variant.senders.is_empty() {
            let why = "every sender count of this run is 1: there is nothing to halve";
            rows.rows.push(cannot(why));
            return Ok(rows);
        }
        let sweep = &r.variant;
        let ran = run_setup(
            common,
            &self.cfg,
            (&sweep.setup, &[sweep.rto_min_us], &sweep.senders),
            None,
            stop,
        )?;
        rows.namespaces.extend(ran.namespaces);
        if name == "pace-80" {
            rows.namespaces.extend(self.tbf_accuracy(common, stop)?);
        }
        rows.rows.extend(
            ran.run
                .into_iter()
                .filter_map(|run| self.row_of(name, &r, run)),
        );
        Ok(rows)
    }

    fn measured(&self, _name: &str, run: &Run, base: &Run) -> Measured {
        measured_text(run, base)
    }

    fn disagreement_reason(&self, name: &str, _run: &Run) -> Option<String> {
        match name {
            "fewer-senders" => Some("a sender's chance of a timer wait is not independent of the fan-in: fewer flows overflow the same buffer less often".to_string()),
            "rto-min-5ms" => Some("a lower floor also changes how often timers fire (repeated and spurious timeouts) and the slow start after each".to_string()),
            "pace-share" | "deeper-buffer" => Some("the senders' own pacing or the per-round request time, not the bottleneck, set the pace".to_string()),
            "pace-80" => Some("each sender's tbf also caps its burst at 10 frames instead of a whole flight at veth speed, so fewer segments meet at the bottleneck than the sum of the rates suggests".to_string()),
            _ => None,
        }
    }

    /// Every run of the baseline's sweep.
    fn base_traces(&self, _base: &Run) -> Vec<tcpdoctor_trace::run::RunTrace> {
        self.base_runs.iter().map(|r| r.trace.clone()).collect()
    }

    fn tail(&self, base: &Run, _rows: &[Row<Run>]) -> Tail<Facts> {
        let (cfg, rate, base_rto) = (&self.cfg, self.rate, self.base_rto);
        let mut notes = vec![
            format!(
                "Baseline: {} senders, {} bytes each round split over them, bottleneck tbf {} burst {} B limit {} B; senders run {}, rto_min {} ms on their routes.",
                crate::scenario::listed(&cfg.senders),
                tcpdoctor_model::units::thousands(cfg.block_bytes),
                mbit(rate),
                cfg.burst_bytes,
                cfg.limit_bytes,
                cfg.congestion_control,
                base_rto / 1000
            ),
            "Time lost = sum(max(0, round - reference)) / sum(round), the reference being the median round (the fastest when most rounds stalled): the lab's own jitter does not count.".to_string(),
            "Goodput of repeated runs of the same setting varies by about a fifth here (BENCHMARKS: 3 sweeps), so predictions of goodput are compared within 30%.".to_string(),
        ];
        notes.extend(self.notes.iter().cloned());
        if self.base_runs.len() > 1 {
            notes.push(format!(
                "Baseline per sender count: {}.",
                self.base_runs
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
        let baseline_label = format!(
            "{} senders, {} rounds of {} bytes, bottleneck {} (limit {} B), {}, rto_min {} ms",
            base.senders,
            cfg.rounds,
            tcpdoctor_model::units::thousands(cfg.block_bytes),
            mbit(rate),
            cfg.limit_bytes,
            cfg.congestion_control,
            base_rto / 1000
        );
        Tail::of(baseline_label, notes, self.facts.clone())
    }
}

impl Incast {
    /// Measures how accurately a tbf holds 80% of the bottleneck ([`tbf_accuracy`]), into
    /// the facts and notes; returns the namespaces it used.
    fn tbf_accuracy(&mut self, common: &Common, stop: &AtomicBool) -> Result<Vec<String>> {
        let rate = self.rate;
        let (wire, ns) = tbf_accuracy(common, &self.cfg, 0.8 * rate, stop)?;
        self.facts.pace_80_wire_bits_per_s = Some(wire);
        self.notes.push(format!(
            "tbf accuracy here: one sender paced at {} (burst {} B) sent {} on the wire ({:+.1}%).",
            mbit(0.8 * rate),
            PACING_BURST_BYTES,
            mbit(wire),
            (wire / (0.8 * rate) - 1.0) * 100.0
        ));
        Ok(ns)
    }
}
