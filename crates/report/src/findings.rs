//! The ranked findings block that ends every command's human output.

use std::io::{self, Write};

use tcpdoctor_model::{Evidence, Finding, Report, Severity, Verdict};

use crate::style::{self, Layout};
use crate::wrap;

/// Writes findings in the order given (their rank, `model::finding::rank`: causes first, then
/// the most damaging), each with evidence, explanation and remedies, wrapped to the
/// process-wide [`style::current`] layout.
pub fn write<W: Write + ?Sized>(w: &mut W, findings: &[Finding]) -> io::Result<()> {
    write_with(w, findings, &style::current())
}

/// A finding's title as every printer shows it ([`Finding::title`]): harm seen under the
/// pathology's title, an exposure as a risk ("Risk of ephemeral port exhaustion"), a budget
/// or a timer as that fact ("Port budget").
pub fn title(f: &Finding) -> String {
    f.title()
}

/// What a repeating report (`sockets --watch`) has already explained: each finding's title
/// with the sample that first printed its explanation and remedies.
#[derive(Debug, Default)]
pub struct Explained {
    first: std::collections::BTreeMap<String, u64>,
}

/// [`write`] for sample `sample` of a repeating report: a finding whose title an earlier
/// sample explained prints its headline and evidence (what changed) and points to that
/// sample for its explanation and remedies, instead of printing them again.
pub fn write_repeating<W: Write + ?Sized>(
    w: &mut W,
    findings: &[Finding],
    explained: &mut Explained,
    sample: u64,
) -> io::Result<()> {
    write_inner(w, findings, &style::current(), Some((explained, sample)))
}

/// [`write`] with an explicit layout. Continuation lines hang under the text they continue.
pub fn write_with<W: Write + ?Sized>(
    w: &mut W,
    findings: &[Finding],
    layout: &Layout,
) -> io::Result<()> {
    write_inner(w, findings, layout, None)
}

fn write_inner<W: Write + ?Sized>(
    w: &mut W,
    findings: &[Finding],
    layout: &Layout,
    mut repeating: Option<(&mut Explained, u64)>,
) -> io::Result<()> {
    if findings.is_empty() {
        writeln!(w, "No findings.")?;
        return Ok(());
    }
    let width = layout.prose_width();
    writeln!(w, "Findings ({}), causes first:", findings.len())?;
    for (i, f) in findings.iter().enumerate() {
        writeln!(w)?;
        let tag = layout.paint(style::severity(f.severity), tag(f.severity));
        let number = format!("{}. ", i + 1);
        let hang = " ".repeat(number.len());
        let head = format!("[{tag}] {}: {}", title(f), f.summary);
        writeln!(w, "{}", wrap::fill(&head, width, &number, &hang))?;
        for e in &f.evidence {
            let line = evidence(e);
            writeln!(w, "{}", labelled("evidence:", &line, width))?;
        }
        if let Some((explained, sample)) = repeating.as_mut() {
            let first = *explained.first.entry(title(f)).or_insert(*sample);
            if first != *sample {
                let line = format!("as in sample {first} (--json carries them in every sample)");
                writeln!(w, "{}", labelled("why, what to do:", &line, width))?;
                continue;
            }
        }
        writeln!(w, "{}", labelled("why:", &f.explanation, width))?;
        for (j, r) in f.remedies.iter().enumerate() {
            let text = match &r.caution {
                Some(c) => format!("{}. {} (caution: {c})", j + 1, r.action),
                None => format!("{}. {}", j + 1, r.action),
            };
            let label = if j == 0 { "what to do:" } else { "" };
            let first = format!("     {label:<11} ");
            let rest = " ".repeat(first.len() + format!("{}. ", j + 1).len());
            writeln!(w, "{}", wrap::fill(&text, width, &first, &rest))?;
        }
    }
    Ok(())
}

fn tag(s: Severity) -> &'static str {
    match s {
        Severity::Critical => "CRITICAL",
        Severity::Warning => "WARNING",
        Severity::Info => "info",
    }
}

/// `     label text...` with the text's continuation lines aligned under its first word.
fn labelled(label: &str, text: &str, width: usize) -> String {
    let first = format!("     {label} ");
    let rest = " ".repeat(first.len());
    wrap::fill(text, width, &first, &rest)
}

/// One evidence item on one line.
pub fn evidence(e: &Evidence) -> String {
    match e {
        Evidence::Counter { name, delta } => format!("counter {name} {delta:+}"),
        Evidence::Setting { name, value } => format!("{name} = {value}"),
        Evidence::Sockets {
            state,
            count,
            local,
            remote,
            detail,
        } => {
            let mut s = format!("{count} socket(s) in {state}");
            if let Some(l) = local {
                s += &format!(" local {l}");
            }
            if let Some(r) = remote {
                s += &format!(" remote {r}");
            }
            if let Some(d) = detail {
                s += &format!(" ({d})");
            }
            s
        }
        Evidence::Timing {
            what,
            count,
            value_us,
        } => {
            // The value first, then how many it was taken over: "N x ~V" read as N times
            // V when V was the longest of N.
            format!("{what}: ~{} ({count} seen)", crate::fmt::micros(*value_us))
        }
        Evidence::Packets {
            flow,
            frames,
            description,
        } => {
            let shown: Vec<String> = frames.iter().take(12).map(u64::to_string).collect();
            let more = if frames.len() > 12 {
                format!(" (+{} more)", frames.len() - 12)
            } else {
                String::new()
            };
            format!("{flow}: {description}; frames {}{more}", shown.join(", "))
        }
        Evidence::Arithmetic { formula, result } => {
            format!("{formula} = {}", crate::fmt::count(*result))
        }
        Evidence::Examples { what, items } => {
            let shown: Vec<&str> = items.iter().take(10).map(String::as_str).collect();
            format!("{what}: {}", shown.join(", "))
        }
    }
}

/// The closing one-line verdict, the verdict word coloured when colour is on.
pub fn verdict<W: Write + ?Sized, B>(w: &mut W, report: &Report<B>) -> io::Result<()> {
    let layout = style::current();
    let interrupted = if report.interrupted {
        " (interrupted: partial results)"
    } else {
        ""
    };
    let word = |s: &str| layout.paint(style::verdict(report.verdict), s);
    let line = match report.verdict {
        Verdict::Healthy => format!("Verdict: {} ({})", word("healthy"), report.verdict_reason),
        Verdict::Inconclusive => format!(
            "Verdict: {} ({})",
            word("inconclusive"),
            report.verdict_reason
        ),
        Verdict::Findings => {
            // The findings that make the verdict: those above info, as a findings block
            // that leaves the informational ones to a list of their own counts them. The
            // worst is the most severe, then the most harmful (a cause ranks before its
            // symptoms, and may be the less severe or the less harmful).
            let Some(top) = tcpdoctor_model::finding::worst(&report.findings) else {
                let line = format!("Verdict: {} ({})", word("findings"), report.verdict_reason);
                return writeln!(w, "{}", wrap::fill(&line, layout.prose_width(), "", "  "));
            };
            let critical = report
                .findings
                .iter()
                .filter(|f| f.severity == Severity::Critical)
                .count();
            let warning = report
                .findings
                .iter()
                .filter(|f| f.severity == Severity::Warning)
                .count();
            format!(
                "Verdict: {} ({critical} critical, {warning} warning); worst: {} ({}){interrupted}",
                word(&format!("{} finding(s) above info", critical + warning)),
                top.pathology,
                top.severity
            )
        }
    };
    writeln!(w, "{}", wrap::fill(&line, layout.prose_width(), "", "  "))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;
    use tcpdoctor_model::{Impact, Pathology, Source};

    fn finding() -> Finding {
        Finding::new(
            Pathology::SynRetransmit,
            Source::Probe,
            "3 connects waited 1 s for a retransmitted SYN, on ports 40001 40002 40003",
            Impact::stalls(3, Some(100), Some(Duration::from_secs(1))),
        )
        .counter("TcpExtTCPSynRetrans", 3)
    }

    #[test]
    fn renders_evidence_and_remedies() {
        let mut out = Vec::new();
        write_with(&mut out, &[finding()], &Layout::default()).unwrap();
        let s = String::from_utf8(out).unwrap();
        assert!(
            s.contains("SYN retransmitted: 3 connects waited 1 s"),
            "{s}"
        );
        assert!(s.contains("counter TcpExtTCPSynRetrans +3"), "{s}");
        assert!(s.contains("what to do: 1."), "{s}");
    }

    /// A timing is the value, then how many it was taken over: the longest of 1,490 idle
    /// gaps printed as "1490 x ~2.468s" read as 1,490 gaps of 2.468 s (bench/analyze's
    /// capture, whose gaps were mostly 200 ms).
    #[test]
    fn a_timing_names_its_value_before_how_many_it_was_taken_over() {
        let e = Evidence::Timing {
            what: "longest idle gap before a retransmission".into(),
            count: 1490,
            value_us: 2_468_000,
        };
        assert_eq!(
            evidence(&e),
            "longest idle gap before a retransmission: ~2.468s (1490 seen)"
        );
    }

    #[test]
    fn an_exposure_is_titled_as_a_risk_not_as_harm_seen() {
        let mut f = finding();
        f.impact = f.impact.clone().exposure();
        let mut out = Vec::new();
        write_with(&mut out, &[f], &Layout::default()).unwrap();
        let s = String::from_utf8(out).unwrap();
        assert!(s.contains("Risk of SYN retransmissions: "), "{s}");
        let mut out = Vec::new();
        write_with(&mut out, &[finding()], &Layout::default()).unwrap();
        assert!(!String::from_utf8(out).unwrap().contains("Risk of"));
    }

    #[test]
    fn the_verdict_counts_the_findings_above_info_as_the_findings_block_does() {
        // Issue 21, defect 8: doctor printed "Findings (3)" (those above info) and then
        // "Verdict: 6 finding(s)" (every finding, the informational ones included).
        let info =
            |s: &str| Finding::new(Pathology::PortExhaustion, Source::Check, s, Impact::none());
        let r = Report::new(
            "doctor",
            vec![finding(), info("budget"), info("reuse")],
            (),
            tcpdoctor_model::Measured::Something("x".into()),
        );
        let mut out = Vec::new();
        verdict(&mut out, &r).unwrap();
        let s = String::from_utf8(out).unwrap().replace("\n  ", " ");
        assert!(
            s.starts_with("Verdict: 1 finding(s) above info (1 critical, 0 warning); worst: syn_retransmit (critical)"),
            "{s}"
        );
        // A cause ranks before its symptom and may be the less severe: the worst named is
        // the most severe.
        let cause = Finding::new(
            Pathology::StaleAckRace,
            Source::Probe,
            "cause",
            Impact::stalls(2, Some(100), None),
        );
        let r = Report::new(
            "doctor",
            vec![finding(), cause],
            (),
            tcpdoctor_model::Measured::Something("x".into()),
        );
        assert_eq!(r.findings[0].pathology, Pathology::StaleAckRace);
        let mut out = Vec::new();
        verdict(&mut out, &r).unwrap();
        let s = String::from_utf8(out).unwrap().replace("\n  ", " ");
        assert!(
            s.contains("(1 critical, 1 warning); worst: syn_retransmit (critical)"),
            "{s}"
        );
    }

    #[test]
    fn a_budget_is_titled_as_a_budget_not_as_ports_exhausted() {
        // Issue 21, defect 7: the port budget of a stock host is a fact, nothing hurt.
        let budget = Finding::new(
            Pathology::PortExhaustion,
            Source::Check,
            "471 new connections/s per destination ip:port",
            Impact::none(),
        );
        let mut out = Vec::new();
        write_with(&mut out, &[budget], &Layout::default()).unwrap();
        let s = String::from_utf8(out).unwrap();
        assert!(
            s.contains("[info] Port budget: 471 new connections/s per destination"),
            "{s}"
        );
        assert!(!s.contains("exhausted"), "{s}");
    }

    #[test]
    fn findings_fit_the_width_with_aligned_continuations() {
        for width in [40, 80] {
            let layout = Layout {
                width,
                color: false,
                ..Layout::default()
            };
            let mut out = Vec::new();
            write_with(&mut out, &[finding()], &layout).unwrap();
            let s = String::from_utf8(out).unwrap();
            for l in s.lines() {
                assert!(wrap::width(l) <= width, "{width}: {l:?}\n{s}");
                assert_eq!(l, l.trim_end(), "trailing space: {l:?}");
            }
            // The explanation continues under its first word, after "why: ".
            let why = s.lines().position(|l| l.starts_with("     why: ")).unwrap();
            let next = s.lines().nth(why + 1).unwrap();
            assert!(
                next.starts_with("          ") && !next.starts_with("           "),
                "{s}"
            );
        }
    }

    #[test]
    fn severity_is_coloured_only_when_asked() {
        let mut plain = Vec::new();
        write_with(&mut plain, &[finding()], &Layout::default()).unwrap();
        assert!(!String::from_utf8(plain).unwrap().contains('\u{1b}'));
        let mut coloured = Vec::new();
        let layout = Layout {
            width: 80,
            color: true,
            ..Layout::default()
        };
        write_with(&mut coloured, &[finding()], &layout).unwrap();
        let s = String::from_utf8(coloured).unwrap();
        assert!(
            s.contains("\u{1b}[1m\u{1b}[31mCRITICAL") || s.contains("\u{1b}[1m\u{1b}[33mWARNING"),
            "{s:?}"
        );
    }
}
