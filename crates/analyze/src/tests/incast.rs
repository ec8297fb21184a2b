//! Incast: synchronized timeouts into one receiver, and what is not incast.

use super::*;

/// `senders` answer one receiver with 4 segments each at t = 1 ms; only the first loses its
/// last segment and resends it after a 200 ms timeout. With `busy`, the other senders keep
/// sending every 10 ms meanwhile.
fn one_straggler(senders: u16, busy: bool) -> Analysis {
    let mut c = Cap::new();
    let mss = 1448;
    let tps: Vec<Tuple> = (0..senders)
        .map(|i| tuple(&format!("10.0.1.{}", i + 1), 7000, "10.0.0.100", 40000 + i))
        .collect();
    for (i, tp) in tps.iter().enumerate() {
        c.handshake(i as u64 * 10, Tuple { c: tp.s, s: tp.c }, 1000, 0);
    }
    let mut next = vec![1u32; tps.len()];
    for round in 0..4u32 {
        for (i, tp) in tps.iter().enumerate() {
            let t = 1_000 + u64::from(round) * 5 + i as u64;
            c.pkt(t, *tp, true, A, next[i], 1001, mss, 502);
            next[i] += mss;
        }
    }
    // The receiver acknowledges everything but the first sender's last segment.
    for (i, tp) in tps.iter().enumerate() {
        let acked = if i == 0 { 1 + 3 * mss } else { next[i] };
        c.pkt(1_100, *tp, false, A, 1001, acked, 0, 1000);
    }
    if busy {
        for k in 1..20u64 {
            for (i, tp) in tps.iter().enumerate().skip(1) {
                c.pkt(
                    1_100 + k * 10_000 + i as u64,
                    *tp,
                    true,
                    A,
                    next[i],
                    1001,
                    mss,
                    502,
                );
                next[i] += mss;
            }
        }
    }
    c.pkt(201_200, tps[0], true, A, 1 + 3 * mss, 1001, mss, 502);
    c.run(Config::default())
}

#[test]
fn a_timeout_while_every_other_sender_waits_is_barrier_incast() {
    let a = one_straggler(5, false);
    assert_eq!(a.totals.retransmissions_rto, 1);
    let f = only(&a, Pathology::Incast);
    assert_eq!(a.details.incast.len(), 1);
    let e = &a.details.incast[0];
    assert_eq!((e.flows_lost, e.fan_in), (1, 5));
    // The last data into the receiver before the resend was at ~1.019 ms.
    assert!(
        (195_000..=201_000).contains(&e.receiver_silent_us),
        "{}",
        e.receiver_silent_us
    );
    assert!(f.summary.contains("went silent"), "{}", f.summary);
}

#[test]
fn a_lone_timeout_is_not_incast() {
    // One sender: nobody waits on it but the receiver.
    let a = one_straggler(1, false);
    assert_eq!(a.totals.retransmissions_rto, 1);
    assert!(a.details.incast.is_empty());
    assert!(!a.findings.iter().any(|f| f.pathology == Pathology::Incast));
    // Five senders, but the others keep the receiver busy: a plain timeout.
    let a = one_straggler(5, true);
    assert_eq!(a.totals.retransmissions_rto, 1);
    assert!(a.details.incast.is_empty(), "{:?}", a.details.incast);
}

/// Five senders answer one receiver in three rounds; in each, four of them resend their
/// last segment 6 ms after the burst (a short timer). With `dsack`, the receiver had those
/// segments and reports the copies in D-SACKs; otherwise they were lost.
fn short_timer_rounds(dsack: bool) -> Analysis {
    timer_rounds(dsack, false)
}

/// [`short_timer_rounds`]; with `busy`, the fifth sender (which lost nothing) keeps sending
/// into the receiver every 500 us while the four others wait for their repairs.
fn timer_rounds(dsack: bool, busy: bool) -> Analysis {
    timer_rounds_repaired_after(dsack, busy, [6_000; 3])
}

/// [`timer_rounds`] with each round's repairs sent `repair_us[round]` after the round began
/// (only the last may exceed the 100 ms between rounds).
fn timer_rounds_repaired_after(dsack: bool, busy: bool, repair_us: [u64; 3]) -> Analysis {
    let mut c = Cap::new();
    let mss = 1448;
    let tps: Vec<Tuple> = (0..5u16)
        .map(|i| tuple(&format!("10.0.1.{}", i + 1), 7000, "10.0.0.100", 40000 + i))
        .collect();
    for (i, tp) in tps.iter().enumerate() {
        c.handshake(i as u64 * 10, Tuple { c: tp.s, s: tp.c }, 1000, 0);
    }
    let mut next = vec![1u32; tps.len()];
    for round in 0..3u64 {
        let t0 = 1_000 + round * 100_000;
        for (i, tp) in tps.iter().enumerate() {
            for k in 0..4u64 {
                c.pkt(
                    t0 + k * 10 + i as u64,
                    *tp,
                    true,
                    A,
                    next[i] + k as u32 * mss,
                    1001,
                    mss,
                    502,
                );
            }
        }
        // Four of the five have their last segment unacknowledged when the timer fires.
        for (i, tp) in tps.iter().enumerate() {
            let acked = if i < 4 {
                next[i] + 3 * mss
            } else {
                next[i] + 4 * mss
            };
            c.pkt(t0 + 1_000 + i as u64, *tp, false, A, 1001, acked, 0, 1000);
        }
        if busy {
            let tp = tps[4];
            let mut seq = next[4] + 4 * mss;
            for k in 0..10u64 {
                c.pkt(t0 + 1_200 + k * 500, tp, true, A, seq, 1001, mss, 502);
                seq += mss;
            }
            c.pkt(t0 + 5_800, tp, false, A, 1001, seq, 0, 1000);
            next[4] = seq - 4 * mss;
        }
        for (i, tp) in tps.iter().enumerate().take(4) {
            let last = next[i] + 3 * mss;
            let r = repair_us[round as usize];
            c.pkt(t0 + r + i as u64, *tp, true, A, last, 1001, mss, 502);
            c.pkt(
                t0 + r + 100 + i as u64,
                *tp,
                false,
                A,
                1001,
                last + mss,
                0,
                1000,
            );
            if dsack {
                c.with_sack(&[(last, last + mss)]);
            }
        }
        for n in &mut next {
            *n += 4 * mss;
        }
    }
    c.run(Config::default())
}

/// Issue 9 defect 9: several senders into one receiver lose their tails at the start of
/// each round, and short timers (a 5 ms rto_min) repair them: still incast, the remedy is
/// said to be in effect, and the retransmissions fold into the incast finding.
#[test]
fn synchronized_losses_repaired_by_short_timers_are_incast_with_their_retransmissions() {
    let a = short_timer_rounds(false);
    assert_eq!(a.totals.retransmissions, 12, "{:#?}", a.totals);
    assert_eq!(a.totals.retransmissions_rto, 0);
    let f = only(&a, Pathology::Incast);
    assert!(f.summary.contains("rto_min"), "{}", f.summary);
    assert_eq!(a.details.incast.len(), 3, "{:#?}", a.details.incast);
    assert!(a.details.incast.iter().all(|e| e.flows_lost == 4));
    // The 12 retransmissions are the incast finding's evidence, not a finding of their own.
    assert!(
        !a.findings
            .iter()
            .any(|f| f.pathology == Pathology::Retransmission),
        "{:#?}",
        a.findings
    );
    assert!(
        f.evidence.iter().any(|e| matches!(e,
        Evidence::Examples { items, .. } if items[0].starts_with("12 in 4 flow(s)"))),
        "{:#?}",
        f.evidence
    );
}

/// Short timers stretched by a loaded machine (late timers, RTO backoff) in one episode of
/// three: the lowered rto_min is still said to be in effect, from the episodes it shaped.
#[test]
fn one_backed_off_repair_does_not_hide_a_lowered_rto_min() {
    let a = timer_rounds_repaired_after(false, false, [6_000, 6_000, 120_000]);
    let f = only(&a, Pathology::Incast);
    assert!(
        f.summary.contains("in effect") && f.summary.contains("in 2 of 3 episodes"),
        "{}",
        f.summary
    );
    // Most episodes waited as long as the default floor: not in effect.
    let a = timer_rounds_repaired_after(false, false, [6_000, 95_000, 250_000]);
    let f = only(&a, Pathology::Incast);
    assert!(!f.summary.contains("in effect"), "{}", f.summary);
}

/// What incast costs is the time the receiver heard from no sender while repairs were
/// pending: a flow waiting for its repair while another keeps the receiver busy costs the
/// round nothing (the lab measures rounds at the bottleneck's rate; an incast capture taken
/// beside it must not claim several times the time the rounds lost).
#[test]
fn incast_costs_only_the_time_the_receiver_heard_from_no_sender() {
    let lost = |a: &Analysis| {
        only(a, Pathology::Incast)
            .impact
            .time_lost_share
            .expect("time lost share")
    };
    let idle = timer_rounds(false, false);
    let busy = timer_rounds(false, true);
    // Idle receiver: about 6 ms of silence per round until the repairs.
    assert!(lost(&idle) > 0.05, "{}", lost(&idle));
    // Busy receiver: the gaps are at most the 500 us between the busy sender's segments.
    assert!(
        lost(&busy) < lost(&idle) / 5.0,
        "{} vs {}",
        lost(&busy),
        lost(&idle)
    );
    assert_eq!(busy.details.incast.len(), 3, "{:#?}", busy.details.incast);
}

/// Issue 9 defects 9 and 10: the same synchronized resends, but the receiver had the data
/// (D-SACKs): the timers were too short for the path, nothing was lost, no incast.
#[test]
fn synchronized_spurious_resends_are_not_incast() {
    let a = short_timer_rounds(true);
    assert_eq!(a.totals.retransmissions_spurious, 12, "{:#?}", a.totals);
    assert!(a.details.incast.is_empty(), "{:#?}", a.details.incast);
    let p: Vec<Pathology> = a.findings.iter().map(|f| f.pathology).collect();
    assert_eq!(p, [Pathology::SpuriousRetransmission], "{:#?}", a.findings);
}

/// The incast lab's pattern on the receiver's capture: a receiver (10.0.0.100) asks five
/// senders for 20 segments each, three rounds 300 ms apart, through a bottleneck that drops
/// at the start of each round. Four senders lose their second segment together and repair it
/// by fast retransmit within ~1 ms, then keep sending for ~95 ms. The fifth loses its whole
/// answer: the capture sees nothing of it until the receiver, its request unanswered, resends
/// the request after its 205 ms timeout; with `dsack`, the sender answers the resend with a
/// D-SACK (the request had arrived) and a sequence number past all it had sent, and resends
/// its answer after its own timeout 12 ms later. Without, the request itself was lost: the
/// sender acknowledges it now and answers for the first time.
fn whole_answer_lost_rounds(dsack: bool) -> Analysis {
    let mss = 1448;
    let segs = 20u32;
    let tps: Vec<Tuple> = (0..5u16)
        .map(|i| tuple("10.0.0.100", 40000 + i, &format!("10.0.1.{}", i + 1), 5001))
        .collect();
    let mut c = Cap::new();
    for (i, tp) in tps.iter().enumerate() {
        c.handshake(i as u64 * 10, *tp, 0, 0);
    }
    let mut req = [1u32; 5];
    let mut ans = [1u32; 5];
    let mut plan = Vec::new();
    let mut seg = |t_us, tp, c2s, flags, seq, ack, len, sack| {
        plan.push(Planned {
            t_us,
            tp,
            c2s,
            flags,
            seq,
            ack,
            len,
            sack,
        })
    };
    for round in 0..3u64 {
        let t0 = 1_000 + round * 300_000;
        for (i, tp) in tps.iter().enumerate() {
            seg(t0 + i as u64, *tp, true, A | P, req[i], ans[i], 8, None);
        }
        for (i, tp) in tps.iter().enumerate().take(4) {
            let at = |k: u32| t0 + 100 + u64::from(k) * 5_000 + i as u64 * 10;
            let (a0, r_end) = (ans[i], req[i] + 8);
            for k in 0..segs {
                let s = a0 + k * mss;
                if k != 1 {
                    seg(at(k), *tp, false, A, s, r_end, mss, None);
                }
                // The receiver acknowledges up to the hole while segment 1 is missing.
                if k == 0 || k > 2 {
                    seg(at(k) + 10, *tp, true, A, r_end, s + mss, 0, None);
                } else if k == 2 {
                    let hole = a0 + mss;
                    seg(at(k) + 10, *tp, true, A, r_end, hole, 0, Some((s, s + mss)));
                    seg(at(k) + 1_000, *tp, false, A, hole, r_end, mss, None);
                    seg(at(k) + 1_010, *tp, true, A, r_end, s + mss, 0, None);
                }
            }
        }
        // The fifth sender: silence until the receiver's timer resends its request.
        let (tp, r0, a0) = (tps[4], req[4], ans[4]);
        seg(t0 + 205_000, tp, true, A | P, r0, a0, 8, None);
        let resent_at = if dsack {
            seg(
                t0 + 205_100,
                tp,
                false,
                A,
                a0 + segs * mss,
                r0 + 8,
                0,
                Some((r0, r0 + 8)),
            );
            t0 + 217_000
        } else {
            seg(t0 + 205_100, tp, false, A, a0, r0 + 8, 0, None);
            t0 + 205_200
        };
        for k in 0..segs {
            let s = a0 + k * mss;
            let t = resent_at + u64::from(k) * 100;
            seg(t, tp, false, A, s, r0 + 8, mss, None);
            seg(t + 10, tp, true, A, r0 + 8, s + mss, 0, None);
        }
        for i in 0..5 {
            req[i] += 8;
            ans[i] += segs * mss;
        }
    }
    plan.sort_by_key(|p| p.t_us);
    for p in plan {
        c.pkt(p.t_us, p.tp, p.c2s, p.flags, p.seq, p.ack, p.len, 502);
        if let Some(b) = p.sack {
            c.with_sack(&[b]);
        }
    }
    c.run(Config::default())
}

/// Issue "Verdicts you can trust", incast: a sender whose whole answer the round's burst
/// took leaves only silence at the receiver; the round waits until the receiver's request is
/// resent after its timeout and D-SACKed. That resend is spurious (counted so, not as loss)
/// and the incast's consequence (no finding of its own), and the wait is the round's stall: the incast finding counts the silence it ended, and its
/// cost and severity follow from it as the lab's do (here ~120 ms of each 300 ms round).
/// Three such rounds lose 374 ms in all: 46% of the receiver's time, but under the 1 s that
/// makes a share of time critical (policy, issue 21): three 205 ms timeout stalls, a warning.
#[test]
fn a_round_waiting_for_a_whole_lost_answer_counts_its_timeout_stall_as_incast() {
    let a = whole_answer_lost_rounds(true);
    let f = only(&a, Pathology::Incast);
    let share = f.impact.time_lost_share.expect("time lost share");
    // Each round: silent from ~95 ms (the last of the four) to 217 ms (the resent answer).
    assert!(
        (0.35..0.55).contains(&share),
        "{share}\n{f:#?}\n{:#?}",
        a.details.incast
    );
    assert_eq!(f.severity, tcpdoctor_model::Severity::Warning, "{f:#?}");
    assert_eq!(
        f.severity_rule,
        tcpdoctor_model::Rule::TimeoutStall,
        "{f:#?}"
    );
    assert!(f.summary.contains("D-SACK"), "{}", f.summary);
    let waits: Vec<_> = a.details.incast.iter().filter(|e| e.joined_round).collect();
    assert_eq!(waits.len(), 3, "{:#?}", a.details.incast);
    for e in waits {
        assert_eq!((e.request_timeouts, e.flows_lost), (1, 1), "{e:#?}");
        assert!((200_000..210_000).contains(&e.stall_us), "{e:#?}");
        assert!((115_000..130_000).contains(&e.silent_us), "{e:#?}");
    }
    // The resent requests are spurious, not loss, and the incast's consequence: counted in
    // the totals, named by no finding of their own (before, a spurious_retransmission
    // finding advised a timer shorter than the path; a lab incast capture ranked it a warning
    // beside the incast).
    assert_eq!(a.totals.retransmissions_spurious, 3, "{:#?}", a.totals);
    assert!(
        !a.findings.iter().any(|f| matches!(
            f.pathology,
            Pathology::Retransmission
                | Pathology::RetransmitTimeout
                | Pathology::SpuriousRetransmission
        )),
        "{:#?}",
        a.findings
    );
}

/// The same rounds, but the request itself was lost (no D-SACK: the sender acknowledges it
/// only when resent, and answers then): the wait is not a loss of the receiver's fan-in.
#[test]
fn a_resent_request_without_a_dsack_is_not_an_incast_stall() {
    let a = whole_answer_lost_rounds(false);
    assert!(
        a.details
            .incast
            .iter()
            .all(|e| e.request_timeouts == 0 && !e.joined_round),
        "{:#?}",
        a.details.incast
    );
    let share = only(&a, Pathology::Incast)
        .impact
        .time_lost_share
        .expect("time lost share");
    assert!(share < 0.05, "{share}");
}

/// Issue "Verdicts you can trust", accept-overflow: five clients complete their handshakes
/// with one server and send their requests, which the server never acknowledges (it sends
/// nothing after its SYN-ACK: a full accept queue drops the final ACK and the data after it).
/// The clients resend together after their timeouts. No bottleneck lost anything that the
/// capture can show: no incast, and the timeouts say what the capture cannot tell.
#[test]
fn first_data_resent_to_a_server_that_never_took_the_handshake_is_not_incast() {
    let mut c = Cap::new();
    let tps: Vec<Tuple> = (0..5u16)
        .map(|i| tuple(&format!("10.0.0.{}", i + 1), 50000 + i, "10.0.0.100", 5001))
        .collect();
    for (i, tp) in tps.iter().enumerate() {
        c.handshake(i as u64 * 10, *tp, 0, 0);
    }
    for round in 0..2u64 {
        for (i, tp) in tps.iter().enumerate() {
            c.pkt(
                1_000 + round * 204_000 + i as u64,
                *tp,
                true,
                A | P,
                1,
                1,
                64,
                502,
            );
        }
    }
    // The server takes the connections at last and answers.
    for (i, tp) in tps.iter().enumerate() {
        let t = 600_000 + i as u64 * 100;
        c.pkt(t, *tp, false, A | P, 1, 65, 64, 1000);
        c.pkt(t + 10, *tp, true, A, 65, 65, 0, 502);
    }
    let a = c.run(Config::default());
    assert_eq!(a.totals.retransmissions_rto, 5, "{:#?}", a.totals);
    assert!(a.details.incast.is_empty(), "{:#?}", a.details.incast);
    let p: Vec<Pathology> = a.findings.iter().map(|f| f.pathology).collect();
    assert!(!p.contains(&Pathology::Incast), "{p:?}");
    let f = only(&a, Pathology::RetransmitTimeout);
    assert!(
        f.summary.contains("5 of the flows resent their first data")
            && f.summary.contains("TcpExtListenOverflows"),
        "{}",
        f.summary
    );
}
