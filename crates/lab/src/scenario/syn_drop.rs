//! `syn-drop`: the server namespace's nftables drops a random share of incoming SYNs
//! (`numgen random mod 100 < PCT`), the classic firewall or overloaded-path source of connects
//! that take exactly a rung of the SYN ladder (1 s, then 2 s, ...; `tcp_syn_linear_timeouts`).
//! `--fix` removes the drop (the remedy is finding and removing the loss) and measures again.

use std::sync::atomic::AtomicBool;
use std::time::Duration;

use serde::Serialize;
use tcpdoctor_probe::server::{Protocol, ServerConfig};

use super::churn::{self, Pair, ProbeRun};
use super::{Common, Header, Outcome};
use crate::remedy::{Check, Harm};
use crate::{naming, Error, Result};

#[derive(Clone, Debug, Serialize)]
pub struct Config {
    /// Share of SYNs dropped, percent.
    pub drop_percent: u32,
    pub duration_ms: u64,
    pub concurrency: usize,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            drop_percent: 10,
            duration_ms: 4000,
            concurrency: 4,
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

/// The harm: SYNs the client had to send again (`TcpExtTCPSynRetrans`).
pub fn harm(run: &ProbeRun) -> Harm {
    Harm::count(
        run.client_counter("TcpExtTCPSynRetrans").max(0) as u64,
        "SYN retransmissions (TcpExtTCPSynRetrans)",
    )
}

/// The nftables ruleset dropping `pct`% of SYNs to `port`.
pub fn ruleset(pct: u32, port: u16) -> String {
    format!(
        "table inet {t} {{\n  chain input {{\n    type filter hook input priority 0; policy accept;\n    \
         tcp dport {port} tcp flags & (syn | ack) == syn numgen random mod 100 < {pct} counter drop\n  }}\n}}\n",
        t = naming::NFT_TABLE
    )
}

pub fn run(common: &Common, cfg: &Config, stop: &AtomicBool) -> Result<Outcome<Report>> {
    if cfg.drop_percent == 0 || cfg.drop_percent > 90 {
        return Err(Error::invalid(
            format!("--drop-percent {}", cfg.drop_percent),
            "must be 1..=90",
        ));
    }
    let pair = Pair::build(common, "")?;
    let server = pair.serve(ServerConfig::new(
        pair.server_addr.into(),
        Protocol::Tcp {
            request_bytes: 64,
            reply_bytes: 64,
        },
    ))?;
    pair.lab.nft(
        &pair.server,
        "drop a share of SYNs",
        &ruleset(cfg.drop_percent, pair.server_addr.port()),
    )?;
    let cap = pair.capture(common)?;
    let mut pcfg = churn::probe_config(pair.server_addr, Duration::from_millis(cfg.duration_ms));
    pcfg.concurrency = cfg.concurrency;
    let before = churn::probe(&pair, "before: nftables drops SYNs", pcfg.clone(), stop)?;
    let after = if common.fix {
        pair.lab.nft_flush(&pair.server);
        Some(churn::probe(&pair, "after: SYN drop removed", pcfg, stop)?)
    } else {
        None
    };
    let capture = churn::stop_capture(cap);
    server.stop();
    let capture = capture?;
    let interrupted = before.interrupted || after.as_ref().is_some_and(|r| r.interrupted);
    let (remedies, remedied) = churn::judge_runs(
        tcpdoctor_model::Pathology::SynRetransmit,
        &before,
        after.as_slice(),
        harm,
    );
    Ok(Outcome {
        remedied,
        findings: before.findings.clone(),
        body: Report {
            header: Header {
                scenario: "syn-drop",
                run_id: pair.lab.run_id(),
                subnet: common.subnet.to_string(),
                namespaces: pair.lab.namespaces().to_vec(),
                capture,
                diagnosed_by: vec![
                    "probe: spike classifier (SYN ladder from the client namespace's sysctls, TcpExtTCPSynRetrans)".into(),
                    "model::counters findings (server namespace counters)".into(),
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
