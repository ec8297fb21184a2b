//! From what the exporter measured to metric families. Pure: no I/O, no clock (ages and
//! times are passed in).
//!
//! Naming follows the Prometheus conventions: a `tcpdoctor_` prefix, base units in the name
//! (`_seconds`), `_total` on counters (added by the printer), snake_case (so that
//! `promtool check metrics` accepts every name). Kernel counters keep their MIB and field in
//! the name, split into words: `TcpExtListenOverflows` is
//! `tcpdoctor_tcpext_listen_overflows_total`, and its HELP starts with the nstat name.
//!
//! Cardinality is bounded: destinations and listeners beyond `top` are summed under the label
//! value [`OTHER`]; findings have one series per pathology, severity and source class;
//! trace reasons are the kernel's enum.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::time::Duration;

use tcpdoctor_host::check::Inputs;
use tcpdoctor_host::counters::Snapshot;
use tcpdoctor_host::sockets::{Limit, PathStats, Summary, TcpState};
use tcpdoctor_model::{Finding, Pathology, Severity, Source};
use tcpdoctor_report::prometheus::{BaseUnit, Family};

/// The label value under which destinations and listeners beyond `--top-destinations` are
/// summed.
pub const OTHER: &str = "other";

/// The source classes of the findings metric: what a finding rests on.
pub const SOURCES: [(&str, &str); 2] = [
    ("observed", "sockets and counters seen now"),
    (
        "settings",
        "sysctls and routes that expose the host to the harm",
    ),
];

/// The class of a finding's source in the findings metric.
pub fn source_class(s: Source) -> &'static str {
    match s {
        Source::Check => "settings",
        _ => "observed",
    }
}

/// One census and what was judged from it.
pub struct Census<'a> {
    pub summary: &'a Summary,
    /// Settings and routes read with the census (`None` when they could not be read).
    pub inputs: Option<&'a Inputs>,
    pub findings: &'a [Finding],
    /// How long the census (dump and analysis) took.
    pub duration: Duration,
    /// The window the findings cover (census pair and counter delta), when there was one.
    pub window: Option<Duration>,
}

/// The families derived from one census: sockets by state, destinations, listeners, budgets,
/// findings. Built once per interval, served by every scrape until the next.
pub fn census(c: &Census, top: usize) -> Vec<Family> {
    let s = c.summary;
    let mut out = Vec::new();

    let mut states = Family::gauge(
        "tcpdoctor_sockets",
        "TCP sockets in each state (sock_diag census, IPv4 and IPv6)",
    );
    for st in TcpState::ALL {
        let n = s.by_state.get(&st).copied().unwrap_or(0);
        states.push(vec![("state", st.name().to_string())], n);
    }
    out.push(states);

    out.extend(destinations(s, top));
    out.extend(paths(s, top));
    out.extend(listeners(s, top));

    // Budgets from the settings.
    let ports = s.port_range.connect_ports();
    out.push(
        Family::gauge(
            "tcpdoctor_ephemeral_ports",
            "Ports connect() can pick from (net.ipv4.ip_local_port_range)",
        )
        .with(u64::from(ports)),
    );
    out.push(
        Family::gauge(
            "tcpdoctor_sustainable_connects_per_second",
            "New connections per second one client can open to one destination ip:port without TIME_WAIT reuse: ephemeral ports / 60 s TIME_WAIT",
        )
        .with(s.sustainable_connect_rate_per_s),
    );
    if let Some(i) = c.inputs {
        let ladder = i.syn_ladder();
        out.push(
            Family::gauge(
                "tcpdoctor_syn_give_up_seconds",
                "Time after which connect() gives up on a SYN that is never answered: the SYN retransmission ladder of tcp_syn_retries, tcp_syn_linear_timeouts and tcp_rto_max_ms",
            )
            .unit(BaseUnit::Seconds)
            .with(ladder.give_up_at().as_secs_f64()),
        );
        out.push(
            Family::gauge(
                "tcpdoctor_syn_first_retransmit_seconds",
                "When an unanswered SYN is first resent: the stall a dropped SYN costs",
            )
            .unit(BaseUnit::Seconds)
            .with(ladder.retransmit_at(1).unwrap_or_default().as_secs_f64()),
        );
        out.push(
            Family::gauge(
                "tcpdoctor_rto_floor_seconds",
                "Smallest data retransmission timeout a connection here can have: tcp_rto_min_us, lowered by any route's rto_min",
            )
            .unit(BaseUnit::Seconds)
            .with(i.rto_floor().as_secs_f64()),
        );
    }

    out.push(findings(c.findings));
    let window = Family::gauge(
        "tcpdoctor_findings_window_seconds",
        "Time between the two censuses and counter readings the findings compare",
    )
    .unit(BaseUnit::Seconds);
    out.push(match c.window {
        Some(w) => window.with(w.as_secs_f64()),
        None => window,
    });
    out.push(
        Family::gauge(
            "tcpdoctor_census_duration_seconds",
            "How long the last complete census took (sock_diag dump, settings and analysis)",
        )
        .unit(BaseUnit::Seconds)
        .with(c.duration.as_secs_f64()),
    );
    out.push(
        Family::gauge(
            "tcpdoctor_census_undecoded_messages",
            "Kernel messages of the last census that could not be decoded",
        )
        .with(s.undecoded_messages),
    );
    out
}

/// Per destination: the top `top` by ports unavailable (the census's order), the rest summed.
fn destinations(s: &Summary, top: usize) -> Vec<Family> {
    let ports = s.port_range.connect_ports();
    let mut count = Family::gauge(
        "tcpdoctor_destinations",
        "Remote ip:port destinations with outgoing sockets (all of them, before the --top-destinations cap)",
    );
    count.push(Vec::new(), s.destinations.len() as u64);
    let mut tw = Family::gauge(
        "tcpdoctor_destination_time_wait_sockets",
        "TIME_WAIT sockets toward a destination (the destinations with the fewest free ports; the rest summed under destination=\"other\")",
    );
    let mut used = Family::gauge(
        "tcpdoctor_destination_ephemeral_ports_in_use",
        "Local ports of the ephemeral range held by sockets toward a destination, any state (summed for destination=\"other\")",
    );
    let mut reusable = Family::gauge(
        "tcpdoctor_destination_time_wait_reusable_sockets",
        "TIME_WAIT sockets toward a destination whose port connect() may take over now (tcp_tw_reuse and timestamps, older than tcp_tw_reuse_delay)",
    );
    let mut headroom = Family::gauge(
        "tcpdoctor_destination_port_headroom",
        "Ephemeral ports still free toward a destination, reusable TIME_WAIT counted as free (for destination=\"other\": the smallest among them)",
    );
    let mut ratio = Family::gauge(
        "tcpdoctor_destination_port_budget_used_ratio",
        "Share of the ephemeral range connect() cannot use toward a destination, 0 to 1; port_exhaustion from 0.5 (for destination=\"other\": the largest among them)",
    )
    .unit(BaseUnit::Ratio);
    let mut rate = Family::gauge(
        "tcpdoctor_destination_sustainable_connects_per_second",
        "New connections per second toward a destination that TIME_WAIT lets this host sustain: ports / 60 s, or ports / tcp_tw_reuse_delay where reuse applies (for destination=\"other\": the smallest among them)",
    );
    for d in s.destinations.iter().take(top) {
        let l = || vec![("destination", d.remote.to_string())];
        tw.push(l(), d.time_wait);
        used.push(l(), d.ephemeral_ports_in_use);
        reusable.push(l(), d.time_wait_reusable);
        headroom.push(l(), d.headroom_ports);
        ratio.push(l(), d.ports_unavailable as f64 / f64::from(ports.max(1)));
        rate.push(l(), d.sustainable_connect_rate_per_s);
    }
    let rest = s.destinations.get(top..).unwrap_or_default();
    if !rest.is_empty() {
        let l = || vec![("destination", OTHER.to_string())];
        tw.push(l(), rest.iter().map(|d| d.time_wait).sum::<u64>());
        used.push(
            l(),
            rest.iter().map(|d| d.ephemeral_ports_in_use).sum::<u64>(),
        );
        reusable.push(l(), rest.iter().map(|d| d.time_wait_reusable).sum::<u64>());
        headroom.push(
            l(),
            rest.iter().map(|d| d.headroom_ports).min().unwrap_or(0),
        );
        let worst = rest.iter().map(|d| d.ports_unavailable).max().unwrap_or(0);
        ratio.push(l(), worst as f64 / f64::from(ports.max(1)));
        let slowest = rest
            .iter()
            .map(|d| d.sustainable_connect_rate_per_s)
            .fold(f64::INFINITY, f64::min);
        rate.push(l(), slowest);
    }
    vec![count, tw, used, reusable, headroom, ratio, rate]
}

/// The limits a busy connection's time is split into (`tcpi_busy_time`), as label values of
/// `tcpdoctor_destination_limited_ratio`.
pub const LIMITS: [(&str, &str); 3] = [
    (
        "receiver_window",
        "tcpi_rwnd_limited: data waited for the peer's receive window (its reader)",
    ),
    (
        "send_buffer",
        "tcpi_sndbuf_limited: the application waited for room in a full send buffer",
    ),
    (
        "in_flight",
        "the rest: data in flight or held by the congestion window or pacing",
    ),
];

/// Round trips and limited-time shares per destination: the top `top` by busy time in the
/// window (then by sockets), the rest summed under [`OTHER`]. Destinations without an
/// established socket carrying `tcp_info` have no sample.
fn paths(s: &Summary, top: usize) -> Vec<Family> {
    let mut with: Vec<_> = s
        .destinations
        .iter()
        .filter_map(|d| d.path.as_ref().map(|p| (d.remote.to_string(), p)))
        .collect();
    with.sort_by(|a, b| {
        b.1.busy_us
            .cmp(&a.1.busy_us)
            .then(b.1.sockets.cmp(&a.1.sockets))
            .then(a.0.cmp(&b.0))
    });
    let mut rtt = Family::gauge(
        "tcpdoctor_destination_rtt_seconds",
        "Smoothed round-trip time (tcpi_rtt) of the established connections toward a destination, their mean (the destinations busiest in the window; the rest under destination=\"other\", their mean)",
    )
    .unit(BaseUnit::Seconds);
    let mut min_rtt = Family::gauge(
        "tcpdoctor_destination_min_rtt_seconds",
        "The fastest round trip any established connection toward a destination has seen (tcpi_min_rtt, over the kernel's 300 s window): the path without queueing (for destination=\"other\": the smallest)",
    )
    .unit(BaseUnit::Seconds);
    let mut busy = Family::gauge(
        "tcpdoctor_destination_busy_seconds",
        "Time the connections toward a destination had data queued or in flight during the findings window (tcpi_busy_time growth between the two censuses, summed over the connections; summed for destination=\"other\")",
    )
    .unit(BaseUnit::Seconds);
    let help = format!(
        "Share of that busy time each limit held, 0 to 1, by limit: {}",
        LIMITS
            .iter()
            .map(|(l, h)| format!("{l} ({h})"))
            .collect::<Vec<_>>()
            .join(", ")
    );
    let mut limited =
        Family::gauge("tcpdoctor_destination_limited_ratio", help).unit(BaseUnit::Ratio);
    let mut named = Family::gauge(
        "tcpdoctor_destination_busy_connections",
        "Busy connections toward a destination in the findings window, by what limited them as tcpdoctor sockets names it: receiver_window, send_buffer, network (data in flight, the congestion window or pacing) or application (nothing to send); the in-flight time is named by the sender's state at the censuses (summed for destination=\"other\")",
    );
    let mut by_limit: HashMap<String, BTreeMap<Limit, u64>> = HashMap::new();
    for t in &s.transfers.busy {
        *by_limit
            .entry(t.remote.to_string())
            .or_default()
            .entry(t.limit)
            .or_default() += 1;
    }
    let mut put_named = |label: String, counts: &BTreeMap<Limit, u64>| {
        for l in Limit::ALL {
            named.push(
                vec![
                    ("destination", label.clone()),
                    ("limit", l.name().to_string()),
                ],
                counts.get(&l).copied().unwrap_or(0),
            );
        }
    };
    let mut put = |label: String, p: &PathStats| {
        let l = || vec![("destination", label.clone())];
        rtt.push(l(), p.rtt_us_mean as f64 / 1e6);
        if let Some(m) = p.min_rtt_us {
            min_rtt.push(l(), f64::from(m) / 1e6);
        }
        let Some(b) = p.busy_us else { return };
        busy.push(l(), b as f64 / 1e6);
        if b == 0 {
            return;
        }
        let rwnd = p.rwnd_limited_us.unwrap_or(0).min(b);
        let sndbuf = p.sndbuf_limited_us.unwrap_or(0).min(b - rwnd);
        for ((name, _), us) in LIMITS.iter().zip([rwnd, sndbuf, b - rwnd - sndbuf]) {
            let mut lab = l();
            lab.push(("limit", name.to_string()));
            limited.push(lab, us as f64 / b as f64);
        }
    };
    let none = BTreeMap::new();
    for (name, p) in with.iter().take(top) {
        put(name.clone(), p);
        put_named(name.clone(), by_limit.get(name).unwrap_or(&none));
    }
    let rest = with.get(top..).unwrap_or_default();
    if let Some(p) = PathStats::combined(rest.iter().map(|(_, p)| *p)) {
        put(OTHER.to_string(), &p);
        let mut sum: BTreeMap<Limit, u64> = BTreeMap::new();
        for (name, _) in rest {
            for (l, n) in by_limit.get(name).unwrap_or(&none) {
                *sum.entry(*l).or_default() += n;
            }
        }
        put_named(OTHER.to_string(), &sum);
    }
    vec![rtt, min_rtt, busy, limited, named]
}

/// Listening sockets: the top `top` (full queues first, then the longest), the rest summed.
fn listeners(s: &Summary, top: usize) -> Vec<Family> {
    let listening: Vec<_> = s.listeners.iter().filter(|l| l.listening).collect();
    let mut count = Family::gauge("tcpdoctor_listeners", "Listening TCP sockets");
    count.push(Vec::new(), listening.len() as u64);
    let mut queue = Family::gauge(
        "tcpdoctor_listener_accept_queue",
        "Connections completed and waiting for accept() on a listening socket (ss Recv-Q); beyond the backlog the kernel drops handshakes (summed for listener=\"other\")",
    );
    let mut backlog = Family::gauge(
        "tcpdoctor_listener_backlog",
        "A listening socket's accept queue limit: the listen() backlog capped by net.core.somaxconn (ss Send-Q; summed for listener=\"other\")",
    );
    for l in listening.iter().take(top) {
        let lab = || vec![("listener", l.local.to_string())];
        queue.push(lab(), u64::from(l.accept_queue.unwrap_or(0)));
        backlog.push(lab(), u64::from(l.backlog.unwrap_or(0)));
    }
    let rest = listening.get(top..).unwrap_or_default();
    if !rest.is_empty() {
        let lab = || vec![("listener", OTHER.to_string())];
        queue.push(
            lab(),
            rest.iter()
                .map(|l| u64::from(l.accept_queue.unwrap_or(0)))
                .sum::<u64>(),
        );
        backlog.push(
            lab(),
            rest.iter()
                .map(|l| u64::from(l.backlog.unwrap_or(0)))
                .sum::<u64>(),
        );
    }
    vec![count, queue, backlog]
}

const SEVERITIES: [Severity; 3] = [Severity::Info, Severity::Warning, Severity::Critical];

fn severity_name(s: Severity) -> &'static str {
    match s {
        Severity::Info => "info",
        Severity::Warning => "warning",
        Severity::Critical => "critical",
    }
}

/// Findings active now, one series per pathology, severity and source class (zeros
/// included, so that a finding that clears reads 0 rather than disappearing).
pub fn findings(found: &[Finding]) -> Family {
    let mut n: BTreeMap<(Pathology, Severity, &str), u64> = BTreeMap::new();
    // 1 while active, however many findings of the class (README): a count would make the
    // same state read 2 when two detectors each report it.
    for f in found {
        n.insert((f.pathology, f.severity, source_class(f.source)), 1);
    }
    let mut fam = Family::gauge(
        "tcpdoctor_findings",
        "Findings active now, as tcpdoctor doctor judges them (without its self-probe): source=\"observed\" from the census and the counter window, source=\"settings\" from sysctls and routes",
    );
    for p in Pathology::ALL {
        for sev in SEVERITIES {
            for (src, _) in SOURCES {
                fam.push(
                    vec![
                        ("pathology", p.name().to_string()),
                        ("severity", severity_name(sev).to_string()),
                        ("source", src.to_string()),
                    ],
                    n.get(&(p, sev, src)).copied().unwrap_or(0),
                );
            }
        }
    }
    fam
}

/// Levels in `/proc/net/snmp` that are settings or constants rather than measurements
/// (`RtoAlgorithm`, `RtoMin`, `RtoMax` in ms, `MaxConn` -1): not exported; the RTO floor
/// this host really uses is `tcpdoctor_rto_floor_seconds`.
const SKIPPED: [&str; 4] = ["TcpRtoAlgorithm", "TcpRtoMin", "TcpRtoMax", "TcpMaxConn"];

/// Splits a kernel field name into snake_case words: `ListenOverflows` -> `listen_overflows`,
/// `TCPOFOQueue` -> `tcp_ofo_queue`, `DelayedACKs` -> `delayed_acks`, `TCPMD5NotFound` ->
/// `tcp_md5_not_found`.
pub fn snake(field: &str) -> String {
    let (head, rest) = match field.strip_prefix("TCP") {
        // `TCP` before another capital is a word of its own (TCPOFOQueue).
        Some(r) if r.starts_with(|c: char| c.is_ascii_uppercase()) => ("tcp_", r),
        _ => ("", field),
    };
    let c: Vec<char> = rest.chars().collect();
    let mut out = String::from(head);
    for i in 0..c.len() {
        let ch = c[i];
        if i > 0 && ch.is_ascii_uppercase() {
            let prev = c[i - 1];
            let next = c.get(i + 1).copied();
            let after = c.get(i + 2).copied();
            let lower_next = next.is_some_and(|n| n.is_ascii_lowercase());
            // A plural acronym (ACKs, RTOs) keeps its s.
            let plural = next == Some('s') && after.is_none_or(|a| a.is_ascii_uppercase());
            let starts_word = prev.is_ascii_lowercase()
                || prev.is_ascii_digit()
                || (prev.is_ascii_uppercase() && lower_next && !plural);
            if starts_word {
                out.push('_');
            }
        }
        out.push(ch.to_ascii_lowercase());
    }
    out
}

/// The metric family name of a kernel counter (nstat name), `None` for those not exported.
pub fn kernel_name(nstat: &str) -> Option<String> {
    if SKIPPED.contains(&nstat) {
        return None;
    }
    let (mib, field) = if let Some(f) = nstat.strip_prefix("TcpExt") {
        ("tcpext", f)
    } else if let Some(f) = nstat.strip_prefix("Tcp") {
        ("tcp", f)
    } else {
        return None;
    };
    if field.is_empty() {
        return None;
    }
    Some(format!("tcpdoctor_{mib}_{}", snake(field)))
}

/// The kernel TCP counters (`Tcp*` of /proc/net/snmp, `TcpExt*` of /proc/net/netstat) of one
/// reading: counters as counters, levels (`TcpCurrEstab`) as gauges, HELP from tcpdoctor's
/// counter meanings.
pub fn kernel_counters(snap: &Snapshot) -> Vec<Family> {
    let mut out = Vec::new();
    let mut seen = HashSet::new();
    for (nstat, &v) in &snap.values {
        let Some(mut name) = kernel_name(nstat) else {
            continue;
        };
        if !seen.insert(name.clone()) {
            // Two kernel names split into the same words: the later keeps its own spelling.
            name = format!("tcpdoctor_{}", nstat.to_ascii_lowercase());
            seen.insert(name.clone());
        }
        let file = if nstat.starts_with("TcpExt") {
            "/proc/net/netstat"
        } else {
            "/proc/net/snmp"
        };
        let meaning = tcpdoctor_model::counters::info(nstat);
        let help = match meaning {
            Some(i) => format!("{nstat}: {}", i.meaning),
            None => format!("{nstat} as {file} counts it"),
        };
        let level = tcpdoctor_host::counters::is_level(nstat);
        let fam = if level {
            Family::gauge(name, help)
        } else {
            Family::counter(name, help)
        };
        out.push(fam.with(v));
    }
    out
}

/// What the exporter knows about itself at scrape time.
pub struct Meta<'a> {
    /// Time since the last complete census ended.
    pub census_age: Duration,
    /// When it ended, in seconds since the Unix epoch.
    pub census_timestamp_s: f64,
    pub censuses: u64,
    pub census_errors: u64,
    pub scrapes_rejected: u64,
    pub connections_dropped: u64,
    pub counter_read_errors: u64,
    pub version: &'a str,
    pub commit: &'a str,
}

pub fn meta(m: &Meta) -> Vec<Family> {
    let mut build = Family::gauge(
        "tcpdoctor_exporter_build_info",
        "The tcpdoctor version and git commit serving these metrics (always 1)",
    );
    build.push(
        vec![
            ("version", m.version.to_string()),
            ("commit", m.commit.to_string()),
        ],
        1u64,
    );
    vec![
        build,
        Family::gauge(
            "tcpdoctor_census_age_seconds",
            "Time since the census served here completed; scrapes never wait for a census in progress",
        )
        .unit(BaseUnit::Seconds)
        .with(m.census_age.as_secs_f64()),
        Family::gauge(
            "tcpdoctor_census_timestamp_seconds",
            "When the census served here completed, seconds since the Unix epoch",
        )
        .unit(BaseUnit::Seconds)
        .with(m.census_timestamp_s),
        Family::counter(
            "tcpdoctor_censuses",
            "Censuses completed since the exporter started",
        )
        .with(m.censuses),
        Family::counter(
            "tcpdoctor_census_errors",
            "Censuses that failed (the previous one is served meanwhile)",
        )
        .with(m.census_errors),
        Family::counter(
            "tcpdoctor_scrapes_rejected",
            "Scrapes refused with 503 after waiting 2 s for one of the concurrent render slots",
        )
        .with(m.scrapes_rejected),
        Family::counter(
            "tcpdoctor_http_connections_dropped",
            "HTTP connections closed to stay under the connection cap (the oldest idle one, or the newcomer when none was idle)",
        )
        .with(m.connections_dropped),
        Family::counter(
            "tcpdoctor_proc_read_errors",
            "Scrapes whose reading of the kernel counter files failed (those scrapes lack the kernel counters)",
        )
        .with(m.counter_read_errors),
    ]
}

/// What eBPF tracing has counted since the exporter started, or why it is not running.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Trace {
    /// `None` when tracing runs; the reason otherwise.
    pub unavailable: Option<String>,
    /// Kernel-side counts of each traced event (exact, also for records lost).
    pub kernel_events: BTreeMap<String, u64>,
    /// Attributed events per cause.
    pub causes: BTreeMap<String, u64>,
    /// TCP drops per kernel drop reason.
    pub drops: BTreeMap<String, u64>,
    /// Records lost because the ring buffer was full.
    pub lost: u64,
    /// Events the kernel skipped per tracepoint (its program already running on that CPU).
    pub missed: BTreeMap<String, u64>,
}

pub fn trace(t: &Trace) -> Vec<Family> {
    let mut avail = Family::gauge(
        "tcpdoctor_trace_available",
        "1 when eBPF tracing runs (needs root or CAP_BPF and CAP_PERFMON, and kernel BTF); 0 with the reason in the label",
    );
    avail.push(
        vec![("reason", t.unavailable.clone().unwrap_or_default())],
        u64::from(t.unavailable.is_none()),
    );
    if t.unavailable.is_some() {
        return vec![avail];
    }
    let mut kernel = Family::counter(
        "tcpdoctor_trace_kernel_events",
        "TCP events counted in the kernel by the trace programs (exact, also when records are lost), by event",
    );
    for (e, n) in &t.kernel_events {
        kernel.push(vec![("event", e.clone())], *n);
    }
    let mut causes = Family::counter(
        "tcpdoctor_trace_events",
        "Traced TCP events attributed to a cause (a SYN resent because it was dropped, met a full accept queue or was lost; data resent by timeout, tail loss probe or fast retransmit; ...)",
    );
    for (c, n) in &t.causes {
        causes.push(vec![("cause", c.clone())], *n);
    }
    let mut drops = Family::counter(
        "tcpdoctor_trace_drops",
        "TCP packets the kernel dropped, by the kernel's drop reason",
    );
    for (r, n) in &t.drops {
        drops.push(vec![("reason", r.clone())], *n);
    }
    let mut missed = Family::counter(
        "tcpdoctor_trace_missed_events",
        "TCP events the kernel did not run the trace for, by tracepoint: its program was already running on that CPU (in no other trace metric)",
    );
    for (h, n) in &t.missed {
        missed.push(vec![("hook", h.clone())], *n);
    }
    vec![
        avail,
        kernel,
        causes,
        drops,
        missed,
        Family::counter(
            "tcpdoctor_trace_lost_events",
            "Trace records lost because the ring buffer was full (their events are still in tcpdoctor_trace_kernel_events_total)",
        )
        .with(t.lost),
    ]
}

#[cfg(test)]
mod tests;
