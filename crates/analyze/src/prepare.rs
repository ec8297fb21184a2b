//! The per-segment work of the analysis that needs no connection state, split off so that
//! `tcpdoctor analyze` can run it on its reading thread while the engine thread tracks
//! connections: each segment's 4-tuple is looked up and given a slot number ([`SegKey`]),
//! and its payload is counted into the microburst bins. The engine ([`crate::Analyzer`])
//! indexes its per-4-tuple state by that slot and hands emptied slots back ([`Released`]).

use tcpdoctor_capture::Segment;

use crate::burst::BurstMeter;
use crate::flow::{KeyMap, PackedKey, WordMap};

/// Where a segment goes in the [`Analyzer`]: the slot of its 4-tuple and which end sent it.
/// Made by [`Prepare::keys`], possibly on another thread than the analyzer that takes it.
#[derive(Clone, Copy, Debug)]
pub struct SegKey {
    pub(crate) slot: u32,
    pub(crate) from_lo: bool,
}

/// A slot the [`Analyzer`] emptied (its 4-tuple forgotten) while taking segment number
/// `at` (counted from 0), for [`Prepare::release`].
#[derive(Clone, Copy, Debug)]
pub struct Released {
    pub(crate) slot: u32,
    pub(crate) at: u64,
}

/// The per-segment work that needs no flow state: finding the 4-tuple's slot (a hash
/// lookup) and the microburst meter. Run it where the segments are read (a second thread),
/// feed each segment with its [`SegKey`] to [`Analyzer::push_keyed`] in capture order, hand
/// what [`Analyzer::released`] returns back to [`Prepare::release`], and give the `Prepare`
/// to [`Analyzer::finish_prepared`] at the end.
///
/// Slots are numbered here and emptied by the analyzer (when a 4-tuple's tombstone expires).
/// An emptied slot is only reused for another 4-tuple once the analyzer has taken every
/// segment numbered for the old one; until then the old 4-tuple keeps it and starts afresh
/// in it, as it would in a new slot.
#[derive(Default)]
pub struct Prepare {
    pub(crate) bursts: BurstMeter,
    /// IPv4 4-tuple -> slot (a compact table: most lookups miss the cache otherwise).
    v4: WordMap<u32>,
    /// Other 4-tuple -> slot.
    slots: KeyMap<u32>,
    /// Slot -> its 4-tuple.
    keys: Vec<PackedKey>,
    /// Slot -> the number of its latest segment (apart from `keys`: 8 bytes a slot keeps
    /// this array, written on every segment, in the cache).
    latest: Vec<u64>,
    free: Vec<u32>,
    /// The last 4-tuple looked up: consecutive segments of one flow skip the hash.
    last: Option<(PackedKey, u32)>,
    /// Number of the next segment.
    next: u64,
}

impl Prepare {
    /// Replaces `out` with the keys of `segs`, in order.
    pub fn keys(&mut self, segs: &[Segment], out: &mut Vec<SegKey>) {
        out.clear();
        out.extend(segs.iter().map(|s| self.key(s)));
    }

    /// The key of one segment (what [`keys`](Self::keys) does for each).
    pub(crate) fn key(&mut self, s: &Segment) -> SegKey {
        self.bursts.add(s.ts_ns, s.payload_len);
        let (key, from_lo) = PackedKey::directed(s.src, s.src_port, s.dst, s.dst_port);
        let n = self.next;
        self.next += 1;
        let slot = match self.last {
            Some((k, i)) if k == key => i,
            _ => {
                let (keys, latest, free) = (&mut self.keys, &mut self.latest, &mut self.free);
                let new_slot = || match free.pop() {
                    Some(i) => {
                        keys[i as usize] = key;
                        i
                    }
                    None => {
                        keys.push(key);
                        latest.push(n);
                        (keys.len() - 1) as u32
                    }
                };
                let i = match key.v4_word() {
                    Some(w) => *self.v4.entry(w).or_insert_with(new_slot),
                    None => *self.slots.entry(key).or_insert_with(new_slot),
                };
                self.last = Some((key, i));
                i
            }
        };
        self.latest[slot as usize] = n;
        SegKey { slot, from_lo }
    }

    /// Slots numbered so far (in use or free).
    #[cfg(test)]
    pub(crate) fn slots_made(&self) -> usize {
        self.keys.len()
    }

    /// Frees the slots the analyzer emptied whose 4-tuple has had no segment numbered since.
    pub fn release(&mut self, released: &[Released]) {
        for r in released {
            let key = self.keys[r.slot as usize];
            if self.latest[r.slot as usize] >= r.at {
                continue;
            }
            let removed = match key.v4_word() {
                Some(w) if self.v4.get(&w) == Some(&r.slot) => self.v4.remove(&w).is_some(),
                None if self.slots.get(&key) == Some(&r.slot) => self.slots.remove(&key).is_some(),
                _ => false,
            };
            if removed {
                self.free.push(r.slot);
                if self.last.is_some_and(|(_, i)| i == r.slot) {
                    self.last = None;
                }
            }
        }
    }
}
