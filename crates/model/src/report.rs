//! [`Report`]: the envelope every command prints with `--json`.
//!
//! ```json
//! {"schema_version":1,"command":"probe","verdict":"findings","interrupted":false,
//!  "findings":[...], "<command-specific fields>": ...}
//! ```

use serde::{Deserialize, Serialize};

use crate::finding::{rank, Finding, Severity};

/// Bumped when a field changes meaning or disappears. Adding fields does not bump it.
pub const SCHEMA_VERSION: u32 = 1;

/// The one-word outcome of a command.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// No finding of severity warning or above. Exit code 0.
    Healthy,
    /// At least one warning or critical finding. Exit code 1.
    Findings,
}

impl Verdict {
    pub fn exit_code(self) -> i32 {
        match self {
            Verdict::Healthy => 0,
            Verdict::Findings => 1,
        }
    }
}

/// Findings plus a command-specific body `B`, flattened beside them in JSON.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Report<B> {
    pub schema_version: u32,
    /// The subcommand that produced it (`probe`, `analyze`, ...).
    pub command: String,
    pub verdict: Verdict,
    /// True when the run was cut short (Ctrl-C, error): the body holds what was measured.
    pub interrupted: bool,
    /// Most damaging first.
    pub findings: Vec<Finding>,
    #[serde(flatten)]
    pub body: B,
}

impl<B> Report<B> {
    /// Ranks the findings and derives the verdict from them.
    pub fn new(command: &str, mut findings: Vec<Finding>, body: B) -> Report<B> {
        rank(&mut findings);
        let verdict = if findings.iter().any(|f| f.severity >= Severity::Warning) {
            Verdict::Findings
        } else {
            Verdict::Healthy
        };
        Report {
            schema_version: SCHEMA_VERSION,
            command: command.to_string(),
            verdict,
            interrupted: false,
            findings,
            body,
        }
    }

    pub fn interrupted(mut self, interrupted: bool) -> Report<B> {
        self.interrupted = interrupted;
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Pathology, Source};

    #[derive(Serialize)]
    struct Body {
        connections: u64,
    }

    #[test]
    fn verdict_follows_severity_and_body_is_flattened() {
        let info = Finding::new(Pathology::DelayedAck, Severity::Info, Source::Probe, "x");
        let r = Report::new("probe", vec![info.clone()], Body { connections: 3 });
        assert_eq!(r.verdict, Verdict::Healthy);
        let warn = Finding::new(Pathology::Incast, Severity::Warning, Source::Probe, "y");
        let r = Report::new("probe", vec![info, warn], Body { connections: 3 });
        assert_eq!(r.verdict.exit_code(), 1);
        let v = serde_json::to_value(&r).unwrap();
        assert_eq!(v["schema_version"], 1);
        assert_eq!(v["connections"], 3);
        assert_eq!(v["findings"][0]["pathology"], "incast");
    }
}
