//! Optional eBPF tracing (`tcpdoctor-trace`): a thread that keeps a trace session of the
//! watched namespace running, drains its ring buffer every 50 ms (attribution needs the
//! records while the sockets they name still exist) and publishes its counts once a second.
//!
//! When tracing cannot start (not root and no CAP_BPF/CAP_PERFMON, no kernel BTF, a
//! tracepoint missing) the reason is published instead and the exporter goes on without it.
//! Trace findings are not part of the findings metric: a session's findings cover everything
//! since it started, not what is active now.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::time::{Duration, Instant};

use tcpdoctor_trace::raw::Counter;
use tcpdoctor_trace::session::{Options, Scope, Session};

use crate::metrics::Trace;

/// How often the ring buffer is drained.
const POLL: Duration = Duration::from_millis(50);
/// How often the counts are published.
const PUBLISH: Duration = Duration::from_secs(1);

/// Drop reasons exported from the first scrape at 0, where this kernel defines them (read
/// from its BTF), so that `tcpdoctor_trace_drops_total` exists before the first drop and a
/// dashboard shows 0 rather than no data: the reasons a TCP packet meets on this host's
/// receive path and queues. Other reasons appear when first seen.
const USUAL_DROP_REASONS: &[&str] = &[
    "NOT_SPECIFIED",
    "NO_SOCKET",
    "SOCKET_BACKLOG",
    "SOCKET_RCVBUFF",
    "PROTO_MEM",
    "QDISC_DROP",
    "CPU_BACKLOG",
    "TCP_CSUM",
    "TCP_FLAGS",
    "TCP_ZEROWINDOW",
    "TCP_OLD_DATA",
    "TCP_OVERWINDOW",
    "TCP_OFO_DROP",
    "TCP_OFO_QUEUE_PRUNE",
    "TCP_RFC7323_PAWS",
    "TCP_INVALID_SEQUENCE",
    "TCP_INVALID_ACK_SEQUENCE",
    "TCP_RESET",
    "TCP_INVALID_SYN",
    "TCP_CLOSE",
    "TCP_OLD_ACK",
    "TCP_TOO_OLD_ACK",
    "TCP_LISTEN_OVERFLOW",
];

/// [`USUAL_DROP_REASONS`] this kernel defines (none when its BTF cannot be read).
fn usual_drop_reasons() -> Vec<String> {
    let Ok(btf) = std::fs::read("/sys/kernel/btf/vmlinux") else {
        return Vec::new();
    };
    let Ok(r) = tcpdoctor_trace::btf::Reasons::from_btf(&btf) else {
        return Vec::new();
    };
    USUAL_DROP_REASONS
        .iter()
        .filter(|n| r.drop.value(n).is_some())
        .map(|n| n.to_string())
        .collect()
}

/// The published trace state.
pub type Shared = Arc<Mutex<Trace>>;

/// Reads the published state.
pub fn read(s: &Shared) -> Trace {
    match s.lock() {
        Ok(g) => g.clone(),
        Err(p) => p.into_inner().clone(),
    }
}

fn set(s: &Shared, t: Trace) {
    match s.lock() {
        Ok(mut g) => *g = t,
        Err(p) => *p.into_inner() = t,
    }
}

/// Starts tracing `netns` (or the exporter's own namespace); returns once the session is
/// attached or has failed, with the state scrapes read.
pub fn start(
    netns: Option<String>,
    stop: &'static AtomicBool,
) -> (Shared, Option<std::thread::JoinHandle<()>>) {
    let shared: Shared = Arc::new(Mutex::new(Trace {
        unavailable: Some("starting".into()),
        ..Trace::default()
    }));
    let (tx, rx) = mpsc::sync_channel::<()>(1);
    let s = Arc::clone(&shared);
    let handle = std::thread::Builder::new()
        .name("tdoc-trace".into())
        .spawn(move || {
            let scope = match netns {
                Some(n) => Scope::Named(vec![n]),
                None => Scope::Current,
            };
            let mut session = match Session::start(Options {
                scope,
                ..Options::default()
            }) {
                Ok(x) => x,
                Err(e) => {
                    set(
                        &s,
                        Trace {
                            unavailable: Some(e.to_string()),
                            ..Trace::default()
                        },
                    );
                    let _ = tx.send(());
                    return;
                }
            };
            let usual = usual_drop_reasons();
            set(&s, snapshot(&session, &usual));
            let _ = tx.send(());
            let mut published = Instant::now();
            while !stop.load(Ordering::SeqCst) {
                std::thread::sleep(POLL);
                let _ = session.poll();
                if published.elapsed() >= PUBLISH {
                    set(&s, snapshot(&session, &usual));
                    published = Instant::now();
                }
            }
        });
    match handle {
        Ok(h) => {
            let _ = rx.recv();
            (shared, Some(h))
        }
        Err(e) => {
            set(
                &shared,
                Trace {
                    unavailable: Some(format!("cannot start the trace thread: {e}")),
                    ..Trace::default()
                },
            );
            (shared, None)
        }
    }
}

fn snapshot(session: &Session, usual_drops: &[String]) -> Trace {
    let counts = session.counts().unwrap_or_default();
    let summary = session.summary();
    let mut drops = summary.drop_reasons.clone();
    for r in usual_drops {
        drops.entry(r.clone()).or_insert(0);
    }
    Trace {
        unavailable: None,
        kernel_events: counts
            .iter()
            .filter(|(c, _)| !matches!(c, Counter::Lost | Counter::Records))
            .map(|(c, n)| (c.name().to_string(), *n))
            .collect(),
        // Every cause from the start at 0, so a dashboard shows 0 rather than no data.
        causes: tcpdoctor_trace::attribute::Cause::ALL
            .iter()
            .map(|c| (c.name().to_string(), 0))
            .chain(
                summary
                    .causes
                    .iter()
                    .map(|(c, n)| (c.name().to_string(), *n)),
            )
            .collect(),
        drops,
        lost: counts.get(&Counter::Lost).copied().unwrap_or(0),
        missed: session.missed(),
    }
}
