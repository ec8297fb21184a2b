//! Flow tracking and pathology detectors: TCP segments in (from `tcpdoctor-capture`),
//! [`Finding`]s with packet evidence out.
//!
//! Pure: time comes from the packets' timestamps, nothing here reads the clock, spawns
//! threads or does I/O. Streaming with bounded memory: the engine keeps only connections
//! active in the last seconds of capture time plus a small tombstone per recently closed
//! 4-tuple (for TIME_WAIT reuse), and each detector keeps counts and a few examples.

pub mod burst;
pub mod detect;
pub mod engine;
pub mod flow;
pub mod prepare;
pub mod seq;

use serde::Serialize;
use tcpdoctor_model::Finding;

pub use burst::{BurstMeter, BurstRow};
pub use detect::Details;
pub use engine::{Analyzer, Config, Totals};
pub use flow::{FlowRow, RetransKind};
pub use prepare::{Prepare, Released, SegKey};
pub use seq::SeqNumber;

/// The result of an analysis: findings (unranked; `Report::new` ranks them) and the records
/// behind them.
#[derive(Clone, Debug, Serialize)]
pub struct Analysis {
    #[serde(skip)]
    pub findings: Vec<Finding>,
    pub totals: Totals,
    pub first_ts_ns: Option<u64>,
    pub duration_us: u64,
    pub details: Details,
    pub microbursts: Vec<BurstRow>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub flows: Vec<FlowRow>,
    /// With `Config::keep_retransmissions`: (frame, kind) of every retransmission.
    #[serde(skip)]
    pub retransmitted: Vec<(u64, RetransKind)>,
}

#[cfg(test)]
mod tests;
