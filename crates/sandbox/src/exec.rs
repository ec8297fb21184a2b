//! Running the external commands that build the lab (`ip`, `tc`, `nft`, `ethtool`, `sysctl`).
//! Every failure becomes an [`Error::Command`] that names the step and the full command line.

use std::io::Write;
use std::process::{Command, Stdio};

use crate::{Error, Result};

/// Runs `program args...` for `step`; returns its stdout. A non-zero exit is an error naming
/// the step, the command and the command's stderr.
pub fn run(step: &str, program: &str, args: &[&str]) -> Result<String> {
    run_with_input(step, program, args, None)
}

/// Like [`run`], feeding `input` on stdin (used for `nft -f -`).
pub fn run_with_input(
    step: &str,
    program: &str,
    args: &[&str],
    input: Option<&str>,
) -> Result<String> {
    let command = command_line(program, args);
    let fail = |detail: String| Error::Command {
        step: step.to_string(),
        command: command.clone(),
        detail,
    };
    let mut child = Command::new(program)
        .args(args)
        .stdin(if input.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| fail(format!("cannot start {program}: {e}")))?;
    if let (Some(text), Some(mut stdin)) = (input, child.stdin.take()) {
        stdin
            .write_all(text.as_bytes())
            .map_err(|e| fail(format!("cannot write its input: {e}")))?;
    }
    let out = child
        .wait_with_output()
        .map_err(|e| fail(format!("cannot wait for it: {e}")))?;
    if out.status.success() {
        return Ok(String::from_utf8_lossy(&out.stdout).into_owned());
    }
    let stderr = String::from_utf8_lossy(&out.stderr);
    let first = stderr
        .lines()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .unwrap_or("no message");
    Err(fail(format!("{} ({first})", out.status)))
}

/// Runs a command inside network namespace `ns` (`ip netns exec NS program args...`).
pub fn run_in(step: &str, ns: &str, program: &str, args: &[&str]) -> Result<String> {
    let mut full = vec!["netns", "exec", ns, program];
    full.extend_from_slice(args);
    run(step, "ip", &full)
}

/// Like [`run`] but ignores failure: for best-effort teardown steps.
pub fn try_run(program: &str, args: &[&str]) -> Option<String> {
    let out = Command::new(program)
        .args(args)
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .output()
        .ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).into_owned())
}

fn command_line(program: &str, args: &[&str]) -> String {
    let mut s = program.to_string();
    for a in args {
        s.push(' ');
        s.push_str(a);
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failure_names_step_command_and_stderr() {
        let e = run("create namespace", "sh", &["-c", "echo boom >&2; exit 3"])
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("create namespace: `sh -c"), "{e}");
        assert!(e.contains("boom"), "{e}");
        let e = run("x", "/nonexistent/tdoc-prog", &[])
            .unwrap_err()
            .to_string();
        assert!(e.contains("cannot start"), "{e}");
        assert_eq!(run("y", "sh", &["-c", "echo hi"]).unwrap(), "hi\n");
        assert_eq!(run_with_input("z", "cat", &[], Some("abc")).unwrap(), "abc");
    }
}
