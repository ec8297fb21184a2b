//! Saving a scenario's traffic: `tcpdump` started inside a lab namespace, writing a pcap that
//! `tcpdoctor analyze` and Wireshark read. The capture is stopped with SIGINT (so tcpdump
//! flushes and reports its drop count) when the scenario ends, and killed by the lab's teardown
//! if anything goes wrong.
//!
//! tcpdump always writes a file named like the run's namespaces,
//! `$TMPDIR/tdoc-lab-<pid>-<name>.pcap` ([`naming::temp_file`]), and the file is moved to the
//! path the user asked for (`--pcap`) only once the capture has stopped. So every tcpdump the
//! lab starts names its run on its command line, and a run killed with SIGKILL leaves only
//! objects `tcpdoctor lab cleanup` can find by the prefix: the file, and a tcpdump re-parented
//! to init that still writes it ([`crate::cleanup`]).
//!
//! The lab reads a saved capture back with `tcpdoctor analyze`'s own detectors
//! (`tcpdoctor_lab::scenario::harness::analyze_capture`).

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::{naming, Error, Result};

/// Headers only: Ethernet + IPv4 + TCP with options fit in 128 bytes.
pub const SNAPLEN: u32 = 128;

/// A running tcpdump.
#[derive(Debug)]
pub struct Capture {
    child: Option<Child>,
    /// The file tcpdump writes (`tdoc-lab-<pid>-<name>.pcap` in the temp directory).
    temp: PathBuf,
    /// Where the user wants the capture once it has stopped.
    dest: Option<PathBuf>,
    stderr: Option<mpsc::Receiver<String>>,
}

/// What tcpdump reported when it stopped.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CaptureSummary {
    pub path: PathBuf,
    pub packets_captured: Option<u64>,
    pub packets_dropped_by_kernel: Option<u64>,
}

/// A stopped capture. A capture nobody asked to keep (no `--pcap`) lives in the temp
/// directory only as long as this value: it is removed on drop.
#[derive(Debug)]
pub struct Saved {
    pub summary: CaptureSummary,
    temporary: bool,
}

impl Saved {
    /// The capture file (the user's path, or the temporary file).
    pub fn path(&self) -> &Path {
        &self.summary.path
    }

    /// The summary, when the user asked to keep the file (`--pcap`).
    pub fn kept(&self) -> Option<CaptureSummary> {
        (!self.temporary).then(|| self.summary.clone())
    }
}

impl Drop for Saved {
    fn drop(&mut self) {
        if self.temporary {
            let _ = std::fs::remove_file(&self.summary.path);
        }
    }
}

impl Capture {
    /// Starts `tcpdump -i IFACE -w $TMPDIR/tdoc-lab-<pid>-<name>.pcap FILTER` inside `ns`
    /// and waits until it listens. `dest`: where [`Capture::stop`] moves the file.
    pub fn start(
        ns: &str,
        iface: &str,
        name: &str,
        dest: Option<&Path>,
        filter: &str,
    ) -> Result<Capture> {
        let temp = naming::temp_file(std::process::id(), &format!("{name}.pcap"))?;
        let step = format!("start tcpdump on {iface} in {ns}");
        let snaplen = SNAPLEN.to_string();
        let path_s = temp.display().to_string();
        let args = [
            "netns", "exec", ns, "tcpdump", "-i", iface, "-n", "-U", "-s", &snaplen, "-w", &path_s,
            filter,
        ];
        let fail = |detail: String| Error::Command {
            step: step.clone(),
            command: format!("ip {}", args.join(" ")),
            detail,
        };
        let mut child = Command::new("ip")
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| fail(format!("cannot start: {e}")))?;
        let stderr = child.stderr.take().expect("stderr is piped");
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            let mut reader = BufReader::new(stderr);
            let mut line = String::new();
            while reader.read_line(&mut line).unwrap_or(0) > 0 {
                let _ = tx.send(std::mem::take(&mut line));
            }
        });
        let mut cap = Capture {
            child: Some(child),
            temp,
            dest: dest.map(Path::to_path_buf),
            stderr: Some(rx),
        };
        // tcpdump prints "listening on IFACE" once its socket is bound.
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        let mut seen = String::new();
        loop {
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            match cap.stderr.as_ref().expect("set above").recv_timeout(left) {
                Ok(l) if l.contains("listening on") => break,
                Ok(l) => seen.push_str(l.trim()),
                Err(_) => {
                    cap.kill();
                    return Err(fail(format!("did not start listening: {seen}")));
                }
            }
        }
        Ok(cap)
    }

    /// Stops tcpdump (SIGINT, then SIGKILL after 3 s), moves the file to its destination if
    /// one was given, and returns its counts.
    pub fn stop(mut self) -> Result<Saved> {
        let mut summary = CaptureSummary {
            path: self.temp.clone(),
            ..Default::default()
        };
        if let Some(mut child) = self.child.take() {
            // Let the last packets reach the capture buffer.
            std::thread::sleep(Duration::from_millis(100));
            // SAFETY: signalling the tcpdump child this struct started.
            unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
            let deadline = std::time::Instant::now() + Duration::from_secs(3);
            while child.try_wait().ok().flatten().is_none() {
                if std::time::Instant::now() > deadline {
                    let _ = child.kill();
                    let _ = child.wait();
                    break;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
        }
        if let Some(rx) = self.stderr.take() {
            let mut text = String::new();
            while let Ok(l) = rx.recv_timeout(Duration::from_millis(200)) {
                text.push_str(&l);
            }
            summary.packets_captured = count_before(&text, "packets captured");
            summary.packets_dropped_by_kernel = count_before(&text, "packets dropped by kernel");
        }
        let Some(dest) = self.dest.take() else {
            return Ok(Saved {
                summary,
                temporary: true,
            });
        };
        if let Err(e) = move_file(&self.temp, &dest) {
            let _ = std::fs::remove_file(&self.temp);
            return Err(e);
        }
        summary.path = dest;
        Ok(Saved {
            summary,
            temporary: false,
        })
    }

    fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

impl Drop for Capture {
    fn drop(&mut self) {
        if self.child.is_some() {
            self.kill();
            let _ = std::fs::remove_file(&self.temp);
        }
    }
}

/// Renames `from` to `to`, copying across file systems (`EXDEV`).
fn move_file(from: &Path, to: &Path) -> Result<()> {
    if std::fs::rename(from, to).is_ok() {
        return Ok(());
    }
    std::fs::copy(from, to).map_err(|source| Error::Write {
        path: to.to_path_buf(),
        source,
    })?;
    let _ = std::fs::remove_file(from);
    Ok(())
}

fn count_before(text: &str, what: &str) -> Option<u64> {
    text.lines()
        .find(|l| l.contains(what))
        .and_then(|l| l.split_whitespace().next())
        .and_then(|n| n.parse().ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_tcpdump_summary() {
        let t = "listening on x\n12 packets captured\n14 packets received by filter\n0 packets dropped by kernel\n";
        assert_eq!(count_before(t, "packets captured"), Some(12));
        assert_eq!(count_before(t, "packets dropped by kernel"), Some(0));
        assert_eq!(count_before("", "packets captured"), None);
    }

    #[test]
    fn a_moved_capture_leaves_no_temporary_file() {
        let dir = std::env::temp_dir();
        let from = dir.join(format!("tdoc-lab-{}-unit-move.pcap", std::process::id()));
        let to = dir.join(format!("tdoc-unit-dest-{}.pcap", std::process::id()));
        std::fs::write(&from, b"abc").unwrap();
        move_file(&from, &to).unwrap();
        assert!(!from.exists());
        assert_eq!(std::fs::read(&to).unwrap(), b"abc");
        let _ = std::fs::remove_file(&to);
        assert!(move_file(&from, &to).is_err());
    }
}
