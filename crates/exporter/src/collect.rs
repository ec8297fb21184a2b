//! The collector: one thread that runs doctor's diagnosis (`tcpdoctor_doctor::diagnose`,
//! without its self-probe) back to back, one window per interval, and publishes each result
//! for scrapes to serve.
//!
//! Each diagnosis takes a census at the start and at the end of its window, reads the
//! counters at both ends, audits the settings with the listeners' backlogs, judges the
//! counter delta against the RTO floor and merges the live findings: the findings served are
//! exactly what `tcpdoctor doctor --quick --window <interval>` would report at that moment,
//! and the census gauges are those of the closing census.
//!
//! The thread enters the namespace once (`setns(CLONE_NEWNET)` moves only the calling
//! thread), so everything the diagnosis reads is the namespace's: the sock_diag dump, the
//! sysctls under `/proc/sys/net`, the counters under `/proc/thread-self/net`, and the
//! `ip route` it runs for route `rto_min` (a child inherits its thread's namespace). The
//! counter files the collector opens stay bound to the namespace, so the HTTP thread reads the
//! namespace's counters through them at scrape time without entering it.
//!
//! A failed census is counted and the previous result stays served; its age grows, which
//! `tcpdoctor_census_age_seconds` shows.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{mpsc, Arc, Mutex, RwLock};
use std::time::{Duration, Instant, SystemTime};

use tcpdoctor_doctor::Probe;
use tcpdoctor_host::counters::{self, Sampler, Snapshot};
use tcpdoctor_model::Finding;
use tcpdoctor_report::prometheus::Family;

use crate::{metrics, Config, Error};

/// The first diagnosis is short, so that the exporter serves soon after it starts.
const FIRST_WINDOW: Duration = Duration::from_secs(1);

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
    tcpdoctor_host::netns::enter(name).map_err(|source| Error::Netns {
        name: name.to_string(),
        source,
    })
}

/// Why no census came out of a diagnosis.
fn no_census(r: &tcpdoctor_doctor::Body) -> String {
    r.skipped.iter().find(|s| s.step == "sockets").map_or_else(
        || "the census did not run".to_string(),
        |s| s.reason.clone(),
    )
}

/// One diagnosis of `window` and its families. `None` when stopped meanwhile.
fn collect(
    netns: &Option<String>,
    window: Duration,
    top: usize,
    stop: &AtomicBool,
) -> Result<Option<Collected>, Error> {
    let cfg = tcpdoctor_doctor::Config {
        window,
        probe: Probe::Skip("not run by the exporter: it would load the host it watches".into()),
        // The exporter keeps its own trace session (its eBPF counts); one is enough.
        trace: tcpdoctor_doctor::TraceMode::Off("the exporter traces on its own".into()),
        netns: netns.clone(),
    };
    let report = tcpdoctor_doctor::diagnose(&cfg, stop, &|_| {})?;
    if report.interrupted {
        return Ok(None);
    }
    let b = &report.body;
    let Some(summary) = &b.sockets else {
        return Err(Error::NoCensus(no_census(b)));
    };
    let census_us = b
        .steps
        .iter()
        .find(|s| s.step == "sockets" && s.ran)
        .map_or(0, |s| s.duration_us);
    let families = metrics::census(
        &metrics::Census {
            summary,
            inputs: b.settings.as_ref().map(|a| &a.settings),
            findings: &report.findings,
            duration: Duration::from_micros(census_us),
            window: Some(Duration::from_millis(b.window_ms)),
        },
        top,
    );
    Ok(Some(Collected {
        families,
        findings: report.findings,
        finished: Instant::now(),
        finished_wall: SystemTime::now(),
    }))
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
                let c = collect(&netns, FIRST_WINDOW.min(interval), top, stop)?;
                Ok::<_, Error>((Mutex::new(sampler), c))
            })();
            let (counters, c) = match first {
                Ok((s, Some(c))) => (s, c),
                Ok((_, None)) => {
                    let _ = tx.send(Err(Error::StoppedAtStart));
                    return;
                }
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
            // Diagnoses back to back: each window is one interval, so a census is at most
            // one interval (plus the census itself) old when served.
            while !stop.load(Ordering::SeqCst) {
                match collect(&netns, interval, top, stop) {
                    Ok(Some(c)) => {
                        shared.publish(c);
                        shared.censuses.fetch_add(1, Ordering::Relaxed);
                    }
                    Ok(None) => break,
                    Err(e) => {
                        shared.census_errors.fetch_add(1, Ordering::Relaxed);
                        eprintln!(
                            "tcpdoctor exporter: census failed (the previous one is served): {e}"
                        );
                        // Do not spin on a persistent failure.
                        let until = Instant::now() + interval;
                        while Instant::now() < until && !stop.load(Ordering::SeqCst) {
                            std::thread::sleep(Duration::from_millis(100));
                        }
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
            // The thread ended without a word: it panicked. Say with what.
            let why = match handle.join() {
                Err(payload) => payload
                    .downcast_ref::<&str>()
                    .map(|s| s.to_string())
                    .or_else(|| payload.downcast_ref::<String>().cloned())
                    .unwrap_or_else(|| "a panic without a message".into()),
                Ok(()) => "no reason given".into(),
            };
            Err(Error::Thread(std::io::Error::other(format!(
                "the collector thread ended before its first census: {why}"
            ))))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_collection_of_this_namespace_serves_its_socket_states_budgets_and_findings() {
        // A listener with one connection waiting in its accept queue.
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let _c = std::net::TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let stop = AtomicBool::new(false);
        let c = collect(&None, Duration::from_millis(200), 1000, &stop)
            .unwrap()
            .unwrap();
        let names: Vec<&str> = c.families.iter().map(|f| f.name.as_str()).collect();
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
        let q = c
            .families
            .iter()
            .find(|f| f.name == "tcpdoctor_listener_accept_queue")
            .unwrap();
        let mine = q.samples.iter().find(|s| s.labels[0].1 == me).unwrap();
        assert_eq!(mine.value.as_f64(), 1.0);
        let w = c
            .families
            .iter()
            .find(|f| f.name == "tcpdoctor_findings_window_seconds")
            .unwrap();
        assert!(w.samples[0].value.as_f64() >= 0.2);
        // The settings audit ran: its informational findings (budget, ladder) are there.
        assert!(!c.findings.is_empty());
        // Stopped: nothing is published.
        stop.store(true, Ordering::SeqCst);
        assert!(collect(&None, Duration::from_secs(5), 10, &stop)
            .unwrap()
            .is_none());
    }
}
