//! Each connection's lifetime, bytes each way and process (`trace --connections`), as bcc's
//! tcplife reports them, from the record of its close (`K_CLOSED` in bpf/trace.bpf.c). Pure:
//! a decoded event in, a [`Connection`] out.
//!
//! What the kernel counts and what is reported:
//! - bytes: `tcp_sock.bytes_acked` (sent and acknowledged by the peer) and `bytes_received`
//!   (received in order) at the close, the counters `ss -ti` and tcplife show. Measured here
//!   with `ss -ti` (Linux 6.18): an active open's `bytes_acked` also counts its SYN (1, once
//!   established) and each end's FIN counts 1 once acknowledged (`bytes_acked`) or received
//!   (`bytes_received`). Those are taken off, so `tx_bytes` and `rx_bytes` are payload: what
//!   the application wrote and the peer acknowledged, and what arrived for it to read.
//! - lifetime: from connect() (active open: the handshake included) or the handshake's end
//!   (accepted), to the close of the full socket. The side that closes first hands its end
//!   to a TIME_WAIT (or FIN_WAIT2) mini-socket once its FIN is acknowledged; that wait is
//!   not counted, as tcplife does not count it.
//! - process: the connect() caller; for an accepted connection, the process that closed it
//!   (close() or shutdown() run in its context), else the one still holding its file.
//!
//! Connections opened before the trace started are not reported (their start was not seen).

use std::net::SocketAddr;

use serde::Serialize;

use crate::raw::{Detail, Event, PreviousClose, Process, TcpState};

/// How the connection was opened.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Opened {
    /// connect() here.
    Connect,
    /// Accepted by a listener here.
    Accept,
}

/// How it ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Ended {
    /// This end closed first (its FIN went first; it holds TIME_WAIT).
    ClosedFirst,
    /// The peer closed first.
    PeerClosedFirst,
    /// This end reset it (SO_LINGER 0, data left unread at close, an abort).
    ResetSent,
    /// The peer reset it (ECONNRESET, or EPIPE after the peer's FIN).
    ResetReceived,
    /// Retransmissions or keepalives went unanswered (ETIMEDOUT).
    TimedOut,
    /// The connect never completed (refused, timed out, or abandoned).
    Failed,
    Other,
}

/// One connection, reported at its close.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Connection {
    /// When it closed, since the trace started, microseconds.
    pub t_us: u64,
    pub netns: u32,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub netns_name: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub process: Option<Process>,
    pub local: SocketAddr,
    pub remote: SocketAddr,
    pub opened: Opened,
    /// From connect() or the handshake's end to the full socket's close.
    pub duration_us: u64,
    /// Payload sent and acknowledged by the peer.
    pub tx_bytes: u64,
    /// Payload received.
    pub rx_bytes: u64,
    pub ended: Ended,
    /// The state it closed from.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub closed_from: Option<TcpState>,
    /// The socket's error at the close, when it had one (errno).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub errno: Option<u32>,
}

/// Totals over the connections reported.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Totals {
    pub connections: u64,
    /// Of them, opened by connect() here.
    pub opened_by_connect: u64,
    pub tx_bytes: u64,
    pub rx_bytes: u64,
}

impl Totals {
    pub fn add(&mut self, c: &Connection) {
        self.connections += 1;
        self.opened_by_connect += u64::from(c.opened == Opened::Connect);
        self.tx_bytes += c.tx_bytes;
        self.rx_bytes += c.rx_bytes;
    }
}

fn ended(how: Option<PreviousClose>, errno: u32, closed_from: Option<TcpState>) -> Ended {
    match (how, errno as i32) {
        (Some(PreviousClose::Failed), _) => Ended::Failed,
        (Some(PreviousClose::Reset), _) => Ended::ResetSent,
        (_, libc::ECONNRESET | libc::EPIPE) => Ended::ResetReceived,
        (_, libc::ETIMEDOUT) => Ended::TimedOut,
        // Closed from an open state with no error: an abort here (SO_LINGER 0, data left
        // unread at close()). tcp_disconnect and tcp_close move the socket to CLOSE first
        // and send the reset after (net/ipv4/tcp.c), so the reset is not seen yet.
        (_, 0)
            if matches!(
                closed_from,
                Some(TcpState::Established | TcpState::CloseWait | TcpState::SynRecv)
            ) =>
        {
            Ended::ResetSent
        }
        (Some(PreviousClose::ClosedFirst), _) => Ended::ClosedFirst,
        (Some(PreviousClose::PeerClosedFirst), _) => Ended::PeerClosedFirst,
        _ => Ended::Other,
    }
}

/// The connection a `Detail::Closed` event reports (`None` for any other event).
/// `start_ns`: CLOCK_MONOTONIC when tracing started.
pub fn from_event(ev: &Event, start_ns: u64, netns_name: Option<String>) -> Option<Connection> {
    let Detail::Closed {
        active,
        fin_acked,
        fin_received,
        how,
        errno,
        bytes_acked,
        bytes_received,
        born_ns,
    } = ev.detail
    else {
        return None;
    };
    // An active open's SYN is in bytes_acked once the handshake completed.
    let syn = active && ev.state != Some(TcpState::SynSent);
    Some(Connection {
        t_us: ev.ts_ns.saturating_sub(start_ns) / 1000,
        netns: ev.netns,
        netns_name,
        process: ev.process.clone(),
        local: ev.local,
        remote: ev.remote,
        opened: if active {
            Opened::Connect
        } else {
            Opened::Accept
        },
        duration_us: ev.ts_ns.saturating_sub(born_ns) / 1000,
        tx_bytes: bytes_acked.saturating_sub(u64::from(syn) + u64::from(fin_acked)),
        rx_bytes: bytes_received.saturating_sub(u64::from(fin_received)),
        ended: ended(how, errno, ev.state),
        closed_from: ev.state,
        errno: (errno != 0).then_some(errno),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn closed(state: TcpState, detail: Detail) -> Event {
        Event {
            ts_ns: 5_000_000_000,
            sk: 1,
            netns: 9,
            process: None,
            ino: 0,
            state: Some(state),
            local: "127.0.0.1:40000".parse().unwrap(),
            remote: "127.0.0.1:8080".parse().unwrap(),
            detail,
        }
    }

    fn detail(active: bool, fin_acked: bool, fin_received: bool, how: u32, errno: u32) -> Detail {
        Detail::Closed {
            active,
            fin_acked,
            fin_received,
            how: match how {
                1 => Some(PreviousClose::Reset),
                2 => Some(PreviousClose::PeerClosedFirst),
                3 => Some(PreviousClose::ClosedFirst),
                4 => Some(PreviousClose::Failed),
                5 => Some(PreviousClose::Other),
                _ => None,
            },
            errno,
            bytes_acked: 102,
            bytes_received: 51,
            born_ns: 4_990_000_000,
        }
    }

    #[test]
    fn the_syn_and_fins_the_kernel_counts_are_taken_off_the_payload() {
        // What ss -ti showed for a client that sent 100 bytes, received 50 and closed
        // first: bytes_acked 102 (SYN, 100, FIN), bytes_received 50 (the peer's FIN had not
        // come when its full socket closed, from FIN_WAIT2).
        let mut d = detail(true, true, false, 3, 0);
        if let Detail::Closed { bytes_received, .. } = &mut d {
            *bytes_received = 50;
        }
        let c = from_event(&closed(TcpState::FinWait2, d), 4_000_000_000, None).unwrap();
        assert_eq!((c.tx_bytes, c.rx_bytes), (100, 50));
        assert_eq!((c.t_us, c.duration_us), (1_000_000, 10_000));
        assert_eq!((c.opened, c.ended), (Opened::Connect, Ended::ClosedFirst));
        // The server of that connection: accepted, closed from LAST_ACK once its FIN was
        // acknowledged; bytes_acked 50 (no SYN counted for a passive open) + FIN, received
        // 100 + the client's FIN.
        let mut d = detail(false, true, true, 2, 0);
        if let Detail::Closed {
            bytes_acked,
            bytes_received,
            ..
        } = &mut d
        {
            (*bytes_acked, *bytes_received) = (51, 101);
        }
        let c = from_event(&closed(TcpState::LastAck, d), 0, None).unwrap();
        assert_eq!((c.tx_bytes, c.rx_bytes), (50, 100));
        assert_eq!(
            (c.opened, c.ended),
            (Opened::Accept, Ended::PeerClosedFirst)
        );
    }

    #[test]
    fn resets_timeouts_and_failed_connects_say_how_they_ended() {
        let c = |state, d| from_event(&closed(state, d), 0, None).unwrap();
        let reset_here = c(TcpState::Established, detail(true, false, false, 1, 0));
        assert_eq!(reset_here.ended, Ended::ResetSent);
        // SO_LINGER 0: closed from ESTABLISHED with no error, the reset sent after.
        let abort = c(TcpState::Established, detail(true, false, false, 5, 0));
        assert_eq!(abort.ended, Ended::ResetSent);
        // 101 acknowledged: the SYN and 100 bytes; no FIN was acknowledged.
        assert_eq!(reset_here.tx_bytes, 101);
        let reset_there = c(TcpState::Established, detail(false, false, false, 5, 104));
        assert_eq!(
            (reset_there.ended, reset_there.errno),
            (Ended::ResetReceived, Some(104))
        );
        assert_eq!(
            c(TcpState::Established, detail(true, false, false, 5, 110)).ended,
            Ended::TimedOut
        );
        let failed = c(TcpState::SynSent, detail(true, false, false, 4, 111));
        assert_eq!(failed.ended, Ended::Failed);
        // Never established: nothing of bytes_acked is a SYN to take off.
        assert_eq!(failed.tx_bytes, 102);
        let mut t = Totals::default();
        t.add(&reset_here);
        t.add(&reset_there);
        assert_eq!(
            (t.connections, t.opened_by_connect, t.tx_bytes, t.rx_bytes),
            (2, 1, 101 + 102, 51 + 51)
        );
    }

    #[test]
    fn other_events_are_no_connection() {
        let mut e = closed(TcpState::Established, Detail::ZeroWindow);
        assert_eq!(from_event(&e, 0, None), None);
        e.detail = Detail::ResetReceived;
        assert_eq!(from_event(&e, 0, None), None);
    }
}
