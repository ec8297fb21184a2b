//! The `tcpdoctor` binary: flags, subcommand glue and exit codes. Measurement and analysis
//! live in the library crates; this crate validates input, calls them, and renders.
//!
//! Exit codes (the same for every command, `cmd::install::EXIT_STATUS`): 0 healthy, 1
//! findings, 2 error (including bad input), 3 inconclusive (nothing measured, or interrupted
//! before enough was); 130 when a second Ctrl-C, 500 ms or more after the first, ends the run
//! at once.

mod args;
mod cmd;
mod help;
mod html;
mod netns;
mod output;
mod term;
mod usage;

/// mimalloc rather than the C library's allocator: it serves allocations from arenas backed
/// by transparent huge pages, so the flow engine's random walks over connection state miss
/// the TLB far less (`analyze` in 0.86-0.98x the time, at twice the peak RSS, within the
/// memory goal; BENCHMARKS.md, analyze). The C libraries linked in keep their own malloc.
#[global_allocator]
static ALLOC: mimalloc::MiMalloc = mimalloc::MiMalloc;

use clap::{ArgMatches, CommandFactory, FromArgMatches, Parser, Subcommand};

/// The version with the git commit it was built from (`0.1.0 (3f2a9c1d4e5b)`).
pub const VERSION: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    " (",
    env!("TCPDOCTOR_GIT_COMMIT"),
    ")"
);

/// Finds out why TCP connections are slow or failing, and proves it.
///
/// Start with `tcpdoctor doctor` to diagnose this host. Every command prints a human report
/// (or JSON with --json) that ends in ranked findings: what is wrong, the evidence (counters,
/// sockets, packets, timings), why it happens, and what to do.
///
/// Exit status: 0 healthy (something measured, nothing above info), 1 findings above info,
/// 2 error (bad input, a refused flag, a failed system call), 3 inconclusive (nothing
/// measured, or interrupted before enough was: never healthy).
#[derive(Parser, Debug)]
#[command(
    name = "tcpdoctor",
    version = VERSION,
    propagate_version = true,
    max_term_width = 100
)]
struct Cli {
    /// Colour severities and the verdict: auto (on a terminal unless NO_COLOR is set),
    /// always, never.
    #[arg(
        long,
        global = true,
        value_enum,
        default_value_t,
        value_name = "WHEN",
        display_order = 900
    )]
    color: term::ColorChoice,
    /// Fit human text to N columns (20 or more). Default: COLUMNS, else the terminal's
    /// width; in a pipe or a file, tables and lines are kept whole and findings wrap at 80.
    #[arg(
        long,
        global = true,
        value_name = "N",
        value_parser = clap::value_parser!(u16).range(20..),
        display_order = 901
    )]
    width: Option<u16>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Diagnose this host: settings, sockets, counters and a loopback self-probe.
    Doctor(cmd::doctor::Args),
    /// Generate connection churn or HTTP load and explain every latency spike.
    Probe(Box<cmd::probe::Args>),
    /// Read a capture (pcap, pcapng, snoop) and name the pathologies in it.
    Analyze(cmd::analyze::Args),
    /// Census of TCP sockets via sock_diag: states, TIME_WAIT per destination, queues.
    Sockets(cmd::sockets::Args),
    /// Kernel TCP counters: snapshot, delta, watch, or saved netstat/nstat text.
    Counters(cmd::counters::Args),
    /// Audit TCP sysctls and routes, with the arithmetic behind each finding.
    Check(cmd::check::Args),
    /// Sample an interface's counters at sub-millisecond resolution to find microbursts.
    Burst(cmd::burst::Args),
    /// Reproduce a pathology in network namespaces, diagnose it, and verify the fix.
    Lab(cmd::lab::Args),
    /// Trace TCP events live with eBPF and name the cause of each (root).
    Trace(cmd::trace::Args),
    /// Serve TCP health as Prometheus metrics: counters, census gauges, budgets, findings.
    Exporter(cmd::exporter::Args),
    /// Print a shell completion script (bash, zsh, fish, elvish, powershell).
    Completions(cmd::install::CompletionsArgs),
    /// Write the man pages (tcpdoctor.1 and one per subcommand), or print the main one.
    Man(cmd::install::ManArgs),
}

/// The command line's definition, as parsed, completed and documented.
pub(crate) fn command() -> clap::Command {
    let (cmd, width) = definition();
    help::fit_long_help(cmd, width)
}

/// The definition before [`help::fit_long_help`], and the width to fit it to.
fn definition() -> (clap::Command, usize) {
    let width = term::terminal_width().min(100);
    let cmd = usage::allow_negative_values(Cli::command().term_width(width).max_term_width(width));
    (cmd, width)
}

/// [`command`] to parse `argv` with. Rewrapping every long help text costs about 8 M
/// instructions (1 ms of CPU, a fifth of `analyze` on a 1000-packet capture) before any work
/// starts: it is done only when `argv` may ask for help (`help`, `--help`, `-h`).
fn command_for(argv: &[std::ffi::OsString]) -> clap::Command {
    let asks_help = argv.iter().skip(1).any(|a| {
        let a = a.to_string_lossy();
        a == "help"
            || a.starts_with("--h")
            || (!a.starts_with("--") && a.starts_with('-') && a.contains('h'))
    });
    if asks_help {
        command()
    } else {
        definition().0
    }
}

/// True when `id` is a flag set on the chosen (sub)command.
fn flag(m: &ArgMatches, id: &str) -> bool {
    matches!(m.try_get_one::<bool>(id), Ok(Some(true)))
        || m.subcommand().is_some_and(|(_, sub)| flag(sub, id))
}

fn main() {
    output::init();
    let argv: Vec<std::ffi::OsString> = std::env::args_os().collect();
    let matches = usage::matches(command_for(&argv), &argv);
    let cli = match Cli::from_arg_matches(&matches) {
        Ok(cli) => cli,
        Err(e) => usage::exit(e, &argv, &[]),
    };
    let name = matches.subcommand_name().map(str::to_string);
    let json = flag(&matches, "json");
    let machine = json || flag(&matches, "csv");
    let human = !machine && !matches!(name.as_deref(), Some("completions" | "man"));
    term::configure(
        cli.color,
        cli.width.map(usize::from),
        term::Run {
            command: name,
            json,
            human,
        },
    );
    let result = match cli.command {
        Command::Doctor(a) => cmd::doctor::run(a),
        Command::Probe(a) => cmd::probe::run(*a),
        Command::Analyze(a) => cmd::analyze::run(a),
        Command::Sockets(a) => cmd::sockets::run(a),
        Command::Counters(a) => cmd::counters::run(a),
        Command::Check(a) => cmd::check::run(a),
        Command::Burst(a) => cmd::burst::run(a),
        Command::Lab(a) => cmd::lab::run(a),
        Command::Trace(a) => cmd::trace::run(a),
        Command::Exporter(a) => cmd::exporter::run(a),
        Command::Completions(a) => cmd::install::completions(a, command()),
        Command::Man(a) => cmd::install::man(a, command()),
    };
    match result {
        Ok(code) => std::process::exit(code),
        Err(e) => output::fail(e),
    }
}
