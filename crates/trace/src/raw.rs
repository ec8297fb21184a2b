//! The records the BPF program writes (`struct event` in bpf/trace.bpf.c) and its counters,
//! decoded into typed [`Event`]s. Bytes from the kernel are checked once for length; a
//! record of an unknown kind or the wrong size is counted by the caller, never a panic.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

use serde::{Deserialize, Serialize};

/// A record as the BPF program writes it: `struct event` of bpf/trace.bpf.c, field for field.
/// build.rs computes the C struct's layout from that source and asserts at compile time that
/// every offset and size here is the same (and defines [`EVENT_BYTES`], its size).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct RawEvent {
    pub ts_ns: u64,
    pub sk: u64,
    pub netns: u32,
    pub pid: u32,
    pub ino: u32,
    pub kind: u16,
    pub family: u8,
    pub state: u8,
    pub sport: u16,
    pub dport: u16,
    pub a: u32,
    pub b: u32,
    pub c: u32,
    pub owner: u8,
    pub silent: u8,
    pub err: i16,
    pub saddr: [u8; 16],
    pub daddr: [u8; 16],
    pub comm: [u8; 16],
    pub ifname: [u8; 16],
    pub bytes_acked: u64,
    pub bytes_received: u64,
    pub born_ns: u64,
}

/// The size of a field, named by a function that borrows it (for build.rs's assertions).
#[allow(dead_code)]
const fn field_size<F>(_: fn(&RawEvent) -> &F) -> usize {
    std::mem::size_of::<F>()
}

include!(concat!(env!("OUT_DIR"), "/event_layout.rs"));

impl RawEvent {
    /// The record in `b` (at least [`EVENT_BYTES`] long, in this host's byte order, as the
    /// kernel wrote it).
    fn read(b: &[u8]) -> RawEvent {
        assert!(b.len() >= EVENT_BYTES);
        // SAFETY: `b` holds at least size_of::<RawEvent>() bytes (build.rs: EVENT_BYTES is
        // its size); every field is an integer or an array of them, for which any bytes are
        // a value; read_unaligned takes no alignment from the ring buffer's bytes.
        unsafe { std::ptr::read_unaligned(b.as_ptr().cast::<RawEvent>()) }
    }
}

/// Index of each per-CPU counter (`enum counter` in the C source).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Counter {
    /// Records the ring buffer had no room for.
    Lost = 0,
    /// Sockets that entered SYN_SENT (connect() started).
    Connects = 1,
    /// SYN_SENT -> ESTABLISHED.
    Connected = 2,
    /// connect() returned an error (tcp_v4_connect / tcp_v6_connect).
    ConnectErrors = 3,
    ConnectEaddrnotavail = 4,
    RetransmitSyn = 5,
    RetransmitTimeout = 6,
    RetransmitTailLossProbe = 7,
    RetransmitFast = 8,
    RetransmitAfterTimeout = 9,
    RetransmitOther = 10,
    SynAckRetransmits = 11,
    ResetsSent = 12,
    ResetsReceived = 13,
    TcpDrops = 14,
    ZeroWindows = 15,
    WindowProbes = 16,
    TimeWaitAcks = 17,
    /// Resends (of any class, each also counted in it) that sent nothing: the tracepoint's
    /// result was an error (-EBUSY: the first copy still in this host's qdisc or driver).
    RetransmitUnsent = 18,
    /// Connects that ended with an error after their SYN (refused, timed out): every one,
    /// also those whose record was lost or whose owner was not known.
    ConnectFailed = 19,
    Records = 20,
    Accepted = 21,
    Closed = 22,
    StaleAcks = 23,
    RetransmitZeroWindow = 24,
    /// Buffers freed for a benign reason (a closing socket freeing its own queues:
    /// QUEUE_PURGE): counted apart, never among `TcpDrops`.
    BenignDrops = 25,
}

impl Counter {
    pub const ALL: [Counter; 26] = [
        Counter::Lost,
        Counter::Connects,
        Counter::Connected,
        Counter::ConnectErrors,
        Counter::ConnectEaddrnotavail,
        Counter::RetransmitSyn,
        Counter::RetransmitTimeout,
        Counter::RetransmitTailLossProbe,
        Counter::RetransmitFast,
        Counter::RetransmitAfterTimeout,
        Counter::RetransmitOther,
        Counter::SynAckRetransmits,
        Counter::ResetsSent,
        Counter::ResetsReceived,
        Counter::TcpDrops,
        Counter::ZeroWindows,
        Counter::WindowProbes,
        Counter::TimeWaitAcks,
        Counter::RetransmitUnsent,
        Counter::ConnectFailed,
        Counter::Records,
        Counter::Accepted,
        Counter::Closed,
        Counter::StaleAcks,
        Counter::RetransmitZeroWindow,
        Counter::BenignDrops,
    ];

    /// The counter of a [`Counter::name`].
    pub fn from_name(name: &str) -> Option<Counter> {
        Counter::ALL.into_iter().find(|c| c.name() == name)
    }

    /// snake_case name, as in JSON.
    pub fn name(self) -> &'static str {
        match self {
            Counter::Lost => "lost",
            Counter::Connects => "connects",
            Counter::Connected => "connected",
            Counter::ConnectErrors => "connect_errors",
            Counter::ConnectEaddrnotavail => "connect_eaddrnotavail",
            Counter::RetransmitSyn => "retransmit_syn",
            Counter::RetransmitTimeout => "retransmit_timeout",
            Counter::RetransmitTailLossProbe => "retransmit_tail_loss_probe",
            Counter::RetransmitFast => "retransmit_fast",
            Counter::RetransmitAfterTimeout => "retransmit_after_timeout",
            Counter::RetransmitOther => "retransmit_other",
            Counter::SynAckRetransmits => "synack_retransmits",
            Counter::ResetsSent => "resets_sent",
            Counter::ResetsReceived => "resets_received",
            Counter::TcpDrops => "tcp_drops",
            Counter::ZeroWindows => "zero_windows",
            Counter::WindowProbes => "window_probes",
            Counter::TimeWaitAcks => "time_wait_acks",
            Counter::RetransmitUnsent => "retransmit_unsent",
            Counter::ConnectFailed => "connect_failed",
            Counter::Records => "records",
            Counter::Accepted => "accepted",
            Counter::Closed => "closed",
            Counter::StaleAcks => "stale_acks",
            Counter::RetransmitZeroWindow => "retransmit_zero_window",
            Counter::BenignDrops => "benign_drops",
        }
    }
}

/// TCP states as the kernel numbers them (include/net/tcp_states.h).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum TcpState {
    Established,
    SynSent,
    SynRecv,
    FinWait1,
    FinWait2,
    TimeWait,
    Close,
    CloseWait,
    LastAck,
    Listen,
    Closing,
    NewSynRecv,
}

impl TcpState {
    pub fn from_kernel(v: u8) -> Option<TcpState> {
        use TcpState::*;
        Some(match v {
            1 => Established,
            2 => SynSent,
            3 => SynRecv,
            4 => FinWait1,
            5 => FinWait2,
            6 => TimeWait,
            7 => Close,
            8 => CloseWait,
            9 => LastAck,
            10 => Listen,
            11 => Closing,
            12 => NewSynRecv,
            _ => return None,
        })
    }

    pub fn name(self) -> &'static str {
        use TcpState::*;
        match self {
            Established => "ESTABLISHED",
            SynSent => "SYN_SENT",
            SynRecv => "SYN_RECV",
            FinWait1 => "FIN_WAIT1",
            FinWait2 => "FIN_WAIT2",
            TimeWait => "TIME_WAIT",
            Close => "CLOSE",
            CloseWait => "CLOSE_WAIT",
            LastAck => "LAST_ACK",
            Listen => "LISTEN",
            Closing => "CLOSING",
            NewSynRecv => "NEW_SYN_RECV",
        }
    }
}

/// What sent a retransmission (decided in the kernel by the code path it came from).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum RetransmitClass {
    /// A SYN (SYN_SENT) or SYN-ACK of a child socket.
    Syn,
    /// The retransmission timer fired (`tcp_retransmit_timer`).
    Timeout,
    /// A tail-loss probe (`tcp_send_loss_probe`, RFC 8985 section 7).
    TailLossProbe,
    /// Fast retransmit / SACK recovery (congestion state Recovery, RFC 6675).
    Fast,
    /// The rest of the window resent after a timeout (congestion state Loss).
    AfterTimeout,
    /// The retransmission timer fired while the peer's window was zero: the resend is a
    /// window probe, not counted as a timeout by the kernel (`tcp_retransmit_timer`).
    ZeroWindow,
    Other,
}

impl RetransmitClass {
    fn from_raw(v: u32) -> RetransmitClass {
        match v {
            1 => RetransmitClass::Syn,
            2 => RetransmitClass::Timeout,
            3 => RetransmitClass::TailLossProbe,
            4 => RetransmitClass::Fast,
            5 => RetransmitClass::AfterTimeout,
            7 => RetransmitClass::ZeroWindow,
            _ => RetransmitClass::Other,
        }
    }
}

/// How the previous connection on a 4-tuple ended, as this end saw it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum PreviousClose {
    /// This end reset it (SO_LINGER 0 or an abort): the peer may still hold the connection.
    Reset,
    /// The peer closed first: the peer holds the 4-tuple in TIME_WAIT for 60 s.
    PeerClosedFirst,
    /// This end closed first: this end held TIME_WAIT.
    ClosedFirst,
    /// That connect never completed.
    Failed,
    Other,
}

impl PreviousClose {
    fn from_raw(v: u32) -> Option<PreviousClose> {
        Some(match v {
            1 => PreviousClose::Reset,
            2 => PreviousClose::PeerClosedFirst,
            3 => PreviousClose::ClosedFirst,
            4 => PreviousClose::Failed,
            5 => PreviousClose::Other,
            _ => return None,
        })
    }
}

/// Who the process fields name.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ProcessSource {
    /// The process that called connect() on this socket.
    Connect,
    /// The task running when the event happened (a syscall in process context).
    Current,
    /// The process holding the socket's file descriptor (looked up by inode in /proc).
    FileDescriptor,
    /// The process that closed this accepted socket (close() or shutdown(), process
    /// context): `trace --connections` only.
    Closer,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Process {
    pub pid: u32,
    pub comm: String,
    pub source: ProcessSource,
}

/// Owner flags (`O_*` in the C source).
pub const OWNER_SYN_RETRANSMITTED: u32 = 1;
pub const OWNER_STALE_ACK: u32 = 2;

/// Kind-specific facts of an event.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Detail {
    Retransmit {
        class: RetransmitClass,
        /// `icsk_retransmits`: timeouts so far on this socket (1 for the first).
        attempt: u32,
        /// For timeouts: how long since an ACK last delivered data, microseconds. For a
        /// connect's SYN: how long since its connect() (`None`: the trace did not see it).
        waited_us: Option<u32>,
        /// For timeouts: the peer acknowledged none of this connection's data and sent none
        /// (`tcp_sock.bytes_acked` and `bytes_received` both 0): it may never have taken the
        /// connection.
        peer_silent: bool,
        /// The kernel sent nothing: its result, an errno (EBUSY: the first copy is still in
        /// this host's qdisc or driver). `None` when sent, or on kernels whose tracepoint
        /// does not pass the result.
        unsent_errno: Option<u16>,
    },
    SynAckRetransmit {
        attempt: u32,
    },
    ResetSent {
        /// `enum sk_rst_reason` value.
        reason: u32,
        /// For a connecting socket: how the previous connection on this 4-tuple ended.
        previous: Option<PreviousClose>,
        previous_age_ms: Option<u32>,
        /// TCP flags of the segment that was answered (only without a socket).
        answered_flags: Option<u8>,
    },
    ResetReceived,
    /// A connect that needed a SYN resend (or met a stale ACK) completed.
    Connected {
        flags: u32,
        connect_us: u32,
    },
    /// A connecting socket closed before it was established.
    ConnectFailed {
        flags: u32,
        after_us: u32,
        /// The socket's error: ETIMEDOUT, ECONNREFUSED, or 0 when the application closed it.
        errno: u32,
    },
    /// connect() returned `errno`.
    ConnectError {
        errno: u32,
    },
    Drop {
        /// `enum skb_drop_reason` value.
        reason: u32,
        ifindex: u32,
        ifname: Option<String>,
        tcp_flags: u8,
        /// The packet reached a timewait mini-socket: its substate (TIME_WAIT, or
        /// FIN_WAIT2 for a socket orphaned in FIN_WAIT2). `None` for any other socket.
        timewait: Option<TcpState>,
    },
    /// The peer of this socket advertised a zero window (this socket is the sender).
    ZeroWindow,
    /// This socket, its own receive window zero, received a zero-window probe: its
    /// process is not reading.
    WindowProbe,
    /// A connection's full socket closed (`trace --connections`): the kernel's counts at
    /// the close ([`crate::connections`] turns them into payload bytes and a lifetime).
    Closed {
        /// Opened by connect() here (else accepted).
        active: bool,
        /// This end's FIN was acknowledged (then counted in `bytes_acked`).
        fin_acked: bool,
        /// The peer's FIN was received (then counted in `bytes_received`).
        fin_received: bool,
        /// How it ended, from the state it closed from.
        how: Option<PreviousClose>,
        /// The socket's error (ECONNRESET, ETIMEDOUT, ECONNREFUSED), 0 for none.
        errno: u32,
        /// `tcp_sock.bytes_acked` and `bytes_received` at the close.
        bytes_acked: u64,
        bytes_received: u64,
        /// CLOCK_MONOTONIC of connect() (active) or of the handshake's end (passive).
        born_ns: u64,
    },
    /// A timewait mini-socket did not accept a SYN as a new connection; `reason` is the
    /// drop reason of that SYN.
    TimeWaitAck {
        reason: u32,
        /// What the mini-socket stands for (`tw_substate`): TIME_WAIT proper, or a socket
        /// orphaned in FIN_WAIT2 that still waits for the peer's FIN. `None` when the
        /// kernel's value was not one of these.
        substate: Option<TcpState>,
    },
}

/// One decoded record.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Event {
    /// CLOCK_MONOTONIC, nanoseconds.
    pub ts_ns: u64,
    /// Kernel address of the socket: identity while it lives (0 when there is none).
    pub sk: u64,
    pub netns: u32,
    pub process: Option<Process>,
    /// Socket inode (0 when unknown): finds the process holding it.
    pub ino: u32,
    /// The socket's state; for a timewait mini-socket its substate, as sock_diag and `ss`
    /// report it (TIME_WAIT, or FIN_WAIT2 for a socket orphaned in FIN_WAIT2).
    pub state: Option<TcpState>,
    /// Local end (this host's view; for drops of received packets, the destination).
    pub local: SocketAddr,
    pub remote: SocketAddr,
    pub detail: Detail,
}

/// Why a record could not be decoded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Undecodable {
    Length(usize),
    Kind(u16),
}

fn cstr(b: &[u8]) -> String {
    let end = b.iter().position(|&c| c == 0).unwrap_or(b.len());
    String::from_utf8_lossy(&b[..end]).into_owned()
}

fn addr(family: u8, b: &[u8], port: u16) -> SocketAddr {
    let ip = if family == 10 {
        let mut a = [0u8; 16];
        a.copy_from_slice(&b[..16]);
        let v6 = Ipv6Addr::from(a);
        match v6.to_ipv4_mapped() {
            Some(v4) => IpAddr::V4(v4),
            None => IpAddr::V6(v6),
        }
    } else {
        IpAddr::V4(Ipv4Addr::new(b[0], b[1], b[2], b[3]))
    };
    SocketAddr::new(ip, port)
}

impl Event {
    /// Decodes one record (the little-endian layout of `struct event`).
    pub fn decode(b: &[u8]) -> Result<Event, Undecodable> {
        if b.len() < EVENT_BYTES {
            return Err(Undecodable::Length(b.len()));
        }
        let r = RawEvent::read(b);
        let (ts_ns, sk, netns, pid, ino, kind, family) =
            (r.ts_ns, r.sk, r.netns, r.pid, r.ino, r.kind, r.family);
        let state = TcpState::from_kernel(r.state);
        let (a, bb, c) = (r.a, r.b, r.c);
        let owner = r.owner;
        let local = addr(family, &r.saddr, r.sport);
        let remote = addr(family, &r.daddr, r.dport);
        let comm = cstr(&r.comm);
        let ifname = cstr(&r.ifname);
        let process = match owner {
            1 => Some(ProcessSource::Connect),
            2 => Some(ProcessSource::Current),
            3 => Some(ProcessSource::Closer),
            _ => None,
        }
        .map(|source| Process { pid, comm, source });
        // A timewait mini-socket's substate (K_TW_ACK b; K_DROP c bits 8-15): only
        // TIME_WAIT and FIN_WAIT2 are substates the kernel gives one.
        let substate = |v: u32| {
            TcpState::from_kernel(v as u8)
                .filter(|s| matches!(s, TcpState::TimeWait | TcpState::FinWait2))
        };
        let timewait = match kind {
            8 if state == Some(TcpState::TimeWait) => Some(substate(c >> 8)),
            11 => Some(substate(bb)),
            _ => None,
        };
        let state = match timewait {
            Some(Some(sub)) => Some(sub),
            _ => state,
        };
        let detail = match kind {
            1 => Detail::Retransmit {
                class: RetransmitClass::from_raw(a),
                attempt: bb,
                waited_us: (c != 0).then_some(c),
                peer_silent: r.silent != 0,
                unsent_errno: match r.err {
                    e if e < 0 => Some(e.unsigned_abs()),
                    _ => None,
                },
            },
            2 => Detail::SynAckRetransmit { attempt: a },
            3 => Detail::ResetSent {
                reason: a,
                previous: PreviousClose::from_raw(bb),
                previous_age_ms: PreviousClose::from_raw(bb).map(|_| c),
                answered_flags: (sk == 0).then_some(c as u8),
            },
            4 => Detail::ResetReceived,
            5 => Detail::Connected {
                flags: a,
                connect_us: bb,
            },
            6 => Detail::ConnectFailed {
                flags: a,
                after_us: bb,
                errno: c,
            },
            7 => Detail::ConnectError { errno: a },
            8 => Detail::Drop {
                reason: a,
                ifindex: bb,
                ifname: (!ifname.is_empty()).then_some(ifname),
                tcp_flags: c as u8,
                timewait: timewait.flatten(),
            },
            9 => Detail::ZeroWindow,
            10 => Detail::WindowProbe,
            11 => Detail::TimeWaitAck {
                reason: a,
                substate: timewait.flatten(),
            },
            12 => Detail::Closed {
                active: a & 1 != 0,
                fin_acked: a & 2 != 0,
                fin_received: a & 4 != 0,
                how: PreviousClose::from_raw(bb),
                errno: c,
                bytes_acked: r.bytes_acked,
                bytes_received: r.bytes_received,
                born_ns: r.born_ns,
            },
            k => return Err(Undecodable::Kind(k)),
        };
        Ok(Event {
            ts_ns,
            sk,
            netns,
            process,
            ino,
            state,
            local,
            remote,
            detail,
        })
    }
}

/// Builds a record's bytes (tests and fuzzing of the decoder).
#[cfg(test)]
pub(crate) fn encode(kind: u16, f: impl FnOnce(&mut [u8])) -> Vec<u8> {
    let mut b = vec![0u8; EVENT_BYTES];
    b[28..30].copy_from_slice(&kind.to_le_bytes());
    f(&mut b);
    b
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decodes_a_syn_retransmission_with_its_owner() {
        let b = encode(1, |b| {
            b[0..8].copy_from_slice(&5_000u64.to_le_bytes());
            b[8..16].copy_from_slice(&0xffff_8880_1234u64.to_le_bytes());
            b[16..20].copy_from_slice(&4026532000u32.to_le_bytes());
            b[20..24].copy_from_slice(&4242u32.to_le_bytes());
            b[30] = 2;
            b[31] = 2;
            b[32..34].copy_from_slice(&40000u16.to_le_bytes());
            b[34..36].copy_from_slice(&5001u16.to_le_bytes());
            b[36..40].copy_from_slice(&1u32.to_le_bytes());
            b[40..44].copy_from_slice(&2u32.to_le_bytes());
            b[48] = 1;
            b[52..56].copy_from_slice(&[10, 0, 0, 1]);
            b[68..72].copy_from_slice(&[10, 0, 0, 2]);
            b[84..88].copy_from_slice(b"curl");
        });
        let e = Event::decode(&b).unwrap();
        assert_eq!(e.ts_ns, 5_000);
        assert_eq!(e.netns, 4026532000);
        assert_eq!(e.state, Some(TcpState::SynSent));
        assert_eq!(e.local, "10.0.0.1:40000".parse().unwrap());
        assert_eq!(e.remote, "10.0.0.2:5001".parse().unwrap());
        let p = e.process.unwrap();
        assert_eq!(
            (p.pid, p.comm.as_str(), p.source),
            (4242, "curl", ProcessSource::Connect)
        );
        assert_eq!(
            e.detail,
            Detail::Retransmit {
                class: RetransmitClass::Syn,
                attempt: 2,
                waited_us: None,
                peer_silent: false,
                unsent_errno: None
            }
        );
    }

    #[test]
    fn a_timewait_mini_socket_reads_as_its_substate() {
        // K_TW_ACK: sk_state TIME_WAIT, tw_substate FIN_WAIT2 in b.
        let b = encode(11, |b| {
            b[30] = 2;
            b[31] = 6;
            b[36..40].copy_from_slice(&2u32.to_le_bytes());
            b[40..44].copy_from_slice(&5u32.to_le_bytes());
            b[44..48].copy_from_slice(&0x02u32.to_le_bytes());
        });
        let e = Event::decode(&b).unwrap();
        assert_eq!(e.state, Some(TcpState::FinWait2));
        assert_eq!(
            e.detail,
            Detail::TimeWaitAck {
                reason: 2,
                substate: Some(TcpState::FinWait2)
            }
        );
        // K_DROP at a TIME_WAIT mini-socket: the substate in c's second byte, the flags in
        // its first.
        let b = encode(8, |b| {
            b[30] = 2;
            b[31] = 6;
            b[44..48].copy_from_slice(&(0x10u32 | 6 << 8).to_le_bytes());
        });
        let e = Event::decode(&b).unwrap();
        assert_eq!(e.state, Some(TcpState::TimeWait));
        match e.detail {
            Detail::Drop {
                tcp_flags,
                timewait,
                ..
            } => assert_eq!((tcp_flags, timewait), (0x10, Some(TcpState::TimeWait))),
            d => panic!("{d:?}"),
        }
        // A drop at a full socket has no substate, whatever c's second byte holds.
        let b = encode(8, |b| {
            b[31] = 1;
            b[44..48].copy_from_slice(&(0x10u32 | 5 << 8).to_le_bytes());
        });
        match Event::decode(&b).unwrap().detail {
            Detail::Drop { timewait, .. } => assert_eq!(timewait, None),
            d => panic!("{d:?}"),
        }
    }

    #[test]
    fn ipv4_mapped_ipv6_reads_as_ipv4_and_short_or_unknown_records_are_errors() {
        let b = encode(9, |b| {
            b[30] = 10;
            b[52 + 10] = 0xff;
            b[52 + 11] = 0xff;
            b[52 + 12..52 + 16].copy_from_slice(&[127, 0, 0, 1]);
        });
        let e = Event::decode(&b).unwrap();
        assert_eq!(e.local.ip(), IpAddr::V4(Ipv4Addr::LOCALHOST));
        assert_eq!(Event::decode(&b[..100]), Err(Undecodable::Length(100)));
        assert_eq!(
            Event::decode(&encode(99, |_| {})),
            Err(Undecodable::Kind(99))
        );
    }
}
