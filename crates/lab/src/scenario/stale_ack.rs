//! `stale-ack-race`: file 003's loop (connect, send 4 bytes, read, close with SO_LINGER 0 and
//! TCP_NODELAY; the server closes first) run by probe's engine, reporting how often a SYN was
//! resent (`TcpExtTCPSynRetrans`) and what probe's classifier made of slow connects; then a
//! forced check of the kernel's behaviour: the client's reset is dropped (nftables) so the
//! server keeps the old connection, the client reconnects from the same port, meets the stale
//! ACK, resets it, and the time to its SYN resend is measured. It reports what it observed:
//! a resend within milliseconds (the quick-resend behaviour of current kernels) or after the
//! 1 s SYN timer. `--fix` runs the same loop with a graceful close (FIN) instead of
//! SO_LINGER 0, in fresh namespaces.

use std::collections::BTreeMap;
use std::net::SocketAddrV4;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::Serialize;
use tcpdoctor_probe::server::{Protocol, ServerConfig};
use tcpdoctor_probe::{CloseFirst, Mode};

use super::churn::{self, Pair, ProbeRun};
use super::{Common, Header, Outcome};
use crate::remedy::{Check, Harm};
use crate::{naming, netns, traffic, Error, Result};

/// Source port of the forced check: below `ip_local_port_range`.
pub const FORCED_PORT: u16 = 20002;
/// The forced check's name in the trace's runs.
pub const FORCED_RUN: &str = "forced check: a SYN meets a stale ACK";
/// Server port of the forced check.
pub const FORCED_SERVER_PORT: u16 = 5002;

#[derive(Clone, Debug, Serialize)]
pub struct Config {
    pub duration_ms: u64,
    pub concurrency: usize,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            duration_ms: 3000,
            concurrency: 1,
        }
    }
}

/// What the kernel did when a SYN met a stale ACK in the forced check.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
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

#[derive(Clone, Debug, Serialize)]
pub struct Forced {
    pub connect_us: u64,
    pub behaviour: ResendBehaviour,
    pub client_counters: BTreeMap<String, i64>,
}

#[derive(Clone, Debug, Serialize)]
pub struct Report {
    #[serde(flatten)]
    pub header: Header,
    pub config: Config,
    pub loop_run: ProbeRun,
    /// `TcpExtTCPSynRetrans` of the loop per million connections.
    pub syn_resends_per_million: f64,
    /// Connects probe classified as a SYN resent after a stale ACK.
    pub stale_ack_resends: u64,
    /// Connects probe classified as SYN retransmissions (timer).
    pub syn_timer_resends: u64,
    pub forced: Forced,
    /// The same loop with a graceful close (with --fix).
    pub after: Vec<ProbeRun>,
    /// `after` judged against the loop (with --fix).
    #[serde(rename = "fix_results")]
    pub remedies: Vec<Check>,
}

fn forced_check(common: &Common) -> Result<(Forced, Vec<String>, crate::trace::RunTrace)> {
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

/// The scenario's trace: its loop runs', then the forced check's.
fn with_forced(
    loops: crate::trace::LabTrace,
    forced: crate::trace::RunTrace,
) -> crate::trace::LabTrace {
    let mut runs = loops.runs;
    runs.push(forced);
    crate::trace::LabTrace::of(runs)
}

/// The harm: SYNs resent per million connections of the loop (`TcpExtTCPSynRetrans`).
pub fn harm(run: &ProbeRun) -> Harm {
    let conns = run.summary.connections_opened.max(1);
    let resends = run.client_counter("TcpExtTCPSynRetrans").max(0) as f64;
    Harm::count(
        (resends * 1e6 / conns as f64).round() as u64,
        "SYN resends per million connections",
    )
}

/// File 003's loop in a fresh pair of namespaces: SO_LINGER 0 (`linger0`) or a graceful
/// close. Returns the run, its namespaces and the capture summary.
fn loop_run(
    common: &Common,
    cfg: &Config,
    tag: &str,
    label: &str,
    linger0: bool,
    capture: bool,
    stop: &AtomicBool,
) -> Result<(
    ProbeRun,
    Vec<String>,
    Option<crate::capture::CaptureSummary>,
)> {
    let pair = Pair::build(common, tag)?;
    let mut scfg = ServerConfig::new(
        pair.server_addr.into(),
        Protocol::Tcp {
            request_bytes: 4,
            reply_bytes: 4,
        },
    );
    scfg.close_first = CloseFirst::Server;
    let server = pair.serve(scfg)?;
    let mut p = churn::probe_config(pair.server_addr, Duration::from_millis(cfg.duration_ms));
    p.mode = Mode::Crr;
    p.linger0 = linger0;
    p.nodelay = true;
    p.close_first = CloseFirst::Server;
    p.request_bytes = 4;
    p.reply_bytes = 4;
    p.concurrency = cfg.concurrency;
    let cap = if capture { pair.capture(common)? } else { None };
    let run = churn::probe(&pair, label, p, stop);
    let summary = churn::stop_capture(cap);
    server.stop();
    Ok((run?, pair.lab.namespaces().to_vec(), summary?))
}

pub fn run(common: &Common, cfg: &Config, stop: &AtomicBool) -> Result<Outcome<Report>> {
    let (loop_run_, mut namespaces, capture) = loop_run(
        common,
        cfg,
        "",
        "before: connection per request, SO_LINGER 0, TCP_NODELAY, server closes first",
        true,
        true,
        stop,
    )?;
    let loop_run = loop_run_;
    let mut after = Vec::new();
    if common.fix {
        let (r, ns, _) = self::loop_run(
            common,
            cfg,
            "gc",
            "after: graceful close (FIN) instead of SO_LINGER 0",
            false,
            false,
            stop,
        )?;
        namespaces.extend(ns);
        after.push(r);
    }
    let (forced, ns, forced_trace) = forced_check(common)?;
    namespaces.extend(ns);
    let resends = loop_run
        .summary
        .counters
        .iter()
        .find(|c| c.name == "TcpExtTCPSynRetrans")
        .map(|c| c.delta)
        .unwrap_or(0);
    let conns = loop_run.summary.connections_opened.max(1);
    let count = |want: &dyn Fn(&tcpdoctor_probe::SpikeCause) -> bool| {
        loop_run
            .summary
            .spikes
            .groups
            .iter()
            .filter(|g| want(&g.cause))
            .map(|g| g.count)
            .sum()
    };
    let stale = count(&|c| matches!(c, tcpdoctor_probe::SpikeCause::StaleAckResend));
    let timer = count(&|c| matches!(c, tcpdoctor_probe::SpikeCause::SynRetransmit { .. }));
    let (remedies, remedied) = churn::judge_runs(
        tcpdoctor_model::Pathology::StaleAckRace,
        &loop_run,
        &after,
        harm,
    );
    Ok(Outcome {
        remedied,
        findings: loop_run.findings.clone(),
        body: Report {
            header: Header {
                scenario: "stale-ack-race",
                run_id: std::process::id(),
                subnet: common.subnet.to_string(),
                namespaces,
                capture,
                trace: with_forced(
                    churn::traces(std::iter::once(&loop_run).chain(after.iter())),
                    forced_trace,
                ),
                diagnosed_by: vec![
                    "probe: spike classifier (client namespace counters)".into(),
                    "forced check: client TcpExtTCPSynRetrans and connect time".into(),
                ],
            },
            config: cfg.clone(),
            syn_resends_per_million: resends as f64 * 1e6 / conns as f64,
            stale_ack_resends: stale,
            syn_timer_resends: timer,
            loop_run,
            after,
            remedies,
            forced,
        },
        interrupted: stop.load(Ordering::Relaxed),
    })
}

/// The remedies `--remedies` measures for the stale-ACK race, in table order.
pub const REMEDIES: [&str; 1] = ["graceful-close"];

fn measured(run: &ProbeRun) -> crate::remedy::Measured {
    let h = harm(run);
    crate::remedy::Measured {
        text: format!(
            "{} connections, {} SYN resends: {} per million",
            crate::remedy::thousands(run.summary.connections_opened),
            run.client_counter("TcpExtTCPSynRetrans"),
            h.shown()
        ),
        value: Some(h.amount),
    }
}

/// `--remedies`: the SO_LINGER 0 loop, each selected remedy, and the forced check that names
/// this kernel's behaviour, in fresh namespaces.
pub fn remedies(
    common: &Common,
    cfg: &Config,
    selected: &[String],
    stop: &AtomicBool,
) -> Result<Outcome<super::RemedyReport<Config, ProbeRun>>> {
    use crate::remedy::{self, Prediction, Tolerance};
    let (base, mut namespaces, capture) = loop_run(
        common,
        cfg,
        "",
        "before: connection per request, SO_LINGER 0, TCP_NODELAY, server closes first",
        true,
        true,
        stop,
    )?;
    let (forced, ns, forced_trace) = forced_check(common)?;
    namespaces.extend(ns);
    let behaviour = match forced.behaviour {
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
    };
    let base_rate = harm(&base).amount;
    let mut rows = Vec::new();
    for name in selected {
        let tag = "r0";
        match name.as_str() {
            "graceful-close" => {}
            other => {
                return Err(crate::Error::invalid(
                    format!("remedy {other}"),
                    "not a stale-ack-race remedy",
                ))
            }
        }
        let (run, ns, _) = loop_run(
            common,
            cfg,
            tag,
            "graceful close (FIN) instead of SO_LINGER 0",
            false,
            false,
            stop,
        )?;
        namespaces.extend(ns);
        let resolution = 1e6 / run.summary.connections_opened.max(1) as f64;
        let prediction = Prediction::value(
            "a FIN close keeps the client's port in LAST_ACK until the server has acknowledged it, and the server's TIME_WAIT takes a newer SYN (timestamps): only a reset (SO_LINGER 0) frees the port while the server still holds the old connection, so no SYN meets a stale ACK",
            "0 SYN resends per million connections",
            0.0,
            "per million",
            Tolerance::Absolute(0.0),
            format!(
                "one resend in this run is {resolution:.0} per million"
            ),
        );
        let check = remedy::judge(
            &run.label,
            tcpdoctor_model::Pathology::StaleAckRace,
            harm(&base),
            &base.findings,
            harm(&run),
            &run.findings,
        )
        .with_trace(
            base.trace.harm(tcpdoctor_model::Pathology::StaleAckRace),
            run.trace.harm(tcpdoctor_model::Pathology::StaleAckRace),
        );
        let override_verdict = (check.effect == remedy::Effect::NothingToFix).then(|| {
            (
                remedy::Verdict::NothingToFix,
                format!(
                    "the SO_LINGER 0 loop made {} connections without a stale ACK (0 per million; one would be {:.0} per million); {behaviour}",
                    remedy::thousands(base.summary.connections_opened),
                    1e6 / base.summary.connections_opened.max(1) as f64
                ),
            )
        });
        rows.push(remedy::row(remedy::Outcome {
            remedy: name.clone(),
            changes: "the client closes with a FIN (no SO_LINGER 0); the server still closes first"
                .into(),
            prediction: Ok(prediction),
            measured: measured(&run),
            check,
            override_verdict,
            disagreement_reason: None,
            run,
        }));
    }
    let notes = vec![
        format!(
            "Forced check (the client's reset dropped by nftables, reconnect from port {FORCED_PORT}): {behaviour}."
        ),
        format!(
            "Baseline: {:.0} SYN resends per million connections; at the forced check's cost that is {:.1} ms of connect time per million connections.",
            base_rate,
            base_rate * forced.connect_us as f64 / 1e3
        ),
    ];
    let report = super::RemedyReport {
        header: Header {
            scenario: "stale-ack-race",
            run_id: std::process::id(),
            subnet: common.subnet.to_string(),
            namespaces,
            capture,
            trace: with_forced(
                churn::traces(
                    std::iter::once(&base).chain(rows.iter().filter_map(|r| r.run.as_ref())),
                ),
                forced_trace,
            ),
            diagnosed_by: vec![
                "probe: spike classifier (client namespace counters)".into(),
                "forced check: client TcpExtTCPSynRetrans and connect time".into(),
            ],
        },
        config: cfg.clone(),
        baseline_label: format!(
            "connection per request with SO_LINGER 0 and TCP_NODELAY, the server closes first, {} loop(s), {} s",
            cfg.concurrency,
            cfg.duration_ms / 1000
        ),
        baseline_harm: harm(&base),
        baseline_findings: base.findings.clone(),
        baseline: base,
        remedies: rows,
        notes,
        syn_ladder: None,
    };
    let remedied = report.remedied(|r| r.findings.clone());
    Ok(Outcome {
        findings: report.baseline.findings.clone(),
        interrupted: stop.load(Ordering::Relaxed),
        remedied,
        body: report,
    })
}
