//! The shared vocabulary of tcpdoctor: what a [`Finding`] is, what [`Evidence`] may back it,
//! which [`Pathology`] it names, and the [`Report`] envelope every command prints as JSON.
//!
//! This crate is pure data plus serde. It must not do I/O, read the clock or the network.
//! The catalogue of pathologies (explanation, remedies, relevant counters and sysctls) lives
//! here as data so that every subcommand explains a pathology with the same words.

pub mod catalogue;
pub mod counters;
pub mod finding;
pub mod merge;
pub mod net;
pub mod policy;
pub mod remedy;
pub mod report;
pub mod reproduce;
pub mod timers;
pub mod units;

pub use catalogue::{CatalogueEntry, Remedy, Role};
pub use finding::{Evidence, Finding, Pathology, Severity, Source};
pub use net::PortRange;
pub use policy::{Impact, Judgement, Rule};
pub use report::{Measured, Provenance, Report, Stamped, Verdict, SCHEMA_VERSION};
pub use timers::SynLadder;
