//! `tcpdoctor probe`: flags, the `--serve` mode, and the human rendering of a probe report.
//! Measurement lives in `tcpdoctor_probe`.

use std::io::{self, Write};
use std::net::{IpAddr, SocketAddr, ToSocketAddrs};
use std::str::FromStr;
use std::time::{Duration, Instant};

use anyhow::{bail, Context as _};
use clap::ValueEnum as _;
use tcpdoctor_model::{Measured, PortRange, Report};
use tcpdoctor_probe::http::{ExpectStatus, Url};
use tcpdoctor_probe::server::{Protocol, Server, ServerConfig};
use tcpdoctor_probe::{CloseFirst, Config, Mode};

use crate::{args, output};

const EXAMPLES: &str = "Examples:
  tcpdoctor probe                                  # embedded server, crr, 10 s
  tcpdoctor probe 10.0.0.5:8080 -c 8 -d 30s --linger0 --nodelay
  tcpdoctor probe http://127.0.0.1:8080/ --keepalive off -n 20000 --json
  tcpdoctor probe --serve 10.77.0.2:5001 --close-first server";

const ABOUT: &str =
    "Without TARGET, probes an embedded server on 127.0.0.1 (ephemeral port). Each worker\n\
(-c) opens connections in a closed loop (or open loop with --rate, latency counted from\n\
the scheduled start). Every connection is recorded: start, connect done, first reply\n\
byte, end, local port, outcome (ok or errno). Connections slower than the spike\n\
threshold are classified by their timer signature: SYN retransmission (with the attempt\n\
number on this host's SYN ladder), quick SYN resend after a stale ACK, data RTO, delayed\n\
ACK, accept-queue overflow, or unexplained; kernel counters (/proc/net/snmp, netstat)\n\
read before and after corroborate each cause. Every completed request's time is split\n\
into network (the handshake and the request's round trip: the connection's round trip as\n\
the kernel measured it, else the handshake), TLS, server (the first-byte wait less that\n\
round trip), transfer, TCP timers and the client's own; a slow request no timer explains\n\
is named server_response or network_latency after its largest part, unless the CPU waits\n\
of the workers (schedstat run_delay), of the embedded server, or for a rare stall of the\n\
host (/proc/pressure/cpu) could account for it. EADDRNOTAVAIL is reported as ephemeral\n\
port exhaustion, with the arithmetic (ports / 60 s TIME_WAIT), when at least half the\n\
ports were in use toward the target (connections before the failure, or sockets counted\n\
after it); --local-addr must be an address of this host (checked before the run).\n\
\n\
Needs: Linux; no root. Counters are those of the current network namespace (they\n\
include other traffic of the namespace). Overhead: the load itself, one thread per\n\
worker, ~80 bytes of memory per recorded connection.\n\
\n\
JSON fields (--json, all times in microseconds): requests (ended: ok or failed),\n\
requests_ok, requests_failed, requests_cut (in flight when the run ended: cut at the end\n\
of --duration or at Ctrl-C), connections_opened, connects_attempted, requests_ok_per_s,\n\
connections_per_s, local_ports_used, phases[] {phase: connect|tls|first_byte|total, count,\n\
min_us, mean_us, p50_us, p90_us, p99_us, p999_us, p9999_us, max_us}, errors[] {kind,\n\
errno, phase, count, first_at_us, ok_before_first, example_local_ports},\n\
unanswered[] {stage: handshake|reply, count, timed_out, etimedout, cut, min_wait_us,\n\
max_wait_us, first_timeout_at_us, timeout_us, partial_replies, max_received_bytes,\n\
expected_reply_bytes, example_local_ports}, status_codes {code: count}, status_classes\n\
{class: count}, expect_status, ports_toward_target {time_wait, total}, per_second[]\n\
{second, ok, failed, p99_total_us, max_total_us (null: none completed)}, spikes\n\
{threshold_us, count, groups[] {cause, attempt, count, corroborated, typical_phase_us,\n\
max_phase_us, max_total_us, example_local_ports}}, time_split {path_rtt_us, requests, slow_requests, total_p50_us,\n\
components[] {component: network|tls|server|transfer|tcp_timer|client, p50_us, p99_us,\n\
max_us, share, slow_dominated, slow_p50_us, slow_p99_us}, dominant, slow_dominant,\n\
tcp: fine|stalled|unexplained|failed|unmeasured, transfer_holds {count, p50_us, max_us,\n\
example_local_ports}, workers_cpu_wait_us, embedded_server_cpu_wait_us, headline},\n\
counters[] {name, delta, meaning}, settings {ip_local_port_range,\n\
ports_available, tcp_tw_reuse, syn_ladder_ms, syn_give_up_ms, rto_min_us,\n\
rto_min_source: route|sysctl|default, spike_threshold_us}, findings[].\n\
\n\
A run ends at --duration: requests still in flight are cut then and counted; those that\n\
had waited long (no SYN-ACK, no reply) are reported as unanswered with the time waited.\n\
In http mode, answers outside --expect-status (default 2xx) are failures.\n\
\n\
--serve ADDR:PORT runs only the embedded server (TCP responder, or HTTP with --mode\n\
http; --request-size/--reply-size/--close-first apply) until Ctrl-C/SIGTERM or\n\
--duration, so a probe in another namespace or host can target it.\n\n";

/// Generate connection churn or HTTP load and explain every latency spike.
#[derive(clap::Args, Debug)]
#[command(after_help = EXAMPLES, after_long_help = format!("{ABOUT}{EXAMPLES}"))]
pub struct Args {
    /// ADDR:PORT, HOST:PORT, http://HOST[:PORT]/PATH or https://HOST[:PORT]/PATH (implies
    /// --mode http; https speaks TLS and times its handshake as the `tls` phase).
    target: Option<Target>,
    /// connect: handshake only; crr: connect, request, reply, close; rr: persistent
    /// connection per worker; http: HTTP/1.1 GET.
    #[arg(long, value_enum)]
    mode: Option<ModeArg>,
    /// Workers, each with one connection in flight.
    #[arg(short = 'c', long, default_value_t = 2, value_parser = clap::value_parser!(u64).range(1..=10000))]
    concurrency: u64,
    /// Stop after this long (e.g. 10s, 500ms, 2m; default 10s).
    #[arg(short = 'd', long, value_name = "DURATION", value_parser = args::positive_duration)]
    duration: Option<Duration>,
    /// Stop after this many connections (requests in rr / keep-alive http); 10k = 10,000.
    #[arg(short = 'n', long, default_value = "1M", value_name = "N", value_parser = args::positive_count)]
    count: u64,
    /// Open loop: requests per second in total; latency counts from the scheduled start.
    #[arg(long, value_parser = positive_rate)]
    rate: Option<f64>,
    /// Close with SO_LINGER 0: RST instead of FIN, no TIME_WAIT on the client.
    #[arg(long)]
    linger0: bool,
    /// Set TCP_NODELAY on client sockets.
    #[arg(long)]
    nodelay: bool,
    /// Who closes first, and so holds TIME_WAIT: client or server (embedded server and
    /// client wait accordingly).
    #[arg(long, default_value = "client", value_parser = close_first)]
    close_first: CloseFirst,
    /// Source address to bind.
    #[arg(long, value_name = "IP")]
    local_addr: Option<IpAddr>,
    /// Bind these source ports explicitly, in turn (e.g. 20000-20199).
    #[arg(long, value_name = "LOW-HIGH")]
    local_ports: Option<PortRange>,
    /// Request bytes (crr, rr): 64, 4kB (4,000), 4KiB (4,096); at most 64 MiB.
    #[arg(long, default_value = "64", value_name = "BYTES", value_parser = message_size)]
    request_size: usize,
    /// Reply bytes (crr, rr; HTTP body size of the embedded server); at most 64 MiB.
    #[arg(long, default_value = "64", value_name = "BYTES", value_parser = message_size)]
    reply_size: usize,
    /// Cut a connect() after this long.
    #[arg(long, default_value = "10s", value_name = "DURATION", value_parser = args::positive_duration)]
    connect_timeout: Duration,
    /// Cut the wait for a reply after this long.
    #[arg(long, default_value = "10s", value_name = "DURATION", value_parser = args::positive_duration)]
    timeout: Duration,
    /// Classify requests slower than this (default: 20 x the median, within 5ms..200ms; waits
    /// that match a SYN retransmission or RTO are classified whatever the threshold).
    #[arg(long, value_name = "DURATION", value_parser = args::positive_duration)]
    spike_threshold: Option<Duration>,
    /// HTTP keep-alive: on (default) reuses connections, off sends Connection: close.
    #[arg(long, value_enum)]
    keepalive: Option<OnOff>,
    /// https: accept any server certificate (self-signed test servers). Without it the
    /// certificate must chain to a root this system trusts and name the host.
    #[arg(long)]
    insecure: bool,
    /// Path requested in http mode without a URL (default /), e.g. /status/503.
    #[arg(long)]
    path: Option<String>,
    /// HTTP statuses that count as success: classes and codes, e.g. 2xx,301,404 (default
    /// 2xx). Other answers are failures (reported as http_error), as wrk and oha count them.
    #[arg(long, value_name = "LIST")]
    expect_status: Option<ExpectStatus>,
    /// Print the report as JSON.
    #[arg(long)]
    json: bool,
    /// Also write a self-contained HTML report to FILE: latency over time with slow requests
    /// coloured by cause, the latency histogram, where the time went (a waterfall of the
    /// slowest requests, the histogram of the server's time), tables and findings.
    #[arg(long, value_name = "FILE", conflicts_with = "serve")]
    html: Option<std::path::PathBuf>,
    /// Run only the embedded server on ADDR:PORT (see above).
    #[arg(long, value_name = "ADDR:PORT", conflicts_with = "target")]
    serve: Option<SocketAddr>,
    /// Threads of the --serve server (each serves one connection at a time).
    #[arg(long, default_value_t = 64, value_parser = clap::value_parser!(u64).range(1..=4096))]
    serve_threads: u64,
}

#[derive(Clone, Copy, Debug, clap::ValueEnum)]
enum ModeArg {
    Connect,
    Crr,
    Rr,
    Http,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
enum OnOff {
    On,
    Off,
}

/// The TARGET argument, validated but not resolved.
#[derive(Clone, Debug)]
enum Target {
    Addr(SocketAddr),
    Host(String, u16),
    Url(Url),
}

impl FromStr for Target {
    type Err = String;
    fn from_str(s: &str) -> Result<Target, String> {
        if s.contains("://") {
            return s.parse::<Url>().map(Target::Url);
        }
        if let Ok(a) = s.parse::<SocketAddr>() {
            if a.port() == 0 {
                return Err(format!("'{s}': port 0 cannot be probed"));
            }
            return Ok(Target::Addr(a));
        }
        // An address alone: `::1` would otherwise split at its last colon.
        let bare = s.strip_prefix('[').and_then(|r| r.strip_suffix(']'));
        match bare.unwrap_or(s).parse::<IpAddr>() {
            Ok(IpAddr::V6(ip)) => {
                return Err(format!(
                    "'{s}' has no port: write [{ip}]:PORT (an IPv6 address in brackets)"
                ))
            }
            Ok(IpAddr::V4(ip)) => return Err(format!("'{s}' has no port: write {ip}:PORT")),
            Err(_) => {}
        }
        let Some((host, port)) = s.rsplit_once(':') else {
            return Err(format!(
                "'{s}' has no port: write HOST:PORT, [IPv6]:PORT or an http:// or https:// URL"
            ));
        };
        let port = match port.parse::<u16>() {
            Ok(p) if p != 0 => p,
            _ => return Err(format!("'{port}' in '{s}' is not a port (1-65535)")),
        };
        if host.is_empty()
            || !host
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '.' || c == '-')
        {
            return Err(format!("'{host}' in '{s}' is not a host name or address"));
        }
        Ok(Target::Host(host.to_string(), port))
    }
}

fn positive_rate(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(v) if v.is_finite() && v > 0.0 => Ok(v),
        _ => Err(format!(
            "'{s}' is not a positive number of requests per second"
        )),
    }
}

fn close_first(s: &str) -> Result<CloseFirst, String> {
    s.parse()
}

/// Largest request or reply a worker buffers.
const MAX_MESSAGE: u64 = 64 << 20;

/// `--request-size`/`--reply-size`: a size of at most 64 MiB.
fn message_size(s: &str) -> Result<usize, String> {
    match args::bytes(s)? {
        b if b > MAX_MESSAGE => Err(format!("'{s}' is above the 64 MiB limit")),
        b => Ok(b as usize),
    }
}

fn resolve(host: &str, port: u16) -> anyhow::Result<SocketAddr> {
    (host, port)
        .to_socket_addrs()
        .with_context(|| format!("cannot resolve '{host}'"))?
        .next()
        .with_context(|| format!("'{host}' has no address"))
}

/// Refuses what a run would silently ignore: a URL probed in a mode that does not speak HTTP,
/// HTTP's flags outside http mode, a second path beside the URL's, `--insecure` without TLS.
fn http_flags_apply(a: &Args, mode: ModeArg) -> anyhow::Result<()> {
    let url = match &a.target {
        Some(Target::Url(u)) => Some(u),
        _ => None,
    };
    if let (Some(u), false) = (url, matches!(mode, ModeArg::Http)) {
        let m = mode.to_possible_value().map(|v| v.get_name().to_owned());
        let m = m.unwrap_or_default();
        let host = if u.host.contains(':') {
            format!("[{}]", u.host)
        } else {
            u.host.clone()
        };
        bail!(
            "--mode {m} does not speak HTTP, the URL {u} does: probe {host}:{} --mode {m}, \
             or drop --mode",
            u.port
        );
    }
    let http = matches!(mode, ModeArg::Http);
    let given = [
        ("--keepalive", a.keepalive.is_some()),
        ("--path", a.path.is_some()),
        ("--expect-status", a.expect_status.is_some()),
        ("--insecure", a.insecure),
    ];
    if let (false, Some((flag, _))) = (http, given.iter().find(|(_, g)| *g)) {
        bail!("{flag} applies to http mode only (a URL target or --mode http)");
    }
    if let (Some(u), Some(p)) = (url, &a.path) {
        bail!("--path {p}: the URL {u} gives the path");
    }
    if a.insecure && !url.is_some_and(|u| u.tls) {
        bail!("--insecure applies to an https:// URL only (no certificate to check)");
    }
    Ok(())
}

fn config(a: &Args) -> anyhow::Result<Config> {
    let (target, url) = match &a.target {
        None => (None, None),
        Some(Target::Addr(s)) => (Some(*s), None),
        Some(Target::Host(h, p)) => (Some(resolve(h, *p)?), None),
        Some(Target::Url(u)) => (Some(resolve(&u.host, u.port)?), Some(u.clone())),
    };
    let mode_arg = a.mode.unwrap_or(if url.is_some() {
        ModeArg::Http
    } else {
        ModeArg::Crr
    });
    http_flags_apply(a, mode_arg)?;
    let path = a.path.clone().unwrap_or_else(|| "/".into());
    let mode = match mode_arg {
        ModeArg::Connect => Mode::Connect,
        ModeArg::Crr => Mode::Crr,
        ModeArg::Rr => Mode::Rr,
        ModeArg::Http => {
            let url = match (url, target) {
                (Some(u), _) => u,
                (None, Some(t)) => Url {
                    host: t.ip().to_string(),
                    port: t.port(),
                    tls: false,
                    path: path.clone(),
                },
                // Host and port are replaced by the embedded server's.
                (None, None) => Url {
                    host: "127.0.0.1".into(),
                    port: 1,
                    tls: false,
                    path,
                },
            };
            if !url.path.starts_with('/') {
                bail!("--path '{}' must start with /", url.path);
            }
            Mode::Http {
                url,
                keepalive: a.keepalive != Some(OnOff::Off),
                insecure: a.insecure,
            }
        }
    };
    if let (Some(t), Some(l)) = (target, a.local_addr) {
        if t.is_ipv4() != l.is_ipv4() {
            bail!("--local-addr {l} and target {t} are of different IP families");
        }
    }
    Ok(Config {
        target,
        mode,
        concurrency: a.concurrency as usize,
        duration: a.duration.unwrap_or(Duration::from_secs(10)),
        count: a.count,
        rate_per_s: a.rate,
        linger0: a.linger0,
        nodelay: a.nodelay,
        close_first: a.close_first,
        local_addr: a.local_addr,
        local_ports: a.local_ports,
        request_bytes: a.request_size,
        reply_bytes: a.reply_size,
        connect_timeout: a.connect_timeout,
        reply_timeout: a.timeout,
        spike_threshold: a.spike_threshold,
        expect_status: a.expect_status.clone().unwrap_or_default(),
    })
}

pub fn run(a: Args) -> anyhow::Result<i32> {
    if let Some(addr) = a.serve {
        return serve(&a, addr);
    }
    let cfg = config(&a)?;
    let html = crate::html::open(a.html.as_ref())?;
    let bar = output::progress(Some(1000), "probing");
    let on_progress = |p: tcpdoctor_probe::Progress| {
        let by_time = p.elapsed.as_secs_f64() / p.duration.as_secs_f64().max(1e-9);
        let by_count = p.done as f64 / p.count.max(1) as f64;
        bar.set_position((by_time.max(by_count).min(1.0) * 1000.0) as u64);
        bar.set_message(format!("{} done, {} errors", p.done, p.errors));
    };
    let result = tcpdoctor_probe::run(&cfg, output::stop_flag(), &on_progress);
    bar.finish_and_clear();
    let result = result?;
    let interrupted = result.interrupted;
    // A run that started requests is measured even if none ended: what happened to them
    // (no SYN-ACK, no reply) is a finding, never a healthy verdict.
    let s = &result.summary;
    let measured = match s.requests + s.requests_cut {
        0 => Measured::Nothing("no request was started".into()),
        n => Measured::Something(format!("{n} requests ({} completed)", s.requests_ok)),
    };
    let report =
        Report::new("probe", result.findings, result.summary, measured).interrupted(interrupted);
    if let Some(out) = html {
        out.write(&tcpdoctor_probe::html::page(
            &report,
            &result.records,
            &result.spikes,
        ))?;
    }
    output::emit(&report, a.json, tcpdoctor_probe::render::text)
}

fn serve(a: &Args, addr: SocketAddr) -> anyhow::Result<i32> {
    let protocol = match a.mode {
        Some(ModeArg::Http) => Protocol::Http {
            body_bytes: a.reply_size,
        },
        _ => Protocol::Tcp {
            request_bytes: a.request_size.max(1),
            reply_bytes: a.reply_size,
        },
    };
    let mut sc = ServerConfig::new(addr, protocol.clone());
    sc.close_first = a.close_first;
    sc.threads = a.serve_threads as usize;
    let server = Server::start(sc)?;
    let kind = match protocol {
        Protocol::Http { .. } => "http",
        Protocol::Tcp { .. } => "tcp",
    };
    output::with_stdout(|w| writeln!(w, "serving {kind} on {}", server.local_addr()))?;
    let until = a.duration.map(|d| Instant::now() + d);
    while !output::interrupted() && until.is_none_or(|t| Instant::now() < t) {
        std::thread::sleep(Duration::from_millis(50));
    }
    let st = server.stop();
    let _ = writeln!(
        io::stderr(),
        "tcpdoctor: served {} connections, {} requests",
        st.connections_accepted,
        st.requests_served
    );
    Ok(0)
}
