//! What limited each busy connection: the receiver's window, the send buffer, the network
//! or the application, from the kernel's sending chronographs in `tcp_info`. Pure: a census
//! (and an earlier one) in, [`Transfers`] and findings out; no I/O, no clock.
//!
//! The kernel times three states of a sender (`tcp_chrono_start`, net/ipv4/tcp_output.c;
//! read by `tcp_get_info_chrono_stats`, net/ipv4/tcp.c), in jiffies (4 ms at HZ=250):
//!
//! - `tcpi_busy_time`: data queued or in flight (from the first byte written into an empty
//!   queue until everything is acknowledged). It includes the two below.
//! - `tcpi_rwnd_limited`: data waiting that the peer's receive window did not let out
//!   (`tcp_write_xmit`): the receiver, not the network, sets the pace.
//! - `tcpi_sndbuf_limited`: the application blocked on a full send buffer while everything in
//!   it was sent and the congestion window was not full (`tcp_cwnd_validate`), until ACKs
//!   freed a third of the buffer (`tcp_check_space`).
//!
//! What is left of the busy time is data in flight, or held by the congestion window or
//! pacing: the network's share. Between two censuses, the time the connection was not busy
//! is the application's: it had nothing to send.
//!
//! Each busy connection (see [`BUSY_FLOOR`] and [`BYTES_FLOOR`]) is named after the largest
//! share. When that is the in-flight share, the sender's state at the censuses says what held
//! it ([`Holding`]): data written but not sent, or a full congestion window, is the network's;
//! nothing unsent, the window open and the send buffer full is the send buffer's (measured on
//! 6.18: a writer with an 8 KiB SO_SNDBUF over loopback, one 64 KiB segment in flight per
//! delayed ACK, 10 MB/s, has 0 ms `sndbuf_limited` in 2.5 s of busy time; over a 40 ms path
//! with a 32 KiB buffer, 5 to 23%: the chronograph stops as soon as a third of the buffer is
//! free, while the buffer still caps what is in flight); nothing unsent and room in the buffer
//! is the application's.
//!
//! With one census the times are over each connection's life and only connections active now
//! are considered; findings need two censuses (a window: `sockets --watch`, `doctor`, the
//! exporter), so that the time held is the window's, not some earlier hour's:
//! `slow_reader` (the receiver's window held a transfer: its reader named when its socket is in
//! the census), `send_buffer_limited`, and for transfers the network held,
//! `retransmission` (with loss) and `network_latency` (a queue on the path). A limit is a
//! finding once it held a transfer [`HELD_FLOOR`] or more in the window; its severity follows
//! the share of the window it held (the policy's time lost), so that a 1 s watch, doctor's 2 s
//! and the exporter's longer windows judge the same transfer alike.

use std::collections::{BTreeMap, HashMap};
use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use serde::Serialize;
use tcpdoctor_model::policy::{SHARE_COMMON, STALL_WARNING};
use tcpdoctor_model::{Evidence, Finding, Impact, Pathology, Source};
use tcpdoctor_report::fmt;

use super::{canonical, who, Owner, Socket, TcpInfo, TcpState};

/// Busy time below which a connection is not classified: 25 jiffies at HZ=250 (10 at
/// HZ=100), so each share is known to 4% (10%) of the busy time, and a connection busy for
/// less than half the RTO floor has not waited on anything a user would see.
pub const BUSY_FLOOR: Duration = Duration::from_millis(100);

/// Bytes delivered in the span plus bytes queued now (Send-Q) below which a connection is not
/// a transfer: 64 KiB is the receive window a connection starts with (`tcp_rmem`'s default
/// 128 KiB, half of it for data), so a smaller exchange is never held by a window or a buffer
/// for long.
pub const BYTES_FLOOR: u64 = 64 * 1024;

/// Time held by one limit in the window from which it is a finding: the policy's
/// [`STALL_WARNING`] (200 ms, the RTO floor).
pub const HELD_FLOOR: Duration = STALL_WARNING;

/// With one census, a connection counts only if it has data queued now or sent some within
/// this long (`tcpi_last_data_sent`): its life's shares then describe a transfer in progress,
/// not an idle session's past.
pub const ACTIVE_WITHIN: Duration = Duration::from_secs(1);

/// How many transfers a finding lists.
const EXAMPLES: usize = 10;

/// What the times cover.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Span {
    /// The interval between two censuses (counter growth).
    Window,
    /// The connection's life: one census, or a connection opened since the earlier census.
    Life,
}

/// What limited a transfer.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Limit {
    /// The peer's receive window: its reader did not keep up.
    ReceiverWindow,
    /// The sender's send buffer (SO_SNDBUF, tcp_wmem).
    SendBuffer,
    /// Data in flight, or held by the congestion window or pacing.
    Network,
    /// The application: it had nothing (more) to send.
    Application,
}

impl Limit {
    pub const ALL: [Limit; 4] = [
        Limit::ReceiverWindow,
        Limit::SendBuffer,
        Limit::Network,
        Limit::Application,
    ];

    /// The snake_case name, as in JSON.
    pub fn name(self) -> &'static str {
        match self {
            Limit::ReceiverWindow => "receiver_window",
            Limit::SendBuffer => "send_buffer",
            Limit::Network => "network",
            Limit::Application => "application",
        }
    }

    /// For human output.
    pub fn describe(self) -> &'static str {
        match self {
            Limit::ReceiverWindow => "receiver window",
            Limit::SendBuffer => "send buffer",
            Limit::Network => "network",
            Limit::Application => "application",
        }
    }
}

/// How the limit was named.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Basis {
    /// The largest share of the kernel's times (or, in a window, of the idle time).
    KernelTime,
    /// The in-flight share was the largest and the sender's state at the censuses says what
    /// held it ([`Holding`]).
    CensusState,
}

/// What held a sender's data at one census.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Holding {
    /// Nothing queued (Send-Q 0).
    Idle,
    /// Data written but not sent with the peer's window full (`tcpi_snd_wnd` reached).
    ReceiverWindow,
    /// Data written but not sent (`tcpi_notsent_bytes` of a segment or more), the congestion
    /// window full, lost segments not yet resent, or half the queued memory or more still in
    /// this host's qdisc or device queue (`sk_wmem_alloc`).
    Network,
    /// Nothing unsent, the congestion window open and the send buffer full: the kernel does
    /// not wake a writer (`sk_stream_wspace` < `sk_stream_min_wspace`, include/net/sock.h:
    /// less than a third of `SO_SNDBUF` free).
    SendBuffer,
    /// Nothing unsent, the window open, room in the buffer: the application has not written.
    Application,
}

/// The reader of a transfer, when its socket is in the census (same host and namespace).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Reader {
    pub local: SocketAddr,
    pub recv_q_bytes: u32,
    pub rcv_wnd_bytes: Option<u32>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub owners: Vec<Owner>,
}

/// One busy connection and what limited it.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Transfer {
    pub state: TcpState,
    pub local: SocketAddr,
    pub remote: SocketAddr,
    pub span: Span,
    /// What the shares are of: the window, or (life) the busy time.
    pub observed_us: u64,
    pub busy_us: u64,
    pub rwnd_limited_us: u64,
    pub sndbuf_limited_us: u64,
    /// Busy, neither receive-window- nor send-buffer-limited.
    pub in_flight_us: u64,
    /// Window only: not busy (nothing queued).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub idle_us: Option<u64>,
    pub limit: Limit,
    pub basis: Basis,
    /// The limit's share of `observed_us` (for [`Basis::CensusState`], the in-flight share).
    pub limit_share: f64,
    /// Bytes acknowledged in the span.
    pub bytes_acked: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bytes_retrans: Option<u64>,
    /// Segments retransmitted in the span (`tcpi_total_retrans` growth).
    pub retrans_segs: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub data_segs_out: Option<u64>,
    /// Retransmission timeouts in the span (`tcpi_total_rto` growth, Linux 6.7+).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rto_timeouts: Option<u64>,
    pub rtt_us: u32,
    pub rttvar_us: u32,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub min_rtt_us: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub delivery_rate_bytes_per_s: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub delivery_rate_app_limited: Option<bool>,
    pub cwnd_segs: u32,
    /// `None` before the first loss (the kernel's "infinite" ssthresh).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ssthresh_segs: Option<u32>,
    pub unacked_segs: u32,
    pub lost_segs: u32,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub notsent_bytes: Option<u32>,
    pub send_q_bytes: u32,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sndbuf_bytes: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub wmem_queued_bytes: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub wmem_alloc_bytes: Option<u32>,
    /// What held its data at the earlier census (when in it) and at this one.
    pub holding: Vec<Holding>,
    /// The writer: the processes holding this socket.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub owners: Vec<Owner>,
    /// The reader, when its socket is in this census.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reader: Option<Reader>,
}

impl Transfer {
    /// Share of the observed time.
    pub fn share(&self, us: u64) -> f64 {
        if self.observed_us == 0 {
            0.0
        } else {
            us as f64 / self.observed_us as f64
        }
    }

    /// `srtt - min_rtt`: the queue the data waited in on the path, beyond its fastest round
    /// trip (the kernel keeps `min_rtt` over `tcp_min_rtt_wlen`, 300 s).
    pub fn queueing_delay(&self) -> Option<Duration> {
        let min = self.min_rtt_us?;
        Some(Duration::from_micros(u64::from(
            self.rtt_us.saturating_sub(min),
        )))
    }
}

/// The busy connections of a census and what limited each.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Transfers {
    /// Window (two censuses) or life (one census).
    pub span: Span,
    pub busy_floor_us: u64,
    pub bytes_floor: u64,
    /// Data-carrying sockets whose `tcp_info` has no chronographs (kernels before 4.10).
    pub without_chronographs: u64,
    /// Busy connections, the most held by a limit first.
    pub busy: Vec<Transfer>,
    pub by_limit: BTreeMap<Limit, u64>,
}

/// The figures of one socket over the span.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
struct Growth {
    busy: u64,
    rwnd: u64,
    sndbuf: u64,
    acked: u64,
    retrans_bytes: Option<u64>,
    retrans_segs: u64,
    segs_out: Option<u64>,
    rto: Option<u64>,
}

/// A socket's counters since it connected; `None` without chronographs.
fn totals(i: &TcpInfo) -> Option<Growth> {
    Some(Growth {
        busy: i.busy_time_us?,
        rwnd: i.rwnd_limited_us.unwrap_or(0),
        sndbuf: i.sndbuf_limited_us.unwrap_or(0),
        acked: i.bytes_acked.unwrap_or(0),
        retrans_bytes: i.bytes_retrans,
        retrans_segs: u64::from(i.total_retrans),
        segs_out: i.data_segs_out.map(u64::from),
        rto: i.total_rto.map(u64::from),
    })
}

/// The counters of `now`, less those of `before` when it is the same connection (no counter
/// went back: else a new connection on the same 4-tuple), and whether `before` was; `None`
/// without chronographs.
fn growth(now: &Socket, before: Option<&Socket>) -> Option<(Growth, bool)> {
    let g = totals(now.info.as_ref()?)?;
    let Some(b) = before
        .and_then(|b| b.info.as_deref())
        .and_then(totals)
        .filter(|b| b.busy <= g.busy && b.acked <= g.acked && b.retrans_segs <= g.retrans_segs)
    else {
        return Some((g, false));
    };
    let sub = |a: Option<u64>, b: Option<u64>| Some(a?.saturating_sub(b?));
    Some((
        Growth {
            busy: g.busy - b.busy,
            rwnd: g.rwnd.saturating_sub(b.rwnd),
            sndbuf: g.sndbuf.saturating_sub(b.sndbuf),
            acked: g.acked - b.acked,
            retrans_bytes: sub(g.retrans_bytes, b.retrans_bytes),
            retrans_segs: g.retrans_segs - b.retrans_segs,
            segs_out: sub(g.segs_out, b.segs_out),
            rto: sub(g.rto, b.rto),
        },
        true,
    ))
}

/// What held `x`'s data at its census; `None` without the fields to tell.
pub fn holding(x: &Socket) -> Option<Holding> {
    let i = x.info.as_ref()?;
    if x.send_q == 0 {
        return Some(Holding::Idle);
    }
    let mss = i.snd_mss_bytes.max(1);
    let notsent = i.notsent_bytes?;
    if notsent >= mss {
        let unacked_bytes = x.send_q.saturating_sub(notsent);
        if i.snd_wnd_bytes.is_some_and(|w| unacked_bytes + mss > w) {
            return Some(Holding::ReceiverWindow);
        }
        return Some(Holding::Network);
    }
    // tcp_packets_in_flight (include/net/tcp.h).
    let in_flight = (i.unacked_segs + i.retrans_segs).saturating_sub(i.sacked_segs + i.lost_segs);
    if in_flight >= i.snd_cwnd_segs || i.lost_segs > i.retrans_segs {
        return Some(Holding::Network);
    }
    // Half or more of the queued memory still on this host, in a qdisc or device queue: this
    // host's own interface holds the data (measured on 6.18 behind a local 20 Mbit/s tbf:
    // sk_wmem_alloc at 0.8 to 1.7 times sk_wmem_queued at ten instants; 0 behind a remote
    // bottleneck and over loopback).
    if let (Some(a), Some(q)) = (x.wmem_alloc_bytes, x.wmem_queued_bytes) {
        if a > 0 && u64::from(a) * 2 >= u64::from(q) {
            return Some(Holding::Network);
        }
    }
    let full = match (x.wmem_queued_bytes, x.sndbuf_bytes) {
        (Some(q), Some(buf)) => u64::from(q) * 3 >= u64::from(buf) * 2,
        _ => false,
    };
    Some(if full {
        Holding::SendBuffer
    } else {
        Holding::Application
    })
}

/// The limit of a connection from its times (`idle` in a window only), what held it at the
/// censuses, and whether it retransmitted in the span. Pure; the rules are the module docs'.
pub fn classify(
    busy: u64,
    rwnd: u64,
    sndbuf: u64,
    idle: Option<u64>,
    holding: &[Holding],
    lossy: bool,
) -> (Limit, Basis, f64) {
    let in_flight = busy.saturating_sub(rwnd).saturating_sub(sndbuf);
    let observed = busy + idle.unwrap_or(0);
    let share = |us: u64| {
        if observed == 0 {
            0.0
        } else {
            us as f64 / observed as f64
        }
    };
    // Ties go to the named limit (listed first).
    let candidates = [
        (Some(Limit::ReceiverWindow), rwnd),
        (Some(Limit::SendBuffer), sndbuf),
        (Some(Limit::Application), idle.unwrap_or(0)),
        (None, in_flight),
    ];
    let (limit, us) =
        candidates
            .iter()
            .copied()
            .fold((None, 0u64), |best, c| if c.1 > best.1 { c } else { best });
    if let Some(l) = limit.filter(|_| us > 0) {
        return (l, Basis::KernelTime, share(us));
    }
    // A census that found nothing queued (Idle) says nothing against a full buffer at the
    // other; any sign of the network, or of loss, makes the in-flight time the network's.
    let seen = |h: Holding| holding.contains(&h);
    let queued: Vec<Holding> = holding
        .iter()
        .copied()
        .filter(|h| *h != Holding::Idle)
        .collect();
    let by_state = if lossy || seen(Holding::Network) || seen(Holding::ReceiverWindow) {
        None
    } else if !queued.is_empty() && queued.iter().all(|h| *h == Holding::SendBuffer) {
        Some(Limit::SendBuffer)
    } else if !holding.is_empty() && queued.iter().all(|h| *h == Holding::Application) {
        Some(Limit::Application)
    } else {
        None
    };
    match by_state {
        Some(l) => (l, Basis::CensusState, share(in_flight)),
        None => (Limit::Network, Basis::KernelTime, share(in_flight)),
    }
}

type Key = (IpAddr, u16, IpAddr, u16);

fn key(local: SocketAddr, remote: SocketAddr) -> Key {
    (
        canonical(local.ip()),
        local.port(),
        canonical(remote.ip()),
        remote.port(),
    )
}

/// The busy connections of `sockets`. `before` holds the earlier census's connections by
/// 4-tuple and `window` the interval between the censuses (both `None` for one census).
pub fn transfers(
    sockets: &[Socket],
    before: Option<&HashMap<(SocketAddr, SocketAddr), &Socket>>,
    window: Option<Duration>,
) -> Transfers {
    let window_us = window.map(|w| u64::try_from(w.as_micros()).unwrap_or(u64::MAX));
    let by_key: HashMap<Key, &Socket> = sockets
        .iter()
        .filter(|s| s.info.is_some() && s.state != TcpState::Listen)
        .map(|s| (key(s.local, s.remote), s))
        .collect();
    let mut busy = Vec::new();
    let mut without = 0u64;
    for s in sockets.iter().filter(|s| sends_data(s.state)) {
        let Some(i) = s.info.as_ref() else { continue };
        let earlier = before.and_then(|b| b.get(&(s.local, s.remote)).copied());
        let Some((g, continued)) = growth(s, earlier) else {
            without += 1;
            continue;
        };
        // A connection opened since the earlier census: its whole life is in the window.
        let span = if continued && window_us.is_some() {
            Span::Window
        } else {
            Span::Life
        };
        if g.busy < BUSY_FLOOR.as_micros() as u64
            || g.acked + u64::from(s.send_q) < BYTES_FLOOR
            || (window.is_none()
                && s.send_q == 0
                && u64::from(i.last_data_sent_ms) >= ACTIVE_WITHIN.as_millis() as u64)
        {
            continue;
        }
        let idle = match (span, window_us) {
            (Span::Window, Some(w)) => Some(w.saturating_sub(g.busy)),
            _ => None,
        };
        let holding: Vec<Holding> = earlier
            .filter(|_| continued)
            .and_then(holding)
            .into_iter()
            .chain(holding(s))
            .collect();
        // Loss that shaped the transfer: 1% or more of its segments resent (the policy's
        // SHARE_COMMON, as for TcpRetransSegs of TcpOutSegs); one resend in thousands is not
        // what held it.
        let lossy = g.retrans_segs > 0
            && g.segs_out
                .is_none_or(|o| g.retrans_segs as f64 >= SHARE_COMMON * o as f64);
        let (limit, basis, limit_share) = classify(g.busy, g.rwnd, g.sndbuf, idle, &holding, lossy);
        let reader = by_key.get(&key(s.remote, s.local)).map(|p| Reader {
            local: p.local,
            recv_q_bytes: p.recv_q,
            rcv_wnd_bytes: p.info.as_ref().and_then(|i| i.rcv_wnd_bytes),
            owners: p.owners.clone(),
        });
        busy.push(Transfer {
            state: s.state,
            local: s.local,
            remote: s.remote,
            span,
            observed_us: g.busy + idle.unwrap_or(0),
            busy_us: g.busy,
            rwnd_limited_us: g.rwnd,
            sndbuf_limited_us: g.sndbuf,
            in_flight_us: g.busy.saturating_sub(g.rwnd).saturating_sub(g.sndbuf),
            idle_us: idle,
            limit,
            basis,
            limit_share,
            bytes_acked: g.acked,
            bytes_retrans: g.retrans_bytes,
            retrans_segs: g.retrans_segs,
            data_segs_out: g.segs_out,
            rto_timeouts: g.rto,
            rtt_us: i.rtt_us,
            rttvar_us: i.rttvar_us,
            min_rtt_us: i.min_rtt_us,
            delivery_rate_bytes_per_s: i.delivery_rate_bytes_per_s,
            delivery_rate_app_limited: i.delivery_rate_app_limited,
            cwnd_segs: i.snd_cwnd_segs,
            ssthresh_segs: (i.snd_ssthresh_segs < 0x7fff_ffff).then_some(i.snd_ssthresh_segs),
            unacked_segs: i.unacked_segs,
            lost_segs: i.lost_segs,
            notsent_bytes: i.notsent_bytes,
            send_q_bytes: s.send_q,
            sndbuf_bytes: s.sndbuf_bytes,
            wmem_queued_bytes: s.wmem_queued_bytes,
            wmem_alloc_bytes: s.wmem_alloc_bytes,
            holding,
            owners: s.owners.clone(),
            reader,
        });
    }
    busy.sort_by(|a, b| {
        let held = |t: &Transfer| t.rwnd_limited_us + t.sndbuf_limited_us;
        held(b)
            .cmp(&held(a))
            .then(b.busy_us.cmp(&a.busy_us))
            .then(a.local.cmp(&b.local))
    });
    let mut by_limit = BTreeMap::new();
    for t in &busy {
        *by_limit.entry(t.limit).or_default() += 1;
    }
    Transfers {
        span: if window.is_some() {
            Span::Window
        } else {
            Span::Life
        },
        busy_floor_us: BUSY_FLOOR.as_micros() as u64,
        bytes_floor: BYTES_FLOOR,
        without_chronographs: without,
        busy,
        by_limit,
    }
}

/// Round trips and sending times of the established sockets toward one destination (the
/// exporter's per-destination RTT and limited-time shares).
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct PathStats {
    /// ESTABLISHED sockets toward it that carry `tcp_info`.
    pub sockets: u64,
    /// Their smoothed RTT (`tcpi_rtt`): the mean and the largest.
    pub rtt_us_mean: u64,
    pub rtt_us_max: u64,
    /// The fastest round trip any of them has seen (`tcpi_min_rtt`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub min_rtt_us: Option<u32>,
    /// Between two censuses: their busy, receive-window-limited and send-buffer-limited
    /// time, summed (a connection opened since the earlier census counts its whole life).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub busy_us: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rwnd_limited_us: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sndbuf_limited_us: Option<u64>,
    #[serde(skip)]
    rtt_sum_us: u64,
}

impl PathStats {
    /// Several destinations' statistics as one (the exporter's `destination="other"`): the
    /// mean RTT over all their sockets, the largest RTT, the fastest round trip, the times
    /// summed.
    pub fn combined<'a>(all: impl IntoIterator<Item = &'a PathStats>) -> Option<PathStats> {
        let mut out: Option<PathStats> = None;
        for p in all {
            let o = out.get_or_insert_with(PathStats::default);
            o.sockets += p.sockets;
            o.rtt_sum_us += p.rtt_sum_us;
            o.rtt_us_mean = o.rtt_sum_us / o.sockets.max(1);
            o.rtt_us_max = o.rtt_us_max.max(p.rtt_us_max);
            o.min_rtt_us = match (o.min_rtt_us, p.min_rtt_us) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            };
            let add = |a: Option<u64>, b: Option<u64>| match (a, b) {
                (Some(a), Some(b)) => Some(a + b),
                (a, b) => a.or(b),
            };
            o.busy_us = add(o.busy_us, p.busy_us);
            o.rwnd_limited_us = add(o.rwnd_limited_us, p.rwnd_limited_us);
            o.sndbuf_limited_us = add(o.sndbuf_limited_us, p.sndbuf_limited_us);
        }
        out
    }

    /// Counts `s` (any socket toward the destination; only ESTABLISHED ones with `tcp_info`
    /// count); `earlier` is its entry in the earlier census, `windowed` whether there is one.
    pub fn add(
        stats: &mut Option<PathStats>,
        s: &Socket,
        earlier: Option<&Socket>,
        windowed: bool,
    ) {
        if s.state != TcpState::Established {
            return;
        }
        let Some(i) = s.info.as_ref() else { return };
        let p = stats.get_or_insert_with(PathStats::default);
        p.sockets += 1;
        p.rtt_sum_us += u64::from(i.rtt_us);
        p.rtt_us_max = p.rtt_us_max.max(u64::from(i.rtt_us));
        p.rtt_us_mean = p.rtt_sum_us / p.sockets;
        if let Some(m) = i.min_rtt_us.filter(|&m| m > 0) {
            p.min_rtt_us = Some(p.min_rtt_us.map_or(m, |x| x.min(m)));
        }
        if windowed {
            if let Some((g, _)) = growth(s, earlier) {
                *p.busy_us.get_or_insert(0) += g.busy;
                *p.rwnd_limited_us.get_or_insert(0) += g.rwnd;
                *p.sndbuf_limited_us.get_or_insert(0) += g.sndbuf;
            }
        }
    }
}

/// States in which a socket may still send data.
fn sends_data(state: TcpState) -> bool {
    matches!(
        state,
        TcpState::Established
            | TcpState::CloseWait
            | TcpState::FinWait1
            | TcpState::LastAck
            | TcpState::Closing
    )
}

/// `local -> remote held 1.8 s of 2.0 s (91%), 1.2 MiB acknowledged (python3 pid 7)`.
fn line(t: &Transfer, held: u64) -> String {
    format!(
        "{} -> {} held {} of {} busy ({:.0}% of the {}), {} acknowledged{}",
        t.local,
        t.remote,
        fmt::micros(held),
        fmt::micros(t.busy_us),
        100.0 * t.share(held),
        match t.span {
            Span::Window => format!("{} window", fmt::micros(t.observed_us)),
            Span::Life => "connection's busy life".to_string(),
        },
        fmt::bytes(t.bytes_acked),
        if t.owners.is_empty() {
            String::new()
        } else {
            format!(" ({})", who(&t.owners))
        }
    )
}

fn max_held(ts: &[&Transfer], f: impl Fn(&Transfer) -> u64) -> Duration {
    Duration::from_micros(ts.iter().map(|t| f(t)).max().unwrap_or(0))
}

/// The largest share of its observed time (the window) a limit held one transfer.
fn max_share(ts: &[&Transfer], f: impl Fn(&Transfer) -> u64) -> f64 {
    ts.iter().map(|t| t.share(f(t))).fold(0.0, f64::max)
}

/// What a limit's time held cost, for the policy: the share of its window the worst transfer
/// was held, as time lost (10% or more: critical; 1%: warning). The time is a sum of waits
/// the kernel does not keep apart, and it grows with the window: a share judges a transfer
/// alike in a 1 s `--watch`, doctor's 2 s and the exporter's 15 s.
fn held_impact(ts: &[&Transfer], observed: u64, f: impl Fn(&Transfer) -> u64) -> Impact {
    Impact::stalls(ts.len() as u64, Some(observed), None).with_time_lost(max_share(ts, f))
}

/// The findings the transfers of a window support (module docs); none for one census.
pub fn findings(tr: &Transfers) -> Vec<Finding> {
    if tr.span != Span::Window {
        return Vec::new();
    }
    let floor = HELD_FLOOR.as_micros() as u64;
    let observed = tr.busy.len() as u64;
    let mut out = Vec::new();

    let held: Vec<&Transfer> = tr
        .busy
        .iter()
        .filter(|t| t.rwnd_limited_us >= floor)
        .collect();
    if !held.is_empty() {
        out.push(receiver_finding(&held, observed));
    }
    let buffer: Vec<&Transfer> = tr
        .busy
        .iter()
        .filter(|t| {
            t.sndbuf_limited_us >= floor
                || (t.limit == Limit::SendBuffer && t.basis == Basis::CensusState)
        })
        .collect();
    if !buffer.is_empty() {
        out.push(buffer_finding(&buffer, observed));
    }
    let network: Vec<&Transfer> = tr
        .busy
        .iter()
        .filter(|t| t.limit == Limit::Network)
        .collect();
    let lossy: Vec<&Transfer> = network
        .iter()
        .copied()
        .filter(|t| t.retrans_segs > 0)
        .collect();
    if !lossy.is_empty() {
        out.push(loss_finding(&lossy));
    }
    let queued: Vec<&Transfer> = network
        .iter()
        .copied()
        .filter(|t| t.queueing_delay().is_some_and(|d| d >= HELD_FLOOR))
        .collect();
    if !queued.is_empty() {
        let worst = queued
            .iter()
            .filter_map(|t| t.queueing_delay())
            .max()
            .unwrap_or_default();
        out.push(
            Finding::new(
                Pathology::NetworkLatency,
                Source::Sockets,
                format!(
                    "{} transfer(s) limited by the network waited in a queue on the path: smoothed RTT up to {} above the fastest round trip seen",
                    queued.len(),
                    fmt::duration(worst)
                ),
                Impact::stalls(queued.len() as u64, Some(observed), Some(worst)),
            )
            .with_evidence(Evidence::Examples {
                what: "transfers (local -> remote: srtt, min_rtt)".into(),
                items: queued
                    .iter()
                    .take(EXAMPLES)
                    .map(|t| {
                        format!(
                            "{} -> {}: srtt {}, min_rtt {}",
                            t.local,
                            t.remote,
                            fmt::micros(u64::from(t.rtt_us)),
                            fmt::micros(u64::from(t.min_rtt_us.unwrap_or(0)))
                        )
                    })
                    .collect(),
            }),
        );
    }
    out
}

/// `slow_reader` from transfers the receiver's window held: the time held is the harm.
fn receiver_finding(held: &[&Transfer], observed: u64) -> Finding {
    let worst = max_held(held, |t| t.rwnd_limited_us);
    let readers: Vec<&Owner> = held
        .iter()
        .filter_map(|t| t.reader.as_ref())
        .flat_map(|r| r.owners.iter())
        .collect();
    let remote: Vec<&&Transfer> = held.iter().filter(|t| t.reader.is_none()).collect();
    let mut summary = format!(
        "{} transfer(s) held by the receiver's window for up to {} in the window, {:.0}% of it (tcpi_rwnd_limited)",
        held.len(),
        fmt::duration(worst),
        100.0 * max_share(held, |t| t.rwnd_limited_us)
    );
    if let Some(o) = readers.first() {
        summary.push_str(&format!("; not reading: {} pid {}", o.comm, o.pid));
    }
    if let Some(t) = remote.first() {
        summary.push_str(&format!(
            "; reader {}: not in this census (another host or namespace)",
            t.remote
        ));
    }
    if let Some(o) = held.iter().flat_map(|t| t.owners.iter()).next() {
        summary.push_str(&format!("; writer waiting: {} pid {}", o.comm, o.pid));
    }
    Finding::new(
        Pathology::SlowReader,
        Source::Sockets,
        summary,
        held_impact(held, observed, |t| t.rwnd_limited_us),
    )
    .with_evidence(Evidence::Timing {
        what: "longest time a transfer's data waited for the receiver's window to open (its tcpi_rwnd_limited growth between the censuses; the kernel keeps the total, not each wait)".into(),
        count: held.len() as u64,
        value_us: worst.as_micros() as u64,
    })
    .with_evidence(Evidence::Examples {
        what: "transfers held by the receiver's window (writer -> reader)".into(),
        items: held
            .iter()
            .take(EXAMPLES)
            .map(|t| {
                let reader = match &t.reader {
                    Some(r) => format!(
                        "; reader's Recv-Q {}{}",
                        fmt::bytes(u64::from(r.recv_q_bytes)),
                        if r.owners.is_empty() {
                            String::new()
                        } else {
                            format!(", not reading: {}", who(&r.owners))
                        }
                    ),
                    None => String::new(),
                };
                format!("{}{reader}", line(t, t.rwnd_limited_us))
            })
            .collect(),
    })
}

/// `send_buffer_limited`: the kernel's sndbuf-limited time, or the buffer full at the
/// censuses with nothing else holding the data (then the time is not measured).
fn buffer_finding(ts: &[&Transfer], observed: u64) -> Finding {
    let worst = max_held(ts, |t| t.sndbuf_limited_us);
    let timed = worst >= HELD_FLOOR;
    let impact = if timed {
        held_impact(ts, observed, |t| t.sndbuf_limited_us)
    } else {
        Impact::stalls(ts.len() as u64, Some(observed), None)
    };
    let mut summary = if timed {
        format!(
            "{} transfer(s) held by their send buffer for up to {} in the window, {:.0}% of it (tcpi_sndbuf_limited)",
            ts.len(),
            fmt::duration(worst),
            100.0 * max_share(ts, |t| t.sndbuf_limited_us)
        )
    } else {
        format!(
            "{} transfer(s) held by their send buffer: at the censuses the buffer was full, nothing waited unsent and the congestion window was open (the kernel's tcpi_sndbuf_limited counted under {})",
            ts.len(),
            fmt::duration(HELD_FLOOR)
        )
    };
    if let Some(o) = ts.iter().flat_map(|t| t.owners.iter()).next() {
        summary.push_str(&format!("; writer: {} pid {}", o.comm, o.pid));
    }
    Finding::new(
        Pathology::SendBufferLimited,
        Source::Sockets,
        summary,
        impact,
    )
    .with_evidence(Evidence::Examples {
        what: "transfers held by their send buffer (send buffer: queued / SO_SNDBUF)".into(),
        items: ts
            .iter()
            .take(EXAMPLES)
            .map(|t| {
                let what = if t.sndbuf_limited_us >= HELD_FLOOR.as_micros() as u64 {
                    line(t, t.sndbuf_limited_us)
                } else {
                    format!(
                        "{} -> {} busy {}, {:.0}% of it in flight with the buffer full (the kernel counted {} sndbuf-limited), {} acknowledged{}",
                        t.local,
                        t.remote,
                        fmt::micros(t.busy_us),
                        100.0 * t.in_flight_us as f64 / t.busy_us.max(1) as f64,
                        fmt::micros(t.sndbuf_limited_us),
                        fmt::bytes(t.bytes_acked),
                        if t.owners.is_empty() {
                            String::new()
                        } else {
                            format!(" ({})", who(&t.owners))
                        }
                    )
                };
                format!(
                    "{what}; send buffer {} / {}, {} unsent, {} of cwnd {} in flight",
                    t.wmem_queued_bytes
                        .map_or("?".into(), |q| fmt::bytes(u64::from(q))),
                    t.sndbuf_bytes
                        .map_or("?".into(), |b| fmt::bytes(u64::from(b))),
                    t.notsent_bytes
                        .map_or("?".into(), |n| fmt::bytes(u64::from(n))),
                    t.unacked_segs,
                    t.cwnd_segs
                )
            })
            .collect(),
    })
}

/// `retransmission` for network-limited transfers that lost data: segments resent of those
/// sent, as the counters judge `TcpRetransSegs` of `TcpOutSegs`.
fn loss_finding(ts: &[&Transfer]) -> Finding {
    let resent: u64 = ts.iter().map(|t| t.retrans_segs).sum();
    let sent = ts.iter().map(|t| t.data_segs_out).sum::<Option<u64>>();
    let bytes: u64 = ts.iter().filter_map(|t| t.bytes_retrans).sum();
    let rto: u64 = ts.iter().filter_map(|t| t.rto_timeouts).sum();
    Finding::new(
        Pathology::Retransmission,
        Source::Sockets,
        format!(
            "{} transfer(s) limited by the network lost data: {resent} segment(s) ({}) resent{} in the window{}",
            ts.len(),
            fmt::bytes(bytes),
            sent.map_or(String::new(), |s| format!(" of {s} sent")),
            if rto > 0 {
                format!(", {rto} after a retransmission timeout")
            } else {
                String::new()
            }
        ),
        Impact::stalls(resent, sent.filter(|&s| s > 0), None),
    )
    .with_evidence(Evidence::Examples {
        what: "transfers (local -> remote: resent, RTT, congestion window)".into(),
        items: ts
            .iter()
            .take(EXAMPLES)
            .map(|t| {
                format!(
                    "{} -> {}: {} segment(s) resent, srtt {} (min {}), cwnd {}{}{}",
                    t.local,
                    t.remote,
                    t.retrans_segs,
                    fmt::micros(u64::from(t.rtt_us)),
                    t.min_rtt_us
                        .map_or("?".into(), |m| fmt::micros(u64::from(m))),
                    t.cwnd_segs,
                    t.ssthresh_segs
                        .map_or(String::new(), |s| format!(", ssthresh {s}")),
                    if t.owners.is_empty() {
                        String::new()
                    } else {
                        format!(" ({})", who(&t.owners))
                    }
                )
            })
            .collect(),
    })
}

#[cfg(test)]
mod tests;
