//! `tcpdoctor exporter`: serve this host's (or a namespace's) TCP health as Prometheus metrics.
//! Flags are checked here; the exporter itself is the `tcpdoctor-exporter` crate.

use std::net::SocketAddr;

use tcpdoctor_exporter::serve::Exporter;
use tcpdoctor_exporter::{Config, DEFAULT_LISTEN, MAX_SCRAPES};
use tcpdoctor_model::units::Duration;

use crate::output;

/// The long help of `tcpdoctor exporter --help`.
const ABOUT: &str = r#"Serves GET /metrics in the Prometheus text format (0.0.4), or in OpenMetrics 1.0 when the
Accept header prefers it (Prometheus asks for it first). A background thread takes a
sock_diag census every --interval and judges it with doctor's checks; a scrape serves the
last complete census (never waits for one in progress) and reads the kernel counters at
that moment. At most --max-scrapes scrapes are served at once; more are answered 503.

Metrics (prefix tcpdoctor_, base units, _total on counters; the HELP of each says more):
  tcpdoctor_tcp_*_total, tcpdoctor_tcpext_*_total   every TCP counter of /proc/net/snmp and
      /proc/net/netstat (TcpExtListenOverflows -> tcpdoctor_tcpext_listen_overflows_total),
      tcpdoctor_tcp_curr_estab as a gauge
  tcpdoctor_sockets{state}                          sockets per TCP state
  tcpdoctor_destination_{time_wait_sockets, ephemeral_ports_in_use,
      time_wait_reusable_sockets, port_headroom, port_budget_used_ratio,
      sustainable_connects_per_second}{destination="ip:port"}
      for the --top-destinations destinations with the fewest free ports; the rest summed
      under destination="other" (headroom, rate: the smallest among them; ratio: the largest)
  tcpdoctor_listener_{accept_queue, backlog}{listener="ip:port"}  same cap, rest summed
  tcpdoctor_ephemeral_ports, tcpdoctor_sustainable_connects_per_second,
      tcpdoctor_syn_give_up_seconds, tcpdoctor_syn_first_retransmit_seconds,
      tcpdoctor_rto_floor_seconds                   budgets from the sysctls and routes
  tcpdoctor_findings{pathology,severity,source}     findings active now: source="observed"
      (census and counters over the last interval), source="settings" (sysctls); 0 when not
  tcpdoctor_census_{age_seconds, duration_seconds, timestamp_seconds}, tcpdoctor_censuses_total
  tcpdoctor_trace_available{reason}, tcpdoctor_trace_{kernel_events, events, drops,
      lost_events}_total{event|cause|reason}    eBPF counts when tracing runs

Needs: Linux. Root is not required for this host's own namespace; --netns and tracing need
root (tracing: or CAP_BPF and CAP_PERFMON, and kernel BTF; without them
tcpdoctor_trace_available is 0 with the reason). Listens on 127.0.0.1 unless --listen names
another address.

Overhead: per interval one sock_diag dump and its analysis (about 40 ms of CPU at 50,000
TIME_WAIT sockets), a few sysctl reads and one `ip route` per family; per scrape three /proc
reads and the rendering (well under a millisecond). No traffic is generated (doctor's
loopback self-probe is not run). Tracing adds the trace command's cost under load.

Stops on Ctrl-C or SIGTERM (exit 0). Errors at start (address in use, no such namespace)
exit 2.

Example: tcpdoctor exporter ; sudo tcpdoctor exporter --netns blue --listen 127.0.0.1:9978"#;

/// Serve TCP health as Prometheus metrics: counters, census gauges, budgets, findings.
#[derive(clap::Args, Debug)]
#[command(after_long_help = ABOUT)]
pub struct Args {
    /// Address and port to serve /metrics on.
    #[arg(long, value_name = "ADDR:PORT", default_value = DEFAULT_LISTEN)]
    pub listen: SocketAddr,
    /// Time between socket censuses (1s to 1h).
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
    /// Scrapes served at the same time; more are answered 503 (1 to 64).
    #[arg(long, value_name = "N", default_value_t = MAX_SCRAPES)]
    pub max_scrapes: usize,
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
    let config = Config {
        listen: args.listen,
        interval,
        top: args.top_destinations,
        netns: args.netns.clone(),
        trace: !args.no_trace,
        max_scrapes: args.max_scrapes,
        version: env!("CARGO_PKG_VERSION").to_string(),
        commit: env!("TCPDOCTOR_GIT_COMMIT").to_string(),
    };
    let exporter = Exporter::start(&config, output::stop_flag())?;
    let addr = exporter.local_addr()?;
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
        "tcpdoctor exporter: serving http://{addr}/metrics for {watched}; census every {}; trace {trace}",
        args.interval
    );
    exporter.serve(args.max_scrapes)?;
    Ok(0)
}
