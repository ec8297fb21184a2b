use super::super::TcpInfo;
use super::*;
use tcpdoctor_model::{Evidence, Pathology, Rule, Severity};

fn sock(state: TcpState, local: &str, remote: &str) -> Socket {
    Socket::new(state, local.parse().unwrap(), remote.parse().unwrap())
}

fn info() -> TcpInfo {
    TcpInfo::parse(&[0u8; 248]).unwrap()
}

fn census(sockets: Vec<Socket>, range: &str) -> Census {
    Census::new(sockets, range.parse().unwrap())
}

/// Two censuses `gap` apart: (earlier, later).
fn pair(earlier: Vec<Socket>, later: Vec<Socket>, gap: Duration) -> (Census, Census) {
    let t0 = std::time::Instant::now();
    let mut a = census(earlier, "32768-60999");
    a.taken_at = Some(t0);
    let mut b = census(later, "32768-60999");
    b.taken_at = Some(t0 + gap);
    (a, b)
}

fn tw(local: &str, remote: &str, left_ms: u32) -> Socket {
    let mut s = sock(TcpState::TimeWait, local, remote);
    s.timer = Timer::TimeWait;
    s.timer_expires_ms = left_ms;
    s
}

#[test]
fn time_wait_per_destination_and_headroom() {
    let mut v = Vec::new();
    for p in 40000..40150 {
        v.push(sock(
            TcpState::TimeWait,
            &format!("10.0.0.1:{p}"),
            "10.0.0.2:80",
        ));
    }
    for p in 40000..40010 {
        v.push(sock(
            TcpState::TimeWait,
            &format!("10.0.0.1:{p}"),
            "10.0.0.3:80",
        ));
    }
    v.push(sock(TcpState::Established, "10.0.0.1:40199", "10.0.0.2:80"));
    let a = analyze(&census(v, "40000-40199"), None);
    let d = &a.summary.destinations[0];
    assert_eq!(d.remote.to_string(), "10.0.0.2:80");
    assert_eq!(
        (d.time_wait, d.ephemeral_ports_in_use, d.headroom_ports),
        (150, 151, 49)
    );
    assert!((d.sustainable_connect_rate_per_s - 200.0 / 60.0).abs() < 1e-9);
    assert!((d.time_wait_rate_per_s - 2.5).abs() < 1e-9);
    assert_eq!(a.summary.destinations[1].time_wait, 10);
    assert_eq!(a.findings.len(), 1, "{:?}", a.findings);
    assert_eq!(a.findings[0].pathology, Pathology::PortExhaustion);
    // 151 of 200 ports: the policy's budget pressure.
    assert_eq!(a.findings[0].severity, Severity::Warning);
    assert_eq!(a.findings[0].severity_rule, Rule::BudgetPressure);
    assert_eq!(a.findings[0].impact.budget_used, Some(151.0 / 200.0));
    assert_eq!(a.summary.by_state[&TcpState::TimeWait], 160);
}

/// Issue 16: with tcp_tw_reuse=2 connect() takes over TIME_WAIT ports toward loopback
/// once they are a second old; a range full of such sockets is not exhausted.
#[test]
fn loopback_time_wait_reusable_under_tw_reuse_2_is_not_port_exhaustion() {
    let mut v = Vec::new();
    for p in 40000..40200 {
        // In TIME_WAIT for 5 s.
        v.push(tw(&format!("127.0.0.1:{p}"), "127.0.0.1:5000", 55_000));
        v.push(tw(&format!("10.0.0.1:{p}"), "10.0.0.2:80", 55_000));
    }
    let mut c = census(v, "40000-40199");
    c.tw_reuse = TwReuse {
        tcp_tw_reuse: Some(2),
        tcp_timestamps: Some(1),
        tcp_tw_reuse_delay_ms: 1000,
    };
    let a = analyze(&c, None);
    let lo = a
        .summary
        .destinations
        .iter()
        .find(|d| d.remote.port() == 5000)
        .unwrap();
    assert!(lo.tw_reuse);
    assert_eq!(
        (
            lo.ephemeral_ports_in_use,
            lo.time_wait_reusable,
            lo.ports_unavailable
        ),
        (200, 200, 0)
    );
    assert_eq!(lo.headroom_ports, 200);
    assert!((lo.sustainable_connect_rate_per_s - 200.0).abs() < 1e-9);
    // The remote destination is not loopback: its 200 TIME_WAIT hold every port.
    let far = &a.summary.destinations[0];
    assert_eq!(far.remote.to_string(), "10.0.0.2:80");
    assert_eq!((far.tw_reuse, far.ports_unavailable), (false, 200));
    let ex: Vec<&Finding> = a
        .findings
        .iter()
        .filter(|f| f.pathology == Pathology::PortExhaustion)
        .collect();
    assert_eq!(ex.len(), 1, "{ex:?}");
    assert!(ex[0].summary.contains("10.0.0.2:80"), "{}", ex[0].summary);
    assert_eq!(ex[0].severity, Severity::Critical);

    // Young TIME_WAIT (0.2 s) still holds its ports: connect() would fail now.
    let young: Vec<Socket> = (40000..40200)
        .map(|p| tw(&format!("127.0.0.1:{p}"), "127.0.0.1:5000", 59_800))
        .collect();
    let mut c = census(young, "40000-40199");
    c.tw_reuse = TwReuse {
        tcp_tw_reuse: Some(2),
        tcp_timestamps: Some(1),
        tcp_tw_reuse_delay_ms: 1000,
    };
    let a = analyze(&c, None);
    assert_eq!(a.findings.len(), 1);
    assert_eq!(a.findings[0].severity, Severity::Critical);
    assert!(
        a.findings[0].summary.contains("1000 ms"),
        "{}",
        a.findings[0].summary
    );
    // With tcp_tw_reuse=0 the old loopback TIME_WAIT holds its ports too.
    let old: Vec<Socket> = (40000..40200)
        .map(|p| tw(&format!("127.0.0.1:{p}"), "127.0.0.1:5000", 30_000))
        .collect();
    let a = analyze(&census(old, "40000-40199"), None);
    assert_eq!(a.findings.len(), 1);
    assert_eq!(a.summary.destinations[0].ports_unavailable, 200);
}

#[test]
fn full_listener_and_inbound_attribution() {
    let mut l = sock(TcpState::Listen, "0.0.0.0:5000", "0.0.0.0:0");
    l.recv_q = 2;
    l.send_q = 1;
    let mut ok = sock(TcpState::Listen, "127.0.0.1:6000", "0.0.0.0:0");
    ok.recv_q = 1;
    ok.send_q = 1;
    let acc = sock(TcpState::Established, "127.0.0.1:5000", "127.0.0.1:40001");
    let tw = sock(TcpState::TimeWait, "127.0.0.1:7000", "127.0.0.1:40002");
    let a = analyze(&census(vec![l, ok, acc, tw], "32768-60999"), None);
    let ls = &a.summary.listeners;
    assert_eq!(ls.len(), 3);
    assert!(ls[0].full && ls[0].local.port() == 5000);
    assert_eq!(ls[0].connections[&TcpState::Established], 1);
    assert!(!ls.iter().find(|l| l.local.port() == 6000).unwrap().full);
    let orphan = ls.iter().find(|l| l.local.port() == 7000).unwrap();
    assert!(!orphan.listening);
    assert!(a.summary.destinations.is_empty());
    assert_eq!(a.findings.len(), 1);
    assert_eq!(a.findings[0].pathology, Pathology::AcceptQueueOverflow);
}

#[test]
fn slow_reader_signs_and_growth() {
    let mut rx = sock(TcpState::Established, "127.0.0.1:5000", "127.0.0.1:40001");
    rx.recv_q = 100_000;
    rx.info = Some(Box::new(TcpInfo {
        rcv_wnd_bytes: Some(0),
        ..info()
    }));
    let mut tx = sock(TcpState::Established, "127.0.0.1:40001", "127.0.0.1:5000");
    tx.send_q = 50_000;
    tx.info = Some(Box::new(TcpInfo {
        snd_wnd_bytes: Some(0),
        rcv_wnd_bytes: Some(65535),
        ..info()
    }));
    // 1000 bytes waiting at the earlier census, 1000 more received since, nothing read.
    let mut grow = sock(TcpState::Established, "127.0.0.1:6000", "127.0.0.1:40002");
    grow.recv_q = 2000;
    grow.info = Some(Box::new(TcpInfo {
        snd_wnd_bytes: Some(65535),
        rcv_wnd_bytes: Some(30000),
        bytes_received: Some(12_000),
        ..info()
    }));
    let mut earlier = grow.clone();
    earlier.recv_q = 1000;
    earlier.info.as_mut().unwrap().bytes_received = Some(11_000);
    let (prev, now) = pair(
        vec![earlier],
        vec![rx, tx, grow.clone()],
        Duration::from_millis(500),
    );
    let a = analyze(&now, Some(&prev));
    let signs: Vec<SlowSign> = a.summary.slow_readers.iter().map(|f| f.sign).collect();
    assert_eq!(
        signs,
        vec![
            SlowSign::ZeroReceiveWindow,
            SlowSign::PeerZeroWindow,
            SlowSign::ReceiveQueueGrowing
        ]
    );
    assert_eq!(a.summary.slow_readers[2].recv_q_growth_bytes, Some(1000));
    // The unread data waited the whole 500 ms; the zero windows were seen once only.
    assert_eq!(a.summary.slow_readers[2].stalled_at_least_us, Some(500_000));
    assert_eq!(a.summary.slow_readers[0].stalled_at_least_us, None);
    let f = a
        .findings
        .iter()
        .find(|f| f.pathology == Pathology::SlowReader)
        .unwrap();
    assert_eq!(f.severity, Severity::Warning);
    assert_eq!(f.severity_rule, Rule::TimeoutStall);
    // Without the earlier sample the growing socket is not flagged.
    let a = analyze(&census(vec![grow], "32768-60999"), None);
    assert!(a.findings.is_empty());
}

fn server_socket(recv_q: u32, received: u64) -> Socket {
    let mut s = sock(TcpState::Established, "127.0.0.1:8080", "127.0.0.1:40002");
    s.recv_q = recv_q;
    s.info = Some(Box::new(TcpInfo {
        snd_wnd_bytes: Some(65535),
        rcv_wnd_bytes: Some(65483),
        bytes_received: Some(received),
        ..info()
    }));
    s
}

/// Issue 17: under wrk churn a census often catches a request the busy server has not
/// read yet (59 bytes in Recv-Q); that is not a slow reader.
#[test]
fn unread_request_of_a_busy_server_is_not_a_slow_reader() {
    let gap = Duration::from_secs(1);
    // Nothing queued before, one request now.
    let (a, b) = pair(
        vec![server_socket(0, 5_900)],
        vec![server_socket(59, 5_959)],
        gap,
    );
    assert!(analyze(&b, Some(&a)).summary.slow_readers.is_empty());
    // One request queued at each census, the earlier one read in between.
    let (a, b) = pair(
        vec![server_socket(59, 5_959)],
        vec![server_socket(118, 6_077)],
        gap,
    );
    let an = analyze(&b, Some(&a));
    assert!(an.summary.slow_readers.is_empty(), "{:?}", an.summary);
    assert!(an.findings.is_empty());
    // The same request still unread a second later and another behind it: stalled.
    let (a, b) = pair(
        vec![server_socket(59, 5_959)],
        vec![server_socket(118, 6_018)],
        gap,
    );
    let an = analyze(&b, Some(&a));
    assert_eq!(an.summary.slow_readers.len(), 1);
    assert_eq!(an.findings[0].severity, Severity::Critical);
    assert_eq!(an.findings[0].severity_rule, Rule::LongStall);
}

/// Report 004's load test through wrk: nginx closes each connection after its response,
/// and a census pair 300 ms apart found three of wrk's sockets in CLOSE_WAIT with the
/// 156-byte response still unread (a WARNING slow reader). The peer's FIN came after its
/// data: no writer waits on this window. Not a slow reader.
#[test]
fn data_left_unread_after_the_peers_fin_stalls_no_writer() {
    let gap = Duration::from_millis(300);
    let closed = |recv_q, received| {
        let mut s = server_socket(recv_q, received);
        s.state = TcpState::CloseWait;
        s
    };
    let (a, b) = pair(vec![closed(156, 5_000)], vec![closed(156, 5_000)], gap);
    let an = analyze(&b, Some(&a));
    assert!(an.summary.slow_readers.is_empty(), "{:?}", an.summary);
    assert!(an
        .findings
        .iter()
        .all(|f| f.pathology != Pathology::SlowReader));
    // The same socket ESTABLISHED: the peer may still be writing behind it.
    let (a, b) = pair(
        vec![server_socket(156, 5_000)],
        vec![server_socket(156, 5_000)],
        gap,
    );
    assert_eq!(analyze(&b, Some(&a)).summary.slow_readers.len(), 1);
}

/// A reader that drains a stalled queue slowly (the writer blocked, nothing arriving,
/// the window open a little at each sample): the queue shrinks but the data waiting at
/// the earlier sample is still there. Seen in the conformance matrix's slow-reader run:
/// 20,912 then 19,109 bytes unread 300 ms apart with a 7 KB window advertised.
#[test]
fn a_stalled_queue_drained_slowly_is_a_slow_reader() {
    let gap = Duration::from_millis(300);
    let (a, b) = pair(
        vec![server_socket(20_912, 900_000)],
        vec![server_socket(19_109, 900_000)],
        gap,
    );
    let an = analyze(&b, Some(&a));
    assert_eq!(an.summary.slow_readers.len(), 1, "{:?}", an.summary);
    assert_eq!(an.summary.slow_readers[0].sign, SlowSign::DataLeftUnread);
    assert_eq!(
        an.summary.slow_readers[0].stalled_at_least_us,
        Some(gap.as_micros() as u64)
    );
    assert!(an
        .findings
        .iter()
        .any(|f| f.pathology == Pathology::SlowReader));
    // The same shrinking queue with 50 kB read in between (the reader keeps up, the
    // sender refills): not a slow reader.
    let (a, b) = pair(
        vec![server_socket(20_912, 900_000)],
        vec![server_socket(19_109, 950_000)],
        gap,
    );
    assert!(analyze(&b, Some(&a)).summary.slow_readers.is_empty());
    // A counter that went back is another connection: not compared.
    let (a, b) = pair(
        vec![server_socket(20_912, 900_000)],
        vec![server_socket(19_109, 30_000)],
        gap,
    );
    assert!(analyze(&b, Some(&a)).summary.slow_readers.is_empty());
}

/// The lab's slow-reader as a census sees it when no sample lands on a zero window:
/// 300 KB read per interval, yet 13-26 KB of a 32 KB buffer queued at every census.
#[test]
fn a_queue_holding_a_quarter_of_the_buffer_at_both_censuses_is_a_slow_reader() {
    let gap = Duration::from_millis(300);
    let with_buf = |recv_q, received, buf| {
        let mut s = server_socket(recv_q, received);
        s.rcvbuf_bytes = Some(buf);
        s
    };
    let (a, b) = pair(
        vec![with_buf(18_508, 1_067_078, 32_768)],
        vec![with_buf(16_705, 1_379_846, 32_768)],
        gap,
    );
    let an = analyze(&b, Some(&a));
    assert_eq!(an.summary.slow_readers.len(), 1, "{:?}", an.summary);
    assert_eq!(an.summary.slow_readers[0].sign, SlowSign::PersistentBacklog);
    // Throttled, not stalled: no stall length is claimed.
    assert_eq!(an.summary.slow_readers[0].stalled_at_least_us, None);
    let f = an
        .findings
        .iter()
        .find(|f| f.pathology == Pathology::SlowReader)
        .expect("a slow-reader finding");
    assert!(
        f.summary.contains("0 at a zero window")
            && f.summary
                .contains("1 with a quarter or more of the receive buffer"),
        "{}",
        f.summary
    );
    // The same queue in a 6 MiB buffer is a reader keeping up with a bulk sender.
    let (a, b) = pair(
        vec![with_buf(18_508, 1_067_078, 6 << 20)],
        vec![with_buf(16_705, 1_379_846, 6 << 20)],
        gap,
    );
    assert!(analyze(&b, Some(&a)).summary.slow_readers.is_empty());
    // A backlog at one census only is not persistent.
    let (a, b) = pair(
        vec![with_buf(4_000, 1_067_078, 32_768)],
        vec![with_buf(16_705, 1_379_846, 32_768)],
        gap,
    );
    assert!(analyze(&b, Some(&a)).summary.slow_readers.is_empty());
}

#[test]
fn a_connection_on_the_4_tuple_of_an_earlier_time_wait_is_not_its_continuation() {
    // The earlier census held this 4-tuple in TIME_WAIT; now a new connection on it has a
    // zero window. Its queue did not grow from the TIME_WAIT socket's, and its stall is
    // not known to have lasted the interval.
    let tw = sock(TcpState::TimeWait, "127.0.0.1:5000", "127.0.0.1:40001");
    let mut rx = sock(TcpState::Established, "127.0.0.1:5000", "127.0.0.1:40001");
    rx.recv_q = 4096;
    rx.info = Some(Box::new(TcpInfo {
        rcv_wnd_bytes: Some(0),
        ..info()
    }));
    let (a, b) = pair(vec![tw], vec![rx], Duration::from_secs(2));
    let an = analyze(&b, Some(&a));
    let f = &an.summary.slow_readers[0];
    assert_eq!(f.sign, SlowSign::ZeroReceiveWindow);
    assert_eq!(f.recv_q_growth_bytes, None);
    assert_eq!(f.stalled_at_least_us, None);
}

#[test]
fn zero_window_in_two_censuses_is_a_stall_of_their_interval() {
    let mut rx = sock(TcpState::Established, "127.0.0.1:5000", "127.0.0.1:40001");
    rx.recv_q = 4096;
    rx.info = Some(Box::new(TcpInfo {
        rcv_wnd_bytes: Some(0),
        ..info()
    }));
    let (a, b) = pair(vec![rx.clone()], vec![rx.clone()], Duration::from_secs(2));
    let an = analyze(&b, Some(&a));
    assert_eq!(
        an.summary.slow_readers[0].stalled_at_least_us,
        Some(2_000_000)
    );
    assert_eq!(an.findings[0].severity, Severity::Critical);
    assert!(
        an.findings[0].summary.contains("at least 2.0 s"),
        "{}",
        an.findings[0].summary
    );
    // One census: a zero window on one of the two data sockets, for how long unknown: one
    // event in a sample of two tells no share (policy, issue 21), not a stall either.
    let other = sock(TcpState::Established, "127.0.0.1:5001", "127.0.0.1:40009");
    let an = analyze(&census(vec![rx, other], "32768-60999"), None);
    assert_eq!(an.findings[0].severity, Severity::Info);
    assert_eq!(an.findings[0].severity_rule, Rule::Rare);
}

#[test]
fn owners_name_the_listener_the_destination_and_the_reader() {
    let owner = |pid, comm: &str, fd| Owner {
        pid,
        comm: comm.into(),
        fd,
    };
    let mut l = sock(TcpState::Listen, "127.0.0.1:5000", "0.0.0.0:0");
    l.recv_q = 2;
    l.send_q = 1;
    l.owners = vec![owner(812, "nginx", 6), owner(813, "nginx", 6)];
    let mut v = vec![l];
    for p in 40000..40120 {
        v.push(tw(&format!("127.0.0.1:{p}"), "10.0.0.9:80", 1_000));
    }
    let mut live = sock(TcpState::Established, "127.0.0.1:40150", "10.0.0.9:80");
    live.owners = vec![owner(77, "curl", 5)];
    v.push(live);
    let mut c = census(v, "40000-40199");
    c.attribution = Some(Attribution::default());
    let a = analyze(&c, None);
    assert_eq!(a.summary.listeners[0].owners.len(), 2);
    let d = &a.summary.destinations[0];
    assert_eq!(
        d.processes,
        vec![ProcessSockets {
            pid: 77,
            comm: "curl".into(),
            sockets: 1
        }]
    );
    let aq = a
        .findings
        .iter()
        .find(|f| f.pathology == Pathology::AcceptQueueOverflow)
        .unwrap();
    assert!(
        aq.summary.contains("(nginx pid 812, nginx pid 813)"),
        "{}",
        aq.summary
    );
    let pe = a
        .findings
        .iter()
        .find(|f| f.pathology == Pathology::PortExhaustion)
        .unwrap();
    assert!(pe.summary.contains("curl pid 77"), "{}", pe.summary);
    assert!(
        pe.evidence
            .iter()
            .any(|e| matches!(e, Evidence::Examples { what, .. } if what.contains("trace"))),
        "{pe:?}"
    );
}

#[test]
fn backoff_wait_follows_the_doubling_rto() {
    // Three timeouts: 200 + 400 + 800 ms waited, the current RTO 1.6 s.
    assert_eq!(backoff_wait_us(1_600_000, 3, 3), 1_400_000);
    assert_eq!(backoff_wait_us(400_000, 1, 1), 200_000);
    // Linear (thin stream) timeouts: no backoff, two RTOs of 250 ms.
    assert_eq!(backoff_wait_us(250_000, 0, 2), 500_000);
}

#[test]
fn connects_and_probers_are_not_slow_readers_or_data_timeouts() {
    let mut syn = sock(TcpState::SynSent, "127.0.0.1:40002", "127.0.0.1:5100");
    syn.send_q = 1;
    syn.info = Some(Box::new(TcpInfo {
        retransmits: 1,
        snd_wnd_bytes: Some(0),
        rto_us: 1_000_000,
        ..info()
    }));
    let mut prober = sock(TcpState::Established, "127.0.0.1:40034", "127.0.0.1:5200");
    prober.send_q = 3_000_000;
    prober.timer = Timer::ZeroWindowProbe;
    prober.info = Some(Box::new(TcpInfo {
        backoff: 3,
        snd_wnd_bytes: Some(0),
        ..info()
    }));
    let mut c = census(vec![syn, prober], "32768-60999");
    c.syn_ladder = Some(tcpdoctor_model::SynLadder::new(6, Some(4), SYN_INITIAL_RTO));
    let a = analyze(&c, None);
    assert_eq!(a.summary.slow_readers.len(), 1);
    assert_eq!(a.summary.slow_readers[0].sign, SlowSign::PeerZeroWindow);
    assert_eq!(a.summary.retransmitting.len(), 1);
    assert_eq!(a.summary.retransmitting[0].sign, SlowSign::SynRetransmit);
    let ps: Vec<Pathology> = a.findings.iter().map(|f| f.pathology).collect();
    assert_eq!(ps, vec![Pathology::SlowReader, Pathology::SynRetransmit]);
    // One SYN retransmission: the connect has waited for the first rung, 1 s.
    assert_eq!(
        a.summary.retransmitting[0].stalled_at_least_us,
        Some(1_000_000)
    );
    assert_eq!(a.findings[1].severity, Severity::Critical);
    assert_eq!(a.findings[1].severity_rule, Rule::LongStall);
}

#[test]
fn retransmit_backoff_is_flagged() {
    let mut s = sock(TcpState::Established, "10.0.0.1:40000", "10.0.0.2:80");
    s.info = Some(Box::new(TcpInfo {
        backoff: 3,
        retransmits: 3,
        rto_us: 1_600_000,
        ..info()
    }));
    let a = analyze(&census(vec![s], "32768-60999"), None);
    assert_eq!(a.summary.retransmitting.len(), 1);
    assert_eq!(a.findings[0].pathology, Pathology::RetransmitTimeout);
    assert!(
        a.findings[0].summary.contains("1600 ms"),
        "{}",
        a.findings[0].summary
    );
    // 200 + 400 + 800 ms without an acknowledgement.
    assert_eq!(
        a.summary.retransmitting[0].stalled_at_least_us,
        Some(1_400_000)
    );
    assert_eq!(a.findings[0].severity, Severity::Critical);
}
