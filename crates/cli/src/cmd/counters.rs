//! `tcpdoctor counters`: kernel TCP counters live (snapshot, delta, watch) or from saved
//! `nstat`/`netstat -s` text, each with its meaning and the pathology it signals.

use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use anyhow::Context;
use tcpdoctor_host::check;
use tcpdoctor_host::counters::{self, Snapshot};
use tcpdoctor_host::render::counters as render;
use tcpdoctor_host::saved::{self, Saved};
use tcpdoctor_host::sockets;

use crate::output;

/// The long help of `tcpdoctor counters --help`: needs, overhead, output fields, example.
const ABOUT: &str = "\
What it does: kernel TCP counters (/proc/net/snmp, netstat, snmp6), named as nstat names
them (TcpExtListenOverflows), each relevant one with a one-line meaning and the pathology it
signals. Modes: a snapshot (counts since boot or namespace creation); --interval DUR: the
change over DUR; --watch DUR: a change every DUR until --count or Ctrl-C (Ctrl-C during
--interval reports the change so far, marked interrupted); --from FILE [--to FILE2]: saved
text from a machine tcpdoctor cannot run on: nstat -a, nstat --json, Linux netstat -s,
macOS netstat -s -p tcp, illumos/Solaris netstat -sP tcp (detected; `-` reads standard
input). Counters without an nstat equivalent keep the file's name; lines holding no counter
are reported with their line number, never dropped. Two files must come from the same tool,
the earlier first: a running total that went down (files swapped, or a reboot between
them) is refused, not shown as a negative change. A snapshot judges nothing (its verdict is
inconclusive, exit 3): findings need a change over time.

Needs: Linux /proc (no root; --netns NAME needs CAP_SYS_ADMIN). Overhead: reading three small
/proc files, ~0.1-0.2 ms.

Output fields (JSON): mode (snapshot|delta), source (live|saved), netns, interval_ms,
snapshot_duration_us, counters[] {name, value, delta, rate_per_s, meaning, pathology,
native_name}, unchanged, files[] {path, format, mapped, unmapped, unparsed[] {line, text,
reason}}, rto_floor_us (live: the host's smallest RTO, from tcp_rto_min_us and route
rto_min; each TcpExtTCPTimeouts increment stalled a connection at least that long).
Deltas become findings (source counters), e.g. TcpExtListenOverflows ->
accept_queue_overflow, TcpExtTCPSynRetrans -> syn_retransmit, TcpExtTCPTimeouts (beyond
SYN retransmissions) -> retransmit_timeout, TcpExtTCPToZeroWindowAdv -> slow_reader.
Exit status 0 healthy, 1 findings, 2 error, 3 inconclusive (a snapshot).

Examples:
  tcpdoctor counters --interval 5s
  tcpdoctor counters --all
  tcpdoctor counters --from before.txt --to after.txt --json
  ssh host nstat -a | tcpdoctor counters --from before.txt --to -
";

/// Kernel TCP counters with meanings; deltas become findings.
#[derive(clap::Args, Debug)]
#[command(after_long_help = ABOUT)]
pub struct Args {
    /// Print JSON (with --watch, one report per line).
    #[arg(long)]
    json: bool,
    /// Report the change over this interval (e.g. 2s, 500ms) instead of absolute values.
    #[arg(long, value_name = "DUR", value_parser = crate::args::duration, conflicts_with_all = ["watch", "from"])]
    interval: Option<Duration>,
    /// Report the change every DUR until --count or Ctrl-C.
    #[arg(long, value_name = "DUR", value_parser = crate::args::duration, conflicts_with = "from")]
    watch: Option<Duration>,
    /// With --watch: stop after N reports.
    #[arg(long, value_name = "N", requires = "watch")]
    count: Option<u64>,
    /// Show every counter, not only the relevant TCP ones.
    #[arg(long)]
    all: bool,
    /// Read saved counters from FILE (format detected; `-` for standard input) instead of
    /// this host.
    #[arg(long, value_name = "FILE")]
    from: Option<PathBuf>,
    /// With --from: a later saved snapshot of the same tool (`-` for standard input); the
    /// report is the delta FILE -> FILE2.
    #[arg(long, value_name = "FILE2", requires = "from")]
    to: Option<PathBuf>,
    /// Read the counters of network namespace NAME (/run/netns/NAME).
    #[arg(long, value_name = "NAME", conflicts_with = "from")]
    netns: Option<String>,
}

pub fn run(args: Args) -> anyhow::Result<i32> {
    if args.interval.is_some_and(|d| d.is_zero()) {
        anyhow::bail!("--interval 0s: the interval must be above 0");
    }
    if args.count == Some(0) {
        anyhow::bail!("--count 0: a watch reports at least once");
    }
    if let Some(from) = &args.from {
        return saved_mode(&args, from.clone());
    }
    // One sampler for the whole run: kept-open files are re-read cheaply (host::counters).
    // The RTO floor is read where the counters are: it turns each timeout into a stall.
    let (sampler, rto_floor) = match &args.netns {
        Some(ns) => sockets::in_netns(ns, || {
            let s = counters::Source {
                dir: PathBuf::from("/proc/thread-self/net"),
            }
            .sampler();
            (s, check::rto_floor_here().ok())
        })?,
        None => (
            counters::Source::default().sampler(),
            check::rto_floor_here().ok(),
        ),
    };
    let mut sampler = sampler.context("opening the counter files")?;
    let mut take = || -> anyhow::Result<(Snapshot, Duration)> {
        let t0 = Instant::now();
        let s = sampler.sample().context("reading counters")?;
        Ok((s, t0.elapsed()))
    };
    let stop = output::stop_flag();
    let wait = |d: Duration| {
        let until = Instant::now() + d;
        while Instant::now() < until && !stop.load(Ordering::SeqCst) {
            std::thread::sleep((until - Instant::now()).min(Duration::from_millis(50)));
        }
    };

    if let Some(every) = args.watch {
        if every.is_zero() {
            anyhow::bail!("--watch: the interval must be above 0");
        }
        let (mut before, _) = take()?;
        let mut t_before = Instant::now();
        let mut worst = 0;
        let mut n = 0;
        loop {
            wait(every);
            let (after, took) = take()?;
            let elapsed = t_before.elapsed();
            n += 1;
            let mut report = render::delta_report(
                args.all,
                args.netns.clone(),
                &before,
                &after,
                Some(elapsed),
                rto_floor,
                Vec::new(),
            );
            report.body.sample = Some(n);
            report.body.snapshot_duration_us = Some(took.as_micros() as u64);
            let report = report.interrupted(stop.load(Ordering::SeqCst));
            worst = worst.max(report.verdict.exit_code());
            if args.json {
                output::json_line(&report)?;
            } else {
                output::with_stdout(|w| {
                    writeln!(w, "--- {} ---", n)?;
                    render::text(w, &report, args.all)
                })?;
            }
            before = after;
            t_before = Instant::now();
            if args.count.is_some_and(|c| n >= c) || stop.load(Ordering::SeqCst) {
                break;
            }
        }
        return Ok(worst);
    }

    if let Some(interval) = args.interval {
        let (before, _) = take()?;
        let t0 = Instant::now();
        wait(interval);
        let (after, took) = take()?;
        let mut report = render::delta_report(
            args.all,
            args.netns.clone(),
            &before,
            &after,
            Some(t0.elapsed()),
            rto_floor,
            Vec::new(),
        );
        report.body.snapshot_duration_us = Some(took.as_micros() as u64);
        let report = report.interrupted(stop.load(Ordering::SeqCst));
        return output::emit(&report, args.json, |w, r| render::text(w, r, args.all));
    }

    let (snap, took) = take()?;
    let mut report = render::snapshot_report(args.all, args.netns.clone(), &snap, None, Vec::new());
    report.body.snapshot_duration_us = Some(took.as_micros() as u64);
    output::emit(&report, args.json, |w, r| render::text(w, r, args.all))
}

/// Reads a saved file, or standard input for `-`.
fn read_saved(path: &Path) -> anyhow::Result<Saved> {
    if path.as_os_str() != "-" {
        return Ok(saved::read(path)?);
    }
    Ok(saved::read_from(io::stdin().lock(), Path::new(STDIN))?)
}

/// How standard input is named in errors and in the report.
const STDIN: &str = "(standard input)";

fn shown(path: &Path) -> String {
    if path.as_os_str() == "-" {
        STDIN.to_string()
    } else {
        path.display().to_string()
    }
}

fn saved_mode(args: &Args, from: PathBuf) -> anyhow::Result<i32> {
    if args.to.as_deref().is_some_and(|t| t.as_os_str() == "-") && from.as_os_str() == "-" {
        anyhow::bail!("--from - --to -: standard input can hold only one of the two files");
    }
    let a = read_saved(&from)?;
    let b = match &args.to {
        Some(to) => Some((read_saved(to)?, shown(to))),
        None => None,
    };
    let from_name = shown(&from);
    let report = render::saved_report(
        args.all,
        args.netns.clone(),
        (&a, &from_name),
        b.as_ref().map(|(b, name)| (b, name.as_str())),
    )
    .map_err(anyhow::Error::msg)?;
    output::emit(&report, args.json, |w, r| render::text(w, r, args.all))
}
