//! Removal of leftovers: namespaces named `tdoc*` (with every process inside them),
//! interfaces named `tdoc*` in the root namespace, the lab's temporary files
//! (`$TMPDIR/tdoc-lab-<pid>-*`, [`crate::naming::temp_file`]) and the tcpdumps writing them.
//! Used by [`crate::topo::Lab`]'s teardown and by `tcpdoctor lab cleanup` after a run was
//! killed with SIGKILL (which no Drop guard survives).
//!
//! A tcpdump the lab started outlives a SIGKILL of its run: it is re-parented to init and
//! keeps writing its file, also when its namespace is gone. Such a process is recognised by
//! its command (`/proc/PID/comm` is `tcpdump`) and its command line, whose `-w` names a file
//! selected like the temporary files (`tdoc-lab-<pid>-*` of a run that is not alive); it is
//! ended by its pid. No other process is signalled, except those inside removed namespaces.
//!
//! Lab namespaces of a run that is still alive (`tdoc-lab-<pid>-...` where `<pid>` is a live
//! tcpdoctor process other than this one) are skipped unless `force` is set, so a cleanup does
//! not break a lab running concurrently. Tests use the same prefix (`tdoc-<tag>-...`), so
//! leftovers of killed test runs are removed too.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::exec::try_run;
use crate::naming;

/// What to remove.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Scope {
    /// Everything named `tdoc*` (namespaces, root interfaces) except live lab runs.
    All { force: bool },
    /// Only the namespaces of lab run `pid` (`tdoc-lab-<pid>-*`).
    Run(u32),
    /// Namespaces and root interfaces whose name starts with this prefix (itself `tdoc*`).
    Prefix(String),
}

/// What a cleanup removed or left.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Cleaned {
    pub namespaces_removed: Vec<String>,
    pub interfaces_removed: Vec<String>,
    /// Processes killed because they were inside a removed namespace.
    pub processes_killed: Vec<u32>,
    /// Lab tcpdumps outside any removed namespace (re-parented to init), ended by pid.
    pub captures_killed: Vec<u32>,
    /// Temporary files removed (paths).
    pub files_removed: Vec<String>,
    /// Lab namespaces kept because their run is still alive.
    pub namespaces_in_use: Vec<String>,
    /// Objects that could not be removed.
    pub failed: Vec<String>,
}

/// Names of all network namespaces (`ip netns list`).
pub fn list_netns() -> Vec<String> {
    try_run("ip", &["netns", "list"])
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .map(str::to_string)
        .collect()
}

/// Names of the root namespace's interfaces (`ip -o link show`), without the `@peer` suffix.
pub fn list_root_interfaces() -> Vec<String> {
    try_run("ip", &["-o", "link", "show"])
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.split(": ").nth(1))
        .map(|n| n.split('@').next().unwrap_or(n).to_string())
        .collect()
}

/// Process ids inside namespace `ns` (`ip netns pids`).
pub fn netns_pids(ns: &str) -> Vec<u32> {
    try_run("ip", &["netns", "pids", ns])
        .unwrap_or_default()
        .split_whitespace()
        .filter_map(|p| p.parse().ok())
        .collect()
}

fn is_live_lab(pid: u32) -> bool {
    if pid == std::process::id() {
        return false;
    }
    std::fs::read_to_string(format!("/proc/{pid}/comm"))
        .map(|c| c.trim() == "tcpdoctor")
        .unwrap_or(false)
}

/// Kills every process inside `ns` (SIGKILL, by pid), then deletes the namespace. Returns the
/// pids killed and whether the namespace is gone.
pub fn remove_netns(ns: &str) -> (Vec<u32>, bool) {
    let me = std::process::id();
    let mut killed = Vec::new();
    for _ in 0..3 {
        let pids: Vec<u32> = netns_pids(ns).into_iter().filter(|&p| p != me).collect();
        if pids.is_empty() {
            break;
        }
        for pid in pids {
            // SAFETY: kill(2) with a pid read from `ip netns pids`; the process is inside a
            // namespace only the lab (or a tcpdoctor test) creates.
            if unsafe { libc::kill(pid as i32, libc::SIGKILL) } == 0 {
                killed.push(pid);
            }
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let _ = try_run("ip", &["netns", "del", ns]);
    let gone = !list_netns().iter().any(|n| n == ns);
    (killed, gone)
}

/// Whether a temporary file or capture named `name` (a file name, no directory) is one that
/// `scope` selects: the lab's `tdoc-lab-<pid>-*` files of runs that are not alive (`All`),
/// those of one run (`Run`), or any name starting with the prefix (`Prefix`).
pub fn selects_file(scope: &Scope, name: &str) -> bool {
    match scope {
        Scope::Run(pid) => name.starts_with(&naming::run_prefix(*pid)),
        Scope::Prefix(p) => p.starts_with(naming::PREFIX) && name.starts_with(p.as_str()),
        Scope::All { force } => naming::run_of(name).is_some_and(|run| *force || !is_live_lab(run)),
    }
}

/// The directories the lab's temporary files can be in: `$TMPDIR` (as the run saw it, if it
/// was the same) and `/tmp`.
fn temp_dirs() -> Vec<PathBuf> {
    let mut dirs = vec![std::env::temp_dir()];
    let tmp = PathBuf::from("/tmp");
    if !dirs.contains(&tmp) {
        dirs.push(tmp);
    }
    dirs
}

/// tcpdumps whose `-w` file name `scope` selects: (pid, path written).
pub fn lab_captures(scope: &Scope) -> Vec<(u32, String)> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for entry in dir.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<u32>().ok())
        else {
            continue;
        };
        let comm = std::fs::read_to_string(format!("/proc/{pid}/comm")).unwrap_or_default();
        if comm.trim() != "tcpdump" {
            continue;
        }
        let Ok(cmdline) = std::fs::read(format!("/proc/{pid}/cmdline")) else {
            continue;
        };
        if let Some(file) = written_file(&cmdline) {
            let name = Path::new(&file)
                .file_name()
                .and_then(|n| n.to_str())
                .unwrap_or("");
            if selects_file(scope, name) {
                out.push((pid, file));
            }
        }
    }
    out
}

/// The argument of `-w` in a NUL-separated command line (`-w FILE` or `-wFILE`).
fn written_file(cmdline: &[u8]) -> Option<String> {
    let args: Vec<String> = cmdline
        .split(|&b| b == 0)
        .map(|a| String::from_utf8_lossy(a).into_owned())
        .collect();
    let mut it = args.iter();
    while let Some(a) = it.next() {
        if a == "-w" {
            return it.next().cloned();
        }
        if let Some(rest) = a.strip_prefix("-w") {
            if !rest.is_empty() {
                return Some(rest.to_string());
            }
        }
    }
    None
}

/// Ends the tcpdumps `scope` selects (SIGKILL by pid) and removes the temporary files it
/// selects (regular files only).
fn remove_files(scope: &Scope, out: &mut Cleaned) {
    for (pid, file) in lab_captures(scope) {
        // SAFETY: kill(2) on a pid whose command is tcpdump and whose command line names a
        // file of a lab run that is not alive (or the run the user named).
        if unsafe { libc::kill(pid as i32, libc::SIGKILL) } == 0 {
            out.captures_killed.push(pid);
        } else {
            out.failed.push(format!("tcpdump {pid} writing {file}"));
        }
    }
    for dir in temp_dirs() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for e in entries.flatten() {
            let name = e.file_name();
            let Some(name) = name.to_str() else {
                continue;
            };
            let is_file = e.file_type().map(|t| t.is_file()).unwrap_or(false);
            if !is_file || !selects_file(scope, name) {
                continue;
            }
            let path = e.path();
            match std::fs::remove_file(&path) {
                Ok(()) => out.files_removed.push(path.display().to_string()),
                Err(_) => out.failed.push(format!("file {}", path.display())),
            }
        }
    }
}

/// Removes what `scope` selects.
pub fn cleanup(scope: &Scope) -> Cleaned {
    let mut out = Cleaned::default();
    let namespaces = list_netns();
    for ns in &namespaces {
        let selected = match scope {
            Scope::All { .. } => ns.starts_with(naming::PREFIX),
            Scope::Run(pid) => ns.starts_with(&naming::run_prefix(*pid)),
            Scope::Prefix(p) => ns.starts_with(p.as_str()),
        };
        if !selected {
            continue;
        }
        if let Scope::All { force: false } = scope {
            if naming::run_of(ns).is_some_and(is_live_lab) {
                out.namespaces_in_use.push(ns.clone());
                continue;
            }
        }
        let (killed, gone) = remove_netns(ns);
        out.processes_killed.extend(killed);
        if gone {
            out.namespaces_removed.push(ns.clone());
        } else {
            out.failed.push(format!("namespace {ns}"));
        }
    }
    remove_files(scope, &mut out);
    let prefix = match scope {
        Scope::All { .. } => Some(naming::PREFIX.to_string()),
        Scope::Prefix(p) => Some(p.clone()),
        Scope::Run(_) => None,
    };
    if let Some(prefix) = prefix {
        let seen: BTreeSet<String> = list_root_interfaces().into_iter().collect();
        for ifname in seen.iter().filter(|i| i.starts_with(&prefix)) {
            // Deleting one end of a veth deletes its peer too; it may already be gone.
            let _ = try_run("ip", &["link", "del", ifname]);
            if list_root_interfaces().iter().any(|i| i == ifname) {
                out.failed.push(format!("interface {ifname}"));
            } else {
                out.interfaces_removed.push(ifname.clone());
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_the_file_tcpdump_writes() {
        let c = b"tcpdump\0-i\0tdocc\0-n\0-w\0/tmp/tdoc-lab-77-x.pcap\0tcp\0";
        assert_eq!(written_file(c).as_deref(), Some("/tmp/tdoc-lab-77-x.pcap"));
        assert_eq!(
            written_file(b"tcpdump\0-w/tmp/a.pcap\0").as_deref(),
            Some("/tmp/a.pcap")
        );
        assert_eq!(written_file(b"tcpdump\0-i\0eth0\0"), None);
    }

    #[test]
    fn files_are_selected_by_run_and_prefix() {
        // A pid that is not a live tcpdoctor: pid 0 is never one (it is this process's own
        // pid only in the sense of kill(2)).
        let dead = "tdoc-lab-0-capture.pcap";
        assert!(selects_file(&Scope::All { force: false }, dead));
        assert!(selects_file(&Scope::Run(0), dead));
        assert!(!selects_file(&Scope::Run(1), dead));
        assert!(selects_file(&Scope::Prefix("tdoc-lab-0".into()), dead));
        // Files that are not the lab's own (a test's, another tool's) stay unless named.
        assert!(!selects_file(
            &Scope::All { force: true },
            "tdoc-ladder-meas"
        ));
        assert!(!selects_file(&Scope::All { force: true }, "capture.pcap"));
        assert!(!selects_file(&Scope::Prefix("x".into()), "x.pcap"));
        // This process is alive but is not a lab run (its name is not tcpdoctor).
        let mine = format!("tdoc-lab-{}-a.pcap", std::process::id());
        assert!(selects_file(&Scope::All { force: false }, &mine));
    }
}
