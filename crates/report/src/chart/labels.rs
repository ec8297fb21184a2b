//! Tick and category labels of the charts: which ticks of a log axis have room for a label,
//! how a tick reads in its axis' unit, and how bar categories fit (upright, wrapped, turned,
//! thinned). Label widths are estimated from character counts: the SVG carries no font
//! metrics, and the browser test in crates/cli/tests/html.rs measures the real boxes.

use plotters::coord::ranged1d::Ranged;
use plotters::prelude::*;

use super::{Axis, Unit};

/// `1.00 k` -> `1 k`, `2.50ms` -> `2.5ms`, `-0.0 s` -> `0 s`: the number's trailing zeros
/// after a decimal point dropped.
pub(super) fn trim_zeros(s: &str) -> String {
    let end = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.' || c == '-'))
        .unwrap_or(s.len());
    let (num, rest) = s.split_at(end);
    let num = if num.contains('.') {
        num.trim_end_matches('0').trim_end_matches('.')
    } else {
        num
    };
    let num = if num == "-0" { "0" } else { num };
    format!("{num}{rest}")
}

/// Which ticks of a logarithmic axis carry a label, at `px_per_decade` pixels per decade
/// when a label needs `gap_px` along the axis: powers of ten (every k-th decade when decades
/// are closer than a label), 2 and 5 between them when a label fits in a third of a decade,
/// every digit when one fits between 9 and 10. Plotters' own ticks between decades
/// (`20 k, 30 k, ... 90 k`) would otherwise print on top of each other.
pub(super) fn log_label(v: f64, px_per_decade: f64, gap_px: f64) -> bool {
    if !(v > 0.0 && v.is_finite() && px_per_decade > 0.0) {
        return false;
    }
    let e = (v.log10() + 1e-9).floor();
    let m = v / 10f64.powf(e);
    let digit = m.round();
    if (m - digit).abs() > 1e-6 * m || !(1.0..=9.0).contains(&digit) {
        return false;
    }
    let fits = |a: f64, b: f64| px_per_decade * (b / a).log10() >= gap_px;
    match digit as u32 {
        1 => {
            let every = (gap_px / px_per_decade).ceil().max(1.0) as i64;
            (e as i64).rem_euclid(every) == 0
        }
        2 | 5 if fits(5.0, 10.0) => true,
        _ => fits(9.0, 10.0),
    }
}

/// Pixels a tick label of `chars` characters takes along a horizontal line, at the charts'
/// 12-unit label font (plotters writes it as 9.7 px; a sans-serif character is at most
/// ~0.65 em wide on average, capitals included).
pub(super) fn label_px(chars: usize) -> f64 {
    chars as f64 * 6.3
}

/// Height of a horizontal tick label, with the space between two of them.
pub(super) const LABEL_GAP_PX: f64 = 16.0;

/// The tick labels of one axis: its unit, its span, and (log axes) which ticks have room for
/// a label.
pub(super) struct Ticks {
    unit: Unit,
    span: f64,
    /// Log axes: pixels per decade along the axis.
    px_per_decade: Option<f64>,
    horizontal: bool,
}

impl Ticks {
    pub(super) fn along<X: Ranged, Y: Ranged>(
        axis: &Axis,
        (lo, hi): (f64, f64),
        area: &DrawingArea<SVGBackend, Cartesian2d<X, Y>>,
        horizontal: bool,
    ) -> Ticks {
        let (px, py) = area.get_pixel_range();
        let len = if horizontal {
            px.end - px.start
        } else {
            py.end - py.start
        };
        let decades = (hi / lo).log10();
        Ticks {
            unit: axis.unit,
            span: hi - lo,
            px_per_decade: (axis.log && decades > 0.0).then(|| f64::from(len) / decades),
            horizontal,
        }
    }

    pub(super) fn label(&self, v: f64) -> String {
        let text = self.unit.tick(v, self.span);
        if let Some(ppd) = self.px_per_decade {
            let gap = if self.horizontal {
                label_px(text.chars().count()) + 10.0
            } else {
                LABEL_GAP_PX
            };
            if !log_label(v, ppd, gap) {
                return String::new();
            }
        }
        text
    }
}

/// Where a bar chart's category labels go (see [`Bars::label_layout`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum LabelLayout {
    /// Upright under each group, in this many lines at most.
    Upright { lines: usize },
    /// Turned a quarter to read upwards, one in `every`, at most `chars` long.
    Turned { every: usize, chars: usize },
}

/// Line height of upright labels wrapped over several lines.
pub(super) const LINE_PX: u32 = 13;

/// A turned label longer than this is cut (its chart keeps half its height for the plot).
pub(super) const TURNED_CHARS: usize = 22;

/// `text` in lines of at most `width` characters, broken at spaces; `None` when a word is
/// longer than a line.
pub(super) fn wrap_words(text: &str, width: usize) -> Option<Vec<String>> {
    let mut lines: Vec<String> = Vec::new();
    for word in text.split_whitespace() {
        if word.chars().count() > width {
            return None;
        }
        match lines.last_mut() {
            Some(l) if l.chars().count() + 1 + word.chars().count() <= width => {
                l.push(' ');
                l.push_str(word);
            }
            _ => lines.push(word.to_string()),
        }
    }
    Some(lines)
}

/// `text` cut to `chars` characters, an ellipsis marking the cut.
pub(super) fn cut(text: &str, chars: usize) -> String {
    if text.chars().count() <= chars {
        return text.to_string();
    }
    text.chars()
        .take(chars.saturating_sub(1))
        .collect::<String>()
        + "…"
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn log_ticks_are_labelled_as_room_allows() {
        // 290 px for one decade: every digit; for three: 1, 2, 5; for ten: powers of ten.
        let labelled = |ppd: f64| -> Vec<f64> {
            (1..=9)
                .map(f64::from)
                .filter(|&m| log_label(m * 1e3, ppd, LABEL_GAP_PX))
                .collect()
        };
        assert_eq!(labelled(400.0), (1..=9).map(f64::from).collect::<Vec<_>>());
        assert_eq!(labelled(290.0 / 3.0), vec![1.0, 2.0, 5.0]);
        assert_eq!(labelled(29.0), vec![1.0]);
        // Decades closer than a label: every other one.
        assert!(log_label(100.0, 10.0, LABEL_GAP_PX));
        assert!(!log_label(1_000.0, 10.0, LABEL_GAP_PX));
        // Float noise from plotters' tick arithmetic still reads as 2 x 10^4.
        assert!(log_label(19_999.999_999, 100.0, LABEL_GAP_PX));
        assert!(!log_label(0.0, 100.0, LABEL_GAP_PX));
    }

    #[test]
    fn ticks_read_in_the_unit_of_their_span_without_trailing_zeros() {
        assert_eq!(Unit::Seconds.tick(0.002, 0.02), "2 ms");
        assert_eq!(Unit::Seconds.tick(0.0025, 0.005), "2.5 ms");
        assert_eq!(Unit::Seconds.tick(0.2, 2.0), "0.2 s");
        assert_eq!(Unit::Seconds.tick(1.0, 2.0), "1 s");
        assert_eq!(Unit::Seconds.tick(30.0, 60.0), "30 s");
        assert_eq!(Unit::Seconds.tick(0.000_05, 0.000_2), "50 us");
        assert_eq!(Unit::Count.tick(1_000.0, 1e5), "1 k");
        assert_eq!(Unit::Micros.tick(1_000_000.0, 1e6), "1s");
        assert_eq!(Unit::Micros.tick(2_500.0, 1e6), "2.5ms");
        assert_eq!(Unit::BitsPerSecond.tick(1e9, 1e10), "1 Gbit/s");
        assert_eq!(trim_zeros("100 k"), "100 k");
        assert_eq!(trim_zeros("-0.0 s"), "0 s");
    }
}
