//! `tcpdoctor sockets`: the JSON document of one census ([`Body`]) and its human text.

use std::io::{self, Write};

use serde::Serialize;
use tcpdoctor_model::Report;
use tcpdoctor_report::{findings, fmt, table};

use crate::sockets::{Basis, LastOwners, Socket, Span, Summary, Transfers};

/// The JSON body: the summary, flattened, plus timing and (with --list) every socket.
#[derive(Serialize)]
pub struct Body<'a> {
    #[serde(flatten)]
    pub summary: &'a Summary,
    /// 1-based sample number with --watch.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sample: Option<u64>,
    pub census_duration_us: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sockets: Option<&'a [Socket]>,
}

/// The human text of one census: totals, then destinations, listeners, flagged sockets and
/// (with `--list`) every socket, `top` rows per table; then the findings and the verdict.
pub fn text(w: &mut dyn Write, r: &Report<Body>, top: usize) -> io::Result<()> {
    text_inner(w, r, top, None)
}

/// [`text`] for one sample of `--watch`: findings an earlier sample explained are not
/// explained again ([`findings::write_repeating`]).
pub fn text_watch(
    w: &mut dyn Write,
    r: &Report<Body>,
    top: usize,
    explained: &mut findings::Explained,
) -> io::Result<()> {
    text_inner(w, r, top, Some(explained))
}

fn text_inner(
    w: &mut dyn Write,
    r: &Report<Body>,
    top: usize,
    explained: Option<&mut findings::Explained>,
) -> io::Result<()> {
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
    if !s.by_state.is_empty() {
        writeln!(w, "  by state: {}", fmt::tally(&s.by_state))?;
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

    match &s.last_owners {
        Some(LastOwners::Untraced { reason }) => writeln!(
            w,
            "  TIME_WAIT last owners: not known ({reason}); a TIME_WAIT socket has no owner left, only a trace watching the close records it (`--watch` as root)"
        )?,
        Some(LastOwners::Traced {
            traced_for_ms,
            time_wait_sockets,
            found,
            before_trace,
            lookup_duration_us,
        }) => writeln!(
            w,
            "  TIME_WAIT last owners (trace of closes, {} so far): {found} of {time_wait_sockets} named; of the {} unknown, {before_trace} in TIME_WAIT since before the trace started (lookup {})",
            fmt::micros(traced_for_ms * 1000),
            time_wait_sockets - found,
            fmt::micros(*lookup_duration_us)
        )?,
        None => {}
    }

    destinations(w, s, top)?;
    listeners(w, s, top)?;
    flagged(w, s, top)?;
    transfers(w, &s.transfers, top)?;
    if let Some(list) = r.body.sockets {
        socket_list(w, list)?;
    }
    writeln!(w)?;
    match (explained, r.body.sample) {
        (Some(e), Some(n)) => findings::write_repeating(w, &r.findings, e, n)?,
        _ => findings::write(w, &r.findings)?,
    }
    writeln!(w)?;
    findings::verdict(w, r)
}

/// The destinations table, with who left each destination's TIME_WAIT sockets.
fn destinations(w: &mut dyn Write, s: &Summary, top: usize) -> io::Result<()> {
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
        for d in s.destinations.iter().take(top) {
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
        more(w, s.destinations.len(), top)?;
        // With a trace: who left each destination's TIME_WAIT sockets (last owner at close).
        for d in s
            .destinations
            .iter()
            .take(top)
            .filter(|d| d.time_wait > 0 && d.closed_by.is_some())
        {
            writeln!(
                w,
                "  {} TIME_WAIT toward {}: {}",
                d.time_wait,
                d.remote,
                crate::sockets::closed_by_line(d)
            )?;
        }
    }
    Ok(())
}

/// The listeners table: accept queue against backlog.
fn listeners(w: &mut dyn Write, s: &Summary, top: usize) -> io::Result<()> {
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
        for l in s.listeners.iter().take(top) {
            let conns = fmt::tally(&l.connections);
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
                conns,
                crate::sockets::who(&l.owners),
            ]);
        }
        table::align_right(&mut t, &[1, 2]);
        writeln!(w, "{t}")?;
        more(w, s.listeners.len(), top)?;
    }
    Ok(())
}

/// The flagged sockets: slow readers and those in retransmission backoff.
fn flagged(w: &mut dyn Write, s: &Summary, top: usize) -> io::Result<()> {
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
        for f in rows.iter().take(top) {
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
                crate::sockets::who(&f.owners),
            ]);
        }
        table::align_right(&mut t, &[4, 5, 6, 7, 8, 9]);
        writeln!(w, "{t}")?;
        more(w, rows.len(), top)?;
    }
    Ok(())
}

/// Every socket (`--list`).
fn socket_list(w: &mut dyn Write, list: &[Socket]) -> io::Result<()> {
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
            crate::sockets::who(&so.owners),
        ]);
    }
    table::align_right(&mut t, &[1, 2, 5, 6, 7]);
    writeln!(w, "{t}")?;
    Ok(())
}

/// The busy connections and what limited each: the kernel's times as shares, the limit named,
/// round trips, loss, the writer and (when in the census) the reader.
fn transfers(w: &mut dyn Write, t: &Transfers, top: usize) -> io::Result<()> {
    if t.busy.is_empty() {
        return Ok(());
    }
    let over = match t.span {
        Span::Window => "shares of the window between the censuses",
        Span::Life => "one census: shares of each connection's busy time since it opened",
    };
    writeln!(
        w,
        "\nBusy connections: what limited them ({over}; tcpi_busy_time, tcpi_rwnd_limited, tcpi_sndbuf_limited)"
    )?;
    let mut tb = table::new([
        "LOCAL",
        "REMOTE",
        "LIMITED BY",
        "BUSY",
        "RWND",
        "SNDBUF",
        "IN FLIGHT",
        "IDLE",
        "RTT/MIN",
        "RESENT",
        "ACKED",
        "WRITER",
        "READER",
    ]);
    let pct = |x: &crate::sockets::Transfer, us: u64| format!("{:.0}%", 100.0 * x.share(us));
    let mut by_state = false;
    for x in t.busy.iter().take(top) {
        by_state |= x.basis == Basis::CensusState;
        tb.add_row(vec![
            x.local.to_string(),
            x.remote.to_string(),
            format!(
                "{}{}",
                x.limit.describe(),
                if x.basis == Basis::CensusState {
                    "*"
                } else {
                    ""
                }
            ),
            fmt::micros(x.busy_us),
            pct(x, x.rwnd_limited_us),
            pct(x, x.sndbuf_limited_us),
            pct(x, x.in_flight_us),
            x.idle_us.map_or("-".into(), |i| pct(x, i)),
            format!(
                "{}/{}",
                fmt::micros(u64::from(x.rtt_us)),
                x.min_rtt_us
                    .map_or("-".into(), |m| fmt::micros(u64::from(m)))
            ),
            x.retrans_segs.to_string(),
            fmt::bytes(x.bytes_acked),
            crate::sockets::who(&x.owners),
            match &x.reader {
                Some(r) if !r.owners.is_empty() => format!(
                    "{} (Recv-Q {})",
                    crate::sockets::who(&r.owners),
                    r.recv_q_bytes
                ),
                Some(r) => format!("Recv-Q {}", r.recv_q_bytes),
                None => "not in census".into(),
            },
        ]);
    }
    table::align_right(&mut tb, &[3, 4, 5, 6, 7, 8, 9, 10]);
    writeln!(w, "{tb}")?;
    more(w, t.busy.len(), top)?;
    if by_state {
        writeln!(
            w,
            "  * the kernel counted the time as data in flight; what held it at the censuses names it (buffer full with nothing unsent and the congestion window open: the send buffer; room left: the application)"
        )?;
    }
    if t.without_chronographs > 0 {
        writeln!(
            w,
            "  {} connection(s) not classified: this kernel's tcp_info has no sending chronographs (Linux 4.10+)",
            t.without_chronographs
        )?;
    }
    Ok(())
}

/// `curl pid 77 (3), nginx pid 8 (1)`: the processes with live sockets toward a destination.
fn processes(p: &[crate::sockets::ProcessSockets]) -> String {
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
