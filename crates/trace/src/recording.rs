//! A trace session's evidence, recorded and replayed: the records the kernel wrote (their
//! bytes, so that the decoder runs again), every answer the live system gave the attribution
//! (the [`Lookup`]: processes, listeners, SYN ladders, port budgets, sock_diag, counters), and
//! what the session read of the kernel at its end (its counts, skipped events, drops per
//! reason, and the kernel counters' window of each traced namespace). Replayed, a recording
//! goes through the same decoding, attribution and report assembly as the live session
//! ([`crate::session`]) with no root, no BPF and no namespace: the judgement tested on real
//! kernel evidence (tests/data/trace/, crates/trace/tests/fixtures.rs).
//!
//! Format: JSON Lines, one [`Entry`] per line tagged by `type`: a `header` first, then
//! `record`s and `answer`s in the order the session met them, and `finish` last. A record is
//! the hex of the kernel's bytes, in the byte order of the host that recorded it (tcpdoctor
//! runs on little-endian hosts only).
//!
//! What it must not do: ask the live system anything while replaying. A question the
//! recording holds no answer for is answered "unknown", as a live lookup that cannot tell
//! answers, and counted ([`Replayed::unanswered`]).

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::fs::File;
use std::io::{BufWriter, Write};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use tcpdoctor_model::SynLadder;

use crate::attribute::{Config, Engine, EventFilter, Line, Listener, Lookup, PortBudget};
use crate::btf::Reasons;
use crate::connections::Connection;
use crate::loader::Unavailable;
use crate::raw::{Process, TcpState};
use crate::session::{Judge, Netns, Outcome};
use crate::Error;

/// The version of this format; a replay refuses any other.
pub const FORMAT_VERSION: u32 = 1;

/// One line of a recording.
#[derive(Clone, Debug, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Entry {
    Header(Header),
    /// A ring-buffer record, the kernel's bytes in hex.
    Record {
        hex: String,
    },
    /// What the live system answered the engine.
    Answer {
        query: Query,
        answer: Value,
    },
    Finish(Finish),
}

impl Entry {
    /// Reads one line. By its `type` first, then as that entry: serde's internally tagged
    /// enums buffer their content and then cannot read the integer keys of its maps
    /// (namespace inodes, reason values), which the entry read directly can.
    pub fn parse(line: &str) -> Result<Entry, String> {
        #[derive(Deserialize)]
        struct Tag {
            #[serde(rename = "type")]
            kind: String,
        }
        #[derive(Deserialize)]
        struct Record {
            hex: String,
        }
        #[derive(Deserialize)]
        struct Answer {
            query: Query,
            answer: Value,
        }
        let e = |e: serde_json::Error| e.to_string();
        let tag: Tag = serde_json::from_str(line).map_err(e)?;
        Ok(match tag.kind.as_str() {
            "header" => Entry::Header(serde_json::from_str(line).map_err(e)?),
            "record" => Entry::Record {
                hex: serde_json::from_str::<Record>(line).map_err(e)?.hex,
            },
            "answer" => {
                let a: Answer = serde_json::from_str(line).map_err(e)?;
                Entry::Answer {
                    query: a.query,
                    answer: a.answer,
                }
            }
            "finish" => Entry::Finish(serde_json::from_str(line).map_err(e)?),
            other => return Err(format!("unknown entry type {other:?}")),
        })
    }
}

/// What the session knew when it started.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Header {
    pub format_version: u32,
    /// The kernel recorded (`/proc/sys/kernel/osrelease`).
    pub kernel_release: String,
    /// CLOCK_MONOTONIC when tracing started: the origin of every line's `t_us`.
    pub start_ns: u64,
    /// The namespaces traced (empty: all).
    pub netns: Vec<Netns>,
    /// `ip netns` names by namespace inode, as the session knew them.
    pub names: BTreeMap<u32, String>,
    /// The recorded kernel's drop and reset reason names (their values move between
    /// kernels).
    pub reasons: Reasons,
    pub config: RecordedConfig,
    /// Connections were reported ([`crate::session::Options::connections`]).
    pub connections: bool,
}

impl Header {
    pub(crate) fn new(
        start_ns: u64,
        netns: &[Netns],
        names: &HashMap<u32, String>,
        reasons: &Reasons,
        config: &Config,
        connections: bool,
    ) -> Header {
        Header {
            format_version: FORMAT_VERSION,
            kernel_release: std::fs::read_to_string("/proc/sys/kernel/osrelease")
                .map(|s| s.trim().to_string())
                .unwrap_or_default(),
            start_ns,
            netns: netns.to_vec(),
            // The traced namespaces' names only (all of them when all are traced): the
            // events and the engine's questions are of those.
            names: names
                .iter()
                .filter(|(k, _)| netns.is_empty() || netns.iter().any(|n| n.inode == **k))
                .map(|(&k, v)| (k, v.clone()))
                .collect(),
            reasons: reasons.clone(),
            config: RecordedConfig::from(config),
            connections,
        }
    }
}

/// The attribution's [`Config`] as recorded.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct RecordedConfig {
    pub incast_window_us: u64,
    pub incast_min_flows: usize,
    pub pid: Option<u32>,
    pub comm: Option<String>,
    pub port: Option<u16>,
}

impl From<&Config> for RecordedConfig {
    fn from(c: &Config) -> RecordedConfig {
        RecordedConfig {
            incast_window_us: c.incast_window.as_micros() as u64,
            incast_min_flows: c.incast_min_flows,
            pid: c.filter.pid,
            comm: c.filter.comm.clone(),
            port: c.filter.port,
        }
    }
}

impl From<&RecordedConfig> for Config {
    fn from(c: &RecordedConfig) -> Config {
        Config {
            incast_window: Duration::from_micros(c.incast_window_us),
            incast_min_flows: c.incast_min_flows,
            filter: EventFilter {
                pid: c.pid,
                comm: c.comm.clone(),
                port: c.port,
            },
        }
    }
}

/// A question the engine asked the live system ([`Lookup`], method by method).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Query {
    ProcessOf {
        ino: u32,
    },
    Listener {
        dest: SocketAddr,
    },
    SynLadder {
        netns: u32,
    },
    PortBudget {
        netns: u32,
        dest: SocketAddr,
    },
    ListenOverflows {
        netns: u32,
    },
    ListenOverflowsNow {
        netns: u32,
    },
    TupleHolder {
        netns: u32,
        local: SocketAddr,
        remote: SocketAddr,
    },
    TcpTimestamps {
        netns: u32,
    },
}

/// What the session read of the kernel at its end, and its counters' window.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Finish {
    pub duration_ms: u64,
    /// Kernel-side counts by [`crate::raw::Counter::name`].
    pub counts: BTreeMap<String, u64>,
    /// Events the kernel skipped, per tracepoint.
    pub missed_events: BTreeMap<String, u64>,
    /// TCP drops per kernel drop-reason value.
    pub drop_reasons: BTreeMap<u32, u64>,
    /// The TCP counters (`Tcp*`) of each named namespace when the counters' window opened
    /// and when it closed, by namespace label.
    pub counters_before: BTreeMap<String, BTreeMap<String, u64>>,
    pub counters_after: BTreeMap<String, BTreeMap<String, u64>>,
    /// SYN and SYN-ACK resends traced when the window opened and when it closed.
    pub syn_at_open: u64,
    pub syn_at_close: u64,
    pub unavailable: Vec<Unavailable>,
}

/// Writes a recording; the first write error is kept and reported at the end, later
/// writes are skipped.
pub struct Recorder {
    path: PathBuf,
    out: BufWriter<File>,
    failed: Option<std::io::Error>,
}

impl Recorder {
    /// Creates `path` and writes `header` to it.
    pub fn create(path: &Path, header: Header) -> Result<Recorder, Error> {
        let file = File::create(path).map_err(|source| Error::Record {
            path: path.display().to_string(),
            source,
        })?;
        let mut r = Recorder {
            path: path.to_path_buf(),
            out: BufWriter::new(file),
            failed: None,
        };
        r.write(&Entry::Header(header));
        Ok(r)
    }

    fn write(&mut self, e: &Entry) {
        if self.failed.is_some() {
            return;
        }
        let r = serde_json::to_writer(&mut self.out, e)
            .map_err(std::io::Error::from)
            .and_then(|()| self.out.write_all(b"\n"));
        self.failed = r.err();
    }

    /// Writes `fin` and flushes.
    fn finish(mut self, fin: &Finish) -> Result<(), Error> {
        self.write(&Entry::Finish(fin.clone()));
        let flushed = self.out.flush();
        match self.failed.take().map_or(flushed, Err) {
            Ok(()) => Ok(()),
            Err(source) => Err(Error::Record {
                path: self.path.display().to_string(),
                source,
            }),
        }
    }
}

/// A lookup whose every answer is recorded (when a recorder is given).
pub(crate) struct Recorded<L> {
    inner: L,
    recorder: Option<Recorder>,
}

impl<L: Lookup> Recorded<L> {
    pub(crate) fn new(inner: L, recorder: Option<Recorder>) -> Recorded<L> {
        Recorded { inner, recorder }
    }

    /// Records a ring-buffer record's bytes.
    pub(crate) fn record(&mut self, bytes: &[u8]) {
        if let Some(r) = &mut self.recorder {
            r.write(&Entry::Record { hex: hex(bytes) });
        }
    }

    /// Writes the end of the recording (nothing without a recorder).
    pub(crate) fn finish(&mut self, fin: &Finish) -> Result<(), Error> {
        match self.recorder.take() {
            Some(r) => r.finish(fin),
            None => Ok(()),
        }
    }

    fn answer<T: Serialize>(&mut self, query: Query, answer: &T) {
        if let Some(r) = &mut self.recorder {
            // Serializing these plain types cannot fail; a failure would record "unknown".
            let answer = serde_json::to_value(answer).unwrap_or(Value::Null);
            r.write(&Entry::Answer { query, answer });
        }
    }
}

impl<L: Lookup> Lookup for Recorded<L> {
    fn process_of(&mut self, ino: u32) -> Option<Process> {
        let a = self.inner.process_of(ino);
        self.answer(Query::ProcessOf { ino }, &a);
        a
    }

    fn listener(&mut self, dest: SocketAddr) -> Option<Listener> {
        let a = self.inner.listener(dest);
        // The listener's namespace is no part of its JSON: kept beside it.
        let recorded = a.as_ref().map(|l| (l, l.netns));
        self.answer(Query::Listener { dest }, &recorded);
        a
    }

    fn syn_ladder(&mut self, netns: u32) -> Option<SynLadder> {
        let a = self.inner.syn_ladder(netns);
        self.answer(Query::SynLadder { netns }, &a);
        a
    }

    fn port_budget(&mut self, netns: u32, dest: SocketAddr) -> Option<PortBudget> {
        let a = self.inner.port_budget(netns, dest);
        self.answer(Query::PortBudget { netns, dest }, &a);
        a
    }

    fn netns_name(&self, netns: u32) -> Option<String> {
        // From the names the header holds.
        self.inner.netns_name(netns)
    }

    fn listen_overflows(&mut self, netns: u32) -> Option<u64> {
        let a = self.inner.listen_overflows(netns);
        self.answer(Query::ListenOverflows { netns }, &a);
        a
    }

    fn listen_overflows_now(&mut self, netns: u32) -> Option<u64> {
        let a = self.inner.listen_overflows_now(netns);
        self.answer(Query::ListenOverflowsNow { netns }, &a);
        a
    }

    fn tuple_holder(
        &mut self,
        netns: u32,
        local: SocketAddr,
        remote: SocketAddr,
    ) -> Option<TcpState> {
        let a = self.inner.tuple_holder(netns, local, remote);
        self.answer(
            Query::TupleHolder {
                netns,
                local,
                remote,
            },
            &a,
        );
        a
    }

    fn tcp_timestamps(&mut self, netns: u32) -> Option<bool> {
        let a = self.inner.tcp_timestamps(netns);
        self.answer(Query::TcpTimestamps { netns }, &a);
        a
    }
}

/// The lookup of a replay: each question answered as the live system answered it, in the
/// order it answered it.
struct Answers {
    names: BTreeMap<u32, String>,
    queued: HashMap<String, VecDeque<Value>>,
    unanswered: Vec<String>,
}

impl Answers {
    fn take<T: DeserializeOwned>(&mut self, query: Query) -> Option<T> {
        let key = serde_json::to_string(&query).unwrap_or_default();
        let found = self.queued.get_mut(&key).and_then(VecDeque::pop_front);
        match found.map(serde_json::from_value::<Option<T>>) {
            Some(Ok(a)) => a,
            _ => {
                self.unanswered.push(key);
                None
            }
        }
    }
}

impl Lookup for Answers {
    fn process_of(&mut self, ino: u32) -> Option<Process> {
        self.take(Query::ProcessOf { ino })
    }

    fn listener(&mut self, dest: SocketAddr) -> Option<Listener> {
        self.take::<(Listener, u32)>(Query::Listener { dest })
            .map(|(l, netns)| Listener { netns, ..l })
    }

    fn syn_ladder(&mut self, netns: u32) -> Option<SynLadder> {
        self.take(Query::SynLadder { netns })
    }

    fn port_budget(&mut self, netns: u32, dest: SocketAddr) -> Option<PortBudget> {
        self.take(Query::PortBudget { netns, dest })
    }

    fn netns_name(&self, netns: u32) -> Option<String> {
        self.names.get(&netns).cloned()
    }

    fn listen_overflows(&mut self, netns: u32) -> Option<u64> {
        self.take(Query::ListenOverflows { netns })
    }

    fn listen_overflows_now(&mut self, netns: u32) -> Option<u64> {
        self.take(Query::ListenOverflowsNow { netns })
    }

    fn tuple_holder(
        &mut self,
        netns: u32,
        local: SocketAddr,
        remote: SocketAddr,
    ) -> Option<TcpState> {
        self.take(Query::TupleHolder {
            netns,
            local,
            remote,
        })
    }

    fn tcp_timestamps(&mut self, netns: u32) -> Option<bool> {
        self.take(Query::TcpTimestamps { netns })
    }
}

/// A recording replayed.
pub struct Replayed {
    pub header: Header,
    /// The lines the live session returned from its polls, in order.
    pub lines: Vec<Line>,
    /// The connections it reported (`--connections`), in order.
    pub connections: Vec<Connection>,
    pub outcome: Outcome,
    /// Records in the recording.
    pub records: u64,
    /// Questions the engine asked that the recording holds no answer for (each answered
    /// "unknown"): none when the replay followed the recorded session's path.
    pub unanswered: Vec<String>,
    /// Recorded answers no question took: none when it followed that path.
    pub unused_answers: usize,
}

/// Replays a recording (its text): decodes its records and attributes them, then builds the
/// outcome from its end, as [`crate::session::Session`] does live.
pub fn replay(text: &str) -> Result<Replayed, Error> {
    let bad = |line: usize, message: String| Error::Replay { line, message };
    let mut entries = Vec::new();
    for (i, l) in text.lines().enumerate() {
        let e = Entry::parse(l).map_err(|e| bad(i + 1, e))?;
        entries.push((i + 1, e));
    }
    let header = match entries.first() {
        Some((_, Entry::Header(h))) => h.clone(),
        _ => return Err(bad(1, "no header".into())),
    };
    if header.format_version != FORMAT_VERSION {
        return Err(bad(
            1,
            format!(
                "format version {} (this build reads {FORMAT_VERSION})",
                header.format_version
            ),
        ));
    }
    let mut answers = Answers {
        names: header.names.clone(),
        queued: HashMap::new(),
        unanswered: Vec::new(),
    };
    for (_, e) in &entries {
        if let Entry::Answer { query, answer } = e {
            let key = serde_json::to_string(query).unwrap_or_default();
            answers
                .queued
                .entry(key)
                .or_default()
                .push_back(answer.clone());
        }
    }
    let engine = Engine::new(
        Config::from(&header.config),
        header.start_ns,
        header.reasons.clone(),
    );
    let mut judge = Judge::new(engine, answers, header.connections);
    let mut lines = Vec::new();
    let mut connections = Vec::new();
    let mut records = 0;
    let mut fin = None;
    for (n, e) in &entries[1..] {
        match e {
            Entry::Record { hex } => {
                let bytes = unhex(hex).ok_or_else(|| bad(*n, "record: not hex".into()))?;
                records += 1;
                lines.extend(judge.push(&bytes));
                connections.extend(judge.take_connections());
            }
            Entry::Finish(f) => fin = Some(f.clone()),
            Entry::Answer { .. } => {}
            Entry::Header(_) => return Err(bad(*n, "a second header".into())),
        }
    }
    let fin = fin.ok_or_else(|| bad(entries.len(), "no finish: the recording is cut".into()))?;
    let outcome = judge.outcome(&header.netns, &fin);
    connections.extend(outcome.last_connections.iter().cloned());
    let unused_answers = judge.lookup.queued.values().map(VecDeque::len).sum();
    Ok(Replayed {
        header,
        lines,
        connections,
        outcome,
        records,
        unanswered: std::mem::take(&mut judge.lookup.unanswered),
        unused_answers,
    })
}

fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut s = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        s.push(DIGITS[usize::from(b >> 4)] as char);
        s.push(DIGITS[usize::from(b & 15)] as char);
    }
    s
}

/// The bytes of `s`, or `None` when it is not an even number of hex digits.
fn unhex(s: &str) -> Option<Vec<u8>> {
    let digit = |c: u8| (c as char).to_digit(16).map(|d| d as u8);
    let b = s.as_bytes();
    if !b.len().is_multiple_of(2) {
        return None;
    }
    b.chunks(2)
        .map(|p| Some(digit(p[0])? << 4 | digit(p[1])?))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hex_round_trips_and_malformed_hex_is_refused() {
        let b = [0u8, 1, 0x7f, 0x80, 0xff];
        assert_eq!(hex(&b), "00017f80ff");
        assert_eq!(unhex(&hex(&b)), Some(b.to_vec()));
        assert_eq!(unhex("0"), None);
        assert_eq!(unhex("zz"), None);
    }

    #[test]
    fn a_recording_without_a_header_or_a_finish_is_refused() {
        assert!(matches!(
            replay("{\"type\":\"record\",\"hex\":\"00\"}"),
            Err(Error::Replay { line: 1, .. })
        ));
        let header = Header::new(
            0,
            &[],
            &HashMap::new(),
            &Reasons::default(),
            &Config::default(),
            false,
        );
        let text = serde_json::to_string(&Entry::Header(header)).unwrap();
        match replay(&text) {
            Err(Error::Replay { message, .. }) => assert!(message.contains("no finish")),
            other => panic!("{:?}", other.err()),
        }
        // A record too short to decode is counted, as live, not a failure.
        let text = format!(
            "{text}\n{}\n{}",
            serde_json::to_string(&Entry::Record { hex: "00".into() }).unwrap(),
            serde_json::to_string(&Entry::Finish(Finish::default())).unwrap()
        );
        let r = replay(&text).unwrap();
        assert_eq!((r.records, r.outcome.summary.undecoded), (1, 1));
    }
}
