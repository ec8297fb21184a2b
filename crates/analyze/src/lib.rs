//! Flow tracking and pathology detectors: TCP segments in (from `tcpdoctor-capture`),
//! [`Finding`]s with packet evidence out.
//!
//! Pure: time comes from the packets' timestamps; nothing here reads the clock, opens files
//! or touches the network. The one exception is [`pipeline`], the fast path every caller
//! uses: it starts a reading thread that pulls batches from a capture reader the caller
//! opened, while the calling thread runs the engine (see its module docs). Streaming with
//! bounded memory: the engine keeps only connections active in the last seconds of capture
//! time plus a small tombstone per recently closed 4-tuple (for TIME_WAIT reuse), and each
//! detector keeps counts and a few examples.
//!
//! Layout: [`flow`] (vocabulary: endpoints, keys, one connection and its two directions),
//! `track` (what one segment does to its connection, one function per concern), [`detect`]
//! (one detector per pathology family behind [`detect::Detector`]), [`engine`] (the table of
//! connections, their eviction and summary), [`prepare`] (per-segment work without flow
//! state), [`pipeline`] (the two-thread reading path), [`fan_in`] (incast from a
//! fan-in's counters and round timings, without packets).

pub mod burst;
pub mod detect;
pub mod engine;
pub mod exchange;
pub mod fan_in;
pub mod flow;
pub mod ladder;
pub mod pipeline;
pub mod prepare;
pub mod render;
pub mod seq;
pub mod timeline;
mod track;

use serde::Serialize;
use tcpdoctor_model::Finding;

pub use burst::{BurstMeter, BurstRow};
pub use detect::{Details, ServiceRow};
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
    /// Where the time went, per service (server ip:port): exchanges, server time and round
    /// trip percentiles; most exchanges first.
    pub services: Vec<ServiceRow>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub flows: Vec<FlowRow>,
    /// With `Config::keep_retransmissions`: (frame, kind) of every retransmission.
    #[serde(skip)]
    pub retransmitted: Vec<(u64, RetransKind)>,
    /// With `Config::timelines` > 0: the connections that waited longest, longest first.
    #[serde(skip)]
    pub worst_connections: Vec<timeline::ConnTimeline>,
}

#[cfg(test)]
mod tests;
