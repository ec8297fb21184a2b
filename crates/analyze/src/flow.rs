//! Flow vocabulary: endpoints, the canonical 4-tuple key, one connection incarnation with
//! its two half-connections, and the summary row (`--flows`) it leaves when evicted.

use std::fmt;
use std::hash::{BuildHasherDefault, Hash, Hasher};
use std::net::IpAddr;

use serde::Serialize;

use crate::seq::SeqNumber;

mod dense;
mod renew;

pub use dense::Dense;

/// One side of a connection.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Endpoint {
    pub addr: IpAddr,
    pub port: u16,
}

impl fmt::Display for Endpoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.addr {
            IpAddr::V4(a) => write!(f, "{a}:{}", self.port),
            IpAddr::V6(a) => write!(f, "[{a}]:{}", self.port),
        }
    }
}

/// A 4-tuple with its endpoints in canonical order, so both directions find the same entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FlowKey {
    pub lo: Endpoint,
    pub hi: Endpoint,
}

impl Hash for FlowKey {
    /// Two words for IPv4 (addresses, ports) instead of the derived field-by-field walk:
    /// this is the hottest hash of the engine. Equal keys hash equally, as `Eq` requires.
    fn hash<H: Hasher>(&self, h: &mut H) {
        match (self.lo.addr, self.hi.addr) {
            (IpAddr::V4(a), IpAddr::V4(b)) => {
                h.write_u64((u64::from(u32::from(a)) << 32) | u64::from(u32::from(b)))
            }
            (a, b) => {
                let bits = |x: IpAddr| match x {
                    IpAddr::V4(v) => u128::from(u32::from(v)),
                    IpAddr::V6(v) => u128::from(v),
                };
                h.write_u64(bits(a) as u64 ^ (bits(a) >> 64) as u64 ^ 0x6);
                h.write_u64(bits(b) as u64 ^ (bits(b) >> 64) as u64);
            }
        }
        h.write_u32((u32::from(self.lo.port) << 16) | u32::from(self.hi.port));
    }
}

impl FlowKey {
    pub fn new(a: Endpoint, b: Endpoint) -> FlowKey {
        if a <= b {
            FlowKey { lo: a, hi: b }
        } else {
            FlowKey { lo: b, hi: a }
        }
    }
}

/// The flow table's key: a 4-tuple as plain integers, endpoints in the same canonical order
/// as [`FlowKey`] (address, then port), so both directions find the same entry. Comparing and
/// ordering integers is cheaper than walking `IpAddr` enums on every segment. The key carries
/// its hash, computed once where the key is made (possibly on another thread) and compared
/// first; the hash is bit-for-bit [`FlowKey`]'s, so the table (and the order a sweep visits
/// it) is unchanged.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PackedKey {
    hash: u64,
    // Addresses as two words each rather than u128, whose 16-byte alignment would pad the
    // key from 48 to 64 bytes.
    lo: [u64; 2],
    hi: [u64; 2],
    /// `lo` port in the high half, `hi` port in the low half.
    ports: u32,
    /// Families, `lo`'s in bit 1 and `hi`'s in bit 0 (1 = IPv6); 0 = both IPv4.
    fam: u8,
}

impl PackedKey {
    /// An IPv4 key in one word: the upper half of its hash (so a map can use it as its hash,
    /// see [`WordHasher`]), the low then high address, the ports. `None` for IPv6.
    pub fn v4_word(&self) -> Option<u128> {
        (self.fam == 0).then(|| {
            (u128::from(self.hash >> 32) << 96)
                | (u128::from(self.lo[0]) << 64)
                | (u128::from(self.hi[0]) << 32)
                | u128::from(self.ports)
        })
    }

    pub fn new(a: IpAddr, a_port: u16, b: IpAddr, b_port: u16) -> PackedKey {
        PackedKey::directed(a, a_port, b, b_port).0
    }

    /// The key, and whether `a` is its low end (true for both directions of a 4-tuple whose
    /// ends are the same, a socket connected to itself).
    pub fn directed(a: IpAddr, a_port: u16, b: IpAddr, b_port: u16) -> (PackedKey, bool) {
        if let (IpAddr::V4(x), IpAddr::V4(y)) = (a, b) {
            // The common case in one word per end: address above port orders as the general
            // path does (family, address, port).
            let ea = (u64::from(u32::from(x)) << 16) | u64::from(a_port);
            let eb = (u64::from(u32::from(y)) << 16) | u64::from(b_port);
            let a_lo = ea <= eb;
            let (lo, hi) = if a_lo { (ea, eb) } else { (eb, ea) };
            let ports = ((lo as u32 & 0xffff) << 16) | (hi as u32 & 0xffff);
            let mut h = FastHasher::default();
            h.write_u64(((lo >> 16) << 32) | (hi >> 16));
            h.write_u32(ports);
            let k = PackedKey {
                hash: h.finish(),
                lo: [lo >> 16, 0],
                hi: [hi >> 16, 0],
                ports,
                fam: 0,
            };
            return (k, a_lo);
        }
        let bits = |x: IpAddr| match x {
            IpAddr::V4(v) => u128::from(u32::from(v)),
            IpAddr::V6(v) => u128::from(v),
        };
        // Families differ only in malformed input; keep such keys apart from same-family ones
        // and order V4 before V6 as `IpAddr` does.
        let fam = |x: IpAddr| u8::from(x.is_ipv6());
        let (ea, eb) = ((fam(a), bits(a), a_port), (fam(b), bits(b), b_port));
        let a_lo = ea <= eb;
        let (lo, hi) = if a_lo { (ea, eb) } else { (eb, ea) };
        let ports = (u32::from(lo.2) << 16) | u32::from(hi.2);
        let fam = (lo.0 << 1) | hi.0;
        // The same words [`FlowKey`] writes for the same 4-tuple.
        let mut h = FastHasher::default();
        if fam != 0 {
            h.write_u64(lo.1 as u64 ^ (lo.1 >> 64) as u64 ^ 0x6);
            h.write_u64(hi.1 as u64 ^ (hi.1 >> 64) as u64);
        } else {
            h.write_u64(((lo.1 as u64) << 32) | hi.1 as u64);
        }
        h.write_u32(ports);
        let words = |v: u128| [v as u64, (v >> 64) as u64];
        let k = PackedKey {
            hash: h.finish(),
            lo: words(lo.1),
            hi: words(hi.1),
            ports,
            fam,
        };
        (k, a_lo)
    }
}

impl Hash for PackedKey {
    /// The hash computed in [`PackedKey::directed`]; meant for a [`KeyMap`].
    fn hash<H: Hasher>(&self, h: &mut H) {
        h.write_u64(self.hash);
    }
}

/// Passes on a hash computed beforehand (by [`PackedKey`]) instead of hashing again.
#[derive(Default, Clone, Copy)]
pub struct PassHasher(u64);

impl Hasher for PassHasher {
    fn write(&mut self, bytes: &[u8]) {
        // Only `write_u64` is expected; anything else still hashes deterministically.
        self.0 = fast_hash_on(self.0, bytes);
    }
    fn write_u64(&mut self, v: u64) {
        self.0 = v;
    }
    fn finish(&self) -> u64 {
        self.0
    }
}

/// [`FastHasher`] continued from `state` over `bytes`: the fallback of the pass-through hashers.
fn fast_hash_on(state: u64, bytes: &[u8]) -> u64 {
    let mut h = FastHasher(state);
    h.write(bytes);
    h.finish()
}

/// Hashes a [`PackedKey::v4_word`] by the hash bits it carries (one multiply spreads them).
#[derive(Default, Clone, Copy)]
pub struct WordHasher(u64);

impl Hasher for WordHasher {
    fn write(&mut self, bytes: &[u8]) {
        // Only `write_u128` is expected; anything else still hashes deterministically.
        self.0 = fast_hash_on(self.0, bytes);
    }
    fn write_u128(&mut self, v: u128) {
        self.0 = ((v >> 96) as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    }
    fn finish(&self) -> u64 {
        self.0
    }
}

/// IPv4 flow keys (one word each, 32 bytes an entry) to slot numbers.
pub type WordMap<V> = std::collections::HashMap<u128, V, BuildHasherDefault<WordHasher>>;

/// The flow table's map type: keys bring their own hash.
pub type KeyMap<V> = std::collections::HashMap<PackedKey, V, BuildHasherDefault<PassHasher>>;

/// A small multiplicative hasher (the FxHash mixing step): flow lookups are the hot path and
/// the keys come from one capture, not from an adversary choosing collisions.
#[derive(Default, Clone, Copy)]
pub struct FastHasher(u64);

const FX_SEED: u64 = 0x51_7c_c1_b7_27_22_0a_95;

impl FastHasher {
    fn mix(&mut self, w: u64) {
        self.0 = (self.0.rotate_left(5) ^ w).wrapping_mul(FX_SEED);
    }
}

impl Hasher for FastHasher {
    fn write(&mut self, bytes: &[u8]) {
        let mut chunks = bytes.chunks_exact(8);
        for c in &mut chunks {
            let mut b = [0u8; 8];
            b.copy_from_slice(c);
            self.mix(u64::from_le_bytes(b));
        }
        let mut last = 0u64;
        for (i, &b) in chunks.remainder().iter().enumerate() {
            last |= u64::from(b) << (8 * i);
        }
        self.mix(last);
    }
    fn write_u8(&mut self, v: u8) {
        self.mix(u64::from(v));
    }
    fn write_u16(&mut self, v: u16) {
        self.mix(u64::from(v));
    }
    fn write_u32(&mut self, v: u32) {
        self.mix(u64::from(v));
    }
    fn write_u64(&mut self, v: u64) {
        self.mix(v);
    }
    fn write_usize(&mut self, v: usize) {
        self.mix(v as u64);
    }
    fn finish(&self) -> u64 {
        self.0
    }
}

pub type FastMap<K, V> = std::collections::HashMap<K, V, BuildHasherDefault<FastHasher>>;

/// The first `N` frame numbers of some kind, plus how many there were in all. Most
/// connections never record any, so the list is allocated on the first frame: an empty one
/// is a few words for every new connection to initialise, not `N` of them.
#[derive(Clone, Debug, Default)]
pub struct Frames<const N: usize> {
    items: Vec<u64>,
    pub total: u32,
}

impl<const N: usize> Frames<N> {
    /// No frame.
    pub const EMPTY: Frames<N> = Frames {
        items: Vec::new(),
        total: 0,
    };

    pub fn push(&mut self, frame: u64) {
        if self.items.len() < N {
            if self.items.capacity() == 0 {
                self.items.reserve_exact(N);
            }
            self.items.push(frame);
        }
        self.total = self.total.saturating_add(1);
    }
    pub fn as_slice(&self) -> &[u64] {
        &self.items
    }
    pub fn first(&self) -> Option<u64> {
        self.items.first().copied()
    }
    pub fn is_empty(&self) -> bool {
        self.total == 0
    }
    /// Takes `frame` out again (a retransmission found spurious later); false if it was
    /// counted but not kept.
    pub fn remove(&mut self, frame: u64) -> bool {
        if self.total == 0 {
            return false;
        }
        self.total -= 1;
        match self.items.iter().position(|&f| f == frame) {
            Some(i) => {
                self.items.remove(i);
                true
            }
            None => false,
        }
    }
}

/// How a retransmission was triggered, judged from timing, duplicate ACKs and SACK.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum RetransKind {
    /// After an idle gap of at least the RTO floor (RFC 6298 section 5; Linux `TCP_RTO_MIN`).
    Rto,
    /// After duplicate ACKs or a SACK above it (RFC 5681 section 3.2, RFC 6675).
    Fast,
    /// The highest segment resent quickly with no duplicate ACKs: a tail loss probe
    /// (RFC 8985 section 7).
    Tlp,
    /// A SYN or SYN-ACK resent.
    Syn,
    /// Other quick repairs (RACK marking, go-back-N after a timeout).
    Other,
}

impl RetransKind {
    pub const ALL: [RetransKind; 5] = [
        RetransKind::Rto,
        RetransKind::Fast,
        RetransKind::Tlp,
        RetransKind::Syn,
        RetransKind::Other,
    ];
    pub fn index(self) -> usize {
        self as usize
    }
}

/// How a connection incarnation ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum CloseKind {
    /// Still open when evicted or at the end of the capture.
    Open,
    /// FIN both ways; `client_first` tells who closed first (and so holds TIME_WAIT).
    Fin { client_first: bool },
    /// Reset; `by_client` tells who sent it.
    Rst { by_client: bool },
    /// Idle longer than the idle timeout and evicted.
    Idle,
    /// Only SYNs, never answered, and the client stopped resending them: the next SYN of
    /// its ladder was overdue (or the capture ended after it was).
    Unanswered,
}

impl CloseKind {
    /// Whether the client's port stays held after this close: in TIME_WAIT when the client
    /// closed first with a FIN (`TCP_TIMEWAIT_LEN`), or still open. A reset close leaves no
    /// TIME_WAIT on either side (RFC 9293 section 3.10.7.4; Linux `tcp_reset`), a server that
    /// closed first holds TIME_WAIT on its own side, and an unanswered SYN never held one.
    pub fn holds_client_port(self) -> bool {
        matches!(
            self,
            CloseKind::Fin { client_first: true } | CloseKind::Open | CloseKind::Idle
        )
    }
}

/// Which way a segment travels within its connection.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Dir {
    /// From the client: the side that sent the SYN (or, with no SYN seen, the higher port).
    C2s,
    /// From the server.
    S2c,
}

impl Dir {
    /// The other direction.
    #[inline]
    pub fn rev(self) -> Dir {
        match self {
            Dir::C2s => Dir::S2c,
            Dir::S2c => Dir::C2s,
        }
    }
}

/// The two halves of a connection, one per [`Dir`]: `c2s` holds what the client sent (and
/// the ACKs and windows it advertised), `s2c` what the server sent.
#[derive(Clone, Copy, Debug, Default)]
pub struct Halves {
    pub c2s: Half,
    pub s2c: Half,
}

impl std::ops::Index<Dir> for Halves {
    type Output = Half;
    #[inline]
    fn index(&self, d: Dir) -> &Half {
        match d {
            Dir::C2s => &self.c2s,
            Dir::S2c => &self.s2c,
        }
    }
}

impl std::ops::IndexMut<Dir> for Halves {
    #[inline]
    fn index_mut(&mut self, d: Dir) -> &mut Half {
        match d {
            Dir::C2s => &mut self.c2s,
            Dir::S2c => &mut self.s2c,
        }
    }
}

impl Halves {
    /// The half of direction `d` and the other one, both mutable.
    #[inline]
    pub fn split_mut(&mut self, d: Dir) -> (&mut Half, &mut Half) {
        match d {
            Dir::C2s => (&mut self.c2s, &mut self.s2c),
            Dir::S2c => (&mut self.s2c, &mut self.c2s),
        }
    }

    /// `f` of both halves, added.
    #[inline]
    pub fn sum<T: std::ops::Add<Output = T>>(&self, f: impl Fn(&Half) -> T) -> T {
        f(&self.c2s) + f(&self.s2c)
    }
}

/// One direction of a connection.
///
/// Laid out by hand (`repr(C)`): the fields most segments read or write come first and fill
/// the first two cache lines, so the engine touches (and prefetches, `Analyzer::push_batch`)
/// two lines of each direction per segment instead of all three; what is set once and read
/// when the connection is summarised follows (what is counted rarely lives in
/// [`HalfRare`]). Aligned to a cache line, so the two lines are whole.
#[derive(Clone, Copy, Debug, Default)]
#[repr(C, align(64))]
pub struct Half {
    // Hot: most segments (sequence, ACK, window, data and fan-in bookkeeping).
    /// Highest sequence number sent + 1 (SYN and FIN count one).
    pub next_seq: Option<SeqNumber>,
    /// Last cumulative ACK this side sent (acknowledging the other direction).
    pub last_ack: Option<SeqNumber>,
    /// Highest SACK right edge in this side's most recent ACK.
    pub sack_hi: Option<SeqNumber>,
    pub next_seq_ts: u64,
    pub win_bytes: u64,
    pub packets: u64,
    pub data_packets: u64,
    pub bytes: u64,
    pub last_data_ts: u64,
    pub fanin_reported_ts: u64,
    pub zero_since: Option<(u64, u64)>,
    pub dup_acks: u32,
    /// The receiver of this direction's data in the detectors' list (index + 1; 0 = not
    /// looked up yet), valid while the list's epoch is `receiver_epoch`.
    pub receiver_idx: u32,
    pub receiver_epoch: u32,
    pub win_raw: u16,
    pub wscale: Option<u8>,
    pub win_known: bool,
    pub fin: bool,
    pub rst: bool,
    pub window_full: u32,
    // Cold: set once; read when the connection is summarised (what is counted rarely is
    // in the connection's `Rare` record, `HalfRare`).
    pub isn: Option<SeqNumber>,
    /// Where the receiver's fan-in list holds this direction (position + 1; 0 = nowhere).
    pub fanin_pos: u64,
}

/// The counts of one direction that most connections leave at zero (retransmissions,
/// reordering, zero windows): kept in the connection's [`Rare`] record, per [`Dir`].
#[derive(Clone, Copy, Debug, Default)]
pub struct HalfRare {
    pub retrans_bytes: u64,
    pub zero_total_ns: u64,
    pub zero_max_ns: u64,
    pub retrans: u32,
    /// Retransmissions by kind (of data, a SYN, or a FIN resent after a timeout).
    pub by_kind: [u32; 5],
    /// Of `retrans`, FINs (or empty segments) sent again quickly, not after a timeout: they
    /// repair no data, and are in no kind above.
    pub bare_repeats: u32,
    /// Of `by_kind`, the retransmissions found spurious: data the receiver already had
    /// (acknowledged before the copy was sent, or reported back by a D-SACK).
    pub spurious_by_kind: [u32; 5],
    pub out_of_order: u32,
    pub zero_window_ads: u32,
    /// Zero-window probes received (sent by the other side while this window was zero).
    pub probes: u32,
}

impl HalfRare {
    /// All counts zero.
    pub const EMPTY: HalfRare = HalfRare {
        retrans_bytes: 0,
        zero_total_ns: 0,
        zero_max_ns: 0,
        retrans: 0,
        by_kind: [0; 5],
        bare_repeats: 0,
        spurious_by_kind: [0; 5],
        out_of_order: 0,
        zero_window_ads: 0,
        probes: 0,
    };
}

/// What a new SYN found on its 4-tuple: the previous incarnation.
#[derive(Clone, Copy, Debug)]
pub struct Reuse {
    pub interval_ns: u64,
    pub prev_close: CloseKind,
    pub prev_client_next: Option<SeqNumber>,
    pub prev_last_frame: u64,
}

/// What is kept of an incarnation after it is summarised: enough to recognise reuse.
#[derive(Clone, Copy, Debug)]
pub struct Tomb {
    pub last_ts: u64,
    pub close: CloseKind,
    /// Whether the client was the low end of the flow key (so a new SYN from the same side
    /// is a reuse by the same client).
    pub client_lo: bool,
    pub client_next: Option<SeqNumber>,
    pub last_frame: u64,
}

/// One data retransmission remembered for D-SACK matching (RFC 2883).
#[derive(Clone, Copy, Debug, Default)]
pub struct RecentRetrans {
    pub start: SeqNumber,
    pub end: SeqNumber,
    pub frame: u64,
    /// Idle time before it (a timeout's stall).
    pub gap_ns: u64,
    pub kind: Option<RetransKind>,
    pub dir: Option<Dir>,
    /// Already found spurious.
    pub spurious: bool,
}

impl RecentRetrans {
    /// No retransmission.
    pub const EMPTY: RecentRetrans = RecentRetrans {
        start: SeqNumber(0),
        end: SeqNumber(0),
        frame: 0,
        gap_ns: 0,
        kind: None,
        dir: None,
        spurious: false,
    };
}

/// One connection incarnation.
///
/// Laid out by hand (`repr(C)`): what the engine reads for every segment (the connection's
/// identity and handshake state, its latest time) fills the first two cache lines, then the
/// two directions ([`Half`], hot lines first), then what is read when it is summarised.
/// Aligned to a cache line, so the hot lines are whole.
#[derive(Clone, Debug)]
#[repr(C, align(64))]
pub struct Conn {
    // Hot: every segment.
    pub id: u64,
    pub last_ts: u64,
    pub last_frame: u64,
    /// Where the engine's queue of half-open connections holds this one (position + 1; 0:
    /// not queued, or known answered).
    pub half_open_at: u64,
    pub synack: Option<(u64, u64)>,
    pub syn_count: u32,
    pub close: CloseKind,
    /// Whether the client is the low end of the flow key (see `PackedKey::directed`).
    pub client_lo: bool,
    pub awaiting_answer: bool,
    pub rtt_ns: Option<u64>,
    pub established_ts: Option<u64>,
    pub first_ts: u64,
    pub wscale_ok: bool,
    /// Who sent the first FIN.
    pub fin_first: Option<Dir>,
    /// Set when the incast detector took this incarnation's retransmissions as its evidence.
    pub in_incast: bool,
    /// With `in_incast`: the incast's receiver is this connection's client (it connected to
    /// the senders), not its server.
    pub incast_receiver_is_client: bool,
    /// Set when the scan detector took this incarnation as a probe of a port scan.
    pub in_scan: bool,
    /// Whether the client/server roles come from a SYN (true) or a port-number guess.
    pub roles_known: bool,
    pub syn_ts_option: bool,
    /// Some reset answer acknowledged the SYN (ACK bit and ack = ISN + 1): the client
    /// accepts it and connect() fails (RFC 9293 section 3.10.7.3). A reset without that
    /// acknowledgement is ignored by the client, which resends the SYN.
    pub rst_answer_acks_syn: bool,
    /// What the connection's latest segment looked like ([`crate::track`]'s fingerprint):
    /// an exact copy of it within microseconds is the capture seeing one packet twice.
    pub last_fp: u64,
    pub half: Halves,
    // Cold: new incarnations, evidence, the summary.
    pub client: Endpoint,
    pub server: Endpoint,
    pub incarnation: u32,
    pub first_frame: u64,
    /// Client SYN transmissions (timestamp, frame), first 8.
    pub syns: [(u64, u64); 8],
    pub reuse: Option<Reuse>,
    /// What only a troubled connection records (odd answers to its SYN, retransmissions,
    /// zero windows), allocated when it first does: most connections never need it, and
    /// every byte of a `Conn` is written when it opens and read when it is summarised.
    pub(crate) rare: Option<Box<Rare>>,
    /// Timeline marks (timeouts, zero windows, quick retransmissions) for the worst-connection
    /// charts; empty (no allocation) for a connection that never stalled.
    pub marks: crate::timeline::Marks,
    /// The exchange in progress (where the time goes: [`crate::exchange`]).
    pub turns: crate::exchange::Turns,
}

/// The part of a [`Conn`] that most connections never fill ([`Conn::rare`]).
#[derive(Clone, Debug)]
pub struct Rare {
    /// Server answers to a SYN that were plain ACKs (of an older connection).
    pub stale: Frames<4>,
    pub stale_first_ts: u64,
    /// Server answers to a SYN that were resets.
    pub rst_answer: Frames<4>,
    /// When the first answer other than a SYN-ACK (a stale ACK or a reset) came.
    pub first_answer_ts: u64,
    /// Client resets of a stale answer.
    pub client_rst: Frames<4>,
    pub client_rst_ts: u64,
    pub rto: Frames<16>,
    pub rto_max_gap_ns: u64,
    /// Sum of the idle gaps the timeouts (not spurious) ended.
    pub rto_gap_total_ns: u64,
    /// FINs (no data) resent after a timeout: the close waited, no data did. Not in `rto`.
    pub close_rto: u32,
    pub close_rto_max_gap_ns: u64,
    /// Of `close_rto`, FINs resent after the peer's own FIN was seen: the peer had closed
    /// first, so no application waited for this end of the stream.
    pub close_rto_after_peer: u32,
    /// Frames of retransmissions repaired without a timeout (fast, TLP, other), not spurious.
    pub quick_frames: Frames<8>,
    /// Frames of spurious retransmissions.
    pub spurious_frames: Frames<8>,
    /// The latest data retransmissions, for matching a D-SACK to the copy it reports.
    pub recent_retrans: [RecentRetrans; 4],
    /// Longest idle gap before a retransmission found spurious (a timeout that fired too
    /// soon stalled the sender this long for nothing).
    pub spurious_max_gap_ns: u64,
    pub zero_frames: Frames<8>,
    pub probe_frames: Frames<8>,
    /// What each direction counted (see [`HalfRare`]).
    pub c2s: HalfRare,
    pub s2c: HalfRare,
}

impl Default for Rare {
    fn default() -> Rare {
        Rare::EMPTY
    }
}

impl Rare {
    /// Nothing recorded: what a connection reads before its first record, and what that
    /// record starts from.
    pub const EMPTY: Rare = Rare {
        stale: Frames::EMPTY,
        stale_first_ts: 0,
        rst_answer: Frames::EMPTY,
        first_answer_ts: 0,
        client_rst: Frames::EMPTY,
        client_rst_ts: 0,
        rto: Frames::EMPTY,
        rto_max_gap_ns: 0,
        rto_gap_total_ns: 0,
        close_rto: 0,
        close_rto_max_gap_ns: 0,
        close_rto_after_peer: 0,
        quick_frames: Frames::EMPTY,
        spurious_frames: Frames::EMPTY,
        recent_retrans: [RecentRetrans::EMPTY; 4],
        spurious_max_gap_ns: 0,
        zero_frames: Frames::EMPTY,
        probe_frames: Frames::EMPTY,
        c2s: HalfRare::EMPTY,
        s2c: HalfRare::EMPTY,
    };

    /// The counts of direction `d`.
    #[inline]
    pub fn dir(&self, d: Dir) -> &HalfRare {
        match d {
            Dir::C2s => &self.c2s,
            Dir::S2c => &self.s2c,
        }
    }

    /// [`dir`](Self::dir), to count into.
    #[inline]
    pub fn dir_mut(&mut self, d: Dir) -> &mut HalfRare {
        match d {
            Dir::C2s => &mut self.c2s,
            Dir::S2c => &mut self.s2c,
        }
    }

    /// `f` of both directions' counts, added.
    #[inline]
    pub fn sum<T: std::ops::Add<Output = T>>(&self, f: impl Fn(&HalfRare) -> T) -> T {
        f(&self.c2s) + f(&self.s2c)
    }

    /// The record in `slot` (a connection's), allocated on the first call: for callers that
    /// hold other parts of the connection borrowed.
    #[inline]
    pub(crate) fn of(slot: &mut Option<Box<Rare>>) -> &mut Rare {
        slot.get_or_insert_with(Box::default)
    }
}

/// What [`Conn::rare`] reads for a connection that recorded nothing rare.
static NO_RARE: Rare = Rare::EMPTY;

impl Conn {
    pub fn new(
        id: u64,
        incarnation: u32,
        client: Endpoint,
        server: Endpoint,
        roles_known: bool,
        ts: u64,
    ) -> Conn {
        Conn {
            id,
            incarnation,
            client,
            server,
            client_lo: false,
            roles_known,
            first_ts: ts,
            last_ts: ts,
            first_frame: 0,
            last_frame: 0,
            half: Halves::default(),
            wscale_ok: false,
            syns: [(0, 0); 8],
            syn_count: 0,
            syn_ts_option: false,
            synack: None,
            awaiting_answer: false,
            established_ts: None,
            rtt_ns: None,
            rst_answer_acks_syn: false,
            last_fp: 0,
            reuse: None,
            close: CloseKind::Open,
            fin_first: None,
            in_incast: false,
            incast_receiver_is_client: false,
            in_scan: false,
            rare: None,
            marks: crate::timeline::Marks::default(),
            turns: crate::exchange::Turns::default(),
            half_open_at: 0,
        }
    }

    /// `client:port > server:port`, with the incarnation when the 4-tuple was reused.
    pub fn label(&self) -> String {
        if self.incarnation > 1 {
            format!("{} > {} #{}", self.client, self.server, self.incarnation)
        } else {
            format!("{} > {}", self.client, self.server)
        }
    }

    /// What this connection recorded of odd SYN answers, retransmissions and zero windows
    /// (all empty when it recorded none).
    #[inline]
    pub fn rare(&self) -> &Rare {
        self.rare.as_deref().unwrap_or(&NO_RARE)
    }

    /// [`rare`](Self::rare), to record into (allocated on the first record).
    #[inline]
    pub fn rare_mut(&mut self) -> &mut Rare {
        Rare::of(&mut self.rare)
    }

    /// Client SYN transmissions so far (the first 8).
    pub fn syn_list(&self) -> &[(u64, u64)] {
        &self.syns[..(self.syn_count as usize).min(self.syns.len())]
    }

    pub fn retrans_total(&self) -> u32 {
        self.rare().sum(|h| h.retrans)
    }

    /// Retransmissions of `kind`, both directions.
    pub fn retrans_of(&self, kind: RetransKind) -> u32 {
        self.rare().sum(|h| h.by_kind[kind.index()])
    }

    /// Retransmissions of `kind` that repaired a loss (not spurious), both directions.
    pub fn lost_of(&self, kind: RetransKind) -> u32 {
        self.rare()
            .sum(|h| h.by_kind[kind.index()] - h.spurious_by_kind[kind.index()])
    }

    /// Spurious retransmissions of `kind`, both directions.
    pub fn spurious_of(&self, kind: RetransKind) -> u32 {
        self.rare().sum(|h| h.spurious_by_kind[kind.index()])
    }

    /// Only SYNs so far: no answer of any kind, no data, no close.
    pub fn half_open(&self) -> bool {
        self.syn_count > 0
            && self.synack.is_none()
            && self.rare().rst_answer.is_empty()
            && self.rare().stale.is_empty()
            && self.half.s2c.packets == 0
            && self.half.c2s.packets == self.syn_count as u64
            && self.close == CloseKind::Open
    }

    /// The receiving end of what direction `d` sends.
    pub fn receiver(&self, d: Dir) -> Endpoint {
        match d {
            Dir::C2s => self.server,
            Dir::S2c => self.client,
        }
    }
}

/// One row of `--flows`: a connection incarnation, compact like `tcptrace -l`.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct FlowRow {
    pub id: u64,
    pub client: String,
    pub server: String,
    /// 1 for the first connection on this 4-tuple in the capture, 2 for the next, ...
    pub incarnation: u32,
    /// Start relative to the first packet of the capture.
    pub start_us: u64,
    pub duration_us: u64,
    pub first_frame: u64,
    pub packets_c2s: u64,
    pub packets_s2c: u64,
    pub bytes_c2s: u64,
    pub bytes_s2c: u64,
    pub retrans_c2s: u32,
    pub retrans_s2c: u32,
    pub rto: u32,
    pub fast_retrans: u32,
    pub tlp: u32,
    pub syn_retrans: u32,
    pub out_of_order: u32,
    pub zero_window_ads: u32,
    pub zero_window_max_us: u64,
    pub handshake_rtt_us: Option<u64>,
    /// Exchanges (a request answered), the first one's server time (request's last byte to
    /// response's first, less the path's share) and the client's wait from the handshake to
    /// its first request.
    pub exchanges: u32,
    pub first_response_us: Option<u64>,
    pub client_delay_us: Option<u64>,
    pub close: CloseKind,
    /// Time since the previous incarnation on this 4-tuple ended, when there was one.
    pub reuse_interval_us: Option<u64>,
}
