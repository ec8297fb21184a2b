//! The long help texts (`--help`), fitted to the terminal.
//!
//! Each subcommand's `after_long_help` is written wrapped at about 92 columns. Clap would
//! break each of those lines again on a narrower terminal, leaving a short line after every
//! long one; [`fit_long_help`] rewraps them at the terminal's width first (clap then finds
//! nothing to break). Must not change what the texts say, only where their lines end.

use tcpdoctor_report::wrap;

/// Rewraps every long help text of `cmd` and its subcommands at `width` columns.
pub fn fit_long_help(cmd: clap::Command, width: usize) -> clap::Command {
    let cmd = match cmd.get_after_long_help().map(|h| h.to_string()) {
        Some(text) => cmd.after_long_help(reflow(&text, width)),
        None => cmd,
    };
    cmd.mut_subcommands(|c| fit_long_help(c, width))
}

/// Lines gathered into one paragraph: the text before its first word (prose: none; a table
/// row: its term, padded to the description's column), that column, and the words.
struct Block<'a> {
    first: String,
    column: usize,
    words: Vec<&'a str>,
}

impl Block<'_> {
    fn write(self, width: usize, out: &mut String) {
        let rest = " ".repeat(self.column);
        out.push_str(&wrap::fill(
            &self.words.join(" "),
            width,
            &self.first,
            &rest,
        ));
        out.push('\n');
    }
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
    let mut block: Option<Block> = None;
    let mut prose_last: Option<&str> = None;
    let flush = |block: &mut Option<Block>, out: &mut String| {
        if let Some(b) = block.take() {
            b.write(width, out);
        }
    };
    for l in text.lines() {
        let indent = l.len() - l.trim_start().len();
        if l.trim().is_empty() {
            flush(&mut block, &mut out);
            prose_last = None;
            out.push('\n');
            continue;
        }
        if indent == 0 {
            let heading = l.starts_with(|c: char| c.is_uppercase())
                && prose_last.is_some_and(|p| p.trim_end().ends_with(['.', ':']));
            let in_prose = matches!(&block, Some(b) if b.column == 0);
            if heading || !in_prose {
                flush(&mut block, &mut out);
            }
            block
                .get_or_insert_with(|| Block {
                    first: String::new(),
                    column: 0,
                    words: Vec::new(),
                })
                .words
                .extend(l.split_whitespace());
            prose_last = Some(l);
            continue;
        }
        prose_last = None;
        // A continuation of the current row's description.
        if let Some(b) = &mut block {
            if b.column > 0 && indent == b.column {
                b.words.extend(l.split_whitespace());
                continue;
            }
        }
        flush(&mut block, &mut out);
        // "  term   description": the description starts after the first gap of 2+ spaces.
        let gap = l[indent..].find("  ").map(|g| indent + g);
        let desc = gap.map(|g| g + l[g..].len() - l[g..].trim_start().len());
        block = match desc {
            Some(d) if d + 20 <= width => Some(Block {
                first: l[..d].to_string(),
                column: d,
                words: l[d..].split_whitespace().collect(),
            }),
            _ if indent >= 8 && indent + 20 <= width => Some(Block {
                first: " ".repeat(indent),
                column: indent,
                words: l.split_whitespace().collect(),
            }),
            _ => {
                out.push_str(l);
                out.push('\n');
                None
            }
        };
    }
    flush(&mut block, &mut out);
    if !text.ends_with('\n') {
        out.pop();
    }
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
}
