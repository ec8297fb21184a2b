//! eBPF tracing of TCP events with live attribution to causes.
//!
//! The BPF half (bpf/trace.bpf.c, compiled into the committed bpf/trace.bpf.o by
//! bpf/build.sh) counts TCP events in the kernel and sends a record per event worth
//! attributing; [`loader`] loads and attaches it, [`raw`] decodes records, [`btf`] names the
//! kernel's drop and reset reasons. [`recording`] keeps a session's evidence so that its
//! attribution can be replayed without root.

pub mod attribute;
pub mod btf;
pub mod connections;
mod error;
pub mod history;
pub mod loader;
pub mod raw;
pub mod reconcile;
pub mod recording;
pub mod render;
pub mod repeats;
pub mod run;
pub mod session;

pub use error::Error;
