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

/// An address or a block of addresses in CIDR notation (`10.0.0.0/8`, `fd00::/8`); a bare
/// address is the block of just itself. IPv4-mapped IPv6 addresses (`::ffff:10.1.2.3`) match
/// IPv4 blocks, as a dual-stack socket shows them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct IpPrefix {
    pub addr: std::net::IpAddr,
    /// Leading bits that must match: 0..=32 (IPv4) or 0..=128 (IPv6).
    pub len: u8,
}

impl IpPrefix {
    /// The block of one address.
    pub fn host(addr: std::net::IpAddr) -> IpPrefix {
        let len = if addr.is_ipv4() { 32 } else { 128 };
        IpPrefix { addr, len }
    }

    pub fn contains(&self, ip: std::net::IpAddr) -> bool {
        use std::net::IpAddr;
        let ip = match ip {
            IpAddr::V6(v6) => v6.to_ipv4_mapped().map(IpAddr::V4).unwrap_or(ip),
            v4 => v4,
        };
        match (self.addr, ip) {
            (IpAddr::V4(p), IpAddr::V4(a)) => {
                let mask = u32::MAX.checked_shl(32 - u32::from(self.len)).unwrap_or(0);
                u32::from(p) & mask == u32::from(a) & mask
            }
            (IpAddr::V6(p), IpAddr::V6(a)) => {
                let mask = u128::MAX
                    .checked_shl(128 - u32::from(self.len))
                    .unwrap_or(0);
                u128::from(p) & mask == u128::from(a) & mask
            }
            _ => false,
        }
    }
}

impl std::fmt::Display for IpPrefix {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if *self == IpPrefix::host(self.addr) {
            write!(f, "{}", self.addr)
        } else {
            write!(f, "{}/{}", self.addr, self.len)
        }
    }
}

/// A refused address block, in one line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IpPrefixError(pub String);

impl std::fmt::Display for IpPrefixError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for IpPrefixError {}

impl FromStr for IpPrefix {
    type Err = IpPrefixError;

    fn from_str(s: &str) -> Result<IpPrefix, IpPrefixError> {
        let bad = || IpPrefixError(format!("'{s}' is not an address or ADDRESS/BITS"));
        let (a, len) = match s.trim().split_once('/') {
            Some((a, l)) => (a, Some(l.parse::<u8>().map_err(|_| bad())?)),
            None => (s.trim(), None),
        };
        let addr: std::net::IpAddr = a.parse().map_err(|_| bad())?;
        let max = if addr.is_ipv4() { 32 } else { 128 };
        let len = len.unwrap_or(max);
        if len > max {
            return Err(IpPrefixError(format!(
                "'{s}': /{len} is longer than an address ({max} bits)"
            )));
        }
        Ok(IpPrefix {
            addr: match (addr, len) {
                (std::net::IpAddr::V6(v6), _) => v6
                    .to_ipv4_mapped()
                    .filter(|_| len >= 96)
                    .map(std::net::IpAddr::V4)
                    .unwrap_or(addr),
                _ => addr,
            },
            len: match addr {
                std::net::IpAddr::V6(v6) if v6.to_ipv4_mapped().is_some() && len >= 96 => len - 96,
                _ => len,
            },
        })
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

    #[test]
    fn prefixes_contain_their_addresses() {
        let p: IpPrefix = "10.0.0.0/8".parse().unwrap();
        assert!(p.contains("10.200.3.4".parse().unwrap()));
        assert!(p.contains("::ffff:10.1.2.3".parse().unwrap()));
        assert!(!p.contains("11.0.0.1".parse().unwrap()));
        let one: IpPrefix = "127.0.0.1".parse().unwrap();
        assert!(one.contains("127.0.0.1".parse().unwrap()));
        assert!(!one.contains("127.0.0.2".parse().unwrap()));
        assert_eq!(one.to_string(), "127.0.0.1");
        let v6: IpPrefix = "fd00::/8".parse().unwrap();
        assert!(v6.contains("fd12::1".parse().unwrap()));
        assert!(!v6.contains("10.0.0.1".parse().unwrap()));
        assert!("0.0.0.0/0"
            .parse::<IpPrefix>()
            .unwrap()
            .contains("8.8.8.8".parse().unwrap()));
        assert!("10.0.0.0/33".parse::<IpPrefix>().is_err());
        assert!("banana/8".parse::<IpPrefix>().is_err());
    }
}
