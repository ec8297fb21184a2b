//! The probe's human text, built on `tcpdoctor_report`'s printers (findings block, tables,
//! number formats). The document is [`Summary`]; its HTML page is [`crate::html`].

use std::io::{self, Write};

use tcpdoctor_model::Report;
use tcpdoctor_report::{findings, fmt, table};

use crate::split::TimeSplit;
use crate::stats::{CpuWait, Stage, Summary};
use crate::CloseFirst;

/// The human text of a run: what ran, the counts, latency per phase, errors, unanswered
/// requests, slow requests by cause, counters, settings, then the findings and the verdict.
pub fn text(w: &mut dyn Write, r: &Report<Summary>) -> io::Result<()> {
    let s = &r.body;
    let server = if s.embedded_server.is_some() {
        " (embedded server)"
    } else {
        ""
    };
    let mode = match (s.keepalive, &s.url) {
        (Some(k), Some(u)) => format!("http {u} keep-alive {}", if k { "on" } else { "off" }),
        _ => s.mode.clone(),
    };
    writeln!(
        w,
        "probe: {mode} to {}{server}, {} workers, {}, close first: {}{}{}",
        s.target,
        s.concurrency,
        fmt::micros(s.elapsed_us),
        match s.close_first {
            CloseFirst::Client => "client",
            CloseFirst::Server => "server",
        },
        if s.linger0 { ", SO_LINGER 0" } else { "" },
        if s.nodelay { ", TCP_NODELAY" } else { "" },
    )?;
    writeln!(
        w,
        "{} requests ok ({}/s), {} failed, {} in flight cut at the end; {} connections opened ({}/s), {} local ports used",
        s.requests_ok,
        fmt::count(s.requests_ok_per_s),
        s.requests_failed,
        s.requests_cut,
        s.connections_opened,
        fmt::count(s.connections_per_s),
        s.local_ports_used
    )?;
    writeln!(w)?;
    outcomes(w, s)?;
    if s.per_second.len() > 1 {
        writeln!(w, "Per second:")?;
        let mut t = table::new(["second", "ok", "failed", "p99 total", "max total"]);
        for p in s.per_second.iter().take(30) {
            t.add_row(vec![
                p.second.to_string(),
                p.ok.to_string(),
                p.failed.to_string(),
                // A second without a completed request measured no latency.
                p.p99_total_us.map_or("-".into(), fmt::micros),
                p.max_total_us.map_or("-".into(), fmt::micros),
            ]);
        }
        table::align_right(&mut t, &[0, 1, 2, 3, 4]);
        writeln!(w, "{t}\n")?;
    }
    writeln!(
        w,
        "Slow requests (total > {}): {}",
        fmt::micros(s.spikes.threshold_us),
        s.spikes.count
    )?;
    if !s.spikes.groups.is_empty() {
        let mut t = table::new([
            "cause",
            "count",
            "corroborated",
            "typical slow phase",
            "max total",
            "example local ports",
        ]);
        for g in &s.spikes.groups {
            t.add_row(vec![
                g.label.clone(),
                g.count.to_string(),
                g.corroborated.to_string(),
                fmt::micros(g.typical_phase_us),
                fmt::micros(g.max_total_us),
                join_ports(&g.example_local_ports),
            ]);
        }
        table::align_right(&mut t, &[1, 2, 3, 4]);
        writeln!(w, "{t}")?;
    }
    if let Some(c) = s.cpu_wait {
        writeln!(w, "CPU contention: {}", cpu_wait_text(&c))?;
    }
    writeln!(w)?;
    time_split(w, &s.time_split)?;
    if !s.counters.is_empty() {
        writeln!(w, "Kernel counters that moved (this network namespace):")?;
        let mut t = table::new(["counter", "delta", "meaning"]);
        for c in &s.counters {
            t.add_row(vec![
                c.name.clone(),
                format!("{:+}", c.delta),
                c.meaning.clone(),
            ]);
        }
        table::align_right(&mut t, &[1]);
        writeln!(w, "{t}\n")?;
    }
    let st = &s.settings;
    let ladder: Vec<String> = st
        .syn_ladder_ms
        .iter()
        .map(|ms| format!("{}", *ms as f64 / 1000.0))
        .collect();
    writeln!(
        w,
        "Settings: ip_local_port_range {} ({} ports usable), tcp_tw_reuse {}, SYN retransmits at {} s (gives up at {} s), RTO floor {} ({})\n",
        st.ip_local_port_range,
        st.ports_available,
        st.tcp_tw_reuse.map_or("n/a".to_string(), |v| v.to_string()),
        ladder.join(", "),
        st.syn_give_up_ms as f64 / 1000.0,
        fmt::micros(st.rto_min_us),
        st.rto_min_source
    )?;
    findings::write(w, &r.findings)?;
    writeln!(w)?;
    if s.time_split.requests > 0 {
        writeln!(w, "Where the time went: {}", s.time_split.headline)?;
    }
    findings::verdict(w, r)
}

/// What happened to the requests: the unanswered ones, the latency of the successful ones
/// by phase, the errors and the HTTP status codes.
fn outcomes(w: &mut dyn Write, s: &Summary) -> io::Result<()> {
    if !s.unanswered.is_empty() {
        writeln!(w, "Unanswered:")?;
        let mut t = table::new([
            "waiting for",
            "count",
            "timed out",
            "cut at end",
            "waited",
            "partial replies",
            "local ports",
        ]);
        for u in &s.unanswered {
            let waited = if fmt::micros(u.min_wait_us) == fmt::micros(u.max_wait_us) {
                fmt::micros(u.max_wait_us)
            } else {
                format!(
                    "{}..{}",
                    fmt::micros(u.min_wait_us),
                    fmt::micros(u.max_wait_us)
                )
            };
            t.add_row(vec![
                match u.stage {
                    Stage::Handshake => "SYN-ACK".to_string(),
                    Stage::Reply => "reply".to_string(),
                },
                u.count.to_string(),
                u.timed_out.to_string(),
                u.cut.to_string(),
                waited,
                if u.partial_replies > 0 {
                    format!(
                        "{} (at most {} bytes)",
                        u.partial_replies, u.max_received_bytes
                    )
                } else {
                    "0".to_string()
                },
                join_ports(&u.example_local_ports),
            ]);
        }
        table::align_right(&mut t, &[1, 2, 3, 4]);
        writeln!(w, "{t}\n")?;
    }
    if !s.phases.is_empty() && s.requests_ok > 0 {
        writeln!(w, "Latency of successful requests:")?;
        let mut t = table::new([
            "phase", "count", "min", "p50", "p90", "p99", "p99.9", "p99.99", "max",
        ]);
        for p in &s.phases {
            t.add_row(vec![
                p.phase.to_string(),
                p.count.to_string(),
                fmt::micros(p.min_us),
                fmt::micros(p.p50_us),
                fmt::micros(p.p90_us),
                fmt::micros(p.p99_us),
                fmt::micros(p.p999_us),
                fmt::micros(p.p9999_us),
                fmt::micros(p.max_us),
            ]);
        }
        table::align_right(&mut t, &[1, 2, 3, 4, 5, 6, 7, 8]);
        writeln!(w, "{t}\n")?;
    }
    if !s.errors.is_empty() {
        writeln!(w, "Errors:")?;
        let mut t = table::new([
            "errno",
            "phase",
            "count",
            "first at",
            "ok before",
            "local ports",
        ]);
        for e in &s.errors {
            t.add_row(vec![
                e.errno.clone(),
                format!("{:?}", e.phase).to_lowercase(),
                e.count.to_string(),
                fmt::micros(e.first_at_us),
                e.ok_before_first.to_string(),
                join_ports(&e.example_local_ports),
            ]);
        }
        table::align_right(&mut t, &[2, 3, 4]);
        writeln!(w, "{t}\n")?;
    }
    if !s.status_codes.is_empty() {
        let codes: Vec<String> = s
            .status_codes
            .iter()
            .map(|(c, n)| format!("{c} x {n}"))
            .collect();
        writeln!(
            w,
            "HTTP status codes: {} (success: {})\n",
            codes.join(", "),
            s.expect_status.as_deref().unwrap_or("2xx")
        )?;
    }
    Ok(())
}

/// The time split table: each part's p50/p99/max over the completed requests, its share of
/// their time, and over the slow requests how often it was the largest part.
fn time_split(w: &mut dyn Write, t: &TimeSplit) -> io::Result<()> {
    if t.requests == 0 {
        return Ok(());
    }
    writeln!(
        w,
        "Where the time went ({} completed requests, {} slow; the path's round trip {}: the connections' median, as the kernel measured it where read, else the handshake):",
        t.requests,
        t.slow_requests,
        fmt::micros(t.path_rtt_us)
    )?;
    // Without a slow request the slow columns would show latencies nobody measured.
    let slow = t.slow_requests > 0;
    let mut head = vec!["part", "p50", "p99", "max", "share"];
    if slow {
        head.extend(["largest in slow", "slow p50", "slow p99"]);
    }
    let mut tb = table::new(head.clone());
    for c in t
        .components
        .iter()
        .filter(|c| c.max_us > 0 || c.slow_dominated > 0)
    {
        let mut row = vec![
            c.component.to_string(),
            fmt::micros(c.p50_us),
            fmt::micros(c.p99_us),
            fmt::micros(c.max_us),
            format!("{:.0}%", c.share * 100.0),
        ];
        if slow {
            row.extend([
                c.slow_dominated.to_string(),
                fmt::micros(c.slow_p50_us),
                fmt::micros(c.slow_p99_us),
            ]);
        }
        tb.add_row(row);
    }
    let right: Vec<usize> = (1..head.len()).collect();
    table::align_right(&mut tb, &right);
    writeln!(w, "{tb}")?;
    let covers: Vec<String> = t
        .components
        .iter()
        .filter(|c| c.max_us > 0 || c.slow_dominated > 0)
        .map(|c| format!("{}: {}", c.component, c.component.describe()))
        .collect();
    writeln!(w, "({})", covers.join("; "))?;
    if let Some(h) = &t.transfer_holds {
        writeln!(
            w,
            "{} replies were held ~{} after their first byte (a delayed ACK; see the findings).",
            h.count,
            fmt::micros(h.p50_us)
        )?;
    }
    writeln!(w)
}

fn join_ports(p: &[u16]) -> String {
    p.iter().map(u16::to_string).collect::<Vec<_>>().join(" ")
}

/// The host's CPU contention during a run, as both reports state it.
pub(crate) fn cpu_wait_text(c: &CpuWait) -> String {
    format!(
        "some task on this host waited for a CPU during {:.0}% of the run ({}, \
         /proc/pressure/cpu)",
        c.share * 100.0,
        fmt::micros(c.some_us)
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::split::tests::{rec, waits};
    use crate::split::{summarize, Baseline};

    /// Issue 24: without a slow request the time split showed "slow p50 0us", a latency
    /// nobody measured.
    #[test]
    fn the_time_split_has_no_slow_columns_without_a_slow_request() {
        let rs: Vec<_> = (0..4).map(|w| rec(w, 0.05, 0.2, 0.02)).collect();
        let base = Baseline::of(&rs, &[], None);
        let t = summarize(&rs, &[], &base, &waits(&[0]), 0);
        assert_eq!((t.requests, t.slow_requests), (4, 0));
        let mut out = Vec::new();
        time_split(&mut out, &t).unwrap();
        let out = String::from_utf8(out).unwrap();
        assert!(out.contains("network"), "{out}");
        assert!(
            !out.contains("slow p50") && !out.contains("largest in slow"),
            "{out}"
        );
    }
}
