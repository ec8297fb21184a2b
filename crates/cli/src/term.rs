//! Terminal manners, decided once per run: colour, width, what stdout carries (human text to
//! fit, or JSON/CSV to leave alone), the one-line error and its JSON twin.
//!
//! Decisions:
//! - Colour: `--color always` and `never` win; `auto` (the default) colours when stdout is a
//!   terminal, `NO_COLOR` is unset or empty, and `TERM` is not `dumb`. Colour only marks
//!   severities and the verdict; the words say the same without it.
//! - Width: `--width N`, else `COLUMNS` when set to a number (as git and ls read it), else the
//!   terminal's width when stdout is a terminal. Human text is fitted to it (tables wrap
//!   inside their columns, findings under their first word, any other line with a hanging
//!   indent). When stdout is a pipe or a file and no width is given, tables and lines are
//!   kept whole (as `ss` does: an address or a header is never split, `grep` finds rows
//!   whole) and only findings' prose wraps, at 80 columns. JSON and CSV are never wrapped.
//! - Errors: one line on stderr, `tcpdoctor: error: ` then the causes joined by `: `, each
//!   cause printed once (an OS error quoted by the error that wraps it is not repeated). With
//!   `--json`, the same error also goes to stdout as a JSON document ([`ErrorReport`]) unless
//!   a report was already printed there. Exit status 2.
//! - A closed stdout (`| head`) is a request to stop: output ends quietly, running work stops
//!   as on Ctrl-C (so cleanup still runs).

use std::io::{self, IsTerminal, Write};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::OnceLock;

use tcpdoctor_report::error::{ErrorKind, ErrorReport};
use tcpdoctor_report::style::{self, Layout, DEFAULT_WIDTH};

/// `--color WHEN`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum ColorChoice {
    #[default]
    Auto,
    Always,
    Never,
}

/// What this run prints on stdout.
#[derive(Clone, Debug, Default)]
pub struct Run {
    /// The subcommand, for the JSON error document.
    pub command: Option<String>,
    /// `--json` was given: errors are also printed as JSON on stdout.
    pub json: bool,
    /// Stdout carries human text, fitted to the width. False for JSON, CSV, completion
    /// scripts and man pages.
    pub human: bool,
}

static RUN: OnceLock<Run> = OnceLock::new();
static STDOUT_USED: AtomicBool = AtomicBool::new(false);
static STDOUT_CLOSED: AtomicBool = AtomicBool::new(false);

/// Decides colour and width and records what stdout carries. Called once, after parsing;
/// `width` is `--width N`.
pub fn configure(color: ColorChoice, width_flag: Option<usize>, run: Run) {
    let env = |k: &str| std::env::var(k).ok();
    let color = match color {
        ColorChoice::Always => true,
        ColorChoice::Never => false,
        ColorChoice::Auto => {
            io::stdout().is_terminal()
                && env("NO_COLOR").is_none_or(|v| v.is_empty())
                && env("TERM").is_none_or(|t| t != "dumb")
        }
    };
    let (width, prose_max) = match width_flag.or_else(|| columns(env("COLUMNS").as_deref())) {
        Some(w) => (w, style::PROSE_MAX),
        None => match terminal() {
            Some(w) => (w, style::PROSE_MAX),
            // A pipe or a file: tables and lines whole, prose at the readable default.
            None => (style::UNBOUNDED, DEFAULT_WIDTH),
        },
    };
    style::set(Layout {
        width,
        prose_max,
        color,
    });
    let _ = RUN.set(run);
}

/// The width human text is fitted to (also used for `--help`).
pub fn terminal_width() -> usize {
    width(std::env::var("COLUMNS").ok().as_deref())
}

/// `COLUMNS`, else the terminal's width, else 80.
fn width(columns_var: Option<&str>) -> usize {
    columns(columns_var)
        .or_else(terminal)
        .unwrap_or(DEFAULT_WIDTH)
}

/// `COLUMNS` when set to a positive number (as git and ls read it).
fn columns(var: Option<&str>) -> Option<usize> {
    var.and_then(|c| c.trim().parse::<usize>().ok())
        .filter(|&c| c > 0)
}

/// The terminal's width when stdout is a terminal.
fn terminal() -> Option<usize> {
    if !io::stdout().is_terminal() {
        return None;
    }
    terminal_size::terminal_size_of(io::stdout()).map(|(terminal_size::Width(w), _)| w as usize)
}

pub fn run() -> Run {
    RUN.get().cloned().unwrap_or_default()
}

/// Notes that a report went to stdout (the JSON error document is then not added).
pub fn stdout_used() {
    STDOUT_USED.store(true, Ordering::SeqCst);
}

/// Notes that stdout was closed by its reader; true if it already was.
pub fn stdout_closed() -> bool {
    STDOUT_CLOSED.swap(true, Ordering::SeqCst)
}

pub fn is_stdout_closed() -> bool {
    STDOUT_CLOSED.load(Ordering::SeqCst)
}

/// The causes of `e` joined by `: `, each printed once, and the first OS error number.
pub fn describe(e: &anyhow::Error) -> (String, Option<i32>) {
    let mut msg = String::new();
    let mut errno = None;
    for cause in e.chain() {
        if let Some(io) = cause.downcast_ref::<io::Error>() {
            errno = errno.or(io.raw_os_error());
        }
        let text = cause.to_string();
        if text.is_empty() || msg.contains(&text) {
            continue;
        }
        if !msg.is_empty() {
            msg.push_str(": ");
        }
        msg.push_str(&text);
    }
    // Errors formatted into a message upstream keep the number only in their text.
    let errno = errno.or_else(|| {
        let at = msg.find("(os error ")? + "(os error ".len();
        msg[at..].split(')').next()?.parse().ok()
    });
    (msg, errno)
}

/// An error document with the provenance every report carries.
#[derive(serde::Serialize)]
struct StampedError<'a> {
    #[serde(flatten)]
    doc: &'a ErrorReport,
    #[serde(flatten)]
    provenance: &'a tcpdoctor_model::report::Provenance,
}

/// Prints the error line (and the JSON document when asked) and exits with status 2.
pub fn fail(kind: ErrorKind, msg: &str, errno: Option<i32>, run: &Run) -> ! {
    let _ = writeln!(io::stderr(), "tcpdoctor: error: {msg}");
    if run.json && !STDOUT_USED.load(Ordering::SeqCst) && !is_stdout_closed() {
        let kind = match (kind, errno) {
            (ErrorKind::Failed, Some(_)) => ErrorKind::Os,
            (k, _) => k,
        };
        let doc = ErrorReport::new(run.command.as_deref(), kind, msg, errno);
        // Stamped as every report is: when, where and by which build the error was printed.
        let provenance = crate::output::provenance();
        let doc = StampedError {
            doc: &doc,
            provenance: &provenance,
        };
        let mut out = io::stdout().lock();
        let _ = tcpdoctor_report::json(&mut out, &doc).and_then(|_| out.flush());
    }
    std::process::exit(2)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug)]
    struct Wrapper(io::Error);

    impl std::fmt::Display for Wrapper {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            write!(f, "cannot read /x: {}", self.0)
        }
    }

    impl std::error::Error for Wrapper {
        fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
            Some(&self.0)
        }
    }

    #[test]
    fn an_os_error_quoted_by_its_wrapper_is_printed_once() {
        let e = anyhow::Error::new(Wrapper(io::Error::from_raw_os_error(2)));
        let (msg, errno) = describe(&e);
        assert_eq!(
            msg,
            "cannot read /x: No such file or directory (os error 2)"
        );
        assert_eq!(errno, Some(2));
        let e = anyhow::Error::new(io::Error::from_raw_os_error(2)).context("opening a.pcap");
        assert_eq!(
            describe(&e).0,
            "opening a.pcap: No such file or directory (os error 2)"
        );
    }

    #[test]
    fn columns_wins_then_80() {
        assert_eq!(width(Some("132")), 132);
        assert_eq!(
            width(Some("junk")),
            if io::stdout().is_terminal() {
                width(None)
            } else {
                80
            }
        );
    }
}
