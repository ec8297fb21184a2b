//! Typed errors of the trace crate.

/// Why tracing could not start or go on.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The kernel exposes no BTF: the programs cannot be attached by type.
    #[error(
        "the kernel has no BTF (/sys/kernel/btf/vmlinux is missing; needs CONFIG_DEBUG_INFO_BTF)"
    )]
    MissingBtf,
    /// Loading BPF programs was refused.
    #[error("loading BPF programs was refused: needs root, or CAP_BPF and CAP_PERFMON")]
    Privilege,
    /// The object could not be loaded (verifier, relocation, map creation).
    #[error("loading the BPF object: {0}")]
    Load(String),
    /// A required tracepoint could not be attached.
    #[error("attaching {hook}: {message}")]
    Attach { hook: String, message: String },
    /// A BPF map could not be read.
    #[error("reading BPF maps: {0}")]
    Read(String),
    /// A named network namespace could not be resolved.
    #[error("network namespace {name}: {source}")]
    Netns {
        name: String,
        #[source]
        source: std::io::Error,
    },
    /// The kernel's BTF could not be parsed for reason names.
    #[error("reading drop-reason names from the kernel BTF: {0}")]
    Btf(String),
    /// A recording could not be written ([`crate::recording`]).
    #[error("recording the trace to {path}: {source}")]
    Record {
        path: String,
        #[source]
        source: std::io::Error,
    },
    /// A recording could not be read back: line `line` (1-based) is not what a recording
    /// holds there.
    #[error("replaying a recorded trace, line {line}: {message}")]
    Replay { line: usize, message: String },
}
