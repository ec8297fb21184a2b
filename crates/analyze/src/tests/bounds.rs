//! Bounded state under many connections, and the worst connections kept for the timeline.

use super::*;

#[test]
fn memory_stays_bounded_with_many_short_connections() {
    // 50 000 connections over 250 s of capture time, each on a new port pair.
    let mut a = Analyzer::new(Config::default());
    let mut frame = 0;
    let t0 = 1_700_000_000_000_000_000u64;
    for i in 0..50_000u32 {
        let tp = tuple(
            "10.0.0.1",
            (1024 + i % 60000) as u16,
            &format!("10.1.{}.{}", i / 60000, 1),
            80,
        );
        let mut cap = Cap::new();
        cap.t0_ns = t0 + u64::from(i) * 5_000_000;
        cap.handshake(0, tp, i, i);
        cap.close(300, tp, i + 1, i + 1, true);
        for mut s in cap.segs {
            frame += 1;
            s.frame = frame;
            a.push(&s);
        }
    }
    // 200 conn/s x (2 s linger + 1 s sweep) plus slack.
    let a = a.finish();
    assert!(
        a.totals.peak_tracked_connections < 1_000,
        "{}",
        a.totals.peak_tracked_connections
    );
    assert_eq!(a.totals.connections, 50_000);
}

/// Issue 9 defect 11: SYNs from many distinct sources, none answered, are named (they used
/// to be "healthy"), and the half-open state ends with the SYN ladder: memory stays bounded.
#[test]
fn unanswered_syns_from_many_sources_are_a_syn_flood_with_bounded_state() {
    let mut c = Cap::new();
    const N: u32 = 100_000;
    // 20,000 SYNs a second for 5 s, each from its own address, each sent once.
    for i in 0..N {
        let src = std::net::Ipv4Addr::from(0x0a00_0000 + i).to_string();
        let tp = tuple(&src, 40000 + (i % 20000) as u16, "10.200.0.1", 80);
        c.pkt(u64::from(i) * 50, tp, true, S, i, 0, 0, 64240);
    }
    let a = c.run(Config::default());
    let u = &a.details.unanswered_syns;
    // The last ~2 s of SYNs were still within their first rung when the capture ended.
    assert!(
        u.connections >= 50_000 && u.connections < u64::from(N),
        "{u:?}"
    );
    assert_eq!(u.connections + u.waiting_at_end, u64::from(N));
    assert_eq!(u.sent_once, u.connections);
    // The sources of those given up and of those overdue at the end.
    let once = u.connections + u.waiting_overdue;
    assert!(u.distinct_sources.abs_diff(once) * 20 <= once, "{u:?}");
    assert_eq!(u.shape, Some(crate::detect::Shape::Flood));
    let f = only(&a, Pathology::UnansweredSyn);
    assert_eq!(f.severity, tcpdoctor_model::Severity::Critical);
    assert!(f.summary.contains("SYN flood"), "{}", f.summary);
    // Held at once: the SYNs of the last ~2.1 s (first rung, its timer lateness, 1 s slack).
    assert!(
        a.totals.peak_tracked_connections < 50_000,
        "{}",
        a.totals.peak_tracked_connections
    );
    assert_eq!(a.totals.half_open_summarised_early, 0);
}

/// Issue 9 defect 12: per-destination and per-receiver tables are bounded: 20,000 distinct
/// clients, each with one short connection, leave bounded tables (counted as forgotten).
#[test]
fn per_destination_and_receiver_tables_are_bounded_with_many_distinct_clients() {
    let mut c = Cap::new();
    for i in 0..20_000u32 {
        let src = std::net::Ipv4Addr::from(0x0a00_0000 + i).to_string();
        let tp = tuple(&src, 40000, "10.200.0.1", 80);
        let t = u64::from(i) * 100;
        c.handshake(t, tp, 1000, 5000);
        c.pkt(t + 110, tp, true, A | P, 1001, 5001, 100, 502);
        c.pkt(t + 120, tp, false, A | P, 5001, 1101, 300, 1000);
        c.close(t + 130, tp, 1101, 5301, true);
    }
    let a = c.run(Config::default());
    assert!(a.findings.is_empty(), "{:#?}", a.findings);
    assert_eq!(a.totals.connections, 20_000);
    assert!(
        a.details.destinations_forgotten >= 10_000,
        "{}",
        a.details.destinations_forgotten
    );
    assert!(
        a.details.receivers_dropped >= 10_000,
        "{}",
        a.details.receivers_dropped
    );
}

#[test]
fn the_worst_connections_keep_their_syn_ladder_timeouts_and_zero_windows_in_order() {
    use crate::timeline::MarkKind;
    let mut c = Cap::new();
    // A connect answered after two SYN resends (2 s of waiting).
    let syn = tuple("10.0.0.1", 40000, "10.0.0.2", 80);
    c.pkt(0, syn, true, S, 100, 0, 0, 64240);
    c.pkt(1_000_000, syn, true, S, 100, 0, 0, 64240);
    c.pkt(2_000_000, syn, true, S, 100, 0, 0, 64240);
    c.pkt(2_000_100, syn, false, S | A, 9, 101, 0, 65160);
    c.pkt(2_000_200, syn, true, A, 101, 10, 0, 502);
    // A transfer with a 210 ms gap ended by a timeout, then 800 ms of zero window.
    let tp = tuple("10.0.0.3", 40001, "10.0.0.2", 80);
    c.handshake(3_000_000, tp, 0, 0);
    c.pkt(3_001_000, tp, true, A, 1, 1, 1000, 502);
    let rto = c.pkt(3_211_000, tp, true, A, 1, 1, 1000, 502);
    c.pkt(3_211_100, tp, false, A, 1, 1001, 0, 0);
    c.pkt(4_011_100, tp, false, A, 1, 1001, 0, 800);
    // A clean connection: no stall, not kept.
    let clean = tuple("10.0.0.4", 40002, "10.0.0.2", 80);
    c.handshake(5_000_000, clean, 0, 0);
    c.transfer(5_001_000, clean, 1, 1, 3, 1000);
    let a = c.run(Config {
        timelines: 8,
        ..Config::default()
    });
    let w = &a.worst_connections;
    assert_eq!(w.len(), 2, "{w:#?}");
    assert_eq!(w[0].client, "10.0.0.1:40000");
    assert_eq!(w[0].stalled_ns, 2_000_100_000);
    let kinds: Vec<MarkKind> = w[0].marks.iter().map(|m| m.kind).collect();
    assert_eq!(
        kinds,
        [
            MarkKind::Syn,
            MarkKind::SynResent,
            MarkKind::SynResent,
            MarkKind::SynAck
        ]
    );
    assert_eq!(w[1].client, "10.0.0.3:40001");
    let gap = w[1]
        .marks
        .iter()
        .find(|m| m.kind == MarkKind::TimeoutGap)
        .unwrap();
    assert_eq!(gap.frame, rto);
    assert_eq!(gap.end_ns.unwrap() - gap.start_ns, 210_000_000);
    let zero = w[1]
        .marks
        .iter()
        .find(|m| m.kind == MarkKind::ZeroWindow)
        .unwrap();
    assert_eq!(zero.end_ns.unwrap() - zero.start_ns, 800_000_000);
    assert_eq!(w[1].stalled_ns, 1_010_000_000);
    // Off by default.
    assert!(c.run(Config::default()).worst_connections.is_empty());
}
