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

use std::collections::{BTreeMap, HashMap};
use std::net::SocketAddr;
use std::time::Duration;

use serde::Serialize;
use tcpdoctor_model::policy::{BUDGET_CRITICAL, BUDGET_WARNING};
use tcpdoctor_model::timers::SYN_INITIAL_RTO;
use tcpdoctor_model::units;
use tcpdoctor_model::{merge, Evidence, Finding, Impact, Pathology, PortRange, Source};

use super::limits::{self, PathStats, Transfers};
use super::{
    canonical, Attribution, Census, LastOwner, LastOwners, Owner, Socket, TcpState, Timer, TwReuse,
};
use crate::sysctl::TIME_WAIT;

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

/// Analyzes a census; `previous` (an earlier census of the same namespace) adds what only
/// two samples show: Recv-Q growth with data left unread, and zero windows that persisted.
pub fn analyze(census: &Census, previous: Option<&Census>) -> Analysis {
    let range = census.port_range;
    let ports = range.connect_ports();
    let tw_s = TIME_WAIT.as_secs();
    let sustainable = f64::from(ports) / TIME_WAIT.as_secs_f64();
    let reuse = census.tw_reuse;

    let mut by_state: BTreeMap<TcpState, u64> = BTreeMap::new();
    for s in &census.sockets {
        *by_state.entry(s.state).or_default() += 1;
    }

    let interval = match (previous.and_then(|p| p.taken_at), census.taken_at) {
        (Some(a), Some(b)) => Some(b.saturating_duration_since(a)),
        _ => None,
    };
    // The earlier census's connections, by 4-tuple. A TIME_WAIT socket is no longer a
    // connection (no queues, no windows): a socket on its 4-tuple now is a new connection, not
    // its continuation. Leaving them out also keeps the map small where they are the bulk of
    // the census (50,000 TIME_WAIT: BENCHMARKS.md, exporter).
    let before: HashMap<Key, &Socket> = previous
        .map(|p| {
            p.sockets
                .iter()
                .filter(|s| !matches!(s.state, TcpState::TimeWait | TcpState::Listen))
                .map(|s| (key(s), s))
                .collect()
        })
        .unwrap_or_default();
    // Listeners first, so accepted sockets can be attributed to them.
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
    // Connections in a listener's accept queue: not a reader's (below).
    let mut unaccepted: std::collections::HashSet<Key> = std::collections::HashSet::new();
    let mut orphan_idx: HashMap<SocketAddr, usize> = HashMap::new();
    let mut dests: HashMap<SocketAddr, Destination> = HashMap::new();
    let mut dest_owners: HashMap<SocketAddr, BTreeMap<(u32, String), u64>> = HashMap::new();
    // With a trace: how long it has watched the closes, and who closed what.
    let traced_for = match &census.last_owners {
        Some(LastOwners::Traced { traced_for_ms, .. }) => {
            Some(Duration::from_millis(*traced_for_ms))
        }
        _ => None,
    };
    let mut closers: HashMap<SocketAddr, BTreeMap<LastOwner, u64>> = HashMap::new();
    for s in census
        .sockets
        .iter()
        .filter(|s| s.state != TcpState::Listen)
    {
        let lport = s.local.port();
        if let Some(idx) = listen_idx.get(&lport) {
            let i = idx
                .iter()
                .copied()
                .find(|&i| {
                    let l = listeners[i].local.ip();
                    l.is_unspecified() || canonical(l) == canonical(s.local.ip())
                })
                .unwrap_or(idx[0]);
            *listeners[i].connections.entry(s.state).or_default() += 1;
            if unaccepted_sign(s) {
                let earlier = before.get(&key(s)).copied();
                listeners[i]
                    .unaccepted
                    .add(s, earlier.filter(|b| unaccepted_sign(b)), interval);
                unaccepted.insert(key(s));
            }
            continue;
        }
        if !range.contains(lport) && range.contains(s.remote.port()) {
            // Inbound to a port nobody listens on any more (e.g. server-side TIME_WAIT).
            let i = *orphan_idx.entry(s.local).or_insert_with(|| {
                listeners.push(Listener {
                    local: s.local,
                    listening: false,
                    accept_queue: None,
                    backlog: None,
                    full: false,
                    connections: BTreeMap::new(),
                    owners: Vec::new(),
                    unaccepted: Unaccepted::default(),
                    syn_resent_toward: 0,
                    syn_resends_between_censuses: None,
                });
                listeners.len() - 1
            });
            *listeners[i].connections.entry(s.state).or_default() += 1;
            continue;
        }
        let d = dests.entry(s.remote).or_insert_with(|| Destination {
            remote: s.remote,
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
        });
        d.sockets += 1;
        PathStats::add(
            &mut d.path,
            s,
            before.get(&key(s)).copied(),
            previous.is_some(),
        );
        for o in dedup_pids(&s.owners) {
            *dest_owners
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
            if let Some(traced) = traced_for {
                match &s.last_owner {
                    Some(o) => {
                        *closers
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
        if range.contains(lport) {
            d.ephemeral_ports_in_use += 1;
            if reuse.reusable(s) {
                d.time_wait_reusable += 1;
            }
        }
    }
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
    let conns = |l: &Listener| l.connections.values().sum::<u64>();
    listeners.sort_by(|a, b| {
        b.full
            .cmp(&a.full)
            .then(b.accept_queue.cmp(&a.accept_queue))
            .then(conns(b).cmp(&conns(a)))
            .then(a.local.cmp(&b.local))
    });

    let mut slow_readers = Vec::new();
    let mut retransmitting = Vec::new();
    let mut data_sockets = 0u64;
    for s in &census.sockets {
        if s.state == TcpState::SynSent {
            // A connect whose SYN went unanswered: the SYN ladder, not a data timeout.
            let resent = syn_resends(s);
            if resent > 0 {
                if let Some(l) = listeners
                    .iter_mut()
                    .find(|l| l.full && accepts_for(l, s.remote))
                {
                    // Resends since the earlier census: all of them for a connect new since.
                    let earlier = before
                        .get(&key(s))
                        .filter(|b| b.state == TcpState::SynSent)
                        .map_or(0, |b| syn_resends(b));
                    l.syn_resent_toward += 1;
                    if interval.is_some() {
                        *l.syn_resends_between_censuses.get_or_insert(0) +=
                            u64::from(resent.saturating_sub(earlier));
                    }
                }
                let mut f = flag(s, SlowSign::SynRetransmit, None);
                // Retransmission N leaves at rung N of the ladder: the connect has waited
                // at least that long.
                f.stalled_at_least_us = census
                    .syn_ladder
                    .as_ref()
                    .and_then(|l| l.retransmit_at(u32::from(resent)))
                    .or(Some(SYN_INITIAL_RTO))
                    .map(micros);
                retransmitting.push(f);
            }
            continue;
        }
        if !carries_data(s.state) || unaccepted.contains(&key(s)) {
            continue;
        }
        data_sockets += 1;
        let earlier = before.get(&key(s)).copied();
        if let Some(sign) = slow_sign(s, earlier) {
            let growth = earlier.map(|b| i64::from(s.recv_q) - i64::from(b.recv_q));
            let mut f = flag(s, sign, growth);
            // A zero window seen in both censuses, or data that stayed unread from one to
            // the next: stalled for at least their interval.
            let persisted = match sign {
                SlowSign::ReceiveQueueGrowing | SlowSign::DataLeftUnread => true,
                _ => earlier.is_some_and(|b| zero_window_sign(b).is_some()),
            };
            if persisted {
                f.stalled_at_least_us = interval.map(micros);
            }
            // What this census alone proves: how long the data has waited unread, or how
            // long the writer has probed a closed window.
            f.stalled_at_least_us = f.stalled_at_least_us.max(window_closed_for(s).map(micros));
            slow_readers.push(f);
        }
        if let Some(i) = &s.info {
            // Zero-window probing also backs off (icsk_backoff, tcp_probe_timer in
            // net/ipv4/tcp_timer.c) but is the slow reader's doing, not a loss.
            let probing = s.timer == Timer::ZeroWindowProbe || i.snd_wnd_bytes == Some(0);
            if i.retransmits > 0 || (i.backoff > 0 && !probing) {
                let mut f = flag(s, SlowSign::RetransmitBackoff, None);
                f.stalled_at_least_us = Some(backoff_wait_us(i.rto_us, i.backoff, i.retransmits));
                retransmitting.push(f);
            }
        }
    }

    let summary = Summary {
        netns: census.netns.clone(),
        total_sockets: census.sockets.len() as u64,
        by_state,
        port_range: range,
        ephemeral_ports: ports,
        time_wait_duration_s: tw_s,
        sustainable_connect_rate_per_s: sustainable,
        tw_reuse: reuse,
        interval_ms: interval.map(|d| d.as_millis() as u64),
        data_sockets,
        destinations,
        listeners,
        slow_readers,
        retransmitting,
        transfers: limits::transfers(&census.sockets, previous.map(|_| &before), interval),
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

/// How long a TIME_WAIT socket has been in TIME_WAIT: its timer is armed for
/// `TCP_TIMEWAIT_LEN` (60 s, include/net/tcp.h) when it enters the state
/// (`inet_twsk_schedule`), and sock_diag reports the time left. `None` for other sockets.
pub fn time_wait_for(s: &Socket) -> Option<Duration> {
    (s.state == TcpState::TimeWait && s.timer == Timer::TimeWait)
        .then(|| TIME_WAIT.saturating_sub(Duration::from_millis(u64::from(s.timer_expires_ms))))
}

/// A connection still in a listener's accept queue: established (or already closed by the
/// client) on the listener's port, and no file yet (accept() creates it: inode 0). Sockets the
/// application closed (FIN_WAIT*, LAST_ACK, CLOSING) have no file either, but are not
/// ESTABLISHED or CLOSE_WAIT.
fn unaccepted_sign(s: &Socket) -> bool {
    s.inode == 0 && matches!(s.state, TcpState::Established | TcpState::CloseWait)
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

/// Whether listener `l` takes connections for `dest` (its address, or any address of the
/// namespace for a wildcard listener).
fn accepts_for(l: &Listener, dest: SocketAddr) -> bool {
    l.listening
        && l.local.port() == dest.port()
        && (l.local.ip().is_unspecified() || canonical(l.local.ip()) == canonical(dest.ip()))
}

/// SYN retransmissions of a connect in SYN_SENT (`tcpi_retransmits`, or the timer's count).
fn syn_resends(s: &Socket) -> u8 {
    s.info
        .as_ref()
        .map_or(0, |i| i.retransmits)
        .max(s.timer_retransmits)
}

/// The smallest `net.ipv4.tcp_rto_max_ms` (Linux 6.15+): whatever a namespace sets, no
/// zero-window probe interval is capped below it, so a sum of intervals capped at it is a
/// lower bound.
const PROBE_INTERVAL_CAP_FLOOR: Duration = Duration::from_secs(1);

/// How long one census proves a closed window has lasted on this socket:
/// - the reader's side (its window at zero with data queued): since the last data arrived
///   (`tcpi_last_data_recv`); that data is still in Recv-Q, unread all that time.
/// - the writer's side, probing the peer's zero window (`ICSK_TIME_PROBE0` pending): the
///   probe timer starts at the RTO (`tcp_probe0_base`) and doubles with each probe sent
///   (`tcp_send_probe0` bumps `icsk_backoff`, net/ipv4/tcp_output.c), so `backoff` probes
///   took RTO x (2^backoff - 1), each interval capped ([`PROBE_INTERVAL_CAP_FLOOR`]).
///   Measured on 6.18: backoff 9 with RTO 204 ms after 120 s of a closed window (104 s).
fn window_closed_for(s: &Socket) -> Option<Duration> {
    let i = s.info.as_ref()?;
    let d = match zero_window_sign(s)? {
        SlowSign::ZeroReceiveWindow | SlowSign::FullReceiveQueue => {
            Some(Duration::from_millis(u64::from(i.last_data_recv_ms)))
        }
        SlowSign::PeerZeroWindow if s.timer == Timer::ZeroWindowProbe => {
            let base = Duration::from_micros(u64::from(i.rto_us));
            let mut sum = Duration::ZERO;
            for b in 0..u32::from(i.backoff.min(31)) {
                sum += (base * 2u32.saturating_pow(b)).min(PROBE_INTERVAL_CAP_FLOOR.max(base));
            }
            Some(sum)
        }
        _ => None,
    };
    // 0: the data arrived, or the probing began, just now: nothing proven yet.
    d.filter(|d| !d.is_zero())
}

fn micros(d: Duration) -> u64 {
    u64::try_from(d.as_micros()).unwrap_or(u64::MAX)
}

/// The time a socket in RTO backoff has provably waited without an acknowledgement, from
/// `tcp_retransmit_timer` (net/ipv4/tcp_timer.c): each timeout doubles the RTO and bumps
/// `icsk_backoff`, so after `backoff` timeouts the current RTO is the first one times
/// 2^backoff and the earlier ones add up to the current RTO times (1 - 2^-backoff). Thin
/// streams (linear timeouts) keep the RTO and the backoff at 0: `retransmits` timeouts of
/// the current RTO each.
fn backoff_wait_us(rto_us: u32, backoff: u8, retransmits: u8) -> u64 {
    let rto = u64::from(rto_us);
    if backoff > 0 {
        let b = u32::from(backoff.min(32));
        rto - (rto >> b)
    } else {
        rto * u64::from(retransmits.max(1))
    }
}

/// States in which a socket exchanges data and has meaningful windows and queues.
fn carries_data(state: TcpState) -> bool {
    matches!(
        state,
        TcpState::Established
            | TcpState::CloseWait
            | TcpState::FinWait1
            | TcpState::FinWait2
            | TcpState::LastAck
            | TcpState::Closing
    )
}

/// Whether the peer may still send on this socket: not once its FIN has arrived (CLOSE_WAIT,
/// LAST_ACK, CLOSING). A FIN comes after all the data before it, so then nothing the peer
/// wrote waits for this socket's window, whatever is left unread: the application may be
/// late to read its last response (report 004's load test: wrk's sockets in CLOSE_WAIT with
/// a 156-byte response unread 300 ms apart), but no writer is stalled by it.
fn peer_may_send(state: TcpState) -> bool {
    !matches!(
        state,
        TcpState::CloseWait | TcpState::LastAck | TcpState::Closing
    )
}

/// What one census can prove about a slow reader: a closed window, on either side.
fn zero_window_sign(s: &Socket) -> Option<SlowSign> {
    let info = s.info.as_ref();
    if s.recv_q > 0 && peer_may_send(s.state) {
        match info.and_then(|i| i.rcv_wnd_bytes) {
            Some(0) => return Some(SlowSign::ZeroReceiveWindow),
            Some(_) => {}
            None => {
                // Kernels without tcpi_rcv_wnd (before 6.2): unread data filling half the
                // receive buffer leaves no window to advertise (tcp_adv_win_scale keeps
                // the other half for overhead).
                if let Some(buf) = s.rcvbuf_bytes {
                    if buf > 0 && u64::from(s.recv_q) * 2 >= u64::from(buf) {
                        return Some(SlowSign::FullReceiveQueue);
                    }
                }
            }
        }
    }
    let peer_zero = info.and_then(|i| i.snd_wnd_bytes) == Some(0) && s.send_q > 0;
    if peer_zero || s.timer == Timer::ZeroWindowProbe {
        return Some(SlowSign::PeerZeroWindow);
    }
    None
}

/// A zero window now, or (with an earlier census) a Recv-Q that grew while data already
/// waiting at the earlier census stayed unread: the application read less over the whole
/// interval than was queued at its start. A request that arrived just before the census and
/// a busy server that has not read it yet is neither.
fn slow_sign(s: &Socket, earlier: Option<&Socket>) -> Option<SlowSign> {
    if let Some(sign) = zero_window_sign(s) {
        return Some(sign);
    }
    let b = earlier?;
    if b.recv_q == 0 || !peer_may_send(s.state) {
        return None;
    }
    let received = |x: &Socket| x.info.as_ref().and_then(|i| i.bytes_received);
    let sign = match (received(b), received(s)) {
        // A counter that went back: another connection on the same 4-tuple.
        (Some(rb), Some(rs)) if rs < rb => return None,
        // Bytes the application consumed between the censuses: what was received minus
        // what is still queued, at each end. Less than was queued at the earlier census:
        // some of that data waited the whole interval, whether Recv-Q grew or not.
        (Some(rb), Some(rs)) => {
            let read = (rs.saturating_sub(u64::from(s.recv_q)))
                .saturating_sub(rb.saturating_sub(u64::from(b.recv_q)));
            (read < u64::from(b.recv_q)).then_some(if s.recv_q > b.recv_q {
                SlowSign::ReceiveQueueGrowing
            } else {
                SlowSign::DataLeftUnread
            })
        }
        // Without tcpi_bytes_received (before 4.1): queued at both censuses and growing.
        _ => (s.recv_q > b.recv_q).then_some(SlowSign::ReceiveQueueGrowing),
    };
    // A reader that drains a lot per interval but never catches up: a backlog of a quarter
    // of the buffer or more at both censuses (a busy server's unread request of a few hundred
    // bytes is far below that: defect 17's wrk-against-nginx churn).
    sign.or_else(|| (backlog(s) && backlog(b)).then_some(SlowSign::PersistentBacklog))
}

/// Recv-Q at a quarter or more of the receive buffer (skmem `rb`, which counts the kernel's
/// overhead too: with tcp_adv_win_scale's default half of it is for data).
fn backlog(x: &Socket) -> bool {
    x.rcvbuf_bytes
        .is_some_and(|buf| buf > 0 && u64::from(x.recv_q) * 4 >= u64::from(buf))
}

fn flag(s: &Socket, sign: SlowSign, growth: Option<i64>) -> FlaggedSocket {
    let i = s.info.as_ref();
    FlaggedSocket {
        state: s.state,
        local: s.local,
        remote: s.remote,
        sign,
        recv_q_bytes: s.recv_q,
        send_q_bytes: s.send_q,
        recv_q_growth_bytes: growth,
        rcvbuf_bytes: s.rcvbuf_bytes,
        rcv_wnd_bytes: i.and_then(|i| i.rcv_wnd_bytes),
        snd_wnd_bytes: i.and_then(|i| i.snd_wnd_bytes),
        rto_us: i.map(|i| i.rto_us),
        backoff: i.map(|i| i.backoff),
        retransmits: i.map(|i| i.retransmits),
        stalled_at_least_us: None,
        inode: s.inode,
        owners: s.owners.clone(),
    }
}

/// One owner per process (a socket shared by a forked child appears once per process).
fn dedup_pids(owners: &[Owner]) -> Vec<&Owner> {
    let mut seen = Vec::new();
    let mut out = Vec::new();
    for o in owners {
        if !seen.contains(&o.pid) {
            seen.push(o.pid);
            out.push(o);
        }
    }
    out
}

/// `closed by: curl[812] 40, wget[90] 3 (exited); 12 unknown`: who left a destination's
/// TIME_WAIT sockets (the three busiest), or "" without a trace.
pub fn closed_by_line(d: &Destination) -> String {
    let Some(list) = &d.closed_by else {
        return String::new();
    };
    let mut parts: Vec<String> = list
        .iter()
        .take(3)
        .map(|c| {
            format!(
                "{}[{}] {}{}",
                c.comm,
                c.pid,
                c.time_wait_sockets,
                if c.exited { " (exited)" } else { "" }
            )
        })
        .collect();
    if list.len() > 3 {
        let rest: u64 = list[3..].iter().map(|c| c.time_wait_sockets).sum();
        parts.push(format!("{} more processes {rest}", list.len() - 3));
    }
    let unknown = d.closed_by_unknown.unwrap_or(0);
    let list = if parts.is_empty() {
        "no traced close".to_string()
    } else {
        parts.join(", ")
    };
    format!("closed by: {list}; {unknown} unknown")
}

/// `nginx pid 812` or `nginx pid 812, nginx pid 813`; empty without owners.
pub fn who(owners: &[Owner]) -> String {
    dedup_pids(owners)
        .iter()
        .map(|o| format!("{} pid {}", o.comm, o.pid))
        .collect::<Vec<_>>()
        .join(", ")
}

/// ` (nginx pid 812)` or nothing.
fn by_whom(owners: &[Owner]) -> String {
    if owners.is_empty() {
        String::new()
    } else {
        format!(" ({})", who(owners))
    }
}

fn worst_stall(flagged: &[&FlaggedSocket]) -> Option<Duration> {
    flagged
        .iter()
        .filter_map(|f| f.stalled_at_least_us)
        .max()
        .map(Duration::from_micros)
}

fn findings(sum: &Summary) -> Vec<Finding> {
    let mut out = Vec::new();
    let ports = u64::from(sum.ephemeral_ports);
    for d in &sum.destinations {
        let used = d.ports_unavailable as f64 / ports as f64;
        if used < HEADROOM_WARNING {
            continue;
        }
        let reusable = if d.time_wait_reusable > 0 {
            format!(
                ", {} of them reusable by connect() (tcp_tw_reuse={})",
                d.time_wait_reusable,
                sum.tw_reuse.tcp_tw_reuse.unwrap_or(0)
            )
        } else if d.tw_reuse {
            format!(
                ", none in TIME_WAIT for the {} ms connect() needs before reusing them",
                sum.tw_reuse.tcp_tw_reuse_delay_ms
            )
        } else {
            String::new()
        };
        let budget_formula = if d.tw_reuse {
            format!(
                "{ports} ports / {} ms tcp_tw_reuse_delay (sustainable new connections per s)",
                sum.tw_reuse.tcp_tw_reuse_delay_ms
            )
        } else {
            format!(
                "{ports} ports / {} s TIME_WAIT (sustainable new connections per s)",
                sum.time_wait_duration_s
            )
        };
        out.push(
            Finding::new(
                Pathology::PortExhaustion,
                Source::Sockets,
                format!(
                    "{} of {} ephemeral ports toward {} are held ({} in TIME_WAIT{reusable}); {} left",
                    d.ports_unavailable, ports, d.remote, d.time_wait, d.headroom_ports
                ),
                Impact::budget(used),
            )
            .with_evidence(Evidence::Sockets {
                state: TcpState::TimeWait.name().to_string(),
                count: d.time_wait,
                local: None,
                remote: Some(d.remote.to_string()),
                detail: Some(format!("{} sockets toward it in all states", d.sockets)),
            })
            .setting("net.ipv4.ip_local_port_range", sum.port_range)
            .setting(
                "net.ipv4.tcp_tw_reuse",
                sum.tw_reuse
                    .tcp_tw_reuse
                    .map_or("(absent)".to_string(), |v| v.to_string()),
            )
            .arithmetic(
                format!(
                    "{ports} ports - ({} in use - {} reusable TIME_WAIT) (headroom ports)",
                    d.ephemeral_ports_in_use, d.time_wait_reusable
                ),
                d.headroom_ports as f64,
            )
            .arithmetic(budget_formula, d.sustainable_connect_rate_per_s)
            .arithmetic(
                format!(
                    "{} TIME_WAIT / {} s (connects per s over the last minute, at least)",
                    d.time_wait, sum.time_wait_duration_s
                ),
                d.time_wait_rate_per_s,
            ),
        );
        if let Some(closed) = &d.closed_by {
            let f = out.last_mut().expect("just pushed");
            let unknown = d.closed_by_unknown.unwrap_or(0);
            let before = d.closed_by_unknown_before_trace.unwrap_or(0);
            let mut items: Vec<String> = closed
                .iter()
                .take(EXAMPLES)
                .map(|c| {
                    format!(
                        "{} pid {}{}: {} TIME_WAIT",
                        c.comm,
                        c.pid,
                        if c.exited { " (exited)" } else { "" },
                        c.time_wait_sockets
                    )
                })
                .collect();
            if closed.len() > EXAMPLES {
                items.push(format!("{} more processes", closed.len() - EXAMPLES));
            }
            items.push(format!(
                "last owner unknown: {unknown} TIME_WAIT ({before} in TIME_WAIT since before the trace started, {} not in the trace's history)",
                unknown - before
            ));
            f.evidence.push(Evidence::Examples {
                what: format!(
                    "processes that closed the {} TIME_WAIT sockets toward {} (the last owner of each, recorded by the trace at the close)",
                    d.time_wait, d.remote
                ),
                items,
            });
            f.summary.push_str(&format!("; {}", closed_by_line(d)));
        }
        if sum.attribution.is_some() {
            let f = out.last_mut().expect("just pushed");
            let mut items: Vec<String> = d
                .processes
                .iter()
                .take(EXAMPLES)
                .map(|p| format!("{} pid {}: {} live socket(s)", p.comm, p.pid, p.sockets))
                .collect();
            if items.is_empty() {
                items.push("none: no live socket toward it".into());
            }
            f.evidence.push(Evidence::Examples {
                what: if d.closed_by.is_some() {
                    format!("processes with live sockets toward {}", d.remote)
                } else {
                    format!(
                        "processes with live sockets toward {} (the {} TIME_WAIT sockets have no owner: the kernel forgets the process at close; naming their last owner needs a trace watching the close: `tcpdoctor sockets --watch` as root)",
                        d.remote, d.time_wait
                    )
                },
                items,
            });
            if let Some(p) = d.processes.first() {
                f.summary.push_str(&format!(
                    "; live sockets toward it held by {} pid {}",
                    p.comm, p.pid
                ));
            }
        }
    }
    for l in sum.listeners.iter().filter(|l| l.full) {
        out.push(overflow_finding(sum, l));
    }
    if !sum.slow_readers.is_empty() {
        out.push(slow_reader_finding(sum));
    }
    // SYNs resent toward a full listener of this namespace are that listener's doing: they
    // are evidence of its overflow finding (above), not a finding of their own.
    let syn: Vec<&FlaggedSocket> = sum
        .retransmitting
        .iter()
        .filter(|f| f.sign == SlowSign::SynRetransmit)
        .filter(|f| {
            !sum.listeners
                .iter()
                .any(|l| l.full && accepts_for(l, f.remote))
        })
        .collect();
    if !syn.is_empty() {
        out.push(syn_finding(sum, &syn, ""));
    }
    let data: Vec<&FlaggedSocket> = sum
        .retransmitting
        .iter()
        .filter(|f| f.sign == SlowSign::RetransmitBackoff)
        .collect();
    if !data.is_empty() {
        let n = data.len() as u64;
        let max_rto = data.iter().filter_map(|f| f.rto_us).max().unwrap_or(0);
        let max_backoff = data.iter().filter_map(|f| f.backoff).max().unwrap_or(0);
        let stall = worst_stall(&data);
        out.push(
            Finding::new(
                Pathology::RetransmitTimeout,
                Source::Sockets,
                format!(
                    "{n} socket(s) waiting on retransmission timeouts (backoff up to {max_backoff}, RTO up to {} ms; the worst has waited {} or more)",
                    max_rto / 1000,
                    stall.map_or("?".to_string(), units::ms_or_s_coarse)
                ),
                Impact::stalls(n, Some(sum.data_sockets.max(n)), stall),
            )
            .with_evidence(Evidence::Timing {
                what: "current RTO of the worst socket".into(),
                count: n,
                value_us: u64::from(max_rto),
            })
            .with_evidence(Evidence::Examples {
                what: "sockets (local -> remote backoff RTO)".into(),
                items: data
                    .iter()
                    .take(EXAMPLES)
                    .map(|f| {
                        format!(
                            "{} -> {} backoff {} RTO {} ms{}",
                            f.local,
                            f.remote,
                            f.backoff.unwrap_or(0),
                            f.rto_us.unwrap_or(0) / 1000,
                            by_whom(&f.owners)
                        )
                    })
                    .collect(),
            }),
        );
    }
    // What limited the busy connections; a transfer held by its receiver's window is one
    // more sign of the slow reader above: one finding, its summary saying each thing once.
    for f in limits::findings(&sum.transfers) {
        match out.iter_mut().find(|g| g.pathology == f.pathology) {
            Some(g) => {
                let extra: Vec<&str> = f
                    .summary
                    .split("; ")
                    .filter(|part| !g.summary.contains(part))
                    .collect();
                let mut joined = g.clone().with_impact(g.impact.merge(&f.impact));
                joined.summary = format!("{}; {}", g.summary, extra.join("; "));
                joined.evidence.extend(f.evidence);
                *g = joined;
            }
            None => out.push(f),
        }
    }
    out
}

/// The slow-reader finding of the flagged sockets: how long the worst one is proven stalled
/// (one census: data unread since it arrived, or a writer probing a closed window; two
/// censuses: a zero window or unread data that persisted), the process not reading and the
/// writer waiting on it.
fn slow_reader_finding(sum: &Summary) -> Finding {
    let flagged: Vec<&FlaggedSocket> = sum.slow_readers.iter().collect();
    let n = flagged.len() as u64;
    let unread = flagged
        .iter()
        .filter(|f| {
            matches!(
                f.sign,
                SlowSign::ReceiveQueueGrowing | SlowSign::DataLeftUnread
            )
        })
        .count() as u64;
    let backlogged = flagged
        .iter()
        .filter(|f| f.sign == SlowSign::PersistentBacklog)
        .count() as u64;
    let zero = n - unread - backlogged;
    let queued: u64 = flagged.iter().map(|f| u64::from(f.recv_q_bytes)).sum();
    let stall = worst_stall(&flagged);
    let persisted = match (stall, sum.interval_ms) {
        (Some(s), _) => format!("; stalled for at least {}", units::ms_or_s_coarse(s)),
        (None, Some(_)) => "; not yet seen persisting across censuses".to_string(),
        (None, None) => "; one census: how long it lasts is unknown".to_string(),
    };
    let growing = if sum.interval_ms.is_some() {
        let mut t = format!(", {unread} with data left unread over the census interval");
        if backlogged > 0 {
            t.push_str(&format!(
                ", {backlogged} with a quarter or more of the receive buffer queued at both censuses"
            ));
        }
        t
    } else {
        String::new()
    };
    let mut f = Finding::new(
            Pathology::SlowReader,
            Source::Sockets,
            format!(
                "{n} socket(s) stalled by a slow reader ({zero} at a zero window{growing}, {queued} bytes unread){persisted}"
            ),
            Impact::stalls(n, Some(sum.data_sockets.max(n)), stall),
        )
        .with_evidence(Evidence::Sockets {
            state: TcpState::Established.name().to_string(),
            count: n,
            local: None,
            remote: None,
            detail: Some(format!("{zero} with a zero window, {queued} bytes in Recv-Q")),
        })
        .with_evidence(Evidence::Examples {
            what: "sockets (sign local -> remote Recv-Q/Send-Q)".into(),
            items: flagged
                .iter()
                .take(EXAMPLES)
                .map(|f| {
                    format!(
                        "{:?} {} -> {} {}/{}{}{}",
                        f.sign,
                        f.local,
                        f.remote,
                        f.recv_q_bytes,
                        f.send_q_bytes,
                        f.stalled_at_least_us.map_or(String::new(), |us| format!(
                            " stalled {} or more",
                            units::ms_or_s_coarse(Duration::from_micros(us))
                        )),
                        by_whom(&f.owners)
                    )
                })
                .collect(),
        });
    // The process that is not reading: the owner of a socket with data waiting in it.
    let readers: Vec<&Owner> = flagged
        .iter()
        .filter(|f| f.recv_q_bytes > 0)
        .flat_map(|f| f.owners.iter())
        .collect();
    if let Some(o) = readers.first() {
        f.summary
            .push_str(&format!("; not reading: {} pid {}", o.comm, o.pid));
    }
    // The process waiting to write: the victim, named apart from the culprit.
    let writers: Vec<&Owner> = flagged
        .iter()
        .filter(|f| f.sign == SlowSign::PeerZeroWindow)
        .flat_map(|f| f.owners.iter())
        .collect();
    if let Some(o) = writers.first() {
        f.summary
            .push_str(&format!("; writer waiting: {} pid {}", o.comm, o.pid));
    }
    f
}

/// A full listener's finding: the overflow, the connections it never accepted, and the
/// connects of this namespace whose SYNs it dropped, folded in as its consequence
/// ([`merge::fold`]): their waits are its cost.
fn overflow_finding(sum: &Summary, l: &Listener) -> Finding {
    let (q, b) = (l.accept_queue.unwrap_or(0), l.backlog.unwrap_or(0));
    let u = &l.unaccepted;
    let waited = u.waited_at_least_us.map(Duration::from_micros);
    let queued = if u.connections > 0 {
        format!(
            " ({} never accepted: {} bytes of requests unread, {} closed by the client{})",
            u.connections,
            u.unread_bytes,
            u.closed_by_client,
            waited.map_or(String::new(), |w| format!(
                ", the oldest waiting {} or more",
                units::ms_or_s_coarse(w)
            ))
        )
    } else {
        String::new()
    };
    let mut f = Finding::new(
        Pathology::AcceptQueueOverflow,
        Source::Sockets,
        format!(
            "listener {}{} has a full accept queue: {q} waiting{queued}, backlog {b}; each SYN it drops waits {} for its retransmission",
            l.local,
            by_whom(&l.owners),
            units::ms_or_s_coarse(SYN_INITIAL_RTO)
        ),
        // tcp_conn_request (net/ipv4/tcp_input.c) drops a SYN while sk_acceptq_is_full; the
        // client resends it after TCP_TIMEOUT_INIT. A connection waiting in the queue waits
        // for its reply as long.
        Impact::stalls(
            1 + u.connections,
            None,
            Some(waited.map_or(SYN_INITIAL_RTO, |w| w.max(SYN_INITIAL_RTO))),
        ),
    )
    .with_evidence(Evidence::Sockets {
        state: TcpState::Listen.name().to_string(),
        count: 1,
        local: Some(l.local.to_string()),
        remote: None,
        detail: Some(format!(
            "Recv-Q {q} > Send-Q (backlog) {b}: sk_acceptq_is_full"
        )),
    });
    if u.connections > 0 {
        f.evidence.push(Evidence::Sockets {
            state: "ESTABLISHED or CLOSE_WAIT, no file".into(),
            count: u.connections,
            local: Some(l.local.to_string()),
            remote: None,
            detail: Some(format!(
                "in the accept queue, never accepted (inode 0): {} bytes in Recv-Q, {} closed by the client{}",
                u.unread_bytes,
                u.closed_by_client,
                waited.map_or(String::new(), |w| format!(", waiting {} or more", units::ms_or_s_coarse(w)))
            )),
        });
    }
    if !l.owners.is_empty() {
        f.evidence.push(Evidence::Examples {
            what: "processes holding the listener (they are not calling accept() fast enough)"
                .into(),
            items: l
                .owners
                .iter()
                .map(|o| format!("{} pid {} fd {}", o.comm, o.pid, o.fd))
                .collect(),
        });
    }
    let dropped: Vec<&FlaggedSocket> = sum
        .retransmitting
        .iter()
        .filter(|s| s.sign == SlowSign::SynRetransmit && accepts_for(l, s.remote))
        .collect();
    if !dropped.is_empty() {
        let between = match (l.syn_resends_between_censuses, sum.interval_ms) {
            (Some(n), Some(ms)) => format!(
                "; {n} SYN resend(s) toward it in the {} between the two censuses",
                units::ms_or_s_coarse(Duration::from_millis(ms))
            ),
            _ => String::new(),
        };
        let c =
            syn_finding(sum, &dropped, " toward it").consequence_of(Pathology::AcceptQueueOverflow);
        let mut c = c;
        c.summary.push_str(&between);
        merge::fold(&mut f, c);
    }
    f
}

/// Connects in SYN_SENT that resent their SYN (`toward`: how the summary names their
/// destination).
fn syn_finding(sum: &Summary, syn: &[&FlaggedSocket], toward: &str) -> Finding {
    let n = syn.len() as u64;
    let most = syn.iter().filter_map(|f| f.retransmits).max().unwrap_or(0);
    let stall = worst_stall(syn);
    let connecting = sum.by_state.get(&TcpState::SynSent).copied().unwrap_or(n);
    Finding::new(
        Pathology::SynRetransmit,
        Source::Sockets,
        format!(
            "{n} connect(s) in SYN_SENT{toward} have retransmitted their SYN (up to {most} times: waiting {} or more)",
            stall.map_or("?".to_string(), units::ms_or_s_coarse)
        ),
        Impact::stalls(n, Some(connecting.max(n)), stall),
    )
    .with_evidence(Evidence::Sockets {
        state: TcpState::SynSent.name().to_string(),
        count: n,
        local: None,
        remote: None,
        detail: Some("SYN unanswered; the SYN ladder is running".into()),
    })
    .with_evidence(Evidence::Examples {
        what: "connects (local -> remote)".into(),
        items: syn
            .iter()
            .take(EXAMPLES)
            .map(|f| format!("{} -> {}{}", f.local, f.remote, by_whom(&f.owners)))
            .collect(),
    })
}

#[cfg(test)]
mod one_cause;

#[cfg(test)]
mod tests;
