//! Live attribution: decoded kernel events in, one [`Line`] per event that names its cause
//! out, and at the end [`Finding`]s of the shared model. Pure: no clock (time comes from the
//! events), no I/O except through the [`Lookup`] the caller passes (sockets, processes,
//! sysctls of the traced namespaces), so it is tested with synthetic event streams.
//!
//! The causes it tells apart, and from what:
//! - a SYN answered by an ACK of an older connection (the connecting socket resets it): a
//!   *stale-ACK race* when this end had closed the previous connection on the 4-tuple with a
//!   reset (the peer may not have processed it yet), a *TIME_WAIT collision* when the peer had
//!   closed first (it holds the 4-tuple in TIME_WAIT) or a traced peer's TIME_WAIT socket
//!   refused the SYN; the SYN resends that follow carry the same cause.
//! - a SYN resent with no such answer: dropped where the trace saw it (the kernel's drop
//!   reason, e.g. a firewall), refused by a full accept queue (the traced listener's queue
//!   is full when the resend is seen), or lost (no answer), with its rung on this
//!   namespace's SYN ladder.
//! - connect() failing before its SYN (no free local port: EADDRNOTAVAIL), per process and
//!   destination, with TIME_WAIT toward it and the port range.
//! - data retransmissions by what sent them (timer, tail-loss probe, fast retransmit), and
//!   timeouts of several flows into one receiver within the incast window.
//! - zero windows (sender's view) and zero-window probes reaching a socket that does not
//!   read (its process named through its file descriptor).
//! - every TCP drop with the kernel's reason name, per reason and per flow; queue drops
//!   (qdisc, backlog, memory) with their interface.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet, VecDeque};
use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use tcpdoctor_model::{units, Evidence, Finding, Impact, Pathology, PortRange, Source, SynLadder};

use crate::btf::Reasons;
use crate::raw::{
    Detail, Event, PreviousClose, Process, RetransmitClass, TcpState, OWNER_STALE_ACK,
};

/// Timeouts of this many distinct flows into one receiver within [`Config::incast_window`]
/// are incast. Same defaults as the capture analyzer (20 ms, 3 flows): a window well under
/// the 200 ms RTO floor, so only synchronized timeouts fall in one.
#[derive(Clone, Debug)]
pub struct Config {
    pub incast_window: Duration,
    pub incast_min_flows: usize,
    /// Only events matching this are attributed (the others are counted as filtered out).
    pub filter: EventFilter,
}

impl Default for Config {
    fn default() -> Config {
        Config {
            incast_window: Duration::from_millis(20),
            incast_min_flows: 3,
            filter: EventFilter::default(),
        }
    }
}

/// Which events to attribute: by process (id or command name) and by port (either end).
/// An event whose process is unknown (a packet drop, a timer) matches a process filter only
/// through its port.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct EventFilter {
    pub pid: Option<u32>,
    pub comm: Option<String>,
    pub port: Option<u16>,
}

impl EventFilter {
    pub fn matches(&self, ev: &Event) -> bool {
        let pid_ok = self
            .pid
            .is_none_or(|pid| ev.process.as_ref().is_some_and(|p| p.pid == pid));
        let comm_ok = self
            .comm
            .as_ref()
            .is_none_or(|c| ev.process.as_ref().is_some_and(|p| &p.comm == c));
        let port_ok = self
            .port
            .is_none_or(|port| ev.local.port() == port || ev.remote.port() == port);
        pid_ok && comm_ok && port_ok
    }
}

/// A listening socket as the caller found it (sock_diag in the traced namespace).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Listener {
    pub local: SocketAddr,
    /// Connections waiting in its accept queue.
    pub queued: u32,
    /// Its listen() backlog (capped by net.core.somaxconn).
    pub backlog: u32,
    pub process: Option<Process>,
    /// The namespace it listens in (inode). Not in reports; a recording keeps it beside the
    /// listener ([`crate::recording`]).
    #[serde(skip)]
    pub netns: u32,
}

impl Listener {
    /// Full as the kernel decides it (`sk_acceptq_is_full`: more queued than the backlog).
    pub fn full(&self) -> bool {
        self.queued > self.backlog
    }
}

/// Ports toward one destination.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PortBudget {
    /// Sockets holding a local port toward the destination (any state but LISTEN).
    pub in_use: u64,
    /// Of those, in TIME_WAIT.
    pub time_wait: u64,
    /// `net.ipv4.ip_local_port_range`.
    pub range: PortRange,
}

/// What the engine may ask about the live system. Every answer is optional: a lookup that
/// cannot tell answers `None` (the default of each method), and the engine then says what it
/// could not establish instead of guessing.
pub trait Lookup {
    /// The process holding socket inode `ino` open.
    fn process_of(&mut self, _ino: u32) -> Option<Process> {
        None
    }
    /// A traced listener accepting connections for `dest`.
    fn listener(&mut self, _dest: SocketAddr) -> Option<Listener> {
        None
    }
    /// The SYN ladder of namespace `netns`.
    fn syn_ladder(&mut self, _netns: u32) -> Option<SynLadder> {
        None
    }
    /// TIME_WAIT toward `dest` and the port range, in namespace `netns`.
    fn port_budget(&mut self, _netns: u32, _dest: SocketAddr) -> Option<PortBudget> {
        None
    }
    /// A name for namespace `netns` (as `ip netns` names it).
    fn netns_name(&self, _netns: u32) -> Option<String> {
        None
    }
    /// How much `TcpExtListenOverflows` of namespace `netns` rose since tracing started
    /// (from a reading that may be a little old).
    fn listen_overflows(&mut self, _netns: u32) -> Option<u64> {
        None
    }
    /// [`listen_overflows`](Lookup::listen_overflows), read now.
    fn listen_overflows_now(&mut self, netns: u32) -> Option<u64> {
        self.listen_overflows(netns)
    }
    /// The state of the socket of namespace `netns` holding the 4-tuple `local` -> `remote`
    /// (`local`'s address unspecified: any address with that port).
    fn tuple_holder(
        &mut self,
        _netns: u32,
        _local: SocketAddr,
        _remote: SocketAddr,
    ) -> Option<TcpState> {
        None
    }
    /// `net.ipv4.tcp_timestamps` of namespace `netns` is on (non-zero).
    fn tcp_timestamps(&mut self, _netns: u32) -> Option<bool> {
        None
    }
}

/// A lookup that knows nothing (tests, or when nothing may be asked).
pub struct NoLookup;

impl Lookup for NoLookup {}

/// The cause an event is attributed to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Cause {
    /// A connecting socket got an ACK of an older connection on its 4-tuple, which this end
    /// had closed with a reset.
    StaleAckRace,
    /// The same, the peer holding the older connection in TIME_WAIT.
    TimeWaitCollision,
    /// An ACK of an older connection whose end this trace did not see.
    OldAck,
    /// A SYN resent after it was dropped where the trace saw the drop.
    SynDropped,
    /// A SYN resent while the destination's listener had a full accept queue.
    AcceptQueueFull,
    /// A SYN resent with no answer seen.
    SynLost,
    /// A SYN-ACK resent by a listener (its handshake's final ACK did not come).
    SynAckResend,
    /// connect() found no free local port toward the destination (EADDRNOTAVAIL).
    NoLocalPort,
    /// A connect gave up: all SYNs unanswered, or reset.
    ConnectFailed,
    /// The peer refused the connection (reset in answer to the SYN).
    Refused,
    /// A connect that needed SYN resends completed.
    SlowConnect,
    /// Data resent by the retransmission timer.
    Timeout,
    /// Data resent by a tail-loss probe.
    TailLossProbe,
    /// Data resent by fast retransmit (duplicate ACKs / SACK).
    FastRetransmit,
    /// The rest of a window resent after a timeout.
    AfterTimeout,
    /// Another retransmission.
    Retransmission,
    /// The peer advertised a zero window: it is not reading.
    ZeroWindow,
    /// A zero-window probe reached this socket: its process is not reading.
    NotReading,
    /// The kernel dropped a TCP packet (reason named).
    Drop,
    /// A traced TIME_WAIT socket refused a SYN (the server's view of a collision).
    TimeWaitRefusedSyn,
    /// A traced socket orphaned in FIN_WAIT2 (a timewait mini-socket whose substate is
    /// FIN_WAIT2) answered a SYN with an ACK of its old connection: the server's view of a
    /// stale-ACK race.
    FinWait2RefusedSyn,
    /// connect() from a port bound before it failed with EADDRNOTAVAIL: this host holds
    /// that 4-tuple (its own TIME_WAIT: a `time_wait_collision` refused locally; else a
    /// `connect_failure`). Not port exhaustion: [`connect`] gives the decision.
    TupleInUse,
}

impl Cause {
    /// Every cause, in declaration order (exporters give each a series from the start).
    pub const ALL: [Cause; 22] = [
        Cause::StaleAckRace,
        Cause::TimeWaitCollision,
        Cause::OldAck,
        Cause::SynDropped,
        Cause::AcceptQueueFull,
        Cause::SynLost,
        Cause::SynAckResend,
        Cause::NoLocalPort,
        Cause::ConnectFailed,
        Cause::Refused,
        Cause::SlowConnect,
        Cause::Timeout,
        Cause::TailLossProbe,
        Cause::FastRetransmit,
        Cause::AfterTimeout,
        Cause::Retransmission,
        Cause::ZeroWindow,
        Cause::NotReading,
        Cause::Drop,
        Cause::TimeWaitRefusedSyn,
        Cause::FinWait2RefusedSyn,
        Cause::TupleInUse,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Cause::StaleAckRace => "stale_ack_race",
            Cause::TimeWaitCollision => "time_wait_collision",
            Cause::OldAck => "old_ack",
            Cause::SynDropped => "syn_dropped",
            Cause::AcceptQueueFull => "accept_queue_full",
            Cause::SynLost => "syn_lost",
            Cause::SynAckResend => "synack_resend",
            Cause::NoLocalPort => "no_local_port",
            Cause::ConnectFailed => "connect_failed",
            Cause::Refused => "refused",
            Cause::SlowConnect => "slow_connect",
            Cause::Timeout => "timeout",
            Cause::TailLossProbe => "tail_loss_probe",
            Cause::FastRetransmit => "fast_retransmit",
            Cause::AfterTimeout => "after_timeout",
            Cause::Retransmission => "retransmission",
            Cause::ZeroWindow => "zero_window",
            Cause::NotReading => "not_reading",
            Cause::Drop => "drop",
            Cause::TimeWaitRefusedSyn => "time_wait_refused_syn",
            Cause::FinWait2RefusedSyn => "fin_wait2_refused_syn",
            Cause::TupleInUse => "tuple_in_use",
        }
    }
}

/// One attributed event, as printed.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Line {
    /// Since the trace started, microseconds.
    pub t_us: u64,
    pub netns: u32,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub netns_name: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub process: Option<Process>,
    /// This host's end (for drops: the packet's source).
    pub local: SocketAddr,
    /// The other end (for drops: the packet's destination).
    pub remote: SocketAddr,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub state: Option<TcpState>,
    pub cause: Cause,
    /// The pathology the cause belongs to, when it is one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pathology: Option<Pathology>,
    /// The kernel's evidence, in words.
    pub evidence: String,
    /// For drops: the kernel's reason name.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub drop_reason: Option<String>,
}

/// Per connecting socket: what happened to its handshake so far.
#[derive(Clone, Debug, Default)]
struct Handshake {
    cause: Option<Cause>,
    resends: u32,
    last_ts_ns: u64,
}

/// A SYN the trace saw dropped.
#[derive(Clone, Debug)]
struct SynDrop {
    reason: String,
    ifname: Option<String>,
}

/// A namespace's accept-queue refusals as far as the trace can account for them. The
/// kernel counts one TcpExtListenOverflows per refusal. A refused handshake ACK is freed with
/// the drop reason TCP_LISTEN_OVERFLOW (traced); a refused SYN (tcp_conn_request) is freed
/// with consume_skb, not kfree_skb, so no drop record exists for it: the counter's rise not
/// traced as ACKs is the SYNs refused unseen, and each such SYN is resent at most once.
#[derive(Clone, Copy, Debug, Default)]
struct ListenOverflow {
    acks_traced: u64,
    syn_resends_attributed: u64,
}

/// What one pathology cost so far.
#[derive(Clone, Debug, Default)]
struct Tally {
    events: u64,
    /// SYNs resent (of `events`).
    resends: u64,
    flows: BTreeSet<(SocketAddr, SocketAddr)>,
    failed: u64,
    worst_us: u64,
    processes: BTreeMap<String, u64>,
    details: BTreeMap<String, u64>,
}

impl Tally {
    fn add(&mut self, line: &Line) {
        self.events += 1;
        if self.flows.len() < 100_000 {
            self.flows.insert((line.local, line.remote));
        }
        if let Some(p) = &line.process {
            *self
                .processes
                .entry(format!("{} (pid {})", p.comm, p.pid))
                .or_default() += 1;
        }
    }

    fn detail(&mut self, what: String) {
        if self.details.len() < 64 || self.details.contains_key(&what) {
            *self.details.entry(what).or_default() += 1;
        }
    }
}

/// Retransmissions of data or a FIN, by the timer or not.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct Resent {
    pub timeouts: u64,
    pub other: u64,
}

/// Counts per cause, reason and flow: the body of the rolling and final summaries.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Summary {
    /// Attributed events per cause.
    pub causes: BTreeMap<Cause, u64>,
    /// TCP drops per kernel reason name (from the records; the exact per-reason counts
    /// from the kernel side are in the session's report).
    pub drop_reasons: BTreeMap<String, u64>,
    /// Drops per flow and reason, most first (top 20).
    pub drop_flows: Vec<DropFlow>,
    /// connect() EADDRNOTAVAIL per process and destination.
    pub no_local_port: Vec<PortFailure>,
    /// connect() EADDRNOTAVAIL from a port bound before it, whose 4-tuple this host held
    /// (not port exhaustion: [`connect`]).
    pub local_tuple_refusals: Vec<TupleRefusal>,
    /// Incast episodes: several flows' timeouts into one receiver within the window.
    pub incast_episodes: Vec<IncastEpisode>,
    /// SYNs and SYN-ACKs resent, per pathology their resend was attributed to (the events
    /// `TcpExtTCPSynRetrans` counts; `syn_retransmit` holds the unexplained ones: lost,
    /// dropped, and SYN-ACK resends).
    pub syn_resends: BTreeMap<Pathology, u64>,
    /// Data and FINs resent that the trace put down to another pathology as its consequence
    /// (a connection a full accept queue never took; a tail-loss probe repeating what the
    /// receiver had, [`repeated_probes`]), per that pathology: the events of
    /// `TcpRetransSegs` (and, for timeouts, `TcpExtTCPTimeouts`) that are not a loss.
    pub consequence_resends: BTreeMap<Pathology, Resent>,
    /// Records that could not be decoded.
    pub undecoded: u64,
    /// Events left out by the process/port filter.
    pub filtered_out: u64,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct DropFlow {
    pub src: SocketAddr,
    pub dst: SocketAddr,
    pub reason: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ifname: Option<String>,
    pub count: u64,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PortFailure {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub process: Option<Process>,
    pub destination: SocketAddr,
    pub failures: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub budget: Option<PortBudget>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct IncastEpisode {
    pub receiver: IpAddr,
    /// When the first timeout of the episode happened, since the trace started.
    pub start_us: u64,
    pub flows: u64,
    /// Longest wait of a flow before its timeout, microseconds.
    pub worst_wait_us: u64,
}

/// A timeout seen: when, on which flow, after how long a wait (us).
type Rto = (u64, (SocketAddr, SocketAddr), u64);

/// EADDRNOTAVAIL toward one destination by one process: (process, failures, netns, the
/// ports toward it when the first connect failed).
type PortFailures = (Option<Process>, u64, u32, Option<PortBudget>);

/// The attribution engine.
pub struct Engine {
    cfg: Config,
    start_ns: u64,
    reasons: Reasons,
    handshakes: HashMap<u64, Handshake>,
    syn_drops: HashMap<(SocketAddr, SocketAddr), SynDrop>,
    /// Per namespace: handshake ACKs a full accept queue refused, traced
    /// (TCP_LISTEN_OVERFLOW drops), and SYN resends attributed to SYNs it refused unseen.
    listen_overflow: HashMap<u32, ListenOverflow>,
    /// Handshake ACKs a full accept queue refused, by (client, listener): the SYN-ACK
    /// resend that follows is the queue's doing. Bounded; taken by the resend.
    listen_acks_refused: HashSet<(SocketAddr, SocketAddr)>,
    /// Listeners seen refusing connections for a full accept queue (a SYN resend put down to
    /// it, or a handshake ACK traced as TCP_LISTEN_OVERFLOW).
    overflowing: BTreeSet<SocketAddr>,
    /// Flows whose segments a listener's host dropped for want of a socket (NO_SOCKET), by
    /// (client, listener): with the listener overflowing, the connection was never taken.
    /// Bounded.
    no_socket: HashSet<(SocketAddr, SocketAddr)>,
    /// Data and FIN resends tallied as losses, per flow, until the end decides whether they
    /// were resent into a connection a full accept queue never took ([`never_taken`]).
    /// Bounded.
    unfolded: HashMap<(SocketAddr, SocketAddr), never_taken::Unfolded>,
    /// SYNs a traced timewait mini-socket refused, by the client's (local, remote): when,
    /// and the mini-socket's substate ([`old_ack`]).
    tw_refused: HashMap<(SocketAddr, SocketAddr), (u64, old_ack::Refusal)>,
    /// Namespaces where a TIME_WAIT collision was seen (their tcp_timestamps decide the
    /// remedies).
    timewait_netns: BTreeSet<u32>,
    rtos: HashMap<IpAddr, VecDeque<Rto>>,
    tallies: BTreeMap<Pathology, Tally>,
    summary: Summary,
    drop_flows: HashMap<(SocketAddr, SocketAddr, String, Option<String>), u64>,
    port_failures: BTreeMap<(SocketAddr, Option<u32>), PortFailures>,
    /// Closed receive windows over time: the stall they prove, the readers and writers.
    windows: windows::Windows,
    /// connect() refused for a bound port's 4-tuple, by (bound source, destination, pid).
    tuple_refusals: BTreeMap<(SocketAddr, SocketAddr, Option<u32>), TupleRefusal>,
    /// Connects that failed after their SYN with an error, as records reported them.
    connect_failed_records: u64,
}

fn flow_text(a: SocketAddr, b: SocketAddr) -> String {
    format!("{a} -> {b}")
}

impl Engine {
    /// `start_ns`: CLOCK_MONOTONIC when tracing started (the events' clock).
    pub fn new(cfg: Config, start_ns: u64, reasons: Reasons) -> Engine {
        Engine {
            cfg,
            start_ns,
            reasons,
            handshakes: HashMap::new(),
            syn_drops: HashMap::new(),
            listen_overflow: HashMap::new(),
            listen_acks_refused: HashSet::new(),
            overflowing: BTreeSet::new(),
            no_socket: HashSet::new(),
            unfolded: HashMap::new(),
            tw_refused: HashMap::new(),
            timewait_netns: BTreeSet::new(),
            rtos: HashMap::new(),
            tallies: BTreeMap::new(),
            summary: Summary::default(),
            drop_flows: HashMap::new(),
            port_failures: BTreeMap::new(),
            windows: windows::Windows::default(),
            tuple_refusals: BTreeMap::new(),
            connect_failed_records: 0,
        }
    }

    /// Counts a record that could not be decoded.
    pub fn undecoded(&mut self) {
        self.summary.undecoded += 1;
    }

    /// The kernel's drop and reset reason names.
    pub fn reasons(&self) -> &Reasons {
        &self.reasons
    }

    fn line(
        &self,
        ev: &Event,
        cause: Cause,
        pathology: Option<Pathology>,
        evidence: String,
        lookup: &dyn Lookup,
    ) -> Line {
        Line {
            t_us: ev.ts_ns.saturating_sub(self.start_ns) / 1000,
            netns: ev.netns,
            netns_name: lookup.netns_name(ev.netns),
            process: ev.process.clone(),
            local: ev.local,
            remote: ev.remote,
            state: ev.state,
            cause,
            pathology,
            evidence,
            drop_reason: None,
        }
    }

    fn tally(&mut self, p: Pathology, line: &Line) -> &mut Tally {
        let t = self.tallies.entry(p).or_default();
        t.add(line);
        t
    }

    /// A slow reader's event seen on the writer's socket: counted, its process named as the
    /// one waiting, never among the processes the finding blames.
    fn writer_tally(&mut self, line: &Line) {
        let who = line
            .process
            .as_ref()
            .map(|p| format!("{} (pid {})", p.comm, p.pid))
            .unwrap_or_else(|| "its process".into());
        let mut anonymous = line.clone();
        anonymous.process = None;
        let t = self.tally(Pathology::SlowReader, &anonymous);
        t.detail(format!(
            "writer waiting: {who} on {}",
            flow_text(line.local, line.remote)
        ));
    }

    fn pathology_of(cause: Cause) -> Option<Pathology> {
        Some(match cause {
            Cause::StaleAckRace | Cause::OldAck | Cause::FinWait2RefusedSyn => {
                Pathology::StaleAckRace
            }
            Cause::TimeWaitCollision | Cause::TimeWaitRefusedSyn => Pathology::TimeWaitCollision,
            Cause::AcceptQueueFull => Pathology::AcceptQueueOverflow,
            Cause::SynDropped | Cause::SynLost | Cause::SynAckResend => Pathology::SynRetransmit,
            Cause::NoLocalPort => Pathology::PortExhaustion,
            Cause::ConnectFailed | Cause::Refused => Pathology::ConnectFailure,
            Cause::Timeout | Cause::AfterTimeout => Pathology::RetransmitTimeout,
            Cause::TailLossProbe | Cause::FastRetransmit | Cause::Retransmission => {
                Pathology::Retransmission
            }
            Cause::ZeroWindow | Cause::NotReading => Pathology::SlowReader,
            // Its pathology depends on the 4-tuple's holder ([`connect`]).
            Cause::SlowConnect | Cause::Drop | Cause::TupleInUse => return None,
        })
    }

    /// Attributes one event. Returns the line to print, or `None` for an event that is only
    /// counted (a reset closing a connection, a reset received while established).
    pub fn push(&mut self, ev: Event, lookup: &mut dyn Lookup) -> Option<Line> {
        let ev = self.admit(ev, lookup)?;
        let line = match ev.detail.clone() {
            Detail::Retransmit {
                class,
                attempt,
                waited_us,
                peer_silent,
                unsent_errno,
            } => self.retransmit(
                &ev,
                class,
                attempt,
                waited_us,
                peer_silent,
                unsent_errno,
                lookup,
            ),
            Detail::SynAckRetransmit { attempt } => {
                Some(self.syn_ack_retransmit(&ev, attempt, lookup))
            }
            Detail::ResetSent {
                reason,
                previous,
                previous_age_ms,
                ..
            } => self.reset_sent(&ev, reason, previous, previous_age_ms, lookup),
            Detail::ResetReceived => self.reset_received(&ev, lookup),
            Detail::Connected { flags, connect_us } => {
                Some(self.connected(&ev, flags, connect_us, lookup))
            }
            Detail::ConnectFailed {
                after_us, errno, ..
            } => Some(self.connect_failed(&ev, after_us, errno, lookup)),
            Detail::ConnectError { errno } => Some(self.no_port(&ev, errno, lookup)),
            Detail::Drop {
                reason,
                ifindex: _,
                ifname,
                tcp_flags,
                timewait,
            } => Some(self.drop(&ev, reason, ifname, tcp_flags, timewait, lookup)),
            Detail::ZeroWindow => Some(self.zero_window(&ev, lookup)),
            Detail::WindowProbe => Some(self.window_probe(&ev, lookup)),
            Detail::TimeWaitAck { reason, substate } => {
                Some(self.time_wait_ack(&ev, reason, substate, lookup))
            }
            // A connection's close is no cause: [`Engine::push_connection`] reports it.
            Detail::Closed { .. } => None,
        };
        if let Some(l) = &line {
            *self.summary.causes.entry(l.cause).or_default() += 1;
        }
        line
    }

    /// A SYN-ACK resent: the handshake's final ACK refused by a full accept queue (when the
    /// trace saw it refused), else lost or not fitting; tallied and counted as a SYN resend.
    fn syn_ack_retransmit(&mut self, ev: &Event, attempt: u32, lookup: &mut dyn Lookup) -> Line {
        // The handshake's ACK, refused by a full accept queue (tcp_check_req keeps
        // the request and its timer resends the SYN-ACK: tcp_abort_on_overflow=0).
        let refused = self.listen_acks_refused.remove(&(ev.remote, ev.local));
        let (cause, pathology, evidence) = if refused {
            (
                Cause::AcceptQueueFull,
                Pathology::AcceptQueueOverflow,
                format!("SYN-ACK resent (attempt {attempt}): the handshake's final ACK was refused by the listener's full accept queue (TCP_LISTEN_OVERFLOW)"),
            )
        } else {
            (
                Cause::SynAckResend,
                Pathology::SynRetransmit,
                format!("SYN-ACK resent (attempt {attempt}): the handshake's final ACK did not arrive or did not fit the accept queue"),
            )
        };
        let l = self.line(ev, cause, Some(pathology), evidence, lookup);
        self.tally(pathology, &l);
        // tcp_rtx_synack counts it in TcpExtTCPSynRetrans (net/ipv4/tcp_output.c).
        *self.summary.syn_resends.entry(pathology).or_default() += 1;
        l
    }

    /// A reset received: a line for a connect the peer refused; any other is only counted.
    fn reset_received(&mut self, ev: &Event, lookup: &mut dyn Lookup) -> Option<Line> {
        if ev.state == Some(TcpState::SynSent) {
            let l = self.line(
                ev,
                Cause::Refused,
                Some(Pathology::ConnectFailure),
                "the peer answered the SYN with a reset (nothing listening, or refused)".into(),
                lookup,
            );
            // Not tallied: the same connect ends with a ConnectFailed event
            // (ECONNREFUSED), which counts it once.
            Some(l)
        } else {
            None
        }
    }

    /// A connect that completed after SYN resends (or a stale ACK): its handshake's cause,
    /// and its connect time as that pathology's worst wait.
    fn connected(
        &mut self,
        ev: &Event,
        flags: u32,
        connect_us: u32,
        lookup: &mut dyn Lookup,
    ) -> Line {
        let hs = self.handshakes.remove(&ev.sk).unwrap_or_default();
        let cause = hs.cause.unwrap_or(if flags & OWNER_STALE_ACK != 0 {
            Cause::OldAck
        } else {
            Cause::SynLost
        });
        if let Some(p) = Self::pathology_of(cause) {
            let t = self.tallies.entry(p).or_default();
            t.worst_us = t.worst_us.max(u64::from(connect_us));
        }
        self.line(
            ev,
            Cause::SlowConnect,
            Self::pathology_of(cause),
            format!(
                "connected after {} ({} SYN resend(s), cause {})",
                units::micros_in_ms(u64::from(connect_us)),
                hs.resends,
                cause.name()
            ),
            lookup,
        )
    }

    /// A connecting socket closed before it was established: how (`errno`), after how long,
    /// and its handshake's cause; tallied as a failure unless the application closed it.
    fn connect_failed(
        &mut self,
        ev: &Event,
        after_us: u32,
        errno: u32,
        lookup: &mut dyn Lookup,
    ) -> Line {
        let hs = self.handshakes.remove(&ev.sk).unwrap_or_default();
        let cause = hs.cause.unwrap_or(Cause::ConnectFailed);
        let p = Self::pathology_of(cause).unwrap_or(Pathology::ConnectFailure);
        let how = match errno {
            0 => "the application closed the connecting socket",
            110 => "connect gave up (ETIMEDOUT)",
            111 => "connect refused (ECONNREFUSED)",
            _ => "connect failed",
        };
        let l = self.line(
            ev,
            Cause::ConnectFailed,
            Some(p),
            format!(
                "{how} after {} ({} SYN resend(s), cause {})",
                units::micros_in_ms(u64::from(after_us)),
                hs.resends,
                cause.name()
            ),
            lookup,
        );
        if errno != 0 {
            self.connect_failed_records += 1;
        }
        let t = self.tally(p, &l);
        if errno != 0 {
            t.failed += 1;
        }
        t.worst_us = t.worst_us.max(u64::from(after_us));
        l
    }

    /// The peer advertised a zero window: its reader is slow, this socket's writer waits.
    fn zero_window(&mut self, ev: &Event, lookup: &mut dyn Lookup) -> Line {
        let l = self.line(
            ev,
            Cause::ZeroWindow,
            Some(Pathology::SlowReader),
            "the peer advertised a zero window: its application is not reading, this socket's writer waits".into(),
            lookup,
        );
        self.windows.closed(ev);
        self.writer_tally(&l);
        l
    }

    /// A zero-window probe received with the receive window at 0: this socket's process is
    /// not reading it.
    fn window_probe(&mut self, ev: &Event, lookup: &mut dyn Lookup) -> Line {
        let who = ev
            .process
            .as_ref()
            .map(|p| format!("{} (pid {})", p.comm, p.pid))
            .unwrap_or_else(|| "its process".into());
        let l = self.line(ev, Cause::NotReading, Some(Pathology::SlowReader), format!("zero-window probe received with the receive window at 0: {who} is not reading this socket"), lookup);
        self.windows.probed(ev);
        let t = self.tally(Pathology::SlowReader, &l);
        t.detail(format!(
            "not reading: {who} on {}",
            flow_text(ev.local, ev.remote)
        ));
        l
    }

    /// The event with its process named (by its socket's file when the kernel did not name
    /// it), or `None` when the process/port filter leaves it out (counted).
    fn admit(&mut self, mut ev: Event, lookup: &mut dyn Lookup) -> Option<Event> {
        if ev.process.is_none() && ev.ino != 0 {
            ev.process = lookup.process_of(ev.ino);
        }
        if !self.cfg.filter.matches(&ev) {
            self.summary.filtered_out += 1;
            return None;
        }
        Some(ev)
    }

    /// The connection a close record reports (`trace --connections`), its process named
    /// and the filter applied as for every event; `None` for any other record.
    pub fn push_connection(
        &mut self,
        ev: Event,
        lookup: &mut dyn Lookup,
    ) -> Option<crate::connections::Connection> {
        if !matches!(ev.detail, Detail::Closed { .. }) {
            return None;
        }
        let ev = self.admit(ev, lookup)?;
        crate::connections::from_event(&ev, self.start_ns, lookup.netns_name(ev.netns))
    }
}

mod connect;
mod drops;
mod never_taken;
mod old_ack;
mod repeated_probes;
mod report;
mod retransmit;
mod windows;

use connect::at_least;
pub use connect::{KernelCounts, TupleRefusal};

#[cfg(test)]
mod tests;
