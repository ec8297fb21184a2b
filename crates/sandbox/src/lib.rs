//! tcpdoctor-sandbox: the lab's private network namespaces, and the plumbing the lab and the
//! tests share to use them. Nothing here knows a pathology or judges one.
//!
//! What it owns: building topologies ([`topo::Lab`]: namespaces, veths, a bridge, tc qdiscs,
//! nftables tables, per-namespace sysctls and routes, all named with the [`naming::PREFIX`]),
//! guaranteed teardown (a Drop guard, also on error and panic; [`cleanup`] for leftovers of a
//! killed run, `tcpdoctor lab cleanup`), the external commands that build them ([`exec`]),
//! threads that enter a namespace ([`netns`]) and run small traffic code there ([`traffic`]),
//! and tcpdump inside a namespace ([`capture`]).
//!
//! What it must not do: touch anything outside the namespaces it created. No traffic leaves
//! them: every address comes from the lab's own private block ([`subnet::LabSubnet`]), and the
//! root namespace only ever runs the `ip`/`tc`/`nft`/`tcpdump` commands that build the lab.
//! It prints nothing.

pub mod capture;
pub mod cleanup;
pub mod exec;
pub mod naming;
pub mod netns;
pub mod subnet;
pub mod topo;
pub mod traffic;

use std::path::PathBuf;

/// Errors of the lab. Each names the step and, for external commands, the command line.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The lab needs CAP_NET_ADMIN and CAP_SYS_ADMIN (namespaces, tc, nftables).
    #[error("the lab needs root (network namespaces, tc and nftables); run it with sudo")]
    NotRoot,
    /// An external command (`ip`, `tc`, `nft`, `tcpdump`, `ethtool`) failed.
    #[error("{step}: `{command}` failed: {detail}")]
    Command {
        step: String,
        command: String,
        detail: String,
    },
    /// A system call made by the lab itself failed.
    #[error("{step}: {source}")]
    Io {
        step: String,
        source: std::io::Error,
    },
    /// A value given by the user is not acceptable.
    #[error("{what}: {detail}")]
    Invalid { what: String, detail: String },
    /// Reading kernel counters or sysctls inside a namespace failed.
    #[error("{step}: {source}")]
    Host {
        step: String,
        source: tcpdoctor_host::Error,
    },
    /// A traffic thread panicked or could not be joined.
    #[error("{step}: traffic thread failed: {detail}")]
    Thread { step: String, detail: String },
    /// Writing an output file (CSV, SVG) failed.
    #[error("cannot write {path}: {source}")]
    Write {
        path: PathBuf,
        source: std::io::Error,
    },
}

impl Error {
    /// [`Error::Io`]: a system call made for `step` failed.
    pub fn io(step: impl Into<String>, source: std::io::Error) -> Error {
        Error::Io {
            step: step.into(),
            source,
        }
    }

    /// [`Error::Invalid`]: `what` (a flag, a name) is not acceptable, for `detail`.
    pub fn invalid(what: impl Into<String>, detail: impl Into<String>) -> Error {
        Error::Invalid {
            what: what.into(),
            detail: detail.into(),
        }
    }
}

pub type Result<T> = std::result::Result<T, Error>;

/// Fails with [`Error::NotRoot`] unless the effective user is root.
pub fn require_root() -> Result<()> {
    // SAFETY: geteuid has no preconditions and cannot fail.
    if unsafe { libc::geteuid() } == 0 {
        Ok(())
    } else {
        Err(Error::NotRoot)
    }
}
