//! Process-wide output concerns: Ctrl-C, stdout that tolerates a closed pipe, progress bars,
//! the one-line error format, and the provenance every JSON document is stamped with.

use std::io::{self, IsTerminal, Write};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::OnceLock;
use std::time::{Duration, SystemTime};

use serde::Serialize;
use tcpdoctor_model::{Provenance, Report, Stamped};

static INTERRUPTED: AtomicBool = AtomicBool::new(false);
/// CLOCK_MONOTONIC nanoseconds of the first signal (0: none yet).
static FIRST_SIGNAL_NS: AtomicU64 = AtomicU64::new(0);

/// Signals closer than this to the first are the same interrupt delivered twice, not a second
/// press: `timeout -s INT` signals the command and then its whole process group (coreutils
/// does both unless --foreground), and a terminal's Ctrl-C reaches every process of a
/// pipeline. Measured: `timeout --preserve-status -s INT 0.2 tcpdoctor burst lo` exited 130
/// with no report in 1 of 24 runs when the second delivery was taken for a second press.
pub const SECOND_PRESS_AFTER: Duration = Duration::from_millis(500);

/// Installs the handler of SIGINT, SIGTERM and SIGHUP: the first signal sets [`interrupted`]
/// so running work stops and reports what it measured; another one at least
/// [`SECOND_PRESS_AFTER`] later (a user pressing again because the report is slow to come)
/// exits at once with status 130.
///
/// The flag is set in the signal handler itself, on the thread the signal interrupts, before
/// that thread runs on: a reader blocked on a pipe that the interrupt also closes (Ctrl-C in
/// `tcpdump | tcpdoctor analyze -`) sees the flag when its read returns the end. A handler
/// run later on a thread of its own (the ctrlc crate's, used before) could lose that race
/// on a busy host: `analyze -` interrupted 50 ms before its input closed reported a complete,
/// uninterrupted analysis (cli test one_interrupt_delivered_twice..., 1 full-suite run with
/// other builds going on).
pub fn init() {
    extern "C" fn on_signal(_: libc::c_int) {
        // Async-signal-safe only: atomics, clock_gettime, _exit.
        INTERRUPTED.store(true, Ordering::SeqCst);
        let now = monotonic_ns().max(1);
        let first =
            match FIRST_SIGNAL_NS.compare_exchange(0, now, Ordering::SeqCst, Ordering::SeqCst) {
                Ok(_) => now,
                Err(first) => first,
            };
        if now.saturating_sub(first) >= SECOND_PRESS_AFTER.as_nanos() as u64 {
            // SAFETY: _exit is async-signal-safe; nothing is flushed, as a second press asks.
            unsafe { libc::_exit(130) }
        }
    }
    for sig in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
        // SAFETY: a zeroed sigaction is valid; the handler above is async-signal-safe.
        unsafe {
            let mut sa: libc::sigaction = std::mem::zeroed();
            sa.sa_sigaction = on_signal as *const () as usize;
            sa.sa_flags = libc::SA_RESTART;
            libc::sigemptyset(&mut sa.sa_mask);
            libc::sigaction(sig, &sa, std::ptr::null_mut());
        }
    }
}

/// CLOCK_MONOTONIC in nanoseconds (callable in a signal handler).
fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: ts is a valid timespec to write.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// The flag long-running work polls; set by Ctrl-C or SIGTERM.
pub fn stop_flag() -> &'static AtomicBool {
    &INTERRUPTED
}

pub fn interrupted() -> bool {
    INTERRUPTED.load(Ordering::SeqCst)
}

/// Prints a one-line error and exits with status 2 (see `term` for the format, and the JSON
/// document printed with `--json`).
pub fn fail(e: anyhow::Error) -> ! {
    let (msg, errno) = crate::term::describe(&e);
    let kind = tcpdoctor_report::error::ErrorKind::Failed;
    crate::term::fail(kind, &msg, errno, &crate::term::run())
}

/// Runs `f` with a locked, buffered stdout, human text fitted to the terminal's width. A
/// closed pipe (`| head`) ends the output quietly and stops the run as Ctrl-C would.
pub fn with_stdout<F>(f: F) -> anyhow::Result<()>
where
    F: FnOnce(&mut dyn Write) -> io::Result<()>,
{
    if crate::term::is_stdout_closed() {
        return Ok(());
    }
    crate::term::stdout_used();
    let stdout = io::stdout();
    let w = io::BufWriter::new(stdout.lock());
    let result = if crate::term::run().human {
        let width = tcpdoctor_report::style::current().width;
        let mut w = tcpdoctor_report::wrap::Fit::new(w, width);
        f(&mut w).and_then(|_| w.flush())
    } else {
        let mut w = w;
        f(&mut w).and_then(|_| w.flush())
    };
    match result {
        Err(e) if e.kind() == io::ErrorKind::BrokenPipe => {
            crate::term::stdout_closed();
            INTERRUPTED.store(true, Ordering::SeqCst);
            Ok(())
        }
        other => other
            .map_err(|e| anyhow::Error::from(e).context("writing the report to standard output")),
    }
}

/// Prints a report as JSON, or as text through `text`, and returns the exit code.
pub fn emit<B: Serialize>(
    report: &Report<B>,
    json: bool,
    text: impl FnOnce(&mut dyn Write, &Report<B>) -> io::Result<()>,
) -> anyhow::Result<i32> {
    if json {
        let p = provenance();
        with_stdout(|w| tcpdoctor_report::json(w, &stamp(report, &p)))?;
    } else {
        with_stdout(|w| text(w, report))?;
    }
    Ok(report.verdict.exit_code())
}

/// Prints a report as one JSON line (a `--watch` sample), stamped with the time it is printed.
pub fn json_line<B: Serialize>(report: &Report<B>) -> anyhow::Result<()> {
    let p = provenance();
    with_stdout(|w| tcpdoctor_report::json_line(w, &stamp(report, &p)))
}

fn stamp<'a, B>(report: &'a Report<B>, provenance: &'a Provenance) -> Stamped<'a, B> {
    Stamped { report, provenance }
}

/// This host, kernel and build, with the time now (RFC 3339 UTC, milliseconds).
pub fn provenance() -> Provenance {
    /// (host name, kernel release): read once, they do not change while a command runs.
    static HOST: OnceLock<(String, String)> = OnceLock::new();
    let (host_name, kernel_release) = HOST.get_or_init(uname).clone();
    Provenance {
        generated_at: humantime::format_rfc3339_millis(SystemTime::now()).to_string(),
        host_name,
        kernel_release,
        tcpdoctor_version: env!("CARGO_PKG_VERSION").to_string(),
        tcpdoctor_commit: env!("TCPDOCTOR_GIT_COMMIT").to_string(),
    }
}

/// `uname -n` and `uname -r`; "unknown" if uname(2) fails (it does not on Linux).
fn uname() -> (String, String) {
    // SAFETY: utsname is plain old data; uname fills it with NUL-terminated strings.
    unsafe {
        let mut u: libc::utsname = std::mem::zeroed();
        if libc::uname(&mut u) != 0 {
            return ("unknown".into(), "unknown".into());
        }
        let field = |f: &[libc::c_char]| {
            std::ffi::CStr::from_ptr(f.as_ptr())
                .to_string_lossy()
                .into_owned()
        };
        (field(&u.nodename), field(&u.release))
    }
}

/// A progress bar on stderr, hidden when stderr is not a terminal.
pub fn progress(total: Option<u64>, what: &str) -> indicatif::ProgressBar {
    if !io::stderr().is_terminal() {
        return indicatif::ProgressBar::hidden();
    }
    let bar = match total {
        Some(n) => indicatif::ProgressBar::new(n).with_style(
            indicatif::ProgressStyle::with_template("{msg} [{bar:30}] {percent:>3}%, {eta} left")
                .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
        ),
        None => indicatif::ProgressBar::new_spinner(),
    };
    bar.set_message(what.to_string());
    bar.enable_steady_tick(Duration::from_millis(200));
    bar
}
