//! How human text is laid out: the width to fit and whether to colour. The binary decides both
//! once (from `--color`, `NO_COLOR`, `COLUMNS` and the terminal) and sets them here with
//! [`set`]; every printer reads them with [`current`]. This crate never looks at the terminal
//! itself.
//!
//! Colours mark severity only (critical red, warning yellow, info dim) and the verdict, so
//! that nothing depends on them: the words say the same with colour off.

use std::sync::RwLock;

use anstyle::{AnsiColor, Effects, Style};
use tcpdoctor_model::{Severity, Verdict};

/// Width used when nothing says otherwise: readable on any terminal, in mail and in logs.
pub const DEFAULT_WIDTH: usize = 80;
/// Prose (findings, explanations) wraps at most here even on wide terminals: longer lines
/// are hard to read. Tables may use the whole width.
pub const PROSE_MAX: usize = 100;
/// Narrower than this is not laid out at all (lines are kept whole).
pub const MIN_WIDTH: usize = 20;

/// A width that wraps nothing: output to a pipe or a file keeps tables and lines whole (as
/// `ss` does), so a reader or `grep` never meets an address or a header split in two.
pub const UNBOUNDED: usize = usize::MAX;

/// The layout every printer follows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Layout {
    /// Columns available to tables and lines; [`UNBOUNDED`] keeps them whole.
    pub width: usize,
    /// Running prose (findings, explanations) wraps at most here: [`PROSE_MAX`] on a
    /// terminal, [`DEFAULT_WIDTH`] in a pipe (readable in mail and logs).
    pub prose_max: usize,
    /// Emit ANSI colours.
    pub color: bool,
}

impl Default for Layout {
    fn default() -> Layout {
        Layout {
            width: DEFAULT_WIDTH,
            prose_max: PROSE_MAX,
            color: false,
        }
    }
}

impl Layout {
    /// Width for running prose: the layout's width, capped at [`Layout::prose_max`].
    pub fn prose_width(&self) -> usize {
        self.width.min(self.prose_max)
    }

    /// `text` in `style` when colour is on, plain otherwise.
    pub fn paint(&self, style: Style, text: &str) -> String {
        if self.color && style != Style::new() {
            format!("{}{text}{}", style.render(), style.render_reset())
        } else {
            text.to_string()
        }
    }
}

static LAYOUT: RwLock<Layout> = RwLock::new(Layout {
    width: DEFAULT_WIDTH,
    prose_max: PROSE_MAX,
    color: false,
});

/// Sets the process-wide layout (the binary calls it once, before printing).
pub fn set(layout: Layout) {
    if let Ok(mut l) = LAYOUT.write() {
        *l = Layout {
            width: layout.width.max(MIN_WIDTH),
            ..layout
        };
    }
}

/// The process-wide layout: 80 columns, no colour, unless [`set`] said otherwise.
pub fn current() -> Layout {
    LAYOUT.read().map(|l| *l).unwrap_or_default()
}

/// The style of a severity tag.
pub fn severity(s: Severity) -> Style {
    match s {
        Severity::Critical => Style::new()
            .fg_color(Some(AnsiColor::Red.into()))
            .effects(Effects::BOLD),
        Severity::Warning => Style::new()
            .fg_color(Some(AnsiColor::Yellow.into()))
            .effects(Effects::BOLD),
        Severity::Info => Style::new().effects(Effects::DIMMED),
    }
}

/// The style of a verdict word.
pub fn verdict(v: Verdict) -> Style {
    match v {
        Verdict::Healthy => Style::new()
            .fg_color(Some(AnsiColor::Green.into()))
            .effects(Effects::BOLD),
        Verdict::Findings => Style::new()
            .fg_color(Some(AnsiColor::Red.into()))
            .effects(Effects::BOLD),
        Verdict::Inconclusive => Style::new()
            .fg_color(Some(AnsiColor::Yellow.into()))
            .effects(Effects::BOLD),
    }
}

/// Headings (a finding's title).
pub fn heading() -> Style {
    Style::new().effects(Effects::BOLD)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paint_is_plain_without_colour() {
        let off = Layout::default();
        assert_eq!(
            off.paint(severity(Severity::Critical), "CRITICAL"),
            "CRITICAL"
        );
        let on = Layout { color: true, ..off };
        let s = on.paint(severity(Severity::Critical), "CRITICAL");
        assert!(
            s.starts_with("\u{1b}[") && s.ends_with("\u{1b}[0m"),
            "{s:?}"
        );
        assert!(s.contains("CRITICAL"));
    }
}
