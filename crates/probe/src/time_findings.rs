//! Findings of the time split ([`crate::split`]): slow requests whose time was the server's
//! (`server_response`) or the path's (`network_latency`), and replies a delayed ACK held
//! after their first byte (`delayed_ack`). Severity comes from the model's policy through
//! each finding's [`Impact`]. Pure.

use tcpdoctor_host::counters::Delta;
use tcpdoctor_model::{units, Evidence, Finding, Impact, Pathology, Source};

use crate::classify::{Spike, SpikeCause};
use crate::split::{Component, TcpState};
use crate::stats::Summary;

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
    let rtt = units::micros(split.path_rtt_us);
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
            units::micros(p50),
            units::micros(max)
        ),
        _ => format!(
            "{n} of {} requests spent ~{} on the path's round trips (the handshake and the request's, {rtt} each at the median), the longest {}; no TCP timer slowed them{tcp}",
            s.requests_ok,
            units::micros(p50),
            units::micros(max)
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
    let (workers_us, server_us) = cpu_wait_bounds(s, named)?;
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
            units::micros(h.p50_us),
            units::micros(h.max_us)
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

/// For the unexplained slow requests: which part of their time was largest, and the CPU
/// waits that kept the time split from naming the server or the path.
pub(crate) fn unexplained_split(s: &Summary, spikes: &[Spike]) -> Option<Evidence> {
    let unexplained: Vec<&Spike> = spikes
        .iter()
        .filter(|sp| sp.cause == SpikeCause::Unexplained)
        .collect();
    let mut by_part: std::collections::BTreeMap<crate::split::Component, u64> =
        std::collections::BTreeMap::new();
    for sp in &unexplained {
        *by_part.entry(sp.split.dominant()).or_default() += 1;
    }
    let (part, n) = by_part.into_iter().max_by_key(|&(_, n)| n)?;
    let t = &s.time_split;
    let considered: Vec<&Spike> = unexplained
        .iter()
        .copied()
        .filter(|sp| sp.cpu_wait_bound_ns.is_some())
        .collect();
    let waits = match (t.workers_cpu_wait_us, t.embedded_server_cpu_wait_us) {
        _ if !considered.is_empty() => {
            let (workers_us, server_us) = cpu_wait_bounds(s, &considered).unwrap_or((0, None));
            format!(
                "the CPU waits that could hide in the {} whose server, path or transfer was largest: their workers' {} (schedstat run_delay since each one's previous slow request){}",
                considered.len(),
                units::micros(workers_us),
                server_us
                    .map(|us| format!(", the embedded server's threads' {} over the run", units::micros(us)))
                    .unwrap_or_default()
            )
        }
        (Some(w), Some(e)) => format!(
            "the workers waited {} and the embedded server's threads {} for a CPU during the run",
            units::micros(w),
            units::micros(e)
        ),
        (Some(w), None) => format!(
            "the workers waited {} for a CPU during the run",
            units::micros(w)
        ),
        _ => "the workers' CPU waits are unknown (no schedstat)".into(),
    };
    Some(Evidence::Examples {
        what: "time split of the unexplained requests".into(),
        items: vec![format!(
            "{part} ({}) was the largest part in {n} of {}; {waits} (the server or the path is named only where such waits, and the host's while a rare stall ran, cannot account for half of its time)",
            part.describe(),
            unexplained.len()
        )],
    })
}

/// The CPU waits that could hide in `spikes` ([`Spike::cpu_wait_bound_ns`]): their workers'
/// summed, and the embedded server's threads' over the run (counted once, though every
/// request's bound includes it). `None` when a bound is missing.
pub(crate) fn cpu_wait_bounds(s: &Summary, spikes: &[&Spike]) -> Option<(u64, Option<u64>)> {
    let server_us = s.time_split.embedded_server_cpu_wait_us;
    let server_ns = server_us.unwrap_or(0) * 1_000;
    let workers_ns: u64 = spikes
        .iter()
        .map(|sp| sp.cpu_wait_bound_ns.map(|b| b.saturating_sub(server_ns)))
        .sum::<Option<u64>>()?;
    Some((workers_ns / 1_000, server_us))
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use tcpdoctor_host::counters::Delta;
    use tcpdoctor_model::{Evidence, Pathology, Severity};

    use crate::findings::tests::{findings_full, rec};
    use crate::record::{Outcome, Record};
    use crate::Config;

    #[test]
    fn a_server_thinking_300_ms_is_server_response_and_nothing_else() {
        // 100 requests: 0.05 ms handshakes, the first byte 300 ms after the request.
        let rs: Vec<Record> = (0..100)
            .map(|i| {
                let mut r = rec(i, 0, Outcome::Ok);
                r.first_byte_ns = r.first_byte_ns.map(|f| f + 300_000_000);
                r.end_ns += 300_000_000;
                r
            })
            .collect();
        let waits = crate::split::CpuWaits {
            workers_ns: vec![Some(20_000_000)],
            ..crate::split::CpuWaits::default()
        };
        let cfg = Config {
            duration: Duration::from_secs(40),
            ..Config::default()
        };
        let f = findings_full(&cfg, &rs, &Delta::default(), None, None, &waits);
        assert_eq!(f.len(), 1, "{f:#?}");
        assert_eq!(f[0].pathology, Pathology::ServerResponse);
        assert_eq!(f[0].severity, Severity::Warning);
        assert_eq!(f[0].severity_rule, tcpdoctor_model::Rule::TimeoutStall);
        assert_eq!(f[0].impact.affected, 100);
        assert!(
            f[0].summary
                .starts_with("100 of 100 requests waited ~300ms for the server"),
            "{}",
            f[0].summary
        );
        assert!(f[0].summary.contains("TCP is fine"), "{}", f[0].summary);
        // The workers' CPU waits unknown: nothing bounds the client's own scheduling, so the
        // same requests are not pinned on the server.
        let f = findings_full(
            &cfg,
            &rs,
            &Delta::default(),
            None,
            None,
            &crate::split::CpuWaits::default(),
        );
        assert_eq!(f[0].pathology, Pathology::UnexplainedDelay, "{f:#?}");
        let split = f[0]
            .evidence
            .iter()
            .find_map(|e| match e {
                Evidence::Examples { what, items } if what.contains("time split") => {
                    Some(items[0].clone())
                }
                _ => None,
            })
            .unwrap_or_else(|| panic!("{f:#?}"));
        assert!(split.starts_with("server ("), "{split}");
        assert!(split.contains("largest part in 100 of 100"), "{split}");
        assert_eq!(f[0].severity, Severity::Warning, "{f:#?}");
        // The workers waited for a CPU longer than the server part itself: the stalls are
        // within this host's load, so nothing is shown about the target: context, not harm.
        let busy = crate::split::CpuWaits {
            workers_ns: vec![Some(60_000_000_000)],
            ..crate::split::CpuWaits::default()
        };
        let f = findings_full(&cfg, &rs, &Delta::default(), None, None, &busy);
        assert_eq!(f[0].pathology, Pathology::UnexplainedDelay, "{f:#?}");
        assert_eq!(f[0].severity, Severity::Info, "{f:#?}");
        assert!(
            f[0].summary.contains("measures this host's load"),
            "{}",
            f[0].summary
        );
    }
}
