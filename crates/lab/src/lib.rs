//! tcpdoctor-lab: reproduces TCP pathologies in network namespaces it creates, measures them
//! with its own small traffic code, hands the evidence to tcpdoctor's detectors, and measures
//! again after the remedy.
//!
//! What it owns: building topologies ([`topo::Lab`]: namespaces, veths, a bridge, tc qdiscs,
//! nftables tables, per-namespace sysctls and routes, all named with the [`naming::PREFIX`]),
//! guaranteed teardown (a Drop guard, also on error and panic; [`cleanup`] for leftovers of a
//! killed run), traffic threads that enter a namespace ([`netns`]), and the scenarios
//! ([`scenario`]), each run traced with eBPF over its own namespaces when the host allows it
//! (`tcpdoctor_trace::run`).
//!
//! What it must not do: touch anything outside the namespaces it created. No traffic leaves
//! them: every address comes from the lab's own private block ([`subnet::LabSubnet`]), and the
//! root namespace only ever runs the `ip`/`tc`/`nft`/`tcpdump` commands that build the lab.
//! It prints nothing: scenarios return records that the `cli` crate renders.
//!
//! What it does not own: judgement, which needs neither root nor a kernel and is tested
//! without them where it lives. Remedy and reproduction verdicts and the rules of merging
//! findings are the model's (`tcpdoctor_model::{remedy, reproduce, merge}`), the fan-in
//! incast detector is analyze's (`tcpdoctor_analyze::fan_in`), the trace over a run and its
//! reconciliation with the kernel counters are the trace crate's
//! (`tcpdoctor_trace::{run, reconcile}`).

pub mod capture;
pub mod chart;
pub mod cleanup;
pub mod exec;
pub mod naming;
pub mod netns;
pub mod remedy;
pub mod render;
pub mod scenario;
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
    pub(crate) fn io(step: impl Into<String>, source: std::io::Error) -> Error {
        Error::Io {
            step: step.into(),
            source,
        }
    }

    pub(crate) fn invalid(what: impl Into<String>, detail: impl Into<String>) -> Error {
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
