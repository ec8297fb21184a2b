//! The HTML printer: one self-contained page per report (inline CSS and inline SVG charts, no
//! script, nothing fetched from the network), readable offline and in a mail attachment.
//!
//! A command builds a [`Page`]: [`Page::header`] with the verdict, [`Page::findings`] (what is
//! wrong and what to do comes first), then its own sections (facts, tables, charts from
//! [`crate::chart`]). Every text is escaped.

use tcpdoctor_model::{Finding, Report, Severity, Verdict};

use crate::chart;

const CSS: &str = r#"
body{font-family:system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:0;background:#f6f7f9;color:#1d2330;line-height:1.45}
main{max-width:980px;margin:0 auto;padding:24px 20px 48px}
h1{font-size:1.6em;margin:0 0 4px}
h2{font-size:1.2em;margin:32px 0 10px;border-bottom:1px solid #dde1e7;padding-bottom:4px}
.sub{color:#5b6475;margin:0 0 16px}
.verdict{border-radius:8px;padding:12px 16px;font-weight:600;margin:12px 0}
.verdict.healthy{background:#e3f6ea;border:1px solid #27ae60}
.verdict.findings{background:#fdecea;border:1px solid #c0392b}
.verdict.inconclusive{background:#fff6db;border:1px solid #d4ac0d}
.verdict span{font-weight:400}
table{border-collapse:collapse;background:#fff;margin:8px 0;font-size:.92em}
th,td{border:1px solid #dde1e7;padding:4px 9px;text-align:left;vertical-align:top}
th{background:#eef1f5}
td.num{text-align:right;font-variant-numeric:tabular-nums}
dl.facts{display:grid;grid-template-columns:max-content 1fr;gap:2px 16px;margin:8px 0}
dl.facts dt{color:#5b6475}dl.facts dd{margin:0}
figure{background:#fff;border:1px solid #dde1e7;border-radius:8px;margin:12px 0;padding:8px}
figure svg{width:100%;height:auto;display:block}
figcaption{color:#5b6475;font-size:.9em;padding:4px 6px}
.legend{display:flex;flex-wrap:wrap;gap:4px 18px;padding:2px 6px 4px;font-size:.9em}
.key i{display:inline-block;margin-right:6px;vertical-align:middle}
.key i.line{width:18px;height:3px}.key i.dot{width:9px;height:9px;border-radius:50%}.key i.box{width:12px;height:12px}
.finding{background:#fff;border:1px solid #dde1e7;border-left:6px solid #888;border-radius:8px;padding:10px 16px;margin:12px 0}
.finding.critical{border-left-color:#c0392b}.finding.warning{border-left-color:#e67e22}.finding.info{border-left-color:#95a5a6}
.badge{display:inline-block;border-radius:4px;padding:0 6px;font-size:.8em;font-weight:700;color:#fff;margin-right:6px;vertical-align:1px}
.badge.critical{background:#c0392b}.badge.warning{background:#e67e22}.badge.info{background:#95a5a6}
.finding h3,.finding summary{font-size:1.02em;margin:2px 0 6px;font-weight:700}
details.finding summary{cursor:pointer}
details.finding summary .line{font-weight:400;color:#5b6475;margin-left:8px}
details.finding[open] summary .line{display:none}
.finding ul{margin:4px 0 8px;padding-left:20px}
.finding .label{color:#5b6475;font-weight:600}
.caution{color:#8a5a00}
.note{color:#5b6475;font-style:italic}
footer{color:#8a93a3;font-size:.85em;margin-top:40px}
"#;

/// `&`, `<`, `>`, `"` and `'` escaped for text and attribute values.
pub fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

fn severity_class(s: Severity) -> &'static str {
    match s {
        Severity::Critical => "critical",
        Severity::Warning => "warning",
        Severity::Info => "info",
    }
}

/// One HTML document under construction.
pub struct Page {
    title: String,
    body: String,
    footer: String,
}

impl Page {
    pub fn new(title: &str) -> Page {
        Page {
            title: title.to_string(),
            body: String::new(),
            footer: String::new(),
        }
    }

    /// The title, a one-line description of the run, and the verdict with its reason.
    pub fn header<B>(&mut self, report: &Report<B>, subtitle: &str) {
        let (class, word) = match report.verdict {
            Verdict::Healthy => ("healthy", "Healthy".to_string()),
            Verdict::Findings => (
                "findings",
                format!(
                    "{} finding(s) above info",
                    report
                        .findings
                        .iter()
                        .filter(|f| f.severity > tcpdoctor_model::Severity::Info)
                        .count()
                ),
            ),
            Verdict::Inconclusive => ("inconclusive", "Inconclusive".to_string()),
        };
        let cut = if report.interrupted {
            " (interrupted: partial results)"
        } else {
            ""
        };
        self.body += &format!(
            "<h1>{}</h1>\n<p class=\"sub\">{}</p>\n<div class=\"verdict {class}\">Verdict: {} \
             <span>&mdash; {}{cut}</span></div>\n",
            escape(&self.title),
            escape(subtitle),
            escape(&word),
            escape(&report.verdict_reason),
        );
    }

    pub fn section(&mut self, heading: &str) {
        self.body += &format!("<h2>{}</h2>\n", escape(heading));
    }

    pub fn paragraph(&mut self, text: &str) {
        self.body += &format!("<p>{}</p>\n", escape(text));
    }

    /// A note in grey italics (what a chart leaves out, why a section is empty).
    pub fn note(&mut self, text: &str) {
        self.body += &format!("<p class=\"note\">{}</p>\n", escape(text));
    }

    /// Name/value pairs.
    pub fn facts(&mut self, items: &[(&str, String)]) {
        self.body += "<dl class=\"facts\">";
        for (k, v) in items {
            self.body += &format!("<dt>{}</dt><dd>{}</dd>", escape(k), escape(v));
        }
        self.body += "</dl>\n";
    }

    /// A table; columns listed in `numeric` are right-aligned.
    pub fn table(&mut self, header: &[&str], rows: &[Vec<String>], numeric: &[usize]) {
        self.body += "<table><thead><tr>";
        for h in header {
            self.body += &format!("<th>{}</th>", escape(h));
        }
        self.body += "</tr></thead><tbody>\n";
        for r in rows {
            self.body += "<tr>";
            for (i, c) in r.iter().enumerate() {
                let class = if numeric.contains(&i) {
                    " class=\"num\""
                } else {
                    ""
                };
                self.body += &format!("<td{class}>{}</td>", escape(c));
            }
            self.body += "</tr>\n";
        }
        self.body += "</tbody></table>\n";
    }

    /// A chart with its legend and caption; a chart that could not be drawn leaves a note
    /// instead.
    pub fn chart(&mut self, drawn: Result<chart::Drawn, chart::Error>, caption: &str) {
        match drawn {
            Ok(chart::Drawn { svg, legend }) => {
                let mut keys = String::new();
                for item in &legend {
                    let shape = match item.swatch {
                        chart::Swatch::Line => "line",
                        chart::Swatch::Dot => "dot",
                        chart::Swatch::Box => "box",
                    };
                    keys += &format!(
                        "<span class=\"key\"><i class=\"{shape}\" style=\"background:{}\"></i>{}</span>",
                        item.color.hex(),
                        escape(&item.name)
                    );
                }
                let keys = if keys.is_empty() {
                    keys
                } else {
                    format!("<div class=\"legend\">{keys}</div>")
                };
                let svg = svg.trim_start_matches(|c| c != '<');
                let svg = match svg.strip_prefix("<?xml") {
                    Some(rest) => rest.split_once("?>").map_or(svg, |(_, r)| r.trim_start()),
                    None => svg,
                };
                self.body += &format!(
                    "<figure>{svg}{keys}<figcaption>{}</figcaption></figure>\n",
                    escape(caption)
                );
            }
            Err(e) => self.note(&e.to_string()),
        }
    }

    /// The ranked findings, each with evidence, explanation and remedies.
    pub fn findings(&mut self, findings: &[Finding]) {
        self.section(&format!("Findings ({})", findings.len()));
        if findings.is_empty() {
            self.note("No findings.");
            return;
        }
        for f in findings {
            let class = severity_class(f.severity);
            // Context (info) stays one line until opened, so that what is wrong is seen
            // first on a page that opens with its findings.
            let (open, head, close, tail) = if f.severity == Severity::Info {
                ("details", "summary", "</summary>", "details")
            } else {
                ("div", "h3", "</h3>", "div")
            };
            let summary = if f.severity == Severity::Info {
                format!("<span class=\"line\">{}</span>", escape(&f.summary))
            } else {
                String::new()
            };
            self.body += &format!(
                "<{open} class=\"finding {class}\"><{head}><span class=\"badge {class}\">{}</span>\
                 {}{summary}{close}<p>{}</p>",
                escape(&f.severity.to_string().to_uppercase()),
                escape(&crate::findings::title(f)),
                escape(&f.summary)
            );
            if !f.evidence.is_empty() {
                self.body += "<div class=\"label\">Evidence</div><ul>";
                for e in &f.evidence {
                    self.body += &format!("<li>{}</li>", escape(&crate::findings::evidence(e)));
                }
                self.body += "</ul>";
            }
            self.body += &format!(
                "<div class=\"label\">Why</div><p>{}</p>",
                escape(&f.explanation)
            );
            if !f.remedies.is_empty() {
                self.body += "<div class=\"label\">What to do</div><ol>";
                for r in &f.remedies {
                    self.body += &format!("<li>{}", escape(&r.action));
                    if let Some(c) = &r.caution {
                        self.body +=
                            &format!(" <span class=\"caution\">(caution: {})</span>", escape(c));
                    }
                    self.body += "</li>";
                }
                self.body += "</ol>";
            }
            self.body += &format!("</{tail}>\n");
        }
    }

    /// A line at the bottom (what made the report, when).
    pub fn footer(&mut self, text: &str) {
        self.footer = text.to_string();
    }

    /// The whole document.
    pub fn finish(self) -> String {
        format!(
            "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
             <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\
             <title>{}</title><style>{CSS}</style></head>\n<body><main>\n{}<footer>{}</footer>\n\
             </main></body></html>\n",
            escape(&self.title),
            self.body,
            escape(&self.footer)
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::chart::{Axis, Rgb, Series, Style, Unit, Xy};
    use tcpdoctor_model::{Impact, Measured, Pathology, Source};

    #[test]
    fn a_page_is_self_contained_and_escaped() {
        let f = Finding::new(
            Pathology::DelayedAck,
            Source::Probe,
            "<script>alert(1)</script>",
            Impact::none(),
        );
        let r = Report::new(
            "probe",
            vec![f],
            (),
            Measured::Something("3 requests".into()),
        );
        let mut p = Page::new("tcpdoctor probe");
        p.header(&r, "crr to 127.0.0.1:80");
        let chart = Xy {
            title: "latency".into(),
            x: Axis::linear("time", Unit::Seconds),
            y: Axis::log("latency", Unit::Micros),
            series: vec![Series {
                name: "p50".into(),
                color: Rgb::BLUE,
                style: Style::Line,
                points: vec![(0.0, 100.0), (1.0, 120.0), (2.0, 1_000_000.0)],
            }],
        };
        p.chart(chart.draw(), "p50 per 100 ms");
        p.findings(&r.findings);
        let html = p.finish();
        assert!(html.starts_with("<!DOCTYPE html>"));
        assert!(html.contains("&lt;script&gt;"), "unescaped text");
        assert!(!html.contains("<script"), "a script in the page");
        for fetch in ["src=", "href=", "url(", "@import"] {
            assert!(!html.contains(fetch), "{fetch} in a self-contained page");
        }
        assert!(html.contains("<svg") && html.contains("</svg>"));
        // Tick labels, trailing zeros dropped ("1s", not "1.000s").
        let ticks: Vec<&str> = html
            .split("</text>")
            .filter_map(|t| t.rsplit('>').next())
            .map(str::trim)
            .collect();
        assert!(
            ticks.contains(&"1s") && ticks.contains(&"100ms"),
            "{ticks:?}"
        );
    }

    #[test]
    fn an_exposure_is_titled_as_a_risk_in_the_page_too() {
        let harm = Impact::stalls(0, None, Some(std::time::Duration::from_secs(3)));
        let risk = Finding::new(
            Pathology::SynRetransmit,
            Source::Check,
            "ladder",
            harm.exposure(),
        );
        let mut p = Page::new("t");
        p.findings(&[risk]);
        let html = p.finish();
        assert!(html.contains("Risk of SYN retransmissions"), "{html}");
    }
}
