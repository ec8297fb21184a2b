//! `tcpdoctor exporter`: serve this host's (or a namespace's) TCP health as Prometheus metrics.
//! Flags are checked here; the exporter itself is the `tcpdoctor-exporter` crate.

use std::net::SocketAddr;

use tcpdoctor_exporter::privileges;
use tcpdoctor_exporter::serve::Exporter;
use tcpdoctor_exporter::{Config, DEFAULT_LISTEN, MAX_SCRAPES};
use tcpdoctor_model::units::Duration;

use crate::output;

/// The long help of `tcpdoctor exporter --help`.
const ABOUT: &str = r#"Serves GET /metrics in the Prometheus text format (0.0.4), or in
OpenMetrics 1.0 when the Accept header prefers it (Prometheus asks for it
first). A background thread runs doctor's diagnosis without its self-probe,
back to back, one --interval window each (a census and the counters at both
ends of the window, the settings audit, the merge): the findings served are
what `tcpdoctor doctor --quick --window <interval>` reports. A scrape serves
the last complete diagnosis (it never waits for one in progress) and reads
the kernel counters at that moment. At most --max-scrapes scrapes are served
at once; more wait their turn up to 2 s, then get 503. A client gets
--header-timeout (10s) to send a request head (also between requests on a
kept-alive connection), and at most 256 connections are held (fewer under a
low open-file limit): a new one beyond that closes the oldest idle one.
Started as root, it serves as --user (nobody) with no capabilities once the
eBPF programs are loaded.

Metrics (prefix tcpdoctor_, base units, _total on counters; see each HELP):
  tcpdoctor_tcp_*_total, tcpdoctor_tcpext_*_total
      every TCP counter of /proc/net/snmp and /proc/net/netstat
      (TcpExtListenOverflows: tcpdoctor_tcpext_listen_overflows_total);
      tcpdoctor_tcp_curr_estab is a gauge
  tcpdoctor_sockets{state}
      sockets per TCP state
  tcpdoctor_destination_time_wait_sockets{destination="ip:port"}, and
  ..._ephemeral_ports_in_use, ..._time_wait_reusable_sockets,
  ..._port_headroom, ..._port_budget_used_ratio (0-1),
  ..._sustainable_connects_per_second
      for the --top-destinations destinations with the fewest free ports;
      the rest summed under destination="other" (headroom and rate: the
      smallest among them; ratio: the largest)
  tcpdoctor_listener_accept_queue{listener}, tcpdoctor_listener_backlog
      same cap, the rest summed
  tcpdoctor_ephemeral_ports, tcpdoctor_sustainable_connects_per_second,
  tcpdoctor_syn_give_up_seconds, tcpdoctor_syn_first_retransmit_seconds,
  tcpdoctor_rto_floor_seconds
      budgets from the sysctls and routes
  tcpdoctor_findings{pathology,severity,source}
      findings active now: source="observed" (censuses and counters over the
      last window) or "settings" (sysctls, routes); 0 when not active
  tcpdoctor_census_age_seconds, tcpdoctor_census_duration_seconds,
  tcpdoctor_censuses_total, tcpdoctor_findings_window_seconds
  tcpdoctor_trace_available{reason}, tcpdoctor_trace_events_total{cause},
  tcpdoctor_trace_drops_total{reason}, tcpdoctor_trace_kernel_events_total
      eBPF counts when tracing runs; otherwise why it does not

Needs: Linux. Root is not required for this host's own namespace; --netns
and tracing need root (tracing: or CAP_BPF and CAP_PERFMON, and kernel BTF).
Listens on 127.0.0.1 unless --listen names another address.

Overhead: per interval two sock_diag dumps and their analysis, a scan of
/proc for the processes holding sockets, a few sysctl reads and one
`ip route` per family: about 75 ms of CPU at 50,000 TIME_WAIT sockets, three
quarters of it the kernel's dump. Per scrape three /proc reads and the
rendering: about 1.3 ms of CPU, under 2 ms to answer. No traffic is
generated (doctor's loopback self-probe is not run: its connections would
load the host and show in the census). Tracing adds the trace command's cost
under load.

Stops on Ctrl-C or SIGTERM (exit 0). Errors at start (address in use, no
such namespace) exit 2.

Examples:
  tcpdoctor exporter
      this host on 127.0.0.1:9977, a new diagnosis every 15s
  curl -s 127.0.0.1:9977/metrics | grep '^tcpdoctor_findings{.*} 1$'
      the findings active now
  tcpdoctor exporter --listen 10.0.0.5:9977 --interval 30s
      for a Prometheus server on another host (no authentication: firewall it)
  sudo tcpdoctor exporter --netns blue --listen 127.0.0.1:9978
      one network namespace; the listener stays in the host's

Prometheus (scrape every --interval; `instance` tells hosts apart):
  scrape_configs:
    - job_name: tcpdoctor
      scrape_interval: 15s
      static_configs: [{targets: ['web-1:9977', 'web-2:9977']}]"#;

/// Serve TCP health as Prometheus metrics: counters, census gauges, budgets, findings.
#[derive(clap::Args, Debug)]
#[command(after_long_help = ABOUT)]
pub struct Args {
    /// Address (or host name) and port to serve /metrics on, e.g. 10.0.0.5:9977,
    /// [::1]:9977, localhost:9977 (a name takes its first IPv4 address, else its first).
    #[arg(long, value_name = "HOST:PORT", default_value = DEFAULT_LISTEN, value_parser = listen_addr)]
    pub listen: SocketAddr,
    /// The diagnosis window: findings compare the two ends of it, and a census is served at
    /// most this old, plus its own duration (1s to 1h).
    #[arg(long, value_name = "DURATION", default_value = "15s")]
    pub interval: Duration,
    /// Destinations and listeners exported one by one; the rest are summed (1 to 1000).
    #[arg(long, value_name = "N", default_value_t = 20)]
    pub top_destinations: usize,
    /// Watch network namespace NAME (from `ip netns list`; needs root). The HTTP listener
    /// stays in the exporter's own namespace.
    #[arg(long, value_name = "NAME")]
    pub netns: Option<String>,
    /// Do not start eBPF tracing even when the host allows it.
    #[arg(long)]
    pub no_trace: bool,
    /// Scrapes rendered at the same time; more wait their turn up to 2 s, then get 503
    /// (1 to 64).
    #[arg(long, value_name = "N", default_value_t = MAX_SCRAPES)]
    pub max_scrapes: usize,
    /// Started as root: once the eBPF programs are loaded and the namespace entered, serve as
    /// this user with no capabilities (`--user root` keeps root: not advised for a server
    /// without authentication). Ignored when not started as root.
    #[arg(long, value_name = "USER", default_value = "nobody")]
    pub user: String,
    /// How long a client may take to send a request head, or stay idle between requests on a
    /// kept-alive connection, before it is closed (100ms to 5m).
    #[arg(long, value_name = "DURATION", default_value = "10s")]
    pub header_timeout: Duration,
}

/// `--listen`: an address, or a host name resolved to its first address.
fn listen_addr(s: &str) -> Result<SocketAddr, String> {
    if let Ok(a) = s.parse() {
        return Ok(a);
    }
    use std::net::ToSocketAddrs;
    match s.to_socket_addrs() {
        Ok(it) => {
            let all: Vec<SocketAddr> = it.collect();
            all.iter()
                .find(|a| a.is_ipv4())
                .or(all.first())
                .copied()
                .ok_or_else(|| format!("'{s}' resolves to no address"))
        }
        Err(e)
            if s.rsplit_once(':')
                .is_none_or(|(_, p)| p.parse::<u16>().is_err()) =>
        {
            Err(format!("'{s}' is not HOST:PORT ({e})"))
        }
        Err(e) => Err(format!("cannot resolve '{s}': {e}")),
    }
}

pub fn run(args: Args) -> anyhow::Result<i32> {
    let interval = args.interval.get();
    if interval < std::time::Duration::from_secs(1)
        || interval > std::time::Duration::from_secs(3600)
    {
        anyhow::bail!("--interval {}: must be between 1s and 1h", args.interval);
    }
    if !(1..=1000).contains(&args.top_destinations) {
        anyhow::bail!(
            "--top-destinations {}: must be between 1 and 1000",
            args.top_destinations
        );
    }
    if !(1..=64).contains(&args.max_scrapes) {
        anyhow::bail!(
            "--max-scrapes {}: must be between 1 and 64",
            args.max_scrapes
        );
    }
    let header_timeout = args.header_timeout.get();
    if header_timeout < std::time::Duration::from_millis(100)
        || header_timeout > std::time::Duration::from_secs(300)
    {
        anyhow::bail!(
            "--header-timeout {}: must be between 100ms and 5m",
            args.header_timeout
        );
    }
    let config = Config {
        listen: args.listen,
        interval,
        top: args.top_destinations,
        netns: args.netns.clone(),
        trace: !args.no_trace,
        max_scrapes: args.max_scrapes,
        header_timeout,
        version: env!("CARGO_PKG_VERSION").to_string(),
        commit: env!("TCPDOCTOR_GIT_COMMIT").to_string(),
    };
    // Look the user up before starting, so that a wrong name fails before anything runs.
    let root = unsafe { libc::geteuid() } == 0;
    let run_as = match (root, args.user.as_str()) {
        (true, "root") => None,
        (true, u) => Some(privileges::lookup(u)?),
        (false, _) => None,
    };
    let exporter = match Exporter::start(&config, output::stop_flag()) {
        Ok(e) => e,
        // Stopped while starting (systemctl stop during the first census): a clean stop.
        Err(tcpdoctor_exporter::Error::StoppedAtStart) => {
            eprintln!("tcpdoctor exporter: stopped before the first census completed");
            return Ok(0);
        }
        Err(e) => return Err(e.into()),
    };
    let addr = exporter.local_addr()?;
    let who = match &run_as {
        Some(to) => {
            privileges::drop_to(to)?;
            format!("; serving as {} (uid {}), no capabilities", to.user, to.uid)
        }
        None if root => "; serving as root (--user root): not advised".to_string(),
        None => String::new(),
    };
    let trace = match &exporter.app().trace {
        None => "off (--no-trace)".to_string(),
        Some(t) => match tcpdoctor_exporter::tracing::read(t).unavailable {
            None => "on".to_string(),
            Some(why) => format!("unavailable: {why}"),
        },
    };
    let watched = args.netns.as_deref().map_or_else(
        || "this host".to_string(),
        |n| format!("network namespace {n}"),
    );
    eprintln!(
        "tcpdoctor exporter: serving http://{addr}/metrics for {watched}; diagnosis window {}; trace {trace}{who}",
        args.interval
    );
    exporter.serve(args.max_scrapes)?;
    Ok(0)
}
