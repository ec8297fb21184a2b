//! `syn-drop`: the server namespace's nftables drops a random share of incoming SYNs
//! (`numgen random mod 100 < PCT`), the classic firewall or overloaded-path source of connects
//! that take exactly a rung of the SYN ladder (1 s, then 2 s, ...; `tcp_syn_linear_timeouts`).
//! `--fix` removes the drop (the remedy `remove-drop`: find and remove the loss) and measures
//! again.

use std::sync::atomic::AtomicBool;

use serde::{Deserialize, Serialize};
use tcpdoctor_model::remedy::{Check, Harm, Measured, Prediction, Row, Tolerance, Verdict};
use tcpdoctor_model::reproduce::{Event, Reproduction};
use tcpdoctor_model::Pathology;

use super::driver::{self, Ran, Remedy, Scenario, Tail};
use super::harness::{self, Listener, ProbeRun};
use super::Common;
use crate::{Error, Result};
use tcpdoctor_sandbox::naming;

#[derive(Clone, Debug, Serialize, Deserialize)]
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

/// A plain run's report: the baseline.
pub type Report = super::Plain<Config, ProbeRun>;

/// What the SYN ladder cost a run's connects: how many waited, typically how long.
pub fn ladder_wait(run: &ProbeRun) -> Option<String> {
    let (n, typical, longest) = run.spikes(|c| {
        matches!(
            c,
            tcpdoctor_probe::SpikeCause::SynRetransmit { .. }
                | tcpdoctor_probe::SpikeCause::AcceptQueueOverflow
        )
    });
    (n > 0).then(|| {
        format!(
            "{} connects waited on the SYN ladder, typically {} (longest {}): this kernel resends a lost SYN after its 1 s initial RTO",
            tcpdoctor_model::units::thousands(n),
            tcpdoctor_report::fmt::micros(typical),
            tcpdoctor_report::fmt::micros(longest)
        )
    })
}

/// The nftables ruleset dropping `pct`% of SYNs to `port`.
pub fn ruleset(pct: u32, port: u16) -> String {
    format!(
        "table inet {t} {{\n  chain input {{\n    type filter hook input priority 0; policy accept;\n    \
         tcp dport {port} tcp flags & (syn | ack) == syn numgen random mod 100 < {pct} counter drop\n  }}\n}}\n",
        t = naming::NFT_TABLE
    )
}

/// The drop share must be 1..=90%.
fn validate(cfg: &Config) -> Result<()> {
    if cfg.drop_percent == 0 || cfg.drop_percent > 90 {
        return Err(Error::invalid(
            format!("--drop-percent {}", cfg.drop_percent),
            "must be 1..=90",
        ));
    }
    Ok(())
}

/// SYN retransmissions per finished connect.
/// SYN resends per connect started: the client namespace's TcpExtTCPSynRetrans counts the
/// resends of connects still in their ladder when the run ended too, so those connects count
/// in the denominator. Dividing by the completed ones only read 0.889 per connect (8 resends,
/// 9 completed) against p / (1 - p) = 0.43 in a 3 s run with 30% of SYNs dropped: a short
/// run's waiting connects hold a large share of its resends.
fn per_connect(run: &ProbeRun) -> f64 {
    let started = run.summary.requests + run.summary.requests_cut;
    run.client_counter("TcpExtTCPSynRetrans").max(0) as f64 / started.max(1) as f64
}

/// Dropped SYNs as `--remedies` drives them.
pub struct SynDrop(pub Config);

impl SynDrop {
    /// The baseline's server: 8 acceptor threads, backlog 4096 (the default somaxconn),
    /// nftables dropping the configured share of SYNs.
    fn base(&self) -> Listener {
        Listener {
            drop_percent: Some(self.0.drop_percent),
            ..Listener::new(8, 4096)
        }
    }

    /// The drop probability of each SYN.
    fn p(&self) -> f64 {
        f64::from(self.0.drop_percent) / 100.0
    }

    /// Each SYN, first or resent, is dropped with probability p: a connect resends
    /// p / (1 - p) SYNs on average (geometric).
    fn expect(&self) -> f64 {
        self.p() / (1.0 - self.p())
    }

    /// Three standard deviations of the mean over `n` connects (variance p / (1 - p)^2).
    fn tolerance(&self, n: u64) -> f64 {
        let p = self.p();
        3.0 * (p / (1.0 - p).powi(2) / n.max(1) as f64).sqrt()
    }
}

impl Scenario for SynDrop {
    type Config = Config;
    type Run = ProbeRun;
    type Variant = Listener;
    type Facts = super::NoFacts;
    const NAME: &'static str = "syn-drop";
    const PATHOLOGY: Pathology = Pathology::SynRetransmit;
    const DIAGNOSED_BY: &'static [&'static str] = &[
        "probe's classifier of slow connects (the SYN ladder from the client namespace's sysctls, TcpExtTCPSynRetrans)",
        "the kernel counters of the server's namespace",
    ];
    const REMEDIES: &'static [&'static str] = &["remove-drop", "larger-backlog", "faster-accept"];
    const FIX: &'static [&'static str] = &["remove-drop"];

    fn config(&self) -> &Config {
        &self.0
    }

    fn validate(&self) -> Result<()> {
        validate(&self.0)
    }

    fn baseline(&self) -> (String, Listener) {
        ("before: nftables drops SYNs".into(), self.base())
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

    /// The harm: SYNs the client had to send again (`TcpExtTCPSynRetrans`).
    fn harm(&self, run: &ProbeRun) -> Harm {
        Harm::count(
            run.client_counter("TcpExtTCPSynRetrans").max(0) as u64,
            "SYN retransmissions (TcpExtTCPSynRetrans)",
        )
    }

    /// Whether a run reproduced dropped SYNs: SYNs the client resent (`TcpExtTCPSynRetrans`), as
    /// the kernel counted them and as the eBPF trace attributed them; the cost is the connects
    /// that waited on the SYN ladder.
    fn reproduction(&self, run: &ProbeRun) -> Reproduction {
        let mut signature = vec![Event::new(
            run.client_counter("TcpExtTCPSynRetrans").max(0) as u64,
            "SYNs resent",
            "client TcpExtTCPSynRetrans",
        )];
        if run.trace.used {
            signature.push(Event::new(
                run.trace.syn_resends_attributed,
                "SYN resends attributed",
                "eBPF trace",
            ));
        }
        Reproduction::of(
            &run.label,
            Pathology::SynRetransmit,
            signature,
            run.tried(),
            || ladder_wait(run),
            None,
        )
    }

    fn remedy(&mut self, name: &str, base: &ProbeRun) -> Result<Remedy<Listener>> {
        let (p, expect) = (self.p(), self.expect());
        let overflows = base.server_counter("TcpExtListenOverflows");
        let untouched = |label: &str, side: Listener, changes: &str| {
            let formula = format!(
                "the SYNs are dropped before the listener sees them (the baseline's accept queue overflowed {overflows} times): each SYN is still lost with p = {p:.2}, so a connect resends p / (1 - p) = {expect:.3} SYNs on average"
            );
            // The tolerance is the remedy run's own noise: `complete` sets it once the run
            // has counted its connects.
            let prediction = Prediction::value(
                formula,
                "no effect: the listener was not the bottleneck",
                expect,
                "SYN retransmissions per connect",
                Tolerance::Absolute(0.0),
                "",
            );
            Remedy::new(label, side, prediction, changes)
        };
        Ok(match name {
            "remove-drop" => Remedy::new(
                "SYN drop removed",
                Listener {
                    drop_percent: None,
                    ..self.base()
                },
                Prediction::count(
                    "no SYN is dropped: 0 retransmissions",
                    "every connect completes on its first SYN",
                    0.0,
                    "SYN retransmissions per connect",
                ),
                "the nftables rule is gone (find and remove the loss: firewall, rate limit, overloaded path)",
            ),
            "larger-backlog" => untouched(
                "somaxconn and listen backlog 65535",
                Listener {
                    backlog: 65535,
                    somaxconn: Some(65535),
                    ..self.base()
                },
                "net.core.somaxconn=65535 in the server namespace and listen(65535) (baseline: 4096)",
            ),
            "faster-accept" => untouched(
                "32 acceptor threads",
                Listener {
                    threads: 32,
                    ..self.base()
                },
                "the server accepts with 32 threads instead of 8",
            ),
            other => return Err(driver::unknown(other, "a syn-drop")),
        })
    }

    /// A remedy that keeps the drop is predicted the baseline's rate, p / (1 - p); what its
    /// run measures scatters with the connects that run started (a geometric count per
    /// connect), not with the baseline's: a 3 s remedy run beside a 10 s baseline scatters
    /// about twice as wide.
    fn complete(
        &self,
        _name: &str,
        prediction: std::result::Result<Prediction, String>,
        run: &ProbeRun,
    ) -> std::result::Result<Prediction, String> {
        let n = run.summary.requests + run.summary.requests_cut;
        // Removing the drop predicts an exact count (0); only the kept drop has noise.
        prediction.map(|p| match p.value {
            Some(v) if v > 0.0 => Prediction {
                tolerance: Some(Tolerance::Absolute(self.tolerance(n))),
                noise: format!(
                    "three standard deviations of a geometric count over this run's {n} connects"
                ),
                ..p
            },
            _ => p,
        })
    }

    fn measured(&self, _name: &str, run: &ProbeRun, _base: &ProbeRun) -> Measured {
        Measured {
            text: format!(
                "{} connects, {} SYN retransmissions ({:.3} per connect), {} accept-queue overflows; p99 connect {:.0} ms",
                tcpdoctor_model::units::thousands(run.summary.requests),
                run.client_counter("TcpExtTCPSynRetrans"),
                per_connect(run),
                run.server_counter("TcpExtListenOverflows"),
                run.p99_ms("connect")
            ),
            value: Some(per_connect(run)),
        }
    }

    /// SYN retransmission counts depend on how many connects a run made: a remedy that
    /// keeps the drop is judged by the per-connect rate against the baseline's, within the
    /// same noise.
    fn override_verdict(
        &self,
        _name: &str,
        side: &Listener,
        _check: &Check,
        run: &ProbeRun,
        base: &ProbeRun,
    ) -> Option<(Verdict, String)> {
        (side.drop_percent.is_some()
            && (per_connect(run) - per_connect(base)).abs()
                <= self.tolerance(run.summary.requests.min(base.summary.requests)))
        .then(|| {
            (
                Verdict::NoEffect,
                format!(
                    "{:.3} SYN retransmissions per connect (baseline {:.3}): the drops happen before the listener",
                    per_connect(run),
                    per_connect(base)
                ),
            )
        })
    }

    fn tail(&self, base: &ProbeRun, _rows: &[Row<ProbeRun>]) -> Tail<super::NoFacts> {
        let (cfg, p) = (&self.0, self.p());
        let ladder = tcpdoctor_probe::ladder::cost(&base.summary, Some(p));
        let notes = vec![
            format!(
                "nftables drops each SYN to the server with probability p = {p:.2} (numgen random mod 100 < {}); the baseline: {:.3} SYN retransmissions per connect (predicted p / (1 - p) = {:.3}).",
                cfg.drop_percent,
                per_connect(base),
                self.expect()
            ),
            format!(
                "SYN ladder of the client namespace: retransmissions at {} ms after the first SYN (model::timers); a connect whose first SYN is lost waits the first rung.",
                super::listed(&ladder.ladder_ms)
            ),
        ];
        let baseline_label = format!(
            "nftables drops {}% of SYNs; 8 acceptor threads, backlog 4096; {} concurrent clients, {} s",
            cfg.drop_percent,
            cfg.concurrency,
            cfg.duration_ms / 1000
        );
        Tail {
            syn_ladder: Some(ladder),
            ..Tail::new(baseline_label, notes)
        }
    }
}
