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

use serde::Serialize;
use tcpdoctor_model::Finding;

use super::{Common, Header, Outcome};
use crate::diagnose::{self, FanIn};
use crate::netns;
use crate::remedy::{self, Check, Harm};
use crate::topo::Lab;
use crate::traffic::{self, SERVER_PORT};
use crate::{capture, exec, naming, Error, Result};

/// A round slower than this waited for a timer: at line rate a default round takes ~22 ms, and
/// the smallest retransmission timeout Linux uses by default is 200 ms (`TCP_RTO_MIN`,
/// include/net/tcp.h); 100 ms is the threshold file 001's issue asks for.
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
#[derive(Clone, Debug, Serialize)]
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
}

impl Default for Config {
    fn default() -> Self {
        Config {
            senders: vec![8],
            block_bytes: 256 << 10,
            rounds: 100,
            max_run_duration_ms: 20_000,
            rate: "100mbit".into(),
            burst_bytes: 16 * 1024,
            limit_bytes: 32 * 1024,
            rto_min_us: vec![200_000],
        }
    }
}

/// Counters of one sender namespace over one run.
#[derive(Clone, Debug, Default, Serialize)]
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
}

/// One run: N senders, one RTO floor.
#[derive(Clone, Debug, Default, Serialize)]
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
    /// sum(round - fastest round) / sum(round): the share of the run spent waiting beyond
    /// what the fastest round took ([`FanIn::time_lost_share`]).
    pub time_lost_share: f64,
    /// Findings of the lab's fan-in detector on this run.
    pub findings: Vec<Finding>,
}

/// The harm: the share of the time rounds spent beyond the fastest round.
pub fn harm(run: &Run) -> Harm {
    Harm::share(
        run.time_lost_share,
        "of the time lost beyond the fastest round",
    )
}

/// The incast record.
#[derive(Clone, Debug, Serialize)]
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
    pub remedies: Vec<Check>,
}

struct Topology {
    lab: Lab,
    senders: Vec<String>,
    switch: String,
    receiver: String,
    rx_addr: Ipv4Addr,
    subnet: crate::subnet::LabSubnet,
}

fn build(common: &Common, cfg: &Config, max_senders: u32) -> Result<Topology> {
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
            &cfg.limit_bytes.to_string(),
        ],
    )?;
    Ok(Topology {
        lab,
        senders,
        switch,
        receiver,
        rx_addr,
        subnet,
    })
}

fn set_rto_min(t: &Topology, n: u32, rto_min_us: u64) -> Result<()> {
    let dst = format!("{}/32", t.rx_addr);
    // `ip route` takes rto_min in whole milliseconds (RTAX_RTO_MIN is stored in ms).
    let rto = format!("{}ms", rto_min_us / 1000);
    let s_if = naming::ifname("s")?;
    for ns in t.senders.iter().take(n as usize) {
        t.lab.route(
            ns,
            "set rto_min on the route to the receiver",
            &["replace", &dst, "dev", &s_if, "rto_min", &rto],
        )?;
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

/// Runs the incast scenario.
pub fn run(common: &Common, cfg: &Config, stop: &AtomicBool) -> Result<Outcome<Report>> {
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
    let max = *cfg.senders.iter().max().expect("checked non-empty");
    let topo = build(common, cfg, max)?;
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
            let mut r = measure(&topo, cfg, n, rto, stop)?;
            let fan = fan_in_of(&r);
            r.time_lost_share = fan.time_lost_share();
            r.findings = diagnose::fan_in(&fan);
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
        )],
        _ => Vec::new(),
    };
    let remedied = super::remedied(
        &remedies,
        &after
            .iter()
            .map(|a| a.findings.as_slice())
            .collect::<Vec<_>>(),
    );
    let mut diagnosed_by = vec![
        "lab fan-in detector over per-sender retransmission-timer counters and round times".into(),
    ];
    // With a capture, analyze's detectors read it too (it spans every run of this scenario).
    if let Some(path) = &common.pcap {
        let (more, _) = diagnose::capture(path)?;
        diagnose::merge(&mut findings, more);
        diagnosed_by.push("analyze: detectors on the receiver's capture (all runs)".into());
    }
    let header = Header {
        scenario: "incast",
        run_id: topo.lab.run_id(),
        subnet: common.subnet.to_string(),
        namespaces: topo.lab.namespaces().to_vec(),
        capture,
        diagnosed_by,
    };
    drop(topo);
    Ok(Outcome {
        remedied,
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
        slow_threshold: SLOW_ROUND,
        round_p99: Duration::from_micros(r.round_p99_us),
        round_us: r.round_us.clone(),
        rto_min: Duration::from_micros(r.rto_min_us),
        timeouts_per_sender: r.per_sender.iter().map(|s| s.timer_events).collect(),
        retrans_segs: r.retrans_segs,
        retrans_per_sender: r.per_sender.iter().map(|s| s.retrans_segs).collect(),
        bottleneck_drops: r.bottleneck_drops,
    }
}

fn measure(t: &Topology, cfg: &Config, n: u32, rto_min_us: u64, stop: &AtomicBool) -> Result<Run> {
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
                loop {
                    match traffic::read_full(&mut s, &mut req, &stop, deadline + ROUND_TIMEOUT) {
                        Ok(true) => {}
                        Ok(false) => return Ok(()),
                        Err(_) => return Ok(()),
                    }
                    let want = u64::from_be_bytes(req);
                    if want == 0 {
                        return Ok(());
                    }
                    if traffic::write_bytes(&mut s, want, &chunk).is_err() {
                        return Ok(());
                    }
                }
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
    for w in workers {
        let _ = w.join();
    }
    let (round_us, cut_short) = result?;

    let after: Vec<_> = t.senders[..n as usize]
        .iter()
        .map(|ns| netns::counters(ns))
        .collect::<Result<_>>()?;
    let per_sender: Vec<SenderStats> = before
        .iter()
        .zip(&after)
        .enumerate()
        .map(|(i, (b, a))| {
            let d = a.delta_since(b);
            SenderStats {
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
    Ok(Run {
        label: format!("{n} senders, rto_min {} ms", rto_min_us / 1000),
        senders: n,
        rto_min_us,
        rounds: round_us.len() as u32,
        slow_rounds: round_us
            .iter()
            .filter(|&&u| u > SLOW_ROUND.as_micros() as u64)
            .count() as u32,
        slow_round_threshold_us: SLOW_ROUND.as_micros() as u64,
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
