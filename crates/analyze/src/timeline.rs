//! Timelines of the worst connections, for charts: what each of them waited on and when (SYNs
//! sent and resent along the ladder, the SYN-ACK, idle gaps ended by a timeout, zero-window
//! periods, retransmissions repaired without a timeout, resets).
//!
//! Each connection collects at most [`MARKS_MAX`] marks while it is tracked (the rest are
//! counted); when it is summarised, [`Worst`] keeps the few that waited longest. "Waited" is
//! the connect wait beyond the first SYN (SYN resends), plus the idle gaps that timeouts
//! ended, plus the zero-window time: the stalls a user feels. Times are capture timestamps
//! (ns); the caller subtracts the capture's first timestamp. Pure: no clock, no I/O.

use serde::Serialize;

use crate::flow::{CloseKind, Conn};

/// Marks kept per connection; later ones are counted in [`Marks::dropped`].
pub const MARKS_MAX: usize = 48;

/// What a mark shows.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum MarkKind {
    /// The client's first SYN.
    Syn,
    /// A resent SYN (a rung of the SYN ladder).
    SynResent,
    /// The server's SYN-ACK.
    SynAck,
    /// An idle gap ended by a retransmission after a timeout (span: the gap).
    TimeoutGap,
    /// A receive window advertised as zero until it reopened (span).
    ZeroWindow,
    /// A retransmission repaired without a timeout (fast retransmit, tail loss probe, other).
    QuickRetransmission,
    /// A reset closed the connection.
    Reset,
}

impl MarkKind {
    /// Every kind, in legend order.
    pub const ALL: [MarkKind; 7] = [
        MarkKind::Syn,
        MarkKind::SynResent,
        MarkKind::SynAck,
        MarkKind::TimeoutGap,
        MarkKind::ZeroWindow,
        MarkKind::QuickRetransmission,
        MarkKind::Reset,
    ];

    /// A short name for legends.
    pub fn label(self) -> &'static str {
        match self {
            MarkKind::Syn => "SYN",
            MarkKind::SynResent => "SYN resent",
            MarkKind::SynAck => "SYN-ACK",
            MarkKind::TimeoutGap => "idle gap ended by a timeout",
            MarkKind::ZeroWindow => "zero window",
            MarkKind::QuickRetransmission => "retransmission without timeout",
            MarkKind::Reset => "reset",
        }
    }
}

/// One mark: an instant (`end_ns` None) or a span.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct Mark {
    pub kind: MarkKind,
    pub start_ns: u64,
    pub end_ns: Option<u64>,
    /// The frame that made the mark (the span's closing frame).
    pub frame: u64,
}

/// The marks of one connection, bounded.
#[derive(Clone, Debug, Default)]
pub struct Marks {
    items: Vec<Mark>,
    pub dropped: u32,
}

impl Marks {
    pub fn push(&mut self, m: Mark) {
        if self.items.len() < MARKS_MAX {
            self.items.push(m);
        } else {
            self.dropped = self.dropped.saturating_add(1);
        }
    }

    /// Takes out the mark of `kind` made by `frame` (a timeout found spurious later).
    pub fn remove(&mut self, kind: MarkKind, frame: u64) {
        if let Some(i) = self
            .items
            .iter()
            .position(|m| m.kind == kind && m.frame == frame)
        {
            self.items.remove(i);
        }
    }

    pub fn as_slice(&self) -> &[Mark] {
        &self.items
    }
}

/// One connection's timeline.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ConnTimeline {
    pub id: u64,
    pub client: String,
    pub server: String,
    pub incarnation: u32,
    pub first_ts_ns: u64,
    pub last_ts_ns: u64,
    /// What it waited on: connect wait after resent SYNs + timeout gaps + zero windows.
    pub stalled_ns: u64,
    /// Marks sorted by time.
    pub marks: Vec<Mark>,
    /// Marks beyond [`MARKS_MAX`], not kept.
    pub marks_dropped: u32,
}

/// How long `c` waited: the connect wait when it resent SYNs, the idle gaps its timeouts
/// ended, and its zero-window time (both directions).
pub fn stalled_ns(c: &Conn) -> u64 {
    let syns = (c.syn_count as usize).min(c.syns.len());
    let connect = if c.syn_count > 1 && syns > 0 {
        let first = c.syns[0].0;
        let end = c.synack.map_or(c.last_ts, |(ts, _)| ts);
        end.saturating_sub(first)
    } else {
        0
    };
    let r = c.rare();
    connect + r.rto_gap_total_ns + r.c2s.zero_total_ns + r.s2c.zero_total_ns
}

/// The connections that waited longest, at most `keep` of them.
#[derive(Clone, Debug, Default)]
pub struct Worst {
    keep: usize,
    /// Sorted: longest stall first, then earliest connection.
    items: Vec<ConnTimeline>,
}

impl Worst {
    pub fn new(keep: usize) -> Worst {
        Worst {
            keep,
            items: Vec::new(),
        }
    }

    /// Offers a connection being summarised (after its close kind is set).
    pub fn offer(&mut self, c: &Conn) {
        if self.keep == 0 {
            return;
        }
        let stalled = stalled_ns(c);
        if stalled == 0 {
            return;
        }
        if self.items.len() >= self.keep
            && self.items.last().is_some_and(|w| w.stalled_ns >= stalled)
        {
            return;
        }
        let t = timeline(c, stalled);
        let at = self.items.partition_point(|w| {
            (w.stalled_ns, std::cmp::Reverse(w.id)) > (stalled, std::cmp::Reverse(c.id))
        });
        self.items.insert(at, t);
        self.items.truncate(self.keep);
    }

    /// The kept timelines, longest stall first.
    pub fn into_vec(self) -> Vec<ConnTimeline> {
        self.items
    }
}

/// The timeline of `c`: its own marks plus the SYNs, SYN-ACK and closing reset.
fn timeline(c: &Conn, stalled_ns: u64) -> ConnTimeline {
    let mut marks: Vec<Mark> = Vec::new();
    let syns = (c.syn_count as usize).min(c.syns.len());
    for (i, &(ts, frame)) in c.syns[..syns].iter().enumerate() {
        marks.push(Mark {
            kind: if i == 0 {
                MarkKind::Syn
            } else {
                MarkKind::SynResent
            },
            start_ns: ts,
            end_ns: None,
            frame,
        });
    }
    if let Some((ts, frame)) = c.synack {
        marks.push(Mark {
            kind: MarkKind::SynAck,
            start_ns: ts,
            end_ns: None,
            frame,
        });
    }
    marks.extend_from_slice(c.marks.as_slice());
    if matches!(c.close, CloseKind::Rst { .. }) {
        marks.push(Mark {
            kind: MarkKind::Reset,
            start_ns: c.last_ts,
            end_ns: None,
            frame: c.last_frame,
        });
    }
    marks.sort_by_key(|m| (m.start_ns, m.kind));
    ConnTimeline {
        id: c.id,
        client: c.client.to_string(),
        server: c.server.to_string(),
        incarnation: c.incarnation,
        first_ts_ns: c.first_ts,
        last_ts_ns: c.last_ts,
        stalled_ns,
        marks,
        marks_dropped: c.marks.dropped + c.syn_count.saturating_sub(syns as u32),
    }
}
