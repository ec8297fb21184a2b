//! Detectors: accumulators fed by the flow engine while it streams, and the conclusions
//! they draw at the end as [`Finding`]s (with packet evidence) plus a detail record per
//! pathology for `--json`. Each accumulator keeps counts and a few examples: bounded memory.

use std::net::IpAddr;
use std::time::Duration;

use serde::Serialize;
use tcpdoctor_model::{
    timers::SYN_INITIAL_RTO, Evidence, Finding, Pathology, Remedy, Severity, Source, SynLadder,
};

use crate::engine::{Config, Totals};
use crate::flow::{CloseKind, Conn, Dense, Endpoint, RetransKind};

/// How many examples each detector keeps for evidence.
const EXAMPLES: usize = 5;
/// Fan-in counts flows that sent data to the receiver within this long before the loss.
const FANIN_LOOKBACK_NS: u64 = 100_000_000;
/// A flow refreshes its fan-in entry at most this often (bounds the cost per data segment).
const FANIN_REFRESH_NS: u64 = 10_000_000;

/// A packet-level example: the same shape as `Evidence::Packets`.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Example {
    pub flow: String,
    pub frames: Vec<u64>,
    pub description: String,
}

impl Example {
    fn evidence(&self) -> Evidence {
        Evidence::Packets {
            flow: self.flow.clone(),
            frames: self.frames.clone(),
            description: self.description.clone(),
        }
    }
}

/// Which SYN ladder the observed retransmission times fit.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum LadderFit {
    /// 1, 2, 3, 4, 5, 7 s: `tcp_syn_linear_timeouts` (Linux 6.10+).
    Linear,
    /// 1, 3, 7, 15, 31 s: doubling (older kernels, or the sysctl at 0).
    Exponential,
    /// Only the first rung (1 s) was seen, which both ladders share.
    FirstRungOnly,
    /// Some connections fit one ladder and some the other.
    Mixed,
    /// The retransmission times fit neither (a non-Linux stack or a changed initial RTO).
    Neither,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct AttemptCount {
    /// Retransmissions of the SYN before the connection was answered (or gave up).
    pub retransmissions: u32,
    pub connections: u64,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SynDetails {
    pub connections: u64,
    /// Connections whose SYN was never answered within the capture.
    pub unanswered: u64,
    pub by_retransmissions: Vec<AttemptCount>,
    pub ladder: Option<LadderFit>,
    pub max_connect_delay_us: u64,
    pub examples: Vec<Example>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct CollisionDetails {
    pub count: u64,
    /// The reset did not clear the old state: the SYN was answered by a stale ACK again.
    pub stalls: u64,
    /// Colliding SYNs without the timestamp option (RFC 7323): the peer cannot tell new from old.
    pub timestamps_off: u64,
    /// Colliding SYNs whose ISN was not above the old connection's last sequence number.
    pub isn_not_above_previous: u64,
    pub min_reuse_interval_us: Option<u64>,
    pub max_resend_delay_us: u64,
    pub max_connect_delay_us: u64,
    pub examples: Vec<Example>,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct DestinationDetails {
    pub client: String,
    pub server: String,
    pub connections: u64,
    pub distinct_ports: u32,
    /// Distinct source ports inside the ephemeral range, as a share of the range.
    pub ephemeral_share: f64,
    pub span_us: u64,
    pub new_connections_per_s: f64,
    /// Ports in the range / TIME_WAIT length: the sustainable rate of new connections.
    pub time_wait_budget_per_s: f64,
    pub port_reuses: u64,
    pub reuses_within_time_wait: u64,
    pub min_reuse_interval_us: Option<u64>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct RtoDetails {
    pub count: u64,
    pub flows: u64,
    pub max_gap_us: u64,
    pub examples: Vec<Example>,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct IncastEpisode {
    pub receiver: String,
    /// Offset of the first timeout of the episode from the capture start.
    pub at_us: u64,
    /// Distinct flows that timed out within the episode window.
    pub flows_timed_out: u32,
    /// Flows that sent data to the receiver just before the loss.
    pub fan_in: u32,
    /// Longest idle gap ended by the episode's retransmissions.
    pub stall_us: u64,
    /// How long the receiver had heard from no sender at all when a retransmission of the
    /// episode came (0 when others kept sending): every sender waiting on the ones that
    /// timed out is the barrier form of incast (file 001's rounds).
    pub receiver_silent_us: u64,
    pub frames: Vec<u64>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct SlowReaderDetails {
    pub flows: u64,
    pub zero_window_ads: u64,
    pub window_probes: u64,
    pub stall_total_us: u64,
    pub stall_max_us: u64,
    pub window_full: u64,
    pub examples: Vec<Example>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct RetransDetails {
    pub fast: u64,
    pub tlp: u64,
    pub other: u64,
    pub flows: u64,
    /// Quick repairs as a share of data segments.
    pub share_of_data_segments: f64,
    pub examples: Vec<Example>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct RefusedDetails {
    pub count: u64,
    pub examples: Vec<Example>,
}

/// Per-pathology details for `--json`.
#[derive(Clone, Debug, PartialEq, Serialize)]
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

struct Dest {
    conns: u64,
    first_ts: u64,
    last_ts: u64,
    ports: PortSet,
    distinct: u32,
    reuses: u64,
    reuses_tw: u64,
    min_reuse_ns: Option<u64>,
}

/// Source ports seen toward one destination: a short list, a 64 Kibit bitmap once busy (so
/// thousands of one-connection destinations do not cost 8 KiB each).
enum PortSet {
    Few(Vec<u16>),
    Many(Box<[u64; 1024]>),
}

impl PortSet {
    /// Adds `p`; true if it was new.
    fn insert(&mut self, p: u16) -> bool {
        match self {
            PortSet::Few(v) => {
                if v.contains(&p) {
                    return false;
                }
                if v.len() < 64 {
                    v.push(p);
                    return true;
                }
                let mut bits = Box::new([0u64; 1024]);
                for &q in v.iter() {
                    bits[usize::from(q) / 64] |= 1 << (q % 64);
                }
                *self = PortSet::Many(bits);
                self.insert(p)
            }
            PortSet::Many(bits) => {
                let (w, b) = (usize::from(p) / 64, 1u64 << (p % 64));
                let new = bits[w] & b == 0;
                bits[w] |= b;
                new
            }
        }
    }

    /// Ports in `low..=high`.
    fn count_in(&self, low: u16, high: u16) -> u32 {
        match self {
            PortSet::Few(v) => v.iter().filter(|&&p| (low..=high).contains(&p)).count() as u32,
            PortSet::Many(bits) => (low..=high)
                .filter(|&p| bits[usize::from(p) / 64] & (1 << (p % 64)) != 0)
                .count() as u32,
        }
    }
}

#[derive(Clone, Copy)]
struct RtoEvent {
    ts: u64,
    gap_ns: u64,
    frame: u64,
    conn: u64,
    receiver: Endpoint,
    fan_in: u32,
    /// Time since the receiver last got data from any flow.
    receiver_idle_ns: u64,
}

#[derive(Default)]
struct Receiver {
    active: Active,
    last_rto_ts: u64,
    /// The latest data segment into this receiver, from any flow.
    last_data_ts: u64,
    bytes: u64,
    first_ts: u64,
    last_ts: u64,
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
    /// The largest `ts` of this entry and all before it: sorted, unlike `ts`.
    max_ts: u64,
}

/// Marks a sighting that a later sighting of its connection replaced.
const SUPERSEDED: u64 = u64::MAX;

impl Active {
    /// Records connection `id` seen at `ts`; `prev` is where it was recorded before (0 for
    /// never, else position + 1). Returns the new position + 1.
    fn insert(&mut self, id: u64, ts: u64, prev: u64) -> u64 {
        if let Some(i) = prev.checked_sub(1).and_then(|p| p.checked_sub(self.base)) {
            if let Some(e) = self.items.get_mut(i as usize) {
                e.id = SUPERSEDED;
            }
        }
        let max_ts = self.items.back().map_or(ts, |b| b.max_ts.max(ts));
        self.items.push_back(Sighting { id, ts, max_ts });
        self.base + self.items.len() as u64
    }

    /// Connections last seen at or after `since`.
    fn count_since(&self, since: u64) -> u32 {
        let since = since.max(self.floor);
        // Before `from`, every time is below `since`.
        let from = self.items.partition_point(|e| e.max_ts < since);
        self.items
            .range(from..)
            .filter(|e| e.id != SUPERSEDED && e.ts >= since)
            .count() as u32
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

#[derive(Default)]
struct SynAcc {
    conns: u64,
    unanswered: u64,
    by_attempt: [u64; 9],
    lin_only: u64,
    exp_only: u64,
    both: u64,
    neither: u64,
    max_delay_ns: u64,
    examples: Vec<Example>,
}

#[derive(Default)]
struct CollAcc {
    d: CollisionDetails,
}

/// Everything the detectors accumulate while the engine streams.
pub struct Acc {
    time_wait_ns: u64,
    incast_window_ns: u64,
    /// A data retransmission after this much silence was a timeout (as the engine judges).
    rto_floor_ns: u64,
    syn: SynAcc,
    tw: CollAcc,
    race: CollAcc,
    refused: RefusedDetails,
    dests: Dense<(IpAddr, Endpoint), Dest>,
    rtos: Vec<RtoEvent>,
    rto_flows: RtoDetails,
    receivers: Dense<IpAddr, Receiver>,
    slow: SlowReaderDetails,
    retrans: RetransDetails,
    linear: SynLadder,
    exponential: SynLadder,
}

impl Acc {
    pub fn new(cfg: &Config) -> Acc {
        Acc {
            time_wait_ns: cfg.time_wait.as_nanos() as u64,
            incast_window_ns: cfg.incast_window.as_nanos() as u64,
            rto_floor_ns: cfg.rto_min.as_nanos() as u64 * 9 / 10,
            syn: SynAcc::default(),
            tw: CollAcc::default(),
            race: CollAcc::default(),
            refused: RefusedDetails::default(),
            dests: Dense::default(),
            rtos: Vec::new(),
            rto_flows: RtoDetails::default(),
            receivers: Dense::default(),
            slow: SlowReaderDetails::default(),
            retrans: RetransDetails::default(),
            // Linux defaults: tcp_syn_retries=6, tcp_syn_linear_timeouts=4 (6.10+) or none.
            linear: SynLadder::new(6, Some(4), SYN_INITIAL_RTO),
            exponential: SynLadder::new(6, None, SYN_INITIAL_RTO),
        }
    }

    /// A SYN opened a new incarnation.
    pub fn on_new_connection(&mut self, c: &Conn, ts: u64) {
        let tw = self.time_wait_ns;
        let d = self
            .dests
            .get_or_insert_with((c.client.addr, c.server), || Dest {
                conns: 0,
                first_ts: ts,
                last_ts: ts,
                ports: PortSet::Few(Vec::new()),
                distinct: 0,
                reuses: 0,
                reuses_tw: 0,
                min_reuse_ns: None,
            });
        d.conns += 1;
        d.last_ts = ts;
        if d.ports.insert(c.client.port) {
            d.distinct += 1;
        }
        if let Some(r) = c.reuse {
            d.reuses += 1;
            if r.interval_ns < tw {
                d.reuses_tw += 1;
            }
            d.min_reuse_ns = Some(
                d.min_reuse_ns
                    .map_or(r.interval_ns, |m| m.min(r.interval_ns)),
            );
        }
    }

    /// Data from direction `d` of `c`: refreshes the receiver's fan-in bookkeeping.
    pub fn on_data(&mut self, c: &mut Conn, d: usize, ts: u64) {
        let h = &mut c.half[d];
        if h.receiver_idx != 0 {
            let r = self.receivers.at_mut(h.receiver_idx - 1);
            r.last_data_ts = r.last_data_ts.max(ts);
        }
        if h.fanin_reported_ts != 0 && ts.saturating_sub(h.fanin_reported_ts) < FANIN_REFRESH_NS {
            return;
        }
        h.fanin_reported_ts = ts;
        let receiver = if d == 0 { c.server.addr } else { c.client.addr };
        let i = self
            .receivers
            .index_or_insert_with(receiver, Receiver::default);
        h.receiver_idx = i + 1;
        let r = self.receivers.at_mut(i);
        r.last_data_ts = r.last_data_ts.max(ts);
        // Over loopback both directions go into one receiver: one entry for the connection.
        let at = if c.client.addr == c.server.addr { 0 } else { d };
        c.half[at].fanin_pos = r.active.insert(c.id, ts, c.half[at].fanin_pos);
    }

    /// A retransmission ended an idle gap of at least the RTO floor.
    pub fn on_rto(&mut self, c: &Conn, d: usize, ts: u64, gap_ns: u64, frame: u64) {
        let receiver = if d == 0 { c.server } else { c.client };
        let since = ts.saturating_sub(gap_ns).saturating_sub(FANIN_LOOKBACK_NS);
        let window = self.incast_window_ns;
        let r = self
            .receivers
            .get_or_insert_with(receiver.addr, Receiver::default);
        // Called before this segment counts as data: the silence the receiver had from all.
        let idle = if r.last_data_ts == 0 {
            0
        } else {
            ts.saturating_sub(r.last_data_ts)
        };
        // Counting the fan-in scans the receiver's recent senders: only worth it when this
        // timeout follows another into the same receiver within the incast window, or when
        // every sender had gone quiet (a lone timeout among busy senders cannot start an
        // episode; the episode takes the largest fan-in of its events).
        let fan_in = if idle >= self.rto_floor_ns
            || (r.last_rto_ts != 0 && ts.saturating_sub(r.last_rto_ts) <= window)
        {
            r.active.count_since(since)
        } else {
            0
        };
        r.last_rto_ts = ts;
        self.rtos.push(RtoEvent {
            ts,
            gap_ns,
            frame,
            conn: c.id,
            receiver,
            fan_in,
            receiver_idle_ns: idle,
        });
    }

    /// Periodic pruning of fan-in state (capture time `now`).
    pub fn sweep(&mut self, now: u64) {
        let keep = now.saturating_sub(2_000_000_000);
        for r in self.receivers.values_mut() {
            r.active.retain_since(keep);
        }
    }

    /// An incarnation was summarised: classify its handshake and keep its counts.
    pub fn on_finish(&mut self, c: &Conn) {
        self.handshake(c);
        // Goodput per receiver (for the incast estimate), from both directions' data.
        for (d, receiver) in [(0, c.server.addr), (1, c.client.addr)] {
            let h = &c.half[d];
            if h.bytes > 0 {
                let r = self
                    .receivers
                    .get_or_insert_with(receiver, Receiver::default);
                if r.bytes == 0 || c.first_ts < r.first_ts {
                    r.first_ts = c.first_ts;
                }
                r.bytes += h.bytes - h.retrans_bytes.min(h.bytes);
                r.last_ts = r.last_ts.max(h.last_data_ts);
            }
        }
        // Retransmission timeouts.
        if !c.rto.is_empty() {
            self.rto_flows.flows += 1;
            self.rto_flows.count += u64::from(c.rto.total);
            self.rto_flows.max_gap_us = self.rto_flows.max_gap_us.max(c.rto_max_gap_ns / 1_000);
            if self.rto_flows.examples.len() < EXAMPLES {
                self.rto_flows.examples.push(Example {
                    flow: c.label(),
                    frames: c.rto.as_slice().to_vec(),
                    description: format!(
                        "{} retransmission(s) after idle gaps up to {}",
                        c.rto.total,
                        us(c.rto_max_gap_ns / 1_000)
                    ),
                });
            }
        }
        // Quick repairs.
        let k =
            |i: RetransKind| u64::from(c.half[0].by_kind[i.index()] + c.half[1].by_kind[i.index()]);
        let quick = k(RetransKind::Fast) + k(RetransKind::Tlp) + k(RetransKind::Other);
        if quick > 0 {
            self.retrans.fast += k(RetransKind::Fast);
            self.retrans.tlp += k(RetransKind::Tlp);
            self.retrans.other += k(RetransKind::Other);
            self.retrans.flows += 1;
            if self.retrans.examples.len() < EXAMPLES {
                self.retrans.examples.push(Example {
                    flow: c.label(),
                    frames: vec![c.first_frame],
                    description: format!(
                        "{} fast, {} TLP, {} other retransmission(s) of {} data segments",
                        k(RetransKind::Fast),
                        k(RetransKind::Tlp),
                        k(RetransKind::Other),
                        c.half[0].data_packets + c.half[1].data_packets
                    ),
                });
            }
        }
        // Slow reader: either side advertised a zero window.
        let ads = u64::from(c.half[0].zero_window_ads + c.half[1].zero_window_ads);
        if ads > 0 {
            let probes = u64::from(c.half[0].probes + c.half[1].probes);
            let total = c.half[0].zero_total_ns + c.half[1].zero_total_ns;
            let max = c.half[0].zero_max_ns.max(c.half[1].zero_max_ns);
            let s = &mut self.slow;
            s.flows += 1;
            s.zero_window_ads += ads;
            s.window_probes += probes;
            s.stall_total_us += total / 1_000;
            s.stall_max_us = s.stall_max_us.max(max / 1_000);
            s.window_full += u64::from(c.half[0].window_full + c.half[1].window_full);
            if s.examples.len() < EXAMPLES {
                // half[1] holds what the server sent: its zero windows make it the reader.
                let reader = if c.half[1].zero_window_ads >= c.half[0].zero_window_ads {
                    c.server
                } else {
                    c.client
                };
                let mut frames = c.zero_frames.as_slice().to_vec();
                frames.extend_from_slice(c.probe_frames.as_slice());
                frames.sort_unstable();
                s.examples.push(Example {
                    flow: c.label(),
                    frames,
                    description: format!(
                        "receiver {reader} advertised a zero window {ads} time(s); writer stalled {} in all (longest {}), {probes} window probe(s)",
                        us(total / 1_000),
                        us(max / 1_000)
                    ),
                });
            }
        }
    }

    fn handshake(&mut self, c: &Conn) {
        let syns = c.syn_list();
        let Some(&(t0, f0)) = syns.first() else {
            return;
        };
        if !c.stale.is_empty() {
            self.collision(c);
            return;
        }
        if !c.rst_answer.is_empty() {
            let recent = c.reuse.is_some_and(|r| r.interval_ns < self.time_wait_ns);
            if recent && c.synack.is_some() {
                self.collision(c);
            } else {
                self.refused.count += 1;
                if self.refused.examples.len() < EXAMPLES {
                    let mut frames = vec![f0];
                    frames.extend_from_slice(c.rst_answer.as_slice());
                    self.refused.examples.push(Example {
                        flow: c.label(),
                        frames,
                        description: "SYN answered by a reset (nothing listening, or rejected)"
                            .into(),
                    });
                }
            }
            return;
        }
        if c.syn_count < 2 {
            return;
        }
        let retrans = c.syn_count - 1;
        let a = &mut self.syn;
        a.conns += 1;
        a.by_attempt[(retrans as usize).min(8)] += 1;
        let offsets: Vec<Duration> = syns[1..]
            .iter()
            .map(|&(t, _)| Duration::from_nanos(t.saturating_sub(t0)))
            .collect();
        let fits = |l: &SynLadder| {
            offsets.iter().enumerate().all(|(i, &off)| {
                l.retransmit_at(i as u32 + 1).is_some_and(|rung| {
                    // Timer granularity (4 ms at HZ=250) plus scheduling: 5% or 50 ms.
                    let tol = (rung / 20).max(Duration::from_millis(50));
                    off.abs_diff(rung) <= tol
                })
            })
        };
        let (lin, exp) = (fits(&self.linear), fits(&self.exponential));
        match (lin, exp) {
            (true, true) => a.both += 1,
            (true, false) => a.lin_only += 1,
            (false, true) => a.exp_only += 1,
            (false, false) => a.neither += 1,
        }
        let (delay_ns, answered) = match c.synack {
            Some((t, _)) => (t.saturating_sub(t0), true),
            None => (c.last_ts.saturating_sub(t0), false),
        };
        if !answered {
            a.unanswered += 1;
        }
        a.max_delay_ns = a.max_delay_ns.max(delay_ns);
        if a.examples.len() < EXAMPLES {
            let mut frames: Vec<u64> = syns.iter().map(|s| s.1).collect();
            if let Some((_, f)) = c.synack {
                frames.push(f);
            }
            let at: Vec<String> = offsets
                .iter()
                .map(|o| format!("+{:.3} s", o.as_secs_f64()))
                .collect();
            let fit = match (lin, exp) {
                (true, true) => "first rung of both ladders",
                (true, false) => "linear ladder 1, 2, 3, 4, 5, 7 s",
                (false, true) => "exponential ladder 1, 3, 7, 15 s",
                (false, false) => "no Linux SYN ladder",
            };
            let outcome = if answered {
                format!("SYN-ACK after {}", us(delay_ns / 1_000))
            } else {
                "never answered in the capture".to_string()
            };
            a.examples.push(Example {
                flow: c.label(),
                frames,
                description: format!(
                    "SYN sent {} times (resent at {}; {fit}); {outcome}",
                    c.syn_count,
                    at.join(", ")
                ),
            });
        }
    }

    fn collision(&mut self, c: &Conn) {
        let syns = c.syn_list();
        let (t0, f0) = syns[0];
        // Whose state answered? A previous incarnation reset by the client (SO_LINGER 0) leaves
        // the server in FIN_WAIT_2/CLOSE_WAIT: the stale-ACK race (file 003). A clean close
        // leaves the active closer in TIME_WAIT (file 000).
        let race = matches!(
            c.reuse.map(|r| r.prev_close),
            Some(CloseKind::Rst { by_client: true })
        ) || (c.reuse.is_none() && {
            let resend = syns.get(1).map(|s| s.0.saturating_sub(c.client_rst_ts));
            resend.is_some_and(|d| d < 200_000_000)
        });
        let acc = if race { &mut self.race } else { &mut self.tw };
        let d = &mut acc.d;
        d.count += 1;
        let stall = c.stale.total >= 2 || (c.synack.is_none() && c.syn_count >= 2);
        if stall {
            d.stalls += 1;
        }
        if !c.syn_ts_option {
            d.timestamps_off += 1;
        }
        let isn_low = match (c.half[0].isn, c.reuse.and_then(|r| r.prev_client_next)) {
            (Some(isn), Some(prev)) => isn <= prev,
            _ => false,
        };
        if isn_low {
            d.isn_not_above_previous += 1;
        }
        if let Some(r) = c.reuse {
            let v = r.interval_ns / 1_000;
            d.min_reuse_interval_us = Some(d.min_reuse_interval_us.map_or(v, |m| m.min(v)));
        }
        // Resend delay: from the client's reset (or the stale answer) to the next SYN.
        let mark = if c.client_rst.is_empty() {
            c.stale_first_ts
        } else {
            c.client_rst_ts
        };
        let resend_ns = syns
            .iter()
            .find(|s| s.0 > mark)
            .map(|s| s.0 - mark)
            .unwrap_or(0);
        d.max_resend_delay_us = d.max_resend_delay_us.max(resend_ns / 1_000);
        let connect_ns = match c.synack {
            Some((t, _)) => t.saturating_sub(t0),
            None => c.last_ts.saturating_sub(t0),
        };
        d.max_connect_delay_us = d.max_connect_delay_us.max(connect_ns / 1_000);
        if d.examples.len() < EXAMPLES {
            let mut frames = Vec::new();
            if let Some(r) = c.reuse {
                frames.push(r.prev_last_frame);
            }
            frames.push(f0);
            frames.extend_from_slice(c.stale.as_slice());
            frames.extend_from_slice(c.rst_answer.as_slice());
            frames.extend_from_slice(c.client_rst.as_slice());
            frames.extend(syns[1..].iter().map(|s| s.1));
            if let Some((_, f)) = c.synack {
                frames.push(f);
            }
            frames.sort_unstable();
            frames.dedup();
            let reuse = c
                .reuse
                .map(|r| {
                    format!(
                        "4-tuple reused {} after its last packet",
                        us(r.interval_ns / 1_000)
                    )
                })
                .unwrap_or_else(|| "previous connection not in the capture".into());
            let answer = if c.stale.is_empty() {
                "answered by a reset"
            } else {
                "answered by an ACK of the old connection"
            };
            let ts = if c.syn_ts_option {
                "timestamps on"
            } else {
                "timestamps off"
            };
            let outcome = match c.synack {
                Some(_) => format!("connected after {}", us(connect_ns / 1_000)),
                None => format!("still not connected after {}", us(connect_ns / 1_000)),
            };
            d.examples.push(Example {
                flow: c.label(),
                frames,
                description: format!(
                    "{reuse}; SYN ({ts}{}) {answer}; client reset it; SYN resent after {}; {outcome}",
                    if isn_low { ", ISN not above the old sequence" } else { "" },
                    us(resend_ns / 1_000)
                ),
            });
        }
    }

    /// Draws the findings and the detail record.
    pub fn conclude(
        mut self,
        cfg: &Config,
        totals: &Totals,
        span_ns: u64,
    ) -> (Vec<Finding>, Details) {
        let mut findings = Vec::new();
        let syn = self.syn_details();
        if let Some(f) = syn_finding(&syn) {
            findings.push(f);
        }
        let tw = std::mem::take(&mut self.tw.d);
        let race = std::mem::take(&mut self.race.d);
        if let Some(f) = collision_finding(&tw, false) {
            findings.push(f);
        }
        if let Some(f) = collision_finding(&race, true) {
            findings.push(f);
        }
        if self.refused.count > 0 {
            let mut f = Finding::legacy(
                Pathology::ConnectFailure,
                Severity::Warning,
                Source::Analyze,
                format!(
                    "{} connection attempt(s) refused with a reset",
                    self.refused.count
                ),
            );
            for e in &self.refused.examples {
                f = f.with_evidence(e.evidence());
            }
            findings.push(f);
        }
        let destinations = self.destinations(cfg);
        findings.extend(port_findings(&destinations, cfg));
        let incast = self.incast(cfg, span_ns);
        if let Some(f) = self.incast_finding(&incast, cfg) {
            findings.push(f);
        }
        if self.rto_flows.count > 0 {
            let r = &self.rto_flows;
            let mut f = Finding::legacy(
                Pathology::RetransmitTimeout,
                if r.count >= 10 {
                    Severity::Critical
                } else {
                    Severity::Warning
                },
                Source::Analyze,
                format!(
                    "{} retransmission timeout(s) in {} flow(s): idle gaps up to {} ended by a retransmission",
                    r.count,
                    r.flows,
                    us(r.max_gap_us)
                ),
            )
            .with_evidence(Evidence::Timing {
                what: "longest idle gap before a retransmission".into(),
                count: r.count,
                value_us: r.max_gap_us,
            });
            for e in &r.examples {
                f = f.with_evidence(e.evidence());
            }
            findings.push(f);
        }
        let quick = self.retrans.fast + self.retrans.tlp + self.retrans.other;
        self.retrans.share_of_data_segments = if totals.data_segments > 0 {
            quick as f64 / totals.data_segments as f64
        } else {
            0.0
        };
        if quick > 0 {
            let r = &self.retrans;
            let sev = if r.share_of_data_segments >= 0.01 {
                Severity::Warning
            } else {
                Severity::Info
            };
            let mut f = Finding::legacy(
                Pathology::Retransmission,
                sev,
                Source::Analyze,
                format!(
                    "{quick} segment(s) retransmitted without a timeout ({} fast, {} TLP, {} other) in {} flow(s): {:.2}% of data segments",
                    r.fast,
                    r.tlp,
                    r.other,
                    r.flows,
                    100.0 * r.share_of_data_segments
                ),
            );
            for e in &r.examples {
                f = f.with_evidence(e.evidence());
            }
            findings.push(f);
        }
        if self.slow.flows > 0 {
            let s = &self.slow;
            let mut f = Finding::legacy(
                Pathology::SlowReader,
                Severity::Warning,
                Source::Analyze,
                format!(
                    "{} flow(s) advertised a zero window {} time(s): writers stalled {} in all (longest {}), {} window probe(s)",
                    s.flows,
                    s.zero_window_ads,
                    us(s.stall_total_us),
                    us(s.stall_max_us),
                    s.window_probes
                ),
            )
            .with_evidence(Evidence::Timing {
                what: "longest zero-window stall".into(),
                count: s.flows,
                value_us: s.stall_max_us,
            });
            for e in &s.examples {
                f = f.with_evidence(e.evidence());
            }
            findings.push(f);
        }
        let details = Details {
            syn_retransmits: syn,
            time_wait_collisions: tw,
            stale_ack_races: race,
            refused_connects: self.refused,
            destinations,
            retransmit_timeouts: self.rto_flows,
            incast,
            slow_readers: self.slow,
            retransmissions: self.retrans,
        };
        (findings, details)
    }

    fn syn_details(&mut self) -> SynDetails {
        let a = &mut self.syn;
        let ladder = (a.conns > 0).then_some(match (a.lin_only > 0, a.exp_only > 0) {
            (true, true) => LadderFit::Mixed,
            (true, false) => LadderFit::Linear,
            (false, true) => LadderFit::Exponential,
            (false, false) if a.both > 0 => LadderFit::FirstRungOnly,
            _ => LadderFit::Neither,
        });
        SynDetails {
            connections: a.conns,
            unanswered: a.unanswered,
            by_retransmissions: a
                .by_attempt
                .iter()
                .enumerate()
                .filter(|(_, &n)| n > 0)
                .map(|(i, &n)| AttemptCount {
                    retransmissions: i as u32,
                    connections: n,
                })
                .collect(),
            ladder,
            max_connect_delay_us: a.max_delay_ns / 1_000,
            examples: std::mem::take(&mut a.examples),
        }
    }

    fn destinations(&self, cfg: &Config) -> Vec<DestinationDetails> {
        let range = cfg.port_range;
        let budget = f64::from(range.len()) / cfg.time_wait.as_secs_f64();
        let mut v: Vec<DestinationDetails> = self
            .dests
            .iter()
            .map(|((client, server), d)| {
                let in_range = d.ports.count_in(range.low, range.high);
                let span = d.last_ts.saturating_sub(d.first_ts);
                // A rate needs a second of span to mean anything.
                let rate = d.conns as f64 / (span as f64 / 1e9).max(1.0);
                DestinationDetails {
                    client: client.to_string(),
                    server: server.to_string(),
                    connections: d.conns,
                    distinct_ports: d.distinct,
                    ephemeral_share: f64::from(in_range) / f64::from(range.len()),
                    span_us: span / 1_000,
                    new_connections_per_s: rate,
                    time_wait_budget_per_s: budget,
                    port_reuses: d.reuses,
                    reuses_within_time_wait: d.reuses_tw,
                    min_reuse_interval_us: d.min_reuse_ns.map(|v| v / 1_000),
                }
            })
            .collect();
        v.sort_by(|a, b| {
            b.connections
                .cmp(&a.connections)
                .then(a.server.cmp(&b.server))
        });
        v.truncate(10);
        v
    }

    fn incast(&mut self, cfg: &Config, _span_ns: u64) -> Vec<IncastEpisode> {
        let window = cfg.incast_window.as_nanos() as u64;
        self.rtos
            .sort_by(|a, b| a.receiver.addr.cmp(&b.receiver.addr).then(a.ts.cmp(&b.ts)));
        let mut out = Vec::new();
        let mut i = 0;
        while i < self.rtos.len() {
            let start = self.rtos[i];
            let mut j = i;
            while j < self.rtos.len()
                && self.rtos[j].receiver.addr == start.receiver.addr
                && self.rtos[j].ts - start.ts <= window
            {
                j += 1;
            }
            let group = &self.rtos[i..j];
            let mut conns: Vec<u64> = group.iter().map(|e| e.conn).collect();
            conns.sort_unstable();
            conns.dedup();
            let fan_in = group
                .iter()
                .map(|e| e.fan_in)
                .max()
                .unwrap_or(0)
                .max(conns.len() as u32);
            // Synchronized, not chance: at least incast_min_flows flows, and at least a
            // quarter of the flows that were sending into the receiver, timed out together.
            // Random loss across thousands of short connections also puts a few timeouts
            // into one window, but only a small share of the fan-in.
            let synchronized =
                conns.len() as u32 >= cfg.incast_min_flows && conns.len() as u32 * 4 >= fan_in;
            // The barrier form: incast_min_flows or more flows were sending, then all of them
            // went quiet until a timeout repaired the one(s) that lost their tail: the rest
            // had finished and waited (a request that needs every answer).
            let silent = group.iter().map(|e| e.receiver_idle_ns).max().unwrap_or(0);
            let barrier = silent >= self.rto_floor_ns && fan_in >= cfg.incast_min_flows;
            if synchronized || barrier {
                let mut frames: Vec<u64> = group.iter().map(|e| e.frame).collect();
                frames.sort_unstable();
                out.push(IncastEpisode {
                    receiver: start.receiver.addr.to_string(),
                    at_us: start.ts / 1_000,
                    flows_timed_out: conns.len() as u32,
                    fan_in,
                    stall_us: group.iter().map(|e| e.gap_ns).max().unwrap_or(0) / 1_000,
                    receiver_silent_us: if barrier { silent / 1_000 } else { 0 },
                    frames,
                });
            }
            i = j;
        }
        out
    }

    fn incast_finding(&self, eps: &[IncastEpisode], cfg: &Config) -> Option<Finding> {
        let worst = eps.iter().max_by_key(|e| (e.flows_timed_out, e.stall_us))?;
        let stall_us: u64 = eps.iter().map(|e| e.stall_us).sum();
        let receiver: IpAddr = worst.receiver.parse().ok()?;
        let goodput = self
            .receivers
            .get(&receiver)
            .map(|r| {
                let span = r.last_ts.saturating_sub(r.first_ts) as f64 / 1e9;
                let active = (span - stall_us as f64 / 1e6).max(1e-3);
                r.bytes as f64 / active
            })
            .unwrap_or(0.0);
        let lost = goodput * stall_us as f64 / 1e6;
        let max_fan = eps.iter().map(|e| e.fan_in).max().unwrap_or(0);
        let mut f = Finding::legacy(
            Pathology::Incast,
            if eps.len() >= 3 {
                Severity::Critical
            } else {
                Severity::Warning
            },
            Source::Analyze,
            format!(
                "{} synchronized timeout episode(s) into {}: up to {} flow(s) timed out within {} ms of each other (fan-in {}){}; {} stalled, ~{} of goodput lost",
                eps.len(),
                worst.receiver,
                worst.flows_timed_out,
                cfg.incast_window.as_millis(),
                max_fan,
                match eps.iter().filter(|e| e.receiver_silent_us > 0).count() {
                    0 => String::new(),
                    n => format!(
                        "; in {n} of them every sender went silent until the timeout"
                    ),
                },
                us(stall_us),
                bytes_h(lost as u64)
            ),
        )
        .arithmetic(
            format!(
                "{:.0} bytes/s goodput x {:.3} s stalled",
                goodput,
                stall_us as f64 / 1e6
            ),
            lost,
        );
        for e in eps.iter().take(EXAMPLES) {
            f = f.with_evidence(Evidence::Packets {
                flow: format!("* > {}", e.receiver),
                frames: e.frames.clone(),
                description: if e.receiver_silent_us > 0 {
                    format!(
                        "{} of {} senders resent after ~{}; the receiver heard from none of them for {}",
                        e.flows_timed_out,
                        e.fan_in,
                        us(e.stall_us),
                        us(e.receiver_silent_us)
                    )
                } else {
                    format!(
                        "{} flows resent after ~{} of silence within {} ms; fan-in {}",
                        e.flows_timed_out,
                        us(e.stall_us),
                        cfg.incast_window.as_millis(),
                        e.fan_in
                    )
                },
            });
        }
        Some(f)
    }
}

fn syn_finding(d: &SynDetails) -> Option<Finding> {
    if d.connections == 0 {
        return None;
    }
    let by: Vec<String> = d
        .by_retransmissions
        .iter()
        .map(|a| {
            format!(
                "{} x {} retransmission(s)",
                a.connections, a.retransmissions
            )
        })
        .collect();
    let ladder = match d.ladder {
        Some(LadderFit::Linear) => {
            "timings fit the linear ladder (1, 2, 3, 4, 5, 7 s: tcp_syn_linear_timeouts)"
        }
        Some(LadderFit::Exponential) => "timings fit the exponential ladder (1, 3, 7, 15 s)",
        Some(LadderFit::FirstRungOnly) => "only the 1 s rung was reached (shared by both ladders)",
        Some(LadderFit::Mixed) => {
            "some connections fit the linear ladder and some the exponential one"
        }
        _ => "timings fit no Linux SYN ladder",
    };
    let severe = d.unanswered > 0 || d.by_retransmissions.iter().any(|a| a.retransmissions >= 2);
    let mut f = Finding::legacy(
        Pathology::SynRetransmit,
        if severe {
            Severity::Critical
        } else {
            Severity::Warning
        },
        Source::Analyze,
        format!(
            "{} connection(s) waited for SYN retransmissions ({}); connect delay up to {}; {ladder}",
            d.connections,
            by.join(", "),
            us(d.max_connect_delay_us)
        ),
    )
    .with_evidence(Evidence::Timing {
        what: "connect delay by SYN retransmission".into(),
        count: d.connections,
        value_us: d.max_connect_delay_us,
    });
    for e in &d.examples {
        f = f.with_evidence(e.evidence());
    }
    Some(f)
}

fn collision_finding(d: &CollisionDetails, race: bool) -> Option<Finding> {
    if d.count == 0 {
        return None;
    }
    let (p, sev, what) = if race {
        (
            Pathology::StaleAckRace,
            if d.max_connect_delay_us >= 500_000 {
                Severity::Critical
            } else {
                Severity::Warning
            },
            "after a reset close (SO_LINGER 0)",
        )
    } else {
        (
            Pathology::TimeWaitCollision,
            // A resend at the 1 s SYN timer (older kernels, illumos) stalls requests for
            // seconds; Linux 4.x+ resends at TCP_TIMEOUT_MIN after the reset (milliseconds).
            if d.max_connect_delay_us >= 500_000 {
                Severity::Critical
            } else {
                Severity::Warning
            },
            "into TIME_WAIT",
        )
    };
    let mut f = Finding::legacy(
        p,
        sev,
        Source::Analyze,
        format!(
            "{} SYN(s) reused a 4-tuple {what}{} and were answered by an ACK of the old connection; SYN resent after up to {}, connect delayed up to {}",
            d.count,
            d.min_reuse_interval_us
                .map(|v| format!(" {} after it closed", us(v)))
                .unwrap_or_default(),
            us(d.max_resend_delay_us),
            us(d.max_connect_delay_us)
        ),
    )
    .setting(
        "TCP timestamps in the colliding SYNs",
        if d.timestamps_off == d.count {
            "off".to_string()
        } else if d.timestamps_off == 0 {
            "on".to_string()
        } else {
            format!("off in {} of {}", d.timestamps_off, d.count)
        },
    );
    if d.isn_not_above_previous > 0 {
        f = f.with_evidence(Evidence::Examples {
            what: "new ISN not above the old connection's last sequence number".into(),
            items: vec![format!("{} of {} SYNs", d.isn_not_above_previous, d.count)],
        });
    }
    if d.stalls > 0 && !race {
        f = f
            .setting(
                "net.ipv4.tcp_rfc1337",
                "1 suspected: the reset did not clear TIME_WAIT and the SYN was refused again",
            )
            .with_first_remedy(Remedy::new(
                "Set net.ipv4.tcp_rfc1337=0 on the server so a reset ends TIME_WAIT and the resent SYN succeeds.",
            ));
    }
    for e in &d.examples {
        f = f.with_evidence(e.evidence());
    }
    Some(f)
}

fn port_findings(dests: &[DestinationDetails], cfg: &Config) -> Vec<Finding> {
    let mut out = Vec::new();
    for d in dests {
        let over_rate =
            d.new_connections_per_s >= d.time_wait_budget_per_s && d.span_us >= 1_000_000;
        let churn =
            d.reuses_within_time_wait >= 100 && d.reuses_within_time_wait * 10 >= d.connections;
        if !(over_rate || churn || d.ephemeral_share >= 0.5) {
            continue;
        }
        let sev = if d.ephemeral_share >= 0.9 || (over_rate && churn) {
            Severity::Critical
        } else {
            Severity::Warning
        };
        let range = cfg.port_range;
        let f = Finding::legacy(
            Pathology::PortExhaustion,
            sev,
            Source::Analyze,
            format!(
                "{} -> {}: {} new connections at {:.0}/s from {} distinct source ports ({:.0}% of {range}); the TIME_WAIT budget is {:.0}/s; {} ports reused within TIME_WAIT",
                d.client,
                d.server,
                d.connections,
                d.new_connections_per_s,
                d.distinct_ports,
                100.0 * d.ephemeral_share,
                d.time_wait_budget_per_s,
                d.reuses_within_time_wait
            ),
        )
        .arithmetic(
            format!("{} ports / {} s TIME_WAIT", range.len(), cfg.time_wait.as_secs()),
            d.time_wait_budget_per_s,
        )
        .arithmetic(
            format!("{} connections / {:.3} s", d.connections, (d.span_us as f64 / 1e6).max(1.0)),
            d.new_connections_per_s,
        )
        .with_evidence(Evidence::Timing {
            what: "shortest reuse interval of a source port".into(),
            count: d.port_reuses,
            value_us: d.min_reuse_interval_us.unwrap_or(0),
        });
        out.push(f);
    }
    out
}

fn us(v: u64) -> String {
    if v < 1_000 {
        format!("{v} us")
    } else if v < 1_000_000 {
        format!("{:.1} ms", v as f64 / 1e3)
    } else {
        format!("{:.3} s", v as f64 / 1e6)
    }
}

fn bytes_h(n: u64) -> String {
    if n >= 1 << 20 {
        format!("{:.1} MiB", n as f64 / (1u64 << 20) as f64)
    } else if n >= 1 << 10 {
        format!("{:.1} KiB", n as f64 / 1024.0)
    } else {
        format!("{n} B")
    }
}

/// Microbursts from the burst table. With a link speed: the busiest 1 ms (the time scale of
/// a shallow switch or qdisc buffer) reached 90% of the link while the 1 s average stayed
/// under half of it. Without one: the busiest 1 ms carried >= 100 Mbit/s and >= 10x the
/// capture's average (an informational finding: the link may be fast enough).
pub fn microburst_finding(rows: &[crate::BurstRow], link: Option<u64>) -> Option<Finding> {
    let ms = rows.iter().find(|r| r.resolution_us == 1_000)?;
    let sec = rows.iter().find(|r| r.resolution_us == 1_000_000)?;
    if sec.bins < 2 || ms.max_bytes == 0 {
        return None;
    }
    let (severity, against) = match link.filter(|&l| l > 0) {
        Some(l) => {
            let l = l as f64;
            if ms.max_bits_per_s < 0.9 * l || sec.max_bits_per_s >= 0.5 * l {
                return None;
            }
            (
                Severity::Warning,
                format!(
                    "{:.0}% of the {} link, while the busiest second averaged {:.0}%",
                    100.0 * ms.max_bits_per_s / l,
                    rate_h(l),
                    100.0 * sec.max_bits_per_s / l
                ),
            )
        }
        None => {
            if ms.max_bits_per_s < 100e6 || ms.max_to_avg_ratio < 10.0 {
                return None;
            }
            (
                Severity::Info,
                format!(
                    "{:.0}x the capture's average of {} (give --link-speed to compare with the link)",
                    ms.max_to_avg_ratio,
                    rate_h(ms.avg_bits_per_s)
                ),
            )
        }
    };
    let mut f = Finding::legacy(
        Pathology::Microburst,
        severity,
        Source::Analyze,
        format!(
            "the busiest 1 ms carried {} ({}): {against}",
            bytes_h(ms.max_bytes),
            rate_h(ms.max_bits_per_s)
        ),
    );
    for r in rows.iter().filter(|r| r.resolution_us <= 100_000) {
        f = f.arithmetic(
            format!(
                "max {} in {} us / avg {:.0} B per bin",
                r.max_bytes, r.resolution_us, r.avg_bytes
            ),
            r.max_to_avg_ratio,
        );
    }
    Some(f)
}

fn rate_h(bits_per_s: f64) -> String {
    if bits_per_s >= 1e9 {
        format!("{:.2} Gbit/s", bits_per_s / 1e9)
    } else if bits_per_s >= 1e6 {
        format!("{:.1} Mbit/s", bits_per_s / 1e6)
    } else {
        format!("{:.0} kbit/s", bits_per_s / 1e3)
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
        assert_eq!(a.count_since(0), 2);
        assert_eq!(a.count_since(200), 1);
        // A straggler: an earlier time behind a later one is still found.
        a.insert(3, 250, 0);
        assert_eq!(a.count_since(200), 2);
        assert_eq!(a.count_since(301), 0);
        // The sweep forgets sightings before 120 (connection 2); positions stay valid.
        a.retain_since(120);
        assert_eq!(a.count_since(0), 2);
        a.insert(1, 400, p1);
        a.insert(2, 410, p2);
        assert_eq!(a.count_since(0), 3);
        assert_eq!(a.count_since(350), 2);
        // Forgetting up to 260 drops the straggler too, though it sits behind a later entry.
        a.retain_since(260);
        assert_eq!(a.count_since(0), 2);
    }
}
