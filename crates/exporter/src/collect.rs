//! The collector: one thread that, every interval, takes the census of the watched network
//! namespace, judges it with doctor's checks, and publishes the result for scrapes to serve.
//!
//! The thread enters the namespace once (`setns(CLONE_NEWNET)` moves only the calling
//! thread), so everything it reads there is the namespace's: the sock_diag dump, the sysctls
//! under `/proc/sys/net`, the counters under `/proc/thread-self/net`, and the `ip route`
//! it runs for route `rto_min` (a child inherits its thread's namespace). The counter files it
//! opens stay bound to the namespace, so the HTTP thread reads the namespace's counters
//! through them at scrape time without entering it.
//!
//! A failed census (say the namespace's sockets could not be dumped) is counted and the
//! previous one stays served; its age grows, which `tcpdoctor_census_age_seconds` shows.

use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{mpsc, Arc, Mutex, RwLock};
use std::time::{Duration, Instant, SystemTime};

use tcpdoctor_host::check::{Inputs, ListenerBacklog};
use tcpdoctor_host::counters::{self, Sampler, Snapshot};
use tcpdoctor_host::sockets::{self, Census, Filter, Summary, TcpState};
use tcpdoctor_model::Finding;
use tcpdoctor_report::prometheus::Family;

use crate::findings::{self, Observed};
use crate::{metrics, Config, Error};

/// One complete census, judged and turned into metric families. Immutable once published.
#[derive(Debug)]
pub struct Collected {
    pub families: Vec<Family>,
    pub findings: Vec<Finding>,
    /// When it was complete (for its age at scrape time).
    pub finished: Instant,
    pub finished_wall: SystemTime,
}

/// What the collector shares with the HTTP side.
pub struct Shared {
    latest: RwLock<Arc<Collected>>,
    /// The namespace's counter files, opened by the collector thread.
    pub counters: Mutex<Sampler>,
    pub censuses: AtomicU64,
    pub census_errors: AtomicU64,
}

impl Shared {
    /// The last complete census. Never waits for one in progress: the collector holds the
    /// lock only to swap a pointer.
    pub fn latest(&self) -> Arc<Collected> {
        match self.latest.read() {
            Ok(g) => Arc::clone(&g),
            Err(p) => Arc::clone(&p.into_inner()),
        }
    }

    fn publish(&self, c: Collected) {
        let c = Arc::new(c);
        match self.latest.write() {
            Ok(mut g) => *g = c,
            Err(p) => *p.into_inner() = c,
        }
    }

    /// Reads the kernel counters now.
    pub fn read_counters(&self) -> Result<Snapshot, tcpdoctor_host::Error> {
        match self.counters.lock() {
            Ok(mut s) => s.sample(),
            Err(p) => p.into_inner().sample(),
        }
    }
}

/// Moves the calling thread into network namespace `name` (`/run/netns/NAME`).
pub fn enter_netns(name: &str) -> Result<(), Error> {
    let err = |source| Error::Netns {
        name: name.to_string(),
        source,
    };
    if name.is_empty() || name.contains('/') || name == "." || name == ".." {
        return Err(err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            "not a namespace name (see `ip netns list`)",
        )));
    }
    let f = std::fs::File::open(format!("/run/netns/{name}")).map_err(err)?;
    // SAFETY: setns on a valid descriptor; it moves only the calling thread.
    if unsafe { libc::setns(f.as_raw_fd(), libc::CLONE_NEWNET) } != 0 {
        return Err(err(std::io::Error::last_os_error()));
    }
    Ok(())
}

/// What one collection carries over to the next.
#[derive(Default)]
struct Carry {
    /// The previous census, without its TIME_WAIT entries (only data sockets are compared).
    census: Option<Census>,
    counters: Option<(Snapshot, Instant)>,
}

/// Listener backlogs for the settings audit, as `tcpdoctor check` and `doctor` pass them.
fn backlogs(s: &Summary) -> Vec<ListenerBacklog> {
    s.listeners
        .iter()
        .filter(|l| l.listening)
        .filter_map(|l| {
            l.backlog.map(|b| ListenerBacklog {
                local: l.local.to_string(),
                backlog: u64::from(b),
            })
        })
        .collect()
}

/// One collection: settings, census, counters, findings, families.
fn collect(
    carry: &mut Carry,
    shared_counters: &dyn Fn() -> Result<Snapshot, tcpdoctor_host::Error>,
    top: usize,
) -> Result<Collected, Error> {
    let t0 = Instant::now();
    // Settings that cannot be read skip the audit, as in doctor; the census still runs.
    let mut inputs = Inputs::read().ok();
    let census = sockets::census(&Filter::default())?;
    let analysis = sockets::analyze(&census, carry.census.as_ref());
    if let Some(i) = inputs.as_mut() {
        i.listeners = backlogs(&analysis.summary);
    }
    let now = Instant::now();
    let snap = shared_counters().ok();
    let delta = match (&snap, &carry.counters) {
        (Some(after), Some((before, t))) if after.went_backwards(before).is_empty() => {
            Some((after.delta_since(before).changed, now.duration_since(*t)))
        }
        _ => None,
    };
    let window = match (
        carry.census.as_ref().and_then(|c| c.taken_at),
        census.taken_at,
    ) {
        (Some(a), Some(b)) => Some(b.saturating_duration_since(a)),
        _ => delta.as_ref().map(|d| d.1),
    };
    let found = findings::active(Observed {
        inputs: inputs.as_ref(),
        sockets: analysis.findings,
        counters: delta.as_ref().map(|d| &d.0),
        window: delta.as_ref().map(|d| d.1),
    });
    let families = metrics::census(
        &metrics::Census {
            summary: &analysis.summary,
            inputs: inputs.as_ref(),
            findings: &found,
            duration: t0.elapsed(),
            window,
        },
        top,
    );
    let mut keep = census;
    keep.sockets.retain(|s| s.state != TcpState::TimeWait);
    carry.census = Some(keep);
    carry.counters = snap.map(|s| (s, now));
    Ok(Collected {
        families,
        findings: found,
        finished: Instant::now(),
        finished_wall: SystemTime::now(),
    })
}

/// Starts the collector thread (in `config.netns` when set), waits for its first complete
/// census, and returns what scrapes share with it. Errors of the first census (a missing
/// namespace, no permission) are returned; later ones are counted.
pub fn start(
    config: &Config,
    stop: &'static AtomicBool,
) -> Result<(Arc<Shared>, std::thread::JoinHandle<()>), Error> {
    let (tx, rx) = mpsc::sync_channel::<Result<Arc<Shared>, Error>>(1);
    let netns = config.netns.clone();
    let interval = config.interval;
    let top = config.top;
    let handle = std::thread::Builder::new()
        .name("tdoc-collector".into())
        .spawn(move || {
            let first = (|| {
                if let Some(ns) = &netns {
                    enter_netns(ns)?;
                }
                // /proc/thread-self/net: this thread's (the namespace's) counters.
                let sampler = counters::Source::default().sampler()?;
                let counters = Mutex::new(sampler);
                let mut carry = Carry::default();
                let read = || match counters.lock() {
                    Ok(mut s) => s.sample(),
                    Err(p) => p.into_inner().sample(),
                };
                let c = collect(&mut carry, &read, top)?;
                Ok::<_, Error>((counters, carry, c))
            })();
            let (counters, mut carry, c) = match first {
                Ok(v) => v,
                Err(e) => {
                    let _ = tx.send(Err(e));
                    return;
                }
            };
            let shared = Arc::new(Shared {
                latest: RwLock::new(Arc::new(c)),
                counters,
                censuses: AtomicU64::new(1),
                census_errors: AtomicU64::new(0),
            });
            if tx.send(Ok(Arc::clone(&shared))).is_err() {
                return;
            }
            let mut next = Instant::now() + interval;
            while !stop.load(Ordering::SeqCst) {
                let now = Instant::now();
                if now < next {
                    std::thread::sleep((next - now).min(Duration::from_millis(100)));
                    continue;
                }
                // A fixed rate; ticks missed while a census ran long are skipped.
                while next <= now {
                    next += interval;
                }
                match collect(&mut carry, &|| shared.read_counters(), top) {
                    Ok(c) => {
                        shared.publish(c);
                        shared.censuses.fetch_add(1, Ordering::Relaxed);
                    }
                    Err(e) => {
                        shared.census_errors.fetch_add(1, Ordering::Relaxed);
                        eprintln!(
                            "tcpdoctor exporter: census failed (the previous one is served): {e}"
                        );
                    }
                }
            }
        })
        .map_err(Error::Thread)?;
    match rx.recv() {
        Ok(Ok(shared)) => Ok((shared, handle)),
        Ok(Err(e)) => {
            let _ = handle.join();
            Err(e)
        }
        Err(_) => {
            let _ = handle.join();
            Err(Error::Thread(std::io::Error::other(
                "the collector thread ended before its first census",
            )))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_collection_of_this_namespace_serves_its_socket_states_and_budgets() {
        // A listener with one connection waiting in its accept queue.
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let _c = std::net::TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let mut carry = Carry::default();
        let first = collect(&mut carry, &counters::snapshot, 20).unwrap();
        let second = collect(&mut carry, &counters::snapshot, 20).unwrap();
        let names: Vec<&str> = first.families.iter().map(|f| f.name.as_str()).collect();
        for want in [
            "tcpdoctor_sockets",
            "tcpdoctor_listener_accept_queue",
            "tcpdoctor_ephemeral_ports",
            "tcpdoctor_syn_give_up_seconds",
            "tcpdoctor_rto_floor_seconds",
            "tcpdoctor_findings",
        ] {
            assert!(names.contains(&want), "{want} missing: {names:?}");
        }
        let me = l.local_addr().unwrap().to_string();
        let q = second
            .families
            .iter()
            .find(|f| f.name == "tcpdoctor_listener_accept_queue")
            .unwrap();
        let mine = q
            .samples
            .iter()
            .find(|s| s.labels[0].1 == me)
            .or_else(|| q.samples.iter().find(|s| s.labels[0].1 == metrics::OTHER));
        assert!(mine.is_some(), "{q:?}");
        // The first collection has no window; the second compares with the first.
        let w = |c: &Collected| {
            c.families
                .iter()
                .find(|f| f.name == "tcpdoctor_findings_window_seconds")
                .unwrap()
                .samples
                .len()
        };
        assert_eq!((w(&first), w(&second)), (0, 1));
        // The previous census is kept without its TIME_WAIT entries.
        assert!(carry
            .census
            .as_ref()
            .unwrap()
            .sockets
            .iter()
            .all(|s| s.state != TcpState::TimeWait));
    }
}
