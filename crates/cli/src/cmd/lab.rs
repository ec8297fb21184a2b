//! `tcpdoctor lab`: reproduces a pathology in network namespaces, prints the measurement, the
//! diagnosis tcpdoctor's detectors made of it, and (with `--fix`) the measurement after the
//! remedy. `tcpdoctor lab cleanup` removes leftovers of killed runs.

use anyhow::Context;
use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use tcpdoctor_lab::render::{self, remedies as render_remedies, views};

use tcpdoctor_lab::scenario::driver::{self, Remedies, Scenario as LabScenario};
use tcpdoctor_lab::scenario::{
    self, accept_overflow, incast, port_exhaustion, slow_reader, stale_ack, syn_drop, timewait,
    Common,
};
use tcpdoctor_model::{Measured, Report};
use tcpdoctor_sandbox::cleanup::{self, Scope};
use tcpdoctor_sandbox::subnet::LabSubnet;

use crate::output;

const LONG_HELP: &str = "\
Needs: root (network namespaces, veths, a bridge, tc qdiscs, nftables), iproute2, nftables,
ethtool; tcpdump for --pcap. Linux with veth, bridge, tbf and nftables (tested on 6.18).

Safety: every namespace is named tdoc-lab-<pid>-<role>, every interface tdoc<role> (inside
those namespaces only), every nftables table tdoc_lab. All of it is removed when the scenario
ends, fails or is interrupted with Ctrl-C (a second Ctrl-C exits at once: then run
`tcpdoctor lab cleanup`, as after a SIGKILL). Traffic never leaves the lab's namespaces:
addresses come from 10.77.0.0/16 only; --subnet must lie inside it.

Namespace roles (in the names; the reports say them in words): cl the client and sv the
server (connection scenarios); incast's s0, s1, ... the senders, sw the switch (its bridge
and the tbf bottleneck) and rx the receiver. A suffix names the run: none for the baseline,
fc the forced check of stale-ack-race, r0, r1, ... the remedies of --fix and --remedies in
order (clfc: the forced check's client).

Overhead: seconds per scenario (bounded by rounds, durations and timeouts); incast keeps both
CPUs busy at 1 gbit.

Output: the measurement (a table, one column per run with --fix), then what the eBPF
trace attributed in each run (its own namespaces and window: events per cause and namespace,
SYN resends attributed beside TcpExtTCPSynRetrans, EADDRNOTAVAIL per process and destination,
incast episodes, drops per kernel reason, lost records), then the findings tcpdoctor's
detectors drew from the evidence (probe's spike classifier and errno findings, analyze's
detectors on a capture, model::counters on the counter deltas of each namespace, the lab's
fan-in detector, the trace's findings merged into them: a pathology both name keeps one
finding citing the trace), then the verdict. The trace needs root (or CAP_BPF and
CAP_PERFMON) and kernel BTF; without them, or with --no-trace, one line says what is missing
and the lab diagnoses from its own measurements. It costs one BPF load and attach per run
(a syn-drop run of 1 s took 1.1 s untraced, 1.4 s traced here) and a thread draining its
records every 50 ms. --json prints the Report envelope: findings,
then the scenario body (scenario, run_id, namespaces, trace {used, missing, runs[] {run,
namespaces, duration_ms, lost_events, missed_events, attributed_events, causes_by_netns, syn_resends,
syn_resends_attributed, syn_retrans_counted, eaddrnotavail, no_local_port, incast_episodes,
drops_by_reason, kernel_counters}}, reproduced, reproduction[] {run, remedy, pathology,
reproduced, signature[] {what, source, count}, tried {attempts, what, duration_ms}, cost,
line}, config, then a plain run's before (incast: runs, before, after, fix_results: the last
RTO floor judged against the first), or the remedies report of --fix and --remedies below);
every numeric field carries its unit (_us, _bytes, _bits_per_s, _per_s).

Reproduced or not: every run says whether it reproduced the scenario's pathology, apart from
the severity of its harm: the events of the pathology's own signature counted in the run
(EADDRNOTAVAIL connects; SYNs resent; accept-queue overflows; SYNs answered by a stale ACK
or by an old connection's ACK; zero windows; timer waits of senders that lost segments
together, incast episodes), each with who counted it (probe, a namespace's kernel counter,
the eBPF trace), what was tried (connects, rounds or bytes, over how long) and what it cost
on this kernel; or \"not reproduced in this run\" with what was tried. JSON: `reproduced` (the
baseline) and `reproduction[]` (every run).

Verdict and exit status: a lab run exists to reproduce a pathology, or to show a remedy
removing it. Without --fix/--remedies: reproduced: findings, exit 1, also when the harm on
this kernel is small enough that no finding is above info (the verdict says what it cost);
not reproduced: inconclusive, exit 3 (\"not reproduced in this run\", with what was tried),
unless a finding above info was drawn anyway (exit 1). With --fix or --remedies, of the
remedied run the verdict follows: still reproduced, or a finding above info: exit 1;
neither, after a baseline that reproduced it: healthy, exit 0 (the remedy removed it);
neither, after a baseline that did not reproduce it: inconclusive, exit 3 (the remedy could
not be judged). A remedy is not called worked while its run still reproduced the pathology.
Exit 2: error. A run cut short by Ctrl-C is never healthy.

--remedies [all|NAME,...]: the baseline and each remedy, each in fresh namespaces, in one
table: what the remedy changes, what tcpdoctor's arithmetic predicts (the formula with its
inputs, several measured in the baseline), the measurement, whether they agree within the
stated noise (and why not), whether the pathology is gone, and a verdict: works, partial
(with why), no effect, nothing to fix, or cannot build (with what this kernel lacks).
Remedies: incast: rto-min-5ms, pace-80, pace-share, bbr, deeper-buffer, fewer-senders,
dctcp, red-ecn, fq-codel (over every --sweep sender count); port-exhaustion: keep-alive,
tw-reuse, tw-reuse-no-timestamps, wider-range, more-destinations, server-closes-first;
timewait-collision: timestamps, rfc1337-off, ephemeral-port, client-closes-first;
stale-ack-race: graceful-close; slow-reader: larger-buffer, faster-reader,
writer-backpressure; syn-drop: remove-drop, larger-backlog, faster-accept; accept-overflow:
larger-backlog, faster-accept, both (the last two also say what the SYN ladder costs per
lost SYN). JSON: baseline, baseline_harm, remedies[] (remedy, changes, prediction {formula,
effect, value, unit, tolerance, noise}, measured, agreement, pathology_gone, verdict, why,
run), notes, syn_ladder. The verdict and exit status follow the first remedy that works.

--html FILE: also one self-contained page (inline SVG, no script, nothing fetched; FILE is
created before the run): the measurement side by side, a chart of the harm before and after
each remedy (--fix or --remedies) with the remedies table, the incast sweep chart (goodput vs
senders, one line per RTO floor), and the baseline's diagnosis.

--fix: --remedies restricted to the scenario's recommended remedy (incast: rto-min-5ms;
port-exhaustion: keep-alive and tw-reuse; timewait-collision: timestamps; stale-ack-race:
graceful-close; slow-reader: faster-reader; syn-drop: remove-drop; accept-overflow: both),
printed after the headline, one line per remedy on what it did to the harm the scenario
reproduces (\"keep-alive: remedy worked: connects failed with EADDRNOTAVAIL fell from 4,839
to 0\") and the runs side by side; then the table, the trace and the baseline's diagnosis in
full. Each remedied run is judged from its own measurement against the baseline
(remedies[].check: remedy worked, none left and the pathology no longer named above info;
insufficient; no effect), and, when both runs were traced, on what the trace counted in the
remedied run's own window (remedies[].check.trace: \"trace saw 0 connects failed with
EADDRNOTAVAIL (was 4,839)\"): a remedy is not called worked while the trace still saw the
harm. JSON: the remedies report above; --fix no longer prints before, after[] and
fix_results[] (the remedied runs are remedies[].run, their judgement remedies[].check). The
baseline's diagnosis stays in baseline.findings.

Examples:
  sudo tcpdoctor lab incast --senders 8 --rto-min 200ms,5ms
  sudo tcpdoctor lab incast --sweep senders=1,2,4,8,16 --rto-min 200ms,5ms --out /tmp/incast
  sudo tcpdoctor lab port-exhaustion --fix
  sudo tcpdoctor lab port-exhaustion --remedies
  sudo tcpdoctor lab incast --sweep senders=2,4,8 --remedies rto-min-5ms,deeper-buffer
  sudo tcpdoctor lab timewait-collision --pcap /tmp/tw.pcap && tcpdoctor analyze /tmp/tw.pcap
  sudo tcpdoctor lab cleanup";

/// Reproduce a pathology in network namespaces, diagnose it, and verify the fix.
#[derive(clap::Args, Debug)]
#[command(after_long_help = LONG_HELP, after_help = "Run `tcpdoctor lab --help` for requirements, output fields and examples.")]
pub struct Args {
    #[command(subcommand)]
    scenario: Scenario,
}

#[derive(clap::Subcommand, Debug)]
enum Scenario {
    /// N senders answer one receiver through a shallow tbf bottleneck; timeouts stall rounds.
    ///
    /// Topology: sender namespaces -> bridge (tdoc-lab-P-sw) -> tbf on the receiver's port
    /// -> receiver. Each round the receiver asks every sender for block/N bytes at once.
    /// Senders run CUBIC (Linux's default) unless --cc says otherwise: a new namespace would
    /// inherit the host's default. With CUBIC, 1 MiB rounds at 8 senders leave flows losing
    /// their tails to the retransmission timer; smaller blocks are mostly repaired by tail
    /// loss probes within milliseconds.
    ///
    /// Output per run: goodput (bit/s), rounds stalled 100 ms or more beyond a typical round
    /// (the median round), p50/p99/max round time,
    /// TcpRetransSegs and TcpExtTCPTimeouts per sender namespace, tbf drops. Overhead: one
    /// namespace per sender; CPU-bound at 1 gbit on small machines.
    Incast(Box<IncastArgs>),
    /// New connection per request from a narrowed port range until connect() fails with
    /// EADDRNOTAVAIL (ports stuck in TIME_WAIT for 60 s).
    ///
    /// Client namespace: ip_local_port_range narrowed (--ports), tcp_tw_reuse=0; load by
    /// `probe` (crr) against the embedded server. Output: connections ok/failed by errno,
    /// connect/total latency percentiles, the computed sustainable rate (ports / 60 s) and,
    /// for runs of 121 s or more, the measured steady-state rate. --fix: keep-alive, and
    /// tcp_tw_reuse=1 (the remedies keep-alive and tw-reuse), each in fresh namespaces.
    PortExhaustion(Box<PortArgs>),
    /// A share of SYNs dropped by nftables: connects take 1 s, 2 s, ... (the SYN ladder).
    ///
    /// Output: connect percentiles, slow connects classified by probe's spike classifier with
    /// their ladder rung, TcpExtTCPSynRetrans. --fix removes the drop (remove-drop) and
    /// measures again.
    SynDrop(Box<SynDropArgs>),
    /// A one-thread server with listen backlog 1 under concurrent churn: the accept queue
    /// overflows, SYNs are dropped, connects wait 1 s.
    ///
    /// Output: connect percentiles, spikes by cause, server TcpExtListenOverflows/ListenDrops.
    /// --fix: 8 acceptor threads and backlog 4096 (the remedy both).
    AcceptOverflow(Box<AcceptArgs>),
    /// Reconnects from one fixed source port into the server's TIME_WAIT, timestamps off: the
    /// SYN is answered by an old ACK, reset and resent (after ms here, 1 s on older kernels).
    ///
    /// Each connection uploads --request-bytes so the client's sequence numbers outrun the
    /// next ISN. Output: connect times, spikes by cause (probe), findings of probe's
    /// classifier and of analyze's detectors on a capture. --rfc1337: the server ignores the
    /// client's reset and the connect stalls for seconds (up to the SYN ladder's 11 s).
    /// --fix: timestamps on at both ends (the remedy timestamps), in fresh namespaces.
    TimewaitCollision(Box<TimewaitArgs>),
    /// A writer faster than its reader: the reader's small buffer fills, zero windows, the
    /// writer blocks.
    ///
    /// Output per run: bytes written/read, writer stall time (write() blocked beyond its
    /// pacing, us and share of the run), zero-window advertisements (reader's
    /// TcpExtTCPToZeroWindowAdv), findings of analyze on a capture and of the reader's
    /// counters. --fix: the reader takes data as it arrives, same buffer (faster-reader).
    SlowReader(Box<SlowReaderArgs>),
    /// A connection-per-request loop (SO_LINGER 0, TCP_NODELAY, server closes first) and a forced stale ACK:
    /// reports SYN resends per million connections and how this kernel resends the SYN.
    ///
    /// The loop is report 003's: probe's engine connects, sends 4 bytes, reads and resets,
    /// against a one-thread server that reads the 4 bytes, answers and closes first. The race
    /// needs the server's close and the client's reset on two CPUs at once, so the server
    /// runs on one CPU and the client on another (loop_cpus). How often it fires depends on
    /// what else the CPUs run (measured here: 22-63 races per 8-10 s on an otherwise busy
    /// 2-CPU host, none with both CPUs saturated): a run says whether it reproduced the race
    /// and, if not, in how many connects over how long; a longer --duration tries more.
    ///
    /// Output: connections, TcpExtTCPSynRetrans per million, slow connects by cause (probe),
    /// and the forced check's connect time and behaviour (quick_resend, timer_resend,
    /// not_reproduced): what one race costs on this kernel (kernel_release).
    /// --fix: the same loop with a graceful close (FIN) instead of SO_LINGER 0
    /// (graceful-close).
    StaleAckRace(Box<StaleAckArgs>),
    /// Remove leftovers: namespaces named tdoc* (and processes inside), root interfaces tdoc*,
    /// the lab's temporary files ($TMPDIR/tdoc-lab-<pid>-*) and tcpdumps writing them.
    ///
    /// A lab run killed with SIGKILL leaves its tcpdump running (re-parented to init) and its
    /// capture file: such a tcpdump is found by its command line, which names the file
    /// (-w .../tdoc-lab-<pid>-...), and ended by its pid; no other process is signalled
    /// except those inside removed namespaces. Lab namespaces and files of runs that are still
    /// alive are kept unless --force. Other tdoc*
    /// namespaces (tcpdoctor's tests use tdoc-<tag>-...) cannot be told apart from leftovers:
    /// run the unscoped form only when no tcpdoctor test is running, or narrow it with --pid
    /// or --prefix.
    Cleanup(CleanupArgs),
}

#[derive(clap::Args, Debug)]
struct CommonArgs {
    /// Print the Report envelope as JSON.
    #[arg(long)]
    json: bool,
    /// Apply the scenario's recommended remedy and measure again in fresh namespaces: the
    /// --remedies table with that remedy's row, and the runs side by side. The verdict and
    /// exit status follow the remedied run.
    #[arg(long, conflicts_with = "remedies")]
    fix: bool,
    /// Measure the baseline and each remedy (all, or names separated by commas) in fresh
    /// namespaces; print one table: what each changes, tcpdoctor's prediction with its
    /// formula, the measurement, whether the pathology is gone, and a verdict.
    #[arg(long, num_args = 0..=1, default_missing_value = "all", value_name = "all|NAME,...")]
    remedies: Option<String>,
    /// Save the scenario's traffic (tcpdump inside the lab, headers only) to FILE.
    #[arg(long, value_name = "FILE")]
    pcap: Option<PathBuf>,
    /// Also write a self-contained HTML report to FILE (created before the run): the
    /// measurement, the harm before and after each remedy, the incast sweep, the diagnosis.
    #[arg(long, value_name = "FILE")]
    html: Option<PathBuf>,
    /// Lab subnet; must lie inside the lab's private block 10.77.0.0/16 (/16 to /24).
    #[arg(long, default_value = "10.77.0.0/24", value_name = "CIDR")]
    subnet: String,
    /// Do not attach the eBPF trace to the runs (diagnose from the lab's own measurements
    /// only, as on a host without BTF or CAP_BPF).
    #[arg(long)]
    no_trace: bool,
}

impl CommonArgs {
    fn common(&self) -> anyhow::Result<Common> {
        let subnet: LabSubnet = self.subnet.parse()?;
        Ok(Common {
            subnet,
            pcap: self.pcap.clone(),
            trace: if self.no_trace {
                tcpdoctor_trace::run::Mode::Off("--no-trace".into())
            } else {
                tcpdoctor_trace::run::Mode::Auto
            },
        })
    }
}

#[derive(clap::Args, Debug)]
struct IncastArgs {
    #[command(flatten)]
    common: CommonArgs,
    /// Number of senders (1-64).
    #[arg(long, default_value_t = 8, value_parser = clap::value_parser!(u32).range(1..=64))]
    senders: u32,
    /// Run once per sender count: `senders=1,2,4,8,16`. A plain run writes OUT.csv and
    /// OUT.svg (--fix and --remedies judge each remedy at every count instead).
    #[arg(long, value_name = "senders=N,N,...")]
    sweep: Option<String>,
    /// RTO floors to compare, set on each sender's route (`ip route ... rto_min`); the first
    /// is the baseline, the last is judged against it.
    #[arg(long, value_delimiter = ',', value_name = "DUR,DUR", value_parser = crate::args::positive_duration)]
    rto_min: Vec<std::time::Duration>,
    /// Bytes requested per round, split over the senders.
    #[arg(long, default_value = "1MiB", value_name = "BYTES", value_parser = crate::args::positive_bytes)]
    block: u64,
    /// Rounds per run.
    #[arg(long, default_value_t = 50)]
    rounds: u32,
    /// tbf rate of the bottleneck (tc syntax). 100mbit keeps the bottleneck, not the CPUs,
    /// the limit on small machines; 1gbit needs several idle cores to synchronize senders.
    #[arg(long, default_value = "100Mbit", value_name = "RATE", value_parser = tc_rate)]
    rate: String,
    /// tbf burst of the bottleneck.
    #[arg(long, default_value = "16KiB", value_name = "BYTES", value_parser = crate::args::positive_bytes)]
    burst: u64,
    /// tbf queue limit of the bottleneck (the shallow buffer).
    #[arg(long, default_value = "32KiB", value_name = "BYTES", value_parser = crate::args::positive_bytes)]
    limit: u64,
    /// Upper bound of each run, in seconds.
    #[arg(long, default_value_t = 30)]
    max_run_secs: u64,
    /// The senders' congestion control, set on their routes to the receiver (ip route ...
    /// congctl; a new namespace would otherwise inherit the host's default). This kernel
    /// offers what /proc/sys/net/ipv4/tcp_available_congestion_control lists.
    #[arg(long, default_value = "cubic", value_name = "NAME", value_parser = cc_name)]
    cc: String,
    /// Path prefix of the sweep's CSV and SVG files.
    #[arg(long, default_value = "tdoc-incast-sweep", value_name = "PREFIX")]
    out: PathBuf,
}

#[derive(clap::Args, Debug)]
struct PortArgs {
    #[command(flatten)]
    common: CommonArgs,
    /// The client namespace's ip_local_port_range (LOW-HIGH), within 1024-65535 and without
    /// the lab's server port.
    #[arg(long, default_value = "40000-40199", value_parser = client_ports)]
    ports: tcpdoctor_model::PortRange,
    /// Length of each run, 1s..10m (121s or more also measures the steady-state rate).
    #[arg(long, default_value = "4s", value_name = "DURATION", value_parser = run_length)]
    duration: std::time::Duration,
    /// Which side closes first: client (TIME_WAIT on the client) or server.
    #[arg(long, default_value = "client", value_parser = str::parse::<tcpdoctor_probe::CloseFirst>)]
    close_first: tcpdoctor_probe::CloseFirst,
    /// Concurrent connections (1-256).
    #[arg(long, default_value_t = 2, value_parser = concurrency())]
    concurrency: u16,
}

#[derive(clap::Args, Debug)]
struct SynDropArgs {
    #[command(flatten)]
    common: CommonArgs,
    /// Share of SYNs dropped, percent (1-90).
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u32).range(1..=90))]
    drop_percent: u32,
    /// Length of each run, 1s..10m.
    #[arg(long, default_value = "4s", value_name = "DURATION", value_parser = run_length)]
    duration: std::time::Duration,
    /// Concurrent connections (1-256).
    #[arg(long, default_value_t = 4, value_parser = concurrency())]
    concurrency: u16,
}

#[derive(clap::Args, Debug)]
struct AcceptArgs {
    #[command(flatten)]
    common: CommonArgs,
    /// listen() backlog of the slow server (1-65535).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(i32).range(1..=65535))]
    backlog: i32,
    /// Acceptor threads of the slow server (1-64).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u16).range(1..=64))]
    server_threads: u16,
    /// Length of each run, 1s..10m.
    #[arg(long, default_value = "4s", value_name = "DURATION", value_parser = run_length)]
    duration: std::time::Duration,
    /// Concurrent connections (1-256).
    #[arg(long, default_value_t = 16, value_parser = concurrency())]
    concurrency: u16,
}

#[derive(clap::Args, Debug)]
struct TimewaitArgs {
    #[command(flatten)]
    common: CommonArgs,
    /// Connections, all from the same source port (2-20).
    #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u64).range(2..=20))]
    connections: u64,
    /// Bytes the client uploads per connection (at most 256 MiB).
    #[arg(long, default_value = "32MiB", value_name = "BYTES", value_parser = bytes_up_to(256 << 20))]
    request_bytes: u64,
    /// Set net.ipv4.tcp_rfc1337=1 on the server: the multi-second stall variant.
    #[arg(long)]
    rfc1337: bool,
}

#[derive(clap::Args, Debug)]
struct SlowReaderArgs {
    #[command(flatten)]
    common: CommonArgs,
    /// Writer rate, bytes per second (at most 1 GiB).
    #[arg(long, default_value = "8MiB", value_name = "BYTES", value_parser = bytes_up_to(1 << 30))]
    writer_rate: u64,
    /// Reader rate, bytes per second.
    #[arg(long, default_value = "1MiB", value_name = "BYTES", value_parser = crate::args::positive_bytes)]
    reader_rate: u64,
    /// Reader's SO_RCVBUF (at most 64 MiB).
    #[arg(long, default_value = "16KiB", value_name = "BYTES", value_parser = bytes_up_to(64 << 20))]
    rcvbuf: u64,
    /// Length of each run, 1s..10m.
    #[arg(long, default_value = "3s", value_name = "DURATION", value_parser = run_length)]
    duration: std::time::Duration,
}

#[derive(clap::Args, Debug)]
struct StaleAckArgs {
    #[command(flatten)]
    common: CommonArgs,
    /// Length of the loop, 1s..10m. The race fired about once per 8,000 connects here
    /// (~4,000 connects/s on 2 busy CPUs): 10 s sees it a few times; 4 s missed it in 2 of 6
    /// runs.
    #[arg(long, default_value = "10s", value_name = "DURATION", value_parser = run_length)]
    duration: std::time::Duration,
    /// Concurrent loops (1-256).
    #[arg(long, default_value_t = 1, value_parser = concurrency())]
    concurrency: u16,
}

#[derive(clap::Args, Debug)]
struct CleanupArgs {
    /// Only the namespaces, files and tcpdumps of the lab run with this process id.
    #[arg(long, conflicts_with = "prefix")]
    pid: Option<u32>,
    /// Only namespaces, root interfaces and temporary files whose name starts with PREFIX
    /// (must start with tdoc).
    #[arg(long)]
    prefix: Option<String>,
    /// Also remove namespaces of lab runs that are still alive.
    #[arg(long)]
    force: bool,
    /// Print JSON.
    #[arg(long)]
    json: bool,
}

pub fn run(args: Args) -> anyhow::Result<i32> {
    match args.scenario {
        Scenario::Incast(a) => run_incast(*a),
        Scenario::PortExhaustion(a) => run_port_exhaustion(*a),
        Scenario::SynDrop(a) => run_syn_drop(*a),
        Scenario::AcceptOverflow(a) => run_accept_overflow(*a),
        Scenario::TimewaitCollision(a) => run_timewait(*a),
        Scenario::SlowReader(a) => run_slow_reader(*a),
        Scenario::StaleAckRace(a) => run_stale_ack(*a),
        Scenario::Cleanup(a) => run_cleanup(a),
    }
}

/// Scenario `s` as asked: its plain run (`plain` of its config, printed by `view`), or with
/// `--remedies SPEC` the remedies named from its table (checked before anything runs), or
/// with `--fix` its recommended remedy ([`LabScenario::FIX`], printed beside `fix_view` of
/// the runs). The `--html` file is created first: a bad path fails before anything runs.
fn run_scenario<S: LabScenario, B: serde::Serialize>(
    s: S,
    a: &CommonArgs,
    plain: impl FnOnce(S, &Common, &AtomicBool) -> tcpdoctor_lab::Result<scenario::Outcome<B>>,
    (view, fix_view): (ViewOf<B>, ViewOf<Remedies<S>>),
) -> anyhow::Result<i32>
where
    Remedies<S>: serde::Serialize,
{
    let html = crate::html::open(a.html.as_ref())?;
    let common = a.common()?;
    let (selected, fix_view) = match (&a.remedies, a.fix) {
        (Some(spec), _) => (tcpdoctor_lab::remedy::select(spec, S::REMEDIES)?, None),
        (None, true) => (
            S::FIX.iter().map(|r| r.to_string()).collect(),
            Some(fix_view),
        ),
        (None, false) => {
            let o = running(S::NAME, || plain(s, &common, output::stop_flag()))?;
            let report = scenario::report(o);
            if let Some(out) = html {
                out.write(&render::run_page(&report, view))?;
            }
            return output::emit(&report, a.json, |w, r| render::run_text(w, r, view));
        }
    };
    let o = running(S::NAME, || {
        scenario::driver::remedies(s, &common, &selected, output::stop_flag())
    })?;
    let report = scenario::report(o);
    let v = fix_view.map(|f| f(&report.body));
    if let Some(out) = html {
        out.write(&render::html::remedies_page(&report, v.as_ref()))?;
    }
    output::emit(&report, a.json, |w, r| {
        render_remedies(w, r, S::NAME, v.as_ref())
    })
}

/// A scenario's view of a report's body.
type ViewOf<B> = for<'a> fn(&'a B) -> render::View<'a>;

/// Runs `work`, scenario `name`'s traffic, as root with a progress line on a terminal.
fn running<T>(name: &str, work: impl FnOnce() -> tcpdoctor_lab::Result<T>) -> anyhow::Result<T> {
    tcpdoctor_sandbox::require_root()?;
    let bar = output::progress(None, name);
    let out = work();
    bar.finish_and_clear();
    Ok(out?)
}

fn run_cleanup(a: CleanupArgs) -> anyhow::Result<i32> {
    let scope = match (a.pid, a.prefix) {
        (Some(pid), _) => Scope::Run(pid),
        (None, Some(p)) => {
            if !p.starts_with(tcpdoctor_sandbox::naming::PREFIX) {
                anyhow::bail!(
                    "--prefix '{p}': must start with 'tdoc' (the lab only removes its own objects)"
                );
            }
            Scope::Prefix(p)
        }
        (None, None) => Scope::All { force: a.force },
    };
    tcpdoctor_sandbox::require_root()?;
    let cleaned = cleanup::cleanup(&scope);
    let report = Report::new(
        "lab",
        Vec::new(),
        cleaned,
        Measured::Something("leftovers".into()),
    );
    let code = output::emit(&report, a.json, render::cleanup)?;
    if !report.body.failed.is_empty() {
        anyhow::bail!("could not remove: {}", report.body.failed.join(", "));
    }
    Ok(code)
}

fn parse_sweep(s: &str) -> anyhow::Result<Vec<u32>> {
    let list = s
        .strip_prefix("senders=")
        .with_context(|| format!("--sweep '{s}': expected senders=N,N,..."))?;
    let v: Vec<u32> = list
        .split(',')
        .map(|t| {
            t.trim()
                .parse::<u32>()
                .ok()
                .filter(|n| (1..=64).contains(n))
        })
        .collect::<Option<_>>()
        .with_context(|| format!("--sweep '{s}': sender counts must be 1..=64"))?;
    Ok(v)
}

fn run_incast(a: IncastArgs) -> anyhow::Result<i32> {
    let mut rto_min = a.rto_min.clone();
    if rto_min.is_empty() {
        rto_min.push(std::time::Duration::from_millis(200));
    }
    let rto_min_us = rto_min.iter().map(|d| d.as_micros() as u64).collect();
    let senders = match &a.sweep {
        Some(s) => parse_sweep(s)?,
        None => vec![a.senders],
    };
    let cfg = incast::Config {
        senders,
        block_bytes: a.block,
        rounds: a.rounds.max(1),
        max_run_duration_ms: a.max_run_secs.max(1) * 1000,
        rate: a.rate.clone(),
        burst_bytes: a.burst,
        limit_bytes: a.limit,
        rto_min_us,
        congestion_control: a.cc.clone(),
    };
    cfg.rate_bits_per_s()?;
    let plain = |s: incast::Incast, common: &Common, stop: &AtomicBool| {
        let o = incast::run(common, s.config(), stop)?;
        if a.sweep.is_some() {
            let (csv, svg) = (a.out.with_extension("csv"), a.out.with_extension("svg"));
            tcpdoctor_lab::chart::write_incast_sweep(&o.body.runs, &csv, &svg)?;
            if !a.common.json {
                eprintln!("wrote {} and {}", csv.display(), svg.display());
            }
        }
        Ok(o)
    };
    let views = (views::incast as ViewOf<_>, views::incast_fix as ViewOf<_>);
    run_scenario(incast::Incast::new(cfg), &a.common, plain, views)
}

/// `--duration` of a scenario run: a duration from 1 s to 10 min.
fn run_length(s: &str) -> Result<std::time::Duration, String> {
    let d = crate::args::duration(s)?;
    if !(std::time::Duration::from_secs(1)..=std::time::Duration::from_secs(600)).contains(&d) {
        return Err(format!("'{s}' is outside 1s..10m"));
    }
    Ok(d)
}

/// The bottleneck's rate (100Mbit, 1Gbit), passed to tc in bit/s.
fn tc_rate(s: &str) -> Result<String, String> {
    Ok(format!("{}bit", crate::args::bit_rate(s)?.round() as u64))
}

/// `--ports`: a client port range the lab can narrow to (1024-65535, without its server's).
fn client_ports(s: &str) -> Result<tcpdoctor_model::PortRange, String> {
    let ports: tcpdoctor_model::PortRange = s.parse().map_err(|e| format!("{e}"))?;
    let server = tcpdoctor_sandbox::traffic::SERVER_PORT;
    if ports.low < 1024 || ports.contains(server) {
        return Err(format!(
            "must lie in 1024-65535 and leave out the lab's server port {server}"
        ));
    }
    Ok(ports)
}

/// `--cc`: a congestion control's name (letters, digits, `_`), as `ip route ... congctl`
/// takes it.
fn cc_name(s: &str) -> Result<String, String> {
    match s.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_') {
        true => Ok(s.to_string()),
        false => Err("expected a congestion control name like cubic or bbr".into()),
    }
}

/// A size above zero and at most `max` bytes.
fn bytes_up_to(max: u64) -> impl Fn(&str) -> Result<u64, String> + Clone + Send + Sync {
    move |s| match crate::args::positive_bytes(s)? {
        n if n > max => Err(format!("at most {}", tcpdoctor_report::fmt::bytes(max))),
        n => Ok(n),
    }
}

/// `--concurrency`: 1 to 256 workers.
fn concurrency() -> clap::builder::RangedI64ValueParser<u16> {
    clap::value_parser!(u16).range(1..=256)
}

fn run_port_exhaustion(a: PortArgs) -> anyhow::Result<i32> {
    let cfg = port_exhaustion::Config {
        ports: a.ports,
        duration_ms: a.duration.as_millis() as u64,
        concurrency: usize::from(a.concurrency),
        close_first: a.close_first,
    };
    run_scenario(
        port_exhaustion::PortExhaustion::new(cfg),
        &a.common,
        port_exhaustion::run,
        (views::port_exhaustion, views::port_exhaustion_fix),
    )
}

fn run_syn_drop(a: SynDropArgs) -> anyhow::Result<i32> {
    let cfg = syn_drop::Config {
        drop_percent: a.drop_percent,
        duration_ms: a.duration.as_millis() as u64,
        concurrency: usize::from(a.concurrency),
    };
    run_scenario(
        syn_drop::SynDrop(cfg),
        &a.common,
        driver::plain,
        (views::syn_drop, views::syn_drop),
    )
}

fn run_accept_overflow(a: AcceptArgs) -> anyhow::Result<i32> {
    let cfg = accept_overflow::Config {
        backlog: a.backlog,
        server_threads: usize::from(a.server_threads),
        duration_ms: a.duration.as_millis() as u64,
        concurrency: usize::from(a.concurrency),
    };
    run_scenario(
        accept_overflow::AcceptOverflow(cfg),
        &a.common,
        driver::plain,
        (views::accept_overflow, views::accept_overflow),
    )
}

fn run_timewait(a: TimewaitArgs) -> anyhow::Result<i32> {
    let cfg = timewait::Config {
        connections: a.connections,
        request_bytes: a.request_bytes as usize,
        rfc1337: a.rfc1337,
        ..timewait::Config::default()
    };
    run_scenario(
        timewait::Timewait(cfg),
        &a.common,
        driver::plain,
        (views::timewait, views::timewait),
    )
}

fn run_slow_reader(a: SlowReaderArgs) -> anyhow::Result<i32> {
    let cfg = slow_reader::Config {
        writer_rate_bytes_per_s: a.writer_rate,
        reader_rate_bytes_per_s: a.reader_rate,
        reader_rcvbuf_bytes: a.rcvbuf as usize,
        duration_ms: a.duration.as_millis() as u64,
    };
    run_scenario(
        slow_reader::SlowReader(cfg),
        &a.common,
        driver::plain,
        (views::slow_reader, views::slow_reader),
    )
}

fn run_stale_ack(a: StaleAckArgs) -> anyhow::Result<i32> {
    let cfg = stale_ack::Config {
        duration_ms: a.duration.as_millis() as u64,
        concurrency: usize::from(a.concurrency),
    };
    run_scenario(
        stale_ack::StaleAck::new(cfg),
        &a.common,
        stale_ack::run,
        (views::stale_ack, views::stale_ack_fix),
    )
}
