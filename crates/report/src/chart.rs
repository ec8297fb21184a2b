//! Charts as inline SVG strings, drawn with plotters (SVG backend only: no font files, no
//! system libraries; the browser renders the text). Three shapes cover every report:
//!
//! - [`Xy`]: lines and points over a linear or logarithmic axis (latency over time, a sweep);
//! - [`Bars`]: grouped bars per category (before/after a remedy, peak/average per time scale),
//!   also a histogram when the categories are bucket ranges;
//! - [`Timeline`]: one lane per connection, with spans (stalls) and marks (resent SYNs, zero
//!   windows) along a shared time axis.
//!
//! Values are plain `f64` in the unit the axis names; [`Unit`] formats the tick labels.
//! A log axis starts at least a factor 2 below its smallest value (every non-zero bar
//! shows); tick labels are thinned and category labels wrapped or turned by the room they
//! need (`chart/labels.rs`), never printed over each other.
//! Colours come from [`Rgb`]; the same cause or severity gets the same colour in every chart.

use plotters::coord::ranged1d::{AsRangedCoord, ValueFormatter};
use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

mod labels;
use labels::{cut, label_px, trim_zeros, wrap_words, LabelLayout, Ticks};
use labels::{LABEL_GAP_PX, LINE_PX, TURNED_CHARS};

/// A chart could not be drawn (plotters' own error, as text).
#[derive(Debug, thiserror::Error)]
#[error("cannot draw chart '{title}': {message}")]
pub struct Error {
    pub title: String,
    pub message: String,
}

/// A colour.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Rgb(pub u8, pub u8, pub u8);

impl Rgb {
    pub const BLUE: Rgb = Rgb(0x1f, 0x6f, 0xb4);
    pub const ORANGE: Rgb = Rgb(0xe6, 0x7e, 0x22);
    pub const RED: Rgb = Rgb(0xc0, 0x39, 0x2b);
    pub const GREEN: Rgb = Rgb(0x27, 0xae, 0x60);
    pub const PURPLE: Rgb = Rgb(0x8e, 0x44, 0xad);
    pub const TEAL: Rgb = Rgb(0x16, 0xa0, 0x85);
    pub const BROWN: Rgb = Rgb(0x8d, 0x6e, 0x63);
    pub const GREY: Rgb = Rgb(0x80, 0x80, 0x80);
    pub const GOLD: Rgb = Rgb(0xd4, 0xac, 0x0d);
    pub const PINK: Rgb = Rgb(0xd8, 0x1b, 0x60);

    /// Distinct colours for series without a colour of their own, in order.
    pub const PALETTE: [Rgb; 9] = [
        Rgb::BLUE,
        Rgb::ORANGE,
        Rgb::GREEN,
        Rgb::PURPLE,
        Rgb::RED,
        Rgb::TEAL,
        Rgb::BROWN,
        Rgb::PINK,
        Rgb::GOLD,
    ];

    fn color(self) -> RGBColor {
        RGBColor(self.0, self.1, self.2)
    }

    /// `#rrggbb`.
    pub fn hex(self) -> String {
        format!("#{:02x}{:02x}{:02x}", self.0, self.1, self.2)
    }
}

/// How an axis' values read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Unit {
    /// Microseconds, printed as `850us`, `12ms`, `1.0s`.
    Micros,
    /// Seconds, printed as `12 s` (or `1.5 s`).
    Seconds,
    /// Bits per second, printed as `940 Mbit/s`.
    BitsPerSecond,
    /// A plain number, printed as `12`, `3.4 k`.
    Count,
}

impl Unit {
    pub fn format(self, v: f64) -> String {
        match self {
            Unit::Micros => crate::fmt::micros(v.max(0.0).round() as u64),
            Unit::Seconds => {
                if v.abs() >= 10.0 || v.fract() == 0.0 {
                    format!("{v:.0} s")
                } else {
                    format!("{v:.1} s")
                }
            }
            Unit::BitsPerSecond => crate::fmt::bitrate(v),
            Unit::Count => crate::fmt::count(v),
        }
    }

    /// A tick label on an axis spanning `span` (in the axis' unit): seconds in the unit the
    /// span reads in (`2 ms` steps, not `0.0 s` eleven times), trailing zeros dropped
    /// (`1 k`, `10 Gbit/s`, `2.5ms`).
    pub fn tick(self, v: f64, span: f64) -> String {
        let text = match self {
            Unit::Seconds => {
                let span = span.abs();
                let (scale, suffix) = if span >= 1.0 || span == 0.0 {
                    (1.0, " s")
                } else if span >= 1e-3 {
                    (1e3, " ms")
                } else {
                    (1e6, " us")
                };
                let (v, span) = (v * scale, span * scale);
                let decimals = if span >= 20.0 {
                    0
                } else if span >= 2.0 {
                    1
                } else {
                    2
                };
                format!("{v:.decimals$}{suffix}")
            }
            _ => self.format(v),
        };
        trim_zeros(&text)
    }
}

/// One axis.
#[derive(Clone, Debug)]
pub struct Axis {
    pub label: String,
    pub unit: Unit,
    /// Logarithmic scale (values must be > 0; smaller ones are drawn at the bottom).
    pub log: bool,
    /// Fixed range; `None` fits the data (from 0 on a linear axis).
    pub range: Option<(f64, f64)>,
}

impl Axis {
    pub fn linear(label: &str, unit: Unit) -> Axis {
        Axis {
            label: label.into(),
            unit,
            log: false,
            range: None,
        }
    }

    pub fn log(label: &str, unit: Unit) -> Axis {
        Axis {
            log: true,
            ..Axis::linear(label, unit)
        }
    }

    pub fn with_range(mut self, lo: f64, hi: f64) -> Axis {
        self.range = Some((lo, hi));
        self
    }

    /// The range to draw: the fixed one, or the data's with some headroom. `rises`: values
    /// are drawn up from the axis' bottom (bars, the y of lines and points).
    fn fit(&self, values: impl Iterator<Item = f64>, rises: bool) -> (f64, f64) {
        if let Some(r) = self.range {
            return r;
        }
        let (mut lo, mut hi) = (f64::INFINITY, f64::NEG_INFINITY);
        for v in values.filter(|v| v.is_finite() && (!self.log || *v > 0.0)) {
            lo = lo.min(v);
            hi = hi.max(v);
        }
        if !lo.is_finite() {
            return if self.log { (1.0, 10.0) } else { (0.0, 1.0) };
        }
        if self.log {
            // A bar rises from the axis' bottom: the bottom sits a power of ten at least a
            // factor 2 below the smallest value, so that the smallest bar (a LISTEN socket
            // beside 14,000 in TIME_WAIT) stands at least 0.3 decade tall; two decades at
            // least, so that plotters draws its ticks at powers of ten only.
            let hi = 10f64.powf((hi * 1.2).log10().ceil());
            let lo = if rises { lo / 2.0 } else { lo };
            let lo = 10f64.powf(lo.log10().floor()).min(hi / 100.0);
            (lo, hi)
        } else {
            let lo = lo.min(0.0);
            let hi = if hi > lo { hi * 1.08 } else { lo + 1.0 };
            (lo, hi)
        }
    }
}

/// How a series is drawn.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Style {
    Line,
    /// Small dots (many values).
    Points,
    /// A line through larger dots (few values: a sweep).
    LinePoints,
}

/// One named series.
#[derive(Clone, Debug)]
pub struct Series {
    pub name: String,
    pub color: Rgb,
    pub style: Style,
    /// With [`Style::Line`], a point whose y is NaN breaks the line.
    pub points: Vec<(f64, f64)>,
}

/// Lines and points over two axes.
#[derive(Clone, Debug)]
pub struct Xy {
    pub title: String,
    pub x: Axis,
    pub y: Axis,
    pub series: Vec<Series>,
}

/// How a legend entry is drawn.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Swatch {
    Line,
    Dot,
    Box,
}

/// One legend entry. Legends are drawn by the page under the chart, where they never hide
/// data.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LegendItem {
    pub name: String,
    pub color: Rgb,
    pub swatch: Swatch,
}

/// A drawn chart: the SVG document and its legend.
#[derive(Clone, Debug)]
pub struct Drawn {
    pub svg: String,
    pub legend: Vec<LegendItem>,
}

/// Size of every chart, in SVG pixels (scaled by the page).
pub const SIZE: (u32, u32) = (860, 380);

type Area<'a> = DrawingArea<SVGBackend<'a>, Shift>;

fn fail<E: std::fmt::Debug>(title: &str) -> impl Fn(E) -> Error + '_ {
    move |e| Error {
        title: title.to_string(),
        message: format!("{e:?}"),
    }
}

fn with_svg(
    title: &str,
    size: (u32, u32),
    draw: impl FnOnce(&Area) -> Result<(), Error>,
) -> Result<String, Error> {
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, size).into_drawing_area();
        root.fill(&WHITE).map_err(fail(title))?;
        draw(&root)?;
        root.present().map_err(fail(title))?;
    }
    Ok(svg)
}

impl Xy {
    /// The chart as an SVG document, with its legend.
    pub fn draw(&self) -> Result<Drawn, Error> {
        let legend = self
            .series
            .iter()
            .map(|s| LegendItem {
                name: s.name.clone(),
                color: s.color,
                swatch: match s.style {
                    Style::Line => Swatch::Line,
                    Style::Points | Style::LinePoints => Swatch::Dot,
                },
            })
            .collect();
        Ok(Drawn {
            svg: self.svg()?,
            legend,
        })
    }

    /// The chart as an SVG document (its legend is drawn by the page: see [`Xy::draw`]).
    pub fn svg(&self) -> Result<String, Error> {
        self.render(false)
    }

    /// The chart as a stand-alone SVG file, with its legend drawn inside the plot.
    pub fn standalone_svg(&self) -> Result<String, Error> {
        self.render(true)
    }

    fn render(&self, legend: bool) -> Result<String, Error> {
        let xs = self
            .series
            .iter()
            .flat_map(|s| s.points.iter().map(|p| p.0));
        let ys = self
            .series
            .iter()
            .flat_map(|s| s.points.iter().map(|p| p.1));
        let (x0, x1) = self.x.fit(xs, false);
        let (y0, y1) = self.y.fit(ys, true);
        let r = ((x0, x1), (y0, y1));
        with_svg(&self.title, SIZE, |root| match (self.x.log, self.y.log) {
            (false, false) => self.plot(root, x0..x1, y0..y1, r, legend),
            (false, true) => self.plot(root, x0..x1, (y0..y1).log_scale(), r, legend),
            (true, false) => self.plot(root, (x0..x1).log_scale(), y0..y1, r, legend),
            (true, true) => self.plot(root, (x0..x1).log_scale(), (y0..y1).log_scale(), r, legend),
        })
    }

    /// `ranges`: the x and y ranges drawn (for the tick labels, and the floor of a log y).
    fn plot<X, Y>(
        &self,
        root: &Area,
        x: X,
        y: Y,
        ranges: ((f64, f64), (f64, f64)),
        legend: bool,
    ) -> Result<(), Error>
    where
        X: AsRangedCoord<Value = f64>,
        Y: AsRangedCoord<Value = f64>,
        X::CoordDescType: ValueFormatter<f64>,
        Y::CoordDescType: ValueFormatter<f64>,
    {
        let t = self.title.as_str();
        let ((x0, x1), (y0, y1)) = ranges;
        let y_floor = y0;
        // On a log axis, values below the range (zero) are drawn at its bottom.
        let floor = |v: f64| {
            if self.y.log && v.is_finite() {
                v.max(y_floor)
            } else {
                v
            }
        };
        let mut chart = ChartBuilder::on(root)
            .caption(t, ("sans-serif", 18))
            .margin(12)
            .x_label_area_size(42)
            .y_label_area_size(72)
            .build_cartesian_2d(x, y)
            .map_err(fail(t))?;
        let xl = Ticks::along(&self.x, (x0, x1), chart.plotting_area(), true);
        let yl = Ticks::along(&self.y, (y0, y1), chart.plotting_area(), false);
        chart
            .configure_mesh()
            .x_desc(self.x.label.as_str())
            .y_desc(self.y.label.as_str())
            .x_label_formatter(&|v| xl.label(*v))
            .y_label_formatter(&|v| yl.label(*v))
            .light_line_style(RGBColor(0xee, 0xee, 0xee))
            .label_style(("sans-serif", 12))
            .draw()
            .map_err(fail(t))?;
        for s in &self.series {
            let color = s.color.color();
            let pts: Vec<(f64, f64)> = s.points.iter().map(|&(x, y)| (x, floor(y))).collect();
            match s.style {
                Style::Line => {
                    // A NaN value breaks the line (no data there: do not draw a slope).
                    let segments: Vec<Vec<(f64, f64)>> = pts
                        .split(|p| !p.1.is_finite())
                        .filter(|seg| !seg.is_empty())
                        .map(<[(f64, f64)]>::to_vec)
                        .collect();
                    let mut legend = None;
                    for seg in segments {
                        let single = seg.len() == 1;
                        let drawn = if single {
                            chart
                                .draw_series(seg.iter().map(|&p| Circle::new(p, 2, color.filled())))
                        } else {
                            chart.draw_series(LineSeries::new(seg, color.stroke_width(2)))
                        }
                        .map_err(fail(t))?;
                        if legend.is_none() {
                            legend = Some(());
                            drawn.label(s.name.as_str()).legend(move |(x, y)| {
                                PathElement::new(vec![(x, y), (x + 18, y)], color.stroke_width(2))
                            });
                        }
                    }
                }
                Style::Points => {
                    chart
                        .draw_series(pts.iter().map(|&p| Circle::new(p, 3, color.filled())))
                        .map_err(fail(t))?
                        .label(s.name.as_str())
                        .legend(move |(x, y)| Circle::new((x + 9, y), 4, color.filled()));
                }
                Style::LinePoints => {
                    chart
                        .draw_series(LineSeries::new(pts.clone(), color.stroke_width(2)))
                        .map_err(fail(t))?;
                    chart
                        .draw_series(pts.iter().map(|&p| Circle::new(p, 4, color.filled())))
                        .map_err(fail(t))?
                        .label(s.name.as_str())
                        .legend(move |(x, y)| Circle::new((x + 9, y), 4, color.filled()));
                }
            }
        }
        if legend {
            chart
                .configure_series_labels()
                .background_style(WHITE.mix(0.85))
                .border_style(RGBColor(0xcc, 0xcc, 0xcc))
                .label_font(("sans-serif", 12))
                .position(SeriesLabelPosition::UpperRight)
                .draw()
                .map_err(fail(t))?;
        }
        Ok(())
    }
}

/// Grouped bars: one group per category, one bar per series in each group.
#[derive(Clone, Debug)]
pub struct Bars {
    pub title: String,
    pub categories: Vec<String>,
    /// (name, colour, one value per category).
    pub series: Vec<(String, Rgb, Vec<f64>)>,
    pub y: Axis,
    /// Label under the categories.
    pub x_label: String,
}

impl Bars {
    /// A histogram: one bar per bucket, labelled by the bucket's range.
    pub fn histogram(title: &str, buckets: &[(String, f64)], y: Axis, x_label: &str) -> Bars {
        Bars {
            title: title.into(),
            categories: buckets.iter().map(|b| b.0.clone()).collect(),
            series: vec![(
                "count".into(),
                Rgb::BLUE,
                buckets.iter().map(|b| b.1).collect(),
            )],
            y,
            x_label: x_label.into(),
        }
    }

    /// The chart as an SVG document, with its legend (none for a single series).
    pub fn draw(&self) -> Result<Drawn, Error> {
        let legend = if self.series.len() > 1 {
            self.series
                .iter()
                .map(|(name, color, _)| LegendItem {
                    name: name.clone(),
                    color: *color,
                    swatch: Swatch::Box,
                })
                .collect()
        } else {
            Vec::new()
        };
        Ok(Drawn {
            svg: self.svg()?,
            legend,
        })
    }

    pub fn svg(&self) -> Result<String, Error> {
        let ys = self.series.iter().flat_map(|s| s.2.iter().copied());
        let (y0, y1) = self.y.fit(ys, true);
        with_svg(&self.title, SIZE, |root| {
            if self.y.log {
                self.plot(root, (y0..y1).log_scale(), (y0, y1))
            } else {
                self.plot(root, y0..y1, (y0, y1))
            }
        })
    }

    /// How the category labels fit under `plot_px` pixels of x axis: upright when the
    /// longest fits its slot, else wrapped at spaces into at most three upright lines, else
    /// turned to read upwards (cut with an ellipsis at [`TURNED_CHARS`]), one in `every`
    /// when even their height is more than a slot.
    fn label_layout(&self, plot_px: f64) -> LabelLayout {
        let n = self.categories.len().max(1);
        let slot = plot_px / n as f64;
        let longest = self
            .categories
            .iter()
            .map(|c| c.chars().count())
            .max()
            .unwrap_or(0);
        if label_px(longest) + 8.0 <= slot {
            return LabelLayout::Upright { lines: 1 };
        }
        let fit = ((slot - 8.0) / label_px(1)).floor().max(0.0) as usize;
        let lines = self
            .categories
            .iter()
            .map(|c| wrap_words(c, fit).map(|l| l.len()))
            .try_fold(1, |most, l| Some(most.max(l?)));
        if let Some(lines @ ..=3) = lines {
            return LabelLayout::Upright { lines };
        }
        LabelLayout::Turned {
            every: (LABEL_GAP_PX / slot).ceil().max(1.0) as usize,
            chars: longest.min(TURNED_CHARS),
        }
    }

    fn plot<Y>(&self, root: &Area, y: Y, (y0, y1): (f64, f64)) -> Result<(), Error>
    where
        Y: AsRangedCoord<Value = f64>,
        Y::CoordDescType: ValueFormatter<f64>,
    {
        let t = self.title.as_str();
        let base = y0;
        let n = self.categories.len().max(1);
        let groups = self.series.len().max(1) as f64;
        // The plot's width is the chart's less its margins and the y labels' area.
        let margin = 12;
        let y_area = 72;
        let layout = self.label_layout(f64::from(SIZE.0 - 2 * margin - y_area));
        // Labels hang below the ticks; the axis' description goes under them.
        let x_area = match layout {
            LabelLayout::Upright { lines } => 42 + LINE_PX * (lines as u32 - 1),
            LabelLayout::Turned { chars, .. } => label_px(chars) as u32 + 40,
        };
        let mut chart = ChartBuilder::on(root)
            .caption(t, ("sans-serif", 18))
            .margin(margin)
            .x_label_area_size(x_area)
            .y_label_area_size(y_area)
            .build_cartesian_2d(0f64..n as f64, y)
            .map_err(fail(t))?;
        let cats = &self.categories;
        let one_line = layout == LabelLayout::Upright { lines: 1 };
        let label = |v: &f64| {
            let i = v.floor() as usize;
            // Ticks fall at the middle of each group only.
            if one_line && (v - i as f64 - 0.5).abs() < 1e-6 {
                cats.get(i).cloned().unwrap_or_default()
            } else {
                String::new()
            }
        };
        let yl = Ticks::along(&self.y, (y0, y1), chart.plotting_area(), false);
        chart
            .configure_mesh()
            .disable_x_mesh()
            .x_labels(n * 2 + 1)
            .x_label_formatter(&label)
            .x_desc(self.x_label.as_str())
            .y_desc(self.y.label.as_str())
            .y_label_formatter(&|v| yl.label(*v))
            .light_line_style(RGBColor(0xee, 0xee, 0xee))
            .label_style(("sans-serif", 12))
            .draw()
            .map_err(fail(t))?;
        let (_, py) = chart.plotting_area().get_pixel_range();
        let font = ("sans-serif", 12).into_font().color(&BLACK);
        let slot_chars = |i: usize| {
            let (a, _) = chart.backend_coord(&(i as f64, y0));
            let (b, _) = chart.backend_coord(&(i as f64 + 1.0, y0));
            ((f64::from(b - a) - 8.0) / label_px(1)).floor().max(1.0) as usize
        };
        match layout {
            LabelLayout::Upright { lines: 1 } => {}
            LabelLayout::Upright { .. } => {
                // Each label in lines under its group's tick.
                let style = font.pos(Pos::new(HPos::Center, VPos::Top));
                for (i, c) in cats.iter().enumerate() {
                    let (x, _) = chart.backend_coord(&(i as f64 + 0.5, y0));
                    let lines = wrap_words(c, slot_chars(i)).unwrap_or_default();
                    for (k, line) in lines.iter().enumerate() {
                        let y = py.end + 8 + LINE_PX as i32 * k as i32;
                        root.draw(&Text::new(line.as_str(), (x, y), style.clone()))
                            .map_err(fail(t))?;
                    }
                }
            }
            LabelLayout::Turned { every, chars } => {
                // Each label reads upwards, its end at its group's tick.
                let style = font
                    .transform(FontTransform::Rotate270)
                    .pos(Pos::new(HPos::Right, VPos::Center));
                for (i, c) in cats.iter().enumerate().step_by(every) {
                    let (x, _) = chart.backend_coord(&(i as f64 + 0.5, y0));
                    let text = cut(c, chars);
                    root.draw(&Text::new(text.as_str(), (x, py.end + 8), style.clone()))
                        .map_err(fail(t))?;
                }
            }
        }
        for (k, (name, rgb, values)) in self.series.iter().enumerate() {
            let color = rgb.color();
            let width = 0.8 / groups;
            let bars = values.iter().enumerate().map(move |(i, v)| {
                let x0 = i as f64 + 0.1 + k as f64 * width;
                Rectangle::new(
                    [(x0, base), (x0 + width * 0.92, v.max(base))],
                    color.filled(),
                )
            });
            chart
                .draw_series(bars)
                .map_err(fail(t))?
                .label(name.as_str())
                .legend(move |(x, y)| {
                    Rectangle::new([(x, y - 5), (x + 12, y + 5)], color.filled())
                });
        }
        Ok(())
    }
}

/// Log-spaced histogram buckets (1, 2, 5 per decade) of `values_us`, empty buckets at the
/// ends dropped: `(label, count)` for [`Bars::histogram`].
pub fn log_buckets_us(values_us: &[u64]) -> Vec<(String, f64)> {
    if values_us.is_empty() {
        return Vec::new();
    }
    let mut edges = vec![0u64];
    let mut decade = 1u64;
    while edges
        .last()
        .is_some_and(|&e| e <= *values_us.iter().max().unwrap_or(&0))
    {
        for m in [1, 2, 5] {
            edges.push(decade * m);
        }
        decade = decade.saturating_mul(10);
    }
    edges.dedup();
    let mut counts = vec![0u64; edges.len()];
    for &v in values_us {
        let i = edges.partition_point(|&e| e <= v).saturating_sub(1);
        counts[i] += 1;
    }
    let first = counts.iter().position(|&c| c > 0).unwrap_or(0);
    let last = counts.iter().rposition(|&c| c > 0).unwrap_or(0);
    (first..=last)
        .map(|i| {
            let label = format!("≥{}", crate::fmt::micros(edges[i]));
            (label, counts[i] as f64)
        })
        .collect()
}

/// One mark on a timeline lane: an instant (`end` None) or a span.
#[derive(Clone, Debug)]
pub struct Mark {
    pub start_s: f64,
    pub end_s: Option<f64>,
    /// Index into [`Timeline::kinds`].
    pub kind: usize,
}

/// One lane (a connection).
#[derive(Clone, Debug)]
pub struct Lane {
    pub label: String,
    /// The connection's life, drawn as a thin grey bar.
    pub span_s: (f64, f64),
    pub marks: Vec<Mark>,
}

/// Lanes over a shared time axis, with a legend of mark kinds.
#[derive(Clone, Debug)]
pub struct Timeline {
    pub title: String,
    /// (name, colour) of each kind of mark.
    pub kinds: Vec<(String, Rgb)>,
    pub lanes: Vec<Lane>,
}

impl Timeline {
    /// The chart as an SVG document, with the legend of its mark kinds.
    pub fn draw(&self) -> Result<Drawn, Error> {
        let legend = self
            .kinds
            .iter()
            .map(|(name, color)| LegendItem {
                name: name.clone(),
                color: *color,
                swatch: Swatch::Box,
            })
            .collect();
        Ok(Drawn {
            svg: self.svg()?,
            legend,
        })
    }

    pub fn svg(&self) -> Result<String, Error> {
        self.svg_along("time since the first packet")
    }

    /// [`Timeline::draw`] with the time axis described as `x_desc` (lanes that start at
    /// something other than a packet: a request's start).
    pub fn draw_along(&self, x_desc: &str) -> Result<Drawn, Error> {
        let mut drawn = self.draw()?;
        drawn.svg = self.svg_along(x_desc)?;
        Ok(drawn)
    }

    /// [`Timeline::svg`] with the time axis described as `x_desc`.
    pub fn svg_along(&self, x_desc: &str) -> Result<String, Error> {
        let t = self.title.as_str();
        let n = self.lanes.len().max(1);
        let height = (90 + 34 * n as u32).max(200);
        let (lo, hi) = self
            .lanes
            .iter()
            .flat_map(|l| [l.span_s.0, l.span_s.1])
            .fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), v| {
                (a.min(v), b.max(v))
            });
        let (lo, hi) = if lo.is_finite() && hi > lo {
            (lo, hi + (hi - lo) * 0.02)
        } else {
            (0.0, 1.0)
        };
        with_svg(t, (SIZE.0, height), |root| {
            let mut chart = ChartBuilder::on(root)
                .caption(t, ("sans-serif", 18))
                .margin(12)
                .x_label_area_size(42)
                .y_label_area_size(190)
                .build_cartesian_2d(lo..hi, 0f64..n as f64)
                .map_err(fail(t))?;
            let lanes = &self.lanes;
            let label = |v: &f64| {
                let i = v.floor() as usize;
                if (v - i as f64 - 0.5).abs() < 1e-6 {
                    lanes
                        .get(n - 1 - i)
                        .map(|l| l.label.clone())
                        .unwrap_or_default()
                } else {
                    String::new()
                }
            };
            chart
                .configure_mesh()
                .disable_y_mesh()
                .y_labels(n * 2 + 1)
                .y_label_formatter(&label)
                .x_desc(x_desc)
                .x_label_formatter(&|v| Unit::Seconds.tick(*v, hi - lo))
                .light_line_style(RGBColor(0xee, 0xee, 0xee))
                .label_style(("sans-serif", 11))
                .draw()
                .map_err(fail(t))?;
            let grey = RGBColor(0xcc, 0xcc, 0xcc);
            chart
                .draw_series(lanes.iter().enumerate().map(|(i, l)| {
                    let y = (n - 1 - i) as f64 + 0.5;
                    Rectangle::new(
                        [(l.span_s.0, y - 0.06), (l.span_s.1, y + 0.06)],
                        grey.filled(),
                    )
                }))
                .map_err(fail(t))?;
            // Instants get a minimum width so a single packet shows; spans are drawn lower
            // and thinner than instants so that a resent SYN inside a stall stays visible.
            let tick = (hi - lo) / 320.0;
            for (k, (name, rgb)) in self.kinds.iter().enumerate() {
                let color = rgb.color();
                let marks = lanes.iter().enumerate().flat_map(move |(i, l)| {
                    let y = (n - 1 - i) as f64 + 0.5;
                    l.marks.iter().filter(move |m| m.kind == k).map(move |m| {
                        let (a, b, h) = match m.end_s {
                            Some(e) if e > m.start_s => (m.start_s, e.max(m.start_s + tick), 0.2),
                            _ => (m.start_s - tick / 2.0, m.start_s + tick / 2.0, 0.34),
                        };
                        Rectangle::new([(a, y - h), (b, y + h)], color.filled())
                    })
                });
                chart
                    .draw_series(marks)
                    .map_err(fail(t))?
                    .label(name.as_str())
                    .legend(move |(x, y)| {
                        Rectangle::new([(x, y - 5), (x + 12, y + 5)], color.filled())
                    });
            }
            Ok(())
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Heights of the `<rect>`s filled with `color` in an SVG document.
    fn heights(svg: &str, color: Rgb) -> Vec<f64> {
        let fill = format!("fill=\"{}\"", color.hex().to_uppercase());
        svg.split("<rect ")
            .skip(1)
            .filter(|r| r.contains(&fill))
            .map(|r| {
                let h = r.split("height=\"").nth(1).unwrap();
                h[..h.find('"').unwrap()].parse().unwrap()
            })
            .collect()
    }

    /// Issue 24: the census' LISTEN=1 bar was 0 px tall beside 14,139 TIME_WAIT sockets (the
    /// log axis started at 1), and so were counters that rose by exactly a power of ten.
    #[test]
    fn a_log_axis_starts_below_the_smallest_bar() {
        for values in [vec![4.0, 14_139.0, 1.0], vec![17e6, 250e3, 10.0], vec![3.0]] {
            let bars = Bars {
                title: "t".into(),
                categories: values.iter().map(|v| v.to_string()).collect(),
                series: vec![("n".into(), Rgb::BLUE, values.clone())],
                y: Axis::log("n", Unit::Count),
                x_label: "x".into(),
            };
            let h = heights(&bars.svg().unwrap(), Rgb::BLUE);
            assert_eq!(h.len(), values.len(), "{values:?}");
            // At least 0.3 decade of the plot's ~270 px.
            assert!(h.iter().all(|h| *h >= 8.0), "{values:?}: {h:?}");
        }
        let a = Axis::log("n", Unit::Count);
        assert_eq!(a.fit([1.0, 14_139.0].into_iter(), true), (0.1, 100_000.0));
        assert_eq!(a.fit([10.0, 1e7].into_iter(), true), (1.0, 1e8));
        assert_eq!(a.fit([3.0].into_iter(), true), (0.1, 10.0));
        // An x axis of points keeps to its data.
        assert_eq!(a.fit([10.0, 1e6].into_iter(), false), (10.0, 1e7));
    }

    /// Issue 24: twelve kernel counter names under 764 px printed over each other.
    #[test]
    fn category_labels_turn_when_they_do_not_fit_and_thin_when_turned_ones_do_not() {
        let bars = |n: usize, name: &str| Bars {
            title: "t".into(),
            categories: (0..n).map(|i| format!("{name}{i}")).collect(),
            series: vec![("n".into(), Rgb::BLUE, vec![1.0; n])],
            y: Axis::log("n", Unit::Count),
            x_label: "x".into(),
        };
        let upright = |lines| LabelLayout::Upright { lines };
        assert_eq!(bars(3, "LISTEN").label_layout(764.0), upright(1));
        assert_eq!(
            bars(12, "IpExtInNoECTPkts").label_layout(764.0),
            LabelLayout::Turned {
                every: 1,
                chars: 18
            }
        );
        assert_eq!(
            bars(100, "x").label_layout(764.0),
            LabelLayout::Turned { every: 3, chars: 3 }
        );
        // The lab's remedies: few, long, with spaces: wrapped upright.
        let remedy = "after: keep-alive (one connection per worker) #";
        assert_eq!(bars(3, remedy).label_layout(764.0), upright(2));
        // Too long for three lines: turned, cut.
        assert_eq!(
            bars(8, remedy).label_layout(764.0),
            LabelLayout::Turned {
                every: 1,
                chars: TURNED_CHARS
            }
        );
        assert_eq!(cut("abcdef", 4), "abc…");
        assert_eq!(
            wrap_words("a bb ccc", 4),
            Some(vec!["a bb".to_string(), "ccc".to_string()])
        );
        assert_eq!(wrap_words("abcde", 4), None);
    }
}
