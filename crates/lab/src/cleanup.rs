//! Removal of leftovers: namespaces named `tdoc*` (with every process inside them) and
//! interfaces named `tdoc*` in the root namespace. Used by [`crate::topo::Lab`]'s teardown and
//! by `tcpdoctor lab cleanup` after a run was killed with SIGKILL (which no Drop guard survives).
//!
//! Lab namespaces of a run that is still alive (`tdoc-lab-<pid>-...` where `<pid>` is a live
//! tcpdoctor process other than this one) are skipped unless `force` is set, so a cleanup does
//! not break a lab running concurrently. Tests use the same prefix (`tdoc-<tag>-...`), so
//! leftovers of killed test runs are removed too.

use std::collections::BTreeSet;

use serde::Serialize;

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
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Cleaned {
    pub namespaces_removed: Vec<String>,
    pub interfaces_removed: Vec<String>,
    /// Processes killed because they were inside a removed namespace.
    pub processes_killed: Vec<u32>,
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
