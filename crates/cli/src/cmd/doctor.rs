//! `tcpdoctor doctor`: the main job. The diagnosis itself (settings audit, socket census,
//! counter window, loopback self-probe, merge) is the `tcpdoctor-doctor` library; this module
//! checks the flags, enters `--netns`, shows progress and wires the report to its printers
//! (`tcpdoctor_doctor::render`).

use std::time::Duration;

use tcpdoctor_doctor::{Config, Probe, TraceMode};

use crate::output;

/// The long help of `tcpdoctor doctor --help` (what it needs, overhead, fields, example).
const ABOUT: &str = r#"Runs, in order: the `check` audit of TCP sysctls and routes; a sock_diag census of every
TCP socket (TIME_WAIT per destination, full accept queues, slow readers, sockets in RTO
backoff; the processes holding them, as `ss -p`), taken at the start and at the end of the
window to see queues grow and zero windows persist, and what limited each busy connection in
the window (the growth of its tcpi_busy_time, tcpi_rwnd_limited and tcpi_sndbuf_limited
between the two censuses: the receiver's window, its reader named; the send buffer; the
network, with its resends; the application); a delta of
the kernel TCP counters over --window (nothing of tcpdoctor's own runs in that window);
and, unless --quick, a bounded loopback self-probe against an embedded server (at most
~1.5 s and 1000 connections) to see whether this kernel stalls short connections. Then
prints the findings, causes first, then the most damaging, each with evidence, explanation and remedies,
and a one-line verdict.

During the window the eBPF trace (as `tcpdoctor trace`) is attached when this host allows
it (root or CAP_BPF + CAP_PERFMON, kernel BTF): each SYN resend, reset, drop and timeout is
attributed to its cause (a stale ACK, a TIME_WAIT collision, a full accept queue, a drop
reason...), and a counter that moved for the same events gives way to the trace's finding,
its delta kept as evidence. Without it (or with --no-trace) the window is observed by the
counters only, and the report says what was missing.

One cause is one finding: a pathology seen by several steps is one finding judged on the
merged impact; a consequence a step proved (connects resending their SYN toward a full
listener of the namespace, or TcpExtTCPSynRetrans when the censuses saw at least as many such
resends) is evidence of its cause; a connection still in an accept queue is the listener's,
never a slow reader; a setting behind harm seen is evidence of it. The verdict counts the
findings above info, as "Findings (N)" does.

Needs: Linux. Root is not required: without it everything runs on this host's network
namespace (--netns needs root). Steps that cannot run are listed under "skipped" with
the reason. Overhead: reads /proc and /sys, two netlink dumps, and the short probe.

Ctrl-C during the window ends it early: the closing census and counters are still read, the
probe is skipped, and the report says what was measured; an interrupted run is never
healthy.

Exit status: 0 healthy (something measured, not interrupted, no finding above info),
1 findings, 2 error, 3 inconclusive (interrupted with nothing above info found). JSON
fields: `steps[]` (`step`, `ran`, `duration_us`, `detail`), `skipped[]` (`step`, `reason`),
`window_ms` (as watched), `window_requested_ms`, `window_source` (trace_and_counters |
counters_only), `trace` (`used`, `missing`: why not, `counts`, `lost_events`, `missed_events`, `causes`,
`syn_resends` per pathology, `drops_by_reason`, `unavailable`), `settings` (as `check`), `sockets` (as
`sockets`), `counters_moved` (nstat name -> delta over the window), `probe` (as `probe`),
`findings[]`.

--html FILE also writes one self-contained page (inline SVG, no script, nothing fetched;
FILE is created before the run): verdict, steps, budgets and settings, the census by state
and the counters that moved over the window as charts (when they hold data), findings.

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
    #[arg(long, default_value = "2s", value_parser = crate::args::duration)]
    pub window: Duration,
    /// Diagnose inside network namespace NAME (from `ip netns list`; needs root).
    #[arg(long, value_name = "NAME")]
    pub netns: Option<String>,
    /// Also write a self-contained HTML report to FILE (created before the run): findings,
    /// verdict, steps, budgets and settings, the census by state and the counters that moved.
    #[arg(long, value_name = "FILE")]
    pub html: Option<std::path::PathBuf>,
    /// Observe the window with the kernel counters only, without the eBPF trace.
    #[arg(long)]
    pub no_trace: bool,
}

pub fn run(args: Args) -> anyhow::Result<i32> {
    if args.window < Duration::from_millis(100) || args.window > Duration::from_secs(600) {
        anyhow::bail!(
            "--window {}: must be between 100ms and 10min",
            humantime::format_duration(args.window)
        );
    }
    let html = crate::html::open(args.html.as_ref())?;
    if let Some(ns) = &args.netns {
        crate::netns::enter(ns)?;
    }
    let cfg = Config {
        window: args.window,
        probe: if args.quick {
            Probe::Skip("--quick".to_string())
        } else {
            Probe::Run
        },
        trace: if args.no_trace {
            TraceMode::Off("--no-trace".to_string())
        } else {
            TraceMode::Auto
        },
        netns: args.netns.clone(),
    };
    let bar = output::progress(None, "doctor");
    let report = tcpdoctor_doctor::diagnose(&cfg, output::stop_flag(), &|m| {
        bar.set_message(m.to_string())
    });
    bar.finish_and_clear();
    let report = report?;
    if let Some(out) = html {
        out.write(&tcpdoctor_doctor::render::html::page(&report))?;
    }
    output::emit(&report, args.json, tcpdoctor_doctor::render::text)
}
