//! Small validated network types shared by every command.

use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// An inclusive range of ports, `low..=high`, as in `ip_local_port_range` or `--local-ports`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PortRange {
    pub low: u16,
    pub high: u16,
}

impl PortRange {
    pub fn new(low: u16, high: u16) -> Result<PortRange, PortRangeError> {
        if low == 0 {
            return Err(PortRangeError("port 0 cannot be bound explicitly".into()));
        }
        if low > high {
            return Err(PortRangeError(format!("{low} is above {high}")));
        }
        Ok(PortRange { low, high })
    }

    /// Number of ports in the range.
    pub fn len(&self) -> u32 {
        u32::from(self.high) - u32::from(self.low) + 1
    }

    pub fn is_empty(&self) -> bool {
        false
    }

    pub fn contains(&self, port: u16) -> bool {
        (self.low..=self.high).contains(&port)
    }

    /// Ports the kernel hands out for `connect()` without `bind()`. Since Linux 4.6
    /// (`__inet_hash_connect`, net/ipv4/inet_hashtables.c) connect() prefers ports of the
    /// parity opposite to `low`, leaving the others for bind(); all of them remain usable,
    /// so the full length is returned.
    pub fn connect_ports(&self) -> u32 {
        self.len()
    }
}

impl std::fmt::Display for PortRange {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}-{}", self.low, self.high)
    }
}

/// Why a port range did not parse.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PortRangeError(pub String);

impl std::fmt::Display for PortRangeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "invalid port range: {}", self.0)
    }
}

impl std::error::Error for PortRangeError {}

impl FromStr for PortRange {
    type Err = PortRangeError;

    /// Accepts `A-B`, `A B` and `A\tB` (the sysctl's own format).
    fn from_str(s: &str) -> Result<PortRange, PortRangeError> {
        let s = s.trim();
        let (a, b) = s
            .split_once('-')
            .or_else(|| s.split_once(char::is_whitespace))
            .ok_or_else(|| PortRangeError(format!("'{s}' is not LOW-HIGH")))?;
        let port = |t: &str| {
            t.trim()
                .parse::<u16>()
                .map_err(|_| PortRangeError(format!("'{}' is not a port (1-65535)", t.trim())))
        };
        PortRange::new(port(a)?, port(b)?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_both_notations() {
        assert_eq!(
            "32768\t60999".parse(),
            Ok(PortRange {
                low: 32768,
                high: 60999
            })
        );
        assert_eq!("1000-1199".parse::<PortRange>().unwrap().len(), 200);
        assert!("5-1".parse::<PortRange>().is_err());
        assert!("0-10".parse::<PortRange>().is_err());
        assert!("10-70000"
            .parse::<PortRange>()
            .unwrap_err()
            .to_string()
            .contains("70000"));
        assert!("abc".parse::<PortRange>().is_err());
    }
}
