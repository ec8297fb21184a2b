//! `tcpdoctor trace`: the JSON lines (events, rolling summaries, the final [`Body`]) and
//! their human text. Writes to any `io::Write`; the binary decides where.

use std::collections::BTreeMap;
use std::io::{self, Write};

use serde::Serialize;
use tcpdoctor_model::{Measured, Report};
use tcpdoctor_report::fmt::{micros, tally};

use crate::attribute::{Line, Summary};
use crate::connections::{Connection, Ended, Opened, Totals};
use crate::loader::Unavailable;
use crate::repeats::RollUp;
use crate::session::{Netns, Outcome};

#[derive(Serialize)]
pub struct EventLine<'a> {
    #[serde(rename = "type")]
    pub kind: &'static str,
    #[serde(flatten)]
    pub line: &'a Line,
}

#[derive(Serialize)]
pub struct ConnectionLine<'a> {
    #[serde(rename = "type")]
    pub kind: &'static str,
    #[serde(flatten)]
    pub connection: &'a Connection,
}

#[derive(Serialize)]
pub struct SummaryLine {
    #[serde(rename = "type")]
    pub kind: &'static str,
    pub t_ms: u64,
    /// When this line was printed (RFC 3339 UTC), as every `--watch` line carries.
    pub generated_at: String,
    /// Sockets that started a connect (kernel count).
    pub connects: u64,
    pub causes: BTreeMap<String, u64>,
    pub drops: BTreeMap<String, u64>,
    pub lost_events: u64,
}

#[derive(Serialize)]
pub struct Body {
    #[serde(rename = "type")]
    pub kind: &'static str,
    pub duration_ms: u64,
    pub netns: Vec<Netns>,
    pub counts: BTreeMap<&'static str, u64>,
    pub lost_events: u64,
    /// Events the kernel skipped per tracepoint (its program already running on that CPU).
    pub missed_events: BTreeMap<String, u64>,
    /// Kernel-counted events the trace did not see, not explained by `missed_events`.
    pub not_traced: BTreeMap<String, u64>,
    /// SYN and SYN-ACK resends traced at the counters' window's edges (may be outside it).
    #[serde(skip_serializing_if = "crate::session::is_zero")]
    pub syn_traced_at_edges: u64,
    pub drops_by_reason: BTreeMap<String, u64>,
    /// Buffers freed with their socket (QUEUE_PURGE): benign, not among the drops.
    pub benign_drops_by_reason: BTreeMap<String, u64>,
    pub summary: Summary,
    /// Connections reported (`--connections` only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub connections: Option<Totals>,
    pub kernel_counters: BTreeMap<String, BTreeMap<String, i64>>,
    pub unavailable: Vec<Unavailable>,
    pub events_printed: u64,
}

/// The trace's report from what a session measured (`Session::finish`): its body, findings
/// and what was measured (nothing when the traced namespaces saw no TCP activity); `printed`
/// events were printed; `cut_short` when Ctrl-C ended it before its duration.
pub fn report(outcome: Outcome, printed: u64, cut_short: bool) -> Report<Body> {
    let activity = outcome
        .counts
        .iter()
        .filter(|(k, _)| **k != "lost" && **k != "records")
        .map(|(_, v)| v)
        .sum::<u64>();
    let measured = if activity == 0 {
        Measured::Nothing("no TCP activity in the traced namespaces".into())
    } else {
        Measured::Something(format!(
            "{} connects and {} kernel events over {:.1} s",
            outcome.counts.get("connects").copied().unwrap_or(0),
            outcome.counts.get("records").copied().unwrap_or(0),
            outcome.duration_ms as f64 / 1000.0
        ))
    };
    let body = Body {
        kind: "report",
        duration_ms: outcome.duration_ms,
        netns: outcome.netns,
        counts: outcome.counts,
        lost_events: outcome.lost_events,
        missed_events: outcome.missed_events,
        not_traced: outcome.not_traced,
        syn_traced_at_edges: outcome.syn_traced_at_edges,
        drops_by_reason: outcome.drops_by_reason,
        benign_drops_by_reason: outcome.benign_drops_by_reason,
        summary: outcome.summary,
        connections: outcome.connections,
        kernel_counters: outcome.kernel_counters,
        unavailable: outcome.unavailable,
        events_printed: printed,
    };
    Report::new("trace", outcome.findings, body, measured).interrupted(cut_short)
}

/// The text printed when tracing starts: the scope (`scope`, `until`: "for 5s", "until
/// Ctrl-C"), the hooks this kernel lacks, and the column heads of the event lines (of the
/// connection lines with `connections`).
pub fn header(
    w: &mut dyn Write,
    scope: &str,
    until: &str,
    unavailable: &[Unavailable],
    connections: bool,
) -> io::Result<()> {
    writeln!(w, "tracing TCP in {scope} {until}")?;
    for u in unavailable {
        writeln!(w, "unavailable on this kernel: {} ({})", u.hook, u.reason)?;
    }
    if connections {
        return connection_header(w);
    }
    writeln!(
        w,
        "{:>10} {:<14} {:<18} local -> remote {:<11} {:<20} evidence",
        "time", "netns", "process", "state", "cause"
    )
}

/// The column heads of `--connections` (after [`header`]'s first lines): one line per
/// connection as it closes, as bcc's tcplife prints them, with the namespace, how it was
/// opened and how it ended.
pub fn connection_header(w: &mut dyn Write) -> io::Result<()> {
    writeln!(
        w,
        "{:>10} {:<14} {:<18} {:<47} {:<7} {:>10} {:>10} {:>10} ended",
        "time", "netns", "process", "local -> remote", "opened", "tx_bytes", "rx_bytes", "ms"
    )
}

/// One connection: a JSON line (`"type": "connection"`) or a text line under
/// [`connection_header`]'s columns.
pub fn write_connection(w: &mut dyn Write, c: &Connection, json: bool) -> io::Result<()> {
    if json {
        return tcpdoctor_report::json_line(
            w,
            &ConnectionLine {
                kind: "connection",
                connection: c,
            },
        );
    }
    let ns = c.netns_name.clone().unwrap_or_else(|| c.netns.to_string());
    let process = c
        .process
        .as_ref()
        .map(|p| format!("{}[{}]", p.comm, p.pid))
        .unwrap_or_else(|| "-".into());
    let opened = match c.opened {
        Opened::Connect => "connect",
        Opened::Accept => "accept",
    };
    let ended = match c.ended {
        Ended::ClosedFirst => "closed first",
        Ended::PeerClosedFirst => "peer closed first",
        Ended::ResetSent => "reset sent",
        Ended::ResetReceived => "reset received",
        Ended::TimedOut => "timed out",
        Ended::Failed => "connect failed",
        Ended::Other => "other",
    };
    let errno = c
        .errno
        .map(|e| {
            let what = std::io::Error::from_raw_os_error(e as i32).to_string();
            format!(" ({})", what.split(" (os error").next().unwrap_or_default())
        })
        .unwrap_or_default();
    writeln!(
        w,
        "{:>9.3}s {:<14} {:<18} {:<47} {:<7} {:>10} {:>10} {:>10.2} {ended}{errno}",
        c.t_us as f64 / 1e6,
        ns,
        process,
        format!("{} -> {}", c.local, c.remote),
        opened,
        c.tx_bytes,
        c.rx_bytes,
        c.duration_us as f64 / 1000.0
    )
}

fn process_text(l: &Line) -> String {
    l.process
        .as_ref()
        .map(|p| format!("{}[{}]", p.comm, p.pid))
        .unwrap_or_else(|| "-".into())
}

/// One event: a JSON line (`"type": "event"`) or a text line under [`header`]'s columns.
pub fn write_line(w: &mut dyn Write, l: &Line, json: bool) -> io::Result<()> {
    if json {
        return tcpdoctor_report::json_line(
            w,
            &EventLine {
                kind: "event",
                line: l,
            },
        );
    }
    let ns = l.netns_name.clone().unwrap_or_else(|| l.netns.to_string());
    let state = l.state.map(|s| s.name()).unwrap_or("-");
    writeln!(
        w,
        "{:>9.3}s {:<14} {:<18} {} -> {} {:<11} {:<20} {}",
        l.t_us as f64 / 1e6,
        ns,
        process_text(l),
        l.local,
        l.remote,
        state,
        l.cause.name(),
        l.evidence
    )
}

/// Events of one group held back in an interval ([`crate::repeats`]): one line under
/// [`header`]'s columns, at the last one's time, with how many, over how long, at what rate,
/// and the last one's evidence. An end the held events do not share is `*`. A single held
/// event is printed as itself.
pub fn write_roll_up(w: &mut dyn Write, r: &RollUp) -> io::Result<()> {
    let l = &r.last;
    if r.count == 1 {
        // One held event is printed as itself.
        return write_line(w, l, false);
    }
    let ns = l.netns_name.clone().unwrap_or_else(|| l.netns.to_string());
    let end = |a: Option<std::net::SocketAddr>| a.map_or("*".to_string(), |a| a.to_string());
    let flows = if r.flows > 1 {
        let more = if r.flows as usize >= crate::repeats::FLOWS_COUNTED {
            " or more"
        } else {
            ""
        };
        format!(" on {}{more} flows", r.flows)
    } else {
        String::new()
    };
    let rate = r
        .rate_per_s()
        .map(|v| {
            if v >= 10.0 {
                format!(", {v:.0}/s")
            } else {
                format!(", {v:.1}/s")
            }
        })
        .unwrap_or_default();
    writeln!(
        w,
        "{:>9.3}s {:<14} {:<18} {} -> {} {:<11} {:<20} {} more{flows} since {:.3}s ({}{rate}); the last: {}",
        l.t_us as f64 / 1e6,
        ns,
        process_text(l),
        end(r.local),
        end(r.remote),
        l.state.map(|s| s.name()).unwrap_or("-"),
        l.cause.name(),
        r.count,
        r.first_us as f64 / 1e6,
        micros(r.last_us - r.first_us),
        l.evidence
    )
}

/// One rolling summary: a JSON line (`"type": "summary"`) or a `-- N s:` text line.
pub fn write_summary(w: &mut dyn Write, s: &SummaryLine, json: bool) -> io::Result<()> {
    if json {
        return tcpdoctor_report::json_line(w, s);
    }
    let causes = tally(&s.causes);
    let drops = tally(&s.drops);
    writeln!(
        w,
        "-- {:.1} s: {} connects; causes: {}; drops: {}; lost events: {}",
        s.t_ms as f64 / 1000.0,
        s.connects,
        if causes.is_empty() { "none" } else { &causes },
        if drops.is_empty() { "none" } else { &drops },
        s.lost_events
    )
}

/// The human text at the end of a run: what was traced, the kernel counts, drops, causes,
/// then the findings and the verdict.
pub fn text(w: &mut dyn Write, r: &Report<Body>) -> io::Result<()> {
    let b = &r.body;
    writeln!(w)?;
    writeln!(
        w,
        "Traced {:.1} s in {}.",
        b.duration_ms as f64 / 1000.0,
        Netns::describe_all(&b.netns)
    )?;
    let c = |k: &str| b.counts.get(k).copied().unwrap_or(0);
    // Buffers freed with their socket are no drops (issue 24: a healthy wrk run showed
    // "111,222 TCP drops", all QUEUE_PURGE).
    let benign = match c("benign_drops") {
        0 => String::new(),
        n => format!(" ({n} buffers freed with their socket apart: benign, not drops)"),
    };
    writeln!(
        w,
        // Zero-window events as the `zero_window` cause counts them (issue 21: "0 zero
        // windows" stood beside "zero_window 2", both of them timer resends into a zero window).
        "Kernel counts: {} connects ({} established, {} failed before the SYN), {} accepted, {} closed; retransmissions: {} SYN, {} timeout, {} after timeout, {} tail-loss probe, {} fast, {} into a zero window, {} other; {} SYN-ACK resends; resets {} sent, {} received; {} TCP drops{}; {} zero-window events ({} windows seen closing, {} timer resends into a zero window), {} window probes; {} SYNs refused by TIME_WAIT.",
        c("connects"), c("connected"), c("connect_errors"), c("accepted"), c("closed"),
        c("retransmit_syn"), c("retransmit_timeout"), c("retransmit_after_timeout"), c("retransmit_tail_loss_probe"), c("retransmit_fast"), c("retransmit_zero_window"), c("retransmit_other"),
        c("synack_retransmits"), c("resets_sent"), c("resets_received"), c("tcp_drops"), benign,
        c("zero_windows") + c("retransmit_zero_window"), c("zero_windows"), c("retransmit_zero_window"), c("window_probes"), c("time_wait_acks")
    )?;
    writeln!(
        w,
        "Lost events (ring buffer full): {}{}",
        b.lost_events,
        if b.lost_events > 0 {
            " -- some events were not attributed; the counts above include them"
        } else {
            ""
        }
    )?;
    if let Some(line) = missed_text(&b.missed_events) {
        writeln!(w, "{line}")?;
    }
    if let Some(line) = not_traced_text(&b.not_traced) {
        writeln!(w, "{line}")?;
    }
    if !b.drops_by_reason.is_empty() {
        writeln!(w, "Drops by reason: {}", tally(&b.drops_by_reason))?;
        for f in b.summary.drop_flows.iter().take(5) {
            let at = f
                .ifname
                .as_ref()
                .map(|i| format!(" on {i}"))
                .unwrap_or_default();
            writeln!(
                w,
                "  {} -> {}: {} x {}{at}",
                f.src, f.dst, f.count, f.reason
            )?;
        }
    }
    if !b.benign_drops_by_reason.is_empty() {
        writeln!(
            w,
            "Freed with their socket (benign, not drops): {}",
            tally(&b.benign_drops_by_reason)
        )?;
    }
    if let Some(t) = &b.connections {
        writeln!(
            w,
            "Connections closed: {} ({} opened by connect(), {} accepted); payload {} bytes sent, {} received{}",
            t.connections,
            t.opened_by_connect,
            t.connections - t.opened_by_connect,
            t.tx_bytes,
            t.rx_bytes,
            if b.lost_events > 0 {
                " (lower bounds: records were lost)"
            } else {
                ""
            }
        )?;
    }
    if !b.summary.causes.is_empty() {
        let d: Vec<String> = b
            .summary
            .causes
            .iter()
            .map(|(c, n)| format!("{} {n}", c.name()))
            .collect();
        writeln!(w, "Attributed events by cause: {}", d.join(", "))?;
    }
    // Counts from records: lower bounds when records were lost.
    let at_least = if b.lost_events > 0 { "at least " } else { "" };
    for p in &b.summary.no_local_port {
        let who = p
            .process
            .as_ref()
            .map(|p| format!("{}[{}]", p.comm, p.pid))
            .unwrap_or_else(|| "-".into());
        writeln!(
            w,
            "EADDRNOTAVAIL: {who} -> {}: {at_least}{} connect(s) failed (no free local port)",
            p.destination, p.failures
        )?;
    }
    for r in &b.summary.local_tuple_refusals {
        let who = r
            .process
            .as_ref()
            .map(|p| format!("{}[{}]", p.comm, p.pid))
            .unwrap_or_else(|| "-".into());
        let holder = r
            .holder
            .map(|s| format!("held in {}", s.name()))
            .unwrap_or_else(|| "held by a socket gone since".into());
        writeln!(
            w,
            "EADDRNOTAVAIL: {who} {} -> {}: {at_least}{} connect(s) refused, source port bound before connect() and its 4-tuple {holder} (not port exhaustion)",
            r.local, r.destination, r.failures
        )?;
    }
    for e in &b.summary.incast_episodes {
        writeln!(
            w,
            "Incast: {} flows timed out into {} at +{:.3} s (longest wait {:.0} ms)",
            e.flows,
            e.receiver,
            e.start_us as f64 / 1e6,
            e.worst_wait_us as f64 / 1000.0
        )?;
    }
    for u in &b.unavailable {
        writeln!(w, "Not traced on this kernel: {} ({})", u.hook, u.reason)?;
    }
    writeln!(w)?;
    tcpdoctor_report::findings::write(w, &r.findings)?;
    writeln!(w)?;
    tcpdoctor_report::findings::verdict(w, r)
}

/// The line that names the events the kernel skipped, when it skipped any: shared by every
/// command that reports a trace.
pub fn missed_text(missed: &BTreeMap<String, u64>) -> Option<String> {
    gap_line(
        "Events the kernel skipped tracing (the hook's program was already running on that CPU; of any namespace)",
        missed,
    )
}

/// The line that names the resends the kernel counted and the trace did not see, when there
/// were any ([`crate::reconcile::not_traced`]).
pub fn not_traced_text(not_traced: &BTreeMap<String, u64>) -> Option<String> {
    gap_line(
        "Counted by the kernel, not seen by the trace (no skip reported: the kernel ran no trace program for them)",
        not_traced,
    )
}

fn gap_line(what: &str, counts: &BTreeMap<String, u64>) -> Option<String> {
    (!counts.is_empty()).then(|| {
        format!(
            "{what}: {} -- neither counted above nor attributed",
            tally(counts)
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gap_lines_name_each_count_and_are_absent_when_there_is_none() {
        assert_eq!(not_traced_text(&BTreeMap::new()), None);
        assert_eq!(missed_text(&BTreeMap::new()), None);
        let unseen = BTreeMap::from([("TcpExtTCPSynRetrans".to_string(), 2)]);
        let line = not_traced_text(&unseen).unwrap();
        assert!(
            line.contains("no skip reported") && line.contains("TcpExtTCPSynRetrans 2"),
            "{line}"
        );
        let skipped = BTreeMap::from([("tcp_probe".to_string(), 3)]);
        assert!(missed_text(&skipped).unwrap().contains("tcp_probe 3"));
    }
}
