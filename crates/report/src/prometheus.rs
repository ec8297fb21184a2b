//! Prometheus exposition: metric families built by the caller, printed in the Prometheus text
//! format (version 0.0.4, what `curl` and most scrapers read) or in OpenMetrics 1.0 (what a
//! Prometheus server asks for first in its `Accept` header).
//!
//! OpenMetrics is encoded by the `prometheus-client` crate (the Prometheus project's Rust
//! client) through a [`Collector`] over the families; that crate has no encoder for the
//! 0.0.4 text format, so [`write_text`] prints it here. Both take the same [`Family`] list,
//! so the two formats always carry the same samples.
//!
//! The two formats differ where a counter is concerned: 0.0.4 names the family as its samples
//! (`# TYPE x_total counter`, `x_total 5`), OpenMetrics names it without the suffix
//! (`# TYPE x counter`, `x_total 5`) and ends with `# EOF`. A [`Family`] of a counter is
//! therefore named without `_total`; the printers add it.
//!
//! Pure: no clock, no I/O beyond the writer.

use std::fmt::Write as _;

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::metrics::MetricType;
use prometheus_client::registry::{Registry, Unit};

/// The kind of a metric family.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// Only goes up (resets at restart); samples are named `<family>_total`.
    Counter,
    /// A level that goes up and down.
    Gauge,
}

/// A sample's value. Integers stay exact (kernel counters are 64-bit).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Value {
    U64(u64),
    I64(i64),
    F64(f64),
}

impl From<u64> for Value {
    fn from(v: u64) -> Value {
        Value::U64(v)
    }
}

impl From<i64> for Value {
    fn from(v: i64) -> Value {
        Value::I64(v)
    }
}

impl From<f64> for Value {
    fn from(v: f64) -> Value {
        Value::F64(v)
    }
}

impl From<u32> for Value {
    fn from(v: u32) -> Value {
        Value::U64(u64::from(v))
    }
}

impl Value {
    pub fn as_f64(self) -> f64 {
        match self {
            Value::U64(v) => v as f64,
            Value::I64(v) => v as f64,
            Value::F64(v) => v,
        }
    }
}

/// One sample: label pairs and a value.
#[derive(Clone, Debug, PartialEq)]
pub struct Sample {
    pub labels: Vec<(&'static str, String)>,
    pub value: Value,
}

/// The base unit a family's name ends with (OpenMetrics `# UNIT`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BaseUnit {
    Seconds,
    Bytes,
    Ratio,
}

impl BaseUnit {
    fn suffix(self) -> &'static str {
        match self {
            BaseUnit::Seconds => "seconds",
            BaseUnit::Bytes => "bytes",
            BaseUnit::Ratio => "ratio",
        }
    }
}

/// A metric family: a name, its help text, its kind and its samples.
#[derive(Clone, Debug, PartialEq)]
pub struct Family {
    /// The full name, including the unit suffix, without `_total` for counters.
    pub name: String,
    /// One line. Newlines and backslashes are escaped when printed. A family without samples
    /// is printed with its HELP and TYPE only (it exists, nothing was counted yet).
    pub help: String,
    pub kind: Kind,
    /// Set when the name ends with `_<unit>`.
    pub unit: Option<BaseUnit>,
    pub samples: Vec<Sample>,
}

impl Family {
    pub fn new(name: impl Into<String>, help: impl Into<String>, kind: Kind) -> Family {
        Family {
            name: name.into(),
            help: help.into(),
            kind,
            unit: None,
            samples: Vec::new(),
        }
    }

    pub fn gauge(name: impl Into<String>, help: impl Into<String>) -> Family {
        Family::new(name, help, Kind::Gauge)
    }

    pub fn counter(name: impl Into<String>, help: impl Into<String>) -> Family {
        Family::new(name, help, Kind::Counter)
    }

    /// Declares the unit the name ends with.
    pub fn unit(mut self, unit: BaseUnit) -> Family {
        debug_assert!(self.name.ends_with(unit.suffix()), "{}", self.name);
        self.unit = Some(unit);
        self
    }

    /// A sample without labels.
    pub fn with(mut self, value: impl Into<Value>) -> Family {
        self.samples.push(Sample {
            labels: Vec::new(),
            value: value.into(),
        });
        self
    }

    /// Adds a sample with labels.
    pub fn push(&mut self, labels: Vec<(&'static str, String)>, value: impl Into<Value>) {
        self.samples.push(Sample {
            labels,
            value: value.into(),
        });
    }

    /// The name samples carry: `<name>_total` for a counter.
    pub fn sample_name(&self) -> String {
        match self.kind {
            Kind::Counter => format!("{}_total", self.name),
            Kind::Gauge => self.name.clone(),
        }
    }
}

/// The exposition formats.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// Prometheus text format 0.0.4.
    Text,
    /// OpenMetrics text 1.0.0.
    OpenMetrics,
}

impl Format {
    /// The `Content-Type` of a response in this format.
    pub fn content_type(self) -> &'static str {
        match self {
            Format::Text => "text/plain; version=0.0.4; charset=utf-8",
            Format::OpenMetrics => "application/openmetrics-text; version=1.0.0; charset=utf-8",
        }
    }

    /// Picks the format an `Accept` header prefers: OpenMetrics when it is acceptable with a
    /// quality at least that of `text/plain` (Prometheus 2.x lists it first, q=1), else
    /// the text format (also for a missing or unparsable header).
    pub fn negotiate(accept: Option<&str>) -> Format {
        let Some(accept) = accept else {
            return Format::Text;
        };
        let mut om = 0.0f64;
        let mut text = 0.0f64;
        for range in accept.split(',') {
            let mut parts = range.split(';').map(str::trim);
            let media = parts.next().unwrap_or("").to_ascii_lowercase();
            let mut q = 1.0f64;
            for p in parts {
                if let Some(v) = p.strip_prefix("q=").or_else(|| p.strip_prefix("Q=")) {
                    q = v.trim().parse().unwrap_or(0.0);
                }
            }
            match media.as_str() {
                "application/openmetrics-text" => om = om.max(q),
                "text/plain" | "text/*" | "*/*" => text = text.max(q),
                _ => {}
            }
        }
        if om > 0.0 && om >= text {
            Format::OpenMetrics
        } else {
            Format::Text
        }
    }
}

/// Writes the families in `format`.
pub fn write(out: &mut String, families: &[Family], format: Format) -> std::fmt::Result {
    match format {
        Format::Text => write_text(out, families),
        Format::OpenMetrics => write_openmetrics(out, families),
    }
}

/// Escapes a label value (both formats): backslash, double quote, newline.
fn escape_label(v: &str, out: &mut String) {
    for c in v.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
}

/// Escapes help text: backslash and newline (0.0.4), plus double quote (OpenMetrics).
fn escape_help(v: &str, quote: bool) -> String {
    let mut out = String::with_capacity(v.len());
    for c in v.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '"' if quote => out.push_str("\\\""),
            c => out.push(c),
        }
    }
    out
}

fn write_value(out: &mut String, v: Value) -> std::fmt::Result {
    match v {
        Value::U64(v) => write!(out, "{v}"),
        Value::I64(v) => write!(out, "{v}"),
        Value::F64(v) if v.is_nan() => out.write_str("NaN"),
        Value::F64(v) if v.is_infinite() => out.write_str(if v > 0.0 { "+Inf" } else { "-Inf" }),
        Value::F64(v) => write!(out, "{v}"),
    }
}

/// The Prometheus text format 0.0.4: `# HELP`, `# TYPE`, then one line per sample.
pub fn write_text(out: &mut String, families: &[Family]) -> std::fmt::Result {
    for f in families {
        let name = f.sample_name();
        let kind = match f.kind {
            Kind::Counter => "counter",
            Kind::Gauge => "gauge",
        };
        writeln!(out, "# HELP {name} {}", escape_help(&f.help, false))?;
        writeln!(out, "# TYPE {name} {kind}")?;
        for s in &f.samples {
            out.push_str(&name);
            if !s.labels.is_empty() {
                out.push('{');
                for (i, (k, v)) in s.labels.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    out.push_str(k);
                    out.push_str("=\"");
                    escape_label(v, out);
                    out.push('"');
                }
                out.push('}');
            }
            out.push(' ');
            write_value(out, s.value)?;
            out.push('\n');
        }
    }
    Ok(())
}

/// OpenMetrics 1.0 through `prometheus-client`, ending with `# EOF`.
pub fn write_openmetrics(out: &mut String, families: &[Family]) -> std::fmt::Result {
    let mut registry = Registry::default();
    registry.register_collector(Box::new(Families(families.to_vec())));
    prometheus_client::encoding::text::encode(out, &registry)
}

/// The families as a `prometheus-client` collector.
#[derive(Debug)]
struct Families(Vec<Family>);

impl Collector for Families {
    fn encode(&self, mut encoder: DescriptorEncoder) -> std::fmt::Result {
        for f in &self.0 {
            let unit = f.unit.map(|u| match u {
                BaseUnit::Seconds => Unit::Seconds,
                BaseUnit::Bytes => Unit::Bytes,
                BaseUnit::Ratio => Unit::Other("ratio".into()),
            });
            // The crate appends `_<unit>` to the name it is given.
            let base = match f.unit {
                Some(u) => f
                    .name
                    .strip_suffix(u.suffix())
                    .and_then(|n| n.strip_suffix('_'))
                    .unwrap_or(&f.name),
                None => &f.name,
            };
            let kind = match f.kind {
                Kind::Counter => MetricType::Counter,
                Kind::Gauge => MetricType::Gauge,
            };
            // The crate writes help text as given: escape it as OpenMetrics requires.
            let help = escape_help(&f.help, true);
            let mut metric = encoder.encode_descriptor(base, &help, unit.as_ref(), kind)?;
            if let [only] = f.samples.as_slice() {
                if only.labels.is_empty() {
                    encode_value(f.kind, only.value, metric)?;
                    continue;
                }
            }
            for s in &f.samples {
                // The crate escapes label values itself.
                let labels: Vec<(&str, &str)> =
                    s.labels.iter().map(|(k, v)| (*k, v.as_str())).collect();
                encode_value(f.kind, s.value, metric.encode_family(&labels)?)?;
            }
        }
        Ok(())
    }
}

fn encode_value(
    kind: Kind,
    v: Value,
    enc: prometheus_client::encoding::MetricEncoder,
) -> std::fmt::Result {
    match (kind, v) {
        (Kind::Counter, Value::U64(n)) => ConstCounter::new(n).encode(enc),
        (Kind::Counter, Value::I64(n)) => ConstCounter::new(n.max(0) as u64).encode(enc),
        (Kind::Counter, Value::F64(x)) => ConstCounter::new(x).encode(enc),
        (Kind::Gauge, Value::I64(n)) => ConstGauge::new(n).encode(enc),
        (Kind::Gauge, Value::U64(n)) => match i64::try_from(n) {
            Ok(n) => ConstGauge::new(n).encode(enc),
            Err(_) => ConstGauge::new(n as f64).encode(enc),
        },
        (Kind::Gauge, Value::F64(x)) => ConstGauge::new(x).encode(enc),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn families() -> Vec<Family> {
        let mut tw = Family::gauge(
            "tcpdoctor_destination_time_wait_sockets",
            "TIME_WAIT sockets toward a destination",
        );
        tw.push(vec![("destination", "10.0.0.2:80".into())], 150u64);
        tw.push(vec![("destination", "odd\"va\\l\nue".into())], 3u64);
        vec![
            Family::counter(
                "tcpdoctor_kernel_TcpExtListenOverflows",
                "a full accept queue",
            )
            .with(7u64),
            tw,
            Family::gauge("tcpdoctor_rto_floor_seconds", "smallest RTO")
                .unit(BaseUnit::Seconds)
                .with(0.2),
            Family::gauge("tcpdoctor_empty", "no samples yet"),
        ]
    }

    #[test]
    fn text_format_names_counter_families_with_their_suffix_and_escapes_labels() {
        let mut s = String::new();
        write_text(&mut s, &families()).unwrap();
        assert_eq!(
            s,
            "# HELP tcpdoctor_kernel_TcpExtListenOverflows_total a full accept queue\n\
             # TYPE tcpdoctor_kernel_TcpExtListenOverflows_total counter\n\
             tcpdoctor_kernel_TcpExtListenOverflows_total 7\n\
             # HELP tcpdoctor_destination_time_wait_sockets TIME_WAIT sockets toward a destination\n\
             # TYPE tcpdoctor_destination_time_wait_sockets gauge\n\
             tcpdoctor_destination_time_wait_sockets{destination=\"10.0.0.2:80\"} 150\n\
             tcpdoctor_destination_time_wait_sockets{destination=\"odd\\\"va\\\\l\\nue\"} 3\n\
             # HELP tcpdoctor_rto_floor_seconds smallest RTO\n\
             # TYPE tcpdoctor_rto_floor_seconds gauge\n\
             tcpdoctor_rto_floor_seconds 0.2\n\
             # HELP tcpdoctor_empty no samples yet\n\
             # TYPE tcpdoctor_empty gauge\n"
        );
    }

    #[test]
    fn openmetrics_carries_the_same_samples_with_unit_and_eof() {
        let mut s = String::new();
        write_openmetrics(&mut s, &families()).unwrap();
        assert!(
            s.contains("# TYPE tcpdoctor_kernel_TcpExtListenOverflows counter\n"),
            "{s}"
        );
        assert!(
            s.contains("tcpdoctor_kernel_TcpExtListenOverflows_total 7\n"),
            "{s}"
        );
        assert!(
            s.contains("# UNIT tcpdoctor_rto_floor_seconds seconds\n"),
            "{s}"
        );
        assert!(s.contains("tcpdoctor_rto_floor_seconds 0.2\n"), "{s}");
        assert!(
            s.contains(
                "tcpdoctor_destination_time_wait_sockets{destination=\"10.0.0.2:80\"} 150\n"
            ),
            "{s}"
        );
        assert!(
            s.contains("{destination=\"odd\\\"va\\\\l\\nue\"} 3\n"),
            "{s}"
        );
        // A family with no samples yet still declares itself.
        assert!(s.contains("# TYPE tcpdoctor_empty gauge\n"), "{s}");
        assert!(s.ends_with("# EOF\n"), "{s}");
        // Same sample lines as the text format.
        let samples = |t: &str| -> Vec<String> {
            t.lines()
                .filter(|l| !l.starts_with('#'))
                .map(String::from)
                .collect()
        };
        let mut t = String::new();
        write_text(&mut t, &families()).unwrap();
        assert_eq!(samples(&s), samples(&t));
    }

    #[test]
    fn accept_header_picks_openmetrics_only_when_preferred() {
        let prometheus = "application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1";
        assert_eq!(Format::negotiate(Some(prometheus)), Format::OpenMetrics);
        assert_eq!(Format::negotiate(None), Format::Text);
        assert_eq!(Format::negotiate(Some("*/*")), Format::Text);
        assert_eq!(
            Format::negotiate(Some("text/plain;version=0.0.4")),
            Format::Text
        );
        assert_eq!(
            Format::negotiate(Some("text/plain;q=0.9, application/openmetrics-text;q=0.5")),
            Format::Text
        );
        assert_eq!(
            Format::negotiate(Some("application/openmetrics-text; version=1.0.0")),
            Format::OpenMetrics
        );
        assert_eq!(
            Format::negotiate(Some("application/openmetrics-text;q=0")),
            Format::Text
        );
    }

    #[test]
    fn special_float_values() {
        let mut s = String::new();
        write_text(
            &mut s,
            &[
                Family::gauge("g", "h").with(f64::INFINITY),
                Family::gauge("n", "h").with(f64::NAN),
            ],
        )
        .unwrap();
        assert!(s.contains("g +Inf\n") && s.contains("n NaN\n"), "{s}");
    }
}
