//! `port-exhaustion`: a client namespace with a narrowed `ip_local_port_range` and
//! `tcp_tw_reuse=0` opens a new connection per request to one server (file 004). The side that
//! closes first keeps each 4-tuple in TIME_WAIT for 60 s (`TCP_TIMEWAIT_LEN`,
//! include/net/tcp.h), so after one range's worth of connections connect() fails with
//! EADDRNOTAVAIL. `--fix` measures, each in a fresh client namespace, keep-alive (one
//! persistent connection per worker) and `net.ipv4.tcp_tw_reuse=1` (the remedies
//! `keep-alive` and `tw-reuse`).

use std::net::SocketAddrV4;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use tcpdoctor_model::remedy::{Check, Harm, Measured, Prediction, Row, Tolerance, Verdict};
use tcpdoctor_model::reproduce::{Event, Reproduction};
use tcpdoctor_model::units::thousands;
use tcpdoctor_model::{Pathology, PortRange};
use tcpdoctor_probe::server::{Protocol, ServerConfig};
use tcpdoctor_probe::{CloseFirst, Mode};

use super::driver::{self, Ran, Remedy, Scenario, Tail};
use super::harness::{self, Pair, ProbeRun};
use super::{Common, Header, Outcome};
use crate::Result;
use tcpdoctor_sandbox::netns;

#[derive(Clone, Debug, Serialize, Deserialize)]
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

#[derive(Clone, Debug, Serialize, Deserialize)]
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
    #[serde(flatten)]
    pub unfixed: super::Unfixed<Vec<()>>,
}

/// ports / TIME_WAIT (60 s): new connections per second a client with `ports` can sustain
/// to one destination.
pub fn sustainable_per_s(ports: PortRange) -> f64 {
    f64::from(ports.len()) / tcpdoctor_host::sysctl::TIME_WAIT.as_secs_f64()
}

/// Whether a run reproduced port exhaustion: connects that failed with EADDRNOTAVAIL, as
/// probe counted them and as the eBPF trace saw them; the cost is when the range ran out.
pub fn reproduction(run: &ProbeRun) -> Reproduction {
    let signature = signature(run.errors("EADDRNOTAVAIL"), &run.trace);
    let cost = || {
        let first = run
            .summary
            .errors
            .iter()
            .filter(|e| e.errno == "EADDRNOTAVAIL")
            .min_by_key(|e| e.first_at_us)?;
        Some(format!(
            "the range ran out after {} connects, {:.1} s into the run; {} of {} connects failed",
            tcpdoctor_model::units::thousands(first.ok_before_first),
            first.first_at_us as f64 / 1e6,
            tcpdoctor_model::units::thousands(run.errors("EADDRNOTAVAIL")),
            tcpdoctor_model::units::thousands(run.summary.connects_attempted)
        ))
    };
    Reproduction::of(
        &run.label,
        Pathology::PortExhaustion,
        signature,
        run.tried(),
        cost,
        None,
    )
}

/// Port exhaustion's signature: `eaddrnotavail` connects that failed with EADDRNOTAVAIL as
/// probe counted them, and as the eBPF trace saw them when it was used.
fn signature(eaddrnotavail: u64, trace: &tcpdoctor_trace::run::RunTrace) -> Vec<Event> {
    let mut signature = vec![Event::new(
        eaddrnotavail,
        "connects failed with EADDRNOTAVAIL",
        "probe",
    )];
    if trace.used {
        signature.push(Event::new(
            trace.eaddrnotavail,
            "connect() calls failed with EADDRNOTAVAIL",
            "eBPF trace",
        ));
    }
    signature
}

/// TIME_WAIT in whole seconds (`TCP_TIMEWAIT_LEN`).
const TW_S: u64 = 60;

/// Successful connects per second over whole TIME_WAIT periods after the first one: ports
/// freed by TIME_WAIT come back in bursts 60 s after they were taken, so only windows of a
/// whole number of periods average them fairly. Needs a run of at least 121 s.
pub fn measured_steady(run: &ProbeRun) -> Option<f64> {
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

/// One way of running the client: what the baseline does, or a remedy.
#[derive(Clone, Debug)]
pub struct Variant {
    mode: Mode,
    tw_reuse: u8,
    timestamps: bool,
    ports: PortRange,
    close_first: CloseFirst,
    /// Server ports SERVER_PORT.. SERVER_PORT + destinations - 1, one probe per port.
    destinations: u16,
}

impl Variant {
    fn baseline(cfg: &Config) -> Variant {
        Variant {
            mode: Mode::Crr,
            tw_reuse: 0,
            timestamps: true,
            ports: cfg.ports,
            close_first: cfg.close_first,
            destinations: 1,
        }
    }
}

/// The probes of a run (one per destination), the namespaces it used, its capture.
/// Runs `v` in a fresh pair of namespaces tagged `tag` (`""`: the baseline, which may be
/// captured), labelled `label`: one probe per destination port, all at once.
/// Also returns the client namespace's `net.ipv4.tcp_tw_reuse_delay` (milliseconds; `None` on
/// kernels without it).
fn run_variant(
    common: &Common,
    cfg: &Config,
    (tag, label): (&str, &str),
    v: &Variant,
    stop: &AtomicBool,
) -> Result<(Ran<Vec<ProbeRun>>, Option<u64>)> {
    let pair = Pair::build(common, tag)?;
    let reuse_delay_ms = netns::sysctl_u64(&pair.client, "net.ipv4.tcp_tw_reuse_delay")?;
    pair.lab.sysctl(
        &pair.client,
        "net.ipv4.ip_local_port_range",
        &format!("{} {}", v.ports.low, v.ports.high),
    )?;
    pair.lab.sysctl(
        &pair.client,
        "net.ipv4.tcp_tw_reuse",
        &v.tw_reuse.to_string(),
    )?;
    let ts = if v.timestamps { "1" } else { "0" };
    for ns in [&pair.client, &pair.server] {
        pair.lab.sysctl(ns, "net.ipv4.tcp_timestamps", ts)?;
    }
    let mut servers = Vec::new();
    let mut cfgs = Vec::new();
    let per = (cfg.concurrency / usize::from(v.destinations)).max(1);
    for i in 0..v.destinations {
        let addr = SocketAddrV4::new(*pair.server_addr.ip(), pair.server_addr.port() + i);
        let mut scfg = ServerConfig::new(
            addr.into(),
            Protocol::Tcp {
                request_bytes: 64,
                reply_bytes: 64,
            },
        );
        scfg.close_first = v.close_first;
        servers.push(pair.serve(scfg)?);
        let mut pcfg = harness::probe_config(addr, Duration::from_millis(cfg.duration_ms));
        pcfg.mode = v.mode.clone();
        pcfg.concurrency = per;
        pcfg.close_first = v.close_first;
        pcfg.connect_timeout = Duration::from_secs(2);
        cfgs.push(pcfg);
    }
    let cap = pair.capture(common, tag)?;
    let runs = harness::probe_many(&pair, label, cfgs, stop);
    let summary = harness::stop_capture(cap);
    for s in servers {
        s.stop();
    }
    Ok((pair.ran(runs?, summary?), reuse_delay_ms))
}

/// The baseline in a fresh pair of namespaces (one destination: one probe).
pub fn run(s: PortExhaustion, common: &Common, stop: &AtomicBool) -> Result<Outcome<Report>> {
    let o = driver::remedies(s, common, &[], stop)?;
    Ok(o.map(|r| {
        let before = r.baseline.probes.into_iter().next().expect("one probe");
        Report {
            header: r.header,
            computed_sustainable_per_s: sustainable_per_s(r.config.ports),
            config: r.config,
            measured_sustainable_per_s: measured_steady(&before),
            before,
            unfixed: Default::default(),
        }
    }))
}

/// What `--remedies` measured besides the runs.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Facts {
    /// `net.ipv4.tcp_tw_reuse_delay` of the client's namespace (`None`: this kernel has no
    /// such sysctl, and waits 1 s).
    pub tw_reuse_delay_ms: Option<u64>,
}

/// The port range of the `wider-range` remedy: everything above the well-known ports.
pub const WIDE_RANGE: PortRange = PortRange {
    low: 1024,
    high: 65535,
};

/// Destination ports of the `more-destinations` remedy.
pub const DESTINATIONS: u16 = 4;

/// One port-exhaustion run as the remedy table compares it: the probes (one per destination
/// port) and their sums.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct PortRun {
    pub label: String,
    pub probes: Vec<ProbeRun>,
    /// Client port range of this run.
    pub ports: PortRange,
    pub destinations: u16,
    pub requests_ok: u64,
    pub eaddrnotavail: u64,
    /// Other failed requests.
    pub other_failures: u64,
    pub elapsed_us: u64,
    /// Successful connects per second over the run (new connections in crr mode).
    pub connects_ok_per_s: f64,
    pub connections_opened: u64,
    /// Findings of all probes, one per pathology (the worst kept).
    pub findings: Vec<tcpdoctor_model::Finding>,
}

impl PortRun {
    fn of(probes: Vec<ProbeRun>, ports: PortRange, destinations: u16) -> PortRun {
        let sum = |f: &dyn Fn(&ProbeRun) -> u64| probes.iter().map(f).sum::<u64>();
        let eaddrnotavail = sum(&|p| p.errors("EADDRNOTAVAIL"));
        let failed = sum(&|p| p.summary.requests_failed);
        let elapsed_us = probes
            .iter()
            .map(|p| p.summary.elapsed_us)
            .max()
            .unwrap_or(0);
        let opened = sum(&|p| p.summary.connections_opened);
        let mut findings: Vec<tcpdoctor_model::Finding> = Vec::new();
        for f in probes.iter().flat_map(|p| p.findings.iter()) {
            match findings.iter_mut().find(|g| g.pathology == f.pathology) {
                Some(g) if g.severity < f.severity => *g = f.clone(),
                Some(_) => {}
                None => findings.push(f.clone()),
            }
        }
        tcpdoctor_model::finding::rank(&mut findings);
        PortRun {
            label: probes.first().map(|p| p.label.clone()).unwrap_or_default(),
            ports,
            destinations,
            requests_ok: sum(&|p| p.summary.requests_ok),
            eaddrnotavail,
            other_failures: failed.saturating_sub(eaddrnotavail),
            elapsed_us,
            connects_ok_per_s: if elapsed_us > 0 {
                opened as f64 / (elapsed_us as f64 / 1e6)
            } else {
                0.0
            },
            connections_opened: opened,
            findings,
            probes,
        }
    }

    fn measured(&self, value: f64) -> tcpdoctor_model::remedy::Measured {
        tcpdoctor_model::remedy::Measured {
            text: format!(
                "{} connections in {:.1} s ({:.0}/s), {} EADDRNOTAVAIL{}",
                tcpdoctor_model::units::thousands(self.connections_opened),
                self.elapsed_us as f64 / 1e6,
                self.connects_ok_per_s,
                tcpdoctor_model::units::thousands(self.eaddrnotavail),
                if self.other_failures > 0 {
                    format!(", {} other failures", self.other_failures)
                } else {
                    String::new()
                }
            ),
            value: Some(value),
        }
    }
}

/// The connect rate the client asks for: the baseline's connects per second before the
/// first EADDRNOTAVAIL (the ports were all free then), else over the whole run.
fn demand_per_s(base: &ProbeRun) -> f64 {
    let first = base
        .summary
        .errors
        .iter()
        .filter(|e| e.errno == "EADDRNOTAVAIL")
        .map(|e| (e.first_at_us, e.ok_before_first))
        .min();
    match first {
        Some((at_us, ok)) if at_us > 0 && ok > 0 => ok as f64 / (at_us as f64 / 1e6),
        _ => base.summary.connections_per_s,
    }
}

/// Port exhaustion as `--remedies` drives it.
pub struct PortExhaustion {
    cfg: Config,
    /// `net.ipv4.tcp_tw_reuse_delay` of the baseline's client namespace, once it ran.
    reuse_delay_ms: Option<u64>,
}

/// The baseline's arithmetic the predictions rest on.
struct Budget {
    /// Ports of the client's range.
    p: f64,
    /// The run's length, s.
    d_s: f64,
    /// TIME_WAIT, s.
    tw_s: f64,
    /// Connects per second the client asks for ([`demand_per_s`]).
    demand: f64,
    /// The reuse delay of this kernel (net.ipv4.tcp_tw_reuse_delay, 6.13 and later), else
    /// the one second older kernels wait (the timestamp clock's second, tcp_twsk_unique).
    delay_ms: u64,
    delay_s: f64,
}

impl PortExhaustion {
    pub fn new(cfg: Config) -> PortExhaustion {
        PortExhaustion {
            cfg,
            reuse_delay_ms: None,
        }
    }

    fn budget(&self, base: &PortRun) -> Budget {
        let delay_ms = self.reuse_delay_ms.unwrap_or(1000);
        Budget {
            p: f64::from(self.cfg.ports.len()),
            d_s: self.cfg.duration_ms as f64 / 1000.0,
            tw_s: tcpdoctor_host::sysctl::TIME_WAIT.as_secs_f64(),
            demand: demand_per_s(&base.probes[0]),
            delay_ms,
            delay_s: delay_ms as f64 / 1000.0,
        }
    }
}

/// A prediction of 0 EADDRNOTAVAIL.
fn none_fail(formula: String, effect: &str) -> Prediction {
    Prediction::count(formula, effect, 0.0, "EADDRNOTAVAIL")
}

impl driver::Record for PortRun {
    fn label(&self) -> &str {
        &self.label
    }
    fn findings(&self) -> &[tcpdoctor_model::Finding] {
        &self.findings
    }
    /// The first probe's trace (a run has a probe per destination, at least one).
    fn trace(&self) -> &tcpdoctor_trace::run::RunTrace {
        &self.probes[0].trace
    }
    fn trace_mut(&mut self) -> &mut tcpdoctor_trace::run::RunTrace {
        &mut self.probes[0].trace
    }
}

impl Scenario for PortExhaustion {
    type Config = Config;
    type Run = PortRun;
    type Variant = Variant;
    type Facts = Facts;
    const NAME: &'static str = "port-exhaustion";
    const PATHOLOGY: Pathology = Pathology::PortExhaustion;
    const DIAGNOSED_BY: &'static [&'static str] = &[
        "probe's connect errors by errno and its classifier of slow connects (with the kernel counters of the client's namespace)",
        "the kernel counters of the server's namespace",
    ];
    const REMEDIES: &'static [&'static str] = &[
        "keep-alive",
        "tw-reuse",
        "tw-reuse-no-timestamps",
        "wider-range",
        "more-destinations",
        "server-closes-first",
    ];
    const FIX: &'static [&'static str] = &["keep-alive", "tw-reuse"];

    fn config(&self) -> &Config {
        &self.cfg
    }

    fn baseline(&self) -> (String, Variant) {
        let label = "before: new connection per request, tcp_tw_reuse=0";
        (label.into(), Variant::baseline(&self.cfg))
    }

    fn run(
        &mut self,
        common: &Common,
        tag: &'static str,
        label: &str,
        v: &Variant,
        stop: &AtomicBool,
    ) -> Result<Ran<PortRun>> {
        let (ran, reuse_delay_ms) = run_variant(common, &self.cfg, (tag, label), v, stop)?;
        if tag.is_empty() {
            self.reuse_delay_ms = reuse_delay_ms;
        }
        Ok(ran.map(|probes| PortRun::of(probes, v.ports, v.destinations)))
    }

    fn harm(&self, run: &PortRun) -> Harm {
        Harm::count(run.eaddrnotavail, "connects failed with EADDRNOTAVAIL")
    }

    /// Whether this run reproduced port exhaustion: [`reproduction`] over its probes (the
    /// trace is the first probe's).
    /// A run of one probe as [`reproduction`] says it (with when the range ran out); of
    /// several (one per destination), their sums.
    fn reproduction(&self, run: &PortRun) -> Reproduction {
        if let [probe] = run.probes.as_slice() {
            return reproduction(probe);
        }
        let signature = signature(run.eaddrnotavail, driver::Record::trace(run));
        let attempts = run
            .probes
            .iter()
            .map(|p| p.summary.connects_attempted)
            .sum();
        Reproduction::of(
            &run.label,
            Pathology::PortExhaustion,
            signature,
            tcpdoctor_model::reproduce::Tried::new(attempts, "connects", run.elapsed_us / 1000),
            || {
                Some(format!(
                    "{} of {} connects failed",
                    tcpdoctor_model::units::thousands(run.eaddrnotavail),
                    tcpdoctor_model::units::thousands(attempts)
                ))
            },
            None,
        )
    }

    fn remedy(&mut self, name: &str, base: &PortRun) -> Result<Remedy<Variant>> {
        let Budget {
            p,
            d_s,
            tw_s,
            demand,
            delay_s,
            ..
        } = self.budget(base);
        let cfg = &self.cfg;
        let base_v = Variant::baseline(cfg);
        Ok(match name {
            "keep-alive" => Remedy::new(
                "keep-alive: one connection per worker",
                Variant {
                    mode: Mode::Rr,
                    ..base_v
                },
                none_fail(
                    format!(
                        "{} workers x 1 connection = {} local ports held for the whole run, of {p:.0}",
                        cfg.concurrency, cfg.concurrency
                    ),
                    "no connect after the first per worker: 0 EADDRNOTAVAIL",
                ),
                "requests reuse their connection (probe rr mode) instead of one connection each",
            ),
            "tw-reuse" => Remedy::new(
                "tcp_tw_reuse=1",
                Variant {
                    tw_reuse: 1,
                    ..base_v
                },
                Prediction::value(
                    format!(
                        "{p:.0} ports / {delay_s:.3} s (tcp_tw_reuse_delay) = {:.0} connects/s, against a demand of {demand:.0}/s",
                        p / delay_s
                    ),
                    if demand > p / delay_s {
                        "connects succeed at the budget's rate; the rest still fail"
                    } else {
                        "every connect succeeds"
                    },
                    (p / delay_s).min(demand),
                    "connects/s",
                    Tolerance::Relative(0.2),
                    "ports come back on a 1 ms clock, a run's first and last second are partial",
                ),
                "net.ipv4.tcp_tw_reuse=1 in the client namespace (timestamps on at both ends)",
            ),
            "tw-reuse-no-timestamps" => Remedy::new(
                "tcp_tw_reuse=1, timestamps off",
                Variant {
                    tw_reuse: 1,
                    timestamps: false,
                    ..base_v
                },
                Prediction::count(
                    format!(
                        "no timestamp in TIME_WAIT: no reuse before {tw_s:.0} s, so {p:.0} connects per {tw_s:.0} s, as the baseline"
                    ),
                    "no effect: the range is spent once, then EADDRNOTAVAIL",
                    p.min(demand * d_s),
                    "connections"),
                "net.ipv4.tcp_tw_reuse=1 with net.ipv4.tcp_timestamps=0 at both ends",
            ),
            "wider-range" => {
                let wide = f64::from(WIDE_RANGE.len());
                Remedy::new(
                    format!("ip_local_port_range {WIDE_RANGE}"),
                    Variant {
                        ports: WIDE_RANGE,
                        ..base_v
                    },
                    Prediction::value(
                        format!(
                            "{wide:.0} ports / {demand:.0} connects/s = {:.1} s before the first EADDRNOTAVAIL, so max(0, {demand:.0}/s x {d_s:.0} s - {wide:.0}) = {:.0} failures in this run; sustainable {wide:.0} / {tw_s:.0} s = {:.0}/s",
                            wide / demand,
                            (demand * d_s - wide).max(0.0),
                            wide / tw_s
                        ),
                        if wide / demand > d_s {
                            "no EADDRNOTAVAIL within this run; exhaustion postponed, not avoided, while the rate exceeds the sustainable one"
                        } else {
                            "exhaustion postponed, not avoided"
                        },
                        (demand * d_s - wide).max(0.0).round(),
                        "EADDRNOTAVAIL",
                        Tolerance::Relative(0.35),
                        "the demand is read from the baseline's first connects (a lower bound: they include the probe's start); crr rates vary by about a third between runs here",
                    ),
                    format!("net.ipv4.ip_local_port_range = {WIDE_RANGE} ({wide:.0} ports) in the client namespace"),
                )
            }
            "more-destinations" => {
                let k = f64::from(DESTINATIONS);
                Remedy::new(
                    format!("{DESTINATIONS} destination ports"),
                    Variant {
                        destinations: DESTINATIONS,
                        ..base_v
                    },
                    Prediction::value(
                        format!(
                            "{DESTINATIONS} destinations x {p:.0} ports = {:.0} connections before exhaustion (a 4-tuple per destination); sustainable {:.2}/s",
                            k * p,
                            k * p / tw_s
                        ),
                        "the range lasts 4 times as long; exhaustion is postponed, not avoided",
                        (k * p).min(demand * d_s),
                        "connections",
                        Tolerance::Relative(0.05),
                        "a count; one port per destination may stay busy at the end",
                    ),
                    format!(
                        "the server listens on {DESTINATIONS} ports ({}-{}); {DESTINATIONS} clients, one per port, {} worker(s) each",
                        tcpdoctor_sandbox::traffic::SERVER_PORT,
                        tcpdoctor_sandbox::traffic::SERVER_PORT + DESTINATIONS - 1,
                        (cfg.concurrency / usize::from(DESTINATIONS)).max(1)
                    ),
                )
            }
            "server-closes-first" => Remedy::new(
                "server closes first",
                Variant {
                    close_first: CloseFirst::Server,
                    ..base_v
                },
                none_fail(
                    "TIME_WAIT moves to the server; a client port is free once its FIN is acknowledged, and the server takes a newer SYN into its TIME_WAIT (timestamps, tcp_timewait_state_process)".into(),
                    "0 EADDRNOTAVAIL",
                ),
                "the server closes each connection first (client closes after it)",
            ),
            other => return Err(driver::unknown(other, "a port-exhaustion")),
        })
    }

    fn measured(&self, name: &str, run: &PortRun, _base: &PortRun) -> Measured {
        run.measured(match name {
            "keep-alive" | "server-closes-first" | "wider-range" => run.eaddrnotavail as f64,
            "tw-reuse" => run.connects_ok_per_s,
            _ => run.connections_opened as f64,
        })
    }

    fn override_verdict(
        &self,
        name: &str,
        v: &Variant,
        _check: &Check,
        run: &PortRun,
        base: &PortRun,
    ) -> Option<(Verdict, String)> {
        let Budget {
            p,
            tw_s,
            demand,
            delay_s,
            ..
        } = self.budget(base);
        let budget_ports = f64::from(run.ports.len()) * f64::from(run.destinations);
        let sustainable = budget_ports / tw_s;
        if run.eaddrnotavail == 0 {
            // No failure within a short run does not make a rate sustainable: judge the
            // measured rate against ports / TIME_WAIT when new connections still end in
            // the client's TIME_WAIT.
            (v.mode == Mode::Crr
                && v.close_first == CloseFirst::Client
                && v.tw_reuse == 0
                && run.connects_ok_per_s > sustainable)
                .then(|| {
                    (
                        Verdict::Partial,
                        format!(
                            "0 EADDRNOTAVAIL in {:.1} s, but {:.0} connects/s exceed the sustainable {budget_ports:.0} ports / {tw_s:.0} s = {sustainable:.0}/s: the range runs out after {:.0} s",
                            run.elapsed_us as f64 / 1e6,
                            run.connects_ok_per_s,
                            budget_ports / run.connects_ok_per_s
                        ),
                    )
                })
        } else if name == "tw-reuse" && run.connects_ok_per_s > 1.5 * base.connects_ok_per_s {
            Some((
                Verdict::Partial,
                format!(
                    "{:.0} connects/s succeed, the budget of {p:.0} ports / {delay_s:.0} s; {} EADDRNOTAVAIL remain because the demand ({demand:.0}/s) is above it",
                    run.connects_ok_per_s,
                    thousands(run.eaddrnotavail)
                ),
            ))
        } else if run.connections_opened as f64 > 1.5 * base.connections_opened as f64 {
            // Failures counted in a fixed time depend on how fast the client retries; what
            // the remedy changes is how many connections succeed before the range runs out.
            Some((
                Verdict::Partial,
                format!(
                    "{} connections succeeded instead of {} ({:.1}x), then {} EADDRNOTAVAIL: exhaustion postponed, not avoided (sustainable {sustainable:.2}/s)",
                    thousands(run.connections_opened),
                    thousands(base.connections_opened),
                    run.connections_opened as f64 / base.connections_opened.max(1) as f64,
                    thousands(run.eaddrnotavail)
                ),
            ))
        } else {
            Some((
                Verdict::NoEffect,
                format!(
                    "{} connections succeeded (baseline {}), then {} EADDRNOTAVAIL",
                    thousands(run.connections_opened),
                    thousands(base.connections_opened),
                    thousands(run.eaddrnotavail)
                ),
            ))
        }
    }

    fn disagreement_reason(&self, name: &str, run: &PortRun) -> Option<String> {
        let delay_s = self.reuse_delay_ms.unwrap_or(1000) as f64 / 1000.0;
        let p = f64::from(self.cfg.ports.len());
        match name {
            "wider-range" => Some("the connect rate with free ports differs from the baseline's first connects".to_string()),
            "tw-reuse" if run.connects_ok_per_s < p / delay_s * 0.8 => Some("ports were reused later than the delay: the probe's workers retry only after a failure".to_string()),
            _ => None,
        }
    }

    fn tail(&self, base: &PortRun, rows: &[Row<PortRun>]) -> Tail<Facts> {
        let cfg = &self.cfg;
        let Budget {
            p,
            d_s,
            tw_s,
            demand,
            delay_ms,
            ..
        } = self.budget(base);
        let mut notes = vec![
            format!(
                "Demand: {demand:.0} new connections/s to one destination ({} connects before the first EADDRNOTAVAIL, the probe's start-up included: a lower bound).",
                base.probes[0]
                    .summary
                    .errors
                    .iter()
                    .find(|e| e.errno == "EADDRNOTAVAIL")
                    .map(|e| e.ok_before_first)
                    .unwrap_or(base.connections_opened)
            ),
            format!(
                "TIME_WAIT lasts {tw_s:.0} s (TCP_TIMEWAIT_LEN): {p:.0} ports sustain {:.2} new connections/s to one destination.",
                p / tw_s
            ),
            format!(
                "tcp_tw_reuse=1 lets a connect reuse a TIME_WAIT port {delay_ms} ms after the last timestamp received on it (net.ipv4.tcp_tw_reuse_delay; measured here: 1.001-1.012 s), and only when both ends sent timestamps."
            ),
        ];
        if rows.iter().any(|r| r.remedy == "more-destinations") {
            notes.push(format!(
                "more-destinations runs {DESTINATIONS} probes at once (one per server port): the total concurrency is {DESTINATIONS} x max(1, {} / {DESTINATIONS}).",
                cfg.concurrency
            ));
        }
        let baseline_label = format!(
            "new connection per request to one destination, {} ports, tcp_tw_reuse=0, client closes first, {d_s:.0} s",
            cfg.ports.len()
        );
        let facts = Facts {
            tw_reuse_delay_ms: self.reuse_delay_ms,
        };
        Tail::of(baseline_label, notes, facts)
    }
}
