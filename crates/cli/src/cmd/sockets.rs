//! `tcpdoctor sockets`: the sock_diag census, summarized and diagnosed (`host::sockets`).

use std::io::{self, Write};
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use anyhow::Context;
use serde::Serialize;
use tcpdoctor_host::sockets::{self, Census, Filter, Socket, Summary, TcpState};
use tcpdoctor_model::{Measured, Report};
use tcpdoctor_report::{findings, fmt, table};

use crate::output;

/// The long help of `tcpdoctor sockets --help`: needs, overhead, output fields, example.
const ABOUT: &str = "\
What it does: a census of every TCP socket (IPv4 and IPv6, all states, with tcp_info) through
NETLINK_SOCK_DIAG, not /proc/net/tcp. Counts by state; outgoing sockets grouped by remote
ip:port with TIME_WAIT, ephemeral ports in use and the headroom left in ip_local_port_range
(TIME_WAIT sockets that connect() may reuse under tcp_tw_reuse count as free: toward
loopback with the default tcp_tw_reuse=2, once in TIME_WAIT for tcp_tw_reuse_delay, 1 s);
listeners with accept queue (Recv-Q) vs backlog; slow readers (a zero window; with --watch
also a Recv-Q that grew while data queued at the previous sample stayed unread); sockets in
retransmission backoff (tcpi_retransmits, tcpi_backoff, RTO). Each socket with a file is
attributed to the processes holding it (pid, comm, fd: as `ss -p`, from /proc/PID/fd), so
findings name the listener that is not accepting, the reader that is not reading and the
processes with live sockets toward a destination short of ports (TIME_WAIT sockets have no
owner left: naming it needs `tcpdoctor trace`); --no-processes skips the scan.

Needs: Linux with sock_diag (3.3+; tcp_info windows need 5.4/6.2+). No root, except --netns
(CAP_SYS_ADMIN to enter /run/netns/NAME); without root, other users' processes cannot be
inspected and their sockets show no owner (counted). Overhead: one read-only netlink dump;
about 0.5 us of CPU per socket (50 k TIME_WAIT sockets: ~30 ms); the process scan costs one
readlink per open file descriptor on the host (as ss -p).

Output fields (JSON; units in names): by_state; port_range, ephemeral_ports,
sustainable_connect_rate_per_s (= ports / 60 s TIME_WAIT, per destination); tw_reuse
{tcp_tw_reuse, tcp_timestamps, tcp_tw_reuse_delay_ms}; interval_ms (between samples);
data_sockets; destinations[] {remote, sockets, time_wait, tw_reuse, time_wait_reusable,
ephemeral_ports_in_use, ports_unavailable, headroom_ports, used_percent,
time_wait_rate_per_s, sustainable_connect_rate_per_s}; listeners[] {local, listening,
accept_queue, backlog, full, connections}; slow_readers[] and retransmitting[] {local,
remote, state, sign, recv_q_bytes, send_q_bytes, recv_q_growth_bytes, rcvbuf_bytes,
rcv_wnd_bytes, snd_wnd_bytes, rto_us, backoff, retransmits, stalled_at_least_us, owners}; owners[] {pid, comm, fd} on
listeners and sockets, processes[] {pid, comm, sockets} on destinations; attribution
{processes_scanned, processes_unreadable, descriptors_scanned, sockets_attributed,
sockets_unattributed, duration_us}; census_duration_us; with --list, sockets[] with tcp_info.

Findings (severity from the shared policy): port_exhaustion (half of the range unavailable
toward one destination or more; the share is the budget used), accept_queue_overflow
(Recv-Q > backlog, the kernel's sk_acceptq_is_full: each dropped SYN waits 1 s),
slow_reader (the stall is claimed only when it persisted between two samples),
retransmit_timeout (the wait its RTO backoff implies), syn_retransmit (SYN_SENT sockets that
resent their SYN: the rung of this host's SYN ladder reached). Exit status 0 healthy,
1 findings, 2 error.

Examples:
  tcpdoctor sockets
  tcpdoctor sockets --state time-wait --port 443 --json
  tcpdoctor sockets --netns blue --watch 1s --count 10
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
    /// Do not attribute sockets to processes (skips the scan of /proc/*/fd).
    #[arg(long)]
    no_processes: bool,
}

/// The JSON body: the summary, flattened, plus timing and (with --list) every socket.
#[derive(Serialize)]
struct Body<'a> {
    #[serde(flatten)]
    summary: &'a Summary,
    /// 1-based sample number with --watch.
    #[serde(skip_serializing_if = "Option::is_none")]
    sample: Option<u64>,
    census_duration_us: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    sockets: Option<&'a [Socket]>,
}

pub fn run(args: Args) -> anyhow::Result<i32> {
    let filter = Filter {
        states: args.state.clone(),
        ports: args.port.clone(),
        addresses: args.address.clone(),
    };
    let take = |filter: &Filter| -> anyhow::Result<(Census, Duration)> {
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
        Ok((c, took))
    };

    let Some(interval) = args.watch else {
        let (census, took) = take(&filter)?;
        let analysis = sockets::analyze(&census, None);
        let body = Body {
            summary: &analysis.summary,
            sample: None,
            census_duration_us: took.as_micros() as u64,
            sockets: args.list.then_some(census.sockets.as_slice()),
        };
        let report = Report::new("sockets", analysis.findings, body, census_taken());
        return output::emit(&report, args.json, |w, r| text(w, r, &args));
    };

    if interval.is_zero() {
        anyhow::bail!("--watch: the interval must be above 0");
    }
    if args.count == Some(0) {
        anyhow::bail!("--count 0: a watch takes at least one sample");
    }
    let stop = output::stop_flag();
    let mut previous: Option<Census> = None;
    let mut worst = 0;
    let mut n = 0u64;
    loop {
        n += 1;
        let (census, took) = take(&filter)?;
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
                text(w, &report, &args)
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

fn text(w: &mut dyn Write, r: &Report<Body>, args: &Args) -> io::Result<()> {
    let s = r.body.summary;
    let ns = s
        .netns
        .as_deref()
        .map(|n| format!(" in netns {n}"))
        .unwrap_or_default();
    writeln!(
        w,
        "TCP sockets{ns}: {} (census {})",
        s.total_sockets,
        fmt::micros(r.body.census_duration_us)
    )?;
    let states: Vec<String> = s.by_state.iter().map(|(k, v)| format!("{k} {v}")).collect();
    if !states.is_empty() {
        writeln!(w, "  by state: {}", states.join(", "))?;
    }
    writeln!(
        w,
        "  ephemeral ports {} ({} ports): {} new connections/s per destination at {} s TIME_WAIT",
        s.port_range,
        s.ephemeral_ports,
        fmt::count(s.sustainable_connect_rate_per_s),
        s.time_wait_duration_s
    )?;
    let reuse = &s.tw_reuse;
    match reuse.tcp_tw_reuse {
        Some(mode @ (1 | 2)) if reuse.tcp_timestamps != Some(0) => writeln!(
            w,
            "  tcp_tw_reuse={mode}: connect() reuses TIME_WAIT ports {} after {} ms",
            if mode == 1 {
                "toward any destination"
            } else {
                "toward loopback"
            },
            reuse.tcp_tw_reuse_delay_ms
        )?,
        _ => writeln!(w, "  TIME_WAIT ports are not reused by connect() here")?,
    }
    if s.undecoded_messages > 0 {
        writeln!(
            w,
            "  {} kernel message(s) could not be decoded",
            s.undecoded_messages
        )?;
    }
    if let Some(a) = &s.attribution {
        let unreadable = if a.processes_unreadable > 0 {
            format!(
                "; {} not readable by this user (their sockets show no process: run as root)",
                a.processes_unreadable
            )
        } else {
            String::new()
        };
        writeln!(
            w,
            "  processes: {} scanned, {} file descriptors, {} socket(s) attributed ({}){unreadable}",
            a.processes_scanned,
            a.descriptors_scanned,
            a.sockets_attributed,
            fmt::micros(a.duration_us)
        )?;
    }

    if !s.destinations.is_empty() {
        writeln!(w, "\nDestinations (outgoing, by remote ip:port)")?;
        let mut t = table::new([
            "REMOTE",
            "SOCKETS",
            "TIME_WAIT",
            "PORTS_USED",
            "REUSABLE",
            "HEADROOM",
            "USED",
            "TW_RATE/s",
            "PROCESSES (live sockets)",
        ]);
        for d in s.destinations.iter().take(args.top) {
            t.add_row(vec![
                d.remote.to_string(),
                d.sockets.to_string(),
                d.time_wait.to_string(),
                d.ephemeral_ports_in_use.to_string(),
                if d.tw_reuse {
                    d.time_wait_reusable.to_string()
                } else {
                    "-".into()
                },
                d.headroom_ports.to_string(),
                format!("{:.1}%", d.used_percent),
                format!("{:.1}", d.time_wait_rate_per_s),
                processes(&d.processes),
            ]);
        }
        table::align_right(&mut t, &[1, 2, 3, 4, 5, 6, 7]);
        writeln!(w, "{t}")?;
        more(w, s.destinations.len(), args.top)?;
    }
    if !s.listeners.is_empty() {
        writeln!(w, "\nListeners (local ip:port; accept queue vs backlog)")?;
        let mut t = table::new([
            "LOCAL",
            "ACCEPT_Q",
            "BACKLOG",
            "FULL",
            "CONNECTIONS",
            "PROCESS",
        ]);
        for l in s.listeners.iter().take(args.top) {
            let conns: Vec<String> = l
                .connections
                .iter()
                .map(|(k, v)| format!("{k} {v}"))
                .collect();
            let opt = |v: Option<u32>| v.map(|v| v.to_string()).unwrap_or_else(|| "-".into());
            t.add_row(vec![
                if l.listening {
                    l.local.to_string()
                } else {
                    format!("{} (not listening)", l.local)
                },
                opt(l.accept_queue),
                opt(l.backlog),
                if l.full { "FULL".into() } else { String::new() },
                conns.join(", "),
                sockets::who(&l.owners),
            ]);
        }
        table::align_right(&mut t, &[1, 2]);
        writeln!(w, "{t}")?;
        more(w, s.listeners.len(), args.top)?;
    }
    for (title, rows) in [
        ("Slow readers", &s.slow_readers),
        ("In retransmission backoff", &s.retransmitting),
    ] {
        if rows.is_empty() {
            continue;
        }
        writeln!(w, "\n{title}")?;
        let mut t = table::new([
            "LOCAL", "REMOTE", "STATE", "SIGN", "RECV_Q", "SEND_Q", "RCV_WND", "SND_WND", "RTO",
            "BACKOFF", "PROCESS",
        ]);
        for f in rows.iter().take(args.top) {
            let opt = |v: Option<u32>| v.map(|v| v.to_string()).unwrap_or_else(|| "-".into());
            t.add_row(vec![
                f.local.to_string(),
                f.remote.to_string(),
                f.state.to_string(),
                format!("{:?}", f.sign),
                f.recv_q_bytes.to_string(),
                f.send_q_bytes.to_string(),
                opt(f.rcv_wnd_bytes),
                opt(f.snd_wnd_bytes),
                f.rto_us
                    .map(|v| fmt::micros(u64::from(v)))
                    .unwrap_or_else(|| "-".into()),
                f.backoff
                    .map(|b| b.to_string())
                    .unwrap_or_else(|| "-".into()),
                sockets::who(&f.owners),
            ]);
        }
        table::align_right(&mut t, &[4, 5, 6, 7, 8, 9]);
        writeln!(w, "{t}")?;
        more(w, rows.len(), args.top)?;
    }
    if let Some(list) = r.body.sockets {
        writeln!(w, "\nSockets")?;
        let mut t = table::new([
            "STATE", "RECV_Q", "SEND_Q", "LOCAL", "REMOTE", "RTT", "RTO", "RETRANS", "PROCESS",
        ]);
        for so in list {
            let i = so.info.as_ref();
            t.add_row(vec![
                so.state.to_string(),
                so.recv_q.to_string(),
                so.send_q.to_string(),
                so.local.to_string(),
                so.remote.to_string(),
                i.map(|i| fmt::micros(u64::from(i.rtt_us)))
                    .unwrap_or_else(|| "-".into()),
                i.map(|i| fmt::micros(u64::from(i.rto_us)))
                    .unwrap_or_else(|| "-".into()),
                i.map(|i| i.total_retrans.to_string())
                    .unwrap_or_else(|| "-".into()),
                sockets::who(&so.owners),
            ]);
        }
        table::align_right(&mut t, &[1, 2, 5, 6, 7]);
        writeln!(w, "{t}")?;
    }
    writeln!(w)?;
    findings::write(w, &r.findings)?;
    writeln!(w)?;
    findings::verdict(w, r)
}

/// `curl pid 77 (3), nginx pid 8 (1)`: the processes with live sockets toward a destination.
fn processes(p: &[sockets::ProcessSockets]) -> String {
    let mut v: Vec<String> = p
        .iter()
        .take(3)
        .map(|p| format!("{} pid {} ({})", p.comm, p.pid, p.sockets))
        .collect();
    if p.len() > 3 {
        v.push(format!("+{} more", p.len() - 3));
    }
    v.join(", ")
}

fn more(w: &mut dyn Write, len: usize, top: usize) -> io::Result<()> {
    if len > top {
        writeln!(w, "  ... {} more (--top N, or --json for all)", len - top)?;
    }
    Ok(())
}

/// A census always measures: an empty one says there are no sockets.
fn census_taken() -> Measured {
    Measured::Something("a socket census".into())
}
