//! Incast: retransmission timeouts of several flows into one receiver at the same moment
//! (synchronized losses at a shallow buffer), or the barrier form: every sender into the
//! receiver silent until one flow's timeout. Keeps, per receiver, the flows that sent to it
//! recently (the fan-in) and the goodput it got, for the cost estimate.

use std::net::IpAddr;

use serde::Serialize;
use tcpdoctor_model::{Evidence, Finding, Pathology, Severity, Source};

use super::{bytes_h, us, Conclusion, Context, Detector, EXAMPLES};
use crate::engine::Config;
use crate::flow::{Conn, Dense, Dir, Endpoint};

/// Fan-in counts flows that sent data to the receiver within this long before the loss.
const FANIN_LOOKBACK_NS: u64 = 100_000_000;
/// A flow refreshes its fan-in entry at most this often (bounds the cost per data segment).
const FANIN_REFRESH_NS: u64 = 10_000_000;

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
    /// timed out is the barrier form of incast (a request that needs every answer).
    pub receiver_silent_us: u64,
    pub frames: Vec<u64>,
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

/// Timeouts per receiver, with the fan-in at each.
pub(crate) struct Incast {
    incast_window_ns: u64,
    /// A data retransmission after this much silence was a timeout (as the engine judges).
    rto_floor_ns: u64,
    rtos: Vec<RtoEvent>,
    receivers: Dense<IpAddr, Receiver>,
}

impl Incast {
    pub(crate) fn new(cfg: &Config) -> Incast {
        Incast {
            incast_window_ns: cfg.incast_window.as_nanos() as u64,
            rto_floor_ns: cfg.rto_min.as_nanos() as u64 * 9 / 10,
            rtos: Vec::new(),
            receivers: Dense::default(),
        }
    }

    /// Groups the timeouts into episodes.
    fn episodes(&mut self, cfg: &Config) -> Vec<IncastEpisode> {
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

    #[allow(deprecated)]
    fn finding(&self, eps: &[IncastEpisode], cfg: &Config) -> Option<Finding> {
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

impl Detector for Incast {
    /// Refreshes the receiver's fan-in bookkeeping.
    #[inline]
    fn data(&mut self, c: &mut Conn, d: Dir, ts: u64) {
        let h = &mut c.half[d];
        if h.receiver_idx != 0 {
            let r = self.receivers.at_mut(h.receiver_idx - 1);
            r.last_data_ts = r.last_data_ts.max(ts);
        }
        if h.fanin_reported_ts != 0 && ts.saturating_sub(h.fanin_reported_ts) < FANIN_REFRESH_NS {
            return;
        }
        h.fanin_reported_ts = ts;
        let receiver = c.receiver(d).addr;
        let i = self
            .receivers
            .index_or_insert_with(receiver, Receiver::default);
        c.half[d].receiver_idx = i + 1;
        let r = self.receivers.at_mut(i);
        r.last_data_ts = r.last_data_ts.max(ts);
        // Over loopback both directions go into one receiver: one entry for the connection.
        let at = if c.client.addr == c.server.addr {
            Dir::C2s
        } else {
            d
        };
        c.half[at].fanin_pos = r.active.insert(c.id, ts, c.half[at].fanin_pos);
    }

    fn timeout(&mut self, c: &Conn, d: Dir, ts: u64, gap_ns: u64, frame: u64) {
        let receiver = c.receiver(d);
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

    /// Prunes the fan-in lists.
    fn sweep(&mut self, now: u64) {
        let keep = now.saturating_sub(2_000_000_000);
        for r in self.receivers.values_mut() {
            r.active.retain_since(keep);
        }
    }

    /// Goodput per receiver (for the incast estimate), from both directions' data.
    fn finished(&mut self, c: &Conn) {
        for d in [Dir::C2s, Dir::S2c] {
            let h = &c.half[d];
            if h.bytes > 0 {
                let r = self
                    .receivers
                    .get_or_insert_with(c.receiver(d).addr, Receiver::default);
                if r.bytes == 0 || c.first_ts < r.first_ts {
                    r.first_ts = c.first_ts;
                }
                r.bytes += h.bytes - h.retrans_bytes.min(h.bytes);
                r.last_ts = r.last_ts.max(h.last_data_ts);
            }
        }
    }

    fn conclude(mut self, ctx: &Context, out: &mut Conclusion) {
        let eps = self.episodes(ctx.cfg);
        if let Some(f) = self.finding(&eps, ctx.cfg) {
            out.findings.push(f);
        }
        out.details.incast = eps;
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
