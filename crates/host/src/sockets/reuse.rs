//! When connect() may take over the port of a TIME_WAIT socket, so that the census does not
//! count such sockets as ports in use toward their destination.
//!
//! The rule follows `tcp_twsk_unique` (net/ipv4/tcp_ipv4.c, Linux 6.13+), which
//! `__inet_hash_connect` (net/ipv4/inet_hashtables.c) calls for every TIME_WAIT socket that
//! holds a candidate 4-tuple. connect() takes the 4-tuple over when all of these hold:
//!
//! - `net.ipv4.tcp_tw_reuse` is 1 (any destination), or 2 (the kernel default) and the
//!   TIME_WAIT socket's local or remote address is a loopback address (127.0.0.0/8, `::1`, or
//!   an IPv4-mapped 127.x address; also a socket bound to `lo` with SO_BINDTODEVICE, which
//!   the census does not see and so counts as held: the conservative side);
//! - the TIME_WAIT socket kept a timestamp of its peer (`tw_ts_recent_stamp`), i.e. the
//!   connection used TCP timestamps: not when `net.ipv4.tcp_timestamps` is 0;
//! - it entered TIME_WAIT at least `net.ipv4.tcp_tw_reuse_delay` ms ago (default 1000 ms;
//!   kernels before 6.13 have no such sysctl and ask for a peer timestamp older than one
//!   second, which the 1000 ms used here does not understate).
//!
//! Measured on this machine kind (6.18, a namespace, ports 40000-40199, 200 connections to
//! 127.0.0.1:5000 each closed by the client): with `tcp_tw_reuse=2`, 200 further connects
//! 0.3 s later all fail with EADDRNOTAVAIL and 200 more 1.8 s later all succeed
//! (`TcpExtTWRecycled` +200); with `tcp_tw_reuse=0` the later ones fail too; toward
//! 10.200.0.1 (an address on `lo`, but not a loopback address) `tcp_tw_reuse=2` reuses
//! nothing and `tcp_tw_reuse=1` reuses them all after the delay.
//!
//! A TIME_WAIT socket's age is read from its timer: the kernel arms it for
//! `TCP_TIMEWAIT_LEN` (60 s) on entry, so age = 60 s - time left. A segment that restarts the
//! timer (a retransmitted FIN) makes the socket look younger than it is: again the
//! conservative side.

use std::net::IpAddr;
use std::time::Duration;

use serde::Serialize;

use super::{canonical, Socket, TcpState};
use crate::sysctl::{self, TcpSettings, TIME_WAIT};

/// `net.ipv4.tcp_tw_reuse_delay` when the kernel has none (before 6.13), and its default.
pub const DEFAULT_REUSE_DELAY: Duration = Duration::from_millis(1000);

/// The settings that decide whether connect() may reuse a TIME_WAIT socket's port.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct TwReuse {
    /// `net.ipv4.tcp_tw_reuse`: 0 never, 1 toward any destination, 2 loopback only.
    pub tcp_tw_reuse: Option<u64>,
    /// `net.ipv4.tcp_timestamps`: reuse needs the peer's timestamp (0 disables it).
    pub tcp_timestamps: Option<u64>,
    /// How long a socket must have been in TIME_WAIT before its port may be reused.
    pub tcp_tw_reuse_delay_ms: u64,
}

impl Default for TwReuse {
    /// No reuse: the conservative assumption when the settings are unknown.
    fn default() -> TwReuse {
        TwReuse {
            tcp_tw_reuse: Some(0),
            tcp_timestamps: Some(1),
            tcp_tw_reuse_delay_ms: DEFAULT_REUSE_DELAY.as_millis() as u64,
        }
    }
}

impl TwReuse {
    /// The rules of the current network namespace.
    pub fn read(settings: &TcpSettings) -> Result<TwReuse, crate::Error> {
        Ok(TwReuse {
            tcp_tw_reuse: settings.tcp_tw_reuse,
            tcp_timestamps: settings.tcp_timestamps,
            tcp_tw_reuse_delay_ms: sysctl::read_u64("net.ipv4.tcp_tw_reuse_delay")?
                .unwrap_or(DEFAULT_REUSE_DELAY.as_millis() as u64),
        })
    }

    /// How long a TIME_WAIT socket holds its port when reuse applies.
    pub fn delay(&self) -> Duration {
        Duration::from_millis(self.tcp_tw_reuse_delay_ms)
    }

    /// Whether connect() may reuse TIME_WAIT sockets between these two addresses (once they
    /// are old enough).
    pub fn applies(&self, local: IpAddr, remote: IpAddr) -> bool {
        if self.tcp_timestamps == Some(0) {
            return false;
        }
        match self.tcp_tw_reuse {
            Some(1) => true,
            Some(2) => is_loopback(local) || is_loopback(remote),
            _ => false,
        }
    }

    /// Whether connect() may take this socket's port now: a TIME_WAIT socket between
    /// addresses reuse applies to, in TIME_WAIT for at least the reuse delay.
    pub fn reusable(&self, s: &Socket) -> bool {
        s.state == TcpState::TimeWait
            && self.applies(s.local.ip(), s.remote.ip())
            && time_wait_age(s) >= self.delay()
    }

    /// New connections per second one client can open toward one destination these rules
    /// cover: each port is free again after the reuse delay instead of after TIME_WAIT.
    pub fn sustainable_rate(&self, ports: u32) -> f64 {
        f64::from(ports) / self.delay().as_secs_f64().max(1e-3)
    }
}

/// 127.0.0.0/8, `::1`, or an IPv4-mapped 127.x address (`ipv4_is_loopback`,
/// `ipv6_addr_loopback`, `ipv6_addr_v4mapped_loopback`).
fn is_loopback(a: IpAddr) -> bool {
    canonical(a).is_loopback()
}

/// How long a TIME_WAIT socket has been in that state: 60 s minus the time its timer has
/// left.
pub fn time_wait_age(s: &Socket) -> Duration {
    TIME_WAIT.saturating_sub(Duration::from_millis(u64::from(s.timer_expires_ms)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sockets::Timer;

    fn tw(local: &str, remote: &str, left_ms: u32) -> Socket {
        Socket {
            timer: Timer::TimeWait,
            timer_expires_ms: left_ms,
            ..Socket::new(
                TcpState::TimeWait,
                local.parse().unwrap(),
                remote.parse().unwrap(),
            )
        }
    }

    fn rules(mode: u64, ts: u64) -> TwReuse {
        TwReuse {
            tcp_tw_reuse: Some(mode),
            tcp_timestamps: Some(ts),
            tcp_tw_reuse_delay_ms: 1000,
        }
    }

    #[test]
    fn loopback_only_with_two_any_with_one_none_without_timestamps() {
        let lo = tw("127.0.0.1:40000", "127.0.0.1:5000", 50_000);
        let lo6 = tw("[::1]:40000", "[::1]:5000", 50_000);
        let mapped = tw(
            "[::ffff:127.0.0.2]:40000",
            "[::ffff:127.0.0.2]:5000",
            50_000,
        );
        let far = tw("10.0.0.1:40000", "10.0.0.2:80", 50_000);
        assert!(rules(2, 1).reusable(&lo));
        assert!(rules(2, 1).reusable(&lo6));
        assert!(rules(2, 1).reusable(&mapped));
        assert!(!rules(2, 1).reusable(&far));
        assert!(rules(1, 1).reusable(&far));
        assert!(!rules(0, 1).reusable(&lo));
        assert!(!rules(2, 0).reusable(&lo));
        assert!(!rules(1, 0).reusable(&far));
    }

    #[test]
    fn young_time_wait_still_holds_its_port() {
        // 59.5 s left: in TIME_WAIT for 0.5 s, under the 1 s delay.
        let young = tw("127.0.0.1:40000", "127.0.0.1:5000", 59_500);
        assert_eq!(time_wait_age(&young), Duration::from_millis(500));
        assert!(!rules(2, 1).reusable(&young));
        let old = tw("127.0.0.1:40000", "127.0.0.1:5000", 58_900);
        assert!(rules(2, 1).reusable(&old));
        let mut established = old.clone();
        established.state = TcpState::Established;
        assert!(!rules(1, 1).reusable(&established));
        assert!((rules(2, 1).sustainable_rate(28_232) - 28_232.0).abs() < 1e-9);
    }
}
