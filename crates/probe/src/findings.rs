//! Findings of a probe run: errors by errno (EADDRNOTAVAIL is port exhaustion, with the
//! arithmetic), spike groups by cause, each with its counter evidence. Pure.

use tcpdoctor_host::counters::Delta;
use tcpdoctor_host::sysctl::TIME_WAIT;
use tcpdoctor_model::{Evidence, Finding, Pathology, Severity, Source};

use crate::classify::{Spike, SpikeCause};
use crate::record::{ErrorKind, Phase};
use crate::stats::{Context, ErrorCount, Summary};
use crate::CloseFirst;

fn us_to_ms(us: u64) -> String {
    if us >= 10_000 {
        format!("{} ms", us / 1_000)
    } else {
        format!("{:.1} ms", us as f64 / 1_000.0)
    }
}

fn counter_evidence(f: Finding, delta: &Delta, names: &[&str]) -> Finding {
    names.iter().fold(f, |f, n| {
        let d = delta.get(n);
        if d != 0 {
            f.counter(n, d)
        } else {
            f
        }
    })
}

fn ports(items: &[u16]) -> Vec<String> {
    items.iter().map(u16::to_string).collect()
}

/// All findings of a run, unranked (the Report ranks them).
pub fn build(ctx: &Context, s: &Summary, spikes: &[Spike], delta: &Delta) -> Vec<Finding> {
    let mut out = Vec::new();
    port_exhaustion(ctx, s, delta, &mut out);
    connect_failures(s, delta, &mut out);
    for g in &s.spikes.groups {
        let examples = Evidence::Examples {
            what: "local ports of slow connections".into(),
            items: ports(&g.example_local_ports),
        };
        let f = match g.cause {
            SpikeCause::SynRetransmit { .. } => continue, // grouped below
            SpikeCause::AcceptQueueOverflow => counter_evidence(
                Finding::legacy(
                    Pathology::AcceptQueueOverflow,
                    Severity::Warning,
                    Source::Probe,
                    format!(
                        "{} connections waited ~{} while the listener's accept queue overflowed",
                        g.count,
                        us_to_ms(g.typical_phase_us)
                    ),
                ),
                delta,
                &["TcpExtListenOverflows", "TcpExtListenDrops", "TcpExtTCPSynRetrans"],
            ),
            SpikeCause::StaleAckResend => counter_evidence(
                Finding::legacy(
                    Pathology::StaleAckRace,
                    Severity::Info,
                    Source::Probe,
                    format!(
                        "{} connects took ~{}: SYN answered by a stale ACK and resent quickly",
                        g.count,
                        us_to_ms(g.typical_phase_us)
                    ),
                ),
                delta,
                &["TcpExtTCPSynRetrans", "TcpOutRsts"],
            ),
            SpikeCause::DataRto => counter_evidence(
                Finding::legacy(
                    Pathology::RetransmitTimeout,
                    Severity::Warning,
                    Source::Probe,
                    format!(
                        "{} replies waited ~{} for a retransmission timeout (RTO floor {})",
                        g.count,
                        us_to_ms(g.typical_phase_us),
                        us_to_ms(s.settings.rto_min_us)
                    ),
                ),
                delta,
                &["TcpExtTCPTimeouts", "TcpRetransSegs"],
            )
            .setting(
                if s.settings.rto_min_source == "route" {
                    "route rto_min"
                } else {
                    "net.ipv4.tcp_rto_min_us"
                },
                s.settings.rto_min_us,
            ),
            SpikeCause::DelayedAck => counter_evidence(
                Finding::legacy(
                    Pathology::DelayedAck,
                    // Rare ones cost little; a steady share is a protocol pattern to fix.
                    if g.count * 100 >= s.requests_ok.max(1) {
                        Severity::Warning
                    } else {
                        Severity::Info
                    },
                    Source::Probe,
                    format!(
                        "{} replies waited ~{}: a delayed ACK held a small write",
                        g.count,
                        us_to_ms(g.typical_phase_us)
                    ),
                ),
                delta,
                &["TcpExtDelayedACKs"],
            )
            .setting("TCP_NODELAY", ctx.cfg.nodelay),
            SpikeCause::Unexplained => Finding::legacy(
                Pathology::UnexplainedDelay,
                Severity::Info,
                Source::Probe,
                format!(
                    "{} connections were slower than {} (typical slow phase {}) with no TCP timer signature",
                    g.count,
                    us_to_ms(s.spikes.threshold_us),
                    us_to_ms(g.typical_phase_us)
                ),
            ),
        };
        out.push(
            f.with_evidence(Evidence::Timing {
                what: format!("slow phase ({})", g.label),
                count: g.count,
                value_us: g.typical_phase_us,
            })
            .with_evidence(examples),
        );
    }
    syn_retransmits(s, spikes, delta, &mut out);
    out
}

fn port_exhaustion(ctx: &Context, s: &Summary, delta: &Delta, out: &mut Vec<Finding>) {
    let ports = s.settings.ports_available;
    let rate = f64::from(ports) / TIME_WAIT.as_secs_f64();
    let range_name = if ctx.cfg.local_ports.is_some() {
        "--local-ports"
    } else {
        "net.ipv4.ip_local_port_range"
    };
    let range_value = ctx
        .cfg
        .local_ports
        .map_or(s.settings.ip_local_port_range.clone(), |r| r.to_string());
    let formula = format!(
        "{ports} ports / {} s TIME_WAIT = new connections per second to one destination",
        TIME_WAIT.as_secs()
    );
    let exhausted: Vec<_> = s
        .errors
        .iter()
        .filter(|e| matches!(e.kind, ErrorKind::AddrNotAvail | ErrorKind::AddrInUse))
        .collect();
    if !exhausted.is_empty() {
        let n: u64 = exhausted.iter().map(|e| e.count).sum();
        let first = exhausted
            .iter()
            .min_by_key(|e| e.first_at_us)
            .expect("non-empty");
        let mut f = Finding::legacy(
            Pathology::PortExhaustion,
            Severity::Critical,
            Source::Probe,
            format!(
                "{n} connects failed with {} after {} succeeded: {ports} local ports last {:.1} new connections/s to {} while TIME_WAIT holds each for {} s",
                first.errno,
                first.ok_before_first,
                rate,
                s.target,
                TIME_WAIT.as_secs()
            ),
        )
        .setting(range_name, &range_value)
        .arithmetic(formula, rate);
        if let Some(v) = ctx.settings.tcp_tw_reuse {
            f = f.setting("net.ipv4.tcp_tw_reuse", v);
        }
        f = f.with_evidence(failures(&exhausted));
        f = counter_evidence(
            f,
            delta,
            &["TcpExtTW", "TcpActiveOpens", "TcpExtTWRecycled"],
        );
        out.push(f);
        return;
    }
    // No failure yet, but a connection rate the port range cannot sustain: only tw_reuse,
    // the server closing first, or SO_LINGER 0 kept ports free.
    let per_conn = ctx.cfg.mode.connection_per_request();
    if per_conn
        && s.connections_opened as f64 >= f64::from(ports)
        && s.connections_per_s > rate
        && ctx.cfg.close_first == CloseFirst::Client
        && !ctx.cfg.linger0
    {
        let reused = delta.get("TcpExtTWRecycled");
        let f = Finding::legacy(
            Pathology::PortExhaustion,
            Severity::Info,
            Source::Probe,
            format!(
                "{:.0} new connections/s to one destination is above the {:.1}/s that {ports} ports sustain through 60 s of TIME_WAIT; {}",
                s.connections_per_s,
                rate,
                if reused > 0 {
                    "tcp_tw_reuse recycled TIME_WAIT ports, so no connect failed".to_string()
                } else {
                    "no connect failed in this run".to_string()
                }
            ),
        )
        .setting(range_name, &range_value)
        .arithmetic(formula, rate);
        let f = match ctx.settings.tcp_tw_reuse {
            Some(v) => f.setting("net.ipv4.tcp_tw_reuse", v),
            None => f,
        };
        out.push(counter_evidence(
            f,
            delta,
            &["TcpExtTWRecycled", "TcpExtTW"],
        ));
    }
}

/// `200 x EADDRNOTAVAIL from connect(), the first 63.7 ms into the run`, one per kind.
fn failures(errors: &[&ErrorCount]) -> Evidence {
    Evidence::Examples {
        what: "failures".into(),
        items: errors
            .iter()
            .map(|e| {
                format!(
                    "{} x {} from {}, the first {} into the run",
                    e.count,
                    e.errno,
                    phase_call(e.phase),
                    us_to_ms(e.first_at_us)
                )
            })
            .collect(),
    }
}

fn phase_call(p: Phase) -> &'static str {
    match p {
        Phase::Socket => "socket()",
        Phase::Bind => "bind()",
        Phase::Connect => "connect()",
        Phase::Send => "send()",
        Phase::Reply => "the reply",
    }
}

fn connect_failures(s: &Summary, delta: &Delta, out: &mut Vec<Finding>) {
    let failures: Vec<_> = s
        .errors
        .iter()
        .filter(|e| !matches!(e.kind, ErrorKind::AddrNotAvail | ErrorKind::AddrInUse))
        .collect();
    if failures.is_empty() {
        return;
    }
    let n: u64 = failures.iter().map(|e| e.count).sum();
    let what: Vec<String> = failures
        .iter()
        .map(|e| format!("{} x {} from {}", e.count, e.errno, phase_call(e.phase)))
        .collect();
    let severity = if s.requests_ok == 0 || n * 100 >= s.requests.max(1) {
        Severity::Critical
    } else {
        Severity::Warning
    };
    let mut f = Finding::legacy(
        Pathology::ConnectFailure,
        severity,
        Source::Probe,
        format!(
            "{n} of {} requests to {} failed: {}",
            s.requests,
            s.target,
            what.join(", ")
        ),
    );
    f = f.with_evidence(self::failures(&failures));
    for e in &failures {
        if !e.example_local_ports.is_empty() {
            f = f.with_evidence(Evidence::Examples {
                what: format!("local ports ({})", e.errno),
                items: ports(&e.example_local_ports),
            });
        }
    }
    out.push(counter_evidence(
        f,
        delta,
        &[
            "TcpAttemptFails",
            "TcpEstabResets",
            "TcpOutRsts",
            "TcpExtTCPAbortOnData",
        ],
    ));
}

fn syn_retransmits(s: &Summary, spikes: &[Spike], delta: &Delta, out: &mut Vec<Finding>) {
    let groups: Vec<_> = s
        .spikes
        .groups
        .iter()
        .filter(|g| matches!(g.cause, SpikeCause::SynRetransmit { .. }))
        .collect();
    if groups.is_empty() {
        return;
    }
    let n: u64 = groups.iter().map(|g| g.count).sum();
    let ladder: Vec<String> = s
        .settings
        .syn_ladder_ms
        .iter()
        .map(|ms| format!("{}", *ms as f64 / 1000.0))
        .collect();
    let corroborated: u64 = groups.iter().map(|g| g.corroborated).sum();
    let mut f = Finding::legacy(
        Pathology::SynRetransmit,
        Severity::Warning,
        Source::Probe,
        format!(
            "{n} connects waited for SYN retransmissions ({}){}",
            groups
                .iter()
                .map(|g| format!("{} x {}", g.count, g.label))
                .collect::<Vec<_>>()
                .join(", "),
            if corroborated < n {
                "; TcpExtTCPSynRetrans did not move enough to confirm all of them"
            } else {
                ""
            }
        ),
    )
    .setting(
        "SYN ladder (tcp_syn_retries, tcp_syn_linear_timeouts)",
        format!("{} s", ladder.join(", ")),
    );
    for g in &groups {
        f = f.with_evidence(Evidence::Timing {
            what: format!("connect after {}", g.label),
            count: g.count,
            value_us: g.typical_phase_us,
        });
    }
    let mut ports: Vec<String> = spikes
        .iter()
        .filter(|sp| matches!(sp.cause, SpikeCause::SynRetransmit { .. }))
        .map(|sp| sp.local_port.to_string())
        .collect();
    ports.dedup();
    ports.truncate(8);
    f = f.with_evidence(Evidence::Examples {
        what: "local ports of retransmitted SYNs".into(),
        items: ports,
    });
    out.push(counter_evidence(
        f,
        delta,
        &["TcpExtTCPSynRetrans", "TcpRetransSegs", "TcpExtListenDrops"],
    ));
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::classify::{classify, Signatures};
    use crate::record::{Outcome, Record};
    use crate::stats::summarize;
    use crate::Config;
    use std::collections::BTreeMap;
    use std::time::Duration;
    use tcpdoctor_host::sysctl::TcpSettings;
    use tcpdoctor_model::{PortRange, SynLadder};

    fn settings() -> TcpSettings {
        TcpSettings {
            ip_local_port_range: PortRange::new(40000, 40199).unwrap(),
            tcp_tw_reuse: Some(0),
            tcp_timestamps: Some(1),
            tcp_rfc1337: Some(0),
            tcp_syn_retries: 6,
            tcp_syn_linear_timeouts: Some(4),
            tcp_synack_retries: Some(5),
            tcp_rto_min_us: None,
            tcp_fin_timeout: Some(60),
            tcp_max_tw_buckets: Some(262144),
            tcp_max_syn_backlog: Some(4096),
            somaxconn: Some(4096),
        }
    }

    fn rec(i: u64, connect_ms: u64, outcome: Outcome) -> Record {
        let s = i * 1_000_000;
        Record {
            worker: 0,
            local_port: if outcome == Outcome::Ok {
                40000 + i as u16
            } else {
                0
            },
            status: 0,
            reused: false,
            outcome,
            scheduled_ns: s,
            start_ns: s,
            connected_ns: (outcome == Outcome::Ok).then_some(s + connect_ms * 1_000_000 + 30_000),
            first_byte_ns: (outcome == Outcome::Ok).then_some(s + connect_ms * 1_000_000 + 60_000),
            end_ns: s + connect_ms * 1_000_000 + 80_000,
        }
    }

    fn findings_of(records: &[Record], delta: &Delta) -> Vec<Finding> {
        let cfg = Config::default();
        let st = settings();
        let sig = Signatures {
            ladder: SynLadder::new(6, Some(4), Duration::from_secs(1)),
            synack_ladder: SynLadder::new(5, None, Duration::from_secs(1)),
            rto_min: Duration::from_millis(200),
            delack_min: Duration::from_millis(40),
            nodelay: false,
        };
        let threshold = Duration::from_millis(5);
        let spikes = classify(records, threshold, &sig, delta);
        let ctx = Context {
            cfg: &cfg,
            target: "10.77.1.2:5001".parse().unwrap(),
            embedded_server: None,
            elapsed: Duration::from_secs(1),
            settings: &st,
            route_rto_min: None,
            threshold,
        };
        let s = summarize(&ctx, records, &spikes, delta, &sig);
        build(&ctx, &s, &spikes, delta)
    }

    #[test]
    fn eaddrnotavail_is_port_exhaustion_with_the_arithmetic() {
        let enoaddr = Outcome::Error {
            kind: ErrorKind::AddrNotAvail,
            phase: Phase::Connect,
        };
        let mut rs: Vec<Record> = (0..200).map(|i| rec(i, 0, Outcome::Ok)).collect();
        rs.extend((200..210).map(|i| rec(i, 0, enoaddr)));
        let f = findings_of(&rs, &Delta::default());
        assert_eq!(f.len(), 1);
        assert_eq!(f[0].pathology, Pathology::PortExhaustion);
        assert_eq!(f[0].severity, Severity::Critical);
        assert!(f[0]
            .summary
            .contains("10 connects failed with EADDRNOTAVAIL after 200"));
        assert!(f[0].evidence.iter().any(|e| matches!(e,
            Evidence::Arithmetic { result, .. } if (*result - 200.0 / 60.0).abs() < 1e-9)));
        assert!(f[0].remedies[0].action.starts_with("Reuse connections"));
    }

    #[test]
    fn syn_spikes_make_one_finding_with_counter_evidence() {
        let rs = vec![
            rec(0, 0, Outcome::Ok),
            rec(1, 1_000, Outcome::Ok),
            rec(3000, 2_000, Outcome::Ok),
        ];
        let delta = Delta {
            changed: BTreeMap::from([("TcpExtTCPSynRetrans".to_string(), 3)]),
        };
        let f = findings_of(&rs, &delta);
        assert_eq!(f.len(), 1, "{f:?}");
        assert_eq!(f[0].pathology, Pathology::SynRetransmit);
        assert!(f[0]
            .summary
            .contains("1 x SYN retransmission #1, 1 x SYN retransmission #2"));
        assert!(f[0].evidence.contains(&Evidence::Counter {
            name: "TcpExtTCPSynRetrans".into(),
            delta: 3
        }));
    }
}
