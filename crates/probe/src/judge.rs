//! Probe's judgement over a load loop's records: the spike classifier, the statistics and
//! the findings, written once for probe's own loop ([`crate::run`]) and for a caller's loop
//! that records probe's [`Record`]s (the lab's report-003 client).

use std::net::SocketAddr;
use std::time::Duration;

use tcpdoctor_host::counters;
use tcpdoctor_host::sysctl::{self, TcpSettings};
use tcpdoctor_model::{timers, SynLadder};

use crate::classify::{self, Signatures};
use crate::record::Record;
use crate::{findings, split, stats, Config, ProbeResult};

/// What a load loop measured around its records: the target, this namespace's TCP settings
/// and counter delta over the loop, its length, the CPU waits, and what the embedded server
/// and the port census saw.
pub struct Around<'a> {
    pub target: SocketAddr,
    pub settings: &'a TcpSettings,
    /// The route's `rto_min` toward the target, when set.
    pub route_rto_min: Option<Duration>,
    pub delta: &'a counters::Delta,
    pub elapsed: Duration,
    pub embedded_server: Option<crate::server::ServerStats>,
    pub ports_toward_target: Option<stats::PortsInUse>,
    /// Time some task on the host waited for a CPU over the loop (`/proc/pressure/cpu`).
    pub cpu_wait_us: Option<u64>,
    pub cpu_waits: split::CpuWaits,
    pub interrupted: bool,
}

/// Probe's statistics, spike classifier and findings over `records`, a load loop's
/// (this engine's, or a caller's own loop that records probe's [`Record`]s, as the lab's
/// report-003 client does), as [`run`] judges its own after the loop.
pub fn judge(cfg: &Config, records: Vec<Record>, a: Around) -> ProbeResult {
    let sig = Signatures {
        ladder: syn_ladder(a.settings),
        synack_ladder: SynLadder::new(
            a.settings.tcp_synack_retries.unwrap_or(5) as u32,
            None,
            timers::SYN_INITIAL_RTO,
        ),
        rto_min: a.route_rto_min.unwrap_or_else(|| a.settings.rto_min()),
        delack_min: timers::DELACK_MIN,
        nodelay: cfg.nodelay,
    };
    let threshold = cfg
        .spike_threshold
        .unwrap_or_else(|| classify::default_threshold(&records));
    let mut spikes = classify::classify(&records, threshold, &sig, a.delta);
    let baseline = split::Baseline::of(&records, &spikes, classify::delack_seen(&sig, a.delta));
    split::assign(&records, &mut spikes, &baseline, &a.cpu_waits);
    let ctx = stats::Context {
        cfg,
        target: a.target,
        embedded_server: a.embedded_server,
        elapsed: a.elapsed,
        settings: a.settings,
        route_rto_min: a.route_rto_min,
        threshold,
        ports_toward_target: a.ports_toward_target,
        cpu_wait_us: a.cpu_wait_us,
        baseline: &baseline,
        cpu_waits: &a.cpu_waits,
        target_here: address_here(a.target.ip()),
    };
    let summary = stats::summarize(&ctx, &records, &spikes, a.delta, &sig);
    let findings = findings::build(&ctx, &summary, &spikes, a.delta);
    ProbeResult {
        summary,
        findings,
        interrupted: a.interrupted,
        records,
        spikes,
    }
}

/// Whether `ip` is this namespace's own: loopback, or an address the kernel routes to
/// itself, which it then also picks as the source of a socket connected to it (a UDP
/// connect sends nothing). Not "a socket can bind it": with `net.ipv4.ip_nonlocal_bind=1`
/// any address binds (measured: a namespace bound 10.77.0.9 that none of its interfaces
/// had; a UDP socket connected to it got the source 10.77.0.1, one connected to its own
/// 10.77.0.1 got 10.77.0.1).
fn address_here(ip: std::net::IpAddr) -> bool {
    let any: std::net::IpAddr = match ip {
        std::net::IpAddr::V4(_) => std::net::Ipv4Addr::UNSPECIFIED.into(),
        std::net::IpAddr::V6(_) => std::net::Ipv6Addr::UNSPECIFIED.into(),
    };
    ip.is_loopback()
        || std::net::UdpSocket::bind((any, 0))
            .and_then(|s| s.connect((ip, 9)).and_then(|()| s.local_addr()))
            .is_ok_and(|local| local.ip() == ip)
}

/// This namespace's SYN ladder, with its `net.ipv4.tcp_rto_max_ms` (Linux 6.15+) when the
/// kernel has it.
fn syn_ladder(settings: &TcpSettings) -> SynLadder {
    let rto_max = sysctl::read_u64("net.ipv4.tcp_rto_max_ms")
        .ok()
        .flatten()
        .map_or(timers::RTO_MAX, Duration::from_millis);
    SynLadder::with_rto_max(
        settings.tcp_syn_retries as u32,
        settings.tcp_syn_linear_timeouts.map(|v| v as u32),
        timers::SYN_INITIAL_RTO,
        rto_max,
    )
}
