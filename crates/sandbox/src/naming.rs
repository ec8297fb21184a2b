//! Names of everything the lab creates. Every object starts with [`PREFIX`] so that
//! `tcpdoctor lab cleanup` can find leftovers, and carries the run's process id so that
//! concurrent runs (and concurrent tests) never collide.
//!
//! Namespaces: `tdoc-lab-<pid>-<role>`. Interfaces live only inside the lab's namespaces (veth
//! pairs are created directly in them), are named `tdoc<role>` and fit IFNAMSIZ (15 bytes,
//! include/uapi/linux/if.h). nftables tables: `tdoc_lab` inside a namespace. Temporary files:
//! `$TMPDIR/tdoc-lab-<pid>-<name>`.

use crate::{Error, Result};

/// The prefix of every namespace, interface, table and temporary file tcpdoctor creates.
pub const PREFIX: &str = "tdoc";

/// The prefix of the lab's own namespaces (tests use other `tdoc-` names).
pub const LAB_NS_PREFIX: &str = "tdoc-lab-";

/// The nftables table the lab creates inside a namespace.
pub const NFT_TABLE: &str = "tdoc_lab";

/// Longest interface name Linux accepts (IFNAMSIZ - 1).
pub const IFNAME_MAX: usize = 15;

/// Name of the namespace playing `role` in run `pid`.
pub fn netns(pid: u32, role: &str) -> String {
    format!("{LAB_NS_PREFIX}{pid}-{role}")
}

/// The namespace-name prefix of run `pid` (`tdoc-lab-<pid>-`).
pub fn run_prefix(pid: u32) -> String {
    format!("{LAB_NS_PREFIX}{pid}-")
}

/// The run id (process id) encoded in a lab namespace name, if it is one.
pub fn run_of(ns: &str) -> Option<u32> {
    ns.strip_prefix(LAB_NS_PREFIX)?
        .split('-')
        .next()?
        .parse()
        .ok()
}

/// The role part of a lab namespace name (`tdoc-lab-123-cl` -> `cl`); other names as they are.
pub fn role_of(ns: &str) -> &str {
    match ns
        .strip_prefix(LAB_NS_PREFIX)
        .and_then(|r| r.split_once('-'))
    {
        Some((_, role)) if !role.is_empty() => role,
        _ => ns,
    }
}

/// What a lab namespace is, in words, from its role (`tdoc-lab-123-clfc` -> `client`):
/// `client` (`cl`), `server` (`sv`), `switch` (`sw`: incast's bridge and bottleneck),
/// `receiver` (`rx`), `sender N` (`sN`), `qdisc check` (`q...`: a scratch namespace). What
/// follows the role names the run (`fc` the forced check, `rN` the Nth remedy of `--fix` or
/// `--remedies`): the report says the run where it lists the namespace, so it is left out. Other names as they are.
pub fn role_words(ns: &str) -> String {
    let role = role_of(ns);
    if role == ns && !ns.starts_with(LAB_NS_PREFIX) {
        return ns.to_string();
    }
    for (short, words) in [
        ("cl", "client"),
        ("sv", "server"),
        ("sw", "switch"),
        ("rx", "receiver"),
        ("q", "qdisc check"),
    ] {
        if role.starts_with(short) {
            return words.to_string();
        }
    }
    match role.strip_prefix('s') {
        Some(n) if n.bytes().next().is_some_and(|b| b.is_ascii_digit()) => {
            let digits: String = n.chars().take_while(char::is_ascii_digit).collect();
            format!("sender {digits}")
        }
        _ => role.to_string(),
    }
}

/// A file of run `pid` in the temp directory: `$TMPDIR/tdoc-lab-<pid>-<name>` (`name` of
/// ASCII letters, digits, `-`, `_` and `.`), found by `tcpdoctor lab cleanup` if the run is
/// killed before it removes the file.
pub fn temp_file(pid: u32, name: &str) -> Result<std::path::PathBuf> {
    if name.is_empty()
        || !name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b))
    {
        return Err(Error::invalid(
            "temporary file name",
            format!("'{name}' must be ASCII letters, digits, '-', '_' or '.'"),
        ));
    }
    Ok(std::env::temp_dir().join(format!("{}{name}", run_prefix(pid))))
}

/// An interface name `tdoc<role>`, checked against IFNAMSIZ.
pub fn ifname(role: &str) -> Result<String> {
    let name = format!("{PREFIX}{role}");
    if name.len() > IFNAME_MAX
        || role.is_empty()
        || !role.bytes().all(|b| b.is_ascii_alphanumeric())
    {
        return Err(Error::invalid(
            "interface name",
            format!("'{name}' must be 5..{IFNAME_MAX} ASCII letters and digits"),
        ));
    }
    Ok(name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_carry_prefix_and_run() {
        let ns = netns(4242, "s3");
        assert_eq!(ns, "tdoc-lab-4242-s3");
        assert!(ns.starts_with(&run_prefix(4242)));
        assert_eq!(run_of(&ns), Some(4242));
        assert_eq!(run_of("tdoc-probe-1a2"), None);
        assert_eq!(ifname("p31").unwrap(), "tdocp31");
        assert!(ifname("abcdefghijkl").is_err());
        assert!(ifname("a-b").is_err());
        let f = temp_file(4242, "slowreader.pcap").unwrap();
        assert_eq!(f.file_name().unwrap(), "tdoc-lab-4242-slowreader.pcap");
        assert_eq!(run_of("tdoc-lab-4242-slowreader.pcap"), Some(4242));
        assert!(temp_file(1, "../x").is_err());
    }

    #[test]
    fn namespaces_are_named_in_words_not_abbreviations() {
        // Issue 24: "cl", "sv", "clfc", "svfc", "rx", "sw" were never explained.
        for (ns, words) in [
            ("tdoc-lab-7-cl", "client"),
            ("tdoc-lab-7-sv", "server"),
            ("tdoc-lab-7-clfc", "client"),
            ("tdoc-lab-7-svfc", "server"),
            ("tdoc-lab-7-svr3", "server"),
            ("tdoc-lab-7-rx", "receiver"),
            ("tdoc-lab-7-sw", "switch"),
            ("tdoc-lab-7-s12", "sender 12"),
            ("tdoc-lab-7-qfqcodel", "qdisc check"),
            ("blue", "blue"),
        ] {
            assert_eq!(role_words(ns), words, "{ns}");
        }
    }
}
