//! Header prediction (`track::predicted`) is a shortcut, not a second opinion: every capture
//! in the repository's test data gives the same analysis with it and without it.

use std::path::{Path, PathBuf};

use tcpdoctor_capture::{Reader, Segment};

use super::{assert_same_analysis, tuple, Cap, A, P, S};
use crate::engine::{Analyzer, Config};
use crate::track::{PREDICT, PREDICTED};
use crate::Analysis;

/// Every capture under tests/data/public and tests/data/analyze that the reader opens.
fn captures() -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/data");
    let mut out = Vec::new();
    for dir in ["public", "analyze"] {
        let entries = std::fs::read_dir(root.join(dir)).expect("tests/data is in the repository");
        for e in entries {
            let p = e.expect("readable directory").path();
            let name = p.file_name().unwrap().to_string_lossy().into_owned();
            let capture = [".pcap", ".pcapng", ".cap", ".snoop", ".pcap.gz"]
                .iter()
                .any(|ext| name.ends_with(ext));
            if capture {
                out.push(p);
            }
        }
    }
    out.sort();
    out
}

/// The segments of `path`, or `None` when the reader refuses it (some public captures are
/// there to be refused). A read error ends them: what came before is kept, as `analyze`
/// keeps it.
fn segments(path: &Path) -> Option<Vec<Segment>> {
    let mut r = Reader::open(path).ok()?;
    let mut all = Vec::new();
    let mut batch = vec![Segment::EMPTY; 1024];
    while let Ok(n) = r.read_batch(&mut batch) {
        if n == 0 {
            break;
        }
        all.extend_from_slice(&batch[..n]);
    }
    Some(all)
}

/// The analysis of `segs` with everything kept, and how many segments prediction took.
fn analyse(segs: &[Segment], predict: bool) -> (Analysis, u64) {
    PREDICT.with(|p| p.set(predict));
    PREDICTED.with(|n| n.set(0));
    let mut a = Analyzer::new(Config {
        keep_flows: true,
        keep_retransmissions: true,
        timelines: 16,
        ..Config::default()
    });
    for s in segs {
        a.push(s);
    }
    let out = a.finish();
    PREDICT.with(|p| p.set(true));
    (out, PREDICTED.with(std::cell::Cell::get))
}

/// The edges of prediction in one connection each: a one-byte probe at the highest sequence
/// number into a zero window (how other stacks than Linux probe), ACKs carrying SACK blocks
/// and a D-SACK, data before the handshake's ACK, a keep-alive one below the highest, a
/// reordered segment.
fn edges() -> Vec<Segment> {
    let mut c = Cap::new();
    // A one-byte probe at the highest sequence number into a zero window.
    let tp = tuple("10.0.0.1", 40000, "10.0.0.2", 80);
    c.handshake(0, tp, 0, 0);
    c.pkt(1_000, tp, true, P | A, 1, 1, 1000, 502);
    c.pkt(1_100, tp, false, A, 1, 1001, 0, 0);
    c.pkt(201_100, tp, true, A, 1001, 1, 1, 502);
    c.pkt(201_200, tp, false, A, 1, 1001, 0, 0);
    c.pkt(401_100, tp, true, A, 1001, 1, 1, 502);
    c.pkt(401_200, tp, false, A, 1, 1002, 0, 800);
    c.pkt(401_300, tp, true, P | A, 1002, 1, 500, 502);
    // SACK blocks and a D-SACK after a lost segment and its fast retransmission.
    let tp = tuple("10.0.0.1", 40001, "10.0.0.2", 80);
    c.handshake(0, tp, 0, 0);
    for k in 0..6u32 {
        c.pkt(
            1_000 + u64::from(k),
            tp,
            false,
            A,
            1 + k * 1000,
            1,
            1000,
            502,
        );
    }
    for k in 2..6u32 {
        c.pkt(1_100 + u64::from(k), tp, true, A, 1, 1001, 0, 502);
        c.with_sack(&[(2001, 1 + k * 1000)]);
    }
    c.pkt(1_200, tp, false, A, 1001, 1, 1000, 502);
    c.pkt(1_300, tp, true, A, 1, 6001, 0, 502);
    c.pkt(2_000, tp, false, A, 1001, 1, 1000, 502);
    c.pkt(2_100, tp, true, A, 1, 6001, 0, 502);
    c.with_sack(&[(1001, 2001)]);
    // Data before the handshake's last ACK, a keep-alive, a reordered segment.
    let tp = tuple("10.0.0.1", 40002, "10.0.0.2", 80);
    c.pkt(0, tp, true, S, 0, 0, 0, 502);
    c.pkt(100, tp, false, S | A, 0, 1, 0, 502);
    c.pkt(150, tp, true, P | A, 1, 1, 100, 502);
    c.pkt(200, tp, true, A, 101, 1, 0, 502);
    c.pkt(300, tp, false, A, 1, 101, 0, 502);
    c.pkt(75_000_000, tp, true, A, 100, 1, 0, 502);
    c.pkt(75_000_100, tp, false, A, 1, 101, 0, 502);
    c.pkt(75_001_000, tp, true, P | A, 201, 1, 100, 502);
    c.pkt(75_001_100, tp, true, P | A, 101, 1, 100, 502);
    c.pkt(75_001_200, tp, false, A, 1, 301, 0, 502);
    c.segs
}

#[test]
fn header_prediction_changes_no_result() {
    // The edges first, each a capture of its own.
    let segs = edges();
    let (fast, predicted) = analyse(&segs, true);
    let (slow, _) = analyse(&segs, false);
    assert!(predicted > 0);
    assert_same_analysis(&fast, &slow, "edges");
    assert!(
        fast.details.slow_readers.window_probes > 0,
        "{:?}",
        fast.details.slow_readers
    );

    let (mut files, mut segments_in_all, mut predicted_in_all) = (0, 0u64, 0u64);
    for path in captures() {
        let Some(segs) = segments(&path) else {
            continue;
        };
        let (fast, predicted) = analyse(&segs, true);
        let (slow, none) = analyse(&segs, false);
        assert_eq!(none, 0);
        assert_same_analysis(&fast, &slow, &path.display().to_string());
        files += 1;
        segments_in_all += segs.len() as u64;
        predicted_in_all += predicted;
    }
    // The comparison means something only if prediction took many segments.
    assert!(files >= 30, "{files} captures read");
    assert!(
        predicted_in_all * 2 > segments_in_all,
        "prediction took {predicted_in_all} of {segments_in_all} segments"
    );
}
