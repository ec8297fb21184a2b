//! Interface statistics from sysfs (`/sys/class/net/IF/statistics/*`) and link speed.
//!
//! [`CounterFiles`] keeps the statistics files open and re-reads them with `pread(2)` at
//! offset 0: each read is one syscall that asks the driver for fresh totals
//! (`dev_get_stats`), with no open/close and no allocation, so it can run every 100 us.
//! Sysfs shows the interfaces of the network namespace it was mounted in.

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::Error;

const SYS_NET: &str = "/sys/class/net";

/// Which counter of an interface.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Stat {
    RxBytes,
    TxBytes,
    RxPackets,
    TxPackets,
}

impl Stat {
    /// The file name under `statistics/`.
    pub fn file(self) -> &'static str {
        match self {
            Stat::RxBytes => "rx_bytes",
            Stat::TxBytes => "tx_bytes",
            Stat::RxPackets => "rx_packets",
            Stat::TxPackets => "tx_packets",
        }
    }
}

/// Names of the interfaces in this network namespace, sorted.
pub fn interfaces() -> Result<Vec<String>, Error> {
    let dir = std::fs::read_dir(SYS_NET).map_err(|source| Error::Read {
        path: PathBuf::from(SYS_NET),
        source,
    })?;
    let mut names: Vec<String> = dir
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    Ok(names)
}

/// True when `iface` exists here.
pub fn exists(iface: &str) -> bool {
    !iface.is_empty() && !iface.contains('/') && Path::new(SYS_NET).join(iface).exists()
}

/// Link speed in Mbit/s from `/sys/class/net/IF/speed`; `None` when the driver does not
/// report one (virtual devices return EINVAL or -1).
pub fn link_speed_mbps(iface: &str) -> Option<u64> {
    let text = std::fs::read_to_string(Path::new(SYS_NET).join(iface).join("speed")).ok()?;
    text.trim()
        .parse::<i64>()
        .ok()
        .filter(|&v| v > 0)
        .map(|v| v as u64)
}

/// Whether `iface` is administratively up (`IFF_UP` in `/sys/class/net/IF/flags`, a hex
/// number; include/uapi/linux/if.h); `None` when it cannot be read.
pub fn is_up(iface: &str) -> Option<bool> {
    let text = std::fs::read_to_string(Path::new(SYS_NET).join(iface).join("flags")).ok()?;
    let flags = u32::from_str_radix(text.trim().trim_start_matches("0x"), 16).ok()?;
    Some(flags & 0x1 != 0)
}

/// Reads one statistic once.
pub fn read_stat(iface: &str, stat: Stat) -> Result<u64, Error> {
    let mut f = CounterFiles::open(iface, &[stat])?;
    let mut v = [0u64];
    f.read(&mut v)?;
    Ok(v[0])
}

/// Open statistics files of one interface, read together.
pub struct CounterFiles {
    files: Vec<(PathBuf, File)>,
    buf: [u8; 32],
}

impl CounterFiles {
    /// Opens `stats` of `iface`, in that order.
    pub fn open(iface: &str, stats: &[Stat]) -> Result<CounterFiles, Error> {
        let mut files = Vec::with_capacity(stats.len());
        for s in stats {
            let path = Path::new(SYS_NET)
                .join(iface)
                .join("statistics")
                .join(s.file());
            let f = File::open(&path).map_err(|source| Error::Read {
                path: path.clone(),
                source,
            })?;
            files.push((path, f));
        }
        Ok(CounterFiles {
            files,
            buf: [0; 32],
        })
    }

    /// Reads every counter into `out` (same order as opened) with one `pread` each.
    pub fn read(&mut self, out: &mut [u64]) -> Result<(), Error> {
        for ((path, f), slot) in self.files.iter().zip(out.iter_mut()) {
            let n = f.read_at(&mut self.buf, 0).map_err(|source| Error::Read {
                path: path.clone(),
                source,
            })?;
            *slot = parse_decimal(&self.buf[..n]).ok_or_else(|| Error::Parse {
                path: path.clone(),
                line: 1,
                message: format!(
                    "'{}' is not a counter",
                    String::from_utf8_lossy(&self.buf[..n]).trim()
                ),
            })?;
        }
        Ok(())
    }
}

/// Parses ASCII digits up to a newline, without allocating.
fn parse_decimal(b: &[u8]) -> Option<u64> {
    let mut v: u64 = 0;
    let mut digits = 0;
    for &c in b {
        match c {
            b'0'..=b'9' => {
                v = v.checked_mul(10)?.checked_add(u64::from(c - b'0'))?;
                digits += 1;
            }
            b'\n' | b' ' => break,
            _ => return None,
        }
    }
    (digits > 0).then_some(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decimal_parser() {
        assert_eq!(parse_decimal(b"12345\n"), Some(12345));
        assert_eq!(parse_decimal(b"0\n"), Some(0));
        assert_eq!(parse_decimal(b"\n"), None);
        assert_eq!(parse_decimal(b"12a\n"), None);
        assert_eq!(parse_decimal(b"99999999999999999999999\n"), None);
    }

    #[test]
    fn loopback_counters_read() {
        assert!(exists("lo"));
        assert!(!exists("../lo"));
        let mut f = CounterFiles::open("lo", &[Stat::RxBytes, Stat::TxPackets]).unwrap();
        let mut v = [0u64; 2];
        f.read(&mut v).unwrap();
        let mut w = [0u64; 2];
        f.read(&mut w).unwrap();
        assert!(w[0] >= v[0] && w[1] >= v[1]);
        assert_eq!(link_speed_mbps("lo"), None);
        assert_eq!(is_up("lo"), Some(true));
        assert_eq!(is_up("tdoc-none"), None);
        assert!(interfaces().unwrap().iter().any(|i| i == "lo"));
        assert!(CounterFiles::open("tdoc-none", &[Stat::RxBytes]).is_err());
    }
}
