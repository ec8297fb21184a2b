//! Ephemeral-port pressure per destination (client address, server endpoint).
//!
//! A client's port toward one destination stays taken after a connection only when the
//! client closed first with a FIN: it sits in TIME_WAIT for `TCP_TIMEWAIT_LEN` (60 s). A
//! reset close leaves no TIME_WAIT on either side, and when the server closes first the
//! TIME_WAIT is the server's: neither spends the client's ports, however fast the client
//! reconnects. So the budget is `ports in the range / TIME_WAIT length` new connections per
//! second, and only connections the client closed first count against it, at their rate over
//! the real span they were opened in.
//!
//! A rate over the budget is a prediction: the range runs out if the rate lasts. It is judged
//! as exhaustion (the policy's rate rule) only with evidence in the capture that the ports
//! ran short: most of the range ([`BUDGET_CRITICAL`]) held at once, a port reused while the
//! client's own TIME_WAIT on it was running, or the source ports filling a contiguous block
//! completely (both parities: Linux hands out ports of one parity first,
//! `__inet_hash_connect`, net/ipv4/inet_hashtables.c, so it takes the other only once the
//! range ran short), unless the ports were handed out in order and never used again (a client
//! that hands out ports in order, as Windows and older BSDs do, fills a block with every
//! connect: measured on a public capture of 705 FTP logins from ports 2229-2932, each used
//! once). Without it, a rate over the budget is an exposure (judged one level
//! below exhaustion: a warning, with the time the range would last at that rate) once it was
//! seen over a second or more (a shorter burst is context: it says nothing of a rate that
//! lasts), and under
//! the budget the share of the range held is judged as `sockets` judges it (half the range
//! is pressure). A capture cannot see the connects that failed, nor their absence; probe,
//! which can, says a rate over the budget at which the whole range cycled without a failure
//! is context (TIME_WAIT ports were recycled).
//!
//! The range: `--port-range` when given. A capture does not carry the client's
//! `net.ipv4.ip_local_port_range`, so otherwise Linux's default (32768-60999, 28,232 ports),
//! unless the source ports toward a destination fill a contiguous block completely, by that
//! same rule: then that block is taken to be the whole range.
//!
//! Memory: at most [`DESTINATIONS_MAX`] destinations are followed; when the table is full,
//! the half with the fewest connections is forgotten (a busy destination keeps its entry).

use std::net::IpAddr;

use serde::Serialize;
use tcpdoctor_model::policy::BUDGET_CRITICAL;
use tcpdoctor_model::{Evidence, Finding, Impact, Pathology, PortRange, Source};

use super::{Conclusion, Context, Detector};
use crate::engine::Config;
use crate::flow::{CloseKind, Conn, Dense, Endpoint};

/// Linux's default `net.ipv4.ip_local_port_range` (include/net/ip.h, `inet_init_net`).
pub const LINUX_DEFAULT_RANGE: PortRange = PortRange {
    low: 32768,
    high: 60999,
};

/// Destinations followed at once.
pub const DESTINATIONS_MAX: usize = 4096;

/// Fewest connections closed by the client for a rate to be judged against the budget (a
/// handful opened together says nothing about a sustained rate).
const MIN_FOR_RATE: u64 = 100;

/// Span (first to last connection toward the destination) a rate over the budget must have
/// been seen over to be judged an exposure: a rate per second measured over less than a
/// second is a burst (500 connects in 130 ms say nothing of a rate that lasts).
const RATE_SPAN_MIN_US: u64 = 1_000_000;

/// Smallest block of ports taken for a whole range when filled completely.
const MIN_BLOCK: u32 = 8;

/// Where the port range a destination is judged against came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum RangeSource {
    /// `--port-range`.
    Given,
    /// Linux's default: the capture does not say.
    LinuxDefault,
    /// The source ports filled this block completely: probably the whole range.
    FilledBlock,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct DestinationDetails {
    pub client: String,
    pub server: String,
    /// Connection attempts (SYNs) toward the destination.
    pub connections: u64,
    pub distinct_ports: u32,
    /// Distinct source ports inside the range judged against, as a share of it.
    pub ephemeral_share: f64,
    /// First to last connection attempt.
    pub span_us: u64,
    /// Connection attempts per second over that span.
    pub new_connections_per_s: f64,
    /// The range judged against, and where it came from.
    pub port_range: String,
    pub port_range_source: RangeSource,
    /// Ports in the range / TIME_WAIT length: the sustainable rate of connections the client
    /// closes first.
    pub time_wait_budget_per_s: f64,
    /// Connections the client closed first (its port then sits in TIME_WAIT).
    pub client_closed_first: u64,
    /// Their rate over the span in which they were opened (0 with fewer than 100).
    pub client_closed_first_per_s: f64,
    /// That rate divided by the budget: 1 or more runs out of ports.
    pub rate_vs_budget: f64,
    /// Ports held at once (in TIME_WAIT or open), as a share of the range.
    pub ports_in_use_share: f64,
    /// Connections closed by a reset (no TIME_WAIT anywhere).
    pub reset_closes: u64,
    /// Connections the server closed first (its TIME_WAIT, not the client's).
    pub server_closed_first: u64,
    pub port_reuses: u64,
    /// Reuses of a port while the client's own TIME_WAIT on it was still running.
    pub reuses_within_time_wait: u64,
    /// Of those, reuses toward a loopback address by a SYN carrying timestamps: what Linux's
    /// default `tcp_tw_reuse=2` does on loopback whether or not ports are short, so they are
    /// no sign that the ports ran short.
    pub reuses_within_time_wait_loopback: u64,
    pub min_reuse_interval_us: Option<u64>,
    /// The source ports filled a contiguous block of at least 8 completely (both parities).
    pub filled_block: bool,
    /// Evidence that the ports ran short: 90% of the range held at once, a port reused within
    /// the client's TIME_WAIT (other than toward loopback with timestamps), or a filled block
    /// (not one of ports handed out in order, each used once).
    /// Without it a rate over the budget is context.
    pub ran_short: bool,
}

struct Dest {
    conns: u64,
    first_ts: u64,
    last_ts: u64,
    ports: PortSet,
    distinct: u32,
    low: u16,
    high: u16,
    /// Closed by the client first.
    tw: u64,
    tw_first_ts: u64,
    tw_last_ts: u64,
    /// Ports of connections that held them (TIME_WAIT or still open).
    held: PortSet,
    held_distinct: u32,
    resets: u64,
    server_first: u64,
    reuses: u64,
    reuses_tw: u64,
    reuses_tw_loopback: u64,
    min_reuse_ns: Option<u64>,
    /// The port of the latest connection opened, and how many connections took the port
    /// one above the one before theirs (ports handed out in order).
    last_port: u16,
    in_order: u64,
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
    /// Destinations forgotten to bound the table.
    forgotten: u64,
}

impl Ports {
    pub(crate) fn new(cfg: &Config) -> Ports {
        Ports {
            time_wait_ns: cfg.time_wait.as_nanos() as u64,
            dests: Dense::default(),
            forgotten: 0,
        }
    }

    /// Forgets the half of the destinations with the fewest connections (the least recent
    /// first among equals).
    fn shrink(&mut self) {
        let mut order: Vec<(u64, u64)> = self
            .dests
            .iter()
            .map(|(_, d)| (d.conns, d.last_ts))
            .collect();
        order.sort_unstable();
        let cut = order[order.len() / 2];
        let mut dropped = 0;
        let target = order.len() / 2;
        self.dests.retain(|_, d| {
            let keep = (d.conns, d.last_ts) > cut || dropped >= target;
            if !keep {
                dropped += 1;
            }
            keep
        });
        self.forgotten += dropped as u64;
    }

    fn destinations(&self, cfg: &Config) -> Vec<DestinationDetails> {
        let tw_s = cfg.time_wait.as_secs_f64().max(1e-3);
        let mut v: Vec<DestinationDetails> = self
            .dests
            .iter()
            .map(|((client, server), d)| {
                let block = u32::from(d.high) - u32::from(d.low) + 1;
                let filled = d.distinct >= MIN_BLOCK && d.distinct == block;
                // A filled block says the range ran short when the client came back to a
                // port of it (a new connection on a used 4-tuple), or when its ports were not
                // handed out in order: Linux scatters them, one parity first, so a block it
                // filled completely had run short (and connects then fail, no SYN seen); a
                // client that hands ports out in order (Windows, older BSDs: each connect's
                // port one above the one before) fills a block with every connect.
                let in_order = d.in_order * 2 >= d.conns;
                let cycled = filled && (d.reuses > 0 || !in_order);
                let (range, source) = match cfg.port_range {
                    Some(r) => (r, RangeSource::Given),
                    None => {
                        if cycled {
                            (
                                PortRange {
                                    low: d.low,
                                    high: d.high,
                                },
                                RangeSource::FilledBlock,
                            )
                        } else {
                            (LINUX_DEFAULT_RANGE, RangeSource::LinuxDefault)
                        }
                    }
                };
                let len = f64::from(range.len());
                let budget = len / tw_s;
                let span = d.last_ts.saturating_sub(d.first_ts);
                let rate_of = |n: u64, span_ns: u64| {
                    if span_ns > 0 {
                        n as f64 / (span_ns as f64 / 1e9)
                    } else {
                        0.0
                    }
                };
                let tw_span = d.tw_last_ts.saturating_sub(d.tw_first_ts);
                let tw_rate = if d.tw >= MIN_FOR_RATE {
                    rate_of(d.tw, tw_span)
                } else {
                    0.0
                };
                let ratio = tw_rate / budget;
                let held = f64::from(d.held.count_in(range.low, range.high));
                // Over a span longer than TIME_WAIT, ports held at once are what the rate keeps
                // in TIME_WAIT, not every port ever used.
                let in_use = if tw_span > self.time_wait_ns && tw_rate > 0.0 {
                    held.min(tw_rate * tw_s)
                } else {
                    held
                };
                DestinationDetails {
                    client: client.to_string(),
                    server: server.to_string(),
                    connections: d.conns,
                    distinct_ports: d.distinct,
                    ephemeral_share: f64::from(d.ports.count_in(range.low, range.high)) / len,
                    span_us: span / 1_000,
                    new_connections_per_s: rate_of(d.conns, span),
                    port_range: range.to_string(),
                    port_range_source: source,
                    time_wait_budget_per_s: budget,
                    client_closed_first: d.tw,
                    client_closed_first_per_s: tw_rate,
                    rate_vs_budget: ratio,
                    ports_in_use_share: (in_use / len).min(1.0),
                    reset_closes: d.resets,
                    server_closed_first: d.server_first,
                    port_reuses: d.reuses,
                    reuses_within_time_wait: d.reuses_tw,
                    reuses_within_time_wait_loopback: d.reuses_tw_loopback,
                    min_reuse_interval_us: d.min_reuse_ns.map(|v| v / 1_000),
                    filled_block: filled,
                    ran_short: (in_use / len) >= BUDGET_CRITICAL
                        || d.reuses_tw > d.reuses_tw_loopback
                        || cycled,
                }
            })
            .collect();
        v.sort_by(|a, b| {
            b.connections
                .cmp(&a.connections)
                .then(a.server.cmp(&b.server))
                .then(a.client.cmp(&b.client))
        });
        v.truncate(10);
        v
    }
}

impl Detector for Ports {
    fn opened(&mut self, c: &Conn, ts: u64) {
        let tw = self.time_wait_ns;
        // The length first: the table is rarely full.
        if self.dests.len() >= DESTINATIONS_MAX
            && self.dests.get(&(c.client.addr, c.server)).is_none()
        {
            self.shrink();
        }
        let d = self
            .dests
            .get_or_insert_with((c.client.addr, c.server), || Dest {
                conns: 0,
                first_ts: ts,
                last_ts: ts,
                ports: PortSet::Few(Vec::new()),
                distinct: 0,
                low: c.client.port,
                high: c.client.port,
                tw: 0,
                tw_first_ts: 0,
                tw_last_ts: 0,
                held: PortSet::Few(Vec::new()),
                held_distinct: 0,
                resets: 0,
                server_first: 0,
                reuses: 0,
                reuses_tw: 0,
                reuses_tw_loopback: 0,
                min_reuse_ns: None,
                last_port: c.client.port,
                in_order: 0,
            });
        d.conns += 1;
        d.in_order += u64::from(c.client.port == d.last_port.wrapping_add(1));
        d.last_port = c.client.port;
        d.last_ts = ts;
        if d.ports.insert(c.client.port) {
            d.distinct += 1;
            d.low = d.low.min(c.client.port);
            d.high = d.high.max(c.client.port);
        }
        if let Some(r) = c.reuse {
            d.reuses += 1;
            let own_time_wait = r.prev_close == CloseKind::Fin { client_first: true };
            if own_time_wait && r.interval_ns < tw {
                d.reuses_tw += 1;
            }
            d.min_reuse_ns = Some(
                d.min_reuse_ns
                    .map_or(r.interval_ns, |m| m.min(r.interval_ns)),
            );
        }
    }

    fn finished(&mut self, c: &Conn) {
        if c.syn_count == 0 {
            return;
        }
        // Forgotten destinations stay forgotten.
        let Some(d) = self.dests.get_mut(&(c.client.addr, c.server)) else {
            return;
        };
        // Linux reuses a TIME_WAIT port toward loopback when timestamps prove the new SYN
        // newer (tcp_tw_reuse=2, the default), even with free ports left. Counted here, where
        // the SYN's options are known (`opened` comes before them).
        if let Some(r) = c.reuse {
            let own_time_wait = r.prev_close == CloseKind::Fin { client_first: true };
            if own_time_wait
                && r.interval_ns < self.time_wait_ns
                && c.server.addr.is_loopback()
                && c.syn_ts_option
            {
                d.reuses_tw_loopback += 1;
            }
        }
        match c.close {
            CloseKind::Fin { client_first: true } => {
                if d.tw == 0 || c.first_ts < d.tw_first_ts {
                    d.tw_first_ts = c.first_ts;
                }
                d.tw_last_ts = d.tw_last_ts.max(c.first_ts);
                d.tw += 1;
            }
            CloseKind::Fin {
                client_first: false,
            } => d.server_first += 1,
            CloseKind::Rst { .. } => d.resets += 1,
            CloseKind::Open | CloseKind::Idle | CloseKind::Unanswered => {}
        }
        if c.close.holds_client_port() && d.held.insert(c.client.port) {
            d.held_distinct += 1;
        }
    }

    fn conclude(self, ctx: &Context, out: &mut Conclusion) {
        let destinations = self.destinations(ctx.cfg);
        out.findings.extend(findings(&destinations, ctx.cfg));
        out.details.destinations = destinations;
        out.details.destinations_forgotten = self.forgotten;
    }
}

/// A destination runs out of ports when the client closes connections first faster than
/// the budget (rate_vs_budget >= 1) and the ports ran short, or holds most of the range at
/// once. A rate over the budget with no sign of shortage is an exposure (module docs). A
/// rate under the budget with few ports in use is no finding.
fn findings(dests: &[DestinationDetails], cfg: &Config) -> Vec<Finding> {
    let mut out = Vec::new();
    for d in dests {
        if d.rate_vs_budget < 1.0 && d.ports_in_use_share < 0.5 {
            continue;
        }
        let range_words = match d.port_range_source {
            RangeSource::Given => format!("{} (given)", d.port_range),
            RangeSource::LinuxDefault => format!(
                "{} (Linux's default; give --port-range if the client's differs)",
                d.port_range
            ),
            RangeSource::FilledBlock => format!(
                "{}: the source ports filled this block completely, so it is probably the client's whole range",
                d.port_range
            ),
        };
        let range_len = (d.time_wait_budget_per_s * cfg.time_wait.as_secs_f64()).round();
        // A rate over the budget with no sign of the ports running short: a prediction.
        let (impact, outlook) = if d.ran_short {
            (
                Impact::rate(d.rate_vs_budget).with_budget(d.ports_in_use_share),
                String::new(),
            )
        } else if d.reuses_within_time_wait_loopback > 0 {
            // Ports reused within their TIME_WAIT toward loopback by SYNs with timestamps:
            // the kernel recycles them (tcp_tw_reuse=2, Linux's default, on loopback), so the
            // range does not bound the rate here.
            (
                Impact::none().with_budget(d.ports_in_use_share),
                format!(
                    "; {} port(s) reused within their TIME_WAIT toward loopback by SYNs carrying timestamps: Linux recycles such ports (tcp_tw_reuse=2, its default, applies to loopback), so this range does not bound the rate; no sign that the ports ran short",
                    d.reuses_within_time_wait_loopback
                ),
            )
        } else if d.rate_vs_budget >= 1.0 && d.span_us < RATE_SPAN_MIN_US {
            // A burst over the budget shorter than a second: not yet a rate.
            (
                Impact::none().with_budget(d.ports_in_use_share),
                format!(
                    "; a burst of {:.0} ms: at this rate the range would be used up after {:.1} s, but a rate per second seen over less than a second says nothing of one that lasts ({:.0}% of the range held at once)",
                    d.span_us as f64 / 1e3,
                    range_len / d.client_closed_first_per_s.max(1e-9),
                    100.0 * d.ports_in_use_share
                ),
            )
        } else if d.rate_vs_budget >= 1.0 {
            // The rate, sustained, uses the range up: an exposure (one level below
            // exhaustion, model::policy), named with how long the range would last.
            (
                Impact::rate(d.rate_vs_budget)
                    .with_budget(d.ports_in_use_share)
                    .exposure(),
                format!(
                    "; no sign in the capture that the ports ran short (under 90% of the range held at once, no port reused within its TIME_WAIT, no block of ports filled completely but by ports handed out in order): at this rate the range would be used up after {:.1} s",
                    range_len / d.client_closed_first_per_s.max(1e-9)
                ),
            )
        } else {
            (
                Impact::none().with_budget(d.ports_in_use_share),
                "; no sign in the capture that the ports ran short (under 90% of the range held at once, no port reused within its TIME_WAIT, no block of ports filled completely but by ports handed out in order), and the rate is under the budget".to_string(),
            )
        };
        let mut f = Finding::new(
            Pathology::PortExhaustion,
            Source::Analyze,
            format!(
                "{} -> {}: {} connection(s) closed by the client first, each holding its port in TIME_WAIT for {} s, opened at {:.0}/s ({:.1}x the budget of {:.0}/s); {:.0}% of the range's ports held at once; range {range_words}{outlook}",
                d.client,
                d.server,
                d.client_closed_first,
                cfg.time_wait.as_secs(),
                d.client_closed_first_per_s,
                d.rate_vs_budget,
                d.time_wait_budget_per_s,
                100.0 * d.ports_in_use_share,
            ),
            impact,
        )
        .arithmetic(
            format!("{range_len:.0} ports / {} s TIME_WAIT", cfg.time_wait.as_secs()),
            d.time_wait_budget_per_s,
        );
        if d.client_closed_first_per_s > 0.0 {
            f = f.arithmetic(
                format!(
                    "{} connections closed by the client first / {:.3} s in which they were opened",
                    d.client_closed_first,
                    d.client_closed_first as f64 / d.client_closed_first_per_s
                ),
                d.client_closed_first_per_s,
            );
        }
        f = f.with_evidence(Evidence::Examples {
            what: "how the connections toward this destination closed".into(),
            items: vec![
                format!(
                    "{} by the client first (its TIME_WAIT)",
                    d.client_closed_first
                ),
                format!(
                    "{} by the server first (the server's TIME_WAIT)",
                    d.server_closed_first
                ),
                format!("{} by a reset (no TIME_WAIT)", d.reset_closes),
            ],
        });
        if d.port_reuses > 0 {
            f = f.with_evidence(Evidence::Timing {
                what: "shortest reuse interval of a source port".into(),
                count: d.port_reuses,
                value_us: d.min_reuse_interval_us.unwrap_or(0),
            });
        }
        out.push(f);
    }
    out
}
