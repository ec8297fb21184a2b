//! Sysctl reader (`/proc/sys`, per network namespace for most `net.ipv4` keys) and the typed
//! set of TCP tunables tcpdoctor reasons about.

use std::path::PathBuf;
use std::time::Duration;

use serde::Serialize;
use tcpdoctor_model::{PortRange, SynLadder};

use crate::Error;

/// The `/proc/sys` path of a dotted sysctl name.
pub fn path(name: &str) -> PathBuf {
    PathBuf::from("/proc/sys").join(name.replace('.', "/"))
}

/// Reads one sysctl as trimmed text.
pub fn read(name: &str) -> Result<String, Error> {
    let path = path(name);
    std::fs::read_to_string(&path)
        .map(|s| s.trim().to_string())
        .map_err(|source| Error::Read { path, source })
}

/// Reads one sysctl as an integer; `Ok(None)` when this kernel does not have it.
pub fn read_u64(name: &str) -> Result<Option<u64>, Error> {
    match read(name) {
        Ok(s) => s.parse().map(Some).map_err(|_| Error::Parse {
            path: path(name),
            line: 1,
            message: format!("'{s}' is not an integer"),
        }),
        Err(Error::Read { source, .. }) if source.kind() == std::io::ErrorKind::NotFound => {
            Ok(None)
        }
        Err(e) => Err(e),
    }
}

/// The TCP tunables that shape the pathologies tcpdoctor diagnoses, as read from this
/// network namespace. `None` means the kernel does not have the sysctl.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct TcpSettings {
    pub ip_local_port_range: PortRange,
    pub tcp_tw_reuse: Option<u64>,
    pub tcp_timestamps: Option<u64>,
    pub tcp_rfc1337: Option<u64>,
    pub tcp_syn_retries: u64,
    pub tcp_syn_linear_timeouts: Option<u64>,
    pub tcp_synack_retries: Option<u64>,
    pub tcp_rto_min_us: Option<u64>,
    pub tcp_fin_timeout: Option<u64>,
    pub tcp_max_tw_buckets: Option<u64>,
    pub tcp_max_syn_backlog: Option<u64>,
    pub somaxconn: Option<u64>,
}

/// How long a socket stays in TIME_WAIT on Linux: 60 s, fixed at compile time
/// (`TCP_TIMEWAIT_LEN`, include/net/tcp.h; not `tcp_fin_timeout`).
pub const TIME_WAIT: Duration = Duration::from_secs(60);

impl TcpSettings {
    /// Reads the current network namespace's settings.
    pub fn read() -> Result<TcpSettings, Error> {
        let range_name = "net.ipv4.ip_local_port_range";
        let range_text = read(range_name)?;
        let ip_local_port_range = range_text.parse().map_err(|e| Error::Parse {
            path: path(range_name),
            line: 1,
            message: format!("{e}"),
        })?;
        let syn_retries_name = "net.ipv4.tcp_syn_retries";
        Ok(TcpSettings {
            ip_local_port_range,
            tcp_tw_reuse: read_u64("net.ipv4.tcp_tw_reuse")?,
            tcp_timestamps: read_u64("net.ipv4.tcp_timestamps")?,
            tcp_rfc1337: read_u64("net.ipv4.tcp_rfc1337")?,
            tcp_syn_retries: read_u64(syn_retries_name)?.unwrap_or(6),
            tcp_syn_linear_timeouts: read_u64("net.ipv4.tcp_syn_linear_timeouts")?,
            tcp_synack_retries: read_u64("net.ipv4.tcp_synack_retries")?,
            tcp_rto_min_us: read_u64("net.ipv4.tcp_rto_min_us")?,
            tcp_fin_timeout: read_u64("net.ipv4.tcp_fin_timeout")?,
            tcp_max_tw_buckets: read_u64("net.ipv4.tcp_max_tw_buckets")?,
            tcp_max_syn_backlog: read_u64("net.ipv4.tcp_max_syn_backlog")?,
            somaxconn: read_u64("net.core.somaxconn")?,
        })
    }

    /// The SYN retransmission ladder these settings produce with the RTO capped at
    /// `rto_max_ms` (`net.ipv4.tcp_rto_max_ms`, Linux 6.15+; `None`: `TCP_RTO_MAX`, 120 s).
    pub fn syn_ladder_capped(&self, rto_max_ms: Option<u64>) -> SynLadder {
        SynLadder::with_rto_max(
            self.tcp_syn_retries as u32,
            self.tcp_syn_linear_timeouts.map(|v| v as u32),
            tcpdoctor_model::timers::SYN_INITIAL_RTO,
            rto_max_ms.map_or(tcpdoctor_model::timers::RTO_MAX, Duration::from_millis),
        )
    }

    /// The SYN retransmission ladder these settings produce (RTO capped at `TCP_RTO_MAX`).
    pub fn syn_ladder(&self) -> SynLadder {
        SynLadder::new(
            self.tcp_syn_retries as u32,
            self.tcp_syn_linear_timeouts.map(|v| v as u32),
            tcpdoctor_model::timers::SYN_INITIAL_RTO,
        )
    }

    /// The data RTO floor of this namespace (`tcp_rto_min_us`, else the 200 ms default).
    pub fn rto_min(&self) -> Duration {
        self.tcp_rto_min_us
            .map(Duration::from_micros)
            .unwrap_or(tcpdoctor_model::timers::RTO_MIN_DEFAULT)
    }

    /// New connections per second one client can open to one destination ip:port before
    /// TIME_WAIT uses up the port range: ports / 60 s.
    pub fn sustainable_connect_rate(&self) -> f64 {
        f64::from(self.ip_local_port_range.connect_ports()) / TIME_WAIT.as_secs_f64()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_this_host() {
        let s = TcpSettings::read().unwrap();
        assert!(s.ip_local_port_range.low <= s.ip_local_port_range.high);
        assert!(!s.syn_ladder().rungs().is_empty());
        assert!(s.sustainable_connect_rate() > 0.0);
        assert_eq!(read_u64("net.ipv4.no_such_sysctl_tcpdoctor").unwrap(), None);
    }
}
