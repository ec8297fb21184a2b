//! Detectors: one unit per pathology family, each behind [`Detector`]. A detector owns its
//! state (counts and a few examples: bounded memory), is told what the flow engine sees
//! while it streams (a new incarnation, data, a retransmission timeout, a summarised
//! incarnation, the periodic sweep), and draws its own conclusion at the end: its
//! [`Finding`]s and its part of the [`Details`] record for `--json`.
//!
//! [`Detectors`] holds one of each and passes every event to all of them (static dispatch:
//! the hooks a detector does not use cost nothing). Detectors never see segments directly:
//! per-segment state lives in the connection ([`crate::flow::Conn`]), kept by
//! [`crate::track`].

mod collision;
mod handshake;
mod incast;
mod microburst;
mod ports;
mod refused;
mod retrans;
mod slow;
mod syn;
mod timeouts;

use serde::Serialize;
use tcpdoctor_model::{Evidence, Finding};

use crate::burst::BurstRow;
use crate::engine::{Config, Totals};
use crate::flow::{Conn, Dir};

pub use collision::CollisionDetails;
pub use incast::IncastEpisode;
pub use microburst::microburst_finding;
pub use ports::DestinationDetails;
pub use refused::RefusedDetails;
pub use retrans::RetransDetails;
pub use slow::SlowReaderDetails;
pub use syn::{AttemptCount, LadderFit, SynDetails};
pub use timeouts::RtoDetails;

/// How many examples each detector keeps for evidence.
pub(crate) const EXAMPLES: usize = 5;

/// One detector: told what the engine sees, concludes at the end. Every hook but
/// [`conclude`](Detector::conclude) defaults to doing nothing.
pub trait Detector {
    /// A SYN opened a new incarnation (its reuse of a 4-tuple already recorded).
    fn opened(&mut self, _c: &Conn, _ts: u64) {}
    /// A segment with payload travelled in direction `d`.
    fn data(&mut self, _c: &mut Conn, _d: Dir, _ts: u64) {}
    /// A retransmission in direction `d` ended an idle gap of at least the RTO floor.
    fn timeout(&mut self, _c: &Conn, _d: Dir, _ts: u64, _gap_ns: u64, _frame: u64) {}
    /// Capture time passed `now` (about once a second of capture time).
    fn sweep(&mut self, _now: u64) {}
    /// An incarnation ended (closed, idle, replaced, or the capture ended) and is summarised.
    fn finished(&mut self, _c: &Conn) {}
    /// Adds this detector's findings and its part of the details to `out`.
    fn conclude(self, ctx: &Context, out: &mut Conclusion);
}

/// What every conclusion may use: the configuration, the capture's totals and span, the
/// microburst table.
pub struct Context<'a> {
    pub cfg: &'a Config,
    pub totals: &'a Totals,
    /// First to last segment, capture time.
    pub span_ns: u64,
    pub bursts: &'a [BurstRow],
}

/// The detectors' findings (unranked) and detail record.
#[derive(Default)]
pub struct Conclusion {
    pub findings: Vec<Finding>,
    pub details: Details,
}

/// A packet-level example: the same shape as `Evidence::Packets`.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Example {
    pub flow: String,
    pub frames: Vec<u64>,
    pub description: String,
}

impl Example {
    pub(crate) fn evidence(&self) -> Evidence {
        Evidence::Packets {
            flow: self.flow.clone(),
            frames: self.frames.clone(),
            description: self.description.clone(),
        }
    }
}

/// Per-pathology details for `--json`.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Details {
    pub syn_retransmits: SynDetails,
    pub time_wait_collisions: CollisionDetails,
    pub stale_ack_races: CollisionDetails,
    pub refused_connects: RefusedDetails,
    /// Busiest (client address, server endpoint) pairs, most connections first (top 10).
    pub destinations: Vec<DestinationDetails>,
    pub retransmit_timeouts: RtoDetails,
    pub incast: Vec<IncastEpisode>,
    pub slow_readers: SlowReaderDetails,
    pub retransmissions: RetransDetails,
}

/// One detector of each kind, in the order their findings are listed before ranking.
pub struct Detectors {
    syn: syn::SynRetransmits,
    time_wait: collision::Collisions,
    stale_ack: collision::Collisions,
    refused: refused::Refused,
    ports: ports::Ports,
    incast: incast::Incast,
    timeouts: timeouts::Timeouts,
    retrans: retrans::Retransmissions,
    slow: slow::SlowReaders,
    microburst: microburst::Microbursts,
}

/// Runs `$call` on every detector of `$d`, in order.
macro_rules! each {
    ($d:expr, $x:ident => $call:expr) => {{
        {
            let $x = &mut $d.syn;
            $call;
        }
        {
            let $x = &mut $d.time_wait;
            $call;
        }
        {
            let $x = &mut $d.stale_ack;
            $call;
        }
        {
            let $x = &mut $d.refused;
            $call;
        }
        {
            let $x = &mut $d.ports;
            $call;
        }
        {
            let $x = &mut $d.incast;
            $call;
        }
        {
            let $x = &mut $d.timeouts;
            $call;
        }
        {
            let $x = &mut $d.retrans;
            $call;
        }
        {
            let $x = &mut $d.slow;
            $call;
        }
        {
            let $x = &mut $d.microburst;
            $call;
        }
    }};
}

impl Detectors {
    pub fn new(cfg: &Config) -> Detectors {
        Detectors {
            syn: syn::SynRetransmits::new(cfg),
            time_wait: collision::Collisions::new(cfg, collision::Kind::TimeWait),
            stale_ack: collision::Collisions::new(cfg, collision::Kind::StaleAck),
            refused: refused::Refused::new(cfg),
            ports: ports::Ports::new(cfg),
            incast: incast::Incast::new(cfg),
            timeouts: timeouts::Timeouts::default(),
            retrans: retrans::Retransmissions::default(),
            slow: slow::SlowReaders::default(),
            microburst: microburst::Microbursts::new(cfg),
        }
    }

    #[inline]
    pub fn opened(&mut self, c: &Conn, ts: u64) {
        each!(self, d => d.opened(c, ts));
    }

    #[inline]
    pub fn data(&mut self, c: &mut Conn, dir: Dir, ts: u64) {
        each!(self, d => d.data(c, dir, ts));
    }

    #[inline]
    pub fn timeout(&mut self, c: &Conn, dir: Dir, ts: u64, gap_ns: u64, frame: u64) {
        each!(self, d => d.timeout(c, dir, ts, gap_ns, frame));
    }

    pub fn sweep(&mut self, now: u64) {
        each!(self, d => d.sweep(now));
    }

    pub fn finished(&mut self, c: &Conn) {
        each!(self, d => d.finished(c));
    }

    /// Every detector's conclusion, in order.
    pub fn conclude(self, ctx: &Context) -> Conclusion {
        let mut out = Conclusion::default();
        self.syn.conclude(ctx, &mut out);
        self.time_wait.conclude(ctx, &mut out);
        self.stale_ack.conclude(ctx, &mut out);
        self.refused.conclude(ctx, &mut out);
        self.ports.conclude(ctx, &mut out);
        self.incast.conclude(ctx, &mut out);
        self.timeouts.conclude(ctx, &mut out);
        self.retrans.conclude(ctx, &mut out);
        self.slow.conclude(ctx, &mut out);
        self.microburst.conclude(ctx, &mut out);
        out
    }
}

/// A duration in microseconds for a human: `850 us`, `12.5 ms`, `1.027 s`.
pub(crate) fn us(v: u64) -> String {
    if v < 1_000 {
        format!("{v} us")
    } else if v < 1_000_000 {
        format!("{:.1} ms", v as f64 / 1e3)
    } else {
        format!("{:.3} s", v as f64 / 1e6)
    }
}

/// A byte count for a human: `512 B`, `3.0 KiB`, `1.5 MiB`.
pub(crate) fn bytes_h(n: u64) -> String {
    if n >= 1 << 20 {
        format!("{:.1} MiB", n as f64 / (1u64 << 20) as f64)
    } else if n >= 1 << 10 {
        format!("{:.1} KiB", n as f64 / 1024.0)
    } else {
        format!("{n} B")
    }
}

/// A bit rate for a human.
pub(crate) fn rate_h(bits_per_s: f64) -> String {
    if bits_per_s >= 1e9 {
        format!("{:.2} Gbit/s", bits_per_s / 1e9)
    } else if bits_per_s >= 1e6 {
        format!("{:.1} Mbit/s", bits_per_s / 1e6)
    } else {
        format!("{:.0} kbit/s", bits_per_s / 1e3)
    }
}
