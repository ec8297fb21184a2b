//! `tcpdoctor check`: audit of TCP sysctls and routes, with the arithmetic behind each finding.

use std::io::{self, Write};

use tcpdoctor_host::check::{self, Inputs};
use tcpdoctor_model::{Measured, Report};
use tcpdoctor_report::{findings, fmt, table};

/// The long help of `tcpdoctor check --help` (what it needs, overhead, fields, example).
const ABOUT: &str = r#"Reads /proc/sys/net, `ip route` (iproute2) and the listening sockets (sock_diag, for
their backlogs against somaxconn); changes nothing. Needs no root, except
--netns. Overhead: a few file reads, under 10 ms.

Each finding shows the setting and the arithmetic behind it: the ephemeral port budget
(ports / 60 s TIME_WAIT = new connections/s per destination) and the parity connect()
prefers, tcp_tw_reuse (2, the default, covers loopback only), tcp_timestamps, tcp_rfc1337,
tcp_max_tw_buckets, somaxconn and tcp_max_syn_backlog, the SYN retransmission ladder
(tcp_syn_retries, tcp_syn_linear_timeouts, tcp_rto_max_ms: retransmissions stop at their
count or at the kernel's time budget, whichever comes first), the RTO floor
(tcp_rto_min_us, per-route rto_min), buffer limits, and settings unsafe on internet-facing
hosts. Risky settings are judged as exposures: one level below the harm they would cause.

JSON fields: `settings` (every value read, sysctl names with units in the key),
`syn_ladder_s` (when each SYN retransmission leaves), `syn_give_up_s` (when connect()
fails with ETIMEDOUT), `syn_give_up_latest_s` (the same with every timer firing as late as
the timer wheel allows), `syn_time_budget_s`, `rto_floor_us`,
`connect_rate_per_destination_per_s`, `findings[].evidence` (`setting`, `arithmetic`).

Example: tcpdoctor check --json | jq '.findings[].summary'"#;

/// Audit TCP sysctls and routes of this host (or one network namespace).
#[derive(clap::Args, Debug)]
#[command(after_long_help = ABOUT)]
pub struct Args {
    /// Print JSON instead of text.
    #[arg(long)]
    pub json: bool,
    /// Audit inside network namespace NAME (from `ip netns list`; needs root).
    #[arg(long, value_name = "NAME")]
    pub netns: Option<String>,
}

pub fn run(args: Args) -> anyhow::Result<i32> {
    if let Some(ns) = &args.netns {
        crate::netns::enter(ns)?;
    }
    let mut inputs = Inputs::read()?;
    // Listener backlogs from the socket census; without it the listener checks are skipped.
    if let Ok(c) = tcpdoctor_host::sockets::census(&tcpdoctor_host::sockets::Filter::default()) {
        inputs.listeners =
            check::listener_backlogs(&tcpdoctor_host::sockets::analyze(&c, None).summary);
    }
    let found = check::audit(&inputs);
    let what = match &args.netns {
        Some(ns) => format!("the TCP settings of network namespace {ns}"),
        None => "this host's TCP settings".to_string(),
    };
    let report = Report::new(
        "check",
        found,
        check::Audit::new(inputs),
        Measured::Something(what),
    );
    crate::output::emit(&report, args.json, |w, r| {
        write_settings(w, &r.body)?;
        writeln!(w)?;
        findings::write(w, &r.findings)?;
        writeln!(w)?;
        findings::verdict(w, r)
    })
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
