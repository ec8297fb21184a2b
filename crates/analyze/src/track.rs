//! What one segment does to its connection incarnation, one function per concern: the
//! handshake ([`handshake`]), the sender's sequence space and retransmissions ([`sequence`]),
//! the acknowledgements it carries ([`ack`]), the windows ([`window_full`], [`advertised`])
//! and the close ([`close`]). [`segment`] runs them in that order and tells the detectors.
//!
//! Owns no state of its own: everything lives in the [`Conn`]. Runs for every segment of the
//! capture, so each step reads only the fields it needs.

use tcpdoctor_capture::{Segment, TcpFlags};

use crate::detect::{Detectors, Retransmission};
use crate::engine::{Config, Totals};
use crate::flow::{CloseKind, Conn, Dir, Half, Rare, RecentRetrans, RetransKind};
use crate::seq::SeqNumber;
use crate::timeline::{Mark, MarkKind};

/// Without a handshake RTT, a segment below the highest sequence number that arrives within
/// 3 ms of it is taken as reordered, not retransmitted (Wireshark's default threshold).
const OOO_DEFAULT_NS: u64 = 3_000_000;

/// A copy of a connection's previous segment that occupies sequence space (data, SYN, FIN;
/// same direction, sequence and acknowledgement numbers, length, flags, window and TCP
/// timestamp) this soon after it is the capture seeing one packet twice, not a
/// retransmission: no sender retransmits before a timer of at least a couple of milliseconds
/// fires (Linux: `TCP_TIMEOUT_MIN` for a tail loss probe, the RTO floor for a timeout), and a
/// fast retransmission comes after duplicate ACKs, which are segments of the connection in
/// between. (Pure ACKs are told apart only by their IPv4 ID, [`SAME_DATAGRAM_WITHIN`]: duplicate ACKs
/// are exact copies by design.) Captures taken on two interfaces at once (a bridge
/// and its port, `-i any` on a host that forwards) hold every packet twice, microseconds
/// apart.
pub const DUPLICATE_WITHIN: std::time::Duration = std::time::Duration::from_micros(500);

/// How long after it an exact copy of a connection's previous segment that also carries the
/// same non-zero IPv4 Identification is still that datagram captured twice. Senders number
/// every datagram (Linux per connected socket, Windows globally), so a retransmission, or a
/// duplicate ACK, carries a new one; a mirror port that sees traffic twice can add
/// milliseconds (measured: a public capture, hauntedbrowser.pcap of Practical Packet Analysis,
/// holds each packet twice 1.3 to 6.8 ms apart: 5 SYN and 6 data "retransmissions" and a
/// CRITICAL "SYNs never answered" after 2.4 ms). Pure ACKs are told apart this way too.
pub const SAME_DATAGRAM_WITHIN: std::time::Duration = std::time::Duration::from_millis(200);

/// What identifies a segment as a copy of the previous one ([`DUPLICATE_WITHIN`]), sent by
/// the low end of the flow key when `from_lo` (within one connection, its direction); 0 for
/// a segment never told apart as a copy.
///
/// Only segments that occupy sequence space (data, SYN, FIN) are told apart as copies: a
/// duplicate ACK is an exact copy of the previous ACK by design, microseconds later. A pure
/// ACK only when it carries an IPv4 Identification ([`SAME_DATAGRAM_WITHIN`]).
#[inline]
pub(crate) fn fingerprint(s: &Segment, from_lo: bool) -> u64 {
    if !(s.payload_len > 0 || s.flags.syn() || s.flags.fin() || s.ip_id != 0) {
        return 0;
    }
    let tsval = s.options.timestamps.map_or(0, |t| t.0);
    let a = (u64::from(s.seq) << 32) | u64::from(s.ack);
    let b = (u64::from(s.payload_len) << 32)
        ^ (u64::from(s.window) << 16)
        ^ (u64::from(s.flags.0) << 1)
        ^ u64::from(from_lo)
        ^ (u64::from(tsval) << 24)
        ^ (u64::from(s.ip_id) << 40);
    // Never 0, the value of "no segment to compare with".
    (a ^ b.wrapping_mul(0x9e37_79b9_7f4a_7c15)) | 1
}

/// Updates one incarnation with one of its segments, travelling in direction `d`, and tells
/// the detectors about timeouts and data. `fp` is the segment's [`fingerprint`]. Returns the
/// kind of retransmission it was, if one.
#[inline]
pub(crate) fn segment(
    c: &mut Conn,
    s: &Segment,
    d: Dir,
    fp: u64,
    cfg: &Config,
    det: &mut Detectors,
    totals: &mut Totals,
) -> Option<RetransKind> {
    let ts = s.ts_ns;
    let within = if s.ip_id != 0 {
        SAME_DATAGRAM_WITHIN
    } else {
        DUPLICATE_WITHIN
    };
    if fp != 0 && fp == c.last_fp && ts.saturating_sub(c.last_ts) <= within.as_nanos() as u64 {
        // The same packet captured twice: left out of everything.
        totals.duplicates += 1;
        return None;
    }
    c.last_fp = fp;
    if predicted(c, s, d) {
        #[cfg(test)]
        PREDICTED.with(|n| n.set(n.get() + 1));
        in_order(c, s, d, det, totals);
        return None;
    }
    let gap = ts.saturating_sub(c.last_ts);
    // What the server sends a SYN instead of a SYN-ACK (a stale ACK, a reset) belongs to
    // older state on the 4-tuple: it must not set this incarnation's sequence space, ACKs
    // or windows, or the new connection's data would look like retransmissions of it.
    let answer = d == Dir::S2c && !s.flags.syn() && c.synack.is_none() && c.awaiting_answer;
    handshake(c, s, d, totals);
    let next_before = c.half[d].next_seq;
    let seen = if answer {
        Seen {
            retrans: None,
            probe: false,
            spurious: false,
        }
    } else {
        sequence(c, s, d, gap, cfg, totals)
    };
    let (h, other) = c.half.split_mut(d);
    window_full(h, other, s);
    h.packets += 1;
    if seen.probe {
        let r = Rare::of(&mut c.rare);
        r.probe_frames.push(s.frame);
        r.dir_mut(d.rev()).probes += 1;
    }
    count_data(h, s, totals);
    if !answer {
        ack(h, other, s);
        if let Some(frame) = dsack(c, s, d, totals) {
            det.spurious(c, d.rev(), frame);
        }
        advertised(c, s, d, totals);
    }
    close(c, s, d, answer, totals);
    if let Some(kind) = seen.retrans {
        retransmitted(c, s, d, kind, gap, seen.spurious, totals);
        // FINs resent (quickly or after a timeout) repaired no data: not a loss of data.
        let bare = s.payload_len == 0;
        if kind != RetransKind::Syn && !seen.spurious && !bare {
            det.retransmitted(&Retransmission {
                conn: c,
                dir: d,
                ts,
                kind,
                gap_ns: gap,
                frame: s.frame,
            });
        }
    }
    if s.payload_len > 0 {
        det.data(c, d, ts);
    }
    if !answer {
        let advanced = s.payload_len > 0 && c.half[d].next_seq != next_before;
        turn(c, s, d, advanced, det);
    }
    c.last_ts = c.last_ts.max(ts);
    c.last_frame = s.frame;
    seen.retrans
}

/// Counts the payload of `s` in its sender's half `h` and the totals.
#[inline(always)]
fn count_data(h: &mut Half, s: &Segment, totals: &mut Totals) {
    if s.payload_len > 0 {
        h.data_packets += 1;
        h.bytes += u64::from(s.payload_len);
        h.last_data_ts = s.ts_ns;
        totals.data_segments += 1;
        totals.payload_bytes += u64::from(s.payload_len);
    }
}

/// The exchange step ([`crate::exchange`]) for a segment with payload, or a server segment
/// while a request is in progress (its ACK may cover the request); `advanced`: its payload
/// moved the sender's highest sequence number. Tells the detectors of a finished exchange.
#[inline(always)]
fn turn(c: &mut Conn, s: &Segment, d: Dir, advanced: bool, det: &mut Detectors) {
    let payload = s.payload_len > 0;
    if payload || (d == Dir::S2c && c.turns.phase == crate::exchange::Phase::Request) {
        let ack = s.flags.ack().then_some(s.ack);
        let at = (s.ts_ns, s.frame);
        if let Some(ex) = crate::exchange::segment(c, d, at, payload, ack, advanced) {
            det.exchange(c, &ex);
        }
    }
}

/// Header prediction (as a receiving stack does it, RFC 9293's fast path): the common
/// segment of an established connection, an ACK without SYN, FIN, RST or SACK blocks whose
/// sequence number is the sender's highest so far (new data in order, or a pure ACK), and
/// that is no zero-window probe. For it [`handshake`], [`sequence`], [`dsack`] and [`close`]
/// would change nothing but the highest sequence number, so [`in_order`] skips them; what
/// [`segment`] does for every segment (counts, ACKs, windows, the detectors, the exchange)
/// it does the same way. The test `header_prediction_changes_no_result` (on every capture in
/// tests/data) checks that the two paths agree.
#[inline]
fn predicted(c: &Conn, s: &Segment, d: Dir) -> bool {
    const ODD: u8 = TcpFlags::SYN | TcpFlags::FIN | TcpFlags::RST;
    if s.flags.0 & ODD != 0 || !s.flags.ack() || s.options.sack_count != 0 {
        return false;
    }
    if c.established_ts.is_none() {
        return false;
    }
    #[cfg(test)]
    if !PREDICT.with(std::cell::Cell::get) {
        return false;
    }
    let (h, rev) = (&c.half[d], &c.half[d.rev()]);
    // A one-byte segment at the highest sequence number into a zero window is a probe.
    let probe = s.payload_len == 1 && rev.win_known && rev.win_raw == 0;
    h.next_seq == Some(SeqNumber(s.seq)) && !probe
}

#[cfg(test)]
thread_local! {
    /// Whether [`predicted`] may take segments off the general path on this thread (a test
    /// turns it off to compare both paths).
    pub(crate) static PREDICT: std::cell::Cell<bool> = const { std::cell::Cell::new(true) };
    /// Segments [`predicted`] took on this thread.
    pub(crate) static PREDICTED: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

/// [`segment`] for a segment [`predicted`] took: in order, nothing to repair or close.
#[inline]
fn in_order(c: &mut Conn, s: &Segment, d: Dir, det: &mut Detectors, totals: &mut Totals) {
    let ts = s.ts_ns;
    let len = s.payload_len;
    let (h, other) = c.half.split_mut(d);
    window_full(h, other, s);
    h.packets += 1;
    if len > 0 {
        // In order: the highest sequence number moves past it.
        h.next_seq = Some(SeqNumber(s.seq).wrapping_add(len));
        h.next_seq_ts = ts;
    }
    count_data(h, s, totals);
    ack(h, other, s);
    advertised(c, s, d, totals);
    if len > 0 {
        det.data(c, d, ts);
    }
    turn(c, s, d, len > 0, det);
    c.last_ts = c.last_ts.max(ts);
    c.last_frame = s.frame;
}

/// Records a retransmission of `kind` (already counted by [`sequence`]) in the connection:
/// its frame in the list of its kind, and, for data, in the recent list that a later D-SACK
/// is matched against. `spurious`: the receiver had acknowledged the data before this copy.
#[inline]
fn retransmitted(
    c: &mut Conn,
    s: &Segment,
    d: Dir,
    kind: RetransKind,
    gap: u64,
    spurious: bool,
    totals: &mut Totals,
) {
    if kind == RetransKind::Syn {
        return;
    }
    let seq = SeqNumber(s.seq);
    let r = c.rare_mut();
    r.recent_retrans.rotate_right(1);
    r.recent_retrans[0] = RecentRetrans {
        start: seq,
        end: seq.wrapping_add(s.payload_len),
        frame: s.frame,
        gap_ns: gap,
        kind: Some(kind),
        dir: Some(d),
        spurious,
    };
    if spurious {
        found_spurious(c, d, kind, s.frame, gap, false, totals);
    } else if s.payload_len == 0 && kind != RetransKind::Rto {
        // A FIN (or an empty segment) sent again quickly repairs no data: counted among the
        // retransmissions, as Wireshark counts it, but not as a loss repair of data.
        let r = c.rare_mut().dir_mut(d);
        r.by_kind[kind.index()] -= 1;
        r.bare_repeats += 1;
    } else if kind == RetransKind::Rto && s.payload_len == 0 {
        // A FIN resent after a timeout: the close waited, no data did.
        let peer_closed = c.half[d.rev()].fin;
        let r = c.rare_mut();
        r.close_rto += 1;
        r.close_rto_max_gap_ns = r.close_rto_max_gap_ns.max(gap);
        r.close_rto_after_peer += u32::from(peer_closed);
    } else if kind == RetransKind::Rto {
        let r = c.rare_mut();
        r.rto.push(s.frame);
        r.rto_max_gap_ns = r.rto_max_gap_ns.max(gap);
        r.rto_gap_total_ns += gap;
        c.marks.push(Mark {
            kind: MarkKind::TimeoutGap,
            start_ns: s.ts_ns.saturating_sub(gap),
            end_ns: Some(s.ts_ns),
            frame: s.frame,
        });
    } else {
        c.rare_mut().quick_frames.push(s.frame);
        c.marks.push(Mark {
            kind: MarkKind::QuickRetransmission,
            start_ns: s.ts_ns,
            end_ns: None,
            frame: s.frame,
        });
    }
}

/// Whether `s` acknowledges the connection's SYN (its ISN + 1). An ACK without SYN that does
/// is no stale answer of an old connection: it is this one's (a middlebox answering for the
/// server; a public capture, evidence05.pcap, holds three, each followed by the SYN-ACK with
/// the same sequence number, which analyze had called TIME_WAIT collisions "the client
/// reset", no reset captured).
fn acks_the_syn(c: &Conn, s: &Segment) -> bool {
    c.half.c2s.isn.map(|i| i.wrapping_add(1)) == Some(SeqNumber(s.ack))
}

/// Counts a retransmission of direction `d` as spurious (RFC 2883, RFC 3522): puts its
/// frame in the spurious list; `listed` when it had gone to the list of its kind (found
/// spurious later, by a D-SACK), from which it is taken out again.
#[allow(clippy::too_many_arguments)]
fn found_spurious(
    c: &mut Conn,
    d: Dir,
    kind: RetransKind,
    frame: u64,
    gap: u64,
    listed: bool,
    totals: &mut Totals,
) {
    c.rare_mut().dir_mut(d).spurious_by_kind[kind.index()] += 1;
    totals.retransmissions_spurious += 1;
    if listed {
        match kind {
            RetransKind::Rto => {
                let r = c.rare_mut();
                r.rto.remove(frame);
                r.rto_gap_total_ns = r.rto_gap_total_ns.saturating_sub(gap);
                c.marks.remove(MarkKind::TimeoutGap, frame);
            }
            RetransKind::Syn => {}
            _ => {
                c.rare_mut().quick_frames.remove(frame);
                c.marks.remove(MarkKind::QuickRetransmission, frame);
            }
        }
    }
    let r = c.rare_mut();
    r.spurious_frames.push(frame);
    r.spurious_max_gap_ns = r.spurious_max_gap_ns.max(gap);
}

/// A D-SACK (RFC 2883 section 4): the first SACK block of an ACK from `d` reports data of
/// the other direction that arrived twice, when it lies below the cumulative ACK or inside
/// the second block. The retransmission it reports was spurious: the original had arrived.
/// Returns the frame of the retransmission found spurious.
#[inline]
fn dsack(c: &mut Conn, s: &Segment, d: Dir, totals: &mut Totals) -> Option<u64> {
    if !s.flags.ack() || s.options.sack_count == 0 {
        return None;
    }
    let ack = SeqNumber(s.ack);
    let (l, r) = s.options.sack[0];
    let (l, r) = (SeqNumber(l), SeqNumber(r));
    let below = r <= ack;
    let inside = s.options.sack_count >= 2 && {
        let (l2, r2) = s.options.sack[1];
        l >= SeqNumber(l2) && r <= SeqNumber(r2)
    };
    if !(below || inside) {
        return None;
    }
    let sender = d.rev();
    let hit = c
        .rare()
        .recent_retrans
        .iter()
        .position(|e| e.dir == Some(sender) && !e.spurious && e.start < r && l < e.end);
    let i = hit?;
    let rare = c.rare_mut();
    rare.recent_retrans[i].spurious = true;
    let e = rare.recent_retrans[i];
    found_spurious(c, sender, e.kind?, e.frame, e.gap_ns, true, totals);
    Some(e.frame)
}

/// SYN, SYN-ACK and the answers a SYN gets instead (a reset, a stale ACK of an older
/// connection, the client's reset of that), and the ACK that completes the handshake.
#[inline]
fn handshake(c: &mut Conn, s: &Segment, d: Dir, totals: &mut Totals) {
    let f = s.flags;
    let (ts, frame, seq) = (s.ts_ns, s.frame, SeqNumber(s.seq));
    if f.syn() && !f.ack() && d == Dir::C2s {
        if c.syn_count == 0 {
            c.half.c2s.isn = Some(seq);
            c.half.c2s.wscale = s.options.window_scale;
            c.syn_ts_option = s.options.timestamps.is_some();
            if c.synack.is_some() {
                // Its SYN-ACK came first in the capture: scaling is agreed now.
                c.wscale_ok = c.half.c2s.wscale.is_some() && c.half.s2c.wscale.is_some();
            }
        }
        if (c.syn_count as usize) < c.syns.len() {
            c.syns[c.syn_count as usize] = (ts, frame);
        }
        c.syn_count += 1;
        // A SYN whose SYN-ACK the capture held first is answered already.
        c.awaiting_answer = c.synack.is_none();
    } else if f.syn() && f.ack() && d == Dir::S2c {
        if c.synack.is_none() {
            c.synack = Some((ts, frame));
            c.half.s2c.isn = Some(seq);
            c.half.s2c.wscale = s.options.window_scale;
            c.wscale_ok = c.half.c2s.wscale.is_some() && c.half.s2c.wscale.is_some();
            totals.connections_with_handshake += 1;
        }
        c.awaiting_answer = false;
    } else if d == Dir::S2c
        && c.awaiting_answer
        && c.synack.is_none()
        && !(f.ack() && !f.rst() && acks_the_syn(c, s))
    {
        let r = Rare::of(&mut c.rare);
        if r.first_answer_ts == 0 {
            r.first_answer_ts = ts;
        }
        if f.rst() {
            r.rst_answer.push(frame);
            let syn_acked = c.half.c2s.isn.map(|i| i.wrapping_add(1)) == Some(SeqNumber(s.ack));
            c.rst_answer_acks_syn |= f.ack() && syn_acked;
        } else if f.ack() {
            if r.stale.is_empty() {
                r.stale_first_ts = ts;
            }
            r.stale.push(frame);
        }
        c.awaiting_answer = false;
    } else if d == Dir::C2s && f.rst() && c.synack.is_none() && !c.rare().stale.is_empty() {
        let r = c.rare_mut();
        if r.client_rst.is_empty() {
            r.client_rst_ts = ts;
        }
        r.client_rst.push(frame);
    } else if d == Dir::C2s
        && f.ack()
        && c.established_ts.is_none()
        && c.synack.is_some()
        && c.half.s2c.isn.map(|i| i.wrapping_add(1)) == Some(SeqNumber(s.ack))
    {
        c.established_ts = Some(ts);
        crate::exchange::established(c, (ts, frame));
        if let Some(&(syn_ts, _)) = c.syn_list().last() {
            c.rtt_ns = Some(ts.saturating_sub(syn_ts));
        }
    }
}

/// What [`sequence`] found.
struct Seen {
    retrans: Option<RetransKind>,
    /// A zero-window probe.
    probe: bool,
    /// The retransmitted data had been acknowledged before this copy was sent.
    spurious: bool,
}

/// Where the segment sits in its sender's sequence space: new data, a retransmission (and
/// of which kind), reordering, a keep-alive or a zero-window probe. Moves the highest
/// sequence number seen and counts retransmissions.
#[inline]
fn sequence(
    c: &mut Conn,
    s: &Segment,
    d: Dir,
    gap: u64,
    cfg: &Config,
    totals: &mut Totals,
) -> Seen {
    let f = s.flags;
    let (ts, seq, len) = (s.ts_ns, SeqNumber(s.seq), s.payload_len);
    let eff = len + u32::from(f.syn()) + u32::from(f.fin());
    let ooo_ns = c.rtt_ns.filter(|&v| v > 0).unwrap_or(OOO_DEFAULT_NS);
    let rto_ns = cfg.rto_min.as_nanos() as u64 * 9 / 10;
    let (h, rev) = c.half.split_mut(d);
    let mut retrans = None;
    let mut probe = false;
    let mut already_acked = false;
    match h.next_seq {
        None => {
            h.next_seq = Some(seq.wrapping_add(eff));
            h.next_seq_ts = ts;
        }
        Some(nxt) => {
            let zero_rev = rev.win_known && rev.win_raw == 0;
            if eff == 0 && !f.rst() && zero_rev && seq == nxt.wrapping_sub(1) {
                // Linux probes a zero window with an empty segment one below snd_una
                // (tcp_xmit_probe_skb, net/ipv4/tcp_output.c).
                probe = true;
            } else if eff == 0 && !f.rst() && seq > nxt {
                // An empty segment beyond the highest data seen: the data before it was
                // captured later (the sender's CPUs stamp in a different order). Its sequence
                // number is the sender's snd_nxt, so it moves the highest mark, as Wireshark
                // moves `nextseq`; the data that follows is then counted as tshark counts it.
                h.next_seq = Some(seq);
                h.next_seq_ts = ts;
            } else if eff > 0 && !f.rst() {
                let end = seq.wrapping_add(eff);
                let keepalive = len <= 1 && !f.syn() && !f.fin() && seq == nxt.wrapping_sub(1);
                let zwp = len == 1 && seq == nxt && zero_rev;
                if zwp {
                    probe = true;
                } else {
                    if seq < nxt && !keepalive {
                        let fast = rev.dup_acks >= 2 && rev.last_ack == Some(seq);
                        // Data the receiver had already acknowledged is a (spurious)
                        // retransmission whatever its timing; Wireshark checks this before
                        // reordering. Unless the sender shows it never got that
                        // acknowledgement: its own ACK leaves out data the receiver had sent
                        // (the receiver's segments were lost between the capture point and
                        // the sender; the receiver's own resends show it), so its timer
                        // repaired a loss the capture point did not see.
                        let spurious = len > 0
                            && rev.last_ack.is_some_and(|a| seq.wrapping_add(len) <= a)
                            && !(f.ack() && rev.next_seq.is_some_and(|n| SeqNumber(s.ack) < n));
                        // Reordered only if it came soon *after* the highest segment: one
                        // stamped earlier (captures from several CPUs interleave timestamps)
                        // is a retransmission, as Wireshark judges it (its time difference is
                        // unsigned), so the retransmission counts agree.
                        let ooo = !fast
                            && !spurious
                            && ts >= h.next_seq_ts
                            && ts - h.next_seq_ts < ooo_ns
                            && nxt != end;
                        if ooo {
                            Rare::of(&mut c.rare).dir_mut(d).out_of_order += 1;
                            totals.out_of_order += 1;
                        } else {
                            already_acked = spurious;
                            let below_una = rev.last_ack.is_none_or(|a| seq <= a);
                            let sacked_above = rev.sack_hi.is_some_and(|hi| hi > seq);
                            retrans = Some(if f.syn() {
                                RetransKind::Syn
                            } else if gap >= rto_ns && below_una {
                                RetransKind::Rto
                            } else if fast || sacked_above {
                                RetransKind::Fast
                            } else if end == nxt {
                                RetransKind::Tlp
                            } else if gap >= rto_ns {
                                RetransKind::Rto
                            } else {
                                RetransKind::Other
                            });
                        }
                    }
                    if end > nxt {
                        h.next_seq = Some(end);
                        h.next_seq_ts = ts;
                    }
                }
            }
        }
    }
    if let Some(kind) = retrans {
        let r = Rare::of(&mut c.rare).dir_mut(d);
        r.retrans += 1;
        r.retrans_bytes += u64::from(len);
        r.by_kind[kind.index()] += 1;
        totals.retransmissions += 1;
        totals.retransmitted_bytes += u64::from(len);
        match kind {
            RetransKind::Rto => totals.retransmissions_rto += 1,
            RetransKind::Fast => totals.retransmissions_fast += 1,
            RetransKind::Tlp => totals.retransmissions_tlp += 1,
            RetransKind::Syn => totals.retransmissions_syn += 1,
            RetransKind::Other => totals.retransmissions_other += 1,
        }
    }
    Seen {
        retrans,
        probe,
        spurious: already_acked,
    }
}

/// Window full (Wireshark's `tcp.analysis.window_full`): this segment of `h`'s sender fills
/// the window the other side (`rev`) last advertised.
#[inline]
fn window_full(h: &mut Half, rev: &Half, s: &Segment) {
    let len = s.payload_len;
    if len > 0 && rev.win_known && rev.win_bytes > 0 {
        if let Some(a) = rev.last_ack {
            if SeqNumber(s.seq).wrapping_add(len)
                == a.wrapping_add(rev.win_bytes.min(u64::from(u32::MAX)) as u32)
            {
                h.window_full += 1;
            }
        }
    }
}

/// The acknowledgement the segment carries: `h` (its sender) acknowledging what `rev`
/// sent. Counts duplicate ACKs (RFC 5681 section 2) and keeps the highest SACK edge.
#[inline]
fn ack(h: &mut Half, rev: &Half, s: &Segment) {
    let f = s.flags;
    if !f.ack() {
        return;
    }
    let ack = SeqNumber(s.ack);
    let outstanding = rev.next_seq.is_some_and(|n| n > ack);
    let dup = s.payload_len == 0
        && !f.syn()
        && !f.fin()
        && !f.rst()
        && h.last_ack == Some(ack)
        && s.window == h.win_raw
        && outstanding;
    if dup {
        h.dup_acks += 1;
    } else if h.last_ack != Some(ack) {
        // Any change resets the count, also an older ACK overtaken on the way (as Wireshark
        // counts, so the retransmission totals agree).
        h.last_ack = Some(ack);
        h.dup_acks = 0;
    }
    let n = usize::from(s.options.sack_count).min(4);
    h.sack_hi = s.options.sack[..n]
        .iter()
        .map(|&(_, right)| SeqNumber(right))
        .filter(|&right| right > ack)
        .reduce(|a, b| if b > a { b } else { a });
}

/// The receive window the segment advertises (scaled once both SYNs offered scaling,
/// RFC 7323 section 2.2): zero-window periods and their length ([`zero_window`]).
#[inline(always)]
fn advertised(c: &mut Conn, s: &Segment, d: Dir, totals: &mut Totals) {
    let f = s.flags;
    if f.rst() {
        return;
    }
    let scaled = c.wscale_ok && !f.syn();
    let h = &c.half[d];
    let win = if scaled {
        u64::from(s.window) << h.wscale.unwrap_or(0).min(14)
    } else {
        u64::from(s.window)
    };
    if s.window == 0 || h.zero_since.is_some() {
        zero_window(c, s, d, totals);
    }
    let h = &mut c.half[d];
    h.win_raw = s.window;
    h.win_bytes = win;
    h.win_known = true;
}

/// [`advertised`] for a window of zero, or the first one after it: counts the zero-window
/// advertisements, and when the window opens again, how long it was shut. Out of line: most
/// connections never shut their window.
#[cold]
#[inline(never)]
fn zero_window(c: &mut Conn, s: &Segment, d: Dir, totals: &mut Totals) {
    let f = s.flags;
    let h = &mut c.half[d];
    if s.window == 0 && !f.syn() && !f.fin() {
        Rare::of(&mut c.rare).dir_mut(d).zero_window_ads += 1;
        totals.zero_window_ads += 1;
        if h.zero_since.is_none() {
            h.zero_since = Some((s.ts_ns, s.frame));
            Rare::of(&mut c.rare).zero_frames.push(s.frame);
        }
    } else if s.window > 0 {
        if let Some((t0, _)) = h.zero_since.take() {
            let stall = s.ts_ns.saturating_sub(t0);
            let z = Rare::of(&mut c.rare).dir_mut(d);
            z.zero_total_ns += stall;
            z.zero_max_ns = z.zero_max_ns.max(stall);
            c.marks.push(Mark {
                kind: MarkKind::ZeroWindow,
                start_ns: t0,
                end_ns: Some(s.ts_ns),
                frame: s.frame,
            });
        }
    }
}

/// FINs both ways close the incarnation (the first FIN tells who holds TIME_WAIT). A reset
/// closes it, except around the handshake: a reset answering a SYN closes it only when the
/// client accepts it (it acknowledges the SYN: refused); one that does not is ignored by the
/// client (RFC 9293 section 3.10.7.3), and the client's reset of a stale answer is part of
/// the handshake. `answer`: the segment answered a SYN in place of a SYN-ACK.
#[inline]
fn close(c: &mut Conn, s: &Segment, d: Dir, answer: bool, totals: &mut Totals) {
    let f = s.flags;
    if f.fin() && !c.half[d].fin {
        c.half[d].fin = true;
        if c.fin_first.is_none() {
            c.fin_first = Some(d);
        }
        if c.half[d.rev()].fin {
            c.close = CloseKind::Fin {
                client_first: c.fin_first == Some(Dir::C2s),
            };
        }
    }
    if f.rst() {
        totals.resets += 1;
        if answer {
            if c.rst_answer_acks_syn {
                c.half[d].rst = true;
                c.close = CloseKind::Rst { by_client: false };
            }
        } else if c.synack.is_some() || c.syn_count == 0 {
            c.half[d].rst = true;
            c.close = CloseKind::Rst {
                by_client: d == Dir::C2s,
            };
        }
        // Otherwise a reset before the SYN-ACK that answers nothing (the client's reset of
        // a stale answer, a repeated reset): part of the handshake.
    }
}
