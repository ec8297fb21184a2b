//! Findings of a probe run: requests that got no answer (no SYN-ACK, no reply, a dribbling
//! reply), errors by errno (EADDRNOTAVAIL is port exhaustion when the ports in use prove it,
//! with the arithmetic), unexpected HTTP statuses, and spike groups by cause, each with its
//! counter evidence. Severity is never chosen here: each finding describes its harm as an
//! [`Impact`] and the model's policy judges it. Pure.

use std::time::Duration;

use tcpdoctor_host::counters::Delta;
use tcpdoctor_model::{merge, units, Evidence, Finding, Impact, Pathology, Source};

use crate::classify::{Spike, SpikeCause};
use crate::record::{ErrorKind, Phase};
use crate::stats::{Context, ErrorCount, SpikeGroup, Stage, Summary, Unanswered};
use crate::CloseFirst;

fn micros(us: u64) -> Duration {
    Duration::from_micros(us)
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

/// Requests started: ended (ok or failed) or cut.
fn started(s: &Summary) -> u64 {
    s.requests + s.requests_cut
}

/// Share of the run's worker time (workers x elapsed) spent in `waited_us`.
fn share_of_run(s: &Summary, waited_us: u64) -> f64 {
    let capacity = s.concurrency as f64 * s.elapsed_us as f64;
    if capacity > 0.0 {
        (waited_us as f64 / capacity).min(1.0)
    } else {
        0.0
    }
}

/// Time the spikes of `cause` spent in their slow phase, as a share of the run.
fn time_lost(s: &Summary, spikes: &[Spike], cause: impl Fn(SpikeCause) -> bool) -> f64 {
    let waited: u64 = spikes
        .iter()
        .filter(|sp| cause(sp.cause))
        .map(|sp| sp.phase_us)
        .sum();
    share_of_run(s, waited)
}

/// `; 12% of the workers' time` when a stall took a noticeable share of the run.
fn lost_text(lost: f64) -> String {
    if lost >= 0.01 {
        format!("; {:.0}% of the workers' time", lost * 100.0)
    } else {
        String::new()
    }
}

/// All findings of a run, unranked (the Report ranks them).
pub fn build(ctx: &Context, s: &Summary, spikes: &[Spike], delta: &Delta) -> Vec<Finding> {
    let mut out = Vec::new();
    port_exhaustion(ctx, s, delta, &mut out);
    // Connects still inside their SYN ladder when the run ended (none given up, none cut by
    // a timeout flag) in a run whose other connects needed SYN resends.
    let mut in_ladder = Vec::new();
    for u in &s.unanswered {
        if u.stage == Stage::Handshake && u.cut == u.count && u.timed_out == 0 {
            in_ladder.push(out.len());
        }
        out.push(unanswered(ctx, s, u, delta));
    }
    http_errors(s, &mut out);
    connect_failures(s, delta, &mut out);
    for g in &s.spikes.groups {
        spike_group(ctx, s, spikes, delta, g, &mut out);
    }
    syn_retransmits(s, spikes, delta, &mut out);
    transfer_holds(s, delta, &mut out);
    overflow_seen_by_counters(ctx, delta, &mut out);
    fold_connects_in_their_ladder(&mut out, &in_ladder, delta);
    // A full accept queue on this host (the probed server's, when it runs here) drops the
    // handshake's last ACK and the request behind it: requests that then waited for their
    // RTO or for the end of the run are its consequences, folded by the lab's rule.
    // Measured: a one-thread server (backlog 4, 20 ms per request) under `probe --mode crr
    // -c 32 -d 8s` named accept_queue_overflow (276 overflows), no_reply (9 requests) and
    // retransmit_timeout (16 replies after ~266 ms) as three CRITICAL findings.
    merge::fold_overflow_consequences(&mut out, &delta.changed);
    out
}

/// A full accept queue the counters saw on the target's own host when no request of the
/// run completed after its drops (no slow group named it): a finding of its own, context
/// until the requests it hurt (connects still in their SYN ladder, requests never answered
/// or resent on their RTO, requests queued for the server) fold into it. Measured: a
/// one-thread server (backlog 2, 100 ms per request) under `probe --mode crr -c 8 -d 5s`
/// overflowed its queue (TcpExtListenOverflows moved) with no connect completing after a
/// resend in 1 of 7 runs, and named unanswered_syn and server_response instead.
fn overflow_seen_by_counters(ctx: &Context, delta: &Delta, out: &mut Vec<Finding>) {
    let overflows = delta.get("TcpExtListenOverflows");
    if !ctx.target_here
        || overflows <= 0
        || out
            .iter()
            .any(|f| f.pathology == Pathology::AcceptQueueOverflow)
    {
        return;
    }
    let f = Finding::new(
        Pathology::AcceptQueueOverflow,
        Source::Probe,
        format!(
            "a listener on the target's host (this one) overflowed its accept queue {overflows} times during the run"
        ),
        Impact::none(),
    );
    out.push(counter_evidence(
        f,
        delta,
        &["TcpExtListenOverflows", "TcpExtListenDrops"],
    ));
}

/// One cause, one finding: when connects of the run completed after SYN resends (a
/// `syn_retransmit` finding), connects still waiting for a SYN-ACK inside their ladder when
/// the run ended are the same SYN loss caught mid-ladder, not a second cause: their finding
/// (at `at` in `out`) folds into the resends' as a consequence ([`merge::fold_consequences`]: its summary
/// and evidence kept, the waits judged with the resends'). Measured: a syn-drop lab run
/// (30% of SYNs dropped) ranked "1 connects ... got no SYN-ACK in 1.96 s ... still waiting
/// when -d ended the run" as a CRITICAL unanswered_syn before its syn_retransmit (conformance,
/// 1 of 7 full-suite runs).
///
/// Where the completed connects' resends were a full accept queue's (an
/// `accept_queue_overflow` finding: the listener dropped SYNs, `TcpExtListenDrops`), the
/// connects still in their ladder fold into it instead, when the listener dropped at least as
/// many SYNs or ACKs as they are. Measured: a one-thread server (backlog 4) under `probe
/// --mode crr -c 32 -d 8s` ranked "12 connects ... got no SYN-ACK ... still waiting when -d
/// ended the run" (CRITICAL unanswered_syn, 217 listen drops) beside the overflow.
fn fold_connects_in_their_ladder(out: &mut Vec<Finding>, at: &[usize], delta: &Delta) {
    let has = |p: Pathology| out.iter().any(|f| f.pathology == p);
    let cause = if has(Pathology::SynRetransmit) {
        Pathology::SynRetransmit
    } else if has(Pathology::AcceptQueueOverflow) {
        let waiting: u64 = at.iter().map(|&i| out[i].impact.affected).sum();
        if waiting as i64 > delta.get("TcpExtListenDrops") {
            return;
        }
        Pathology::AcceptQueueOverflow
    } else {
        return;
    };
    if at.is_empty() {
        return;
    }
    for &i in at {
        out[i].consequence_of = Some(cause);
    }
    merge::fold_consequences(out);
}

/// The finding of one group of slow requests by cause, with its counters, slow phase and
/// example ports. SYN retransmits are grouped apart ([`syn_retransmits`]); a slow server
/// or network part is described by [`crate::time_findings::slow_part`].
fn spike_group(
    ctx: &Context,
    s: &Summary,
    spikes: &[Spike],
    delta: &Delta,
    g: &SpikeGroup,
    out: &mut Vec<Finding>,
) {
    let examples = Evidence::Examples {
        what: "local ports of slow connections".into(),
        items: ports(&g.example_local_ports),
    };
    let worst = Some(micros(g.max_phase_us));
    let lost = time_lost(s, spikes, |c| c == g.cause);
    let f = match g.cause {
        SpikeCause::SynRetransmit { .. } => return, // grouped apart: syn_retransmits
        SpikeCause::ServerResponse | SpikeCause::NetworkLatency => {
            out.extend(crate::time_findings::slow_part(s, spikes, g.cause));
            return;
        }
        SpikeCause::AcceptQueueOverflow => counter_evidence(
            Finding::new(
                Pathology::AcceptQueueOverflow,
                Source::Probe,
                format!(
                    "{} connections waited ~{} while the listener's accept queue overflowed{}",
                    g.count,
                    units::micros_coarse(g.typical_phase_us),
                    lost_text(lost)
                ),
                Impact::stalls(g.count, Some(started(s)), worst).with_time_lost(lost),
            ),
            delta,
            &[
                "TcpExtListenOverflows",
                "TcpExtListenDrops",
                "TcpExtTCPSynRetrans",
            ],
        ),
        SpikeCause::StaleAckResend => counter_evidence(
            Finding::new(
                Pathology::StaleAckRace,
                Source::Probe,
                format!(
                    "{} connects took ~{}: SYN answered by a stale ACK and resent quickly",
                    g.count,
                    units::micros_coarse(g.typical_phase_us)
                ),
                Impact::stalls(g.count, Some(s.connects_attempted), worst).with_time_lost(lost),
            ),
            delta,
            &["TcpExtTCPSynRetrans", "TcpOutRsts"],
        ),
        SpikeCause::DataRto => counter_evidence(
            Finding::new(
                Pathology::RetransmitTimeout,
                Source::Probe,
                format!(
                    "{} of {} replies waited ~{} for a retransmission timeout (RTO floor {}){}",
                    g.count,
                    started(s),
                    units::micros_coarse(g.typical_phase_us),
                    units::micros_coarse(s.settings.rto_min_us),
                    lost_text(lost)
                ),
                Impact::stalls(g.count, Some(started(s)), worst).with_time_lost(lost),
            ),
            delta,
            &["TcpExtTCPTimeouts", "TcpRetransSegs"],
        )
        .setting(
            if s.settings.rto_min_source == crate::stats::RtoMinSource::Route {
                "route rto_min"
            } else {
                "net.ipv4.tcp_rto_min_us"
            },
            s.settings.rto_min_us,
        ),
        SpikeCause::DelayedAck => counter_evidence(
            Finding::new(
                Pathology::DelayedAck,
                Source::Probe,
                format!(
                    "{} of {} replies waited ~{}: a delayed ACK held a small write{}",
                    g.count,
                    s.requests_ok,
                    units::micros_coarse(g.typical_phase_us),
                    lost_text(lost)
                ),
                // The share of requests with ~40 ms stalls decides (policy: common or rare).
                Impact::stalls(g.count, Some(s.requests_ok), worst).with_time_lost(lost),
            ),
            delta,
            &["TcpExtDelayedACKs"],
        )
        .setting("TCP_NODELAY", ctx.cfg.nodelay),
        SpikeCause::Unexplained => unexplained(s, spikes, g, worst, lost),
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

/// The finding of slow requests with no TCP timer signature: context (no impact) when each
/// stall lies within the probe's own time or its CPU waits, with the split of their time and
/// the CPU contention as evidence.
fn unexplained(
    s: &Summary,
    spikes: &[Spike],
    g: &SpikeGroup,
    worst: Option<Duration>,
    lost: f64,
) -> Finding {
    // Requests whose largest part was the probe's own time (open-loop lateness,
    // waking after the SYN-ACK, closing), or a server or path part that the CPU
    // waits of the probe's workers and server could account for (split::assign
    // left those unnamed for that), measured this host's load, not the target:
    // a clean loopback run at 99% CPU pressure had 11 of 800 such requests, ~8 ms
    // each, and at a load average of 12, 127 of 800 (105 client time, 21 within
    // their CPU waits). Such a finding is context; a stall the waits cannot
    // account for is not.
    let own = spikes
        .iter()
        .filter(|sp| sp.cause == SpikeCause::Unexplained)
        .all(|sp| {
            sp.split.dominant() == crate::split::Component::Client || sp.cpu_wait_bound_ns.is_some()
        });
    let impact = if own {
        Impact::none()
    } else {
        // Not judged by the time lost: an unexplained stall includes the scheduling
        // of the probe's own threads, which share the CPUs with what they measure.
        // The share of requests hurt and the longest stall decide; the text gives
        // the time.
        Impact::stalls(g.count, Some(s.requests_ok), worst)
    };
    let whose = if own {
        ": each within the probe's own time (its lateness, waking, closing) or the CPU waits of its workers and server, so it measures this host's load, not the target"
    } else {
        ""
    };
    let f = Finding::new(
        Pathology::UnexplainedDelay,
        Source::Probe,
        format!(
            "{} of {} requests were slower than {} (typical slow phase {}, worst {}) with no TCP timer signature{}{whose}",
            g.count,
            s.requests_ok,
            units::micros_coarse(s.spikes.threshold_us),
            units::micros_coarse(g.typical_phase_us),
            units::micros_coarse(g.max_phase_us),
            lost_text(lost)
        ),
        impact,
    );
    let f = match crate::time_findings::unexplained_split(s, spikes) {
        Some(e) => f.with_evidence(e),
        None => f,
    };
    match cpu_wait_evidence(s) {
        Some(e) => f.with_evidence(e),
        None => f,
    }
}

/// Replies a delayed ACK held after their first byte
/// ([`crate::time_findings::transfer_holds`]): a finding of their own, or evidence added to
/// the delayed-ACK group's finding already in `out`.
fn transfer_holds(s: &Summary, delta: &Delta, out: &mut Vec<Finding>) {
    match crate::time_findings::transfer_holds(s, delta) {
        Some(Ok(f)) => out.push(f),
        Some(Err(e)) => {
            if let Some(f) = out
                .iter_mut()
                .find(|f| f.pathology == Pathology::DelayedAck)
            {
                f.evidence.push(e);
            }
        }
        None => {}
    }
}

/// How contended the host's CPUs were during the run: context for a delay no TCP timer
/// explains (a probe, its server and everything else share the CPUs), not a cause named.
pub(crate) fn cpu_wait_evidence(s: &Summary) -> Option<Evidence> {
    let w = s.cpu_wait?;
    Some(Evidence::Arithmetic {
        formula: format!(
            "% of the run with some task on this host waiting for a CPU \
             (/proc/pressure/cpu): {} ms / {} ms x 100",
            w.some_us / 1_000,
            s.elapsed_us / 1_000
        ),
        result: (w.share * 1000.0).round() / 10.0,
    })
}

fn phase_call(p: Phase) -> &'static str {
    match p {
        Phase::Socket => "socket()",
        Phase::Bind => "bind()",
        Phase::Connect => "connect()",
        Phase::Tls => "the TLS handshake",
        Phase::Send => "send()",
        Phase::Reply => "the reply",
    }
}

/// What a finding of unanswered requests says whatever they waited for (a SYN-ACK or a
/// reply): how long, how they ended, when the first timeout fired, what it cost, and the
/// evidence every such finding carries.
struct Unheard {
    /// How long they waited: one duration, or a range.
    waited: String,
    /// How they ended: given up by the kernel, cut by a timeout flag, still waiting.
    ended: String,
    /// `; the first timeout fired 2 s into the run`, or empty.
    fired: String,
    impact: Impact,
    timing: Evidence,
    ports: Evidence,
}

/// Requests that got no answer: no SYN-ACK ([`Pathology::UnansweredSyn`]) or no (complete)
/// reply ([`Pathology::NoReply`]), with how long they waited and what ended the wait.
fn unanswered(ctx: &Context, s: &Summary, u: &Unanswered, delta: &Delta) -> Finding {
    let fired = u
        .first_timeout_at_us
        .map(|t| {
            format!(
                "; the first timeout fired {} into the run",
                units::micros_coarse(t)
            )
        })
        .unwrap_or_default();
    let impact = Impact {
        affected: u.count,
        observed: Some(match u.stage {
            Stage::Handshake => s.connects_attempted,
            Stage::Reply => started(s),
        }),
        failed: u.timed_out,
        worst_stall_us: Some(u.max_wait_us),
        ..Impact::default()
    };
    let ports = Evidence::Examples {
        what: "local ports".into(),
        items: ports(&u.example_local_ports),
    };
    let timing = Evidence::Timing {
        what: match u.stage {
            Stage::Handshake => "connect waited without a SYN-ACK (longest)".into(),
            Stage::Reply => "waited for the reply (longest)".into(),
        },
        count: u.count,
        value_us: u.max_wait_us,
    };
    let heard = Unheard {
        waited: waited_text(u),
        ended: how_ended(ctx, s, u).join(", "),
        fired,
        impact,
        timing,
        ports,
    };
    match u.stage {
        Stage::Handshake => unanswered_syn(s, u, delta, heard),
        Stage::Reply => no_reply(s, u, delta, heard),
    }
}

/// How unanswered requests ended: given up by the kernel (ETIMEDOUT), cut by the probe's
/// own timeout flag, or still waiting when the run ended or was stopped.
fn how_ended(ctx: &Context, s: &Summary, u: &Unanswered) -> Vec<String> {
    let mut ended = Vec::new();
    let ours = u.timed_out - u.etimedout;
    if u.etimedout > 0 {
        ended.push(format!(
            "{} ended with ETIMEDOUT when the kernel gave up",
            u.etimedout
        ));
    }
    if ours > 0 {
        let flag = match u.stage {
            Stage::Handshake => "--connect-timeout",
            Stage::Reply => "--timeout",
        };
        ended.push(format!(
            "{ours} cut by {flag} {}",
            u.timeout_us
                .map_or("(its value)".to_string(), units::micros_coarse)
        ));
    }
    if u.cut > 0 {
        let when = if ctx.cfg.duration.as_micros() as u64 <= s.elapsed_us + 50_000 {
            "when -d ended the run"
        } else {
            "when the run was stopped"
        };
        ended.push(format!("{} still waiting {when}", u.cut));
    }
    ended
}

/// How long unanswered requests waited: one duration when the shortest and longest wait
/// read the same, else `shortest to longest`.
fn waited_text(u: &Unanswered) -> String {
    if units::micros_coarse(u.min_wait_us) == units::micros_coarse(u.max_wait_us) {
        units::micros_coarse(u.max_wait_us)
    } else {
        format!(
            "{} to {}",
            units::micros_coarse(u.min_wait_us),
            units::micros_coarse(u.max_wait_us)
        )
    }
}

/// The finding of connects that got no SYN-ACK: which SYNs this host's ladder sent in the
/// time they waited, the ladder as a setting, and the SYN counters.
fn unanswered_syn(s: &Summary, u: &Unanswered, delta: &Delta, heard: Unheard) -> Finding {
    let Unheard {
        waited,
        ended,
        fired,
        impact,
        timing,
        ports,
    } = heard;
    // The SYNs this host sent in that time, from its SYN ladder: those whose latest
    // time passed surely left; one due but possibly not yet sent (timers fire late)
    // is named as such.
    let st = &s.settings;
    let wait_ms = u.max_wait_us / 1_000;
    let mut sent = vec!["0".to_string()];
    let mut maybe = Vec::new();
    for (i, &at) in st.syn_ladder_ms.iter().enumerate() {
        let latest = st.syn_ladder_latest_ms.get(i).copied().unwrap_or(at);
        if latest <= wait_ms {
            sent.push(units::bare_secs_of_ms(at));
        } else if at <= wait_ms {
            maybe.push(units::bare_secs_of_ms(at));
        }
    }
    let maybe = if maybe.is_empty() {
        String::new()
    } else {
        format!(
            ", perhaps again at {} s (due, not certainly sent)",
            maybe.join(", ")
        )
    };
    let f = Finding::new(
        Pathology::UnansweredSyn,
        Source::Probe,
        format!(
            "{} connects to {} got no SYN-ACK in {waited}: the SYN went out at {} s on this host's SYN ladder{maybe}, unanswered ({ended}{fired})",
            u.count,
            s.target,
            sent.join(", "),
        ),
        impact,
    )
    .with_evidence(timing)
    .with_evidence(ports)
    .setting(
        "SYN ladder (tcp_syn_retries, tcp_syn_linear_timeouts)",
        format!(
            "{} s, fail at {} s",
            s.settings
                .syn_ladder_ms
                .iter()
                .map(|&ms| units::bare_secs_of_ms(ms))
                .collect::<Vec<_>>()
                .join(", "),
            units::bare_secs_of_ms(s.settings.syn_give_up_ms)
        ),
    );
    counter_evidence(
        f,
        delta,
        &[
            "TcpExtTCPSynRetrans",
            "TcpAttemptFails",
            "TcpExtListenDrops",
        ],
    )
}

/// The finding of accepted requests that got no reply, or only a dribble of it (how much,
/// how fast), with the abort counters.
fn no_reply(s: &Summary, u: &Unanswered, delta: &Delta, heard: Unheard) -> Finding {
    let Unheard {
        waited,
        ended,
        fired,
        impact,
        timing,
        ports,
    } = heard;
    let what = if u.partial_replies == 0 {
        format!("were accepted, never replied: no reply byte in {waited}")
    } else {
        let expected = u
            .expected_reply_bytes
            .map(|e| format!(" of {e}"))
            .unwrap_or_default();
        let rate = u.max_received_bytes as f64 / (u.max_wait_us as f64 / 1e6).max(1e-6);
        format!(
            "were accepted but the reply dribbled: {} received part of it, at most {}{expected} bytes in {waited} (~{rate:.1} bytes/s), none completed",
            u.partial_replies, u.max_received_bytes
        )
    };
    let f = Finding::new(
        Pathology::NoReply,
        Source::Probe,
        format!(
            "{} requests to {} {what} ({ended}{fired})",
            u.count, s.target
        ),
        impact,
    )
    .with_evidence(timing)
    .with_evidence(ports);
    let f = if u.partial_replies > 0 {
        f.with_evidence(Evidence::Timing {
            what: format!(
                "partial replies (most bytes received: {}), longest wait",
                u.max_received_bytes
            ),
            count: u.partial_replies,
            value_us: u.max_wait_us,
        })
    } else {
        f
    };
    counter_evidence(f, delta, &["TcpExtTCPAbortOnData", "TcpExtTCPAbortOnClose"])
}

/// HTTP answers outside `--expect-status`: failures, as wrk and oha count them.
fn http_errors(s: &Summary, out: &mut Vec<Finding>) {
    let bad: Vec<&ErrorCount> = s
        .errors
        .iter()
        .filter(|e| matches!(e.kind, ErrorKind::HttpStatus { .. }))
        .collect();
    if bad.is_empty() {
        return;
    }
    let n: u64 = bad.iter().map(|e| e.count).sum();
    let responses: u64 = s.status_codes.values().sum();
    let what: Vec<String> = bad
        .iter()
        .map(|e| format!("{} x {}", e.count, e.errno))
        .collect();
    let f = Finding::new(
        Pathology::HttpError,
        Source::Probe,
        format!(
            "{n} of {responses} HTTP responses from {} were outside the expected statuses ({}): {}",
            s.url.as_deref().unwrap_or(&s.target),
            s.expect_status.as_deref().unwrap_or("2xx"),
            what.join(", ")
        ),
        Impact::failures(n, Some(responses)),
    )
    .with_evidence(Evidence::Examples {
        what: "unexpected statuses".into(),
        items: what,
    });
    out.push(f);
}

fn connect_failures(s: &Summary, delta: &Delta, out: &mut Vec<Finding>) {
    let failures: Vec<_> = s
        .errors
        .iter()
        .filter(|e| !is_exhaustion(e.kind) && !reported_elsewhere(e))
        .collect();
    if failures.is_empty() {
        return;
    }
    let n: u64 = failures.iter().map(|e| e.count).sum();
    let what: Vec<String> = failures
        .iter()
        .map(|e| format!("{} x {} from {}", e.count, e.errno, phase_call(e.phase)))
        .collect();
    let mut f = Finding::new(
        Pathology::ConnectFailure,
        Source::Probe,
        format!(
            "{n} of {} requests to {} failed: {}",
            started(s),
            s.target,
            what.join(", ")
        ),
        Impact::failures(n, Some(started(s))),
    );
    f = f.with_evidence(ports::failures(&failures));
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
    let worst = groups.iter().map(|g| g.max_phase_us).max().unwrap_or(0);
    let ladder: Vec<String> = s
        .settings
        .syn_ladder_ms
        .iter()
        .map(|&ms| units::bare_secs_of_ms(ms))
        .collect();
    let corroborated: u64 = groups.iter().map(|g| g.corroborated).sum();
    let lost = time_lost(s, spikes, |c| matches!(c, SpikeCause::SynRetransmit { .. }));
    let mut f = Finding::new(
        Pathology::SynRetransmit,
        Source::Probe,
        format!(
            "{n} of {} connects waited for SYN retransmissions ({}), the longest {}{}{}",
            s.connects_attempted,
            groups
                .iter()
                .map(|g| format!("{} x {}", g.count, g.label))
                .collect::<Vec<_>>()
                .join(", "),
            units::micros_coarse(worst),
            lost_text(lost),
            if corroborated < n {
                "; TcpExtTCPSynRetrans did not move enough to confirm all of them"
            } else {
                ""
            }
        ),
        Impact::stalls(n, Some(s.connects_attempted), Some(micros(worst))).with_time_lost(lost),
    )
    .setting(
        "SYN ladder (tcp_syn_retries, tcp_syn_linear_timeouts)",
        format!(
            "{} s, fail at {} s",
            ladder.join(", "),
            s.settings.syn_give_up_ms as f64 / 1000.0
        ),
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

mod ports;
use ports::{is_exhaustion, port_exhaustion, reported_elsewhere};

#[cfg(test)]
pub(crate) mod tests;
