//! Statistics computed from the records: HDR histograms per phase, errors by errno, status
//! codes, a per-second series, spike groups, and the counters that moved. This is the body
//! of the probe report (`--json`); it holds no raw records.

use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::time::Duration;

use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};
use tcpdoctor_host::counters::Delta;
use tcpdoctor_host::sysctl::TcpSettings;

use crate::classify::{Signatures, Spike, SpikeCause, REPORTED_COUNTERS};
use crate::record::{ErrorKind, Outcome, Phase, Record};
use crate::server::ServerStats;
use crate::split::{self, TimeSplit};
use crate::{CloseFirst, Config, Mode};

/// What the run was, besides its records.
pub struct Context<'a> {
    pub cfg: &'a Config,
    pub target: SocketAddr,
    pub embedded_server: Option<ServerStats>,
    pub elapsed: Duration,
    pub settings: &'a TcpSettings,
    pub route_rto_min: Option<Duration>,
    pub threshold: Duration,
    /// After connects failed for want of a local port: this namespace's sockets toward the
    /// target using a port of the range (`None`: not needed, or no census).
    pub ports_toward_target: Option<PortsInUse>,
    /// Microseconds of the run during which some task on the host waited for a CPU
    /// (`/proc/pressure/cpu`; `None` without PSI).
    pub cpu_wait_us: Option<u64>,
    /// The run's typical handshake, server time and transfer, against which each request's
    /// time is split.
    pub baseline: &'a split::Baseline,
    /// CPU waits of the workers and of the embedded server's threads.
    pub cpu_waits: &'a split::CpuWaits,
    /// The target's address is this namespace's own (loopback or an address of one of its
    /// interfaces): its listener's overflows count in this namespace's counters.
    pub target_here: bool,
}

/// Sockets toward the target whose local port lies in the range connects draw from.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PortsInUse {
    pub time_wait: u64,
    /// In any state, TIME_WAIT included.
    pub total: u64,
}

/// The probe report body.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Summary {
    pub target: String,
    pub mode: String,
    /// Some for http mode.
    pub keepalive: Option<bool>,
    pub url: Option<String>,
    pub concurrency: usize,
    pub close_first: CloseFirst,
    pub linger0: bool,
    pub nodelay: bool,
    pub rate_limit_per_s: Option<f64>,
    pub duration_limit_us: u64,
    pub count_limit: u64,
    /// The embedded server's counts when there was no target.
    pub embedded_server: Option<ServerStats>,
    pub elapsed_us: u64,
    /// Requests (connections in connect/crr) that finished, ok or failed.
    pub requests: u64,
    pub requests_ok: u64,
    pub requests_failed: u64,
    /// In flight when the run ended (end of the duration, or interrupted) and cut then;
    /// neither ok nor failed. See `unanswered` for those that had waited long.
    pub requests_cut: u64,
    /// Connections opened (successful connect()).
    pub connections_opened: u64,
    /// connect() calls made: opened, failed, or cut while connecting.
    pub connects_attempted: u64,
    pub requests_ok_per_s: f64,
    pub connections_per_s: f64,
    /// Distinct local ports over all connections.
    pub local_ports_used: u64,
    pub phases: Vec<PhaseStats>,
    pub errors: Vec<ErrorCount>,
    /// HTTP status code -> responses (expected or not).
    pub status_codes: BTreeMap<String, u64>,
    /// HTTP status class (`2xx`, `4xx`, ...) -> responses.
    pub status_classes: BTreeMap<String, u64>,
    /// HTTP statuses counted as success (`--expect-status`); null outside http mode.
    pub expect_status: Option<String>,
    /// Requests that got no answer: connects without a SYN-ACK, requests without a
    /// (complete) reply, ended by a timeout or cut at the end of the run after waiting long.
    pub unanswered: Vec<Unanswered>,
    /// Sockets toward the target holding ports of the range, counted after connects failed
    /// for want of a local port.
    pub ports_toward_target: Option<PortsInUse>,
    pub per_second: Vec<SecondStats>,
    pub spikes: SpikeSummary,
    /// Where the time of the completed requests went: network, TLS, server, transfer, TCP's
    /// timers, client; and what TCP itself did.
    pub time_split: TimeSplit,
    /// Relevant kernel counters that moved, this network namespace, whole run.
    pub counters: Vec<CounterMove>,
    /// How long, during the run, some task on this host waited for a CPU (PSI); null when it
    /// could not be read (a kernel without pressure accounting).
    pub cpu_wait: Option<CpuWait>,
    pub settings: SettingsUsed,
}

/// CPU contention on the host during a run, from the kernel's pressure stall information.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct CpuWait {
    /// Time during which at least one runnable task waited for a CPU (the probe's own
    /// threads, its server's, or any other).
    pub some_us: u64,
    /// `some_us` as a share of the run's elapsed time, 0 to 1.
    pub share: f64,
}

/// Which part of a request a latency covers. JSON values: `connect`, `tls`, `first_byte`,
/// `total`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LatencyPhase {
    /// connect() call to its return: the handshake.
    Connect,
    /// connect() returned to the end of the TLS handshake (https only).
    Tls,
    /// Request sent (connection ready) to the first byte of the reply.
    FirstByte,
    /// Scheduled start to the end of the request.
    Total,
}

impl LatencyPhase {
    pub fn name(self) -> &'static str {
        match self {
            LatencyPhase::Connect => "connect",
            LatencyPhase::Tls => "tls",
            LatencyPhase::FirstByte => "first_byte",
            LatencyPhase::Total => "total",
        }
    }
}

impl std::fmt::Display for LatencyPhase {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl PartialEq<&str> for LatencyPhase {
    fn eq(&self, other: &&str) -> bool {
        self.name() == *other
    }
}

/// Where the RTO floor used for classification came from. JSON values: `route`, `sysctl`,
/// `default`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RtoMinSource {
    /// The route toward the target sets `rto_min` (`ip route get TARGET`).
    Route,
    /// `net.ipv4.tcp_rto_min_us`.
    Sysctl,
    /// Neither: the kernel's TCP_RTO_MIN (200 ms, include/net/tcp.h).
    Default,
}

impl std::fmt::Display for RtoMinSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            RtoMinSource::Route => "route",
            RtoMinSource::Sysctl => "sysctl",
            RtoMinSource::Default => "default",
        })
    }
}

/// Latency of one phase over successful requests.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct PhaseStats {
    pub phase: LatencyPhase,
    pub count: u64,
    pub min_us: u64,
    pub mean_us: u64,
    pub p50_us: u64,
    pub p90_us: u64,
    pub p99_us: u64,
    pub p999_us: u64,
    pub p9999_us: u64,
    pub max_us: u64,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ErrorCount {
    /// snake_case kind (`addr_not_avail`, `refused`, ..., `other`).
    #[serde(serialize_with = "kind_name", deserialize_with = "kind_of_name")]
    pub kind: ErrorKind,
    /// `EADDRNOTAVAIL`, `ECONNREFUSED`, ... or a description when there is no errno.
    pub errno: String,
    pub phase: Phase,
    pub count: u64,
    pub first_at_us: u64,
    /// Requests that had succeeded before the first one of these.
    pub ok_before_first: u64,
    pub example_local_ports: Vec<u16>,
}

fn kind_name<S: serde::Serializer>(k: &ErrorKind, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(k.name())
}

/// [`kind_name`]'s inverse (a saved report read back): the name only, without the status
/// or errno the name leaves out.
fn kind_of_name<'de, D: serde::Deserializer<'de>>(d: D) -> Result<ErrorKind, D::Error> {
    let name = String::deserialize(d)?;
    ErrorKind::from_name(&name)
        .ok_or_else(|| serde::de::Error::custom(format!("unknown error kind '{name}'")))
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct SecondStats {
    /// Seconds since the start (requests by scheduled start).
    pub second: u64,
    pub ok: u64,
    pub failed: u64,
    /// None (JSON null) when no request completed in that second: nothing was measured.
    pub p99_total_us: Option<u64>,
    pub max_total_us: Option<u64>,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct SpikeSummary {
    pub threshold_us: u64,
    pub count: u64,
    pub groups: Vec<SpikeGroup>,
}

/// Spikes of one cause.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct SpikeGroup {
    #[serde(flatten)]
    pub cause: SpikeCause,
    pub label: String,
    pub count: u64,
    pub corroborated: u64,
    /// Median duration of the slow phase.
    pub typical_phase_us: u64,
    /// Longest duration of the slow phase.
    pub max_phase_us: u64,
    pub max_total_us: u64,
    pub example_local_ports: Vec<u16>,
}

/// Where an unanswered request was waiting.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Stage {
    /// connect(): no SYN-ACK came back.
    Handshake,
    /// Connected and the request sent (or being sent): the reply did not come, or came only
    /// in part.
    Reply,
}

/// Requests of one [`Stage`] that got no answer.
///
/// Counted: those a timeout ended (the kernel's ETIMEDOUT on connect, `--connect-timeout`,
/// `--timeout`), and those cut at the end of the run after waiting longer than the spike
/// threshold and than every completed request waited in that phase (every one cut, when
/// none completed).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Unanswered {
    pub stage: Stage,
    pub count: u64,
    /// Of which ended by a timeout (failed): the kernel's or ours.
    pub timed_out: u64,
    /// Of those, connects the kernel gave up on (ETIMEDOUT: the end of its SYN ladder).
    pub etimedout: u64,
    /// Of which cut at the end of the run while still waiting.
    pub cut: u64,
    pub min_wait_us: u64,
    pub max_wait_us: u64,
    /// When the first timeout fired, from the start of the run.
    pub first_timeout_at_us: Option<u64>,
    /// The timeout that ended them (`--connect-timeout`/`--timeout`), when it was ours.
    pub timeout_us: Option<u64>,
    /// Requests that received part of a reply, and the most bytes one of them received.
    pub partial_replies: u64,
    pub max_received_bytes: u64,
    /// Reply bytes expected in crr/rr mode (HTTP: unknown).
    pub expected_reply_bytes: Option<u64>,
    pub example_local_ports: Vec<u16>,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct CounterMove {
    pub name: String,
    pub delta: i64,
    pub meaning: String,
}

/// The host settings the classification used.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct SettingsUsed {
    pub ip_local_port_range: String,
    /// The range connects drew from: `--local-ports` or ip_local_port_range.
    pub ports_available: u32,
    pub tcp_tw_reuse: Option<u64>,
    pub tcp_syn_retries: u64,
    pub tcp_syn_linear_timeouts: Option<u64>,
    /// When each SYN retransmission is sent, from the first SYN.
    pub syn_ladder_ms: Vec<u64>,
    /// The latest each can be sent: kernel timers fire late, by up to 1/8 of their delay,
    /// and the lateness adds up along the ladder.
    pub syn_ladder_latest_ms: Vec<u64>,
    pub syn_give_up_ms: u64,
    pub rto_min_us: u64,
    pub rto_min_source: RtoMinSource,
    pub spike_threshold_us: u64,
}

const EXAMPLES: usize = 8;

fn us(ns: u64) -> u64 {
    ns / 1_000
}

fn phase_stats(phase: LatencyPhase, values_ns: impl Iterator<Item = u64>) -> PhaseStats {
    // 1 us .. 1 hour, 3 significant digits.
    let mut h = Histogram::<u64>::new_with_bounds(1, 3_600_000_000, 3).expect("valid bounds");
    for v in values_ns {
        h.saturating_record(us(v).max(1));
    }
    let q = |p: f64| {
        if h.is_empty() {
            0
        } else {
            h.value_at_quantile(p)
        }
    };
    PhaseStats {
        phase,
        count: h.len(),
        min_us: if h.is_empty() { 0 } else { h.min() },
        mean_us: h.mean() as u64,
        p50_us: q(0.5),
        p90_us: q(0.9),
        p99_us: q(0.99),
        p999_us: q(0.999),
        p9999_us: q(0.9999),
        max_us: if h.is_empty() { 0 } else { h.max() },
    }
}

/// Builds the report body from the records and the classified spikes.
pub fn summarize(
    ctx: &Context,
    records: &[Record],
    spikes: &[Spike],
    delta: &Delta,
    sig: &Signatures,
) -> Summary {
    let cfg = ctx.cfg;
    let ok: Vec<&Record> = records.iter().filter(|r| r.is_ok()).collect();
    let cut = records
        .iter()
        .filter(|r| matches!(r.outcome, Outcome::Cut { .. }))
        .count() as u64;
    let failed = records.len() as u64 - ok.len() as u64 - cut;
    let opened = records.iter().filter(|r| r.connected_ns.is_some()).count() as u64;
    let secs = ctx.elapsed.as_secs_f64().max(1e-9);
    let phases = latency_phases(cfg, &ok, opened);

    let ports: BTreeSet<u16> = records
        .iter()
        .map(|r| r.local_port)
        .filter(|&p| p != 0)
        .collect();
    let (status_codes, status_classes) = status_counts(records);
    let (keepalive, url) = match &cfg.mode {
        Mode::Http { url, keepalive, .. } => (Some(*keepalive), Some(url.to_string())),
        _ => (None, None),
    };
    let errors = errors(records);
    let unanswered = unanswered(ctx, records);
    let not_carried = not_carried(&errors, &unanswered);
    let time_split = split::summarize(records, spikes, ctx.baseline, ctx.cpu_waits, not_carried);
    Summary {
        target: ctx.target.to_string(),
        mode: cfg.mode.name().to_string(),
        keepalive,
        url,
        concurrency: cfg.concurrency,
        close_first: cfg.close_first,
        linger0: cfg.linger0,
        nodelay: cfg.nodelay,
        rate_limit_per_s: cfg.rate_per_s,
        duration_limit_us: cfg.duration.as_micros() as u64,
        count_limit: cfg.count,
        embedded_server: ctx.embedded_server,
        elapsed_us: ctx.elapsed.as_micros() as u64,
        requests: ok.len() as u64 + failed,
        requests_ok: ok.len() as u64,
        requests_failed: failed,
        requests_cut: cut,
        connections_opened: opened,
        connects_attempted: connects_attempted(records),
        requests_ok_per_s: ok.len() as f64 / secs,
        connections_per_s: opened as f64 / secs,
        local_ports_used: ports.len() as u64,
        phases,
        errors,
        status_codes,
        status_classes,
        expect_status: matches!(cfg.mode, Mode::Http { .. }).then(|| cfg.expect_status.to_string()),
        unanswered,
        ports_toward_target: ctx.ports_toward_target,
        per_second: per_second(records),
        spikes: spike_summary(spikes, ctx.threshold),
        time_split,
        counters: counter_moves(delta),
        cpu_wait: ctx.cpu_wait_us.map(|some_us| CpuWait {
            some_us,
            share: (some_us as f64 / ctx.elapsed.as_micros().max(1) as f64).min(1.0),
        }),
        settings: settings_used(ctx, sig),
    }
}

/// The latency phases measured for the successful requests: connect (when connections
/// were opened), TLS (when any did TLS), first byte (but in connect mode), and the total.
fn latency_phases(cfg: &Config, ok: &[&Record], opened: u64) -> Vec<PhaseStats> {
    let mut phases = Vec::new();
    if opened > 0 {
        phases.push(phase_stats(
            LatencyPhase::Connect,
            ok.iter().filter_map(|r| r.connect_ns()),
        ));
    }
    if ok.iter().any(|r| r.tls_done_ns.is_some()) {
        phases.push(phase_stats(
            LatencyPhase::Tls,
            ok.iter().filter_map(|r| r.tls_ns()),
        ));
    }
    if !matches!(cfg.mode, Mode::Connect) {
        phases.push(phase_stats(
            LatencyPhase::FirstByte,
            ok.iter().filter_map(|r| r.first_byte_wait_ns()),
        ));
    }
    phases.push(phase_stats(
        LatencyPhase::Total,
        ok.iter().map(|r| r.total_ns()),
    ));
    phases
}

/// Responses by HTTP status code and by class (`2xx`, ...).
fn status_counts(records: &[Record]) -> (BTreeMap<String, u64>, BTreeMap<String, u64>) {
    let mut status_codes = BTreeMap::new();
    let mut status_classes = BTreeMap::new();
    for r in records.iter().filter(|r| r.status != 0) {
        *status_codes.entry(r.status.to_string()).or_insert(0) += 1;
        *status_classes
            .entry(format!("{}xx", r.status / 100))
            .or_insert(0) += 1;
    }
    (status_codes, status_classes)
}

/// Requests TCP did not carry through: failures other than an unexpected HTTP status
/// (answered, over a working connection), and requests left without an answer.
fn not_carried(errors: &[ErrorCount], unanswered: &[Unanswered]) -> u64 {
    errors
        .iter()
        .filter(|e| !matches!(e.kind, ErrorKind::HttpStatus { .. }))
        .map(|e| e.count)
        .sum::<u64>()
        + unanswered
            .iter()
            .map(|u| u.count - u.timed_out)
            .sum::<u64>()
}

/// Connects attempted: connections opened, and connects that failed or were cut.
fn connects_attempted(records: &[Record]) -> u64 {
    records
        .iter()
        .filter(|r| {
            r.connected_ns.is_some()
                || matches!(
                    r.outcome,
                    Outcome::Error {
                        phase: Phase::Connect,
                        ..
                    } | Outcome::Cut {
                        phase: Phase::Connect
                    }
                )
        })
        .count() as u64
}

/// The settings the run used: the port range, the SYN ladder and the RTO floor with where
/// it came from, and the spike threshold.
fn settings_used(ctx: &Context, sig: &Signatures) -> SettingsUsed {
    let cfg = ctx.cfg;
    let range = ctx.settings.ip_local_port_range;
    SettingsUsed {
        ip_local_port_range: range.to_string(),
        ports_available: cfg.local_ports.map_or(range.connect_ports(), |r| r.len()),
        tcp_tw_reuse: ctx.settings.tcp_tw_reuse,
        tcp_syn_retries: ctx.settings.tcp_syn_retries,
        tcp_syn_linear_timeouts: ctx.settings.tcp_syn_linear_timeouts,
        syn_ladder_ms: sig
            .ladder
            .rungs()
            .iter()
            .map(|d| d.as_millis() as u64)
            .collect(),
        syn_ladder_latest_ms: (1..=sig.ladder.rungs().len() as u32)
            .filter_map(|a| sig.ladder.latest(a))
            .map(|d| d.as_millis() as u64)
            .collect(),
        syn_give_up_ms: sig.ladder.give_up_at().as_millis() as u64,
        rto_min_us: sig.rto_min.as_micros() as u64,
        rto_min_source: if ctx.route_rto_min.is_some() {
            RtoMinSource::Route
        } else if ctx.settings.tcp_rto_min_us.is_some() {
            RtoMinSource::Sysctl
        } else {
            RtoMinSource::Default
        },
        spike_threshold_us: ctx.threshold.as_micros() as u64,
    }
}

fn errors(records: &[Record]) -> Vec<ErrorCount> {
    let mut map: BTreeMap<(ErrorKind, Phase), ErrorCount> = BTreeMap::new();
    let mut ok_so_far = 0u64;
    for r in records {
        match r.outcome {
            Outcome::Ok => ok_so_far += 1,
            Outcome::Error { kind, phase } => {
                let e = map.entry((kind, phase)).or_insert_with(|| ErrorCount {
                    kind,
                    errno: kind.errno_name(),
                    phase,
                    count: 0,
                    first_at_us: us(r.start_ns),
                    ok_before_first: ok_so_far,
                    example_local_ports: Vec::new(),
                });
                e.count += 1;
                if r.local_port != 0
                    && e.example_local_ports.len() < EXAMPLES
                    && !e.example_local_ports.contains(&r.local_port)
                {
                    e.example_local_ports.push(r.local_port);
                }
            }
            Outcome::Cut { .. } => {}
        }
    }
    let mut v: Vec<ErrorCount> = map.into_values().collect();
    v.sort_by_key(|e| std::cmp::Reverse(e.count));
    v
}

/// Requests without an answer, by stage (see [`Unanswered`]).
fn unanswered(ctx: &Context, records: &[Record]) -> Vec<Unanswered> {
    let stage_of = |p: Phase| match p {
        Phase::Socket | Phase::Bind | Phase::Connect | Phase::Tls => Stage::Handshake,
        Phase::Send | Phase::Reply => Stage::Reply,
    };
    // The longest wait of a request that ended (ok or failed), per stage: a request cut
    // while waiting less is only in flight.
    let mut longest_done = [None::<u64>; 2];
    for r in records {
        let waits = match r.outcome {
            Outcome::Ok => [r.connect_ns(), r.first_byte_wait_ns()],
            Outcome::Error { phase, .. } => match stage_of(phase) {
                Stage::Handshake => [Some(r.stopped_phase_wait_ns()), None],
                Stage::Reply => [None, Some(r.stopped_phase_wait_ns())],
            },
            Outcome::Cut { .. } => [None, None],
        };
        for (longest, wait) in longest_done.iter_mut().zip(waits) {
            if let Some(w) = wait {
                *longest = Some(longest.unwrap_or(0).max(w));
            }
        }
    }
    let nothing_ended = records
        .iter()
        .all(|r| matches!(r.outcome, Outcome::Cut { .. }));
    let threshold = ctx.threshold.as_nanos() as u64;
    let stuck = |stage: Stage, wait: u64| {
        nothing_ended
            || (wait >= threshold && longest_done[stage as usize].is_none_or(|l| wait > l))
    };
    let mut by: BTreeMap<Stage, Unanswered> = BTreeMap::new();
    for r in records {
        let wait = r.stopped_phase_wait_ns();
        let (stage, timeout) = match r.outcome {
            Outcome::Error {
                kind: ErrorKind::TimedOut,
                phase: Phase::Connect,
            } => (Stage::Handshake, None),
            Outcome::Error {
                kind: ErrorKind::ConnectTimeout,
                phase,
            } => (stage_of(phase), Some(ctx.cfg.connect_timeout)),
            Outcome::Error {
                kind: ErrorKind::ReplyTimeout,
                phase,
            } => (stage_of(phase), Some(ctx.cfg.reply_timeout)),
            Outcome::Cut { phase }
                if matches!(phase, Phase::Connect | Phase::Send | Phase::Reply)
                    && stuck(stage_of(phase), wait) =>
            {
                (stage_of(phase), None)
            }
            _ => continue,
        };
        let timed_out = !matches!(r.outcome, Outcome::Cut { .. });
        let u = by.entry(stage).or_insert_with(|| Unanswered {
            stage,
            count: 0,
            timed_out: 0,
            etimedout: 0,
            cut: 0,
            min_wait_us: u64::MAX,
            max_wait_us: 0,
            first_timeout_at_us: None,
            timeout_us: None,
            partial_replies: 0,
            max_received_bytes: 0,
            expected_reply_bytes: matches!(ctx.cfg.mode, Mode::Crr | Mode::Rr)
                .then_some(ctx.cfg.reply_bytes as u64),
            example_local_ports: Vec::new(),
        });
        u.count += 1;
        if timed_out {
            u.timed_out += 1;
            u.etimedout += u64::from(timeout.is_none());
            let at = us(r.end_ns);
            u.first_timeout_at_us = Some(u.first_timeout_at_us.map_or(at, |t| t.min(at)));
            if let Some(t) = timeout {
                u.timeout_us = Some(t.as_micros() as u64);
            }
        } else {
            u.cut += 1;
        }
        u.min_wait_us = u.min_wait_us.min(us(wait));
        u.max_wait_us = u.max_wait_us.max(us(wait));
        if r.received_bytes > 0 {
            u.partial_replies += 1;
            u.max_received_bytes = u.max_received_bytes.max(u64::from(r.received_bytes));
        }
        if r.local_port != 0
            && u.example_local_ports.len() < EXAMPLES
            && !u.example_local_ports.contains(&r.local_port)
        {
            u.example_local_ports.push(r.local_port);
        }
    }
    by.into_values().collect()
}

fn per_second(records: &[Record]) -> Vec<SecondStats> {
    let mut buckets: BTreeMap<u64, (u64, u64, Vec<u64>)> = BTreeMap::new();
    for r in records {
        let b = buckets
            .entry(r.scheduled_ns / 1_000_000_000)
            .or_insert_with(|| (0, 0, Vec::new()));
        match r.outcome {
            Outcome::Ok => {
                b.0 += 1;
                b.2.push(r.total_ns());
            }
            Outcome::Error { .. } => b.1 += 1,
            Outcome::Cut { .. } => {}
        }
    }
    buckets
        .into_iter()
        .map(|(second, (ok, failed, mut totals))| {
            totals.sort_unstable();
            let p99 = (!totals.is_empty())
                .then(|| totals[((totals.len() - 1) as f64 * 0.99).round() as usize]);
            SecondStats {
                second,
                ok,
                failed,
                p99_total_us: p99.map(us),
                max_total_us: totals.last().copied().map(us),
            }
        })
        .collect()
}

/// Groups spikes by cause, most frequent first.
pub fn spike_summary(spikes: &[Spike], threshold: Duration) -> SpikeSummary {
    // count, corroborated, slow-phase durations, max total, example ports
    type Acc = (u64, u64, Vec<u64>, u64, Vec<u16>);
    // (The slow-phase list gives the median and the maximum.)
    let mut map: BTreeMap<SpikeCause, Acc> = BTreeMap::new();
    for s in spikes {
        let g = map
            .entry(s.cause)
            .or_insert_with(|| (0, 0, Vec::new(), 0, Vec::new()));
        g.0 += 1;
        g.1 += u64::from(s.corroborated);
        g.2.push(s.phase_us);
        g.3 = g.3.max(s.total_us);
        if g.4.len() < EXAMPLES && !g.4.contains(&s.local_port) {
            g.4.push(s.local_port);
        }
    }
    let mut groups: Vec<SpikeGroup> = map
        .into_iter()
        .map(
            |(cause, (count, corroborated, mut phase, max_total_us, ports))| {
                phase.sort_unstable();
                SpikeGroup {
                    cause,
                    label: cause.label(),
                    count,
                    corroborated,
                    typical_phase_us: phase[phase.len() / 2],
                    max_phase_us: phase[phase.len() - 1],
                    max_total_us,
                    example_local_ports: ports,
                }
            },
        )
        .collect();
    groups.sort_by(|a, b| b.count.cmp(&a.count).then(a.cause.cmp(&b.cause)));
    SpikeSummary {
        threshold_us: threshold.as_micros() as u64,
        count: spikes.len() as u64,
        groups,
    }
}

fn counter_moves(delta: &Delta) -> Vec<CounterMove> {
    REPORTED_COUNTERS
        .iter()
        .filter(|(name, _)| delta.get(name) != 0)
        .map(|(name, meaning)| CounterMove {
            name: name.to_string(),
            delta: delta.get(name),
            // The shared table's words first, so every command explains a counter alike.
            meaning: tcpdoctor_model::counters::info(name)
                .map_or(*meaning, |i| i.meaning)
                .to_string(),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(start_ms: u64, total_ms: u64, outcome: Outcome, port: u16) -> Record {
        let s = start_ms * 1_000_000;
        Record {
            worker: 0,
            local_port: port,
            status: 200,
            reused: false,
            received_bytes: 0,
            outcome,
            scheduled_ns: s,
            start_ns: s,
            connected_ns: Some(s + 1_000),
            tls_done_ns: None,
            first_byte_ns: Some(s + 2_000),
            end_ns: s + total_ms * 1_000_000,
            kernel_rtt_us: 0,
            handshake_rtt_us: 0,
            cpu_wait_us: None,
        }
    }

    #[test]
    fn errors_series_and_percentiles() {
        let enoaddr = Outcome::Error {
            kind: ErrorKind::AddrNotAvail,
            phase: Phase::Connect,
        };
        let mut rs: Vec<Record> = (0..100)
            .map(|i| rec(i * 10, 1, Outcome::Ok, 1000 + i as u16))
            .collect();
        rs.push(rec(1_500, 0, enoaddr, 0));
        rs.push(rec(1_600, 0, enoaddr, 0));
        rs.push(rec(
            1_700,
            0,
            Outcome::Cut {
                phase: Phase::Connect,
            },
            0,
        ));
        let e = errors(&rs);
        assert_eq!(e.len(), 1);
        assert_eq!(e[0].count, 2);
        assert_eq!(e[0].errno, "EADDRNOTAVAIL");
        assert_eq!(e[0].ok_before_first, 100);
        let s = per_second(&rs);
        assert_eq!(s.len(), 2);
        assert_eq!((s[0].ok, s[0].failed), (100, 0));
        assert_eq!((s[1].ok, s[1].failed), (0, 2));
        assert_eq!(s[0].max_total_us, Some(1_000));
        // Issue 24: a second in which every request failed measured no latency.
        assert_eq!((s[1].p99_total_us, s[1].max_total_us), (None, None));
        let p = phase_stats(
            LatencyPhase::Total,
            rs.iter().filter(|r| r.is_ok()).map(|r| r.total_ns()),
        );
        assert_eq!(p.count, 100);
        assert!(p.p50_us >= 999 && p.p50_us <= 1_001, "{p:?}");
    }
}
