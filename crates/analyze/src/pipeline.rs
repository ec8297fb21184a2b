//! The fast path from a capture reader to an [`Analysis`], on two threads: a reading thread
//! decodes batches of segments and does the per-segment work that needs no flow state
//! ([`Prepare`]: flow slots, microburst bins); the calling thread runs the flow engine and
//! the detectors. Every caller that analyses a capture (the `analyze` command, the lab, a
//! future live input) goes through [`run`], so all get the same results at the same speed.
//!
//! This module is the one place in the crate that starts a thread, and it is the only
//! exception to the crate's purity: the thread reads from the [`Source`] the caller opened
//! (the caller chose the input; nothing here opens files, reads the clock or touches the
//! network). The engine waiting for a batch spins a bounded number of times before it
//! blocks; the reading thread, a few batches ahead, sleeps when they are all waiting and is
//! woken once the engine has taken half of them ([`Flow`]).
//! Results never depend on the thread timing: segments reach the engine in capture order.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc::{self, Receiver, SyncSender, TryRecvError};
use std::sync::Arc;
use std::thread;
use std::time::Duration;

use tcpdoctor_capture::{Error as ReadError, Segment, Source, Stats};

use crate::engine::{Analyzer, Config};
use crate::prepare::{Prepare, Released, SegKey};
use crate::Analysis;

/// What [`run`] read and found.
pub struct Outcome {
    pub analysis: Analysis,
    /// The reader's counts when the analysis stopped.
    pub stats: Stats,
    /// The read error that ended the input early, if one did (the analysis holds what came
    /// before it).
    pub error: Option<ReadError>,
    /// The stop flag was raised before the input ended.
    pub interrupted: bool,
}

/// Reads `reader` (one capture, or several merged: [`tcpdoctor_capture::Merge`]) to its end (or until `stop` is raised, or a read error) and analyses every
/// segment with `cfg`. `progress` is called on the calling thread after each batch with the
/// reader's counts so far (for a progress bar).
pub fn run<S: Source + 'static>(
    reader: S,
    cfg: Config,
    stop: &AtomicBool,
    mut progress: impl FnMut(&Stats),
) -> Outcome {
    let mut stats = reader.stats().clone();
    let mut engine = Analyzer::new(cfg);
    let mut error = None;
    let mut interrupted = false;
    // Decoding and `Prepare` run on their own thread, a few batches ahead of the flow
    // engine, so the two halves of the work overlap on two cores. Batches come back for
    // reuse, with the flow slots the engine emptied.
    let (tx, rx) = mpsc::sync_channel::<Batch>(IN_FLIGHT);
    let (back_tx, back_rx) = mpsc::channel::<Returned>();
    let (prep_tx, prep_rx) = mpsc::channel::<Prepare>();
    let flow = Arc::new(Flow::default());
    let reader_flow = Arc::clone(&flow);
    let reading = thread::spawn(move || {
        let prep = read_batches(reader, tx, back_rx, &reader_flow);
        let _ = prep_tx.send(prep);
    });
    while let Some(batch) = recv_spinning(&rx) {
        flow.taken(reading.thread());
        match batch {
            Batch::Segments(segs, keys, st) => {
                engine.push_batch(&segs, &keys);
                stats = st;
                progress(&stats);
                let mut released = Vec::new();
                engine.released(&mut released);
                let _ = back_tx.send(Returned {
                    segs,
                    keys,
                    released,
                });
                if stop.load(Ordering::Relaxed) {
                    interrupted = true;
                    break;
                }
            }
            Batch::End(st, err) => {
                stats = st;
                error = err;
                break;
            }
        }
    }
    // A Ctrl-C while blocked on a pipe shows up here, once the writer has gone away.
    interrupted |= stop.load(Ordering::Relaxed);
    // The reading thread hands over its microburst meter when it stops: at once at the end
    // of the input, at its next batch when interrupted (unless it is stuck on a silent pipe,
    // hence the bounded wait).
    drop(rx);
    flow.close(reading.thread());
    let prep = prep_rx
        .recv_timeout(Duration::from_secs(1))
        .unwrap_or_default();
    Outcome {
        analysis: engine.finish_prepared(prep),
        stats,
        error,
        interrupted,
    }
}

/// What the reading thread hands to the engine: segments with the reader's counts so far,
/// or the end (with the read error, if any).
enum Batch {
    Segments(Vec<Segment>, Vec<SegKey>, Stats),
    End(Stats, Option<ReadError>),
}

/// What the engine hands back: emptied batches for reuse and the slots it released.
struct Returned {
    segs: Vec<Segment>,
    keys: Vec<SegKey>,
    released: Vec<Released>,
}

/// Segments per batch. Small, so a batch is still in the caches when the engine thread reads
/// what the reading thread just wrote (4096 was 7% slower, median of 9 alternating runs;
/// 512 to 2048 measured alike); up to 8 batches in flight keep the reading thread busy.
const BATCH: usize = 1024;

/// The reading thread: fills batches in place (`Reader::read_batch` decodes into the slots
/// of a returned batch, so a segment is written once on this side) and sends them on.
/// Returns the `Prepare` (it holds the microburst meter) when the input ends or the engine
/// stops taking batches.
fn read_batches<S: Source>(
    mut reader: S,
    tx: SyncSender<Batch>,
    back: Receiver<Returned>,
    flow: &Flow,
) -> Prepare {
    let mut prep = Prepare::default();
    loop {
        let (mut segs, mut keys) = match back.try_recv() {
            Ok(r) => {
                prep.release(&r.released);
                (r.segs, r.keys)
            }
            Err(_) => (Vec::with_capacity(BATCH), Vec::with_capacity(BATCH)),
        };
        segs.resize(BATCH, Segment::EMPTY);
        let (n, end) = match reader.read_batch(&mut segs) {
            Ok(0) => (0, Some(None)),
            Ok(n) => (n, None),
            Err(e) => (0, Some(Some(e))),
        };
        segs.truncate(n);
        prep.keys(&segs, &mut keys);
        if n > 0 {
            flow.wait_for_room();
            if flow
                .send(&tx, Batch::Segments(segs, keys, reader.stats().clone()))
                .is_err()
            {
                return prep;
            }
        }
        if let Some(err) = end {
            let _ = flow.send(&tx, Batch::End(reader.stats().clone(), err));
            return prep;
        }
    }
}

/// How many rounds of 64 polls a thread of the pipeline makes before it sleeps on its
/// channel: about 100 us (2.5 us a round on the benchmark machine, BENCHMARKS.md). The two
/// threads hand over a batch every few tens of microseconds; putting one to sleep and waking
/// it (futex, scheduler) for each costs as much again, so each first waits briefly awake.
const SPIN_ROUNDS: u32 = 40;

/// `rx.recv()`, polling for a while before sleeping. `None` once the sender is gone.
fn recv_spinning<T>(rx: &Receiver<T>) -> Option<T> {
    for _ in 0..SPIN_ROUNDS {
        for _ in 0..64 {
            match rx.try_recv() {
                Ok(v) => return Some(v),
                Err(TryRecvError::Disconnected) => return None,
                Err(TryRecvError::Empty) => std::hint::spin_loop(),
            }
        }
    }
    rx.recv().ok()
}

/// Batches in flight from the reading thread to the engine at most.
const IN_FLIGHT: usize = 8;
/// A reading thread that found [`IN_FLIGHT`] batches waiting sleeps until the engine has
/// taken them down to this many: one wake-up per few batches, not one per batch, and no
/// CPU spent waiting while the engine (the slower half) works.
const RESUME_AT: usize = IN_FLIGHT / 2;

/// How the reading thread waits for room in the channel: it counts the batches in flight,
/// parks itself when there are [`IN_FLIGHT`], and the engine unparks it once they are down
/// to [`RESUME_AT`] (or the engine stopped taking batches).
#[derive(Default)]
struct Flow {
    in_flight: AtomicUsize,
    /// The reading thread is parked, or about to park.
    parked: AtomicBool,
    /// The engine takes no more batches.
    closed: AtomicBool,
}

impl Flow {
    /// Reading thread: returns once a batch can be sent without blocking (or the engine has
    /// stopped: the send then fails).
    fn wait_for_room(&self) {
        while self.in_flight.load(Ordering::SeqCst) >= IN_FLIGHT {
            self.parked.store(true, Ordering::SeqCst);
            // Either the engine's update after this store sees `parked` (and unparks), or
            // this check sees its update: no wake-up is lost.
            if self.in_flight.load(Ordering::SeqCst) > RESUME_AT
                && !self.closed.load(Ordering::SeqCst)
            {
                thread::park();
            }
            self.parked.store(false, Ordering::SeqCst);
            if self.closed.load(Ordering::SeqCst) {
                return;
            }
        }
    }

    /// Reading thread: sends one batch, counted in flight.
    fn send<T>(&self, tx: &SyncSender<T>, v: T) -> Result<(), ()> {
        self.in_flight.fetch_add(1, Ordering::SeqCst);
        tx.send(v).map_err(|_| ())
    }

    /// Engine: one batch taken off the channel.
    fn taken(&self, reading: &thread::Thread) {
        let left = self.in_flight.fetch_sub(1, Ordering::SeqCst) - 1;
        if left <= RESUME_AT && self.parked.swap(false, Ordering::SeqCst) {
            reading.unpark();
        }
    }

    /// Engine: takes no more batches; wakes the reading thread if it waits for room.
    fn close(&self, reading: &thread::Thread) {
        self.closed.store(true, Ordering::SeqCst);
        reading.unpark();
    }
}
