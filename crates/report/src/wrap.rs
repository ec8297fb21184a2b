//! Fitting text to a width: [`fill`] wraps one paragraph at word boundaries with a hanging
//! indent, and [`Fit`] is a writer that does the same to every line passing through it and
//! drops trailing spaces, so that no line of human output is wider than the terminal, whoever
//! printed it. Widths are display columns: ANSI colour sequences count zero, wide characters
//! two.
//!
//! A word longer than the width (a long path or URL) is broken where it must be: fitting the
//! screen wins over copy-pasting a line that would have wrapped anyway.

use std::io::{self, Write};

use textwrap::{Options, WordSeparator, WordSplitter};

/// Display width of `s` in columns, ignoring ANSI escape sequences.
pub fn width(s: &str) -> usize {
    textwrap::core::display_width(s)
}

/// Wraps `text` to `width` columns: the first line starts with `first`, the next ones with
/// `rest`. Lines are joined with `\n`, without a trailing newline or trailing spaces.
pub fn fill(text: &str, width: usize, first: &str, rest: &str) -> String {
    let opts = Options::new(width.max(first.len().max(rest.len()) + 8))
        .initial_indent(first)
        .subsequent_indent(rest)
        .word_separator(WordSeparator::AsciiSpace)
        .word_splitter(WordSplitter::NoHyphenation)
        .break_words(true);
    let mut out = String::new();
    for (i, line) in textwrap::wrap(text, opts).iter().enumerate() {
        if i > 0 {
            out.push('\n');
        }
        out.push_str(line.trim_end());
    }
    out
}

/// Fits one line (no newline) to `width`: unchanged when it fits, else wrapped with the
/// continuation lines indented two columns more than the line's own indent.
pub fn fit_line(line: &str, width: usize) -> String {
    let line = line.trim_end();
    if width == 0 || self::width(line) <= width {
        return line.to_string();
    }
    let body = line.trim_start_matches(' ');
    let indent = &line[..line.len() - body.len()];
    // A deeply indented line would leave no room: hang it from the left margin instead.
    let indent = if indent.len() + 20 > width {
        ""
    } else {
        indent
    };
    let rest = format!("{indent}  ");
    fill(body, width, indent, &rest)
}

/// A writer that fits every line to a width and drops trailing spaces. Lines are held until
/// their newline (or [`Write::flush`]), then written to the inner writer.
pub struct Fit<W: Write> {
    inner: W,
    width: usize,
    line: Vec<u8>,
}

impl<W: Write> Fit<W> {
    pub fn new(inner: W, width: usize) -> Fit<W> {
        Fit {
            inner,
            width,
            line: Vec::new(),
        }
    }

    fn emit(&mut self, newline: bool) -> io::Result<()> {
        let text = String::from_utf8_lossy(&self.line);
        let fitted = fit_line(&text, self.width);
        self.inner.write_all(fitted.as_bytes())?;
        if newline {
            self.inner.write_all(b"\n")?;
        }
        self.line.clear();
        Ok(())
    }

    /// The inner writer, after writing any partial line.
    pub fn into_inner(mut self) -> io::Result<W> {
        if !self.line.is_empty() {
            self.emit(false)?;
        }
        Ok(self.inner)
    }
}

impl<W: Write> Write for Fit<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let mut rest = buf;
        while let Some(i) = rest.iter().position(|&b| b == b'\n') {
            self.line.extend_from_slice(&rest[..i]);
            self.emit(true)?;
            rest = &rest[i + 1..];
        }
        self.line.extend_from_slice(rest);
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        if !self.line.is_empty() {
            self.emit(false)?;
        }
        self.inner.flush()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_lines_wrap_at_words_with_a_hanging_indent() {
        let mut out = Vec::new();
        {
            let mut f = Fit::new(&mut out, 32);
            writeln!(f, "  short   ").unwrap();
            writeln!(
                f,
                "  Settings: ip_local_port_range 32768-60999 (28232 ports usable)"
            )
            .unwrap();
            f.flush().unwrap();
        }
        let s = String::from_utf8(out).unwrap();
        for l in s.lines() {
            assert!(l.len() <= 32, "{l:?}");
            assert_eq!(l, l.trim_end(), "trailing space in {l:?}");
        }
        assert!(
            s.starts_with("  short\n  Settings: ip_local_port_range\n    32768-60999"),
            "{s}"
        );
    }

    #[test]
    fn colour_codes_take_no_width() {
        let red = "\u{1b}[31mred\u{1b}[0m";
        assert_eq!(width(red), 3);
        let line = format!("{red} {}", "x".repeat(10));
        assert_eq!(fit_line(&line, 14), line);
    }

    #[test]
    fn words_longer_than_the_width_are_broken() {
        let s = fit_line(&"a".repeat(50), 20);
        assert!(s.lines().all(|l| l.len() <= 20), "{s}");
    }
}
