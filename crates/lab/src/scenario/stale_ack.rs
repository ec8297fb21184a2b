//! `stale-ack-race`: file 003's loop (connect, send 4 bytes, read to the server's FIN, close
//! with SO_LINGER 0 and TCP_NODELAY; the server reads the 4 bytes and closes first), run by
//! the lab's own client and server of 003's shape ([`client_003`], [`serve_003`]), each
//! connection recorded and classified by probe, reporting how often a SYN was resent
//! (`TcpExtTCPSynRetrans`) and whether the race was reproduced ([`reproduction`]).
//!
//! The race needs the server's close and the client's reset handled at the same moment on
//! two CPUs, so the client runs on one CPU and the server on another
//! ([`tcpdoctor_sandbox::traffic::pin_thread`]). Measured here (Linux 6.18, 2 CPUs, veth between two
//! namespaces, 003's C client and server): 10-63 races per 10 s pinned apart, 0-20
//! unpinned. How often it fires still depends on what else the CPUs run: 0 in some runs of
//! 4 s, up to 14 per second in others.
//!
//! Then a
//! forced check of the kernel's behaviour: the client's reset is dropped (nftables) so the
//! server keeps the old connection, the client reconnects from the same port, meets the stale
//! ACK, resets it, and the time to its SYN resend is measured. It reports what it observed:
//! a resend within milliseconds (the quick-resend behaviour of current kernels) or after the
//! 1 s SYN timer. `--fix` runs the same loop with a graceful close (FIN) instead of
//! SO_LINGER 0 (the remedy `graceful-close`), in fresh namespaces.

use std::collections::BTreeMap;
use std::net::SocketAddrV4;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use tcpdoctor_model::remedy::{Check, Effect, Harm, Measured, Prediction, Row, Tolerance, Verdict};
use tcpdoctor_model::reproduce::{Event, Reproduction};
use tcpdoctor_model::Pathology;
use tcpdoctor_probe::record::{ErrorKind, Outcome as ProbeOutcome, Phase};
use tcpdoctor_probe::{CloseFirst, Mode, ProbeResult, Record};

use super::driver::{self, Ran, Remedy, Scenario, Tail};
use super::harness::{self, Pair, ProbeRun};
use super::{Common, Header, Outcome};
use crate::{Error, Result};
use tcpdoctor_sandbox::{naming, netns, traffic};

/// Source port of the forced check: below `ip_local_port_range`.
pub const FORCED_PORT: u16 = 20002;
/// The forced check's name in the trace's runs.
pub const FORCED_RUN: &str = "forced check: a SYN meets a stale ACK";
/// Server port of the forced check.
pub const FORCED_SERVER_PORT: u16 = 5002;

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Config {
    pub duration_ms: u64,
    pub concurrency: usize,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            duration_ms: 10_000,
            concurrency: 1,
        }
    }
}

/// What the kernel did when a SYN met a stale ACK in the forced check.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ResendBehaviour {
    /// The SYN was resent within milliseconds of the client's reset.
    QuickResend,
    /// The SYN waited for the retransmission timer (~1 s).
    TimerResend,
    /// The stale ACK did not happen (the connect completed without a SYN resend).
    NotReproduced,
    /// The connect failed.
    Failed,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Forced {
    pub connect_us: u64,
    pub behaviour: ResendBehaviour,
    pub client_counters: BTreeMap<String, i64>,
}

/// One run of 003's loop: probe's record of it, and the server sockets the race left behind.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct LoopRun {
    #[serde(flatten)]
    pub run: ProbeRun,
    /// Server sockets still in FIN_WAIT2 toward the client after the loop (sock_diag of the
    /// server's namespace): each lost its client's reset, the race itself.
    pub fin_wait2_left: u64,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Report {
    #[serde(flatten)]
    pub header: Header,
    pub config: Config,
    pub loop_run: LoopRun,
    /// `TcpExtTCPSynRetrans` of the loop per million connections.
    pub syn_resends_per_million: f64,
    /// Connects probe classified as a SYN resent after a stale ACK.
    pub stale_ack_resends: u64,
    /// Connects probe classified as SYN retransmissions (timer).
    pub syn_timer_resends: u64,
    /// The forced check, the loop's CPUs and the kernel.
    #[serde(flatten)]
    pub facts: Facts,
    #[serde(flatten)]
    pub unfixed: super::Unfixed<Vec<()>>,
}

/// What the loop `base` counted of SYN resends: per million connections, and the connects
/// probe classified as resent after a stale ACK and on the SYN timer.
pub fn resends(base: &ProbeRun) -> (f64, u64, u64) {
    use tcpdoctor_probe::SpikeCause;
    let resends = base.client_counter("TcpExtTCPSynRetrans");
    let conns = base.summary.connections_opened.max(1);
    let (stale, _, _) = base.spikes(|c| matches!(c, SpikeCause::StaleAckResend));
    let (timer, _, _) = base.spikes(|c| matches!(c, SpikeCause::SynRetransmit { .. }));
    (resends as f64 * 1e6 / conns as f64, stale, timer)
}

fn forced_check(common: &Common) -> Result<(Forced, Vec<String>, tcpdoctor_trace::run::RunTrace)> {
    let pair = Pair::build(common, "fc")?;
    let srv = SocketAddrV4::new(common.subnet.host(2), FORCED_SERVER_PORT);
    let bind = SocketAddrV4::new(common.subnet.host(1), FORCED_PORT);
    let stop = Arc::new(AtomicBool::new(false));
    let s2 = Arc::clone(&stop);
    // The server accepts and holds every connection without closing it.
    let holder = netns::spawn(&pair.server, "tdoc-hold", move || {
        let l = traffic::listen(srv, 16).map_err(|e| Error::io(format!("listen on {srv}"), e))?;
        let mut held = Vec::new();
        let deadline = Instant::now() + Duration::from_secs(20);
        while let Ok(s) = traffic::accept_one(&l, &s2, deadline) {
            held.push(s);
        }
        Ok(held.len())
    })?;
    pair.lab.nft(
        &pair.client,
        "drop the client's resets",
        &format!(
            "table inet {t} {{\n chain out {{\n  type filter hook output priority 0; policy accept;\n  tcp dport {FORCED_SERVER_PORT} tcp flags & rst == rst drop\n }}\n}}\n",
            t = naming::NFT_TABLE
        ),
    )?;
    let opts = traffic::ClientOptions {
        bind: Some(bind),
        linger0: true,
        connect_timeout: Some(Duration::from_secs(5)),
        ..Default::default()
    };
    let o2 = opts.clone();
    // Traced like every run: the trace names the stale ACK's reset and the SYN resend.
    let tracer = pair.trace(FORCED_RUN);
    netns::run_in(&pair.client, move || {
        let (s, _) = traffic::connect(srv, &o2);
        let s = s.map_err(|e| Error::io("forced check: first connect", e))?;
        drop(s); // SO_LINGER 0: an RST, dropped by the rule.
        Ok(())
    })?;
    std::thread::sleep(Duration::from_millis(50));
    pair.lab.nft_flush(&pair.client);
    let before = netns::counters(&pair.client)?;
    let (ok, connect) = netns::run_in(&pair.client, move || {
        let (s, t) = traffic::connect(srv, &opts);
        Ok((s.is_ok(), t))
    })?;
    let delta = netns::counters(&pair.client)?.delta_since(&before);
    let trace = tracer.finish();
    stop.store(true, Ordering::Relaxed);
    let _ = holder.join();
    let resent = delta.get("TcpExtTCPSynRetrans") > 0;
    // The 1 s initial SYN RTO (RFC 6298 2.1); half of it separates a quick resend from a timer.
    let behaviour = match (ok, resent) {
        (false, _) => ResendBehaviour::Failed,
        (true, false) => ResendBehaviour::NotReproduced,
        (true, true) if connect < Duration::from_millis(500) => ResendBehaviour::QuickResend,
        (true, true) => ResendBehaviour::TimerResend,
    };
    let client_counters = delta.tcp();
    Ok((
        Forced {
            connect_us: connect.as_micros() as u64,
            behaviour,
            client_counters,
        },
        pair.lab.namespaces().to_vec(),
        trace,
    ))
}

/// The harm: SYNs resent per million connections of the loop (`TcpExtTCPSynRetrans`).
pub fn harm(run: &LoopRun) -> Harm {
    let run = &run.run;
    let conns = run.summary.connections_opened.max(1);
    let resends = run.client_counter("TcpExtTCPSynRetrans").max(0) as f64;
    Harm::count(
        (resends * 1e6 / conns as f64).round() as u64,
        "SYN resends per million connections",
    )
}

/// File 003's loop in a fresh pair of namespaces: [`client_003`] (SO_LINGER 0 when
/// `linger0`, else a graceful close) on one CPU against [`serve_003`] on another (`cpus`:
/// server, client), its records summarized and classified by probe. Returns the run (with the
/// server sockets the race left in FIN_WAIT2, [`fin_wait2_left`]), its namespaces and the
/// capture it kept.
fn loop_run(
    common: &Common,
    cfg: &Config,
    tag: &str,
    label: &str,
    linger0: bool,
    cpus: Option<(usize, usize)>,
    stop: &AtomicBool,
) -> Result<Ran<LoopRun>> {
    let mut pair = Pair::build(common, tag)?;
    pair.client_cpu = cpus.map(|(_, client)| client);
    pair.lab.sysctl(
        &pair.client,
        "net.ipv4.ip_local_port_range",
        &format!("{} {}", LOOP_PORTS.low, LOOP_PORTS.high),
    )?;
    let halt = Arc::new(AtomicBool::new(false));
    let server = serve_003(&pair, cpus.map(|(server, _)| server), Arc::clone(&halt))?;
    let mut p = harness::probe_config(pair.server_addr, Duration::from_millis(cfg.duration_ms));
    p.mode = Mode::Crr;
    p.linger0 = linger0;
    p.nodelay = true;
    p.close_first = CloseFirst::Server;
    p.request_bytes = REQUEST_BYTES;
    p.reply_bytes = 0;
    p.concurrency = cfg.concurrency;
    let cap = pair.capture(common, tag)?;
    let engine: harness::Engine = Box::new(move |flag: &AtomicBool| client_003(&p, flag));
    let run = harness::run_engines(&pair, label, vec![engine], stop).map(|mut r| r.remove(0));
    // Every connection of the loop has ended (each closes before the next starts): a server
    // socket still in FIN_WAIT2 lost its client's reset.
    std::thread::sleep(Duration::from_millis(50));
    let left = fin_wait2_left(&pair);
    let summary = harness::stop_capture(cap);
    halt.store(true, Ordering::Relaxed);
    server.join()?;
    let run = LoopRun {
        run: run?,
        fin_wait2_left: left?,
    };
    Ok(pair.ran(run, summary?))
}

/// The client's ports in the loop: 2,000 instead of the default 28,232. A race leaves the
/// server a FIN_WAIT2 socket for the 4-tuple (for net.ipv4.tcp_fin_timeout, 60 s), which
/// shows as a stale ACK only when a later connect takes the same port again: with 28,232
/// ports one connect in ~14,000 (connect() steps through the range two at a time), with
/// 2,000 one in ~1,000. Measured with 003's C client and server in fresh namespaces, 3 runs
/// of 4 s: default range 5-12 SYNs resent, 14-18 races left unseen in FIN_WAIT2; 2,000
/// ports 21-30 resent, 0-1 left. SO_LINGER 0 leaves the client no TIME_WAIT, so the
/// narrower range does not run out.
pub const LOOP_PORTS: tcpdoctor_model::PortRange = tcpdoctor_model::PortRange {
    low: 40000,
    high: 41999,
};

/// Server sockets of the loop's pair in FIN_WAIT2 toward the client (the timewait sockets
/// the race leaves, substate FIN_WAIT2, as sock_diag reports them).
fn fin_wait2_left(pair: &Pair) -> Result<u64> {
    use tcpdoctor_host::sockets::{census_in_netns, Filter, TcpState};
    let filter = Filter {
        states: vec![TcpState::FinWait2],
        ports: vec![pair.server_addr.port()],
        addresses: Vec::new(),
    };
    census_in_netns(&pair.server, &filter)
        .map(|c| c.sockets.len() as u64)
        .map_err(|e| {
            Error::io(
                format!("count FIN_WAIT2 sockets in {}", pair.server),
                std::io::Error::other(e.to_string()),
            )
        })
}

/// Bytes of 003's request (an `int`).
const REQUEST_BYTES: usize = 4;

/// A connect or a read of [`client_003`] gives up after this long (SO_SNDTIMEO bounds a
/// blocking connect, SO_RCVTIMEO a read): a server gone silent cannot hold the loop past its
/// bounds. Nothing in the loop's path drops packets; a resent SYN waits at most the ladder's
/// first rung (1 s).
const CLIENT_TIMEOUT: Duration = Duration::from_secs(5);

/// Report 003's client, `cfg.concurrency` loops in the calling thread's namespace, until
/// `cfg.duration` or `halt`: a socket with SO_LINGER 0 (`cfg.linger0`) and TCP_NODELAY,
/// connect, send 4 bytes, read until the server's FIN (it sends nothing), read again, close
/// (a reset with SO_LINGER 0). Each connection is recorded as probe records its own, then
/// summarized and classified by probe ([`harness::result_of`]).
///
/// It is 003's loop and nothing more: the lab's earlier loop (probe's engine, with its
/// bookkeeping around each connection, against a one-thread server answering 4 bytes) made 0
/// races in 42,000 connects here in the same minutes as 003's C client and server, pinned
/// apart, made 129 in 35,000 (6 interleaved runs of 4 s, Linux 6.18, 2 CPUs busy with other
/// work); against the same answering server, probe's engine made 20 in 4 runs where the C
/// client made 40.
fn client_003(cfg: &tcpdoctor_probe::Config, halt: &AtomicBool) -> Result<ProbeResult> {
    let Some(std::net::SocketAddr::V4(target)) = cfg.target else {
        return Err(Error::invalid(
            "report 003's client",
            "needs an IPv4 target",
        ));
    };
    let counters = tcpdoctor_host::counters::Source {
        dir: std::path::PathBuf::from(netns::THREAD_PROC_NET),
    };
    let host = |source| Error::Host {
        step: "read the client namespace's counters".into(),
        source,
    };
    let before = counters.snapshot().map_err(host)?;
    let cpu_before = tcpdoctor_host::pressure::cpu_some_total_us().ok().flatten();
    let t0 = Instant::now();
    let end = t0 + cfg.duration;
    let linger0 = cfg.linger0;
    let (mut records, mut workers_ns) = (Vec::new(), Vec::new());
    std::thread::scope(|sc| {
        let loops: Vec<_> = (0..cfg.concurrency.max(1))
            .map(|w| sc.spawn(move || loop_003(w as u16, target, t0, end, linger0, halt)))
            .collect();
        for l in loops {
            let (r, waited) = l.join().unwrap_or_default();
            records.extend(r);
            workers_ns.push(waited);
        }
    });
    let elapsed = t0.elapsed();
    let cpu_after = tcpdoctor_host::pressure::cpu_some_total_us().ok().flatten();
    let delta = counters.snapshot().map_err(host)?.delta_since(&before);
    records.sort_by_key(|r| r.start_ns);
    harness::result_of(
        cfg,
        records,
        &delta,
        elapsed,
        cpu_before.zip(cpu_after).map(|(b, a)| a.saturating_sub(b)),
        workers_ns,
        halt.load(Ordering::Relaxed),
    )
}

/// One loop of [`client_003`]: its connections, until `end` or `halt`, and how long it
/// waited for a CPU meanwhile. A connection of [`tcpdoctor_probe::record::DETAIL_AFTER`] or
/// more records the wait since the previous such reading, as probe's workers do: what the
/// loop's own scheduling could add to its time.
fn loop_003(
    worker: u16,
    target: SocketAddrV4,
    t0: Instant,
    end: Instant,
    linger0: bool,
    halt: &AtomicBool,
) -> (Vec<Record>, Option<u64>) {
    // Probe's workers' reading of their wait for a CPU (schedstat `run_delay`).
    let mut sched = tcpdoctor_probe::SchedStat::open();
    let since = |t: Instant| t.duration_since(t0).as_nanos() as u64;
    let to: socket2::SockAddr = std::net::SocketAddr::V4(target).into();
    let mut out = Vec::new();
    let mut buf = [0u8; REQUEST_BYTES];
    while !halt.load(Ordering::Relaxed) {
        let start = Instant::now();
        if start >= end {
            break;
        }
        let mut rec = Record::started(worker, since(start), since(start));
        let done = exchange_003(&to, linger0, &mut buf, &mut rec, &since);
        rec.end_ns = since(Instant::now());
        if rec.end_ns - rec.start_ns >= tcpdoctor_probe::record::DETAIL_AFTER {
            rec.cpu_wait_us = sched
                .as_mut()
                .and_then(tcpdoctor_probe::SchedStat::since_last_ns)
                .map(|ns| u32::try_from(ns / 1_000).unwrap_or(u32::MAX));
        }
        if let Err((e, phase)) = done {
            rec.outcome = ProbeOutcome::Error {
                kind: ErrorKind::from_io(&e),
                phase,
            };
        }
        out.push(rec);
    }
    let waited = sched
        .as_ref()
        .and_then(tcpdoctor_probe::SchedStat::total_ns);
    (out, waited)
}

/// One connection of report 003's client; its socket is closed on return.
fn exchange_003(
    to: &socket2::SockAddr,
    linger0: bool,
    buf: &mut [u8; REQUEST_BYTES],
    rec: &mut Record,
    since: &dyn Fn(Instant) -> u64,
) -> std::result::Result<(), (std::io::Error, Phase)> {
    use std::io::{Read, Write};
    let s = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None)
        .map_err(|e| (e, Phase::Socket))?;
    let setup = |s: &socket2::Socket| -> std::io::Result<()> {
        if linger0 {
            s.set_linger(Some(Duration::ZERO))?;
        }
        s.set_tcp_nodelay(true)?;
        s.set_write_timeout(Some(CLIENT_TIMEOUT))?;
        s.set_read_timeout(Some(CLIENT_TIMEOUT))
    };
    setup(&s).map_err(|e| (e, Phase::Socket))?;
    s.connect(to).map_err(|e| (e, Phase::Connect))?;
    rec.connected_ns = Some(since(Instant::now()));
    rec.local_port = s
        .local_addr()
        .ok()
        .and_then(|a| a.as_socket())
        .map_or(0, |a| a.port());
    (&s).write_all(&buf[..]).map_err(|e| (e, Phase::Send))?;
    // 003 reads twice: the server's FIN ends the first read, the second returns at once.
    for _ in 0..2 {
        let n = (&s).read(&mut buf[..]).map_err(|e| (e, Phase::Reply))?;
        rec.received_bytes = rec.received_bytes.saturating_add(n as u32);
    }
    // Acknowledge the FIN now, before the reset, as 003's trace shows its client doing: the
    // race is the server handling that ACK and the reset at once. A client that closes as
    // soon as it reads the FIN sends the reset alone (the acknowledgement rides on it) and
    // there is nothing to race: 2-10 races per 4 s here without this, 23-29 with it (003's
    // C client pinned apart from its server, 3 interleaved runs each). TCP_QUICKACK sends an
    // acknowledgement the kernel holds back (tcp_sock_set_quickack, net/ipv4/tcp.c).
    s.set_tcp_quickack(true).map_err(|e| (e, Phase::Reply))?;
    Ok(())
}

/// Report 003's server: one thread (on `cpu`, when given) that accepts a connection, reads
/// its 4-byte request and closes first, sending nothing. It listens before this returns and
/// serves until `halt`; returns how many connections it served. 003's shape matters to the
/// race: against probe's embedded server (64 threads, each connection's reply written
/// before the close) a C client of 003's shape made 0 races in 18,000-92,000 connects here,
/// against this shape 10-60 per 10 s; a 4-byte answer before the close halved them (31 in
/// 125,000 connects against 127 in 110,000 without, 5 interleaved runs of 4 s).
fn serve_003(pair: &Pair, cpu: Option<usize>, halt: Arc<AtomicBool>) -> Result<netns::Worker<u64>> {
    let addr = pair.server_addr;
    let listener = netns::run_in(&pair.server, move || {
        let l =
            traffic::listen(addr, 128).map_err(|e| Error::io(format!("listen on {addr}"), e))?;
        // accept() wakes every POLL_INTERVAL to look at `halt`.
        socket2::SockRef::from(&l)
            .set_read_timeout(Some(traffic::POLL_INTERVAL))
            .map_err(|e| Error::io("listener timeout", e))?;
        Ok(l)
    })?;
    netns::spawn(&pair.server, "tdoc-srv003", move || {
        if let Some(cpu) = cpu {
            traffic::pin_thread(cpu)
                .map_err(|e| Error::io(format!("pin the server to CPU {cpu}"), e))?;
        }
        let mut served = 0;
        let mut buf = [0u8; REQUEST_BYTES];
        while !halt.load(Ordering::Relaxed) {
            let mut conn = match listener.accept() {
                Ok((c, _)) => c,
                Err(e)
                    if matches!(
                        e.kind(),
                        std::io::ErrorKind::WouldBlock
                            | std::io::ErrorKind::TimedOut
                            | std::io::ErrorKind::Interrupted
                    ) =>
                {
                    continue
                }
                Err(e) => return Err(Error::io("accept", e)),
            };
            // The request follows the connect at once; a client cut at the end of the run
            // resets, and a silent one is given up after a second.
            let _ = conn.set_read_timeout(Some(Duration::from_secs(1)));
            use std::io::Read;
            if conn.read_exact(&mut buf).is_ok() {
                served += 1;
            }
            drop(conn); // the server closes first: its FIN
        }
        Ok(served)
    })
}

/// The kernel's release (`6.18.0`), for what the race cost "on this kernel".
fn kernel_release() -> String {
    std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|_| "unknown".into())
}

/// Whether a loop run reproduced the race: server sockets still in FIN_WAIT2 after the loop
/// (`left`: each lost its client's reset, the race itself), SYNs the eBPF trace saw answered
/// by a stale ACK and resent, and connects probe's classifier timed as a SYN resent after a
/// stale ACK (its quick-resend window, beside the client's `TcpExtTCPSynRetrans`): the last
/// two are the races a later connect met. The cost: how long those connects took, and what
/// the forced check showed of this kernel.
pub fn reproduction(run: &LoopRun, forced: &Forced, kernel: &str) -> Reproduction {
    let (left, run) = (run.fin_wait2_left, &run.run);
    let mut signature = vec![Event::new(
        left,
        "server sockets left in FIN_WAIT2 by a reset they lost, after the loop",
        "server namespace sock_diag",
    )];
    if run.trace.used {
        signature.push(Event::new(
            run.trace
                .syn_resends
                .get(&tcpdoctor_model::Pathology::StaleAckRace)
                .copied()
                .unwrap_or(0),
            "SYNs answered by a stale ACK and resent",
            "eBPF trace",
        ));
    }
    let (classified, typical, longest) =
        run.spikes(|c| matches!(c, tcpdoctor_probe::SpikeCause::StaleAckResend));
    signature.push(Event::new(
        classified,
        "connects slowed by a SYN resent after a stale ACK",
        "probe's classifier",
    ));
    let kernel_line = match forced.behaviour {
        ResendBehaviour::QuickResend => Some(("at once", ", so no 1 s stall")),
        ResendBehaviour::TimerResend => Some(("on its 1 s timer", "")),
        ResendBehaviour::NotReproduced | ResendBehaviour::Failed => None,
    }
    .map(|(when, then)| {
        let took = tcpdoctor_report::fmt::micros(forced.connect_us);
        format!("Linux {kernel} resends the SYN {when} after resetting the stale ACK (forced check: connect took {took}){then}")
    });
    let cost_line = kernel_line.clone();
    let cost = move || {
        let delayed = (classified > 0).then(|| {
            format!(
                "each delayed its connect ~{} (longest {})",
                tcpdoctor_report::fmt::micros(typical),
                tcpdoctor_report::fmt::micros(longest)
            )
        });
        let parts: Vec<String> = delayed.into_iter().chain(cost_line).collect();
        (!parts.is_empty()).then(|| parts.join(": "))
    };
    let probe_tried = run.tried();
    let not_reproduced_note = kernel_line.map(|k| format!("the forced check made one: {k}"));
    let mut r = Reproduction::of(
        &run.label,
        tcpdoctor_model::Pathology::StaleAckRace,
        signature,
        probe_tried,
        cost,
        None,
    );
    if !r.reproduced {
        if let Some(note) = not_reproduced_note {
            r.line.push_str("; ");
            r.line.push_str(&note);
        }
    }
    r
}

/// The loop, then the forced check.
pub fn run(s: StaleAck, common: &Common, stop: &AtomicBool) -> Result<Outcome<Report>> {
    let o = driver::remedies(s, common, &[], stop)?;
    Ok(o.map(|r| {
        let (syn_resends_per_million, stale_ack_resends, syn_timer_resends) =
            resends(&r.baseline.run);
        Report {
            header: r.header,
            config: r.config,
            loop_run: r.baseline,
            syn_resends_per_million,
            stale_ack_resends,
            syn_timer_resends,
            facts: r.facts,
            unfixed: Default::default(),
        }
    }))
}

/// What `--remedies` measured besides the runs: the forced check, the loop's CPUs and the
/// kernel (as in the plain run's report).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Facts {
    pub forced: Forced,
    /// The CPUs the loop's server and client ran on (`[server, client]`), when this host
    /// has two to keep them apart.
    pub loop_cpus: Option<[usize; 2]>,
    /// The kernel the race was measured on (`/proc/sys/kernel/osrelease`). Not in the body's
    /// JSON: the printed report's provenance carries it (`kernel_release`, the same release);
    /// a report read back takes it from there.
    #[serde(skip)]
    pub kernel_release: String,
}

fn measured(run: &LoopRun) -> tcpdoctor_model::remedy::Measured {
    let h = harm(run);
    let run = &run.run;
    tcpdoctor_model::remedy::Measured {
        text: format!(
            "{} connections, {} SYN resends: {} per million",
            tcpdoctor_model::units::thousands(run.summary.connections_opened),
            run.client_counter("TcpExtTCPSynRetrans"),
            h.shown()
        ),
        value: Some(h.amount),
    }
}

/// What the forced check measured: this kernel's behaviour, its namespaces' trace and the
/// kernel's release.
struct Checked {
    forced: Forced,
    trace: tcpdoctor_trace::run::RunTrace,
    kernel: String,
}

/// The stale-ACK race as `--remedies` drives it: the SO_LINGER 0 loop, each selected
/// remedy, and the forced check that names this kernel's behaviour.
pub struct StaleAck {
    cfg: Config,
    /// The CPUs of each loop's server and client, chosen when the baseline runs.
    cpus: Option<(usize, usize)>,
    /// The forced check, once the baseline has run.
    checked: Option<Checked>,
}

impl StaleAck {
    pub fn new(cfg: Config) -> StaleAck {
        StaleAck {
            cfg,
            cpus: None,
            checked: None,
        }
    }

    /// The scenario as a recorded run left it after its baseline: the forced check's result
    /// and the kernel it ran on, to judge the recorded runs again without root
    /// (crates/lab/tests/verdicts.rs).
    pub fn recorded(cfg: Config, forced: Forced, kernel: String) -> StaleAck {
        StaleAck {
            cfg,
            cpus: None,
            checked: Some(Checked {
                forced,
                trace: tcpdoctor_trace::run::RunTrace::default(),
                kernel,
            }),
        }
    }

    fn checked(&self) -> &Checked {
        self.checked
            .as_ref()
            .expect("the forced check runs right after the baseline")
    }

    /// This kernel's behaviour in the forced check, in words.
    fn behaviour(&self) -> String {
        let forced = &self.checked().forced;
        match forced.behaviour {
            ResendBehaviour::QuickResend => format!(
                "this kernel resends the SYN within milliseconds of resetting the stale ACK, not on the 1 s SYN timer: a race cost the connect {:.1} ms",
                forced.connect_us as f64 / 1e3
            ),
            ResendBehaviour::TimerResend => format!(
                "this kernel resends the SYN on its 1 s timer after resetting the stale ACK: a race cost the connect {:.3} s",
                forced.connect_us as f64 / 1e6
            ),
            ResendBehaviour::NotReproduced => {
                "the forced stale ACK did not happen: the kernel's behaviour is unknown".to_string()
            }
            ResendBehaviour::Failed => "the forced reconnect failed".to_string(),
        }
    }
}

impl Scenario for StaleAck {
    type Config = Config;
    type Run = LoopRun;
    /// Whether the client closes with SO_LINGER 0.
    type Variant = bool;
    type Facts = Facts;
    const NAME: &'static str = "stale-ack-race";
    const PATHOLOGY: Pathology = Pathology::StaleAckRace;
    const DIAGNOSED_BY: &'static [&'static str] = &[
        "probe's classifier of slow connects (with the kernel counters of the client's namespace)",
        "the forced check (the client's TcpExtTCPSynRetrans and connect time)",
    ];
    const REMEDIES: &'static [&'static str] = &["graceful-close"];
    const FIX: &'static [&'static str] = &["graceful-close"];

    fn config(&self) -> &Config {
        &self.cfg
    }

    fn baseline(&self) -> (String, bool) {
        (
            "before: connection per request, SO_LINGER 0, TCP_NODELAY, server closes first".into(),
            true,
        )
    }

    fn run(
        &mut self,
        common: &Common,
        tag: &'static str,
        label: &str,
        linger0: &bool,
        stop: &AtomicBool,
    ) -> Result<Ran<LoopRun>> {
        if tag.is_empty() {
            self.cpus = traffic::two_cpus();
        }
        loop_run(common, &self.cfg, tag, label, *linger0, self.cpus, stop)
    }

    fn after_baseline(&mut self, common: &Common, _base: &LoopRun) -> Result<Vec<String>> {
        let (forced, ns, trace) = forced_check(common)?;
        self.checked = Some(Checked {
            forced,
            trace,
            kernel: kernel_release(),
        });
        Ok(ns)
    }

    fn harm(&self, run: &LoopRun) -> Harm {
        harm(run)
    }

    fn reproduction(&self, run: &LoopRun) -> Reproduction {
        let c = self.checked();
        reproduction(run, &c.forced, &c.kernel)
    }

    fn remedy(&mut self, name: &str, _base: &LoopRun) -> Result<Remedy<bool>> {
        if name != "graceful-close" {
            return Err(driver::unknown(name, "a stale-ack-race"));
        }
        Ok(Remedy {
            label: "graceful close (FIN) instead of SO_LINGER 0".into(),
            variant: false,
            prediction: Ok(Prediction::value(
                "a FIN close keeps the client's port in LAST_ACK until the server has acknowledged it, and the server's TIME_WAIT takes a newer SYN (timestamps): only a reset (SO_LINGER 0) frees the port while the server still holds the old connection, so no SYN meets a stale ACK",
                "0 SYN resends per million connections",
                0.0,
                "per million",
                Tolerance::Absolute(0.0),
                "",
            )),
            changes: "the client closes with a FIN (no SO_LINGER 0); the server still closes first"
                .into(),
        })
    }

    /// The noise of a count per million: one resend in the remedied run.
    fn complete(
        &self,
        _name: &str,
        prediction: std::result::Result<Prediction, String>,
        run: &LoopRun,
    ) -> std::result::Result<Prediction, String> {
        let resolution = 1e6 / run.run.summary.connections_opened.max(1) as f64;
        prediction.map(|p| Prediction {
            noise: format!("one resend in this run is {resolution:.0} per million"),
            ..p
        })
    }

    fn measured(&self, _name: &str, run: &LoopRun, _base: &LoopRun) -> Measured {
        measured(run)
    }

    fn override_verdict(
        &self,
        _name: &str,
        _variant: &bool,
        check: &Check,
        _run: &LoopRun,
        base: &LoopRun,
    ) -> Option<(Verdict, String)> {
        (check.effect == Effect::NothingToFix).then(|| {
            (
                Verdict::NothingToFix,
                format!(
                    "the SO_LINGER 0 loop made {} connections without a stale ACK (0 per million; one would be {:.0} per million); {}",
                    tcpdoctor_model::units::thousands(base.run.summary.connections_opened),
                    1e6 / base.run.summary.connections_opened.max(1) as f64,
                    self.behaviour()
                ),
            )
        })
    }

    fn more_traces(&self) -> Vec<tcpdoctor_trace::run::RunTrace> {
        vec![self.checked().trace.clone()]
    }

    fn tail(&self, base: &LoopRun, _rows: &[Row<LoopRun>]) -> Tail<Facts> {
        let (cfg, c) = (&self.cfg, self.checked());
        let base_rate = harm(base).amount;
        let mut notes = vec![
            format!(
                "Forced check (the client's reset dropped by nftables, reconnect from port {FORCED_PORT}): {}.",
                self.behaviour()
            ),
            format!(
                "Baseline: {:.0} SYN resends per million connections; at the forced check's cost that is {:.1} ms of connect time per million connections.",
                base_rate,
                base_rate * c.forced.connect_us as f64 / 1e3
            ),
        ];
        if let Some((server, client)) = self.cpus {
            notes.push(format!(
                "Each loop's server ran on CPU {server}, its client on CPU {client}: the race needs the two on different CPUs."
            ));
        }
        let baseline_label = format!(
            "connection per request with SO_LINGER 0 and TCP_NODELAY, the server closes first, {} loop(s), {} s",
            cfg.concurrency,
            cfg.duration_ms / 1000
        );
        let facts = Facts {
            forced: c.forced.clone(),
            loop_cpus: self.cpus.map(|(s, c)| [s, c]),
            kernel_release: c.kernel.clone(),
        };
        Tail::of(baseline_label, notes, facts)
    }
}
