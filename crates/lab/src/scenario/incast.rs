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

use std::net::{Ipv4Addr, SocketAddrV4};
use std::os::fd::{AsFd, AsRawFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use tcpdoctor_model::Finding;

use super::{Common, Header, Outcome};
use crate::diagnose::{self, FanIn};
use crate::netns;
use crate::remedy::{self, Check, Harm};
use crate::reproduce::{Event, Reproduction, Reproductions};
use crate::topo::Lab;
use crate::traffic::{self, SERVER_PORT};
use crate::{capture, exec, naming, Error, Result};

/// A round that took this much longer than a typical round (the median round, or the fastest
/// when most rounds stalled: [`diagnose::reference_round_us`]) waited for a timer: the
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

/// What diagnosed each run, in words: the report's "Diagnosis ... (by ...)" heading.
pub const DIAGNOSED_BY: [&str; 1] = [
    "the lab's fan-in detector (each sender's retransmission-timer counters and the round times)",
];

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
        // SAFETY: tcp_info is plain data; getsockopt writes at most `len` bytes into it.
        let mut info: libc::tcp_info = unsafe { std::mem::zeroed() };
        let mut len = std::mem::size_of::<libc::tcp_info>() as libc::socklen_t;
        // SAFETY: a valid socket fd, a buffer of `len` bytes and its length.
        let rc = unsafe {
            libc::getsockopt(
                s.as_raw_fd(),
                libc::IPPROTO_TCP,
                libc::TCP_INFO,
                (&mut info as *mut libc::tcp_info).cast(),
                &mut len,
            )
        };
        if rc != 0 {
            return SenderTcp::default();
        }
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
    pub trace: crate::trace::RunTrace,
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
    /// The fastest round: what a round costs here when nothing waits for a timer.
    pub fn fastest_round_us(&self) -> u64 {
        self.round_us.iter().copied().min().unwrap_or(0)
    }

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
/// [`crate::diagnose::fan_in`]), and the eBPF trace's incast episodes (timeouts of several
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
        crate::reproduce::Tried::new(
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

struct Topology {
    /// The senders' congestion control, set on their routes to the receiver.
    cc: String,
    lab: Lab,
    senders: Vec<String>,
    switch: String,
    receiver: String,
    rx_addr: Ipv4Addr,
    subnet: crate::subnet::LabSubnet,
    trace_mode: crate::trace::Mode,
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
    lab.tc(
        &switch,
        "shape the receiver's port with tbf",
        &[
            "qdisc",
            "add",
            "dev",
            &rx_port,
            "root",
            "tbf",
            "rate",
            &cfg.rate,
            "burst",
            &cfg.burst_bytes.to_string(),
            "limit",
            &setup.limit_bytes.unwrap_or(cfg.limit_bytes).to_string(),
        ],
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

/// Puts a tbf on each of the first `n` senders' interfaces at `bits_per_s` (or removes it).
fn set_pacing(t: &Topology, cfg: &Config, n: u32, bits_per_s: Option<f64>) -> Result<()> {
    let limit = pacing_limit_bytes(cfg).to_string();
    let s_if = naming::ifname("s")?;
    for ns in t.senders.iter().take(n as usize) {
        match bits_per_s {
            Some(r) => t.lab.tc(
                ns,
                "pace the sender with tbf",
                &[
                    "qdisc",
                    "replace",
                    "dev",
                    &s_if,
                    "root",
                    "tbf",
                    "rate",
                    &format!("{}bit", r.round() as u64),
                    "burst",
                    &PACING_BURST_BYTES.to_string(),
                    "limit",
                    &limit,
                ],
            )?,
            None => {
                let _ = exec::try_run("tc", &["-n", ns, "qdisc", "del", "dev", &s_if, "root"]);
            }
        }
    }
    Ok(())
}

fn bottleneck_drops(t: &Topology) -> Option<u64> {
    let port = naming::ifname("pr").ok()?;
    let text = exec::try_run(
        "tc",
        &["-n", &t.switch, "-s", "qdisc", "show", "dev", &port],
    )?;
    // "Sent 123 bytes 45 pkt (dropped 6, overlimits 7 requeues 0)"
    let after = text.split("dropped ").nth(1)?;
    after
        .split(|c: char| !c.is_ascii_digit())
        .next()?
        .parse()
        .ok()
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
    let topo = build(common, cfg, max, &Setup::default())?;
    let cap = match &common.pcap {
        Some(path) => Some(capture::Capture::start(
            &topo.receiver,
            &naming::ifname("r")?,
            "capture",
            Some(path),
            "tcp",
        )?),
        None => None,
    };
    let mut runs = Vec::new();
    let mut interrupted = false;
    'outer: for &n in &cfg.senders {
        for &rto in &cfg.rto_min_us {
            if stop.load(Ordering::Relaxed) {
                interrupted = true;
                break 'outer;
            }
            set_rto_min(&topo, n, rto)?;
            let mut r = measure(&topo, cfg, n, rto, None, stop)?;
            r.congestion_control = cfg.congestion_control.clone();
            let fan = fan_in_of(&r);
            r.time_lost_share = fan.time_lost_share();
            r.findings = diagnose::fan_in(&fan);
            diagnose::merge_trace_into_incast(&mut r.findings, r.trace.findings.clone());
            interrupted |= r.interrupted;
            runs.push(r);
        }
    }
    let capture = cap.map(capture::Capture::stop).transpose()?;
    let capture = capture.and_then(|s| s.kept());
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
    let remedies: Vec<Check> = match (&before, &after) {
        (Some(b), Some(a)) => vec![remedy::judge(
            &a.label,
            tcpdoctor_model::Pathology::Incast,
            harm(b),
            &b.findings,
            harm(a),
            &a.findings,
        )
        .with_trace(
            b.trace.harm(tcpdoctor_model::Pathology::Incast),
            a.trace.harm(tcpdoctor_model::Pathology::Incast),
        )
        .with_reproduction(&reproduction(a))],
        _ => Vec::new(),
    };
    let remedied = super::remedied(
        &remedies,
        &after
            .iter()
            .map(|a| a.findings.as_slice())
            .collect::<Vec<_>>(),
        &after.iter().map(reproduction).collect::<Vec<_>>(),
    );
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
    let mut diagnosed_by = DIAGNOSED_BY.map(String::from).to_vec();
    // With a capture, analyze's detectors read it too (it spans every run of this scenario).
    if let Some(path) = &common.pcap {
        let (more, _) = diagnose::capture(path)?;
        diagnose::merge(&mut findings, more);
        diagnosed_by.push("analyze's detectors on the receiver's capture (all runs)".into());
    }
    let header = Header {
        scenario: "incast".into(),
        run_id: topo.lab.run_id(),
        subnet: common.subnet.to_string(),
        namespaces: topo.lab.namespaces().to_vec(),
        capture,
        diagnosed_by,
        trace: crate::trace::LabTrace::of(runs.iter().map(|r| r.trace.clone()).collect()),
        reproduction: reproductions,
    };
    drop(topo);
    Ok(Outcome {
        remedied,
        reproduction: header.reproduction.baseline().cloned(),
        findings,
        body: Report {
            header,
            config: cfg.clone(),
            runs,
            before,
            after,
            remedies,
        },
        interrupted,
    })
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

/// Runs the rounds with the first `n` senders. `pace`: each sender's tbf rate, when paced
/// (the round at line rate is then the round at the senders' combined rate, if lower).
fn measure(
    t: &Topology,
    cfg: &Config,
    n: u32,
    rto_min_us: u64,
    pace: Option<f64>,
    stop: &AtomicBool,
) -> Result<Run> {
    let label = format!("{n} senders, rto_min {} ms", rto_min_us / 1000);
    // Its own trace window: attached before the first counter snapshot, detached after the
    // last, over every namespace of the topology.
    let tracer = crate::trace::Tracer::start(&t.trace_mode, &label, t.lab.namespaces());
    let before: Vec<_> = t.senders[..n as usize]
        .iter()
        .map(|ns| netns::counters(ns))
        .collect::<Result<_>>()?;
    let drops_before = bottleneck_drops(t);

    let deadline = Instant::now() + Duration::from_millis(cfg.max_run_duration_ms);
    let local_stop = Arc::new(AtomicBool::new(false));

    // Senders: listen, accept the receiver, answer each request with that many bytes.
    let (ready_tx, ready_rx) = mpsc::channel();
    let mut workers = Vec::new();
    for i in 0..n {
        let addr = SocketAddrV4::new(t.subnet.host(10 + i), SERVER_PORT);
        let ready = ready_tx.clone();
        let stop = Arc::clone(&local_stop);
        workers.push(netns::spawn(
            &t.senders[i as usize],
            &format!("tdoc-s{i}"),
            move || {
                let l = traffic::listen(addr, 16)
                    .map_err(|e| Error::io(format!("sender {i}: listen on {addr}"), e));
                let _ = ready.send(l.is_ok());
                let l = l?;
                let mut s = traffic::accept_one(&l, &stop, deadline + ROUND_TIMEOUT)
                    .map_err(|e| Error::io(format!("sender {i}: accept"), e))?;
                s.set_nodelay(true)
                    .map_err(|e| Error::io("set TCP_NODELAY", e))?;
                let chunk = vec![0x5au8; 64 * 1024];
                let mut req = [0u8; 8];
                while let Ok(true) =
                    traffic::read_full(&mut s, &mut req, &stop, deadline + ROUND_TIMEOUT)
                {
                    let want = u64::from_be_bytes(req);
                    if want == 0 {
                        break;
                    }
                    if traffic::write_bytes(&mut s, want, &chunk).is_err() {
                        break;
                    }
                }
                Ok(SenderTcp::of(&s))
            },
        )?);
    }
    drop(ready_tx);
    for _ in 0..n {
        match ready_rx.recv_timeout(Duration::from_secs(5)) {
            Ok(true) => {}
            _ => break,
        }
    }

    // Receiver: connect to every sender, then request rounds.
    let sender_addrs: Vec<SocketAddrV4> = (0..n)
        .map(|i| SocketAddrV4::new(t.subnet.host(10 + i), SERVER_PORT))
        .collect();
    let rounds = cfg.rounds;
    let block = cfg.block_bytes;
    let ext_stop: &AtomicBool = stop;
    // The receiver thread polls a flag it owns; Ctrl-C is forwarded below.
    let rx_stop = Arc::clone(&local_stop);
    let receiver = netns::spawn(&t.receiver, "tdoc-rx", move || {
        receive_rounds(&sender_addrs, rounds, block, deadline, &rx_stop)
    })?;
    while !receiver.is_finished() {
        if ext_stop.load(Ordering::Relaxed) {
            local_stop.store(true, Ordering::Relaxed);
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let result = receiver.join();
    local_stop.store(true, Ordering::Relaxed);
    let tcp: Vec<SenderTcp> = workers
        .into_iter()
        .map(|w| w.join().unwrap_or_default())
        .collect();
    let (round_us, cut_short) = result?;

    let after: Vec<_> = t.senders[..n as usize]
        .iter()
        .map(|ns| netns::counters(ns))
        .collect::<Result<_>>()?;
    let trace = tracer.finish();
    let per_sender: Vec<SenderStats> = before
        .iter()
        .zip(&after)
        .enumerate()
        .map(|(i, (b, a))| {
            let d = a.delta_since(b);
            SenderStats {
                tcp: tcp.get(i).copied().unwrap_or_default(),
                sender: i as u32,
                retrans_segs: d.get("TcpRetransSegs"),
                timeouts: d.get("TcpExtTCPTimeouts"),
                rto_expiries: RTO_COUNTERS.iter().map(|c| d.get(c)).sum(),
                loss_probes: d.get("TcpExtTCPLossProbes"),
                timer_events: RTO_COUNTERS.iter().map(|c| d.get(c)).sum::<i64>()
                    + d.get("TcpExtTCPLossProbes"),
                fast_retrans: d.get("TcpExtTCPFastRetrans"),
            }
        })
        .collect();
    let mut sorted = round_us.clone();
    sorted.sort_unstable();
    let total_us: u64 = round_us.iter().sum();
    let share = block / u64::from(n) * u64::from(n);
    let bytes = share * round_us.len() as u64;
    let mss = per_sender
        .iter()
        .map(|s| s.tcp.mss_bytes)
        .find(|&m| m > 0)
        .unwrap_or(0);
    let line_round_us = cfg.rate_bits_per_s().ok().map(|rate| {
        // The round's frames at the line rate (or the paced senders' combined rate), less
        // what the bucket's burst lets through at once (it refills between rounds).
        let rate = pace.map_or(rate, |p| rate.min(p * f64::from(n)));
        let frames = share as f64 / payload_share(mss);
        ((frames - cfg.burst_bytes as f64).max(0.0) * 8.0 / rate * 1e6) as u64
    });
    let slow_threshold_us = diagnose::reference_round_us(&round_us, line_round_us).unwrap_or(0)
        + SLOW_ROUND.as_micros() as u64;
    Ok(Run {
        label,
        senders: n,
        rto_min_us,
        rounds: round_us.len() as u32,
        slow_rounds: round_us.iter().filter(|&&u| u > slow_threshold_us).count() as u32,
        slow_round_threshold_us: slow_threshold_us,
        goodput_bits_per_s: if total_us > 0 {
            bytes as f64 * 8.0 / (total_us as f64 / 1e6)
        } else {
            0.0
        },
        round_p50_us: traffic::percentile(&sorted, 50.0),
        round_p99_us: traffic::percentile(&sorted, 99.0),
        round_max_us: sorted.last().copied().unwrap_or(0),
        retrans_segs: per_sender.iter().map(|s| s.retrans_segs).sum(),
        timeouts: per_sender.iter().map(|s| s.timeouts).sum(),
        rto_expiries: per_sender.iter().map(|s| s.rto_expiries).sum(),
        loss_probes: per_sender.iter().map(|s| s.loss_probes).sum(),
        senders_with_timeouts: per_sender.iter().filter(|s| s.rto_expiries > 0).count() as u32,
        bottleneck_drops: match (drops_before, bottleneck_drops(t)) {
            (Some(b), Some(a)) => Some(a.saturating_sub(b)),
            _ => None,
        },
        per_sender,
        round_us,
        hit_time_limit: cut_short && !ext_stop.load(Ordering::Relaxed),
        interrupted: ext_stop.load(Ordering::Relaxed),
        time_lost_share: 0.0,
        findings: Vec::new(),
        trace,
        line_round_us,
        congestion_control: String::new(),
        bottleneck_limit_bytes: cfg.limit_bytes,
        sender_rate_bits_per_s: None,
    })
}

/// The receiver's loop. Returns the round durations and whether the run was cut short.
fn receive_rounds(
    senders: &[SocketAddrV4],
    rounds: u32,
    block: u64,
    deadline: Instant,
    stop: &AtomicBool,
) -> Result<(Vec<u64>, bool)> {
    use std::io::Write;
    let opts = traffic::ClientOptions {
        nodelay: true,
        connect_timeout: Some(Duration::from_secs(5)),
        ..Default::default()
    };
    let mut socks = Vec::new();
    for a in senders {
        let (s, _) = traffic::connect(*a, &opts);
        socks.push(s.map_err(|e| Error::io(format!("receiver: connect to sender {a}"), e))?);
    }
    let share = block / senders.len() as u64;
    let mut buf = vec![0u8; 256 * 1024];
    let mut out = Vec::new();
    let mut cut_short = false;
    'rounds: for _ in 0..rounds {
        if stop.load(Ordering::Relaxed) || Instant::now() > deadline {
            cut_short = true;
            break;
        }
        let start = Instant::now();
        for s in socks.iter_mut() {
            s.write_all(&share.to_be_bytes())
                .map_err(|e| Error::io("receiver: send request", e))?;
        }
        let mut left: Vec<u64> = vec![share; socks.len()];
        while left.iter().any(|&l| l > 0) {
            if stop.load(Ordering::Relaxed) || start.elapsed() > ROUND_TIMEOUT {
                cut_short = true;
                break 'rounds;
            }
            let mut fds: Vec<nix::poll::PollFd> = socks
                .iter()
                .zip(&left)
                .filter(|(_, &l)| l > 0)
                .map(|(s, _)| nix::poll::PollFd::new(s.as_fd(), nix::poll::PollFlags::POLLIN))
                .collect();
            let _ = nix::poll::poll(&mut fds, nix::poll::PollTimeout::from(50u16));
            drop(fds);
            for (s, l) in socks.iter().zip(left.iter_mut()) {
                while *l > 0 {
                    let want = buf.len().min(*l as usize);
                    // SAFETY: recv into our own buffer of at least `want` bytes.
                    let n = unsafe {
                        libc::recv(
                            s.as_raw_fd(),
                            buf.as_mut_ptr().cast(),
                            want,
                            libc::MSG_DONTWAIT,
                        )
                    };
                    if n > 0 {
                        *l -= n as u64;
                    } else if n == 0 {
                        return Err(Error::io(
                            "receiver: read reply",
                            std::io::ErrorKind::UnexpectedEof.into(),
                        ));
                    } else {
                        let e = std::io::Error::last_os_error();
                        if e.kind() == std::io::ErrorKind::WouldBlock
                            || e.kind() == std::io::ErrorKind::Interrupted
                        {
                            break;
                        }
                        return Err(Error::io("receiver: read reply", e));
                    }
                }
            }
        }
        out.push(start.elapsed().as_micros() as u64);
    }
    for s in socks.iter_mut() {
        let _ = s.write_all(&0u64.to_be_bytes());
    }
    Ok((out, cut_short))
}

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

/// Header bytes of a full-size frame on the lab's veths beyond the TCP payload: Ethernet 14,
/// IPv4 20, TCP 20 and the timestamp option 12 (tbf counts the frame, goodput the payload).
pub const FRAME_OVERHEAD_BYTES: f64 = 66.0;

/// Payload share of a full-size frame for a sender whose MSS is `mss` (1448 here).
fn payload_share(mss: u32) -> f64 {
    let mss = if mss == 0 { 1448.0 } else { f64::from(mss) };
    mss / (mss + FRAME_OVERHEAD_BYTES)
}

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

impl Config {
    /// The bottleneck's rate in bits per second (`rate` as tc reads it).
    pub fn rate_bits_per_s(&self) -> Result<f64> {
        self.rate
            .parse::<tcpdoctor_model::units::BitRate>()
            .map(|r| r.bits_per_s())
            .map_err(|e| Error::invalid(format!("--rate '{}'", self.rate), e.to_string()))
    }
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
) -> Result<Outcome<super::RemedyReport<Config, Run, Facts>>> {
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
    let report = super::RemedyReport {
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
            reproduction: super::remedy_reproductions(&baseline, &rows, reproduction),
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
        |row| super::row_reproduction(row, reproduction),
    );
    Ok(Outcome {
        reproduction: report.header.reproduction.baseline().cloned(),
        findings: report.baseline.findings.clone(),
        interrupted: stop.load(Ordering::Relaxed),
        remedied,
        body: report,
    })
}
