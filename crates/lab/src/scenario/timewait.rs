//! `timewait-collision`: a client reconnects from one fixed source port to a server that closed
//! first and so holds the previous connection in TIME_WAIT (file 000). The client uploads a
//! large request each time, so its sequence numbers run ahead of the clock-driven initial
//! sequence number of the next connection (RFC 6528: the ISN advances with a ~4 us clock,
//! here 64 ns per step, `secure_tcp_seq` in net/core/secure_seq.c). With timestamps off the
//! server cannot tell the new SYN from an old duplicate (`tcp_timewait_state_process`,
//! net/ipv4/tcp_minisocks.c): it answers with an ACK of the old connection, the client resets
//! that, and the SYN waits for its 1 s retransmission. With `--rfc1337`
//! (`net.ipv4.tcp_rfc1337=1`) the server ignores the reset and the connect stalls for seconds.
//! `--fix`: timestamps on (the remedy `timestamps`), in fresh namespaces.
//!
//! Measured by the lab's own client loop (the port bound with SO_REUSEADDR); diagnosed by
//! `analyze`'s detectors on a capture of the client's interface and by the client's counters.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use tcpdoctor_model::remedy::{self, Check, Harm, Measured, Prediction, Verdict};
use tcpdoctor_model::reproduce::{Event, Reproduction};
use tcpdoctor_model::{Finding, Pathology};
use tcpdoctor_probe::server::{Protocol, ServerConfig};
use tcpdoctor_probe::CloseFirst;

use super::driver::{self, Ran, Remedy, Scenario, Tail};
use super::harness::{self, Pair};
use super::Common;
use crate::Result;
use tcpdoctor_sandbox::traffic::{self, ConnRecord, Outcome as ConnOutcome};
use tcpdoctor_sandbox::{capture, netns};

/// Gap between reconnects of the baseline (and of the remedies), milliseconds.
pub const BEFORE_GAP_MS: u64 = 20;

/// The client's fixed source port: below `ip_local_port_range`, so no other socket takes it.
pub const CLIENT_PORT: u16 = 20001;

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Config {
    /// Connections, each from the same source port.
    pub connections: u64,
    /// Bytes the client sends per connection.
    pub request_bytes: usize,
    pub rfc1337: bool,
    /// Gap between reconnects of the fixed run before `--fix` was the `timestamps` remedy
    /// (which keeps the baseline's gap): unused, kept in the JSON of a plain run.
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

/// A plain run's report: the baseline.
pub type Report = super::Plain<Config, Run>;

impl Run {
    /// `TcpExtTCPSynRetrans` of the client namespace.
    pub fn syn_resends(&self) -> u64 {
        self.client_counters
            .get("TcpExtTCPSynRetrans")
            .copied()
            .unwrap_or(0)
            .max(0) as u64
    }

    /// The connections that did not complete.
    pub fn failures(&self) -> impl Iterator<Item = &ConnRecord> {
        self.connections
            .iter()
            .filter(|c| c.outcome != ConnOutcome::Ok)
    }

    /// How many connections did not complete.
    pub fn failed(&self) -> u64 {
        self.failures().count() as u64
    }

    fn measured(&self, value: f64) -> tcpdoctor_model::remedy::Measured {
        let mut errors: Vec<&str> = self.failures().map(|c| c.outcome.name()).collect();
        errors.dedup();
        tcpdoctor_model::remedy::Measured {
            text: format!(
                "{} connections: {} SYN resends, {} failed{}; longest connect {:.1} ms",
                self.connections.len(),
                self.syn_resends(),
                self.failed(),
                if errors.is_empty() {
                    String::new()
                } else {
                    format!(" ({})", errors.join(", "))
                },
                self.connect_max_us as f64 / 1e3
            ),
            value: Some(value),
        }
    }
}

/// One run: the lab's own client loop (connect from the fixed port with SO_REUSEADDR, upload,
/// read the reply to EOF, close, wait the gap), timed per connection.
#[derive(Clone, Debug, Serialize, Deserialize)]
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
    /// Findings of this run (analyze on the capture, counter findings, the trace's).
    pub findings: Vec<Finding>,
    /// What the eBPF trace saw in this run (in the scenario header's `trace.runs`).
    #[serde(skip)]
    pub trace: tcpdoctor_trace::run::RunTrace,
}

/// A connect slower than this waited for a timer, not for the path: the lab's veth round trip
/// is well under 1 ms, and the smallest SYN timer is the 1 s initial RTO (RFC 6298 2.1);
/// a quick resend after a reset shows up as a few ms.
pub const SLOW_CONNECT: Duration = Duration::from_millis(100);

/// How the client and server of one run behave: the baseline or a remedy.
#[derive(Clone, Debug)]
pub struct Variant {
    /// net.ipv4.tcp_timestamps at both ends.
    pub timestamps: bool,
    /// net.ipv4.tcp_rfc1337 of the server.
    pub rfc1337: bool,
    /// Pause between a connection's end and the next connect.
    pub gap: Duration,
    /// Connect from [`CLIENT_PORT`] every time (else a new ephemeral port each time).
    pub fixed_port: bool,
    pub close_first: CloseFirst,
    /// The client gives up a connect after this long.
    pub connect_timeout: Duration,
}

impl Variant {
    /// The baseline: timestamps off, one fixed source port, the server closes first.
    pub fn baseline(cfg: &Config) -> Variant {
        Variant {
            timestamps: false,
            rfc1337: cfg.rfc1337,
            gap: Duration::from_millis(BEFORE_GAP_MS),
            fixed_port: true,
            close_first: CloseFirst::Server,
            connect_timeout: Duration::from_secs(15),
        }
    }
}

/// Bytes the server answers each request with.
const REPLY_BYTES: usize = 64;

fn client_loop(
    server: std::net::SocketAddrV4,
    bind: std::net::SocketAddrV4,
    cfg: &Config,
    v: &Variant,
    stop: &AtomicBool,
) -> Result<Vec<ConnRecord>> {
    use std::io::{Read, Write};
    let origin = Instant::now();
    let mut out = Vec::new();
    let payload = vec![b'q'; 64 << 10];
    let opts = traffic::ClientOptions {
        bind: v.fixed_port.then_some(bind),
        connect_timeout: Some(v.connect_timeout),
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
            local_port: if v.fixed_port { bind.port() } else { 0 },
            outcome: ConnOutcome::Ok,
        };
        match r {
            Ok(mut s) => {
                if let Ok(a) = s.local_addr() {
                    rec.local_port = a.port();
                }
                let io = traffic::write_bytes(&mut s, cfg.request_bytes as u64, &payload).and_then(
                    |_| {
                        s.set_read_timeout(Some(Duration::from_secs(10)))?;
                        match v.close_first {
                            // Wait for the server's FIN: it closes first.
                            CloseFirst::Server => {
                                let mut buf = [0u8; 4096];
                                while s.read(&mut buf)? > 0 {}
                            }
                            // Take the reply and close first.
                            CloseFirst::Client => {
                                let mut buf = [0u8; REPLY_BYTES];
                                s.read_exact(&mut buf)?;
                            }
                        }
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
        std::thread::sleep(v.gap);
    }
    Ok(out)
}

/// One step of the clock-driven initial sequence number: `secure_tcp_seq`
/// (net/core/secure_seq.c) adds `ktime_get_real_ns() >> 6`, one step per 64 ns, to a hash of
/// the 4-tuple that stays the same when the 4-tuple is reused.
pub const ISN_TICK_NS: u64 = 64;

/// Whether a SYN sent `since` after the previous connection's SYN on the same 4-tuple meets
/// that connection's TIME_WAIT as an old duplicate (timestamps off): its ISN has advanced
/// `since / 64 ns` steps, and TIME_WAIT takes a SYN only above the old connection's last
/// sequence number, `bytes` (+ SYN and FIN) past the old ISN (`tcp_timewait_state_process`,
/// net/ipv4/tcp_minisocks.c).
pub fn collides(since: Duration, bytes: u64) -> bool {
    (since.as_nanos() as u64) / ISN_TICK_NS <= bytes + 2
}

/// Reconnects that fail with `tcp_rfc1337=1` and timestamps off: a colliding SYN is answered
/// by the old ACK on every retransmission, so the connect waits out `timeout`; a reconnect
/// late enough for the ISN clock to have passed the last completed connection's sequence
/// numbers is accepted. `conn` is how long a completed connection takes.
pub fn rfc1337_failures(
    connections: u64,
    conn: Duration,
    gap: Duration,
    timeout: Duration,
    bytes: u64,
) -> u64 {
    let (mut t, mut last_ok, mut failed) = (Duration::ZERO, Duration::ZERO, 0);
    t += conn + gap;
    for _ in 1..connections {
        if collides(t - last_ok, bytes) {
            failed += 1;
            t += timeout + gap;
        } else {
            last_ok = t;
            t += conn + gap;
        }
    }
    failed
}

/// Connect timeout of the `tcp_rfc1337=1` run: a SYN that keeps meeting the old ACK waits
/// for the SYN ladder (1, 2, 3 s...) until TIME_WAIT ends, so the run stops waiting here.
pub const RFC1337_CONNECT_TIMEOUT: Duration = Duration::from_secs(3);

/// The TIME_WAIT collision as `--remedies` drives it.
pub struct Timewait(pub Config);

/// What the baseline's measurement predicts: `n` connections of `conn` each (the median of
/// those that completed), `gap` apart, each uploading `bytes`.
struct Model {
    n: u64,
    conn: Duration,
    gap: Duration,
    bytes: u64,
    /// How long after a SYN the ISN clock has not yet passed the old sequence numbers.
    window: Duration,
    /// Reconnects that meet the old TIME_WAIT.
    reuses: u64,
    /// Reconnects that fail with tcp_rfc1337=1.
    rfc_failures: u64,
}

impl Timewait {
    fn model(&self, base: &Run) -> Model {
        let gap = Variant::baseline(&self.0).gap;
        let n = base.connections.len() as u64;
        let bytes = self.0.request_bytes as u64;
        let mut ok_us: Vec<u64> = base
            .connections
            .iter()
            .filter(|c| c.outcome == ConnOutcome::Ok)
            .map(|c| c.total_us)
            .collect();
        ok_us.sort_unstable();
        let conn = Duration::from_micros(ok_us.get(ok_us.len() / 2).copied().unwrap_or(0));
        // Reconnects that meet the old TIME_WAIT: each comes one connection plus the gap
        // after the previous SYN, before the ISN clock passes the old sequence numbers.
        let reuses = if collides(conn + gap, bytes) {
            n.saturating_sub(1)
        } else {
            0
        };
        Model {
            n,
            conn,
            gap,
            bytes,
            window: Duration::from_nanos((bytes + 2) * ISN_TICK_NS),
            reuses,
            rfc_failures: rfc1337_failures(n, conn, gap, RFC1337_CONNECT_TIMEOUT, bytes),
        }
    }

    /// Whether remedy `name` is the contrast run: the baseline already has tcp_rfc1337=0.
    fn contrast(&self, name: &str) -> bool {
        name == "rfc1337-off" && !self.0.rfc1337
    }
}

/// A prediction of `value` SYN resends and failed connects, exact.
fn resends(formula: String, effect: &str, value: f64) -> Prediction {
    Prediction::count(formula, effect, value, "SYN resends and failed connects")
}

impl Scenario for Timewait {
    type Config = Config;
    type Run = Run;
    type Variant = Variant;
    type Facts = super::NoFacts;
    const NAME: &'static str = "timewait-collision";
    const PATHOLOGY: Pathology = Pathology::TimeWaitCollision;
    const DIAGNOSED_BY: &'static [&'static str] = &[
        "analyze's detectors on a capture of the client's interface",
        "the kernel counters of the client's namespace",
    ];
    const REMEDIES: &'static [&'static str] = &[
        "timestamps",
        "rfc1337-off",
        "ephemeral-port",
        "client-closes-first",
    ];
    const FIX: &'static [&'static str] = &["timestamps"];

    fn config(&self) -> &Config {
        &self.0
    }

    fn baseline(&self) -> (String, Variant) {
        let label = match self.0.rfc1337 {
            true => "before: timestamps off, tcp_rfc1337=1",
            false => "before: timestamps off",
        };
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
        let ts = if v.timestamps { "1" } else { "0" };
        for ns in [&pair.client, &pair.server] {
            pair.lab.sysctl(ns, "net.ipv4.tcp_timestamps", ts)?;
        }
        pair.lab.sysctl(
            &pair.server,
            "net.ipv4.tcp_rfc1337",
            if v.rfc1337 { "1" } else { "0" },
        )?;
        let mut scfg = ServerConfig::new(
            pair.server_addr.into(),
            Protocol::Tcp {
                request_bytes: cfg.request_bytes,
                reply_bytes: REPLY_BYTES,
            },
        );
        scfg.close_first = v.close_first;
        scfg.threads = 2;
        let server = pair.serve(scfg)?;
        let name = if tag.is_empty() { "timewait" } else { tag };
        let cap = capture::Capture::start(&pair.client, &pair.client_if, name, dest, "tcp")?;
        let (to, bind) = (
            pair.server_addr,
            std::net::SocketAddrV4::new(common.subnet.host(1), CLIENT_PORT),
        );
        let (c2, v2) = (cfg.clone(), v.clone());
        let m = pair.measure(label, || {
            let inner = Arc::new(AtomicBool::new(false));
            let flag = Arc::clone(&inner);
            let worker = netns::spawn(&pair.client, "tdoc-twc", move || {
                client_loop(to, bind, &c2, &v2, &flag)
            })?;
            netns::wait(|| worker.is_finished(), stop, &inner);
            let records = worker.join();
            let saved = cap.stop();
            server.stop();
            Ok((records?, saved?))
        })?;
        let ((records, saved), client_counters) = (m.out, m.client);
        let mut findings = harness::analyze_capture(saved.path())?;
        let window = tcpdoctor_model::counters::Window {
            length: Some(m.started.elapsed()),
            rto_floor: Some(netns::rto_floor(&pair.client, *pair.server_addr.ip())?),
        };
        tcpdoctor_trace::reconcile::merge_counted_and_traced(
            &mut findings,
            tcpdoctor_model::counters::findings(&client_counters, window),
            &client_counters,
            window,
            &m.trace,
        );
        tcpdoctor_model::merge::fold_resends_the_capture_explains(&mut findings);
        let slow = records
            .iter()
            .filter(|r| r.connect_us > SLOW_CONNECT.as_micros() as u64)
            .count() as u64;
        let run = Run {
            label: label.to_string(),
            slow_connects: slow,
            connect_max_us: records.iter().map(|r| r.connect_us).max().unwrap_or(0),
            connections: records,
            client_counters,
            server_counters: m.server,
            findings,
            trace: m.trace,
        };
        Ok(pair.ran(run, saved.kept()))
    }

    /// The harm: SYNs resent because they met the previous connection's TIME_WAIT
    /// (`TcpExtTCPSynRetrans` of the client namespace), plus connects that failed.
    fn harm(&self, run: &Run) -> Harm {
        Harm::count(
            run.syn_resends() + run.failed(),
            "SYN resends and failed connects",
        )
    }

    /// Whether a run reproduced the collision: SYNs the eBPF trace saw answered by an ACK of the
    /// server's TIME_WAIT connection and resent, SYNs the client resent (`TcpExtTCPSynRetrans`:
    /// nothing else drops or answers a SYN between the lab's two namespaces), and reconnects that
    /// timed out against the old connection (`tcp_rfc1337=1`).
    fn reproduction(&self, run: &Run) -> Reproduction {
        let mut signature = Vec::new();
        if let Some(h) = run.trace.harm(Pathology::TimeWaitCollision) {
            signature.push(Event::new(h.amount as u64, h.what, "eBPF trace"));
        }
        signature.push(Event::new(
            run.syn_resends(),
            "SYNs resent",
            "client TcpExtTCPSynRetrans",
        ));
        signature.push(Event::new(
            run.connections
                .iter()
                .filter(|c| c.outcome == ConnOutcome::Etimedout)
                .count() as u64,
            "reconnects that timed out",
            "the lab's client",
        ));
        let span_us = run
            .connections
            .iter()
            .map(|c| c.start_us + c.total_us)
            .max()
            .unwrap_or(0);
        Reproduction::of(
            &run.label,
            Pathology::TimeWaitCollision,
            signature,
            tcpdoctor_model::reproduce::Tried::new(
                run.connections.len() as u64,
                "connects",
                span_us / 1000,
            ),
            || {
                Some(format!(
                    "longest connect {}, {} connect(s) over {} ms",
                    tcpdoctor_report::fmt::micros(run.connect_max_us),
                    run.slow_connects,
                    SLOW_CONNECT.as_millis()
                ))
            },
            None,
        )
    }

    fn remedy(&mut self, name: &str, base: &Run) -> Result<Remedy<Variant>> {
        let m = self.model(base);
        let base_v = Variant::baseline(&self.0);
        let gap_ms = m.gap.as_millis();
        Ok(match name {
            "timestamps" => Remedy::new(
                "timestamps on",
                Variant {
                    timestamps: true,
                    ..base_v
                },
                resends(
                    format!("TIME_WAIT takes a SYN whose timestamp is newer than the last one it saw (tcp_timewait_state_process, RFC 6191); the timestamp clock ticks every 1 ms and reconnects come {gap_ms} ms apart"),
                    "every reconnect is accepted into the old TIME_WAIT: 0 SYN resends",
                    0.0,
                ),
                "net.ipv4.tcp_timestamps=1 at both ends",
            ),
            "rfc1337-off" if self.contrast(name) => Remedy::new(
                // The baseline already runs tcp_rfc1337=0: measure what it saves by running
                // the same collisions with 1.
                "contrast: tcp_rfc1337=1",
                Variant {
                    rfc1337: true,
                    connect_timeout: RFC1337_CONNECT_TIMEOUT,
                    ..base_v
                },
                Prediction::count(
                    format!("with tcp_rfc1337=1 the server ignores the client's reset in TIME_WAIT (RFC 1337): a colliding SYN meets the old ACK on every retransmission, so the connect waits out the {} s timeout; the next reconnect comes {:.1} s later, after the ISN clock passed the old sequence numbers ({:.2} s): {} of {} reconnects fail", RFC1337_CONNECT_TIMEOUT.as_secs(), RFC1337_CONNECT_TIMEOUT.as_secs_f64(), m.window.as_secs_f64(), m.rfc_failures, m.n.saturating_sub(1)),
                    "already in effect in the baseline (tcp_rfc1337=0 lets the reset end TIME_WAIT); the contrast run with 1 shows what it saves",
                    m.rfc_failures as f64,
                    "failed connects"),
                "none (the baseline has net.ipv4.tcp_rfc1337=0); contrast run with net.ipv4.tcp_rfc1337=1 on the server",
            ),
            "rfc1337-off" => Remedy::new(
                "tcp_rfc1337=0",
                Variant {
                    rfc1337: false,
                    connect_timeout: RFC1337_CONNECT_TIMEOUT,
                    ..base_v
                },
                resends(
                    format!("the client's reset ends the server's TIME_WAIT (tcp_rfc1337=0): each of the {} colliding reconnects resends its SYN once, within milliseconds on this kernel, and none fails", m.reuses),
                    "the collisions remain but cost a SYN resend each instead of a stalled connect",
                    m.reuses as f64,
                ),
                "net.ipv4.tcp_rfc1337=0 on the server",
            ),
            "ephemeral-port" => Remedy::new(
                "a new ephemeral port per connection",
                Variant {
                    fixed_port: false,
                    ..base_v
                },
                resends(
                    "a new local port each time gives a new 4-tuple: no TIME_WAIT to meet".into(),
                    "0 SYN resends",
                    0.0,
                ),
                format!("the client lets connect() pick its port instead of binding {CLIENT_PORT}"),
            ),
            "client-closes-first" => Remedy::new(
                "client closes first",
                Variant {
                    close_first: CloseFirst::Client,
                    ..base_v
                },
                resends(
                    format!("TIME_WAIT moves to the client: the server has none to collide with, but the fixed 4-tuple sits in the client's own TIME_WAIT for 60 s, and tcp_tw_reuse cannot reuse it without timestamps: each of the {} reconnects fails with EADDRNOTAVAIL", m.n.saturating_sub(1)),
                    "no collision at the server; every reconnect fails at the client",
                    m.n.saturating_sub(1) as f64,
                ),
                "the client closes each connection first (the server after it)",
            ),
            other => return Err(driver::unknown(other, "a timewait-collision")),
        })
    }

    fn measured(&self, name: &str, run: &Run, _base: &Run) -> Measured {
        run.measured(if self.contrast(name) {
            run.failed() as f64
        } else {
            self.harm(run).amount
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
        if self.contrast(name) {
            Some(if run.failed() + run.slow_connects > 0 {
                (
                    Verdict::Works,
                    format!(
                        "already in effect in the baseline: with tcp_rfc1337=1 the same reconnects failed {} time(s) after {:.1} s each, with 0 they cost {} SYN resend(s) within {:.1} ms",
                        run.failed(),
                        run.connect_max_us as f64 / 1e6,
                        base.syn_resends(),
                        base.connect_max_us as f64 / 1e3
                    ),
                )
            } else {
                (
                    Verdict::NoEffect,
                    "tcp_rfc1337=1 stalled nothing here: the setting made no difference"
                        .to_string(),
                )
            })
        } else if name == "client-closes-first" && run.failed() > 0 {
            Some((
                Verdict::NoEffect,
                format!(
                    "the server saw no collision, but {} reconnect(s) failed at the client ({}): its own TIME_WAIT holds the fixed port",
                    run.failed(),
                    run.failures().next().map_or("", |c| c.outcome.name())
                ),
            ))
        } else {
            None
        }
    }

    fn tail(&self, base: &Run, rows: &[remedy::Row<Run>]) -> Tail<super::NoFacts> {
        let m = self.model(base);
        let mut notes = vec![
            format!(
                "The baseline connects {} times from port {CLIENT_PORT}, {} ms after each connection ends (a connection took {:.1} ms), uploading {} bytes each time.",
                m.n,
                m.gap.as_millis(),
                m.conn.as_secs_f64() * 1e3,
                tcpdoctor_model::units::thousands(m.bytes)
            ),
            format!(
                "The ISN advances one step per {ISN_TICK_NS} ns (secure_tcp_seq): a reconnect on the same 4-tuple within {} bytes x {ISN_TICK_NS} ns = {:.2} s of the previous SYN is still below the old sequence numbers, and without timestamps the server's TIME_WAIT takes it for an old duplicate: predicted {} collisions, measured {} SYN resends.",
                tcpdoctor_model::units::thousands(m.bytes + 2),
                m.window.as_secs_f64(),
                m.reuses,
                base.syn_resends()
            ),
        ];
        if !rows.is_empty() {
            notes.push(format!(
                "Harm counted per run: SYN resends (client TcpExtTCPSynRetrans) plus failed connects; the baseline measured {}.",
                self.harm(base)
            ));
        }
        let baseline_label = format!(
            "{} reconnects from one source port, timestamps off, server closes first{}",
            m.n,
            if self.0.rfc1337 {
                ", tcp_rfc1337=1"
            } else {
                ""
            }
        );
        Tail::new(baseline_label, notes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reconnect_collides_until_the_isn_clock_passes_the_old_sequence() {
        // 16 MiB uploaded: the ISN needs 16 Mi x 64 ns = 1.07 s to pass it.
        let b = 16 << 20;
        assert!(collides(Duration::from_millis(70), b));
        assert!(collides(Duration::from_millis(1_070), b));
        assert!(!collides(Duration::from_millis(1_080), b));
        // With tcp_rfc1337=1, 3 connections 70 ms apart: the second stalls 3 s and fails,
        // the third comes 3 s after the first's SYN and is accepted.
        let conn = Duration::from_millis(50);
        let gap = Duration::from_millis(20);
        let t = Duration::from_secs(3);
        assert_eq!(rfc1337_failures(3, conn, gap, t, b), 1);
        assert_eq!(rfc1337_failures(5, conn, gap, t, b), 2);
        // 256 MiB: 17 s of ISN clock, every reconnect within it fails.
        assert_eq!(rfc1337_failures(4, conn, gap, t, 256 << 20), 3);
    }
}
