//! The lab's human text and HTML pages: one text renderer and one page per scenario, the
//! `--remedies` table, and the pieces they share (the runs side by side, the SYN ladder's cost,
//! the remedy lines, the verdict line). Built on `tcpdoctor_report`'s printers; writes to any
//! `io::Write` and reads no terminal (the width and colour come from `tcpdoctor_report::style`).

pub mod html;

use std::io::{self, Write};

use tcpdoctor_model::Report;
use tcpdoctor_report::{findings, fmt, table};

use crate::remedy::Check;
use crate::scenario::churn::ProbeRun;
use crate::scenario::{
    self, accept_overflow, incast, port_exhaustion, slow_reader, stale_ack, syn_drop, timewait,
};

/// The text of `lab cleanup`: what was removed, kept or could not be removed.
pub fn cleanup(w: &mut dyn Write, r: &Report<crate::cleanup::Cleaned>) -> io::Result<()> {
    let c = &r.body;
    writeln!(
        w,
        "Removed {} namespace(s), {} interface(s), {} temporary file(s); killed {} process(es) inside them and {} orphaned tcpdump(s).",
        c.namespaces_removed.len(),
        c.interfaces_removed.len(),
        c.files_removed.len(),
        c.processes_killed.len(),
        c.captures_killed.len()
    )?;
    for n in &c.namespaces_removed {
        writeln!(w, "  namespace {n}")?;
    }
    for n in &c.interfaces_removed {
        writeln!(w, "  interface {n}")?;
    }
    for n in &c.files_removed {
        writeln!(w, "  file {n}")?;
    }
    for n in &c.captures_killed {
        writeln!(w, "  tcpdump pid {n}")?;
    }
    for n in &c.namespaces_in_use {
        writeln!(w, "  kept {n} (its run is alive; --force removes it)")?;
    }
    for n in &c.failed {
        writeln!(w, "  FAILED to remove {n}")?;
    }
    Ok(())
}

/// The `--html` page of an incast run (with the sweep chart when it swept).
pub fn incast_page(report: &Report<incast::Report>) -> String {
    let b = &report.body;
    let c = &b.config;
    html::run_page(
        report,
        &b.header,
        &format!(
            "{} per round split over N senders, bottleneck tbf rate {} burst {} limit {}, senders on {}",
            fmt::bytes(c.block_bytes),
            c.rate,
            fmt::bytes(c.burst_bytes),
            fmt::bytes(c.limit_bytes),
            c.congestion_control
        ),
        &[incast_runs(b)],
        &b.remedies,
        b.before.as_ref().map(|r| r.findings.as_slice()).unwrap_or(&[]),
        Some(&b.runs),
    )
}

/// The text of a port-exhaustion run: the runs side by side, then the diagnosis
/// of the first run, the remedy lines, the capture and the verdict.
pub fn port_exhaustion(w: &mut dyn Write, r: &Report<port_exhaustion::Report>) -> io::Result<()> {
    let b = &r.body;
    writeln!(
        w,
        "lab port-exhaustion: client port range {} ({} ports), tcp_tw_reuse=0, {} closes first, {} s per run (run {})",
        b.config.ports,
        b.config.ports.len(),
        match b.config.close_first {
            tcpdoctor_probe::CloseFirst::Client => "client",
            tcpdoctor_probe::CloseFirst::Server => "server",
        },
        b.config.duration_ms / 1000,
        b.header.run_id
    )?;
    let mut runs = vec![&b.before];
    runs.extend(b.after.iter());
    runs_table(w, &runs, &b.remedies)?;
    writeln!(
        w,
        "Sustainable new connections to one destination: computed {} ports / 60 s = {:.2}/s; measured {}",
        b.config.ports.len(),
        b.computed_sustainable_per_s,
        match b.measured_sustainable_per_s {
            Some(m) => format!("{m:.2}/s (whole 60 s periods after the first)"),
            None => "- (needs --duration 121s or more)".into(),
        }
    )?;
    tail(w, r, &b.header, &b.before.findings, &b.remedies)
}

/// The `--html` page of a port-exhaustion run.
pub fn port_exhaustion_page(report: &Report<port_exhaustion::Report>) -> String {
    let b = &report.body;
    let mut runs = vec![&b.before];
    runs.extend(b.after.iter());
    probe_page(
        report,
        &b.header,
        &format!(
            "client port range {} ({} ports), tcp_tw_reuse=0; sustainable new connections to one destination: {} ports / 60 s = {:.2}/s",
            b.config.ports,
            b.config.ports.len(),
            b.config.ports.len(),
            b.computed_sustainable_per_s
        ),
        &runs,
        &b.remedies,
        &b.before.findings,
    )
}

/// The text of a syn-drop run: the runs side by side, then the diagnosis
/// of the first run, the remedy lines, the capture and the verdict.
pub fn syn_drop(w: &mut dyn Write, r: &Report<syn_drop::Report>) -> io::Result<()> {
    let b = &r.body;
    writeln!(
        w,
        "lab syn-drop: nftables in the server namespace drops {}% of SYNs (run {})",
        b.config.drop_percent, b.header.run_id
    )?;
    let mut runs = vec![&b.before];
    runs.extend(b.after.iter());
    runs_table(w, &runs, &b.remedies)?;
    tail(w, r, &b.header, &b.before.findings, &b.remedies)
}

/// The `--html` page of a syn-drop run.
pub fn syn_drop_page(report: &Report<syn_drop::Report>) -> String {
    let b = &report.body;
    let mut runs = vec![&b.before];
    runs.extend(b.after.iter());
    probe_page(
        report,
        &b.header,
        &format!(
            "nftables in the server namespace drops {}% of SYNs",
            b.config.drop_percent
        ),
        &runs,
        &b.remedies,
        &b.before.findings,
    )
}

/// The text of an accept-overflow run: the runs side by side, then the diagnosis
/// of the first run, the remedy lines, the capture and the verdict.
pub fn accept_overflow(w: &mut dyn Write, r: &Report<accept_overflow::Report>) -> io::Result<()> {
    let b = &r.body;
    writeln!(
        w,
        "lab accept-overflow: {} server thread(s), backlog {}, {} concurrent clients (run {})",
        b.config.server_threads, b.config.backlog, b.config.concurrency, b.header.run_id
    )?;
    let mut runs = vec![&b.before];
    runs.extend(b.after.iter());
    runs_table(w, &runs, &b.remedies)?;
    tail(w, r, &b.header, &b.before.findings, &b.remedies)
}

/// The `--html` page of a accept-overflow run.
pub fn accept_overflow_page(report: &Report<accept_overflow::Report>) -> String {
    let b = &report.body;
    let mut runs = vec![&b.before];
    runs.extend(b.after.iter());
    probe_page(
        report,
        &b.header,
        &format!(
            "{} server thread(s), backlog {}, {} concurrent clients",
            b.config.server_threads, b.config.backlog, b.config.concurrency
        ),
        &runs,
        &b.remedies,
        &b.before.findings,
    )
}

/// The text of a timewait-collision run: the runs side by side, then the diagnosis
/// of the first run, the remedy lines, the capture and the verdict.
pub fn timewait(w: &mut dyn Write, r: &Report<timewait::Report>) -> io::Result<()> {
    let b = &r.body;
    writeln!(
        w,
        "lab timewait-collision: {} connections from source port {}, {} uploaded each, server closes first{} (run {})",
        b.config.connections,
        timewait::CLIENT_PORT,
        fmt::bytes(b.config.request_bytes as u64),
        if b.config.rfc1337 { ", tcp_rfc1337=1" } else { "" },
        b.header.run_id
    )?;
    let mut runs = vec![&b.before];
    runs.extend(b.after.iter());
    writeln!(w)?;
    let t = timewait_side(&runs, &b.remedies);
    writeln!(w, "{t}")?;
    writeln!(w)?;
    tail(w, r, &b.header, &b.before.findings, &b.remedies)
}

/// The `--html` page of a timewait run.
pub fn timewait_page(report: &Report<timewait::Report>) -> String {
    let b = &report.body;
    let mut runs = vec![&b.before];
    runs.extend(b.after.iter());
    html::run_page(
        report,
        &b.header,
        &format!(
            "{} connections from source port {}, {} uploaded each, server closes first{}",
            b.config.connections,
            timewait::CLIENT_PORT,
            fmt::bytes(b.config.request_bytes as u64),
            if b.config.rfc1337 {
                ", tcp_rfc1337=1"
            } else {
                ""
            }
        ),
        &[timewait_side(&runs, &b.remedies).cells],
        &b.remedies,
        &b.before.findings,
        None,
    )
}

/// The text of a slow-reader run: the runs side by side, then the diagnosis
/// of the first run, the remedy lines, the capture and the verdict.
pub fn slow_reader(w: &mut dyn Write, r: &Report<slow_reader::Report>) -> io::Result<()> {
    let b = &r.body;
    writeln!(
        w,
        "lab slow-reader: writer {}/s, reader {}/s, reader SO_RCVBUF {} (run {})",
        fmt::bytes(b.config.writer_rate_bytes_per_s),
        fmt::bytes(b.config.reader_rate_bytes_per_s),
        fmt::bytes(b.config.reader_rcvbuf_bytes as u64),
        b.header.run_id
    )?;
    let mut runs = vec![&b.before];
    runs.extend(b.after.iter());
    writeln!(w)?;
    let t = slow_reader_side(&runs, &b.remedies);
    writeln!(w, "{t}")?;
    writeln!(w)?;
    tail(w, r, &b.header, &b.before.findings, &b.remedies)
}

/// The `--html` page of a slow-reader run.
pub fn slow_reader_page(report: &Report<slow_reader::Report>) -> String {
    let b = &report.body;
    let mut runs = vec![&b.before];
    runs.extend(b.after.iter());
    html::run_page(
        report,
        &b.header,
        &format!(
            "writer {}/s, reader {}/s, reader SO_RCVBUF {}",
            fmt::bytes(b.config.writer_rate_bytes_per_s),
            fmt::bytes(b.config.reader_rate_bytes_per_s),
            fmt::bytes(b.config.reader_rcvbuf_bytes as u64)
        ),
        &[slow_reader_side(&runs, &b.remedies).cells],
        &b.remedies,
        &b.before.findings,
        None,
    )
}

/// The text of a stale-ack-race run: the runs side by side, then the diagnosis
/// of the first run, the remedy lines, the capture and the verdict.
pub fn stale_ack(w: &mut dyn Write, r: &Report<stale_ack::Report>) -> io::Result<()> {
    let b = &r.body;
    writeln!(
        w,
        "lab stale-ack-race: report 003's loop for {} s, {} loop(s), on Linux {}{} (run {})",
        b.config.duration_ms as f64 / 1000.0,
        b.config.concurrency,
        b.kernel_release,
        match b.loop_cpus {
            Some([server, client]) => format!(", server on CPU {server}, client on CPU {client}"),
            None => ", one CPU: the server and client share it".to_string(),
        },
        b.header.run_id
    )?;
    let mut runs = vec![&b.loop_run.run];
    runs.extend(b.after.iter().map(|a| &a.run));
    runs_table(w, &runs, &b.remedies)?;
    writeln!(
        w,
        "SYN resends: {:.0} per million connections; classified: {} resent after a stale ACK, {} on the SYN timer",
        b.syn_resends_per_million, b.stale_ack_resends, b.syn_timer_resends
    )?;
    writeln!(
        w,
        "Forced stale ACK (client reset dropped, reconnect from port {}): connect took {}, behaviour: {}",
        stale_ack::FORCED_PORT,
        fmt::micros(b.forced.connect_us),
        match b.forced.behaviour {
            stale_ack::ResendBehaviour::QuickResend => "quick SYN resend after the reset (mitigated kernel)",
            stale_ack::ResendBehaviour::TimerResend => "SYN waited for the 1 s retransmission timer",
            stale_ack::ResendBehaviour::NotReproduced => "no stale ACK (no SYN resend)",
            stale_ack::ResendBehaviour::Failed => "connect failed",
        }
    )?;
    writeln!(w)?;
    tail(w, r, &b.header, &b.loop_run.run.findings, &b.remedies)
}

/// The `--html` page of a stale-ack run.
pub fn stale_ack_page(report: &Report<stale_ack::Report>) -> String {
    let b = &report.body;
    let mut runs = vec![&b.loop_run.run];
    runs.extend(b.after.iter().map(|a| &a.run));
    probe_page(
        report,
        &b.header,
        &format!(
            "connection-per-request loop with SO_LINGER 0: {:.0} SYN resends per million connections ({} after a stale ACK, {} on the SYN timer)",
            b.syn_resends_per_million, b.stale_ack_resends, b.syn_timer_resends
        ),
        &runs,
        &b.remedies,
        &b.loop_run.run.findings,
    )
}

/// The incast runs, one row each.
fn incast_runs(b: &incast::Report) -> html::Table {
    let header = [
        "senders",
        "rto_min",
        "rounds",
        "stalled >100ms",
        "goodput",
        "p50 round",
        "p99 round",
        "max round",
        "RTOs",
        "TLPs",
        "retrans",
        "tbf drops",
    ];
    let rows = b
        .runs
        .iter()
        .map(|run| {
            vec![
                run.senders.to_string(),
                fmt::micros(run.rto_min_us),
                run.rounds.to_string(),
                format!(
                    "{} ({:.1}%)",
                    run.slow_rounds,
                    pct(run.slow_rounds, run.rounds)
                ),
                fmt::bitrate(run.goodput_bits_per_s),
                fmt::micros(run.round_p50_us),
                fmt::micros(run.round_p99_us),
                fmt::micros(run.round_max_us),
                run.rto_expiries.to_string(),
                run.loss_probes.to_string(),
                run.retrans_segs.to_string(),
                run.bottleneck_drops
                    .map(|d| d.to_string())
                    .unwrap_or_else(|| "-".into()),
            ]
        })
        .collect();
    html::Table {
        header: header.iter().map(|h| h.to_string()).collect(),
        rows,
    }
}

/// The text of an incast run (or sweep): the runs, the per-sender counts of the baseline,
/// its diagnosis and, with `--fix`, before vs after.
pub fn incast(w: &mut dyn Write, r: &Report<incast::Report>) -> io::Result<()> {
    let b = &r.body;
    let c = &b.config;
    writeln!(
        w,
        "lab incast: {} per round split over N senders, bottleneck tbf rate {} burst {} limit {} (run {})",
        fmt::bytes(c.block_bytes),
        c.rate,
        fmt::bytes(c.burst_bytes),
        fmt::bytes(c.limit_bytes),
        b.header.run_id
    )?;
    writeln!(w)?;
    let runs = incast_runs(b);
    let mut t = table::new(runs.header);
    for row in runs.rows {
        t.add_row(row);
    }
    table::align_right(&mut t, &[0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11]);
    writeln!(w, "{t}")?;
    if let Some(before) = &b.before {
        writeln!(w)?;
        writeln!(
            w,
            "Per sender ({} senders, rto_min {}):",
            before.senders,
            fmt::micros(before.rto_min_us)
        )?;
        let mut t = table::new([
            "sender",
            "RTO expiries",
            "TcpExtTCPTimeouts",
            "TcpRetransSegs",
            "TcpExtTCPLossProbes",
            "TcpExtTCPFastRetrans",
        ]);
        for s in &before.per_sender {
            t.add_row(vec![
                format!("s{}", s.sender),
                s.rto_expiries.to_string(),
                s.timeouts.to_string(),
                s.retrans_segs.to_string(),
                s.loss_probes.to_string(),
                s.fast_retrans.to_string(),
            ]);
        }
        table::align_right(&mut t, &[1, 2, 3, 4, 5]);
        writeln!(w, "{t}")?;
        writeln!(w, "RTO expiries: TcpExtTCPTimeouts plus the recovery-state variants (TcpExtTCPSackRecoveryFail, TcpExtTCPSackFailures, TcpExtTCPLossFailures) that tcp_retransmit_timer counts instead.")?;
    }
    writeln!(w)?;
    trace_lines(w, &b.header.trace)?;
    let diagnosis = b
        .before
        .as_ref()
        .map(|r| r.findings.as_slice())
        .unwrap_or(&[]);
    findings::write(w, diagnosis)?;
    writeln!(w)?;
    if let (Some(before), Some(after)) = (&b.before, &b.after) {
        writeln!(w, "Before and after the fix ({} senders):", before.senders)?;
        let mut t = table::new([
            String::new(),
            format!("before: rto_min {}", fmt::micros(before.rto_min_us)),
            format!("after: rto_min {}", fmt::micros(after.rto_min_us)),
        ]);
        t.add_row(vec![
            "goodput".into(),
            fmt::bitrate(before.goodput_bits_per_s),
            fmt::bitrate(after.goodput_bits_per_s),
        ]);
        t.add_row(vec![
            "rounds stalled 100 ms beyond a typical round".into(),
            format!("{} of {}", before.slow_rounds, before.rounds),
            format!("{} of {}", after.slow_rounds, after.rounds),
        ]);
        t.add_row(vec![
            "p99 round".into(),
            fmt::micros(before.round_p99_us),
            fmt::micros(after.round_p99_us),
        ]);
        t.add_row(vec![
            "retransmission timer expiries".into(),
            before.rto_expiries.to_string(),
            after.rto_expiries.to_string(),
        ]);
        t.add_row(vec![
            "tail loss probes".into(),
            before.loss_probes.to_string(),
            after.loss_probes.to_string(),
        ]);
        t.add_row(vec![
            "time lost to stalled rounds".into(),
            format!("{:.0}%", before.time_lost_share * 100.0),
            format!("{:.0}%", after.time_lost_share * 100.0),
        ]);
        t.add_row(vec![
            "findings".into(),
            pathology_names(&before.findings),
            pathology_names(&after.findings),
        ]);
        table::align_right(&mut t, &[1, 2]);
        writeln!(w, "{t}")?;
        writeln!(w)?;
        remedy_lines(w, &b.remedies)?;
    }
    capture_line(w, &b.header.capture)?;
    reproduction_lines(w, &b.header.reproduction)?;
    verdict(w, r, &b.remedies)
}

fn pct(a: u32, b: u32) -> f64 {
    if b == 0 {
        0.0
    } else {
        f64::from(a) * 100.0 / f64::from(b)
    }
}

/// The measurement of probe runs side by side, one column per run.
fn runs_table(w: &mut dyn Write, runs: &[&ProbeRun], checks: &[Check]) -> io::Result<()> {
    writeln!(w)?;
    writeln!(w, "{}", probe_side(runs, checks))?;
    writeln!(w)
}

/// [`runs_table`]'s table.
fn probe_side<'a>(runs: &'a [&'a ProbeRun], checks: &[Check]) -> SideBySide<'a, ProbeRun> {
    let mut t = SideBySide::new(runs, |r: &ProbeRun| r.label.clone());
    t.row("requests ok", |r| r.summary.requests_ok.to_string());
    t.row("requests failed", |r| r.summary.requests_failed.to_string());
    t.row("ok per second", |r| {
        format!("{:.1}", r.summary.requests_ok_per_s)
    });
    t.row("connections opened", |r| {
        r.summary.connections_opened.to_string()
    });
    t.row("errors", |r| {
        if r.summary.errors.is_empty() {
            "-".into()
        } else {
            r.summary
                .errors
                .iter()
                .map(|e| format!("{} x{}", e.errno, e.count))
                .collect::<Vec<_>>()
                .join(", ")
        }
    });
    for phase in ["connect", "total"] {
        t.row(&format!("{phase} p50 / p99 / max"), |r| {
            r.summary
                .phases
                .iter()
                .find(|p| p.phase == phase)
                .map(|p| {
                    format!(
                        "{} / {} / {}",
                        fmt::micros(p.p50_us),
                        fmt::micros(p.p99_us),
                        fmt::micros(p.max_us)
                    )
                })
                .unwrap_or_else(|| "-".into())
        });
    }
    t.row("slow connections by cause", |r| {
        if r.summary.spikes.groups.is_empty() {
            "-".into()
        } else {
            r.summary
                .spikes
                .groups
                .iter()
                .map(|g| format!("{} x{}", g.label, g.count))
                .collect::<Vec<_>>()
                .join(", ")
        }
    });
    t.row("client TcpExtTCPSynRetrans", |r| {
        r.summary
            .counters
            .iter()
            .find(|c| c.name == "TcpExtTCPSynRetrans")
            .map(|c| c.delta.to_string())
            .unwrap_or_else(|| "0".into())
    });
    t.row("server TcpExtListenOverflows", |r| {
        r.server_counters
            .get("TcpExtListenOverflows")
            .copied()
            .unwrap_or(0)
            .to_string()
    });
    t.row("findings", |r| pathology_names(&r.findings));
    t.remedy_row(checks);
    t
}

/// The HTML page of a probe-based scenario run (baseline, then each remedied run).
fn probe_page<B>(
    report: &Report<B>,
    header: &scenario::Header,
    subtitle: &str,
    runs: &[&ProbeRun],
    checks: &[Check],
    diagnosis: &[tcpdoctor_model::Finding],
) -> String {
    let side = probe_side(runs, checks);
    html::run_page(
        report,
        header,
        subtitle,
        &[side.cells],
        checks,
        diagnosis,
        None,
    )
}

/// Findings of the first run, the remedies' outcomes, the capture, and the verdict.
fn tail<B>(
    w: &mut dyn Write,
    r: &Report<B>,
    h: &scenario::Header,
    diagnosis: &[tcpdoctor_model::Finding],
    checks: &[Check],
) -> io::Result<()> {
    trace_lines(w, &h.trace)?;
    writeln!(
        w,
        "Diagnosis of the first run (by {}{}):",
        h.diagnosed_by.join("; "),
        if h.trace.used {
            "; the eBPF trace's attribution of each event"
        } else {
            ""
        }
    )?;
    writeln!(w)?;
    findings::write(w, diagnosis)?;
    writeln!(w)?;
    remedy_lines(w, checks)?;
    capture_line(w, &h.capture)?;
    reproduction_lines(w, &h.reproduction)?;
    verdict(w, r, checks)
}

/// Whether each run reproduced the scenario's pathology, with the counts of its signature,
/// what was tried and what it cost ([`crate::reproduce`]).
fn reproduction_lines(w: &mut dyn Write, r: &crate::reproduce::Reproductions) -> io::Result<()> {
    let Some(first) = r.baseline() else {
        return Ok(());
    };
    let layout = tcpdoctor_report::style::current();
    writeln!(
        w,
        "Reproduced? ({}: its own signature, counted in each run)",
        first.pathology
    )?;
    for run in &r.reproduction {
        let line = format!("{}: {}", run.run, run.line);
        writeln!(
            w,
            "{}",
            tcpdoctor_report::wrap::fill(&line, layout.width, "  ", "    ")
        )?;
    }
    writeln!(w)
}

/// The verdict line; with `--fix`, first which remedied run it follows.
fn verdict<B>(w: &mut dyn Write, r: &Report<B>, checks: &[Check]) -> io::Result<()> {
    if let Some(i) = crate::remedy::followed(checks) {
        writeln!(
            w,
            "The verdict and exit status follow the remedied run \"{}\"{}.",
            checks[i].run,
            match r
                .findings
                .iter()
                .filter(|f| f.severity > tcpdoctor_model::Severity::Info)
                .count()
            {
                0 => String::new(),
                n => format!(" ({n} finding(s) above info left in it)"),
            }
        )?;
    }
    verdict_line(w, r)
}

/// The closing verdict line, with its reason: "reproduced" when the run the verdict follows
/// reproduced the pathology, even when no finding is above info (the harm on this kernel was
/// small); "inconclusive" when it was not reproduced and nothing else was found
/// ([`crate::reproduce::verdict`]).
fn verdict_line<B>(w: &mut dyn Write, r: &Report<B>) -> io::Result<()> {
    use tcpdoctor_report::{style, wrap};
    let above_info = r
        .findings
        .iter()
        .filter(|f| f.severity > tcpdoctor_model::Severity::Info)
        .count();
    let layout = style::current();
    let word = crate::reproduce::verdict_word(r.verdict, &r.verdict_reason, above_info);
    let painted = layout.paint(style::verdict(r.verdict), &word);
    // "reproduced stale_ack_race: ..." reads as the verdict itself.
    let line = match r.verdict_reason.strip_prefix("reproduced ") {
        Some(rest) if word == "reproduced" => format!("Verdict: {painted} {rest}"),
        _ => format!("Verdict: {painted} ({})", r.verdict_reason),
    };
    writeln!(w, "{}", wrap::fill(&line, layout.width, "", "  "))
}

/// The timewait runs side by side.
fn timewait_side<'a>(
    runs: &'a [&'a timewait::Run],
    checks: &[Check],
) -> SideBySide<'a, timewait::Run> {
    let mut t = SideBySide::new(runs, |r: &timewait::Run| r.label.clone());
    t.row("connect times", |r| {
        r.connections
            .iter()
            .map(|c| fmt::micros(c.connect_us))
            .collect::<Vec<_>>()
            .join(", ")
    });
    t.row("failed", |r| {
        r.connections
            .iter()
            .filter(|c| c.outcome != crate::traffic::Outcome::Ok)
            .map(|c| c.outcome.name())
            .collect::<Vec<_>>()
            .join(", ")
    });
    t.row("connects slower than 100 ms", |r| {
        r.slow_connects.to_string()
    });
    for (side, name) in [
        ("client", "TcpExtTCPSynRetrans"),
        ("client", "TcpOutRsts"),
        ("server", "TcpExtTW"),
    ] {
        t.row(&format!("{side} {name}"), |r| {
            let m = if side == "client" {
                &r.client_counters
            } else {
                &r.server_counters
            };
            m.get(name).copied().unwrap_or(0).to_string()
        });
    }
    t.row("findings", |r| pathology_names(&r.findings));
    t.remedy_row(checks);
    t
}

/// The slow_reader runs side by side.
fn slow_reader_side<'a>(
    runs: &'a [&'a slow_reader::Run],
    checks: &[Check],
) -> SideBySide<'a, slow_reader::Run> {
    let mut t = SideBySide::new(runs, |r: &slow_reader::Run| r.label.clone());
    t.row("reader SO_RCVBUF", |r| {
        fmt::bytes(r.reader_rcvbuf_bytes as u64)
    });
    t.row("reader rate", |r| {
        format!("{}/s", fmt::bytes(r.reader_rate_bytes_per_s))
    });
    t.row("bytes written", |r| fmt::bytes(r.bytes_written));
    t.row("bytes read", |r| fmt::bytes(r.bytes_read));
    t.row("writer stalled", |r| {
        format!(
            "{} ({:.0}%)",
            fmt::micros(r.writer_stall_us),
            r.writer_stall_share * 100.0
        )
    });
    t.row("zero-window advertisements", |r| {
        r.zero_window_advertisements.to_string()
    });
    t.row("findings", |r| pathology_names(&r.findings));
    t.remedy_row(checks);
    t
}

/// A table with one column per run (before, then each remedy), filled row by row.
struct SideBySide<'a, R> {
    runs: &'a [&'a R],
    table: table::Table,
    /// The same cells, for the HTML report.
    cells: html::Table,
}

impl<'a, R> SideBySide<'a, R> {
    fn new(runs: &'a [&'a R], label: impl Fn(&R) -> String) -> SideBySide<'a, R> {
        let mut header = vec![String::new()];
        header.extend(runs.iter().map(|r| label(r)));
        SideBySide {
            runs,
            table: table::new(header.clone()),
            cells: html::Table {
                header,
                rows: Vec::new(),
            },
        }
    }

    /// Adds the row `name` with one cell per run.
    fn row(&mut self, name: &str, cell: impl Fn(&R) -> String) {
        let mut v = vec![name.to_string()];
        v.extend(self.runs.iter().map(|r| cell(r)));
        self.cells.rows.push(v.clone());
        self.table.add_row(v);
    }

    /// The remedy's outcome under each remedied column (the first column is the baseline).
    fn remedy_row(&mut self, checks: &[Check]) {
        if checks.is_empty() {
            return;
        }
        let mut v = vec!["remedy".to_string(), "(baseline)".to_string()];
        v.extend(
            checks
                .iter()
                .map(|c| format!("{}: {}", c.effect.name(), c.after)),
        );
        v.resize(self.runs.len() + 1, String::new());
        self.cells.rows.push(v.clone());
        self.table.add_row(v);
    }
}

impl<R> std::fmt::Display for SideBySide<'_, R> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.table.fmt(f)
    }
}

/// The pathologies a run's findings name with their severity, `none` when there are none.
fn pathology_names(findings: &[tcpdoctor_model::Finding]) -> String {
    if findings.is_empty() {
        return "none".into();
    }
    findings
        .iter()
        .map(|f| format!("{} ({})", f.pathology.name(), f.severity))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The `--pcap` line: where the capture went and what tcpdump counted.
fn capture_line(
    w: &mut dyn Write,
    capture: &Option<crate::capture::CaptureSummary>,
) -> io::Result<()> {
    let Some(cap) = capture else {
        return Ok(());
    };
    let known = |n: Option<u64>| n.map(|n| n.to_string()).unwrap_or_else(|| "?".into());
    writeln!(
        w,
        "Capture: {} ({} packets, {} dropped by kernel)",
        cap.path.display(),
        known(cap.packets_captured),
        known(cap.packets_dropped_by_kernel)
    )?;
    writeln!(w)
}

/// `--remedies`: the baseline, the table of remedies (prediction, measurement, agreement,
/// pathology gone, verdict), the notes the predictions rest on, and the verdict.
pub fn remedies<C, R, F>(
    w: &mut dyn Write,
    r: &Report<scenario::RemedyReport<C, R, F>>,
    scenario: &str,
) -> io::Result<()> {
    let b = &r.body;
    writeln!(w, "lab {scenario} --remedies (run {})", b.header.run_id)?;
    writeln!(w)?;
    writeln!(w, "Baseline: {}", b.baseline_label)?;
    writeln!(w, "  measured: {}", b.baseline_harm)?;
    writeln!(
        w,
        "  diagnosis (by {}): {}",
        b.header.diagnosed_by.join("; "),
        pathology_names(&b.baseline_findings)
    )?;
    writeln!(w)?;
    let mut t = table::new([
        "remedy",
        "what it changes",
        "predicted (tcpdoctor's arithmetic)",
        "measured",
        "prediction vs measurement",
        "gone",
        "verdict",
    ]);
    table::wrap(&mut t, 200);
    for row in &b.remedies {
        let predicted = match (&row.prediction, &row.not_predicted) {
            (Some(p), _) => format!("{}\n=> {}", p.formula, p.effect),
            (None, Some(why)) => format!("no prediction: {why}"),
            (None, None) => "-".into(),
        };
        t.add_row(vec![
            row.remedy.clone(),
            row.changes.clone(),
            predicted,
            row.measured
                .as_ref()
                .map(|m| m.text.clone())
                .unwrap_or_else(|| "-".into()),
            row.agreement_note.clone(),
            match row.pathology_gone {
                Some(true) => "yes".into(),
                Some(false) => "no".into(),
                None => "-".into(),
            },
            row.why.clone(),
        ]);
    }
    writeln!(w, "{t}")?;
    writeln!(w)?;
    if !b.notes.is_empty() {
        writeln!(w, "What the predictions rest on:")?;
        for n in &b.notes {
            writeln!(w, "  - {n}")?;
        }
        writeln!(w)?;
    }
    if let Some(l) = &b.syn_ladder {
        ladder_table(w, l)?;
    }
    trace_lines(w, &b.header.trace)?;
    capture_line(w, &b.header.capture)?;
    reproduction_lines(w, &b.header.reproduction)?;
    if let Some(i) = crate::remedy::followed_row(&b.remedies) {
        writeln!(
            w,
            "The verdict and exit status follow the remedy \"{}\" (the first that works, else the first measured).",
            b.remedies[i].remedy
        )?;
    }
    verdict_line(w, r)
}

/// What the SYN ladder cost the baseline: connects per rung, predicted and measured.
fn ladder_table(w: &mut dyn Write, l: &crate::scenario::churn::LadderCost) -> io::Result<()> {
    writeln!(
        w,
        "What the SYN ladder costs per lost SYN (baseline, {} connects):",
        l.connects
    )?;
    let mut t = table::new([
        "lost SYNs",
        "rung (model)",
        "connects",
        "predicted connects",
        "measured connect",
    ]);
    for r in &l.rungs {
        t.add_row(vec![
            r.attempt.to_string(),
            format!("{} ms", r.rung_ms),
            r.connects.to_string(),
            r.predicted_connects
                .map(|p| format!("{p:.1}"))
                .unwrap_or_else(|| "-".into()),
            fmt::micros(r.typical_connect_us),
        ]);
    }
    table::align_right(&mut t, &[0, 1, 2, 3, 4]);
    writeln!(w, "{t}")?;
    match (l.predicted_delay_per_connect_us, l.tolerance_us, l.drop_share) {
        (Some(p), Some(tol), Some(share)) => writeln!(
            w,
            "Added delay per connect: predicted sum p^k (1 - p) x rung k = {} (p = {share:.2}), measured {}: {} (within {}, three standard deviations over {} connects).",
            fmt::micros(p as u64),
            fmt::micros(l.measured_delay_per_connect_us as u64),
            if l.agrees == Some(true) { "agrees" } else { "disagrees" },
            fmt::micros(tol as u64),
            l.connects
        )?,
        _ => writeln!(
            w,
            "Added delay per connect: measured {}; each lost SYN costs the connect its rung.",
            fmt::micros(l.measured_delay_per_connect_us as u64)
        )?,
    }
    writeln!(w)
}

/// The remedy lines of `--fix`: one per remedied run, judged from its measurement.
fn remedy_lines(w: &mut dyn Write, checks: &[Check]) -> io::Result<()> {
    if checks.is_empty() {
        return Ok(());
    }
    writeln!(
        w,
        "Did the remedy work? (judged from the measurement of each remedied run)"
    )?;
    for c in checks {
        match &c.trace {
            Some(t) if !c.line.contains(t.as_str()) => {
                writeln!(w, "  {}: {} ({t})", c.run, c.line)?
            }
            _ => writeln!(w, "  {}: {}", c.run, c.line)?,
        }
    }
    writeln!(w)
}

/// What the eBPF trace attributed in each run (its own namespaces and window), beside the
/// kernel counters; or, in one line, what is missing to trace.
fn trace_lines(w: &mut dyn Write, t: &crate::trace::LabTrace) -> io::Result<()> {
    if !t.used {
        writeln!(
            w,
            "Trace (eBPF): not used: {}; the diagnosis rests on the lab's own measurements.",
            t.missing.as_deref().unwrap_or("no run was traced")
        )?;
        return writeln!(w);
    }
    writeln!(
        w,
        "Trace (eBPF, each run's own namespaces and window; attributed events per cause):"
    )?;
    for r in t.listed_runs() {
        writeln!(w, "  {}: {}", r.run, r.line())?;
        for l in r.netns_lines() {
            writeln!(w, "    {l}")?;
        }
    }
    writeln!(w)
}
