//! `accept-overflow`: a server whose single thread accepts and serves one connection at a time
//! behind a listen backlog of 1, under concurrent connection churn. The accept queue fills,
//! the kernel drops SYNs (`tcp_conn_request`, net/ipv4/tcp_input.c, when `sk_acceptq_is_full`)
//! and clients wait a rung of the SYN ladder; `ListenOverflows` moves in the server
//! namespace. `--fix` serves with 8 acceptor threads and a 4096 backlog.

use std::sync::atomic::AtomicBool;
use std::time::Duration;

use serde::Serialize;
use tcpdoctor_probe::server::{Protocol, ServerConfig};

use super::churn::{self, Pair, ProbeRun};
use super::{Common, Header, Outcome};
use crate::remedy::{Check, Harm};
use crate::Result;

#[derive(Clone, Debug, Serialize)]
pub struct Config {
    pub backlog: i32,
    pub server_threads: usize,
    pub duration_ms: u64,
    pub concurrency: usize,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            backlog: 1,
            server_threads: 1,
            duration_ms: 4000,
            concurrency: 16,
        }
    }
}

#[derive(Clone, Debug, Serialize)]
pub struct Report {
    #[serde(flatten)]
    pub header: Header,
    pub config: Config,
    pub before: ProbeRun,
    pub after: Option<ProbeRun>,
    /// The remedied run judged against the baseline (with --fix).
    pub remedies: Vec<Check>,
}

/// The harm: connection requests the full accept queue turned away
/// (`TcpExtListenOverflows` of the server namespace).
pub fn harm(run: &ProbeRun) -> Harm {
    Harm::count(
        run.server_counter("TcpExtListenOverflows").max(0) as u64,
        "accept-queue overflows (TcpExtListenOverflows)",
    )
}

fn server_config(pair: &Pair, threads: usize, backlog: i32) -> ServerConfig {
    let mut s = ServerConfig::new(
        pair.server_addr.into(),
        Protocol::Tcp {
            request_bytes: 64,
            reply_bytes: 64,
        },
    );
    s.threads = threads;
    s.backlog = backlog;
    s
}

pub fn run(common: &Common, cfg: &Config, stop: &AtomicBool) -> Result<Outcome<Report>> {
    let pair = Pair::build(common, "")?;
    let cap = pair.capture(common)?;
    let mut pcfg = churn::probe_config(pair.server_addr, Duration::from_millis(cfg.duration_ms));
    pcfg.concurrency = cfg.concurrency;
    let server = pair.serve(server_config(&pair, cfg.server_threads, cfg.backlog))?;
    let before = churn::probe(
        &pair,
        &format!(
            "before: {} acceptor thread(s), backlog {}",
            cfg.server_threads, cfg.backlog
        ),
        pcfg.clone(),
        stop,
    )?;
    server.stop();
    let capture = churn::stop_capture(cap)?;
    let mut namespaces = pair.lab.namespaces().to_vec();
    // A fresh client namespace: the first run left thousands of its ports in TIME_WAIT, which
    // slows the port search of connect() (`__inet_hash_connect`) and would blur the comparison.
    let after = if common.fix {
        let fixed = Pair::build(common, "fx")?;
        let server = fixed.serve(server_config(&fixed, 8, 4096))?;
        let r = churn::probe(
            &fixed,
            "after: 8 acceptor threads, backlog 4096",
            pcfg,
            stop,
        );
        server.stop();
        namespaces.extend(fixed.lab.namespaces().iter().cloned());
        Some(r?)
    } else {
        None
    };
    let interrupted = before.interrupted || after.as_ref().is_some_and(|r| r.interrupted);
    let (remedies, remedied) = churn::judge_runs(
        tcpdoctor_model::Pathology::AcceptQueueOverflow,
        &before,
        after.as_slice(),
        harm,
    );
    Ok(Outcome {
        remedied,
        findings: before.findings.clone(),
        body: Report {
            header: Header {
                scenario: "accept-overflow",
                run_id: pair.lab.run_id(),
                subnet: common.subnet.to_string(),
                namespaces,
                capture,
                diagnosed_by: vec![
                    "probe: spike classifier (client namespace counters)".into(),
                    "model::counters findings (server namespace: TcpExtListenOverflows, TcpExtListenDrops)".into(),
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
