//! From a [`Census`] to a [`Summary`] (counts by state, per destination, per listener,
//! flagged sockets) and findings. Pure: no I/O, no clock; an earlier census may be passed in
//! to see queues grow and zero windows persist.
//!
//! Severities come from the policy ([`tcpdoctor_model::policy`]); this module only describes
//! what each finding cost:
//!
//! - `port_exhaustion`: the share of the ephemeral range toward one destination that
//!   connect() cannot use ([`Impact::budget`]). TIME_WAIT sockets that connect() may take
//!   over (`tcp_tw_reuse`, see [`super::TwReuse`]) are not counted: toward loopback with the
//!   default `tcp_tw_reuse=2` they free their port after one second, not sixty.
//! - `accept_queue_overflow`: a full accept queue drops the next SYN (or final ACK), and the
//!   client waits for its initial 1 s retransmission timeout (`TCP_TIMEOUT_INIT`).
//! - `slow_reader`: sockets at a zero window, or whose Recv-Q grew while data already waiting
//!   at the previous census stayed unread. One census can only show a zero window; a stall
//!   is claimed only for what persisted from one census to the next (at least their
//!   interval).
//! - `retransmit_timeout` and `syn_retransmit`: the time the socket has provably waited, from
//!   its RTO and backoff, or from this host's SYN ladder and the SYN's retransmission count.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::net::SocketAddr;
use std::time::Duration;

use serde::Serialize;
use tcpdoctor_model::policy::{BUDGET_CRITICAL, BUDGET_WARNING};
use tcpdoctor_model::timers::SYN_INITIAL_RTO;
use tcpdoctor_model::{Finding, PortRange};

use super::limits::{self, PathStats, Transfers};
use super::{
    canonical, Attribution, Census, LastOwner, LastOwners, Owner, Socket, TcpState, Timer, TwReuse,
};
use crate::sysctl::TIME_WAIT;

mod findings;
mod signs;

pub use findings::{closed_by_line, who};
use findings::{dedup_pids, findings};
pub use signs::time_wait_for;
use signs::{
    accepts_for, backoff_wait_us, carries_data, flag, micros, slow_sign, syn_resends,
    unaccepted_sign, window_closed_for, zero_window_sign,
};

/// Share of the ephemeral range held toward one destination from which `port_exhaustion`
/// is reported (the policy's [`BUDGET_WARNING`]): at half the range, twice the current
/// connect rate exhausts it (ports are held 60 s in TIME_WAIT, `TCP_TIMEWAIT_LEN`,
/// include/net/tcp.h).
pub const HEADROOM_WARNING: f64 = BUDGET_WARNING;
/// Share at which the policy calls it critical ([`BUDGET_CRITICAL`]): connect() must search
/// a nearly full range (`__inet_hash_connect`, net/ipv4/inet_hashtables.c) and soon fails
/// with EADDRNOTAVAIL.
pub const HEADROOM_CRITICAL: f64 = BUDGET_CRITICAL;

/// How many example sockets a finding lists.
const EXAMPLES: usize = 10;

/// Outgoing sockets toward one remote ip:port.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Destination {
    pub remote: SocketAddr,
    pub sockets: u64,
    pub by_state: BTreeMap<TcpState, u64>,
    pub time_wait: u64,
    /// Whether connect() may reuse TIME_WAIT ports toward this destination (`tcp_tw_reuse`
    /// 1, or 2 and a loopback address; timestamps on).
    pub tw_reuse: bool,
    /// TIME_WAIT sockets toward it that connect() may take over now (reuse applies and they
    /// are older than `tcp_tw_reuse_delay`): their ports count as free.
    pub time_wait_reusable: u64,
    /// Sockets toward this destination whose local port lies in the ephemeral range: each
    /// holds one of the range's ports for this destination.
    pub ephemeral_ports_in_use: u64,
    /// Ports connect() cannot use toward it: those in use minus reusable TIME_WAIT.
    pub ports_unavailable: u64,
    /// Ports of the range still free toward this destination (reusable TIME_WAIT included).
    pub headroom_ports: i64,
    /// `ports_unavailable` as a percentage of the range.
    pub used_percent: f64,
    /// TIME_WAIT / 60 s: the connect rate of the last minute that left this many behind.
    pub time_wait_rate_per_s: f64,
    /// The new-connection rate this destination can sustain: ports / 60 s, or ports /
    /// `tcp_tw_reuse_delay` where TIME_WAIT reuse applies.
    pub sustainable_connect_rate_per_s: f64,
    /// Processes holding live sockets toward it, most sockets first (with process
    /// attribution). TIME_WAIT sockets have no owner any more.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub processes: Vec<ProcessSockets>,
    /// With a trace (`sockets --watch` as root): the processes whose connections left the
    /// TIME_WAIT sockets toward it, from the trace's record of each close, most first.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub closed_by: Option<Vec<ClosedBy>>,
    /// Round trips and sending times of its ESTABLISHED sockets (`None`: none carries
    /// `tcp_info`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub path: Option<PathStats>,
    /// With a trace: TIME_WAIT sockets toward it whose last owner is not known.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub closed_by_unknown: Option<u64>,
    /// Of those, the ones in TIME_WAIT since before the trace started (their close was not
    /// watched); the others' record was replaced in the trace's history by a later close
    /// (a direct-mapped table) or not written (two closes on one slot at once).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub closed_by_unknown_before_trace: Option<u64>,
}

/// A process and the TIME_WAIT sockets toward a destination it left (it called connect(),
/// and its end closed first).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ClosedBy {
    pub pid: u32,
    pub comm: String,
    /// The process no longer runs.
    pub exited: bool,
    pub time_wait_sockets: u64,
}

/// A process and how many sockets of a group it holds.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ProcessSockets {
    pub pid: u32,
    pub comm: String,
    pub sockets: u64,
}

/// A local service: a listening socket and the connections it accepted (or, with
/// `listening == false`, leftovers such as TIME_WAIT on a port nobody listens on any more).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Listener {
    pub local: SocketAddr,
    pub listening: bool,
    /// Connections completed and waiting for accept() (`ss` Recv-Q of the listener).
    pub accept_queue: Option<u32>,
    /// The listen() backlog, capped by net.core.somaxconn (`ss` Send-Q of the listener).
    pub backlog: Option<u32>,
    /// The kernel's test `sk_acceptq_is_full` (include/net/sock.h): queue > backlog. New
    /// handshakes are dropped while it holds.
    pub full: bool,
    /// Non-listening sockets on this local port, by state.
    pub connections: BTreeMap<TcpState, u64>,
    /// The processes holding the listening socket (with process attribution).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub owners: Vec<Owner>,
    /// Connections the census found still in the accept queue: ESTABLISHED or CLOSE_WAIT
    /// without a file (accept() creates the file, so its inode is 0 until then). Their
    /// unread bytes are requests nobody has read, not a slow reader's: the listener's
    /// problem.
    pub unaccepted: Unaccepted,
    /// Connects of this namespace in SYN_SENT toward this listener that resent their SYN.
    pub syn_resent_toward: u64,
    /// With an earlier census: the SYN resends of those connects between the two censuses
    /// (each one's `tcpi_retransmits` growth, all of them for a connect new since).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub syn_resends_between_censuses: Option<u64>,
}

/// Connections waiting in a listener's accept queue, as the census found them.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Unaccepted {
    pub connections: u64,
    /// Bytes their clients sent that nobody read (Recv-Q).
    pub unread_bytes: u64,
    /// Of them, those whose client already closed (CLOSE_WAIT): it stopped waiting.
    pub closed_by_client: u64,
    /// How long the longest-waiting one has waited at least: since the last ACK it received
    /// (`tcpi_last_ack_recv`, the handshake's ACK at the latest), or the interval between two
    /// censuses that both found it waiting.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub waited_at_least_us: Option<u64>,
}

impl Unaccepted {
    fn add(&mut self, s: &Socket, earlier: Option<&Socket>, interval: Option<Duration>) {
        self.connections += 1;
        // Recv-Q is rcv_nxt - copied_seq (tcp_diag_get_info), and a FIN takes one sequence
        // number: a CLOSE_WAIT socket's Recv-Q counts it (19 for an 18-byte request).
        let fin = u32::from(s.state == TcpState::CloseWait);
        self.unread_bytes += u64::from(s.recv_q.saturating_sub(fin));
        if s.state == TcpState::CloseWait {
            self.closed_by_client += 1;
        }
        // rcv_tstamp is set when the child socket is created from the handshake and on
        // every ACK since: the time since the last one is at most its time in the queue.
        let since_ack = s
            .info
            .as_ref()
            .map(|i| Duration::from_millis(u64::from(i.last_ack_recv_ms)));
        let persisted = earlier.and(interval);
        let waited = since_ack.max(persisted).map(micros);
        self.waited_at_least_us = self.waited_at_least_us.max(waited);
    }
}

/// Why a socket is flagged as a slow reader.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum SlowSign {
    /// This socket advertises a zero window with unread data (`tcpi_rcv_wnd` 0, Recv-Q > 0).
    ZeroReceiveWindow,
    /// Unread data fills at least half the receive buffer (kernels without `tcpi_rcv_wnd`).
    FullReceiveQueue,
    /// The peer advertises a zero window and this socket has data to send.
    PeerZeroWindow,
    /// Recv-Q grew since the previous sample.
    ReceiveQueueGrowing,
    /// Data queued at the previous sample is still unread (the application read less over
    /// the interval than was waiting at its start) although Recv-Q did not grow: a reader
    /// that drains a stalled queue slowly while the sender waits for window.
    DataLeftUnread,
    /// Recv-Q held a quarter or more of the receive buffer (skmem `rb`) at this census and at
    /// the previous one: data waited for the application the whole interval through, so the
    /// application, not the network, sets the flow's pace (the sender is held to what the
    /// reader drains), even when neither census landed on a zero window.
    PersistentBacklog,
    /// The socket is in retransmission-timeout backoff.
    RetransmitBackoff,
    /// A connect (SYN_SENT) whose SYN was retransmitted.
    SynRetransmit,
}

/// A socket worth looking at, with the figures that flagged it.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct FlaggedSocket {
    pub state: TcpState,
    pub local: SocketAddr,
    pub remote: SocketAddr,
    pub sign: SlowSign,
    pub recv_q_bytes: u32,
    pub send_q_bytes: u32,
    pub recv_q_growth_bytes: Option<i64>,
    pub rcvbuf_bytes: Option<u32>,
    pub rcv_wnd_bytes: Option<u32>,
    pub snd_wnd_bytes: Option<u32>,
    pub rto_us: Option<u32>,
    pub backoff: Option<u8>,
    pub retransmits: Option<u8>,
    /// How long this socket has provably been stalled: a zero window seen in two censuses
    /// (their interval), unread data left unread over a whole interval, or the time an RTO
    /// backoff or SYN retransmission count implies.
    pub stalled_at_least_us: Option<u64>,
    pub inode: u32,
    /// The processes holding it (with process attribution).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub owners: Vec<Owner>,
}

/// The census condensed: the JSON body of `tcpdoctor sockets`.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Summary {
    pub netns: Option<String>,
    pub total_sockets: u64,
    pub by_state: BTreeMap<TcpState, u64>,
    pub port_range: PortRange,
    pub ephemeral_ports: u32,
    pub time_wait_duration_s: u64,
    pub sustainable_connect_rate_per_s: f64,
    /// When connect() may reuse TIME_WAIT ports in this namespace.
    pub tw_reuse: TwReuse,
    /// Time between the earlier census (when one was given) and this one.
    pub interval_ms: Option<u64>,
    /// Sockets that carry data (ESTABLISHED, CLOSE_WAIT, FIN_WAIT*, LAST_ACK, CLOSING): what
    /// slow readers and retransmission timeouts are a share of.
    pub data_sockets: u64,
    /// Outgoing sockets grouped by remote ip:port, most ports in use first.
    pub destinations: Vec<Destination>,
    /// Listening sockets (and orphaned local services), busiest first.
    pub listeners: Vec<Listener>,
    pub slow_readers: Vec<FlaggedSocket>,
    pub retransmitting: Vec<FlaggedSocket>,
    /// The busy connections and what limited each: the receiver's window, the send buffer,
    /// the network or the application ([`limits`]).
    pub transfers: Transfers,
    pub undecoded_messages: u64,
    /// What the process scan covered; `None` without process attribution.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub attribution: Option<Attribution>,
    /// Whether a trace named the last owners of TIME_WAIT sockets.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_owners: Option<LastOwners>,
    /// Orphaned FIN_WAIT2 mini-sockets whose peer on this host is gone: each answers the
    /// next SYN on its 4-tuple with a stale ACK ([`super::stale`]).
    pub stale_fin_wait2: Vec<super::stale::StaleFinWait2>,
}

/// A summary and the findings it supports.
#[derive(Clone, Debug, PartialEq)]
pub struct Analysis {
    pub summary: Summary,
    pub findings: Vec<Finding>,
}

type Key = (SocketAddr, SocketAddr);

fn key(s: &Socket) -> Key {
    (s.local, s.remote)
}

/// What the analysis of each socket needs from the whole census and the earlier one.
struct Context<'a> {
    census: &'a Census,
    range: PortRange,
    /// Ephemeral ports connect() may use ([`PortRange::connect_ports`]).
    ports: u32,
    /// Connects per second the range sustains while each port is held in TIME_WAIT.
    sustainable: f64,
    /// Time between the earlier census and this one, when both carry a time.
    interval: Option<Duration>,
    /// Whether an earlier census was given.
    has_previous: bool,
    /// The earlier census's connections, by 4-tuple ([`previous_connections`]).
    before: HashMap<Key, &'a Socket>,
    /// With a trace: how long it has watched the closes.
    traced_for: Option<Duration>,
}

impl<'a> Context<'a> {
    /// The earlier census's socket on the same 4-tuple, if it was a connection then.
    fn earlier(&self, s: &Socket) -> Option<&'a Socket> {
        self.before.get(&key(s)).copied()
    }
}

/// The census's sockets other than listeners, grouped under the listener that accepted them
/// (or an orphaned local service), or under the destination they connect to.
struct Grouping {
    listeners: Vec<Listener>,
    /// Connections in a listener's accept queue: not a reader's.
    unaccepted: HashSet<Key>,
    dests: HashMap<SocketAddr, Destination>,
    /// Sockets per process (pid, comm), per destination.
    dest_owners: HashMap<SocketAddr, BTreeMap<(u32, String), u64>>,
    /// With a trace: TIME_WAIT sockets per last owner, per destination.
    closers: HashMap<SocketAddr, BTreeMap<LastOwner, u64>>,
}

/// Sockets flagged while walking the census, and how many carry data.
#[derive(Default)]
struct Flagged {
    slow_readers: Vec<FlaggedSocket>,
    retransmitting: Vec<FlaggedSocket>,
    data_sockets: u64,
}

/// Analyzes a census; `previous` (an earlier census of the same namespace) adds what only
/// two samples show: Recv-Q growth with data left unread, and zero windows that persisted.
pub fn analyze(census: &Census, previous: Option<&Census>) -> Analysis {
    let range = census.port_range;
    let ports = range.connect_ports();
    let sustainable = f64::from(ports) / TIME_WAIT.as_secs_f64();

    let mut by_state: BTreeMap<TcpState, u64> = BTreeMap::new();
    for s in &census.sockets {
        *by_state.entry(s.state).or_default() += 1;
    }

    let cx = Context {
        census,
        range,
        ports,
        sustainable,
        interval: interval_between(previous, census),
        has_previous: previous.is_some(),
        before: previous_connections(previous),
        traced_for: traced_for(census),
    };
    let Grouping {
        mut listeners,
        unaccepted,
        dests,
        dest_owners,
        closers,
    } = group(&cx);
    let destinations = destinations(&cx, dests, dest_owners, closers);
    sort_listeners(&mut listeners);
    let flagged = flag_sockets(&cx, &unaccepted, &mut listeners);

    let summary = Summary {
        netns: census.netns.clone(),
        total_sockets: census.sockets.len() as u64,
        by_state,
        port_range: range,
        ephemeral_ports: ports,
        time_wait_duration_s: TIME_WAIT.as_secs(),
        sustainable_connect_rate_per_s: sustainable,
        tw_reuse: census.tw_reuse,
        interval_ms: cx.interval.map(|d| d.as_millis() as u64),
        data_sockets: flagged.data_sockets,
        destinations,
        listeners,
        slow_readers: flagged.slow_readers,
        retransmitting: flagged.retransmitting,
        transfers: limits::transfers(&census.sockets, previous.map(|_| &cx.before), cx.interval),
        undecoded_messages: census.undecoded_messages,
        attribution: census.attribution.clone(),
        last_owners: census.last_owners.clone(),
        stale_fin_wait2: super::stale::find(census),
    };
    let mut findings = findings(&summary);
    findings.extend(super::stale::finding(
        &summary.stale_fin_wait2,
        census.fin_timeout,
    ));
    Analysis { summary, findings }
}

/// Time between the earlier census and this one, when both carry the time they were taken.
fn interval_between(previous: Option<&Census>, census: &Census) -> Option<Duration> {
    match (previous.and_then(|p| p.taken_at), census.taken_at) {
        (Some(a), Some(b)) => Some(b.saturating_duration_since(a)),
        _ => None,
    }
}

/// The earlier census's connections, by 4-tuple. A TIME_WAIT socket is no longer a
/// connection (no queues, no windows): a socket on its 4-tuple now is a new connection, not
/// its continuation. Leaving them out also keeps the map small where they are the bulk of
/// the census (50,000 TIME_WAIT: BENCHMARKS.md, exporter).
fn previous_connections(previous: Option<&Census>) -> HashMap<Key, &Socket> {
    previous
        .map(|p| {
            p.sockets
                .iter()
                .filter(|s| !matches!(s.state, TcpState::TimeWait | TcpState::Listen))
                .map(|s| (key(s), s))
                .collect()
        })
        .unwrap_or_default()
}

/// With a trace of the last owners: how long it has watched the closes.
fn traced_for(census: &Census) -> Option<Duration> {
    match &census.last_owners {
        Some(LastOwners::Traced { traced_for_ms, .. }) => {
            Some(Duration::from_millis(*traced_for_ms))
        }
        _ => None,
    }
}

/// The census's listening sockets as listeners, and their indices by local port (several
/// listeners may share a port on different addresses).
fn listening(census: &Census) -> (Vec<Listener>, HashMap<u16, Vec<usize>>) {
    let mut listeners: Vec<Listener> = Vec::new();
    let mut listen_idx: HashMap<u16, Vec<usize>> = HashMap::new();
    for s in census
        .sockets
        .iter()
        .filter(|s| s.state == TcpState::Listen)
    {
        listen_idx
            .entry(s.local.port())
            .or_default()
            .push(listeners.len());
        listeners.push(Listener {
            local: s.local,
            listening: true,
            accept_queue: Some(s.recv_q),
            backlog: Some(s.send_q),
            full: s.recv_q > s.send_q,
            connections: BTreeMap::new(),
            owners: s.owners.clone(),
            unaccepted: Unaccepted::default(),
            syn_resent_toward: 0,
            syn_resends_between_censuses: None,
        });
    }
    (listeners, listen_idx)
}

/// A local service nobody listens on any more, known only by its inbound connections.
fn orphaned(local: SocketAddr) -> Listener {
    Listener {
        local,
        listening: false,
        accept_queue: None,
        backlog: None,
        full: false,
        connections: BTreeMap::new(),
        owners: Vec::new(),
        unaccepted: Unaccepted::default(),
        syn_resent_toward: 0,
        syn_resends_between_censuses: None,
    }
}

/// A destination with no sockets counted yet; with a trace, its closers start empty.
fn new_destination(
    remote: SocketAddr,
    sustainable: f64,
    traced_for: Option<Duration>,
) -> Destination {
    Destination {
        remote,
        sockets: 0,
        by_state: BTreeMap::new(),
        time_wait: 0,
        tw_reuse: false,
        time_wait_reusable: 0,
        ephemeral_ports_in_use: 0,
        ports_unavailable: 0,
        headroom_ports: 0,
        used_percent: 0.0,
        time_wait_rate_per_s: 0.0,
        sustainable_connect_rate_per_s: sustainable,
        processes: Vec::new(),
        path: None,
        closed_by: traced_for.map(|_| Vec::new()),
        closed_by_unknown: traced_for.map(|_| 0),
        closed_by_unknown_before_trace: traced_for.map(|_| 0),
    }
}

/// Groups the census: listeners first, so accepted sockets can be attributed to them; then
/// each other socket under its listener, an orphaned local service (inbound to a port nobody
/// listens on any more, e.g. server-side TIME_WAIT), or the destination it connects to.
fn group(cx: &Context<'_>) -> Grouping {
    let (listeners, listen_idx) = listening(cx.census);
    let mut g = Grouping {
        listeners,
        unaccepted: HashSet::new(),
        dests: HashMap::new(),
        dest_owners: HashMap::new(),
        closers: HashMap::new(),
    };
    let mut orphan_idx: HashMap<SocketAddr, usize> = HashMap::new();
    for s in cx
        .census
        .sockets
        .iter()
        .filter(|s| s.state != TcpState::Listen)
    {
        let lport = s.local.port();
        if let Some(idx) = listen_idx.get(&lport) {
            g.add_accepted(cx, s, idx);
        } else if !cx.range.contains(lport) && cx.range.contains(s.remote.port()) {
            let listeners = &mut g.listeners;
            let i = *orphan_idx.entry(s.local).or_insert_with(|| {
                listeners.push(orphaned(s.local));
                listeners.len() - 1
            });
            *listeners[i].connections.entry(s.state).or_default() += 1;
        } else {
            g.add_outgoing(cx, s);
        }
    }
    g
}

impl Grouping {
    /// Counts a connection to a listening port under the first listener on that port bound
    /// to its address or to the wildcard (else the port's first), and records it if it
    /// still waits in the accept queue.
    fn add_accepted(&mut self, cx: &Context<'_>, s: &Socket, idx: &[usize]) {
        let i = idx
            .iter()
            .copied()
            .find(|&i| {
                let l = self.listeners[i].local.ip();
                l.is_unspecified() || canonical(l) == canonical(s.local.ip())
            })
            .unwrap_or(idx[0]);
        let listener = &mut self.listeners[i];
        *listener.connections.entry(s.state).or_default() += 1;
        if unaccepted_sign(s) {
            listener
                .unaccepted
                .add(s, cx.earlier(s).filter(|b| unaccepted_sign(b)), cx.interval);
            self.unaccepted.insert(key(s));
        }
    }

    /// Counts an outgoing socket toward its destination: its state, owners and path; for
    /// TIME_WAIT, whether connect() may reuse it and (with a trace) who closed it; and the
    /// ephemeral port it holds.
    fn add_outgoing(&mut self, cx: &Context<'_>, s: &Socket) {
        let reuse = cx.census.tw_reuse;
        let d = self
            .dests
            .entry(s.remote)
            .or_insert_with(|| new_destination(s.remote, cx.sustainable, cx.traced_for));
        d.sockets += 1;
        PathStats::add(&mut d.path, s, cx.earlier(s), cx.has_previous);
        for o in dedup_pids(&s.owners) {
            *self
                .dest_owners
                .entry(s.remote)
                .or_default()
                .entry((o.pid, o.comm.clone()))
                .or_default() += 1;
        }
        *d.by_state.entry(s.state).or_default() += 1;
        if s.state == TcpState::TimeWait {
            d.time_wait += 1;
            if reuse.applies(s.local.ip(), s.remote.ip()) {
                d.tw_reuse = true;
            }
            if let Some(traced) = cx.traced_for {
                match &s.last_owner {
                    Some(o) => {
                        *self
                            .closers
                            .entry(s.remote)
                            .or_default()
                            .entry(o.clone())
                            .or_default() += 1
                    }
                    None => {
                        *d.closed_by_unknown.get_or_insert(0) += 1;
                        if time_wait_for(s).is_some_and(|t| t > traced) {
                            *d.closed_by_unknown_before_trace.get_or_insert(0) += 1;
                        }
                    }
                }
            }
        }
        if cx.range.contains(s.local.port()) {
            d.ephemeral_ports_in_use += 1;
            if reuse.reusable(s) {
                d.time_wait_reusable += 1;
            }
        }
    }
}

/// Completes each destination (ports unavailable, headroom, rates, the processes holding
/// its sockets and who closed its TIME_WAIT sockets) and sorts them, most ports unavailable
/// first.
fn destinations(
    cx: &Context<'_>,
    dests: HashMap<SocketAddr, Destination>,
    mut dest_owners: HashMap<SocketAddr, BTreeMap<(u32, String), u64>>,
    mut closers: HashMap<SocketAddr, BTreeMap<LastOwner, u64>>,
) -> Vec<Destination> {
    let ports = cx.ports;
    let reuse = cx.census.tw_reuse;
    let mut destinations: Vec<Destination> = dests
        .into_values()
        .map(|mut d| {
            d.ports_unavailable = d.ephemeral_ports_in_use - d.time_wait_reusable;
            d.headroom_ports = i64::from(ports) - d.ports_unavailable as i64;
            d.used_percent = 100.0 * d.ports_unavailable as f64 / f64::from(ports);
            d.time_wait_rate_per_s = d.time_wait as f64 / TIME_WAIT.as_secs_f64();
            if d.tw_reuse {
                d.sustainable_connect_rate_per_s = reuse.sustainable_rate(ports);
            }
            if let Some(m) = dest_owners.remove(&d.remote) {
                d.processes = m
                    .into_iter()
                    .map(|((pid, comm), sockets)| ProcessSockets { pid, comm, sockets })
                    .collect();
                d.processes
                    .sort_by(|a, b| b.sockets.cmp(&a.sockets).then(a.pid.cmp(&b.pid)));
            }
            if let (Some(list), Some(m)) = (d.closed_by.as_mut(), closers.remove(&d.remote)) {
                *list = m
                    .into_iter()
                    .map(|(o, n)| ClosedBy {
                        pid: o.pid,
                        comm: o.comm,
                        exited: o.exited,
                        time_wait_sockets: n,
                    })
                    .collect();
                list.sort_by(|a, b| {
                    b.time_wait_sockets
                        .cmp(&a.time_wait_sockets)
                        .then(a.pid.cmp(&b.pid))
                });
            }
            d
        })
        .collect();
    destinations.sort_by(|a, b| {
        b.ports_unavailable
            .cmp(&a.ports_unavailable)
            .then(b.ephemeral_ports_in_use.cmp(&a.ephemeral_ports_in_use))
            .then(b.sockets.cmp(&a.sockets))
            .then(a.remote.cmp(&b.remote))
    });
    destinations
}

/// Sorts listeners busiest first: full accept queues, then the longest queue, then the most
/// connections.
fn sort_listeners(listeners: &mut [Listener]) {
    let conns = |l: &Listener| l.connections.values().sum::<u64>();
    listeners.sort_by(|a, b| {
        b.full
            .cmp(&a.full)
            .then(b.accept_queue.cmp(&a.accept_queue))
            .then(conns(b).cmp(&conns(a)))
            .then(a.local.cmp(&b.local))
    });
}

/// Walks the census for slow readers and retransmissions, and counts the sockets that carry
/// data (connections still in an accept queue are not a reader's). `listeners` must be
/// sorted: a retransmitted SYN is counted against the first full listener that accepts it.
fn flag_sockets(
    cx: &Context<'_>,
    unaccepted: &HashSet<Key>,
    listeners: &mut [Listener],
) -> Flagged {
    let mut out = Flagged::default();
    for s in &cx.census.sockets {
        if s.state == TcpState::SynSent {
            // A connect whose SYN went unanswered: the SYN ladder, not a data timeout.
            out.retransmitting.extend(syn_retransmit(cx, s, listeners));
            continue;
        }
        if !carries_data(s.state) || unaccepted.contains(&key(s)) {
            continue;
        }
        out.data_sockets += 1;
        out.slow_readers.extend(slow_reader(cx, s));
        out.retransmitting.extend(retransmit_backoff(s));
    }
    out
}

/// A SYN_SENT socket whose SYN was retransmitted, flagged with the wait its retransmission
/// count implies; the resends are also counted against a full listener on this host that
/// accepts for its destination.
fn syn_retransmit(
    cx: &Context<'_>,
    s: &Socket,
    listeners: &mut [Listener],
) -> Option<FlaggedSocket> {
    let resent = syn_resends(s);
    if resent == 0 {
        return None;
    }
    if let Some(l) = listeners
        .iter_mut()
        .find(|l| l.full && accepts_for(l, s.remote))
    {
        // Resends since the earlier census: all of them for a connect new since.
        let earlier = cx
            .before
            .get(&key(s))
            .filter(|b| b.state == TcpState::SynSent)
            .map_or(0, |b| syn_resends(b));
        l.syn_resent_toward += 1;
        if cx.interval.is_some() {
            *l.syn_resends_between_censuses.get_or_insert(0) +=
                u64::from(resent.saturating_sub(earlier));
        }
    }
    let mut f = flag(s, SlowSign::SynRetransmit, None);
    // Retransmission N leaves at rung N of the ladder: the connect has waited at least
    // that long.
    f.stalled_at_least_us = cx
        .census
        .syn_ladder
        .as_ref()
        .and_then(|l| l.retransmit_at(u32::from(resent)))
        .or(Some(SYN_INITIAL_RTO))
        .map(micros);
    Some(f)
}

/// A data socket showing a slow reader's sign, flagged with how long it has provably
/// stalled.
fn slow_reader(cx: &Context<'_>, s: &Socket) -> Option<FlaggedSocket> {
    let earlier = cx.earlier(s);
    let sign = slow_sign(s, earlier)?;
    let growth = earlier.map(|b| i64::from(s.recv_q) - i64::from(b.recv_q));
    let mut f = flag(s, sign, growth);
    // A zero window seen in both censuses, or data that stayed unread from one to the next:
    // stalled for at least their interval.
    let persisted = match sign {
        SlowSign::ReceiveQueueGrowing | SlowSign::DataLeftUnread => true,
        _ => earlier.is_some_and(|b| zero_window_sign(b).is_some()),
    };
    if persisted {
        f.stalled_at_least_us = cx.interval.map(micros);
    }
    // What this census alone proves: how long the data has waited unread, or how long the
    // writer has probed a closed window.
    f.stalled_at_least_us = f.stalled_at_least_us.max(window_closed_for(s).map(micros));
    Some(f)
}

/// A data socket that retransmitted or backed off its RTO, flagged with the wait its backoff
/// implies. Zero-window probing also backs off (icsk_backoff, tcp_probe_timer in
/// net/ipv4/tcp_timer.c) but is the slow reader's doing, not a loss.
fn retransmit_backoff(s: &Socket) -> Option<FlaggedSocket> {
    let i = s.info.as_ref()?;
    let probing = s.timer == Timer::ZeroWindowProbe || i.snd_wnd_bytes == Some(0);
    if i.retransmits > 0 || (i.backoff > 0 && !probing) {
        let mut f = flag(s, SlowSign::RetransmitBackoff, None);
        f.stalled_at_least_us = Some(backoff_wait_us(i.rto_us, i.backoff, i.retransmits));
        Some(f)
    } else {
        None
    }
}

#[cfg(test)]
mod one_cause;

#[cfg(test)]
mod tests;
