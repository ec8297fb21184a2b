//! Linux TCP introspection: kernel counters (`/proc/net/{snmp,netstat,snmp6}`), sysctls,
//! and (with later issues) the sock_diag census, interface statistics and routes.
//!
//! Reads the host; never changes it. Every reader returns a typed [`Error`] naming the file.

pub mod burst;
pub mod check;
pub mod counters;
pub mod netdev;
pub mod netns;
pub mod pressure;
pub mod render;
pub mod route;
pub mod saved;
pub mod sockets;
pub mod sysctl;
pub mod tcp_info;

use std::path::PathBuf;

/// Errors of host introspection. Each names the file or object it concerns.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    #[error("cannot read {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path}: line {line}: {message}")]
    Parse {
        path: PathBuf,
        line: usize,
        message: String,
    },
    /// A saved counter file larger than any real one (`saved::MAX_BYTES`).
    #[error("{path}: more than {limit_bytes} bytes: not a saved nstat or netstat -s output (those are kilobytes)")]
    TooLarge { path: PathBuf, limit_bytes: u64 },
}
