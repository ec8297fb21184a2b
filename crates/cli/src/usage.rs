//! Command-line parsing with one-line usage errors.
//!
//! Every option that takes a value accepts a leading `-`, so `--rate -1` reaches the value's
//! parser and is refused as "invalid value '-1' for --rate: ..." instead of clap's
//! "unexpected argument '-1'" block. Clap's multi-line error (tips, usage, "for more
//! information") becomes one line; help and version requests print as clap prints them.
//! Running a command that needs a subcommand without one prints its help (exit 2), as cargo
//! and git do.

use std::ffi::OsString;

use clap::error::ErrorKind as ClapKind;
use tcpdoctor_report::error::ErrorKind;

use crate::term;

/// `cmd` and all its subcommands with negative numbers accepted as values.
pub fn allow_negative_values(cmd: clap::Command) -> clap::Command {
    cmd.mut_args(|a| {
        if a.get_action().takes_values() {
            a.allow_negative_numbers(true)
        } else {
            a
        }
    })
    .mut_subcommands(allow_negative_values)
}

/// Parses `argv` against `cmd`; a usage error is printed as one line and exits 2.
pub fn matches(cmd: clap::Command, argv: &[OsString]) -> clap::ArgMatches {
    let names: Vec<String> = cmd
        .get_subcommands()
        .map(|c| c.get_name().to_string())
        .collect();
    let argv = attach_negative_values(&cmd, argv);
    match cmd.try_get_matches_from(&argv) {
        Ok(m) => m,
        Err(e) => exit(e, &argv, &names),
    }
}

/// `--timeout -5s` -> `--timeout=-5s`: a value that starts with `-` and a digit, after an
/// option that takes a value, is attached to it, so that clap hands it to the value's parser
/// (which says why it is refused) instead of reading it as an unknown flag. Clap's own
/// `allow_negative_numbers` covers plain numbers only.
fn attach_negative_values(root: &clap::Command, argv: &[OsString]) -> Vec<OsString> {
    let mut out: Vec<OsString> = Vec::with_capacity(argv.len());
    let mut cmd = root;
    let mut i = 0;
    while i < argv.len() {
        let arg = argv[i].to_string_lossy().into_owned();
        if arg == "--" {
            out.extend(argv[i..].iter().cloned());
            break;
        }
        if let Some(sub) = cmd.find_subcommand(&arg) {
            cmd = sub;
        }
        let next_is_negative = argv.get(i + 1).is_some_and(|n| {
            let n = n.to_string_lossy();
            let mut c = n.chars();
            c.next() == Some('-') && c.next().is_some_and(|d| d.is_ascii_digit() || d == '.')
        });
        if i > 0 && next_is_negative && takes_value(cmd, root, &arg) {
            let mut joined = argv[i].clone();
            joined.push("=");
            joined.push(&argv[i + 1]);
            out.push(joined);
            i += 2;
            continue;
        }
        out.push(argv[i].clone());
        i += 1;
    }
    out
}

/// True when `arg` (`--name` or `-x`, without a value) is an option of `cmd` (or a global
/// one of `root`) that takes a value.
fn takes_value(cmd: &clap::Command, root: &clap::Command, arg: &str) -> bool {
    let matches = |a: &clap::Arg| {
        a.get_action().takes_values()
            && match (arg.strip_prefix("--"), arg.strip_prefix('-')) {
                (Some(long), _) => a.get_long() == Some(long),
                (None, Some(short)) if short.chars().count() == 1 => {
                    a.get_short() == short.chars().next()
                }
                _ => false,
            }
    };
    cmd.get_arguments().any(matches) || root.get_arguments().any(matches)
}

/// Prints `e` as one line (and as JSON on stdout with `--json`) and exits 2.
pub fn exit(e: clap::Error, argv: &[OsString], commands: &[String]) -> ! {
    match e.kind() {
        ClapKind::DisplayHelp | ClapKind::DisplayVersion => print_help(&e, false),
        ClapKind::DisplayHelpOnMissingArgumentOrSubcommand => print_help(&e, true),
        _ => {}
    }
    let args: Vec<String> = argv
        .iter()
        .skip(1)
        .map(|a| a.to_string_lossy().into_owned())
        .take_while(|a| a != "--")
        .collect();
    let command = args.iter().find(|a| commands.contains(a)).cloned();
    let run = term::Run {
        command,
        json: args.iter().any(|a| a == "--json"),
        human: true,
    };
    let mut line = one_line(&e);
    if e.kind() == ClapKind::InvalidSubcommand {
        line += &subcommands_of(&args);
    }
    term::fail(ErrorKind::Usage, &line, None, &run)
}

/// ` (lab has: incast, port-exhaustion, ...)`: the subcommands of the command whose
/// subcommand `args` got wrong, found by following `args` down the command line's tree.
fn subcommands_of(args: &[String]) -> String {
    let root = crate::command();
    let mut cmd = &root;
    for a in args {
        match cmd.find_subcommand(a) {
            Some(sub) => cmd = sub,
            None if !a.starts_with('-') => break,
            None => {}
        }
    }
    let names: Vec<&str> = cmd
        .get_subcommands()
        .filter(|c| !c.is_hide_set() && c.get_name() != "help")
        .map(|c| c.get_name())
        .collect();
    if names.is_empty() {
        return String::new();
    }
    let who = if std::ptr::eq(cmd, &root) {
        "tcpdoctor".to_string()
    } else {
        cmd.get_name().to_string()
    };
    format!(" ({who} has: {})", names.join(", "))
}

/// Prints help or the version as clap renders it, without trailing spaces, on stdout (exit 0)
/// or, when the command line was incomplete, on stderr (exit 2).
fn print_help(e: &clap::Error, incomplete: bool) -> ! {
    use std::io::{IsTerminal, Write};
    let styled = e.render();
    let tty = if incomplete {
        std::io::stderr().is_terminal()
    } else {
        std::io::stdout().is_terminal()
    };
    let colour = tty && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty());
    let text = if colour {
        styled.ansi().to_string()
    } else {
        styled.to_string()
    };
    let mut trimmed = String::with_capacity(text.len());
    for line in text.lines() {
        trimmed.push_str(line.trim_end());
        trimmed.push('\n');
    }
    let result = if incomplete {
        std::io::stderr().write_all(trimmed.as_bytes())
    } else {
        let mut out = std::io::stdout().lock();
        out.write_all(trimmed.as_bytes()).and_then(|_| out.flush())
    };
    let _ = result;
    std::process::exit(if incomplete { 2 } else { 0 })
}

/// Clap's message on one line: its first lines up to the usage block, tips in parentheses
/// (except "to pass '-x' as a value", which negative values no longer need), and
/// `'--rate <RATE>'` shortened to `--rate`.
pub fn one_line(e: &clap::Error) -> String {
    let text = e.render().to_string();
    let mut parts: Vec<String> = Vec::new();
    for line in text.lines() {
        let l = line.trim();
        if l.is_empty() {
            continue;
        }
        if l.starts_with("Usage:") || l.starts_with("For more information") {
            break;
        }
        let l = l.strip_prefix("error: ").unwrap_or(l);
        if let Some(tip) = l.strip_prefix("tip: ") {
            if !tip.starts_with("to pass") {
                parts.push(format!("({tip})"));
            }
            continue;
        }
        parts.push(l.to_string());
    }
    let line = shorten_arg_names(&parts.join(" "));
    // Integer flags parsed by std say "invalid digit found in string" for `-1`: say why.
    let negative = matches!(
        e.get(clap::error::ContextKind::InvalidValue),
        Some(clap::error::ContextValue::String(v)) if v.starts_with('-')
    );
    match line.strip_suffix("invalid digit found in string") {
        Some(head) if negative => format!("{head}negative values are not accepted"),
        Some(head) => format!("{head}not a whole number"),
        None => line,
    }
}

/// `'--rate <RATE>'` -> `--rate`, `'[TARGET]'` / `'<FILE>'` -> `TARGET` / `FILE`; quoted
/// values (`'-1'`) are left alone.
fn shorten_arg_names(s: &str) -> String {
    let mut out = String::new();
    let mut rest = s;
    while let Some(open) = rest.find('\'') {
        out.push_str(&rest[..open]);
        let after = &rest[open + 1..];
        let Some(close) = after.find('\'') else {
            out.push_str(&rest[open..]);
            return out;
        };
        let inner = &after[..close];
        let is_flag = inner.starts_with('-') && inner.contains(" <");
        // A placeholder is a name in capitals: `'[::1]'` is a value, kept as typed.
        let is_positional = ((inner.starts_with('<') && inner.ends_with('>'))
            || (inner.starts_with('[') && inner.ends_with(']')))
            && is_placeholder(inner.trim_matches(['<', '>', '[', ']', '.']));
        if is_flag {
            out.push_str(inner.split(' ').next().unwrap_or(inner));
        } else if is_positional {
            let name = inner.trim_matches(['<', '>', '[', ']', '.']);
            out.push_str(name);
        } else {
            out.push('\'');
            out.push_str(inner);
            out.push('\'');
        }
        rest = &after[close + 1..];
    }
    out.push_str(rest);
    out
}

/// `TARGET`, `FILE2`: a capital letter, then capitals, digits, `_` or `-`.
fn is_placeholder(name: &str) -> bool {
    name.starts_with(|c: char| c.is_ascii_uppercase())
        && name
            .chars()
            .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_' || c == '-')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn argument_names_lose_their_placeholders() {
        assert_eq!(
            shorten_arg_names("invalid value '-1' for '--rate <RATE>': '-1' is negative"),
            "invalid value '-1' for --rate: '-1' is negative"
        );
        assert_eq!(
            shorten_arg_names("invalid value 'x' for '[TARGET]': no"),
            "invalid value 'x' for TARGET: no"
        );
        assert_eq!(shorten_arg_names("it's fine"), "it's fine");
        // Issue 24: an IPv6 address in brackets is a value, not a placeholder.
        assert_eq!(
            shorten_arg_names("invalid value '[::1]' for '[TARGET]': '[::1]' has no port"),
            "invalid value '[::1]' for TARGET: '[::1]' has no port"
        );
    }
}
