//! The load engine: worker threads that open connections and write [`Record`]s, and the
//! supervising loop in [`run`] that reports progress, enforces timeouts, ends the run, and
//! hands the records to statistics and classification.
//!
//! Workers use plain blocking sockets: per connection `socket`, `connect`, `getsockname`,
//! `send`, `recv`, `close` (plus the options asked for). Timeouts cost no syscall on that
//! path: each worker publishes its in-flight socket and deadline in a slot, and the
//! supervisor (every 20 ms) shuts down a socket whose deadline passed, which wakes the
//! blocked connect()/recv(). Ctrl-C and the end of the run use the same mechanism: at the
//! end of the duration every request still in flight is cut at once (recorded as
//! [`Outcome::Cut`] with its phase and wait), so the run ends when it was asked to.

use std::io::{Read, Write};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::os::fd::{AsRawFd, RawFd};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use socket2::{Domain, Socket, Type};
use tcpdoctor_host::sysctl::TcpSettings;
use tcpdoctor_host::{counters, pressure, route, sockets};
use tcpdoctor_model::PortRange;

use crate::judge::{judge, Around};
use crate::readings::{cpu_some_sample, SchedStat};
use crate::record::{ErrorKind, Outcome, Phase, Record, DETAIL_AFTER};
use crate::server::{Protocol, Server, ServerConfig};
use crate::{http, split, stats, tls, CloseFirst, Config, Error, Mode, ProbeResult, Progress};
use tcpdoctor_host::tcp_info;

/// How often the supervisor wakes: timeout precision and progress cadence. It also wakes
/// at the end of the duration exactly.
const TICK: Duration = Duration::from_millis(20);
/// In-flight connections get this long to finish after the caller's stop flag (Ctrl-C).
const DRAIN_ON_STOP: Duration = Duration::from_millis(100);
/// Pause after a local-exhaustion error (EADDRNOTAVAIL, EADDRINUSE, EMFILE): retrying at
/// once fails again and would only spin.
const EXHAUSTION_BACKOFF: Duration = Duration::from_millis(1);

/// Why the supervisor cut a socket.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Cut {
    ConnectTimeout,
    ReplyTimeout,
    Stopped,
}

#[derive(Default)]
struct InFlight {
    fd: Option<RawFd>,
    deadline: Option<(Instant, Cut)>,
    cut: Option<Cut>,
}

#[repr(align(64))]
struct Slot {
    inflight: Mutex<InFlight>,
    done: AtomicU64,
    errors: AtomicU64,
}

struct Shared<'a> {
    cfg: &'a Config,
    target: SocketAddr,
    /// Request bytes: the crr/rr payload or the HTTP request.
    request: Vec<u8>,
    /// TLS client configuration for an https:// target.
    tls: Option<tls::Tls>,
    t0: Instant,
    end: Instant,
    tickets: AtomicU64,
    halt: AtomicBool,
    next_port: AtomicU64,
    slots: Vec<Slot>,
}

impl Shared<'_> {
    fn ns(&self, t: Instant) -> u64 {
        t.saturating_duration_since(self.t0).as_nanos() as u64
    }
}

fn validate(cfg: &Config) -> Result<(), Error> {
    let bad = |m: &str| Err(Error::Config(m.to_string()));
    if cfg.concurrency == 0 || cfg.concurrency > 10_000 {
        return bad("concurrency must be 1..=10000");
    }
    if cfg.count == 0 {
        return bad("count must be at least 1");
    }
    if cfg.duration.is_zero() {
        return bad("duration must be above 0");
    }
    if let Some(r) = cfg.rate_per_s {
        if !(r.is_finite() && r > 0.0) {
            return bad("rate must be a positive number per second");
        }
    }
    if matches!(cfg.mode, Mode::Crr | Mode::Rr) && (cfg.request_bytes == 0 || cfg.reply_bytes == 0)
    {
        return bad("request and reply sizes must be at least 1 byte in crr and rr modes");
    }
    if matches!(&cfg.mode, Mode::Http { url, .. } if url.tls) && cfg.target.is_none() {
        return bad("https needs a target: the embedded server speaks plain HTTP");
    }
    if let (Some(a), Some(t)) = (cfg.local_addr, cfg.target) {
        if a.is_ipv4() != t.is_ipv4() {
            return bad("local address and target are of different IP families");
        }
    }
    Ok(())
}

/// Runs a probe as configured. See the crate documentation.
pub fn run(
    cfg: &Config,
    stop: &AtomicBool,
    on_progress: &dyn Fn(Progress),
) -> Result<ProbeResult, Error> {
    validate(cfg)?;
    if let Some(addr) = cfg.local_addr {
        check_local_addr(addr)?;
    }
    let settings = TcpSettings::read()?;
    let server = match cfg.target {
        Some(_) => None,
        None => Some(start_embedded(cfg)?),
    };
    let target = cfg
        .target
        .or_else(|| server.as_ref().map(Server::local_addr))
        .ok_or_else(|| Error::Config("no target".into()))?;
    // The embedded server's URL is known only now: the report shows the one requested.
    let cfg = &effective(cfg, target);
    let route_rto_min = route::rto_min_for(target.ip()).ok().flatten();
    let request = match &cfg.mode {
        Mode::Http { url, keepalive, .. } => http::request(url, *keepalive),
        _ => vec![b'q'; cfg.request_bytes],
    };
    let tls = match &cfg.mode {
        Mode::Http { url, insecure, .. } if url.tls => {
            Some(check_tls(url, *insecure, target, cfg.connect_timeout)?)
        }
        _ => None,
    };

    let counters = counter_source();
    let before = counters.snapshot()?;
    // Host CPU contention over the same span (a reading error only loses this context).
    let cpu_before = pressure::cpu_some_total_us().ok().flatten();
    let Driven {
        records,
        elapsed,
        run_delay,
        cpu_some,
    } = drive(cfg, target, request, tls, stop, on_progress)?;
    let cpu_after = pressure::cpu_some_total_us().ok().flatten();
    let after = counters.snapshot()?;
    let ports_toward_target = records
        .iter()
        .any(|r| {
            matches!(r.outcome, Outcome::Error { kind, .. }
                if matches!(kind, ErrorKind::AddrNotAvail | ErrorKind::AddrInUse))
        })
        .then(|| {
            ports_toward(
                target,
                cfg.local_ports.unwrap_or(settings.ip_local_port_range),
            )
        })
        .flatten();
    let server_stats = server.map(Server::stop);
    let delta = after.delta_since(&before);
    let interrupted = stop.load(Ordering::SeqCst);

    let cpu_wait_us = cpu_before.zip(cpu_after).map(|(b, a)| a.saturating_sub(b));
    let cpu_waits = split::CpuWaits {
        workers_ns: run_delay,
        embedded_server_ns: server_stats
            .and_then(|s| s.run_delay_us)
            .map(|us| us.saturating_mul(1_000)),
        host_some_ns: cpu_wait_us.map(|us| us.saturating_mul(1_000)),
        host_some_series: cpu_some,
    };
    let around = Around {
        target,
        settings: &settings,
        route_rto_min,
        delta: &delta,
        elapsed,
        embedded_server: server_stats,
        ports_toward_target,
        cpu_wait_us,
        cpu_waits,
        interrupted,
    };
    Ok(judge(cfg, records, around))
}

/// Fails when `addr` cannot be bound here (not an address of this host, or of the caller's
/// network namespace): every connect would fail with EADDRNOTAVAIL, which is not port
/// exhaustion.
fn check_local_addr(addr: IpAddr) -> Result<(), Error> {
    let fail = |source| Error::LocalAddr { addr, source };
    let sock = Socket::new(
        Domain::for_address(SocketAddr::new(addr, 0)),
        Type::STREAM,
        None,
    )
    .map_err(fail)?;
    // Do not take a port for the test: IP_BIND_ADDRESS_NO_PORT defers it to connect().
    set_bind_no_port(&sock);
    sock.bind(&SocketAddr::new(addr, 0).into()).map_err(fail)
}

fn set_bind_no_port(sock: &Socket) {
    let one: libc::c_int = 1;
    // SAFETY: valid fd, option value of the documented type and size.
    unsafe {
        libc::setsockopt(
            sock.as_raw_fd(),
            libc::IPPROTO_IP,
            libc::IP_BIND_ADDRESS_NO_PORT,
            (&one as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
}

/// The TLS configuration for `url`, checked by one handshake before the run: a certificate
/// the client does not trust fails every request the same way, so it is a setup error
/// naming the target, not a measurement. Other failures (refused, timeouts, alerts) are
/// left to the run, which measures them.
fn check_tls(
    url: &http::Url,
    insecure: bool,
    target: SocketAddr,
    timeout: Duration,
) -> Result<tls::Tls, Error> {
    let fail = |detail: String| Error::Tls {
        url: url.to_string(),
        detail,
    };
    let t = tls::Tls::new(&url.host, insecure).map_err(fail)?;
    if insecure {
        return Ok(t);
    }
    if let Ok(mut s) = std::net::TcpStream::connect_timeout(&target, timeout) {
        let _ = s.set_read_timeout(Some(timeout));
        let _ = s.set_write_timeout(Some(timeout));
        if let Err(e) = t.handshake(&mut s) {
            if tls::is_certificate_error(&e) {
                return Err(fail(format!(
                    "certificate not trusted: {} (--insecure skips verification)",
                    e.get_ref().map_or(e.to_string(), |i| i.to_string())
                )));
            }
        }
    }
    Ok(t)
}

/// The configuration as run: in http mode without a target, the URL of the embedded server.
fn effective(cfg: &Config, target: SocketAddr) -> Config {
    let mut cfg = cfg.clone();
    if let (None, Mode::Http { url, .. }) = (cfg.target, &mut cfg.mode) {
        url.host = target.ip().to_string();
        url.port = target.port();
    }
    cfg
}

/// Sockets of this namespace toward `target` whose local port lies in `range`, after a run
/// whose connects failed for want of a local port: (TIME_WAIT, all states). `None` when
/// the census is not available.
fn ports_toward(target: SocketAddr, range: PortRange) -> Option<stats::PortsInUse> {
    let filter = sockets::Filter {
        addresses: vec![tcpdoctor_model::net::IpPrefix::host(target.ip())],
        ..sockets::Filter::default()
    };
    let census = sockets::census(&filter).ok()?;
    let mut used = stats::PortsInUse::default();
    for s in census.sockets.iter().filter(|s| {
        s.remote == target && s.local.port() >= range.low && s.local.port() <= range.high
    }) {
        used.total += 1;
        if s.state == sockets::TcpState::TimeWait {
            used.time_wait += 1;
        }
    }
    Some(used)
}

/// Counters of this thread's network namespace: `/proc/net` follows the process's main
/// thread, `/proc/thread-self/net` the caller (which may have entered a namespace with
/// setns(), as the lab does).
fn counter_source() -> counters::Source {
    let own = std::path::PathBuf::from("/proc/thread-self/net");
    if own.join("snmp").exists() {
        counters::Source { dir: own }
    } else {
        counters::Source::default()
    }
}

fn start_embedded(cfg: &Config) -> Result<Server, Error> {
    let protocol = match cfg.mode {
        Mode::Http { .. } => Protocol::Http {
            body_bytes: cfg.reply_bytes,
        },
        _ => Protocol::Tcp {
            request_bytes: cfg.request_bytes.max(1),
            reply_bytes: cfg.reply_bytes,
        },
    };
    let ip = match cfg.local_addr {
        Some(IpAddr::V6(_)) => IpAddr::V6(Ipv6Addr::LOCALHOST),
        _ => IpAddr::V4(Ipv4Addr::LOCALHOST),
    };
    let mut sc = ServerConfig::new(SocketAddr::new(ip, 0), protocol);
    sc.close_first = cfg.close_first;
    sc.threads = (cfg.concurrency + 2).max(4);
    sc.nodelay = true;
    Server::start(sc)
}

/// What a run recorded.
struct Driven {
    /// Every request, sorted by start.
    records: Vec<Record>,
    /// The time the run took.
    elapsed: Duration,
    /// How long each worker waited for a CPU (index = worker; `None` without schedstats).
    run_delay: Vec<Option<u64>>,
    /// The host's CPU pressure over the run, every tick: (ns since the start, "some" ns).
    cpu_some: Vec<(u64, u64)>,
}

/// Runs the workers under supervision.
fn drive(
    cfg: &Config,
    target: SocketAddr,
    request: Vec<u8>,
    tls: Option<tls::Tls>,
    stop: &AtomicBool,
    on_progress: &dyn Fn(Progress),
) -> Result<Driven, Error> {
    let t0 = Instant::now();
    let sh = Shared {
        cfg,
        target,
        request,
        tls,
        t0,
        end: t0 + cfg.duration,
        tickets: AtomicU64::new(0),
        halt: AtomicBool::new(false),
        next_port: AtomicU64::new(0),
        slots: (0..cfg.concurrency)
            .map(|_| Slot {
                inflight: Mutex::new(InFlight::default()),
                done: AtomicU64::new(0),
                errors: AtomicU64::new(0),
            })
            .collect(),
    };
    let per_worker = (cfg.count / cfg.concurrency as u64 + 1).min(1 << 16) as usize;
    let mut all = Vec::new();
    let mut run_delay = vec![None; cfg.concurrency];
    let mut cpu_some = Vec::new();
    std::thread::scope(|scope| -> Result<(), Error> {
        let mut handles = Vec::with_capacity(cfg.concurrency);
        for id in 0..cfg.concurrency {
            let sh = &sh;
            let h = std::thread::Builder::new()
                .name(format!("tdoc-probe-{id}"))
                .spawn_scoped(scope, move || worker(sh, id, per_worker))
                .map_err(|e| {
                    sh.halt.store(true, Ordering::SeqCst);
                    Error::Thread(e)
                })?;
            handles.push(h);
        }
        cpu_some = supervise(&sh, stop, on_progress, &handles);
        for (id, h) in handles.into_iter().enumerate() {
            if let Ok((v, waited)) = h.join() {
                all.extend(v);
                run_delay[id] = waited;
            }
        }
        Ok(())
    })?;
    // The load ran until its last request ended (not until the supervisor's next tick).
    let elapsed = all
        .iter()
        .map(|r| Duration::from_nanos(r.end_ns))
        .max()
        .unwrap_or_else(|| t0.elapsed());
    all.sort_unstable_by_key(|r| (r.start_ns, r.worker));
    Ok(Driven {
        records: all,
        elapsed,
        run_delay,
        cpu_some,
    })
}

/// Supervises the workers until they end; returns the host's CPU pressure sampled every
/// tick ([`crate::readings::cpu_some_sample`]).
fn supervise<T>(
    sh: &Shared,
    stop: &AtomicBool,
    on_progress: &dyn Fn(Progress),
    handles: &[std::thread::ScopedJoinHandle<'_, T>],
) -> Vec<(u64, u64)> {
    let mut halt_at: Option<Instant> = None;
    let mut ticks = 0u64;
    let mut cpu_some = Vec::new();
    cpu_some_sample(sh.t0, &mut cpu_some);
    loop {
        // Wake at the end of the duration exactly, to cut what is in flight then.
        let now = Instant::now();
        let nap = match sh.end.checked_duration_since(now) {
            Some(left) if !left.is_zero() => TICK.min(left),
            _ if halt_at.is_some() => Duration::from_millis(1),
            _ => TICK,
        };
        std::thread::sleep(nap);
        ticks += 1;
        cpu_some_sample(sh.t0, &mut cpu_some);
        let now = Instant::now();
        if handles.iter().all(|h| h.is_finished()) {
            break;
        }
        if halt_at.is_none() {
            if stop.load(Ordering::SeqCst) {
                halt_at = Some(now + DRAIN_ON_STOP);
            } else if now >= sh.end {
                // The duration is over: requests in flight are cut now, not drained.
                halt_at = Some(now);
            }
            if halt_at.is_some() {
                sh.halt.store(true, Ordering::SeqCst);
            }
        } else if stop.load(Ordering::SeqCst) {
            // Ctrl-C during the drain at the end: shorten it.
            halt_at = halt_at.map(|t| t.min(now + DRAIN_ON_STOP));
        }
        let cut_all = halt_at.is_some_and(|t| now >= t);
        for slot in &sh.slots {
            let Ok(mut f) = slot.inflight.lock() else {
                continue;
            };
            let Some(fd) = f.fd else { continue };
            if f.cut.is_some() {
                continue;
            }
            let why = match f.deadline {
                Some((d, why)) if now >= d => Some(why),
                _ if cut_all => Some(Cut::Stopped),
                _ => None,
            };
            if let Some(why) = why {
                f.cut = Some(why);
                // SAFETY: fd is open: the worker clears the slot under this lock before
                // closing it.
                unsafe { libc::shutdown(fd, libc::SHUT_RDWR) };
            }
        }
        if ticks.is_multiple_of(5) && now < sh.end {
            on_progress(progress(sh, now));
        }
    }
    on_progress(progress(sh, Instant::now()));
    cpu_some
}

fn progress(sh: &Shared, now: Instant) -> Progress {
    Progress {
        elapsed: now - sh.t0,
        done: sh
            .slots
            .iter()
            .map(|s| s.done.load(Ordering::Relaxed))
            .sum(),
        errors: sh
            .slots
            .iter()
            .map(|s| s.errors.load(Ordering::Relaxed))
            .sum(),
        count: sh.cfg.count,
        duration: sh.cfg.duration,
    }
}

/// A persistent connection kept between iterations (rr, keep-alive http).
struct Conn {
    sock: Socket,
    local_port: u16,
    /// The TLS session on `sock` (https).
    tls: Option<Box<rustls::ClientConnection>>,
}

struct Worker<'a, 'b> {
    sh: &'a Shared<'b>,
    id: u16,
    slot: &'a Slot,
    conn: Option<Conn>,
    buf: Vec<u8>,
    records: Vec<Record>,
    /// This worker's CPU waits (`None` without schedstats).
    sched: Option<SchedStat>,
}

/// One worker's loop: its records, and how long it waited for a CPU meanwhile (a bound on
/// the scheduling delay its timings can hold).
fn worker(sh: &Shared, id: usize, reserve: usize) -> (Vec<Record>, Option<u64>) {
    let mut w = Worker {
        sh,
        id: id as u16,
        slot: &sh.slots[id],
        conn: None,
        buf: vec![0u8; 16 * 1024],
        records: Vec::with_capacity(reserve),
        sched: SchedStat::open(),
    };
    let rate = sh.cfg.rate_per_s;
    loop {
        if sh.halt.load(Ordering::Relaxed) {
            break;
        }
        let ticket = sh.tickets.fetch_add(1, Ordering::Relaxed);
        if ticket >= sh.cfg.count {
            break;
        }
        let scheduled = match rate {
            Some(r) => {
                let due = sh.t0 + Duration::from_secs_f64(ticket as f64 / r);
                if due >= sh.end || !sleep_until(sh, due) {
                    break;
                }
                Some(due)
            }
            None => None,
        };
        let Some(rec) = w.iteration(scheduled) else {
            break;
        };
        let failed = match rec.outcome {
            Outcome::Error { kind, .. } => {
                w.slot.errors.fetch_add(1, Ordering::Relaxed);
                Some(kind)
            }
            _ => None,
        };
        w.records.push(rec);
        w.slot.done.fetch_add(1, Ordering::Relaxed);
        if failed.is_some_and(|k| k.is_local_exhaustion()) {
            std::thread::sleep(EXHAUSTION_BACKOFF);
        }
    }
    w.close_conn();
    let waited = w.sched.as_ref().and_then(SchedStat::total_ns);
    (w.records, waited)
}

/// Sleeps until `due` in short steps; false when the run halts meanwhile.
fn sleep_until(sh: &Shared, due: Instant) -> bool {
    loop {
        if sh.halt.load(Ordering::Relaxed) {
            return false;
        }
        let now = Instant::now();
        if now >= due {
            return true;
        }
        std::thread::sleep((due - now).min(Duration::from_millis(50)));
    }
}

enum Fail {
    Io(std::io::Error, Phase),
    Kind(ErrorKind, Phase),
}

impl Worker<'_, '_> {
    fn now_ns(&self) -> u64 {
        self.sh.ns(Instant::now())
    }

    /// One request; `None` when the run's duration is over. `scheduled` is the open-loop
    /// due time (closed loop: the start).
    fn iteration(&mut self, scheduled: Option<Instant>) -> Option<Record> {
        let start = Instant::now();
        if scheduled.is_none() && start >= self.sh.end {
            return None;
        }
        let scheduled = scheduled.unwrap_or(start);
        let mut rec = Record::started(self.id, self.sh.ns(scheduled), self.sh.ns(start));
        let result = match &self.sh.cfg.mode {
            Mode::Connect => self.connect_close(&mut rec),
            Mode::Crr => self.with_connection(&mut rec, false, Self::tcp_exchange),
            Mode::Rr => self.with_connection(&mut rec, true, Self::tcp_exchange),
            Mode::Http { keepalive, .. } => {
                let k = *keepalive;
                self.with_connection(&mut rec, k, Self::http_exchange)
            }
        };
        rec.end_ns = self.now_ns();
        if rec.end_ns.saturating_sub(rec.start_ns) >= DETAIL_AFTER {
            rec.cpu_wait_us = self
                .sched
                .as_mut()
                .and_then(SchedStat::since_last_ns)
                .map(|ns| u32::try_from(ns / 1_000).unwrap_or(u32::MAX));
        }
        if let Err(f) = result {
            rec.outcome = self.outcome_of(f);
        }
        Some(rec)
    }

    /// Maps a failure to an outcome, looking at whether the supervisor cut the socket.
    fn outcome_of(&mut self, f: Fail) -> Outcome {
        let (kind, phase) = match f {
            Fail::Io(e, p) => (ErrorKind::from_io(&e), p),
            Fail::Kind(k, p) => (k, p),
        };
        let cut = self
            .slot
            .inflight
            .lock()
            .ok()
            .and_then(|mut g| g.cut.take());
        self.close_conn();
        match cut {
            Some(Cut::Stopped) => Outcome::Cut { phase },
            Some(Cut::ConnectTimeout) => Outcome::Error {
                kind: ErrorKind::ConnectTimeout,
                phase,
            },
            Some(Cut::ReplyTimeout) => Outcome::Error {
                kind: ErrorKind::ReplyTimeout,
                phase,
            },
            None => Outcome::Error { kind, phase },
        }
    }

    fn publish(&self, fd: Option<RawFd>, deadline: Option<(Instant, Cut)>) {
        if let Ok(mut g) = self.slot.inflight.lock() {
            g.fd = fd;
            g.deadline = deadline;
            if fd.is_none() {
                g.cut = None;
            }
        }
    }

    fn arm(&self, timeout: Duration, why: Cut) {
        if let Ok(mut g) = self.slot.inflight.lock() {
            g.deadline = Some((Instant::now() + timeout, why));
        }
    }

    fn disarm(&self) {
        if let Ok(mut g) = self.slot.inflight.lock() {
            g.deadline = None;
        }
    }

    fn close_conn(&mut self) {
        if self.conn.is_some() {
            self.publish(None, None);
            self.conn = None;
        }
    }

    /// Creates, configures, binds and connects a socket; fills `connected_ns`, `local_port`.
    fn open(&mut self, rec: &mut Record) -> Result<(), Fail> {
        let cfg = self.sh.cfg;
        let target = self.sh.target;
        let sock = Socket::new(Domain::for_address(target), Type::STREAM, None)
            .map_err(|e| Fail::Io(e, Phase::Socket))?;
        if cfg.linger0 {
            sock.set_linger(Some(Duration::ZERO))
                .map_err(|e| Fail::Io(e, Phase::Socket))?;
        }
        if cfg.nodelay {
            sock.set_tcp_nodelay(true)
                .map_err(|e| Fail::Io(e, Phase::Socket))?;
        }
        self.bind(&sock)?;
        let fd = sock.as_raw_fd();
        self.conn = Some(Conn {
            sock,
            local_port: 0,
            tls: None,
        });
        self.publish(
            Some(fd),
            Some((Instant::now() + cfg.connect_timeout, Cut::ConnectTimeout)),
        );
        let conn = self.conn.as_mut().expect("just set");
        let connected = conn.sock.connect(&target.into());
        rec.local_port = conn
            .sock
            .local_addr()
            .ok()
            .and_then(|a| a.as_socket())
            .map_or(0, |a| a.port());
        conn.local_port = rec.local_port;
        connected.map_err(|e| Fail::Io(e, Phase::Connect))?;
        rec.connected_ns = Some(self.now_ns());
        if rec.connect_ns().unwrap_or(0) >= DETAIL_AFTER {
            // Right after the handshake the smoothed RTT is its one sample: the SYN-ACK's
            // round trip as the kernel measured it (tcp_rtt_estimator's first measurement).
            if let Some(info) = self.conn.as_ref().and_then(|c| tcp_info::read(&c.sock)) {
                rec.handshake_rtt_us = info.tcpi_rtt;
            }
        }
        if let Some(t) = &self.sh.tls {
            // The connect deadline also bounds the handshake.
            let conn = self.conn.as_mut().expect("just set");
            let mut sock = &conn.sock;
            let session = t
                .handshake(&mut sock)
                .map_err(|e| Fail::Io(e, Phase::Tls))?;
            conn.tls = Some(Box::new(session));
            rec.tls_done_ns = Some(self.now_ns());
        }
        // The connect deadline stays armed until the exchange arms the reply deadline: one
        // lock fewer per connection.
        if matches!(
            cfg.mode,
            Mode::Rr
                | Mode::Http {
                    keepalive: true,
                    ..
                }
        ) {
            self.disarm();
        }
        Ok(())
    }

    fn bind(&self, sock: &Socket) -> Result<(), Fail> {
        let cfg = self.sh.cfg;
        let ip = match (cfg.local_addr, cfg.local_ports) {
            (None, None) => return Ok(()),
            (Some(ip), _) => ip,
            (None, Some(_)) => match self.sh.target {
                SocketAddr::V4(_) => IpAddr::V4(Ipv4Addr::UNSPECIFIED),
                SocketAddr::V6(_) => IpAddr::V6(Ipv6Addr::UNSPECIFIED),
            },
        };
        let port = match cfg.local_ports {
            Some(range) => {
                let n = self.sh.next_port.fetch_add(1, Ordering::Relaxed);
                range.low + (n % u64::from(range.len())) as u16
            }
            None => {
                // Let connect() choose the port for the whole 4-tuple (Linux 4.2+).
                set_bind_no_port(sock);
                0
            }
        };
        sock.bind(&SocketAddr::new(ip, port).into())
            .map_err(|e| Fail::Io(e, Phase::Bind))
    }

    fn connect_close(&mut self, rec: &mut Record) -> Result<(), Fail> {
        self.open(rec)?;
        self.read_kernel_rtt(rec);
        self.close_conn();
        Ok(())
    }

    /// When the request's handshake or first-byte wait was long, its connection's round trip
    /// as the kernel measured it (see [`Record::kernel_rtt_us`]).
    fn read_kernel_rtt(&self, rec: &mut Record) {
        let slow = rec.connect_ns().unwrap_or(0) >= DETAIL_AFTER
            || rec.first_byte_wait_ns().unwrap_or(0) >= DETAIL_AFTER;
        // tcpi_min_rtt exists since Linux 4.10; an older kernel fills less and leaves it 0.
        if let Some(info) = self
            .conn
            .as_ref()
            .filter(|_| slow)
            .and_then(|c| tcp_info::read(&c.sock))
        {
            if info.tcpi_min_rtt != u32::MAX {
                rec.kernel_rtt_us = info.tcpi_min_rtt;
            }
        }
    }

    /// Runs `exchange` on the worker's connection, opening one if needed; closes it after
    /// unless `keep` (and the exchange allows it).
    fn with_connection(
        &mut self,
        rec: &mut Record,
        keep: bool,
        exchange: fn(&mut Self, &mut Record) -> Result<bool, Fail>,
    ) -> Result<(), Fail> {
        if self.conn.is_some() {
            rec.reused = true;
            rec.local_port = self.conn.as_ref().map_or(0, |c| c.local_port);
        } else {
            self.open(rec)?;
        }
        let reusable = exchange(self, rec)?;
        self.read_kernel_rtt(rec);
        if !(keep && reusable) {
            self.close_conn();
        }
        Ok(())
    }

    /// crr/rr: send the request, read `reply_bytes`; with the server closing first, wait for
    /// its FIN. Returns whether the connection can carry another request.
    fn tcp_exchange(&mut self, rec: &mut Record) -> Result<bool, Fail> {
        let cfg = self.sh.cfg;
        let reply_bytes = cfg.reply_bytes;
        let server_closes = cfg.close_first == CloseFirst::Server;
        let persistent = matches!(cfg.mode, Mode::Rr);
        let t0 = self.sh.t0;
        let conn = self.conn.as_mut().expect("connection open");
        conn.sock
            .write_all(&self.sh.request)
            .map_err(|e| Fail::Io(e, Phase::Send))?;
        self.arm(cfg.reply_timeout, Cut::ReplyTimeout);
        let conn = self.conn.as_mut().expect("connection open");
        let mut got = 0;
        while got < reply_bytes {
            let want = (reply_bytes - got).min(self.buf.len());
            match conn.sock.read(&mut self.buf[..want]) {
                Ok(0) => return Err(Fail::Kind(ErrorKind::ShortReply, Phase::Reply)),
                Ok(n) => {
                    if got == 0 {
                        rec.first_byte_ns =
                            Some(Instant::now().duration_since(t0).as_nanos() as u64);
                    }
                    got += n;
                    rec.received_bytes = u32::try_from(got).unwrap_or(u32::MAX);
                }
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(Fail::Io(e, Phase::Reply)),
            }
        }
        if server_closes && !persistent {
            // Wait for the server's FIN so the server holds TIME_WAIT.
            loop {
                match conn.sock.read(&mut self.buf[..]) {
                    Ok(0) => break,
                    Ok(_) => {}
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                    Err(e) => return Err(Fail::Io(e, Phase::Reply)),
                }
            }
        }
        if persistent {
            self.disarm();
        }
        Ok(persistent)
    }

    fn http_exchange(&mut self, rec: &mut Record) -> Result<bool, Fail> {
        let cfg = self.sh.cfg;
        let t0 = self.sh.t0;
        let conn = self.conn.as_mut().expect("connection open");
        let mut sock = &conn.sock;
        match conn.tls.as_deref_mut() {
            Some(session) => rustls::Stream::new(session, &mut sock).write_all(&self.sh.request),
            None => sock.write_all(&self.sh.request),
        }
        .map_err(|e| Fail::Io(e, Phase::Send))?;
        self.arm(cfg.reply_timeout, Cut::ReplyTimeout);
        let conn = self.conn.as_mut().expect("connection open");
        let mut first = None;
        let mut counted = Counted {
            inner: &conn.sock,
            tls: conn.tls.as_deref_mut(),
            bytes: 0,
        };
        let resp = http::read_response(&mut counted, &mut self.buf, || {
            first = Some(Instant::now().duration_since(t0).as_nanos() as u64)
        });
        rec.first_byte_ns = first;
        rec.received_bytes = u32::try_from(counted.bytes).unwrap_or(u32::MAX);
        let resp = resp.map_err(|e| match e {
            http::ReadError::Io(e) => Fail::Io(e, Phase::Reply),
            http::ReadError::Closed { .. } => Fail::Kind(ErrorKind::ShortReply, Phase::Reply),
            http::ReadError::Malformed(_) => Fail::Kind(ErrorKind::BadReply, Phase::Reply),
        })?;
        if resp.keep_alive {
            self.disarm();
        }
        rec.status = resp.status;
        if !cfg.expect_status.accepts(resp.status) {
            // A failure, but the connection stays usable: recorded without closing it.
            rec.outcome = Outcome::Error {
                kind: ErrorKind::HttpStatus {
                    status: resp.status,
                },
                phase: Phase::Reply,
            };
        }
        Ok(resp.keep_alive)
    }
}

/// A socket reader (through TLS for https) that counts the bytes it returns.
struct Counted<'a> {
    inner: &'a Socket,
    tls: Option<&'a mut rustls::ClientConnection>,
    bytes: u64,
}

impl Read for Counted<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let mut sock = self.inner;
        let n = match self.tls.as_deref_mut() {
            Some(session) => match rustls::Stream::new(session, &mut sock).read(buf) {
                // A server that closes without close_notify (common for HTTP/1.1 with
                // Connection: close) ends the body like a plain close.
                Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => 0,
                r => r?,
            },
            None => (&mut sock).read(buf)?,
        };
        self.bytes += n as u64;
        Ok(n)
    }
}
