//! Load engines (`connect`, `crr`, `rr`, `http`), an embedded TCP/HTTP server, and the spike
//! classifier behind `tcpdoctor probe`.
//!
//! Owns: opening and timing connections, recording one [`Record`] per connection or request,
//! the statistics computed from those records ([`stats`]), and naming the cause of every slow
//! connection ([`classify`]) from its timer signature, corroborated by kernel counters read
//! before and after the run. Must not print: the `cli` crate renders [`ProbeResult`].
//!
//! # API
//!
//! ```no_run
//! use std::sync::atomic::AtomicBool;
//! use std::time::Duration;
//! use tcpdoctor_probe::{Config, Mode, run};
//!
//! // No target: an embedded server on 127.0.0.1 (ephemeral port), crr mode.
//! let cfg = Config { duration: Duration::from_secs(2), ..Config::default() };
//! let stop = AtomicBool::new(false);
//! let result = run(&cfg, &stop, &|_progress| {}).unwrap();
//! println!("{} connections, {} findings", result.summary.requests_ok, result.findings.len());
//! ```
//!
//! * [`run`] blocks until `count` connections/requests are done, `duration` has passed, or
//!   `stop` is set (then [`ProbeResult::interrupted`] is true and the result holds everything
//!   measured so far). At the end of `duration` the requests still in flight are cut at once
//!   and recorded as [`Outcome::Cut`] with the phase they were in and how long they had
//!   waited, so a run ends within a few milliseconds of its duration. Each worker thread is a closed loop (or open loop with `rate`, where
//!   latency counts from the scheduled start: coordinated-omission correction).
//! * [`server::Server::start`] runs the embedded responder (TCP request/reply or minimal
//!   HTTP/1.1 with keep-alive) on a pool of threads blocked in `accept()`; the lab and tests
//!   run it inside namespaces via `tcpdoctor probe --serve ADDR:PORT`.
//! * Recording ([`record`]) is separate from statistics ([`stats`]) and classification
//!   ([`classify`]); [`classify::classify`] and [`findings::build`] are pure and take timings
//!   and counter deltas as arguments, so tests inject them.
//!
//! Namespaces: [`run`] measures in the network namespace of the calling thread (workers
//! inherit it; counters come from `/proc/thread-self/net`, sysctls from `/proc/sys/net`), so
//! a caller may `setns()` a thread into a namespace and call [`run`] from it.
//!
//! Timeouts (connect, reply) and Ctrl-C are enforced by a watchdog in [`run`] that shuts the
//! in-flight socket down; the hot path makes no extra syscalls for them.

pub mod classify;
mod engine;
pub mod findings;
pub mod html;
pub mod http;
mod judge;
pub mod ladder;
mod readings;
pub mod record;
pub mod render;
pub mod server;
pub mod split;
pub mod stats;
mod time_findings;
pub mod tls;

use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use tcpdoctor_model::PortRange;

pub use classify::SpikeCause;
pub use engine::run;
pub use judge::{judge, Around};
pub use readings::SchedStat;
pub use record::{ErrorKind, Outcome, Phase, Record};
pub use stats::Summary;

/// What each worker does per iteration.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case", tag = "mode")]
pub enum Mode {
    /// connect(), close(): measures the handshake only.
    Connect,
    /// connect, send a request, read the reply, close (one connection per request).
    Crr,
    /// One persistent connection per worker, request/reply on it.
    Rr,
    /// HTTP/1.1 GET. `keepalive` reuses connections; without it every request sends
    /// `Connection: close` and opens a new connection. An `https://` URL speaks TLS;
    /// `insecure` accepts any server certificate (self-signed test servers).
    Http {
        url: http::Url,
        keepalive: bool,
        #[serde(skip_serializing_if = "std::ops::Not::not")]
        insecure: bool,
    },
}

impl Mode {
    pub fn name(&self) -> &'static str {
        match self {
            Mode::Connect => "connect",
            Mode::Crr => "crr",
            Mode::Rr => "rr",
            Mode::Http { .. } => "http",
        }
    }

    /// True when each request opens its own connection.
    pub fn connection_per_request(&self) -> bool {
        match self {
            Mode::Connect | Mode::Crr => true,
            Mode::Rr => false,
            Mode::Http { keepalive, .. } => !keepalive,
        }
    }
}

/// Which side calls close() first, and so which side holds TIME_WAIT for 60 s.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CloseFirst {
    /// The client closes after reading the reply; the client holds TIME_WAIT (and spends an
    /// ephemeral port on it).
    #[default]
    Client,
    /// The server closes after replying; the client waits for its FIN, then closes.
    Server,
}

impl std::str::FromStr for CloseFirst {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "client" => Ok(CloseFirst::Client),
            "server" => Ok(CloseFirst::Server),
            _ => Err(format!("'{s}' is not 'client' or 'server'")),
        }
    }
}

/// Everything a probe run needs. `Config::default()` is the default main job: embedded server
/// on 127.0.0.1, crr, 2 workers, 10 s or 1,000,000 connections, whichever comes first.
#[derive(Clone, Debug, Serialize)]
pub struct Config {
    /// Server to probe; `None` starts the embedded server on 127.0.0.1 (ephemeral port).
    pub target: Option<SocketAddr>,
    pub mode: Mode,
    /// Worker threads, each with at most one connection in flight.
    pub concurrency: usize,
    /// Upper bound on run time.
    pub duration: Duration,
    /// Upper bound on connections (or requests in rr / keep-alive http).
    pub count: u64,
    /// Open loop: start this many requests per second in total, and count latency from the
    /// scheduled start (coordinated-omission correction). `None`: closed loop.
    pub rate_per_s: Option<f64>,
    /// SO_LINGER {on, 0}: close() sends RST instead of FIN, no TIME_WAIT (a client that
    /// recycles ports this way can meet stale ACKs of its own earlier connections).
    pub linger0: bool,
    /// TCP_NODELAY on client sockets (and the embedded server's).
    pub nodelay: bool,
    pub close_first: CloseFirst,
    /// Source address to bind (port chosen at connect, IP_BIND_ADDRESS_NO_PORT).
    pub local_addr: Option<IpAddr>,
    /// Source ports bound explicitly, in turn, instead of the kernel's choice.
    pub local_ports: Option<PortRange>,
    pub request_bytes: usize,
    pub reply_bytes: usize,
    /// connect() longer than this is cut and recorded as `connect_timeout`.
    pub connect_timeout: Duration,
    /// Waiting longer than this for a reply (request sent to reply complete) cuts the
    /// connection and records `reply_timeout`.
    pub reply_timeout: Duration,
    /// Connections slower than this are classified (and those whose slow phase matches a
    /// kernel timer, whatever it is). `None`: 20 x the median total, within 5 ms..=200 ms
    /// ([`classify::default_threshold`]).
    pub spike_threshold: Option<Duration>,
    /// HTTP statuses counted as success (default 2xx); other answers are failures.
    pub expect_status: http::ExpectStatus,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            target: None,
            mode: Mode::Crr,
            concurrency: 2,
            duration: Duration::from_secs(10),
            count: 1_000_000,
            rate_per_s: None,
            linger0: false,
            nodelay: false,
            close_first: CloseFirst::Client,
            local_addr: None,
            local_ports: None,
            request_bytes: 64,
            reply_bytes: 64,
            connect_timeout: Duration::from_secs(10),
            reply_timeout: Duration::from_secs(10),
            spike_threshold: None,
            expect_status: http::ExpectStatus::default(),
        }
    }
}

/// Progress reported to the caller about every 100 ms.
#[derive(Clone, Copy, Debug)]
pub struct Progress {
    pub elapsed: Duration,
    /// Connections/requests finished (ok or not).
    pub done: u64,
    pub errors: u64,
    pub count: u64,
    pub duration: Duration,
}

/// What a run measured: the serializable summary, findings, and every raw record.
#[derive(Debug)]
pub struct ProbeResult {
    pub summary: Summary,
    pub findings: Vec<tcpdoctor_model::Finding>,
    /// Stopped by the caller's flag before its bounds: the summary covers what was measured.
    pub interrupted: bool,
    /// One per connection (or request on a reused connection), ordered by start.
    pub records: Vec<Record>,
    /// The slow connections and their causes (indexes into `records`).
    pub spikes: Vec<classify::Spike>,
}

/// Errors of a probe run. Per-connection failures are not errors: they are measured.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    #[error("embedded server on {addr}: {source}")]
    Serve {
        addr: SocketAddr,
        source: std::io::Error,
    },
    #[error("invalid probe configuration: {0}")]
    Config(String),
    #[error("local address {addr} is not usable on this host (bind failed)")]
    LocalAddr {
        addr: IpAddr,
        source: std::io::Error,
    },
    #[error(transparent)]
    Host(#[from] tcpdoctor_host::Error),
    #[error("cannot start a worker thread: {0}")]
    Thread(std::io::Error),
    /// The target's TLS setup failed before any request (no trusted roots, or a certificate
    /// the client does not trust).
    #[error("{url}: {detail}")]
    Tls { url: String, detail: String },
}
