//! Port scans: one source address trying many ports of one host, each attempt a bare
//! handshake probe that carries no data: closed ports answer with a reset, filtered ones not
//! at all, open ones with a SYN-ACK the prober leaves (a reset, or nothing). That is a scan,
//! not a host whose connections fail: its refusals and silences are the scan's evidence, and
//! the connection-failure and unanswered-SYN detectors leave them to it.
//!
//! Decision (issue 21): a scan is a finding of its own (`port_scan`), judged as context
//! (nothing of the host's own work was hurt: info), listing what it touched. A pair (source
//! address, target address) is a scan once its probes reached [`SCAN_MIN_PORTS`] distinct
//! target ports that did not answer with a SYN-ACK (closed or filtered): a client that
//! health-checks many open ports without sending data is not a scan. Probes summarised
//! before that were already counted by the other detectors; the pair remembers them
//! ([`Leaked`]) so those detectors take them back at the end.
//!
//! Memory is bounded: only pairs with a probe are tracked, at most [`PAIRS_MAX`]; a port set
//! is a short list, and grows to a 64 Kibit bitmap past [`LISTED_PORTS`] ports only for the
//! first [`BITMAPS_MAX`] pairs that get there (after that its count is a lower bound).

use std::net::IpAddr;

use serde::Serialize;
use tcpdoctor_model::{Evidence, Finding, Impact, Pathology, Source};

use super::handshake::{outcome, Outcome};
use super::{us, Conclusion, Context};
use crate::engine::Config;
use crate::flow::{CloseKind, Conn, FastMap};

/// Distinct ports of one host probed from one source address that make a scan. A client
/// that talks to a service uses one port, or a few (a control and a data port); ten bare
/// probes to ten ports, none carrying data, is a search for open ones.
pub const SCAN_MIN_PORTS: u32 = 10;

/// Pairs (source, target) tracked at most. When the table is full, pairs that have tried
/// one port only are forgotten (a SYN flood from many sources fills it with those); if that
/// frees too little, probes of new pairs are left to the other detectors (counted in
/// [`ScanDetails::pairs_untracked`]) until as many more were met as a quarter of the table.
pub const PAIRS_MAX: usize = 1 << 14;

/// Ports a set keeps in a list before it needs a bitmap.
const LISTED_PORTS: usize = 32;

/// Bitmaps (8 KiB each) for all pairs together: 8 MiB.
const BITMAPS_MAX: usize = 1024;

/// Open ports listed per scan.
const OPEN_LISTED: usize = 16;

/// One scan, as `--json` lists it.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ScanRow {
    pub source: String,
    pub target: String,
    /// Distinct target ports probed (a lower bound when `ports_at_least`).
    pub ports: u64,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub ports_at_least: bool,
    /// Handshake attempts (probes) counted.
    pub probes: u64,
    /// Answered by a SYN-ACK (open); the prober left without data.
    pub open: u64,
    /// Answered by a reset (closed).
    pub closed: u64,
    /// Never answered (filtered, or still waiting when the capture ended).
    pub filtered: u64,
    /// Distinct source ports the probes came from: 1 (a raw SYN scan keeps one), or "several".
    pub one_source_port: bool,
    pub start_us: u64,
    pub duration_us: u64,
    /// Some open ports (up to 16, in the order found).
    pub open_ports: Vec<u16>,
    /// Frames of the first probes (SYN and answer).
    pub frames: Vec<u64>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct ScanDetails {
    pub scans: Vec<ScanRow>,
    /// Pairs not tracked because [`PAIRS_MAX`] were.
    pub pairs_untracked: u64,
}

/// Probes of a pair summarised before it was known to scan, which the other detectors
/// counted: they take them back at the end ([`Scans::leaked`]).
#[derive(Clone, Debug, Default)]
pub struct Leaked {
    /// Refused (a reset that acknowledged the SYN).
    pub refused: u64,
    /// Never answered, given up after one SYN / after resending it.
    pub unanswered_once: u64,
    pub unanswered_resent: u64,
    /// Target ports of the unanswered ones, and how many each.
    pub unanswered_ports: Vec<(u16, u32)>,
}

/// Distinct ports: a short list, then a bitmap (if the budget allows; else saturated: new
/// ports past the list are no longer told from old ones, and the count stops).
#[derive(Default)]
struct PortSet {
    listed: Vec<u16>,
    bits: Option<Box<[u64; 1024]>>,
    count: u32,
    saturated: bool,
}

impl PortSet {
    /// Adds `p`; true when it was new. `bitmaps` is the budget left for bitmaps.
    fn add(&mut self, p: u16, bitmaps: &mut usize) -> bool {
        let (w, m) = (usize::from(p) / 64, 1u64 << (p % 64));
        if let Some(b) = &mut self.bits {
            if b[w] & m != 0 {
                return false;
            }
            b[w] |= m;
            self.count += 1;
            return true;
        }
        if self.listed.contains(&p) || self.saturated {
            return false;
        }
        if self.listed.len() < LISTED_PORTS {
            self.listed.push(p);
            self.count += 1;
            return true;
        }
        if *bitmaps == 0 {
            self.saturated = true;
            return false;
        }
        *bitmaps -= 1;
        let mut b = Box::new([0u64; 1024]);
        for q in self.listed.drain(..).chain(std::iter::once(p)) {
            b[usize::from(q) / 64] |= 1 << (q % 64);
        }
        self.listed.shrink_to_fit();
        self.bits = Some(b);
        self.count += 1;
        true
    }
}

#[derive(Default)]
struct Pair {
    ports: PortSet,
    /// Distinct ports that did not answer with a SYN-ACK, up to [`SCAN_MIN_PORTS`].
    failed_ports: Vec<u16>,
    probes: u64,
    open: u64,
    closed: u64,
    filtered: u64,
    src_port: u16,
    several_src_ports: bool,
    first_ts: u64,
    last_ts: u64,
    open_ports: Vec<u16>,
    frames: Vec<u64>,
    leaked: Leaked,
}

impl Pair {
    fn scanning(&self) -> bool {
        self.failed_ports.len() >= SCAN_MIN_PORTS as usize
    }
}

/// How a probe ended.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Probe {
    Open,
    Closed,
    /// Unanswered: given up after one SYN, after several, or still waiting at the end.
    Filtered {
        resent: bool,
        given_up: bool,
    },
    /// Answered after SYN retransmissions, or some other handshake outcome.
    Other,
}

pub(crate) struct Scans {
    time_wait_ns: u64,
    pairs: FastMap<(IpAddr, IpAddr), Pair>,
    untracked: u64,
    /// Bitmaps left to give to port sets.
    bitmaps: usize,
    /// New pairs to leave untracked before the table is swept again.
    sweep_after: usize,
}

impl Scans {
    pub(crate) fn new(cfg: &Config) -> Scans {
        Scans {
            time_wait_ns: cfg.time_wait.as_nanos() as u64,
            pairs: FastMap::default(),
            untracked: 0,
            bitmaps: BITMAPS_MAX,
            sweep_after: 0,
        }
    }

    /// A summarised incarnation: tracked when it is a probe (a handshake attempt that
    /// carried no data); true when it belongs to a pair known to scan, so the other detectors
    /// leave it to this one.
    pub(crate) fn caught(&mut self, c: &Conn) -> bool {
        if c.syn_count == 0 || !c.roles_known || c.half.sum(|h| h.bytes) > 0 {
            return false;
        }
        let probe = if c.synack.is_some() && c.syn_count == 1 {
            Probe::Open
        } else {
            match outcome(c, self.time_wait_ns) {
                Some(Outcome::Refused) => Probe::Closed,
                _ if c.close == CloseKind::Unanswered || c.half_open() => Probe::Filtered {
                    resent: c.syn_count > 1,
                    given_up: c.close == CloseKind::Unanswered,
                },
                _ => Probe::Other,
            }
        };
        let key = (c.client.addr, c.server.addr);
        if self.pairs.len() >= PAIRS_MAX && !self.pairs.contains_key(&key) {
            self.make_room();
        }
        let full = self.pairs.len() >= PAIRS_MAX;
        let pair = match self.pairs.get_mut(&key) {
            Some(p) => p,
            None if full => {
                self.untracked += 1;
                return false;
            }
            None => self.pairs.entry(key).or_default(),
        };
        let was_scanning = pair.scanning();
        pair.ports.add(c.server.port, &mut self.bitmaps);
        let failed = matches!(probe, Probe::Closed | Probe::Filtered { .. });
        if failed && !was_scanning && !pair.failed_ports.contains(&c.server.port) {
            pair.failed_ports.push(c.server.port);
        }
        if pair.probes == 0 {
            pair.src_port = c.client.port;
            pair.first_ts = c.first_ts;
        } else if pair.src_port != c.client.port {
            pair.several_src_ports = true;
        }
        pair.probes += 1;
        pair.first_ts = pair.first_ts.min(c.first_ts);
        pair.last_ts = pair.last_ts.max(c.last_ts);
        match probe {
            Probe::Open => {
                pair.open += 1;
                if pair.open_ports.len() < OPEN_LISTED && !pair.open_ports.contains(&c.server.port)
                {
                    pair.open_ports.push(c.server.port);
                }
            }
            Probe::Closed => pair.closed += 1,
            Probe::Filtered { .. } => pair.filtered += 1,
            Probe::Other => {}
        }
        if pair.frames.len() < 6 {
            pair.frames.push(c.first_frame);
        }
        if was_scanning {
            return true;
        }
        // Not known to scan when it was summarised: the other detectors count it now; if the
        // pair turns out to scan, they take it back.
        let l = &mut pair.leaked;
        match probe {
            Probe::Closed => l.refused += 1,
            Probe::Filtered {
                resent,
                given_up: true,
            } => {
                if resent {
                    l.unanswered_resent += 1;
                } else {
                    l.unanswered_once += 1;
                }
                match l
                    .unanswered_ports
                    .iter_mut()
                    .find(|(p, _)| *p == c.server.port)
                {
                    Some((_, n)) => *n += 1,
                    None => l.unanswered_ports.push((c.server.port, 1)),
                }
            }
            _ => {}
        }
        false
    }

    /// Forgets the pairs that tried one port only, when the last sweep is far enough back
    /// (a sweep walks the table: at most once per quarter table of new pairs).
    fn make_room(&mut self) {
        if self.sweep_after > 0 {
            self.sweep_after -= 1;
            return;
        }
        self.pairs.retain(|_, p| p.ports.count >= 2);
        if self.pairs.len() > PAIRS_MAX / 2 {
            self.sweep_after = PAIRS_MAX / 4;
        }
    }

    /// What the other detectors counted of each scan before it was known as one, with the
    /// scan's (source, target).
    pub(crate) fn leaked(&self) -> Vec<((IpAddr, IpAddr), Leaked)> {
        self.pairs
            .iter()
            .filter(|(_, p)| p.scanning())
            .map(|(k, p)| (*k, p.leaked.clone()))
            .collect()
    }

    pub(crate) fn conclude(self, ctx: &Context, out: &mut Conclusion) {
        let origin = ctx.first_ts_ns;
        let mut scans: Vec<ScanRow> = self
            .pairs
            .into_iter()
            .filter(|(_, p)| p.scanning())
            .map(|((s, t), p)| ScanRow {
                source: s.to_string(),
                target: t.to_string(),
                ports: u64::from(p.ports.count),
                ports_at_least: p.ports.saturated,
                probes: p.probes,
                open: p.open,
                closed: p.closed,
                filtered: p.filtered,
                one_source_port: !p.several_src_ports,
                start_us: p.first_ts.saturating_sub(origin) / 1_000,
                duration_us: p.last_ts.saturating_sub(p.first_ts) / 1_000,
                open_ports: p.open_ports,
                frames: p.frames,
            })
            .collect();
        scans.sort_by(|a, b| {
            b.ports
                .cmp(&a.ports)
                .then_with(|| a.source.cmp(&b.source))
                .then_with(|| a.target.cmp(&b.target))
        });
        if !scans.is_empty() {
            out.findings.push(finding(&scans));
        }
        out.details.port_scans = ScanDetails {
            scans,
            pairs_untracked: self.untracked,
        };
    }
}

fn finding(scans: &[ScanRow]) -> Finding {
    let s = &scans[0];
    let more = match scans.len() {
        1 => String::new(),
        n => format!(
            "; {} more scan(s) of {} ports in all",
            n - 1,
            scans[1..].iter().map(|r| r.ports).sum::<u64>()
        ),
    };
    let open = if s.open_ports.is_empty() {
        String::new()
    } else {
        let list: Vec<String> = s.open_ports.iter().map(u16::to_string).collect();
        format!(
            " ({}{})",
            list.join(", "),
            if s.open as usize > s.open_ports.len() {
                ", ..."
            } else {
                ""
            }
        )
    };
    let mut f = Finding::new(
        Pathology::PortScan,
        Source::Analyze,
        format!(
            "{} probed {} port(s) of {} in {} ({} probe(s) from {}, none carrying data): {} open{open}, {} closed (answered by a reset), {} never answered (filtered): a port scan, not connections of the host failing{more}",
            s.source,
            s.ports,
            s.target,
            us(s.duration_us),
            s.probes,
            if s.one_source_port {
                "one source port"
            } else {
                "several source ports"
            },
            s.open,
            s.closed,
            s.filtered,
        ),
        // Nothing of the host's own work was hurt: a fact worth knowing.
        Impact::none(),
    )
    .with_evidence(Evidence::Examples {
        what: "port scans (source > target: ports probed, open / closed / filtered)".into(),
        items: scans
            .iter()
            .take(5)
            .map(|r| {
                format!(
                    "{} > {}: {} ports, {} / {} / {}",
                    r.source, r.target, r.ports, r.open, r.closed, r.filtered
                )
            })
            .collect(),
    });
    if !s.frames.is_empty() {
        f = f.with_evidence(Evidence::Packets {
            flow: format!("{} > {}", s.source, s.target),
            frames: s.frames.clone(),
            description: "first probes of the scan".into(),
        });
    }
    f
}

#[cfg(test)]
mod tests {
    use super::PortSet;

    #[test]
    fn port_set_counts_distinct_ports_in_a_list_then_a_bitmap() {
        let mut budget = 1;
        let mut s = PortSet::default();
        assert!(s.add(80, &mut budget));
        assert!(!s.add(80, &mut budget));
        for p in 0..100u16 {
            s.add(p * 600, &mut budget);
        }
        assert!(s.bits.is_some());
        assert_eq!(budget, 0);
        // 0, 600, ..., 59400 and 80: 101 distinct.
        assert_eq!(s.count, 101);
        assert!(!s.add(30_000, &mut budget));
        // Without a bitmap left, a second set stops counting past its list.
        let mut t = PortSet::default();
        for p in 0..100u16 {
            t.add(p, &mut budget);
        }
        assert_eq!(t.count as usize, super::LISTED_PORTS);
        assert!(t.saturated);
    }
}
