//! `slow-reader`: a writer (client namespace) sends at `writer_rate` to a reader (server
//! namespace) that drains its small receive buffer at only `reader_rate` (file 002). The
//! receive window closes (zero-window advertisements, counted by the reader's kernel as
//! `TcpExtTCPToZeroWindowAdv`), the writer's send buffer fills and its writes block. `--fix`
//! lets the reader take data as it arrives (the remedy `faster-reader`).
//!
//! Diagnosis: `analyze`'s detectors on a capture of the writer's interface, and the counter
//! findings (`model::counters`) of the reader's namespace.

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::SocketAddrV4;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use tcpdoctor_model::remedy::{self, Check, Harm, Measured, Prediction, Tolerance, Verdict};
use tcpdoctor_model::reproduce::{Event, Reproduction};
use tcpdoctor_model::{Finding, Pathology};

use super::driver::{self, Ran, Remedy, Scenario, Tail};
use super::harness::{self, Pair};
use super::Common;
use crate::{Error, Result};
use tcpdoctor_sandbox::{capture, netns, traffic};

#[derive(Clone, Debug, Serialize, Deserialize)]
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

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Run {
    pub label: String,
    pub reader_rcvbuf_bytes: usize,
    pub reader_rate_bytes_per_s: u64,
    /// How often the reader woke up to read.
    pub reader_tick_us: u64,
    pub writer: WriterMode,
    /// Bytes the non-blocking writer dropped at its bound (0 when blocking).
    pub bytes_dropped_by_writer: u64,
    /// The maximum of the writer namespace's net.ipv4.tcp_wmem (send buffer autotuning).
    pub writer_wmem_max_bytes: u64,
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
    /// Findings of this run (analyze on the capture, counter findings, the trace's).
    pub findings: Vec<Finding>,
    /// What the eBPF trace saw in this run (in the scenario header's `trace.runs`).
    #[serde(skip)]
    pub trace: tcpdoctor_trace::run::RunTrace,
}

/// A plain run's report: the baseline.
pub type Report = super::Plain<Config, Run>;

impl Run {
    fn measured(&self, value: f64) -> tcpdoctor_model::remedy::Measured {
        let mib = |b: u64| b as f64 / (1u64 << 20) as f64;
        tcpdoctor_model::remedy::Measured {
            text: format!(
                "wrote {:.1} MiB, read {:.1} MiB; writer blocked {:.0}% ({:.0} ms); {} zero windows{}",
                mib(self.bytes_written),
                mib(self.bytes_read),
                self.writer_stall_share * 100.0,
                self.writer_stall_us as f64 / 1e3,
                self.zero_window_advertisements,
                if self.bytes_dropped_by_writer > 0 {
                    format!("; {:.1} MiB dropped at the writer's bound", mib(self.bytes_dropped_by_writer))
                } else {
                    String::new()
                }
            ),
            value: Some(value),
        }
    }
}

/// The application queue of the `writer-backpressure` remedy.
pub const BACKPRESSURE_BOUND: u64 = 256 << 10;

fn kib(b: f64) -> f64 {
    b / 1024.0
}

fn mib(b: f64) -> f64 {
    b / (1u64 << 20) as f64
}

/// The slow reader as `--remedies` drives it.
pub struct SlowReader(pub Config);

impl SlowReader {
    /// The writer's rate, the reader's rate (bytes/s) and the run's length (s).
    fn rates(&self) -> (f64, f64, f64) {
        let cfg = &self.0;
        (
            cfg.writer_rate_bytes_per_s as f64,
            cfg.reader_rate_bytes_per_s as f64,
            cfg.duration_ms as f64 / 1000.0,
        )
    }

    /// With a reader at `r` bytes/s and a `window`: the time to fill the window at the
    /// difference of the rates (s), then the share of the run the writer is blocked (the
    /// share the reader cannot take).
    fn blocked(&self, r: f64, window: f64) -> (f64, f64) {
        let (w, _, d) = self.rates();
        if r >= w {
            return (f64::INFINITY, 0.0);
        }
        let fill = window / (w - r);
        (fill, (1.0 - r / w) * ((d - fill).max(0.0) / d))
    }

    fn larger_buffer(&self, wmem_max: u64) -> Remedy<Variant> {
        let cfg = &self.0;
        let (w, r, d) = self.rates();
        let b = (cfg.reader_rcvbuf_bytes * 64).max(1 << 20);
        // Before the writer blocks, the receive queue (the window asked for, up to the
        // doubled SO_RCVBUF) and the writer's send buffer (autotuned up to tcp_wmem's
        // maximum) fill: a range.
        let (fill, high) = self.blocked(r, b as f64);
        let (fill_max, low) = self.blocked(r, 2.0 * b as f64 + wmem_max as f64);
        let share = (high + low) / 2.0;
        Remedy::new(
            format!("SO_RCVBUF {:.0} KiB", kib(b as f64)),
            Variant {
                rcvbuf_bytes: b,
                ..Variant::baseline(cfg)
            },
            Prediction::value(
                format!(
                    "reader {:.1} < writer {:.1} MiB/s: the buffers fill at {:.1} MiB/s in {fill:.2} s ({:.0} KiB window) to {fill_max:.2} s (2 x {:.0} KiB receive memory + {:.1} MiB tcp_wmem max send buffer), then the writer is blocked (1 - {:.1}/{:.1}) of the time: {:.0}-{:.0}% of {d:.0} s",
                    mib(r), mib(w), mib(w - r), kib(b as f64), kib(b as f64), mib(wmem_max as f64), mib(r), mib(w), low * 100.0, high * 100.0
                ),
                "the stall starts later; the writer is still held to the reader's rate",
                share * 100.0,
                "% blocked",
                Tolerance::Absolute(((high - low) / 2.0 * 100.0).max(5.0)),
                "how far the writer's send buffer autotunes (range above); 10 ms writer slices",
            ),
            format!("the reader's SO_RCVBUF = {:.0} KiB (64x, at least 1 MiB)", kib(b as f64)),
        )
    }

    fn faster_reader(&self) -> Remedy<Variant> {
        let cfg = &self.0;
        let (w, _, _) = self.rates();
        Remedy::new(
            "reader takes data as it arrives",
            Variant {
                reader_rate_bytes_per_s: u64::MAX,
                reader_tick: Duration::ZERO,
                ..Variant::baseline(cfg)
            },
            Prediction::value(
                format!(
                    "a reader blocked in read() takes each segment as it arrives, at memory speed (GiB/s) >= writer {:.1} MiB/s; {:.1} MiB/s x 10 ms = {:.0} KiB per writer slice, within reach of the {:.0} KiB window as long as the reader runs within a fraction of a slice",
                    mib(w), mib(w), kib(w * 0.01), kib(cfg.reader_rcvbuf_bytes as f64)
                ),
                "the window stays open; the writer is never blocked",
                0.0,
                "% blocked",
                Tolerance::Absolute(5.0),
                "the reader thread shares 2 CPUs with the writer and the kernel; a late wake-up can close the window for a moment",
            ),
            format!("the reader reads as soon as data arrives (blocking read, no pacing; same {:.0} KiB buffer)", kib(cfg.reader_rcvbuf_bytes as f64)),
        )
    }

    fn writer_backpressure(&self) -> Remedy<Variant> {
        let cfg = &self.0;
        let (w, r, d) = self.rates();
        let window = cfg.reader_rcvbuf_bytes as f64;
        // The kernel takes what the reader reads plus the window and the writer's own send
        // buffer; the application queue holds the bound.
        let dropped = ((w - r) * d - window - BACKPRESSURE_BOUND as f64).max(0.0);
        Remedy::new(
            format!(
                    "non-blocking writer, {:.0} KiB bound",
                    kib(BACKPRESSURE_BOUND as f64)
                ),
            Variant {
                writer: WriterMode::NonBlocking {
                    bound_bytes: BACKPRESSURE_BOUND,
                },
                ..Variant::baseline(cfg)
            },
            Prediction::value(
                format!(
                    "the writer never waits; it can hand over only what the reader takes, so it drops ({:.1} - {:.1} MiB/s) x {d:.0} s - {:.0} KiB window - {:.0} KiB bound = {:.1} MiB (less the kernel's send buffer)",
                    mib(w), mib(r), kib(window), kib(BACKPRESSURE_BOUND as f64), mib(dropped)
                ),
                "the writer thread stays free; the data the reader cannot take is dropped, and the window still closes",
                mib(dropped),
                "MiB dropped",
                Tolerance::Relative(0.25),
                "the kernel's send buffer (tcp_wmem, autotuned) also absorbs a share, up to a few MiB",
            ),
            format!(
                "the writer uses O_NONBLOCK and an application queue of {:.0} KiB; slices that do not fit are dropped and counted",
                kib(BACKPRESSURE_BOUND as f64)
            ),
        )
    }
}

impl Scenario for SlowReader {
    type Config = Config;
    type Run = Run;
    type Variant = Variant;
    type Facts = super::NoFacts;
    const NAME: &'static str = "slow-reader";
    const PATHOLOGY: Pathology = Pathology::SlowReader;
    const DIAGNOSED_BY: &'static [&'static str] = &[
        "analyze's detectors on a capture of the writer's interface",
        "the kernel counters of the reader's namespace",
    ];
    const REMEDIES: &'static [&'static str] =
        &["larger-buffer", "faster-reader", "writer-backpressure"];
    const FIX: &'static [&'static str] = &["faster-reader"];

    fn config(&self) -> &Config {
        &self.0
    }

    fn baseline(&self) -> (String, Variant) {
        let label = "before: slow reader, small buffer";
        (label.into(), Variant::baseline(&self.0))
    }

    fn run(
        &mut self,
        common: &Common,
        tag: &'static str,
        label: &str,
        v: &Variant,
        stop: &AtomicBool,
    ) -> Result<Ran<Run>> {
        let (cfg, dest) = (&self.0, super::driver::baseline_pcap(common, tag));
        let pair = Pair::build(common, tag)?;
        let addr = pair.server_addr;
        let rcvbuf = v.rcvbuf_bytes;
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
        let wmem_max = netns::sysctl_text(&pair.client, "net.ipv4.tcp_wmem")?
            .split_whitespace()
            .nth(2)
            .and_then(|v| v.parse().ok())
            .unwrap_or(4 << 20);
        let dur = Duration::from_millis(cfg.duration_ms);
        let (rrate, tick) = (v.reader_rate_bytes_per_s, v.reader_tick);
        let (wrate, wmode) = (cfg.writer_rate_bytes_per_s, v.writer);
        let m = pair.measure(label, || {
            let inner = Arc::new(AtomicBool::new(false));
            let (f1, f2) = (Arc::clone(&inner), Arc::clone(&inner));
            let rd = netns::spawn(&pair.server, "tdoc-reader", move || {
                reader(listener, rrate, tick, dur, &f1)
            })?;
            let wr = netns::spawn(&pair.client, "tdoc-writer", move || {
                writer(addr, wrate, dur, wmode, &f2)
            })?;
            netns::wait(|| wr.is_finished() && rd.is_finished(), stop, &inner);
            let w = wr.join();
            let r = rd.join();
            let saved = cap.stop();
            Ok((w?, r?, saved?))
        })?;
        let ((w, read, saved), trace) = (m.out, m.trace);
        let (written, stall_us) = (w.bytes, w.stall_us);
        let (reader_counters, writer_counters) = (m.server, m.client);
        let mut findings = harness::analyze_capture(saved.path())?;
        let window = tcpdoctor_model::counters::Window {
            length: Some(std::time::Duration::from_millis(cfg.duration_ms)),
            rto_floor: Some(netns::rto_floor(&pair.server, pair.client_addr())?),
        };
        tcpdoctor_trace::reconcile::merge_counted_and_traced(
            &mut findings,
            tcpdoctor_model::counters::findings(&reader_counters, window),
            &reader_counters,
            window,
            &trace,
        );
        let run = Run {
            label: label.to_string(),
            reader_rcvbuf_bytes: v.rcvbuf_bytes,
            reader_rate_bytes_per_s: v.reader_rate_bytes_per_s,
            reader_tick_us: v.reader_tick.as_micros() as u64,
            writer: v.writer,
            bytes_dropped_by_writer: w.dropped,
            writer_wmem_max_bytes: wmem_max,
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
            trace,
        };
        Ok(pair.ran(run, saved.kept()))
    }

    /// The harm: the share of the run the writer spent blocked in write() waiting for the
    /// reader (the window it closed: `TcpExtTCPToZeroWindowAdv` counts how often).
    fn harm(&self, run: &Run) -> Harm {
        Harm::share(run.writer_stall_share, "of the run the writer was blocked")
    }

    /// Whether a run reproduced the slow reader: the reader's kernel advertised a zero window
    /// (`TcpExtTCPToZeroWindowAdv`; also as the eBPF trace saw it); the cost is the time the
    /// writer spent blocked.
    fn reproduction(&self, run: &Run) -> Reproduction {
        let mut signature = vec![Event::new(
            run.zero_window_advertisements.max(0) as u64,
            "zero-window advertisements",
            "reader TcpExtTCPToZeroWindowAdv",
        )];
        if let Some(h) = run.trace.harm(Pathology::SlowReader) {
            signature.push(Event::new(h.amount as u64, h.what, "eBPF trace"));
        }
        Reproduction::of(
            &run.label,
            Pathology::SlowReader,
            signature,
            tcpdoctor_model::reproduce::Tried::new(
                run.bytes_written,
                "bytes written",
                self.0.duration_ms,
            ),
            || {
                Some(format!(
                    "the writer was blocked {} ({:.0}% of the run){}",
                    tcpdoctor_report::fmt::micros(run.writer_stall_us),
                    run.writer_stall_share * 100.0,
                    if run.bytes_dropped_by_writer > 0 {
                        format!(
                            " and dropped {} at its bound",
                            tcpdoctor_report::fmt::bytes(run.bytes_dropped_by_writer)
                        )
                    } else {
                        String::new()
                    }
                ))
            },
            None,
        )
    }

    fn remedy(&mut self, name: &str, base: &Run) -> Result<Remedy<Variant>> {
        Ok(match name {
            // tcp_wmem's maximum: how far the writer's send buffer may autotune.
            "larger-buffer" => self.larger_buffer(base.writer_wmem_max_bytes),
            "faster-reader" => self.faster_reader(),
            "writer-backpressure" => self.writer_backpressure(),
            other => return Err(driver::unknown(other, "a slow-reader")),
        })
    }

    fn measured(&self, name: &str, run: &Run, _base: &Run) -> Measured {
        run.measured(match name {
            "writer-backpressure" => mib(run.bytes_dropped_by_writer as f64),
            _ => run.writer_stall_share * 100.0,
        })
    }

    fn override_verdict(
        &self,
        name: &str,
        _variant: &Variant,
        _check: &Check,
        run: &Run,
        base: &Run,
    ) -> Option<(Verdict, String)> {
        let (_, r, _) = self.rates();
        (name == "writer-backpressure").then(|| {
            if run.bytes_dropped_by_writer > 0 || run.zero_window_advertisements > 0 {
                (
                    Verdict::Partial,
                    format!(
                        "the writer was blocked {:.0}% of the time (baseline {:.0}%), but {:.1} MiB were dropped at its bound and the window closed {} times: the reader still limits the stream to {:.1} MiB/s",
                        run.writer_stall_share * 100.0,
                        base.writer_stall_share * 100.0,
                        mib(run.bytes_dropped_by_writer as f64),
                        run.zero_window_advertisements,
                        mib(r)
                    ),
                )
            } else {
                (
                    Verdict::Works,
                    "the writer never blocked and dropped nothing".to_string(),
                )
            }
        })
    }

    fn tail(&self, base: &Run, _rows: &[remedy::Row<Run>]) -> Tail<super::NoFacts> {
        let cfg = &self.0;
        let (w, r, d) = self.rates();
        let tick = READER_TICK.as_secs_f64();
        let (fill, share) = self.blocked(r, cfg.reader_rcvbuf_bytes as f64);
        let notes = vec![
            format!(
                "The writer offers {:.1} MiB/s in 10 ms slices; the reader wakes every {:.0} ms and takes at most {:.1} MiB/s; SO_RCVBUF {:.0} KiB (the kernel doubles it for its bookkeeping, socket(7); the window offered is about the size asked for).",
                mib(w),
                tick * 1e3,
                mib(r),
                kib(cfg.reader_rcvbuf_bytes as f64)
            ),
            "The window stays open when the reader keeps up on average (reader rate >= writer rate) and between two wake-ups (writer rate x wake-up interval <= window); otherwise it closes and a blocking writer waits for the share 1 - reader/writer of the time.".to_string(),
            format!(
                "Baseline predicted: the {:.0} KiB window fills in {:.3} s, then the writer is blocked {:.0}% of the time; measured {:.0}%.",
                kib(cfg.reader_rcvbuf_bytes as f64),
                fill,
                share * 100.0,
                base.writer_stall_share * 100.0
            ),
        ];
        let baseline_label = format!(
            "writer {:.1} MiB/s, reader {:.1} MiB/s every {:.0} ms, reader SO_RCVBUF {:.0} KiB, blocking writes, {d:.0} s",
            mib(w),
            mib(r),
            tick * 1e3,
            kib(cfg.reader_rcvbuf_bytes as f64)
        );
        Tail::new(baseline_label, notes)
    }
}

/// The writer paces itself in slices of this length.
const SLICE: Duration = Duration::from_millis(10);

/// The reader wakes this often and reads at most rate x this, like an application that
/// handles a batch per tick; between ticks its buffer fills and the window closes.
const READER_TICK: Duration = Duration::from_millis(100);

/// How the writer handles a full send buffer.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum WriterMode {
    /// Blocking write(): the writer waits for the reader.
    Blocking,
    /// Non-blocking write() with an application queue of at most `bound_bytes`: what does
    /// not fit is dropped (counted), and the writer never waits.
    NonBlocking { bound_bytes: u64 },
}

/// What the writer did: bytes accepted by the kernel, time blocked beyond its pacing, bytes
/// dropped at its bound (non-blocking mode).
struct Written {
    bytes: u64,
    stall_us: u64,
    dropped: u64,
}

fn writer(
    to: SocketAddrV4,
    rate: u64,
    dur: Duration,
    mode: WriterMode,
    stop: &AtomicBool,
) -> Result<Written> {
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
    if let WriterMode::NonBlocking { .. } = mode {
        s.set_nonblocking(true)
            .map_err(|e| Error::io("writer: O_NONBLOCK", e))?;
    }
    let per_slice = (rate as f64 * SLICE.as_secs_f64()).max(1.0) as usize;
    let chunk = vec![b'w'; per_slice];
    let start = Instant::now();
    let (mut written, mut stall_us, mut dropped) = (0u64, 0u64, 0u64);
    // Non-blocking mode: bytes accepted by the application but not yet by the kernel.
    let mut pending = 0u64;
    let mut next = start;
    while start.elapsed() < dur && !stop.load(Ordering::Relaxed) {
        let t = Instant::now();
        match mode {
            WriterMode::Blocking => match s.write_all(&chunk) {
                Ok(()) => written += chunk.len() as u64,
                Err(e)
                    if e.kind() == std::io::ErrorKind::WouldBlock
                        || e.kind() == std::io::ErrorKind::TimedOut => {}
                Err(e) => return Err(Error::io("writer: write", e)),
            },
            WriterMode::NonBlocking { bound_bytes } => {
                if pending + chunk.len() as u64 <= bound_bytes {
                    pending += chunk.len() as u64;
                } else {
                    dropped += chunk.len() as u64;
                }
                while pending > 0 {
                    let n = pending.min(chunk.len() as u64) as usize;
                    match s.write(&chunk[..n]) {
                        Ok(0) => break,
                        Ok(k) => {
                            written += k as u64;
                            pending -= k as u64;
                        }
                        Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
                        Err(e) => return Err(Error::io("writer: write", e)),
                    }
                }
            }
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
    // What the application still held when the run ended never reached the kernel.
    dropped += pending;
    Ok(Written {
        bytes: written,
        stall_us,
        dropped,
    })
}

fn reader(
    l: std::net::TcpListener,
    rate: u64,
    tick: Duration,
    dur: Duration,
    stop: &AtomicBool,
) -> Result<u64> {
    let deadline = Instant::now() + dur + Duration::from_secs(5);
    let mut s =
        traffic::accept_one(&l, stop, deadline).map_err(|e| Error::io("reader: accept", e))?;
    s.set_read_timeout(Some(Duration::from_millis(50)))
        .map_err(|e| Error::io("reader: set timeout", e))?;
    let per_tick = (rate as f64 * tick.as_secs_f64()).max(1.0) as usize;
    let mut buf = vec![0u8; 64 << 10];
    let mut read = 0u64;
    let start = Instant::now();
    // Paced while the writer writes, then drained to EOF so the close is clean.
    while !stop.load(Ordering::Relaxed) && Instant::now() < deadline {
        // A zero tick: the reader takes data as it arrives (blocking reads, no pacing).
        let paced = start.elapsed() < dur && !tick.is_zero();
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
            std::thread::sleep(tick);
        }
    }
    Ok(read)
}

/// One writer/reader pair as run: the baseline or a remedy.
#[derive(Clone, Debug)]
pub struct Variant {
    pub rcvbuf_bytes: usize,
    pub reader_rate_bytes_per_s: u64,
    /// How often the reader wakes up to read.
    pub reader_tick: Duration,
    pub writer: WriterMode,
}

impl Variant {
    pub fn baseline(cfg: &Config) -> Variant {
        Variant {
            rcvbuf_bytes: cfg.reader_rcvbuf_bytes,
            reader_rate_bytes_per_s: cfg.reader_rate_bytes_per_s,
            reader_tick: READER_TICK,
            writer: WriterMode::Blocking,
        }
    }
}
