//! `tcpdoctor check`: audit of TCP sysctls and routes, with the arithmetic behind each finding.

use tcpdoctor_host::check::{self, Inputs};
use tcpdoctor_host::render::check as render;
use tcpdoctor_model::{Measured, Report};

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
hosts. Risky settings are judged as exposures: one level below the harm they would cause,
and titled as risks ("Risk of ephemeral port exhaustion"); budgets and timers that hurt nothing
are titled as the fact they state ("Port budget", "RTO floor", "SYN retransmission ladder").
A remedy made specific to a setting replaces the general one for the same setting.

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
    crate::output::emit(&report, args.json, render::text)
}
