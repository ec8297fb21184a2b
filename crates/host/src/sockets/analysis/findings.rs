//! The findings a [`Summary`] supports (port exhaustion, accept queue overflow, slow
//! readers, RTO backoff, SYN retransmissions) and the owner lines they name processes with.

use std::time::Duration;

use tcpdoctor_model::timers::SYN_INITIAL_RTO;
use tcpdoctor_model::units;
use tcpdoctor_model::{merge, Evidence, Finding, Impact, Pathology, Source};

use super::signs::accepts_for;
use super::{
    limits, ClosedBy, Destination, FlaggedSocket, Listener, SlowSign, Summary, EXAMPLES,
    HEADROOM_WARNING,
};
use crate::sockets::{Owner, TcpState};

/// One owner per process (a socket shared by a forked child appears once per process).
pub(super) fn dedup_pids(owners: &[Owner]) -> Vec<&Owner> {
    let mut seen = Vec::new();
    let mut out = Vec::new();
    for o in owners {
        if !seen.contains(&o.pid) {
            seen.push(o.pid);
            out.push(o);
        }
    }
    out
}

/// `closed by: curl[812] 40, wget[90] 3 (exited); 12 unknown`: who left a destination's
/// TIME_WAIT sockets (the three busiest), or "" without a trace.
pub fn closed_by_line(d: &Destination) -> String {
    let Some(list) = &d.closed_by else {
        return String::new();
    };
    let mut parts: Vec<String> = list
        .iter()
        .take(3)
        .map(|c| {
            format!(
                "{}[{}] {}{}",
                c.comm,
                c.pid,
                c.time_wait_sockets,
                if c.exited { " (exited)" } else { "" }
            )
        })
        .collect();
    if list.len() > 3 {
        let rest: u64 = list[3..].iter().map(|c| c.time_wait_sockets).sum();
        parts.push(format!("{} more processes {rest}", list.len() - 3));
    }
    let unknown = d.closed_by_unknown.unwrap_or(0);
    let list = if parts.is_empty() {
        "no traced close".to_string()
    } else {
        parts.join(", ")
    };
    format!("closed by: {list}; {unknown} unknown")
}

/// `nginx pid 812` or `nginx pid 812, nginx pid 813`; empty without owners.
pub fn who(owners: &[Owner]) -> String {
    dedup_pids(owners)
        .iter()
        .map(|o| format!("{} pid {}", o.comm, o.pid))
        .collect::<Vec<_>>()
        .join(", ")
}

/// ` (nginx pid 812)` or nothing.
fn by_whom(owners: &[Owner]) -> String {
    if owners.is_empty() {
        String::new()
    } else {
        format!(" ({})", who(owners))
    }
}

fn worst_stall(flagged: &[&FlaggedSocket]) -> Option<Duration> {
    flagged
        .iter()
        .filter_map(|f| f.stalled_at_least_us)
        .max()
        .map(Duration::from_micros)
}

pub(super) fn findings(sum: &Summary) -> Vec<Finding> {
    let mut out = Vec::new();
    let ports = u64::from(sum.ephemeral_ports);
    for d in &sum.destinations {
        let used = d.ports_unavailable as f64 / ports as f64;
        if used < HEADROOM_WARNING {
            continue;
        }
        out.push(port_exhaustion_finding(sum, d, used));
    }
    for l in sum.listeners.iter().filter(|l| l.full) {
        out.push(overflow_finding(sum, l));
    }
    if !sum.slow_readers.is_empty() {
        out.push(slow_reader_finding(sum));
    }
    // SYNs resent toward a full listener of this namespace are that listener's doing: they
    // are evidence of its overflow finding (above), not a finding of their own.
    let syn: Vec<&FlaggedSocket> = sum
        .retransmitting
        .iter()
        .filter(|f| f.sign == SlowSign::SynRetransmit)
        .filter(|f| {
            !sum.listeners
                .iter()
                .any(|l| l.full && accepts_for(l, f.remote))
        })
        .collect();
    if !syn.is_empty() {
        out.push(syn_finding(sum, &syn, ""));
    }
    let data: Vec<&FlaggedSocket> = sum
        .retransmitting
        .iter()
        .filter(|f| f.sign == SlowSign::RetransmitBackoff)
        .collect();
    if !data.is_empty() {
        out.push(retransmit_timeout_finding(sum, &data));
    }
    // What limited the busy connections; a transfer held by its receiver's window is one
    // more sign of the slow reader above: one finding, its summary saying each thing once.
    merge_limits(&mut out, limits::findings(&sum.transfers));
    out
}

/// The `port_exhaustion` finding of one destination holding `used` of the ephemeral range:
/// the ports held and the budget arithmetic, then who closed its TIME_WAIT sockets (with a
/// trace) and who holds its live sockets (with process attribution).
fn port_exhaustion_finding(sum: &Summary, d: &Destination, used: f64) -> Finding {
    let ports = u64::from(sum.ephemeral_ports);
    let reusable = if d.time_wait_reusable > 0 {
        format!(
            ", {} of them reusable by connect() (tcp_tw_reuse={})",
            d.time_wait_reusable,
            sum.tw_reuse.tcp_tw_reuse.unwrap_or(0)
        )
    } else if d.tw_reuse {
        format!(
            ", none in TIME_WAIT for the {} ms connect() needs before reusing them",
            sum.tw_reuse.tcp_tw_reuse_delay_ms
        )
    } else {
        String::new()
    };
    let budget_formula = if d.tw_reuse {
        format!(
            "{ports} ports / {} ms tcp_tw_reuse_delay (sustainable new connections per s)",
            sum.tw_reuse.tcp_tw_reuse_delay_ms
        )
    } else {
        format!(
            "{ports} ports / {} s TIME_WAIT (sustainable new connections per s)",
            sum.time_wait_duration_s
        )
    };
    let mut f = Finding::new(
        Pathology::PortExhaustion,
        Source::Sockets,
        format!(
            "{} of {} ephemeral ports toward {} are held ({} in TIME_WAIT{reusable}); {} left",
            d.ports_unavailable, ports, d.remote, d.time_wait, d.headroom_ports
        ),
        Impact::budget(used),
    )
    .with_evidence(Evidence::Sockets {
        state: TcpState::TimeWait.name().to_string(),
        count: d.time_wait,
        local: None,
        remote: Some(d.remote.to_string()),
        detail: Some(format!("{} sockets toward it in all states", d.sockets)),
    })
    .setting("net.ipv4.ip_local_port_range", sum.port_range)
    .setting(
        "net.ipv4.tcp_tw_reuse",
        sum.tw_reuse
            .tcp_tw_reuse
            .map_or("(absent)".to_string(), |v| v.to_string()),
    )
    .arithmetic(
        format!(
            "{ports} ports - ({} in use - {} reusable TIME_WAIT) (headroom ports)",
            d.ephemeral_ports_in_use, d.time_wait_reusable
        ),
        d.headroom_ports as f64,
    )
    .arithmetic(budget_formula, d.sustainable_connect_rate_per_s)
    .arithmetic(
        format!(
            "{} TIME_WAIT / {} s (connects per s over the last minute, at least)",
            d.time_wait, sum.time_wait_duration_s
        ),
        d.time_wait_rate_per_s,
    );
    if let Some(closed) = &d.closed_by {
        add_closers(&mut f, d, closed);
    }
    if sum.attribution.is_some() {
        add_live_owners(&mut f, d);
    }
    f
}

/// Adds to a `port_exhaustion` finding the processes a trace saw close the destination's
/// TIME_WAIT sockets, and how many it could not name.
fn add_closers(f: &mut Finding, d: &Destination, closed: &[ClosedBy]) {
    let unknown = d.closed_by_unknown.unwrap_or(0);
    let before = d.closed_by_unknown_before_trace.unwrap_or(0);
    let mut items: Vec<String> = closed
        .iter()
        .take(EXAMPLES)
        .map(|c| {
            format!(
                "{} pid {}{}: {} TIME_WAIT",
                c.comm,
                c.pid,
                if c.exited { " (exited)" } else { "" },
                c.time_wait_sockets
            )
        })
        .collect();
    if closed.len() > EXAMPLES {
        items.push(format!("{} more processes", closed.len() - EXAMPLES));
    }
    items.push(format!(
        "last owner unknown: {unknown} TIME_WAIT ({before} in TIME_WAIT since before the trace started, {} not in the trace's history)",
        unknown - before
    ));
    f.evidence.push(Evidence::Examples {
        what: format!(
            "processes that closed the {} TIME_WAIT sockets toward {} (the last owner of each, recorded by the trace at the close)",
            d.time_wait, d.remote
        ),
        items,
    });
    f.summary.push_str(&format!("; {}", closed_by_line(d)));
}

/// Adds to a `port_exhaustion` finding the processes holding live sockets toward the
/// destination, and names the busiest in its summary.
fn add_live_owners(f: &mut Finding, d: &Destination) {
    let mut items: Vec<String> = d
        .processes
        .iter()
        .take(EXAMPLES)
        .map(|p| format!("{} pid {}: {} live socket(s)", p.comm, p.pid, p.sockets))
        .collect();
    if items.is_empty() {
        items.push("none: no live socket toward it".into());
    }
    f.evidence.push(Evidence::Examples {
        what: if d.closed_by.is_some() {
            format!("processes with live sockets toward {}", d.remote)
        } else {
            format!(
                "processes with live sockets toward {} (the {} TIME_WAIT sockets have no owner: the kernel forgets the process at close; naming their last owner needs a trace watching the close: `tcpdoctor sockets --watch` as root)",
                d.remote, d.time_wait
            )
        },
        items,
    });
    if let Some(p) = d.processes.first() {
        f.summary.push_str(&format!(
            "; live sockets toward it held by {} pid {}",
            p.comm, p.pid
        ));
    }
}

/// The `retransmit_timeout` finding of the data sockets waiting on RTO backoff: the worst
/// RTO, backoff and proven wait, with examples.
fn retransmit_timeout_finding(sum: &Summary, data: &[&FlaggedSocket]) -> Finding {
    let n = data.len() as u64;
    let max_rto = data.iter().filter_map(|f| f.rto_us).max().unwrap_or(0);
    let max_backoff = data.iter().filter_map(|f| f.backoff).max().unwrap_or(0);
    let stall = worst_stall(data);
    Finding::new(
        Pathology::RetransmitTimeout,
        Source::Sockets,
        format!(
            "{n} socket(s) waiting on retransmission timeouts (backoff up to {max_backoff}, RTO up to {} ms; the worst has waited {} or more)",
            max_rto / 1000,
            stall.map_or("?".to_string(), units::ms_or_s_coarse)
        ),
        Impact::stalls(n, Some(sum.data_sockets.max(n)), stall),
    )
    .with_evidence(Evidence::Timing {
        what: "current RTO of the worst socket".into(),
        count: n,
        value_us: u64::from(max_rto),
    })
    .with_evidence(Evidence::Examples {
        what: "sockets (local -> remote backoff RTO)".into(),
        items: data
            .iter()
            .take(EXAMPLES)
            .map(|f| {
                format!(
                    "{} -> {} backoff {} RTO {} ms{}",
                    f.local,
                    f.remote,
                    f.backoff.unwrap_or(0),
                    f.rto_us.unwrap_or(0) / 1000,
                    by_whom(&f.owners)
                )
            })
            .collect(),
    })
}

/// Merges the findings of what limited the busy connections into `out`: one of a pathology
/// already found joins it (impact merged, evidence appended, its summary saying each thing
/// once); others are added.
fn merge_limits(out: &mut Vec<Finding>, limit_findings: Vec<Finding>) {
    for f in limit_findings {
        match out.iter_mut().find(|g| g.pathology == f.pathology) {
            Some(g) => tcpdoctor_model::merge::join_new_parts(g, f),
            None => out.push(f),
        }
    }
}

/// The slow-reader finding of the flagged sockets: how long the worst one is proven stalled
/// (one census: data unread since it arrived, or a writer probing a closed window; two
/// censuses: a zero window or unread data that persisted), the process not reading and the
/// writer waiting on it.
fn slow_reader_finding(sum: &Summary) -> Finding {
    let flagged: Vec<&FlaggedSocket> = sum.slow_readers.iter().collect();
    let n = flagged.len() as u64;
    let unread = flagged
        .iter()
        .filter(|f| {
            matches!(
                f.sign,
                SlowSign::ReceiveQueueGrowing | SlowSign::DataLeftUnread
            )
        })
        .count() as u64;
    let backlogged = flagged
        .iter()
        .filter(|f| f.sign == SlowSign::PersistentBacklog)
        .count() as u64;
    let zero = n - unread - backlogged;
    let queued: u64 = flagged.iter().map(|f| u64::from(f.recv_q_bytes)).sum();
    let stall = worst_stall(&flagged);
    let persisted = match (stall, sum.interval_ms) {
        (Some(s), _) => format!("; stalled for at least {}", units::ms_or_s_coarse(s)),
        (None, Some(_)) => "; not yet seen persisting across censuses".to_string(),
        (None, None) => "; one census: how long it lasts is unknown".to_string(),
    };
    let growing = if sum.interval_ms.is_some() {
        let mut t = format!(", {unread} with data left unread over the census interval");
        if backlogged > 0 {
            t.push_str(&format!(
                ", {backlogged} with a quarter or more of the receive buffer queued at both censuses"
            ));
        }
        t
    } else {
        String::new()
    };
    let mut f = Finding::new(
            Pathology::SlowReader,
            Source::Sockets,
            format!(
                "{n} socket(s) stalled by a slow reader ({zero} at a zero window{growing}, {queued} bytes unread){persisted}"
            ),
            Impact::stalls(n, Some(sum.data_sockets.max(n)), stall),
        )
        .with_evidence(Evidence::Sockets {
            state: TcpState::Established.name().to_string(),
            count: n,
            local: None,
            remote: None,
            detail: Some(format!("{zero} with a zero window, {queued} bytes in Recv-Q")),
        })
        .with_evidence(Evidence::Examples {
            what: "sockets (sign local -> remote Recv-Q/Send-Q)".into(),
            items: flagged
                .iter()
                .take(EXAMPLES)
                .map(|f| {
                    format!(
                        "{:?} {} -> {} {}/{}{}{}",
                        f.sign,
                        f.local,
                        f.remote,
                        f.recv_q_bytes,
                        f.send_q_bytes,
                        f.stalled_at_least_us.map_or(String::new(), |us| format!(
                            " stalled {} or more",
                            units::ms_or_s_coarse(Duration::from_micros(us))
                        )),
                        by_whom(&f.owners)
                    )
                })
                .collect(),
        });
    // The process that is not reading: the owner of a socket with data waiting in it.
    let readers: Vec<&Owner> = flagged
        .iter()
        .filter(|f| f.recv_q_bytes > 0)
        .flat_map(|f| f.owners.iter())
        .collect();
    if let Some(o) = readers.first() {
        f.summary
            .push_str(&format!("; not reading: {} pid {}", o.comm, o.pid));
    }
    // The process waiting to write: the victim, named apart from the culprit.
    let writers: Vec<&Owner> = flagged
        .iter()
        .filter(|f| f.sign == SlowSign::PeerZeroWindow)
        .flat_map(|f| f.owners.iter())
        .collect();
    if let Some(o) = writers.first() {
        f.summary
            .push_str(&format!("; writer waiting: {} pid {}", o.comm, o.pid));
    }
    f
}

/// A full listener's finding: the overflow, the connections it never accepted, and the
/// connects of this namespace whose SYNs it dropped, folded in as its consequence
/// ([`merge::fold`]): their waits are its cost.
fn overflow_finding(sum: &Summary, l: &Listener) -> Finding {
    let (q, b) = (l.accept_queue.unwrap_or(0), l.backlog.unwrap_or(0));
    let u = &l.unaccepted;
    let waited = u.waited_at_least_us.map(Duration::from_micros);
    let queued = if u.connections > 0 {
        format!(
            " ({} never accepted: {} bytes of requests unread, {} closed by the client{})",
            u.connections,
            u.unread_bytes,
            u.closed_by_client,
            waited.map_or(String::new(), |w| format!(
                ", the oldest waiting {} or more",
                units::ms_or_s_coarse(w)
            ))
        )
    } else {
        String::new()
    };
    let mut f = Finding::new(
        Pathology::AcceptQueueOverflow,
        Source::Sockets,
        format!(
            "listener {}{} has a full accept queue: {q} waiting{queued}, backlog {b}; each SYN it drops waits {} for its retransmission",
            l.local,
            by_whom(&l.owners),
            units::ms_or_s_coarse(SYN_INITIAL_RTO)
        ),
        // tcp_conn_request (net/ipv4/tcp_input.c) drops a SYN while sk_acceptq_is_full; the
        // client resends it after TCP_TIMEOUT_INIT. A connection waiting in the queue waits
        // for its reply as long.
        Impact::stalls(
            1 + u.connections,
            None,
            Some(waited.map_or(SYN_INITIAL_RTO, |w| w.max(SYN_INITIAL_RTO))),
        ),
    )
    .with_evidence(Evidence::Sockets {
        state: TcpState::Listen.name().to_string(),
        count: 1,
        local: Some(l.local.to_string()),
        remote: None,
        detail: Some(format!(
            "Recv-Q {q} > Send-Q (backlog) {b}: sk_acceptq_is_full"
        )),
    });
    if u.connections > 0 {
        f.evidence.push(Evidence::Sockets {
            state: "ESTABLISHED or CLOSE_WAIT, no file".into(),
            count: u.connections,
            local: Some(l.local.to_string()),
            remote: None,
            detail: Some(format!(
                "in the accept queue, never accepted (inode 0): {} bytes in Recv-Q, {} closed by the client{}",
                u.unread_bytes,
                u.closed_by_client,
                waited.map_or(String::new(), |w| format!(", waiting {} or more", units::ms_or_s_coarse(w)))
            )),
        });
    }
    if !l.owners.is_empty() {
        f.evidence.push(Evidence::Examples {
            what: "processes holding the listener (they are not calling accept() fast enough)"
                .into(),
            items: l
                .owners
                .iter()
                .map(|o| format!("{} pid {} fd {}", o.comm, o.pid, o.fd))
                .collect(),
        });
    }
    let dropped: Vec<&FlaggedSocket> = sum
        .retransmitting
        .iter()
        .filter(|s| s.sign == SlowSign::SynRetransmit && accepts_for(l, s.remote))
        .collect();
    if !dropped.is_empty() {
        let between = match (l.syn_resends_between_censuses, sum.interval_ms) {
            (Some(n), Some(ms)) => format!(
                "; {n} SYN resend(s) toward it in the {} between the two censuses",
                units::ms_or_s_coarse(Duration::from_millis(ms))
            ),
            _ => String::new(),
        };
        let c =
            syn_finding(sum, &dropped, " toward it").consequence_of(Pathology::AcceptQueueOverflow);
        let mut c = c;
        c.summary.push_str(&between);
        merge::fold(&mut f, c);
    }
    f
}

/// Connects in SYN_SENT that resent their SYN (`toward`: how the summary names their
/// destination).
fn syn_finding(sum: &Summary, syn: &[&FlaggedSocket], toward: &str) -> Finding {
    let n = syn.len() as u64;
    let most = syn.iter().filter_map(|f| f.retransmits).max().unwrap_or(0);
    let stall = worst_stall(syn);
    let connecting = sum.by_state.get(&TcpState::SynSent).copied().unwrap_or(n);
    Finding::new(
        Pathology::SynRetransmit,
        Source::Sockets,
        format!(
            "{n} connect(s) in SYN_SENT{toward} have retransmitted their SYN (up to {most} times: waiting {} or more)",
            stall.map_or("?".to_string(), units::ms_or_s_coarse)
        ),
        Impact::stalls(n, Some(connecting.max(n)), stall),
    )
    .with_evidence(Evidence::Sockets {
        state: TcpState::SynSent.name().to_string(),
        count: n,
        local: None,
        remote: None,
        detail: Some("SYN unanswered; the SYN ladder is running".into()),
    })
    .with_evidence(Evidence::Examples {
        what: "connects (local -> remote)".into(),
        items: syn
            .iter()
            .take(EXAMPLES)
            .map(|f| format!("{} -> {}{}", f.local, f.remote, by_whom(&f.owners)))
            .collect(),
    })
}
