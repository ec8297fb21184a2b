//! What the census can prove about one socket, alone or beside its earlier self: how long
//! it has been in TIME_WAIT or waited in RTO backoff, whether it sits unaccepted in a
//! listener's queue, and the signs of a slow reader (a closed window, unread data that
//! persisted). Pure: each answer comes from the socket's own fields and kernel timers.

use std::net::SocketAddr;
use std::time::Duration;

use super::{FlaggedSocket, Listener, SlowSign};
use crate::sockets::{canonical, Socket, TcpState, Timer};
use crate::sysctl::TIME_WAIT;

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
pub(super) fn unaccepted_sign(s: &Socket) -> bool {
    s.inode == 0 && matches!(s.state, TcpState::Established | TcpState::CloseWait)
}

/// Whether listener `l` takes connections for `dest` (its address, or any address of the
/// namespace for a wildcard listener).
pub(super) fn accepts_for(l: &Listener, dest: SocketAddr) -> bool {
    l.listening
        && l.local.port() == dest.port()
        && (l.local.ip().is_unspecified() || canonical(l.local.ip()) == canonical(dest.ip()))
}

/// SYN retransmissions of a connect in SYN_SENT (`tcpi_retransmits`, or the timer's count).
pub(super) fn syn_resends(s: &Socket) -> u8 {
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
pub(super) fn window_closed_for(s: &Socket) -> Option<Duration> {
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

pub(super) fn micros(d: Duration) -> u64 {
    u64::try_from(d.as_micros()).unwrap_or(u64::MAX)
}

/// The time a socket in RTO backoff has provably waited without an acknowledgement, from
/// `tcp_retransmit_timer` (net/ipv4/tcp_timer.c): each timeout doubles the RTO and bumps
/// `icsk_backoff`, so after `backoff` timeouts the current RTO is the first one times
/// 2^backoff and the earlier ones add up to the current RTO times (1 - 2^-backoff). Thin
/// streams (linear timeouts) keep the RTO and the backoff at 0: `retransmits` timeouts of
/// the current RTO each.
pub(super) fn backoff_wait_us(rto_us: u32, backoff: u8, retransmits: u8) -> u64 {
    let rto = u64::from(rto_us);
    if backoff > 0 {
        let b = u32::from(backoff.min(32));
        rto - (rto >> b)
    } else {
        rto * u64::from(retransmits.max(1))
    }
}

/// States in which a socket exchanges data and has meaningful windows and queues.
pub(super) fn carries_data(state: TcpState) -> bool {
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
pub(super) fn zero_window_sign(s: &Socket) -> Option<SlowSign> {
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
pub(super) fn slow_sign(s: &Socket, earlier: Option<&Socket>) -> Option<SlowSign> {
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

pub(super) fn flag(s: &Socket, sign: SlowSign, growth: Option<i64>) -> FlaggedSocket {
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
