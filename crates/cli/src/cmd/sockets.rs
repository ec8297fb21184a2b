//! `tcpdoctor sockets`: the sock_diag census, summarized and diagnosed (`host::sockets`).

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use anyhow::Context;
use tcpdoctor_host::render::sockets::{self as render, Body};
use tcpdoctor_host::sockets::{self, Census, Filter, LastOwners, TcpState};
use tcpdoctor_model::{Measured, Report};
use tcpdoctor_trace::session::{Hooks, Options as TraceOptions, Scope, Session};

use crate::output;

/// The long help of `tcpdoctor sockets --help`: needs, overhead, output fields, example.
const ABOUT: &str = "\
What it does: a census of every TCP socket (IPv4 and IPv6, all states, with tcp_info) through
NETLINK_SOCK_DIAG, not /proc/net/tcp. Counts by state; outgoing sockets grouped by remote
ip:port with TIME_WAIT, ephemeral ports in use and the headroom left in ip_local_port_range
(TIME_WAIT sockets that connect() may reuse under tcp_tw_reuse count as free: toward
loopback with the default tcp_tw_reuse=2, once in TIME_WAIT for tcp_tw_reuse_delay, 1 s);
listeners with accept queue (Recv-Q) vs backlog, and the connections still in that queue
(ESTABLISHED or CLOSE_WAIT without a file: nobody accepted them; the listener's, never a slow
reader); slow readers (a zero window, with how long one census proves it shut: the reader's data
unread since tcpi_last_data_recv, the writer's zero-window probes RTO x (2^backoff - 1); with
--watch also a Recv-Q that grew while data queued at the previous sample stayed unread); sockets in
retransmission backoff (tcpi_retransmits, tcpi_backoff, RTO); busy connections and what
limited each, from the kernel's sending chronographs (tcpi_busy_time, tcpi_rwnd_limited,
tcpi_sndbuf_limited): the receiver's window (its reader named when its socket is in the
census), the send buffer, the network (data in flight, the congestion window or pacing) or the
application (nothing to send), as shares of the window between two --watch samples (one
census: of each connection's busy life, connections active now only). When the in-flight share
is the largest, the sender's state at the censuses names it: data unsent or the congestion
window full is the network's, the buffer full with nothing unsent the send buffer's. A
connection is busy from 100 ms of busy time and 64 KiB moved or queued. Each socket with a file is
attributed to the processes holding it (pid, comm, fd: as `ss -p`, from /proc/PID/fd), so
findings name the listener that is not accepting, the reader that is not reading and the
processes with live sockets toward a destination short of ports; --no-processes skips the scan.
TIME_WAIT sockets have no file and no owner left: only a tracer that watched the close knows
who it was. With --watch (the mode that keeps running) and when tracing is allowed (root or
CAP_BPF + CAP_PERFMON, kernel BTF), sockets attaches one eBPF program (the trace's state-change
hook) for the watched namespace before the first census; it records the process that called
connect() (pid, comm) at each close, and each TIME_WAIT socket whose close it saw is
attributed to that process: per destination, `closed by: comm[pid] N, ...; M unknown` (unknown:
closed before the watch started, said as such, or its record replaced by a later close in the
trace's direct-mapped history table). Connections this host accepted have no connect() owner.
A one-shot census, --no-trace, or no privileges: one line says the last owners are not known
and why, and everything else works as without it.

Needs: Linux with sock_diag (3.3+; tcp_info windows need 5.4/6.2+). No root, except --netns
(CAP_SYS_ADMIN to enter /run/netns/NAME); without root, other users' processes cannot be
inspected and their sockets show no owner (counted). Overhead: one read-only netlink dump;
about 0.5 us of CPU per socket (50 k TIME_WAIT sockets: ~30 ms); the process scan costs one
readlink per open file descriptor on the host (as ss -p). The close trace of --watch costs
the traced connections about 2.4 us of kernel time each (BENCHMARKS.md, trace), and each
census two BPF map reads per TIME_WAIT socket.

Output fields (JSON; units in names): by_state; port_range, ephemeral_ports,
sustainable_connect_rate_per_s (= ports / 60 s TIME_WAIT, per destination); tw_reuse
{tcp_tw_reuse, tcp_timestamps, tcp_tw_reuse_delay_ms}; interval_ms (between samples);
data_sockets; destinations[] {remote, sockets, time_wait, tw_reuse, time_wait_reusable,
ephemeral_ports_in_use, ports_unavailable, headroom_ports, used_percent,
time_wait_rate_per_s, sustainable_connect_rate_per_s, with a trace: closed_by[] {pid, comm,
exited, time_wait_sockets}, closed_by_unknown, closed_by_unknown_before_trace};
last_owners {status: traced | untraced, reason, traced_for_ms, time_wait_sockets, found,
before_trace, lookup_duration_us}; listeners[] {local, listening,
accept_queue, backlog, full, connections, unaccepted {connections, unread_bytes,
closed_by_client, waited_at_least_us}, syn_resent_toward, syn_resends_between_censuses};
slow_readers[] and retransmitting[] {local,
remote, state, sign, recv_q_bytes, send_q_bytes, recv_q_growth_bytes, rcvbuf_bytes,
rcv_wnd_bytes, snd_wnd_bytes, rto_us, backoff, retransmits, stalled_at_least_us, owners};
transfers {span: window | life, busy_floor_us, bytes_floor, without_chronographs, by_limit,
busy[] {local, remote, span, observed_us, busy_us, rwnd_limited_us, sndbuf_limited_us,
in_flight_us, idle_us, limit: receiver_window | send_buffer | network | application, basis:
kernel_time | census_state, limit_share, bytes_acked, bytes_retrans, retrans_segs,
data_segs_out, rto_timeouts, rtt_us, rttvar_us, min_rtt_us, delivery_rate_bytes_per_s,
delivery_rate_app_limited, cwnd_segs, ssthresh_segs, unacked_segs, lost_segs, notsent_bytes,
send_q_bytes, sndbuf_bytes, wmem_queued_bytes, wmem_alloc_bytes, holding[], owners, reader
{local, recv_q_bytes, rcv_wnd_bytes, owners}}}; destinations[].path {sockets, rtt_us_mean,
rtt_us_max, min_rtt_us, busy_us, rwnd_limited_us, sndbuf_limited_us}; owners[] {pid, comm, fd} on
listeners and sockets, processes[] {pid, comm, sockets} on destinations; attribution
{processes_scanned, processes_unreadable, descriptors_scanned, sockets_attributed,
sockets_unattributed, duration_us}; census_duration_us; with --list, sockets[] with tcp_info
(and last_owner {pid, comm, exited} on TIME_WAIT sockets whose close was traced).

Findings (severity from the shared policy): port_exhaustion (half of the range unavailable
toward one destination or more; the share is the budget used), accept_queue_overflow
(Recv-Q > backlog, the kernel's sk_acceptq_is_full: each dropped SYN waits 1 s; the
connects of this namespace resending their SYN toward it are its evidence, one cause one
finding), slow_reader (the stall as one census proves it, or as it persisted between two
samples; the reader's process named as not reading, the writer's as waiting),
retransmit_timeout (the wait its RTO backoff implies), syn_retransmit (other SYN_SENT sockets
that resent their SYN: the rung of this host's SYN ladder reached). From the second --watch
sample, for a limit that held a busy connection 200 ms or more of the window (severity: the
share of the window it held, as time lost): slow_reader (the receiver's window), one finding
with the zero-window signs above; send_buffer_limited (the kernel's sndbuf-limited time, or
the buffer full at both samples); retransmission (network-limited with resends) and
network_latency (srtt 200 ms or more above min_rtt). In a --watch, a finding's explanation
and remedies are printed at the first sample that shows it; later samples print its headline
and evidence (--json repeats everything). Exit status 0 healthy, 1 findings, 2 error.

Examples:
  tcpdoctor sockets
  tcpdoctor sockets --state time-wait --port 443 --json
  tcpdoctor sockets --netns blue --watch 1s --count 10
  tcpdoctor sockets --port 443 --watch 1s --count 2   # what limited each busy transfer
  sudo tcpdoctor sockets --watch 2s    # TIME_WAIT per destination: closed by which process
";

/// Census of TCP sockets through NETLINK_SOCK_DIAG.
#[derive(clap::Args, Debug)]
#[command(after_long_help = ABOUT)]
pub struct Args {
    /// Print JSON (one report; with --watch one report per line).
    #[arg(long)]
    json: bool,
    /// Take a census every INTERVAL (e.g. 500ms, 2s) until --count or Ctrl-C; later samples
    /// also flag sockets whose Recv-Q grew.
    #[arg(long, value_name = "INTERVAL", value_parser = crate::args::duration)]
    watch: Option<Duration>,
    /// With --watch: stop after N samples.
    #[arg(long, value_name = "N", requires = "watch")]
    count: Option<u64>,
    /// Only sockets with this local or remote port, 1-65535 (repeatable, or comma-separated).
    #[arg(long, value_name = "PORT", value_delimiter = ',', value_parser = clap::value_parser!(u16).range(1..))]
    port: Vec<u16>,
    /// Only sockets with a local or remote address in this address or block, e.g.
    /// 127.0.0.1 or 10.0.0.0/8 (repeatable, or comma-separated).
    #[arg(long, value_name = "IP[/BITS]", value_delimiter = ',')]
    address: Vec<tcpdoctor_model::net::IpPrefix>,
    /// Only sockets in this state: kernel names (TIME_WAIT, ESTABLISHED, LISTEN, ...) or
    /// ss names (time-wait, estab, syn-recv); repeatable or comma-separated.
    #[arg(long, value_name = "STATE", value_delimiter = ',')]
    state: Vec<TcpState>,
    /// Look inside network namespace NAME (/run/netns/NAME, as `ip netns` makes).
    #[arg(long, value_name = "NAME")]
    netns: Option<String>,
    /// Rows per table in human output (JSON always has every row).
    #[arg(long, value_name = "N", default_value_t = 10)]
    top: usize,
    /// Also list every socket (with tcp_info) in the output.
    #[arg(long)]
    list: bool,
    /// Do not attribute sockets to processes (skips the scan of /proc/*/fd, and the trace
    /// of closes with --watch).
    #[arg(long)]
    no_processes: bool,
    /// With --watch: do not trace closes (the last owners of TIME_WAIT sockets stay unknown).
    #[arg(long)]
    no_trace: bool,
}

/// The trace of closes that names the last owners of TIME_WAIT sockets, or why there is
/// none. Only a watch keeps running long enough for closes to happen under the trace: a
/// one-shot census sees only sockets that closed before it started.
enum CloseTrace {
    /// No trace, and why.
    Off(String),
    /// Loading and attaching on a helper thread (about 0.2 s, most of it the verifier and
    /// reading the kernel's BTF): the first census does not wait for it.
    Attaching(std::thread::JoinHandle<Result<Session, String>>),
    On(Box<Session>),
}

impl CloseTrace {
    fn start(args: &Args) -> CloseTrace {
        if args.watch.is_none() {
            return CloseTrace::Off("a one-shot census".into());
        }
        if args.count == Some(1) {
            return CloseTrace::Off("a watch of one sample".into());
        }
        if args.no_trace {
            return CloseTrace::Off("--no-trace".into());
        }
        let scope = match &args.netns {
            Some(ns) => Scope::Named(vec![ns.clone()]),
            None => Scope::Current,
        };
        CloseTrace::Attaching(std::thread::spawn(move || {
            Session::start_with(
                TraceOptions {
                    scope,
                    ..TraceOptions::default()
                },
                Hooks::CloseHistory,
            )
            .map_err(|e| e.to_string())
        }))
    }

    /// Names the last owners of the census's TIME_WAIT sockets, or says why it cannot.
    fn attribute(&mut self, census: &mut Census) {
        if matches!(self, CloseTrace::Attaching(h) if h.is_finished()) {
            let CloseTrace::Attaching(h) = std::mem::replace(self, CloseTrace::Off(String::new()))
            else {
                unreachable!("matched above")
            };
            *self = match h.join() {
                Ok(Ok(session)) => CloseTrace::On(Box::new(session)),
                Ok(Err(why)) => CloseTrace::Off(why),
                Err(_) => CloseTrace::Off("the trace's loader thread panicked".into()),
            };
        }
        let reason = match self {
            CloseTrace::On(session) => {
                session.discard_records();
                match session.attribute_time_wait(census) {
                    Ok(()) => return,
                    Err(e) => format!("the trace's history could not be read: {e}"),
                }
            }
            CloseTrace::Attaching(_) => "the trace of closes is still attaching".into(),
            CloseTrace::Off(why) => why.clone(),
        };
        census.last_owners = Some(LastOwners::Untraced { reason });
    }
}

pub fn run(args: Args) -> anyhow::Result<i32> {
    let filter = Filter {
        states: args.state.clone(),
        ports: args.port.clone(),
        addresses: args.address.clone(),
    };
    // Started before the first census: every close from the attachment on is recorded.
    let mut tracer = (!args.no_processes).then(|| CloseTrace::start(&args));
    let take =
        |filter: &Filter, tracer: &mut Option<CloseTrace>| -> anyhow::Result<(Census, Duration)> {
            let t0 = Instant::now();
            let mut c = match &args.netns {
                Some(ns) => sockets::census_in_netns(ns, filter),
                None => sockets::census(filter),
            }
            .context("socket census")?;
            let took = t0.elapsed();
            if !args.no_processes {
                sockets::attribute(&mut c);
            }
            if let Some(t) = tracer.as_mut() {
                t.attribute(&mut c);
            }
            Ok((c, took))
        };

    let Some(interval) = args.watch else {
        let (census, took) = take(&filter, &mut tracer)?;
        let analysis = sockets::analyze(&census, None);
        let body = Body {
            summary: &analysis.summary,
            sample: None,
            census_duration_us: took.as_micros() as u64,
            sockets: args.list.then_some(census.sockets.as_slice()),
        };
        let report = Report::new("sockets", analysis.findings, body, census_taken());
        return output::emit(&report, args.json, |w, r| render::text(w, r, args.top));
    };

    if interval.is_zero() {
        anyhow::bail!("--watch: the interval must be above 0");
    }
    if args.count == Some(0) {
        anyhow::bail!("--count 0: a watch takes at least one sample");
    }
    let stop = output::stop_flag();
    let mut previous: Option<Census> = None;
    // Each finding's explanation and remedies are printed once, at the sample that first
    // shows it; later samples print what changed (headline and evidence).
    let mut explained = tcpdoctor_report::findings::Explained::default();
    let mut worst = 0;
    let mut n = 0u64;
    loop {
        n += 1;
        let (census, took) = take(&filter, &mut tracer)?;
        let analysis = sockets::analyze(&census, previous.as_ref());
        let body = Body {
            summary: &analysis.summary,
            sample: Some(n),
            census_duration_us: took.as_micros() as u64,
            sockets: args.list.then_some(census.sockets.as_slice()),
        };
        let last = args.count.is_some_and(|c| n >= c);
        let report = Report::new("sockets", analysis.findings, body, census_taken())
            .interrupted(stop.load(Ordering::SeqCst));
        worst = worst.max(report.verdict.exit_code());
        if args.json {
            output::json_line(&report)?;
        } else {
            output::with_stdout(|w| {
                writeln!(w, "--- sample {n} ---")?;
                render::text_watch(w, &report, args.top, &mut explained)
            })?;
        }
        previous = Some(census);
        if last || stop.load(Ordering::SeqCst) {
            break;
        }
        // Sleep in small steps so Ctrl-C ends the watch promptly.
        let until = Instant::now() + interval;
        while Instant::now() < until && !stop.load(Ordering::SeqCst) {
            std::thread::sleep((until - Instant::now()).min(Duration::from_millis(50)));
        }
        if stop.load(Ordering::SeqCst) {
            break;
        }
    }
    Ok(worst)
}

/// A census always measures: an empty one says there are no sockets.
fn census_taken() -> Measured {
    Measured::Something("a socket census".into())
}
