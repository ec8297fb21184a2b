//! Audit of TCP sysctls and routes into findings, each with the arithmetic behind it.
//!
//! [`audit`] is pure: it takes settings (read by [`Inputs::read`] or built by a test) and
//! returns findings. Reading the host is kept in [`Inputs::read`] and [`routes`]. Nothing here
//! changes a setting.
//!
//! A setting harms nothing by itself: each risky one is described as an exposure
//! ([`Impact::exposure`]) to the harm it would cause, which the policy judges one level
//! below that harm (module [`risk`]). Settings that only set a budget or a timer (the port
//! budget, the SYN ladder, the RTO floor) are context ([`Impact::none`]).

use std::time::Duration;

use serde::Serialize;
use tcpdoctor_model::timers::GiveUp;
use tcpdoctor_model::timers::SYN_INITIAL_RTO;
use tcpdoctor_model::units;
use tcpdoctor_model::{Finding, Impact, Pathology, Remedy, Source, SynLadder};

use crate::sysctl::{self, TcpSettings, TIME_WAIT};
use crate::Error;

/// Kernel default size of `ip_local_port_range`: 32768-60999 = 28232 ports
/// (`inet_init_net`, net/ipv4/af_inet.c). Smaller ranges lower the TIME_WAIT budget.
pub const DEFAULT_PORTS: u32 = 28_232;

/// Kernel default of `net.core.somaxconn` since Linux 5.4 (`SOMAXCONN`, include/linux/socket.h).
pub const DEFAULT_SOMAXCONN: u64 = 4096;

/// Kernel default maximum of `tcp_rmem` (`tcp_init`, net/ipv4/tcp.c: 6 MiB with enough memory).
pub const DEFAULT_RMEM_MAX_BYTES: u64 = 6 * 1024 * 1024;

/// Kernel default maximum of `tcp_wmem` (`tcp_init`, net/ipv4/tcp.c: 4 MiB).
pub const DEFAULT_WMEM_MAX_BYTES: u64 = 4 * 1024 * 1024;

/// The round trip used to turn a buffer limit into a per-flow rate: 100 ms, a long
/// intercontinental path. Shown in the formula so the reader can redo it for their RTT.
pub const REFERENCE_RTT: Duration = Duration::from_millis(100);

/// The RTO floor below which spurious timeouts become likely on ordinary paths: 1 ms, about
/// the RTT plus jitter of a loaded LAN; RFC 6298 section 2.4 recommends a 1 s floor, Linux
/// uses 200 ms (`TCP_RTO_MIN`) and datacenter guides go down to a few ms, not below.
pub const RTO_FLOOR_RISKY: Duration = Duration::from_millis(1);

/// A listen() backlog below this overflows on an ordinary burst of connects: 16 is what a
/// single client opening one connection per CPU thread sends at once on a small server, and
/// far below the backlogs servers ask for (nginx 511, Go's `net` package uses somaxconn).
pub const SMALL_BACKLOG: u64 = 16;

/// `net.ipv4.tcp_syn_retries` default (`TCP_SYN_RETRIES`, include/net/tcp.h). More retries
/// stretch the time a connect to an unreachable host hangs beyond the kernel's choice.
pub const DEFAULT_SYN_RETRIES: u64 = 6;

/// The harm a risky setting exposes the host to, as [`Impact`]s marked [`Impact::exposure`]:
/// nothing was hurt yet, so the policy judges each one level below the harm itself.
pub mod risk {
    use std::time::Duration;
    use tcpdoctor_model::policy::LOST_CRITICAL;
    use tcpdoctor_model::Impact;

    /// The ephemeral ports toward one destination used up: connect() fails (EADDRNOTAVAIL).
    pub fn ports_used_up() -> Impact {
        Impact::budget(1.0).exposure()
    }

    /// Connects or transfers stalled for `d` (a dropped SYN waits for its 1 s retransmission).
    pub fn stall(d: Duration) -> Impact {
        Impact::stalls(0, None, Some(d)).exposure()
    }

    /// Operations failing outright (connection resets, refused clients). With `exposure` the
    /// `failed` count reads "at least one would", not a count seen.
    pub fn failures() -> Impact {
        Impact::failures(1, None).exposure()
    }

    /// A flow's throughput capped or collapsed whenever it needs more (a buffer limit below
    /// the path's bandwidth-delay product, spurious timeouts that reset the congestion
    /// window): the time-lost harm, as an exposure.
    pub fn throughput() -> Impact {
        Impact::none().with_time_lost(LOST_CRITICAL).exposure()
    }
}

/// Settings [`TcpSettings`] does not carry, read from this network namespace.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct More {
    /// `net.ipv4.tcp_rmem`: min, default, max (bytes).
    pub tcp_rmem_bytes: Option<[u64; 3]>,
    /// `net.ipv4.tcp_wmem`: min, default, max (bytes).
    pub tcp_wmem_bytes: Option<[u64; 3]>,
    /// `net.core.rmem_max` (bytes): cap of SO_RCVBUF.
    pub rmem_max_bytes: Option<u64>,
    /// `net.core.wmem_max` (bytes): cap of SO_SNDBUF.
    pub wmem_max_bytes: Option<u64>,
    pub tcp_syncookies: Option<u64>,
    /// Removed in Linux 4.12; `Some` only on older kernels.
    pub tcp_tw_recycle: Option<u64>,
    pub tcp_abort_on_overflow: Option<u64>,
    /// `net.ipv4.tcp_tw_reuse_delay` (ms, Linux 6.13+): how long a socket must have been in
    /// TIME_WAIT before tw_reuse may take its port.
    pub tcp_tw_reuse_delay_ms: Option<u64>,
    /// `net.ipv4.tcp_rto_max_ms` (Linux 6.15+): the cap of every RTO, SYN timers included.
    pub tcp_rto_max_ms: Option<u64>,
}

/// A route that sets its own `rto_min` (`ip route ... rto_min 5ms`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct RouteRto {
    /// The route as `ip route` prints it, up to the metric.
    pub route: String,
    pub rto_min_us: u64,
}

/// A listening socket's accept queue limit, from the sock_diag census.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ListenerBacklog {
    pub local: String,
    /// The effective backlog, `min(listen() backlog, somaxconn)` (`sk_max_ack_backlog`).
    pub backlog: u64,
}

/// Everything the audit looks at.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Inputs {
    pub tcp: TcpSettings,
    pub more: More,
    pub routes: Vec<RouteRto>,
    /// Empty when the census was not taken; the listener checks are then skipped.
    pub listeners: Vec<ListenerBacklog>,
}

fn triple(name: &str) -> Result<Option<[u64; 3]>, Error> {
    let text = match sysctl::read(name) {
        Ok(t) => t,
        Err(Error::Read { source, .. }) if source.kind() == std::io::ErrorKind::NotFound => {
            return Ok(None)
        }
        Err(e) => return Err(e),
    };
    let v: Vec<u64> = text
        .split_whitespace()
        .map(str::parse)
        .collect::<Result<_, _>>()
        .map_err(|_| Error::Parse {
            path: sysctl::path(name),
            line: 1,
            message: format!("'{text}' is not three integers"),
        })?;
    match v.as_slice() {
        [a, b, c] => Ok(Some([*a, *b, *c])),
        _ => Err(Error::Parse {
            path: sysctl::path(name),
            line: 1,
            message: format!("'{text}' is not three integers"),
        }),
    }
}

impl More {
    /// Reads the current network namespace (`net.core.*_max` are per namespace too).
    pub fn read() -> Result<More, Error> {
        Ok(More {
            tcp_rmem_bytes: triple("net.ipv4.tcp_rmem")?,
            tcp_wmem_bytes: triple("net.ipv4.tcp_wmem")?,
            rmem_max_bytes: sysctl::read_u64("net.core.rmem_max")?,
            wmem_max_bytes: sysctl::read_u64("net.core.wmem_max")?,
            tcp_syncookies: sysctl::read_u64("net.ipv4.tcp_syncookies")?,
            tcp_tw_recycle: sysctl::read_u64("net.ipv4.tcp_tw_recycle")?,
            tcp_abort_on_overflow: sysctl::read_u64("net.ipv4.tcp_abort_on_overflow")?,
            tcp_tw_reuse_delay_ms: sysctl::read_u64("net.ipv4.tcp_tw_reuse_delay")?,
            tcp_rto_max_ms: sysctl::read_u64("net.ipv4.tcp_rto_max_ms")?,
        })
    }
}

impl Inputs {
    /// Reads settings and routes of the current network namespace; no listeners.
    pub fn read() -> Result<Inputs, Error> {
        Ok(Inputs {
            tcp: TcpSettings::read()?,
            more: More::read()?,
            routes: routes()?,
            listeners: Vec::new(),
        })
    }

    /// The SYN retransmission ladder of these settings (with `tcp_rto_max_ms` when known).
    pub fn syn_ladder(&self) -> SynLadder {
        self.tcp.syn_ladder_capped(self.more.tcp_rto_max_ms)
    }

    /// The smallest retransmission timeout any connection here can have: see [`rto_floor`].
    pub fn rto_floor(&self) -> Duration {
        rto_floor(&self.tcp, &self.routes)
    }
}

/// The settings read and what they imply, as `check` reports them (its JSON body, and
/// `settings` in `doctor`'s): every value read, the SYN ladder, the RTO floor and the port
/// budget per destination.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Audit {
    pub settings: Inputs,
    pub syn_ladder_s: Vec<f64>,
    pub syn_give_up_s: f64,
    pub syn_give_up_latest_s: f64,
    pub syn_time_budget_s: f64,
    pub rto_floor_us: u64,
    pub connect_rate_per_destination_per_s: f64,
}

impl Audit {
    pub fn new(inputs: Inputs) -> Audit {
        let ladder = inputs.syn_ladder();
        Audit {
            syn_ladder_s: ladder.rungs().iter().map(|d| d.as_secs_f64()).collect(),
            syn_give_up_s: ladder.give_up_at().as_secs_f64(),
            syn_give_up_latest_s: round2(ladder.give_up_latest().as_secs_f64()),
            syn_time_budget_s: ladder.time_budget().as_secs_f64(),
            rto_floor_us: inputs.rto_floor().as_micros() as u64,
            connect_rate_per_destination_per_s: round2(inputs.tcp.sustainable_connect_rate()),
            settings: inputs,
        }
    }
}

/// Effective backlogs of the listening sockets of a census summary, for the audit.
pub fn listener_backlogs(s: &crate::sockets::Summary) -> Vec<ListenerBacklog> {
    s.listeners
        .iter()
        .filter(|l| l.listening)
        .filter_map(|l| {
            l.backlog.map(|b| ListenerBacklog {
                local: l.local.to_string(),
                backlog: u64::from(b),
            })
        })
        .collect()
}

/// The smallest data retransmission timeout a connection of this namespace can have: the
/// `net.ipv4.tcp_rto_min_us` floor (200 ms, `TCP_RTO_MIN`, when the kernel has no such
/// sysctl), lowered by any route's `rto_min` (`tcp_rto_min` in include/net/tcp.h prefers a
/// locked route metric, and iproute2 always locks `rto_min`). Each `TcpExtTCPTimeouts`
/// increment stalled its connection at least this long. Not seen: a per-socket floor set by
/// an application (the `TCP_RTO_MIN_US` socket option, 6.15+) or a BPF program.
pub fn rto_floor(tcp: &TcpSettings, routes: &[RouteRto]) -> Duration {
    routes
        .iter()
        .map(|r| Duration::from_micros(r.rto_min_us))
        .fold(tcp.rto_min(), Duration::min)
}

/// [`rto_floor`] of the current network namespace (the calling thread's, for a thread that
/// entered one with setns).
pub fn rto_floor_here() -> Result<Duration, Error> {
    Ok(rto_floor(&TcpSettings::read()?, &routes()?))
}

/// Routes with an `rto_min` attribute, from `ip -o route show table all` (iproute2) and its
/// IPv6 twin. An absent `ip` binary yields no routes rather than an error.
pub fn routes() -> Result<Vec<RouteRto>, Error> {
    let mut out = Vec::new();
    for family in ["-4", "-6"] {
        let Ok(o) = std::process::Command::new("ip")
            .args([family, "-o", "route", "show", "table", "all"])
            .output()
        else {
            continue;
        };
        out.extend(parse_routes(&String::from_utf8_lossy(&o.stdout)));
    }
    Ok(out)
}

/// Parses `ip route` lines, keeping those with `rto_min [lock] VALUE`.
pub fn parse_routes(text: &str) -> Vec<RouteRto> {
    let mut out = Vec::new();
    for line in text.lines() {
        let words: Vec<&str> = line.split_whitespace().collect();
        let Some(i) = words.iter().position(|w| *w == "rto_min") else {
            continue;
        };
        let mut j = i + 1;
        if words.get(j) == Some(&"lock") {
            j += 1;
        }
        let Some(us) = words.get(j).and_then(|v| parse_time_us(v)) else {
            continue;
        };
        out.push(RouteRto {
            route: words[..i].join(" "),
            rto_min_us: us,
        });
    }
    out
}

/// `5ms`, `200us`, `1s`, `1.5ms`; a bare number is milliseconds, as iproute2 prints it.
fn parse_time_us(v: &str) -> Option<u64> {
    let (num, mult) = if let Some(n) = v.strip_suffix("us") {
        (n, 1.0)
    } else if let Some(n) = v.strip_suffix("usec") {
        (n, 1.0)
    } else if let Some(n) = v.strip_suffix("ms") {
        (n, 1e3)
    } else if let Some(n) = v.strip_suffix("msec") {
        (n, 1e3)
    } else if let Some(n) = v.strip_suffix("sec") {
        (n, 1e6)
    } else if let Some(n) = v.strip_suffix('s') {
        (n, 1e6)
    } else {
        (v, 1e3)
    };
    let x: f64 = num.parse().ok()?;
    (x >= 0.0).then(|| (x * mult).round() as u64)
}

fn f1(x: f64) -> String {
    if x >= 100.0 {
        format!("{x:.0}")
    } else {
        format!("{x:.2}")
    }
}

fn round2(x: f64) -> f64 {
    (x * 100.0).round() / 100.0
}

/// The audit. Findings are unranked (the `Report` ranks them).
pub fn audit(inputs: &Inputs) -> Vec<Finding> {
    let mut out = Vec::new();
    let t = &inputs.tcp;
    let m = &inputs.more;
    let ladder = inputs.syn_ladder();
    port_budget(t, m, &mut out);
    tw_reuse(t, m, &mut out);
    timestamps_and_rfc1337(t, &ladder, &mut out);
    tw_buckets(t, &mut out);
    backlogs(t, m, &inputs.listeners, &mut out);
    syn_ladder(t, &ladder, &mut out);
    rto(t, &inputs.routes, &mut out);
    buffers(m, &mut out);
    unsafe_settings(t, m, &mut out);
    out
}

const RANGE: &str = "net.ipv4.ip_local_port_range";

fn port_budget(t: &TcpSettings, m: &More, out: &mut Vec<Finding>) {
    let r = t.ip_local_port_range;
    let ports = r.len();
    let tw_s = TIME_WAIT.as_secs();
    let rate = t.sustainable_connect_rate();
    // __inet_hash_connect (net/ipv4/inet_hashtables.c, Linux 4.6+): connect() scans ports of
    // the same parity as `low` first; bind(0) (inet_csk_get_port) prefers the other half.
    let first = ports.div_ceil(2);
    let parity = if r.low.is_multiple_of(2) {
        "even"
    } else {
        "odd"
    };
    let reuse_covers_remote = t.tcp_tw_reuse == Some(1) && t.tcp_timestamps != Some(0);
    // A range narrower than the kernel's default, without reuse toward every destination,
    // exposes outgoing churn to running out of ports; the default range is a budget.
    let impact = if ports < DEFAULT_PORTS && !reuse_covers_remote {
        risk::ports_used_up()
    } else {
        Impact::none()
    };
    // Titled "Port budget" (context) or "Risk of ephemeral port exhaustion" (a narrow range):
    // the summary leads with the budget itself.
    let summary = if reuse_covers_remote {
        let delay_ms = m.tcp_tw_reuse_delay_ms.unwrap_or(1000);
        format!(
            "{} new connections/s per destination ip:port without tw_reuse ({ports} ports in {r}, each held {tw_s} s in TIME_WAIT); tcp_tw_reuse=1 lets connect() reuse a TIME_WAIT port after {delay_ms} ms",
            f1(rate)
        )
    } else {
        format!(
            "{} new connections/s per destination ip:port: {ports} ports in {r}, each held {tw_s} s in TIME_WAIT by the side that closes first",
            f1(rate)
        )
    };
    let mut f = Finding::new(Pathology::PortExhaustion, Source::Check, summary, impact)
        .setting(RANGE, format!("{} {}", r.low, r.high))
        .arithmetic(
            format!("ports = {} - {} + 1", r.high, r.low),
            f64::from(ports),
        )
        .arithmetic(
            format!("conn/s per destination = {ports} ports / {tw_s} s TIME_WAIT"),
            round2(rate),
        )
        .arithmetic(
            format!(
                "{parity} ports connect() tries first (parity of {}, Linux 4.6+; the other {} after) = {ports} / 2",
                r.low,
                ports - first
            ),
            f64::from(first),
        );
    if ports < DEFAULT_PORTS {
        f = f
            .arithmetic(
                format!("conn/s with the kernel default 32768-60999 = {DEFAULT_PORTS} ports / {tw_s} s"),
                round2(f64::from(DEFAULT_PORTS) / TIME_WAIT.as_secs_f64()),
            )
            .with_first_remedy(Remedy::new(format!(
                "Widen the range: sysctl -w {RANGE}=\"{} 60999\" (or 1024 65535, reserving listening ports with ip_local_reserved_ports).",
                r.low.min(32768)
            )));
    }
    out.push(f);
}

fn tw_reuse(t: &TcpSettings, m: &More, out: &mut Vec<Finding>) {
    const NAME: &str = "net.ipv4.tcp_tw_reuse";
    let rate = t.sustainable_connect_rate();
    let ports = t.ip_local_port_range.len();
    match t.tcp_tw_reuse {
        Some(0) => out.push(
            Finding::new(
                Pathology::PortExhaustion,
                Source::Check,
                format!(
                    "tcp_tw_reuse=0: connect() never reuses a port held by TIME_WAIT, not even toward loopback; each destination is capped at {} conn/s",
                    f1(rate)
                ),
                risk::ports_used_up(),
            )
            .setting(NAME, 0)
            .arithmetic(
                format!("conn/s per destination = {ports} ports / {} s TIME_WAIT", TIME_WAIT.as_secs()),
                round2(rate),
            )
            .with_first_remedy(Remedy {
                action: format!("sysctl -w {NAME}=2 (the kernel default: loopback only) or 1 (every destination)."),
                caution: Some("1 needs tcp_timestamps on both ends; it affects only outgoing connections".into()),
            }),
        ),
        Some(2) => out.push(
            Finding::new(
                Pathology::PortExhaustion,
                Source::Check,
                format!(
                    "{} new connections/s per destination on other hosts: tcp_tw_reuse=2 (the default) lets connect() reuse TIME_WAIT ports only toward loopback",
                    f1(rate)
                ),
                Impact::none(),
            )
            .setting(NAME, 2)
            .arithmetic(
                format!("conn/s per destination = {ports} ports / {} s TIME_WAIT", TIME_WAIT.as_secs()),
                round2(rate),
            ),
        ),
        Some(1) if t.tcp_timestamps == Some(0) => out.push(
            Finding::new(
                Pathology::PortExhaustion,
                Source::Check,
                "tcp_tw_reuse=1 has no effect: tcp_timestamps=0, and reuse needs the timestamp of the TIME_WAIT socket (tcp_twsk_unique, net/ipv4/tcp_ipv4.c)",
                risk::ports_used_up(),
            )
            .setting(NAME, 1)
            .setting("net.ipv4.tcp_timestamps", 0),
        ),
        Some(1) => {
            let delay = m.tcp_tw_reuse_delay_ms.unwrap_or(1000);
            out.push(
                Finding::new(
                    Pathology::PortExhaustion,
                    Source::Check,
                    format!("tcp_tw_reuse=1: connect() may reuse a TIME_WAIT port toward any host once it has been in TIME_WAIT for {delay} ms"),
                    Impact::none(),
                )
                .setting(NAME, 1)
                .arithmetic(
                    format!("conn/s per destination = {ports} ports / {} s reuse delay", delay as f64 / 1000.0),
                    round2(f64::from(ports) * 1000.0 / delay.max(1) as f64),
                ),
            )
        }
        _ => {}
    }
}

fn timestamps_and_rfc1337(t: &TcpSettings, ladder: &SynLadder, out: &mut Vec<Finding>) {
    if t.tcp_timestamps == Some(0) {
        out.push(
            Finding::new(
                Pathology::TimeWaitCollision,
                Source::Check,
                "tcp_timestamps=0: a SYN that reuses a 4-tuple in TIME_WAIT cannot be proven new (no PAWS), so collisions stall for the SYN timeout, and tcp_tw_reuse cannot work",
                risk::stall(SYN_INITIAL_RTO),
            )
            .setting("net.ipv4.tcp_timestamps", 0)
            .with_first_remedy(Remedy::new("sysctl -w net.ipv4.tcp_timestamps=1 (the default).")),
        );
    }
    if t.tcp_rfc1337 == Some(1) {
        out.push(
            Finding::new(
                Pathology::TimeWaitCollision,
                Source::Check,
                format!(
                    "tcp_rfc1337=1: a TIME_WAIT socket ignores the client's RST, so a colliding SYN waits for the SYN ladder ({ladder}); a 67 s connect was measured on this machine kind"
                ),
                risk::stall(ladder.give_up_at()),
            )
            .setting("net.ipv4.tcp_rfc1337", 1)
            .arithmetic(
                format!("s until a colliding connect fails (SYN ladder {ladder})"),
                ladder.give_up_at().as_secs_f64(),
            )
            .with_first_remedy(Remedy {
                action: "sysctl -w net.ipv4.tcp_rfc1337=0 (the default) unless you need its protection against TIME_WAIT assassination".into(),
                caution: Some("RFC 1337 hazards are rare on modern stacks; the stall it causes is not".into()),
            }),
        );
    }
}

fn tw_buckets(t: &TcpSettings, out: &mut Vec<Finding>) {
    let Some(max) = t.tcp_max_tw_buckets else {
        return;
    };
    let ports = u64::from(t.ip_local_port_range.len());
    if max < ports {
        out.push(
            Finding::new(
                Pathology::TimeWaitCollision,
                Source::Check,
                format!(
                    "tcp_max_tw_buckets={max} is below one destination's port budget ({ports}): TIME_WAIT sockets beyond it are destroyed at once (TcpExtTCPTimeWaitOverflow), so old duplicates can reach new connections"
                ),
                // A stale segment of the previous incarnation resets or stalls the new one.
                risk::failures(),
            )
            .setting("net.ipv4.tcp_max_tw_buckets", max)
            .arithmetic(format!("TIME_WAIT budget fraction = {max} buckets / {ports} ports"), round2(max as f64 / ports as f64))
            .with_first_remedy(Remedy::new(
                "Raise net.ipv4.tcp_max_tw_buckets to at least the port range size; fix the churn (keep-alive) instead of capping TIME_WAIT.",
            )),
        );
    }
}

fn backlogs(t: &TcpSettings, m: &More, listeners: &[ListenerBacklog], out: &mut Vec<Finding>) {
    if let Some(s) = t.somaxconn {
        if s < DEFAULT_SOMAXCONN {
            out.push(
                Finding::new(
                    Pathology::AcceptQueueOverflow,
                    Source::Check,
                    format!("net.core.somaxconn={s} caps every listen() backlog below the kernel default {DEFAULT_SOMAXCONN}: a burst of more than {s} connections between two accept() calls is dropped"),
                    risk::stall(SYN_INITIAL_RTO),
                )
                .setting("net.core.somaxconn", s),
            );
        }
        let capped: Vec<&ListenerBacklog> = listeners.iter().filter(|l| l.backlog == s).collect();
        if !capped.is_empty() && s < DEFAULT_SOMAXCONN {
            let items = capped.iter().map(|l| l.local.clone()).collect();
            if let Some(f) = out.last_mut() {
                f.evidence.push(tcpdoctor_model::Evidence::Examples {
                    what: format!("listeners capped at somaxconn={s}"),
                    items,
                });
            }
        }
    }
    if let (Some(syn), Some(s)) = (t.tcp_max_syn_backlog, t.somaxconn) {
        if syn < s && m.tcp_syncookies == Some(0) {
            out.push(
                Finding::new(
                    Pathology::SynRetransmit,
                    Source::Check,
                    format!("tcp_max_syn_backlog={syn} < somaxconn={s} with syncookies off: the SYN queue fills before the accept queue and further SYNs are dropped (1 s SYN retransmits)"),
                    risk::stall(SYN_INITIAL_RTO),
                )
                .setting("net.ipv4.tcp_max_syn_backlog", syn)
                .setting("net.core.somaxconn", s)
                .setting("net.ipv4.tcp_syncookies", 0),
            );
        }
    }
    // sk_max_ack_backlog: the accept queue holds backlog + 1 connections
    // (sk_acceptq_is_full, include/net/sock.h, uses '>').
    let small: Vec<&ListenerBacklog> = listeners
        .iter()
        .filter(|l| l.backlog < SMALL_BACKLOG)
        .collect();
    if !small.is_empty() {
        out.push(
            Finding::new(
                Pathology::AcceptQueueOverflow,
                Source::Check,
                format!(
                    "{} listener(s) with a backlog under {SMALL_BACKLOG}: a short pause in accept() overflows them",
                    small.len()
                ),
                // An application's own choice, sized (or not) to its connection rate; not a
                // host setting. Whether it overflows shows in the census and the counters,
                // which judge the harm; here it is context.
                Impact::none(),
            )
            .with_evidence(tcpdoctor_model::Evidence::Examples {
                what: "listener (backlog)".into(),
                items: small.iter().map(|l| format!("{} ({})", l.local, l.backlog)).collect(),
            }),
        );
    }
}

fn syn_ladder(t: &TcpSettings, ladder: &SynLadder, out: &mut Vec<Finding>) {
    let linear = match t.tcp_syn_linear_timeouts {
        Some(n) => format!("tcp_syn_linear_timeouts={n}"),
        None => "no tcp_syn_linear_timeouts (exponential backoff)".to_string(),
    };
    let give_up = ladder.give_up_at();
    let budget = ladder.time_budget();
    // The kernel's own ladder is context: what a lost SYN costs. More retries than the
    // kernel default make a connect to an unreachable host hang longer than it chose to:
    // an exposure to that stall.
    let impact = if t.tcp_syn_retries > DEFAULT_SYN_RETRIES {
        risk::stall(give_up)
    } else {
        Impact::none()
    };
    let mut f = Finding::new(
        Pathology::SynRetransmit,
        Source::Check,
        format!(
            "{ladder}: a lost SYN costs one of these rungs (tcp_syn_retries={}, {linear}; the retransmissions stop at a {} s time budget or at their count, whichever comes first, and late timers push the failure to at most {} s); connect spikes at these values are SYN retransmits",
            t.tcp_syn_retries,
            units::bare_secs(budget),
            ladder.give_up_latest().as_secs_f64().ceil(),
        ),
        impact,
    )
    .setting("net.ipv4.tcp_syn_retries", t.tcp_syn_retries);
    if let Some(n) = t.tcp_syn_linear_timeouts {
        f = f.setting("net.ipv4.tcp_syn_linear_timeouts", n);
    }
    let rungs: Vec<String> = ladder
        .rungs()
        .iter()
        .map(|d| units::bare_secs(*d))
        .collect();
    let linear_n = t.tcp_syn_linear_timeouts.unwrap_or(0);
    let ended = match ladder.ended_by() {
        GiveUp::Count => format!(
            "after tcp_syn_retries + tcp_syn_linear_timeouts = {} retransmissions",
            t.tcp_syn_retries + linear_n
        ),
        GiveUp::Time => format!(
            "at the first expiry past the {} s time budget",
            units::bare_secs(budget)
        ),
    };
    f = f
        .arithmetic(
            format!(
                "s until ETIMEDOUT: the timer expiry {ended} (1 s initial RTO, constant for {linear_n} retransmissions then doubling; retransmits at {} s)",
                rungs.join(", "),
            ),
            give_up.as_secs_f64(),
        )
        .arithmetic(
            format!(
                "s time budget = (2^(tcp_syn_retries + 1) - 1) x 1 s while under the RTO cap (tcp_model_timeout, net/ipv4/tcp_timer.c; tcp_syn_retries={})",
                t.tcp_syn_retries
            ),
            budget.as_secs_f64(),
        )
        .arithmetic(
            "s until ETIMEDOUT at the latest: each timer may fire up to 8/63 of its delay late (timer wheel, kernel/time/timer.c)",
            round2(ladder.give_up_latest().as_secs_f64()),
        );
    out.push(f);
}

fn rto(t: &TcpSettings, routes: &[RouteRto], out: &mut Vec<Finding>) {
    let floor = t.rto_min();
    let floor_us = floor.as_micros() as u64;
    let mut f = Finding::new(
        Pathology::Incast,
        Source::Check,
        format!(
            "{} ms: a tail loss that fast retransmit cannot repair stalls a flow at least this long; on a 100 us datacenter path that is {} round trips",
            floor_us as f64 / 1000.0,
            floor_us / 100
        ),
        Impact::none(),
    )
    .arithmetic(
        format!("round trips per timeout = {floor_us} us RTO floor / 100 us RTT"),
        (floor_us / 100) as f64,
    );
    if let Some(v) = t.tcp_rto_min_us {
        f = f.setting("net.ipv4.tcp_rto_min_us", v);
    }
    for r in routes {
        f = f.setting(
            format!("route {} rto_min", r.route).as_str(),
            format!("{} us", r.rto_min_us),
        );
    }
    out.push(f);
    let risky_route: Vec<&RouteRto> = routes
        .iter()
        .filter(|r| Duration::from_micros(r.rto_min_us) < RTO_FLOOR_RISKY)
        .collect();
    if floor < RTO_FLOOR_RISKY || !risky_route.is_empty() {
        let mut f = Finding::new(
            Pathology::RiskySetting,
            Source::Check,
            format!(
                "an RTO floor below {} ms fires spurious retransmission timeouts on any path whose RTT plus jitter exceeds it",
                RTO_FLOOR_RISKY.as_millis()
            ),
            // Each spurious timeout resends the window and collapses the congestion window.
            risk::throughput(),
        );
        if floor < RTO_FLOOR_RISKY {
            f = f.setting("net.ipv4.tcp_rto_min_us", floor_us);
        }
        for r in risky_route {
            f = f.setting(
                format!("route {} rto_min", r.route).as_str(),
                format!("{} us", r.rto_min_us),
            );
        }
        out.push(f);
    }
}

fn buffers(m: &More, out: &mut Vec<Finding>) {
    let rtt_ms = REFERENCE_RTT.as_millis() as f64;
    let rate = |bytes: u64| bytes as f64 * 8.0 / REFERENCE_RTT.as_secs_f64();
    if let Some([_, _, max]) = m.tcp_rmem_bytes {
        if max < DEFAULT_RMEM_MAX_BYTES {
            out.push(
                Finding::new(
                    Pathology::RiskySetting,
                    Source::Check,
                    format!(
                        "tcp_rmem max {max} B is below the kernel default {DEFAULT_RMEM_MAX_BYTES} B: one flow can receive at most {} Mbit/s over a {rtt_ms} ms RTT",
                        f1(rate(max) / 1e6)
                    ),
                    risk::throughput(),
                )
                .setting("net.ipv4.tcp_rmem", format!("{:?}", m.tcp_rmem_bytes.unwrap_or_default()))
                .arithmetic(format!("Mbit/s per flow = {max} B x 8 / {rtt_ms} ms"), round2(rate(max) / 1e6)),
            );
        }
    }
    if let Some([_, _, max]) = m.tcp_wmem_bytes {
        if max < DEFAULT_WMEM_MAX_BYTES {
            out.push(
                Finding::new(
                    Pathology::RiskySetting,
                    Source::Check,
                    format!(
                        "tcp_wmem max {max} B is below the kernel default {DEFAULT_WMEM_MAX_BYTES} B: one flow can send at most {} Mbit/s over a {rtt_ms} ms RTT",
                        f1(rate(max) / 1e6)
                    ),
                    risk::throughput(),
                )
                .setting("net.ipv4.tcp_wmem", format!("{:?}", m.tcp_wmem_bytes.unwrap_or_default()))
                .arithmetic(format!("Mbit/s per flow = {max} B x 8 / {rtt_ms} ms"), round2(rate(max) / 1e6)),
            );
        }
    }
    if let (Some(core), Some([_, _, auto])) = (m.rmem_max_bytes, m.tcp_rmem_bytes) {
        if core < auto {
            out.push(
                Finding::new(
                    Pathology::SlowReader,
                    Source::Check,
                    format!(
                        "{core} B for an application that sets SO_RCVBUF (net.core.rmem_max, doubled for overhead), which loses autotuning up to {auto} B: {} Mbit/s per flow over {rtt_ms} ms",
                        f1(rate(core) / 1e6)
                    ),
                    // Only applications that set SO_RCVBUF themselves meet this cap.
                    Impact::none(),
                )
                .setting("net.core.rmem_max", core)
                .arithmetic(format!("Mbit/s per flow = {core} B x 8 / {rtt_ms} ms"), round2(rate(core) / 1e6)),
            );
        }
    }
}

fn unsafe_settings(t: &TcpSettings, m: &More, out: &mut Vec<Finding>) {
    if m.tcp_tw_recycle == Some(1) {
        out.push(
            Finding::new(
                Pathology::RiskySetting,
                Source::Check,
                "tcp_tw_recycle=1 is unsafe on any host reachable through NAT: it drops SYNs whose timestamps are older than the last seen from that address, so clients behind one NAT fail to connect (removed in Linux 4.12)",
                risk::failures(),
            )
            .setting("net.ipv4.tcp_tw_recycle", 1)
            .with_first_remedy(Remedy::new("sysctl -w net.ipv4.tcp_tw_recycle=0; use tcp_tw_reuse=1 for outgoing churn.")),
        );
    }
    if m.tcp_syncookies == Some(0) {
        out.push(
            Finding::new(
                Pathology::RiskySetting,
                Source::Check,
                "tcp_syncookies=0 is unsafe on internet-facing hosts: a SYN flood fills the SYN queue and legitimate SYNs are dropped",
                risk::stall(SYN_INITIAL_RTO),
            )
            .setting("net.ipv4.tcp_syncookies", 0)
            .with_first_remedy(Remedy::new("sysctl -w net.ipv4.tcp_syncookies=1 (the default: cookies only when the queue overflows).")),
        );
    }
    if let Some(fin) = t.tcp_fin_timeout {
        // tcp_fin_timeout bounds FIN_WAIT_2 orphans (tcp_fin_time, include/net/tcp.h); the
        // TIME_WAIT length is the constant TCP_TIMEWAIT_LEN = 60 s.
        if fin < 60 {
            out.push(
                Finding::new(
                    Pathology::RiskySetting,
                    Source::Check,
                    format!("tcp_fin_timeout={fin} s does not shorten TIME_WAIT (fixed at 60 s, TCP_TIMEWAIT_LEN); it only limits orphaned FIN_WAIT_2 sockets, so it does not raise the connection budget"),
                    Impact::none(),
                )
                .setting("net.ipv4.tcp_fin_timeout", fin),
            );
        }
    }
    if m.tcp_abort_on_overflow == Some(1) {
        out.push(
            Finding::new(
                Pathology::AcceptQueueOverflow,
                Source::Check,
                "tcp_abort_on_overflow=1: a full accept queue resets new connections instead of letting the client retry, so a short stall in accept() becomes connection errors",
                risk::failures(),
            )
            .setting("net.ipv4.tcp_abort_on_overflow", 1),
        );
    }
}

#[cfg(test)]
mod tests;
