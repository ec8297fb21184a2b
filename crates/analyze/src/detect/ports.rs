//! Ephemeral-port pressure per destination: new connections from one client address to one
//! server endpoint, the distinct source ports they used, their reuse, and the rate against
//! the TIME_WAIT budget (ports in the range / TIME_WAIT length).

use std::net::IpAddr;

use serde::Serialize;
use tcpdoctor_model::{Evidence, Finding, Pathology, Severity, Source};

use super::{Conclusion, Context, Detector};
use crate::engine::Config;
use crate::flow::{Conn, Dense, Endpoint};

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct DestinationDetails {
    pub client: String,
    pub server: String,
    pub connections: u64,
    pub distinct_ports: u32,
    /// Distinct source ports inside the ephemeral range, as a share of the range.
    pub ephemeral_share: f64,
    pub span_us: u64,
    pub new_connections_per_s: f64,
    /// Ports in the range / TIME_WAIT length: the sustainable rate of new connections.
    pub time_wait_budget_per_s: f64,
    pub port_reuses: u64,
    pub reuses_within_time_wait: u64,
    pub min_reuse_interval_us: Option<u64>,
}

struct Dest {
    conns: u64,
    first_ts: u64,
    last_ts: u64,
    ports: PortSet,
    distinct: u32,
    reuses: u64,
    reuses_tw: u64,
    min_reuse_ns: Option<u64>,
}

/// Source ports seen toward one destination: a short list, a 64 Kibit bitmap once busy (so
/// thousands of one-connection destinations do not cost 8 KiB each).
enum PortSet {
    Few(Vec<u16>),
    Many(Box<[u64; 1024]>),
}

impl PortSet {
    /// Adds `p`; true if it was new.
    fn insert(&mut self, p: u16) -> bool {
        match self {
            PortSet::Few(v) => {
                if v.contains(&p) {
                    return false;
                }
                if v.len() < 64 {
                    v.push(p);
                    return true;
                }
                let mut bits = Box::new([0u64; 1024]);
                for &q in v.iter() {
                    bits[usize::from(q) / 64] |= 1 << (q % 64);
                }
                *self = PortSet::Many(bits);
                self.insert(p)
            }
            PortSet::Many(bits) => {
                let (w, b) = (usize::from(p) / 64, 1u64 << (p % 64));
                let new = bits[w] & b == 0;
                bits[w] |= b;
                new
            }
        }
    }

    /// Ports in `low..=high`.
    fn count_in(&self, low: u16, high: u16) -> u32 {
        match self {
            PortSet::Few(v) => v.iter().filter(|&&p| (low..=high).contains(&p)).count() as u32,
            PortSet::Many(bits) => (low..=high)
                .filter(|&p| bits[usize::from(p) / 64] & (1 << (p % 64)) != 0)
                .count() as u32,
        }
    }
}

/// Per (client address, server endpoint) counts.
pub(crate) struct Ports {
    time_wait_ns: u64,
    dests: Dense<(IpAddr, Endpoint), Dest>,
}

impl Ports {
    pub(crate) fn new(cfg: &Config) -> Ports {
        Ports {
            time_wait_ns: cfg.time_wait.as_nanos() as u64,
            dests: Dense::default(),
        }
    }

    fn destinations(&self, cfg: &Config) -> Vec<DestinationDetails> {
        let range = cfg.port_range;
        let budget = f64::from(range.len()) / cfg.time_wait.as_secs_f64();
        let mut v: Vec<DestinationDetails> = self
            .dests
            .iter()
            .map(|((client, server), d)| {
                let in_range = d.ports.count_in(range.low, range.high);
                let span = d.last_ts.saturating_sub(d.first_ts);
                // A rate needs a second of span to mean anything.
                let rate = d.conns as f64 / (span as f64 / 1e9).max(1.0);
                DestinationDetails {
                    client: client.to_string(),
                    server: server.to_string(),
                    connections: d.conns,
                    distinct_ports: d.distinct,
                    ephemeral_share: f64::from(in_range) / f64::from(range.len()),
                    span_us: span / 1_000,
                    new_connections_per_s: rate,
                    time_wait_budget_per_s: budget,
                    port_reuses: d.reuses,
                    reuses_within_time_wait: d.reuses_tw,
                    min_reuse_interval_us: d.min_reuse_ns.map(|v| v / 1_000),
                }
            })
            .collect();
        v.sort_by(|a, b| {
            b.connections
                .cmp(&a.connections)
                .then(a.server.cmp(&b.server))
        });
        v.truncate(10);
        v
    }
}

impl Detector for Ports {
    fn opened(&mut self, c: &Conn, ts: u64) {
        let tw = self.time_wait_ns;
        let d = self
            .dests
            .get_or_insert_with((c.client.addr, c.server), || Dest {
                conns: 0,
                first_ts: ts,
                last_ts: ts,
                ports: PortSet::Few(Vec::new()),
                distinct: 0,
                reuses: 0,
                reuses_tw: 0,
                min_reuse_ns: None,
            });
        d.conns += 1;
        d.last_ts = ts;
        if d.ports.insert(c.client.port) {
            d.distinct += 1;
        }
        if let Some(r) = c.reuse {
            d.reuses += 1;
            if r.interval_ns < tw {
                d.reuses_tw += 1;
            }
            d.min_reuse_ns = Some(
                d.min_reuse_ns
                    .map_or(r.interval_ns, |m| m.min(r.interval_ns)),
            );
        }
    }

    fn conclude(self, ctx: &Context, out: &mut Conclusion) {
        let destinations = self.destinations(ctx.cfg);
        out.findings.extend(findings(&destinations, ctx.cfg));
        out.details.destinations = destinations;
    }
}

#[allow(deprecated)]
fn findings(dests: &[DestinationDetails], cfg: &Config) -> Vec<Finding> {
    let mut out = Vec::new();
    for d in dests {
        let over_rate =
            d.new_connections_per_s >= d.time_wait_budget_per_s && d.span_us >= 1_000_000;
        let churn =
            d.reuses_within_time_wait >= 100 && d.reuses_within_time_wait * 10 >= d.connections;
        if !(over_rate || churn || d.ephemeral_share >= 0.5) {
            continue;
        }
        let sev = if d.ephemeral_share >= 0.9 || (over_rate && churn) {
            Severity::Critical
        } else {
            Severity::Warning
        };
        let range = cfg.port_range;
        let f = Finding::legacy(
            Pathology::PortExhaustion,
            sev,
            Source::Analyze,
            format!(
                "{} -> {}: {} new connections at {:.0}/s from {} distinct source ports ({:.0}% of {range}); the TIME_WAIT budget is {:.0}/s; {} ports reused within TIME_WAIT",
                d.client,
                d.server,
                d.connections,
                d.new_connections_per_s,
                d.distinct_ports,
                100.0 * d.ephemeral_share,
                d.time_wait_budget_per_s,
                d.reuses_within_time_wait
            ),
        )
        .arithmetic(
            format!("{} ports / {} s TIME_WAIT", range.len(), cfg.time_wait.as_secs()),
            d.time_wait_budget_per_s,
        )
        .arithmetic(
            format!("{} connections / {:.3} s", d.connections, (d.span_us as f64 / 1e6).max(1.0)),
            d.new_connections_per_s,
        )
        .with_evidence(Evidence::Timing {
            what: "shortest reuse interval of a source port".into(),
            count: d.port_reuses,
            value_us: d.min_reuse_interval_us.unwrap_or(0),
        });
        out.push(f);
    }
    out
}
