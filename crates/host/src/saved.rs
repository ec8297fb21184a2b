//! Parsers of saved counter text, so a machine tcpdoctor cannot run on can still be
//! diagnosed: `nstat -a` and `nstat --json` (Linux), `netstat -s` (Linux net-tools),
//! `netstat -s -p tcp` (macOS/BSD) and `netstat -sP tcp` (illumos/Solaris).
//!
//! Every counter becomes an entry of a [`Snapshot`] named as `nstat` names it when a mapping
//! exists (`tcpRetransSegs` -> `TcpRetransSegs`); counters without an nstat equivalent keep
//! a name derived from the file (`tcpInDupAck`, `tcp: N persist timeouts`) and are listed in
//! [`Saved::unmapped`]. Lines that carry no counter and are not headings are listed in
//! [`Saved::unparsed`] with their line number: nothing is dropped silently.
//!
//! Pure text processing: no clock, no host access beyond [`read`] opening the file.

use std::collections::BTreeMap;
use std::path::Path;

use serde::Serialize;

use crate::counters::Snapshot;
use crate::Error;

/// Which tool wrote the text.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Format {
    /// `nstat -a` (also `-z`, `-s`): `#kernel` then `Name value rate` lines.
    NstatText,
    /// `nstat -a --json`: `{"kernel":{"Name":value,...}}`.
    NstatJson,
    /// Linux net-tools `netstat -s`: `Tcp:` sections of `N description` or `Name: N` lines.
    LinuxNetstat,
    /// macOS/BSD `netstat -s -p tcp`: `tcp:` then tab-indented `N description` lines.
    MacosNetstat,
    /// illumos/Solaris `netstat -sP tcp`: `name = value` pairs, two per line.
    IllumosNetstat,
}

impl Format {
    /// Whether a delta between files of these two formats means anything: only the same
    /// tool's output compares counter by counter (nstat's text and JSON forms are one tool).
    /// Different tools, let alone different systems, name and cover different counters, so
    /// a counter missing from one file would read as a change.
    pub fn comparable(self, other: Format) -> bool {
        use Format::*;
        self == other
            || matches!(
                (self, other),
                (NstatText, NstatJson) | (NstatJson, NstatText)
            )
    }

    pub fn name(self) -> &'static str {
        match self {
            Format::NstatText => "nstat",
            Format::NstatJson => "nstat --json",
            Format::LinuxNetstat => "Linux netstat -s",
            Format::MacosNetstat => "macOS netstat -s -p tcp",
            Format::IllumosNetstat => "illumos netstat -sP tcp",
        }
    }
}

/// A line that held no counter and was not a heading.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Unparsed {
    /// 1-based line number (0 for JSON members, which have no line of their own).
    pub line: usize,
    pub text: String,
    pub reason: &'static str,
}

/// One parsed file.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Saved {
    pub format: Format,
    #[serde(skip)]
    pub snapshot: Snapshot,
    /// nstat name -> the name (or description) the file used, for mapped counters whose
    /// name differs.
    pub mapped: BTreeMap<String, String>,
    /// Counters kept under the file's own name: no nstat equivalent is known.
    pub unmapped: Vec<String>,
    pub unparsed: Vec<Unparsed>,
}

impl Saved {
    fn new(format: Format) -> Saved {
        Saved {
            format,
            snapshot: Snapshot::default(),
            mapped: BTreeMap::new(),
            unmapped: Vec::new(),
            unparsed: Vec::new(),
        }
    }

    fn unparsed(&mut self, line: usize, text: &str, reason: &'static str) {
        self.unparsed.push(Unparsed {
            line,
            text: text.to_string(),
            reason,
        });
    }

    /// Stores a counter under its nstat name when `nstat` is `Some`, else under `native`.
    fn put(&mut self, nstat: Option<&str>, native: &str, value: u64) {
        match nstat {
            Some(n) => {
                if n != native {
                    self.mapped.insert(n.to_string(), native.to_string());
                }
                self.snapshot.values.insert(n.to_string(), value);
            }
            None => {
                let mut name = native.to_string();
                // The same description twice (e.g. under "sent" and "received"): number it.
                let mut k = 2;
                while self.snapshot.values.contains_key(&name) {
                    name = format!("{native} #{k}");
                    k += 1;
                }
                self.unmapped.push(name.clone());
                self.snapshot.values.insert(name, value);
            }
        }
    }
}

/// The most a saved counter file may hold. `netstat -s` and `nstat -a` print 10-40 kB; a file
/// of many namespaces' outputs stays well under this. Reading stops here, so `--from
/// /dev/zero` is refused at once instead of filling memory.
pub const MAX_BYTES: u64 = 4 << 20;

/// Reads and parses a saved file, detecting its format.
pub fn read(path: &Path) -> Result<Saved, Error> {
    let file = std::fs::File::open(path).map_err(|source| Error::Read {
        path: path.to_path_buf(),
        source,
    })?;
    read_from(file, path)
}

/// Reads at most [`MAX_BYTES`] from `r` (a file, standard input) and parses it; `path` names
/// it in errors.
pub fn read_from(r: impl std::io::Read, path: &Path) -> Result<Saved, Error> {
    use std::io::Read as _;
    let mut bytes = Vec::new();
    r.take(MAX_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(|source| Error::Read {
            path: path.to_path_buf(),
            source,
        })?;
    if bytes.len() as u64 > MAX_BYTES {
        return Err(Error::TooLarge {
            path: path.to_path_buf(),
            limit_bytes: MAX_BYTES,
        });
    }
    let text = String::from_utf8_lossy(&bytes);
    parse(&text, path)
}

/// Parses text of any supported format (`path` only names it in errors).
pub fn parse(text: &str, path: &Path) -> Result<Saved, Error> {
    let format = detect(text).ok_or_else(|| Error::Parse {
        path: path.to_path_buf(),
        line: 1,
        message: "not nstat, nstat --json, or netstat -s output of Linux, macOS or illumos".into(),
    })?;
    parse_as(text, format, path)
}

/// Guesses the format from the first meaningful lines.
pub fn detect(text: &str) -> Option<Format> {
    let first = text
        .lines()
        .map(str::trim_end)
        .find(|l| !l.trim().is_empty())?;
    let t = first.trim_start();
    if t.starts_with('{') {
        return Some(Format::NstatJson);
    }
    if t.starts_with("#kernel") {
        return Some(Format::NstatText);
    }
    if text.contains("tcpActiveOpens") || (t.starts_with("TCP") && t.contains('=')) {
        return Some(Format::IllumosNetstat);
    }
    if t == "tcp:" {
        return Some(Format::MacosNetstat);
    }
    let sectioned = !first.starts_with(char::is_whitespace)
        && t.ends_with(':')
        && t[..t.len() - 1].chars().all(|c| c.is_ascii_alphanumeric());
    if sectioned {
        return Some(Format::LinuxNetstat);
    }
    // nstat without the #kernel line: `Name value rate`.
    let mut it = t.split_whitespace();
    if let (Some(n), Some(v)) = (it.next(), it.next()) {
        if n.chars().all(|c| c.is_ascii_alphanumeric()) && v.parse::<u64>().is_ok() {
            return Some(Format::NstatText);
        }
    }
    None
}

/// Parses text known to be `format`.
pub fn parse_as(text: &str, format: Format, path: &Path) -> Result<Saved, Error> {
    Ok(match format {
        Format::NstatText => nstat_text(text),
        Format::NstatJson => nstat_json(text, path)?,
        Format::LinuxNetstat => linux_netstat(text),
        Format::MacosNetstat => macos_netstat(text),
        Format::IllumosNetstat => illumos_netstat(text),
    })
}

/// A counter value: unsigned; a negative one (`tcpMaxConn = -1`, "no limit") is kept as 0,
/// like the live reader does.
fn value(s: &str) -> Option<u64> {
    s.parse::<u64>()
        .ok()
        .or_else(|| s.parse::<i64>().ok().map(|_| 0))
}

fn nstat_text(text: &str) -> Saved {
    let mut out = Saved::new(Format::NstatText);
    for (i, line) in text.lines().enumerate() {
        let t = line.trim();
        if t.is_empty() || t.starts_with('#') {
            continue;
        }
        let cols: Vec<&str> = t.split_whitespace().collect();
        let name_ok = cols
            .first()
            .is_some_and(|n| n.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'));
        match (name_ok, cols.get(1).and_then(|v| value(v))) {
            (true, Some(v)) if cols.len() <= 3 => out.put(Some(cols[0]), cols[0], v),
            _ => out.unparsed(i + 1, line, "expected 'Name value [rate]'"),
        }
    }
    out
}

fn nstat_json(text: &str, path: &Path) -> Result<Saved, Error> {
    let v: serde_json::Value = serde_json::from_str(text).map_err(|e| Error::Parse {
        path: path.to_path_buf(),
        line: e.line(),
        message: format!("invalid JSON: {e}"),
    })?;
    let kernel = v
        .get("kernel")
        .and_then(|k| k.as_object())
        .ok_or_else(|| Error::Parse {
            path: path.to_path_buf(),
            line: 1,
            message: "no \"kernel\" object (expected nstat --json output)".into(),
        })?;
    let mut out = Saved::new(Format::NstatJson);
    for (name, val) in kernel {
        match val.as_u64().or_else(|| val.as_i64().map(|_| 0)) {
            Some(n) => out.put(Some(name), name, n),
            None => out.unparsed(0, &format!("\"{name}\": {val}"), "value is not an integer"),
        }
    }
    Ok(out)
}

/// A description with every number replaced by `N`, and the first number.
fn template(line: &str) -> Option<(String, u64)> {
    let mut t = String::with_capacity(line.len());
    let mut first: Option<u64> = None;
    let mut chars = line.trim().chars().peekable();
    while let Some(c) = chars.next() {
        if c.is_ascii_digit() {
            let mut num = String::from(c);
            while let Some(&d) = chars.peek() {
                if d.is_ascii_digit() {
                    num.push(d);
                    chars.next();
                } else {
                    break;
                }
            }
            // Digits glued to letters belong to a word ("IPv4", "Type3"), not a count.
            if t.ends_with(|p: char| p.is_ascii_alphabetic()) {
                t.push_str(&num);
                continue;
            }
            if first.is_none() {
                first = Some(num.parse().ok()?);
            }
            t.push('N');
        } else {
            t.push(c);
        }
    }
    first.map(|v| (t, v))
}

/// `Name: 123` with a one-word name, as net-tools prints fields it has no sentence for.
fn raw_field(t: &str) -> Option<(&str, u64)> {
    let (name, v) = t.split_once(": ")?;
    if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
        return None;
    }
    Some((name, value(v.trim())?))
}

/// Sentences of Linux net-tools `netstat -s` and their nstat names, per section. Collected
/// from net-tools 2.10 output on Linux 6.18 (tests/data/counters/linux-netstat-s.*.txt)
/// and cross-checked against `nstat -a` taken at the same moment.
#[rustfmt::skip]
static LINUX_NETSTAT: &[(&str, &str, &str)] = &[
    ("Ip", "N total packets received", "IpInReceives"),
    ("Ip", "N forwarded", "IpForwDatagrams"),
    ("Ip", "N incoming packets discarded", "IpInDiscards"),
    ("Ip", "N incoming packets delivered", "IpInDelivers"),
    ("Ip", "N requests sent out", "IpOutRequests"),
    ("Ip", "N outgoing packets dropped", "IpOutDiscards"),
    ("Ip", "N dropped because of missing route", "IpOutNoRoutes"),
    ("Tcp", "N active connection openings", "TcpActiveOpens"),
    ("Tcp", "N active connections openings", "TcpActiveOpens"),
    ("Tcp", "N passive connection openings", "TcpPassiveOpens"),
    ("Tcp", "N failed connection attempts", "TcpAttemptFails"),
    ("Tcp", "N connection resets received", "TcpEstabResets"),
    ("Tcp", "N connections established", "TcpCurrEstab"),
    ("Tcp", "N segments received", "TcpInSegs"),
    ("Tcp", "N segments sent out", "TcpOutSegs"),
    ("Tcp", "N segments send out", "TcpOutSegs"),
    ("Tcp", "N segments retransmitted", "TcpRetransSegs"),
    ("Tcp", "N segments retransmited", "TcpRetransSegs"),
    ("Tcp", "N bad segments received", "TcpInErrs"),
    ("Tcp", "N bad segments received.", "TcpInErrs"),
    ("Tcp", "N resets sent", "TcpOutRsts"),
    ("Udp", "N packets received", "UdpInDatagrams"),
    ("Udp", "N packets to unknown port received", "UdpNoPorts"),
    ("Udp", "N packet receive errors", "UdpInErrors"),
    ("Udp", "N packets sent", "UdpOutDatagrams"),
    ("Udp", "N receive buffer errors", "UdpRcvbufErrors"),
    ("Udp", "N send buffer errors", "UdpSndbufErrors"),
    ("TcpExt", "N TCP sockets finished time wait in fast timer", "TcpExtTW"),
    ("TcpExt", "N time wait sockets recycled by time stamp", "TcpExtTWRecycled"),
    ("TcpExt", "N TCP sockets finished time wait in slow timer", "TcpExtTWKilled"),
    ("TcpExt", "N delayed acks sent", "TcpExtDelayedACKs"),
    ("TcpExt", "N delayed acks further delayed because of locked socket", "TcpExtDelayedACKLocked"),
    ("TcpExt", "Quick ack mode was activated N times", "TcpExtDelayedACKLost"),
    ("TcpExt", "N times the listen queue of a socket overflowed", "TcpExtListenOverflows"),
    ("TcpExt", "N SYNs to LISTEN sockets dropped", "TcpExtListenDrops"),
    ("TcpExt", "N SYNs to LISTEN sockets ignored", "TcpExtListenDrops"),
    ("TcpExt", "N packets pruned from receive queue because of socket buffer overrun", "TcpExtPruneCalled"),
    ("TcpExt", "N packets pruned from receive queue", "TcpExtRcvPruned"),
    ("TcpExt", "N packets dropped from out-of-order queue because of socket buffer overrun", "TcpExtOfoPruned"),
    ("TcpExt", "N packets collapsed in receive queue due to low socket buffer", "TcpExtTCPRcvCollapsed"),
    ("TcpExt", "N SYN cookies sent", "TcpExtSyncookiesSent"),
    ("TcpExt", "N SYN cookies received", "TcpExtSyncookiesRecv"),
    ("TcpExt", "N invalid SYN cookies received", "TcpExtSyncookiesFailed"),
    ("TcpExt", "N resets received for embryonic SYN_RECV sockets", "TcpExtEmbryonicRsts"),
    ("TcpExt", "N packets rejects in established connections because of timestamp", "TcpExtPAWSEstab"),
    ("TcpExt", "N packets rejected in established connections because of timestamp", "TcpExtPAWSEstab"),
    ("TcpExt", "N active connections rejected because of time stamp", "TcpExtPAWSActive"),
    ("TcpExt", "N packet headers predicted", "TcpExtTCPHPHits"),
    ("TcpExt", "N acknowledgments not containing data payload received", "TcpExtTCPPureAcks"),
    ("TcpExt", "N predicted acknowledgments", "TcpExtTCPHPAcks"),
    ("TcpExt", "N other TCP timeouts", "TcpExtTCPTimeouts"),
    ("TcpExt", "N fast retransmits", "TcpExtTCPFastRetrans"),
    ("TcpExt", "N retransmits in slow start", "TcpExtTCPSlowStartRetrans"),
    ("TcpExt", "N connections reset due to unexpected data", "TcpExtTCPAbortOnData"),
    ("TcpExt", "N connections reset due to early user close", "TcpExtTCPAbortOnClose"),
    ("TcpExt", "N connections aborted due to memory pressure", "TcpExtTCPAbortOnMemory"),
    ("TcpExt", "N connections aborted due to timeout", "TcpExtTCPAbortOnTimeout"),
    ("TcpExt", "N times unable to send RST due to no memory", "TcpExtTCPAbortFailed"),
];

fn linux_netstat(text: &str) -> Saved {
    let mut out = Saved::new(Format::LinuxNetstat);
    let mut section = String::new();
    let mut sub = String::new();
    for (i, line) in text.lines().enumerate() {
        let t = line.trim();
        if t.is_empty() {
            continue;
        }
        if !line.starts_with(char::is_whitespace) {
            // "Tcp:" alone, or "Ip: Forwarding: 2" on very old versions.
            if let Some(name) = t.strip_suffix(':') {
                if name.chars().all(|c| c.is_ascii_alphanumeric()) {
                    section = name.to_string();
                    sub.clear();
                    continue;
                }
            }
            out.unparsed(i + 1, line, "expected a 'Section:' heading");
            continue;
        }
        if t.ends_with(':') && !t.chars().any(|c| c.is_ascii_digit()) {
            sub = t.trim_end_matches(':').to_string();
            continue;
        }
        if sub.is_empty() {
            if let Some((name, v)) = raw_field(t) {
                let full = format!("{section}{name}");
                out.put(Some(&full), &full, v);
                continue;
            }
        }
        match template(t) {
            Some((tpl, v)) => {
                let nstat = LINUX_NETSTAT
                    .iter()
                    .find(|(s, d, _)| *s == section && *d == tpl)
                    .map(|(_, _, n)| *n);
                let native = if sub.is_empty() {
                    format!("{section}: {tpl}")
                } else {
                    format!("{section}: {sub}: {tpl}")
                };
                match nstat {
                    Some(n) => {
                        out.put(Some(n), &native, v);
                    }
                    None => out.put(None, &native, v),
                }
            }
            None => out.unparsed(i + 1, line, "no counter value on this line"),
        }
    }
    out
}

/// Sentences of macOS `netstat -s -p tcp` (the BSD `tcpstat` printer) with an nstat
/// equivalent. Counts of packets map to segments.
#[rustfmt::skip]
static MACOS_NETSTAT: &[(&str, &str)] = &[
    ("N packets sent", "TcpOutSegs"),
    ("N data packets (N bytes) retransmitted", "TcpRetransSegs"),
    ("N window probe packets", "TcpExtTCPWinProbe"),
    ("N packets received", "TcpInSegs"),
    ("N discarded for bad checksums", "TcpInCsumErrors"),
    ("N connection requests", "TcpActiveOpens"),
    ("N connection accepts", "TcpPassiveOpens"),
    ("N listen queue overflows", "TcpExtListenOverflows"),
    ("N retransmit timeouts", "TcpExtTCPTimeouts"),
    ("N connections dropped by rexmit timeout", "TcpExtTCPAbortOnTimeout"),
    ("N cookies sent", "TcpExtSyncookiesSent"),
    ("N cookies received", "TcpExtSyncookiesRecv"),
];

fn macos_netstat(text: &str) -> Saved {
    let mut out = Saved::new(Format::MacosNetstat);
    let mut section = String::from("tcp");
    for (i, line) in text.lines().enumerate() {
        let t = line.trim();
        if t.is_empty() {
            continue;
        }
        if !line.starts_with(char::is_whitespace) && t.ends_with(':') {
            section = t.trim_end_matches(':').to_string();
            continue;
        }
        match template(t) {
            Some((tpl, v)) => {
                let nstat = MACOS_NETSTAT
                    .iter()
                    .find(|(d, _)| *d == tpl)
                    .map(|(_, n)| *n)
                    .filter(|n| !out.snapshot.values.contains_key(*n));
                out.put(nstat, &format!("{section}: {tpl}"), v);
            }
            None => out.unparsed(i + 1, line, "no counter value on this line"),
        }
    }
    out
}

/// illumos/Solaris MIB-II names (RFC 4022 `tcp*` plus Solaris extensions) with an nstat
/// equivalent.
#[rustfmt::skip]
static ILLUMOS_NETSTAT: &[(&str, &str)] = &[
    ("tcpRtoAlgorithm", "TcpRtoAlgorithm"),
    ("tcpRtoMin", "TcpRtoMin"),
    ("tcpRtoMax", "TcpRtoMax"),
    ("tcpMaxConn", "TcpMaxConn"),
    ("tcpActiveOpens", "TcpActiveOpens"),
    ("tcpPassiveOpens", "TcpPassiveOpens"),
    ("tcpAttemptFails", "TcpAttemptFails"),
    ("tcpEstabResets", "TcpEstabResets"),
    ("tcpCurrEstab", "TcpCurrEstab"),
    ("tcpInSegs", "TcpInSegs"),
    ("tcpOutSegs", "TcpOutSegs"),
    ("tcpRetransSegs", "TcpRetransSegs"),
    ("tcpOutRsts", "TcpOutRsts"),
    ("tcpInErrs", "TcpInErrs"),
    // Connections dropped because the listener's accept queue (q) was full.
    ("tcpListenDrop", "TcpExtListenOverflows"),
    // Dropped because the half-open (q0, SYN) queue was full.
    ("tcpListenDropQ0", "TcpExtTCPReqQFullDrop"),
    // Retransmission timer expiries, and connections given up after them.
    ("tcpTimRetrans", "TcpExtTCPTimeouts"),
    ("tcpTimRetransDrop", "TcpExtTCPAbortOnTimeout"),
    ("tcpTimKeepaliveDrop", "TcpExtTCPAbortOnTimeout"),
];

fn illumos_netstat(text: &str) -> Saved {
    let mut out = Saved::new(Format::IllumosNetstat);
    for (i, line) in text.lines().enumerate() {
        let mut t = line.trim();
        if t.is_empty() {
            continue;
        }
        // The first line starts with the section name ("TCP").
        if let Some(rest) = t.strip_prefix("TCP") {
            if rest.starts_with(char::is_whitespace) {
                t = rest.trim_start();
            } else if rest.is_empty() {
                continue;
            }
        }
        let mut found = 0;
        let mut bad = false;
        let mut rest = t;
        while let Some(eq) = rest.find('=') {
            let name = rest[..eq].trim();
            let after = rest[eq + 1..].trim_start();
            let end = after
                .find(|c: char| c.is_whitespace())
                .unwrap_or(after.len());
            let (num, tail) = after.split_at(end);
            match (
                !name.is_empty() && name.chars().all(|c| c.is_ascii_alphanumeric()),
                value(num),
            ) {
                (true, Some(v)) => {
                    let nstat = ILLUMOS_NETSTAT
                        .iter()
                        .find(|(n, _)| *n == name)
                        .map(|(_, n)| *n)
                        .filter(|n| !out.snapshot.values.contains_key(*n));
                    out.put(nstat, name, v);
                    found += 1;
                }
                _ => bad = true,
            }
            rest = tail;
        }
        if bad || found == 0 || !rest.trim().is_empty() {
            out.unparsed(i + 1, line, "expected 'name = value' pairs");
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn templates_number_words_and_counts() {
        assert_eq!(
            template("Quick ack mode was activated 12 times"),
            Some(("Quick ack mode was activated N times".into(), 12))
        );
        assert_eq!(
            template("1217 data packets (1116453 bytes) retransmitted"),
            Some(("N data packets (N bytes) retransmitted".into(), 1217))
        );
        assert_eq!(
            template("3 segments over IPv4"),
            Some(("N segments over IPv4".into(), 3))
        );
        assert_eq!(template("ICMP input histogram:"), None);
    }

    #[test]
    fn only_the_same_tool_compares() {
        use Format::*;
        assert!(NstatText.comparable(NstatJson));
        assert!(LinuxNetstat.comparable(LinuxNetstat));
        assert!(!NstatText.comparable(MacosNetstat));
        assert!(!MacosNetstat.comparable(IllumosNetstat));
        assert!(!LinuxNetstat.comparable(NstatText));
    }

    #[test]
    fn detects_each_format() {
        assert_eq!(
            detect("#kernel\nTcpInSegs 1 0.0\n"),
            Some(Format::NstatText)
        );
        assert_eq!(detect("{\"kernel\":{}}"), Some(Format::NstatJson));
        assert_eq!(
            detect("Ip:\n    Forwarding: 1\n"),
            Some(Format::LinuxNetstat)
        );
        assert_eq!(
            detect("tcp:\n\t1 packets sent\n"),
            Some(Format::MacosNetstat)
        );
        assert_eq!(
            detect("\nTCP     tcpRtoAlgorithm     =     4\n"),
            Some(Format::IllumosNetstat)
        );
        assert_eq!(detect("hello world\n"), None);
        assert_eq!(detect(""), None);
    }

    #[test]
    fn nstat_text_reports_bad_lines() {
        let s = nstat_text("#kernel\nTcpInSegs 10 0.0\nTcpOutSegs x 0.0\ngarbage\nTcpExtTW 3\n");
        assert_eq!(s.snapshot.get("TcpInSegs"), Some(10));
        assert_eq!(s.snapshot.get("TcpExtTW"), Some(3));
        assert_eq!(s.unparsed.len(), 2);
        assert_eq!(s.unparsed[0].line, 3);
        assert_eq!(s.unparsed[1].text, "garbage");
    }

    #[test]
    fn illumos_pairs_and_glued_values() {
        let s = illumos_netstat(
            "\nTCP     tcpRtoAlgorithm     =     4     tcpRtoMin           =   400\n        tcpOutDataBytes     =12094637     tcpRetransSegs      =   166\n        tcpMaxConn          =    -1     tcpInDupAck         = 1234\n        tcpBroken           = oops\n",
        );
        assert_eq!(s.snapshot.get("TcpRtoMin"), Some(400));
        assert_eq!(s.snapshot.get("tcpOutDataBytes"), Some(12094637));
        assert_eq!(s.snapshot.get("TcpRetransSegs"), Some(166));
        assert_eq!(s.snapshot.get("TcpMaxConn"), Some(0));
        assert_eq!(s.mapped["TcpRetransSegs"], "tcpRetransSegs");
        assert!(s.unmapped.contains(&"tcpInDupAck".to_string()));
        assert_eq!(s.unparsed.len(), 1);
        assert_eq!(s.unparsed[0].line, 5);
    }

    #[test]
    fn json_errors_name_the_line() {
        let e = nstat_json("{\"kernel\":\n{\"A\": }", Path::new("x.json"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("x.json: line 2"), "{e}");
        let e = nstat_json("{\"other\":{}}", Path::new("x.json"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("kernel"), "{e}");
        let s = nstat_json("{\"kernel\":{\"A\":1,\"B\":\"x\"}}", Path::new("x")).unwrap();
        assert_eq!(s.snapshot.get("A"), Some(1));
        assert_eq!(s.unparsed.len(), 1);
    }
}
