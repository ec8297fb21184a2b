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

/// Rewraps the prose of every long help text (`after_long_help`) at `width` columns. The
/// texts are written wrapped at about 92 columns; clap would break each of those lines again
/// on a narrower terminal, leaving a short line after every long one.
pub fn reflow_long_help(cmd: clap::Command, width: usize) -> clap::Command {
    let cmd = match cmd.get_after_long_help().map(|h| h.to_string()) {
        Some(text) => cmd.after_long_help(reflow(&text, width)),
        None => cmd,
    };
    cmd.mut_subcommands(|c| reflow_long_help(c, width))
}

/// Joins the lines of each paragraph and wraps it at `width`. A prose line starts with a
/// non-space character; a paragraph of prose ends at a blank line, before an indented line,
/// and before a line that starts with a capital letter after a line that ended with '.' or
/// ':' (a new heading or sentence group: at worst a paragraph is split where it was not,
/// never two joined). Indented lines are tables of terms: "  term   description", the
/// description continued on lines indented to its column; each description is rewrapped
/// under its column. Other indented lines (examples) are kept as written.
fn reflow(text: &str, width: usize) -> String {
    let width = width.max(40);
    let mut out = String::new();
    // The block being gathered: the text before its first word (prose: none; a table row:
    // the term padded to the description's column), that column, and its words.
    let mut block: Option<(String, usize, Vec<&str>)> = None;
    let mut prose_last: Option<&str> = None;
    for l in text.lines() {
        let indent = l.len() - l.trim_start().len();
        if l.trim().is_empty() {
            flush(&mut block, width, &mut out);
            prose_last = None;
            out.push('\n');
            continue;
        }
        if indent == 0 {
            let heading = l.starts_with(|c: char| c.is_uppercase())
                && prose_last.is_some_and(|p| p.trim_end().ends_with(['.', ':']));
            if heading || !matches!(&block, Some((p, _, _)) if p.is_empty()) {
                flush(&mut block, width, &mut out);
                block = Some((String::new(), 0, Vec::new()));
            }
            if let Some((_, _, words)) = &mut block {
                words.extend(l.split_whitespace());
            }
            prose_last = Some(l);
            continue;
        }
        prose_last = None;
        // A continuation of the current row's description.
        if let Some((_, col, words)) = &mut block {
            if *col > 0 && indent == *col {
                words.extend(l.split_whitespace());
                continue;
            }
        }
        flush(&mut block, width, &mut out);
        // "  term   description": the description starts after the first gap of 2+ spaces.
        let gap = l[indent..].find("  ").map(|g| indent + g);
        let desc = gap.map(|g| g + l[g..].len() - l[g..].trim_start().len());
        match desc {
            Some(d) if d + 20 <= width => {
                block = Some((l[..d].to_string(), d, l[d..].split_whitespace().collect()));
            }
            _ if indent >= 8 && indent + 20 <= width => {
                block = Some((" ".repeat(indent), indent, l.split_whitespace().collect()));
            }
            _ => {
                out.push_str(l);
                out.push('\n');
            }
        }
    }
    flush(&mut block, width, &mut out);
    if !text.ends_with('\n') {
        out.pop();
    }
    out
}

/// Writes a gathered block: its first line after its prefix, the others indented to its
/// column, none past `width` unless one word is longer.
fn flush(block: &mut Option<(String, usize, Vec<&str>)>, width: usize, out: &mut String) {
    let Some((prefix, col, words)) = block.take() else {
        return;
    };
    let mut line = prefix;
    let mut empty = true;
    for word in words {
        if !empty && line.chars().count() + 1 + word.chars().count() > width {
            out.push_str(&line);
            out.push('\n');
            line = " ".repeat(col);
            empty = true;
        }
        if !empty {
            line.push(' ');
        }
        line.push_str(word);
        empty = false;
    }
    out.push_str(&line);
    out.push('\n');
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
    term::fail(ErrorKind::Usage, &one_line(&e), None, &run)
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
        let is_positional = (inner.starts_with('<') && inner.ends_with('>'))
            || (inner.starts_with('[') && inner.ends_with(']'));
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reflow_rewraps_prose_and_tables_and_keeps_examples() {
        let text = "Scope: one two three four five six seven eight nine ten\n\
                    eleven twelve.\n\
                    Needs: root.\n\
                    \x20 term     alpha beta gamma delta epsilon zeta eta\n\
                    \x20          theta.\n\
                    \x20 a/longer/term/alone\n\
                    \x20          iota kappa lambda mu nu xi omicron pi rho\n\
                    \n\
                    Examples:\n\
                    \x20 sudo tcpdoctor trace --duration 30s --netns a-rather-long-name\n";
        let got = reflow(text, 40);
        assert_eq!(
            got,
            "Scope: one two three four five six seven\n\
             eight nine ten eleven twelve.\n\
             Needs: root.\n\
             \x20 term     alpha beta gamma delta\n\
             \x20          epsilon zeta eta theta.\n\
             \x20 a/longer/term/alone\n\
             \x20          iota kappa lambda mu nu xi\n\
             \x20          omicron pi rho\n\
             \n\
             Examples:\n\
             \x20 sudo tcpdoctor trace --duration 30s --netns a-rather-long-name\n"
        );
    }

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
    }
}
