//! Timeouts, incast episodes and closed windows.

use super::*;
use crate::attribute::retransmit::unsent_text;

/// A first retransmission timeout the kernel refused (-EBUSY): nothing was sent.
fn busy_timeout() -> Detail {
    Detail::Retransmit {
        class: RetransmitClass::Timeout,
        attempt: 1,
        waited_us: Some(210_000),
        peer_silent: false,
        unsent_errno: Some(libc::EBUSY as u16),
    }
}

#[test]
fn a_timeout_that_sent_nothing_is_attributed_and_says_so() {
    let mut e = engine();
    let unsent = busy_timeout();
    let busy = e
        .push(
            ev(
                100,
                1,
                TcpState::Established,
                "10.0.0.1:40001",
                "10.0.0.2:80",
                unsent,
            ),
            &mut NoLookup,
        )
        .expect("a timeout is printed");
    assert_eq!(busy.pathology, Some(Pathology::RetransmitTimeout));
    assert!(
        busy.evidence.ends_with(
            "; nothing sent: EBUSY, the first copy was still in this host's qdisc or driver"
        ),
        "{}",
        busy.evidence
    );
    let sent = e
        .push(
            ev(
                300,
                1,
                TcpState::Established,
                "10.0.0.1:40001",
                "10.0.0.2:80",
                timeout(410_000, false),
            ),
            &mut NoLookup,
        )
        .expect("a timeout is printed");
    assert!(!sent.evidence.contains("nothing sent"), "{}", sent.evidence);
    assert_eq!(
        unsent_text(12),
        "; nothing sent: the kernel's result was -12 (Cannot allocate memory)"
    );
}

#[test]
fn timeouts_whose_first_copies_never_left_this_host_are_not_incast() {
    // Three flows' timeouts into one receiver within the window, each refused as EBUSY: no
    // segment was lost on the way, so no buffer was overflowed together.
    let mut e = engine();
    let unsent = busy_timeout();
    timeouts_into(
        &mut e,
        &["10.0.0.1:40001", "10.0.0.1:40002", "10.0.0.1:40003"],
        "10.0.0.2:8080",
        unsent,
    );
    assert!(e.summary().incast_episodes.is_empty());
    let f = e.findings(0, &mut NoLookup);
    assert!(f.iter().all(|f| f.pathology != Pathology::Incast), "{f:#?}");
    // The same timeouts, sent: incast.
    let mut e = engine();
    timeouts_into(
        &mut e,
        &["10.0.0.1:40001", "10.0.0.1:40002", "10.0.0.1:40003"],
        "10.0.0.2:8080",
        timeout(210_000, false),
    );
    assert_eq!(e.summary().incast_episodes.len(), 1);
}

/// Issue 21, defect 5: a writer blocked for two minutes on a reader that stopped reading
/// was an info "Verdict: healthy" finding, with the writer's pid among the "processes
/// (events)". The events of that run on 6.18, both ends traced: the window closes at
/// 1.173 s, then probes reach the reader at doubling intervals.
#[test]
fn a_window_closed_for_two_minutes_is_a_long_stall_of_the_reader_not_the_writer() {
    const WRITER: &str = "127.0.0.1:47582";
    const READER: &str = "127.0.0.1:5400";
    let who = |pid: u32, comm: &str| {
        Some(Process {
            pid,
            comm: comm.into(),
            source: ProcessSource::FileDescriptor,
        })
    };
    let mut e = engine();
    let mut closed = ev(
        1_173,
        1,
        TcpState::Established,
        WRITER,
        READER,
        Detail::ZeroWindow,
    );
    closed.process = who(6105, "writer");
    e.push(closed, &mut NoLookup).unwrap();
    for t in [
        1_385, 1_805, 2_641, 4_305, 7_661, 14_318, 27_633, 53_997, 106_700,
    ] {
        let mut p = ev(
            t,
            2,
            TcpState::Established,
            READER,
            WRITER,
            Detail::WindowProbe,
        );
        p.process = who(6082, "reader");
        e.push(p, &mut NoLookup).unwrap();
    }
    let f = e.findings(1, &mut NoLookup);
    let sr = f
        .iter()
        .find(|f| f.pathology == Pathology::SlowReader)
        .unwrap();
    assert_eq!(
        (sr.severity, sr.severity_rule),
        (
            tcpdoctor_model::Severity::Critical,
            tcpdoctor_model::Rule::LongStall
        ),
        "{sr:#?}"
    );
    assert_eq!(
        sr.impact.worst_stall(),
        Some(Duration::from_millis(105_527))
    );
    assert!(
        sr.summary.contains("not reading: reader (pid 6082)"),
        "{}",
        sr.summary
    );
    let blamed: Vec<&Vec<String>> = sr
        .evidence
        .iter()
        .filter_map(|e| match e {
            Evidence::Examples { what, items } if what.starts_with("processes not reading") => {
                Some(items)
            }
            _ => None,
        })
        .collect();
    assert_eq!(blamed, [&vec!["reader (pid 6082): 9".to_string()]]);
    let ev_text = format!("{:?}", sr.evidence);
    assert!(
        ev_text.contains("writer waiting: writer (pid 6105) on 127.0.0.1:47582 -> 127.0.0.1:5400"),
        "{ev_text}"
    );
}

/// Issue 21, defect 8: the lab said "up to 3 flows" (its largest episode) while the trace's
/// finding said "timeouts of 6 flows into one receiver within 20 ms" for two episodes of 3:
/// the distinct flows of all episodes, worded as one window. The finding says what it
/// counts: the largest episode, the episodes, and the distinct flows across them.
#[test]
fn the_incast_finding_names_its_largest_episode_apart_from_the_flows_of_all_episodes() {
    let mut e = engine();
    for (start_ms, senders) in [(100, [2, 3, 4]), (600, [5, 6, 7])] {
        for (i, s) in senders.iter().enumerate() {
            e.push(
                ev(
                    start_ms + i as u64 * 5,
                    *s,
                    TcpState::Established,
                    &format!("10.0.0.{s}:5001"),
                    "10.0.0.1:40000",
                    timeout(210_000, false),
                ),
                &mut NoLookup,
            );
        }
    }
    assert_eq!(e.summary().incast_episodes.len(), 2);
    let f = e.findings(0, &mut NoLookup);
    let incast = f.iter().find(|f| f.pathology == Pathology::Incast).unwrap();
    assert_eq!(
        incast.summary,
        "2 incast episode(s): timeouts of up to 3 flows into one receiver within 20 ms; 6 distinct flows timed out across them"
    );
    // Harm is every flow that stalled, in any episode.
    assert_eq!(incast.impact.affected, 6);
}

/// One cause, one finding: a timeout and a fast retransmit on this host's flows are its
/// losses repaired two ways; the trace cannot tell one loss from another, so the fast
/// retransmit is the timeout finding's evidence, not a second finding.
#[test]
fn a_timeout_and_a_fast_retransmit_are_one_finding() {
    let mut e = engine();
    let fast = Detail::Retransmit {
        class: RetransmitClass::Fast,
        attempt: 0,
        waited_us: None,
        peer_silent: false,
        unsent_errno: None,
    };
    for (ts, sk, d) in [(100, 1, timeout(210_000, false)), (150, 2, fast)] {
        let l = e.push(
            ev(
                ts,
                sk,
                TcpState::Established,
                "10.0.0.1:40001",
                "10.0.0.2:80",
                d,
            ),
            &mut NoLookup,
        );
        assert!(l.is_some());
    }
    let f = e.findings(10, &mut NoLookup);
    let ps: Vec<Pathology> = f.iter().map(|f| f.pathology).collect();
    assert_eq!(ps, [Pathology::RetransmitTimeout], "{f:#?}");
    assert!(
        f[0].summary
            .contains("losses also repaired without a timeout"),
        "{}",
        f[0].summary
    );
}
