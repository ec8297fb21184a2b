//! The ranked findings block that ends every command's human output.

use std::io::{self, Write};

use tcpdoctor_model::{Evidence, Finding, Report, Severity, Verdict};

/// Writes findings most damaging first, each with evidence, explanation and remedies.
pub fn write<W: Write + ?Sized>(w: &mut W, findings: &[Finding]) -> io::Result<()> {
    if findings.is_empty() {
        writeln!(w, "No findings.")?;
        return Ok(());
    }
    writeln!(w, "Findings ({}), most damaging first:", findings.len())?;
    for (i, f) in findings.iter().enumerate() {
        writeln!(w)?;
        let tag = match f.severity {
            Severity::Critical => "CRITICAL",
            Severity::Warning => "WARNING",
            Severity::Info => "info",
        };
        writeln!(
            w,
            "{}. [{tag}] {}: {}",
            i + 1,
            f.pathology.entry().title,
            f.summary
        )?;
        for e in &f.evidence {
            writeln!(w, "     evidence: {}", evidence(e))?;
        }
        writeln!(w, "     why: {}", f.explanation)?;
        for (j, r) in f.remedies.iter().enumerate() {
            let lead = if j == 0 { "what to do:" } else { "           " };
            match &r.caution {
                Some(c) => writeln!(w, "     {lead} {}. {} (caution: {c})", j + 1, r.action)?,
                None => writeln!(w, "     {lead} {}. {}", j + 1, r.action)?,
            }
        }
    }
    Ok(())
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
        } => format!("{what}: {count} x ~{}", crate::fmt::micros(*value_us)),
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

/// The closing one-line verdict.
pub fn verdict<W: Write + ?Sized, B>(w: &mut W, report: &Report<B>) -> io::Result<()> {
    let worst = report.findings.iter().map(|f| f.severity).max();
    let interrupted = if report.interrupted {
        " (interrupted: partial results)"
    } else {
        ""
    };
    match (report.verdict, worst) {
        (Verdict::Healthy, _) => writeln!(w, "Verdict: healthy ({})", report.verdict_reason),
        (Verdict::Inconclusive, _) => {
            writeln!(w, "Verdict: inconclusive ({})", report.verdict_reason)
        }
        (Verdict::Findings, _) => {
            let top = &report.findings[0];
            writeln!(
                w,
                "Verdict: {} finding(s); worst: {} ({}){interrupted}",
                report.findings.len(),
                top.pathology,
                top.severity
            )
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tcpdoctor_model::{Pathology, Source};

    #[test]
    fn renders_evidence_and_remedies() {
        let f = Finding::legacy(
            Pathology::SynRetransmit,
            Severity::Warning,
            Source::Probe,
            "3 connects waited 1 s",
        )
        .counter("TcpExtTCPSynRetrans", 3);
        let mut out = Vec::new();
        write(&mut out, &[f]).unwrap();
        let s = String::from_utf8(out).unwrap();
        assert!(
            s.contains("[WARNING] SYN retransmitted: 3 connects waited 1 s"),
            "{s}"
        );
        assert!(s.contains("counter TcpExtTCPSynRetrans +3"), "{s}");
        assert!(s.contains("what to do: 1."), "{s}");
    }
}
