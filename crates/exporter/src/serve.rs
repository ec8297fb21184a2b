//! The HTTP side: `GET /metrics` in the Prometheus text format, or OpenMetrics when the
//! `Accept` header prefers it; `GET /` says where the metrics are; anything else is 404.
//!
//! One tokio runtime on the calling thread accepts connections (HTTP/1.1, axum). Each scrape
//! is rendered on tokio's blocking pool, which reads the kernel counter files; at most
//! [`crate::Config::max_scrapes`] render at once and a scrape beyond that is answered 503
//! with `Retry-After: 1` at once instead of queueing behind the others.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, UNIX_EPOCH};

use axum::extract::State;
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use tcpdoctor_report::prometheus::{self, Format};
use tokio::sync::Semaphore;

use crate::metrics::{self, Trace};
use crate::{collect, tracing, Config, Error};

/// Everything a scrape reads.
pub struct App {
    pub collector: Arc<collect::Shared>,
    /// `None`: tracing was not asked for (`--no-trace`).
    pub trace: Option<tracing::Shared>,
    pub scrapes: Arc<Semaphore>,
    pub scrapes_rejected: AtomicU64,
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
    let Ok(permit) = Arc::clone(&app.scrapes).try_acquire_owned() else {
        app.scrapes_rejected.fetch_add(1, Ordering::Relaxed);
        return (
            StatusCode::SERVICE_UNAVAILABLE,
            [(header::RETRY_AFTER, "1")],
            "too many scrapes at once\n",
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
                scrapes_rejected: AtomicU64::new(0),
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
        let result = rt.block_on(async move {
            let listener = tokio::net::TcpListener::from_std(self.listener)?;
            let router = Router::new()
                .route("/metrics", get(metrics))
                .route("/", get(index))
                .with_state(app);
            axum::serve(listener, router)
                .with_graceful_shutdown(async move {
                    while !stop.load(Ordering::SeqCst) {
                        tokio::time::sleep(Duration::from_millis(100)).await;
                    }
                })
                .await
        });
        stop.store(true, Ordering::SeqCst);
        rt.shutdown_timeout(Duration::from_secs(1));
        for t in self.threads {
            let _ = t.join();
        }
        result.map_err(Error::Serve)
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
            version: "0.1.0".into(),
            commit: "abc".into(),
        };
        let (collector, _h) = collect::start(&cfg, &STOP).unwrap();
        Arc::new(App {
            collector,
            trace: None,
            scrapes: Arc::new(Semaphore::new(scrapes)),
            scrapes_rejected: AtomicU64::new(0),
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
    fn a_scrape_beyond_the_cap_is_refused_at_once_and_counted() {
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
