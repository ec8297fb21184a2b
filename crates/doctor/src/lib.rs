//! The diagnosis of one host (or network namespace) behind `tcpdoctor doctor`, as a library
//! that the CLI and a long-running exporter share.
//!
//! [`diagnose`] runs, in order: the settings read; a sock_diag census at the start of the
//! window; the eBPF trace attached when it can be ([`TraceMode::Auto`]: root or CAP_BPF and
//! kernel BTF), so each SYN resend, drop and timeout of the window is attributed to its
//! cause; a counter snapshot; the window itself, in which nothing of tcpdoctor's runs
//! (the trace only reads the kernel's records);
//! a closing counter snapshot and census (with process attribution); the census analysis
//! (the two censuses compared); the settings audit, fed the listener backlogs of the census;
//! the counter delta judged against the host's RTO floor, reconciled with what the trace
//! attributed ([`tcpdoctor_trace::reconcile`]); and, unless skipped, a bounded loopback self-probe. The live
//! findings of one pathology are merged ([`merge`]) and the
//! result is a [`Report`] whose verdict follows from what was measured and whether the run
//! was cut short.
//!
//! It reads the caller's network namespace (enter another one before calling, as `--netns`
//! does) and changes nothing but the loopback self-probe's connections. It does not print:
//! progress goes to a callback, the report to the caller. A step that cannot run is recorded
//! as skipped with the reason; only a run in which no step could run is an [`Error`]. The
//! report's printers (text, HTML) are in [`render`].

pub mod render;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use serde::Serialize;
use tcpdoctor_host::check::{self, Audit, Inputs};
use tcpdoctor_host::counters;
use tcpdoctor_host::sockets::{self, Filter, Summary};
use tcpdoctor_model::{merge, Finding, Measured, Pathology, Report};
use tcpdoctor_report::fmt;
use tcpdoctor_trace::attribute::Cause;
use tcpdoctor_trace::loader::Unavailable;
use tcpdoctor_trace::session::{Options as TraceOptions, Scope, Session};

/// The probe's bounds: short enough for a diagnosis, long enough for a few hundred
/// connections; a 1 s SYN retransmit (the first rung of the ladder) fits in it.
pub const PROBE_DURATION: Duration = Duration::from_millis(1500);
/// At most this many loopback connections, and never more than a tenth of the port range:
/// each leaves a TIME_WAIT socket for 60 s, and the host's own clients need the rest.
pub const PROBE_MAX_CONNECTIONS: u64 = 1000;

/// Errors of a diagnosis.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// Every step was skipped; the reasons, per step.
    #[error("nothing could be examined ({0})")]
    NothingExamined(String),
}

/// Whether the loopback self-probe runs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Probe {
    Run,
    /// Skipped, with the reason recorded in the report (e.g. `--quick`).
    Skip(String),
}

/// Whether the window is observed by the eBPF trace as well as by the counters.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TraceMode {
    /// Trace when this host allows it (root or CAP_BPF + CAP_PERFMON, kernel BTF); else
    /// counters only, with what is missing recorded.
    Auto,
    /// Counters only, with the reason recorded (e.g. `--no-trace`).
    Off(String),
}

/// What to diagnose and how.
#[derive(Clone, Debug)]
pub struct Config {
    /// How long to watch the counters and socket queues.
    pub window: Duration,
    pub probe: Probe,
    pub trace: TraceMode,
    /// The network namespace the caller entered, for the report (`None`: its own).
    pub netns: Option<String>,
}

/// One step of the diagnosis and what it did.
#[derive(Clone, Debug, Serialize)]
pub struct Step {
    pub step: &'static str,
    pub ran: bool,
    pub duration_us: u64,
    pub detail: String,
}

/// A step that did not run, and why.
#[derive(Clone, Debug, Serialize)]
pub struct Skipped {
    pub step: &'static str,
    pub reason: String,
}

/// Which source observed the window.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum WindowSource {
    /// The eBPF trace (each event attributed to its cause) beside the kernel counters.
    TraceAndCounters,
    /// The kernel counters and socket censuses only.
    CountersOnly,
}

/// What the trace saw in the window, or why it did not run.
#[derive(Clone, Debug, Default, Serialize)]
pub struct TraceWindow {
    pub used: bool,
    /// What is missing (privileges, BTF) or why it was turned off, when not used.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub missing: Option<String>,
    pub duration_ms: u64,
    /// Events counted in the kernel (exact, also for records that were lost).
    pub counts: BTreeMap<&'static str, u64>,
    /// Records the ring buffer had no room for (their events are counted, not attributed).
    pub lost_events: u64,
    /// Events the kernel skipped per tracepoint (its program already running on that CPU):
    /// neither counted nor attributed.
    pub missed_events: BTreeMap<String, u64>,
    /// Resends TcpExtTCPSynRetrans counted that the trace did not see and no skip explains.
    pub not_traced: BTreeMap<String, u64>,
    /// SYN and SYN-ACK resends traced at the counters' window's edges (may be outside it).
    #[serde(skip_serializing_if = "tcpdoctor_trace::session::is_zero")]
    pub syn_traced_at_edges: u64,
    /// Attributed events per cause.
    pub causes: BTreeMap<Cause, u64>,
    /// SYN and SYN-ACK resends per pathology they were attributed to.
    pub syn_resends: BTreeMap<Pathology, u64>,
    /// TCP drops per kernel drop-reason name.
    pub drops_by_reason: BTreeMap<String, u64>,
    /// Hooks this kernel could not attach: the evidence they give is missing.
    pub unavailable: Vec<Unavailable>,
}

/// The JSON body of `doctor`.
#[derive(Serialize)]
pub struct Body {
    pub netns: Option<String>,
    pub root: bool,
    /// How long the counters and queues were watched (shorter than asked when interrupted).
    pub window_ms: u64,
    /// The window asked for.
    pub window_requested_ms: u64,
    /// Which source observed the window: the trace with the counters, or counters only.
    pub window_source: WindowSource,
    /// What the trace attributed in the window, or why it did not run.
    pub trace: TraceWindow,
    pub steps: Vec<Step>,
    pub skipped: Vec<Skipped>,
    pub settings: Option<Audit>,
    pub sockets: Option<Summary>,
    pub counters_moved: BTreeMap<String, i64>,
    pub probe: Option<tcpdoctor_probe::Summary>,
}

struct Run<'a> {
    steps: Vec<Step>,
    skipped: Vec<Skipped>,
    found: Vec<Finding>,
    interrupted: bool,
    stop: &'a AtomicBool,
}

impl Run<'_> {
    fn record(&mut self, step: &'static str, start: Instant, detail: String) {
        self.steps.push(Step {
            step,
            ran: true,
            duration_us: start.elapsed().as_micros() as u64,
            detail,
        });
    }

    fn skip(&mut self, step: &'static str, reason: String) {
        self.steps.push(Step {
            step,
            ran: false,
            duration_us: 0,
            detail: reason.clone(),
        });
        self.skipped.push(Skipped { step, reason });
    }

    fn stopped(&self) -> bool {
        self.stop.load(Ordering::SeqCst)
    }
}

/// Sleeps `d` in short steps, draining the trace's records at each; false when `stop` was
/// set.
fn wait(d: Duration, stop: &AtomicBool, mut trace: Option<&mut Session>) -> bool {
    let end = Instant::now() + d;
    while Instant::now() < end {
        if stop.load(Ordering::SeqCst) {
            return false;
        }
        std::thread::sleep((end - Instant::now()).min(Duration::from_millis(50)));
        if let Some(t) = trace.as_deref_mut() {
            let _ = t.poll();
        }
    }
    !stop.load(Ordering::SeqCst)
}

/// Diagnoses the caller's network namespace. `stop` (Ctrl-C) ends the window early: the
/// closing census and counters are still read, the probe is skipped, and the report says what
/// was measured and is marked interrupted. `progress` receives a short message as each step
/// starts.
pub fn diagnose(
    cfg: &Config,
    stop: &AtomicBool,
    progress: &dyn Fn(&str),
) -> Result<Report<Body>, Error> {
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    let mut run = Run {
        steps: Vec::new(),
        skipped: Vec::new(),
        found: Vec::new(),
        interrupted: false,
        stop,
    };
    // What was measured, in order, for the verdict line (also when cut short).
    let mut measured: Vec<String> = Vec::new();

    // 1. Settings. Listener backlogs come from the census below, so the audit runs after it.
    progress("reading settings");
    let t = Instant::now();
    let inputs = match Inputs::read() {
        Ok(i) => Some(i),
        Err(e) => {
            run.skip("check", format!("cannot read settings: {e}"));
            None
        }
    };
    let settings_ms = t.elapsed();

    // 2. Census at the start of the window, counters before.
    progress("socket census");
    let t = Instant::now();
    let census0 = sockets::census(&Filter::default());
    let census_ms = t.elapsed();
    // The trace attaches before the first counter snapshot and detaches after the last, so
    // every event the counters count in the window happened while it was attached.
    let mut tracer = start_trace(&cfg.trace, progress);
    let before = counters::snapshot();

    // 3. The window: nothing of ours runs in it (the trace only drains the kernel's records).
    progress(&format!(
        "watching {} for {}",
        if tracer.is_ok() {
            "traced events, counters and queues"
        } else {
            "counters and queues"
        },
        humantime::format_duration(cfg.window)
    ));
    let t_window = Instant::now();
    let completed = wait(cfg.window, stop, tracer.as_mut().ok());
    let window = t_window.elapsed();
    run.interrupted |= !completed;
    let after = counters::snapshot();
    let mut traced = tracer.map(Session::finish);
    let mut census1 = sockets::census(&Filter::default());
    // Name the processes behind what the later census shows (as `ss -p`).
    if let Ok(c) = &mut census1 {
        sockets::attribute(c);
    }

    // Sockets: the later census, compared with the earlier (Recv-Q growth).
    let (sockets_summary, listeners) = sockets_step(
        &mut run,
        &mut measured,
        (&census0, &census1),
        census_ms,
        window,
        root,
    );

    // Settings audit, now with listener backlogs.
    let (settings, rto_floor) = check_step(&mut run, &mut measured, inputs, listeners, settings_ms);

    // Counters over the window, each timeout judged against the host's RTO floor.
    let moved = counters_step(
        &mut run,
        &mut measured,
        (&before, &after),
        window,
        rto_floor,
        &mut traced,
        &sockets_summary,
    );

    // The trace's step: what it attributed, or what is missing.
    let (window_source, trace) = trace_step(&mut run, &mut measured, traced, window);

    // 4. Loopback self-probe.
    let probe = probe_if_asked(cfg, &mut run, &mut measured, settings.as_ref(), progress);
    run.interrupted |= run.stopped();

    if run.steps.iter().all(|s| !s.ran) {
        let reasons: Vec<String> = run
            .skipped
            .iter()
            .map(|s| format!("{}: {}", s.step, s.reason))
            .collect();
        return Err(Error::NothingExamined(reasons.join("; ")));
    }

    let what = measured_line(&measured, run.interrupted, window, cfg.window);
    let body = Body {
        netns: cfg.netns.clone(),
        root,
        window_ms: window.as_millis() as u64,
        window_requested_ms: cfg.window.as_millis() as u64,
        window_source,
        trace,
        steps: run.steps,
        skipped: run.skipped,
        settings,
        sockets: sockets_summary,
        counters_moved: moved,
        probe,
    };
    // One finding per cause among everything the diagnosis saw, by the rules of
    // [`tcpdoctor_model::merge`]; the exporter serves exactly these findings.
    Ok(Report::new(
        "doctor",
        merge::merge(run.found),
        body,
        Measured::Something(what),
    )
    .interrupted(run.interrupted))
}

/// Attaches the eBPF trace when the mode allows it; the error is why the window is observed
/// by the counters only.
fn start_trace(mode: &TraceMode, progress: &dyn Fn(&str)) -> Result<Session, String> {
    match mode {
        TraceMode::Off(why) => Err(why.clone()),
        TraceMode::Auto => {
            progress("attaching the eBPF trace");
            Session::start(TraceOptions {
                scope: Scope::Current,
                ..TraceOptions::default()
            })
            .map_err(|e| e.to_string())
        }
    }
}

/// The sockets' step of [`diagnose`]: the later census analyzed against the earlier, its
/// findings added to `run`. Returns the summary and the listener backlogs the settings audit
/// needs (none when a census failed, the step then skipped).
fn sockets_step(
    run: &mut Run,
    measured: &mut Vec<String>,
    (census0, census1): (
        &Result<sockets::Census, sockets::Error>,
        &Result<sockets::Census, sockets::Error>,
    ),
    census_ms: Duration,
    window: Duration,
    root: bool,
) -> (Option<Summary>, Vec<check::ListenerBacklog>) {
    let mut sockets_summary = None;
    let mut listeners = Vec::new();
    match (census0, census1) {
        (Ok(c0), Ok(c1)) => {
            let a = sockets::analyze(c1, Some(c0));
            listeners = check::listener_backlogs(&a.summary);
            run.steps.push(Step {
                step: "sockets",
                ran: true,
                duration_us: census_ms.as_micros() as u64,
                detail: format!(
                    "{} socket(s), {} listener(s), {} destination(s); censuses {} apart",
                    a.summary.total_sockets,
                    a.summary.listeners.iter().filter(|l| l.listening).count(),
                    a.summary.destinations.len(),
                    // As measured: the window, and the trace's start and finish around it.
                    fmt::duration(a.summary.interval_ms.map_or(window, Duration::from_millis))
                ),
            });
            run.found.extend(a.findings);
            measured.push(format!(
                "two socket censuses {} apart",
                fmt::duration(a.summary.interval_ms.map_or(window, Duration::from_millis))
            ));
            sockets_summary = Some(a.summary);
        }
        (Err(e), _) | (_, Err(e)) => run.skip(
            "sockets",
            format!("sock_diag census failed: {e}{}", hint(root)),
        ),
    }
    (sockets_summary, listeners)
}

/// The settings' step of [`diagnose`]: the audit of the settings read at the start, now with
/// the census's listener backlogs, its findings added to `run`. Returns the audit and the
/// host's RTO floor (both `None` when the settings could not be read).
fn check_step(
    run: &mut Run,
    measured: &mut Vec<String>,
    inputs: Option<Inputs>,
    listeners: Vec<check::ListenerBacklog>,
    settings_ms: Duration,
) -> (Option<Audit>, Option<Duration>) {
    let mut settings = None;
    let mut rto_floor = None;
    if let Some(mut i) = inputs {
        let t = Instant::now();
        i.listeners = listeners;
        let f = check::audit(&i);
        rto_floor = Some(i.rto_floor());
        measured.insert(0, "the TCP settings".to_string());
        run.steps.push(Step {
            step: "check",
            ran: true,
            duration_us: (settings_ms + t.elapsed()).as_micros() as u64,
            detail: format!(
                "TCP sysctls, {} route(s) with rto_min, {} listener backlog(s) audited",
                i.routes.len(),
                i.listeners.len()
            ),
        });
        run.found.extend(f);
        settings = Some(Audit::new(i));
    }
    (settings, rto_floor)
}

/// The trace's step of [`diagnose`]: what it attributed (its findings added to `run`), or
/// why it did not run. Returns which source observed the window and the trace's record.
fn trace_step(
    run: &mut Run,
    measured: &mut Vec<String>,
    traced: Result<tcpdoctor_trace::session::Outcome, String>,
    window: Duration,
) -> (WindowSource, TraceWindow) {
    match traced {
        Ok(mut o) => {
            run.found.append(&mut o.findings);
            let attributed: u64 = o.summary.causes.values().sum();
            run.steps.push(Step {
                step: "trace",
                ran: true,
                duration_us: o.duration_ms * 1000,
                detail: format!(
                    "eBPF trace of this namespace: {attributed} event(s) attributed to a cause, {} lost, {} skipped by the kernel",
                    o.lost_events,
                    o.missed_events.values().sum::<u64>()
                ),
            });
            measured.push(format!(
                "each TCP event traced (eBPF) over {}",
                fmt::duration(window)
            ));
            (
                WindowSource::TraceAndCounters,
                TraceWindow {
                    used: true,
                    missing: None,
                    duration_ms: o.duration_ms,
                    counts: o.counts,
                    lost_events: o.lost_events,
                    missed_events: o.missed_events,
                    not_traced: o.not_traced,
                    syn_traced_at_edges: o.syn_traced_at_edges,
                    causes: o.summary.causes,
                    syn_resends: o.summary.syn_resends,
                    drops_by_reason: o.drops_by_reason,
                    unavailable: o.unavailable,
                },
            )
        }
        Err(why) => {
            run.skip(
                "trace",
                format!("counters only, events not attributed to causes: {why}"),
            );
            (
                WindowSource::CountersOnly,
                TraceWindow {
                    missing: Some(why),
                    ..TraceWindow::default()
                },
            )
        }
    }
}

/// The loopback self-probe, unless the configuration skips it or the run was interrupted
/// (either recorded as skipped).
fn probe_if_asked(
    cfg: &Config,
    run: &mut Run,
    measured: &mut Vec<String>,
    settings: Option<&Audit>,
    progress: &dyn Fn(&str),
) -> Option<tcpdoctor_probe::Summary> {
    match &cfg.probe {
        Probe::Skip(reason) => {
            run.skip("probe", reason.clone());
            None
        }
        Probe::Run if run.interrupted => {
            run.skip("probe", "interrupted".to_string());
            None
        }
        Probe::Run => {
            progress("loopback self-probe");
            let p = probe_step(run, settings);
            if let Some(s) = &p {
                measured.push(format!("{} loopback connections", s.requests));
            }
            p
        }
    }
}

/// What was measured, for the verdict line; a window cut short says how long was asked for.
fn measured_line(
    measured: &[String],
    interrupted: bool,
    window: Duration,
    requested: Duration,
) -> String {
    if interrupted && window < requested {
        format!(
            "{} (of the {} window asked for)",
            measured.join(", "),
            humantime::format_duration(requested)
        )
    } else {
        measured.join(", ")
    }
}

/// The counters' step of [`diagnose`]: the window's delta, its findings reconciled with the
/// trace's (or, without the trace, with the censuses), the trace's findings then the
/// counters' added to `run`. Returns the counters that moved.
fn counters_step(
    run: &mut Run,
    measured: &mut Vec<String>,
    (before, after): (
        &Result<counters::Snapshot, tcpdoctor_host::Error>,
        &Result<counters::Snapshot, tcpdoctor_host::Error>,
    ),
    window: Duration,
    rto_floor: Option<Duration>,
    traced: &mut Result<tcpdoctor_trace::session::Outcome, String>,
    sockets_summary: &Option<Summary>,
) -> BTreeMap<String, i64> {
    let mut moved = BTreeMap::new();
    match (&before, &after) {
        (Ok(b), Ok(a)) => {
            let d = a.delta_since(b);
            let window_ms = window.as_millis() as u64;
            let w = tcpdoctor_model::counters::Window {
                length: Some(window),
                rto_floor,
            };
            let counted = tcpdoctor_model::counters::findings(&d.changed, w);
            let counted = match traced {
                Ok(o) => {
                    // The trace's own counter window encloses doctor's: the resends it saw
                    // outside doctor's are its edges plus what the kernel counted between the
                    // two windows' ends.
                    let syn = |m: &BTreeMap<String, i64>| {
                        m.get("TcpExtTCPSynRetrans").copied().unwrap_or(0).max(0) as u64
                    };
                    let in_trace_window: u64 = o.kernel_counters.values().map(syn).sum();
                    let at_edges =
                        o.syn_traced_at_edges + in_trace_window.saturating_sub(syn(&d.changed));
                    let seen = tcpdoctor_trace::reconcile::Seen {
                        syn_resends: &o.summary.syn_resends,
                        consequence_resends: &o.summary.consequence_resends,
                        missed: &o.missed_events,
                        unseen: o.not_traced.values().sum(),
                        at_edges,
                    };
                    tcpdoctor_trace::reconcile::counters(
                        counted,
                        &mut o.findings,
                        &seen,
                        &d.changed,
                        w,
                    )
                }
                // Without the trace, the censuses can still show where the resends went.
                Err(_) => match &sockets_summary {
                    Some(sum) => syn_resends_in_the_census(counted, &d.changed, sum),
                    None => counted,
                },
            };
            // Trace findings first: a pathology both saw keeps the trace's attribution as
            // its summary, the counters' evidence added ([`merge`]).
            if let Ok(o) = traced {
                run.found.append(&mut o.findings);
            }
            run.found.extend(counted);
            run.steps.push(Step {
                step: "counters",
                ran: true,
                duration_us: window_ms * 1000,
                detail: format!(
                    "{} counters moved in {}",
                    d.changed.len(),
                    fmt::duration(window)
                ),
            });
            moved = d.changed;
            measured.push(format!(
                "the kernel counters over {}",
                fmt::duration(window)
            ));
        }
        (Err(e), _) | (_, Err(e)) => run.skip("counters", format!("cannot read counters: {e}")),
    }
    moved
}

/// The counters' "SYN retransmitted" finding, without the trace to attribute each resend:
/// when the two censuses (which enclose the counters' window) saw at least as many SYN
/// resends on connects of this namespace toward its own full listeners as
/// `TcpExtTCPSynRetrans` counted, the resends are the overflow's consequence
/// ([`tcpdoctor_model::merge`] folds them into its finding); otherwise the finding stays,
/// with what the censuses did explain as evidence.
fn syn_resends_in_the_census(
    mut counted: Vec<Finding>,
    delta: &BTreeMap<String, i64>,
    sum: &Summary,
) -> Vec<Finding> {
    const SYN: &str = "TcpExtTCPSynRetrans";
    let counter = delta.get(SYN).copied().unwrap_or(0).max(0) as u64;
    let seen: u64 = sum
        .listeners
        .iter()
        .filter(|l| l.full)
        .filter_map(|l| l.syn_resends_between_censuses)
        .sum();
    if counter == 0 || seen == 0 {
        return counted;
    }
    for f in counted
        .iter_mut()
        .filter(|f| f.pathology == Pathology::SynRetransmit)
    {
        let g = f.clone().arithmetic(
            format!(
                "SYN resends the censuses saw on connects toward this namespace's full listeners (their tcpi_retransmits growth), beside {SYN} +{counter} in the window they enclose"
            ),
            seen as f64,
        );
        *f = if seen >= counter {
            g.consequence_of(Pathology::AcceptQueueOverflow)
        } else {
            g
        };
    }
    counted
}

fn hint(root: bool) -> &'static str {
    if root {
        ""
    } else {
        " (not root: some kernels restrict sock_diag to root)"
    }
}

fn probe_step(run: &mut Run, settings: Option<&Audit>) -> Option<tcpdoctor_probe::Summary> {
    // sysfs shows this namespace's interfaces (`--netns` remounts it; `ip netns exec` too).
    if tcpdoctor_host::netdev::is_up("lo") == Some(false) {
        run.skip(
            "probe",
            "the loopback interface lo is down here (ip link set lo up)".to_string(),
        );
        return None;
    }
    let ports = settings.map_or(28_232, |b| {
        u64::from(b.settings.tcp.ip_local_port_range.len())
    });
    let count = PROBE_MAX_CONNECTIONS.min(ports / 10);
    if count < 20 {
        run.skip(
            "probe",
            format!("ip_local_port_range holds only {ports} ports; a probe would take ports the host needs"),
        );
        return None;
    }
    let cfg = tcpdoctor_probe::Config {
        duration: PROBE_DURATION,
        count,
        concurrency: 1,
        ..tcpdoctor_probe::Config::default()
    };
    let start = Instant::now();
    match tcpdoctor_probe::run(&cfg, run.stop, &|_| {}) {
        Ok(r) => {
            let s = &r.summary;
            let connect = s
                .phases
                .iter()
                .find(|p| p.phase == "connect")
                .map(|p| {
                    format!(
                        ", connect p50 {} p99 {}",
                        fmt::micros(p.p50_us),
                        fmt::micros(p.p99_us)
                    )
                })
                .unwrap_or_default();
            run.record(
                "probe",
                start,
                format!(
                    "{} loopback connections to the embedded server ({} failed){connect}, {} slower than {}",
                    s.requests,
                    s.requests_failed,
                    s.spikes.count,
                    fmt::micros(s.spikes.threshold_us)
                ),
            );
            run.interrupted |= r.interrupted;
            run.found.extend(r.findings);
            Some(r.summary)
        }
        Err(e) => {
            run.skip("probe", format!("loopback self-probe failed: {e}"));
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stop_set_before_the_window_cuts_it_short_and_skips_the_probe() {
        let stop = AtomicBool::new(true);
        let cfg = Config {
            window: Duration::from_secs(30),
            probe: Probe::Run,
            trace: TraceMode::Off("test".into()),
            netns: None,
        };
        let t0 = Instant::now();
        let r = diagnose(&cfg, &stop, &|_| {}).expect("steps ran");
        assert!(t0.elapsed() < Duration::from_secs(10));
        assert!(r.interrupted);
        assert_ne!(r.verdict, tcpdoctor_model::Verdict::Healthy);
        let probe = r.body.steps.iter().find(|s| s.step == "probe").unwrap();
        assert_eq!((probe.ran, probe.detail.as_str()), (false, "interrupted"));
        assert!(
            r.verdict_reason.contains("of the 30s window asked for")
                || r.verdict == tcpdoctor_model::Verdict::Findings,
            "{}",
            r.verdict_reason
        );
    }
}
