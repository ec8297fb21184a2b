//! Spurious retransmissions: copies the receiver already had, and what they stalled.

use super::*;

/// Issue 9 defect 10: a tail loss probe that the receiver reports back in a D-SACK repeated
/// data it had: spurious, not loss.
#[test]
fn dsack_reported_retransmissions_are_spurious_not_loss() {
    let tp = tuple("10.0.0.1", 40000, "10.0.0.2", 80);
    let mut c = Cap::new();
    c.handshake(0, tp, 0, 0);
    c.flight(1_000, tp, 10, 1000);
    // The probe: the last segment again, 30 ms later, before any ACK.
    let probe = c.pkt(31_000, tp, true, A, 9_001, 1, 1000, 502);
    // The receiver had it: the ACK covers everything and reports the copy (RFC 2883).
    c.pkt(31_100, tp, false, A, 1, 10_001, 0, 1000);
    c.with_sack(&[(9_001, 10_001)]);
    let a = c.run(Config::default());
    assert_eq!(a.totals.retransmissions, 1, "{:#?}", a.totals);
    assert_eq!(a.totals.retransmissions_spurious, 1);
    let f = only(&a, Pathology::SpuriousRetransmission);
    assert_eq!(packets(f)[0], &vec![probe]);
    assert!(
        !a.findings
            .iter()
            .any(|f| f.pathology == Pathology::Retransmission),
        "{:#?}",
        a.findings
    );
}

/// A reader whose buffer filled (a zero window) acknowledges late once it reads again, and the
/// sender's tail-loss probe repeats data it had: the slow reader's consequence, folded into its
/// finding; the same probe with no window shut is a spurious retransmission of its own.
#[test]
fn probes_into_a_receiver_that_shut_its_window_fold_into_the_slow_reader() {
    let tp = tuple("10.0.0.1", 40000, "10.0.0.2", 5001);
    let run = |shut: bool| {
        let mut c = Cap::new();
        c.handshake(0, tp, 0, 0);
        c.flight(1_000, tp, 10, 1000);
        // Everything taken; with `shut` the reader's buffer is full: a zero window.
        c.pkt(
            5_000,
            tp,
            false,
            A,
            1,
            10_001,
            0,
            if shut { 0 } else { 65_000 },
        );
        // It read: the window opens and the writer sends the next flight.
        c.pkt(30_000, tp, false, A, 1, 10_001, 0, 65_000);
        for i in 0..10u32 {
            c.pkt(
                31_000 + u64::from(i) * 10,
                tp,
                true,
                A,
                10_001 + i * 1000,
                1,
                1000,
                502,
            );
        }
        // The probe: the last segment again before any ACK; the reader had it (D-SACK).
        c.pkt(61_000, tp, true, A, 19_001, 1, 1000, 502);
        c.pkt(61_100, tp, false, A, 1, 20_001, 0, 65_000);
        c.with_sack(&[(19_001, 20_001)]);
        c.run(Config::default())
    };
    let a = run(true);
    assert_eq!(
        a.details.spurious_retransmissions.tlp, 1,
        "{:#?}",
        a.details
    );
    assert!(
        a.findings
            .iter()
            .all(|f| f.pathology != Pathology::SpuriousRetransmission),
        "{:#?}",
        a.findings
    );
    let slow = only(&a, Pathology::SlowReader);
    assert!(
        slow.summary.contains(
            "consequence: Spurious retransmissions (no loss): 1 tail-loss probe(s) on 1 flow(s)"
        ),
        "{}",
        slow.summary
    );
    assert!(slow
        .summary
        .contains("repeated data the reader already had"));
    let a = run(false);
    assert!(a
        .findings
        .iter()
        .all(|f| f.pathology != Pathology::SlowReader));
    let f = only(&a, Pathology::SpuriousRetransmission);
    assert!(
        f.summary.ends_with("1 TLP, 0 other): not loss"),
        "{}",
        f.summary
    );
}

/// A timeout resend of data the receiver had already acknowledged stalled its sender only if
/// the sender had more to send: as the sender's last word (Wireshark's http.cap: an answer
/// resent 821 ms after the client acknowledged all of it) nobody waited, and the finding is
/// info; followed by new data, the sender waited the timer out for nothing: a stall, judged.
#[test]
fn a_spurious_timeout_stalls_only_a_sender_with_more_to_send() {
    let tp = tuple("10.0.0.1", 40000, "10.0.0.2", 80);
    let run = |more: bool| {
        let mut c = Cap::new();
        c.handshake(0, tp, 0, 0);
        c.pkt(1_000, tp, true, A | P, 1, 1, 1000, 502);
        c.pkt(41_000, tp, false, A, 1, 1_001, 0, 1000);
        // The ACK never reached the sender: it resends after 800 ms.
        c.pkt(801_000, tp, true, A | P, 1, 1, 1000, 502);
        c.pkt(841_000, tp, false, A, 1, 1_001, 0, 1000);
        if more {
            c.pkt(842_000, tp, true, A | P, 1_001, 1, 1000, 502);
            c.pkt(882_000, tp, false, A, 1, 2_001, 0, 1000);
        }
        c.run(Config::default())
    };
    let a = run(false);
    assert_eq!(a.details.spurious_retransmissions.rto, 1);
    let f = only(&a, Pathology::SpuriousRetransmission);
    assert_eq!(f.severity, tcpdoctor_model::Severity::Info, "{f:#?}");
    assert!(f.summary.contains("held nothing back"), "{}", f.summary);
    let a = run(true);
    let f = only(&a, Pathology::SpuriousRetransmission);
    // The idle gap the timer ended: from the receiver's ACK to the resend.
    assert_eq!(f.impact.worst_stall_us, Some(760_000), "{f:#?}");
    assert_eq!(f.severity, tcpdoctor_model::Severity::Warning, "{f:#?}");
}
