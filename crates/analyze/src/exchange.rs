//! Where a connection's time went: its exchanges and the parts of each.
//!
//! An exchange is a burst of payload one way answered by payload the other way, whatever the
//! protocol: the client's request (its payload from the first byte to the last before the
//! server answers), then the server's response (from its first byte until the client speaks
//! again, or the connection ends). Server-first protocols (a banner) start with a response
//! that answers nothing; it ends the handshake's turn without being an exchange.
//!
//! Its parts, as seen from the capture point:
//! - the handshake's two legs: SYN to SYN-ACK (capture point to server and back) and SYN-ACK
//!   to ACK (capture point to client and back). Their sum is the round trip; which one is
//!   long says where the capture point is ([`CapturePoint`]);
//! - the client's delay: from the handshake's ACK to the request's first byte (the client
//!   holds a connected socket and sends nothing); between exchanges, from a response's last
//!   byte to the next request's first byte, less the client's leg of the path;
//! - the server's time: from the request's last byte to the response's first byte, less the
//!   path's share between the capture point and the server (the handshake's server leg, or
//!   less when the server acknowledged the request sooner than that);
//! - the transfer: the response's first byte to its last.
//!
//! Owns the few words each connection carries for this ([`Turns`], in [`Conn`]) and the record
//! of one finished exchange ([`Exchange`]); the statistics per service and the findings are the
//! time detector's (`detect::time`). Pure: times are the packets'.

use crate::flow::{Conn, Dir, RetransKind};
use crate::seq::SeqNumber;

/// A point of a capture: (timestamp ns, frame number).
pub type At = (u64, u64);

/// Whose turn it is on a connection.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Phase {
    /// No payload yet (or the server's unsolicited first words): the client's turn.
    #[default]
    Idle,
    /// The client is sending a request.
    Request,
    /// The server is answering.
    Response,
}

/// The state of one connection's current exchange: a few words, kept in the [`Conn`].
#[derive(Clone, Copy, Debug)]
pub struct Turns {
    pub phase: Phase,
    /// Exchanges finished so far (the current one is `count + 1`).
    pub count: u32,
    /// The handshake's final ACK.
    pub ack: Option<At>,
    /// When the client's turn began: the handshake's ACK, or the last response's last byte.
    pub turn_from: Option<At>,
    /// Whether `turn_from` is the end of a response (not the handshake).
    pub turn_after_response: bool,
    pub req_first: At,
    pub req_last: At,
    /// The client's sequence number after the request's last byte.
    pub req_end: u32,
    /// The first server segment that acknowledged the whole request.
    pub req_ack: Option<At>,
    pub resp_first: At,
    pub resp_last: At,
    /// The connection's TCP waits ([`tcp_wait_ns`]) when the exchange began.
    pub tcp_wait_from_ns: u64,
    /// The first exchange's server time and client wait after the handshake (us, saturated;
    /// [`NONE_US`]: none), kept for the connection's `--flows` row once later ones replace it.
    pub first_server_us: u32,
    pub first_client_us: u32,
}

/// "No value" in [`Turns::first_server_us`] and [`Turns::first_client_us`].
pub const NONE_US: u32 = u32::MAX;

impl Default for Turns {
    fn default() -> Turns {
        Turns {
            phase: Phase::Idle,
            count: 0,
            ack: None,
            turn_from: None,
            turn_after_response: false,
            req_first: (0, 0),
            req_last: (0, 0),
            req_end: 0,
            req_ack: None,
            resp_first: (0, 0),
            resp_last: (0, 0),
            tcp_wait_from_ns: 0,
            first_server_us: NONE_US,
            first_client_us: NONE_US,
        }
    }
}

/// One finished exchange, as the time detector receives it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Exchange {
    /// 1 for the connection's first exchange.
    pub index: u32,
    /// When the client's turn began (see [`Turns::turn_from`]).
    pub turn_from: Option<At>,
    pub turn_after_response: bool,
    pub req_first: At,
    pub req_last: At,
    pub req_ack: Option<At>,
    pub resp_first: At,
    pub resp_last: At,
    /// Time the connection spent in retransmission timeouts and zero windows while the
    /// exchange ran: already attributed to those causes.
    pub tcp_wait_ns: u64,
}

/// Time a connection has waited so far on TCP itself: idle gaps ended by a retransmission
/// timeout, and zero-window periods that reopened.
pub fn tcp_wait_ns(c: &Conn) -> u64 {
    let r = c.rare();
    r.rto_gap_total_ns + r.sum(|h| h.zero_total_ns)
}

/// Takes the handshake's final ACK (the connection is established).
pub(crate) fn established(c: &mut Conn, at: At) {
    c.turns.ack = Some(at);
    if c.turns.phase == Phase::Idle && c.turns.turn_from.is_none() {
        c.turns.turn_from = Some(at);
    }
}

/// Takes one segment of `c` (direction `d`, at `at`) after the engine has tracked it:
/// `advanced` when its payload moved the sender's highest sequence number (new data, not a
/// retransmission, a probe or a keep-alive). Returns the exchange it finished, if any.
#[inline]
pub(crate) fn segment(
    c: &mut Conn,
    d: Dir,
    at: At,
    payload: bool,
    ack: Option<u32>,
    advanced: bool,
) -> Option<Exchange> {
    let next_c2s = c.half.c2s.next_seq.map_or(0, |n| n.0);
    let t = &mut c.turns;
    match (d, t.phase) {
        (Dir::S2c, Phase::Request) => {
            let covers = ack.is_some_and(|a| SeqNumber(a) >= SeqNumber(t.req_end));
            if t.req_ack.is_none() && covers {
                t.req_ack = Some(at);
            }
            if payload && advanced {
                t.phase = Phase::Response;
                t.resp_first = at;
                t.resp_last = at;
            }
            None
        }
        (Dir::S2c, Phase::Response) if payload => {
            t.resp_last = at;
            None
        }
        (Dir::S2c, Phase::Idle) if payload && advanced => {
            // The server spoke first (a banner): the client's turn begins after it.
            t.turn_from = Some(at);
            t.turn_after_response = true;
            None
        }
        (Dir::C2s, Phase::Request) if payload => {
            // New bytes of the request, or its bytes sent again (a retransmission, or a
            // one-byte resend that looks like a keep-alive): the server may have had the
            // request only from here, so its time starts here.
            t.req_last = at;
            t.req_end = next_c2s;
            None
        }
        (Dir::C2s, Phase::Idle | Phase::Response) if payload && advanced => {
            let done = (t.phase == Phase::Response).then(|| finish(c));
            if let Some(e) = done.filter(|e| e.index == 1) {
                keep_first(c, &e);
            }
            let wait = tcp_wait_ns(c);
            let t = &mut c.turns;
            if done.is_some() {
                t.turn_from = Some(t.resp_last);
                t.turn_after_response = true;
                t.count += 1;
            }
            t.phase = Phase::Request;
            t.req_first = at;
            t.req_last = at;
            t.req_ack = None;
            t.req_end = next_c2s;
            t.tcp_wait_from_ns = wait;
            done
        }
        _ => None,
    }
}

/// The exchange in progress, finished as it stands (the connection is being summarised), if a
/// response had begun.
pub fn pending(c: &Conn) -> Option<Exchange> {
    (c.turns.phase == Phase::Response).then(|| finish(c))
}

/// Keeps the first exchange's server time and client wait in `c` (for its `--flows` row).
fn keep_first(c: &mut Conn, e: &Exchange) {
    let (server, client) = first_of(c, e);
    c.turns.first_server_us = us_u32(server);
    c.turns.first_client_us = client.map_or(NONE_US, us_u32);
}

/// Nanoseconds as microseconds in a u32, saturated below [`NONE_US`] (71 minutes).
fn us_u32(ns: u64) -> u32 {
    u32::try_from(ns / 1_000)
        .unwrap_or(NONE_US - 1)
        .min(NONE_US - 1)
}

/// The server time (ns) of `e`, `c`'s first exchange, and the client's wait before it when it
/// followed the handshake.
fn first_of(c: &Conn, e: &Exchange) -> (u64, Option<u64>) {
    let p = e.parts(Handshake::of(c).as_ref());
    let after_handshake = !e.turn_after_response && e.turn_from.is_some();
    (p.server_ns, after_handshake.then_some(p.client_ns))
}

/// `c`'s first exchange, for its `--flows` row: (server time us, the client's wait after the
/// handshake us), whether it finished or is still in progress.
pub fn first_exchange_us(c: &Conn) -> Option<(u64, Option<u64>)> {
    if c.turns.first_server_us != NONE_US {
        let client =
            (c.turns.first_client_us != NONE_US).then(|| u64::from(c.turns.first_client_us));
        return Some((u64::from(c.turns.first_server_us), client));
    }
    let e = pending(c).filter(|e| e.index == 1)?;
    let (server, client) = first_of(c, &e);
    Some((server / 1_000, client.map(|v| v / 1_000)))
}

fn finish(c: &Conn) -> Exchange {
    let t = &c.turns;
    Exchange {
        index: t.count + 1,
        turn_from: t.turn_from,
        turn_after_response: t.turn_after_response,
        req_first: t.req_first,
        req_last: t.req_last,
        req_ack: t.req_ack,
        resp_first: t.resp_first,
        resp_last: t.resp_last,
        tcp_wait_ns: tcp_wait_ns(c).saturating_sub(t.tcp_wait_from_ns),
    }
}

/// Where the capture was taken, judged from the handshake's two legs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum CapturePoint {
    /// SYN to SYN-ACK long, SYN-ACK to ACK short: the capture saw the client's packets leave.
    NearClient,
    /// SYN-ACK to ACK long, SYN to SYN-ACK short: the capture saw the server's packets leave.
    NearServer,
    /// Both legs comparable (loopback, or a capture point on the way).
    Between,
}

impl CapturePoint {
    /// One leg this many times the other (and 1 ms longer) puts the capture point at the end
    /// of the short one: a host answers a SYN-ACK (or a SYN) within microseconds, a path takes
    /// its round trip.
    pub const LEG_RATIO: u64 = 4;
    pub const LEG_MARGIN_NS: u64 = 1_000_000;

    pub fn name(self) -> &'static str {
        match self {
            CapturePoint::NearClient => "near the client",
            CapturePoint::NearServer => "near the server",
            CapturePoint::Between => "between (both legs alike)",
        }
    }
}

/// A handshake seen whole (SYN, SYN-ACK and the client's ACK, none of them resent), whose
/// timing can be read as the path's.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Handshake {
    pub syn: At,
    pub synack: At,
    pub ack: At,
}

impl Handshake {
    /// `c`'s handshake, when every part of it was seen once and in order: a SYN or SYN-ACK
    /// resent puts a timer in the legs (that time is the SYN retransmission's).
    pub fn of(c: &Conn) -> Option<Handshake> {
        if c.syn_count != 1 || c.retrans_of(RetransKind::Syn) > 0 {
            return None;
        }
        let syn = *c.syn_list().first()?;
        let synack = c.synack?;
        let ack = c.turns.ack?;
        (syn.0 <= synack.0 && synack.0 <= ack.0).then_some(Handshake { syn, synack, ack })
    }

    /// SYN to SYN-ACK: from the capture point to the server and back.
    pub fn server_leg_ns(&self) -> u64 {
        self.synack.0 - self.syn.0
    }

    /// SYN-ACK to ACK: from the capture point to the client and back.
    pub fn client_leg_ns(&self) -> u64 {
        self.ack.0 - self.synack.0
    }

    pub fn rtt_ns(&self) -> u64 {
        self.ack.0 - self.syn.0
    }

    pub fn point(&self) -> CapturePoint {
        let (s, c) = (self.server_leg_ns(), self.client_leg_ns());
        let long = |a: u64, b: u64| {
            a >= b.saturating_mul(CapturePoint::LEG_RATIO) && a >= b + CapturePoint::LEG_MARGIN_NS
        };
        if long(s, c) {
            CapturePoint::NearClient
        } else if long(c, s) {
            CapturePoint::NearServer
        } else {
            CapturePoint::Between
        }
    }
}

/// What an exchange's time was made of (ns).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Parts {
    /// Request's last byte to response's first byte, as captured.
    pub gap_ns: u64,
    /// The path's share of `gap_ns`: the capture point to the server and back.
    pub path_ns: u64,
    /// What the path share was taken from.
    pub path_from: PathFrom,
    /// `gap_ns` less `path_ns`: the server's time.
    pub server_ns: u64,
    /// The client's wait before the request (see [`Exchange::turn_from`]), less its leg of
    /// the path after a response.
    pub client_ns: u64,
    /// The handshake's round trip, for a connection's first exchange.
    pub handshake_ns: u64,
    /// Response's first byte to its last.
    pub transfer_ns: u64,
}

/// Where an exchange's path share came from.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum PathFrom {
    /// The handshake's SYN to SYN-ACK leg.
    Handshake,
    /// The server's acknowledgement of the request, sooner than the handshake leg.
    RequestAck,
    /// Neither was seen: the whole gap is taken as the server's.
    #[default]
    Unknown,
}

impl Exchange {
    /// The parts of this exchange, given its connection's handshake.
    pub fn parts(&self, hs: Option<&Handshake>) -> Parts {
        let gap = self.resp_first.0.saturating_sub(self.req_last.0);
        // The server acknowledged the whole request before answering: the path is at most that.
        let acked = self
            .req_ack
            .filter(|a| a.1 != self.resp_first.1)
            .map(|a| a.0.saturating_sub(self.req_last.0));
        let (path, from) = match (hs.map(Handshake::server_leg_ns), acked) {
            (Some(h), Some(a)) if a < h => (a, PathFrom::RequestAck),
            (Some(h), _) => (h, PathFrom::Handshake),
            (None, Some(a)) => (a, PathFrom::RequestAck),
            (None, None) => (0, PathFrom::Unknown),
        };
        let path = path.min(gap);
        let client = match self.turn_from {
            Some(from) => {
                let wait = self.req_first.0.saturating_sub(from.0);
                if self.turn_after_response {
                    wait.saturating_sub(hs.map_or(0, Handshake::client_leg_ns))
                } else {
                    wait
                }
            }
            None => 0,
        };
        Parts {
            gap_ns: gap,
            path_ns: path,
            path_from: from,
            server_ns: gap - path,
            client_ns: client,
            handshake_ns: match hs {
                Some(h) if self.index == 1 => h.rtt_ns(),
                _ => 0,
            },
            transfer_ns: self.resp_last.0.saturating_sub(self.resp_first.0),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;

    fn hs(syn: u64, synack: u64, ack: u64) -> Handshake {
        Handshake {
            syn: (syn, 1),
            synack: (synack, 2),
            ack: (ack, 3),
        }
    }

    #[test]
    fn a_connection_carries_a_few_words_for_its_exchange() {
        // What every connection pays for this module: 168 bytes, under three cache lines of a
        // `Conn` (engine.rs bounds how many are held).
        let (turns, conn) = (std::mem::size_of::<Turns>(), std::mem::size_of::<Conn>());
        assert!(turns <= 168, "{turns}");
        assert!(conn <= 960, "{conn}");
    }

    #[test]
    fn the_long_leg_of_the_handshake_places_the_capture_point() {
        // SYN to SYN-ACK 40 ms, SYN-ACK to ACK 0.1 ms: the capture saw the client's side.
        assert_eq!(
            hs(0, 40 * MS, 40 * MS + 100_000).point(),
            CapturePoint::NearClient
        );
        assert_eq!(hs(0, 100_000, 40 * MS).point(), CapturePoint::NearServer);
        // Loopback: both legs tens of microseconds, whatever their ratio.
        assert_eq!(hs(0, 10_000, 60_000).point(), CapturePoint::Between);
        assert_eq!(hs(0, 20 * MS, 40 * MS).point(), CapturePoint::Between);
    }

    fn exchange(req_last: u64, req_ack: Option<u64>, resp_first: u64) -> Exchange {
        Exchange {
            index: 1,
            turn_from: Some((MS, 3)),
            turn_after_response: false,
            req_first: (req_last, 4),
            req_last: (req_last, 4),
            req_ack: req_ack.map(|t| (t, 5)),
            resp_first: (resp_first, 6),
            resp_last: (resp_first + MS, 7),
            tcp_wait_ns: 0,
        }
    }

    #[test]
    fn the_server_time_is_the_gap_less_the_path_share_from_the_capture_point() {
        // Near the client, 40 ms to the server and back: a 340 ms gap is 300 ms of server.
        let h = hs(0, 40 * MS, 40 * MS + 100_000);
        let p = exchange(50 * MS, None, 390 * MS).parts(Some(&h));
        assert_eq!(
            (p.gap_ns, p.path_ns, p.server_ns),
            (340 * MS, 40 * MS, 300 * MS)
        );
        assert_eq!(p.path_from, PathFrom::Handshake);
        assert_eq!(p.handshake_ns, 40 * MS + 100_000);
        // The client's wait: the handshake's ACK (1 ms) to the request (50 ms).
        assert_eq!(p.client_ns, 49 * MS);
        // An acknowledgement sooner than the handshake's leg bounds the path.
        let p = exchange(50 * MS, Some(55 * MS), 390 * MS).parts(Some(&h));
        assert_eq!((p.path_ns, p.server_ns), (5 * MS, 335 * MS));
        assert_eq!(p.path_from, PathFrom::RequestAck);
        // Nothing to measure the path by: the whole gap is the server's, said so.
        let p = exchange(50 * MS, None, 390 * MS).parts(None);
        assert_eq!((p.path_ns, p.path_from), (0, PathFrom::Unknown));
        // A path share never exceeds the gap.
        let p = exchange(50 * MS, None, 51 * MS).parts(Some(&h));
        assert_eq!((p.path_ns, p.server_ns), (MS, 0));
    }

    #[test]
    fn the_wait_after_a_response_is_less_the_clients_leg() {
        let h = hs(0, 100_000, 30 * MS);
        let mut e = exchange(500 * MS, None, 501 * MS);
        e.index = 2;
        e.turn_from = Some((100 * MS, 9));
        e.turn_after_response = true;
        let p = e.parts(Some(&h));
        // 400 ms after the response's last byte, less the 29.9 ms to the client and back.
        assert_eq!(p.client_ns, 400 * MS - (30 * MS - 100_000));
        // Only a connection's first exchange carries the handshake.
        assert_eq!(p.handshake_ns, 0);
    }
}
