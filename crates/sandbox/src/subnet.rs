//! The only addresses the lab uses: a subnet inside its private block [`LAB_BLOCK`]
//! (10.77.0.0/16, RFC 1918 space), assigned only to interfaces inside the lab's namespaces.
//! A user-given `--subnet` outside that block is refused, so the lab can never address, or
//! route toward, anything outside its own namespaces.

use std::net::Ipv4Addr;
use std::str::FromStr;

use serde::Serialize;

use crate::Error;

/// The lab's private block: 10.77.0.0/16.
pub const LAB_BLOCK: (Ipv4Addr, u8) = (Ipv4Addr::new(10, 77, 0, 0), 16);

/// Smallest subnet the scenarios fit in: /24 gives 254 hosts (32 senders need 34).
pub const MAX_PREFIX: u8 = 24;

/// A validated IPv4 subnet inside [`LAB_BLOCK`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct LabSubnet {
    pub network: Ipv4Addr,
    pub prefix: u8,
}

impl Default for LabSubnet {
    fn default() -> Self {
        LabSubnet {
            network: Ipv4Addr::new(10, 77, 0, 0),
            prefix: 24,
        }
    }
}

fn mask(prefix: u8) -> u32 {
    if prefix == 0 {
        0
    } else {
        u32::MAX << (32 - u32::from(prefix))
    }
}

impl LabSubnet {
    /// Host number `n` (1-based) of the subnet, e.g. `host(1)` = 10.77.0.1.
    pub fn host(&self, n: u32) -> Ipv4Addr {
        Ipv4Addr::from(u32::from(self.network) + n)
    }

    /// `10.77.0.1/24` for interface configuration.
    pub fn cidr_of(&self, n: u32) -> String {
        format!("{}/{}", self.host(n), self.prefix)
    }

    /// Whether `addr` lies in this subnet.
    pub fn contains(&self, addr: Ipv4Addr) -> bool {
        u32::from(addr) & mask(self.prefix) == u32::from(self.network)
    }

    /// Number of usable host addresses.
    pub fn hosts(&self) -> u32 {
        (1u32 << (32 - u32::from(self.prefix))) - 2
    }
}

impl std::fmt::Display for LabSubnet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.network, self.prefix)
    }
}

impl FromStr for LabSubnet {
    type Err = Error;

    /// Accepts `A.B.C.D/N` inside 10.77.0.0/16 with 16 <= N <= 24, host bits zero.
    fn from_str(s: &str) -> Result<LabSubnet, Error> {
        let bad = |detail: String| Error::invalid(format!("--subnet '{s}'"), detail);
        let (addr, prefix) = s
            .trim()
            .split_once('/')
            .ok_or_else(|| bad("expected A.B.C.D/N".into()))?;
        let network: Ipv4Addr = addr
            .parse()
            .map_err(|_| bad(format!("'{addr}' is not an IPv4 address")))?;
        let prefix: u8 = prefix
            .parse()
            .ok()
            .filter(|p| *p <= 32)
            .ok_or_else(|| bad(format!("'{prefix}' is not a prefix length 0-32")))?;
        let (block, block_len) = LAB_BLOCK;
        if prefix < block_len || u32::from(network) & mask(block_len) != u32::from(block) {
            return Err(bad(format!(
                "outside the lab's private block {block}/{block_len}: the lab only uses \
                 addresses inside its own namespaces"
            )));
        }
        if prefix > MAX_PREFIX {
            return Err(bad(format!(
                "/{prefix} is too small: the scenarios need up to /{MAX_PREFIX}"
            )));
        }
        if u32::from(network) & !mask(prefix) != 0 {
            return Err(bad(format!(
                "host bits are set (did you mean {}/{prefix}?)",
                Ipv4Addr::from(u32::from(network) & mask(prefix))
            )));
        }
        Ok(LabSubnet { network, prefix })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_only_the_lab_block() {
        let s: LabSubnet = "10.77.5.0/24".parse().unwrap();
        assert_eq!(s.host(1), Ipv4Addr::new(10, 77, 5, 1));
        assert_eq!(s.cidr_of(10), "10.77.5.10/24");
        assert!(s.contains(Ipv4Addr::new(10, 77, 5, 200)));
        assert!(!s.contains(Ipv4Addr::new(10, 77, 6, 1)));
        assert_eq!(s.hosts(), 254);
        assert!("10.77.0.0/16".parse::<LabSubnet>().is_ok());
        for bad in [
            "192.168.1.0/24",
            "8.8.8.0/24",
            "10.78.0.0/24",
            "10.0.0.0/8",
            "10.77.0.0/15",
            "10.77.0.0/28",
            "10.77.0.1/24",
            "10.77.0.0",
            "fe80::/64",
            "10.77.0.0/x",
        ] {
            let e = bad.parse::<LabSubnet>().unwrap_err().to_string();
            assert!(e.starts_with(&format!("--subnet '{bad}'")), "{e}");
        }
        let e = "8.8.8.0/24".parse::<LabSubnet>().unwrap_err().to_string();
        assert!(
            e.contains("outside the lab's private block 10.77.0.0/16"),
            "{e}"
        );
    }
}
