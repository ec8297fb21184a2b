//! From a [`Census`] to a [`Summary`] (counts by state, per destination, per listener,
//! flagged sockets) and findings. Pure: no I/O, no clock; an earlier census may be passed in
//! to see queues grow.

use std::collections::{BTreeMap, HashMap};
use std::net::SocketAddr;

use serde::Serialize;
use tcpdoctor_model::{Evidence, Finding, Pathology, PortRange, Severity, Source};

use super::{canonical, Census, Socket, TcpState, Timer};
use crate::sysctl::TIME_WAIT;

/// Share of the ephemeral range held toward one destination at which `port_exhaustion` is
/// a warning: at half the range, twice the current connect rate exhausts it (ports are held
/// 60 s in TIME_WAIT, `TCP_TIMEWAIT_LEN`, include/net/tcp.h).
pub const HEADROOM_WARNING: f64 = 0.5;
/// Share at which it is critical: connect() must search a nearly full range
/// (`__inet_hash_connect`, net/ipv4/inet_hashtables.c) and soon fails with EADDRNOTAVAIL.
pub const HEADROOM_CRITICAL: f64 = 0.9;

/// How many example sockets a finding lists.
const EXAMPLES: usize = 10;

/// Outgoing sockets toward one remote ip:port.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Destination {
    pub remote: SocketAddr,
    pub sockets: u64,
    pub by_state: BTreeMap<TcpState, u64>,
    pub time_wait: u64,
    /// Sockets toward this destination whose local port lies in the ephemeral range: each
    /// holds one of the range's ports for this destination.
    pub ephemeral_ports_in_use: u64,
    /// Ports of the range still free toward this destination.
    pub headroom_ports: i64,
    pub used_percent: f64,
    /// TIME_WAIT / 60 s: the connect rate of the last minute that left this many behind.
    pub time_wait_rate_per_s: f64,
    /// Ports / 60 s: the new-connection rate this destination can sustain.
    pub sustainable_connect_rate_per_s: f64,
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
    pub inode: u32,
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
    /// Outgoing sockets grouped by remote ip:port, most ports in use first.
    pub destinations: Vec<Destination>,
    /// Listening sockets (and orphaned local services), busiest first.
    pub listeners: Vec<Listener>,
    pub slow_readers: Vec<FlaggedSocket>,
    pub retransmitting: Vec<FlaggedSocket>,
    pub undecoded_messages: u64,
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

/// Analyzes a census; `previous` (an earlier census of the same namespace) adds Recv-Q
/// growth.
pub fn analyze(census: &Census, previous: Option<&Census>) -> Analysis {
    let range = census.port_range;
    let ports = range.connect_ports();
    let tw_s = TIME_WAIT.as_secs();
    let sustainable = f64::from(ports) / TIME_WAIT.as_secs_f64();

    let mut by_state: BTreeMap<TcpState, u64> = BTreeMap::new();
    for s in &census.sockets {
        *by_state.entry(s.state).or_default() += 1;
    }

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
        });
    }
    let mut orphan_idx: HashMap<SocketAddr, usize> = HashMap::new();
    let mut dests: HashMap<SocketAddr, Destination> = HashMap::new();
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
            ephemeral_ports_in_use: 0,
            headroom_ports: 0,
            used_percent: 0.0,
            time_wait_rate_per_s: 0.0,
            sustainable_connect_rate_per_s: sustainable,
        });
        d.sockets += 1;
        *d.by_state.entry(s.state).or_default() += 1;
        if s.state == TcpState::TimeWait {
            d.time_wait += 1;
        }
        if range.contains(lport) {
            d.ephemeral_ports_in_use += 1;
        }
    }
    let mut destinations: Vec<Destination> = dests
        .into_values()
        .map(|mut d| {
            d.headroom_ports = i64::from(ports) - d.ephemeral_ports_in_use as i64;
            d.used_percent = 100.0 * d.ephemeral_ports_in_use as f64 / f64::from(ports);
            d.time_wait_rate_per_s = d.time_wait as f64 / TIME_WAIT.as_secs_f64();
            d
        })
        .collect();
    destinations.sort_by(|a, b| {
        b.ephemeral_ports_in_use
            .cmp(&a.ephemeral_ports_in_use)
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

    let before: HashMap<Key, u32> = previous
        .map(|p| p.sockets.iter().map(|s| (key(s), s.recv_q)).collect())
        .unwrap_or_default();
    let mut slow_readers = Vec::new();
    let mut retransmitting = Vec::new();
    for s in &census.sockets {
        if s.state == TcpState::SynSent {
            // A connect whose SYN went unanswered: the SYN ladder, not a data timeout.
            if s.info.as_ref().is_some_and(|i| i.retransmits > 0) || s.timer_retransmits > 0 {
                retransmitting.push(flag(s, SlowSign::SynRetransmit, None));
            }
            continue;
        }
        if !carries_data(s.state) {
            continue;
        }
        if let Some(sign) = slow_sign(s, &before) {
            let growth = before
                .get(&key(s))
                .map(|&b| i64::from(s.recv_q) - i64::from(b));
            slow_readers.push(flag(s, sign, growth));
        }
        if let Some(i) = &s.info {
            // Zero-window probing also backs off (icsk_backoff, tcp_probe_timer in
            // net/ipv4/tcp_timer.c) but is the slow reader's doing, not a loss.
            let probing = s.timer == Timer::ZeroWindowProbe || i.snd_wnd_bytes == Some(0);
            if i.retransmits > 0 || (i.backoff > 0 && !probing) {
                retransmitting.push(flag(s, SlowSign::RetransmitBackoff, None));
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
        destinations,
        listeners,
        slow_readers,
        retransmitting,
        undecoded_messages: census.undecoded_messages,
    };
    let findings = findings(&summary);
    Analysis { summary, findings }
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

fn slow_sign(s: &Socket, before: &HashMap<Key, u32>) -> Option<SlowSign> {
    let info = s.info.as_ref();
    if s.recv_q > 0 {
        match info.and_then(|i| i.rcv_wnd_bytes) {
            Some(0) => return Some(SlowSign::ZeroReceiveWindow),
            Some(_) => {}
            None => {
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
    if let Some(&b) = before.get(&key(s)) {
        if s.recv_q > b {
            return Some(SlowSign::ReceiveQueueGrowing);
        }
    }
    None
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
        inode: s.inode,
    }
}

fn findings(sum: &Summary) -> Vec<Finding> {
    let mut out = Vec::new();
    let ports = u64::from(sum.ephemeral_ports);
    for d in &sum.destinations {
        let used = d.ephemeral_ports_in_use as f64 / ports as f64;
        let severity = if used >= HEADROOM_CRITICAL {
            Severity::Critical
        } else if used >= HEADROOM_WARNING {
            Severity::Warning
        } else {
            continue;
        };
        out.push(
            Finding::legacy(
                Pathology::PortExhaustion,
                severity,
                Source::Sockets,
                format!(
                    "{} of {} ephemeral ports toward {} are in use ({} in TIME_WAIT); {} left",
                    d.ephemeral_ports_in_use, ports, d.remote, d.time_wait, d.headroom_ports
                ),
            )
            .with_evidence(Evidence::Sockets {
                state: TcpState::TimeWait.name().to_string(),
                count: d.time_wait,
                local: None,
                remote: Some(d.remote.to_string()),
                detail: Some(format!("{} sockets toward it in all states", d.sockets)),
            })
            .setting("net.ipv4.ip_local_port_range", sum.port_range)
            .arithmetic(
                format!(
                    "{ports} ports - {} in use (headroom ports)",
                    d.ephemeral_ports_in_use
                ),
                d.headroom_ports as f64,
            )
            .arithmetic(
                format!(
                    "{ports} ports / {} s TIME_WAIT (sustainable new connections per s)",
                    sum.time_wait_duration_s
                ),
                d.sustainable_connect_rate_per_s,
            )
            .arithmetic(
                format!(
                    "{} TIME_WAIT / {} s (connects per s over the last minute, at least)",
                    d.time_wait, sum.time_wait_duration_s
                ),
                d.time_wait_rate_per_s,
            ),
        );
    }
    for l in sum.listeners.iter().filter(|l| l.full) {
        let (q, b) = (l.accept_queue.unwrap_or(0), l.backlog.unwrap_or(0));
        out.push(
            Finding::legacy(
                Pathology::AcceptQueueOverflow,
                Severity::Critical,
                Source::Sockets,
                format!(
                    "listener {} has a full accept queue: {q} waiting, backlog {b}",
                    l.local
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
            }),
        );
    }
    if !sum.slow_readers.is_empty() {
        let n = sum.slow_readers.len() as u64;
        let zero = sum
            .slow_readers
            .iter()
            .filter(|f| {
                matches!(
                    f.sign,
                    SlowSign::ZeroReceiveWindow | SlowSign::PeerZeroWindow
                )
            })
            .count() as u64;
        let queued: u64 = sum
            .slow_readers
            .iter()
            .map(|f| u64::from(f.recv_q_bytes))
            .sum();
        out.push(
            Finding::legacy(
                Pathology::SlowReader,
                Severity::Warning,
                Source::Sockets,
                format!(
                    "{n} socket(s) stalled by a slow reader ({zero} at zero window, {queued} bytes unread)"
                ),
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
                items: sum
                    .slow_readers
                    .iter()
                    .take(EXAMPLES)
                    .map(|f| {
                        format!(
                            "{:?} {} -> {} {}/{}",
                            f.sign, f.local, f.remote, f.recv_q_bytes, f.send_q_bytes
                        )
                    })
                    .collect(),
            }),
        );
    }
    let syn: Vec<&FlaggedSocket> = sum
        .retransmitting
        .iter()
        .filter(|f| f.sign == SlowSign::SynRetransmit)
        .collect();
    if !syn.is_empty() {
        let n = syn.len() as u64;
        let most = syn.iter().filter_map(|f| f.retransmits).max().unwrap_or(0);
        out.push(
            Finding::legacy(
                Pathology::SynRetransmit,
                Severity::Warning,
                Source::Sockets,
                format!(
                    "{n} connect(s) in SYN_SENT have retransmitted their SYN (up to {most} times)"
                ),
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
                    .map(|f| format!("{} -> {}", f.local, f.remote))
                    .collect(),
            }),
        );
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
        out.push(
            Finding::legacy(
                Pathology::RetransmitTimeout,
                Severity::Warning,
                Source::Sockets,
                format!(
                    "{n} socket(s) waiting on retransmission timeouts (backoff up to {max_backoff}, RTO up to {} ms)",
                    max_rto / 1000
                ),
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
                            "{} -> {} backoff {} RTO {} ms",
                            f.local,
                            f.remote,
                            f.backoff.unwrap_or(0),
                            f.rto_us.unwrap_or(0) / 1000
                        )
                    })
                    .collect(),
            }),
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::super::TcpInfo;
    use super::*;

    fn sock(state: TcpState, local: &str, remote: &str) -> Socket {
        Socket {
            state,
            local: local.parse().unwrap(),
            remote: remote.parse().unwrap(),
            recv_q: 0,
            send_q: 0,
            timer: Timer::Off,
            timer_expires_ms: 0,
            timer_retransmits: 0,
            uid: 0,
            inode: 0,
            rcvbuf_bytes: None,
            sndbuf_bytes: None,
            info: None,
        }
    }

    fn info() -> TcpInfo {
        TcpInfo::parse(&[0u8; 248]).unwrap()
    }

    fn census(sockets: Vec<Socket>, range: &str) -> Census {
        Census {
            netns: None,
            port_range: range.parse().unwrap(),
            sockets,
            undecoded_messages: 0,
        }
    }

    #[test]
    fn time_wait_per_destination_and_headroom() {
        let mut v = Vec::new();
        for p in 40000..40150 {
            v.push(sock(
                TcpState::TimeWait,
                &format!("10.0.0.1:{p}"),
                "10.0.0.2:80",
            ));
        }
        for p in 40000..40010 {
            v.push(sock(
                TcpState::TimeWait,
                &format!("10.0.0.1:{p}"),
                "10.0.0.3:80",
            ));
        }
        v.push(sock(TcpState::Established, "10.0.0.1:40199", "10.0.0.2:80"));
        let a = analyze(&census(v, "40000-40199"), None);
        let d = &a.summary.destinations[0];
        assert_eq!(d.remote.to_string(), "10.0.0.2:80");
        assert_eq!(
            (d.time_wait, d.ephemeral_ports_in_use, d.headroom_ports),
            (150, 151, 49)
        );
        assert!((d.sustainable_connect_rate_per_s - 200.0 / 60.0).abs() < 1e-9);
        assert!((d.time_wait_rate_per_s - 2.5).abs() < 1e-9);
        assert_eq!(a.summary.destinations[1].time_wait, 10);
        assert_eq!(a.findings.len(), 1, "{:?}", a.findings);
        assert_eq!(a.findings[0].pathology, Pathology::PortExhaustion);
        assert_eq!(a.findings[0].severity, Severity::Warning);
        assert_eq!(a.summary.by_state[&TcpState::TimeWait], 160);
    }

    #[test]
    fn full_listener_and_inbound_attribution() {
        let mut l = sock(TcpState::Listen, "0.0.0.0:5000", "0.0.0.0:0");
        l.recv_q = 2;
        l.send_q = 1;
        let mut ok = sock(TcpState::Listen, "127.0.0.1:6000", "0.0.0.0:0");
        ok.recv_q = 1;
        ok.send_q = 1;
        let acc = sock(TcpState::Established, "127.0.0.1:5000", "127.0.0.1:40001");
        let tw = sock(TcpState::TimeWait, "127.0.0.1:7000", "127.0.0.1:40002");
        let a = analyze(&census(vec![l, ok, acc, tw], "32768-60999"), None);
        let ls = &a.summary.listeners;
        assert_eq!(ls.len(), 3);
        assert!(ls[0].full && ls[0].local.port() == 5000);
        assert_eq!(ls[0].connections[&TcpState::Established], 1);
        assert!(!ls.iter().find(|l| l.local.port() == 6000).unwrap().full);
        let orphan = ls.iter().find(|l| l.local.port() == 7000).unwrap();
        assert!(!orphan.listening);
        assert!(a.summary.destinations.is_empty());
        assert_eq!(a.findings.len(), 1);
        assert_eq!(a.findings[0].pathology, Pathology::AcceptQueueOverflow);
    }

    #[test]
    fn slow_reader_signs_and_growth() {
        let mut rx = sock(TcpState::Established, "127.0.0.1:5000", "127.0.0.1:40001");
        rx.recv_q = 100_000;
        rx.info = Some(Box::new(TcpInfo {
            rcv_wnd_bytes: Some(0),
            ..info()
        }));
        let mut tx = sock(TcpState::Established, "127.0.0.1:40001", "127.0.0.1:5000");
        tx.send_q = 50_000;
        tx.info = Some(Box::new(TcpInfo {
            snd_wnd_bytes: Some(0),
            rcv_wnd_bytes: Some(65535),
            ..info()
        }));
        let mut grow = sock(TcpState::Established, "127.0.0.1:6000", "127.0.0.1:40002");
        grow.recv_q = 2000;
        grow.info = Some(Box::new(TcpInfo {
            snd_wnd_bytes: Some(65535),
            rcv_wnd_bytes: Some(30000),
            ..info()
        }));
        let mut earlier = grow.clone();
        earlier.recv_q = 1000;
        let prev = census(vec![earlier], "32768-60999");
        let a = analyze(
            &census(vec![rx, tx, grow.clone()], "32768-60999"),
            Some(&prev),
        );
        let signs: Vec<SlowSign> = a.summary.slow_readers.iter().map(|f| f.sign).collect();
        assert_eq!(
            signs,
            vec![
                SlowSign::ZeroReceiveWindow,
                SlowSign::PeerZeroWindow,
                SlowSign::ReceiveQueueGrowing
            ]
        );
        assert_eq!(a.summary.slow_readers[2].recv_q_growth_bytes, Some(1000));
        assert!(a
            .findings
            .iter()
            .any(|f| f.pathology == Pathology::SlowReader));
        // Without the earlier sample the growing socket is not flagged.
        let a = analyze(&census(vec![grow], "32768-60999"), None);
        assert!(a.findings.is_empty());
    }

    #[test]
    fn connects_and_probers_are_not_slow_readers_or_data_timeouts() {
        let mut syn = sock(TcpState::SynSent, "127.0.0.1:40002", "127.0.0.1:5100");
        syn.send_q = 1;
        syn.info = Some(Box::new(TcpInfo {
            retransmits: 1,
            snd_wnd_bytes: Some(0),
            rto_us: 1_000_000,
            ..info()
        }));
        let mut prober = sock(TcpState::Established, "127.0.0.1:40034", "127.0.0.1:5200");
        prober.send_q = 3_000_000;
        prober.timer = Timer::ZeroWindowProbe;
        prober.info = Some(Box::new(TcpInfo {
            backoff: 3,
            snd_wnd_bytes: Some(0),
            ..info()
        }));
        let a = analyze(&census(vec![syn, prober], "32768-60999"), None);
        assert_eq!(a.summary.slow_readers.len(), 1);
        assert_eq!(a.summary.slow_readers[0].sign, SlowSign::PeerZeroWindow);
        assert_eq!(a.summary.retransmitting.len(), 1);
        assert_eq!(a.summary.retransmitting[0].sign, SlowSign::SynRetransmit);
        let ps: Vec<Pathology> = a.findings.iter().map(|f| f.pathology).collect();
        assert_eq!(ps, vec![Pathology::SlowReader, Pathology::SynRetransmit]);
    }

    #[test]
    fn retransmit_backoff_is_flagged() {
        let mut s = sock(TcpState::Established, "10.0.0.1:40000", "10.0.0.2:80");
        s.info = Some(Box::new(TcpInfo {
            backoff: 3,
            retransmits: 3,
            rto_us: 1_600_000,
            ..info()
        }));
        let a = analyze(&census(vec![s], "32768-60999"), None);
        assert_eq!(a.summary.retransmitting.len(), 1);
        assert_eq!(a.findings[0].pathology, Pathology::RetransmitTimeout);
        assert!(
            a.findings[0].summary.contains("1600 ms"),
            "{}",
            a.findings[0].summary
        );
    }
}
