//! `tcpdoctor check`: the audit's human text (the settings table, also used by `doctor`, then
//! the findings and the verdict). The document is [`crate::check::Audit`].

use std::io::{self, Write};

use tcpdoctor_model::Report;
use tcpdoctor_report::{findings, fmt, table};

use crate::check;

/// The human text of an audit: the settings table, the findings and the verdict.
pub fn text(w: &mut dyn Write, r: &Report<check::Audit>) -> io::Result<()> {
    write_settings(w, &r.body)?;
    writeln!(w)?;
    findings::write(w, &r.findings)?;
    writeln!(w)?;
    findings::verdict(w, r)
}

fn opt(v: Option<u64>) -> String {
    v.map_or_else(|| "(absent)".to_string(), |v| v.to_string())
}

/// The settings table shared with `doctor`.
pub fn write_settings(w: &mut dyn Write, b: &check::Audit) -> io::Result<()> {
    let mut tab = table::new(["setting", "value"]);
    for row in settings_rows(b) {
        tab.add_row(row);
    }
    writeln!(w, "{tab}")
}

/// The settings table's rows (setting, value), also for the HTML report.
pub fn settings_rows(b: &check::Audit) -> Vec<[String; 2]> {
    let t = &b.settings.tcp;
    let m = &b.settings.more;
    let triple = |v: Option<[u64; 3]>| {
        v.map_or_else(
            || "(absent)".to_string(),
            |[a, d, x]| format!("{} {} {}", fmt::bytes(a), fmt::bytes(d), fmt::bytes(x)),
        )
    };
    let mut tab = Vec::new();
    let rows: Vec<(&str, String)> = vec![
        (
            "net.ipv4.ip_local_port_range",
            format!(
                "{} ({} ports, {} conn/s per destination)",
                t.ip_local_port_range,
                t.ip_local_port_range.len(),
                b.connect_rate_per_destination_per_s
            ),
        ),
        ("net.ipv4.tcp_tw_reuse", opt(t.tcp_tw_reuse)),
        ("net.ipv4.tcp_timestamps", opt(t.tcp_timestamps)),
        ("net.ipv4.tcp_rfc1337", opt(t.tcp_rfc1337)),
        ("net.ipv4.tcp_max_tw_buckets", opt(t.tcp_max_tw_buckets)),
        ("net.core.somaxconn", opt(t.somaxconn)),
        ("net.ipv4.tcp_max_syn_backlog", opt(t.tcp_max_syn_backlog)),
        ("net.ipv4.tcp_syncookies", opt(m.tcp_syncookies)),
        (
            "net.ipv4.tcp_syn_retries",
            format!("{} (ladder {})", t.tcp_syn_retries, b.settings.syn_ladder()),
        ),
        (
            "net.ipv4.tcp_syn_linear_timeouts",
            opt(t.tcp_syn_linear_timeouts),
        ),
        (
            "net.ipv4.tcp_rto_min_us",
            format!("{} ({})", opt(t.tcp_rto_min_us), fmt::duration(t.rto_min())),
        ),
        ("net.ipv4.tcp_rto_max_ms", opt(m.tcp_rto_max_ms)),
        ("net.ipv4.tcp_fin_timeout", opt(t.tcp_fin_timeout)),
        ("net.ipv4.tcp_rmem", triple(m.tcp_rmem_bytes)),
        ("net.ipv4.tcp_wmem", triple(m.tcp_wmem_bytes)),
        (
            "net.core.rmem_max",
            m.rmem_max_bytes.map_or("(absent)".into(), fmt::bytes),
        ),
        (
            "net.core.wmem_max",
            m.wmem_max_bytes.map_or("(absent)".into(), fmt::bytes),
        ),
    ];
    for (k, v) in rows {
        tab.push([k.to_string(), v]);
    }
    for r in &b.settings.routes {
        tab.push([
            format!("route {} rto_min", r.route),
            fmt::micros(r.rto_min_us),
        ]);
    }
    tab
}
