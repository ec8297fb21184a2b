//! [`Report`]: the envelope every command prints with `--json`.
//!
//! ```json
//! {"schema_version":1,"command":"probe","verdict":"findings","verdict_reason":"...",
//!  "interrupted":false, "findings":[...], "<command-specific fields>": ...}
//! ```
//!
//! The binary stamps every printed document with its [`Provenance`] (when, on which host and
//! kernel, by which build), through [`Stamped`]; the model itself has no clock.
//!
//! The verdict is derived here, once, for every command: `healthy` only when something was
//! measured, the run was not cut short, and no finding is above info; `findings` when any
//! finding is a warning or worse (cut short or not); otherwise `inconclusive`.

use serde::{Deserialize, Serialize};

use crate::finding::{rank, Finding, Severity};

/// Bumped when a field changes meaning or disappears. Adding fields does not bump it.
pub const SCHEMA_VERSION: u32 = 1;

/// The one-word outcome of a command.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// Something was measured, the run completed, and no finding is above info. Exit code 0.
    Healthy,
    /// At least one warning or critical finding. Exit code 1.
    Findings,
    /// Nothing was measured, or the run was cut short before finding anything: no claim
    /// either way. Exit code 3.
    Inconclusive,
}

impl Verdict {
    pub fn exit_code(self) -> i32 {
        match self {
            Verdict::Healthy => 0,
            Verdict::Findings => 1,
            Verdict::Inconclusive => 3,
        }
    }
}

/// Whether a command measured anything it could judge. Every command states it, so that a
/// run that saw nothing is never called healthy.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Measured {
    /// What was measured, in a few words (`"1,204 connects"`, `"38,112 TCP segments"`).
    Something(String),
    /// Why nothing could be judged (`"the capture holds no TCP segment"`).
    Nothing(String),
}

impl Default for Measured {
    fn default() -> Measured {
        Measured::Nothing("not recorded".into())
    }
}

/// Findings plus a command-specific body `B`, flattened beside them in JSON.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Report<B> {
    pub schema_version: u32,
    /// The subcommand that produced it (`probe`, `analyze`, ...).
    pub command: String,
    pub verdict: Verdict,
    /// Why the verdict is what it is, in one line.
    pub verdict_reason: String,
    /// True when the run was cut short (Ctrl-C, error): the body holds what was measured.
    pub interrupted: bool,
    /// Most damaging first.
    pub findings: Vec<Finding>,
    #[serde(flatten)]
    pub body: B,
    /// What was measured; with `interrupted` and the findings it decides the verdict.
    #[serde(skip)]
    measured: Measured,
}

impl<B> Report<B> {
    /// Ranks the findings and derives the verdict from them and from what was measured.
    pub fn new(
        command: &str,
        mut findings: Vec<Finding>,
        body: B,
        measured: Measured,
    ) -> Report<B> {
        rank(&mut findings);
        let mut r = Report {
            schema_version: SCHEMA_VERSION,
            command: command.to_string(),
            verdict: Verdict::Inconclusive,
            verdict_reason: String::new(),
            interrupted: false,
            findings,
            body,
            measured,
        };
        r.derive();
        r
    }

    /// Marks the run as cut short (Ctrl-C, an error mid-run); it can no longer be healthy.
    pub fn interrupted(mut self, interrupted: bool) -> Report<B> {
        self.interrupted = interrupted;
        self.derive();
        self
    }

    fn derive(&mut self) {
        let serious = self
            .findings
            .iter()
            .filter(|f| f.severity >= Severity::Warning)
            .count();
        let cut = if self.interrupted { " (cut short)" } else { "" };
        (self.verdict, self.verdict_reason) = if serious > 0 {
            let critical = self
                .findings
                .iter()
                .filter(|f| f.severity == Severity::Critical)
                .count();
            (
                Verdict::Findings,
                format!(
                    "{critical} critical and {} warning finding(s){cut}",
                    serious - critical
                ),
            )
        } else {
            match (&self.measured, self.interrupted) {
                (Measured::Nothing(why), _) => {
                    (Verdict::Inconclusive, format!("nothing measured: {why}"))
                }
                (Measured::Something(what), true) => (
                    Verdict::Inconclusive,
                    format!("cut short after {what}, with nothing above info found so far"),
                ),
                (Measured::Something(what), false) => (
                    Verdict::Healthy,
                    format!("{what} measured, nothing above info found"),
                ),
            }
        };
    }
}

/// Where, when and by which build a document was printed. Filled by the binary at the moment
/// it prints (this crate reads no clock and no host); flattened beside the report's fields.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Provenance {
    /// When the document was printed: RFC 3339, UTC, millisecond precision
    /// (`2025-03-01T12:00:00.123Z`). Each `--watch` line carries its own.
    pub generated_at: String,
    /// The host name (`uname -n`), of the host even when a network namespace was examined.
    pub host_name: String,
    /// The running kernel's release (`uname -r`).
    pub kernel_release: String,
    /// tcpdoctor's version (`0.1.0`).
    pub tcpdoctor_version: String,
    /// The git commit tcpdoctor was built from (12 hex digits), `unknown` outside a checkout.
    pub tcpdoctor_commit: String,
}

/// A report as printed: its fields, then its [`Provenance`].
#[derive(Debug, Serialize)]
pub struct Stamped<'a, B> {
    #[serde(flatten)]
    pub report: &'a Report<B>,
    #[serde(flatten)]
    pub provenance: &'a Provenance,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Impact, Pathology, Source};

    #[derive(Serialize)]
    struct Body {
        connections: u64,
    }

    fn something() -> Measured {
        Measured::Something("3 connections".into())
    }

    #[test]
    fn verdict_follows_severity_and_body_is_flattened() {
        let info = Finding::new(Pathology::DelayedAck, Source::Probe, "x", Impact::none());
        let r = Report::new(
            "probe",
            vec![info.clone()],
            Body { connections: 3 },
            something(),
        );
        assert_eq!(r.verdict, Verdict::Healthy);
        let warn = Finding::new(
            Pathology::Incast,
            Source::Probe,
            "y",
            Impact::stalls(1, None, Some(std::time::Duration::from_millis(200))),
        );
        let r = Report::new(
            "probe",
            vec![info, warn],
            Body { connections: 3 },
            something(),
        );
        assert_eq!(r.verdict.exit_code(), 1);
        let v = serde_json::to_value(&r).unwrap();
        assert_eq!(v["schema_version"], 1);
        assert_eq!(v["connections"], 3);
        assert_eq!(v["findings"][0]["pathology"], "incast");
        assert_eq!(v["verdict_reason"], "0 critical and 1 warning finding(s)");
        assert!(v.get("measured").is_none());
    }

    #[test]
    fn stamped_report_carries_provenance_beside_its_fields() {
        let r = Report::new("check", vec![], Body { connections: 2 }, something());
        let p = Provenance {
            generated_at: "2025-03-01T12:00:00.123Z".into(),
            host_name: "web-1".into(),
            kernel_release: "6.18.0".into(),
            tcpdoctor_version: "0.1.0".into(),
            tcpdoctor_commit: "0123456789ab".into(),
        };
        let v = serde_json::to_value(Stamped {
            report: &r,
            provenance: &p,
        })
        .unwrap();
        assert_eq!(v["command"], "check");
        assert_eq!(v["connections"], 2);
        assert_eq!(v["generated_at"], "2025-03-01T12:00:00.123Z");
        assert_eq!(v["host_name"], "web-1");
        assert_eq!(v["kernel_release"], "6.18.0");
        assert_eq!(v["tcpdoctor_version"], "0.1.0");
        assert_eq!(v["tcpdoctor_commit"], "0123456789ab");
        let back: Provenance = serde_json::from_value(v).unwrap();
        assert_eq!(back, p);
    }

    #[test]
    fn nothing_measured_is_never_healthy() {
        let r = Report::new(
            "analyze",
            vec![],
            Body { connections: 0 },
            Measured::Nothing("the capture holds no TCP segment".into()),
        );
        assert_eq!(r.verdict, Verdict::Inconclusive);
        assert_eq!(r.verdict.exit_code(), 3);
        assert!(r.verdict_reason.contains("no TCP segment"));
    }

    #[test]
    fn an_interrupted_run_is_never_healthy() {
        let r =
            Report::new("doctor", vec![], Body { connections: 1 }, something()).interrupted(true);
        assert_eq!(r.verdict, Verdict::Inconclusive);
        assert!(
            r.verdict_reason.contains("cut short"),
            "{}",
            r.verdict_reason
        );
        let r = r.interrupted(false);
        assert_eq!(r.verdict, Verdict::Healthy);
    }
}
