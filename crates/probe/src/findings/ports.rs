//! Local ports running short: connects failing with EADDRNOTAVAIL or EADDRINUSE, judged
//! against the range the run had and the rate of new connections it sustains through
//! TIME_WAIT.

use tcpdoctor_host::counters::Delta;
use tcpdoctor_host::sysctl::TIME_WAIT;
use tcpdoctor_model::{units, Evidence, Finding, Impact, Pathology, Remedy, Source};

use super::*;
use crate::record::{ErrorKind, Phase};
use crate::stats::{Context, ErrorCount, Summary};
pub(super) fn is_exhaustion(kind: ErrorKind) -> bool {
    matches!(kind, ErrorKind::AddrNotAvail | ErrorKind::AddrInUse)
}

/// Errors reported by [`unanswered`] or [`http_errors`] instead of as failures to connect.
pub(super) fn reported_elsewhere(e: &ErrorCount) -> bool {
    matches!(
        (e.kind, e.phase),
        (ErrorKind::TimedOut, Phase::Connect)
            | (ErrorKind::ConnectTimeout, _)
            | (ErrorKind::ReplyTimeout, _)
            | (ErrorKind::HttpStatus { .. }, _)
    )
}

/// The local port range as the port findings state it: its size, the rate of new
/// connections to one destination it sustains through TIME_WAIT, and where it was set.
struct PortBudget {
    ports: u32,
    /// New connections per second to one destination the range sustains.
    rate: f64,
    /// Where the range was set: `--local-ports` or the sysctl.
    range_name: &'static str,
    range_value: String,
    /// The arithmetic of `rate`.
    formula: String,
}

/// The port range of the run and what it sustains ([`PortBudget`]).
fn port_budget(ctx: &Context, s: &Summary) -> PortBudget {
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
    PortBudget {
        ports,
        rate,
        range_name,
        range_value,
        formula,
    }
}

/// EADDRNOTAVAIL / EADDRINUSE: port exhaustion when at least half the ports of the range
/// were in use toward the target (connections that succeeded before the first failure,
/// distinct local ports of the run, or sockets toward the target counted after it);
/// otherwise a failure to connect whose cause the run does not show.
pub(super) fn port_exhaustion(ctx: &Context, s: &Summary, delta: &Delta, out: &mut Vec<Finding>) {
    let budget = port_budget(ctx, s);
    let exhausted: Vec<_> = s.errors.iter().filter(|e| is_exhaustion(e.kind)).collect();
    if !exhausted.is_empty() {
        let (_, first) = first_failure(&exhausted);
        let toward = s.ports_toward_target.unwrap_or_default();
        let used = first
            .ok_before_first
            .max(s.local_ports_used)
            .max(toward.total);
        if used * 2 < u64::from(budget.ports) {
            out.push(address_unavailable(s, delta, &budget, &exhausted, used));
        } else {
            out.push(ports_exhausted(ctx, s, delta, &budget, &exhausted));
        }
        return;
    }
    out.extend(rate_above_budget(ctx, s, delta, &budget));
}

/// The connects that failed for want of a local address or port, and the first of them.
fn first_failure<'a>(exhausted: &[&'a ErrorCount]) -> (u64, &'a ErrorCount) {
    let n: u64 = exhausted.iter().map(|e| e.count).sum();
    let first = exhausted
        .iter()
        .min_by_key(|e| e.first_at_us)
        .expect("non-empty");
    (n, first)
}

/// Adds the sockets toward the target counted after the run (TIME_WAIT and all states), when
/// they were counted.
fn with_target_sockets(s: &Summary, range_value: &str, f: Finding) -> Finding {
    match s.ports_toward_target {
        Some(t) => f
            .with_evidence(Evidence::Sockets {
                state: "TIME_WAIT".into(),
                count: t.time_wait,
                local: Some(range_value.to_string()),
                remote: Some(s.target.clone()),
                detail: Some("after the run, local ports of the range".into()),
            })
            .with_evidence(Evidence::Sockets {
                state: "any state".into(),
                count: t.total,
                local: Some(range_value.to_string()),
                remote: Some(s.target.clone()),
                detail: Some("after the run, local ports of the range".into()),
            }),
        None => f,
    }
}

/// Connects refused a local address or port while fewer than half the ports were in use
/// (`used`): not port exhaustion, but a connect failure, the source address or its routes
/// the likelier cause.
fn address_unavailable(
    s: &Summary,
    delta: &Delta,
    budget: &PortBudget,
    exhausted: &[&ErrorCount],
    used: u64,
) -> Finding {
    let (n, first) = first_failure(exhausted);
    let toward = s.ports_toward_target.unwrap_or_default();
    let ports = budget.ports;
    // No evidence of used ports: the kernel had no local address or port for this
    // destination for another reason (an address gone, a bind conflict).
    let f = Finding::new(
        Pathology::ConnectFailure,
        Source::Probe,
        format!(
            "{n} connects to {} failed with {}, but only {used} of {ports} local ports were in use ({} connections succeeded before the first failure, {} sockets toward the target): not port exhaustion; the source address or its routes are the likelier cause",
            s.target,
            first.errno,
            first.ok_before_first,
            toward.total
        ),
        Impact::failures(n, Some(started(s))),
    )
    .with_first_remedy(Remedy::new(
        "Check the source address: it must be configured and up on this host (ip addr), and the route to the target must use it (ip route get TARGET from ADDR).",
    ))
    .setting(budget.range_name, &budget.range_value)
    .with_evidence(failures(exhausted));
    counter_evidence(
        with_target_sockets(s, &budget.range_value, f),
        delta,
        &["TcpActiveOpens", "TcpExtTW"],
    )
}

/// Port exhaustion proven by failed connects: the range against the connect rate before the
/// first failure, with the failures, the sockets toward the target and the TIME_WAIT
/// counters.
fn ports_exhausted(
    ctx: &Context,
    s: &Summary,
    delta: &Delta,
    budget: &PortBudget,
    exhausted: &[&ErrorCount],
) -> Finding {
    let (n, first) = first_failure(exhausted);
    let (ports, rate) = (budget.ports, budget.rate);
    // Connect rate before the first failure against what the range sustains: only from
    // connects that succeeded. A first failure before any success (the range was spent
    // before the run) says nothing of a rate (issue 24: "0 connects in 0.001 s ... = rate
    // vs budget = 0"); 198 connects in 20 ms before the first failure do, as they ran the
    // range out.
    let first_s = first.first_at_us as f64 / 1e6;
    let ratio = rate_vs_budget(first.ok_before_first, first_s, rate);
    let mut impact = Impact::failures(n, Some(started(s)));
    if let Some(r) = ratio {
        impact = impact.with_rate(r);
    }
    let mut f = Finding::new(
        Pathology::PortExhaustion,
        Source::Probe,
        format!(
            "{n} connects failed with {} after {} succeeded: {ports} local ports last {:.1} new connections/s to {} while TIME_WAIT holds each for {} s",
            first.errno,
            first.ok_before_first,
            rate,
            s.target,
            TIME_WAIT.as_secs()
        ),
        impact,
    )
    .setting(budget.range_name, &budget.range_value)
    .arithmetic(budget.formula.clone(), rate);
    if let Some(r) = ratio {
        f = f.arithmetic(
            format!(
                "{} connects in {first_s:.3} s before the first failure / {rate:.1} per s sustainable = rate vs budget",
                first.ok_before_first
            ),
            r,
        );
    }
    if let Some(v) = ctx.settings.tcp_tw_reuse {
        f = f.setting("net.ipv4.tcp_tw_reuse", v);
    }
    f = with_target_sockets(s, &budget.range_value, f.with_evidence(failures(exhausted)));
    counter_evidence(
        f,
        delta,
        &["TcpExtTW", "TcpActiveOpens", "TcpExtTWRecycled"],
    )
}

/// No failure, but a connection rate the port range cannot sustain through TIME_WAIT:
/// tw_reuse (or the server closing first, or SO_LINGER 0) kept ports free. Context only.
fn rate_above_budget(
    ctx: &Context,
    s: &Summary,
    delta: &Delta,
    budget: &PortBudget,
) -> Option<Finding> {
    let (ports, rate) = (budget.ports, budget.rate);
    let per_conn = ctx.cfg.mode.connection_per_request();
    if !(per_conn
        && s.connections_opened as f64 >= f64::from(ports)
        && s.connections_per_s > rate
        && ctx.cfg.close_first == CloseFirst::Client
        && !ctx.cfg.linger0)
    {
        return None;
    }
    let reused = delta.get("TcpExtTWRecycled");
    let f = Finding::new(
        Pathology::PortExhaustion,
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
        Impact::none(),
    )
    .setting(budget.range_name, &budget.range_value)
    .arithmetic(budget.formula.clone(), rate);
    let f = match ctx.settings.tcp_tw_reuse {
        Some(v) => f.setting("net.ipv4.tcp_tw_reuse", v),
        None => f,
    };
    Some(counter_evidence(
        f,
        delta,
        &["TcpExtTWRecycled", "TcpExtTW"],
    ))
}

/// `200 x EADDRNOTAVAIL from connect(), the first 63.7 ms into the run`, one per kind.
pub(super) fn failures(errors: &[&ErrorCount]) -> Evidence {
    Evidence::Examples {
        what: "failures".into(),
        items: errors
            .iter()
            .map(|e| {
                format!(
                    "{} x {} from {}, the first started {} into the run",
                    e.count,
                    e.errno,
                    phase_call(e.phase),
                    units::micros_coarse(e.first_at_us)
                )
            })
            .collect(),
    }
}

/// Connects that succeeded before the first failure, per second, against the rate the range
/// sustains; `None` when no connect succeeded first.
pub(super) fn rate_vs_budget(ok_before_first: u64, first_s: f64, sustainable: f64) -> Option<f64> {
    (ok_before_first > 0 && first_s > 0.0 && sustainable > 0.0)
        .then(|| ok_before_first as f64 / first_s / sustainable)
}
