//! A tracing session: the library entry point for `tcpdoctor trace`, and for doctor and the
//! lab, which trace a scenario's namespaces while it runs.
//!
//! ```no_run
//! use tcpdoctor_trace::session::{Options, Scope, Session};
//! let mut s = Session::start(Options { scope: Scope::Named(vec!["tdoc-a".into()]), ..Default::default() })?;
//! // ... run the scenario, calling s.poll() every few tens of milliseconds ...
//! let lines = s.poll();
//! let outcome = s.finish();
//! for f in &outcome.findings { println!("{}", f.summary); }
//! # Ok::<(), tcpdoctor_trace::Error>(())
//! ```
//!
//! It owns the attached programs (detached when it is dropped), asks the traced namespaces
//! (sock_diag, sysctls, counters) what the attribution needs, and reads the kernel
//! counters of each named namespace at start and finish so a report can show them beside
//! what the trace counted.

use std::collections::{BTreeMap, HashMap};
use std::net::SocketAddr;
use std::os::unix::fs::MetadataExt;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use tcpdoctor_host::sockets::{self, Filter, TcpState as HostState};
use tcpdoctor_model::{Finding, SynLadder};

use crate::attribute::{Config, Engine, KernelCounts, Line, Listener, Lookup, PortBudget, Summary};
use crate::btf::Reasons;
use crate::connections::{Connection, Totals};
pub use crate::loader::Hooks;
use crate::loader::{Probe, Unavailable};
use crate::raw::{Counter, Detail, Event, Process, ProcessSource};
use crate::recording::{Finish, Recorded, Recorder};
use crate::Error;

/// Drop reasons that lose nothing, counted apart from drops and never sent as records:
/// `QUEUE_PURGE` is a socket's own queues freed in bulk as it closes
/// (include/net/dropreason-core.h), about once per connection under churn (measured: 30,061
/// for 30,137 connections of wrk against nginx on loopback, issue 24).
pub const BENIGN_DROPS: &[&str] = &["QUEUE_PURGE"];

/// Which network namespaces to trace.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum Scope {
    /// The namespace this process is in.
    #[default]
    Current,
    /// Every namespace on the host.
    All,
    /// Namespaces by `ip netns` name (/run/netns/NAME).
    Named(Vec<String>),
}

/// How to trace.
#[derive(Clone, Debug, Default)]
pub struct Options {
    pub scope: Scope,
    pub config: Config,
    /// Report each connection's lifetime, bytes and process at its close
    /// ([`Session::take_connections`]; `trace --connections`).
    pub connections: bool,
    /// Write what the session measures to this file, to be replayed without root
    /// ([`crate::recording`]; `trace --record`).
    pub record: Option<PathBuf>,
}

/// A traced namespace.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Netns {
    pub inode: u32,
    /// The `ip netns` name, or `None` for the namespace tcpdoctor runs in when it has none.
    pub name: Option<String>,
    /// It is the host's (initial) network namespace; `None` when that could not be told
    /// ([`is_host_netns`]).
    pub host: Option<bool>,
}

/// The inode of the initial network namespace on kernels that fix it (`NET_NS_INIT_INO`,
/// include/uapi/linux/nsfs.h; 6.18 here). Older kernels number every namespace from
/// 0xF0000000 up (`PROC_DYNAMIC_FIRST`), so no other namespace ever has this inode.
const NET_NS_INIT_INO: u32 = 0xEFFF_FFF9;

/// Whether namespace `inode` is the host's: the fixed inode of the initial namespace, else
/// the namespace of PID 1 (unreadable without ptrace access to PID 1: then `None`).
fn is_host_netns(inode: u32, pid1: Option<u32>) -> Option<bool> {
    if inode == NET_NS_INIT_INO {
        return Some(true);
    }
    pid1.map(|p| p == inode)
}

/// How long a finishing session keeps tracing after the kernel counters' window closed
/// ([`Session::finish`]): far longer than the send of one segment, even on a loaded host.
pub const SETTLE: std::time::Duration = std::time::Duration::from_millis(50);

/// What a finished session measured.
#[derive(Clone, Debug, Serialize)]
pub struct Outcome {
    pub duration_ms: u64,
    pub netns: Vec<Netns>,
    /// Kernel-side counts (also for events whose records were lost; not for the events in
    /// `missed_events`).
    pub counts: BTreeMap<&'static str, u64>,
    /// Records lost because the ring buffer was full (also in `counts`).
    pub lost_events: u64,
    /// Events the kernel skipped, per tracepoint: its program was already running on that
    /// CPU ([`crate::loader::Probe::missed`]). In no count and no record; of any namespace
    /// (the skip comes before the namespace filter); empty when none.
    pub missed_events: BTreeMap<String, u64>,
    /// Events a kernel counter counted in the traced namespaces that the trace's own count
    /// of them lacks, less the runs the kernel reported skipping on their hooks: by counter
    /// name ("TcpExtTCPSynRetrans": SYN and SYN-ACK resends). The kernel did not run the
    /// trace's program for them and gives no reason (README, "Not every event the trace misses
    /// is a counted skip"). Empty when the trace saw all of them, or when the counters were not
    /// read (--all-netns).
    pub not_traced: BTreeMap<String, u64>,
    /// SYN and SYN-ACK resends traced at the counters' window's edges: after the programs
    /// attached and before `kernel_counters` opened, or after they closed and before the
    /// programs detached ([`SETTLE`]). They are in `counts` and may be outside the counters
    /// (a listener's SYN-ACK timer firing after the workload stopped), so the trace may count
    /// up to this many more than TcpExtTCPSynRetrans. Not serialized when 0.
    #[serde(skip_serializing_if = "is_zero")]
    pub syn_traced_at_edges: u64,
    /// TCP drops per kernel drop-reason name, counted in the kernel ([`BENIGN_DROPS`] apart).
    pub drops_by_reason: BTreeMap<String, u64>,
    /// Buffers freed with their socket, per reason ([`BENIGN_DROPS`]): not drops, nothing
    /// lost (`counts.benign_drops`).
    pub benign_drops_by_reason: BTreeMap<String, u64>,
    pub summary: Summary,
    /// Connections reported (`trace --connections` only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub connections: Option<Totals>,
    /// The connections of the last drain, not yet taken ([`Session::take_connections`]):
    /// print them before the report.
    #[serde(skip)]
    pub last_connections: Vec<Connection>,
    /// The lines of the last drain (the records that came while the session settled at its
    /// end): attributed and counted like the others, so print them before the report.
    #[serde(skip)]
    pub last_lines: Vec<Line>,
    /// Kernel counters (nstat names) that moved in each named namespace during the session.
    pub kernel_counters: BTreeMap<String, BTreeMap<String, i64>>,
    /// Hooks this kernel could not attach (the evidence they give is missing), and hooks
    /// whose skipped events it does not count (`missed_events` is then unknown for them).
    pub unavailable: Vec<Unavailable>,
    #[serde(skip)]
    pub findings: Vec<Finding>,
    /// Why the recording asked for ([`Options::record`]) is incomplete, when it is.
    #[serde(skip)]
    pub record_error: Option<String>,
}

/// For `skip_serializing_if`: a count that is zero is left out of the report.
pub fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// SYN and SYN-ACK resends traced so far (kernel-side counts).
fn syn_traced(counts: &BTreeMap<Counter, u64>) -> u64 {
    [Counter::RetransmitSyn, Counter::SynAckRetransmits]
        .iter()
        .map(|c| counts.get(c).copied().unwrap_or(0))
        .sum()
}

fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes into the timespec we own.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

fn inode_of(path: &str) -> std::io::Result<u32> {
    Ok(std::fs::metadata(path)?.ino() as u32)
}

/// `ip netns` names by namespace inode.
fn named_namespaces() -> HashMap<u32, String> {
    let mut out = HashMap::new();
    if let Ok(dir) = std::fs::read_dir("/run/netns") {
        for e in dir.flatten() {
            if let (Ok(md), Some(name)) = (e.metadata(), e.file_name().to_str()) {
                out.insert(md.ino() as u32, name.to_string());
            }
        }
    }
    out
}

/// A running trace.
pub struct Session {
    probe: Probe,
    judge: Judge<Recorded<Live>>,
    started: Instant,
    netns: Vec<Netns>,
    /// The TCP counters (`Tcp*`) of each named namespace when the counters' window opened.
    counters_before: BTreeMap<String, BTreeMap<String, u64>>,
    /// SYN and SYN-ACK resends traced before the counters' window opened.
    syn_at_open: u64,
}

/// What a session decides from the kernel's records, apart from the kernel: the engine, the
/// lookup it asks, the connections reported. The live session feeds it from the ring buffer,
/// a replay from a recording ([`crate::recording`]): one path for both.
pub(crate) struct Judge<L> {
    pub(crate) engine: Engine,
    pub(crate) lookup: L,
    /// Connections closed since the last [`Judge::take_connections`].
    connections: Vec<Connection>,
    /// Over the whole session; `None` unless [`Options::connections`].
    connection_totals: Option<Totals>,
}

impl<L: Lookup> Judge<L> {
    pub(crate) fn new(engine: Engine, lookup: L, connections: bool) -> Judge<L> {
        Judge {
            engine,
            lookup,
            connections: Vec::new(),
            connection_totals: connections.then(Totals::default),
        }
    }

    /// Decodes and attributes one record as the kernel wrote it: the line to print, if any
    /// (a close is kept as a connection; an undecodable record is counted).
    pub(crate) fn push(&mut self, bytes: &[u8]) -> Option<Line> {
        match Event::decode(bytes) {
            Ok(
                ev @ Event {
                    detail: Detail::Closed { .. },
                    ..
                },
            ) => {
                if let Some(c) = self.engine.push_connection(ev, &mut self.lookup) {
                    if let Some(t) = &mut self.connection_totals {
                        t.add(&c);
                    }
                    self.connections.push(c);
                }
                None
            }
            Ok(ev) => self.engine.push(ev, &mut self.lookup),
            Err(_) => {
                self.engine.undecoded();
                None
            }
        }
    }

    pub(crate) fn take_connections(&mut self) -> Vec<Connection> {
        std::mem::take(&mut self.connections)
    }

    /// The outcome of a session over `netns`, from what it read of the kernel at its end.
    pub(crate) fn outcome(&mut self, netns: &[Netns], fin: &Finish) -> Outcome {
        let counts: BTreeMap<Counter, u64> = fin
            .counts
            .iter()
            .filter_map(|(name, &n)| Some((Counter::from_name(name)?, n)))
            .collect();
        let kernel = KernelCounts::from_counters(&counts);
        let findings = self.engine.findings_with(&kernel, &mut self.lookup);
        let reasons = self.engine.reasons();
        let (benign_drops_by_reason, drops_by_reason): (BTreeMap<_, _>, BTreeMap<_, _>) = fin
            .drop_reasons
            .iter()
            .map(|(&r, &n)| (reasons.drop.describe(r), n))
            .partition(|(name, _)| BENIGN_DROPS.contains(&name.as_str()));
        let mut kernel_counters = BTreeMap::new();
        for n in netns {
            if let (Some(before), Some(after)) = (
                fin.counters_before.get(&n.label()),
                fin.counters_after.get(&n.label()),
            ) {
                let snapshot =
                    |values: &BTreeMap<String, u64>| tcpdoctor_host::counters::Snapshot {
                        values: values.clone(),
                    };
                kernel_counters.insert(
                    n.label(),
                    snapshot(after).delta_since(&snapshot(before)).tcp(),
                );
            }
        }
        let syn_traced = syn_traced(&counts);
        let not_traced =
            crate::reconcile::not_traced(&kernel_counters, syn_traced, &fin.missed_events);
        Outcome {
            duration_ms: fin.duration_ms,
            not_traced,
            syn_traced_at_edges: fin.syn_at_open + syn_traced.saturating_sub(fin.syn_at_close),
            netns: netns.to_vec(),
            lost_events: counts.get(&Counter::Lost).copied().unwrap_or(0),
            missed_events: fin.missed_events.clone(),
            counts: counts.iter().map(|(c, &n)| (c.name(), n)).collect(),
            drops_by_reason,
            benign_drops_by_reason,
            summary: self.engine.summary(),
            connections: self.connection_totals.clone(),
            last_connections: self.take_connections(),
            last_lines: Vec::new(),
            kernel_counters,
            unavailable: fin.unavailable.clone(),
            findings,
            record_error: None,
        }
    }
}

impl Session {
    /// Loads and attaches the programs for `opts.scope`. Errors name what is missing (BTF,
    /// privileges, a namespace).
    pub fn start(opts: Options) -> Result<Session, Error> {
        Session::start_with(opts, Hooks::All)
    }

    /// [`Session::start`] attaching only some programs: with [`Hooks::CloseHistory`] the
    /// session records connect() owners and closes (for
    /// [`Session::attribute_time_wait`]) and little else.
    pub fn start_with(opts: Options, hooks: Hooks) -> Result<Session, Error> {
        let current = inode_of("/proc/self/ns/net").map_err(|source| Error::Netns {
            name: "current".into(),
            source,
        })?;
        let names = named_namespaces();
        let pid1 = inode_of("/proc/1/ns/net").ok();
        let netns: Vec<Netns> = match &opts.scope {
            Scope::Current => vec![Netns {
                inode: current,
                name: names.get(&current).cloned(),
                host: is_host_netns(current, pid1),
            }],
            Scope::All => Vec::new(),
            Scope::Named(list) => {
                let mut v = Vec::new();
                for name in list {
                    if name.is_empty() || name.contains('/') || name == "." || name == ".." {
                        return Err(Error::Netns {
                            name: name.clone(),
                            source: std::io::Error::new(
                                std::io::ErrorKind::InvalidInput,
                                "not a namespace name (see `ip netns list`)",
                            ),
                        });
                    }
                    let inode =
                        inode_of(&format!("/run/netns/{name}")).map_err(|source| Error::Netns {
                            name: name.clone(),
                            source,
                        })?;
                    v.push(Netns {
                        inode,
                        name: Some(name.clone()),
                        host: is_host_netns(inode, pid1),
                    });
                }
                v
            }
        };
        let btf = std::fs::read("/sys/kernel/btf/vmlinux").map_err(|_| Error::MissingBtf)?;
        let reasons = Reasons::from_btf(&btf).map_err(|e| Error::Btf(e.to_string()))?;
        drop(btf);
        let filter: Option<Vec<u32>> = match opts.scope {
            Scope::All => None,
            _ => Some(netns.iter().map(|n| n.inode).collect()),
        };
        let start_ns = monotonic_ns();
        // A closing socket freeing its own queues is not a drop on the path: counted per
        // reason, never sent as a record.
        let quiet: Vec<u32> = BENIGN_DROPS
            .iter()
            .filter_map(|n| reasons.drop.value(n))
            .collect();
        let probe = Probe::load(filter.as_deref(), &quiet, hooks, opts.connections)?;
        // The counters' window opens once the programs are attached: every event it counts
        // reaches its tracepoint while they are.
        let counters_before = tcp_counters(&netns);
        let syn_at_open = syn_traced(&probe.counters().unwrap_or_default());
        let overflows_at_start: HashMap<u32, u64> = netns
            .iter()
            .filter_map(|n| {
                let v = counters_before.get(&n.label())?.get(LISTEN_OVERFLOWS)?;
                Some((n.inode, *v))
            })
            .collect();
        let mut all_names = names;
        for n in &netns {
            if let Some(name) = &n.name {
                all_names.insert(n.inode, name.clone());
            }
        }
        let recorder = match &opts.record {
            Some(path) => Some(Recorder::create(
                path,
                crate::recording::Header::new(
                    start_ns,
                    &netns,
                    &all_names,
                    &reasons,
                    &opts.config,
                    opts.connections,
                ),
            )?),
            None => None,
        };
        let live = Live::new(current, all_names, overflows_at_start, filter);
        Ok(Session {
            probe,
            judge: Judge::new(
                Engine::new(opts.config, start_ns, reasons),
                Recorded::new(live, recorder),
                opts.connections,
            ),
            started: Instant::now(),
            netns,
            counters_before,
            syn_at_open,
        })
    }

    /// The namespaces traced (empty: all).
    pub fn netns(&self) -> &[Netns] {
        &self.netns
    }

    /// Hooks this kernel could not attach.
    pub fn unavailable(&self) -> &[Unavailable] {
        self.probe.unavailable()
    }

    /// Drains the kernel's records and attributes them; returns the lines to print.
    pub fn poll(&mut self) -> Vec<Line> {
        let mut raw = Vec::new();
        self.probe.drain_bytes(|b| raw.push(b.to_vec()));
        let mut out = Vec::new();
        for b in raw {
            self.judge.lookup.record(&b);
            out.extend(self.judge.push(&b));
        }
        out
    }

    /// The connections that closed since the last call, in the order they closed (filled by
    /// [`Session::poll`] when [`Options::connections`] is set).
    pub fn take_connections(&mut self) -> Vec<Connection> {
        self.judge.take_connections()
    }

    /// Throws away the records waiting in the ring buffer without attributing them (for a
    /// caller that only reads the tables, such as `sockets --watch`); returns how many.
    pub fn discard_records(&mut self) -> usize {
        self.probe.drain(|_| {})
    }

    /// Names the last owner of each TIME_WAIT socket of `census` whose close this session
    /// recorded, and sets `census.last_owners` ([`crate::history`]). The census must be of
    /// the namespace this session traces (the first, when it traces several); `taken_at`
    /// of the census (else now) ends the traced time.
    pub fn attribute_time_wait(
        &self,
        census: &mut tcpdoctor_host::sockets::Census,
    ) -> Result<(), Error> {
        let netns = match self.netns.first() {
            Some(n) => n.inode,
            None => inode_of("/proc/self/ns/net").map_err(|source| Error::Netns {
                name: "current".into(),
                source,
            })?,
        };
        let end = census.taken_at.unwrap_or_else(Instant::now);
        let traced_for_ms = end.saturating_duration_since(self.started).as_millis() as u64;
        crate::history::attribute(&self.probe, netns, traced_for_ms, census)
    }

    /// Events the kernel skipped so far, per tracepoint ([`Outcome::missed_events`]).
    pub fn missed(&self) -> BTreeMap<String, u64> {
        self.probe.missed().0
    }

    /// Kernel-side counts so far.
    pub fn counts(&self) -> Result<BTreeMap<Counter, u64>, Error> {
        self.probe.counters()
    }

    /// Counts per cause so far (the rolling summary).
    pub fn summary(&self) -> Summary {
        self.judge.engine.summary()
    }

    /// Time since the session started.
    pub fn elapsed(&self) -> Duration {
        self.started.elapsed()
    }

    /// Findings from what was attributed so far.
    pub fn findings(&mut self) -> Vec<Finding> {
        let kernel = KernelCounts::from_counters(&self.probe.counters().unwrap_or_default());
        self.judge
            .engine
            .findings_with(&kernel, &mut self.judge.lookup)
    }

    /// Drains what is left, detaches, and reports. The returned lines of the last drain
    /// are in `Outcome::summary` counts only: call [`Session::poll`] first to print them.
    ///
    /// The kernel counters' window closes first, then the trace's, [`SETTLE`] later: the
    /// kernel counts a retransmission before it sends it and the tracepoint fires after the
    /// send (the end of `__tcp_retransmit_skb`), so an event the counters just counted may not
    /// have reached its tracepoint yet. A caller that reads counters of its own does so before
    /// calling this, for the same reason.
    pub fn finish(mut self) -> Outcome {
        let counters_after = tcp_counters(&self.netns);
        let syn_at_close = syn_traced(&self.probe.counters().unwrap_or_default());
        std::thread::sleep(SETTLE);
        let last_lines = self.poll();
        let (missed_events, skips_unknown) = self.probe.missed();
        let fin = Finish {
            duration_ms: self.started.elapsed().as_millis() as u64,
            counts: self
                .probe
                .counters()
                .unwrap_or_default()
                .into_iter()
                .map(|(c, n)| (c.name().to_string(), n))
                .collect(),
            missed_events,
            drop_reasons: self.probe.drop_reasons().unwrap_or_default(),
            counters_before: std::mem::take(&mut self.counters_before),
            counters_after,
            syn_at_open: self.syn_at_open,
            syn_at_close,
            unavailable: [self.probe.unavailable(), &skips_unknown[..]].concat(),
        };
        let mut outcome = self.judge.outcome(&self.netns, &fin);
        outcome.last_lines = last_lines;
        outcome.record_error = self.judge.lookup.finish(&fin).err().map(|e| e.to_string());
        outcome
    }
}

impl Netns {
    /// The name, or "current" for an unnamed current namespace: the key of its counters in
    /// reports.
    pub fn label(&self) -> String {
        self.name.clone().unwrap_or_else(|| "current".into())
    }

    /// What a person reads: the namespace by its `ip netns` name when it has one, and by
    /// whether it is the host's, with its inode (as `ls -l /proc/PID/ns/net` and
    /// `lsns -t net` show it) (issue 24: the header said "tracing TCP in current").
    pub fn describe(&self) -> String {
        let inode = self.inode;
        match (&self.name, self.host) {
            (Some(name), Some(true)) => {
                format!("network namespace {name} (the host's, inode {inode})")
            }
            (Some(name), _) => format!("network namespace {name} (inode {inode})"),
            (None, Some(true)) => format!("this host's network namespace (inode {inode})"),
            (None, Some(false)) => format!(
                "tcpdoctor's own network namespace (inode {inode}; not the host's, no name in /run/netns)"
            ),
            (None, None) => format!(
                "tcpdoctor's own network namespace (inode {inode}; no name in /run/netns)"
            ),
        }
    }

    /// Several namespaces described in one phrase ([`Netns::describe`]); empty: every one.
    pub fn describe_all(list: &[Netns]) -> String {
        match list {
            [] => "every network namespace".to_string(),
            [one] => one.describe(),
            many => format!(
                "network namespaces {}",
                many.iter()
                    .map(|n| match &n.name {
                        Some(name) => format!("{name} (inode {})", n.inode),
                        None => n.describe(),
                    })
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        }
    }
}

/// The TCP counters (`Tcp*`, as [`Outcome::kernel_counters`] keeps their changes) of each
/// named namespace that could be read, by [`Netns::label`].
fn tcp_counters(netns: &[Netns]) -> BTreeMap<String, BTreeMap<String, u64>> {
    let mut out = BTreeMap::new();
    for n in netns {
        if let Ok(s) = counters_in(n) {
            let tcp = s
                .values
                .into_iter()
                .filter(|(k, _)| k.starts_with("Tcp"))
                .collect();
            out.insert(n.label(), tcp);
        }
    }
    out
}

fn counters_in(n: &Netns) -> Result<tcpdoctor_host::counters::Snapshot, String> {
    match &n.name {
        Some(name) => sockets::in_netns(name, tcpdoctor_host::counters::snapshot)
            .map_err(|e| e.to_string())?
            .map_err(|e| e.to_string()),
        None => tcpdoctor_host::counters::snapshot().map_err(|e| e.to_string()),
    }
}

/// The kernel counter of accept-queue refusals (SYNs and handshake ACKs).
const LISTEN_OVERFLOWS: &str = "TcpExtListenOverflows";

/// Answers the engine's questions from the live system.
struct Live {
    current: u32,
    names: HashMap<u32, String>,
    /// socket inode -> process, rebuilt from /proc at most every 200 ms on a miss.
    owners: HashMap<u32, Process>,
    owners_at: Option<Instant>,
    ladders: HashMap<u32, Option<SynLadder>>,
    listeners: Option<(Instant, Vec<(u32, sockets::Socket)>)>,
    /// TcpExtListenOverflows per traced namespace when tracing started, and the latest
    /// reading (re-read at most every 100 ms).
    overflows_at_start: HashMap<u32, u64>,
    overflows_now: HashMap<u32, (Instant, u64)>,
    /// The traced namespaces (inodes); `None` when every namespace is traced.
    traced: Option<Vec<u32>>,
}

impl Live {
    fn new(
        current: u32,
        names: HashMap<u32, String>,
        overflows_at_start: HashMap<u32, u64>,
        traced: Option<Vec<u32>>,
    ) -> Live {
        Live {
            current,
            names,
            owners: HashMap::new(),
            owners_at: None,
            ladders: HashMap::new(),
            listeners: None,
            overflows_at_start,
            overflows_now: HashMap::new(),
            traced,
        }
    }

    /// Runs `f` in namespace `netns` (by name, or here when it is the current one).
    fn in_ns<T: Send + 'static>(
        &self,
        netns: u32,
        f: impl FnOnce() -> T + Send + 'static,
    ) -> Option<T> {
        if netns == self.current {
            return Some(f());
        }
        let name = self.names.get(&netns)?;
        sockets::in_netns(name, f).ok()
    }

    fn rescan_owners(&mut self) {
        if self
            .owners_at
            .is_some_and(|t| t.elapsed() < Duration::from_millis(200))
        {
            return;
        }
        self.owners_at = Some(Instant::now());
        self.owners = scan_owners();
    }

    fn census(&mut self, netns: u32, filter: Filter) -> Vec<sockets::Socket> {
        self.in_ns(netns, move || {
            sockets::census(&filter)
                .map(|c| c.sockets)
                .unwrap_or_default()
        })
        .unwrap_or_default()
    }
}

/// Socket inode -> the first process found holding it (as `ss -p` finds it).
fn scan_owners() -> HashMap<u32, Process> {
    let mut out = HashMap::new();
    let Ok(procs) = std::fs::read_dir("/proc") else {
        return out;
    };
    for p in procs.flatten() {
        let Some(pid) = p.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
            continue;
        };
        let Ok(fds) = std::fs::read_dir(p.path().join("fd")) else {
            continue;
        };
        let mut comm: Option<String> = None;
        for fd in fds.flatten() {
            let Ok(target) = std::fs::read_link(fd.path()) else {
                continue;
            };
            let t = target.to_string_lossy();
            let Some(ino) = t
                .strip_prefix("socket:[")
                .and_then(|s| s.strip_suffix(']'))
                .and_then(|s| s.parse::<u32>().ok())
            else {
                continue;
            };
            let c = comm.get_or_insert_with(|| {
                std::fs::read_to_string(p.path().join("comm"))
                    .map(|s| s.trim_end().to_string())
                    .unwrap_or_default()
            });
            out.entry(ino).or_insert_with(|| Process {
                pid,
                comm: c.clone(),
                source: ProcessSource::FileDescriptor,
            });
        }
    }
    out
}

impl Lookup for Live {
    fn process_of(&mut self, ino: u32) -> Option<Process> {
        if let Some(p) = self.owners.get(&ino) {
            return Some(p.clone());
        }
        self.rescan_owners();
        self.owners.get(&ino).cloned()
    }

    fn listener(&mut self, dest: SocketAddr) -> Option<Listener> {
        let fresh = self
            .listeners
            .as_ref()
            .is_some_and(|(t, _)| t.elapsed() < Duration::from_millis(100));
        if !fresh {
            let mut all = Vec::new();
            // Only where the trace looks: another namespace may hold a listener on the same
            // address (two labs, two containers) and is not this connection's server.
            let mut spaces: Vec<u32> = match &self.traced {
                Some(list) => list.clone(),
                None => {
                    let mut all: Vec<u32> = self.names.keys().copied().collect();
                    all.push(self.current);
                    all
                }
            };
            spaces.sort_unstable();
            spaces.dedup();
            for ns in spaces {
                let filter = Filter {
                    states: vec![HostState::Listen],
                    ..Filter::default()
                };
                for s in self.census(ns, filter) {
                    all.push((ns, s));
                }
            }
            self.listeners = Some((Instant::now(), all));
        }
        let found = self.listeners.as_ref()?.1.iter().find(|(_, s)| {
            s.local.port() == dest.port()
                && (s.local.ip().is_unspecified() || s.local.ip() == dest.ip())
        })?;
        let (ino, local, queued, backlog) =
            (found.1.inode, found.1.local, found.1.recv_q, found.1.send_q);
        let netns = found.0;
        Some(Listener {
            local,
            queued,
            backlog,
            process: self.process_of(ino),
            netns,
        })
    }

    fn listen_overflows(&mut self, netns: u32) -> Option<u64> {
        let start = *self.overflows_at_start.get(&netns)?;
        let fresh = self
            .overflows_now
            .get(&netns)
            .filter(|(t, _)| t.elapsed() < Duration::from_millis(100))
            .map(|&(_, v)| v);
        let now = match fresh {
            Some(v) => v,
            None => {
                let v = self
                    .in_ns(netns, || {
                        tcpdoctor_host::counters::snapshot()
                            .ok()
                            .and_then(|s| s.values.get(LISTEN_OVERFLOWS).copied())
                    })
                    .flatten()?;
                self.overflows_now.insert(netns, (Instant::now(), v));
                v
            }
        };
        Some(now.saturating_sub(start))
    }

    fn listen_overflows_now(&mut self, netns: u32) -> Option<u64> {
        self.overflows_now.remove(&netns);
        self.listen_overflows(netns)
    }

    fn syn_ladder(&mut self, netns: u32) -> Option<SynLadder> {
        if let Some(l) = self.ladders.get(&netns) {
            return l.clone();
        }
        let l = self
            .in_ns(netns, || {
                tcpdoctor_host::sysctl::TcpSettings::read()
                    .ok()
                    .map(|s| s.syn_ladder())
            })
            .flatten();
        self.ladders.insert(netns, l.clone());
        l
    }

    fn port_budget(&mut self, netns: u32, dest: SocketAddr) -> Option<PortBudget> {
        let toward: Vec<HostState> = self
            .census(netns, Filter::default())
            .iter()
            .filter(|s| s.remote == dest && s.state != HostState::Listen)
            .map(|s| s.state)
            .collect();
        let range = self
            .in_ns(netns, || {
                tcpdoctor_host::sysctl::TcpSettings::read()
                    .ok()
                    .map(|s| s.ip_local_port_range)
            })
            .flatten()?;
        Some(PortBudget {
            in_use: toward.len() as u64,
            time_wait: toward.iter().filter(|s| **s == HostState::TimeWait).count() as u64,
            range,
        })
    }

    fn netns_name(&self, netns: u32) -> Option<String> {
        self.names.get(&netns).cloned()
    }

    fn tuple_holder(
        &mut self,
        netns: u32,
        local: SocketAddr,
        remote: SocketAddr,
    ) -> Option<crate::raw::TcpState> {
        self.census(netns, Filter::default())
            .iter()
            .find(|s| {
                s.remote == remote
                    && s.local.port() == local.port()
                    && (local.ip().is_unspecified() || s.local.ip() == local.ip())
            })
            .and_then(|s| crate::raw::TcpState::from_kernel(s.state as u8))
    }

    fn tcp_timestamps(&mut self, netns: u32) -> Option<bool> {
        self.in_ns(netns, || {
            tcpdoctor_host::sysctl::TcpSettings::read()
                .ok()
                .and_then(|s| s.tcp_timestamps)
        })
        .flatten()
        .map(|v| v != 0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_namespace_is_described_by_name_and_inode_and_whether_it_is_the_hosts() {
        let ns = |name: Option<&str>, inode, pid1| Netns {
            inode,
            name: name.map(String::from),
            host: is_host_netns(inode, pid1),
        };
        // The fixed inode of the initial namespace, PID 1's unreadable.
        assert_eq!(
            ns(None, NET_NS_INIT_INO, None).describe(),
            "this host's network namespace (inode 4026531833)"
        );
        // A kernel that numbers it dynamically: PID 1's tells.
        assert_eq!(
            ns(None, 4026531992, Some(4026531992)).describe(),
            "this host's network namespace (inode 4026531992)"
        );
        assert_eq!(
            ns(None, 4026532500, Some(4026531992)).describe(),
            "tcpdoctor's own network namespace (inode 4026532500; not the host's, no name in /run/netns)"
        );
        // Neither: not called the host's, nor said not to be.
        assert_eq!(
            ns(None, 4026532500, None).describe(),
            "tcpdoctor's own network namespace (inode 4026532500; no name in /run/netns)"
        );
        let a = ns(Some("tdoc-a"), 4026532600, None);
        assert_eq!(a.describe(), "network namespace tdoc-a (inode 4026532600)");
        let b = ns(Some("tdoc-b"), 4026532601, None);
        assert_eq!(
            Netns::describe_all(&[a, b]),
            "network namespaces tdoc-a (inode 4026532600), tdoc-b (inode 4026532601)"
        );
        assert_eq!(Netns::describe_all(&[]), "every network namespace");
    }
}
