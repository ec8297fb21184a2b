//! The JSON object printed on standard output when a command fails and `--json` was asked for,
//! so that a script reading stdout always gets one JSON document:
//!
//! ```json
//! {"schema_version":1,"command":"analyze","verdict":"error",
//!  "error":{"kind":"os","message":"trace.pcap: cannot open: No such file or directory","errno":2}}
//! ```
//!
//! `command` is null when the command line did not name one. The exit status is 2.

use serde::Serialize;
use tcpdoctor_model::SCHEMA_VERSION;

/// What kind of failure it was.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ErrorKind {
    /// The command line was refused (unknown flag, invalid or missing value).
    Usage,
    /// A system call failed; `errno` says which error.
    Os,
    /// Anything else: unreadable input, a refused combination found at run time, a failed
    /// measurement.
    Failed,
}

/// The error itself.
#[derive(Clone, Debug, Serialize)]
pub struct ErrorBody {
    pub kind: ErrorKind,
    /// The same one line as on standard error, without the `tcpdoctor: error: ` prefix.
    pub message: String,
    /// The operating system's error number (`ENOENT` = 2, ...), when `kind` is `os`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub errno: Option<i32>,
}

/// The whole document.
#[derive(Clone, Debug, Serialize)]
pub struct ErrorReport {
    pub schema_version: u32,
    pub command: Option<String>,
    /// Always `"error"`: the verdicts of a completed run are healthy, findings, inconclusive.
    pub verdict: &'static str,
    pub error: ErrorBody,
}

impl ErrorReport {
    pub fn new(command: Option<&str>, kind: ErrorKind, message: &str, errno: Option<i32>) -> Self {
        ErrorReport {
            schema_version: SCHEMA_VERSION,
            command: command.map(str::to_string),
            verdict: "error",
            error: ErrorBody {
                kind,
                message: message.to_string(),
                errno,
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shape() {
        let r = ErrorReport::new(Some("analyze"), ErrorKind::Os, "x: cannot open", Some(2));
        let v = serde_json::to_value(&r).unwrap();
        assert_eq!(v["verdict"], "error");
        assert_eq!(v["command"], "analyze");
        assert_eq!(v["error"]["kind"], "os");
        assert_eq!(v["error"]["errno"], 2);
        let r = ErrorReport::new(None, ErrorKind::Usage, "bad", None);
        let v = serde_json::to_value(&r).unwrap();
        assert!(v["command"].is_null() && v["error"].get("errno").is_none());
    }
}
