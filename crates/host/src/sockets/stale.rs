//! Orphaned FIN_WAIT2 mini-sockets whose peer on this host is gone: the sockets that answer
//! the next SYN on their 4-tuple with an ACK of the old connection (a stale-ACK race).
//!
//! A socket closed while its FIN was unacknowledged (or in FIN_WAIT2) is orphaned; once the
//! peer acknowledges the FIN it lives on as a timewait mini-socket whose substate is
//! FIN_WAIT2 (`tcp_time_wait(sk, TCP_FIN_WAIT2, tmo)`, net/ipv4/tcp_input.c), waiting up to
//! `tcp_fin_timeout` for the peer's FIN or reset. sock_diag reports it in state FIN_WAIT2
//! with the TIME_WAIT timer (`inet_twsk_diag_fill`); `ss` shows `FIN-WAIT-2 ...
//! timer:(timewait,...)`, no inode. Normally the peer's FIN or reset ends it within a round
//! trip. When the peer's socket is gone and the mini-socket stays (the peer's reset was
//! processed before the ACK of the FIN, or lost: report 003's loop on Linux 6.18, measured
//! by the trace, which saw each such SYN reach one), a SYN reusing the 4-tuple lies outside
//! its window and is answered with an ACK of the old connection (`tcp_timewait_state_process`,
//! net/ipv4/tcp_minisocks.c); the client resets it and resends the SYN.
//!
//! Only a peer on this host can be proven gone: both ends are in one census (loopback, or
//! the peer's address is one of this namespace's local addresses) and no socket holds the
//! reverse 4-tuple. A mini-socket younger than [`SETTLED`] may still be about to meet the
//! peer's reset in flight, so only older ones count.

use std::collections::HashSet;
use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use serde::Serialize;
use tcpdoctor_model::{Evidence, Finding, Impact, Pathology, Source};

use super::{Census, Socket, TcpState, Timer};

/// Older than this, a FIN_WAIT2 mini-socket whose peer is gone is not waiting for a reset in
/// flight: on one host a segment takes microseconds.
pub const SETTLED: Duration = Duration::from_secs(1);

/// The FIN_WAIT2 timeout when the namespace's `tcp_fin_timeout` was not read (its default,
/// `TCP_FIN_TIMEOUT`, include/net/tcp.h).
const FIN_TIMEOUT_DEFAULT: Duration = Duration::from_secs(60);

/// Examples listed in the finding.
const EXAMPLES: usize = 10;

/// One orphaned FIN_WAIT2 mini-socket whose peer on this host is gone.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct StaleFinWait2 {
    /// The end that closed first (the mini-socket).
    pub local: SocketAddr,
    /// The end whose socket is gone: a SYN from here on this 4-tuple meets a stale ACK.
    pub remote: SocketAddr,
    /// How long it has waited in FIN_WAIT2 (`tcp_fin_timeout` less the timer left).
    pub waiting_ms: u64,
    /// Until the kernel ends it (the timer left).
    pub ends_in_ms: u64,
}

/// A timewait mini-socket standing for a socket orphaned in FIN_WAIT2.
fn fin_wait2_mini(s: &Socket) -> bool {
    s.state == TcpState::FinWait2 && s.timer == Timer::TimeWait
}

fn canonical(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
        v4 => v4,
    }
}

/// The orphaned FIN_WAIT2 mini-sockets of `census` whose peer is on this host and gone,
/// waiting for at least [`SETTLED`].
pub fn find(census: &Census) -> Vec<StaleFinWait2> {
    let fin_timeout = census.fin_timeout.unwrap_or(FIN_TIMEOUT_DEFAULT);
    let local_ips: HashSet<IpAddr> = census
        .sockets
        .iter()
        .map(|s| canonical(s.local.ip()))
        .filter(|ip| !ip.is_unspecified())
        .collect();
    let tuples: HashSet<(SocketAddr, SocketAddr)> =
        census.sockets.iter().map(|s| (s.local, s.remote)).collect();
    let mut out: Vec<StaleFinWait2> = census
        .sockets
        .iter()
        .filter(|s| fin_wait2_mini(s))
        .filter(|s| {
            let peer = canonical(s.remote.ip());
            peer.is_loopback() || local_ips.contains(&peer)
        })
        .filter(|s| !tuples.contains(&(s.remote, s.local)))
        .filter_map(|s| {
            let left = Duration::from_millis(u64::from(s.timer_expires_ms));
            let waiting = fin_timeout.saturating_sub(left);
            (waiting >= SETTLED).then_some(StaleFinWait2 {
                local: s.local,
                remote: s.remote,
                waiting_ms: waiting.as_millis() as u64,
                ends_in_ms: left.as_millis() as u64,
            })
        })
        .collect();
    out.sort_by(|a, b| b.waiting_ms.cmp(&a.waiting_ms).then(a.local.cmp(&b.local)));
    out
}

/// The finding for `found`: a state that exposes the next connect on each 4-tuple to a
/// stale ACK (nothing hurt yet).
pub fn finding(found: &[StaleFinWait2], fin_timeout: Option<Duration>) -> Option<Finding> {
    if found.is_empty() {
        return None;
    }
    let n = found.len() as u64;
    let timeout = fin_timeout.unwrap_or(FIN_TIMEOUT_DEFAULT);
    let f = Finding::new(
        Pathology::StaleAckRace,
        Source::Sockets,
        format!(
            "{n} orphaned FIN_WAIT2 socket(s) whose peer on this host is gone (ss: FIN-WAIT-2, timer timewait): a SYN reusing one of these 4-tuples is answered with an ACK of the old connection (a stale ACK) until tcp_fin_timeout ({} s) ends them",
            timeout.as_secs()
        ),
        Impact::stalls(n, None, None).exposure(),
    )
    .with_explanation(format!("The end that closed first holds each of these 4-tuples as a timewait mini-socket in FIN_WAIT2: its FIN was acknowledged, but the peer's FIN or reset never took effect (a reset processed before the ACK of the FIN, or lost), and the peer's socket is gone (no socket on this host holds the reverse 4-tuple). Until tcp_fin_timeout ({} s) ends it, a new connect from the peer's port reaches it: the SYN is outside its window, it answers with an ACK of the old connection, and the client resets that and resends its SYN. Timestamps do not help: this is not a TIME_WAIT collision.", timeout.as_secs()))
    .with_evidence(Evidence::Sockets {
        state: TcpState::FinWait2.name().to_string(),
        count: n,
        local: None,
        remote: None,
        detail: Some(format!(
            "timewait mini-sockets (timer timewait, no inode) waiting {} s or more with no socket holding the reverse 4-tuple",
            SETTLED.as_secs()
        )),
    })
    .with_evidence(Evidence::Examples {
        what: "4-tuples (closed first -> peer gone, waiting, ends in)".into(),
        items: found
            .iter()
            .take(EXAMPLES)
            .map(|s| {
                format!(
                    "{} -> {}: waiting {:.1} s, ends in {:.1} s",
                    s.local,
                    s.remote,
                    s.waiting_ms as f64 / 1000.0,
                    s.ends_in_ms as f64 / 1000.0
                )
            })
            .collect(),
    });
    Some(f)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sock(state: TcpState, timer: Timer, local: &str, remote: &str, left_ms: u32) -> Socket {
        Socket {
            timer,
            timer_expires_ms: left_ms,
            ..Socket::new(state, local.parse().unwrap(), remote.parse().unwrap())
        }
    }

    fn census(sockets: Vec<Socket>) -> Census {
        Census {
            fin_timeout: Some(Duration::from_secs(60)),
            ..Census::new(sockets, "32768-60999".parse().unwrap())
        }
    }

    #[test]
    fn an_orphaned_fin_wait2_mini_socket_whose_local_peer_is_gone_exposes_its_4_tuple() {
        let server = "127.0.0.1:4242";
        let c = census(vec![
            // Report 003's leftover: the server's mini-socket, the client's socket gone.
            sock(
                TcpState::FinWait2,
                Timer::TimeWait,
                server,
                "127.0.0.1:40001",
                50_000,
            ),
            // Its peer still in CLOSE_WAIT: a normal half-close, not stale.
            sock(
                TcpState::FinWait2,
                Timer::TimeWait,
                server,
                "127.0.0.1:40002",
                50_000,
            ),
            sock(
                TcpState::CloseWait,
                Timer::Off,
                "127.0.0.1:40002",
                server,
                0,
            ),
            // Just created: the peer's reset may be in flight.
            sock(
                TcpState::FinWait2,
                Timer::TimeWait,
                server,
                "127.0.0.1:40003",
                59_800,
            ),
            // A full FIN_WAIT2 socket (its application still holds it): not a mini-socket.
            sock(TcpState::FinWait2, Timer::Off, server, "127.0.0.1:40004", 0),
            // A peer on another host: whether its socket is gone is unknown here.
            sock(
                TcpState::FinWait2,
                Timer::TimeWait,
                "10.0.0.1:80",
                "10.9.9.9:40005",
                30_000,
            ),
        ]);
        let found = find(&c);
        assert_eq!(found.len(), 1, "{found:#?}");
        assert_eq!(found[0].remote, "127.0.0.1:40001".parse().unwrap());
        assert_eq!((found[0].waiting_ms, found[0].ends_in_ms), (10_000, 50_000));
        let f = finding(&found, c.fin_timeout).unwrap();
        assert_eq!(f.pathology, Pathology::StaleAckRace);
        assert_eq!(f.severity, tcpdoctor_model::Severity::Info);
        assert!(
            f.summary.starts_with("1 orphaned FIN_WAIT2"),
            "{}",
            f.summary
        );
        assert!(f.explanation.contains("not a TIME_WAIT collision"));
        assert!(finding(&[], None).is_none());
    }

    #[test]
    fn a_peer_at_one_of_this_namespaces_addresses_is_on_this_host() {
        let c = census(vec![
            sock(
                TcpState::FinWait2,
                Timer::TimeWait,
                "10.0.0.1:80",
                "10.0.0.1:40001",
                30_000,
            ),
            sock(TcpState::Listen, Timer::Off, "10.0.0.1:80", "0.0.0.0:0", 0),
        ]);
        assert_eq!(find(&c).len(), 1);
    }
}
