//! `slow-reader`: a writer (client namespace) sends at `writer_rate` to a reader (server
//! namespace) that drains its small receive buffer at only `reader_rate` (file 002). The
//! receive window closes (zero-window advertisements, counted by the reader's kernel as
//! `TcpExtTCPToZeroWindowAdv`), the writer's send buffer fills and its writes block. `--fix`
//! gives the reader a larger buffer and reads 10x faster.
//!
//! Diagnosis: `analyze`'s detectors on a capture of the writer's interface, and the counter
//! findings (`model::counters`) of the reader's namespace.

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::SocketAddrV4;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::Serialize;
use tcpdoctor_model::Finding;

use super::churn::Pair;
use super::{Common, Header, Outcome};
use crate::remedy::{self, Check, Harm};
use crate::{capture, diagnose, netns, traffic, Error, Result};

#[derive(Clone, Debug, Serialize)]
pub struct Config {
    pub writer_rate_bytes_per_s: u64,
    pub reader_rate_bytes_per_s: u64,
    /// Reader's SO_RCVBUF (the kernel doubles it for bookkeeping, socket(7)).
    pub reader_rcvbuf_bytes: usize,
    pub duration_ms: u64,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            writer_rate_bytes_per_s: 8 << 20,
            reader_rate_bytes_per_s: 1 << 20,
            reader_rcvbuf_bytes: 16 << 10,
            duration_ms: 3000,
        }
    }
}

#[derive(Clone, Debug, Serialize)]
pub struct Run {
    pub label: String,
    pub reader_rcvbuf_bytes: usize,
    pub reader_rate_bytes_per_s: u64,
    pub bytes_written: u64,
    pub bytes_read: u64,
    /// Time the writer spent blocked in write() beyond its schedule.
    pub writer_stall_us: u64,
    /// Share of the run the writer was stalled.
    pub writer_stall_share: f64,
    /// Zero-window advertisements the reader's kernel sent (`TcpExtTCPToZeroWindowAdv`).
    pub zero_window_advertisements: i64,
    pub reader_counters: BTreeMap<String, i64>,
    pub writer_counters: BTreeMap<String, i64>,
    pub findings: Vec<Finding>,
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

/// The harm: times the reader's kernel closed the window (`TcpExtTCPToZeroWindowAdv`).
pub fn harm(run: &Run) -> Harm {
    Harm::count(
        run.zero_window_advertisements.max(0) as u64,
        "zero-window advertisements (TcpExtTCPToZeroWindowAdv)",
    )
}

/// The writer paces itself in slices of this length.
const SLICE: Duration = Duration::from_millis(10);

/// The reader wakes this often and reads at most rate x this, like an application that
/// handles a batch per tick; between ticks its buffer fills and the window closes.
const READER_TICK: Duration = Duration::from_millis(100);

fn writer(to: SocketAddrV4, rate: u64, dur: Duration, stop: &AtomicBool) -> Result<(u64, u64)> {
    let (s, _) = traffic::connect(
        to,
        &traffic::ClientOptions {
            connect_timeout: Some(Duration::from_secs(5)),
            ..Default::default()
        },
    );
    let mut s = s.map_err(|e| Error::io(format!("writer: connect to {to}"), e))?;
    s.set_write_timeout(Some(Duration::from_secs(2)))
        .map_err(|e| Error::io("writer: set timeout", e))?;
    let per_slice = (rate as f64 * SLICE.as_secs_f64()).max(1.0) as usize;
    let chunk = vec![b'w'; per_slice];
    let start = Instant::now();
    let (mut written, mut stall_us) = (0u64, 0u64);
    let mut next = start;
    while start.elapsed() < dur && !stop.load(Ordering::Relaxed) {
        let t = Instant::now();
        match s.write_all(&chunk) {
            Ok(()) => written += chunk.len() as u64,
            Err(e)
                if e.kind() == std::io::ErrorKind::WouldBlock
                    || e.kind() == std::io::ErrorKind::TimedOut => {}
            Err(e) => return Err(Error::io("writer: write", e)),
        }
        let took = t.elapsed();
        // Anything beyond 1 ms is the writer waiting for send-buffer space.
        if took > Duration::from_millis(1) {
            stall_us += took.as_micros() as u64;
        }
        next += SLICE;
        if let Some(wait) = next.checked_duration_since(Instant::now()) {
            std::thread::sleep(wait);
        } else {
            next = Instant::now();
        }
    }
    Ok((written, stall_us))
}

fn reader(l: std::net::TcpListener, rate: u64, dur: Duration, stop: &AtomicBool) -> Result<u64> {
    let deadline = Instant::now() + dur + Duration::from_secs(5);
    let mut s =
        traffic::accept_one(&l, stop, deadline).map_err(|e| Error::io("reader: accept", e))?;
    s.set_read_timeout(Some(Duration::from_millis(50)))
        .map_err(|e| Error::io("reader: set timeout", e))?;
    let per_tick = (rate as f64 * READER_TICK.as_secs_f64()).max(1.0) as usize;
    let mut buf = vec![0u8; 64 << 10];
    let mut read = 0u64;
    let start = Instant::now();
    // Paced while the writer writes, then drained to EOF so the close is clean.
    while !stop.load(Ordering::Relaxed) && Instant::now() < deadline {
        let paced = start.elapsed() < dur;
        let mut budget = if paced { per_tick } else { usize::MAX };
        while budget > 0 {
            let want = buf.len().min(budget);
            match s.read(&mut buf[..want]) {
                Ok(0) => return Ok(read),
                Ok(n) => {
                    read += n as u64;
                    budget -= n;
                }
                Err(e)
                    if e.kind() == std::io::ErrorKind::WouldBlock
                        || e.kind() == std::io::ErrorKind::TimedOut =>
                {
                    break
                }
                Err(e) => return Err(Error::io("reader: read", e)),
            }
        }
        if paced {
            std::thread::sleep(READER_TICK);
        }
    }
    Ok(read)
}

fn one(
    common: &Common,
    cfg: &Config,
    tag: &str,
    label: &str,
    dest: Option<&std::path::Path>,
    stop: &AtomicBool,
) -> Result<(Run, Vec<String>, Option<capture::CaptureSummary>)> {
    let pair = Pair::build(common, tag)?;
    let addr = pair.server_addr;
    let rcvbuf = cfg.reader_rcvbuf_bytes;
    // The listener carries SO_RCVBUF so the window is small from the handshake on.
    let listener = netns::run_in(&pair.server, move || {
        let s = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None)
            .map_err(|e| Error::io("reader: socket", e))?;
        s.set_reuse_address(true)
            .map_err(|e| Error::io("reader: SO_REUSEADDR", e))?;
        s.set_recv_buffer_size(rcvbuf)
            .map_err(|e| Error::io("reader: SO_RCVBUF", e))?;
        s.bind(&std::net::SocketAddr::V4(addr).into())
            .map_err(|e| Error::io(format!("reader: bind {addr}"), e))?;
        s.listen(4).map_err(|e| Error::io("reader: listen", e))?;
        Ok(std::net::TcpListener::from(s))
    })?;
    let name = if tag.is_empty() { "slowreader" } else { tag };
    let cap = capture::Capture::start(&pair.client, &pair.client_if, name, dest, "tcp")?;
    let r_before = netns::counters(&pair.server)?;
    let w_before = netns::counters(&pair.client)?;
    let dur = Duration::from_millis(cfg.duration_ms);
    let inner = Arc::new(AtomicBool::new(false));
    let (f1, f2) = (Arc::clone(&inner), Arc::clone(&inner));
    let rrate = cfg.reader_rate_bytes_per_s;
    let wrate = cfg.writer_rate_bytes_per_s;
    let rd = netns::spawn(&pair.server, "tdoc-reader", move || {
        reader(listener, rrate, dur, &f1)
    })?;
    let wr = netns::spawn(&pair.client, "tdoc-writer", move || {
        writer(addr, wrate, dur, &f2)
    })?;
    while !(wr.is_finished() && rd.is_finished()) {
        if stop.load(Ordering::Relaxed) {
            inner.store(true, Ordering::Relaxed);
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let w = wr.join();
    let r = rd.join();
    let saved = cap.stop();
    let (written, stall_us) = w?;
    let read = r?;
    let saved = saved?;
    let reader_counters = netns::counters(&pair.server)?.delta_since(&r_before).tcp();
    let writer_counters = netns::counters(&pair.client)?.delta_since(&w_before).tcp();
    let (mut findings, _) = diagnose::capture(saved.path())?;
    diagnose::merge(
        &mut findings,
        tcpdoctor_model::counters::findings(
            &reader_counters,
            tcpdoctor_model::counters::Window {
                length: Some(std::time::Duration::from_millis(cfg.duration_ms)),
                rto_floor: Some(netns::rto_floor(&pair.server, pair.client_addr())?),
            },
        ),
    );
    let run = Run {
        label: label.to_string(),
        reader_rcvbuf_bytes: cfg.reader_rcvbuf_bytes,
        reader_rate_bytes_per_s: cfg.reader_rate_bytes_per_s,
        bytes_written: written,
        bytes_read: read,
        writer_stall_us: stall_us,
        writer_stall_share: stall_us as f64 / dur.as_micros() as f64,
        zero_window_advertisements: reader_counters
            .get("TcpExtTCPToZeroWindowAdv")
            .copied()
            .unwrap_or(0),
        reader_counters,
        writer_counters,
        findings,
    };
    Ok((run, pair.lab.namespaces().to_vec(), saved.kept()))
}

pub fn run(common: &Common, cfg: &Config, stop: &AtomicBool) -> Result<Outcome<Report>> {
    let r = one(
        common,
        cfg,
        "",
        "before: slow reader, small buffer",
        common.pcap.as_deref(),
        stop,
    );
    let (before, mut namespaces, capture) = r?;
    let after = if common.fix {
        let fixed = Config {
            reader_rcvbuf_bytes: (cfg.reader_rcvbuf_bytes * 64).max(1 << 20),
            reader_rate_bytes_per_s: cfg.reader_rate_bytes_per_s * 10,
            ..cfg.clone()
        };
        let r = one(
            common,
            &fixed,
            "fx",
            "after: 64x buffer, reader 10x faster",
            None,
            stop,
        );
        let (r, ns, _) = r?;
        namespaces.extend(ns);
        Some(r)
    } else {
        None
    };
    let remedies: Vec<Check> = after
        .iter()
        .map(|a| {
            remedy::judge(
                &a.label,
                tcpdoctor_model::Pathology::SlowReader,
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
        findings: before.findings.clone(),
        body: Report {
            header: Header {
                scenario: "slow-reader",
                run_id: std::process::id(),
                subnet: common.subnet.to_string(),
                namespaces,
                capture,
                diagnosed_by: vec![
                    "analyze: detectors on a capture of the writer's interface".into(),
                    "model::counters findings (reader namespace counters)".into(),
                ],
            },
            config: cfg.clone(),
            before,
            after,
            remedies,
        },
        interrupted: stop.load(Ordering::Relaxed),
    })
}
