//! `tcpdoctor exporter`: the TCP health of a host (or of one network namespace) as
//! Prometheus metrics on `/metrics`.
//!
//! ```text
//!   collector thread (in --netns)      trace thread (optional)      HTTP (main thread)
//!   doctor's diagnosis, back to back,  polls the BPF ring buffer    GET /metrics:
//!   one --interval window each:        every 50 ms, publishes the     read the kernel counters now
//!     settings, census, counters,      counts                         + the last complete census
//!     window, census, counters,                                       + trace counts
//!     audit, findings (no probe)                                      -> text 0.0.4 or OpenMetrics
//!   -> publishes one Collected
//! ```
//!
//! A scrape never waits for a census: the collector publishes each complete census as an
//! immutable [`collect::Collected`] behind an `Arc`, and a scrape takes the latest one (its age
//! is a metric). The kernel counters are read at scrape time from files the collector opened
//! inside the namespace (a `/proc/thread-self/net` file stays bound to the namespace it was
//! opened in). Concurrent scrapes are capped ([`Config::max_scrapes`]); the excess is answered
//! 503 at once rather than queued.
//!
//! What it must not do: change anything on the host, generate traffic (doctor's loopback
//! self-probe is skipped: up to 1000 connections per run, each leaving a TIME_WAIT socket for
//! 60 s, would load the host it watches and show in its own census), or let the number of
//! series grow with the number of sockets.

pub mod collect;
pub mod metrics;
pub mod privileges;
pub mod serve;
pub mod tracing;

use std::net::SocketAddr;
use std::time::Duration;

/// Where and how to export.
#[derive(Clone, Debug)]
pub struct Config {
    pub listen: SocketAddr,
    /// Time between censuses.
    pub interval: Duration,
    /// Destinations and listeners shown one by one; the rest are summed.
    pub top: usize,
    /// Watch this network namespace (`/run/netns/NAME`) instead of the exporter's own.
    pub netns: Option<String>,
    /// Start eBPF tracing when the host allows it.
    pub trace: bool,
    /// Scrapes rendered at the same time; more wait their turn (up to 2 s), then get 503.
    pub max_scrapes: usize,
    /// How long a client may take to send a request head, or idle between requests
    /// ([`serve::HEADER_TIMEOUT`] by default).
    pub header_timeout: Duration,
    /// tcpdoctor's version and git commit, for `tcpdoctor_exporter_build_info`.
    pub version: String,
    pub commit: String,
}

/// The default address: loopback only. Port 9977 is outside Linux's default ephemeral range
/// (32768-60999), so connect() never takes it.
pub const DEFAULT_LISTEN: &str = "127.0.0.1:9977";

/// At most this many scrapes are served at once.
pub const MAX_SCRAPES: usize = 4;

/// Errors of the exporter. Each names what failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    #[error("cannot listen on {addr}: {source}")]
    Listen {
        addr: SocketAddr,
        source: std::io::Error,
    },
    #[error("network namespace '{name}' (/run/netns/{name}): {source}")]
    Netns {
        name: String,
        source: std::io::Error,
    },
    #[error(transparent)]
    Diagnosis(#[from] tcpdoctor_doctor::Error),
    /// The diagnosis ran but its census did not (the reason it gives).
    #[error("socket census: {0}")]
    NoCensus(String),
    #[error("kernel counters: {0}")]
    Counters(#[from] tcpdoctor_host::Error),
    #[error("starting the collector thread: {0}")]
    Thread(std::io::Error),
    /// Ctrl-C or SIGTERM arrived before the first census completed: nothing was served.
    #[error("stopped before the first census completed: nothing was served")]
    StoppedAtStart,
    #[error(transparent)]
    Privileges(#[from] privileges::Error),
    #[error("HTTP server: {0}")]
    Serve(std::io::Error),
}
