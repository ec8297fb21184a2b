//! The lab's own small traffic code: listeners, timed connects, socket options and
//! per-connection records. Plain blocking std/socket2 sockets on threads that have entered a
//! namespace ([`crate::netns`]); every loop is bounded by a count, a deadline and a stop flag.

use std::io::{self, Read, Write};
use std::net::{SocketAddr, SocketAddrV4, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use socket2::{Domain, Protocol, Socket, Type};

/// Listening port of every lab server: outside `ip_local_port_range` (32768-60999 by default)
/// so connection churn never takes it as a client port.
pub const SERVER_PORT: u16 = 5001;

/// How often blocking calls wake up to look at the stop flag.
pub const POLL_INTERVAL: Duration = Duration::from_millis(50);

/// A listener with `SO_REUSEADDR` and the given backlog.
pub fn listen(addr: SocketAddrV4, backlog: i32) -> io::Result<TcpListener> {
    let s = Socket::new(Domain::IPV4, Type::STREAM, Some(Protocol::TCP))?;
    s.set_reuse_address(true)?;
    s.bind(&SocketAddr::V4(addr).into())?;
    s.listen(backlog)?;
    Ok(s.into())
}

/// Options of a client socket.
#[derive(Clone, Debug, Default)]
pub struct ClientOptions {
    /// Bind this local address/port before connecting (`SO_REUSEADDR` set).
    pub bind: Option<SocketAddrV4>,
    /// Close with `SO_LINGER {on, 0}`: an RST instead of a FIN, no TIME_WAIT.
    pub linger0: bool,
    pub nodelay: bool,
    pub rcvbuf: Option<usize>,
    pub sndbuf: Option<usize>,
    /// Give up on connect after this long.
    pub connect_timeout: Option<Duration>,
}

/// A socket configured per `opts`, not yet connected.
pub fn client_socket(opts: &ClientOptions) -> io::Result<Socket> {
    let s = Socket::new(Domain::IPV4, Type::STREAM, Some(Protocol::TCP))?;
    if opts.linger0 {
        s.set_linger(Some(Duration::ZERO))?;
    }
    if opts.nodelay {
        s.set_tcp_nodelay(true)?;
    }
    if let Some(n) = opts.rcvbuf {
        s.set_recv_buffer_size(n)?;
    }
    if let Some(n) = opts.sndbuf {
        s.set_send_buffer_size(n)?;
    }
    if let Some(b) = opts.bind {
        s.set_reuse_address(true)?;
        s.bind(&SocketAddr::V4(b).into())?;
    }
    Ok(s)
}

/// Connects `opts`-configured socket to `to`, timing the connect.
pub fn connect(to: SocketAddrV4, opts: &ClientOptions) -> (io::Result<TcpStream>, Duration) {
    let start = Instant::now();
    let r = client_socket(opts).and_then(|s| {
        let to = SocketAddr::V4(to).into();
        match opts.connect_timeout {
            Some(t) => s.connect_timeout(&to, t)?,
            None => s.connect(&to)?,
        }
        Ok(TcpStream::from(s))
    });
    (r, start.elapsed())
}

/// How one connection attempt ended, by errno name.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    Ok,
    /// EADDRNOTAVAIL: no local port left for this destination.
    Eaddrnotavail,
    /// EADDRINUSE: the explicitly bound port is taken.
    Eaddrinuse,
    Econnrefused,
    Econnreset,
    /// ETIMEDOUT or our connect timeout.
    Etimedout,
    Other,
}

impl Outcome {
    pub fn of(e: &io::Error) -> Outcome {
        match e.raw_os_error() {
            Some(libc::EADDRNOTAVAIL) => Outcome::Eaddrnotavail,
            Some(libc::EADDRINUSE) => Outcome::Eaddrinuse,
            Some(libc::ECONNREFUSED) => Outcome::Econnrefused,
            Some(libc::ECONNRESET) | Some(libc::EPIPE) => Outcome::Econnreset,
            Some(libc::ETIMEDOUT) => Outcome::Etimedout,
            _ if e.kind() == io::ErrorKind::TimedOut || e.kind() == io::ErrorKind::WouldBlock => {
                Outcome::Etimedout
            }
            _ => Outcome::Other,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Outcome::Ok => "ok",
            Outcome::Eaddrnotavail => "EADDRNOTAVAIL",
            Outcome::Eaddrinuse => "EADDRINUSE",
            Outcome::Econnrefused => "ECONNREFUSED",
            Outcome::Econnreset => "ECONNRESET",
            Outcome::Etimedout => "ETIMEDOUT",
            Outcome::Other => "other",
        }
    }
}

/// One connection (or request) as measured by a lab client.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConnRecord {
    /// Start, microseconds since the measurement began.
    pub start_us: u64,
    /// Time spent in connect().
    pub connect_us: u64,
    /// Start to end of the whole exchange.
    pub total_us: u64,
    pub local_port: u16,
    pub outcome: Outcome,
}

/// Reads exactly `buf.len()` bytes, waking every [`POLL_INTERVAL`] to check `stop` and
/// `deadline`. Returns `Ok(false)` on a clean EOF before the first byte.
pub fn read_full(
    s: &mut TcpStream,
    buf: &mut [u8],
    stop: &AtomicBool,
    deadline: Instant,
) -> io::Result<bool> {
    s.set_read_timeout(Some(POLL_INTERVAL))?;
    let mut got = 0;
    while got < buf.len() {
        if stop.load(Ordering::Relaxed) || Instant::now() > deadline {
            return Err(io::Error::new(io::ErrorKind::Interrupted, "stopped"));
        }
        match s.read(&mut buf[got..]) {
            Ok(0) if got == 0 => return Ok(false),
            Ok(0) => return Err(io::ErrorKind::UnexpectedEof.into()),
            Ok(n) => got += n,
            Err(e)
                if e.kind() == io::ErrorKind::WouldBlock || e.kind() == io::ErrorKind::TimedOut => {
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(true)
}

/// Writes `n` bytes of filler, in chunks of `chunk` bytes.
pub fn write_bytes(s: &mut TcpStream, mut n: u64, chunk: &[u8]) -> io::Result<()> {
    while n > 0 {
        let k = chunk.len().min(n as usize);
        s.write_all(&chunk[..k])?;
        n -= k as u64;
    }
    Ok(())
}

/// Accepts one connection, waking to check `stop` and `deadline`.
pub fn accept_one(l: &TcpListener, stop: &AtomicBool, deadline: Instant) -> io::Result<TcpStream> {
    l.set_nonblocking(true)?;
    loop {
        match l.accept() {
            Ok((s, _)) => {
                s.set_nonblocking(false)?;
                return Ok(s);
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                if stop.load(Ordering::Relaxed) || Instant::now() > deadline {
                    return Err(io::Error::new(io::ErrorKind::Interrupted, "stopped"));
                }
                std::thread::sleep(Duration::from_millis(1));
            }
            Err(e) => return Err(e),
        }
    }
}

/// Two distinct CPUs this process may run on (the first two of its affinity mask), or `None`
/// when it may run on one only.
pub fn two_cpus() -> Option<(usize, usize)> {
    // SAFETY: cpu_set_t is plain old data; sched_getaffinity fills it for this process.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    let size = std::mem::size_of::<libc::cpu_set_t>();
    if unsafe { libc::sched_getaffinity(0, size, &mut set) } != 0 {
        return None;
    }
    let mut allowed =
        (0..libc::CPU_SETSIZE as usize).filter(|&c| unsafe { libc::CPU_ISSET(c, &set) });
    Some((allowed.next()?, allowed.next()?))
}

/// Pins the calling thread to `cpu`; threads it starts afterwards inherit the placement.
pub fn pin_thread(cpu: usize) -> io::Result<()> {
    // SAFETY: cpu_set_t is plain old data; CPU_SET writes within it for cpu < CPU_SETSIZE,
    // checked first; pid 0 is the calling thread.
    if cpu >= libc::CPU_SETSIZE as usize {
        return Err(io::Error::from_raw_os_error(libc::EINVAL));
    }
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    unsafe { libc::CPU_SET(cpu, &mut set) };
    let size = std::mem::size_of::<libc::cpu_set_t>();
    if unsafe { libc::sched_setaffinity(0, size, &set) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Percentile `p` (0..=100) of `sorted` by nearest rank; 0 when empty.
pub fn percentile(sorted: &[u64], p: f64) -> u64 {
    if sorted.is_empty() {
        return 0;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentile_by_nearest_rank() {
        let v: Vec<u64> = (1..=100).collect();
        assert_eq!(percentile(&v, 99.0), 99);
        assert_eq!(percentile(&v, 50.0), 50);
        assert_eq!(percentile(&v, 100.0), 100);
        assert_eq!(percentile(&[7], 99.0), 7);
        assert_eq!(percentile(&[], 99.0), 0);
    }

    #[test]
    fn a_thread_pinned_to_a_cpu_runs_there() {
        let Some((_, cpu)) = two_cpus() else {
            return; // one CPU: nothing to choose
        };
        let on = std::thread::spawn(move || {
            pin_thread(cpu).unwrap();
            // SAFETY: sched_getcpu has no preconditions.
            unsafe { libc::sched_getcpu() }
        })
        .join()
        .unwrap();
        assert_eq!(on, cpu as i32);
        assert!(pin_thread(libc::CPU_SETSIZE as usize).is_err());
    }

    #[test]
    fn outcome_by_errno() {
        let e = io::Error::from_raw_os_error(libc::EADDRNOTAVAIL);
        assert_eq!(Outcome::of(&e), Outcome::Eaddrnotavail);
        assert_eq!(Outcome::of(&e).name(), "EADDRNOTAVAIL");
        let e = io::Error::from_raw_os_error(libc::ECONNREFUSED);
        assert_eq!(Outcome::of(&e), Outcome::Econnrefused);
    }
}
