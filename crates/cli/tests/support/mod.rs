//! Shared helpers of the integration tests: the real binary, root checks, network
//! namespaces that clean up after themselves, and raw sockets inside them (explicit listen
//! backlog and receive buffer, connects left in progress).
//!
//! Every object a test creates is named with the `tdoc` prefix (the same prefix the lab uses,
//! so `tcpdoctor lab cleanup` also finds leftovers of a killed test run), a per-test tag and
//! the test process id, so tests never collide and never depend on each other's order.

#![allow(dead_code)]

pub mod seeds;
pub mod transfers;

use std::net::SocketAddr;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::path::PathBuf;
use std::process::{Command, Output};
use std::sync::atomic::{AtomicU32, Ordering};

/// Path of the `tcpdoctor` binary built for these tests.
pub fn bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_tcpdoctor"))
}

/// Width given to the binary by [`run`] and [`run_in`]: wide enough that tests searching
/// human text for a phrase do not meet it wrapped. The fitting itself is tested in cli.rs.
pub const COLUMNS: &str = "250";

/// Runs tcpdoctor with `args`; returns (exit code, stdout, stderr).
pub fn run(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(bin())
        .args(args)
        .env("COLUMNS", COLUMNS)
        .output()
        .expect("spawn tcpdoctor");
    decode(out)
}

/// Runs tcpdoctor inside network namespace `ns`.
pub fn run_in(ns: &Netns, args: &[&str]) -> (i32, String, String) {
    let out = Command::new("ip")
        .args(["netns", "exec", &ns.name])
        .arg(bin())
        .args(args)
        .env("COLUMNS", COLUMNS)
        .output()
        .expect("spawn ip netns exec tcpdoctor");
    decode(out)
}

fn decode(out: Output) -> (i32, String, String) {
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Parses stdout as JSON, failing the test with both streams shown when it is not.
pub fn json(stdout: &str, stderr: &str) -> serde_json::Value {
    serde_json::from_str(stdout).unwrap_or_else(|e| {
        panic!("stdout is not JSON ({e})\nstdout:\n{stdout}\nstderr:\n{stderr}")
    })
}

/// True when the test may use root facilities. Outside CI a non-root run skips with a printed
/// reason; in CI (`CI=true`) a skip is a failure.
pub fn require_root(test: &str) -> bool {
    if unsafe { libc::geteuid() } == 0 {
        return true;
    }
    if std::env::var("CI").map(|v| v == "true").unwrap_or(false) {
        panic!("{test}: needs root, and CI=true forbids skipping");
    }
    eprintln!("SKIP {test}: needs root (network namespaces, sysctls, tc)");
    false
}

/// [`require_root`], and the programs the test drives (tcpdump, tshark, nginx, wrk) are
/// installed: outside CI a missing one skips the test with its name; in CI (`CI=true`) a skip
/// is a failure (`scripts/test.sh` installs them as root).
#[allow(dead_code)]
pub fn require_root_and_tools(test: &str, tools: &[&str]) -> bool {
    if !require_root(test) {
        return false;
    }
    let missing: Vec<&str> = tools
        .iter()
        .copied()
        .filter(|t| {
            Command::new("sh")
                .args(["-c", &format!("command -v {t}")])
                .output()
                .map(|o| !o.status.success())
                .unwrap_or(true)
        })
        .collect();
    if missing.is_empty() {
        return true;
    }
    let names = missing.join(", ");
    if std::env::var("CI").map(|v| v == "true").unwrap_or(false) {
        panic!("{test}: needs {names}, not installed, and CI=true forbids skipping");
    }
    eprintln!("SKIP {test}: needs {names}, not installed (scripts/test.sh installs it as root)");
    false
}

/// Runs the tests that load the trace's eBPF programs one at a time, across every test binary
/// (hold the guard for the whole test). While another program attaches to or detaches from
/// the same tracepoints, the kernel sometimes does not run a program already attached, and
/// counts no skip (measured with `kernel.bpf_stats_enabled`: the trace's `tcp_retransmit_skb`
/// program ran 682 times for 688 tracepoint hits counted by `perf stat`, and 859 for 860,
/// while another trace started and stopped every 0.3 s; 873, 816 and 73 of as many without).
/// It also misses some with no other tracer (21 of 3,959 SYN resends in 160 accept-overflow
/// lab runs; README), which the traces report as `not_traced` and the tests allow; the lock
/// removes the trigger that can be removed. These tests compare what was traced with the
/// kernel's own counters, so no other test may attach or detach meanwhile. The lock is a file
/// lock (`flock`) in /run/lock, so it holds also across test binaries and checkouts
/// run at once (scripts/test.sh runs two binaries at a time), taken after a lock within
/// the binary (whose threads share one open file description otherwise). A test that failed holding it (poisoned) does not matter to the
/// next; the kernel drops a file lock when its process ends.
#[allow(dead_code)]
pub fn bpf_exclusive() -> BpfGuard {
    bpf_lock(true)
}

/// For the tests that load the trace's eBPF programs (a lab run traces by default) but do
/// not compare what was traced with the kernel's counters: they may run beside each other,
/// never beside a [`bpf_exclusive`] test (their attaching and detaching is what that test
/// must not see). A shared `flock` on the same file, after a read lock within the binary.
#[allow(dead_code)]
pub fn bpf_shared() -> BpfGuard {
    bpf_lock(false)
}

fn bpf_lock(exclusive: bool) -> BpfGuard {
    static LOCK: std::sync::RwLock<()> = std::sync::RwLock::new(());
    let inner = if exclusive {
        Inner::Write(LOCK.write().unwrap_or_else(|e| e.into_inner()))
    } else {
        Inner::Read(LOCK.read().unwrap_or_else(|e| e.into_inner()))
    };
    // One lock per machine, not per target directory: two checkouts' suites (a worktree
    // beside main) load the same kernel's tracepoints. /run/lock is the system's directory for
    // lock files (tmpfs, world-writable with the sticky bit); the target's when it is missing.
    let path: &str = if std::path::Path::new("/run/lock").is_dir() {
        "/run/lock/tcpdoctor-tests-bpf.lock"
    } else {
        concat!(env!("CARGO_TARGET_TMPDIR"), "/tcpdoctor-bpf.lock")
    };
    // flock needs only a read descriptor: a user who cannot write the file (made by a root
    // run) still takes the lock. One who cannot create it either loads no eBPF program
    // (that needs root), so the lock within the binary is enough there.
    let file = std::fs::File::open(path).or_else(|_| {
        std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(path)
    });
    let file = match file {
        Ok(f) => {
            let locked = if exclusive { f.lock() } else { f.lock_shared() };
            locked.unwrap_or_else(|e| panic!("flock {path}: {e}"));
            Some(f)
        }
        Err(_) => None,
    };
    BpfGuard {
        _file: file,
        _inner: inner,
    }
}

/// Held while a test loads eBPF programs ([`bpf_exclusive`], [`bpf_shared`]); the file lock
/// goes with the file.
#[allow(dead_code)]
pub struct BpfGuard {
    _file: Option<std::fs::File>,
    _inner: Inner,
}

#[allow(dead_code)]
enum Inner {
    Read(std::sync::RwLockReadGuard<'static, ()>),
    Write(std::sync::RwLockWriteGuard<'static, ()>),
}

/// Runs a command and panics with its output when it fails.
pub fn sh(cmd: &str) -> String {
    let out = Command::new("sh")
        .arg("-c")
        .arg(cmd)
        .output()
        .expect("spawn sh");
    if !out.status.success() {
        panic!(
            "command failed: {cmd}\nstdout: {}\nstderr: {}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    String::from_utf8_lossy(&out.stdout).into_owned()
}

static SEQ: AtomicU32 = AtomicU32::new(0);

/// A short unique suffix for interface names (at most 15 bytes in total).
pub fn unique_id() -> String {
    let n = SEQ.fetch_add(1, Ordering::SeqCst);
    format!("{:x}{:x}", std::process::id() % 0xfffff, n)
}

/// A network namespace named `tdoc-<tag>-<pid>`, deleted (with its interfaces and every
/// process still inside it) when dropped, also when the test panics.
pub struct Netns {
    pub name: String,
}

impl Netns {
    pub fn new(tag: &str) -> Netns {
        let name = format!("tdoc-{tag}-{}", unique_id());
        let _ = Command::new("ip").args(["netns", "del", &name]).output();
        sh(&format!("ip netns add {name}"));
        let ns = Netns { name };
        ns.exec("ip link set lo up");
        ns
    }

    /// Runs a shell command inside the namespace; panics on failure.
    pub fn exec(&self, cmd: &str) -> String {
        sh(&format!(
            "ip netns exec {} sh -c '{}'",
            self.name,
            cmd.replace('\'', "'\\''")
        ))
    }

    /// Sets a sysctl inside the namespace.
    pub fn sysctl(&self, name: &str, value: &str) {
        self.exec(&format!("sysctl -qw {name}='{value}'"));
    }

    /// Starts a long-running process inside the namespace; it is killed on drop.
    pub fn spawn(&self, cmd: &str) -> std::process::Child {
        Command::new("ip")
            .args(["netns", "exec", &self.name, "sh", "-c", cmd])
            .spawn()
            .expect("spawn in netns")
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        // Only processes inside our own namespace: we started them.
        if let Ok(out) = Command::new("ip")
            .args(["netns", "pids", &self.name])
            .output()
        {
            for pid in String::from_utf8_lossy(&out.stdout).split_whitespace() {
                if let Ok(pid) = pid.parse::<i32>() {
                    unsafe { libc::kill(pid, libc::SIGKILL) };
                }
            }
        }
        let _ = Command::new("ip")
            .args(["netns", "del", &self.name])
            .output();
    }
}

/// Connects `a` and `b` with a veth pair, addresses `a_cidr`/`b_cidr` (e.g. "10.9.0.1/24"),
/// offloads off and per-flow receive steering on (no reordering across CPUs). Returns the
/// interface names (in a, in b).
pub fn veth(a: &Netns, a_cidr: &str, b: &Netns, b_cidr: &str) -> (String, String) {
    let id = unique_id();
    let (ia, ib) = (format!("tdoc{id}a"), format!("tdoc{id}b"));
    sh(&format!(
        "ip link add {ia} netns {} type veth peer name {ib} netns {}",
        a.name, b.name
    ));
    for (ns, ifname, cidr) in [(a, &ia, a_cidr), (b, &ib, b_cidr)] {
        ns.exec(&format!(
            "ip addr add {cidr} dev {ifname} && ip link set {ifname} up"
        ));
        let _ = Command::new("ip")
            .args([
                "netns", "exec", &ns.name, "ethtool", "-K", ifname, "tso", "off", "gso", "off",
                "gro", "off",
            ])
            .output();
        let _ = Command::new("ip")
            .args([
                "netns",
                "exec",
                &ns.name,
                "sh",
                "-c",
                &format!("echo 3 > /sys/class/net/{ifname}/queues/rx-0/rps_cpus"),
            ])
            .output();
    }
    (ia, ib)
}

/// Runs `f` on a new thread that enters `ns` first (setns on that thread only); sockets it
/// creates belong to the namespace and may be returned through the handle.
pub fn spawn_in_netns<T: Send + 'static>(
    ns: &Netns,
    f: impl FnOnce() -> T + Send + 'static,
) -> std::thread::JoinHandle<T> {
    let path = format!("/run/netns/{}", ns.name);
    std::thread::spawn(move || {
        let file = std::fs::File::open(&path).unwrap_or_else(|e| panic!("open {path}: {e}"));
        let rc = unsafe { libc::setns(file.as_raw_fd(), libc::CLONE_NEWNET) };
        assert_eq!(rc, 0, "setns {path}: {}", std::io::Error::last_os_error());
        f()
    })
}

/// [`spawn_in_netns`] and wait for its result.
pub fn in_netns<T: Send + 'static>(ns: &Netns, f: impl FnOnce() -> T + Send + 'static) -> T {
    spawn_in_netns(ns, f).join().expect("thread in netns")
}

/// A TCP listener (IPv4 or IPv6) with an explicit listen() backlog and, optionally,
/// SO_RCVBUF set before listen() so accepted sockets inherit it.
pub fn listener(addr: SocketAddr, backlog: i32, rcvbuf: Option<i32>) -> std::net::TcpListener {
    let fd = socket(addr, 0);
    let one: libc::c_int = 1;
    let int = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
    unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_REUSEADDR,
            &one as *const libc::c_int as *const libc::c_void,
            int,
        );
        if let Some(b) = rcvbuf {
            libc::setsockopt(
                fd.as_raw_fd(),
                libc::SOL_SOCKET,
                libc::SO_RCVBUF,
                &b as *const libc::c_int as *const libc::c_void,
                int,
            );
        }
        let (sa, len) = sockaddr(addr);
        let rc = libc::bind(
            fd.as_raw_fd(),
            &sa as *const _ as *const libc::sockaddr,
            len,
        );
        assert_eq!(rc, 0, "bind {addr}: {}", std::io::Error::last_os_error());
        assert_eq!(libc::listen(fd.as_raw_fd(), backlog), 0);
    }
    std::net::TcpListener::from(fd)
}

/// Starts a non-blocking connect and leaves it in progress (the handshake may or may not
/// complete).
pub fn connect_nonblocking(addr: SocketAddr) -> OwnedFd {
    let fd = socket(addr, libc::SOCK_NONBLOCK);
    let (sa, len) = sockaddr(addr);
    let rc = unsafe {
        libc::connect(
            fd.as_raw_fd(),
            &sa as *const _ as *const libc::sockaddr,
            len,
        )
    };
    let err = std::io::Error::last_os_error();
    assert!(
        rc == 0 || err.raw_os_error() == Some(libc::EINPROGRESS),
        "connect {addr}: {err}"
    );
    fd
}

/// A TCP socket of `addr`'s family, close-on-exec, with extra `flags` (SOCK_NONBLOCK).
fn socket(addr: SocketAddr, flags: libc::c_int) -> OwnedFd {
    let family = if addr.is_ipv4() {
        libc::AF_INET
    } else {
        libc::AF_INET6
    };
    let fd = unsafe { libc::socket(family, libc::SOCK_STREAM | libc::SOCK_CLOEXEC | flags, 0) };
    assert!(fd >= 0, "socket: {}", std::io::Error::last_os_error());
    unsafe { OwnedFd::from_raw_fd(fd) }
}

fn sockaddr(addr: SocketAddr) -> (libc::sockaddr_storage, libc::socklen_t) {
    let mut ss: libc::sockaddr_storage = unsafe { std::mem::zeroed() };
    let len = match addr {
        SocketAddr::V4(a) => {
            let sin = libc::sockaddr_in {
                sin_family: libc::AF_INET as libc::sa_family_t,
                sin_port: a.port().to_be(),
                sin_addr: libc::in_addr {
                    s_addr: u32::from(*a.ip()).to_be(),
                },
                sin_zero: [0; 8],
            };
            unsafe { std::ptr::write(&mut ss as *mut _ as *mut libc::sockaddr_in, sin) };
            std::mem::size_of::<libc::sockaddr_in>()
        }
        SocketAddr::V6(a) => {
            let sin6 = libc::sockaddr_in6 {
                sin6_family: libc::AF_INET6 as libc::sa_family_t,
                sin6_port: a.port().to_be(),
                sin6_flowinfo: 0,
                sin6_addr: libc::in6_addr {
                    s6_addr: a.ip().octets(),
                },
                sin6_scope_id: 0,
            };
            unsafe { std::ptr::write(&mut ss as *mut _ as *mut libc::sockaddr_in6, sin6) };
            std::mem::size_of::<libc::sockaddr_in6>()
        }
    };
    (ss, len as libc::socklen_t)
}

/// Events the trace's program on `hook` was skipped for by the kernel (already running on
/// that CPU), as a trace report or lab trace run gives them in `missed_events`.
#[allow(dead_code)]
pub fn skipped(trace: &serde_json::Value, hook: &str) -> u64 {
    trace["missed_events"][hook].as_u64().unwrap_or(0)
}

/// SYN and SYN-ACK resends the kernel counted (TcpExtTCPSynRetrans) in the traced
/// namespaces that the trace did not see and cannot explain by a skip, as a trace report
/// gives them in `not_traced`.
#[allow(dead_code)]
pub fn not_traced(trace: &serde_json::Value) -> u64 {
    trace["not_traced"]["TcpExtTCPSynRetrans"]
        .as_u64()
        .unwrap_or(0)
}

/// `traced` events of a kind the kernel counted `counted` of: equal, unless the kernel
/// skipped the kind's hook `skipped` times, when the trace may count that many fewer (never
/// more). `what` names the comparison in the failure message.
#[allow(dead_code)]
pub fn assert_traced_count(traced: i64, counted: i64, skipped: u64, what: &str) {
    assert_traced_count_at_edges(traced, counted, skipped, 0, what);
}

/// [`assert_traced_count`] against counters read inside the trace's window: the trace may
/// also count up to `edges` more, the events it saw at its window's edges, outside the
/// counters' (as a trace report gives them in `syn_traced_at_edges`).
#[allow(dead_code)]
pub fn assert_traced_count_at_edges(
    traced: i64,
    counted: i64,
    skipped: u64,
    edges: u64,
    what: &str,
) {
    if skipped == 0 && edges == 0 {
        assert_eq!(
            traced, counted,
            "{what}: traced {traced}, counted {counted}"
        );
    } else {
        assert!(
            traced <= counted + edges as i64 && traced + skipped as i64 >= counted,
            "{what}: traced {traced}, counted {counted}, the hook skipped {skipped} time(s), \
             {edges} traced at the window's edges"
        );
    }
}

/// SYN and SYN-ACK resends a trace report saw at the edges of its counters' window.
#[allow(dead_code)]
pub fn syn_at_edges(trace: &serde_json::Value) -> u64 {
    trace["syn_traced_at_edges"].as_u64().unwrap_or(0)
}

/// The delta of counter `name` in a `--json` report's `counters` list (0 when it did not
/// move): probe's and counters' reports list the counters that moved as {name, delta}.
#[allow(dead_code)]
pub fn counter_delta(v: &serde_json::Value, name: &str) -> i64 {
    v["counters"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|c| c["name"] == name)
        .map_or(0, |c| c["delta"].as_i64().unwrap_or(0))
}

/// Counter `name` of the `prefix` lines (`Tcp:`, `TcpExt:`) of `file` in namespace `ns`, read
/// by `cat`: not by tcpdoctor, whose answers it judges.
#[allow(dead_code)]
pub fn mib(ns: &str, file: &str, prefix: &str, name: &str) -> u64 {
    let text = Command::new("ip")
        .args(["netns", "exec", ns, "cat", file])
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
        .unwrap_or_default();
    let mut rows = text.lines().filter(|l| l.starts_with(prefix));
    let (Some(names), Some(values)) = (rows.next(), rows.next()) else {
        return 0;
    };
    names
        .split_whitespace()
        .zip(values.split_whitespace())
        .find(|(n, _)| *n == name)
        .and_then(|(_, v)| v.parse().ok())
        .unwrap_or(0)
}
