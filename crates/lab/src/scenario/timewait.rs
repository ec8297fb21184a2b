//! `timewait-collision`: a client reconnects from one fixed source port to a server that closed
//! first and so holds the previous connection in TIME_WAIT (file 000). The client uploads a
//! large request each time, so its sequence numbers run ahead of the clock-driven initial
//! sequence number of the next connection (RFC 6528: the ISN advances with a ~4 us clock,
//! here 64 ns per step, `secure_tcp_seq` in net/core/secure_seq.c). With timestamps off the
//! server cannot tell the new SYN from an old duplicate (`tcp_timewait_state_process`,
//! net/ipv4/tcp_minisocks.c): it answers with an ACK of the old connection, the client resets
//! that, and the SYN waits for its 1 s retransmission. With `--rfc1337`
//! (`net.ipv4.tcp_rfc1337=1`) the server ignores the reset and the connect stalls for seconds.
//! `--fix`: timestamps on and a gap between reconnects, in fresh namespaces.
//!
//! Measured by the lab's own client loop (the port bound with SO_REUSEADDR); diagnosed by
//! `analyze`'s detectors on a capture of the client's interface and by the client's counters.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::Serialize;
use tcpdoctor_model::Finding;
use tcpdoctor_probe::server::{Protocol, ServerConfig};
use tcpdoctor_probe::CloseFirst;

use super::churn::Pair;
use super::{Common, Header, Outcome};
use crate::remedy::{self, Check, Harm};
use crate::traffic::{self, ConnRecord, Outcome as ConnOutcome};
use crate::{capture, diagnose, netns, Result};

/// Gap between reconnects before the fix, milliseconds.
pub const BEFORE_GAP_MS: u64 = 20;

/// The client's fixed source port: below `ip_local_port_range`, so no other socket takes it.
pub const CLIENT_PORT: u16 = 20001;

#[derive(Clone, Debug, Serialize)]
pub struct Config {
    /// Connections, each from the same source port.
    pub connections: u64,
    /// Bytes the client sends per connection.
    pub request_bytes: usize,
    pub rfc1337: bool,
    /// Gap between reconnects in the fixed run (timestamps need a fresh TSval, 1 ms ticks).
    pub fix_gap_ms: u64,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            connections: 4,
            request_bytes: 32 << 20,
            rfc1337: false,
            fix_gap_ms: 50,
        }
    }
}

#[derive(Clone, Debug, Serialize)]
pub struct Report {
    #[serde(flatten)]
    pub header: Header,
    pub config: Config,
    pub before: Run,
    pub after: Option<Run>,
    /// The remedied run judged against the baseline (with --fix).
    pub remedies: Vec<Check>,
}

/// The harm: SYNs resent because they met the previous connection's TIME_WAIT
/// (`TcpExtTCPSynRetrans` of the client namespace).
pub fn harm(run: &Run) -> Harm {
    Harm::count(
        run.client_counters
            .get("TcpExtTCPSynRetrans")
            .copied()
            .unwrap_or(0)
            .max(0) as u64,
        "SYN resends (TcpExtTCPSynRetrans)",
    )
}

/// One run: the lab's own client loop (connect from the fixed port with SO_REUSEADDR, upload,
/// read the reply to EOF, close, wait the gap), timed per connection.
#[derive(Clone, Debug, Serialize)]
pub struct Run {
    pub label: String,
    pub connections: Vec<ConnRecord>,
    /// Connects slower than [`SLOW_CONNECT`].
    pub slow_connects: u64,
    pub connect_max_us: u64,
    /// Counters of the client namespace that moved.
    pub client_counters: BTreeMap<String, i64>,
    /// Counters of the server namespace that moved.
    pub server_counters: BTreeMap<String, i64>,
    /// Findings of this run (analyze on the capture, then counter findings).
    pub findings: Vec<Finding>,
}

/// A connect slower than this waited for a timer, not for the path: the lab's veth round trip
/// is well under 1 ms, and the smallest SYN timer is the 1 s initial RTO (RFC 6298 2.1);
/// a quick resend after a reset shows up as a few ms.
pub const SLOW_CONNECT: Duration = Duration::from_millis(100);

fn client_loop(
    server: std::net::SocketAddrV4,
    bind: std::net::SocketAddrV4,
    cfg: &Config,
    gap: Duration,
    stop: &AtomicBool,
) -> Result<Vec<ConnRecord>> {
    use std::io::{Read, Write};
    let origin = Instant::now();
    let mut out = Vec::new();
    let payload = vec![b'q'; 64 << 10];
    let opts = traffic::ClientOptions {
        bind: Some(bind),
        connect_timeout: Some(Duration::from_secs(15)),
        ..Default::default()
    };
    for _ in 0..cfg.connections {
        if stop.load(Ordering::Relaxed) {
            break;
        }
        let start = Instant::now();
        let (r, connect) = traffic::connect(server, &opts);
        let mut rec = ConnRecord {
            start_us: (start - origin).as_micros() as u64,
            connect_us: connect.as_micros() as u64,
            total_us: 0,
            local_port: bind.port(),
            outcome: ConnOutcome::Ok,
        };
        match r {
            Ok(mut s) => {
                let io = traffic::write_bytes(&mut s, cfg.request_bytes as u64, &payload).and_then(
                    |_| {
                        s.set_read_timeout(Some(Duration::from_secs(10)))?;
                        let mut buf = [0u8; 4096];
                        while s.read(&mut buf)? > 0 {}
                        s.flush()
                    },
                );
                if let Err(e) = io {
                    rec.outcome = ConnOutcome::of(&e);
                }
            }
            Err(e) => rec.outcome = ConnOutcome::of(&e),
        }
        rec.total_us = start.elapsed().as_micros() as u64;
        out.push(rec);
        std::thread::sleep(gap);
    }
    Ok(out)
}

fn one(
    common: &Common,
    cfg: &Config,
    tag: &str,
    timestamps: bool,
    gap: Duration,
    dest: Option<&std::path::Path>,
    stop: &AtomicBool,
) -> Result<(Run, Vec<String>, Option<capture::CaptureSummary>)> {
    let pair = Pair::build(common, tag)?;
    let ts = if timestamps { "1" } else { "0" };
    for ns in [&pair.client, &pair.server] {
        pair.lab.sysctl(ns, "net.ipv4.tcp_timestamps", ts)?;
    }
    if cfg.rfc1337 {
        pair.lab.sysctl(&pair.server, "net.ipv4.tcp_rfc1337", "1")?;
    }
    let mut scfg = ServerConfig::new(
        pair.server_addr.into(),
        Protocol::Tcp {
            request_bytes: cfg.request_bytes,
            reply_bytes: 64,
        },
    );
    scfg.close_first = CloseFirst::Server;
    scfg.threads = 2;
    let server = pair.serve(scfg)?;
    let name = if tag.is_empty() { "timewait" } else { tag };
    let cap = capture::Capture::start(&pair.client, &pair.client_if, name, dest, "tcp")?;
    let label = if timestamps {
        format!(
            "after: timestamps on, {} ms between reconnects",
            gap.as_millis()
        )
    } else if cfg.rfc1337 {
        "before: timestamps off, tcp_rfc1337=1".to_string()
    } else {
        "before: timestamps off".to_string()
    };
    let started = Instant::now();
    let c_before = netns::counters(&pair.client)?;
    let s_before = netns::counters(&pair.server)?;
    let inner = Arc::new(AtomicBool::new(false));
    let flag = Arc::clone(&inner);
    let (to, bind) = (
        pair.server_addr,
        std::net::SocketAddrV4::new(common.subnet.host(1), CLIENT_PORT),
    );
    let c2 = cfg.clone();
    let worker = netns::spawn(&pair.client, "tdoc-twc", move || {
        client_loop(to, bind, &c2, gap, &flag)
    })?;
    while !worker.is_finished() {
        if stop.load(Ordering::Relaxed) {
            inner.store(true, Ordering::Relaxed);
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let records = worker.join();
    let saved = cap.stop();
    server.stop();
    let records = records?;
    let saved = saved?;
    let client_counters = netns::counters(&pair.client)?.delta_since(&c_before).tcp();
    let server_counters = netns::counters(&pair.server)?.delta_since(&s_before).tcp();
    let (mut findings, _) = diagnose::capture(saved.path())?;
    let window = tcpdoctor_model::counters::Window {
        length: Some(started.elapsed()),
        rto_floor: Some(netns::rto_floor(&pair.client, *pair.server_addr.ip())?),
    };
    diagnose::merge(
        &mut findings,
        tcpdoctor_model::counters::findings(&client_counters, window),
    );
    let slow = records
        .iter()
        .filter(|r| r.connect_us > SLOW_CONNECT.as_micros() as u64)
        .count() as u64;
    let run = Run {
        label,
        slow_connects: slow,
        connect_max_us: records.iter().map(|r| r.connect_us).max().unwrap_or(0),
        connections: records,
        client_counters,
        server_counters,
        findings,
    };
    Ok((run, pair.lab.namespaces().to_vec(), saved.kept()))
}

pub fn run(common: &Common, cfg: &Config, stop: &AtomicBool) -> Result<Outcome<Report>> {
    // A short gap lets the previous client socket finish LAST_ACK before the port is bound
    // again; the server's TIME_WAIT lasts 60 s, so the collision is unaffected.
    let result = one(
        common,
        cfg,
        "",
        false,
        Duration::from_millis(BEFORE_GAP_MS),
        common.pcap.as_deref(),
        stop,
    );
    let (before, mut namespaces, capture) = result?;
    let findings: Vec<Finding> = before.findings.clone();
    let after = if common.fix {
        let fix_cfg = Config {
            rfc1337: false,
            ..cfg.clone()
        };
        let r = one(
            common,
            &fix_cfg,
            "fx",
            true,
            Duration::from_millis(cfg.fix_gap_ms),
            None,
            stop,
        );
        let (r, ns, _) = r?;
        namespaces.extend(ns);
        Some(r)
    } else {
        None
    };
    let interrupted = stop.load(Ordering::Relaxed);
    let remedies: Vec<Check> = after
        .iter()
        .map(|a| {
            remedy::judge(
                &a.label,
                tcpdoctor_model::Pathology::TimeWaitCollision,
                harm(&before),
                &before.findings,
                harm(a),
                &a.findings,
            )
        })
        .collect();
    let remedied = super::remedied(
        &remedies,
        &after
            .iter()
            .map(|a| a.findings.as_slice())
            .collect::<Vec<_>>(),
    );
    Ok(Outcome {
        remedied,
        findings,
        body: Report {
            header: Header {
                scenario: "timewait-collision",
                run_id: std::process::id(),
                subnet: common.subnet.to_string(),
                namespaces,
                capture,
                diagnosed_by: vec![
                    "analyze: detectors on a capture of the client's interface".into(),
                    "model::counters findings (client namespace counters)".into(),
                ],
            },
            config: cfg.clone(),
            before,
            after,
            remedies,
        },
        interrupted,
    })
}
