//! `incast`: N sender namespaces answer one receiver through a bridge whose port toward the
//! receiver is a shallow token bucket (tbf). Each round the receiver asks every sender for
//! `block / N` bytes at once and waits for all of them; a round that loses a sender's tail
//! waits for that sender's retransmission timeout (file 001).
//!
//! ```text
//!  tdoc-lab-P-s0 ─ tdocs ══ tdocp0 ─┐
//!  tdoc-lab-P-s1 ─ tdocs ══ tdocp1 ─┤ tdocbr (tdoc-lab-P-sw) ─ tdocpr [tbf] ══ tdocr ─ tdoc-lab-P-rx
//!  ...                              ┘
//! ```
//! The RTO floor is set per sender on its route toward the receiver (`ip route ... rto_min`,
//! which overrides `net.ipv4.tcp_rto_min_us`; include/net/tcp.h `tcp_rto_min`).

use std::net::Ipv4Addr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use tcpdoctor_analyze::fan_in::{self, FanIn};
use tcpdoctor_model::merge::{add_new, merge_trace_into_incast};
use tcpdoctor_model::remedy::{Check, Harm};
use tcpdoctor_model::reproduce::{Event, Reproduction, Reproductions};
use tcpdoctor_model::{Finding, Pathology};

use super::driver::{self, Ran, Scenario};
use super::{Common, Header, Outcome};
use crate::{Error, Result};
use tcpdoctor_sandbox::topo::Lab;
use tcpdoctor_sandbox::{capture, naming};

mod measure;
mod remedies;

use measure::measure;
pub use remedies::{Facts, Incast, REMEDY_RTO_MIN_US};

/// A round that took this much longer than a typical round (the median round, or the fastest
/// when most rounds stalled: [`fan_in::reference_round_us`]) waited for a timer: the
/// smallest retransmission timeout Linux uses by default is 200 ms (`TCP_RTO_MIN`,
/// include/net/tcp.h), while a round's own jitter here is a few milliseconds.
pub const SLOW_ROUND: Duration = Duration::from_millis(100);

/// The counters `tcp_retransmit_timer` (net/ipv4/tcp_timer.c) bumps on a first timeout: which
/// one depends on the congestion state, so `TcpExtTCPTimeouts` alone misses timeouts that hit
/// during SACK recovery (the common case in incast).
pub const RTO_COUNTERS: [&str; 6] = [
    "TcpExtTCPTimeouts",
    "TcpExtTCPSackRecoveryFail",
    "TcpExtTCPSackFailures",
    "TcpExtTCPLossFailures",
    "TcpExtTCPRenoRecoveryFail",
    "TcpExtTCPRenoFailures",
];

/// One round may not take longer than this (several RTO backoffs); the run stops otherwise.
pub const ROUND_TIMEOUT: Duration = Duration::from_secs(10);

/// Incast parameters.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Config {
    /// Sender counts to measure (one run each; `--sweep senders=...` gives several).
    pub senders: Vec<u32>,
    /// Bytes the receiver asks for per round, split evenly over the senders.
    pub block_bytes: u64,
    /// Rounds per run.
    pub rounds: u32,
    /// Upper bound of one run.
    pub max_run_duration_ms: u64,
    /// tbf rate toward the receiver, as tc reads it (`1gbit`).
    pub rate: String,
    pub burst_bytes: u64,
    pub limit_bytes: u64,
    /// RTO floors to compare; one run per value per sender count.
    pub rto_min_us: Vec<u64>,
    /// The senders' congestion control, set on their routes to the receiver (`ip route ...
    /// congctl`). A new namespace inherits the host's default, so the lab sets it: `cubic`,
    /// Linux's default, unless asked otherwise.
    pub congestion_control: String,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            senders: vec![8],
            block_bytes: 1 << 20,
            rounds: 50,
            max_run_duration_ms: 30_000,
            rate: "100mbit".into(),
            burst_bytes: 16 * 1024,
            limit_bytes: 32 * 1024,
            rto_min_us: vec![200_000],
            congestion_control: "cubic".into(),
        }
    }
}

impl Config {
    /// The bottleneck's rate in bits per second (`rate` as tc reads it).
    pub fn rate_bits_per_s(&self) -> Result<f64> {
        self.rate
            .parse::<tcpdoctor_model::units::BitRate>()
            .map(|r| r.bits_per_s())
            .map_err(|e| Error::invalid(format!("--rate '{}'", self.rate), e.to_string()))
    }
}

/// Counters of one sender namespace over one run.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct SenderStats {
    pub sender: u32,
    /// `TcpRetransSegs` delta.
    pub retrans_segs: i64,
    /// `TcpExtTCPTimeouts` delta: retransmission timer expiries while no loss recovery was
    /// under way.
    pub timeouts: i64,
    /// Every first expiry of the retransmission timer, whatever the recovery state: the sum of
    /// [`RTO_COUNTERS`].
    pub rto_expiries: i64,
    /// `TcpExtTCPLossProbes` delta: tail loss probes sent. With one segment in flight the
    /// probe waits 2 x srtt + the RTO floor (`tcp_schedule_loss_probe`,
    /// net/ipv4/tcp_output.c), so a lost last segment of a reply also stalls for ~rto_min.
    pub loss_probes: i64,
    /// Events of the sender's timers that a stalled round waits for: `rto_expiries` +
    /// `loss_probes`.
    pub timer_events: i64,
    /// `TcpExtTCPFastRetrans` delta.
    pub fast_retrans: i64,
    /// The sender's connection at the end of the run (TCP_INFO).
    pub tcp: SenderTcp,
}

/// A sender's connection as `TCP_INFO` shows it at the end of a run.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct SenderTcp {
    /// Smoothed round-trip time (`tcpi_rtt`).
    pub srtt_us: u32,
    /// Its mean deviation (`tcpi_rttvar`: the smoothed deviation, before the RTO floor).
    pub rttvar_us: u32,
    /// The retransmission timeout (`tcpi_rto`).
    pub rto_us: u32,
    /// Congestion window, segments.
    pub cwnd: u32,
    pub mss_bytes: u32,
}

impl SenderTcp {
    /// Reads `TCP_INFO` of `s`; zeros when it cannot be read.
    pub fn of(s: &std::net::TcpStream) -> SenderTcp {
        let Some(info) = tcpdoctor_host::tcp_info::read(s) else {
            return SenderTcp::default();
        };
        SenderTcp {
            srtt_us: info.tcpi_rtt,
            rttvar_us: info.tcpi_rttvar,
            rto_us: info.tcpi_rto,
            cwnd: info.tcpi_snd_cwnd,
            mss_bytes: info.tcpi_snd_mss,
        }
    }
}

/// One run: N senders, one RTO floor.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Run {
    /// `8 senders, rto_min 200 ms`.
    pub label: String,
    pub senders: u32,
    pub rto_min_us: u64,
    pub rounds: u32,
    pub slow_rounds: u32,
    pub slow_round_threshold_us: u64,
    pub goodput_bits_per_s: f64,
    pub round_p50_us: u64,
    pub round_p99_us: u64,
    pub round_max_us: u64,
    pub retrans_segs: i64,
    /// `TcpExtTCPTimeouts` summed over the senders.
    pub timeouts: i64,
    /// Retransmission timer expiries summed over the senders (see [`RTO_COUNTERS`]).
    pub rto_expiries: i64,
    /// Tail loss probes summed over the senders.
    pub loss_probes: i64,
    /// Senders whose namespace counted at least one retransmission timer expiry.
    pub senders_with_timeouts: u32,
    /// Packets the bottleneck tbf dropped (`tc -s qdisc`), when it could be read.
    pub bottleneck_drops: Option<u64>,
    pub per_sender: Vec<SenderStats>,
    /// Round durations in order, microseconds.
    pub round_us: Vec<u64>,
    /// The run stopped at its time bound (`max_run_duration_ms`) before all rounds.
    pub hit_time_limit: bool,
    /// Ctrl-C stopped the run.
    pub interrupted: bool,
    /// sum(max(0, round - reference round)) / sum(round): the share of the run spent waiting
    /// beyond a typical round ([`FanIn::time_lost_share`]).
    pub time_lost_share: f64,
    /// Findings of the lab's fan-in detector on this run, with the trace's merged in.
    pub findings: Vec<Finding>,
    /// What the eBPF trace saw in this run (in the scenario header's `trace.runs`).
    #[serde(skip)]
    pub trace: tcpdoctor_trace::run::RunTrace,
    /// How long the round takes at the bottleneck's line rate.
    pub line_round_us: Option<u64>,
    /// The senders' congestion control.
    pub congestion_control: String,
    /// tbf queue limit of the bottleneck.
    pub bottleneck_limit_bytes: u64,
    /// tbf rate on each sender's own interface, when paced.
    pub sender_rate_bits_per_s: Option<f64>,
}

impl Run {
    /// Bytes a round carries (the block, split evenly over the senders).
    pub fn round_bytes(&self, block_bytes: u64) -> u64 {
        block_bytes / u64::from(self.senders.max(1)) * u64::from(self.senders.max(1))
    }

    /// The median of a per-sender TCP_INFO field.
    fn median_tcp(&self, f: impl Fn(&SenderTcp) -> u32) -> u32 {
        let mut v: Vec<u32> = self.per_sender.iter().map(|s| f(&s.tcp)).collect();
        v.sort_unstable();
        v.get(v.len() / 2).copied().unwrap_or(0)
    }
}

/// Time lost that is the lab's own jitter, not a stall: runs that dropped nothing at the
/// bottleneck lose 1-3% of their time by this measure here (rounds above the median).
pub const TIME_LOST_NOISE: f64 = 0.05;

/// The harm: the share of the time rounds spent beyond a typical round.
pub fn harm(run: &Run) -> Harm {
    Harm::share(run.time_lost_share, "of the time lost to stalled rounds").within(TIME_LOST_NOISE)
}

/// Whether a run reproduced incast: the timer waits (retransmission timer expiries and tail
/// loss probes, [`SenderStats::timer_events`]) of its senders when losses at the shared
/// bottleneck were spread over the fan-in (at least two senders, and at least half of them,
/// lost segments, and the bottleneck dropped packets: the lab's fan-in detector's condition,
/// [`fan_in::fan_in`]), and the eBPF trace's incast episodes (timeouts of several
/// flows into one receiver within its window). The cost is the rounds the waits stalled.
pub fn reproduction(run: &Run) -> Reproduction {
    let lossy = run.per_sender.iter().filter(|s| s.retrans_segs > 0).count() as u32;
    let shared = run.senders >= 2
        && lossy >= 2
        && 2 * lossy >= run.senders
        && run.bottleneck_drops != Some(0);
    let waits: i64 = run.per_sender.iter().map(|s| s.timer_events).sum();
    let mut signature = vec![Event::new(
        if shared { waits.max(0) as u64 } else { 0 },
        format!(
            "timer waits (RTO expiries, tail loss probes) with losses at the shared bottleneck on {lossy} of {} senders",
            run.senders
        ),
        "senders' counters",
    )];
    if run.trace.used {
        signature.push(Event::new(
            run.trace.incast_episodes.len() as u64,
            "incast episodes (timeouts of several flows into one receiver within the trace's window)",
            "eBPF trace",
        ));
    }
    Reproduction::of(
        &run.label,
        tcpdoctor_model::Pathology::Incast,
        signature,
        tcpdoctor_model::reproduce::Tried::new(
            u64::from(run.rounds),
            "rounds",
            run.round_us.iter().sum::<u64>() / 1000,
        ),
        || {
            Some(format!(
                "{} of {} rounds stalled beyond {}, {:.0}% of the time lost, longest round {}; goodput {}",
                run.slow_rounds,
                run.rounds,
                tcpdoctor_report::fmt::micros(run.slow_round_threshold_us),
                run.time_lost_share * 100.0,
                tcpdoctor_report::fmt::micros(run.round_max_us),
                tcpdoctor_report::fmt::bitrate(run.goodput_bits_per_s)
            ))
        },
        None,
    )
}

/// The incast record.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Report {
    #[serde(flatten)]
    pub header: Header,
    pub config: Config,
    /// Every run, in order: for each sender count, each RTO floor.
    pub runs: Vec<Run>,
    /// The run the diagnosis is about (largest sender count, first RTO floor).
    pub before: Option<Run>,
    /// The same sender count with the last RTO floor, when more than one was given.
    pub after: Option<Run>,
    /// `after` judged against `before` (with more than one RTO floor).
    #[serde(rename = "fix_results")]
    pub remedies: Vec<Check>,
}

/// How a topology deviates from the configuration: the remedies that change the senders or
/// the bottleneck.
#[derive(Clone, Debug, Default)]
pub struct Setup {
    /// Congestion control of the senders (`None`: the configuration's).
    pub congestion_control: Option<String>,
    /// tbf queue limit of the bottleneck (`None`: the configuration's).
    pub limit_bytes: Option<u64>,
    /// tbf on each sender's interface.
    pub pacing: Pacing,
}

/// A tbf on each sender's own interface (file 001's "limit every sender").
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub enum Pacing {
    #[default]
    None,
    /// Every sender at this share of the bottleneck rate.
    EachAt(f64),
    /// The senders together at this share: each at share / N.
    SharedAt(f64),
}

/// tbf burst of a pacing qdisc: two full frames. With high-resolution timers tbf still holds
/// the rate (measured: 80 Mbit/s within 0.1%), and N paced senders cannot burst much into the
/// bottleneck at a round's start.
pub const PACING_BURST_BYTES: u64 = 2 * 1514;

/// tbf queue of a pacing qdisc: a whole round (the block) plus the burst, so the sender's own
/// qdisc never drops: without fq, TCP small queues lets a flow put up to
/// `tcp_limit_output_bytes` (1 MiB) into it.
fn pacing_limit_bytes(cfg: &Config) -> u64 {
    cfg.block_bytes.max(256 * 1024) + PACING_BURST_BYTES
}

/// Header bytes of a full-size frame on the lab's veths beyond the TCP payload: Ethernet 14,
/// IPv4 20, TCP 20 and the timestamp option 12 (tbf counts the frame, goodput the payload).
pub const FRAME_OVERHEAD_BYTES: f64 = 66.0;

/// Payload share of a full-size frame for a sender whose MSS is `mss` (1448 here).
fn payload_share(mss: u32) -> f64 {
    let mss = if mss == 0 { 1448.0 } else { f64::from(mss) };
    mss / (mss + FRAME_OVERHEAD_BYTES)
}

struct Topology {
    /// The senders' congestion control, set on their routes to the receiver.
    cc: String,
    lab: Lab,
    senders: Vec<String>,
    switch: String,
    receiver: String,
    rx_addr: Ipv4Addr,
    subnet: tcpdoctor_sandbox::subnet::LabSubnet,
    trace_mode: tcpdoctor_trace::run::Mode,
}

fn build(common: &Common, cfg: &Config, max_senders: u32, setup: &Setup) -> Result<Topology> {
    let mut lab = Lab::new()?;
    let subnet = common.subnet;
    if max_senders + 1 > subnet.hosts().saturating_sub(9) {
        return Err(Error::invalid(
            "--senders",
            format!("{max_senders} senders do not fit in {subnet}"),
        ));
    }
    let switch = lab.add_ns("sw")?;
    let receiver = lab.add_ns("rx")?;
    let mut senders = Vec::new();
    for i in 0..max_senders {
        senders.push(lab.add_ns(&format!("s{i}"))?);
    }
    let br = naming::ifname("br")?;
    lab.bridge(&switch, &br)?;
    let (rx_if, rx_port) = (naming::ifname("r")?, naming::ifname("pr")?);
    lab.veth(&receiver, &rx_if, &switch, &rx_port)?;
    lab.enslave(&switch, &rx_port, &br)?;
    let rx_addr = subnet.host(1);
    lab.addr(&receiver, &rx_if, &subnet.cidr_of(1))?;
    let s_if = naming::ifname("s")?;
    for (i, ns) in senders.iter().enumerate() {
        let port = naming::ifname(&format!("p{i}"))?;
        lab.veth(ns, &s_if, &switch, &port)?;
        lab.enslave(&switch, &port, &br)?;
        lab.addr(ns, &s_if, &subnet.cidr_of(10 + i as u32))?;
    }
    // The shallow bottleneck: the bridge's port toward the receiver.
    let limit = setup.limit_bytes.unwrap_or(cfg.limit_bytes);
    let bottleneck = (cfg.rate.as_str(), cfg.burst_bytes, limit);
    lab.tbf(
        &switch,
        "shape the receiver's port with tbf",
        ("add", &rx_port),
        bottleneck,
    )?;
    let cc = setup
        .congestion_control
        .clone()
        .unwrap_or_else(|| cfg.congestion_control.clone());
    Ok(Topology {
        cc,
        lab,
        senders,
        switch,
        receiver,
        rx_addr,
        subnet,
        trace_mode: common.trace.clone(),
    })
}

/// Sets the RTO floor and the congestion control on each of the first `n` senders' routes to
/// the receiver. The route's `congctl` also applies to connections the sender accepts
/// (`tcp_ca_openreq_child`); a namespace's default congestion control can only be one of
/// the host's `tcp_allowed_congestion_control`, a route's can be any the kernel has.
fn set_rto_min(t: &Topology, n: u32, rto_min_us: u64) -> Result<()> {
    let dst = format!("{}/32", t.rx_addr);
    // `ip route` takes rto_min in whole milliseconds (RTAX_RTO_MIN is stored in ms).
    let rto = format!("{}ms", rto_min_us / 1000);
    let s_if = naming::ifname("s")?;
    for ns in t.senders.iter().take(n as usize) {
        t.lab.route(
            ns,
            "set rto_min and congctl on the route to the receiver",
            &[
                "replace", &dst, "dev", &s_if, "rto_min", &rto, "congctl", &t.cc,
            ],
        )?;
    }
    Ok(())
}

/// Puts a tbf on each of the first `n` senders' interfaces at `bits_per_s`.
fn set_pacing(t: &Topology, cfg: &Config, n: u32, bits_per_s: f64) -> Result<()> {
    let (limit, rate) = (
        pacing_limit_bytes(cfg),
        format!("{}bit", bits_per_s.round() as u64),
    );
    let s_if = naming::ifname("s")?;
    for ns in t.senders.iter().take(n as usize) {
        let pace = (rate.as_str(), PACING_BURST_BYTES, limit);
        t.lab
            .tbf(ns, "pace the sender with tbf", ("replace", &s_if), pace)?;
    }
    Ok(())
}

/// Packets the bottleneck's tbf (the switch's port toward the receiver) dropped so far.
fn bottleneck_drops(t: &Topology) -> Option<u64> {
    t.lab.qdisc_drops(&t.switch, &naming::ifname("pr").ok()?)
}

/// Refuses sender counts and RTO floors the lab cannot set up.
fn validate(cfg: &Config) -> Result<()> {
    if cfg.senders.is_empty() || cfg.senders.contains(&0) {
        return Err(Error::invalid("--senders", "need at least one sender"));
    }
    if cfg.rto_min_us.is_empty() {
        return Err(Error::invalid("--rto-min", "need at least one value"));
    }
    if let Some(bad) = cfg
        .rto_min_us
        .iter()
        .find(|&&us| us < 1000 || us % 1000 != 0)
    {
        return Err(Error::invalid(
            format!("--rto-min {bad}us"),
            "ip route takes rto_min in whole milliseconds (>= 1ms)",
        ));
    }
    cfg.rate_bits_per_s()?;
    Ok(())
}

/// Runs the incast scenario.
pub fn run(common: &Common, cfg: &Config, stop: &AtomicBool) -> Result<Outcome<Report>> {
    validate(cfg)?;
    let max = *cfg.senders.iter().max().expect("checked non-empty");
    let Ran {
        run: runs,
        namespaces,
        capture,
    } = run_setup(
        common,
        cfg,
        (&Setup::default(), &cfg.rto_min_us, &cfg.senders),
        common.pcap.as_deref(),
        stop,
    )?;
    let interrupted = stop.load(Ordering::Relaxed) || runs.iter().any(|r| r.interrupted);
    let before = runs
        .iter()
        .find(|r| r.senders == max && r.rto_min_us == cfg.rto_min_us[0])
        .cloned();
    let after = if cfg.rto_min_us.len() > 1 {
        runs.iter()
            .find(|r| r.senders == max && Some(&r.rto_min_us) == cfg.rto_min_us.last())
            .cloned()
    } else {
        None
    };
    let mut findings: Vec<Finding> = before
        .as_ref()
        .map(|r| r.findings.clone())
        .unwrap_or_default();
    // The baseline first, then every other run (sweep points, other RTO floors).
    let reproductions = match &before {
        Some(b) => Reproductions::of(
            reproduction(b),
            runs.iter()
                .filter(|r| !(r.senders == b.senders && r.rto_min_us == b.rto_min_us))
                .map(reproduction),
        ),
        None => Reproductions::default(),
    };
    // With several RTO floors, the last judged against the first; the verdict follows it.
    let (remedies, remedied) = match (&before, &after) {
        (Some(b), Some(a)) => {
            let rep = reproduction(a);
            let check = driver::check(Pathology::Incast, (b, harm(b)), (a, harm(a)), &rep);
            let remedied = super::Remedied {
                run: check.run.clone(),
                findings: a.findings.clone(),
                reproduction: Some(rep),
            };
            (vec![check], Some(remedied))
        }
        _ => (Vec::new(), None),
    };
    let mut diagnosed_by = Incast::DIAGNOSED_BY.to_vec();
    // With a capture, analyze's detectors read it too (it spans every run of this scenario).
    if let Some(path) = &common.pcap {
        let more = super::harness::analyze_capture(path)?;
        add_new(&mut findings, more);
        tcpdoctor_model::finding::rank(&mut findings);
        diagnosed_by.push("analyze's detectors on the receiver's capture (all runs)");
    }
    let trace = tcpdoctor_trace::run::LabTrace::of(runs.iter().map(|r| r.trace.clone()).collect());
    Ok(Outcome {
        findings,
        interrupted,
        remedied,
        reproduction: reproductions.baseline().cloned(),
        body: Report {
            header: Header::of(
                "incast",
                common,
                namespaces,
                capture,
                trace,
                &diagnosed_by,
                reproductions,
            ),
            config: cfg.clone(),
            runs,
            before,
            after,
            remedies,
        },
    })
}

/// Runs every sender count of `cfg` at each RTO floor of `rto_mins` (sender counts outer), in
/// one fresh topology built with `setup`, paced per its pacing; saves the receiver's traffic
/// to `pcap` when given. Stops early at Ctrl-C.
fn run_setup(
    common: &Common,
    cfg: &Config,
    (setup, rto_mins, senders): (&Setup, &[u64], &[u32]),
    pcap: Option<&std::path::Path>,
    stop: &AtomicBool,
) -> Result<Ran<Vec<Run>>> {
    let max = senders.iter().copied().max().unwrap_or(1);
    let topo = build(common, cfg, max, setup)?;
    let cap = pcap
        .map(|p| {
            let rx_if = naming::ifname("r")?;
            capture::Capture::start(&topo.receiver, &rx_if, "capture", Some(p), "tcp")
        })
        .transpose()?;
    let rate = cfg.rate_bits_per_s()?;
    let mut runs = Vec::new();
    'sweep: for &n in senders {
        if stop.load(Ordering::Relaxed) {
            break;
        }
        let pace = match setup.pacing {
            Pacing::None => None,
            Pacing::EachAt(share) => Some(share * rate),
            Pacing::SharedAt(share) => Some(share * rate / f64::from(n)),
        };
        if let Some(bits_per_s) = pace {
            set_pacing(&topo, cfg, n, bits_per_s)?;
        }
        for &rto in rto_mins {
            if stop.load(Ordering::Relaxed) {
                break 'sweep;
            }
            runs.push(diagnosed_run(&topo, cfg, setup, (n, rto), pace, stop)?);
        }
    }
    let capture = super::harness::stop_capture(cap)?;
    Ok(Ran {
        run: runs,
        namespaces: topo.lab.namespaces().to_vec(),
        capture,
    })
}

/// One run of `n` senders at RTO floor `rto_min_us` in `topo` (built with `setup`), each
/// sender paced at `pace` bits/s when given, diagnosed by the lab's fan-in detector and the
/// trace.
fn diagnosed_run(
    topo: &Topology,
    cfg: &Config,
    setup: &Setup,
    (n, rto_min_us): (u32, u64),
    pace: Option<f64>,
    stop: &AtomicBool,
) -> Result<Run> {
    set_rto_min(topo, n, rto_min_us)?;
    let mut r = measure(topo, cfg, n, rto_min_us, pace, stop)?;
    let fan = fan_in_of(&r);
    r.time_lost_share = fan.time_lost_share();
    r.findings = fan_in::fan_in(&fan);
    merge_trace_into_incast(&mut r.findings, r.trace.findings.clone());
    r.congestion_control = topo.cc.clone();
    r.bottleneck_limit_bytes = setup.limit_bytes.unwrap_or(cfg.limit_bytes);
    r.sender_rate_bits_per_s = pace;
    Ok(r)
}

fn fan_in_of(r: &Run) -> FanIn {
    FanIn {
        senders: r.senders,
        rounds: r.rounds,
        slow_rounds: r.slow_rounds,
        slow_threshold: Duration::from_micros(r.slow_round_threshold_us),
        round_p99: Duration::from_micros(r.round_p99_us),
        round_us: r.round_us.clone(),
        line_round: r.line_round_us.map(Duration::from_micros),
        rto_min: Duration::from_micros(r.rto_min_us),
        timeouts_per_sender: r.per_sender.iter().map(|s| s.timer_events).collect(),
        retrans_segs: r.retrans_segs,
        retrans_per_sender: r.per_sender.iter().map(|s| s.retrans_segs).collect(),
        bottleneck_drops: r.bottleneck_drops,
    }
}
