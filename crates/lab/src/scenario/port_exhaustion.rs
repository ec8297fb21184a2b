//! `port-exhaustion`: a client namespace with a narrowed `ip_local_port_range` and
//! `tcp_tw_reuse=0` opens a new connection per request to one server (file 004). The side that
//! closes first keeps each 4-tuple in TIME_WAIT for 60 s (`TCP_TIMEWAIT_LEN`,
//! include/net/tcp.h), so after one range's worth of connections connect() fails with
//! EADDRNOTAVAIL. `--fix` measures, each in a fresh client namespace, keep-alive (one
//! persistent connection per worker) and `net.ipv4.tcp_tw_reuse=1`.

use std::sync::atomic::AtomicBool;
use std::time::Duration;

use serde::Serialize;
use tcpdoctor_model::PortRange;
use tcpdoctor_probe::server::{Protocol, ServerConfig};
use tcpdoctor_probe::{CloseFirst, Mode};

use super::churn::{self, Pair, ProbeRun};
use super::{Common, Header, Outcome};
use crate::remedy::{Check, Harm};
use crate::Result;

#[derive(Clone, Debug, Serialize)]
pub struct Config {
    /// The client namespace's `net.ipv4.ip_local_port_range`.
    pub ports: PortRange,
    pub duration_ms: u64,
    pub concurrency: usize,
    pub close_first: CloseFirst,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            ports: PortRange {
                low: 40000,
                high: 40199,
            },
            duration_ms: 4000,
            concurrency: 2,
            close_first: CloseFirst::Client,
        }
    }
}

#[derive(Clone, Debug, Serialize)]
pub struct Report {
    #[serde(flatten)]
    pub header: Header,
    pub config: Config,
    /// ports / TIME_WAIT (60 s): new connections per second one client can sustain to one
    /// destination once every port has gone through TIME_WAIT.
    pub computed_sustainable_per_s: f64,
    /// Successful connections per second over whole 60 s periods after the first one (steady
    /// state), when the run lasted at least 121 s.
    pub measured_sustainable_per_s: Option<f64>,
    pub before: ProbeRun,
    /// Keep-alive, then tcp_tw_reuse=1 (with --fix).
    pub after: Vec<ProbeRun>,
    /// Each remedied run judged against the baseline (with --fix).
    pub remedies: Vec<Check>,
}

/// The harm: connects that found no free local port.
pub fn harm(run: &ProbeRun) -> Harm {
    Harm::count(
        run.errors("EADDRNOTAVAIL"),
        "connects failed with EADDRNOTAVAIL",
    )
}

/// TIME_WAIT in whole seconds (`TCP_TIMEWAIT_LEN`).
const TW_S: u64 = 60;

/// Successful connects per second over whole TIME_WAIT periods after the first one: ports
/// freed by TIME_WAIT come back in bursts 60 s after they were taken, so only windows of a
/// whole number of periods average them fairly. Needs a run of at least 121 s.
fn measured_steady(run: &ProbeRun) -> Option<f64> {
    let last_full = run.summary.elapsed_us / 1_000_000; // seconds fully elapsed
    let periods = last_full.checked_sub(TW_S)? / TW_S;
    if periods == 0 {
        return None;
    }
    let end = TW_S + periods * TW_S;
    let ok: u64 = run
        .summary
        .per_second
        .iter()
        .filter(|s| s.second >= TW_S && s.second < end)
        .map(|s| s.ok)
        .sum();
    Some(ok as f64 / (end - TW_S) as f64)
}

fn one_run(
    common: &Common,
    cfg: &Config,
    tag: &str,
    label: &str,
    mode: Mode,
    tw_reuse: &str,
    stop: &AtomicBool,
) -> Result<(
    ProbeRun,
    Vec<String>,
    Option<crate::capture::CaptureSummary>,
)> {
    let pair = Pair::build(common, tag)?;
    pair.lab.sysctl(
        &pair.client,
        "net.ipv4.ip_local_port_range",
        &format!("{} {}", cfg.ports.low, cfg.ports.high),
    )?;
    pair.lab
        .sysctl(&pair.client, "net.ipv4.tcp_tw_reuse", tw_reuse)?;
    let mut scfg = ServerConfig::new(
        pair.server_addr.into(),
        Protocol::Tcp {
            request_bytes: 64,
            reply_bytes: 64,
        },
    );
    scfg.close_first = cfg.close_first;
    let server = pair.serve(scfg)?;
    let cap = if tag.is_empty() {
        pair.capture(common)?
    } else {
        None
    };
    let mut pcfg = churn::probe_config(pair.server_addr, Duration::from_millis(cfg.duration_ms));
    pcfg.mode = mode;
    pcfg.concurrency = cfg.concurrency;
    pcfg.close_first = cfg.close_first;
    pcfg.connect_timeout = Duration::from_secs(2);
    let run = churn::probe(&pair, label, pcfg, stop);
    let summary = churn::stop_capture(cap);
    server.stop();
    Ok((run?, pair.lab.namespaces().to_vec(), summary?))
}

pub fn run(common: &Common, cfg: &Config, stop: &AtomicBool) -> Result<Outcome<Report>> {
    let (before, mut namespaces, capture) = one_run(
        common,
        cfg,
        "",
        "before: new connection per request, tcp_tw_reuse=0",
        Mode::Crr,
        "0",
        stop,
    )?;
    let mut after = Vec::new();
    if common.fix {
        let (ka, ns, _) = one_run(
            common,
            cfg,
            "ka",
            "after: keep-alive (one connection per worker)",
            Mode::Rr,
            "0",
            stop,
        )?;
        namespaces.extend(ns);
        after.push(ka);
        let (tw, ns, _) = one_run(
            common,
            cfg,
            "tw",
            "after: new connection per request, tcp_tw_reuse=1",
            Mode::Crr,
            "1",
            stop,
        )?;
        namespaces.extend(ns);
        after.push(tw);
    }
    let interrupted = before.interrupted || after.iter().any(|r| r.interrupted);
    let computed = f64::from(cfg.ports.len()) / tcpdoctor_host::sysctl::TIME_WAIT.as_secs_f64();
    let measured = measured_steady(&before);
    let (remedies, remedied) = churn::judge_runs(
        tcpdoctor_model::Pathology::PortExhaustion,
        &before,
        &after,
        harm,
    );
    Ok(Outcome {
        remedied,
        findings: before.findings.clone(),
        body: Report {
            header: Header {
                scenario: "port-exhaustion",
                run_id: std::process::id(),
                subnet: common.subnet.to_string(),
                namespaces,
                capture,
                diagnosed_by: vec![
                    "probe: errors by errno and spike classifier (client namespace counters)"
                        .into(),
                    "model::counters findings (server namespace counters)".into(),
                ],
            },
            config: cfg.clone(),
            computed_sustainable_per_s: computed,
            measured_sustainable_per_s: measured,
            before,
            after,
            remedies,
        },
        interrupted,
    })
}
