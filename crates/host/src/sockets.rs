//! TCP socket census through NETLINK_SOCK_DIAG (IPv4 and IPv6, every TCP state), with
//! `tcp_info`, socket memory, Recv-Q/Send-Q and listener backlogs, plus the analysis that
//! turns a census into findings (`Source::Sockets`).
//!
//! Reads the host; never changes it. It does not parse `/proc/net/tcp`.
//!
//! # API (what `doctor` and `tcpdoctor sockets` call)
//!
//! ```no_run
//! use tcpdoctor_host::sockets::{self, Filter};
//! // This network namespace (or `sockets::census_in_netns("blue", &filter)` for
//! // /run/netns/blue: done on a helper thread that setns()s, the caller is not moved).
//! let census = sockets::census(&Filter::default())?;
//! // Counts by state, per destination (TIME_WAIT vs the ephemeral range -> headroom and
//! // sustainable connect rate), listeners (accept queue vs backlog), flagged sockets.
//! // `previous` (an earlier census, e.g. from --watch) adds "Recv-Q grew" detection.
//! let analysis = sockets::analyze(&census, None);
//! for f in &analysis.findings { println!("{}: {}", f.pathology, f.summary); }
//! # Ok::<(), sockets::Error>(())
//! ```
//!
//! [`Census`] holds every socket ([`Socket`], serializable) and the port range read in the
//! same namespace; [`Analysis`] ([`analyze`]) holds the [`Summary`] (serializable body for
//! JSON) and the findings: `port_exhaustion`, `accept_queue_overflow`, `slow_reader`,
//! `retransmit_timeout`.
//!
//! Kernel facts this relies on: TIME_WAIT and NEW_SYN_RECV entries carry no attributes (no
//! `tcp_info`; `inet_twsk_diag_fill`, net/ipv4/inet_diag.c); for a listener `idiag_rqueue`
//! is the accept queue length and `idiag_wqueue` the backlog (`tcp_diag_get_info`,
//! net/ipv4/tcp_diag.c); `tcp_info` is parsed from raw bytes by length so older and newer
//! kernels both work (see [`TcpInfo`]).

mod analysis;
mod limits;
mod netlink;
mod owners;
mod reuse;
pub mod stale;
mod tcp_info;

use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::str::FromStr;
use std::time::{Duration, Instant};

use serde::Serialize;
use tcpdoctor_model::{PortRange, SynLadder};

pub use analysis::{
    analyze, closed_by_line, time_wait_for, who, Analysis, ClosedBy, Destination, FlaggedSocket,
    Listener, ProcessSockets, SlowSign, Summary, HEADROOM_CRITICAL, HEADROOM_WARNING,
};
pub use limits::{
    classify, holding, Basis, Holding, Limit, PathStats, Reader, Span, Transfer, Transfers,
    ACTIVE_WITHIN, BUSY_FLOOR, BYTES_FLOOR, HELD_FLOOR,
};
pub use owners::{attribute, Attribution, Owner};
pub use reuse::TwReuse;
pub use tcp_info::TcpInfo;

/// Errors of the census.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The netlink socket could not be opened, written or read.
    #[error("sock_diag netlink socket: {0}")]
    Socket(std::io::Error),
    /// The kernel answered the dump request with an error.
    #[error("sock_diag dump of {family}: kernel error {code}")]
    Kernel { family: &'static str, code: i32 },
    /// The named network namespace could not be entered.
    #[error("network namespace '{name}' ({path}): {source}")]
    Netns {
        name: String,
        path: PathBuf,
        source: std::io::Error,
    },
    /// Reading a sysctl or /proc file failed.
    #[error(transparent)]
    Host(#[from] crate::Error),
}

/// TCP states, numbered and named as the kernel does (include/net/tcp_states.h).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum TcpState {
    Established = 1,
    SynSent = 2,
    SynRecv = 3,
    FinWait1 = 4,
    FinWait2 = 5,
    TimeWait = 6,
    Close = 7,
    CloseWait = 8,
    LastAck = 9,
    Listen = 10,
    Closing = 11,
    NewSynRecv = 12,
}

impl TcpState {
    pub const ALL: [TcpState; 12] = [
        TcpState::Established,
        TcpState::SynSent,
        TcpState::SynRecv,
        TcpState::FinWait1,
        TcpState::FinWait2,
        TcpState::TimeWait,
        TcpState::Close,
        TcpState::CloseWait,
        TcpState::LastAck,
        TcpState::Listen,
        TcpState::Closing,
        TcpState::NewSynRecv,
    ];

    pub fn from_kernel(v: u8) -> Option<TcpState> {
        TcpState::ALL.iter().copied().find(|s| *s as u8 == v)
    }

    /// The kernel's name without the `TCP_` prefix (`TIME_WAIT`).
    pub fn name(self) -> &'static str {
        match self {
            TcpState::Established => "ESTABLISHED",
            TcpState::SynSent => "SYN_SENT",
            TcpState::SynRecv => "SYN_RECV",
            TcpState::FinWait1 => "FIN_WAIT1",
            TcpState::FinWait2 => "FIN_WAIT2",
            TcpState::TimeWait => "TIME_WAIT",
            TcpState::Close => "CLOSE",
            TcpState::CloseWait => "CLOSE_WAIT",
            TcpState::LastAck => "LAST_ACK",
            TcpState::Listen => "LISTEN",
            TcpState::Closing => "CLOSING",
            TcpState::NewSynRecv => "NEW_SYN_RECV",
        }
    }
}

impl std::fmt::Display for TcpState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for TcpState {
    type Err = String;

    /// Accepts the kernel names (`TIME_WAIT`), any case, `-` for `_`, and `ss`'s
    /// abbreviations (`estab`, `syn-recv`, `listening`).
    fn from_str(s: &str) -> Result<TcpState, String> {
        let norm = s.trim().to_ascii_uppercase().replace('-', "_");
        let alias = match norm.as_str() {
            "ESTAB" => "ESTABLISHED",
            "LISTENING" => "LISTEN",
            "CLOSED" => "CLOSE",
            "SYN_RECV" | "SYN_RECEIVED" => "SYN_RECV",
            "TW" => "TIME_WAIT",
            other => other,
        };
        TcpState::ALL
            .iter()
            .copied()
            .find(|st| st.name() == alias)
            .ok_or_else(|| {
                let names: Vec<&str> = TcpState::ALL.iter().map(|s| s.name()).collect();
                format!("unknown TCP state '{s}' (one of {})", names.join(", "))
            })
    }
}

/// Which timer the kernel reports as pending (`idiag_timer`, net/ipv4/inet_diag.c).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Timer {
    Off,
    /// Retransmission (or loss probe / reordering) timer.
    Retransmit,
    KeepAlive,
    TimeWait,
    /// Zero-window probe timer: the peer advertises a zero window.
    ZeroWindowProbe,
    Other,
}

/// One TCP socket as sock_diag reports it.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Socket {
    pub state: TcpState,
    pub local: SocketAddr,
    pub remote: SocketAddr,
    /// Listener: connections waiting in the accept queue. Others: bytes received and not
    /// yet read by the application (`ss` Recv-Q).
    pub recv_q: u32,
    /// Listener: the backlog passed to listen() (capped by net.core.somaxconn). Others:
    /// bytes not yet acknowledged by the peer (`ss` Send-Q).
    pub send_q: u32,
    pub timer: Timer,
    /// When the pending timer fires, from now.
    pub timer_expires_ms: u32,
    /// `idiag_retrans`: retransmissions of the timer (RTO backoffs, keepalive probes).
    pub timer_retransmits: u8,
    pub uid: u32,
    pub inode: u32,
    /// Receive buffer limit (`SK_MEMINFO_RCVBUF`), absent for TIME_WAIT/NEW_SYN_RECV.
    pub rcvbuf_bytes: Option<u32>,
    /// Send buffer limit (`SK_MEMINFO_SNDBUF`).
    pub sndbuf_bytes: Option<u32>,
    /// What the send queue holds, in buffer memory (`SK_MEMINFO_WMEM_QUEUED`,
    /// `sk_wmem_queued`: data not yet acknowledged and its overhead), measured against
    /// `sndbuf_bytes` by the kernel before it lets a writer add more.
    pub wmem_queued_bytes: Option<u32>,
    /// What of it is still on this host below TCP, in a queueing discipline or a device
    /// queue (`SK_MEMINFO_WMEM_ALLOC`, `sk_wmem_alloc`): large when this host's own
    /// interface is the bottleneck.
    pub wmem_alloc_bytes: Option<u32>,
    /// `tcp_info`, absent for TIME_WAIT and NEW_SYN_RECV entries.
    pub info: Option<Box<TcpInfo>>,
    /// The processes holding it (pid, comm, fd), once [`attribute`] ran; empty for sockets
    /// without a file (TIME_WAIT, NEW_SYN_RECV) and those no readable process holds.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub owners: Vec<Owner>,
    /// For a TIME_WAIT socket: the process that owned it until it closed, when a trace
    /// watched the close (the kernel keeps no owner for a socket without a file).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_owner: Option<LastOwner>,
}

impl Socket {
    /// A socket of `state` between `local` and `remote` with nothing else known: empty
    /// queues, no timer, no buffers, no tcp_info, no owner (what a census entry holds before
    /// its optional parts; tests set the fields they need over it).
    pub fn new(state: TcpState, local: SocketAddr, remote: SocketAddr) -> Socket {
        Socket {
            state,
            local,
            remote,
            recv_q: 0,
            send_q: 0,
            timer: Timer::Off,
            timer_expires_ms: 0,
            timer_retransmits: 0,
            uid: 0,
            inode: 0,
            rcvbuf_bytes: None,
            sndbuf_bytes: None,
            wmem_queued_bytes: None,
            wmem_alloc_bytes: None,
            info: None,
            owners: Vec::new(),
            last_owner: None,
        }
    }
}

/// The process that called connect() on a connection that is now in TIME_WAIT, as the eBPF
/// trace recorded it when the connection closed (`tcpdoctor_trace::history`).
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
pub struct LastOwner {
    pub pid: u32,
    /// The name of the thread that called connect(), recorded by the trace at that moment
    /// (at most 15 bytes, `TASK_COMM_LEN`): known also after the process exited.
    pub comm: String,
    /// The process no longer runs (no `/proc/<pid>`, or the pid now names a process started
    /// after the close).
    pub exited: bool,
}

/// Whether the last owners of TIME_WAIT sockets were looked up, and what the lookup found.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum LastOwners {
    /// No trace watched the closes: TIME_WAIT sockets have no known owner.
    Untraced {
        /// Why (a one-shot census, --no-trace, not root, no BTF, ...).
        reason: String,
    },
    /// A trace has recorded every close in the namespace since `traced_for_ms` before the
    /// census.
    Traced {
        /// From the trace's attachment to the end of the census.
        traced_for_ms: u64,
        /// TIME_WAIT sockets of the census looked up in the trace's history.
        time_wait_sockets: u64,
        /// Of those, the ones whose close the history holds (last owner known).
        found: u64,
        /// Of the rest, those in TIME_WAIT since before the trace started (from their
        /// TIME_WAIT timer): their close was not watched.
        before_trace: u64,
        /// Time spent reading the history, microseconds.
        lookup_duration_us: u64,
    },
}

/// What to include. Empty lists mean "all". States are filtered by the kernel; ports and
/// addresses (matching either end) in user space.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Filter {
    pub states: Vec<TcpState>,
    pub ports: Vec<u16>,
    /// Addresses or CIDR blocks, matched against either end.
    pub addresses: Vec<tcpdoctor_model::net::IpPrefix>,
}

impl Filter {
    pub fn matches(&self, s: &Socket) -> bool {
        (self.states.is_empty() || self.states.contains(&s.state))
            && (self.ports.is_empty()
                || self.ports.contains(&s.local.port())
                || self.ports.contains(&s.remote.port()))
            && (self.addresses.is_empty()
                || self
                    .addresses
                    .iter()
                    .any(|a| a.contains(s.local.ip()) || a.contains(s.remote.ip())))
    }

    /// The kernel's state bitmask (`idiag_states`).
    fn state_mask(&self) -> u32 {
        if self.states.is_empty() {
            // Every real state, 1..=12. Not u32::MAX: bit 13 (TCP_BOUND_INACTIVE, Linux 6.5+)
            // makes the kernel also walk the bind hash for bound-but-unconnected sockets
            // (inet_diag_dump_icsk, net/ipv4/inet_diag.c), which costs more than the census.
            return TcpState::ALL.iter().fold(0, |m, s| m | 1 << (*s as u32));
        }
        self.states.iter().fold(0, |m, s| m | 1 << (*s as u32))
    }
}

/// An address with IPv4-mapped IPv6 (`::ffff:a.b.c.d`) shown as IPv4.
pub(crate) fn canonical(a: IpAddr) -> IpAddr {
    match a {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map(IpAddr::V4).unwrap_or(a),
        v4 => v4,
    }
}

/// Every TCP socket of one network namespace, with the port range read there.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Census {
    /// `None`: the caller's namespace.
    pub netns: Option<String>,
    /// `net.ipv4.ip_local_port_range` of that namespace.
    pub port_range: PortRange,
    pub sockets: Vec<Socket>,
    /// Kernel messages that could not be decoded (counted, never silently dropped).
    pub undecoded_messages: u64,
    /// When connect() may take over a TIME_WAIT socket's port in that namespace.
    pub tw_reuse: TwReuse,
    /// The SYN retransmission ladder of that namespace: how long a connect in SYN_SENT with
    /// N retransmissions has waited at least. `None` when the settings were not read.
    #[serde(skip)]
    pub syn_ladder: Option<SynLadder>,
    /// When the dump ended; two censuses' instants give the interval between them.
    #[serde(skip)]
    pub taken_at: Option<Instant>,
    /// What the process scan covered, once [`attribute`] ran.
    pub attribution: Option<Attribution>,
    /// Whether a trace named the last owners of TIME_WAIT sockets (`None`: not asked).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_owners: Option<LastOwners>,
    /// `net.ipv4.tcp_fin_timeout` of that namespace: how long an orphaned FIN_WAIT2 socket
    /// waits for the peer ([`stale`]). `None` when not read.
    #[serde(skip)]
    pub fin_timeout: Option<Duration>,
}

impl Census {
    /// A census of `sockets` in a namespace whose port range is `port_range`, with nothing
    /// else known (no settings read, no instant, no attribution): what a test or a replay
    /// builds; set the other fields it knows.
    pub fn new(sockets: Vec<Socket>, port_range: PortRange) -> Census {
        Census {
            netns: None,
            port_range,
            sockets,
            undecoded_messages: 0,
            tw_reuse: TwReuse::default(),
            syn_ladder: None,
            taken_at: None,
            attribution: None,
            last_owners: None,
            fin_timeout: None,
        }
    }
}

/// Takes the census of the caller's network namespace.
pub fn census(filter: &Filter) -> Result<Census, Error> {
    let settings = crate::sysctl::TcpSettings::read()?;
    let tw_reuse = TwReuse::read(&settings)?;
    let mut out = netlink::Dump {
        sockets: Vec::with_capacity(netlink::capacity_hint()),
        undecoded: 0,
    };
    let mask = filter.state_mask();
    netlink::dump_all(mask, &mut out, filter)?;
    Ok(Census {
        netns: None,
        port_range: settings.ip_local_port_range,
        sockets: out.sockets,
        undecoded_messages: out.undecoded,
        tw_reuse,
        syn_ladder: Some(
            settings.syn_ladder_capped(crate::sysctl::read_u64("net.ipv4.tcp_rto_max_ms")?),
        ),
        taken_at: Some(Instant::now()),
        attribution: None,
        last_owners: None,
        fin_timeout: settings.tcp_fin_timeout.map(Duration::from_secs),
    })
}

/// Takes the census of the named network namespace (`/run/netns/NAME`, as `ip netns`
/// creates). A helper thread enters the namespace with setns(CLONE_NEWNET) and reads there;
/// the calling thread stays where it is. Needs CAP_SYS_ADMIN.
pub fn census_in_netns(name: &str, filter: &Filter) -> Result<Census, Error> {
    let filter = filter.clone();
    let mut c = in_netns(name, move || census(&filter))??;
    c.netns = Some(name.to_string());
    Ok(c)
}

/// Runs `f` on a thread that has entered network namespace `name` (`/run/netns/NAME`).
/// Files under `/proc/thread-self/net` and `/proc/sys/net` read by `f` are that namespace's.
pub fn in_netns<T, F>(name: &str, f: F) -> Result<T, Error>
where
    T: Send + 'static,
    F: FnOnce() -> T + Send + 'static,
{
    crate::netns::run_in(name, f).map_err(|source| Error::Netns {
        name: name.to_string(),
        path: PathBuf::from(crate::netns::RUN_NETNS).join(name),
        source,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn state_names_parse_both_ways() {
        for s in TcpState::ALL {
            assert_eq!(s.name().parse::<TcpState>(), Ok(s));
            assert_eq!(TcpState::from_kernel(s as u8), Some(s));
        }
        assert_eq!("time-wait".parse(), Ok(TcpState::TimeWait));
        assert_eq!("estab".parse(), Ok(TcpState::Established));
        assert_eq!("LISTENING".parse(), Ok(TcpState::Listen));
        assert!("bogus"
            .parse::<TcpState>()
            .unwrap_err()
            .contains("TIME_WAIT"));
        assert_eq!(TcpState::from_kernel(0), None);
    }

    #[test]
    fn filter_masks_and_matches() {
        let f = Filter {
            states: vec![TcpState::TimeWait, TcpState::Listen],
            ..Filter::default()
        };
        assert_eq!(f.state_mask(), (1 << 6) | (1 << 10));
        assert_eq!(Filter::default().state_mask(), 0x1ffe);
        let s = Socket {
            timer: Timer::TimeWait,
            ..Socket::new(
                TcpState::TimeWait,
                "[::ffff:127.0.0.1]:40000".parse().unwrap(),
                "127.0.0.1:5000".parse().unwrap(),
            )
        };
        assert!(f.matches(&s));
        let by_port = Filter {
            ports: vec![5000],
            ..Filter::default()
        };
        assert!(by_port.matches(&s));
        let by_addr = Filter {
            addresses: vec!["127.0.0.1".parse().unwrap()],
            ..Filter::default()
        };
        assert!(by_addr.matches(&s));
        let other = Filter {
            ports: vec![80],
            ..Filter::default()
        };
        assert!(!other.matches(&s));
    }

    #[test]
    fn live_census_sees_a_listener_and_its_connection() {
        // Loopback only; a listener outside ip_local_port_range is not needed because the
        // kernel picks the port (bind to port 0).
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = l.local_addr().unwrap().port();
        let c = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
        let filter = Filter {
            ports: vec![port],
            ..Filter::default()
        };
        let census = census(&filter).unwrap();
        let listen = census
            .sockets
            .iter()
            .find(|s| s.state == TcpState::Listen)
            .expect("listener in census");
        assert_eq!(listen.recv_q, 1, "one connection waits in the accept queue");
        assert!(listen.send_q > 0, "backlog reported");
        let client = census
            .sockets
            .iter()
            .find(|s| s.local == c.local_addr().unwrap())
            .expect("client socket in census");
        assert_eq!(client.state, TcpState::Established);
        let info = client
            .info
            .as_ref()
            .expect("established sockets carry tcp_info");
        assert!(
            info.rto_us >= 200_000,
            "RTO floor is 200 ms: {}",
            info.rto_us
        );
        assert!(client.rcvbuf_bytes.unwrap_or(0) > 0);
        // IPv6 sockets come in the same census (one AF_UNSPEC dump, or the fallback).
        if let Ok(l6) = std::net::TcpListener::bind("[::1]:0") {
            let a6 = l6.local_addr().unwrap();
            let c6 = super::census(&Filter {
                ports: vec![a6.port()],
                ..Filter::default()
            })
            .unwrap();
            assert!(c6
                .sockets
                .iter()
                .any(|s| s.local == a6 && s.state == TcpState::Listen));
        }
    }
}
