//! `tcpdoctor doctor`: the main job. Settings audit, socket census, a counter delta over a
//! short window, and a loopback self-probe, merged into one ranked list of findings.
//!
//! Each step that cannot run (no permission, a kernel without a feature) is recorded in
//! `skipped` with the reason, and the others still run; only bad input is an error.

use std::io::{self, Write};
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use serde::Serialize;
use tcpdoctor_host::check::{self, Inputs};
use tcpdoctor_host::counters;
use tcpdoctor_host::sockets::{self, Filter, Summary};
use tcpdoctor_model::{Finding, Measured, Report, Severity, Source};
use tcpdoctor_report::{findings, fmt};

use crate::output;

/// The long help of `tcpdoctor doctor --help` (what it needs, overhead, fields, example).
const ABOUT: &str = r#"Runs, in order: the `check` audit of TCP sysctls and routes; a sock_diag census of every
TCP socket (TIME_WAIT per destination, full accept queues, slow readers, sockets in RTO
backoff; the processes holding them, as `ss -p`), taken at the start and at the end of the
window to see queues grow and zero windows persist; a delta of
the kernel TCP counters over --window (nothing of tcpdoctor's own runs in that window);
and, unless --quick, a bounded loopback self-probe against an embedded server (at most
~1.5 s and 1000 connections) to see whether this kernel stalls short connections. Then
prints the findings most damaging first, each with evidence, explanation and remedies,
and a one-line verdict.

Needs: Linux. Root is not required: without it everything runs on this host's network
namespace (--netns needs root). Steps that cannot run are listed under "skipped" with
the reason. Overhead: reads /proc and /sys, two netlink dumps, and the short probe.

Ctrl-C during the window ends it early: the closing census and counters are still read, the
probe is skipped, and the report says what was measured; an interrupted run is never
healthy.

Exit status: 0 healthy (something measured, not interrupted, no finding above info),
1 findings, 2 error, 3 inconclusive (interrupted with nothing above info found). JSON
fields: `steps[]` (`step`, `ran`, `duration_us`, `detail`), `skipped[]` (`step`, `reason`),
`window_ms` (as watched), `window_requested_ms`, `settings` (as `check`), `sockets` (as
`sockets`), `counters_moved` (nstat name -> delta over the window), `probe` (as `probe`),
`findings[]`.

Example: tcpdoctor doctor ; tcpdoctor doctor --quick --json"#;

/// Diagnose this host: settings, sockets, counters and a loopback self-probe.
#[derive(clap::Args, Debug)]
#[command(after_long_help = ABOUT)]
pub struct Args {
    /// Print JSON instead of text.
    #[arg(long)]
    pub json: bool,
    /// Skip the loopback self-probe.
    #[arg(long)]
    pub quick: bool,
    /// How long to watch the kernel counters and socket queues (e.g. 2s, 500ms).
    #[arg(long, default_value = "2s", value_parser = humantime::parse_duration)]
    pub window: Duration,
    /// Diagnose inside network namespace NAME (from `ip netns list`; needs root).
    #[arg(long, value_name = "NAME")]
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

/// The JSON body of `doctor`.
#[derive(Serialize)]
pub struct Body {
    pub netns: Option<String>,
    pub root: bool,
    /// How long the counters and queues were watched (shorter than asked when interrupted).
    pub window_ms: u64,
    /// The window asked for with --window.
    pub window_requested_ms: u64,
    pub steps: Vec<Step>,
    pub skipped: Vec<Skipped>,
    pub settings: Option<crate::cmd::check::Body>,
    pub sockets: Option<Summary>,
    pub counters_moved: std::collections::BTreeMap<String, i64>,
    pub probe: Option<tcpdoctor_probe::Summary>,
}

/// The probe's bounds: short enough for a diagnosis, long enough for a few hundred
/// connections; a 1 s SYN retransmit (the first rung of the ladder) fits in it.
pub const PROBE_DURATION: Duration = Duration::from_millis(1500);
/// At most this many loopback connections, and never more than a tenth of the port range:
/// each leaves a TIME_WAIT socket for 60 s, and the host's own clients need the rest.
pub const PROBE_MAX_CONNECTIONS: u64 = 1000;

struct Run {
    steps: Vec<Step>,
    skipped: Vec<Skipped>,
    found: Vec<Finding>,
    interrupted: bool,
}

impl Run {
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
}

/// Sleeps `d` in short steps; false when interrupted.
fn wait(d: Duration) -> bool {
    let end = Instant::now() + d;
    while Instant::now() < end {
        if output::interrupted() {
            return false;
        }
        std::thread::sleep((end - Instant::now()).min(Duration::from_millis(50)));
    }
    !output::interrupted()
}

pub fn run(args: Args) -> anyhow::Result<i32> {
    if args.window < Duration::from_millis(100) || args.window > Duration::from_secs(600) {
        anyhow::bail!(
            "--window {}: must be between 100ms and 10min",
            humantime::format_duration(args.window)
        );
    }
    if let Some(ns) = &args.netns {
        crate::netns::enter(ns)?;
    }
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    let bar = output::progress(None, "doctor");
    let mut run = Run {
        steps: Vec::new(),
        skipped: Vec::new(),
        found: Vec::new(),
        interrupted: false,
    };
    // What was measured, in order, for the verdict line (also when cut short).
    let mut measured: Vec<String> = Vec::new();

    // 1. Settings. Listener backlogs come from the census below, so the audit runs after it.
    bar.set_message("reading settings");
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
    bar.set_message("socket census");
    let t = Instant::now();
    let census0 = sockets::census(&Filter::default());
    let census_ms = t.elapsed();
    let before = counters::snapshot();

    // 3. The window: nothing of ours runs in it.
    bar.set_message(format!(
        "watching counters and queues for {}",
        humantime::format_duration(args.window)
    ));
    let t_window = Instant::now();
    let completed = wait(args.window);
    let window = t_window.elapsed();
    run.interrupted |= !completed;
    let after = counters::snapshot();
    let mut census1 = sockets::census(&Filter::default());
    // Name the processes behind what the later census shows (as `ss -p`).
    if let Ok(c) = &mut census1 {
        sockets::attribute(c);
    }

    // Sockets: the later census, compared with the earlier (Recv-Q growth).
    let mut sockets_summary = None;
    let mut listeners = Vec::new();
    match (&census0, &census1) {
        (Ok(c0), Ok(c1)) => {
            let a = sockets::analyze(c1, Some(c0));
            listeners = crate::cmd::check::listener_backlogs(&a.summary);
            run.steps.push(Step {
                step: "sockets",
                ran: true,
                duration_us: census_ms.as_micros() as u64,
                detail: format!(
                    "{} socket(s), {} listener(s), {} destination(s); censuses {} apart",
                    a.summary.total_sockets,
                    a.summary.listeners.iter().filter(|l| l.listening).count(),
                    a.summary.destinations.len(),
                    fmt::duration(window)
                ),
            });
            run.found.extend(a.findings);
            measured.push(format!(
                "two socket censuses {} apart",
                fmt::duration(window)
            ));
            sockets_summary = Some(a.summary);
        }
        (Err(e), _) | (_, Err(e)) => run.skip(
            "sockets",
            format!("sock_diag census failed: {e}{}", hint(root)),
        ),
    }

    // Settings audit, now with listener backlogs.
    let mut settings_body = None;
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
        settings_body = Some(crate::cmd::check::body(i));
    }

    // Counters over the window.
    let mut moved = std::collections::BTreeMap::new();
    match (&before, &after) {
        (Ok(b), Ok(a)) => {
            let d = a.delta_since(b);
            let window_ms = window.as_millis() as u64;
            run.found.extend(tcpdoctor_model::counters::findings(
                &d.changed,
                tcpdoctor_model::counters::Window {
                    length: Some(window),
                    rto_floor,
                },
            ));
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

    // 4. Loopback self-probe.
    let probe = if args.quick {
        run.skip("probe", "--quick".to_string());
        None
    } else if run.interrupted {
        run.skip("probe", "interrupted".to_string());
        None
    } else {
        bar.set_message("loopback self-probe");
        let p = probe_step(&mut run, settings_body.as_ref());
        if let Some(s) = &p {
            measured.push(format!("{} loopback connections", s.requests));
        }
        p
    };
    bar.finish_and_clear();
    run.interrupted |= output::stop_flag().load(Ordering::SeqCst);

    if run.steps.iter().all(|s| !s.ran) {
        let reasons: Vec<String> = run
            .skipped
            .iter()
            .map(|s| format!("{}: {}", s.step, s.reason))
            .collect();
        anyhow::bail!("nothing could be examined ({})", reasons.join("; "));
    }

    let what = if run.interrupted && window < args.window {
        format!(
            "{} (of the {} window asked for)",
            measured.join(", "),
            humantime::format_duration(args.window)
        )
    } else {
        measured.join(", ")
    };
    let body = Body {
        netns: args.netns.clone(),
        root,
        window_ms: window.as_millis() as u64,
        window_requested_ms: args.window.as_millis() as u64,
        steps: run.steps,
        skipped: run.skipped,
        settings: settings_body,
        sockets: sockets_summary,
        counters_moved: moved,
        probe,
    };
    let report = Report::new("doctor", merge(run.found), body, Measured::Something(what))
        .interrupted(run.interrupted);
    output::emit(&report, args.json, |w, r| write_text(w, r))
}

/// One finding per pathology among the live observations (sockets, counters, probe): the
/// census and the counters often see the same problem from two sides (a full accept queue
/// and `TcpExtListenOverflows`), and one finding with both kinds of evidence reads better
/// than two. The impacts merge ([`tcpdoctor_model::Impact::merge`]) and the policy judges
/// the merged impact, so the severity is what the combined evidence earns, never a
/// detector's pick. Settings findings (`check`) stay separate: they describe exposure, not
/// events.
fn merge(found: Vec<Finding>) -> Vec<Finding> {
    let mut out: Vec<Finding> = Vec::with_capacity(found.len());
    for f in found {
        let live = f.source != Source::Check;
        let twin = out
            .iter_mut()
            .find(|g| live && g.source != Source::Check && g.pathology == f.pathology);
        match twin {
            Some(g) => {
                let impact = g.impact.merge(&f.impact);
                let mut merged = g.clone().with_impact(impact);
                merged.summary = format!("{}; {}", g.summary, f.summary);
                merged.evidence.extend(f.evidence);
                *g = merged;
            }
            None => out.push(f),
        }
    }
    out
}

fn hint(root: bool) -> &'static str {
    if root {
        ""
    } else {
        " (not root: some kernels restrict sock_diag to root)"
    }
}

fn probe_step(
    run: &mut Run,
    settings: Option<&crate::cmd::check::Body>,
) -> Option<tcpdoctor_probe::Summary> {
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
    match tcpdoctor_probe::run(&cfg, output::stop_flag(), &|_| {}) {
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

fn write_text(w: &mut dyn Write, r: &Report<Body>) -> io::Result<()> {
    let b = &r.body;
    let where_ = b.netns.as_ref().map_or_else(
        || "this host".to_string(),
        |n| format!("network namespace {n}"),
    );
    writeln!(
        w,
        "tcpdoctor doctor: {where_}{}",
        if b.root {
            ""
        } else {
            " (not root: no step here needs it; --netns would)"
        }
    )?;
    for s in &b.steps {
        if s.ran {
            writeln!(
                w,
                "  {:<9} {} ({})",
                s.step,
                s.detail,
                fmt::micros(s.duration_us)
            )?;
        } else {
            writeln!(w, "  {:<9} skipped: {}", s.step, s.detail)?;
        }
    }
    if let Some(s) = &b.sockets {
        let states: Vec<String> = s.by_state.iter().map(|(k, v)| format!("{k} {v}")).collect();
        if !states.is_empty() {
            writeln!(w, "  sockets by state: {}", states.join(", "))?;
        }
    }
    if r.interrupted {
        writeln!(
            w,
            "  interrupted after {} of the {} window: what follows covers only what was measured",
            fmt::micros(b.window_ms * 1000),
            fmt::micros(b.window_requested_ms * 1000)
        )?;
    }
    writeln!(w)?;
    let (serious, info): (Vec<Finding>, Vec<Finding>) = r
        .findings
        .iter()
        .cloned()
        .partition(|f| f.severity >= Severity::Warning);
    if serious.is_empty() && r.interrupted {
        writeln!(
            w,
            "No problems found in what was measured before the interruption."
        )?;
    } else if serious.is_empty() {
        writeln!(w, "No problems found.")?;
    } else {
        findings::write(w, &serious)?;
    }
    if !info.is_empty() {
        writeln!(w)?;
        writeln!(
            w,
            "Also noted ({}; details with `tcpdoctor check` or --json):",
            info.len()
        )?;
        for f in &info {
            writeln!(w, "  - [{}] {}", f.pathology, f.summary)?;
        }
    }
    writeln!(w)?;
    findings::verdict(w, r)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;
    use tcpdoctor_model::{Impact, Pathology, Rule};

    fn f(p: Pathology, impact: Impact, src: Source, s: &str) -> Finding {
        Finding::new(p, src, s, impact).counter(s, 1)
    }

    #[test]
    fn live_findings_of_one_pathology_merge_settings_stay_apart() {
        let merged = merge(vec![
            // One census: 1 of 40 sockets at a zero window, no stall seen yet (warning).
            f(
                Pathology::SlowReader,
                Impact::stalls(1, Some(40), None),
                Source::Sockets,
                "zero window",
            ),
            f(
                Pathology::SlowReader,
                Impact::none(),
                Source::Check,
                "rmem_max",
            ),
            f(
                Pathology::SynRetransmit,
                Impact::stalls(3, Some(1000), None),
                Source::Counters,
                "syn",
            ),
            // The counters saw zero-window drops for 2 s: the merged impact is judged anew.
            f(
                Pathology::SlowReader,
                Impact::stalls(5, None, Some(Duration::from_secs(2))),
                Source::Counters,
                "drops",
            ),
        ]);
        assert_eq!(merged.len(), 3);
        let sr = &merged[0];
        assert_eq!(sr.source, Source::Sockets);
        assert_eq!(sr.severity, Severity::Critical);
        assert_eq!(sr.severity_rule, Rule::LongStall);
        assert_eq!(sr.impact.affected, 5);
        assert_eq!(sr.summary, "zero window; drops");
        assert_eq!(sr.evidence.len(), 2);
        assert_eq!(merged[1].source, Source::Check);
        assert_eq!(merged[1].severity, Severity::Info);
        // A merge never leaves a severity the policy would not give the merged impact.
        for m in &merged {
            assert_eq!(m.severity, m.impact.severity(), "{m:?}");
        }
    }
}
