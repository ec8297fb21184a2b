//! The streaming flow engine: segments in (in capture order), per-incarnation state updated
//! in place, finished incarnations summarised into the detectors and evicted.
//!
//! Memory follows the connections that are open: a closed incarnation is summarised a
//! couple of seconds after its close, one that only sent SYNs as soon as its SYN ladder says
//! the client has given up ([`crate::ladder`]), an idle one after `idle_timeout`. What stays
//! is a small tombstone per 4-tuple for the TIME_WAIT horizon (to recognise reuse), at most
//! [`TOMBSTONES_MAX`] of them; and at most [`HALF_OPEN_MAX`] connections waiting for an
//! answer to their SYN are held at once. Both limits are counted in [`Totals`] when reached.

use std::collections::VecDeque;
use std::time::Duration;

use tcpdoctor_capture::Segment;
use tcpdoctor_model::PortRange;

use crate::detect::Detectors;
use crate::flow::{CloseKind, Conn, Dir, Endpoint, FlowRow, RetransKind, Reuse, Tomb};
use crate::ladder::Ladders;
use crate::prepare::{Prepare, Released, SegKey};
use crate::seq::SeqNumber;
use crate::timeline::{Mark, MarkKind, Worst};
use crate::Analysis;

/// Tunables of the analysis. Defaults are Linux's.
#[derive(Clone, Debug)]
pub struct Config {
    /// Floor of a data retransmission timeout: 200 ms (`TCP_RTO_MIN`, include/net/tcp.h;
    /// RFC 6298 section 2.4 recommends 1 s, Linux uses 200 ms). An idle gap of at least 90%
    /// of it ended by a retransmission counts as a timeout (the timer is armed by the last
    /// ACK, which a capture point may see slightly earlier than the sender did).
    pub rto_min: Duration,
    /// How long the closing side holds TIME_WAIT: 60 s (`TCP_TIMEWAIT_LEN`,
    /// include/net/tcp.h). Reuse within it can collide; it also sets the port budget.
    pub time_wait: Duration,
    /// Open connections silent longer than this are summarised and evicted.
    pub idle_timeout: Duration,
    /// The clients' ephemeral port range (`net.ipv4.ip_local_port_range`), when known. A
    /// capture does not say it: `None` judges against Linux's default (32768-60999), or
    /// against a smaller block of ports that the clients filled completely.
    pub port_range: Option<PortRange>,
    /// Link speed for the microburst table, when known.
    pub link_speed_bits_per_s: Option<u64>,
    /// Retransmission timeouts of different flows into one receiver this close together
    /// count as one synchronized incast episode.
    pub incast_window: Duration,
    /// Fewest distinct flows in an incast episode.
    pub incast_min_flows: u32,
    /// Keep one [`FlowRow`] per incarnation (for `--flows`); costs memory per connection.
    pub keep_flows: bool,
    /// Keep the frame number and kind of every retransmission (for cross-checks).
    pub keep_retransmissions: bool,
    /// Keep the timelines of this many connections that waited longest (for charts; 0: none).
    pub timelines: usize,
}

impl Default for Config {
    fn default() -> Config {
        Config {
            rto_min: Duration::from_millis(200),
            time_wait: Duration::from_secs(60),
            idle_timeout: Duration::from_secs(300),
            port_range: None,
            link_speed_bits_per_s: None,
            incast_window: Duration::from_millis(20),
            incast_min_flows: 3,
            keep_flows: false,
            keep_retransmissions: false,
            timelines: 0,
        }
    }
}

/// Closed connections stay whole this long (capture time) to absorb late ACKs, resets and
/// retransmitted FINs before they are summarised.
const CLOSE_LINGER_NS: u64 = 2_000_000_000;
/// How often (capture time) closed connections that have lingered are summarised.
const SWEEP_EVERY_NS: u64 = 1_000_000_000;
/// How often (capture time) the whole table is walked for idle connections and old
/// tombstones. Both are also checked when their 4-tuple is looked up, so the results do not
/// depend on this period; it only bounds memory.
const SCAN_EVERY_NS: u64 = 10_000_000_000;
/// Tombstones are kept this long past the TIME_WAIT length.
const FORGET_AFTER_TIME_WAIT_NS: u64 = 5_000_000_000;
/// At most this many tombstones (4-tuples remembered after their last incarnation was
/// summarised, for TIME_WAIT reuse) are kept; past it the oldest are forgotten before their
/// TIME_WAIT horizon (counted in [`Totals::tombstones_forgotten_early`]). About 40 MiB.
pub const TOMBSTONES_MAX: usize = 1 << 18;
/// At most this many connections that have sent only SYNs are held; past it the oldest is
/// summarised as unanswered before its ladder ended (counted in
/// [`Totals::half_open_summarised_early`]): a SYN flood. About 60 MiB (960 bytes a `Conn`).
pub const HALF_OPEN_MAX: usize = 1 << 16;

#[derive(Default)]
struct Slot {
    conn: Option<Box<Conn>>,
    prev: Option<Tomb>,
    incarnations: u32,
}

/// One connection in the [`HalfOpenQueue`].
#[derive(Clone, Copy)]
struct HalfOpen {
    deadline: u64,
    slot: u32,
    id: u64,
    /// Cleared once the connection was seen answered: the entry is then passed over without
    /// a look at its slot (a connection never becomes half-open again, so the look would
    /// pass it over too).
    live: bool,
    /// Held past Linux's ladders for a resend on the classic one (at most
    /// [`crate::ladder::CLASSIC_WAIT_MAX`] such entries at once).
    classic: bool,
}

/// The connections that have sent only SYNs, in the order they were queued. Each entry has
/// a position counted since the start (its connection keeps it, [`Conn::half_open_at`]), so
/// the engine can mark an entry as answered while the connection is in the caches, instead
/// of visiting the connection again when the entry's deadline comes (for most connections,
/// seconds later and out of every cache).
struct HalfOpenQueue {
    items: VecDeque<HalfOpen>,
    /// Position of `items[0]`.
    base: u64,
    /// Entries with `classic` set.
    classic: usize,
    /// The deadline of `items[0]` (`u64::MAX` when empty): what every segment checks.
    front_deadline: u64,
}

impl Default for HalfOpenQueue {
    fn default() -> HalfOpenQueue {
        HalfOpenQueue {
            items: VecDeque::new(),
            base: 0,
            classic: 0,
            front_deadline: u64::MAX,
        }
    }
}

impl HalfOpenQueue {
    /// Queues a connection; returns its position + 1 (for [`settle`](Self::settle)).
    fn push_back(&mut self, deadline: u64, slot: u32, id: u64, classic: bool) -> u64 {
        self.classic += usize::from(classic);
        self.items.push_back(HalfOpen {
            deadline,
            slot,
            id,
            live: true,
            classic,
        });
        if self.items.len() == 1 {
            self.front_deadline = deadline;
        }
        self.base + self.items.len() as u64
    }

    fn front(&self) -> Option<&HalfOpen> {
        self.items.front()
    }

    /// Whether the front entry's deadline is before `ts` (false when empty).
    #[inline(always)]
    fn due_before(&self, ts: u64) -> bool {
        self.front_deadline < ts
    }

    fn pop_front(&mut self) -> Option<HalfOpen> {
        let e = self.items.pop_front()?;
        self.base += 1;
        self.classic -= usize::from(e.classic);
        self.front_deadline = self.items.front().map_or(u64::MAX, |f| f.deadline);
        Some(e)
    }

    /// Entries, answered ones included (the bound [`HALF_OPEN_MAX`] counts them all).
    fn len(&self) -> usize {
        self.items.len()
    }

    /// Marks the entry at `at` (position + 1) as answered, if it is still queued and is the
    /// connection `id` in `slot`.
    fn settle(&mut self, at: u64, slot: u32, id: u64) {
        let Some(i) = at.checked_sub(1 + self.base) else {
            return;
        };
        if let Some(e) = self.items.get_mut(i as usize) {
            if e.slot == slot && e.id == id {
                e.live = false;
            }
        }
    }
}

/// Counts over the whole capture.
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize)]
pub struct Totals {
    pub segments: u64,
    /// Connection incarnations seen (a reused 4-tuple counts once per SYN).
    pub connections: u64,
    /// Incarnations opened by a client's SYN (connection attempts).
    pub connection_attempts: u64,
    pub connections_with_handshake: u64,
    pub payload_bytes: u64,
    pub data_segments: u64,
    /// Everything Wireshark's `tcp.analysis.retransmission` would flag (RTO, fast, TLP, SYN).
    pub retransmissions: u64,
    pub retransmitted_bytes: u64,
    pub retransmissions_rto: u64,
    pub retransmissions_fast: u64,
    pub retransmissions_tlp: u64,
    pub retransmissions_syn: u64,
    pub retransmissions_other: u64,
    /// Of `retransmissions`, those found spurious: the receiver already had the data (it had
    /// acknowledged it before the copy was sent, or reported the copy in a D-SACK).
    pub retransmissions_spurious: u64,
    pub out_of_order: u64,
    /// SYNs on a 4-tuple that already carried a connection in this capture.
    pub reused_ports: u64,
    pub zero_window_ads: u64,
    pub resets: u64,
    /// Segments that were an exact copy of their connection's previous segment, captured
    /// within [`crate::track::DUPLICATE_WITHIN`] of it (one packet seen twice: two capture
    /// points, a bridge and its port); left out of every count above.
    pub duplicates: u64,
    /// Highest number of connections held at once (bounded-memory check).
    pub peak_tracked_connections: u64,
    /// Connections that had sent only SYNs and were summarised as unanswered before their
    /// SYN ladder ended, because [`HALF_OPEN_MAX`] were waiting at once.
    pub half_open_summarised_early: u64,
    /// 4-tuples forgotten before their TIME_WAIT horizon because [`TOMBSTONES_MAX`] were
    /// remembered: a reuse of one of them would go unnoticed.
    pub tombstones_forgotten_early: u64,
}

/// The flow engine plus detectors. Feed segments with [`Analyzer::push`], then
/// [`Analyzer::finish`].
pub struct Analyzer {
    cfg: Config,
    /// Per 4-tuple, indexed by the slot number a [`Prepare`] gives it.
    slots: Vec<Slot>,
    /// The [`Prepare`] of [`push`](Self::push); unused with [`push_keyed`](Self::push_keyed).
    own: Prepare,
    /// Slots emptied since [`released`](Self::released) was last called.
    released: Vec<Released>,
    totals: Totals,
    retransmitted: Vec<(u64, RetransKind)>,
    first_ts: Option<u64>,
    last_ts: u64,
    next_sweep: u64,
    next_scan: u64,
    /// Connections that closed, in the order they did: (capture time queued, slot, id).
    closing: VecDeque<(u64, u32, u64)>,
    /// Connections that have sent only SYNs, in the order they opened. The deadline is when
    /// the ladder says the client gave up, unless it resent since.
    half_open: HalfOpenQueue,
    /// Tombstones in the order they were left: (slot, the tombstone's last_ts).
    tombs: VecDeque<(u32, u64)>,
    ladders: Ladders,
    next_id: u64,
    done: Done,
}

/// Where summarised incarnations go: the detectors and the `--flows` rows; their boxes are
/// kept for new connections.
struct Done {
    detectors: Detectors,
    rows: Vec<FlowRow>,
    worst: Worst,
    /// Connections held in slots now.
    open: u64,
    /// Boxes of summarised connections, reused for new ones (saves an allocation each).
    /// Boxed because they move in and out of slots without copying the ~1 KB `Conn`.
    #[allow(clippy::vec_box)]
    pool: Vec<Box<Conn>>,
}

impl Done {
    /// Takes the connection out of `slot` (if it holds one), summarises it as ended by `how`
    /// (by its own close state when `None`; one that only sent SYNs as unanswered), and keeps
    /// up to 4096 boxes for reuse. Returns the tombstone's time when it left one in the slot:
    /// an unanswered SYN leaves none (no connection existed to collide with later), so the
    /// slot keeps the tombstone it had.
    fn retire(
        &mut self,
        slot: &mut Slot,
        how: Option<CloseKind>,
        cfg: &Config,
        origin: u64,
    ) -> Option<u64> {
        let mut c = slot.conn.take()?;
        self.open -= 1;
        let close = match how {
            Some(k) => k,
            None if c.half_open() => CloseKind::Unanswered,
            None => c.close,
        };
        let tomb = finish_conn(
            &mut c,
            close,
            &mut self.detectors,
            &mut self.rows,
            &mut self.worst,
            cfg,
            origin,
        );
        if self.pool.len() < 4096 {
            self.pool.push(c);
        }
        if close == CloseKind::Unanswered {
            return None;
        }
        slot.prev = Some(tomb);
        Some(tomb.last_ts)
    }
}

impl Analyzer {
    pub fn new(cfg: Config) -> Analyzer {
        Analyzer {
            done: Done {
                detectors: Detectors::new(&cfg),
                rows: Vec::new(),
                worst: Worst::new(cfg.timelines),
                open: 0,
                pool: Vec::new(),
            },
            cfg,
            slots: Vec::new(),
            own: Prepare::default(),
            released: Vec::new(),
            totals: Totals::default(),
            retransmitted: Vec::new(),
            first_ts: None,
            last_ts: 0,
            next_sweep: 0,
            next_scan: 0,
            closing: VecDeque::new(),
            half_open: HalfOpenQueue::default(),
            tombs: VecDeque::new(),
            ladders: Ladders::default(),
            next_id: 0,
        }
    }

    /// Segments so far.
    pub fn segments(&self) -> u64 {
        self.totals.segments
    }

    /// Takes one segment. Segments must come in capture order.
    pub fn push(&mut self, s: &Segment) {
        let k = self.own.key(s);
        self.take(s, k);
        if !self.released.is_empty() {
            self.own.release(&self.released);
            self.released.clear();
        }
    }

    /// Takes one segment with its key from a [`Prepare`]; finish with
    /// [`finish_prepared`](Self::finish_prepared).
    pub fn push_keyed(&mut self, s: &Segment, k: &SegKey) {
        self.take(s, *k);
    }

    /// [`push_keyed`](Self::push_keyed) for a batch, asking the CPU for the flow state a
    /// few segments ahead while it works on the current one: with connections churning,
    /// most segments' state was last touched thousands of segments ago.
    pub fn push_batch(&mut self, segs: &[Segment], keys: &[SegKey]) {
        /// How far ahead the slot is fetched, and then the connection it points to.
        const SLOT_AHEAD: usize = 8;
        const CONN_AHEAD: usize = 4;
        let n = segs.len().min(keys.len());
        let (segs, keys) = (&segs[..n], &keys[..n]);
        for i in 0..n {
            if i + SLOT_AHEAD < n {
                self.prefetch_slot(keys[i + SLOT_AHEAD].slot);
            }
            if i + CONN_AHEAD < n {
                self.prefetch_conn(&segs[i + CONN_AHEAD], keys[i + CONN_AHEAD].slot);
            }
            // Inlined here (and only here): the loop sets up once what a call would set up
            // for every segment.
            self.take_inline(&segs[i], keys[i]);
        }
    }

    /// [`push_batch`](Self::push_batch)'s first look ahead: the slot of a coming segment.
    #[inline(always)]
    fn prefetch_slot(&self, slot: u32) {
        if let Some(slot) = self.slots.get(slot as usize) {
            prefetch(slot);
        }
    }

    /// [`push_batch`](Self::push_batch)'s second look ahead: the connection a coming segment
    /// `s` (of `slot`) will update, and the pool's top box when `s` is a SYN.
    #[inline(always)]
    fn prefetch_conn(&self, s: &Segment, slot: u32) {
        let syn = s.flags.syn();
        if let Some(c) = self
            .slots
            .get(slot as usize)
            .and_then(|x| x.conn.as_deref())
        {
            if syn && !s.flags.ack() {
                // A SYN on a 4-tuple that holds a connection: mostly a reuse, which
                // summarises the old incarnation (every detector reads some of it).
                prefetch_lines(c, CONN_LINES);
            } else {
                // The hot lines (see `Conn`, `Half`): the first two of the connection
                // and of each direction.
                prefetch_lines(c, 2);
                prefetch_lines(&c.half.c2s, 2);
                prefetch_lines(&c.half.s2c, 2);
            }
        }
        // A SYN ahead will take the pool's top box: its old contents are read (to be
        // dropped) and overwritten, and it was last touched seconds ago.
        if syn {
            if let Some(b) = self.done.pool.last() {
                prefetch_lines(&**b, CONN_LINES);
            }
        }
    }

    /// Moves the slots emptied since the last call into `out` (for [`Prepare::release`]).
    pub fn released(&mut self, out: &mut Vec<Released>) {
        out.append(&mut self.released);
    }

    /// Moves the capture's clock to `ts`: counts the segment, and ends the connections idle
    /// past their timeout and the half-open ones whose SYN ladder ran out.
    #[inline(always)]
    fn advance_clock(&mut self, ts: u64) {
        self.totals.segments += 1;
        if self.first_ts.is_none() {
            self.first_ts = Some(ts);
            self.next_sweep = ts + SWEEP_EVERY_NS;
            self.next_scan = ts + SCAN_EVERY_NS;
        }
        self.last_ts = self.last_ts.max(ts);
        if ts >= self.next_sweep {
            self.sweep(ts);
            self.next_sweep = ts + SWEEP_EVERY_NS;
        }
        // Half-open connections end when their ladder runs out, to the segment: their
        // number is what a SYN flood makes grow.
        if self.half_open.due_before(ts) {
            self.sweep_half_open(ts);
        }
    }

    /// [`take_inline`](Self::take_inline) for one segment at a time.
    #[inline(never)]
    fn take(&mut self, s: &Segment, k: SegKey) {
        self.take_inline(s, k);
    }

    /// Takes one segment with its key: the engine's work for every segment.
    #[inline(always)]
    fn take_inline(&mut self, s: &Segment, k: SegKey) {
        let (idx, from_lo) = (k.slot, k.from_lo);
        let ts = s.ts_ns;
        self.advance_clock(ts);
        let pure_syn = s.flags.syn() && !s.flags.ack();
        if idx as usize >= self.slots.len() {
            self.slots.resize_with(idx as usize + 1, Slot::default);
        }
        let slot = &self.slots[idx as usize];
        let idle_ns = self.cfg.idle_timeout.as_nanos() as u64;
        // A connection that only sent SYNs ends with its SYN ladder, whatever the idle
        // timeout; any other ends after the idle timeout.
        let ended = slot.conn.as_deref().and_then(|c| {
            if c.half_open() {
                // Past Linux's ladders only while held for the classic one (the sweep
                // ended the others).
                (ts > self.ladders.deadline_ns(c, true)).then_some(CloseKind::Unanswered)
            } else {
                (ts.saturating_sub(c.last_ts) > idle_ns).then_some(CloseKind::Idle)
            }
        });
        if let Some(how) = ended {
            self.end_in_slot(idx, how, ts);
        }
        let slot = &self.slots[idx as usize];
        let new_incarnation = match &slot.conn {
            None => true,
            Some(c) => {
                pure_syn
                    && !(c.client_lo == from_lo && c.half.c2s.isn == Some(SeqNumber(s.seq)))
                    && !syn_after_its_answer(c, s, from_lo)
            }
        };
        if pure_syn && !new_incarnation && slot.conn.as_deref().is_some_and(|c| c.syn_count == 0) {
            // The SYN of a handshake whose SYN-ACK the capture holds first.
            self.totals.connection_attempts += 1;
        }
        if new_incarnation {
            self.open_in_slot(idx, s, pure_syn, from_lo);
        }
        let slot = &mut self.slots[idx as usize];
        let Some(conn) = slot.conn.as_deref_mut() else {
            return;
        };
        let open_before = conn.close == CloseKind::Open;
        let d = if conn.client_lo == from_lo {
            Dir::C2s
        } else {
            Dir::S2c
        };
        let kind = crate::track::segment(
            conn,
            s,
            d,
            crate::track::fingerprint(s, from_lo),
            &self.cfg,
            &mut self.done.detectors,
            &mut self.totals,
        );
        if open_before && conn.close != CloseKind::Open {
            self.closing.push_back((ts, idx, conn.id));
            self.done.detectors.closed(conn);
        }
        if conn.half_open_at != 0 && !conn.half_open() {
            // Answered (or closed): its entry in the queue needs no look at the slot later.
            self.half_open.settle(conn.half_open_at, idx, conn.id);
            conn.half_open_at = 0;
        }
        if new_incarnation && pure_syn && conn.half_open() {
            // Opened by a SYN: half-open until answered, or until its ladder runs out.
            let deadline = self.ladders.deadline_ns(conn, false);
            conn.half_open_at = self.half_open.push_back(deadline, idx, conn.id, false);
        }
        if let Some(k) = kind.filter(|_| self.cfg.keep_retransmissions) {
            self.retransmitted.push((s.frame, k));
        }
        if self.half_open.len() > HALF_OPEN_MAX {
            self.drop_half_open(ts, idx);
        }
    }

    /// Summarises the connection in slot `idx`, ended by `how` before the segment at `ts`
    /// (its ladder ran out, or it was idle past the timeout). Out of line: rare, and
    /// [`take_inline`](Self::take_inline)'s common path stays small.
    #[cold]
    #[inline(never)]
    fn end_in_slot(&mut self, idx: u32, how: CloseKind, ts: u64) {
        let origin = self.first_ts.unwrap_or(ts);
        let slot = &mut self.slots[idx as usize];
        if let Some(t) = self.done.retire(slot, Some(how), &self.cfg, origin) {
            self.tombs.push_back((idx, t));
        }
    }

    /// Starts a new incarnation in slot `idx` with segment `s`, summarising the one it
    /// replaces. Out of line: once per connection, and the common path of
    /// [`take_inline`](Self::take_inline) (a segment of a known connection) stays small.
    #[inline(never)]
    fn open_in_slot(&mut self, idx: u32, s: &Segment, pure_syn: bool, from_lo: bool) {
        let ts = s.ts_ns;
        let origin = self.first_ts.unwrap_or(ts);
        let slot = &mut self.slots[idx as usize];
        if let Some(t) = self.done.retire(slot, None, &self.cfg, origin) {
            self.tombs.push_back((idx, t));
        }
        let r = roles(s, pure_syn, from_lo);
        slot.incarnations += 1;
        self.next_id += 1;
        self.totals.connections += 1;
        self.done.open += 1;
        self.totals.peak_tracked_connections =
            self.totals.peak_tracked_connections.max(self.done.open);
        let (id, inc) = (self.next_id, slot.incarnations);
        let mut conn = match self.done.pool.pop() {
            Some(mut b) => {
                b.renew(id, inc, r.client, r.server, r.known, ts);
                b
            }
            None => Box::new(Conn::new(id, inc, r.client, r.server, r.known, ts)),
        };
        conn.first_frame = s.frame;
        conn.client_lo = r.client_lo;
        if pure_syn {
            self.totals.connection_attempts += 1;
            let forget = self.cfg.time_wait.as_nanos() as u64 + FORGET_AFTER_TIME_WAIT_NS;
            conn.reuse = reuse_of(slot.prev, r.client_lo, ts, forget);
            self.totals.reused_ports += u64::from(conn.reuse.is_some());
            self.done.detectors.opened(&conn, ts);
        }
        slot.conn = Some(conn);
    }

    /// Summarises the oldest half-open connection (or drops queue entries of connections
    /// answered since) until the queue is back under [`HALF_OPEN_MAX`].
    /// `taking` is the slot of the segment being taken: it is not summarised under it.
    fn drop_half_open(&mut self, now: u64, taking: u32) {
        let origin = self.first_ts.unwrap_or(now);
        while self.half_open.len() > HALF_OPEN_MAX {
            let Some(HalfOpen {
                slot: i, id, live, ..
            }) = self.half_open.pop_front()
            else {
                break;
            };
            if !live {
                continue;
            }
            if i == taking {
                let at = self.half_open.push_back(0, i, id, false);
                if let Some(c) = self.slots[i as usize].conn.as_deref_mut() {
                    if c.id == id {
                        c.half_open_at = at;
                    }
                }
                continue;
            }
            let slot = &mut self.slots[i as usize];
            if slot
                .conn
                .as_deref()
                .is_some_and(|c| c.id == id && c.half_open())
            {
                self.totals.half_open_summarised_early += 1;
                self.done
                    .retire(slot, Some(CloseKind::Unanswered), &self.cfg, origin);
                self.release_if_empty(i);
            }
        }
    }

    /// Hands slot `i` back to the [`Prepare`] when it holds neither a connection nor a
    /// tombstone.
    fn release_if_empty(&mut self, i: u32) {
        let slot = &mut self.slots[i as usize];
        if slot.conn.is_none() && slot.prev.is_none() {
            *slot = Slot::default();
            // The segment being taken (counted from 0): every one before it has been.
            let at = self.totals.segments.saturating_sub(1);
            self.released.push(Released { slot: i, at });
        }
    }

    /// Summarises half-open connections whose ladder has run out.
    fn sweep_half_open(&mut self, now: u64) {
        let origin = self.first_ts.unwrap_or(now);
        while let Some(&HalfOpen {
            deadline,
            slot: i,
            id,
            live,
            classic,
        }) = self.half_open.front()
        {
            if deadline >= now {
                break;
            }
            self.half_open.pop_front();
            if !live {
                continue;
            }
            let slot = &mut self.slots[i as usize];
            let Some(c) = slot
                .conn
                .as_deref_mut()
                .filter(|c| c.id == id && c.half_open())
            else {
                continue;
            };
            let due = self.ladders.deadline_ns(c, classic);
            if due >= now {
                // Resent since: look again at the new deadline.
                c.half_open_at = self.half_open.push_back(due, i, id, classic);
                continue;
            }
            // Linux's ladders ran out: held on for a resend on the classic ladder while few
            // are (a SYN flood ends with Linux's).
            if !classic && self.half_open.classic < crate::ladder::CLASSIC_WAIT_MAX {
                let late = self.ladders.deadline_ns(c, true);
                if late >= now {
                    c.half_open_at = self.half_open.push_back(late, i, id, true);
                    continue;
                }
            }
            self.done
                .retire(slot, Some(CloseKind::Unanswered), &self.cfg, origin);
            self.release_if_empty(i);
        }
    }

    /// Forgets tombstones older than the TIME_WAIT horizon, and the oldest ones past
    /// [`TOMBSTONES_MAX`]; frees their slots.
    fn sweep_tombs(&mut self, now: u64) {
        // Reuse after TIME_WAIT has expired cannot collide: forget a little after it.
        let forget = self.cfg.time_wait.as_nanos() as u64 + FORGET_AFTER_TIME_WAIT_NS;
        while let Some(&(i, t)) = self.tombs.front() {
            let old = now.saturating_sub(t) > forget;
            if !old && self.tombs.len() <= TOMBSTONES_MAX {
                break;
            }
            if let Some(slot) = self
                .tombs
                .get(SWEEP_SLOT_AHEAD)
                .and_then(|&(j, _)| self.slots.get(j as usize))
            {
                prefetch(slot);
            }
            self.tombs.pop_front();
            let slot = &mut self.slots[i as usize];
            // Still this tombstone (not a later one), and no connection on the 4-tuple now.
            if slot.conn.is_none() && slot.prev.is_some_and(|p| p.last_ts == t) {
                if !old {
                    self.totals.tombstones_forgotten_early += 1;
                }
                slot.prev = None;
                self.release_if_empty(i);
            }
        }
    }

    /// Summarises closed connections that have lingered and half-open ones whose ladder ran
    /// out, forgets old tombstones; every [`SCAN_EVERY_NS`] also evicts idle connections.
    fn sweep(&mut self, now: u64) {
        self.done.detectors.sweep(now);
        let origin = self.first_ts.unwrap_or(now);
        while let Some(&(queued, i, id)) = self.closing.front() {
            if now.saturating_sub(queued) <= CLOSE_LINGER_NS {
                break;
            }
            // The connections a few places on were closed seconds ago and are summarised
            // in turn (every detector reads some of them): fetch their slots, then them.
            if let Some(&(_, j, _)) = self.closing.get(SWEEP_SLOT_AHEAD) {
                if let Some(slot) = self.slots.get(j as usize) {
                    prefetch(slot);
                }
            }
            if let Some(c) = self
                .closing
                .get(SWEEP_CONN_AHEAD)
                .and_then(|&(_, j, _)| self.slots.get(j as usize))
                .and_then(|slot| slot.conn.as_deref())
            {
                prefetch_lines(c, CONN_LINES);
            }
            self.closing.pop_front();
            let slot = &mut self.slots[i as usize];
            // The slot may hold a later incarnation by now, or nothing.
            let Some(c) = slot.conn.as_deref().filter(|c| c.id == id) else {
                continue;
            };
            if now.saturating_sub(c.last_ts) <= CLOSE_LINGER_NS {
                // Late segments after the close: look again after they have stopped.
                self.closing.push_back((c.last_ts, i, id));
                continue;
            }
            if let Some(t) = self.done.retire(slot, None, &self.cfg, origin) {
                self.tombs.push_back((i, t));
            }
        }
        if now >= self.next_scan {
            self.scan(now);
            self.next_scan = now + SCAN_EVERY_NS;
        }
        self.sweep_tombs(now);
    }

    /// Evicts idle connections (not half-open ones: their ladder ends them).
    fn scan(&mut self, now: u64) {
        let idle = self.cfg.idle_timeout.as_nanos() as u64;
        let origin = self.first_ts.unwrap_or(now);
        for (i, slot) in self.slots.iter_mut().enumerate() {
            let Some(c) = slot.conn.as_deref() else {
                continue;
            };
            if !c.half_open() && now.saturating_sub(c.last_ts) > idle {
                if let Some(t) = self
                    .done
                    .retire(slot, Some(CloseKind::Idle), &self.cfg, origin)
                {
                    self.tombs.push_back((i as u32, t));
                }
            }
        }
    }

    /// [`finish`](Self::finish) after segments came through [`push_keyed`](Self::push_keyed)
    /// or [`push_batch`](Self::push_batch): `prep` holds the microburst meter.
    pub fn finish_prepared(mut self, prep: Prepare) -> Analysis {
        self.own.bursts = prep.bursts;
        self.finish()
    }

    /// Summarises every connection still held and runs the detectors.
    pub fn finish(mut self) -> Analysis {
        let origin = self.first_ts.unwrap_or(0);
        self.done.detectors.flush();
        for i in 0..self.slots.len() {
            // The connections a few slots on are summarised in turn, each last touched
            // up to seconds ago: fetch them while this one is summarised.
            if let Some(c) = self
                .slots
                .get(i + SWEEP_CONN_AHEAD)
                .and_then(|s| s.conn.as_deref())
            {
                prefetch_lines(c, CONN_LINES);
            }
            let slot = &mut self.slots[i];
            // A connection still sending only SYNs whose ladder has not run out was still
            // waiting when the capture ended: open, not unanswered.
            let how = slot.conn.as_deref().and_then(|c| {
                (c.half_open() && self.ladders.deadline_ns(c, true) >= self.last_ts)
                    .then_some(CloseKind::Open)
            });
            self.done.retire(slot, how, &self.cfg, origin);
        }
        let mut done = self.done;
        done.rows.sort_by_key(|r| r.id);
        let span_ns = self.last_ts.saturating_sub(origin);
        let microbursts = self.own.bursts.rows(self.cfg.link_speed_bits_per_s);
        let crate::detect::Conclusion {
            findings,
            details,
            services,
        } = done
            .detectors
            .conclude(&self.cfg, &self.totals, origin, span_ns, &microbursts);
        Analysis {
            findings,
            totals: self.totals,
            first_ts_ns: self.first_ts,
            duration_us: span_ns / 1_000,
            details,
            microbursts,
            services,
            flows: done.rows,
            retransmitted: self.retransmitted,
            worst_connections: done.worst.into_vec(),
        }
    }
}

/// How long before its SYN the capture may hold a SYN-ACK that answers it: timestamps taken on
/// several CPUs, or two capture points merged, can put an answer microseconds before its
/// question. Far longer than any such skew, far shorter than a 4-tuple's reuse.
const ANSWER_BEFORE_SYN_NS: u64 = 100_000_000;

/// Whether the SYN `s` is the question of the SYN-ACK that opened `c` (the capture holds the
/// answer first): same client side, no SYN seen yet, the SYN-ACK acknowledging this ISN, and
/// close in time. It then belongs to `c`, not to a new incarnation (a TIME_WAIT collision).
fn syn_after_its_answer(c: &Conn, s: &Segment, from_lo: bool) -> bool {
    c.syn_count == 0
        && c.client_lo == from_lo
        && c.half.s2c.last_ack == Some(SeqNumber(s.seq).wrapping_add(1))
        && c.synack
            .is_some_and(|(t, _)| t.abs_diff(s.ts_ns) <= ANSWER_BEFORE_SYN_NS)
}

/// Summarises an incarnation into the accumulators (and a flow row) and returns its tombstone.
/// Who is the client of a connection first seen at segment `s`, and whether that is known.
struct Roles {
    client: Endpoint,
    server: Endpoint,
    /// Known from a SYN (else guessed: the higher port is the client's).
    known: bool,
    /// The client is the 4-tuple's "lo" end.
    client_lo: bool,
}

#[inline(always)]
fn roles(s: &Segment, pure_syn: bool, from_lo: bool) -> Roles {
    let src = Endpoint {
        addr: s.src,
        port: s.src_port,
    };
    let dst = Endpoint {
        addr: s.dst,
        port: s.dst_port,
    };
    let (client_is_src, known) = if pure_syn {
        (true, true)
    } else if s.flags.syn() {
        (false, true)
    } else {
        (src.port >= dst.port, false)
    };
    let (client, server) = if client_is_src {
        (src, dst)
    } else {
        (dst, src)
    };
    Roles {
        client,
        server,
        known,
        // A 4-tuple whose ends are equal has both directions "from lo" and "from the client".
        client_lo: src == dst || client_is_src == from_lo,
    }
}

/// The port reuse a new SYN at `ts` makes, when the 4-tuple's previous incarnation (same
/// client end) was seen within `forget_ns`.
#[inline]
fn reuse_of(prev: Option<Tomb>, client_lo: bool, ts: u64, forget_ns: u64) -> Option<Reuse> {
    let prev =
        prev.filter(|p| p.client_lo == client_lo && ts.saturating_sub(p.last_ts) <= forget_ns)?;
    Some(Reuse {
        interval_ns: ts.saturating_sub(prev.last_ts),
        prev_close: prev.close,
        prev_client_next: prev.client_next,
        prev_last_frame: prev.last_frame,
    })
}

fn finish_conn(
    c: &mut Conn,
    close: CloseKind,
    detectors: &mut Detectors,
    rows: &mut Vec<FlowRow>,
    worst: &mut Worst,
    cfg: &Config,
    origin: u64,
) -> Tomb {
    for d in [Dir::C2s, Dir::S2c] {
        if let Some((t0, frame)) = c.half[d].zero_since.take() {
            let stall = c.last_ts.saturating_sub(t0);
            let h = c.rare_mut().dir_mut(d);
            h.zero_total_ns += stall;
            h.zero_max_ns = h.zero_max_ns.max(stall);
            c.marks.push(Mark {
                kind: MarkKind::ZeroWindow,
                start_ns: t0,
                end_ns: Some(c.last_ts),
                frame,
            });
        }
    }
    c.close = close;
    detectors.finished(c);
    worst.offer(c);
    if cfg.keep_flows {
        let k = |i: RetransKind| c.retrans_of(i);
        let first = crate::exchange::first_exchange_us(c);
        rows.push(FlowRow {
            id: c.id,
            client: c.client.to_string(),
            server: c.server.to_string(),
            incarnation: c.incarnation,
            start_us: c.first_ts.saturating_sub(origin) / 1_000,
            duration_us: c.last_ts.saturating_sub(c.first_ts) / 1_000,
            first_frame: c.first_frame,
            packets_c2s: c.half.c2s.packets,
            packets_s2c: c.half.s2c.packets,
            bytes_c2s: c.half.c2s.bytes,
            bytes_s2c: c.half.s2c.bytes,
            retrans_c2s: c.rare().c2s.retrans,
            retrans_s2c: c.rare().s2c.retrans,
            rto: k(RetransKind::Rto),
            fast_retrans: k(RetransKind::Fast),
            tlp: k(RetransKind::Tlp),
            syn_retrans: k(RetransKind::Syn),
            out_of_order: c.rare().sum(|h| h.out_of_order),
            zero_window_ads: c.rare().sum(|h| h.zero_window_ads),
            zero_window_max_us: c.rare().c2s.zero_max_ns.max(c.rare().s2c.zero_max_ns) / 1_000,
            handshake_rtt_us: c.rtt_ns.map(|v| v / 1_000),
            exchanges: c.turns.count + u32::from(c.turns.phase == crate::exchange::Phase::Response),
            first_response_us: first.map(|f| f.0),
            client_delay_us: first.and_then(|f| f.1),
            close,
            reuse_interval_us: c.reuse.map(|r| r.interval_ns / 1_000),
        });
    }
    Tomb {
        last_ts: c.last_ts,
        close,
        client_lo: c.client_lo,
        client_next: c.half.c2s.next_seq,
        last_frame: c.last_frame,
    }
}

/// Asks the CPU to start loading the cache line holding `r` into its caches: a hint, with no
/// effect on results.
#[inline(always)]
fn prefetch<T>(r: &T) {
    prefetch_addr((r as *const T).cast());
}

/// Cache lines of a [`Conn`].
const CONN_LINES: usize = std::mem::size_of::<Conn>().div_ceil(64);
/// How far ahead the sweeps fetch the slots of the entries they will visit, and then the
/// connections in them.
const SWEEP_SLOT_AHEAD: usize = 8;
const SWEEP_CONN_AHEAD: usize = 4;

/// [`prefetch`] of the first `lines` cache lines at `r`.
#[inline(always)]
fn prefetch_lines<T>(r: &T, lines: usize) {
    let p = (r as *const T).cast::<u8>();
    for i in 0..lines {
        prefetch_addr(p.wrapping_add(64 * i));
    }
}

/// [`prefetch`] of an address (any address: a prefetch never faults).
#[inline(always)]
fn prefetch_addr(p: *const u8) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch reads nothing architecturally and cannot fault, whatever the
    // address; SSE is part of the x86_64 baseline.
    unsafe {
        std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(p.cast())
    };
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}
