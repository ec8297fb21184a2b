//! Closed receive windows over time: how long a slow reader stalled its writer, and which
//! process is the reader (issue 21, defect 5). Pure: time comes from the events.
//!
//! Three events prove a connection's window closed at their instant: the writer receiving a
//! zero window while its send window was open (`K_ZERO_WINDOW`: the window just closed), the
//! writer's retransmission timer firing into a zero window, and the reader receiving a
//! zero-window probe with its own window at zero (`K_WINDOW_PROBE`). A closed window that
//! reopens and closes again shows a new `K_ZERO_WINDOW`, so an episode runs from the event
//! that closed it (or the first event seen) to the last event that proves it still closed: a
//! lower bound of the stall, as long as the writer's probes keep coming (their interval
//! doubles up to `TCP_RTO_MAX`, so a two-minute stall shows about ten).
//!
//! The reader is the process that holds the socket the probes reach: the one not reading.
//! The writer's socket belongs to the victim, never to be named as the culprit.

use std::collections::{BTreeMap, HashMap};
use std::net::SocketAddr;
use std::time::Duration;

use crate::raw::{Event, Process};

/// At most this many connections are followed (each costs a few dozen bytes).
const MAX_CONNECTIONS: usize = 100_000;

/// Both ends of a connection, the lower address first, so that the writer's events and the
/// reader's meet.
type Connection = (SocketAddr, SocketAddr);

fn connection(ev: &Event) -> Connection {
    if ev.local <= ev.remote {
        (ev.local, ev.remote)
    } else {
        (ev.remote, ev.local)
    }
}

#[derive(Clone, Debug)]
struct Episode {
    start_ns: u64,
    last_ns: u64,
}

/// Closed windows seen so far.
#[derive(Clone, Debug, Default)]
pub struct Windows {
    open: HashMap<Connection, Episode>,
    /// The longest closed window proven, and on which connection.
    worst: Option<(Duration, Connection)>,
    /// Processes whose socket received a zero-window probe: not reading (events each).
    pub readers: BTreeMap<String, u64>,
    /// Processes whose socket met the zero window: waiting to write (events each).
    pub writers: BTreeMap<String, u64>,
}

fn who(p: &Option<Process>) -> Option<String> {
    p.as_ref().map(|p| format!("{} (pid {})", p.comm, p.pid))
}

impl Windows {
    /// The writer saw the peer's window close (it was open before).
    pub fn closed(&mut self, ev: &Event) {
        let c = connection(ev);
        if let Some(e) = self.open.remove(&c) {
            self.finish(c, &e);
        }
        self.start(c, ev.ts_ns);
        self.writer(ev);
    }

    /// The writer's retransmission timer fired with the peer's window at zero.
    pub fn resent_into(&mut self, ev: &Event) {
        self.still_closed(ev);
        self.writer(ev);
    }

    /// A zero-window probe reached the reader, its window at zero.
    pub fn probed(&mut self, ev: &Event) {
        self.still_closed(ev);
        if let Some(w) = who(&ev.process) {
            *self.readers.entry(w).or_default() += 1;
        }
    }

    fn writer(&mut self, ev: &Event) {
        if let Some(w) = who(&ev.process) {
            *self.writers.entry(w).or_default() += 1;
        }
    }

    fn start(&mut self, c: Connection, ts: u64) {
        if self.open.len() < MAX_CONNECTIONS {
            self.open.insert(
                c,
                Episode {
                    start_ns: ts,
                    last_ns: ts,
                },
            );
        }
    }

    fn still_closed(&mut self, ev: &Event) {
        let c = connection(ev);
        match self.open.get_mut(&c) {
            Some(e) => {
                e.last_ns = e.last_ns.max(ev.ts_ns);
                let e = e.clone();
                self.finish(c, &e);
            }
            None => self.start(c, ev.ts_ns),
        }
    }

    fn finish(&mut self, c: Connection, e: &Episode) {
        let d = Duration::from_nanos(e.last_ns.saturating_sub(e.start_ns));
        if !d.is_zero() && self.worst.is_none_or(|(w, _)| d > w) {
            self.worst = Some((d, c));
        }
    }

    /// Whether a window of the connection between `a` and `b` was seen shut.
    pub fn seen_shut(&self, a: SocketAddr, b: SocketAddr) -> bool {
        self.open
            .contains_key(&if a <= b { (a, b) } else { (b, a) })
    }

    /// The longest closed window proven so far, and its connection.
    pub fn worst(&self) -> Option<(Duration, Connection)> {
        self.worst
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::raw::{Detail, ProcessSource};

    fn ev(ts_s: f64, local: &str, remote: &str, pid: u32, detail: Detail) -> Event {
        Event {
            ts_ns: (ts_s * 1e9) as u64,
            sk: 1,
            netns: 1,
            process: Some(Process {
                pid,
                comm: format!("p{pid}"),
                source: ProcessSource::Current,
            }),
            ino: 0,
            state: None,
            local: local.parse().unwrap(),
            remote: remote.parse().unwrap(),
            detail,
        }
    }

    const W: &str = "127.0.0.1:47582";
    const R: &str = "127.0.0.1:5400";

    #[test]
    fn the_window_closes_and_probes_prove_it_closed_until_the_last() {
        let mut w = Windows::default();
        // As traced on 6.18: the writer (pid 6105) sees the window close at 1.173 s, the
        // reader (pid 6082) receives probes at doubling intervals up to 106.7 s.
        w.closed(&ev(1.173, W, R, 6105, Detail::ZeroWindow));
        for t in [
            1.385, 1.805, 2.641, 4.305, 7.661, 14.318, 27.633, 53.997, 106.7,
        ] {
            w.probed(&ev(t, R, W, 6082, Detail::WindowProbe));
        }
        let (d, _) = w.worst().unwrap();
        assert_eq!(d.as_millis(), 105_527);
        assert_eq!(w.readers.keys().collect::<Vec<_>>(), ["p6082 (pid 6082)"]);
        assert_eq!(w.writers.keys().collect::<Vec<_>>(), ["p6105 (pid 6105)"]);
    }

    #[test]
    fn a_window_that_reopened_starts_a_new_episode() {
        let mut w = Windows::default();
        w.closed(&ev(0.0, W, R, 1, Detail::ZeroWindow));
        w.probed(&ev(0.3, R, W, 2, Detail::WindowProbe));
        // Reopened (not traced) and closed again at 10 s: the new episode is 0.1 s long,
        // the worst stays 0.3 s, never 10.1 s.
        w.closed(&ev(10.0, W, R, 1, Detail::ZeroWindow));
        w.probed(&ev(10.1, R, W, 2, Detail::WindowProbe));
        assert_eq!(w.worst().unwrap().0, Duration::from_millis(300));
        // A window seen closing once and never again proves no stall.
        let mut once = Windows::default();
        once.closed(&ev(0.0, W, R, 1, Detail::ZeroWindow));
        assert_eq!(once.worst(), None);
    }
}
