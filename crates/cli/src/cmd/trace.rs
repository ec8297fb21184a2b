//! `tcpdoctor trace`: live TCP events from the kernel (eBPF), each attributed to its cause,
//! with a rolling summary and findings at the end. Flags, the polling loop and wiring: the
//! tracing, the attribution and the printing (`tcpdoctor_trace::render`) live in
//! `tcpdoctor_trace`.

use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use tcpdoctor_trace::attribute::{Config, EventFilter, Line};
use tcpdoctor_trace::connections::Connection;
use tcpdoctor_trace::raw::Counter;
use tcpdoctor_trace::render::{self, SummaryLine};
use tcpdoctor_trace::repeats::Repeats;
use tcpdoctor_trace::session::{Netns, Options, Scope, Session};

use crate::output;

/// The long help of `tcpdoctor trace --help`.
const ABOUT: &str = "\
What it does: attaches to the kernel's TCP tracepoints with eBPF (tcp_retransmit_skb,
tcp_retransmit_synack, tcp_send_reset, tcp_receive_reset, inet_sock_set_state, kfree_skb
with its drop reason, tcp_probe) and prints one line per event worth attributing, with the
process, the network namespace, the 4-tuple, the cause and the kernel's evidence:
  stale_ack_race        a SYN answered by an ACK of the previous connection on its 4-tuple,
                        which this end had closed with a reset the peer never processed
                        (the peer's old socket an orphaned FIN_WAIT2 mini-socket); the SYN
                        is reset and resent
  time_wait_collision   the same, the peer holding that connection in TIME_WAIT
  old_ack               the same, how the old connection ended not traced
  fin_wait2_refused_syn / time_wait_refused_syn
                        the server's view: its timewait mini-socket refused the SYN, in
                        substate FIN_WAIT2 (a stale-ACK race) or TIME_WAIT (a collision)
  syn_dropped / accept_queue_full / syn_lost
                        a SYN resent: dropped (kernel drop reason), refused by a listener
                        whose accept queue is full, or unanswered (rung n of the SYN ladder)
  no_local_port         connect() failed with EADDRNOTAVAIL choosing a port: no free local
                        port (per process and destination, with TIME_WAIT toward it and the
                        port range)
  tuple_in_use          connect() from a port bound before it failed with EADDRNOTAVAIL:
                        this host holds that 4-tuple (its own TIME_WAIT: a time_wait_collision
                        refused locally), not port exhaustion
  timeout / tail_loss_probe / fast_retransmit / after_timeout
                        data retransmissions by what sent them; timeouts of 3+ flows into
                        one receiver within 20 ms are reported as incast
  zero_window / not_reading
                        the peer's window closed, or the timer resent into it (sender's
                        view); a zero-window probe reached a socket that is not read (its
                        process is named: the reader; the writer only waits). The slow
                        reader's stall runs from the window closing to the last probe that
                        found it closed, judged as sockets and doctor judge it
  drop                  every TCP packet the kernel dropped, with the reason's name (read
                        from the kernel's BTF); queue drops name their interface. Buffers a
                        closing socket frees with it (QUEUE_PURGE: e.g. the peer's FIN left
                        unread) lose nothing: counted apart as benign, never as drops
Every --every DUR a summary line (counts per cause, lost records); at the end (--duration
or Ctrl-C) the counts, drops per reason and flow, and findings.

Repeats: in the text, events of one process, namespace, cause (and drop reason and state)
print at once for the first 3 destinations of each --every interval; the rest of the
interval are held and printed as one line at its end: N more [on M flows] since T (span,
rate/s); the last: <evidence>. --json keeps every event, one line each, so programs count
them exactly (the final report's counts are exact either way).

Connections (--connections): one line per connection as its socket closes, as bcc's
tcplife prints them: process, local -> remote, opened (connect or accept), payload bytes
sent (acknowledged by the peer) and received, lifetime in ms (from connect(), or from the
handshake's end for an accepted one, to the close of the full socket: a TIME_WAIT that
follows is not counted), and how it ended (closed first, peer closed first, reset sent or
received, timed out, connect failed). Bytes are the kernel's bytes_acked and
bytes_received less the SYN and FINs they count. An accepted connection's process is the
one that closed it, else the one holding its file. Connections opened before the trace
started are not reported. Cost: one record per connection side (see BENCHMARKS.md).

Scope: the network namespace tcpdoctor runs in, or --netns NAME (repeatable), or
--all-netns. Filtering happens in the kernel by namespace. --pid, --comm and --port keep
only events of that process or port.

Needs: root (or CAP_BPF + CAP_PERFMON) and kernel BTF (/sys/kernel/btf/vmlinux); no
tracefs, kernel headers or compiler. Without them: one line naming what is missing, exit 2.
Overhead: a few map operations per connection and one record per attributed event; healthy
connections produce no record. Records the ring buffer had no room for are counted and
printed as lost events, never dropped silently. The kernel skips a hook's program when it is
already running on that CPU (a softirq interrupting it hits the same tracepoint, of this
or any other namespace): those events are in no count, and the report gives their number
per hook (missed_events). The kernel also, rarely, runs no program for an event and counts
no skip (measured: 21 of 3,959 SYN resends in 160 accept-overflow lab runs; 7 of 1,548
retransmissions with another trace starting and stopping every 0.3 s): the SYN and SYN-ACK
resends TcpExtTCPSynRetrans counted in the traced namespaces beyond those traced or skipped
are reported as not_traced {counter: n}, never attributed. The trace also sees a little
past the counters' window (it attaches
before the counters are first read and detaches 50 ms after they are last read): the resends it saw
there are syn_traced_at_edges, so it may count that many more than the counter.

Output fields (--json, JSON Lines): {type: event, t_us, netns, netns_name, process {pid,
comm, source: connect|current|file_descriptor}, local, remote, state, cause, pathology,
evidence, drop_reason}; with --connections {type: connection, t_us, netns, netns_name,
process {pid, comm, source: connect|closer|file_descriptor}, local, remote, opened,
duration_us, tx_bytes, rx_bytes, ended, closed_from, errno}; {type: summary, t_ms, connects, causes, drops, lost_events}; and
last {type: report, schema_version, verdict, findings, duration_ms, netns[] {inode, name,
host}, counts (tcp_drops: drops that lost a packet; benign_drops: buffers freed with their
socket), lost_events, missed_events {hook: n}, not_traced {counter: n}, syn_traced_at_edges,
drops_by_reason, benign_drops_by_reason, summary {causes, drop_reasons, drop_flows, no_local_port,
local_tuple_refusals, incast_episodes, undecoded, filtered_out}, connections
{connections, opened_by_connect, tx_bytes, rx_bytes} (--connections), kernel_counters,
unavailable}. With records lost, counts built from records are lower bounds (at least N);
failed connects and EADDRNOTAVAIL use the kernel's exact counts (counts.connect_failed,
counts.connect_eaddrnotavail).
Exit status 0 healthy, 1 findings, 2 error, 3 nothing measured (no TCP activity seen).

Examples:
  sudo tcpdoctor trace --duration 30s
  sudo tcpdoctor trace --netns tdoc-client --netns tdoc-server --json
  sudo tcpdoctor trace --comm nginx --port 443
  sudo tcpdoctor trace --connections --port 8080
";

/// Trace TCP events live with eBPF and name the cause of each.
#[derive(clap::Args, Debug)]
#[command(after_long_help = ABOUT)]
pub struct Args {
    /// Stop after this long (e.g. 30s); default: until Ctrl-C.
    #[arg(long, value_name = "DUR", value_parser = crate::args::duration)]
    duration: Option<Duration>,
    /// Trace network namespace NAME (/run/netns/NAME); repeat for several.
    #[arg(long, value_name = "NAME", conflicts_with = "all_netns")]
    netns: Vec<String>,
    /// Trace every network namespace.
    #[arg(long)]
    all_netns: bool,
    /// Only events of this process id.
    #[arg(long, value_name = "PID", conflicts_with = "comm")]
    pid: Option<u32>,
    /// Only events of processes with this command name (as in /proc/PID/comm).
    #[arg(long, value_name = "NAME")]
    comm: Option<String>,
    /// Only events with this port at either end (1 to 65535).
    #[arg(long, value_name = "PORT", value_parser = clap::value_parser!(u16).range(1..))]
    port: Option<u16>,
    /// Print JSON Lines (events, summaries, the final report).
    #[arg(long)]
    json: bool,
    /// How often to print the rolling summary.
    #[arg(long, value_name = "DUR", value_parser = crate::args::duration, default_value = "5s")]
    every: Duration,
    /// Print each connection as it closes: lifetime, payload bytes each way, process (as
    /// bcc's tcplife); events are still attributed for the report.
    #[arg(long)]
    connections: bool,
    /// Also write what the trace measured (the kernel's records, the answers of the live
    /// system, the counters' window) to FILE, to be replayed without root
    /// (tests/data/trace/record.sh).
    #[arg(long, value_name = "FILE", hide = true)]
    record: Option<PathBuf>,
    /// Print a recording (--record FILE) again through the same attribution and printers,
    /// without root: no BPF, no namespace, nothing asked of this host. The recording's
    /// filters apply; its repeats are rolled up at the end.
    #[arg(long, value_name = "FILE", hide = true, conflicts_with_all = [
        "record", "netns", "all_netns", "duration", "pid", "comm", "port", "connections",
    ])]
    replay: Option<PathBuf>,
}

/// Flags checked before anything is attached (issue 24: `--duration 0s` traced for 0 s where
/// other commands refuse 0s; `--pid` of no process was accepted and traced nothing with no
/// word said; `--port 0` is refused by its parser).
fn check(args: &Args) -> anyhow::Result<()> {
    if args.every.is_zero() {
        anyhow::bail!("--every: the interval must be above 0");
    }
    if args.duration.is_some_and(|d| d.is_zero()) {
        anyhow::bail!(
            "--duration 0s: the duration must be above 0 (leave it out to trace until Ctrl-C)"
        );
    }
    if let Some(pid) = args.pid {
        if !std::path::Path::new(&format!("/proc/{pid}")).exists() {
            anyhow::bail!(
                "--pid {pid}: no such process; start it first, or trace it by name with --comm"
            );
        }
    }
    Ok(())
}

fn summary_line(session: &Session) -> SummaryLine {
    let counts = session.counts().unwrap_or_default();
    let s = session.summary();
    SummaryLine {
        kind: "summary",
        t_ms: session.elapsed().as_millis() as u64,
        generated_at: output::provenance().generated_at,
        connects: counts.get(&Counter::Connects).copied().unwrap_or(0),
        causes: s
            .causes
            .iter()
            .map(|(c, n)| (c.name().to_string(), *n))
            .collect(),
        drops: s.drop_reasons.clone(),
        lost_events: counts.get(&Counter::Lost).copied().unwrap_or(0),
    }
}

pub fn run(args: Args) -> anyhow::Result<i32> {
    check(&args)?;
    if let Some(path) = &args.replay {
        return replay(path, args.json);
    }
    let scope = if args.all_netns {
        Scope::All
    } else if args.netns.is_empty() {
        Scope::Current
    } else {
        Scope::Named(args.netns.clone())
    };
    let opts = Options {
        scope,
        config: Config {
            filter: EventFilter {
                pid: args.pid,
                comm: args.comm.clone(),
                port: args.port,
            },
            ..Config::default()
        },
        connections: args.connections,
        record: args.record.clone(),
    };
    let mut session = Session::start(opts)?;
    let json = args.json;
    if json {
        // Tells a supervising process (and a person) that the programs are attached.
        eprintln!("tcpdoctor: tracing started");
    } else {
        let scope = Netns::describe_all(session.netns());
        let until = args
            .duration
            .map(|d| format!("for {}", humantime::format_duration(d)))
            .unwrap_or_else(|| "until Ctrl-C".into());
        output::with_stdout(|w| {
            render::header(w, &scope, &until, session.unavailable(), args.connections)
        })?;
    }
    let stop = output::stop_flag();
    let started = Instant::now();
    let mut next_summary = started + args.every;
    let mut printed = 0u64;
    let mut pipe_closed = false;
    // Text rolls repeats up (first at once, the rest one line per interval); JSON keeps
    // every event.
    let mut repeats = Repeats::new();
    loop {
        let done =
            args.duration.is_some_and(|d| started.elapsed() >= d) || stop.load(Ordering::SeqCst);
        let mut lines = session.poll();
        if !json {
            // With --connections the text shows connections only.
            lines.retain(|l| !args.connections && repeats.admit(l));
        }
        let conns = session.take_connections();
        if !pipe_closed && !conns.is_empty() {
            pipe_closed = write_connections(&conns, json).is_err();
        }
        if !pipe_closed && !lines.is_empty() {
            printed += lines.len() as u64;
            let r = write_all(&lines, json);
            pipe_closed = r.is_err();
        }
        let interval_over = Instant::now() >= next_summary;
        if !pipe_closed && (interval_over || done) {
            let ups = repeats.roll_up();
            pipe_closed =
                write_stdout(|w| ups.iter().try_for_each(|r| render::write_roll_up(w, r))).is_err();
        }
        if !pipe_closed && interval_over && !done {
            next_summary += args.every;
            let s = summary_line(&session);
            pipe_closed = write_stdout(|w| render::write_summary(w, &s, json)).is_err();
        }
        if done {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let cut_short =
        stop.load(Ordering::SeqCst) && args.duration.is_some_and(|d| started.elapsed() < d);
    let mut outcome = session.finish();
    let record_error = outcome.record_error.clone();
    // What came while the session settled: printed as every other line was (a recording
    // replays it among them).
    let mut last = std::mem::take(&mut outcome.last_lines);
    if !json {
        last.retain(|l| !args.connections && repeats.admit(l));
    }
    if !pipe_closed && !last.is_empty() {
        printed += last.len() as u64;
        pipe_closed = write_all(&last, json).is_err();
        if !json && !pipe_closed {
            let ups = repeats.roll_up();
            pipe_closed =
                write_stdout(|w| ups.iter().try_for_each(|r| render::write_roll_up(w, r))).is_err();
        }
    }
    if !pipe_closed && !outcome.last_connections.is_empty() {
        // A closed pipe ends the output; the report below meets the same error.
        let _ = write_connections(&outcome.last_connections, json);
    }
    let code = print_report(outcome, printed, cut_short, json)?;
    if let Some(e) = record_error {
        anyhow::bail!("{e}");
    }
    Ok(code)
}

/// The final report, as JSON or text; returns the exit code its verdict gives.
fn print_report(
    outcome: tcpdoctor_trace::session::Outcome,
    printed: u64,
    cut_short: bool,
    json: bool,
) -> anyhow::Result<i32> {
    let report = render::report(outcome, printed, cut_short);
    if json {
        output::json_line(&report)?;
    } else {
        output::with_stdout(|w| render::text(w, &report))?;
    }
    Ok(report.verdict.exit_code())
}

/// `--replay FILE`: a recording printed as the live run printed it: its events (in the text,
/// repeats rolled up at the end), its connections, then the report.
fn replay(path: &Path, json: bool) -> anyhow::Result<i32> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| anyhow::anyhow!("--replay {}: {e}", path.display()))?;
    let r = tcpdoctor_trace::recording::replay(&text)
        .map_err(|e| anyhow::anyhow!("--replay {}: {e}", path.display()))?;
    let connections = r.header.connections;
    if !json {
        let scope = Netns::describe_all(&r.header.netns);
        output::with_stdout(|w| {
            render::header(
                w,
                &scope,
                "(replayed from a recording)",
                &r.outcome.unavailable,
                connections,
            )
        })?;
    }
    let mut lines = r.lines;
    let mut repeats = Repeats::new();
    if !json {
        lines.retain(|l| !connections && repeats.admit(l));
    }
    write_connections(&r.connections, json)?;
    write_all(&lines, json)?;
    if !json {
        let ups = repeats.roll_up();
        write_stdout(|w| ups.iter().try_for_each(|u| render::write_roll_up(w, u)))?;
    }
    let mut outcome = r.outcome;
    // Printed above with the others.
    outcome.last_connections.clear();
    print_report(outcome, lines.len() as u64, false, json)
}

fn write_stdout(f: impl FnOnce(&mut dyn Write) -> io::Result<()>) -> io::Result<()> {
    let stdout = io::stdout();
    let mut w = io::BufWriter::new(stdout.lock());
    f(&mut w)?;
    w.flush()
}

fn write_connections(conns: &[Connection], json: bool) -> io::Result<()> {
    write_stdout(|w| {
        conns
            .iter()
            .try_for_each(|c| render::write_connection(w, c, json))
    })
}

fn write_all(lines: &[Line], json: bool) -> io::Result<()> {
    write_stdout(|w| {
        for l in lines {
            render::write_line(w, l, json)?;
        }
        Ok(())
    })
}
