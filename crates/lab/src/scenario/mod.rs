//! The scenarios: each builds its topology, measures the pathology with the lab's own traffic
//! code, hands the evidence (kernel counter deltas per namespace, per-connection timings,
//! optionally a capture) to tcpdoctor's detectors ([`crate::diagnose`]), and with `fix`
//! measures again after the remedy. Each returns a record; nothing here prints.

pub mod accept_overflow;
pub mod churn;
pub mod incast;
pub mod port_exhaustion;
pub mod slow_reader;
pub mod stale_ack;
pub mod syn_drop;
pub mod timewait;

use std::path::PathBuf;
use std::time::Duration;

use serde::Serialize;
use tcpdoctor_model::Finding;

use crate::capture::CaptureSummary;
use crate::remedy;
use crate::subnet::LabSubnet;
use crate::{Error, Result};

/// Options every scenario takes.
#[derive(Clone, Debug, Default)]
pub struct Common {
    pub subnet: LabSubnet,
    /// Save the scenario's traffic here (tcpdump inside the lab).
    pub pcap: Option<PathBuf>,
    /// Measure again after applying the remedy.
    pub fix: bool,
}

/// What a scenario returns: the findings tcpdoctor's detectors produced from the measurement
/// before the fix, the scenario's record, and whether Ctrl-C cut it short.
#[derive(Clone, Debug)]
pub struct Outcome<B> {
    pub findings: Vec<Finding>,
    pub body: B,
    pub interrupted: bool,
    /// With `fix`: the remedied run the verdict follows ([`crate::remedy::followed`]).
    pub remedied: Option<Remedied>,
}

/// The remedied run a `--fix` verdict and exit status follow, with its findings.
#[derive(Clone, Debug, PartialEq)]
pub struct Remedied {
    pub run: String,
    pub findings: Vec<Finding>,
}

/// The run the verdict follows among remedied runs (`checks[i]` judges `findings[i]`).
pub fn remedied(checks: &[remedy::Check], findings: &[&[Finding]]) -> Option<Remedied> {
    let i = remedy::followed(checks)?;
    Some(Remedied {
        run: checks[i].run.clone(),
        findings: findings.get(i).map(|f| f.to_vec()).unwrap_or_default(),
    })
}

/// Fields common to every scenario's JSON body.
#[derive(Clone, Debug, Serialize)]
pub struct Header {
    pub scenario: &'static str,
    /// Process id carried by every namespace name of this run (`tdoc-lab-<run_id>-...`).
    pub run_id: u32,
    pub subnet: String,
    pub namespaces: Vec<String>,
    pub capture: Option<CaptureSummary>,
    /// Which detectors produced the findings.
    pub diagnosed_by: Vec<String>,
}

/// `--remedies`: the baseline and each selected remedy, measured in fresh namespaces, each
/// remedy predicted by tcpdoctor's arithmetic and judged from its measurement.
#[derive(Clone, Debug, Serialize)]
pub struct RemedyReport<C, R> {
    #[serde(flatten)]
    pub header: Header,
    pub config: C,
    /// What the baseline is, in words.
    pub baseline_label: String,
    pub baseline: R,
    /// The harm the remedies are judged on, as the baseline measured it.
    pub baseline_harm: remedy::Harm,
    /// The baseline's findings (also in `baseline`); the report's own findings follow the
    /// remedy the verdict follows.
    #[serde(skip)]
    pub baseline_findings: Vec<Finding>,
    pub remedies: Vec<remedy::Row<R>>,
    /// Measured facts the predictions rest on (kernel behaviour, what this kernel lacks).
    pub notes: Vec<String>,
    /// What the SYN ladder cost the baseline (connection scenarios).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub syn_ladder: Option<churn::LadderCost>,
}

impl<C, R> RemedyReport<C, R> {
    /// The remedied run the verdict follows, with its findings (`findings` of a run).
    pub fn remedied(&self, findings: impl Fn(&R) -> Vec<Finding>) -> Option<Remedied> {
        let i = remedy::followed_row(&self.remedies)?;
        let row = &self.remedies[i];
        Some(Remedied {
            run: row.remedy.clone(),
            findings: row.run.as_ref().map(findings).unwrap_or_default(),
        })
    }
}

/// Parses `200ms`, `5ms`, `1s`, `500us` (the units `ip route ... rto_min` accepts).
pub fn parse_duration(what: &str, s: &str) -> Result<Duration> {
    let s = s.trim();
    let bad = || {
        Error::invalid(
            format!("{what} '{s}'"),
            "expected a duration like 200ms, 5ms, 1s or 500us",
        )
    };
    let split = s.find(|c: char| !c.is_ascii_digit()).ok_or_else(bad)?;
    let (num, unit) = s.split_at(split);
    let n: u64 = num.parse().map_err(|_| bad())?;
    let d = match unit {
        "us" => Duration::from_micros(n),
        "ms" => Duration::from_millis(n),
        "s" => Duration::from_secs(n),
        _ => return Err(bad()),
    };
    Ok(d)
}

/// Parses a byte size: `16kb`, `32KB`, `1mb`, `1500` (powers of 1024, as tc reads `kb`).
pub fn parse_bytes(what: &str, s: &str) -> Result<u64> {
    let t = s.trim().to_ascii_lowercase();
    let bad = || {
        Error::invalid(
            format!("{what} '{s}'"),
            "expected a size like 1500, 16kb or 1mb",
        )
    };
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let n: u64 = num.parse().map_err(|_| bad())?;
    let mult = match unit {
        "" | "b" => 1,
        "k" | "kb" | "kib" => 1024,
        "m" | "mb" | "mib" => 1024 * 1024,
        _ => return Err(bad()),
    };
    n.checked_mul(mult).filter(|v| *v > 0).ok_or_else(bad)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_and_sizes() {
        assert_eq!(
            parse_duration("x", "200ms").unwrap(),
            Duration::from_millis(200)
        );
        assert_eq!(
            parse_duration("x", "5ms").unwrap(),
            Duration::from_millis(5)
        );
        assert_eq!(parse_duration("x", "2s").unwrap(), Duration::from_secs(2));
        assert!(parse_duration("--rto-min", "5")
            .unwrap_err()
            .to_string()
            .contains("--rto-min '5'"));
        assert!(parse_duration("x", "5h").is_err());
        assert_eq!(parse_bytes("x", "16kb").unwrap(), 16384);
        assert_eq!(parse_bytes("x", "1500").unwrap(), 1500);
        assert!(parse_bytes("x", "0").is_err());
        assert!(parse_bytes("x", "3gb").is_err());
    }
}
