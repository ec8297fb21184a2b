//! Findings of the time split ([`crate::split`]): slow requests whose time was the server's
//! (`server_response`) or the path's (`network_latency`), and replies a delayed ACK held
//! after their first byte (`delayed_ack`). Severity comes from the model's policy through
//! each finding's [`Impact`]. Pure.

use tcpdoctor_host::counters::Delta;
use tcpdoctor_model::{Evidence, Finding, Impact, Pathology, Source};

use crate::classify::{Spike, SpikeCause};
use crate::split::{Component, TcpState};
use crate::stats::Summary;

fn dur(us: u64) -> String {
    tcpdoctor_report::fmt::micros(us)
}

/// Median and maximum of `v` (sorted here).
fn p50_max(v: &mut [u64]) -> (u64, u64) {
    v.sort_unstable();
    match v.len() {
        0 => (0, 0),
        n => (v[n / 2], v[n - 1]),
    }
}

fn ports(spikes: &[&Spike]) -> Vec<String> {
    let mut p: Vec<u16> = Vec::new();
    for s in spikes {
        if p.len() < 8 && !p.contains(&s.local_port) {
            p.push(s.local_port);
        }
    }
    p.iter().map(u16::to_string).collect()
}

/// The server's or the path's finding for the slow requests named `cause`
/// ([`SpikeCause::ServerResponse`] or [`SpikeCause::NetworkLatency`]).
///
/// Impact: the requests named (`affected`) out of the completed ones (`observed`), and the
/// longest server (or path) time of one request as the worst stall. The policy then judges
/// them as any stall: by its length (200 ms a warning, 1 s critical) and by how common it
/// was. Not by the share of the run they filled (`time_lost_share`): a closed-loop probe
/// spends nearly all its time waiting for any server, fast or slow, so that share would
/// measure how the probe was run, not the harm; and a server's work, unlike a timer's wait,
/// is not time lost by itself.
pub fn slow_part(s: &Summary, spikes: &[Spike], cause: SpikeCause) -> Option<Finding> {
    let (pathology, part) = match cause {
        SpikeCause::ServerResponse => (Pathology::ServerResponse, Component::Server),
        SpikeCause::NetworkLatency => (Pathology::NetworkLatency, Component::Network),
        _ => return None,
    };
    let named: Vec<&Spike> = spikes.iter().filter(|sp| sp.cause == cause).collect();
    if named.is_empty() {
        return None;
    }
    let n = named.len() as u64;
    let mut values: Vec<u64> = named
        .iter()
        .map(|sp| sp.split.component_ns(part) / 1_000)
        .collect();
    let named_us: u64 = values.iter().sum();
    let (p50, max) = p50_max(&mut values);
    let split = &s.time_split;
    let rtt = dur(split.path_rtt_us);
    let tcp = if split.tcp == TcpState::Fine {
        format!(
            "; TCP is fine: none of {} requests failed or waited for a TCP timer",
            split.requests
        )
    } else {
        String::new()
    };
    let summary = match part {
        Component::Server => format!(
            "{n} of {} requests waited ~{} for the server: from the request to the first byte of the reply less the path's {rtt} round trip, the longest {}; no TCP timer slowed them{tcp}",
            s.requests_ok,
            dur(p50),
            dur(max)
        ),
        _ => format!(
            "{n} of {} requests spent ~{} on the path's round trips (the handshake and the request's, {rtt} each at the median), the longest {}; no TCP timer slowed them{tcp}",
            s.requests_ok,
            dur(p50),
            dur(max)
        ),
    };
    let mut f = Finding::new(
        pathology,
        Source::Probe,
        summary,
        Impact::stalls(
            n,
            Some(s.requests_ok),
            Some(std::time::Duration::from_micros(max)),
        ),
    )
    .with_evidence(Evidence::Timing {
        what: match part {
            Component::Server => {
                "server time (first-byte wait less the path's round trip), median".into()
            }
            _ => "path time (handshake + the request's round trip), median".into(),
        },
        count: n,
        value_us: p50,
    })
    .with_evidence(Evidence::Timing {
        what: "path round trip: median of the connections (the kernel's where read, else the handshake)".into(),
        count: s.connections_opened,
        value_us: split.path_rtt_us,
    });
    if let Some(e) = scheduling_bound(s, &named, named_us, part) {
        f = f.with_evidence(e);
    }
    if part == Component::Server && target_is_local(s) {
        if let Some(e) = crate::findings::cpu_wait_evidence(s) {
            // The server shares this host's CPUs: their contention is part of its time.
            f = f.with_evidence(e);
        }
    }
    Some(f.with_evidence(Evidence::Examples {
        what: "local ports of the slow requests".into(),
        items: ports(&named),
    }))
}

/// How much of the time named the CPU waits could hold, as evidence: the workers' waits
/// during these requests summed, and the embedded server's threads' over the run once.
fn scheduling_bound(
    s: &Summary,
    named: &[&Spike],
    named_us: u64,
    part: Component,
) -> Option<Evidence> {
    let (workers_us, server_us) = crate::findings::cpu_wait_bounds(s, named)?;
    let server = match server_us {
        Some(us) => format!(
            " + the embedded server's threads' over the run {} ms",
            us / 1_000
        ),
        None => String::new(),
    };
    let bound_us = workers_us + server_us.unwrap_or(0);
    Some(Evidence::Arithmetic {
        formula: format!(
            "{} time of these requests {} ms / the CPU waits that could hide in them: their workers' (schedstat run_delay since each one's previous slow request) {} ms{server}",
            part.name(),
            named_us / 1_000,
            workers_us / 1_000
        ),
        result: (named_us as f64 / bound_us.max(1) as f64 * 10.0).round() / 10.0,
    })
}

fn target_is_local(s: &Summary) -> bool {
    s.target
        .parse::<std::net::SocketAddr>()
        .is_ok_and(|a| a.ip().is_loopback())
}

/// Replies a delayed ACK held after their first byte, when no slow-request group already
/// names a delayed ACK: `Some(finding)`; else evidence for that group's finding
/// (`Err(evidence)`), or nothing.
pub fn transfer_holds(s: &Summary, delta: &Delta) -> Option<Result<Finding, Evidence>> {
    let h = s.time_split.transfer_holds.as_ref()?;
    let timing = Evidence::Timing {
        what: "replies held after their first byte (first byte to last)".into(),
        count: h.count,
        value_us: h.p50_us,
    };
    if s.spikes
        .groups
        .iter()
        .any(|g| g.cause == SpikeCause::DelayedAck)
    {
        return Some(Err(timing));
    }
    let f = Finding::new(
        Pathology::DelayedAck,
        Source::Probe,
        format!(
            "{} of {} replies waited ~{} after their first byte (the longest {}): a reply small enough for one flight was held until the client's delayed ACK, the server's Nagle keeping the rest of a reply written in parts",
            h.count,
            s.requests_ok,
            dur(h.p50_us),
            dur(h.max_us)
        ),
        Impact::stalls(
            h.count,
            Some(s.requests_ok),
            Some(std::time::Duration::from_micros(h.max_us)),
        ),
    )
    .with_evidence(timing)
    .with_evidence(Evidence::Examples {
        what: "local ports of held replies".into(),
        items: h.example_local_ports.iter().map(u16::to_string).collect(),
    });
    let d = delta.get("TcpExtDelayedACKs");
    Some(Ok(if d != 0 {
        f.counter("TcpExtDelayedACKs", d)
    } else {
        f
    }))
}
