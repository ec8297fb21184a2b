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
mod scan;
mod slow;
mod spurious;
mod syn;
mod time;
mod timeouts;
mod unanswered;

use serde::Serialize;
use tcpdoctor_model::{Evidence, Finding};

use crate::flow::RetransKind;

use crate::burst::BurstRow;
use crate::engine::{Config, Totals};
use crate::flow::{Conn, Dir};

pub use collision::CollisionDetails;
pub use incast::IncastEpisode;
pub use microburst::microburst_finding;
pub use ports::{DestinationDetails, RangeSource};
pub use refused::RefusedDetails;
pub use retrans::RetransDetails;
pub use scan::{ScanDetails, ScanRow};
pub use slow::SlowReaderDetails;
pub use spurious::SpuriousDetails;
pub use syn::{AttemptCount, LadderFit, SynDetails};
pub use time::{ServiceRow, SlowExchange, TimeDetails};
pub use timeouts::RtoDetails;
pub use unanswered::{Shape, UnansweredDetails};

/// How many examples each detector keeps for evidence.
pub(crate) const EXAMPLES: usize = 5;

/// One detector: told what the engine sees, concludes at the end. Every hook but
/// [`conclude`](Detector::conclude) defaults to doing nothing.
pub trait Detector {
    /// A SYN opened a new incarnation (its reuse of a 4-tuple already recorded).
    fn opened(&mut self, _c: &Conn, _ts: u64) {}
    /// A segment with payload travelled in direction `d`.
    fn data(&mut self, _c: &mut Conn, _d: Dir, _ts: u64) {}
    /// Data of direction `d` was sent again (a repair of a loss, not a SYN, not known to
    /// be spurious when sent), `gap_ns` after the sender's previous segment.
    fn retransmitted(&mut self, _r: &Retransmission) {}
    /// The retransmission in `frame` (direction `d`), reported to [`retransmitted`] when
    /// sent, turned out spurious: a D-SACK says the receiver already had the data.
    ///
    /// [`retransmitted`]: Detector::retransmitted
    fn spurious(&mut self, _c: &Conn, _d: Dir, _frame: u64) {}
    /// The incarnation closed (FINs both ways, or a reset); it is summarised a little later.
    fn closed(&mut self, _c: &mut Conn) {}
    /// Capture time passed `now` (about once a second of capture time).
    fn sweep(&mut self, _now: u64) {}
    /// The capture ended: settle what is still open (before the last incarnations finish).
    fn flush(&mut self) {}
    /// An incarnation ended (closed, idle, replaced, or the capture ended) and is summarised.
    fn finished(&mut self, _c: &Conn) {}
    /// Adds this detector's findings and its part of the details to `out`.
    fn conclude(self, ctx: &Context, out: &mut Conclusion);
}

/// One retransmission that repaired a loss, as [`Detector::retransmitted`] sees it.
pub struct Retransmission<'a> {
    pub conn: &'a Conn,
    pub dir: Dir,
    pub ts: u64,
    pub kind: RetransKind,
    /// Silence of the sender before it (the wait for its timer, for a timeout).
    pub gap_ns: u64,
    pub frame: u64,
}

/// What every conclusion may use: the configuration, the capture's totals and span, the
/// microburst table, and what was observed of all connections.
pub struct Context<'a> {
    pub cfg: &'a Config,
    pub totals: &'a Totals,
    /// Capture time of the first segment.
    pub first_ts_ns: u64,
    /// First to last segment, capture time.
    pub span_ns: u64,
    pub bursts: &'a [BurstRow],
    pub observed: &'a Observed,
    /// Port scans (source, target) and what the other detectors counted of them before they
    /// were known as scans, which those detectors take back.
    pub scans: &'a [((std::net::IpAddr, std::net::IpAddr), scan::Leaked)],
}

/// Connections that carried data (or waited for a retransmission timeout), and their time:
/// what share-of-flows and share-of-time impacts are measured against.
#[derive(Clone, Debug, Default)]
pub struct Observed {
    pub flows_with_data: u64,
    /// Sum over those flows of first to last segment.
    pub flow_time_ns: u64,
}

/// The detectors' findings (unranked) and detail record.
#[derive(Default)]
pub struct Conclusion {
    pub findings: Vec<Finding>,
    pub details: Details,
    /// Where the time went, per service (server ip:port), most exchanges first.
    pub services: Vec<ServiceRow>,
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
    pub unanswered_syns: UnansweredDetails,
    pub time_wait_collisions: CollisionDetails,
    pub stale_ack_races: CollisionDetails,
    pub refused_connects: RefusedDetails,
    /// Busiest (client address, server endpoint) pairs, most connections first (top 10).
    pub destinations: Vec<DestinationDetails>,
    /// Destinations forgotten to bound memory (the ones with the fewest connections).
    pub destinations_forgotten: u64,
    pub retransmit_timeouts: RtoDetails,
    pub incast: Vec<IncastEpisode>,
    /// Receivers dropped from the fan-in table to bound memory (idle ones first).
    pub receivers_dropped: u64,
    pub slow_readers: SlowReaderDetails,
    pub retransmissions: RetransDetails,
    pub spurious_retransmissions: SpuriousDetails,
    pub port_scans: ScanDetails,
    /// Exchanges measured for the services table and the time findings.
    pub time: TimeDetails,
}

/// One detector of each kind, in the order their findings are listed before ranking.
pub struct Detectors {
    observed: Observed,
    scan: scan::Scans,
    syn: syn::SynRetransmits,
    unanswered: unanswered::Unanswered,
    time_wait: collision::Collisions,
    stale_ack: collision::Collisions,
    refused: refused::Refused,
    ports: ports::Ports,
    incast: incast::Incast,
    timeouts: timeouts::Timeouts,
    retrans: retrans::Retransmissions,
    slow: slow::SlowReaders,
    spurious: spurious::Spurious,
    microburst: microburst::Microbursts,
    time: time::Time,
}

/// Runs `$call` on every detector of `$d`, in order.
macro_rules! each {
    ($d:expr, $x:ident => $call:expr) => {{
        {
            let $x = &mut $d.syn;
            $call;
        }
        {
            let $x = &mut $d.unanswered;
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
            let $x = &mut $d.spurious;
            $call;
        }
        {
            let $x = &mut $d.microburst;
            $call;
        }
        {
            let $x = &mut $d.time;
            $call;
        }
    }};
}

impl Detectors {
    pub fn new(cfg: &Config) -> Detectors {
        Detectors {
            observed: Observed::default(),
            scan: scan::Scans::new(cfg),
            syn: syn::SynRetransmits::new(cfg),
            unanswered: unanswered::Unanswered::new(cfg),
            time_wait: collision::Collisions::new(cfg, collision::Kind::TimeWait),
            stale_ack: collision::Collisions::new(cfg, collision::Kind::StaleAck),
            refused: refused::Refused::new(cfg),
            ports: ports::Ports::new(cfg),
            incast: incast::Incast::new(cfg),
            timeouts: timeouts::Timeouts::default(),
            retrans: retrans::Retransmissions::default(),
            slow: slow::SlowReaders::default(),
            spurious: spurious::Spurious::default(),
            microburst: microburst::Microbursts::new(cfg),
            time: time::Time::default(),
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
    pub fn retransmitted(&mut self, r: &Retransmission) {
        each!(self, d => d.retransmitted(r));
    }

    /// An exchange of `c` finished (a request answered, and the client spoke again).
    #[inline]
    pub fn exchange(&mut self, c: &Conn, e: &crate::exchange::Exchange) {
        self.time.exchange(c, e);
    }

    pub fn spurious(&mut self, c: &Conn, dir: Dir, frame: u64) {
        each!(self, d => d.spurious(c, dir, frame));
    }

    pub fn closed(&mut self, c: &mut Conn) {
        each!(self, d => d.closed(c));
    }

    pub fn sweep(&mut self, now: u64) {
        each!(self, d => d.sweep(now));
    }

    pub fn flush(&mut self) {
        each!(self, d => d.flush());
    }

    /// An incarnation is summarised. The incast and scan detectors go first: when the
    /// incast detector takes the incarnation's retransmissions as evidence of an incast
    /// episode it marks it ([`Conn::in_incast`]), and the loss detectors leave them to it;
    /// a probe of a port scan ([`Conn::in_scan`]) is left to the scan detector by the
    /// handshake detectors.
    pub fn finished(&mut self, c: &mut Conn) {
        let receiver = self.incast.caught(c);
        c.in_incast = receiver.is_some();
        c.incast_receiver_is_client = receiver == Some(c.client.addr);
        c.in_scan = self.scan.caught(c);
        // A flow that carried no data but waited for a timeout (a FIN resent) counts too:
        // its wait is a share of its own time.
        if c.half.sum(|h| h.bytes) > 0 || !c.rare().rto.is_empty() || c.rare().close_rto > 0 {
            self.observed.flows_with_data += 1;
            self.observed.flow_time_ns += c.last_ts.saturating_sub(c.first_ts);
        }
        each!(self, d => d.finished(c));
    }

    /// Every detector's conclusion, in order.
    pub fn conclude(
        self,
        cfg: &Config,
        totals: &Totals,
        first_ts_ns: u64,
        span_ns: u64,
        bursts: &[BurstRow],
    ) -> Conclusion {
        let observed = self.observed.clone();
        let scans = self.scan.leaked();
        let ctx = &Context {
            cfg,
            totals,
            first_ts_ns,
            span_ns,
            bursts,
            observed: &observed,
            scans: &scans,
        };
        let mut out = Conclusion::default();
        self.scan.conclude(ctx, &mut out);
        self.syn.conclude(ctx, &mut out);
        self.unanswered.conclude(ctx, &mut out);
        self.time_wait.conclude(ctx, &mut out);
        self.stale_ack.conclude(ctx, &mut out);
        self.refused.conclude(ctx, &mut out);
        self.ports.conclude(ctx, &mut out);
        self.incast.conclude(ctx, &mut out);
        self.timeouts.conclude(ctx, &mut out);
        self.retrans.conclude(ctx, &mut out);
        self.slow.conclude(ctx, &mut out);
        self.spurious.conclude(ctx, &mut out);
        self.microburst.conclude(ctx, &mut out);
        self.time.conclude(ctx, &mut out);
        out
    }
}

/// A duration in microseconds for a human: `850 us`, `12.5 ms`, `1.027 s`.
pub(crate) use tcpdoctor_model::units::micros_spaced as us;

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
