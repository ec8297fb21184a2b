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
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Listener {
    pub local: SocketAddr,
    /// Connections waiting in its accept queue.
    pub queued: u32,
    /// Its listen() backlog (capped by net.core.somaxconn).
    pub backlog: u32,
    pub process: Option<Process>,
    /// The namespace it listens in (inode).
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

/// Drop reasons that mean a queue or memory was full (include/net/dropreason-core.h): the
/// packet was lost for lack of room, not rejected as invalid or late.
const QUEUE_DROPS: &[&str] = &[
    "QDISC_DROP",
    "QDISC_OVERLIMIT",
    "QDISC_CONGESTED",
    "CPU_BACKLOG",
    "SOCKET_BACKLOG",
    "SOCKET_RCVBUFF",
    "PROTO_MEM",
    "FULL_RING",
    "TCP_OFO_DROP",
    "TCP_OFO_QUEUE_PRUNE",
    "TC_EGRESS",
    "TC_INGRESS",
    "TC_DROP",
];

fn flow_text(a: SocketAddr, b: SocketAddr) -> String {
    format!("{a} -> {b}")
}

/// What the evidence of a resend that sent nothing adds (the tracepoint's result).
fn unsent_text(errno: u16) -> String {
    match i32::from(errno) {
        libc::EBUSY => {
            "; nothing sent: EBUSY, the first copy was still in this host's qdisc or driver"
                .to_string()
        }
        e => {
            let what = std::io::Error::from_raw_os_error(e).to_string();
            let what = what.split(" (os error").next().unwrap_or_default();
            format!("; nothing sent: the kernel's result was -{e} ({what})")
        }
    }
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
                let l = self.line(&ev, cause, Some(pathology), evidence, lookup);
                self.tally(pathology, &l);
                // tcp_rtx_synack counts it in TcpExtTCPSynRetrans (net/ipv4/tcp_output.c).
                *self.summary.syn_resends.entry(pathology).or_default() += 1;
                Some(l)
            }
            Detail::ResetSent {
                reason,
                previous,
                previous_age_ms,
                ..
            } => self.reset_sent(&ev, reason, previous, previous_age_ms, lookup),
            Detail::ResetReceived => {
                if ev.state == Some(TcpState::SynSent) {
                    let l = self.line(
                        &ev,
                        Cause::Refused,
                        Some(Pathology::ConnectFailure),
                        "the peer answered the SYN with a reset (nothing listening, or refused)"
                            .into(),
                        lookup,
                    );
                    // Not tallied: the same connect ends with a ConnectFailed event
                    // (ECONNREFUSED), which counts it once.
                    Some(l)
                } else {
                    None
                }
            }
            Detail::Connected { flags, connect_us } => {
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
                Some(self.line(
                    &ev,
                    Cause::SlowConnect,
                    Self::pathology_of(cause),
                    format!(
                        "connected after {} ({} SYN resend(s), cause {})",
                        units::micros_in_ms(u64::from(connect_us)),
                        hs.resends,
                        cause.name()
                    ),
                    lookup,
                ))
            }
            Detail::ConnectFailed {
                after_us, errno, ..
            } => {
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
                    &ev,
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
                Some(l)
            }
            Detail::ConnectError { errno } => Some(self.no_port(&ev, errno, lookup)),
            Detail::Drop {
                reason,
                ifindex: _,
                ifname,
                tcp_flags,
                timewait,
            } => Some(self.drop(&ev, reason, ifname, tcp_flags, timewait, lookup)),
            Detail::ZeroWindow => {
                let l = self.line(
                    &ev,
                    Cause::ZeroWindow,
                    Some(Pathology::SlowReader),
                    "the peer advertised a zero window: its application is not reading, this socket's writer waits".into(),
                    lookup,
                );
                self.windows.closed(&ev);
                self.writer_tally(&l);
                Some(l)
            }
            Detail::WindowProbe => {
                let who = ev
                    .process
                    .as_ref()
                    .map(|p| format!("{} (pid {})", p.comm, p.pid))
                    .unwrap_or_else(|| "its process".into());
                let l = self.line(&ev, Cause::NotReading, Some(Pathology::SlowReader), format!("zero-window probe received with the receive window at 0: {who} is not reading this socket"), lookup);
                self.windows.probed(&ev);
                let t = self.tally(Pathology::SlowReader, &l);
                t.detail(format!(
                    "not reading: {who} on {}",
                    flow_text(ev.local, ev.remote)
                ));
                Some(l)
            }
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

    // The fields of one Detail::Retransmit, as the other handlers take theirs.
    #[allow(clippy::too_many_arguments)]
    fn retransmit(
        &mut self,
        ev: &Event,
        class: RetransmitClass,
        attempt: u32,
        waited_us: Option<u32>,
        peer_silent: bool,
        unsent_errno: Option<u16>,
        lookup: &mut dyn Lookup,
    ) -> Option<Line> {
        let unsent = unsent_errno.is_some();
        let line = match class {
            RetransmitClass::Syn if ev.state == Some(TcpState::SynSent) => {
                let ladder = lookup.syn_ladder(ev.netns);
                let rung = ladder
                    .as_ref()
                    .and_then(|l| l.retransmit_at(attempt))
                    .map(|d| {
                        format!(
                            ", rung {attempt} of this host's SYN ladder ({} s after the first SYN)",
                            d.as_secs_f64()
                        )
                    })
                    .unwrap_or_else(|| format!(", attempt {attempt}"));
                let known = self.handshakes.get(&ev.sk).and_then(|h| h.cause);
                let (cause, evidence) = match known {
                    Some(c @ (Cause::StaleAckRace | Cause::TimeWaitCollision | Cause::OldAck)) => {
                        let when = self
                            .handshakes
                            .get(&ev.sk)
                            .map(|h| {
                                units::micros_in_ms(ev.ts_ns.saturating_sub(h.last_ts_ns) / 1000)
                            })
                            .unwrap_or_default();
                        (
                            c,
                            format!(
                                "SYN resent {when} after the old ACK was reset (attempt {attempt})"
                            ),
                        )
                    }
                    _ => {
                        if let Some(found) = self.refused_by_timewait(ev, &rung) {
                            found
                        } else if let Some(d) = self.syn_drops.get(&(ev.local, ev.remote)) {
                            let at = d
                                .ifname
                                .as_ref()
                                .map(|i| format!(" on {i}"))
                                .unwrap_or_default();
                            (
                                Cause::SynDropped,
                                format!(
                                    "SYN resent: the previous one was dropped{at}, reason {}{rung}",
                                    d.reason
                                ),
                            )
                        } else if let Some((li, counted)) = self.refusing_listener(ev, lookup) {
                            let who = li
                                .process
                                .as_ref()
                                .map(|p| format!(", held by {} (pid {})", p.comm, p.pid))
                                .unwrap_or_default();
                            let evidence = match counted {
                                None => format!(
                                    "SYN resent: the listener {} accept queue full ({} queued, backlog {}){who}, so the kernel drops SYNs{rung}",
                                    li.local, li.queued, li.backlog
                                ),
                                Some((rise, acks)) => format!(
                                    "SYN resent: listener {} refused SYNs for a full accept queue (backlog {}){who}: TcpExtListenOverflows +{rise} in its namespace, {acks} of them handshake ACKs traced as TCP_LISTEN_OVERFLOW; a refused SYN leaves no drop record{rung}",
                                    li.local, li.backlog
                                ),
                            };
                            self.tallies
                                .entry(Pathology::AcceptQueueOverflow)
                                .or_default()
                                .detail(format!(
                                    "listener {} backlog {}{who}",
                                    li.local, li.backlog
                                ));
                            (Cause::AcceptQueueFull, evidence)
                        } else {
                            (
                                Cause::SynLost,
                                format!("SYN resent with no answer seen{rung}"),
                            )
                        }
                    }
                };
                let hs = self.handshakes.entry(ev.sk).or_default();
                hs.resends += 1;
                hs.last_ts_ns = ev.ts_ns;
                if !matches!(
                    hs.cause,
                    Some(Cause::StaleAckRace | Cause::TimeWaitCollision | Cause::OldAck)
                ) {
                    hs.cause = Some(cause);
                }
                let p = Self::pathology_of(cause);
                let l = self.line(ev, cause, p, evidence, lookup);
                if let Some(p) = p {
                    *self.summary.syn_resends.entry(p).or_default() += 1;
                    let t = self.tally(p, &l);
                    t.resends += 1;
                    // A stale-ACK resend comes within milliseconds, not on the ladder: its
                    // stall is the connect time reported when the handshake completes.
                    let on_ladder = !matches!(
                        cause,
                        Cause::StaleAckRace | Cause::TimeWaitCollision | Cause::OldAck
                    );
                    if let Some(d) = ladder
                        .as_ref()
                        .filter(|_| on_ladder)
                        .and_then(|lad| lad.retransmit_at(attempt))
                    {
                        t.worst_us = t.worst_us.max(d.as_micros() as u64);
                    }
                }
                Some(l)
            }
            RetransmitClass::Syn => {
                let l = self.line(
                    ev,
                    Cause::SynAckResend,
                    Some(Pathology::SynRetransmit),
                    format!("SYN-ACK resent (attempt {attempt})"),
                    lookup,
                );
                self.tally(Pathology::SynRetransmit, &l);
                *self
                    .summary
                    .syn_resends
                    .entry(Pathology::SynRetransmit)
                    .or_default() += 1;
                Some(l)
            }
            RetransmitClass::Timeout => {
                let waited = waited_us.map(u64::from);
                let mut text = waited
                    .map(|w| {
                        format!(
                            " after {} without an ACK of new data",
                            units::micros_in_ms(w)
                        )
                    })
                    .unwrap_or_default();
                if peer_silent {
                    text.push_str("; the peer has acknowledged none of this connection's data and sent none: it may never have taken the connection (a full accept queue drops the handshake's last ACK)");
                }
                let l = self.line(
                    ev,
                    Cause::Timeout,
                    Some(Pathology::RetransmitTimeout),
                    format!("retransmission timeout {attempt}{text}"),
                    lookup,
                );
                let t = self.tally(Pathology::RetransmitTimeout, &l);
                if let Some(w) = waited {
                    t.worst_us = t.worst_us.max(w);
                }
                // A peer that never took the connection is not a receiver whose buffer the
                // senders overflowed together (the capture analyzer leaves such flows out of
                // incast too); nor is a timeout whose first copy had not left this host.
                if !peer_silent && !unsent {
                    self.incast(ev, waited.unwrap_or(0));
                }
                Some(l)
            }
            RetransmitClass::TailLossProbe => {
                let l = self.line(
                    ev,
                    Cause::TailLossProbe,
                    Some(Pathology::Retransmission),
                    "tail-loss probe: the last segment resent to draw an ACK (RFC 8985)".into(),
                    lookup,
                );
                self.tally(Pathology::Retransmission, &l);
                Some(l)
            }
            RetransmitClass::Fast => {
                let l = self.line(
                    ev,
                    Cause::FastRetransmit,
                    Some(Pathology::Retransmission),
                    "fast retransmit: duplicate ACKs / SACK reported a hole".into(),
                    lookup,
                );
                self.tally(Pathology::Retransmission, &l);
                Some(l)
            }
            RetransmitClass::AfterTimeout => Some(self.line(
                ev,
                Cause::AfterTimeout,
                Some(Pathology::RetransmitTimeout),
                "resent after a timeout (loss recovery)".into(),
                lookup,
            )),
            RetransmitClass::ZeroWindow => {
                let l = self.line(ev, Cause::ZeroWindow, Some(Pathology::SlowReader), "the retransmission timer fired with the peer's window at zero: its application is not reading, this socket's writer waits".into(), lookup);
                self.windows.resent_into(ev);
                self.writer_tally(&l);
                Some(l)
            }
            RetransmitClass::Other => {
                let l = self.line(
                    ev,
                    Cause::Retransmission,
                    Some(Pathology::Retransmission),
                    "retransmission".into(),
                    lookup,
                );
                self.tally(Pathology::Retransmission, &l);
                Some(l)
            }
        };
        // A resend that sent nothing is still what happened (a timeout did fire, the kernel
        // counted it): attributed as any other, its line saying that nothing went out.
        line.map(|mut l| {
            if let Some(errno) = unsent_errno {
                l.evidence.push_str(&unsent_text(errno));
            }
            l
        })
    }

    fn incast(&mut self, ev: &Event, waited_us: u64) {
        let window = self.cfg.incast_window.as_nanos() as u64;
        let q = self.rtos.entry(ev.remote.ip()).or_default();
        q.push_back((ev.ts_ns, (ev.local, ev.remote), waited_us));
        while q
            .front()
            .is_some_and(|&(t, _, _)| ev.ts_ns.saturating_sub(t) > window)
        {
            q.pop_front();
        }
        let flows: BTreeSet<_> = q.iter().map(|&(_, f, _)| f).collect();
        if flows.len() < self.cfg.incast_min_flows {
            return;
        }
        let start_ns = q.front().map(|&(t, _, _)| t).unwrap_or(ev.ts_ns);
        let start_us = start_ns.saturating_sub(self.start_ns) / 1000;
        let worst = q.iter().map(|&(_, _, w)| w).max().unwrap_or(0);
        let receiver = ev.remote.ip();
        // One episode per burst: extend the last one if it started within the window.
        match self.summary.incast_episodes.last_mut() {
            Some(e)
                if e.receiver == receiver
                    && start_us.saturating_sub(e.start_us) * 1000 <= window =>
            {
                e.flows = e.flows.max(flows.len() as u64);
                e.worst_wait_us = e.worst_wait_us.max(worst);
            }
            _ => self.summary.incast_episodes.push(IncastEpisode {
                receiver,
                start_us,
                flows: flows.len() as u64,
                worst_wait_us: worst,
            }),
        }
        let t = self.tallies.entry(Pathology::Incast).or_default();
        for f in flows {
            t.flows.insert(f);
        }
        t.worst_us = t.worst_us.max(worst);
    }

    /// The listener of `ev.remote` (in a traced namespace) when it is refusing SYNs: its
    /// accept queue full now, or its namespace's TcpExtListenOverflows risen by more than
    /// the refused handshake ACKs traced and the SYN resends already put down to it (then
    /// with that rise and those ACKs). Either way the listener refused SYNs in the window;
    /// with the counter, which SYN it refused is inferred by count, not seen.
    fn refusing_listener(
        &mut self,
        ev: &Event,
        lookup: &mut dyn Lookup,
    ) -> Option<(Listener, Option<(u64, u64)>)> {
        let li = lookup.listener(ev.remote)?;
        if li.full() {
            return Some((li, None));
        }
        let mut rise = lookup.listen_overflows(li.netns)?;
        let o = self.listen_overflow.entry(li.netns).or_default();
        if rise.saturating_sub(o.acks_traced) <= o.syn_resends_attributed {
            // The refused handshake ACKs are counted as traced, the counter as last read:
            // ACKs refused since that reading would hide as many refused SYNs. Read it now.
            rise = lookup.listen_overflows_now(li.netns)?;
        }
        let unseen = rise.saturating_sub(o.acks_traced);
        if unseen <= o.syn_resends_attributed {
            return None;
        }
        o.syn_resends_attributed += 1;
        let acks = o.acks_traced;
        Some((li, Some((rise, acks))))
    }

    fn drop(
        &mut self,
        ev: &Event,
        reason: u32,
        ifname: Option<String>,
        tcp_flags: u8,
        timewait: Option<TcpState>,
        lookup: &mut dyn Lookup,
    ) -> Line {
        let name = self.reasons.drop.describe(reason);
        *self.summary.drop_reasons.entry(name.clone()).or_default() += 1;
        let key = (ev.local, ev.remote, name.clone(), ifname.clone());
        if self.drop_flows.len() < 10_000 || self.drop_flows.contains_key(&key) {
            *self.drop_flows.entry(key).or_default() += 1;
        }
        if name == "TCP_LISTEN_OVERFLOW" {
            self.listen_overflow
                .entry(ev.netns)
                .or_default()
                .acks_traced += 1;
            if self.listen_acks_refused.len() < 100_000 {
                self.listen_acks_refused.insert((ev.local, ev.remote));
            }
        }
        let syn = tcp_flags & 0x12 == 0x02;
        if syn {
            self.syn_drops.insert(
                (ev.local, ev.remote),
                SynDrop {
                    reason: name.clone(),
                    ifname: ifname.clone(),
                },
            );
        }
        let queue = QUEUE_DROPS.contains(&name.as_str());
        let pathology = if name == "TCP_ZEROWINDOW" {
            Some(Pathology::SlowReader)
        } else if queue {
            Some(Pathology::PacketDrop)
        } else {
            None
        };
        let at = ifname
            .as_ref()
            .map(|i| format!(" on {i}"))
            .unwrap_or_default();
        let what = if syn {
            "SYN"
        } else if tcp_flags & 0x04 != 0 {
            "RST"
        } else {
            "segment"
        };
        let socket = match timewait {
            Some(TcpState::FinWait2) if what == "RST" => {
                " (at an orphaned FIN_WAIT2 timewait mini-socket, which a reset in its window ends)"
            }
            Some(TcpState::FinWait2) => " (at an orphaned FIN_WAIT2 timewait mini-socket)",
            Some(_) => " (at a TIME_WAIT socket)",
            None => "",
        };
        let mut l = self.line(
            ev,
            Cause::Drop,
            pathology,
            format!("{what} dropped{at}: {name}{socket}"),
            lookup,
        );
        l.drop_reason = Some(name.clone());
        if let Some(p) = pathology {
            let t = self.tally(p, &l);
            t.detail(format!("{name}{at}"));
        }
        l
    }

    /// Counts so far (for the rolling summary and the report).
    pub fn summary(&self) -> Summary {
        let mut s = self.summary.clone();
        let mut flows: Vec<DropFlow> = self
            .drop_flows
            .iter()
            .map(|((src, dst, reason, ifname), &count)| DropFlow {
                src: *src,
                dst: *dst,
                reason: reason.clone(),
                ifname: ifname.clone(),
                count,
            })
            .collect();
        flows.sort_by(|a, b| b.count.cmp(&a.count).then(a.src.cmp(&b.src)));
        flows.truncate(20);
        s.drop_flows = flows;
        s.no_local_port = self
            .port_failures
            .iter()
            .map(|((dest, _), (process, n, _, budget))| PortFailure {
                process: process.clone(),
                destination: *dest,
                failures: *n,
                budget: budget.clone(),
            })
            .collect();
        s.local_tuple_refusals = self.tuple_refusals.values().cloned().collect();
        s
    }

    /// Findings of the shared model from everything attributed so far. `connects`: sockets
    /// that started a connect in the traced namespaces (the kernel-side counter), the
    /// denominator of connect-related shares. `budgets`: per (netns, destination) the port
    /// budget, asked of the caller once at the end.
    pub fn findings(&self, connects: u64, lookup: &mut dyn Lookup) -> Vec<Finding> {
        let kernel = KernelCounts {
            connects,
            ..KernelCounts::default()
        };
        self.findings_with(&kernel, lookup)
    }

    /// [`Engine::findings`] with the kernel's counts: with records lost, counts built from
    /// records are said to be lower bounds, and the kernel's exact counts are used where it
    /// has them ([`KernelCounts`]).
    pub fn findings_with(&self, kernel: &KernelCounts, lookup: &mut dyn Lookup) -> Vec<Finding> {
        let mut out = Vec::new();
        let connects = kernel.connects;
        let lost = kernel.lost > 0;
        let observed = (connects > 0).then_some(connects);
        for (&p, t) in &self.tallies {
            if t.events == 0 && t.flows.is_empty() {
                continue;
            }
            let worst = (t.worst_us > 0).then(|| Duration::from_micros(t.worst_us));
            let flows = t.flows.len() as u64;
            let (impact, summary) = match p {
                Pathology::StaleAckRace | Pathology::TimeWaitCollision => {
                    let what = if p == Pathology::StaleAckRace {
                        "SYN answered by a stale ACK of the previous connection on the same 4-tuple"
                    } else {
                        "SYN collided with the peer's TIME_WAIT socket of the previous connection"
                    };
                    let local = self.refused_locally_text(p, lost);
                    let mut parts = Vec::new();
                    if local.is_none() || t.resends > 0 || !t.flows.is_empty() {
                        parts.push(format!(
                            "{what}: {} SYN(s) resent ({flows} distinct 4-tuple(s) as seen by the traced ends)",
                            at_least(t.resends, lost)
                        ));
                    }
                    parts.extend(local);
                    (
                        Impact::stalls(flows, observed, worst).with_failed(t.failed),
                        parts.join("; "),
                    )
                }
                Pathology::SynRetransmit => (
                    Impact::stalls(flows, observed, worst).with_failed(t.failed),
                    format!(
                        "SYN resent with no answer or dropped: {flows} connection(s), {} resend(s)",
                        t.resends
                    ),
                ),
                Pathology::AcceptQueueOverflow => (
                    Impact::stalls(flows, observed, worst).with_failed(t.failed),
                    format!(
                        "SYNs dropped by a full accept queue: {flows} connection(s), {} resend(s)",
                        t.resends
                    ),
                ),
                Pathology::PortExhaustion => self.port_exhaustion(t, kernel),
                // Connects the application itself abandoned (closed while SYN-SENT, errno
                // 0) are not failures the kernel reported: no finding for them alone.
                Pathology::ConnectFailure => match self.connect_failure(t, kernel, observed) {
                    Some(x) => x,
                    None => continue,
                },
                Pathology::RetransmitTimeout => (
                    Impact::stalls(flows, None, worst),
                    format!(
                        "retransmission timeouts on {flows} flow(s), {} timeout(s)",
                        t.events
                    ),
                ),
                // Worded as the lab words it ("up to N flows": the largest episode), with
                // the distinct flows of all episodes apart (issue 21, defect 8).
                Pathology::Incast => (
                    Impact::stalls(flows, None, worst),
                    format!(
                        "{} incast episode(s): timeouts of up to {} flows into one receiver within {} ms; {flows} distinct flows timed out across them",
                        self.summary.incast_episodes.len(),
                        self.summary
                            .incast_episodes
                            .iter()
                            .map(|e| e.flows)
                            .max()
                            .unwrap_or(0),
                        self.cfg.incast_window.as_millis(),
                    ),
                ),
                Pathology::Retransmission => (
                    Impact::stalls(t.events, None, None),
                    format!(
                        "{} fast retransmission(s) or tail-loss probe(s) on {flows} flow(s)",
                        t.events
                    ),
                ),
                Pathology::SlowReader => {
                    // From the window closing to the last event that proves it still closed
                    // (windows.rs): the same measure of the same stall as `sockets` takes
                    // from tcp_info, judged by the same policy.
                    let closed = self.windows.worst();
                    let longest = closed.map_or(
                        "; no closed window seen to last (a window probe or a timer resend into it after it closed)".to_string(),
                        |(d, (a, b))| format!(
                            "; the longest closed window lasted {} or more ({a} <-> {b}, from the window closing to the last probe that found it closed)",
                            units::duration(d)
                        ),
                    );
                    let readers: Vec<&String> = self.windows.readers.keys().collect();
                    let not_reading = match readers.first() {
                        Some(r) => format!("; not reading: {r}"),
                        None => String::new(),
                    };
                    (
                        Impact::stalls(flows, None, closed.map(|(d, _)| d)),
                        format!(
                            "receivers not reading: {} zero-window event(s) on {flows} flow(s){longest}{not_reading}",
                            t.events
                        ),
                    )
                }
                Pathology::PacketDrop => (
                    Impact::stalls(t.events, None, None),
                    format!("{} TCP packet(s) dropped for lack of room", t.events),
                ),
                _ => continue,
            };
            let mut f = Finding::new(p, Source::Trace, summary, impact);
            f = self.old_ack_advice(f, lookup);
            f = self.local_refusal_advice(f, lookup);
            let mut examples: Vec<String> = t
                .flows
                .iter()
                .take(5)
                .map(|&(a, b)| flow_text(a, b))
                .collect();
            if flows > 5 {
                examples.push(format!("... {} more", flows - 5));
            }
            if !examples.is_empty() {
                f = f.with_evidence(Evidence::Examples {
                    what: "flows (local -> remote)".into(),
                    items: examples,
                });
            }
            if !t.processes.is_empty() {
                f = f.with_evidence(Evidence::Examples {
                    what: if p == Pathology::SlowReader {
                        "processes not reading (zero-window probes that reached them)".into()
                    } else {
                        "processes (events)".into()
                    },
                    items: t
                        .processes
                        .iter()
                        .take(8)
                        .map(|(p, n)| format!("{p}: {n}"))
                        .collect(),
                });
            }
            if !t.details.is_empty() {
                f = f.with_evidence(Evidence::Examples {
                    what: "kernel evidence (count)".into(),
                    items: t
                        .details
                        .iter()
                        .take(8)
                        .map(|(d, n)| format!("{d}: {n}"))
                        .collect(),
                });
            }
            if p == Pathology::PortExhaustion {
                f = self.port_evidence(f, lookup);
            }
            out.push(f);
        }
        out
    }
}

mod connect;
mod old_ack;
mod windows;

use connect::at_least;
pub use connect::{KernelCounts, TupleRefusal};

#[cfg(test)]
mod tests;
