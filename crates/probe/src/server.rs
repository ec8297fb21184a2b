//! The embedded server: a TCP request/reply responder and a minimal HTTP/1.1 responder with
//! keep-alive, served by a pool of threads that each block in `accept()` on one listener and
//! then serve that connection to its end.
//!
//! Several acceptors matter: a single accept loop that also serves falls behind under
//! connection churn, the accept queue overflows, and clients see 1 s SYN retransmissions
//! that are the test rig's fault. A connection held open (keep-alive, `rr`) occupies one
//! thread, so `threads` must exceed the number of persistent connections.
//!
//! HTTP paths: `/status/NNN` answers with status NNN; anything else with 200. The body is
//! `body_bytes` of `x`.

use std::io::{self, Read, Write};
use std::net::{Shutdown, SocketAddr};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use socket2::{Domain, Socket, Type};

use crate::{CloseFirst, Error};

/// What the server speaks.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Protocol {
    /// Read `request_bytes`, write `reply_bytes`, repeat until the client closes (or close
    /// after the first reply when the server closes first).
    Tcp {
        request_bytes: usize,
        reply_bytes: usize,
    },
    /// HTTP/1.1; keep-alive unless the request says `Connection: close`.
    Http { body_bytes: usize },
}

#[derive(Clone, Debug)]
pub struct ServerConfig {
    pub addr: SocketAddr,
    pub protocol: Protocol,
    pub close_first: CloseFirst,
    /// Acceptor/handler threads.
    pub threads: usize,
    /// listen() backlog (the kernel caps it at net.core.somaxconn).
    pub backlog: i32,
    pub nodelay: bool,
}

impl ServerConfig {
    pub fn new(addr: SocketAddr, protocol: Protocol) -> ServerConfig {
        ServerConfig {
            addr,
            protocol,
            close_first: CloseFirst::Client,
            threads: 8,
            backlog: 4096,
            nodelay: true,
        }
    }
}

/// Counts kept by the server (relaxed atomics; read after stopping).
#[derive(Clone, Copy, Debug, Default, Serialize, Deserialize)]
pub struct ServerStats {
    pub connections_accepted: u64,
    pub requests_served: u64,
    pub accept_errors: u64,
    /// How long the server's threads waited for a CPU while they ran (schedstat
    /// `run_delay`, summed over threads); null when the kernel does not keep it.
    pub run_delay_us: Option<u64>,
}

struct Shared {
    stop: AtomicBool,
    listener: Socket,
    cfg: ServerConfig,
    accepted: AtomicU64,
    served: AtomicU64,
    accept_errors: AtomicU64,
    /// Sum of the threads' CPU waits (ns), added as each thread ends; `u64::MAX` once a
    /// thread could not read it.
    run_delay_ns: AtomicU64,
}

/// A running server; stopped (threads joined) on [`Server::stop`] or drop.
pub struct Server {
    addr: SocketAddr,
    shared: Arc<Shared>,
    threads: Vec<JoinHandle<()>>,
}

/// How often blocked reads and accepts wake up to check the stop flag.
const POLL: Duration = Duration::from_millis(100);
/// An idle persistent connection is closed after this (like a server's keep-alive timeout).
const IDLE_LIMIT: Duration = Duration::from_secs(60);

impl Server {
    pub fn start(cfg: ServerConfig) -> Result<Server, Error> {
        let addr = cfg.addr;
        let err = |source: io::Error| Error::Serve { addr, source };
        let listener = Socket::new(Domain::for_address(addr), Type::STREAM, None).map_err(err)?;
        listener.set_reuse_address(true).map_err(err)?;
        listener.bind(&addr.into()).map_err(err)?;
        listener.listen(cfg.backlog).map_err(err)?;
        // accept() wakes every POLL to see the stop flag; accepted sockets inherit the
        // timeout (sk_clone_lock copies sk_rcvtimeo), so reads wake up the same way.
        listener.set_read_timeout(Some(POLL)).map_err(err)?;
        let local = listener
            .local_addr()
            .map_err(err)?
            .as_socket()
            .ok_or_else(|| err(io::Error::other("listener has no inet address")))?;
        let threads = cfg.threads.max(1);
        let shared = Arc::new(Shared {
            stop: AtomicBool::new(false),
            listener,
            cfg,
            accepted: AtomicU64::new(0),
            served: AtomicU64::new(0),
            accept_errors: AtomicU64::new(0),
            run_delay_ns: AtomicU64::new(0),
        });
        let mut server = Server {
            addr: local,
            shared,
            threads: Vec::with_capacity(threads),
        };
        for i in 0..threads {
            let s = Arc::clone(&server.shared);
            let h = std::thread::Builder::new()
                .name(format!("tdoc-serve-{i}"))
                .spawn(move || accept_loop(&s))
                .map_err(|e| Error::Serve { addr, source: e })?;
            server.threads.push(h);
        }
        Ok(server)
    }

    /// The bound address (with the port the kernel chose for port 0).
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    pub fn stats(&self) -> ServerStats {
        ServerStats {
            connections_accepted: self.shared.accepted.load(Ordering::Relaxed),
            requests_served: self.shared.served.load(Ordering::Relaxed),
            accept_errors: self.shared.accept_errors.load(Ordering::Relaxed),
            run_delay_us: match self.shared.run_delay_ns.load(Ordering::Relaxed) {
                u64::MAX => None,
                ns => Some(ns / 1_000),
            },
        }
    }

    /// Stops accepting, lets handlers notice within 100 ms, joins the threads.
    pub fn stop(mut self) -> ServerStats {
        self.shutdown();
        self.stats()
    }

    fn shutdown(&mut self) {
        self.shared.stop.store(true, Ordering::SeqCst);
        // Wakes every thread blocked in accept() (it returns EINVAL).
        let _ = self.shared.listener.shutdown(Shutdown::Both);
        for h in self.threads.drain(..) {
            let _ = h.join();
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.shutdown();
    }
}

fn accept_loop(s: &Shared) {
    let waited_before = crate::readings::thread_run_delay_ns();
    serve_until_stopped(s);
    let waited = waited_before
        .zip(crate::readings::thread_run_delay_ns())
        .map(|(b, a)| a.saturating_sub(b));
    let _ = s
        .run_delay_ns
        .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |sum| {
            Some(match (sum, waited) {
                (u64::MAX, _) | (_, None) => u64::MAX,
                (sum, Some(w)) => sum.saturating_add(w).min(u64::MAX - 1),
            })
        });
}

fn serve_until_stopped(s: &Shared) {
    while !s.stop.load(Ordering::Relaxed) {
        match s.listener.accept() {
            Ok((conn, _)) => {
                s.accepted.fetch_add(1, Ordering::Relaxed);
                if s.cfg.nodelay {
                    let _ = conn.set_tcp_nodelay(true);
                }
                let served = match &s.cfg.protocol {
                    Protocol::Tcp {
                        request_bytes,
                        reply_bytes,
                    } => serve_tcp(s, conn, *request_bytes, *reply_bytes),
                    Protocol::Http { body_bytes } => serve_http(s, conn, *body_bytes),
                };
                s.served.fetch_add(served, Ordering::Relaxed);
            }
            Err(e) if is_timeout(&e) || e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => {
                if s.stop.load(Ordering::Relaxed) {
                    break;
                }
                s.accept_errors.fetch_add(1, Ordering::Relaxed);
                // ECONNABORTED and friends are per-connection; EMFILE needs a pause.
                if matches!(e.raw_os_error(), Some(libc::EMFILE) | Some(libc::ENFILE)) {
                    std::thread::sleep(Duration::from_millis(10));
                }
            }
        }
    }
}

fn is_timeout(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
    )
}

/// Reads into `buf`, retrying on the POLL timeout until data, EOF, stop or the idle limit.
/// `Ok(0)` means EOF or give up.
fn read_patiently(s: &Shared, conn: &mut Socket, buf: &mut [u8]) -> usize {
    let since = Instant::now();
    loop {
        match conn.read(buf) {
            Ok(n) => return n,
            Err(e) if is_timeout(&e) || e.kind() == io::ErrorKind::Interrupted => {
                if s.stop.load(Ordering::Relaxed) || since.elapsed() > IDLE_LIMIT {
                    return 0;
                }
            }
            Err(_) => return 0,
        }
    }
}

/// Waits for the client's FIN (the client closes first), discarding anything it sends.
fn drain_until_eof(s: &Shared, conn: &mut Socket) {
    let mut b = [0u8; 512];
    while read_patiently(s, conn, &mut b) > 0 {}
}

fn serve_tcp(s: &Shared, mut conn: Socket, request_bytes: usize, reply_bytes: usize) -> u64 {
    let reply = vec![b'r'; reply_bytes];
    let mut buf = vec![0u8; request_bytes.clamp(1, 64 * 1024)];
    let mut served = 0;
    loop {
        let mut got = 0;
        while got < request_bytes.max(1) {
            let want = (request_bytes.max(1) - got).min(buf.len());
            let n = read_patiently(s, &mut conn, &mut buf[..want]);
            if n == 0 {
                return served;
            }
            got += n;
        }
        if conn.write_all(&reply).is_err() {
            return served;
        }
        served += 1;
        if s.cfg.close_first == CloseFirst::Server {
            return served;
        }
    }
}

fn status_reason(code: u16) -> &'static str {
    match code {
        200 => "OK",
        204 => "No Content",
        301 => "Moved Permanently",
        400 => "Bad Request",
        403 => "Forbidden",
        404 => "Not Found",
        500 => "Internal Server Error",
        502 => "Bad Gateway",
        503 => "Service Unavailable",
        _ => "Status",
    }
}

fn response(code: u16, body_bytes: usize, close: bool) -> Vec<u8> {
    let body_len = if code == 204 || code == 304 || code / 100 == 1 {
        0
    } else {
        body_bytes
    };
    let mut r = format!(
        "HTTP/1.1 {code} {}\r\nServer: tcpdoctor\r\nContent-Type: text/plain\r\nContent-Length: {body_len}\r\n{}\r\n",
        status_reason(code),
        if close { "Connection: close\r\n" } else { "" }
    )
    .into_bytes();
    r.resize(r.len() + body_len, b'x');
    r
}

fn serve_http(s: &Shared, mut conn: Socket, body_bytes: usize) -> u64 {
    let ok_keep = response(200, body_bytes, false);
    let ok_close = response(200, body_bytes, true);
    let mut buf = vec![0u8; 8 * 1024];
    let mut filled = 0;
    let mut served = 0;
    loop {
        // Parse what we have; read more while the head is incomplete.
        let parsed = loop {
            let mut headers = [httparse::EMPTY_HEADER; 32];
            let mut req = httparse::Request::new(&mut headers);
            match req.parse(&buf[..filled]) {
                Ok(httparse::Status::Complete(n)) => {
                    let close = req.headers.iter().any(|h| {
                        h.name.eq_ignore_ascii_case("connection")
                            && h.value.eq_ignore_ascii_case(b"close")
                    }) || req.version == Some(0);
                    let status = req
                        .path
                        .and_then(|p| p.strip_prefix("/status/"))
                        .and_then(|c| c.parse::<u16>().ok())
                        .filter(|c| (100..=599).contains(c))
                        .unwrap_or(200);
                    break Some((n, status, close));
                }
                Ok(httparse::Status::Partial) => {
                    if filled == buf.len() {
                        break None; // head above 8 KiB: give up on this client
                    }
                    let n = read_patiently(s, &mut conn, &mut buf[filled..]);
                    if n == 0 {
                        return served;
                    }
                    filled += n;
                }
                Err(_) => {
                    let _ = conn.write_all(&response(400, 0, true));
                    return served;
                }
            }
        };
        let Some((head_len, status, close)) = parsed else {
            let _ = conn.write_all(&response(400, 0, true));
            return served;
        };
        let written = match (status, close) {
            (200, false) => conn.write_all(&ok_keep),
            (200, true) => conn.write_all(&ok_close),
            (code, close) => conn.write_all(&response(code, body_bytes, close)),
        };
        if written.is_err() {
            return served;
        }
        served += 1;
        buf.copy_within(head_len..filled, 0);
        filled -= head_len;
        if close {
            if s.cfg.close_first == CloseFirst::Client {
                drain_until_eof(s, &mut conn);
            }
            return served;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::TcpStream;

    fn start(protocol: Protocol, close_first: CloseFirst) -> Server {
        let mut cfg = ServerConfig::new("127.0.0.1:0".parse().unwrap(), protocol);
        cfg.close_first = close_first;
        cfg.threads = 2;
        Server::start(cfg).unwrap()
    }

    #[test]
    fn tcp_request_reply_until_client_closes() {
        let srv = start(
            Protocol::Tcp {
                request_bytes: 4,
                reply_bytes: 10,
            },
            CloseFirst::Client,
        );
        let mut c = TcpStream::connect(srv.local_addr()).unwrap();
        for _ in 0..3 {
            c.write_all(b"ping").unwrap();
            let mut r = [0u8; 10];
            c.read_exact(&mut r).unwrap();
            assert_eq!(&r, b"rrrrrrrrrr");
        }
        drop(c);
        std::thread::sleep(Duration::from_millis(50));
        let st = srv.stop();
        assert_eq!(st.connections_accepted, 1);
        assert_eq!(st.requests_served, 3);
    }

    #[test]
    fn tcp_server_closes_first() {
        let srv = start(
            Protocol::Tcp {
                request_bytes: 1,
                reply_bytes: 1,
            },
            CloseFirst::Server,
        );
        let mut c = TcpStream::connect(srv.local_addr()).unwrap();
        c.write_all(b"x").unwrap();
        let mut r = Vec::new();
        c.read_to_end(&mut r).unwrap();
        assert_eq!(r, b"r");
    }

    #[test]
    fn http_keepalive_and_status_paths() {
        let srv = start(Protocol::Http { body_bytes: 5 }, CloseFirst::Client);
        let mut c = TcpStream::connect(srv.local_addr()).unwrap();
        let mut buf = Vec::new();
        for (path, code) in [("/", 200), ("/status/404", 404), ("/status/503", 503)] {
            c.write_all(format!("GET {path} HTTP/1.1\r\nHost: x\r\n\r\n").as_bytes())
                .unwrap();
            let r = crate::http::read_response(&mut c, &mut buf, || {}).unwrap();
            assert_eq!(r.status, code);
            assert!(r.keep_alive);
        }
        c.write_all(b"GET / HTTP/1.1\r\nConnection: close\r\n\r\n")
            .unwrap();
        let r = crate::http::read_response(&mut c, &mut buf, || {}).unwrap();
        assert!(!r.keep_alive);
        drop(c);
        std::thread::sleep(Duration::from_millis(50));
        assert_eq!(srv.stop().requests_served, 4);
    }

    #[test]
    fn stop_is_prompt_with_idle_connections() {
        let srv = start(Protocol::Http { body_bytes: 1 }, CloseFirst::Client);
        let _idle = TcpStream::connect(srv.local_addr()).unwrap();
        std::thread::sleep(Duration::from_millis(20));
        let t = Instant::now();
        srv.stop();
        assert!(t.elapsed() < Duration::from_secs(2));
    }
}
