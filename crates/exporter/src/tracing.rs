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
            set(&s, snapshot(&session));
            let _ = tx.send(());
            let mut published = Instant::now();
            while !stop.load(Ordering::SeqCst) {
                std::thread::sleep(POLL);
                let _ = session.poll();
                if published.elapsed() >= PUBLISH {
                    set(&s, snapshot(&session));
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

fn snapshot(session: &Session) -> Trace {
    let counts = session.counts().unwrap_or_default();
    let summary = session.summary();
    Trace {
        unavailable: None,
        kernel_events: counts
            .iter()
            .filter(|(c, _)| !matches!(c, Counter::Lost | Counter::Records))
            .map(|(c, n)| (c.name().to_string(), *n))
            .collect(),
        causes: summary
            .causes
            .iter()
            .map(|(c, n)| (c.name().to_string(), *n))
            .collect(),
        drops: summary.drop_reasons.clone(),
        lost: counts.get(&Counter::Lost).copied().unwrap_or(0),
        missed: session.missed(),
    }
}
