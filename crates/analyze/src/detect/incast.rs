//! Incast: several senders into one receiver lose segments at the same moment (their
//! answers burst into a shallow buffer at the start of a round), and each repair stalls the
//! round. Found from retransmissions of any kind, so it is named whether the losses are
//! repaired by 200 ms timeouts, by short ones (a lowered `rto_min`) or by fast recovery.
//!
//! An episode is the retransmissions into one receiver within `incast_window` of the first.
//! It is synchronized when at least `incast_min_flows` flows lost segments in it and they
//! are at least a quarter of the flows sending into the receiver (random loss over many
//! flows also puts a few into one window, but a small share of them). The barrier form:
//! `incast_min_flows` or more flows were open and sending, then the receiver heard from none
//! of them until a timeout repaired one (the others had finished their part and waited).
//!
//! A sender whose whole answer the burst took leaves nothing in a capture taken at the
//! receiver but silence: the round waits until a timer fires. When that is the receiver's own
//! timer, the capture shows its request resent after the RTO floor and the sender reporting
//! the copy in a D-SACK (RFC 2883) with a sequence number past what the receiver has
//! acknowledged: the request had arrived and the answer was sent, so the answer was lost. Such a
//! resend is spurious (the spurious detector reports it, not as loss), but the wait is a
//! repair of this receiver's loss: it joins the receiver's episodes as a timeout, and the
//! silence until data flows again is its cost.
//!
//! A timeout (of a sender's answer, or of the receiver's request) whose wait began before a
//! synchronized episode of the same receiver started lost its segments in that round's burst:
//! its episode counts as incast although it is not synchronized by itself (the round waited
//! for its timer after the others' losses).
//!
//! A client's first data resent to a server that acknowledged none of it and sent nothing
//! since its SYN-ACK is left out ([`handshake_maybe_not_taken`]): the server may not have
//! taken the handshake (a full accept queue), which is no loss at a bottleneck.
//!
//! The retransmissions of flows caught in an episode are this finding's evidence; the loss
//! detectors leave them out ([`crate::flow::Conn::in_incast`]).
//!
//! Memory: per receiver, the flows that sent to it in the last seconds ([`Active`]) and the
//! open episode; at most [`RECEIVERS_MAX`] receivers (idle ones are dropped first), at most
//! [`HITS_MAX`] receivers with episodes, [`EPISODES_KEPT`] episodes in the details,
//! [`PENDING_MAX`] request timeouts per receiver awaiting the data that ends their silence.

use std::net::IpAddr;
use std::time::Duration;

use serde::Serialize;
use tcpdoctor_model::{timers::RTO_MIN_DEFAULT, Evidence, Finding, Impact, Pathology, Source};

use super::{us, Conclusion, Context, Detector, Retransmission, EXAMPLES};
use crate::engine::Config;
use crate::flow::{Conn, Dense, Dir, FastMap, RetransKind};

/// Fan-in counts flows that sent data to the receiver within this long before the loss.
const FANIN_LOOKBACK_NS: u64 = 100_000_000;
/// A flow refreshes its fan-in entry at most this often (bounds the cost per data segment).
const FANIN_REFRESH_NS: u64 = 10_000_000;
/// Sightings older than this are dropped by the sweep.
const FANIN_KEEP_NS: u64 = 2_000_000_000;
/// Receivers followed at once.
pub const RECEIVERS_MAX: usize = 4096;
/// Receivers with incast episodes followed.
const HITS_MAX: usize = 256;
/// Episodes listed in the details (all are counted).
const EPISODES_KEPT: usize = 64;
/// Retransmissions remembered per episode (to withdraw one found spurious later).
const EVENTS_KEPT: usize = 256;
/// Flows remembered as caught in episodes until they are summarised.
const CAUGHT_MAX: usize = 1 << 16;
/// Request timeouts per receiver kept until data into the receiver resumes.
const PENDING_MAX: usize = 64;

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct IncastEpisode {
    pub receiver: String,
    /// Offset of the first retransmission of the episode from the capture start.
    pub at_us: u64,
    /// Distinct flows that retransmitted within the episode window.
    pub flows_lost: u32,
    /// Repairs that waited for a retransmission timeout: retransmissions into the receiver
    /// after an idle gap of at least the RTO floor, and `request_timeouts`.
    pub timeouts: u32,
    /// Of the timeouts, the receiver's own requests resent after its timer and reported back
    /// in a D-SACK by the sender: the request had arrived, the sender's whole answer was lost.
    pub request_timeouts: u32,
    /// Segments sent again into the receiver.
    pub retransmissions: u32,
    /// Open flows that sent data to the receiver just before the loss.
    pub fan_in: u32,
    /// Longest idle gap ended by the episode's retransmissions: how long the repair waited.
    pub stall_us: u64,
    /// How long the receiver had heard from no sender at all when a timeout of the episode
    /// came (0 when others kept sending): the barrier form.
    pub receiver_silent_us: u64,
    /// Time the receiver heard from no sender while this episode's repairs were pending:
    /// what the episode cost.
    pub silent_us: u64,
    /// Not synchronized by itself: a timeout whose wait began before a synchronized episode
    /// of this receiver (its flow lost its segments in that round's burst).
    pub joined_round: bool,
    pub frames: Vec<u64>,
}

/// One repair in an episode: a retransmission into the receiver, or the receiver's own
/// request resent after a timeout.
#[derive(Clone, Copy, Default)]
struct Event {
    conn: u64,
    frame: u64,
    ts: u64,
    timeout: bool,
    /// The receiver's request resent after its timeout (not a segment into the receiver).
    request: bool,
    /// For a request: a D-SACK from the sender reported the resend (the request had arrived).
    confirmed: bool,
    /// When the flow's wait began: the sender's (or, for a request, the connection's)
    /// previous segment.
    wait_start: u64,
    gap_ns: u64,
    /// How long the receiver had heard from no sender when the repair came.
    idle_ns: u64,
    /// The receiver's silence this repair ended, counted as the episode's cost.
    silent_ns: u64,
}

/// The receiver's request resent after its timeout, kept until data into the receiver
/// flows again (which ends the silence it waited in).
#[derive(Clone, Copy)]
struct RequestTimeout {
    conn: u64,
    frame: u64,
    ts: u64,
    wait_start: u64,
    gap_ns: u64,
    /// The silence began at the later of the last data into the receiver and the request.
    silent_since: u64,
    confirmed: bool,
}

/// The episode being gathered for a receiver.
#[derive(Default)]
struct Episode {
    start_ts: u64,
    flows: Vec<u64>,
    retransmissions: u32,
    timeouts: u32,
    fan_in: u32,
    /// Of the fan-in, flows still open when counted (the barrier form needs them waiting).
    fan_in_open: u32,
    max_gap_ns: u64,
    silent_ns: u64,
    /// Of the timeouts, the receiver's requests.
    requests: u32,
    /// Each repair, the first [`EVENTS_KEPT`].
    events: Vec<Event>,
    /// The time the receiver heard from no sender while this episode's repairs were pending:
    /// for each retransmission, the receiver's silence it ended, at most the flow's own wait.
    /// A flow waiting for its repair while the others keep the bottleneck busy costs the
    /// round nothing; an idle receiver is the time the round lost.
    silent_total_ns: u64,
}

impl Episode {
    /// Takes the repair at `i` out of the episode (it was no loss of this receiver).
    fn withdraw(&mut self, i: usize) {
        let e = self.events.remove(i);
        if e.request {
            self.requests -= 1;
        } else {
            self.retransmissions -= 1;
        }
        self.timeouts -= u32::from(e.timeout);
        self.silent_total_ns = self.silent_total_ns.saturating_sub(e.silent_ns);
        if !self.events.iter().any(|x| x.conn == e.conn) {
            self.flows.retain(|&f| f != e.conn);
        }
    }
}

#[derive(Default)]
struct Receiver {
    active: Active,
    /// The latest data segment into this receiver, from any flow.
    last_data_ts: u64,
    first_data_ts: u64,
    open: Option<Episode>,
    /// The receiver's requests resent after a timeout, waiting for data to flow again.
    pending: Vec<RequestTimeout>,
}

/// A repair faster than half of 90% of the default 200 ms RTO floor (`TCP_RTO_MIN`,
/// include/net/tcp.h) cannot have waited for that floor: a lowered rto_min or fast recovery.
const SHORT_REPAIR_NS: u64 = RTO_MIN_DEFAULT.as_nanos() as u64 * 9 / 10 / 2;

/// A receiver with incast episodes, and what they cost.
#[derive(Default)]
struct Hit {
    episodes: u64,
    /// Of them, barrier episodes.
    barrier: u64,
    /// Of them, timeouts that joined the round of an earlier synchronized episode.
    joined: u64,
    /// Request timeouts in the episodes (the receiver's requests resent, D-SACKed).
    request_timeouts: u64,
    /// Start of the latest synchronized or barrier episode (what a later timeout may join).
    last_start_ts: u64,
    /// Time the receiver heard from no sender while repairs were pending (sum over episodes).
    stall_total_ns: u64,
    max_stall_ns: u64,
    /// Episodes whose longest repair wait stayed under half the default RTO floor, and the
    /// longest of those waits: a lowered rto_min shows in most episodes, while a loaded
    /// machine's late timers and RTO backoff stretch a few.
    short_episodes: u64,
    max_short_stall_ns: u64,
    /// What the other episodes (whose longest repair waited longer) cost.
    long_stall_ns: u64,
    max_flows: u32,
    max_fan_in: u32,
    timeouts: u64,
    first_data_ts: u64,
    last_data_ts: u64,
    /// Retransmissions of the flows caught, by kind (taken from the loss findings).
    folded: [u64; 5],
    folded_flows: u64,
    examples: Vec<IncastEpisode>,
}

/// Connections sending into one receiver, with the capture time each was last seen: a list
/// of sightings in arrival order that a connection appends to at most once per
/// [`FANIN_REFRESH_NS`], marking its previous entry superseded (the connection remembers
/// where it is). Appending costs no lookup on the data path; counting the recent connections
/// binary-searches the running maximum of the times (capture times may step back a little)
/// and walks only the entries after it. The sweep drops the old front.
#[derive(Default)]
struct Active {
    items: std::collections::VecDeque<Sighting>,
    /// Position (counted since the start) of `items[0]`.
    base: u64,
    /// Sightings before this time are forgotten, also stragglers still in `items`.
    floor: u64,
}

#[derive(Clone, Copy)]
struct Sighting {
    /// Connection id, or [`SUPERSEDED`].
    id: u64,
    ts: u64,
    /// The connection has closed since.
    closed: bool,
    /// The largest `ts` of this entry and all before it: sorted, unlike `ts`.
    max_ts: u64,
}

/// Marks a sighting that a later sighting of its connection replaced.
const SUPERSEDED: u64 = u64::MAX;

impl Active {
    /// Records connection `id` seen at `ts`; `prev` is where it was recorded before (0 for
    /// never, else position + 1). Returns the new position + 1.
    fn insert(&mut self, id: u64, ts: u64, prev: u64) -> u64 {
        self.supersede(prev);
        let max_ts = self.items.back().map_or(ts, |b| b.max_ts.max(ts));
        self.items.push_back(Sighting {
            id,
            ts,
            closed: false,
            max_ts,
        });
        self.base + self.items.len() as u64
    }

    /// The sighting at `pos` (position + 1; 0 for none).
    fn at(&mut self, pos: u64) -> Option<&mut Sighting> {
        let i = pos.checked_sub(1)?.checked_sub(self.base)?;
        self.items.get_mut(i as usize)
    }

    /// Marks the sighting at `pos` as replaced by a later one.
    fn supersede(&mut self, pos: u64) {
        if let Some(e) = self.at(pos) {
            e.id = SUPERSEDED;
        }
    }

    /// Marks the connection of the sighting at `pos` as closed.
    fn close(&mut self, pos: u64) {
        if let Some(e) = self.at(pos) {
            e.closed = true;
        }
    }

    /// Connections last seen at or after `since`: all of them, and those not closed.
    fn count_since(&self, since: u64) -> (u32, u32) {
        let since = since.max(self.floor);
        // Before `from`, every time is below `since`.
        let from = self.items.partition_point(|e| e.max_ts < since);
        let (mut all, mut open) = (0, 0);
        for e in self.items.range(from..) {
            if e.id != SUPERSEDED && e.ts >= since {
                all += 1;
                open += u32::from(!e.closed);
            }
        }
        (all, open)
    }

    /// Forgets the sightings before `keep` (those at the front now; a straggler with an
    /// earlier time behind a later one stays in the list but is no longer counted).
    fn retain_since(&mut self, keep: u64) {
        self.floor = self.floor.max(keep);
        while self.items.front().is_some_and(|e| e.ts < keep) {
            self.items.pop_front();
            self.base += 1;
        }
    }
}

pub(crate) struct Incast {
    window_ns: u64,
    min_flows: u32,
    /// A data retransmission after this much silence was a timeout (as the engine judges).
    rto_floor_ns: u64,
    receivers: Dense<IpAddr, Receiver>,
    hits: Dense<IpAddr, Hit>,
    /// Flows caught in an episode, until summarised: the receiver whose episode it was.
    caught: FastMap<u64, IpAddr>,
    episodes: Vec<IncastEpisode>,
    /// Latest capture time seen.
    now: u64,
    /// Receivers dropped to bound the table.
    receivers_dropped: u64,
}

impl Incast {
    pub(crate) fn new(cfg: &Config) -> Incast {
        Incast {
            window_ns: cfg.incast_window.as_nanos() as u64,
            min_flows: cfg.incast_min_flows,
            rto_floor_ns: cfg.rto_min.as_nanos() as u64 * 9 / 10,
            receivers: Dense::default(),
            hits: Dense::default(),
            caught: FastMap::default(),
            episodes: Vec::new(),
            now: 0,
            receivers_dropped: 0,
        }
    }

    /// The position of `addr` in the receiver table, adding it (and making room) when new.
    fn receiver_index(&mut self, addr: IpAddr) -> u32 {
        // The length first: the table is rarely full, and the lookup below remembers the
        // last key (most segments' receiver is the previous one's).
        if self.receivers.len() >= RECEIVERS_MAX && self.receivers.get(&addr).is_none() {
            self.make_room();
        }
        self.receivers.index_or_insert_with(addr, Receiver::default)
    }

    /// Drops receivers that have heard nothing for [`FANIN_KEEP_NS`] and have no episode
    /// open; if that is not half of them, the least recently active half.
    fn make_room(&mut self) {
        let before = self.receivers.len();
        let old = self.now.saturating_sub(FANIN_KEEP_NS);
        self.receivers
            .retain(|_, r| r.open.is_some() || !r.pending.is_empty() || r.last_data_ts >= old);
        if self.receivers.len() > before / 2 {
            let mut ts: Vec<u64> = self.receivers.iter().map(|(_, r)| r.last_data_ts).collect();
            ts.sort_unstable();
            let cut = ts[ts.len() / 2];
            self.receivers
                .retain(|_, r| r.open.is_some() || !r.pending.is_empty() || r.last_data_ts > cut);
        }
        self.receivers_dropped += (before - self.receivers.len()) as u64;
    }

    /// Judges the open episode of `addr` and records it when it is incast.
    fn close_episode(&mut self, addr: IpAddr) {
        let Some(r) = self.receivers.get_mut(&addr) else {
            return;
        };
        let Some(mut ep) = r.open.take() else {
            return;
        };
        // A resent request no D-SACK reported may itself have been lost on its way out: no
        // loss into this receiver.
        while let Some(i) = ep.events.iter().position(|e| e.request && !e.confirmed) {
            ep.withdraw(i);
        }
        if ep.flows.is_empty() {
            return;
        }
        let first_data_ts = r.first_data_ts;
        let last_data_ts = r.last_data_ts;
        let flows = ep.flows.len() as u32;
        let fan_in = ep.fan_in.max(flows);
        let silent_ns = ep
            .events
            .iter()
            .filter(|e| e.request)
            .map(|e| e.idle_ns)
            .fold(ep.silent_ns, u64::max);
        let synchronized = flows >= self.min_flows && flows * 4 >= fan_in;
        let barrier = silent_ns >= self.rto_floor_ns && ep.fan_in_open >= self.min_flows;
        // A timeout whose wait began before this receiver's latest synchronized episode
        // started: its flow lost its segments in that round's burst.
        let waited_from = ep
            .events
            .iter()
            .filter(|e| e.timeout)
            .map(|e| e.wait_start)
            .min();
        let joined = !(synchronized || barrier)
            && waited_from.is_some_and(|w| {
                self.hits
                    .get(&addr)
                    .is_some_and(|h| h.episodes > h.joined && h.last_start_ts >= w)
            });
        if !(synchronized || barrier || joined) {
            return;
        }
        if self.hits.get(&addr).is_none() && self.hits.len() >= HITS_MAX {
            return;
        }
        let mut frames: Vec<u64> = ep.events.iter().map(|e| e.frame).take(16).collect();
        frames.sort_unstable();
        let e = IncastEpisode {
            receiver: addr.to_string(),
            at_us: ep.start_ts / 1_000,
            flows_lost: flows,
            timeouts: ep.timeouts,
            request_timeouts: ep.requests,
            retransmissions: ep.retransmissions,
            fan_in,
            stall_us: ep.max_gap_ns / 1_000,
            receiver_silent_us: if barrier { silent_ns / 1_000 } else { 0 },
            silent_us: ep.silent_total_ns / 1_000,
            joined_round: joined,
            frames,
        };
        let h = self.hits.get_or_insert_with(addr, Hit::default);
        h.episodes += 1;
        h.barrier += u64::from(barrier);
        h.joined += u64::from(joined);
        h.request_timeouts += u64::from(ep.requests);
        if !joined {
            h.last_start_ts = h.last_start_ts.max(ep.start_ts);
        }
        h.stall_total_ns += ep.silent_total_ns;
        h.max_stall_ns = h.max_stall_ns.max(ep.max_gap_ns);
        if ep.max_gap_ns < SHORT_REPAIR_NS {
            h.short_episodes += 1;
            h.max_short_stall_ns = h.max_short_stall_ns.max(ep.max_gap_ns);
        } else {
            h.long_stall_ns += ep.silent_total_ns;
        }
        h.max_flows = h.max_flows.max(flows);
        h.max_fan_in = h.max_fan_in.max(fan_in);
        h.timeouts += u64::from(ep.timeouts);
        if h.first_data_ts == 0 || first_data_ts < h.first_data_ts {
            h.first_data_ts = first_data_ts;
        }
        h.last_data_ts = h.last_data_ts.max(last_data_ts);
        // Keep one example of a round that waited for a timeout among the first few.
        if h.examples.len() < EXAMPLES {
            h.examples.push(e.clone());
        } else if joined && !h.examples.iter().any(|x| x.joined_round) {
            h.examples[EXAMPLES - 1] = e.clone();
        }
        for id in ep.flows {
            if self.caught.len() < CAUGHT_MAX {
                self.caught.insert(id, addr);
            }
        }
        if self.episodes.len() < EPISODES_KEPT {
            self.episodes.push(e);
        }
    }

    /// Adds a repair to the open episode of `addr`, closing the episode first when the repair
    /// is past its window.
    fn add_event(&mut self, addr: IpAddr, e: Event) {
        let window = self.window_ns;
        let i = self.receiver_index(addr);
        if self
            .receivers
            .at_mut(i)
            .open
            .as_ref()
            .is_some_and(|ep| e.ts.saturating_sub(ep.start_ts) > window)
        {
            self.close_episode(addr);
        }
        let floor = self.rto_floor_ns;
        let i = self.receiver_index(addr);
        let r = self.receivers.at_mut(i);
        let ep = r.open.get_or_insert_with(|| Episode {
            start_ts: e.ts,
            ..Episode::default()
        });
        if e.request && ep.events.len() >= EVENTS_KEPT {
            // Could not be confirmed or withdrawn later.
            return;
        }
        ep.silent_total_ns += e.silent_ns;
        let new_flow = !ep.flows.contains(&e.conn);
        if new_flow && ep.flows.len() < 64 {
            ep.flows.push(e.conn);
        }
        if e.request {
            ep.requests += 1;
        } else {
            ep.retransmissions += 1;
        }
        ep.timeouts += u32::from(e.timeout);
        ep.max_gap_ns = ep.max_gap_ns.max(e.gap_ns);
        if e.timeout && !e.request {
            ep.silent_ns = ep.silent_ns.max(e.idle_ns);
        }
        if ep.events.len() < EVENTS_KEPT {
            ep.events.push(e);
        }
        // Counting the fan-in walks the receiver's recent senders: only worth it once the
        // episode has several flows, or when every sender had gone quiet before a timeout.
        if (new_flow && ep.flows.len() >= 2) || (e.timeout && e.idle_ns >= floor) {
            let since = ep
                .start_ts
                .saturating_sub(ep.max_gap_ns)
                .saturating_sub(FANIN_LOOKBACK_NS);
            let (all, open) = r.active.count_since(since);
            let ep = r.open.as_mut().expect("opened above");
            ep.fan_in = ep.fan_in.max(all);
            ep.fan_in_open = ep.fan_in_open.max(open);
        }
    }

    /// Data into `addr` at `ts` ends the silence its pending request timeouts waited in: they
    /// join its episode, the first confirmed one carrying the silence.
    fn resume(&mut self, addr: IpAddr, ts: u64) {
        let Some(r) = self.receivers.get_mut(&addr) else {
            return;
        };
        if r.pending.is_empty() {
            return;
        }
        let mut pending = std::mem::take(&mut r.pending);
        // Confirmed ones first (stable: in resend order otherwise): an unconfirmed one may be
        // withdrawn, and the silence must not go with it.
        pending.sort_by_key(|p| !p.confirmed);
        let mut counted_to = 0;
        for p in pending {
            let silent = ts.saturating_sub(p.silent_since.max(counted_to));
            counted_to = ts;
            self.add_event(
                addr,
                Event {
                    conn: p.conn,
                    frame: p.frame,
                    ts: p.ts,
                    timeout: true,
                    request: true,
                    confirmed: p.confirmed,
                    wait_start: p.wait_start,
                    gap_ns: p.gap_ns,
                    idle_ns: ts.saturating_sub(p.silent_since),
                    silent_ns: silent,
                },
            );
        }
        // The silence up to now is counted: a repair arriving now ended none of it.
        if let Some(r) = self.receivers.get_mut(&addr) {
            r.last_data_ts = r.last_data_ts.max(ts);
        }
    }

    /// A retransmission into its receiver: a repair in the receiver's episode.
    fn repaired(&mut self, x: &Retransmission, timeout: bool) {
        let addr = x.conn.receiver(x.dir).addr;
        self.resume(addr, x.ts);
        let i = self.receiver_index(addr);
        let r = self.receivers.at_mut(i);
        // Called before this segment counts as data: the silence the receiver had from all.
        let idle = if r.last_data_ts == 0 {
            0
        } else {
            x.ts.saturating_sub(r.last_data_ts)
        };
        self.add_event(
            addr,
            Event {
                conn: x.conn.id,
                frame: x.frame,
                ts: x.ts,
                timeout,
                request: false,
                confirmed: true,
                wait_start: x.ts.saturating_sub(x.gap_ns),
                gap_ns: x.gap_ns,
                idle_ns: idle,
                silent_ns: idle.min(x.gap_ns),
            },
        );
    }

    /// The receiver's own data to a sender resent after a timeout: the sender answered
    /// nothing for the RTO floor. Kept until data into the receiver flows again, and counted
    /// only when the sender's answer to the resend confirms it (see [`Detector::spurious`]).
    fn request_timed_out(&mut self, x: &Retransmission) {
        let c = x.conn;
        // Over loopback one address receives both ways: requests and answers cannot be told
        // apart by where they go.
        if c.client.addr == c.server.addr {
            return;
        }
        let Some(r) = self.receivers.get_mut(&c.receiver(x.dir.rev()).addr) else {
            return;
        };
        if r.pending.len() >= PENDING_MAX {
            return;
        }
        let wait_start = x.ts.saturating_sub(x.gap_ns);
        r.pending.push(RequestTimeout {
            conn: c.id,
            frame: x.frame,
            ts: x.ts,
            wait_start,
            gap_ns: x.gap_ns,
            silent_since: r.last_data_ts.max(wait_start),
            confirmed: false,
        });
    }

    /// Whether `c`'s retransmissions were caught in an incast episode: they are then this
    /// detector's evidence, counted here.
    /// Whether this incarnation's retransmissions are an episode's evidence, and if so the
    /// receiver's address.
    pub(crate) fn caught(&mut self, c: &Conn) -> Option<IpAddr> {
        let addr = self.caught.remove(&c.id)?;
        if let Some(h) = self.hits.get_mut(&addr) {
            for k in [
                RetransKind::Rto,
                RetransKind::Fast,
                RetransKind::Tlp,
                RetransKind::Other,
            ] {
                h.folded[k.index()] += u64::from(c.lost_of(k));
            }
            h.folded_flows += 1;
        }
        Some(addr)
    }

    fn finding(&self, addr: &IpAddr, h: &Hit, cfg: &Config, origin: u64) -> Finding {
        let last = self
            .receivers
            .get(addr)
            .map_or(h.last_data_ts, |r| r.last_data_ts.max(h.last_data_ts));
        let span_ns = last.saturating_sub(h.first_data_ts).max(h.stall_total_ns);
        let share = if span_ns > 0 {
            (h.stall_total_ns as f64 / span_ns as f64).min(1.0)
        } else {
            0.0
        };
        let worst = Duration::from_nanos(h.max_stall_ns);
        let remedy = if h.short_episodes * 2 > h.episodes {
            let most = if h.short_episodes == h.episodes {
                String::new()
            } else {
                format!(" in {} of {} episodes", h.short_episodes, h.episodes)
            };
            // The few episodes that waited for a timeout may still be most of the cost.
            let long = if h.long_stall_ns * 2 > h.stall_total_ns {
                format!(
                    ", except in {} that waited up to {} for a retransmission timeout ({} of the cost)",
                    h.episodes - h.short_episodes,
                    us(h.max_stall_ns / 1_000),
                    us(h.long_stall_ns / 1_000)
                )
            } else {
                String::new()
            };
            format!(
                "the losses were repaired after at most {}{most}, not after the default 200 ms RTO floor: a lowered rto_min (or fast recovery) is in effect{long}; they still cost",
                us(h.max_short_stall_ns / 1_000)
            )
        } else {
            "each repair waited for a retransmission timeout; the rounds lost".to_string()
        };
        let folded: u64 = h.folded.iter().sum();
        let mut f = Finding::new(
            Pathology::Incast,
            Source::Analyze,
            format!(
                "{} synchronized loss episode(s) into {addr}: up to {} flows lost segments within {} ms of each other (fan-in {}){}{}{}; {remedy} {} in all, in which the receiver heard from no sender ({:.1}% of the receiver's {}), longest {}",
                h.episodes - h.joined,
                h.max_flows,
                cfg.incast_window.as_millis(),
                h.max_fan_in,
                match h.barrier {
                    0 => String::new(),
                    n => format!("; in {n} of them every sender went silent until a timeout"),
                },
                match h.joined {
                    0 => String::new(),
                    n => format!("; in {n} more round stall(s) a flow whose segments the round's burst had taken waited for a retransmission timeout after the others' losses"),
                },
                match h.request_timeouts {
                    0 => String::new(),
                    n => format!("; {n} of the timeouts were the receiver's own requests, resent after its timer and reported back by the senders in D-SACKs: the requests had arrived, the senders' whole answers were lost (the resends are spurious, not loss)"),
                },
                us(h.stall_total_ns / 1_000),
                100.0 * share,
                us(span_ns / 1_000),
                us(h.max_stall_ns / 1_000),
            ),
            Impact::stalls(h.episodes, None, Some(worst)).with_time_lost_of(
                Duration::from_nanos(h.stall_total_ns),
                Duration::from_nanos(span_ns),
            ),
        )
        .arithmetic(
            format!(
                "{:.3} s the receiver heard from no sender while repairs were pending / {:.3} s of traffic into the receiver",
                h.stall_total_ns as f64 / 1e9,
                span_ns as f64 / 1e9
            ),
            share,
        );
        if folded > 0 {
            f = f.with_evidence(Evidence::Examples {
                what: "retransmissions of the flows caught in these episodes (not reported again as retransmissions or timeouts)".into(),
                items: vec![format!(
                    "{folded} in {} flow(s): {} after a timeout, {} fast, {} TLP, {} other",
                    h.folded_flows,
                    h.folded[RetransKind::Rto.index()],
                    h.folded[RetransKind::Fast.index()],
                    h.folded[RetransKind::Tlp.index()],
                    h.folded[RetransKind::Other.index()],
                )],
            });
        }
        for e in &h.examples {
            f = f.with_evidence(Evidence::Packets {
                flow: format!("* > {}", e.receiver),
                frames: e.frames.clone(),
                description: if e.joined_round {
                    format!(
                        "{} flow(s) waited ~{} for a timeout after the round's synchronized losses{}; the receiver heard from no sender for {} ({:.3} s into the capture)",
                        e.flows_lost,
                        us(e.stall_us),
                        match e.request_timeouts {
                            0 => String::new(),
                            n => format!(" ({n} of them the receiver's request, resent and D-SACKed: the answer was lost)"),
                        },
                        us(e.silent_us),
                        e.at_us.saturating_sub(origin / 1_000) as f64 / 1e6
                    )
                } else if e.receiver_silent_us > 0 {
                    format!(
                        "{} of {} senders resent after ~{}; the receiver heard from none of them for {} ({:.3} s into the capture)",
                        e.flows_lost,
                        e.fan_in,
                        us(e.stall_us),
                        us(e.receiver_silent_us),
                        e.at_us.saturating_sub(origin / 1_000) as f64 / 1e6
                    )
                } else {
                    format!(
                        "{} of {} flows lost segments within {} ms and resent after up to {} ({} timeout(s); {:.3} s into the capture)",
                        e.flows_lost,
                        e.fan_in,
                        cfg.incast_window.as_millis(),
                        us(e.stall_us),
                        e.timeouts,
                        e.at_us.saturating_sub(origin / 1_000) as f64 / 1e6
                    )
                },
            });
        }
        f
    }
}

/// A client's first data resent while the server has acknowledged none of it and sent no
/// data since its SYN-ACK: the server may never have taken the handshake (a full accept
/// queue drops the final ACK and the data after it, `tcp_check_req`, net/ipv4/tcp_minisocks.c),
/// which a capture cannot tell from a loss on the path. Clients resending their requests
/// together into such a server are no evidence of synchronized loss at a bottleneck.
pub(crate) fn handshake_maybe_not_taken(c: &Conn, d: Dir) -> bool {
    let (sent, server) = (&c.half[d], &c.half[d.rev()]);
    d == Dir::C2s
        && server.bytes == 0
        && sent.isn.is_some()
        && server.last_ack == sent.isn.map(|i| i.wrapping_add(1))
}

impl Detector for Incast {
    /// Refreshes the receiver's fan-in bookkeeping.
    #[inline]
    fn data(&mut self, c: &mut Conn, d: Dir, ts: u64) {
        self.now = self.now.max(ts);
        let epoch = self.receivers.epoch();
        let h = &mut c.half[d];
        let known = h.receiver_idx != 0 && h.receiver_epoch == epoch;
        if known {
            let r = self.receivers.at_mut(h.receiver_idx - 1);
            r.last_data_ts = r.last_data_ts.max(ts);
            let pending = !r.pending.is_empty();
            let fresh = h.fanin_reported_ts != 0
                && ts.saturating_sub(h.fanin_reported_ts) < FANIN_REFRESH_NS;
            if pending {
                self.resume(c.receiver(d).addr, ts);
            }
            if fresh {
                return;
            }
        }
        c.half[d].fanin_reported_ts = ts;
        let i = if known {
            c.half[d].receiver_idx - 1
        } else {
            let i = self.receiver_index(c.receiver(d).addr);
            // Positions in the old table's lists mean nothing now.
            for h in [&mut c.half.c2s, &mut c.half.s2c] {
                if h.receiver_epoch != self.receivers.epoch() {
                    h.fanin_pos = 0;
                    h.receiver_idx = 0;
                }
            }
            c.half[d].receiver_idx = i + 1;
            c.half[d].receiver_epoch = self.receivers.epoch();
            i
        };
        if !self.receivers.at_mut(i).pending.is_empty() {
            self.resume(c.receiver(d).addr, ts);
        }
        let r = self.receivers.at_mut(i);
        r.last_data_ts = r.last_data_ts.max(ts);
        if r.first_data_ts == 0 {
            r.first_data_ts = ts;
        }
        // Over loopback both directions go into one receiver: one entry for the connection.
        let at = if c.client.addr == c.server.addr {
            Dir::C2s
        } else {
            d
        };
        c.half[at].fanin_pos = r.active.insert(c.id, ts, c.half[at].fanin_pos);
    }

    fn retransmitted(&mut self, x: &Retransmission) {
        self.now = self.now.max(x.ts);
        let timeout = x.kind == RetransKind::Rto;
        // Not a loss into the server that the capture can show; when the server's D-SACK
        // later says it had the data, it was a request of the client's fan-in instead.
        if !handshake_maybe_not_taken(x.conn, x.dir) {
            self.repaired(x, timeout);
        }
        if timeout {
            self.request_timed_out(x);
        }
    }

    /// A retransmission the receiver already had is no loss: it leaves the open episode
    /// (and the episode its flow, when it was the flow's only one). When it was a receiver's
    /// request resent after a timeout, the D-SACK says the request had arrived; if the
    /// sender's sequence number is past what the receiver acknowledged, the sender had
    /// answered and the answer was lost: the receiver's wait was a repair of its fan-in.
    fn spurious(&mut self, c: &Conn, d: Dir, frame: u64) {
        let answer_lost = c.half[d.rev()]
            .next_seq
            .is_some_and(|n| c.half[d].last_ack.is_none_or(|a| n > a));
        if answer_lost && c.client.addr != c.server.addr {
            if let Some(r) = self.receivers.get_mut(&c.receiver(d.rev()).addr) {
                let mine = |conn: u64, f: u64| conn == c.id && f == frame;
                if let Some(p) = r.pending.iter_mut().find(|p| mine(p.conn, p.frame)) {
                    p.confirmed = true;
                } else if let Some(e) = r.open.as_mut().and_then(|ep| {
                    ep.events
                        .iter_mut()
                        .find(|e| e.request && mine(e.conn, e.frame))
                }) {
                    e.confirmed = true;
                }
            }
        }
        let Some(r) = self.receivers.get_mut(&c.receiver(d).addr) else {
            return;
        };
        let Some(ep) = r.open.as_mut() else {
            return;
        };
        let Some(i) = ep
            .events
            .iter()
            .position(|e| !e.request && e.frame == frame && e.conn == c.id)
        else {
            return;
        };
        ep.withdraw(i);
    }

    /// A closed connection is no longer waiting (it counts for the barrier form no more).
    fn closed(&mut self, c: &mut Conn) {
        let epoch = self.receivers.epoch();
        for d in [Dir::C2s, Dir::S2c] {
            let h = &c.half[d];
            if h.receiver_idx != 0 && h.receiver_epoch == epoch {
                let pos = h.fanin_pos;
                let r = self.receivers.at_mut(h.receiver_idx - 1);
                r.active.close(pos);
                // Over loopback the sighting is kept in the client half.
                if c.client.addr == c.server.addr {
                    r.active.close(c.half.c2s.fanin_pos);
                }
            }
        }
    }

    /// Prunes the fan-in lists and judges episodes whose window has passed.
    fn sweep(&mut self, now: u64) {
        self.now = self.now.max(now);
        let keep = now.saturating_sub(FANIN_KEEP_NS);
        let window = self.window_ns;
        let mut due = Vec::new();
        for (addr, r) in self.receivers.iter() {
            if r.open
                .as_ref()
                .is_some_and(|ep| now.saturating_sub(ep.start_ts) > window)
            {
                due.push(*addr);
            }
        }
        for addr in due {
            self.close_episode(addr);
        }
        for r in self.receivers.values_mut() {
            r.active.retain_since(keep);
        }
    }

    fn flush(&mut self) {
        let open: Vec<IpAddr> = self
            .receivers
            .iter()
            .filter(|(_, r)| r.open.is_some())
            .map(|(a, _)| *a)
            .collect();
        for addr in open {
            self.close_episode(addr);
        }
    }

    fn conclude(mut self, ctx: &Context, out: &mut Conclusion) {
        self.flush();
        let origin = ctx.first_ts_ns;
        let mut hits: Vec<(&IpAddr, &Hit)> = self.hits.iter().collect();
        hits.sort_by(|a, b| {
            b.1.stall_total_ns
                .cmp(&a.1.stall_total_ns)
                .then(a.0.cmp(b.0))
        });
        for (addr, h) in hits {
            out.findings.push(self.finding(addr, h, ctx.cfg, origin));
        }
        let mut eps = self.episodes;
        for e in &mut eps {
            e.at_us = e.at_us.saturating_sub(origin / 1_000);
        }
        out.details.incast = eps;
        out.details.receivers_dropped = self.receivers_dropped;
    }
}

#[cfg(test)]
mod tests {
    use super::Active;

    #[test]
    fn fan_in_counts_each_connection_once_by_its_latest_sighting() {
        let mut a = Active::default();
        let p1 = a.insert(1, 100, 0);
        let p2 = a.insert(2, 110, 0);
        // Connection 1 seen again later: its first sighting no longer counts.
        let p1 = a.insert(1, 300, p1);
        assert_eq!(a.count_since(0), (2, 2));
        assert_eq!(a.count_since(200), (1, 1));
        // A straggler: an earlier time behind a later one is still found.
        let p3 = a.insert(3, 250, 0);
        assert_eq!(a.count_since(200), (2, 2));
        assert_eq!(a.count_since(301), (0, 0));
        // A closed connection still counts, but not as open.
        a.close(p3);
        assert_eq!(a.count_since(200), (2, 1));
        // The sweep forgets sightings before 120 (connection 2); positions stay valid.
        a.retain_since(120);
        assert_eq!(a.count_since(0), (2, 1));
        a.insert(1, 400, p1);
        a.insert(2, 410, p2);
        assert_eq!(a.count_since(0), (3, 2));
        assert_eq!(a.count_since(350), (2, 2));
    }
}
