//! Issue 21, defects 4 and 5, on censuses built by hand: a socket nobody accepted is the
//! listener's, SYNs a full local listener dropped are its overflow's evidence, and one census
//! measures how long a closed window has lasted.

use std::time::{Duration, Instant};

use super::super::{Census, Owner, Socket, TcpInfo, TcpState, Timer, TwReuse};
use super::analyze;
use tcpdoctor_model::{Pathology, Rule, Severity};

fn sock(state: TcpState, local: &str, remote: &str, inode: u32) -> Socket {
    Socket {
        inode,
        info: Some(Box::new(TcpInfo::parse(&[0u8; 248]).unwrap())),
        ..Socket::new(state, local.parse().unwrap(), remote.parse().unwrap())
    }
}

fn census(sockets: Vec<Socket>, at: Option<Instant>) -> Census {
    Census {
        netns: None,
        port_range: "32768-60999".parse().unwrap(),
        sockets,
        undecoded_messages: 0,
        tw_reuse: TwReuse::default(),
        syn_ladder: Some(tcpdoctor_model::SynLadder::new(
            6,
            Some(4),
            Duration::from_secs(1),
        )),
        taken_at: at,
        attribution: None,
        last_owners: None,
        fin_timeout: None,
    }
}

fn owner(pid: u32, comm: &str) -> Owner {
    Owner {
        pid,
        comm: comm.into(),
        fd: 3,
    }
}

/// A listener with backlog 1 that never accepts: two connections in its queue holding a
/// request (one already closed by its client), and connects resending their SYN toward it.
fn never_accepting(resent: u8) -> Vec<Socket> {
    let mut l = sock(TcpState::Listen, "127.0.0.1:5300", "0.0.0.0:0", 77);
    l.recv_q = 2;
    l.send_q = 1;
    l.owners = vec![owner(799, "python3")];
    let mut v = vec![l];
    for (port, state) in [
        (33984u16, TcpState::Established),
        (33998, TcpState::CloseWait),
    ] {
        let mut s = sock(state, "127.0.0.1:5300", &format!("127.0.0.1:{port}"), 0);
        // An 18-byte request; the FIN of the CLOSE_WAIT one counts in its Recv-Q too.
        s.recv_q = 18 + u32::from(state == TcpState::CloseWait);
        s.info.as_mut().unwrap().bytes_received = Some(18);
        s.info.as_mut().unwrap().last_ack_recv_ms = 3_100;
        v.push(s);
        // The client's side: accepted by nobody, but its own socket has a file.
        v.push(sock(
            TcpState::FinWait2,
            &format!("127.0.0.1:{port}"),
            "127.0.0.1:5300",
            900 + u32::from(port % 100),
        ));
    }
    for i in 0..4u16 {
        let mut c = sock(
            TcpState::SynSent,
            &format!("127.0.0.1:{}", 34000 + i),
            "127.0.0.1:5300",
            100 + u32::from(i),
        );
        c.info.as_mut().unwrap().retransmits = resent;
        c.owners = vec![owner(799, "python3")];
        v.push(c);
    }
    // A connect toward an unreachable host elsewhere: not the listener's doing.
    let mut far = sock(TcpState::SynSent, "10.0.0.1:35000", "10.9.9.9:80", 200);
    far.info.as_mut().unwrap().retransmits = 1;
    v.push(far);
    v
}

#[test]
fn a_connection_waiting_in_the_accept_queue_is_the_listeners_problem_not_a_slow_reader() {
    let t0 = Instant::now();
    let before = census(never_accepting(3), Some(t0));
    let now = census(never_accepting(5), Some(t0 + Duration::from_secs(2)));
    let a = analyze(&now, Some(&before));
    assert!(
        a.summary.slow_readers.is_empty(),
        "{:?}",
        a.summary.slow_readers
    );
    assert!(
        !a.findings
            .iter()
            .any(|f| f.pathology == Pathology::SlowReader),
        "{:#?}",
        a.findings
    );
    let l = &a.summary.listeners[0];
    assert!(l.full);
    assert_eq!(l.unaccepted.connections, 2);
    assert_eq!(l.unaccepted.unread_bytes, 36);
    assert_eq!(l.unaccepted.closed_by_client, 1);
    // Since the last ACK each received (3.1 s), more than the censuses' 2 s interval.
    assert_eq!(l.unaccepted.waited_at_least_us, Some(3_100_000));
    // The queued connections are not data sockets of an application either.
    assert_eq!(a.summary.data_sockets, 2);
    let f = a
        .findings
        .iter()
        .find(|f| f.pathology == Pathology::AcceptQueueOverflow)
        .unwrap();
    assert!(
        f.summary.contains("2 never accepted: 36 bytes of requests unread, 1 closed by the client, the oldest waiting 3.1 s or more"),
        "{}",
        f.summary
    );
}

#[test]
fn syn_resends_toward_a_full_local_listener_are_evidence_of_its_overflow_not_a_finding() {
    let t0 = Instant::now();
    let before = census(never_accepting(3), Some(t0));
    let now = census(never_accepting(5), Some(t0 + Duration::from_secs(2)));
    let a = analyze(&now, Some(&before));
    let l = &a.summary.listeners[0];
    assert_eq!(l.syn_resent_toward, 4);
    // Each of the 4 connects resent twice between the censuses (3 -> 5).
    assert_eq!(l.syn_resends_between_censuses, Some(8));
    let p: Vec<Pathology> = a.findings.iter().map(|f| f.pathology).collect();
    // The overflow, and the connect toward 10.9.9.9 that has nothing to do with it.
    assert_eq!(
        p,
        [Pathology::AcceptQueueOverflow, Pathology::SynRetransmit],
        "{:#?}",
        a.findings
    );
    let f = &a.findings[0];
    assert!(
        f.summary.contains("consequence: SYN retransmitted: 4 connect(s) in SYN_SENT toward it have retransmitted their SYN (up to 5 times: waiting 5.0 s or more); 8 SYN resend(s) toward it in the 2.0 s between the two censuses"),
        "{}",
        f.summary
    );
    // Their 5 s wait (the 5th rung of the ladder) is the overflow's cost.
    assert_eq!(f.impact.worst_stall(), Some(Duration::from_secs(5)));
    assert_eq!(
        (f.severity, f.severity_rule),
        (Severity::Critical, Rule::LongStall)
    );
    assert_eq!(f.consequence_of, None);
    let other = &a.findings[1];
    assert!(
        other.summary.starts_with("1 connect(s) in SYN_SENT have"),
        "{}",
        other.summary
    );
}

/// A writer blocked on a reader that stopped reading two minutes ago, both on this host, as
/// `ss -tni` showed them on 6.18: the reader's last data 119.8 s ago with its window at 0, the
/// writer probing with backoff 9 and RTO 204 ms.
fn stopped_reader() -> Vec<Socket> {
    let mut reader = sock(
        TcpState::Established,
        "127.0.0.1:5400",
        "127.0.0.1:47582",
        11,
    );
    reader.recv_q = 59_392;
    {
        let i = reader.info.as_mut().unwrap();
        i.rcv_wnd_bytes = Some(0);
        i.snd_wnd_bytes = Some(65_536);
        i.last_data_recv_ms = 119_788;
    }
    reader.owners = vec![owner(6082, "reader")];
    let mut writer = sock(
        TcpState::Established,
        "127.0.0.1:47582",
        "127.0.0.1:5400",
        12,
    );
    writer.send_q = 3_815_424;
    writer.timer = Timer::ZeroWindowProbe;
    {
        let i = writer.info.as_mut().unwrap();
        i.snd_wnd_bytes = Some(0);
        i.rcv_wnd_bytes = Some(65_536);
        i.backoff = 9;
        i.rto_us = 204_000;
        i.last_data_sent_ms = 119_788;
    }
    writer.owners = vec![owner(6105, "writer")];
    let mut l = sock(TcpState::Listen, "127.0.0.1:5400", "0.0.0.0:0", 10);
    l.send_q = 16;
    vec![l, reader, writer]
}

#[test]
fn one_census_measures_how_long_a_reader_has_not_read_and_names_it_not_the_writer() {
    let a = analyze(&census(stopped_reader(), None), None);
    let f = a
        .findings
        .iter()
        .find(|f| f.pathology == Pathology::SlowReader)
        .unwrap();
    // Before: "one census: how long it lasts is unknown", a warning; doctor (two censuses
    // 2 s apart) said critical. The reader's data has waited unread for 119.8 s.
    assert_eq!(
        (f.severity, f.severity_rule),
        (Severity::Critical, Rule::LongStall),
        "{f:#?}"
    );
    assert_eq!(f.impact.worst_stall(), Some(Duration::from_millis(119_788)));
    assert!(
        f.summary.contains("stalled for at least 119.8 s"),
        "{}",
        f.summary
    );
    assert!(
        f.summary.contains("not reading: reader pid 6082"),
        "{}",
        f.summary
    );
    assert!(
        f.summary.contains("writer waiting: writer pid 6105"),
        "{}",
        f.summary
    );
    // The writer alone (the reader on another host): its probes prove a closed window of
    // 0.2 + 0.4 + 0.8 s + 6 x 1 s (each interval counted at most 1 s, the lowest cap a
    // namespace can set).
    let writer_only: Vec<Socket> = stopped_reader()
        .into_iter()
        .filter(|s| s.inode == 12)
        .collect();
    let a = analyze(&census(writer_only, None), None);
    let w = &a.summary.slow_readers[0];
    assert_eq!(w.stalled_at_least_us, Some(7_428_000));
    assert_eq!(a.findings[0].severity, Severity::Critical);
    // The same evidence in two censuses 2 s apart is judged the same.
    let t0 = Instant::now();
    let a2 = analyze(
        &census(stopped_reader(), Some(t0 + Duration::from_secs(2))),
        Some(&census(stopped_reader(), Some(t0))),
    );
    let f2 = a2
        .findings
        .iter()
        .find(|f| f.pathology == Pathology::SlowReader)
        .unwrap();
    assert_eq!(f2.severity, f.severity);
    assert_eq!(f2.impact.worst_stall(), f.impact.worst_stall());
}
