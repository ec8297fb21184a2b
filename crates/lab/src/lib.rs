//! tcpdoctor-lab: reproduces TCP pathologies in network namespaces it creates, measures them
//! with its own small traffic code, hands the evidence to tcpdoctor's detectors, and measures
//! again after the remedy.
//!
//! What it owns: the scenarios ([`scenario`]), each run in its own namespaces and traced with
//! eBPF over them when the host allows it (`tcpdoctor_trace::run`), their remedies
//! ([`remedy`]) and their rendering ([`render`], [`chart`]). The namespaces themselves, their
//! topology, names and addresses, guaranteed teardown, threads and captures inside them and
//! the removal of a killed run's leftovers are the sandbox's (`tcpdoctor_sandbox`), which
//! touches nothing outside the namespaces it created. It prints nothing: scenarios return
//! records that the `cli` crate renders.
//!
//! What it does not own: judgement, which needs neither root nor a kernel and is tested
//! without them where it lives. Remedy and reproduction verdicts and the rules of merging
//! findings are the model's (`tcpdoctor_model::{remedy, reproduce, merge}`), the fan-in
//! incast detector is analyze's (`tcpdoctor_analyze::fan_in`), the trace over a run and its
//! reconciliation with the kernel counters are the trace crate's
//! (`tcpdoctor_trace::{run, reconcile}`).

pub mod chart;
pub mod remedy;
pub mod render;
pub mod scenario;

/// The lab's errors are the sandbox's: the scenarios fail on the same steps (a command, a
/// system call, a thread, a value given by the user, a file written).
pub use tcpdoctor_sandbox::{require_root, Error, Result};
