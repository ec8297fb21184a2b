//! Where the time went (issue 22): per service (server ip:port), its exchanges' parts
//! ([`crate::exchange`]): the path's (the handshake's round trip, the request's round trip),
//! the server's (request's last byte to response's first, less the path's share) and the
//! client's (handshake done to its first request). Every exchange is measured for the
//! services table; a connection's first request after a handshake seen whole is also judged,
//! and when it was slow a finding names its part: `network_latency`, `server_response` or
//! `client_delay`.
//!
//! Slow means: one part alone is at least [`STALL_WARNING`] (200 ms, the policy's floor of a
//! stall worth a warning), and it stands out from the service: at least [`ABOVE_MEDIAN`] times
//! the service's own median of that part, unless that median is itself past the floor (a
//! service that is always slow is slow). Time TCP itself waited within the exchange
//! (retransmission timeouts, zero windows) is that cause's, reported by its own detector: it
//! is taken off every part first, and an exchange it explains names nothing here. Two parts
//! past the floor name neither (a conversation: either side may speak in turn), unless one
//! of them is the path's, measured by a whole handshake, and the larger is [`DOMINANT`]
//! times the other: that one is named and the other said beside it.
//!
//! A SYN-ACK past the floor whose leg the request's own round trip shows the path does not
//! explain (a third of it or less, on no SYN-ACK resend timer) is `unexplained_delay`: the
//! SYN's first pass through a middlebox or the server's SYN handling held it, which one
//! capture point cannot tell apart, and the finding says what would.
//!
//! What names nothing, and why (each seen in the public captures, docs/public-captures.md):
//! - later exchanges on a connection: their roles are not sure. A person typing in SSH, a
//!   chat over IRC DCC, OpenFlow's echoes all look like a request answered seconds later; an
//!   SSH client's window adjust after output splits a command's output into "a request and a
//!   slow answer". Judging later exchanges against their service's median (tried, with the
//!   client's own pause excluded) named six public captures' SSH, IRC and SOCKS sessions
//!   slow servers, most of them wrongly; their times stay in the services table;
//! - the wait between a response and the next request: idle time on a persistent connection
//!   (keep-alive, a person reading), not a wait anyone saw (`client_between_p50_us`);
//! - a first request after a server's banner (SMTP, FTP, SSH, MySQL): the client answers the
//!   server, its wait is a conversation's;
//! - a client's wait where the same capture shows it opening connections to that server that
//!   it never used: it connects ahead of need (a browser's preconnect, a pool).
//!
//! Memory: per service, fixed-size HDR histograms (2 significant digits, 1 us to 1 h, about
//! 13 KiB each), at most [`SERVICES_MAX`] services (the exchanges of later ones are counted in
//! [`TimeDetails::exchanges_untracked`]); per connection, the few words of
//! [`crate::exchange::Turns`].

use std::time::Duration;

use hdrhistogram::Histogram;
use serde::Serialize;
use tcpdoctor_model::policy::STALL_WARNING;
use tcpdoctor_model::{Evidence, Finding, Impact, Pathology, Source};

use super::{us, Conclusion, Context, Detector, Example, EXAMPLES};
use crate::exchange::{self, CapturePoint, Exchange, Handshake, Parts, PathFrom};
use crate::flow::{Conn, Dense, Endpoint};
use crate::ladder::Ladders;

/// Services with their own statistics; the exchanges of later ones are only counted.
pub const SERVICES_MAX: usize = 1024;

/// A slow part stands out from its service when it is at least this many times the service's
/// median of that part (unless the median is past the floor itself).
pub const ABOVE_MEDIAN: u64 = 3;

/// When the path and one other part of a first exchange both pass the floor, the larger is
/// named if it is at least this many times the other, and the other is said beside it; closer
/// than that names neither. The path's part is measured by the handshake, so it is not a
/// conversation's turn: a path of 878 ms round trips (a public capture, latency2.pcapng)
/// leaves at most 293 ms to the server, and a server of 1 s behind a 150 ms path is the
/// server's. The client's and the server's parts together stay a conversation's, named by
/// neither.
pub const DOMINANT: u64 = 2;

/// A server wait this long at the median is also what a long poll or a push channel held open
/// by design looks like: the server finding says so (a capture cannot tell them from a server
/// stuck for as long).
pub const HELD_OPEN: Duration = Duration::from_secs(10);

/// Histogram range: 1 us to an hour, 2 significant digits.
const HIST_MAX_US: u64 = 3_600_000_000;

type Hist = Histogram<u32>;

fn hist() -> Hist {
    Histogram::new_with_bounds(1, HIST_MAX_US, 2).expect("valid bounds")
}

/// The part of an exchange that dominated it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Part {
    Network = 0,
    Server = 1,
    Client = 2,
}

impl Part {
    const ALL: [Part; 3] = [Part::Network, Part::Server, Part::Client];

    /// What the part is called in a sentence.
    fn noun(self) -> &'static str {
        match self {
            Part::Network => "path",
            Part::Server => "server",
            Part::Client => "client",
        }
    }

    fn pathology(self) -> Pathology {
        match self {
            Part::Network => Pathology::NetworkLatency,
            Part::Server => Pathology::ServerResponse,
            Part::Client => Pathology::ClientDelay,
        }
    }
}

/// One row of the services table: a server ip:port and how its exchanges went.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ServiceRow {
    /// The server's ip:port.
    pub server: String,
    /// Connections that carried at least one exchange.
    pub connections: u64,
    pub exchanges: u64,
    /// Server time (request's last byte to response's first, less the path's share).
    pub response_p50_us: u64,
    pub response_p99_us: u64,
    pub response_max_us: u64,
    /// Handshake round trip (SYN to ACK at the capture point), of connections whose handshake
    /// was seen whole.
    pub rtt_p50_us: Option<u64>,
    pub rtt_p99_us: Option<u64>,
    /// Client's wait from the handshake to its first request, median.
    pub client_delay_p50_us: Option<u64>,
    /// Client's wait between a response's last byte and its next request's first byte (less
    /// its leg of the path), median: idle time on a persistent connection, named nowhere.
    pub client_between_p50_us: Option<u64>,
    /// Response's first byte to its last, median.
    pub transfer_p50_us: u64,
    /// Where the capture was taken, by most handshakes.
    pub capture_point: Option<CapturePoint>,
    /// Exchanges per bucket of server time: (bucket's lower bound us, count), buckets in 1-2-5
    /// steps per decade from the first to the last non-empty one.
    pub response_histogram: Vec<(u64, u64)>,
}

/// One slow exchange a finding named, part by part (us), for the waterfall of the HTML page
/// and `--json`: the connection's handshake, the client's wait before the request, the path's
/// share of the request-to-response gap, the server's time, the transfer, and what TCP waited
/// (a timeout or a zero window) within the exchange.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SlowExchange {
    pub flow: String,
    /// The part named: `server_response`, `network_latency` or `client_delay`.
    pub named: &'static str,
    pub handshake_us: u64,
    pub client_us: u64,
    pub network_us: u64,
    pub server_us: u64,
    pub transfer_us: u64,
    pub tcp_us: u64,
}

impl SlowExchange {
    /// The parts in the order they happen: (name, us).
    pub fn parts(&self) -> [(&'static str, u64); 6] {
        [
            ("handshake", self.handshake_us),
            ("client", self.client_us),
            ("network", self.network_us),
            ("server", self.server_us),
            ("transfer", self.transfer_us),
            ("tcp", self.tcp_us),
        ]
    }

    pub fn total_us(&self) -> u64 {
        self.parts().iter().map(|p| p.1).sum()
    }
}

/// Slow exchanges kept for the waterfall, the slowest.
pub const SLOW_EXCHANGES: usize = 24;

/// What the time detector counted, for `--json`.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct TimeDetails {
    /// The slowest exchanges the findings named, part by part, slowest first (at most
    /// [`SLOW_EXCHANGES`]).
    pub slow_exchanges: Vec<SlowExchange>,
    pub exchanges: u64,
    /// Exchanges of services past [`SERVICES_MAX`]: counted, not in the table or the findings.
    pub exchanges_untracked: u64,
    /// Slow exchanges whose wait a retransmission timeout or a zero window explains: left to
    /// those findings.
    pub explained_by_tcp: u64,
    /// Slow server answers to an incast's receiver: their first copy lost in the burst,
    /// resent by the sender's timer; the incast finding's evidence.
    pub explained_by_incast: u64,
    /// Slow first exchanges where more than one part passed the floor (the client and the
    /// server both waited seconds: an interactive session, a protocol where either side
    /// speaks in turn), or only the path, measured by no whole handshake: no one part to name.
    pub ambiguous: u64,
    /// Slow client waits after the handshake at services the same capture shows the client
    /// connecting to ahead of need (connections that carried nothing): a preconnect's idle,
    /// not a wait anyone saw; named nowhere.
    pub client_waits_preconnected: u64,
    /// Slow first exchanges whose SYN-ACK took more than the path's round trip explains (the
    /// request's own round trip a third of the SYN-ACK's leg or less, no SYN-ACK resend timer
    /// fitting): the SYN's first pass or the server's SYN handling; named `unexplained_delay`.
    pub syn_ack_beyond_path: u64,
}

/// Slow exchanges of one part at one service.
#[derive(Default)]
struct Slow {
    /// Their values (us), past the floor.
    values: Option<Box<Hist>>,
    /// The worst few, worst first: (value us, example, its parts).
    examples: Vec<(u64, Example, SlowExchange)>,
    /// The largest value, exact (a histogram's is rounded to its bucket).
    max_us: u64,
    /// Values of the exchanges where another part also passed the floor (this one at least
    /// [`DOMINANT`] times it).
    dominated: Option<Box<Hist>>,
    /// The clients of these exchanges, the first [`CLIENTS_KEPT`]; `clients_more` once more
    /// came.
    clients: Vec<std::net::IpAddr>,
    clients_more: bool,
}

/// Clients of one service's slow exchanges kept by address (to tell an incast receiver's).
const CLIENTS_KEPT: usize = 8;

impl Slow {
    fn add(
        &mut self,
        v_us: u64,
        dominated: bool,
        client: std::net::IpAddr,
        make: impl FnOnce() -> (Example, SlowExchange),
    ) {
        if !self.clients.contains(&client) {
            if self.clients.len() < CLIENTS_KEPT {
                self.clients.push(client);
            } else {
                self.clients_more = true;
            }
        }
        self.values
            .get_or_insert_with(|| Box::new(hist()))
            .saturating_record(v_us.max(1));
        if dominated {
            self.dominated
                .get_or_insert_with(|| Box::new(hist()))
                .saturating_record(v_us.max(1));
        }
        self.max_us = self.max_us.max(v_us);
        if self.examples.len() < EXAMPLES || self.examples.last().is_some_and(|e| e.0 < v_us) {
            let at = self.examples.partition_point(|e| e.0 >= v_us);
            let (e, x) = make();
            self.examples.insert(at, (v_us, e, x));
            self.examples.truncate(EXAMPLES);
        }
    }
}

struct Service {
    connections: u64,
    exchanges: u64,
    /// Every exchange's server time and transfer (us), for the table.
    server: Hist,
    server_max_us: u64,
    transfer: Hist,
    /// Handshake round trips (us) of connections with a whole handshake.
    rtt: Hist,
    /// The client's waits between a response and its next request (us).
    between: Hist,
    /// First exchanges after a handshake: each part's value (us), what a slow one is judged
    /// against (its `len()` is how many were judged).
    first: [Hist; 3],
    points: [u64; 3],
    slow: [Slow; 3],
    /// Slow first exchanges whose SYN-ACK the path's round trip does not explain
    /// ([`syn_ack_beyond_path_ns`]): their wait, named `unexplained_delay`.
    unexplained: Slow,
}

impl Service {
    fn new() -> Service {
        Service {
            connections: 0,
            exchanges: 0,
            server: hist(),
            server_max_us: 0,
            transfer: hist(),
            rtt: hist(),
            between: hist(),
            first: [hist(), hist(), hist()],
            points: [0; 3],
            slow: Default::default(),
            unexplained: Slow::default(),
        }
    }

    /// First exchanges judged.
    fn firsts(&self) -> u64 {
        self.first[Part::Server as usize].len()
    }

    /// The threshold a part must reach to be slow here (us): the floor, and
    /// [`ABOVE_MEDIAN`] times the median of the service's first exchanges unless that median
    /// is past the floor itself.
    fn threshold_us(&self, p: Part) -> u64 {
        let floor = STALL_WARNING.as_micros() as u64;
        let median = quantile(&self.first[p as usize], 0.5).unwrap_or(0);
        if median >= floor {
            floor
        } else {
            floor.max(median * ABOVE_MEDIAN)
        }
    }
}

#[derive(Default)]
pub(crate) struct Time {
    services: Dense<Endpoint, Service>,
    /// Per server, connections that completed a handshake and carried nothing either way (at
    /// most [`UNUSED_MAX`] servers).
    unused: Dense<Endpoint, u32>,
    d: TimeDetails,
}

/// Servers whose unused connections are counted.
pub const UNUSED_MAX: usize = 4096;

/// The statistics of `server`, made when new unless [`SERVICES_MAX`] are kept.
fn service(services: &mut Dense<Endpoint, Service>, server: Endpoint) -> Option<&mut Service> {
    if services.len() >= SERVICES_MAX && services.get(&server).is_none() {
        return None;
    }
    Some(services.get_or_insert_with(server, Service::new))
}

impl Time {
    /// Takes one finished exchange of `c`.
    pub(crate) fn exchange(&mut self, c: &Conn, e: &Exchange) {
        self.d.exchanges += 1;
        let hs = Handshake::of(c);
        let p = e.parts(hs.as_ref());
        // The first request after a handshake: an exchange whose roles are sure (the client
        // spoke first) and whose wait the client saw whole.
        let first = e.index == 1 && !e.turn_after_response && e.turn_from.is_some();
        let values = [
            // The handshake's round trip (when seen whole) and the request's share of the
            // path (from the handshake, or bounded by the server's acknowledgement).
            p.handshake_ns + p.path_ns,
            p.server_ns,
            if first { p.client_ns } else { 0 },
        ];
        let Some(svc) = service(&mut self.services, c.server) else {
            self.d.exchanges_untracked += 1;
            return;
        };
        svc.exchanges += 1;
        svc.server.saturating_record(p.server_ns / 1_000);
        svc.server_max_us = svc.server_max_us.max(p.server_ns / 1_000);
        svc.transfer.saturating_record(p.transfer_ns / 1_000);
        if !first {
            if e.turn_after_response {
                svc.between.saturating_record(p.client_ns / 1_000);
            }
            return;
        }
        for part in Part::ALL {
            svc.first[part as usize].saturating_record(values[part as usize] / 1_000);
        }
        let floor = STALL_WARNING.as_nanos() as u64;
        // What TCP waited within the exchange is its own cause's time.
        let left = values.map(|v| v.saturating_sub(e.tcp_wait_ns));
        let mut slow = Part::ALL.into_iter().filter(|&q| left[q as usize] >= floor);
        let (one, also) = match (slow.next(), slow.next(), slow.next()) {
            (Some(a), Some(b), None) if hs.is_some() => match dominant(a, b, &left) {
                Some((one, other)) => (Some(one), Some(other)),
                None => (None, Some(a)),
            },
            (Some(_), Some(b), _) => (None, Some(b)),
            (a, _, _) => (a, None),
        };
        match one {
            // Two parts past the floor, neither dominant: a conversation, or a path measured
            // by no whole handshake.
            None if also.is_some() => self.d.ambiguous += 1,
            None => {
                if values.iter().any(|&v| v >= floor) {
                    self.d.explained_by_tcp += 1;
                }
            }
            // A path bounded only by an acknowledgement (no whole handshake: a SYN or SYN-ACK
            // resent, whose timer is that finding's) may hold the server's wait: not named.
            Some(Part::Network) if hs.is_none() => self.d.ambiguous += 1,
            Some(part) => {
                // A SYN-ACK the path's round trip does not explain: the wait is real, its
                // cause not shown (a middlebox's first pass or the server's SYN handling).
                let unexplained =
                    part == Part::Network && hs.is_some_and(|h| syn_ack_beyond_path_ns(&h, &p) > 0);
                let (slow, named) = if unexplained {
                    self.d.syn_ack_beyond_path += 1;
                    (&mut svc.unexplained, Pathology::UnexplainedDelay.name())
                } else {
                    (&mut svc.slow[part as usize], part.pathology().name())
                };
                let flow = c.label();
                let v = left[part as usize] / 1_000;
                slow.add(v, also.is_some(), c.client.addr, || {
                    let x = SlowExchange {
                        flow: flow.clone(),
                        named,
                        handshake_us: if e.index == 1 {
                            p.handshake_ns / 1_000
                        } else {
                            0
                        },
                        client_us: p.client_ns / 1_000,
                        network_us: p.path_ns / 1_000,
                        server_us: p.server_ns.saturating_sub(e.tcp_wait_ns) / 1_000,
                        transfer_us: p.transfer_ns / 1_000,
                        tcp_us: e.tcp_wait_ns / 1_000,
                    };
                    let mut example = describe(part, &flow, e, &p, hs.as_ref());
                    if let Some(o) = also {
                        example.description += &format!(
                            "; the {}'s part {}, at most half of the {}'s",
                            o.noun(),
                            us(left[o as usize] / 1_000),
                            part.noun()
                        );
                    }
                    (example, x)
                });
            }
        }
    }

    /// The connection is summarised: its exchange in progress, its handshake.
    fn summarise(&mut self, c: &Conn) {
        if let Some(e) = exchange::pending(c) {
            self.exchange(c, &e);
        }
        if c.turns.count == 0 && c.turns.phase != exchange::Phase::Response {
            let unused = c.turns.ack.is_some() && c.half.sum(|h| h.bytes) == 0;
            if unused && (self.unused.len() < UNUSED_MAX || self.unused.get(&c.server).is_some()) {
                *self.unused.get_or_insert_with(c.server, || 0) += 1;
            }
            return;
        }
        let Some(svc) = service(&mut self.services, c.server) else {
            return;
        };
        svc.connections += 1;
        if let Some(h) = Handshake::of(c) {
            svc.rtt.saturating_record(h.rtt_ns() / 1_000);
            svc.points[h.point() as usize] += 1;
        }
    }
}

/// Of two parts past the floor one of them the path's, the one at least [`DOMINANT`] times
/// the other, first, with the other.
fn dominant(a: Part, b: Part, left: &[u64; 3]) -> Option<(Part, Part)> {
    if a != Part::Network && b != Part::Network {
        return None;
    }
    let (va, vb) = (left[a as usize], left[b as usize]);
    if va >= vb.saturating_mul(DOMINANT) {
        Some((a, b))
    } else if vb >= va.saturating_mul(DOMINANT) {
        Some((b, a))
    } else {
        None
    }
}

/// How much of a slow SYN-ACK's leg (ns) the path's round trip does not explain: the leg is
/// past the floor, the request's own round trip (bounded by the server's acknowledgement or
/// its answer) is a third of it or less, and the leg fits no SYN-ACK resend timer (a SYN-ACK
/// lost and resent is the path's loss). 0 otherwise.
fn syn_ack_beyond_path_ns(h: &Handshake, p: &Parts) -> u64 {
    let leg = h.server_leg_ns();
    let floor = STALL_WARNING.as_nanos() as u64;
    if leg < floor || p.path_ns.saturating_mul(ABOVE_MEDIAN) > leg {
        return 0;
    }
    let ladders = Ladders::default();
    let (leg_d, slack) = (Duration::from_nanos(leg), Duration::from_millis(50));
    if ladders.exponential.attempt_for(leg_d, slack).is_some()
        || ladders.linear.attempt_for(leg_d, slack).is_some()
    {
        return 0;
    }
    leg - p.path_ns
}

/// What a slow handshake's description adds when the path's round trip does not explain its
/// SYN-ACK ([`syn_ack_beyond_path_ns`]): who may have held it, and what would tell.
fn beyond_the_path(h: &Handshake, p: &Parts) -> String {
    match syn_ack_beyond_path_ns(h, p) {
        0 => String::new(),
        x => format!(
            "; the SYN-ACK came {} later than the request's own round trip, and on no SYN-ACK resend timer: the SYN's first pass (a middlebox setting up the flow, a SYN proxy) or the server's SYN handling held it, which a capture near the server would tell apart (there the SYN-ACK's leg is the server's alone), so the capture point above is a guess",
            us(x / 1_000)
        ),
    }
}

/// The packets and numbers of one slow exchange.
fn describe(part: Part, flow: &str, e: &Exchange, p: &Parts, hs: Option<&Handshake>) -> Example {
    let point = hs.map_or(
        "capture point unknown (no whole handshake)".to_string(),
        |h| format!("capture point {}", h.point().name()),
    );
    let rtt = hs.map_or(String::new(), |h| {
        format!("; RTT {}", us(h.rtt_ns() / 1_000))
    });
    let acked = match e.req_ack {
        Some(a) if a.1 != e.resp_first.1 => format!(
            "; the server acknowledged the request at frame {}, {} after it",
            a.1,
            us(a.0.saturating_sub(e.req_last.0) / 1_000)
        ),
        _ => String::new(),
    };
    let path = match p.path_from {
        PathFrom::Handshake => format!(
            "less the path's share {} (SYN to SYN-ACK)",
            us(p.path_ns / 1_000)
        ),
        PathFrom::RequestAck => format!(
            "less the path's share {} (at most the request's acknowledgement)",
            us(p.path_ns / 1_000)
        ),
        PathFrom::Unknown => "path share unknown (taken as none)".to_string(),
    };
    let (mut frames, description) = match part {
        Part::Server => (
            vec![e.req_last.1, e.resp_first.1],
            format!(
                "request's last byte at frame {}, response's first byte at frame {}: {}; {path}: server time {}{rtt}{acked}; {point}",
                e.req_last.1,
                e.resp_first.1,
                us(p.gap_ns / 1_000),
                us(p.server_ns / 1_000)
            ),
        ),
        Part::Network => match hs.filter(|_| e.index == 1) {
            Some(h) => (
                vec![h.syn.1, h.synack.1, h.ack.1, e.req_last.1, e.resp_first.1],
                format!(
                    "SYN at frame {}, SYN-ACK at frame {}: {}; ACK at frame {}: {} later; {point}; the request's round trip {} (request's last byte at frame {}, response's first byte at frame {}: {}){acked}",
                    h.syn.1,
                    h.synack.1,
                    us(h.server_leg_ns() / 1_000),
                    h.ack.1,
                    us(h.client_leg_ns() / 1_000),
                    us(p.path_ns / 1_000),
                    e.req_last.1,
                    e.resp_first.1,
                    us(p.gap_ns / 1_000)
                ) + &beyond_the_path(h, p),
            ),
            None => (
                vec![e.req_last.1, e.resp_first.1],
                format!(
                    "request's last byte at frame {}, response's first byte at frame {}: {}, of which the path's {}{acked}{rtt}; {point}",
                    e.req_last.1,
                    e.resp_first.1,
                    us(p.gap_ns / 1_000),
                    us(p.path_ns / 1_000)
                ),
            ),
        },
        Part::Client => {
            let from = e.turn_from.unwrap_or(e.req_first);
            (
                vec![from.1, e.req_first.1, e.resp_first.1],
                format!(
                    "handshake done at frame {}, the client's first request byte at frame {}: {} later{rtt}; the server answered in {} (response's first byte at frame {})",
                    from.1,
                    e.req_first.1,
                    us(p.client_ns / 1_000),
                    us(p.gap_ns / 1_000),
                    e.resp_first.1
                ),
            )
        }
    };
    if let Some(a) = e
        .req_ack
        .filter(|a| a.1 != e.resp_first.1 && part != Part::Client)
    {
        frames.push(a.1);
    }
    frames.sort_unstable();
    frames.dedup();
    Example {
        flow: flow.to_string(),
        frames,
        description,
    }
}

impl Detector for Time {
    fn finished(&mut self, c: &Conn) {
        self.summarise(c);
    }

    fn conclude(self, _ctx: &Context, out: &mut Conclusion) {
        let mut rows: Vec<ServiceRow> = self
            .services
            .iter()
            .filter(|(_, s)| s.exchanges > 0)
            .map(|(k, s)| row(k, s))
            .collect();
        rows.sort_by(|a, b| b.exchanges.cmp(&a.exchanges).then(a.server.cmp(&b.server)));
        let mut d = self.d;
        let receivers: Vec<std::net::IpAddr> = out
            .details
            .incast
            .iter()
            .filter_map(|e| e.receiver.parse().ok())
            .collect();
        for part in Part::ALL {
            let mut explained = Vec::new();
            let ctx = Judged {
                unused: &self.unused,
                incast_receivers: &receivers,
            };
            if let Some(f) = finding(part, &self.services, &ctx, &mut d, &mut explained) {
                out.findings.push(f);
            }
            incast_evidence(&mut out.findings, explained);
        }
        if let Some(f) = unexplained_finding(&self.services, &mut d) {
            out.findings.push(f);
        }
        d.slow_exchanges
            .sort_by(|a, b| b.total_us().cmp(&a.total_us()).then(a.flow.cmp(&b.flow)));
        d.slow_exchanges.truncate(SLOW_EXCHANGES);
        out.services = rows;
        out.details.time = d;
    }
}

/// The value at quantile `q`, as the middle of its bucket (within 1% of the values in it).
/// Callers that know the exact largest value cap it there.
fn quantile(h: &Hist, q: f64) -> Option<u64> {
    (!h.is_empty()).then(|| h.median_equivalent(h.value_at_quantile(q)).min(h.max()))
}

fn row(k: &Endpoint, s: &Service) -> ServiceRow {
    let server = &s.server;
    let point = (0..3)
        .max_by_key(|&i| (s.points[i], 3 - i))
        .filter(|&i| s.points[i] > 0);
    ServiceRow {
        server: k.to_string(),
        connections: s.connections,
        exchanges: s.exchanges,
        response_p50_us: quantile(server, 0.5).unwrap_or(0).min(s.server_max_us),
        response_p99_us: quantile(server, 0.99).unwrap_or(0).min(s.server_max_us),
        response_max_us: s.server_max_us,
        rtt_p50_us: quantile(&s.rtt, 0.5),
        rtt_p99_us: quantile(&s.rtt, 0.99),
        client_delay_p50_us: quantile(&s.first[Part::Client as usize], 0.5),
        client_between_p50_us: quantile(&s.between, 0.5),
        transfer_p50_us: quantile(&s.transfer, 0.5).unwrap_or(0),
        capture_point: point.map(|i| {
            [
                CapturePoint::NearClient,
                CapturePoint::NearServer,
                CapturePoint::Between,
            ][i]
        }),
        response_histogram: buckets_125(server),
    }
}

/// A histogram's counts in 1-2-5 buckets per decade: (lower bound us, count), from the first
/// non-empty bucket to the last (values of 0 us count in the first, 1 us).
fn buckets_125(h: &Hist) -> Vec<(u64, u64)> {
    let mut edges = Vec::new();
    let mut decade = 1u64;
    while decade <= HIST_MAX_US {
        edges.extend([decade, 2 * decade, 5 * decade]);
        decade *= 10;
    }
    edges.retain(|&e| e <= HIST_MAX_US);
    let counts: Vec<(u64, u64)> = edges
        .iter()
        .enumerate()
        .map(|(i, &lo)| {
            let hi = edges.get(i + 1).map_or(HIST_MAX_US, |&e| e - 1);
            let lo_eff = if i == 0 { 0 } else { lo };
            (lo, h.count_between(lo_eff, hi.min(HIST_MAX_US)))
        })
        .collect();
    let first = counts.iter().position(|c| c.1 > 0);
    let last = counts.iter().rposition(|c| c.1 > 0);
    match (first, last) {
        (Some(a), Some(b)) => counts[a..=b].to_vec(),
        _ => Vec::new(),
    }
}

/// The finding of slow first exchanges whose SYN-ACK the path's round trip does not explain
/// (judged against the service as the path's part is): the wait is measured, its cause is
/// not shown by one capture point, so it is `unexplained_delay`, saying what is missing.
fn unexplained_finding(
    services: &Dense<Endpoint, Service>,
    d: &mut TimeDetails,
) -> Option<Finding> {
    let (mut affected, mut observed, mut worst_us) = (0u64, 0u64, 0u64);
    let mut examples: Vec<(u64, &Example)> = Vec::new();
    for (_, s) in services.iter() {
        observed += s.firsts();
        let Some(values) = s.unexplained.values.as_deref() else {
            continue;
        };
        let thr = s.threshold_us(Part::Network);
        let n = values.count_between(thr, HIST_MAX_US);
        if n == 0 {
            continue;
        }
        affected += n;
        worst_us = worst_us.max(s.unexplained.max_us);
        let kept = s.unexplained.examples.iter().filter(|e| e.0 >= thr);
        examples.extend(kept.clone().map(|(v, e, _)| (*v, e)));
        d.slow_exchanges.extend(kept.map(|e| e.2.clone()));
    }
    if affected == 0 {
        return None;
    }
    examples.sort_by_key(|e| std::cmp::Reverse(e.0));
    let summary = format!(
        "{affected} of {observed} connections waited up to {} before their first answer, most of it on a SYN-ACK that took more than the path's round trip explains (the request's own round trip was a third of the SYN-ACK's leg or less, and the leg fits no SYN-ACK resend timer): the SYN's first pass through a middlebox (its flow setup, a SYN proxy) or the server's SYN handling held it; one capture point cannot tell which (a capture near the server would: there the SYN-ACK's leg is the server's alone)",
        us(worst_us)
    );
    let mut f = Finding::new(
        Pathology::UnexplainedDelay,
        Source::Analyze,
        summary,
        Impact::stalls(
            affected,
            Some(observed.max(affected)),
            Some(Duration::from_micros(worst_us)),
        ),
    )
    .with_evidence(Evidence::Timing {
        what: "handshake and request round trip of the slow exchanges, longest".into(),
        count: affected,
        value_us: worst_us,
    });
    for (_, e) in examples.iter().take(EXAMPLES) {
        f = f.with_evidence(e.evidence());
    }
    Some(f)
}

/// What a part's slow exchanges are judged against besides their service.
struct Judged<'a> {
    /// Per server, connections that carried nothing (a client connecting ahead of need).
    unused: &'a Dense<Endpoint, u32>,
    /// The receivers of the capture's incast episodes.
    incast_receivers: &'a [std::net::IpAddr],
}

/// A server's slow answers to an incast's receiver (every slow exchange of the service had
/// that receiver as its client): the capture point is the receiver's, and an answer whose
/// first copy was lost in the burst arrives only with the sender's timer resend, which looks
/// like a slow server. They are the incast's consequence: counted in
/// `details.time.explained_by_incast`, said on the incast's finding, named nowhere else.
fn incast_evidence(findings: &mut [Finding], lines: Vec<String>) {
    if lines.is_empty() {
        return;
    }
    if let Some(f) = findings
        .iter_mut()
        .find(|f| f.pathology == Pathology::Incast)
    {
        f.evidence.push(Evidence::Examples {
            what: "answers that waited on the burst's losses (their first copy lost before the capture point, resent by the sender's timer): not a slow server".into(),
            items: lines,
        });
    }
}

/// The finding of one part, over every service where it was slow. Slow answers to an
/// incast's receiver go to `explained` instead ([`incast_evidence`]).
fn finding(
    part: Part,
    services: &Dense<Endpoint, Service>,
    judged: &Judged,
    d: &mut TimeDetails,
    explained: &mut Vec<String>,
) -> Option<Finding> {
    let unused = judged.unused;
    let mut affected = 0u64;
    let mut observed = 0u64;
    let mut worst_us = 0u64;
    // Of them, where another part also passed the floor (at most half of this one).
    let mut dominated = 0u64;
    let mut lines = Vec::new();
    let mut examples: Vec<(u64, &Example)> = Vec::new();
    let mut slow_all = hist();
    for (k, s) in services.iter() {
        observed += s.firsts();
        let slow = &s.slow[part as usize];
        let Some(values) = slow.values.as_deref() else {
            continue;
        };
        let thr = s.threshold_us(part);
        let n = values.count_between(thr, HIST_MAX_US);
        if n == 0 {
            continue;
        }
        if part == Part::Server
            && !slow.clients_more
            && !slow.clients.is_empty()
            && slow
                .clients
                .iter()
                .all(|c| judged.incast_receivers.contains(c))
        {
            d.explained_by_incast += n;
            explained.push(format!(
                "{k}: {n} answer(s) up to {} after the request",
                us(slow.max_us)
            ));
            continue;
        }
        if part == Part::Client && unused.get(k).is_some_and(|&u| u > 0) {
            // The client opened connections here it never used: it connects ahead of need
            // (a browser's preconnect, a pool), so a wait after a handshake is that habit.
            d.client_waits_preconnected += n;
            continue;
        }
        affected += n;
        dominated += slow
            .dominated
            .as_deref()
            .map_or(0, |h| h.count_between(thr, HIST_MAX_US));
        worst_us = worst_us.max(slow.max_us);
        for v in values.iter_recorded() {
            if v.value_iterated_to() >= thr {
                slow_all.saturating_record_n(v.value_iterated_to(), v.count_at_value());
            }
        }
        let median = quantile(&s.first[part as usize], 0.5).unwrap_or(0);
        lines.push(format!(
            "{k}: {n} of {} connections, up to {} (the service's median {})",
            s.firsts(),
            us(slow.max_us),
            us(median)
        ));
        examples.extend(
            slow.examples
                .iter()
                .filter(|e| e.0 >= thr)
                .map(|(v, e, _)| (*v, e)),
        );
        d.slow_exchanges.extend(
            slow.examples
                .iter()
                .filter(|e| e.0 >= thr)
                .map(|e| e.2.clone()),
        );
    }
    if affected == 0 {
        return None;
    }
    examples.sort_by_key(|e| std::cmp::Reverse(e.0));
    let p50 = if affected == 1 {
        worst_us
    } else {
        quantile(&slow_all, 0.5).unwrap_or(0).min(worst_us)
    };
    let summary = part_summary(part, (affected, observed, dominated), p50, worst_us);
    let timing = match part {
        Part::Server => "server time of the slow exchanges, median",
        Part::Network => {
            "path time (handshake + the request's round trip) of the slow exchanges, median"
        }
        Part::Client => "client's wait after the handshake, median of the slow ones",
    };
    let mut f = Finding::new(
        part.pathology(),
        Source::Analyze,
        summary,
        Impact::stalls(
            affected,
            Some(observed.max(affected)),
            Some(Duration::from_micros(worst_us)),
        ),
    )
    .with_evidence(Evidence::Timing {
        what: timing.into(),
        count: affected,
        value_us: p50,
    })
    .with_evidence(Evidence::Examples {
        what: "services (server ip:port)".into(),
        items: lines,
    });
    for (_, e) in examples.iter().take(EXAMPLES) {
        f = f.with_evidence(e.evidence());
    }
    Some(f)
}

/// A part's finding summary: `counts` (affected, observed, of the affected those where another
/// part also passed the floor), the median and the largest slow value (us).
fn part_summary(part: Part, counts: (u64, u64, u64), p50: u64, worst_us: u64) -> String {
    let (affected, observed, dominated) = counts;
    let what = "connections";
    // The other parts: under the floor, or (where one passed it too) at most half of this.
    let others = |names: &str| match dominated {
        0 => format!("{names} were quick"),
        n if n == affected => format!("{names} took at most half as long"),
        n => format!("{names} were quick, or took at most half as long ({n} of them)"),
    };
    match part {
        Part::Server => {
            let mut s = format!(
                "{affected} of {observed} {what} waited ~{} for the server's first answer (up to {}): from the request's last byte to the response's first byte, less the path's share; {} (a wait on a retransmission timeout or a zero window is left to that finding)",
                us(p50),
                us(worst_us),
                others("the path and the client")
            );
            if p50 >= HELD_OPEN.as_micros() as u64 {
                s.push_str("; waits this long are also what a long poll or a push channel looks like (the server answers when it has news): if this service holds requests open by design, that is this wait, not a slow server");
            }
            s
        }
        Part::Network => format!(
            "{affected} of {observed} {what} spent ~{} on the path before their first answer (up to {}): the handshake's round trip and the request's; {} (a wait on a retransmission timeout or a zero window is left to that finding)",
            us(p50),
            us(worst_us),
            others("the server and the client")
        ),
        Part::Client => format!(
            "{affected} of {observed} {what} waited ~{} (up to {}) between the handshake and the client's first request: the client held a connected socket and sent nothing; {}",
            us(p50),
            us(worst_us),
            others("the path and the server")
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_services_histograms_stay_small() {
        // 2 significant digits from 1 us to an hour: 3,328 counters of 4 bytes.
        let h = hist();
        assert!(
            h.distinct_values() * 4 <= 14 * 1024,
            "{}",
            h.distinct_values()
        );
        // Seven per service, at most SERVICES_MAX services: under 100 MiB in the worst case,
        // a few hundred KiB for a capture of a few services.
        assert!(SERVICES_MAX * 7 * h.distinct_values() * 4 < 100 << 20);
    }

    #[test]
    fn quantiles_are_within_one_percent() {
        let mut h = hist();
        h.saturating_record(299_900);
        let q = quantile(&h, 0.5).unwrap();
        assert!(q.abs_diff(299_900) <= 299_900 / 100, "{q}");
        assert_eq!(quantile(&hist(), 0.5), None);
    }
}
