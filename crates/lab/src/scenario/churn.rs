//! Shared machinery of the connection scenarios (`port-exhaustion`, `syn-drop`,
//! `accept-overflow`, `stale-ack-race`): a client and a server namespace joined by a veth,
//! tcpdoctor's embedded server in the server namespace, and `tcpdoctor probe`'s load engine in
//! the client namespace. The diagnosis is probe's: its spike classifier and findings (timer
//! signatures corroborated by the client namespace's counters), plus the findings
//! `model::counters` draws from the server namespace's counter delta (e.g. `ListenOverflows`,
//! which only the server sees).

use std::collections::BTreeMap;
use std::net::{SocketAddr, SocketAddrV4};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use serde::Serialize;
use tcpdoctor_model::{Finding, Pathology};
use tcpdoctor_probe::server::{Server, ServerConfig};

use super::Common;
use crate::topo::Lab;
use crate::traffic::SERVER_PORT;
use crate::{capture, naming, netns, Error, Result};

/// Client and server namespaces joined by one veth.
pub struct Pair {
    pub lab: Lab,
    pub client: String,
    pub server: String,
    pub server_addr: SocketAddrV4,
    pub client_if: String,
    pub server_if: String,
    client_ip: std::net::Ipv4Addr,
}

impl Pair {
    /// Builds `tdoc-lab-<pid>-cl<tag>` (host 1) and `tdoc-lab-<pid>-sv<tag>` (host 2).
    pub fn build(common: &Common, tag: &str) -> Result<Pair> {
        let mut lab = Lab::new()?;
        let client = lab.add_ns(&format!("cl{tag}"))?;
        let server = lab.add_ns(&format!("sv{tag}"))?;
        let (client_if, server_if) = (naming::ifname("c")?, naming::ifname("s")?);
        lab.veth(&client, &client_if, &server, &server_if)?;
        lab.addr(&client, &client_if, &common.subnet.cidr_of(1))?;
        lab.addr(&server, &server_if, &common.subnet.cidr_of(2))?;
        Ok(Pair {
            lab,
            client,
            server,
            server_addr: SocketAddrV4::new(common.subnet.host(2), SERVER_PORT),
            client_if,
            server_if,
            client_ip: common.subnet.host(1),
        })
    }

    /// The client's address.
    pub fn client_addr(&self) -> std::net::Ipv4Addr {
        self.client_ip
    }

    /// Starts tcpdump on the client's interface when `--pcap` was given.
    pub fn capture(&self, common: &Common) -> Result<Option<capture::Capture>> {
        common
            .pcap
            .as_ref()
            .map(|p| {
                capture::Capture::start(&self.client, &self.client_if, "capture", Some(p), "tcp")
            })
            .transpose()
    }

    /// Starts the embedded server inside the server namespace.
    pub fn serve(&self, cfg: ServerConfig) -> Result<Server> {
        let addr = cfg.addr;
        netns::run_in(&self.server, move || {
            Server::start(cfg).map_err(|e| {
                Error::io(
                    format!("embedded server on {addr}"),
                    std::io::Error::other(e.to_string()),
                )
            })
        })
    }
}

/// Stops a capture started by [`Pair::capture`]; the summary of the kept file.
pub fn stop_capture(cap: Option<capture::Capture>) -> Result<Option<capture::CaptureSummary>> {
    Ok(cap
        .map(capture::Capture::stop)
        .transpose()?
        .and_then(|s| s.kept()))
}

/// One probe run inside the client namespace, with the server namespace's counters.
#[derive(Clone, Debug, Serialize)]
pub struct ProbeRun {
    /// What this run is (`before`, `after: keep-alive`, ...).
    pub label: String,
    /// Probe's summary: phases, errors by errno, spikes by cause, client counters.
    pub summary: tcpdoctor_probe::Summary,
    /// Counters of the server namespace that moved during the run.
    pub server_counters: BTreeMap<String, i64>,
    /// Findings of this run (probe's classifier + server counter findings).
    pub findings: Vec<Finding>,
    pub interrupted: bool,
}

impl ProbeRun {
    /// Pathologies named by this run's findings.
    pub fn pathologies(&self) -> Vec<Pathology> {
        self.findings.iter().map(|f| f.pathology).collect()
    }

    /// The delta of a client-namespace counter over the run (0 when it did not move).
    pub fn client_counter(&self, name: &str) -> i64 {
        self.summary
            .counters
            .iter()
            .find(|c| c.name == name)
            .map(|c| c.delta)
            .unwrap_or(0)
    }

    /// The delta of a server-namespace counter over the run (0 when it did not move).
    pub fn server_counter(&self, name: &str) -> i64 {
        self.server_counters.get(name).copied().unwrap_or(0)
    }

    /// Requests that failed with `errno` (`EADDRNOTAVAIL`).
    pub fn errors(&self, errno: &str) -> u64 {
        self.summary
            .errors
            .iter()
            .filter(|e| e.errno == errno)
            .map(|e| e.count)
            .sum()
    }
}

/// Judges each remedied run against `before` on `harm` for `pathology`.
pub fn judge_runs(
    pathology: Pathology,
    before: &ProbeRun,
    after: &[ProbeRun],
    harm: impl Fn(&ProbeRun) -> crate::remedy::Harm,
) -> (Vec<crate::remedy::Check>, Option<super::Remedied>) {
    let checks: Vec<_> = after
        .iter()
        .map(|r| {
            crate::remedy::judge(
                &r.label,
                pathology,
                harm(before),
                &before.findings,
                harm(r),
                &r.findings,
            )
        })
        .collect();
    let findings: Vec<&[Finding]> = after.iter().map(|r| r.findings.as_slice()).collect();
    let remedied = super::remedied(&checks, &findings);
    (checks, remedied)
}

/// Runs probe with `cfg` (its target must be set) from inside the client namespace. `stop`
/// (Ctrl-C) is forwarded to the probe.
pub fn probe(
    pair: &Pair,
    label: &str,
    cfg: tcpdoctor_probe::Config,
    stop: &AtomicBool,
) -> Result<ProbeRun> {
    let mut runs = probe_many(pair, label, vec![cfg], stop)?;
    Ok(runs.remove(0))
}

/// Runs several probes at once from inside the client namespace (one per destination, for
/// example), each with its own configuration. The server namespace's counter findings go to
/// the first run (the counters cannot be split by destination).
pub fn probe_many(
    pair: &Pair,
    label: &str,
    cfgs: Vec<tcpdoctor_probe::Config>,
    stop: &AtomicBool,
) -> Result<Vec<ProbeRun>> {
    let server_before = netns::counters(&pair.server)?;
    let inner = Arc::new(AtomicBool::new(false));
    let mut workers = Vec::new();
    for cfg in cfgs {
        let flag = Arc::clone(&inner);
        workers.push(netns::spawn(&pair.client, "tdoc-probe", move || {
            tcpdoctor_probe::run(&cfg, &flag, &|_| {}).map_err(|e| Error::Thread {
                step: "probe".into(),
                detail: e.to_string(),
            })
        })?);
    }
    while !workers.iter().all(|w| w.is_finished()) {
        if stop.load(Ordering::Relaxed) {
            inner.store(true, Ordering::Relaxed);
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let results: Vec<_> = workers
        .into_iter()
        .map(|w| w.join())
        .collect::<Result<_>>()?;
    let server_delta = netns::counters(&pair.server)?.delta_since(&server_before);
    let server_moved = server_delta.tcp();
    let floor = netns::rto_floor(&pair.server, pair.client_addr())?;
    let mut out = Vec::new();
    for (i, result) in results.into_iter().enumerate() {
        let mut findings = result.findings;
        if i == 0 {
            // What only the server sees (ListenOverflows, ListenDrops, ...), through the
            // shared counter meanings; pathologies probe already named keep probe's evidence.
            let have: Vec<Pathology> = findings.iter().map(|f| f.pathology).collect();
            for f in tcpdoctor_model::counters::findings(
                &server_moved,
                tcpdoctor_model::counters::Window {
                    length: Some(Duration::from_micros(result.summary.elapsed_us)),
                    rto_floor: Some(floor),
                },
            ) {
                if !have.contains(&f.pathology) {
                    let summary = format!("server namespace: {}", f.summary);
                    findings.push(Finding { summary, ..f });
                }
            }
        }
        tcpdoctor_model::finding::rank(&mut findings);
        out.push(ProbeRun {
            label: label.to_string(),
            summary: result.summary,
            server_counters: if i == 0 {
                server_moved.clone()
            } else {
                BTreeMap::new()
            },
            findings,
            interrupted: result.interrupted,
        });
    }
    Ok(out)
}

/// A probe configuration toward `target` with the lab's defaults.
pub fn probe_config(target: SocketAddrV4, duration: Duration) -> tcpdoctor_probe::Config {
    tcpdoctor_probe::Config {
        target: Some(SocketAddr::V4(target)),
        duration,
        connect_timeout: Duration::from_secs(12),
        reply_timeout: Duration::from_secs(5),
        ..tcpdoctor_probe::Config::default()
    }
}
