//! The HTTP side: `GET /metrics` in the Prometheus text format, or OpenMetrics when the
//! `Accept` header prefers it; `GET /` says where the metrics are; anything else is 404.
//!
//! The exporter is a network server without authentication, so it defends its descriptors
//! and its CPU from clients that never finish (issue 24):
//! - its own accept loop serves each connection with hyper's HTTP/1.1 (axum's router as the
//!   service) and a [`HEADER_TIMEOUT`]: a client that does not send a whole request head in
//!   that time, whether it trickles bytes or idles on a kept-alive connection, is closed;
//! - at most [`connection_cap`] connections are held, well under the process's descriptor
//!   limit (the census needs descriptors too); a new connection beyond the cap closes the
//!   oldest idle one (no request in progress), or is itself closed when none is idle.
//!   Accepting never stops, so a scrape always gets in;
//! - at most [`crate::Config::max_scrapes`] scrapes render at once (on tokio's blocking pool,
//!   which reads the kernel counter files); the others wait their turn in order for up to
//!   [`SCRAPE_WAIT`], then get 503 with `Retry-After: 1`. A render takes about 2 ms, so a flood
//!   of clients delays a scrape by a few milliseconds per client ahead of it instead of
//!   refusing it.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, UNIX_EPOCH};

use axum::extract::State;
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use hyper_util::rt::{TokioIo, TokioTimer};
use tcpdoctor_report::prometheus::{self, Format};
use tokio::sync::Semaphore;

use crate::metrics::{self, Trace};
use crate::{collect, tracing, Config, Error};

/// How long a client may take to send a request head, and how long a kept-alive connection
/// may idle before its next request. Prometheus sends its request at once; a scraper that
/// keeps its connection between scrapes every 15 s reconnects, which costs a handshake.
pub const HEADER_TIMEOUT: Duration = Duration::from_secs(10);

/// How long a scrape waits for its turn to render before it is answered 503.
pub const SCRAPE_WAIT: Duration = Duration::from_secs(2);

/// Connections held at most, whatever the descriptor limit.
pub const MAX_CONNECTIONS: usize = 256;

/// Descriptors kept for everything but HTTP connections: the census's netlink sockets and
/// /proc reads, the counter files, the eBPF programs and maps, the runtime.
pub const RESERVED_DESCRIPTORS: usize = 128;

/// The connection cap under the process's open-file limit (`RLIMIT_NOFILE`, soft): half of
/// what is left after [`RESERVED_DESCRIPTORS`], at most [`MAX_CONNECTIONS`], at least 8.
/// Under systemd's default of 1,024 descriptors: 256.
pub fn connection_cap() -> usize {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes into the struct we own.
    let soft = if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) } == 0 {
        usize::try_from(lim.rlim_cur).unwrap_or(usize::MAX)
    } else {
        1024
    };
    cap_for(soft)
}

fn cap_for(soft_limit: usize) -> usize {
    (soft_limit.saturating_sub(RESERVED_DESCRIPTORS) / 2).clamp(8, MAX_CONNECTIONS)
}

/// Everything a scrape reads.
pub struct App {
    pub collector: Arc<collect::Shared>,
    /// `None`: tracing was not asked for (`--no-trace`).
    pub trace: Option<tracing::Shared>,
    pub scrapes: Arc<Semaphore>,
    /// See [`Config::header_timeout`].
    pub header_timeout: Duration,
    /// How long a scrape waits for a render slot ([`SCRAPE_WAIT`]).
    pub scrape_wait: Duration,
    pub scrapes_rejected: AtomicU64,
    /// Connections closed to stay under the cap (the oldest idle, or the newcomer).
    pub connections_dropped: AtomicU64,
    pub counter_read_errors: AtomicU64,
    pub version: String,
    pub commit: String,
}

impl App {
    /// The whole exposition, now.
    pub fn render(&self, format: Format) -> String {
        let c = self.collector.latest();
        let mut fams = Vec::with_capacity(c.families.len() + 200);
        match self.collector.read_counters() {
            Ok(s) => fams.extend(metrics::kernel_counters(&s)),
            Err(_) => {
                self.counter_read_errors.fetch_add(1, Ordering::Relaxed);
            }
        }
        fams.extend(c.families.iter().cloned());
        fams.extend(metrics::meta(&metrics::Meta {
            census_age: c.finished.elapsed(),
            census_timestamp_s: c
                .finished_wall
                .duration_since(UNIX_EPOCH)
                .unwrap_or_default()
                .as_secs_f64(),
            censuses: self.collector.censuses.load(Ordering::Relaxed),
            census_errors: self.collector.census_errors.load(Ordering::Relaxed),
            scrapes_rejected: self.scrapes_rejected.load(Ordering::Relaxed),
            connections_dropped: self.connections_dropped.load(Ordering::Relaxed),
            counter_read_errors: self.counter_read_errors.load(Ordering::Relaxed),
            version: &self.version,
            commit: &self.commit,
        }));
        let trace = match &self.trace {
            Some(t) => tracing::read(t),
            None => Trace {
                unavailable: Some("turned off with --no-trace".into()),
                ..Trace::default()
            },
        };
        fams.extend(metrics::trace(&trace));
        let mut out = String::with_capacity(64 * 1024);
        // Writing to a String cannot fail.
        let _ = prometheus::write(&mut out, &fams, format);
        out
    }
}

/// `GET /metrics`.
pub async fn metrics(State(app): State<Arc<App>>, headers: HeaderMap) -> Response {
    let wait = tokio::time::timeout(app.scrape_wait, Arc::clone(&app.scrapes).acquire_owned());
    let Ok(Ok(permit)) = wait.await else {
        app.scrapes_rejected.fetch_add(1, Ordering::Relaxed);
        return (
            StatusCode::SERVICE_UNAVAILABLE,
            [(header::RETRY_AFTER, "1")],
            "too many scrapes waiting\n",
        )
            .into_response();
    };
    let format = Format::negotiate(headers.get(header::ACCEPT).and_then(|v| v.to_str().ok()));
    let a = Arc::clone(&app);
    let body = tokio::task::spawn_blocking(move || {
        let _permit = permit;
        a.render(format)
    })
    .await;
    match body {
        Ok(b) => ([(header::CONTENT_TYPE, format.content_type())], b).into_response(),
        Err(_) => (StatusCode::INTERNAL_SERVER_ERROR, "rendering failed\n").into_response(),
    }
}

async fn index() -> &'static str {
    "tcpdoctor exporter: metrics at /metrics\n"
}

/// A started exporter: listening, its first census complete.
pub struct Exporter {
    listener: std::net::TcpListener,
    app: Arc<App>,
    stop: &'static AtomicBool,
    threads: Vec<std::thread::JoinHandle<()>>,
}

impl Exporter {
    /// Binds `config.listen`, takes the first census (in `config.netns`), starts tracing when
    /// asked. Returns errors of any of these; nothing is served yet.
    pub fn start(config: &Config, stop: &'static AtomicBool) -> Result<Exporter, Error> {
        let listener =
            std::net::TcpListener::bind(config.listen).map_err(|source| Error::Listen {
                addr: config.listen,
                source,
            })?;
        listener
            .set_nonblocking(true)
            .map_err(|source| Error::Listen {
                addr: config.listen,
                source,
            })?;
        let (collector, h) = collect::start(config, stop)?;
        let mut threads = vec![h];
        let trace = if config.trace {
            let (t, h) = tracing::start(config.netns.clone(), stop);
            threads.extend(h);
            Some(t)
        } else {
            None
        };
        Ok(Exporter {
            listener,
            app: Arc::new(App {
                collector,
                trace,
                scrapes: Arc::new(Semaphore::new(config.max_scrapes)),
                header_timeout: config.header_timeout,
                scrape_wait: SCRAPE_WAIT,
                scrapes_rejected: AtomicU64::new(0),
                connections_dropped: AtomicU64::new(0),
                counter_read_errors: AtomicU64::new(0),
                version: config.version.clone(),
                commit: config.commit.clone(),
            }),
            stop,
            threads,
        })
    }

    /// The address it listens on.
    pub fn local_addr(&self) -> std::io::Result<std::net::SocketAddr> {
        self.listener.local_addr()
    }

    /// What scrapes read (for a first look before serving).
    pub fn app(&self) -> &Arc<App> {
        &self.app
    }

    /// Serves until the stop flag is set, then stops the threads and returns.
    pub fn serve(self, max_scrapes: usize) -> Result<(), Error> {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_io()
            .enable_time()
            .max_blocking_threads(max_scrapes.max(1))
            .build()
            .map_err(Error::Serve)?;
        let stop = self.stop;
        let app = Arc::clone(&self.app);
        let cap = connection_cap();
        let result = rt.block_on(async move {
            let listener = tokio::net::TcpListener::from_std(self.listener)?;
            let router = Router::new()
                .route("/metrics", get(metrics))
                .route("/", get(index))
                .with_state(Arc::clone(&app));
            accept_loop(listener, router, app, cap, stop).await;
            Ok::<(), std::io::Error>(())
        });
        stop.store(true, Ordering::SeqCst);
        rt.shutdown_timeout(Duration::from_secs(1));
        for t in self.threads {
            let _ = t.join();
        }
        result.map_err(Error::Serve)
    }
}

/// The connections being served, oldest first (ids grow with each accept).
#[derive(Default)]
struct Connections {
    next: u64,
    live: BTreeMap<u64, Conn>,
}

struct Conn {
    /// A request of this connection is being answered.
    busy: Arc<AtomicBool>,
    abort: tokio::task::AbortHandle,
}

impl Connections {
    /// Makes room for one more under `cap`: closes the oldest idle connection when full.
    /// False when full of busy connections (the newcomer is then closed instead).
    fn make_room(&mut self, cap: usize) -> bool {
        if self.live.len() < cap {
            return true;
        }
        let oldest_idle = self
            .live
            .iter()
            .find(|(_, c)| !c.busy.load(Ordering::Relaxed))
            .map(|(id, _)| *id);
        match oldest_idle.and_then(|id| self.live.remove(&id)) {
            Some(c) => {
                c.abort.abort();
                true
            }
            None => false,
        }
    }
}

fn lock(c: &Mutex<Connections>) -> std::sync::MutexGuard<'_, Connections> {
    match c.lock() {
        Ok(g) => g,
        Err(p) => p.into_inner(),
    }
}

/// Accepts connections until `stop`, each served on its own task under the cap.
async fn accept_loop(
    listener: tokio::net::TcpListener,
    router: Router,
    app: Arc<App>,
    cap: usize,
    stop: &'static AtomicBool,
) {
    let conns: Arc<Mutex<Connections>> = Arc::default();
    while !stop.load(Ordering::SeqCst) {
        let accepted = tokio::time::timeout(Duration::from_millis(100), listener.accept()).await;
        let stream = match accepted {
            Err(_) => continue,
            Ok(Ok((stream, _))) => stream,
            Ok(Err(_)) => {
                // Out of descriptors (EMFILE, ENFILE) or a connection reset before accept:
                // free the oldest idle connection and go on.
                {
                    let mut c = lock(&conns);
                    let n = c.live.len();
                    if n > 0 && c.make_room(n) {
                        app.connections_dropped.fetch_add(1, Ordering::Relaxed);
                    }
                }
                tokio::time::sleep(Duration::from_millis(10)).await;
                continue;
            }
        };
        let mut c = lock(&conns);
        let before = c.live.len();
        if !c.make_room(cap) {
            app.connections_dropped.fetch_add(1, Ordering::Relaxed);
            continue; // the newcomer is dropped, and so closed
        }
        if c.live.len() < before {
            app.connections_dropped.fetch_add(1, Ordering::Relaxed);
        }
        let id = c.next;
        c.next += 1;
        let busy = Arc::new(AtomicBool::new(false));
        let svc_busy = Arc::clone(&busy);
        let r = router.clone();
        let service = hyper::service::service_fn(move |req| {
            let mut r = r.clone();
            let busy = Arc::clone(&svc_busy);
            async move {
                busy.store(true, Ordering::Relaxed);
                let resp = tower_service::Service::call(&mut r, req).await;
                busy.store(false, Ordering::Relaxed);
                resp
            }
        });
        let mine = Arc::clone(&conns);
        let header_timeout = app.header_timeout;
        let task = tokio::spawn(async move {
            let mut http = hyper::server::conn::http1::Builder::new();
            http.timer(TokioTimer::new())
                .header_read_timeout(header_timeout)
                .keep_alive(true);
            let _ = http.serve_connection(TokioIo::new(stream), service).await;
            lock(&mine).live.remove(&id);
        });
        c.live.insert(
            id,
            Conn {
                busy,
                abort: task.abort_handle(),
            },
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn app(scrapes: usize) -> Arc<App> {
        static STOP: AtomicBool = AtomicBool::new(false);
        let cfg = Config {
            listen: "127.0.0.1:0".parse().unwrap(),
            interval: Duration::from_secs(3600),
            top: 5,
            netns: None,
            trace: false,
            max_scrapes: scrapes,
            header_timeout: HEADER_TIMEOUT,
            version: "0.1.0".into(),
            commit: "abc".into(),
        };
        let (collector, _h) = collect::start(&cfg, &STOP).unwrap();
        Arc::new(App {
            collector,
            trace: None,
            scrapes: Arc::new(Semaphore::new(scrapes)),
            header_timeout: HEADER_TIMEOUT,
            scrape_wait: Duration::from_millis(50),
            scrapes_rejected: AtomicU64::new(0),
            connections_dropped: AtomicU64::new(0),
            counter_read_errors: AtomicU64::new(0),
            version: cfg.version,
            commit: cfg.commit,
        })
    }

    fn rt() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap()
    }

    #[test]
    fn a_scrape_that_waits_too_long_for_its_turn_is_refused_and_counted() {
        let a = app(1);
        let held = Arc::clone(&a.scrapes).try_acquire_owned().unwrap();
        let r = rt().block_on(metrics(State(Arc::clone(&a)), HeaderMap::new()));
        assert_eq!(r.status(), StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(a.scrapes_rejected.load(Ordering::Relaxed), 1);
        drop(held);
        let r = rt().block_on(metrics(State(Arc::clone(&a)), HeaderMap::new()));
        assert_eq!(r.status(), StatusCode::OK);
        let text = a.render(Format::Text);
        assert!(
            text.contains("tcpdoctor_scrapes_rejected_total 1\n"),
            "{text}"
        );
    }

    #[test]
    fn accept_header_chooses_the_format() {
        let a = app(2);
        let mut h = HeaderMap::new();
        h.insert(
            header::ACCEPT,
            "application/openmetrics-text;version=1.0.0,text/plain;version=0.0.4;q=0.5"
                .parse()
                .unwrap(),
        );
        let r = rt().block_on(metrics(State(Arc::clone(&a)), h));
        assert_eq!(
            r.headers()[header::CONTENT_TYPE],
            Format::OpenMetrics.content_type()
        );
        let r = rt().block_on(metrics(State(a), HeaderMap::new()));
        assert_eq!(
            r.headers()[header::CONTENT_TYPE],
            Format::Text.content_type()
        );
        let om = app(1).render(Format::OpenMetrics);
        assert!(om.ends_with("# EOF\n"));
        assert!(om.contains("tcpdoctor_trace_available{reason=\"turned off with --no-trace\"} 0"));
    }
}
