//! `accept-overflow`: a server whose single thread accepts and serves one connection at a time
//! behind a listen backlog of 1, under concurrent connection churn. The accept queue fills,
//! the kernel drops SYNs (`tcp_conn_request`, net/ipv4/tcp_input.c, when `sk_acceptq_is_full`)
//! and clients wait a rung of the SYN ladder; `ListenOverflows` moves in the server
//! namespace. `--fix` serves with 8 acceptor threads and a 4096 backlog (the remedy `both`).

use std::sync::atomic::AtomicBool;

use serde::{Deserialize, Serialize};
use tcpdoctor_model::remedy::{Harm, Measured, Prediction, Row};
use tcpdoctor_model::reproduce::{Event, Reproduction};
use tcpdoctor_model::Pathology;

use super::driver::{self, Ran, Remedy, Scenario, Tail};
use super::harness::{self, Listener, ProbeRun};
use super::Common;
use crate::Result;

#[derive(Clone, Debug, Serialize, Deserialize)]
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

/// A plain run's report: the baseline.
pub type Report = super::Plain<Config, ProbeRun>;

/// The accept-queue overflow as `--remedies` drives it.
pub struct AcceptOverflow(pub Config);

impl Scenario for AcceptOverflow {
    type Config = Config;
    type Run = ProbeRun;
    type Variant = Listener;
    type Facts = super::NoFacts;
    const NAME: &'static str = "accept-overflow";
    const PATHOLOGY: Pathology = Pathology::AcceptQueueOverflow;
    const DIAGNOSED_BY: &'static [&'static str] = &[
        "probe's classifier of slow connects (with the kernel counters of the client's namespace)",
        "the kernel counters of the server's namespace (TcpExtListenOverflows, TcpExtListenDrops)",
    ];
    const REMEDIES: &'static [&'static str] = &["larger-backlog", "faster-accept", "both"];
    /// In a fresh client namespace: the baseline left thousands of its ports in TIME_WAIT,
    /// which slows the port search of connect() (`__inet_hash_connect`).
    const FIX: &'static [&'static str] = &["both"];

    fn config(&self) -> &Config {
        &self.0
    }

    fn baseline(&self) -> (String, Listener) {
        let cfg = &self.0;
        (
            format!(
                "before: {} acceptor thread(s), backlog {}",
                cfg.server_threads, cfg.backlog
            ),
            Listener::new(cfg.server_threads, cfg.backlog),
        )
    }

    fn run(
        &mut self,
        common: &Common,
        tag: &'static str,
        label: &str,
        l: &Listener,
        stop: &AtomicBool,
    ) -> Result<Ran<ProbeRun>> {
        let load = (self.0.duration_ms, self.0.concurrency);
        harness::probe_listener(common, (tag, label), *l, load, stop)
    }

    /// The harm: connection requests the full accept queue turned away
    /// (`TcpExtListenOverflows` of the server namespace).
    fn harm(&self, run: &ProbeRun) -> Harm {
        Harm::count(
            run.server_counter("TcpExtListenOverflows").max(0) as u64,
            "accept-queue overflows (TcpExtListenOverflows)",
        )
    }

    /// Whether a run reproduced the overflow: connection requests the full accept queue turned
    /// away, as the listener's namespace counted them (`TcpExtListenOverflows`) and as the eBPF
    /// trace saw the kernel drop them; the cost is the connects that waited on the SYN ladder.
    fn reproduction(&self, run: &ProbeRun) -> Reproduction {
        let mut signature = vec![Event::new(
            run.server_counter("TcpExtListenOverflows").max(0) as u64,
            "connection requests turned away by the full accept queue",
            "server TcpExtListenOverflows",
        )];
        if let Some(h) = run.trace.harm(Pathology::AcceptQueueOverflow) {
            signature.push(Event::new(h.amount as u64, h.what, "eBPF trace"));
        }
        Reproduction::of(
            &run.label,
            Pathology::AcceptQueueOverflow,
            signature,
            run.tried(),
            || super::syn_drop::ladder_wait(run),
            None,
        )
    }

    fn remedy(&mut self, name: &str, _base: &ProbeRun) -> Result<Remedy<Listener>> {
        let cfg = &self.0;
        let c = cfg.concurrency;
        let zero = |formula: String| {
            Prediction::count(formula, "0 accept-queue overflows", 0.0, "overflows")
        };
        let (label, threads, backlog, prediction, changes) = match name {
            "larger-backlog" => (
                "backlog 4096".to_string(),
                cfg.server_threads,
                4096,
                zero(format!(
                    "an accept queue of 4096 (listen backlog, capped by net.core.somaxconn = 4096) holds all {c} concurrent clients: a completed handshake always finds a slot"
                )),
                format!("listen(4096) instead of listen({})", cfg.backlog),
            ),
            "faster-accept" => (
                format!("8 acceptor threads, backlog {}", cfg.backlog),
                8,
                cfg.backlog,
                Prediction {
                    formula: format!(
                        "8 threads take connections 8 times as fast, but the queue still holds backlog + 1 = {} (sk_acceptq_is_full): a burst of more than 8 + {} handshakes from {c} clients still overflows",
                        cfg.backlog + 1,
                        cfg.backlog + 1
                    ),
                    effect: "fewer overflows, not none".into(),
                    value: None,
                    unit: "overflows".into(),
                    tolerance: None,
                    noise: "how often the 8 threads are all busy is not modelled".into(),
                },
                format!("8 acceptor threads instead of {}", cfg.server_threads),
            ),
            "both" => (
                "8 acceptor threads, backlog 4096".to_string(),
                8,
                4096,
                zero(format!(
                    "a 4096 queue holds all {c} clients and 8 threads drain it"
                )),
                format!(
                    "8 acceptor threads and listen(4096) (baseline: {} and {})",
                    cfg.server_threads, cfg.backlog
                ),
            ),
            other => return Err(driver::unknown(other, "an accept-overflow")),
        };
        Ok(Remedy {
            label,
            variant: Listener::new(threads, backlog),
            prediction: Ok(prediction),
            changes,
        })
    }

    fn measured(&self, _name: &str, run: &ProbeRun, _base: &ProbeRun) -> Measured {
        let overflows = run.server_counter("TcpExtListenOverflows").max(0) as u64;
        Measured {
            text: format!(
                "{} connects, {} accept-queue overflows, {} SYN retransmissions; p99 connect {:.0} ms",
                tcpdoctor_model::units::thousands(run.summary.requests),
                tcpdoctor_model::units::thousands(overflows),
                run.client_counter("TcpExtTCPSynRetrans"),
                run.p99_ms("connect")
            ),
            value: Some(overflows as f64),
        }
    }

    fn tail(&self, base: &ProbeRun, _rows: &[Row<ProbeRun>]) -> Tail<super::NoFacts> {
        let cfg = &self.0;
        let ladder = tcpdoctor_probe::ladder::cost(&base.summary, None);
        let notes = vec![
            format!(
                "The accept queue holds backlog + 1 completed connections (sk_acceptq_is_full compares with >); when it is full the kernel drops the SYN (or the final ACK), and the client resends on its SYN ladder: {} ms.",
                super::listed(&ladder.ladder_ms)
            ),
            format!(
                "Baseline: {} overflows (server TcpExtListenOverflows), {} SYN retransmissions on the client.",
                base.server_counter("TcpExtListenOverflows"),
                base.client_counter("TcpExtTCPSynRetrans")
            ),
        ];
        let baseline_label = format!(
            "{} acceptor thread(s), listen backlog {}, {} concurrent clients, {} s",
            cfg.server_threads,
            cfg.backlog,
            cfg.concurrency,
            cfg.duration_ms / 1000
        );
        Tail {
            syn_ladder: Some(ladder),
            ..Tail::new(baseline_label, notes)
        }
    }
}
