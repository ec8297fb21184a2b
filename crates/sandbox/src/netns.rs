//! Threads that run inside one of the lab's network namespaces.
//!
//! `setns(CLONE_NEWNET)` changes the namespace of the calling thread only, so each traffic
//! thread enters its namespace first and then opens sockets there. Namespaces must exist
//! before the threads start (the `ip` commands run from the main thread, which stays in the
//! root namespace). Inside such a thread, `/proc/thread-self/net` shows the thread's namespace
//! (`/proc/net` follows the process's main thread, not the calling thread).

use std::fs::File;
use std::path::PathBuf;
use std::thread::JoinHandle;

use crate::{Error, Result};

/// The per-thread view of `/proc/net`.
pub const THREAD_PROC_NET: &str = "/proc/thread-self/net";

/// Opens the namespace file of `ns` (`/run/netns/<ns>`, made by `ip netns add`).
pub fn open(ns: &str) -> Result<File> {
    tcpdoctor_host::netns::open(ns).map_err(|e| Error::io(format!("open namespace {ns}"), e))
}

/// Moves the calling thread into namespace `ns`.
pub fn enter(ns: &str) -> Result<()> {
    tcpdoctor_host::netns::enter(ns).map_err(|e| Error::io(format!("enter namespace {ns}"), e))
}

/// Waits until `done()` holds, passing Ctrl-C (`stop`) on to `inner`, the flag the traffic
/// threads poll.
pub fn wait(
    done: impl Fn() -> bool,
    stop: &std::sync::atomic::AtomicBool,
    inner: &std::sync::atomic::AtomicBool,
) {
    use std::sync::atomic::Ordering::Relaxed;
    while !done() {
        if stop.load(Relaxed) {
            inner.store(true, Relaxed);
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

/// Spawns a thread named `name` that enters `ns` and runs `f`.
pub fn spawn<T, F>(ns: &str, name: &str, f: F) -> Result<Worker<T>>
where
    T: Send + 'static,
    F: FnOnce() -> Result<T> + Send + 'static,
{
    let file = open(ns)?;
    let ns_name = ns.to_string();
    let handle = std::thread::Builder::new()
        .name(name.to_string())
        .spawn(move || {
            tcpdoctor_host::netns::enter_file(&file)
                .map_err(|e| Error::io(format!("enter namespace {ns_name}"), e))?;
            drop(file);
            f()
        })
        .map_err(|e| Error::io(format!("start thread {name}"), e))?;
    Ok(Worker {
        name: name.to_string(),
        handle,
    })
}

/// Runs `f` in a short-lived thread inside `ns` and returns its result.
pub fn run_in<T, F>(ns: &str, f: F) -> Result<T>
where
    T: Send + 'static,
    F: FnOnce() -> Result<T> + Send + 'static,
{
    spawn(ns, "tdoc-ns", f)?.join()
}

/// A traffic thread inside a namespace.
#[derive(Debug)]
pub struct Worker<T> {
    name: String,
    handle: JoinHandle<Result<T>>,
}

impl<T> Worker<T> {
    /// Waits for the thread; a panic becomes [`Error::Thread`].
    pub fn join(self) -> Result<T> {
        match self.handle.join() {
            Ok(r) => r,
            Err(p) => {
                let detail = p
                    .downcast_ref::<&str>()
                    .map(|s| s.to_string())
                    .or_else(|| p.downcast_ref::<String>().cloned())
                    .unwrap_or_else(|| "panicked".to_string());
                Err(Error::Thread {
                    step: self.name,
                    detail,
                })
            }
        }
    }

    pub fn is_finished(&self) -> bool {
        self.handle.is_finished()
    }
}

/// Kernel counters of namespace `ns`, read by a thread inside it.
pub fn counters(ns: &str) -> Result<tcpdoctor_host::counters::Snapshot> {
    let step = format!("read counters of {ns}");
    run_in(ns, move || {
        tcpdoctor_host::counters::Source {
            dir: PathBuf::from(THREAD_PROC_NET),
        }
        .snapshot()
        .map_err(|source| Error::Host { step, source })
    })
}

/// The smallest retransmission timeout of connections from namespace `ns` toward `peer`: the
/// route's `rto_min` when the route sets one, else the namespace's `net.ipv4.tcp_rto_min_us`
/// (`tcp_rto_min()`, include/net/tcp.h). Read by a thread inside `ns`.
pub fn rto_floor(ns: &str, peer: std::net::Ipv4Addr) -> Result<std::time::Duration> {
    let step = format!("read the RTO floor of {ns}");
    run_in(ns, move || {
        let route =
            tcpdoctor_host::route::rto_min_for(peer.into()).map_err(|source| Error::Host {
                step: step.clone(),
                source,
            })?;
        match route {
            Some(d) => Ok(d),
            None => tcpdoctor_host::sysctl::TcpSettings::read()
                .map(|s| s.rto_min())
                .map_err(|source| Error::Host { step, source }),
        }
    })
}

/// A numeric sysctl of namespace `ns` (`net.ipv4.tcp_tw_reuse_delay`), `None` when this
/// kernel does not have it. Read by a thread inside `ns`.
pub fn sysctl_u64(ns: &str, name: &'static str) -> Result<Option<u64>> {
    let step = format!("read {name} in {ns}");
    run_in(ns, move || {
        tcpdoctor_host::sysctl::read_u64(name).map_err(|source| Error::Host { step, source })
    })
}

/// A sysctl of namespace `ns` as text (`net.ipv4.tcp_wmem`: three numbers).
pub fn sysctl_text(ns: &str, name: &'static str) -> Result<String> {
    let step = format!("read {name} in {ns}");
    run_in(ns, move || {
        tcpdoctor_host::sysctl::read(name)
            .map(|s| s.trim().to_string())
            .map_err(|source| Error::Host { step, source })
    })
}

/// The TCP settings of namespace `ns`, read by a thread inside it (`/proc/sys/net` follows
/// the reading thread's namespace).
pub fn settings(ns: &str) -> Result<tcpdoctor_host::sysctl::TcpSettings> {
    let step = format!("read TCP settings of {ns}");
    run_in(ns, move || {
        tcpdoctor_host::sysctl::TcpSettings::read().map_err(|source| Error::Host { step, source })
    })
}
