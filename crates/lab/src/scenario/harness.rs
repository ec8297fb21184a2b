//! The harness the connection scenarios share (`port-exhaustion`, `syn-drop`,
//! `accept-overflow`, `stale-ack-race`; `timewait-collision` and `slow-reader` use its pair of
//! namespaces with loops of their own): a client and a server namespace joined by a veth,
//! tcpdoctor's embedded server in the server namespace, and `tcpdoctor probe`'s load engine in
//! the client namespace. The diagnosis is probe's: its spike classifier and findings (timer
//! signatures corroborated by the client namespace's counters), plus the findings
//! `model::counters` draws from the server namespace's counter delta (e.g. `ListenOverflows`,
//! which only the server sees).

use std::collections::BTreeMap;
use std::net::{SocketAddr, SocketAddrV4};
use std::path::Path;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use tcpdoctor_model::{Finding, Pathology};
use tcpdoctor_probe::server::{Server, ServerConfig};

use super::driver::Ran;
use super::Common;
use crate::{Error, Result};
use tcpdoctor_sandbox::topo::Lab;
use tcpdoctor_sandbox::traffic::SERVER_PORT;
use tcpdoctor_sandbox::{capture, naming, netns};

/// Client and server namespaces joined by one veth.
pub struct Pair {
    pub lab: Lab,
    pub client: String,
    pub server: String,
    pub server_addr: SocketAddrV4,
    pub client_if: String,
    pub server_if: String,
    client_ip: std::net::Ipv4Addr,
    /// Whether runs in this pair are traced ([`Pair::trace`]).
    pub trace_mode: tcpdoctor_trace::run::Mode,
    /// The CPU the probe's threads run on, when a scenario places them
    /// ([`tcpdoctor_sandbox::traffic::pin_thread`]); `None`: wherever the scheduler puts them.
    pub client_cpu: Option<usize>,
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
            trace_mode: common.trace.clone(),
            client_cpu: None,
        })
    }

    /// Attaches the eBPF trace to this pair's namespaces for run `label` (its own window:
    /// call [`tcpdoctor_trace::run::Tracer::finish`] when the run's traffic has ended).
    pub fn trace(&self, label: &str) -> tcpdoctor_trace::run::Tracer {
        tcpdoctor_trace::run::Tracer::start(&self.trace_mode, label, self.lab.namespaces())
    }

    /// What a run of this pair measured as the driver takes it: `run`, the pair's
    /// namespaces and the capture it kept.
    pub fn ran<R>(&self, run: R, capture: Option<capture::CaptureSummary>) -> Ran<R> {
        Ran {
            run,
            namespaces: self.lab.namespaces().to_vec(),
            capture,
        }
    }

    /// Runs `work` (a run's own loops, up to stopping its capture and servers) with the eBPF
    /// trace attached for run `label` and the counters of both namespaces read around it.
    pub fn measure<T>(&self, label: &str, work: impl FnOnce() -> Result<T>) -> Result<Around<T>> {
        // Attached before the first counter snapshot, detached after the last.
        let tracer = self.trace(label);
        let started = std::time::Instant::now();
        let client_before = netns::counters(&self.client)?;
        let server_before = netns::counters(&self.server)?;
        let out = work()?;
        let client = netns::counters(&self.client)?.delta_since(&client_before);
        let server = netns::counters(&self.server)?.delta_since(&server_before);
        Ok(Around {
            out,
            started,
            client: client.tcp(),
            server: server.tcp(),
            trace: tracer.finish(),
        })
    }

    /// The client's address.
    pub fn client_addr(&self) -> std::net::Ipv4Addr {
        self.client_ip
    }

    /// Starts tcpdump on the client's interface when `--pcap` was given and the run (tagged
    /// `tag`) is the baseline (`""`).
    pub fn capture(&self, common: &Common, tag: &str) -> Result<Option<capture::Capture>> {
        let pcap = common.pcap.as_ref().filter(|_| tag.is_empty());
        pcap.map(|p| {
            capture::Capture::start(&self.client, &self.client_if, "capture", Some(p), "tcp")
        })
        .transpose()
    }

    /// Starts the embedded server answering 64-byte requests with 64 bytes, on `threads`
    /// acceptor threads behind a listen `backlog`.
    pub fn serve_64(&self, threads: usize, backlog: i32) -> Result<Server> {
        let tcp = tcpdoctor_probe::server::Protocol::Tcp {
            request_bytes: 64,
            reply_bytes: 64,
        };
        let mut cfg = ServerConfig::new(self.server_addr.into(), tcp);
        cfg.threads = threads;
        cfg.backlog = backlog;
        self.serve(cfg)
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

/// What [`Pair::measure`] measured around a run's own loops: their result, the TCP counters
/// of each namespace that moved, and what the eBPF trace saw.
pub struct Around<T> {
    pub out: T,
    /// When the trace was attached, before the counters were first read.
    pub started: std::time::Instant,
    pub client: BTreeMap<String, i64>,
    pub server: BTreeMap<String, i64>,
    pub trace: tcpdoctor_trace::run::RunTrace,
}

/// The server of a probe run: the embedded server's acceptor threads and listen backlog,
/// the server namespace's net.core.somaxconn when set, and the share of SYNs nftables drops
/// (percent, [`super::syn_drop::ruleset`]) when set.
#[derive(Clone, Copy, Debug)]
pub struct Listener {
    pub threads: usize,
    pub backlog: i32,
    pub somaxconn: Option<u32>,
    pub drop_percent: Option<u32>,
}

impl Listener {
    /// `threads` acceptor threads behind a listen `backlog`, nothing else changed.
    pub fn new(threads: usize, backlog: i32) -> Listener {
        Listener {
            threads,
            backlog,
            somaxconn: None,
            drop_percent: None,
        }
    }
}

/// One probe run in fresh namespaces tagged `tag`, labelled `label`: `concurrency` clients
/// opening a connection per 64-byte request against `l` for `duration_ms`.
pub fn probe_listener(
    common: &Common,
    (tag, label): (&str, &str),
    l: Listener,
    (duration_ms, concurrency): (u64, usize),
    stop: &AtomicBool,
) -> Result<Ran<ProbeRun>> {
    let pair = Pair::build(common, tag)?;
    if let Some(m) = l.somaxconn {
        pair.lab
            .sysctl(&pair.server, "net.core.somaxconn", &m.to_string())?;
    }
    let server = pair.serve_64(l.threads, l.backlog)?;
    if let Some(pct) = l.drop_percent {
        let rules = super::syn_drop::ruleset(pct, pair.server_addr.port());
        pair.lab.nft(&pair.server, "drop a share of SYNs", &rules)?;
    }
    let cap = pair.capture(common, tag)?;
    let mut pcfg = probe_config(pair.server_addr, Duration::from_millis(duration_ms));
    pcfg.concurrency = concurrency;
    let run = probe(&pair, label, pcfg, stop);
    let capture = stop_capture(cap);
    server.stop();
    Ok(pair.ran(run?, capture?))
}

/// Stops a capture started by [`Pair::capture`]; the summary of the kept file.
pub fn stop_capture(cap: Option<capture::Capture>) -> Result<Option<capture::CaptureSummary>> {
    Ok(cap
        .map(capture::Capture::stop)
        .transpose()?
        .and_then(|s| s.kept()))
}

/// Findings of `tcpdoctor analyze`'s detectors on a capture the lab made. A capture that
/// ends in a damaged record keeps the findings so far.
pub fn analyze_capture(path: &Path) -> Result<Vec<Finding>> {
    let reader = tcpdoctor_capture::reader::Reader::open(path)
        .map_err(|e| Error::invalid(format!("capture {}", path.display()), e.to_string()))?;
    // The same two-thread path as `tcpdoctor analyze`; never stopped early.
    let stop = AtomicBool::new(false);
    let config = tcpdoctor_analyze::Config::default();
    let run = tcpdoctor_analyze::pipeline::run(reader, config, &stop, |_| {});
    Ok(run.analysis.findings)
}

/// One probe run inside the client namespace, with the server namespace's counters.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ProbeRun {
    /// What this run is (`before`, `after: keep-alive`, ...).
    pub label: String,
    /// Probe's summary: phases, errors by errno, spikes by cause, client counters.
    pub summary: tcpdoctor_probe::Summary,
    /// Counters of the server namespace that moved during the run.
    pub server_counters: BTreeMap<String, i64>,
    /// Findings of this run (probe's classifier + server counter findings + the trace's).
    pub findings: Vec<Finding>,
    pub interrupted: bool,
    /// What the eBPF trace saw in this run (in the scenario header's `trace.runs`).
    #[serde(skip)]
    pub trace: tcpdoctor_trace::run::RunTrace,
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

    /// What the run tried: its connects (and requests, when it made more requests than
    /// connects), over its duration.
    pub fn tried(&self) -> tcpdoctor_model::reproduce::Tried {
        let s = &self.summary;
        let what = if s.requests > s.connects_attempted {
            format!(
                "connects ({} requests)",
                tcpdoctor_model::units::thousands(s.requests)
            )
        } else {
            "connects".to_string()
        };
        tcpdoctor_model::reproduce::Tried::new(s.connects_attempted, what, s.elapsed_us / 1000)
    }

    /// Slow connects probe's classifier put down to `cause`: (count, median and longest
    /// slow phase in microseconds).
    pub fn spikes(&self, cause: impl Fn(&tcpdoctor_probe::SpikeCause) -> bool) -> (u64, u64, u64) {
        let groups: Vec<_> = self
            .summary
            .spikes
            .groups
            .iter()
            .filter(|g| cause(&g.cause))
            .collect();
        let count = groups.iter().map(|g| g.count).sum();
        let typical = groups
            .iter()
            .max_by_key(|g| g.count)
            .map(|g| g.typical_phase_us)
            .unwrap_or(0);
        let longest = groups.iter().map(|g| g.max_phase_us).max().unwrap_or(0);
        (count, typical, longest)
    }

    /// The 99th percentile of probe's `phase` (`connect`), milliseconds (0 without it).
    pub fn p99_ms(&self, phase: &str) -> f64 {
        let mut phases = self.summary.phases.iter();
        phases
            .find(|p| p.phase == phase)
            .map_or(0.0, |p| p.p99_us as f64 / 1e3)
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
/// example), each with its own configuration. The server namespace's counter findings and
/// the eBPF trace of the pair's namespaces over this run go to the first run (neither can be
/// split by destination).
pub fn probe_many(
    pair: &Pair,
    label: &str,
    cfgs: Vec<tcpdoctor_probe::Config>,
    stop: &AtomicBool,
) -> Result<Vec<ProbeRun>> {
    let engines = cfgs
        .into_iter()
        .map(|cfg| -> Engine {
            Box::new(move |flag: &AtomicBool| {
                tcpdoctor_probe::run(&cfg, flag, &|_| {}).map_err(|e| Error::Thread {
                    step: "probe".into(),
                    detail: e.to_string(),
                })
            })
        })
        .collect();
    run_engines(pair, label, engines, stop)
}

/// A load engine run on a thread inside the client namespace: probe's, or a scenario's own
/// loop that records probe's [`tcpdoctor_probe::Record`]s ([`result_of`]). It stops early
/// when its flag is set (Ctrl-C).
pub type Engine =
    Box<dyn FnOnce(&AtomicBool) -> Result<tcpdoctor_probe::ProbeResult> + Send + 'static>;

/// [`probe_many`] with any engines: each on its own thread in the client namespace (on the
/// pair's client CPU when one is set), the server's counter findings and the trace going to
/// the first run.
pub fn run_engines(
    pair: &Pair,
    label: &str,
    engines: Vec<Engine>,
    stop: &AtomicBool,
) -> Result<Vec<ProbeRun>> {
    // Attached before the first counter snapshot, detached after the last: every event the
    // counters count in the run happened while the trace was attached.
    let tracer = pair.trace(label);
    let server_before = netns::counters(&pair.server)?;
    let inner = Arc::new(AtomicBool::new(false));
    let mut workers = Vec::new();
    for engine in engines {
        let flag = Arc::clone(&inner);
        let cpu = pair.client_cpu;
        workers.push(netns::spawn(&pair.client, "tdoc-probe", move || {
            if let Some(cpu) = cpu {
                tcpdoctor_sandbox::traffic::pin_thread(cpu)
                    .map_err(|e| Error::io(format!("pin the client to CPU {cpu}"), e))?;
            }
            engine(&flag)
        })?);
    }
    netns::wait(|| workers.iter().all(|w| w.is_finished()), stop, &inner);
    let results: Vec<_> = workers
        .into_iter()
        .map(|w| w.join())
        .collect::<Result<_>>()?;
    let server_delta = netns::counters(&pair.server)?.delta_since(&server_before);
    let server_moved = server_delta.tcp();
    let mut trace = Some(tracer.finish());
    let floor = netns::rto_floor(&pair.server, pair.client_addr())?;
    let mut out = Vec::new();
    for (i, result) in results.into_iter().enumerate() {
        let mut findings = result.findings;
        let run_trace = if i == 0 {
            trace.take().unwrap_or_default()
        } else {
            tcpdoctor_trace::run::RunTrace::default()
        };
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
            tcpdoctor_trace::reconcile::merge_trace_folding_syn_cost(
                &mut findings,
                run_trace.findings.clone(),
                &run_trace,
            );
            tcpdoctor_model::merge::fold_overflow_consequences(&mut findings, &server_moved);
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
            trace: run_trace,
        });
    }
    Ok(out)
}

/// Probe's statistics, spike classifier and findings over `records` that a scenario's own
/// loop made in the calling thread's namespace ([`tcpdoctor_probe::judge`], as probe judges
/// its own loop): `cfg` describes the loop, `delta` is the namespace's counter delta over it,
/// `workers_ns` each loop's wait for a CPU over the run (schedstat; `None`: not read).
/// This namespace's TCP settings and route RTO floor are read here, as probe reads them.
pub fn result_of(
    cfg: &tcpdoctor_probe::Config,
    records: Vec<tcpdoctor_probe::Record>,
    delta: &tcpdoctor_host::counters::Delta,
    elapsed: Duration,
    cpu_wait_us: Option<u64>,
    workers_ns: Vec<Option<u64>>,
    interrupted: bool,
) -> Result<tcpdoctor_probe::ProbeResult> {
    let target = cfg
        .target
        .ok_or_else(|| Error::invalid("loop", "no target"))?;
    let settings = tcpdoctor_host::sysctl::TcpSettings::read().map_err(|source| Error::Host {
        step: "read TCP settings".into(),
        source,
    })?;
    let around = tcpdoctor_probe::Around {
        target,
        settings: &settings,
        route_rto_min: tcpdoctor_host::route::rto_min_for(target.ip())
            .ok()
            .flatten(),
        delta,
        elapsed,
        embedded_server: None,
        ports_toward_target: None,
        cpu_wait_us,
        cpu_waits: tcpdoctor_probe::split::CpuWaits {
            workers_ns,
            embedded_server_ns: None,
            host_some_ns: cpu_wait_us.map(|us| us.saturating_mul(1_000)),
            host_some_series: Vec::new(),
        },
        interrupted,
    };
    Ok(tcpdoctor_probe::judge(cfg, records, around))
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
