//! Kernel SNMP/MIB counters, named exactly as `nstat` prints them (`TcpRetransSegs`,
//! `TcpExtTCPSynRetrans`, `Ip6InReceives`).
//!
//! `/proc/net/snmp` and `/proc/net/netstat` hold pairs of lines: a header line
//! `Prefix: Name1 Name2 ...` followed by a value line `Prefix: v1 v2 ...`; the nstat name is
//! prefix + field. `/proc/net/snmp6` has one `Name value` pair per line.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::Error;

/// One reading of every counter.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Snapshot {
    pub values: BTreeMap<String, u64>,
}

/// Where the counter files live (`/proc/net` for the current network namespace).
#[derive(Clone, Debug)]
pub struct Source {
    pub dir: PathBuf,
}

impl Default for Source {
    /// The calling thread's namespace: `/proc/thread-self/net` (Linux 3.17+). It equals
    /// `/proc/net` on the main thread, and stays right on a thread that entered another
    /// network namespace with setns(), where `/proc/net` still shows the main thread's.
    fn default() -> Self {
        let thread = Path::new("/proc/thread-self/net");
        Source {
            dir: if thread.exists() {
                thread.to_path_buf()
            } else {
                PathBuf::from("/proc/net")
            },
        }
    }
}

impl Source {
    /// Reads snmp and netstat (required) and snmp6 (optional: absent without IPv6) once.
    /// For repeated readings open a [`Sampler`], which is cheaper per reading.
    pub fn snapshot(&self) -> Result<Snapshot, Error> {
        self.sampler()?.sample()
    }

    /// Opens the counter files for repeated readings.
    pub fn sampler(&self) -> Result<Sampler, Error> {
        let open = |name: &str| {
            let path = self.dir.join(name);
            std::fs::File::open(&path)
                .map(|f| (path.clone(), f))
                .map_err(|source| Error::Read { path, source })
        };
        Ok(Sampler {
            paired: [open("snmp")?, open("netstat")?],
            flat: open("snmp6").ok(),
            buf: vec![0; 64 * 1024],
        })
    }
}

/// Open counter files, re-read from offset 0 for each snapshot.
///
/// Keeping the files open matters: each fresh open of a procfs seq_file starts with a
/// one-page buffer, and `/proc/net/netstat` (just over 4 KiB on 6.18) overflows it, so the
/// kernel generates the text twice (fs/seq_file.c, `seq_read_iter`). A kept file keeps its
/// grown buffer, and one `pread` at offset 0 generates the text once.
#[derive(Debug)]
pub struct Sampler {
    paired: [(PathBuf, std::fs::File); 2],
    flat: Option<(PathBuf, std::fs::File)>,
    buf: Vec<u8>,
}

/// The counter every SYN and SYN-ACK resend moves in `/proc/net/netstat`, right after
/// `TcpRetransSegs` in `/proc/net/snmp` (and after `TcpExtTCPTimeouts`, same file).
const SYN_RESENDS: &str = "TcpExtTCPSynRetrans";

/// The paired files' places in [`Sampler`]'s `paired`.
const SNMP: usize = 0;
const NETSTAT: usize = 1;

/// How many times [`Sampler::sample`] reads the two files again when SYN resends moved
/// while it read them. Measured under 600 connects resending SYNs (about 600 a second,
/// `counters --watch 10ms --count 800`, twice): 7 readings of 801 were read again, none a
/// third time.
const CONSISTENT_TRIES: usize = 8;

impl Sampler {
    /// Reads every counter now, `/proc/net/snmp` and `/proc/net/netstat` as one consistent
    /// reading of SYN resends. The two files are generated one after the other, and a SYN
    /// resend moves `TcpRetransSegs` (snmp) and `TcpExtTCPSynRetrans` (netstat) together:
    /// resends landing between the two reads (the kernel resends SYNs in batches, one per
    /// timer tick) counted in one and not the other, and a delta then showed "segments
    /// retransmitted" that were SYN resends (measured: `TcpRetransSegs +15` with
    /// `TcpExtTCPSynRetrans` unmoved, 2 of 800 10 ms deltas under a SYN flood). So netstat is
    /// read on both sides of snmp and the reading kept only when the SYN resends did not move
    /// between them (at most [`CONSISTENT_TRIES`] times; the last reading is kept otherwise).
    pub fn sample(&mut self) -> Result<Snapshot, Error> {
        let mut snap = Snapshot::default();
        for _ in 0..CONSISTENT_TRIES {
            snap = Snapshot::default();
            let first = self.read_paired(NETSTAT, &mut snap)?;
            self.read_paired(SNMP, &mut snap)?;
            let last = self.read_paired(NETSTAT, &mut snap)?;
            if first == last {
                break;
            }
        }
        if let Some((path, file)) = &self.flat {
            let text = pread_all(file, &mut self.buf, path)?;
            parse_flat(text, path, &mut snap.values)?;
        }
        Ok(snap)
    }
}

impl Sampler {
    /// Reads paired file `i` ([`SNMP`] or [`NETSTAT`]) into `snap`; returns the SYN resends
    /// read so far (netstat's).
    fn read_paired(&mut self, i: usize, snap: &mut Snapshot) -> Result<Option<u64>, Error> {
        let (path, file) = &self.paired[i];
        let text = pread_all(file, &mut self.buf, path)?;
        parse_paired(text, path, &mut snap.values)?;
        Ok(snap.values.get(SYN_RESENDS).copied())
    }
}

/// Reads a whole procfs file from offset 0 with large reads, growing `buf` when needed.
fn pread_all<'b>(
    file: &std::fs::File,
    buf: &'b mut Vec<u8>,
    path: &Path,
) -> Result<&'b str, Error> {
    use std::os::unix::fs::FileExt;
    let err = |source| Error::Read {
        path: path.to_path_buf(),
        source,
    };
    let mut len = 0;
    loop {
        if len == buf.len() {
            buf.resize(buf.len() * 2, 0);
        }
        match file.read_at(&mut buf[len..], len as u64) {
            Ok(0) => break,
            Ok(n) => len += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(err(e)),
        }
    }
    std::str::from_utf8(&buf[..len])
        .map_err(|e| err(std::io::Error::new(std::io::ErrorKind::InvalidData, e)))
}

/// Reads the counters of the current network namespace.
pub fn snapshot() -> Result<Snapshot, Error> {
    Source::default().snapshot()
}

/// Parses the header/value line pairs of `/proc/net/snmp` and `/proc/net/netstat`.
pub fn parse_paired(text: &str, path: &Path, out: &mut BTreeMap<String, u64>) -> Result<(), Error> {
    let mut lines = text.lines().enumerate();
    while let Some((i, header)) = lines.next() {
        if header.trim().is_empty() {
            continue;
        }
        let err = |line: usize, message: String| Error::Parse {
            path: path.to_path_buf(),
            line: line + 1,
            message,
        };
        let (prefix, names) = header
            .split_once(':')
            .ok_or_else(|| err(i, "expected 'Prefix: names...'".into()))?;
        let (j, values_line) = lines
            .next()
            .ok_or_else(|| err(i, format!("header '{prefix}' has no value line")))?;
        let (vprefix, values) = values_line
            .split_once(':')
            .ok_or_else(|| err(j, "expected 'Prefix: values...'".into()))?;
        if vprefix != prefix {
            return Err(err(
                j,
                format!("value line '{vprefix}' follows header '{prefix}'"),
            ));
        }
        let names: Vec<&str> = names.split_whitespace().collect();
        let values: Vec<&str> = values.split_whitespace().collect();
        if names.len() != values.len() {
            return Err(err(
                j,
                format!(
                    "{} names but {} values for '{prefix}'",
                    names.len(),
                    values.len()
                ),
            ));
        }
        for (name, value) in names.iter().zip(values) {
            // Some fields (Tcp MaxConn = -1) are signed; keep them as two's complement is
            // useless, so negative values are stored as 0.
            let v = match value.parse::<u64>() {
                Ok(v) => v,
                Err(_) if value.parse::<i64>().is_ok() => 0,
                Err(_) => return Err(err(j, format!("'{name}' has non-numeric value '{value}'"))),
            };
            out.insert(format!("{prefix}{name}"), v);
        }
    }
    Ok(())
}

/// Parses `Name value` lines (`/proc/net/snmp6`).
pub fn parse_flat(text: &str, path: &Path, out: &mut BTreeMap<String, u64>) -> Result<(), Error> {
    for (i, line) in text.lines().enumerate() {
        let mut it = line.split_whitespace();
        let (Some(name), Some(value)) = (it.next(), it.next()) else {
            continue;
        };
        let v = value.parse::<u64>().map_err(|_| Error::Parse {
            path: path.to_path_buf(),
            line: i + 1,
            message: format!("'{name}' has non-numeric value '{value}'"),
        })?;
        out.insert(name.to_string(), v);
    }
    Ok(())
}

impl Snapshot {
    pub fn get(&self, name: &str) -> Option<u64> {
        self.values.get(name).copied()
    }

    /// Counters that changed from `before` to `self`, as signed deltas (a counter that went
    /// down was reset or is a gauge such as `TcpCurrEstab`).
    pub fn delta_since(&self, before: &Snapshot) -> Delta {
        let mut changed = BTreeMap::new();
        for (name, &after) in &self.values {
            let b = before.values.get(name).copied().unwrap_or(0);
            if after != b {
                changed.insert(name.clone(), after as i64 - b as i64);
            }
        }
        Delta { changed }
    }
}

/// Counters that are levels or constants rather than running totals, so that a decrease is
/// not evidence of a reset: `TcpCurrEstab` (a gauge), the RFC 2012 constants `TcpRtoAlgorithm`,
/// `TcpRtoMin`, `TcpRtoMax`, `TcpMaxConn`, and the IP settings `IpForwarding`,
/// `IpDefaultTTL` (net/ipv4/proc.c prints them with the counters).
pub fn is_level(name: &str) -> bool {
    matches!(
        name,
        "TcpCurrEstab"
            | "TcpRtoAlgorithm"
            | "TcpRtoMin"
            | "TcpRtoMax"
            | "TcpMaxConn"
            | "IpForwarding"
            | "IpDefaultTTL"
    ) || tcpdoctor_model::counters::info(name).is_some_and(|c| c.gauge)
}

/// A running total that is lower in the later snapshot.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Backwards {
    pub name: String,
    pub before: u64,
    pub after: u64,
}

impl Snapshot {
    /// Running totals present in both snapshots that are lower in `self` than in `earlier`
    /// (levels excluded, [`is_level`]). Kernel counters only grow while the host runs, so
    /// any entry means the two were swapped, or the host rebooted (or the namespace was
    /// recreated) in between: a delta of the two would be meaningless.
    pub fn went_backwards(&self, earlier: &Snapshot) -> Vec<Backwards> {
        self.values
            .iter()
            .filter(|(name, _)| !is_level(name))
            .filter_map(|(name, &after)| {
                let before = *earlier.values.get(name)?;
                (after < before).then(|| Backwards {
                    name: name.clone(),
                    before,
                    after,
                })
            })
            .collect()
    }
}

/// The counters that moved between two snapshots.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct Delta {
    pub changed: BTreeMap<String, i64>,
}

impl Delta {
    /// Only the TCP counters that moved (`Tcp*` and `TcpExt*`), by name.
    pub fn tcp(&self) -> BTreeMap<String, i64> {
        self.changed
            .iter()
            .filter(|(k, _)| k.starts_with("Tcp"))
            .map(|(k, v)| (k.clone(), *v))
            .collect()
    }

    /// The change of `name`, 0 when it did not move.
    pub fn get(&self, name: &str) -> i64 {
        self.changed.get(name).copied().unwrap_or(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // Excerpts of real files from Linux 6.18.
    const SNMP: &str = "\
Ip: Forwarding DefaultTTL InReceives InHdrErrors
Ip: 1 64 1234 0
Tcp: RtoAlgorithm RtoMin RtoMax MaxConn ActiveOpens PassiveOpens AttemptFails EstabResets CurrEstab InSegs OutSegs RetransSegs InErrs OutRsts InCsumErrors
Tcp: 1 200 120000 -1 4242 17 3 1 5 99999 88888 12 0 7 0
";
    const NETSTAT: &str = "\
TcpExt: SyncookiesSent SyncookiesRecv TW ListenOverflows ListenDrops TCPSynRetrans
TcpExt: 0 0 310 2 2 9
IpExt: InNoRoutes InOctets
IpExt: 0 123456789
";
    const SNMP6: &str = "Ip6InReceives                   \t42\nIp6OutRequests 40\n";

    fn parse_all() -> Snapshot {
        let mut s = Snapshot::default();
        parse_paired(SNMP, Path::new("snmp"), &mut s.values).unwrap();
        parse_paired(NETSTAT, Path::new("netstat"), &mut s.values).unwrap();
        parse_flat(SNMP6, Path::new("snmp6"), &mut s.values).unwrap();
        s
    }

    #[test]
    fn names_match_nstat() {
        let s = parse_all();
        assert_eq!(s.get("TcpRetransSegs"), Some(12));
        assert_eq!(s.get("TcpExtTCPSynRetrans"), Some(9));
        assert_eq!(s.get("TcpExtListenOverflows"), Some(2));
        assert_eq!(s.get("IpExtInOctets"), Some(123456789));
        assert_eq!(s.get("Ip6InReceives"), Some(42));
        assert_eq!(s.get("TcpMaxConn"), Some(0));
    }

    #[test]
    fn delta_reports_only_moved_counters() {
        let a = parse_all();
        let mut b = a.clone();
        *b.values.get_mut("TcpExtTCPSynRetrans").unwrap() += 3;
        *b.values.get_mut("TcpCurrEstab").unwrap() -= 2;
        let d = b.delta_since(&a);
        assert_eq!(d.changed.len(), 2);
        assert_eq!(d.get("TcpExtTCPSynRetrans"), 3);
        assert_eq!(d.get("TcpCurrEstab"), -2);
        assert_eq!(d.get("TcpRetransSegs"), 0);
        *b.values.get_mut("IpExtInOctets").unwrap() += 1;
        let tcp = b.delta_since(&a).tcp();
        assert_eq!(tcp.len(), 2, "{tcp:?}");
        assert!(tcp.keys().all(|k| k.starts_with("Tcp")));
    }

    #[test]
    fn malformed_input_names_the_line() {
        let mut m = BTreeMap::new();
        let e = parse_paired("Tcp: A B\nTcp: 1\n", Path::new("/proc/net/snmp"), &mut m)
            .unwrap_err()
            .to_string();
        assert!(e.contains("/proc/net/snmp: line 2"), "{e}");
        let e = parse_paired("Tcp: A\n", Path::new("x"), &mut m)
            .unwrap_err()
            .to_string();
        assert!(e.contains("no value line"), "{e}");
        let e = parse_paired("Tcp: A\nUdp: 1\n", Path::new("x"), &mut m)
            .unwrap_err()
            .to_string();
        assert!(e.contains("follows header"), "{e}");
        let e = parse_paired("Tcp: A\nTcp: x\n", Path::new("x"), &mut m)
            .unwrap_err()
            .to_string();
        assert!(e.contains("non-numeric"), "{e}");
    }

    #[test]
    fn swapped_snapshots_go_backwards_levels_do_not_count() {
        let a = parse_all();
        let mut b = a.clone();
        *b.values.get_mut("TcpOutSegs").unwrap() += 100;
        *b.values.get_mut("TcpCurrEstab").unwrap() -= 2;
        assert!(b.went_backwards(&a).is_empty(), "a gauge may go down");
        let back = a.went_backwards(&b);
        assert_eq!(
            back,
            vec![Backwards {
                name: "TcpOutSegs".into(),
                before: 88988,
                after: 88888
            }]
        );
        // A counter only in one snapshot is not compared.
        b.values.insert("TcpExtNew".into(), 5);
        assert_eq!(a.went_backwards(&b).len(), 1);
    }

    #[test]
    fn live_snapshot_has_tcp_counters() {
        let s = snapshot().expect("/proc/net is readable on Linux");
        assert!(s.get("TcpActiveOpens").is_some());
        assert!(s.get("TcpExtTW").is_some());
    }
}
