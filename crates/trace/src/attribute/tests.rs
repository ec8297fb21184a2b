use super::*;
use crate::raw::ProcessSource;
use tcpdoctor_model::Severity;

mod repeated_probes;
mod timeouts;

fn ev(ts_ms: u64, sk: u64, state: TcpState, local: &str, remote: &str, detail: Detail) -> Event {
    Event {
        ts_ns: ts_ms * 1_000_000,
        sk,
        netns: 7,
        process: Some(Process {
            pid: 42,
            comm: "client".into(),
            source: ProcessSource::Connect,
        }),
        ino: 0,
        state: Some(state),
        local: local.parse().unwrap(),
        remote: remote.parse().unwrap(),
        detail,
    }
}

fn engine() -> Engine {
    Engine::new(Config::default(), 0, Reasons::default())
}

/// A connect's SYN resent on its ladder: `attempt` s after the connect() the trace saw.
fn syn(attempt: u32) -> Detail {
    syn_after(attempt, Some(attempt * 1_000_000))
}

fn syn_after(attempt: u32, since_connect_us: Option<u32>) -> Detail {
    Detail::Retransmit {
        class: RetransmitClass::Syn,
        attempt,
        waited_us: since_connect_us,
        peer_silent: false,
        unsent_errno: None,
    }
}

fn stale(previous: Option<PreviousClose>) -> Detail {
    Detail::ResetSent {
        reason: 0,
        previous,
        previous_age_ms: Some(3),
        answered_flags: None,
    }
}

const C: &str = "10.0.0.1:20001";
const S: &str = "10.0.0.2:5001";

#[test]
fn a_reset_previous_connection_makes_a_stale_ack_race_and_its_resend_follows() {
    let mut e = engine();
    let l = e
        .push(
            ev(
                10,
                1,
                TcpState::SynSent,
                C,
                S,
                stale(Some(PreviousClose::Reset)),
            ),
            &mut NoLookup,
        )
        .unwrap();
    assert_eq!(l.cause, Cause::StaleAckRace);
    assert_eq!(l.pathology, Some(Pathology::StaleAckRace));
    let l = e
        .push(ev(18, 1, TcpState::SynSent, C, S, syn(1)), &mut NoLookup)
        .unwrap();
    assert_eq!(l.cause, Cause::StaleAckRace);
    assert!(l.evidence.contains("8.0 ms after"), "{}", l.evidence);
    let l = e
        .push(
            ev(
                19,
                1,
                TcpState::Established,
                C,
                S,
                Detail::Connected {
                    flags: 3,
                    connect_us: 9_000,
                },
            ),
            &mut NoLookup,
        )
        .unwrap();
    assert_eq!(l.cause, Cause::SlowConnect);
    assert_eq!(l.pathology, Some(Pathology::StaleAckRace));
    let f = e.findings(100, &mut NoLookup);
    assert_eq!(f.len(), 1);
    assert_eq!(f[0].pathology, Pathology::StaleAckRace);
    assert_eq!(f[0].impact.affected, 1);
    assert_eq!(f[0].impact.worst_stall_us, Some(9_000));
}

#[test]
fn a_peer_that_closed_first_makes_a_time_wait_collision() {
    let mut e = engine();
    let l = e
        .push(
            ev(
                10,
                1,
                TcpState::SynSent,
                C,
                S,
                stale(Some(PreviousClose::PeerClosedFirst)),
            ),
            &mut NoLookup,
        )
        .unwrap();
    assert_eq!(l.cause, Cause::TimeWaitCollision);
    let l = e
        .push(ev(1010, 1, TcpState::SynSent, C, S, syn(1)), &mut NoLookup)
        .unwrap();
    assert_eq!(l.cause, Cause::TimeWaitCollision);
    assert_eq!(
        e.findings(10, &mut NoLookup)[0].pathology,
        Pathology::TimeWaitCollision
    );
}

#[test]
fn the_servers_time_wait_refusal_decides_when_the_clients_history_is_unknown() {
    let mut e = engine();
    let l = e
        .push(
            ev(
                9,
                2,
                TcpState::TimeWait,
                S,
                C,
                Detail::TimeWaitAck {
                    reason: 2,
                    substate: Some(TcpState::TimeWait),
                },
            ),
            &mut NoLookup,
        )
        .unwrap();
    assert_eq!(l.cause, Cause::TimeWaitRefusedSyn);
    let l = e
        .push(
            ev(10, 1, TcpState::SynSent, C, S, stale(None)),
            &mut NoLookup,
        )
        .unwrap();
    assert_eq!(l.cause, Cause::TimeWaitCollision);
    // Without either clue the old ACK is named as such, not guessed.
    let mut e = engine();
    let l = e
        .push(
            ev(10, 1, TcpState::SynSent, C, S, stale(None)),
            &mut NoLookup,
        )
        .unwrap();
    assert_eq!(l.cause, Cause::OldAck);
}

/// The server's timewait mini-socket refusing the client's SYN, in its substate.
fn refused_by(substate: TcpState) -> Event {
    let mut e = ev(
        9,
        2,
        substate,
        S,
        C,
        Detail::TimeWaitAck {
            reason: 2,
            substate: Some(substate),
        },
    );
    e.process = None;
    e
}

/// Answers only tcp_timestamps.
struct Timestamps(bool);

impl Lookup for Timestamps {
    fn tcp_timestamps(&mut self, _: u32) -> Option<bool> {
        Some(self.0)
    }
}

#[test]
fn an_orphaned_fin_wait2_socket_answering_the_syn_is_a_stale_ack_race_not_a_time_wait_collision() {
    // Report 003 as traced on both ends: the server's old socket is an orphaned FIN_WAIT2
    // mini-socket (its sk_state reads TIME_WAIT), the client closed with a reset.
    let mut e = engine();
    let l = e
        .push(refused_by(TcpState::FinWait2), &mut Timestamps(true))
        .unwrap();
    assert_eq!(l.cause, Cause::FinWait2RefusedSyn);
    assert_eq!(l.pathology, Some(Pathology::StaleAckRace));
    assert_eq!(l.state, Some(TcpState::FinWait2));
    assert!(
        l.evidence.contains("orphaned FIN_WAIT2") && !l.evidence.contains("TIME_WAIT socket"),
        "{}",
        l.evidence
    );
    let l = e
        .push(
            ev(
                10,
                1,
                TcpState::SynSent,
                C,
                S,
                stale(Some(PreviousClose::Reset)),
            ),
            &mut Timestamps(true),
        )
        .unwrap();
    assert_eq!(l.cause, Cause::StaleAckRace);
    assert!(
        l.evidence.contains("orphaned FIN_WAIT2") && l.evidence.contains("with a reset"),
        "{}",
        l.evidence
    );
    let l = e
        .push(ev(20, 1, TcpState::SynSent, C, S, syn(1)), &mut NoLookup)
        .unwrap();
    assert_eq!(l.cause, Cause::StaleAckRace);
    let f = e.findings(1000, &mut Timestamps(true));
    assert_eq!(f.len(), 1, "{f:#?}");
    assert_eq!(f[0].pathology, Pathology::StaleAckRace);
    // One 4-tuple, seen from both ends, is one 4-tuple.
    assert!(
        f[0].summary.contains("1 distinct 4-tuple"),
        "{}",
        f[0].summary
    );
    assert!(
        f[0].explanation.contains("FIN_WAIT2"),
        "{}",
        f[0].explanation
    );
    assert!(
        f[0].remedies
            .iter()
            .all(|r| !r.action.contains("timestamps")),
        "{:#?}",
        f[0].remedies
    );
}

#[test]
fn a_time_wait_collision_advises_timestamps_only_where_they_are_off() {
    let collide = |lookup: &mut dyn Lookup| {
        let mut e = engine();
        let l = e.push(refused_by(TcpState::TimeWait), lookup).unwrap();
        assert_eq!(l.cause, Cause::TimeWaitRefusedSyn);
        // Even after a reset close here, the peer's TIME_WAIT socket decides.
        let l = e
            .push(
                ev(
                    10,
                    1,
                    TcpState::SynSent,
                    C,
                    S,
                    stale(Some(PreviousClose::Reset)),
                ),
                lookup,
            )
            .unwrap();
        assert_eq!(l.cause, Cause::TimeWaitCollision);
        let f = e.findings(10, lookup);
        assert_eq!(f.len(), 1, "{f:#?}");
        assert_eq!(f[0].pathology, Pathology::TimeWaitCollision);
        f[0].clone()
    };
    let mentions = |f: &Finding| {
        f.remedies
            .iter()
            .any(|r| r.action.contains("tcp_timestamps"))
    };
    let off = collide(&mut Timestamps(false));
    assert!(mentions(&off), "{:#?}", off.remedies);
    assert!(format!("{:?}", off.evidence).contains("tcp_timestamps"));
    assert!(!mentions(&collide(&mut Timestamps(true))));
    // Unknown: the catalogue's remedies as they are.
    assert!(mentions(&collide(&mut NoLookup)));
}

#[test]
fn a_syn_the_peers_fin_wait2_socket_refused_without_an_ack_is_not_called_lost() {
    // The mini-socket's ACK was rate-limited (TcpExtTCPACKSkippedFinWait2): no stale ACK
    // reached the client, its SYN waited for the timer.
    let mut e = engine();
    e.push(refused_by(TcpState::FinWait2), &mut NoLookup);
    let l = e
        .push(ev(1009, 1, TcpState::SynSent, C, S, syn(1)), &mut NoLookup)
        .unwrap();
    assert_eq!(l.cause, Cause::StaleAckRace, "{}", l.evidence);
    assert!(l.evidence.contains("rate-limited"), "{}", l.evidence);
}

struct FullListener;

impl Lookup for FullListener {
    fn listener(&mut self, dest: SocketAddr) -> Option<Listener> {
        Some(Listener {
            local: dest,
            queued: 2,
            backlog: 1,
            process: Some(Process {
                pid: 7,
                comm: "server".into(),
                source: ProcessSource::FileDescriptor,
            }),
            netns: 0,
        })
    }
    fn syn_ladder(&mut self, _: u32) -> Option<SynLadder> {
        Some(SynLadder::new(6, Some(4), Duration::from_secs(1)))
    }
    fn port_budget(&mut self, _: u32, _: SocketAddr) -> Option<PortBudget> {
        Some(PortBudget {
            in_use: 3,
            time_wait: 3,
            range: PortRange::new(40000, 40003).unwrap(),
        })
    }
    fn netns_name(&self, _: u32) -> Option<String> {
        Some("tdoc-x".into())
    }
}

#[test]
fn syn_resends_are_dropped_full_queue_or_lost_with_their_rung() {
    let mut e = engine();
    let l = e
        .push(ev(1000, 1, TcpState::SynSent, C, S, syn(2)), &mut NoLookup)
        .unwrap();
    assert_eq!(l.cause, Cause::SynLost);
    let l = e
        .push(
            ev(1000, 1, TcpState::SynSent, C, S, syn(2)),
            &mut FullListener,
        )
        .unwrap();
    assert_eq!(l.cause, Cause::AcceptQueueFull);
    assert!(
        l.evidence.contains("rung 2") && l.evidence.contains("server (pid 7)"),
        "{}",
        l.evidence
    );
    let mut e = engine();
    let mut drop = ev(
        0,
        0,
        TcpState::Close,
        C,
        S,
        Detail::Drop {
            reason: 5,
            ifindex: 1,
            ifname: Some("veth0".into()),
            tcp_flags: 0x02,
            timewait: None,
        },
    );
    drop.process = None;
    e.push(drop, &mut NoLookup).unwrap();
    let l = e
        .push(
            ev(1000, 1, TcpState::SynSent, C, S, syn(1)),
            &mut FullListener,
        )
        .unwrap();
    assert_eq!(l.cause, Cause::SynDropped);
    assert!(
        l.evidence.contains("reason_5") && l.evidence.contains("veth0"),
        "{}",
        l.evidence
    );
}

/// A SYN dropped at the peer's TIME_WAIT socket (the drop record says which socket took
/// it) is the collision, also when the socket's own record of refusing it (TimeWaitAck) was
/// not seen: a lab timewait-collision run put 1 of its 2 resends down to "the previous SYN
/// was dropped" that way. A SYN dropped at no such socket stays a drop.
#[test]
fn a_syn_dropped_at_the_peers_time_wait_socket_is_the_collision() {
    for (timewait, want) in [
        (Some(TcpState::TimeWait), Cause::TimeWaitCollision),
        (None, Cause::SynDropped),
    ] {
        let mut e = engine();
        let mut drop = ev(
            0,
            0,
            TcpState::TimeWait,
            C,
            S,
            Detail::Drop {
                reason: 2,
                ifindex: 1,
                ifname: None,
                tcp_flags: 0x02,
                timewait,
            },
        );
        drop.process = None;
        e.push(drop, &mut NoLookup).unwrap();
        let l = e
            .push(ev(12, 1, TcpState::SynSent, C, S, syn(1)), &mut NoLookup)
            .unwrap();
        assert_eq!(l.cause, want, "{}", l.evidence);
    }
}

#[test]
fn eaddrnotavail_is_counted_per_process_and_destination_with_the_port_budget() {
    let mut e = engine();
    for i in 0..3 {
        let l = e
            .push(
                ev(
                    i,
                    10 + i,
                    TcpState::SynSent,
                    "0.0.0.0:0",
                    S,
                    Detail::ConnectError { errno: 99 },
                ),
                &mut FullListener,
            )
            .unwrap();
        assert_eq!(l.cause, Cause::NoLocalPort);
    }
    let s = e.summary();
    assert_eq!(s.no_local_port.len(), 1);
    assert_eq!(s.no_local_port[0].failures, 3);
    let f = e.findings(10, &mut FullListener);
    assert_eq!(f[0].pathology, Pathology::PortExhaustion);
    assert_eq!(f[0].impact.failed, 3);
    assert_eq!(f[0].impact.budget_used, Some(0.75));
}

/// A retransmission timeout after `waited_us` without an ACK of new data.
fn timeout(waited_us: u32, peer_silent: bool) -> Detail {
    Detail::Retransmit {
        class: RetransmitClass::Timeout,
        attempt: 1,
        waited_us: Some(waited_us),
        peer_silent,
        unsent_errno: None,
    }
}

/// Timeouts of one flow from each of `srcs` to `dst`, 5 ms apart from t = 100 ms.
fn timeouts_into(e: &mut Engine, srcs: &[&str], dst: &str, rto: Detail) {
    for (i, src) in srcs.iter().enumerate() {
        e.push(
            ev(
                100 + i as u64 * 5,
                i as u64,
                TcpState::Established,
                src,
                dst,
                rto.clone(),
            ),
            &mut NoLookup,
        );
    }
}

#[test]
fn timeouts_of_three_flows_into_one_receiver_within_the_window_are_incast() {
    let mut e = engine();
    timeouts_into(
        &mut e,
        &["10.0.0.2:5001", "10.0.0.3:5001", "10.0.0.4:5001"],
        "10.0.0.1:40000",
        timeout(210_000, false),
    );
    // A lone timeout much later is not incast.
    e.push(
        ev(
            900,
            9,
            TcpState::Established,
            "10.0.0.5:5001",
            "10.0.0.1:40000",
            timeout(205_000, false),
        ),
        &mut NoLookup,
    );
    let s = e.summary();
    assert_eq!(s.incast_episodes.len(), 1);
    assert_eq!(s.incast_episodes[0].flows, 3);
    let f = e.findings(0, &mut NoLookup);
    let incast = f.iter().find(|f| f.pathology == Pathology::Incast).unwrap();
    assert_eq!(incast.impact.affected, 3);
    assert!(f
        .iter()
        .any(|f| f.pathology == Pathology::RetransmitTimeout));
}

#[test]
fn resets_that_close_connections_are_counted_not_attributed() {
    let mut e = engine();
    assert!(e
        .push(
            ev(
                1,
                1,
                TcpState::Close,
                C,
                S,
                stale(Some(PreviousClose::Reset))
            ),
            &mut NoLookup
        )
        .is_none());
    assert!(e
        .push(
            ev(1, 1, TcpState::FinWait1, S, C, Detail::ResetReceived),
            &mut NoLookup
        )
        .is_none());
    assert!(e.findings(1000, &mut NoLookup).is_empty());
}

#[test]
fn queue_drops_are_packet_drops_with_their_interface_and_others_only_counted() {
    let reasons = Reasons {
        drop: crate::btf::EnumNames::from_pairs(&[(64, "QDISC_DROP"), (49, "TCP_OLD_ACK")]),
        ..Reasons::default()
    };
    let mut e = Engine::new(Config::default(), 0, reasons);
    let d = |r| Detail::Drop {
        reason: r,
        ifindex: 3,
        ifname: Some("tdoc1".into()),
        tcp_flags: 0x10,
        timewait: None,
    };
    let l = e
        .push(ev(1, 0, TcpState::Established, C, S, d(64)), &mut NoLookup)
        .unwrap();
    assert_eq!(l.pathology, Some(Pathology::PacketDrop));
    assert_eq!(l.drop_reason.as_deref(), Some("QDISC_DROP"));
    let l = e
        .push(ev(2, 0, TcpState::Established, C, S, d(49)), &mut NoLookup)
        .unwrap();
    assert_eq!(l.pathology, None);
    let s = e.summary();
    assert_eq!(s.drop_reasons["QDISC_DROP"], 1);
    assert_eq!(s.drop_reasons["TCP_OLD_ACK"], 1);
    let f = e.findings(0, &mut NoLookup);
    assert_eq!(f.len(), 1);
    assert_eq!(f[0].pathology, Pathology::PacketDrop);
}

#[test]
fn a_connect_the_application_abandoned_is_no_connect_failure_a_refused_one_is() {
    let failed = |errno: u32| Detail::ConnectFailed {
        flags: 0,
        after_us: 2_000,
        errno,
    };
    let mut e = engine();
    // The application closed its connecting socket (errno 0), as a load tool does at its end.
    let l = e
        .push(
            ev(1, 1, TcpState::SynSent, C, S, failed(0)),
            &mut FullListener,
        )
        .unwrap();
    assert_eq!(l.cause, Cause::ConnectFailed);
    let f = e.findings(100, &mut FullListener);
    assert!(
        f.iter().all(|f| f.pathology != Pathology::ConnectFailure),
        "{f:?}"
    );
    // ECONNREFUSED: a failure the kernel reported.
    e.push(
        ev(2, 2, TcpState::SynSent, C, S, failed(111)),
        &mut FullListener,
    );
    let f = e.findings(100, &mut FullListener);
    let cf = f
        .iter()
        .find(|f| f.pathology == Pathology::ConnectFailure)
        .expect("connect failure");
    assert_eq!(cf.impact.failed, 1);
    assert!(
        cf.summary.starts_with("1 connect(s) failed"),
        "{}",
        cf.summary
    );
}

#[test]
fn a_listeners_syn_ack_resend_is_one_of_the_syn_resends_the_counter_counts() {
    let mut e = engine();
    let l = e
        .push(
            ev(
                1,
                1,
                TcpState::SynRecv,
                S,
                C,
                Detail::SynAckRetransmit { attempt: 1 },
            ),
            &mut FullListener,
        )
        .unwrap();
    assert_eq!(l.cause, Cause::SynAckResend);
    // TcpExtTCPSynRetrans counts SYN-ACK resends too (tcp_rtx_synack).
    assert_eq!(
        e.summary().syn_resends.get(&Pathology::SynRetransmit),
        Some(&1)
    );
}

#[test]
fn timeouts_of_first_data_to_a_server_that_never_took_the_connection_are_not_incast() {
    // Accept-queue overflow: several clients' first requests resent together into one server
    // that acknowledged none of them and sent nothing since its SYN-ACK.
    let mut e = engine();
    timeouts_into(
        &mut e,
        &["10.0.0.1:40001", "10.0.0.1:40002", "10.0.0.1:40003"],
        "10.0.0.2:8080",
        timeout(210_000, true),
    );
    assert!(e.summary().incast_episodes.is_empty());
    let f = e.findings(0, &mut NoLookup);
    assert!(f.iter().all(|f| f.pathology != Pathology::Incast), "{f:#?}");
    let t = f
        .iter()
        .find(|f| f.pathology == Pathology::RetransmitTimeout)
        .expect("the timeouts stay timeouts");
    assert_eq!(t.impact.affected, 3);
}

/// A listener whose queue is not full when asked, in a namespace whose
/// TcpExtListenOverflows rose by `overflows` since tracing started.
struct DrainedListener {
    overflows: u64,
}

impl Lookup for DrainedListener {
    fn listener(&mut self, dest: SocketAddr) -> Option<Listener> {
        Some(Listener {
            local: dest,
            queued: 0,
            backlog: 1,
            process: None,
            netns: 9,
        })
    }
    fn listen_overflows(&mut self, netns: u32) -> Option<u64> {
        (netns == 9).then_some(self.overflows)
    }
}

/// An engine that knows the drop reason TCP_LISTEN_OVERFLOW (70), and a handshake ACK from
/// `client` that a full accept queue refused, in namespace `netns`.
fn overflow_engine() -> Engine {
    let reasons = Reasons {
        drop: crate::btf::EnumNames::from_pairs(&[(70, "TCP_LISTEN_OVERFLOW")]),
        ..Reasons::default()
    };
    Engine::new(Config::default(), 0, reasons)
}

fn refused_ack(client: &str, netns: u32) -> Event {
    let mut ack = ev(
        0,
        0,
        TcpState::Listen,
        client,
        S,
        Detail::Drop {
            reason: 70,
            ifindex: 1,
            ifname: None,
            tcp_flags: 0x10,
            timewait: None,
        },
    );
    ack.netns = netns;
    ack.process = None;
    ack
}

#[test]
fn syn_resends_up_to_the_refusals_counted_and_not_traced_are_a_full_accept_queue() {
    let mut e = overflow_engine();
    // 3 refusals counted in the listener's namespace; one was a handshake ACK, traced.
    e.push(
        refused_ack("10.0.0.3:20003", 9),
        &mut DrainedListener { overflows: 3 },
    );
    let mut look = DrainedListener { overflows: 3 };
    let causes: Vec<Cause> = (0..3)
        .map(|i| {
            let c = format!("10.0.0.1:2000{i}");
            e.push(
                ev(1000, 10 + i, TcpState::SynSent, &c, S, syn(1)),
                &mut look,
            )
            .unwrap()
            .cause
        })
        .collect();
    // Two SYNs refused unseen: two resends put down to the queue, the third is lost.
    assert_eq!(
        causes,
        [
            Cause::AcceptQueueFull,
            Cause::AcceptQueueFull,
            Cause::SynLost
        ]
    );
    let l = e
        .push(
            ev(1000, 20, TcpState::SynSent, C, S, syn(1)),
            &mut DrainedListener { overflows: 4 },
        )
        .unwrap();
    assert_eq!(l.cause, Cause::AcceptQueueFull);
    assert!(
        l.evidence.contains("TcpExtListenOverflows +4")
            && l.evidence.contains("1 of them handshake ACKs"),
        "{}",
        l.evidence
    );
    // Without the counter (no namespace to read it in), nothing is inferred.
    let mut e = engine();
    let l = e
        .push(ev(1000, 1, TcpState::SynSent, C, S, syn(1)), &mut NoLookup)
        .unwrap();
    assert_eq!(l.cause, Cause::SynLost);
}

/// A drained listener whose namespace's TcpExtListenOverflows was last read at `read`, and
/// stands at `now`.
struct StaleCount {
    read: u64,
    now: u64,
}

impl Lookup for StaleCount {
    fn listener(&mut self, dest: SocketAddr) -> Option<Listener> {
        DrainedListener { overflows: 0 }.listener(dest)
    }
    fn listen_overflows(&mut self, netns: u32) -> Option<u64> {
        (netns == 9).then_some(self.read)
    }
    fn listen_overflows_now(&mut self, netns: u32) -> Option<u64> {
        (netns == 9).then_some(self.now)
    }
}

#[test]
fn a_handshake_ack_refused_after_the_counter_was_read_does_not_hide_a_refused_syn() {
    let mut e = overflow_engine();
    // A SYN refused (counted: the reading says 1), then a handshake ACK refused (traced; the
    // counter stands at 2 but was read before it), then the SYN's resend.
    let mut look = StaleCount { read: 1, now: 2 };
    e.push(refused_ack("10.0.0.3:20003", 9), &mut look);
    let l = e
        .push(ev(1000, 10, TcpState::SynSent, C, S, syn(1)), &mut look)
        .unwrap();
    assert_eq!(l.cause, Cause::AcceptQueueFull, "{}", l.evidence);
    // With nothing more refused, a further resend is not the queue's.
    let l = e
        .push(
            ev(1000, 11, TcpState::SynSent, "10.0.0.1:20009", S, syn(1)),
            &mut look,
        )
        .unwrap();
    assert_eq!(l.cause, Cause::SynLost);
}

#[test]
fn a_syn_ack_resent_after_its_handshake_ack_was_refused_by_the_queue_is_the_queues_doing() {
    let mut e = overflow_engine();
    // The client's handshake ACK (client -> listener) refused by the full queue...
    e.push(refused_ack(C, 7), &mut NoLookup);
    // ...then the listener resends its SYN-ACK (listener -> client).
    let resend = |e: &mut Engine| {
        e.push(
            ev(
                1000,
                5,
                TcpState::SynRecv,
                S,
                C,
                Detail::SynAckRetransmit { attempt: 1 },
            ),
            &mut NoLookup,
        )
        .unwrap()
    };
    let l = resend(&mut e);
    assert_eq!(l.cause, Cause::AcceptQueueFull);
    assert_eq!(l.pathology, Some(Pathology::AcceptQueueOverflow));
    assert!(l.evidence.contains("TCP_LISTEN_OVERFLOW"), "{}", l.evidence);
    // A second resend with no second refusal: the ACK did not arrive.
    assert_eq!(resend(&mut e).cause, Cause::SynAckResend);
    let s = e.summary();
    assert_eq!(s.syn_resends[&Pathology::AcceptQueueOverflow], 1);
    assert_eq!(s.syn_resends[&Pathology::SynRetransmit], 1);
}

#[test]
fn cause_all_lists_every_cause_once() {
    // A new variant fails this match until it is named here; then ALL must hold it too.
    let declared = |c: Cause| match c {
        Cause::StaleAckRace
        | Cause::TimeWaitCollision
        | Cause::OldAck
        | Cause::SynDropped
        | Cause::AcceptQueueFull
        | Cause::SynLost
        | Cause::SynAckResend
        | Cause::NoLocalPort
        | Cause::ConnectFailed
        | Cause::Refused
        | Cause::SlowConnect
        | Cause::Timeout
        | Cause::TailLossProbe
        | Cause::FastRetransmit
        | Cause::AfterTimeout
        | Cause::Retransmission
        | Cause::ZeroWindow
        | Cause::NotReading
        | Cause::Drop
        | Cause::TimeWaitRefusedSyn
        | Cause::FinWait2RefusedSyn
        | Cause::TupleInUse => 22,
    };
    let names: std::collections::BTreeSet<_> = Cause::ALL.iter().map(|c| c.name()).collect();
    assert_eq!(names.len(), Cause::ALL.len(), "a cause listed twice");
    assert_eq!(
        Cause::ALL.len(),
        declared(Cause::ALL[0]),
        "a declared cause is missing from ALL"
    );
}

/// A SYN resent 9 ms after its connect() followed an ACK the socket could not accept, even
/// when neither that ACK nor the reset answering it was traced (the kernel skipped the
/// program, or their records were lost): a stale ACK, not a SYN lost on the ladder.
#[test]
fn a_syn_resent_within_milliseconds_of_its_connect_met_an_old_ack() {
    let mut e = engine();
    let l = e
        .push(
            ev(2_009, 1, TcpState::SynSent, C, S, syn_after(1, Some(9_000))),
            &mut NoLookup,
        )
        .unwrap();
    assert_eq!(l.cause, Cause::OldAck, "{}", l.evidence);
    assert_eq!(l.pathology, Some(Pathology::StaleAckRace));
    assert!(l.evidence.contains("after connect()"), "{}", l.evidence);
    // On the ladder (1 s after connect) the same resend is a SYN with no answer seen.
    let l = e
        .push(
            ev(
                3_000,
                2,
                TcpState::SynSent,
                C,
                S,
                syn_after(1, Some(1_000_000)),
            ),
            &mut NoLookup,
        )
        .unwrap();
    assert_eq!(l.cause, Cause::SynLost);
}

/// A SYN resend whose connect() the trace did not see, 100 ms after the trace began: on the
/// ladder (its first SYN unanswered for 1 s) or 10 ms after an old ACK the trace did not
/// see; which, the trace cannot tell: no pathology named. 300 ms after the trace began it is
/// a SYN resent with no answer seen, its wait unknown (next test).
#[test]
fn a_syn_resend_whose_connect_came_before_the_trace_is_not_attributed() {
    let mut e = engine();
    let l = e
        .push(
            ev(100, 1, TcpState::SynSent, C, S, syn_after(1, None)),
            &mut NoLookup,
        )
        .unwrap();
    assert_eq!(l.pathology, None, "{}", l.evidence);
    assert!(
        l.evidence.contains("after the trace began"),
        "{}",
        l.evidence
    );
    assert!(
        e.summary().syn_resends.is_empty(),
        "{:?}",
        e.summary().syn_resends
    );
    let l = e
        .push(
            ev(300, 2, TcpState::SynSent, C, S, syn_after(1, None)),
            &mut NoLookup,
        )
        .unwrap();
    assert_eq!(l.cause, Cause::SynLost);
    assert_eq!(l.pathology, Some(Pathology::SynRetransmit));
}

/// This host's ladder (1 s first rung) and nothing else.
struct Ladder;

impl Lookup for Ladder {
    fn syn_ladder(&mut self, _: u32) -> Option<SynLadder> {
        Some(SynLadder::new(6, Some(4), Duration::from_secs(1)))
    }
}

/// A first SYN resend without a record of its connect() may have come milliseconds after
/// it: the record's slot can be taken by a later connect first (report 003's loop, measured).
/// Its wait is unknown, so it is not judged as the ladder's first rung (1 s, critical); with
/// the connect traced a second before, or as a second resend, it is.
#[test]
fn a_first_syn_resend_without_its_connect_record_has_no_inferred_wait() {
    let severity = |detail: Detail| {
        let mut e = engine();
        let l = e
            .push(ev(300, 2, TcpState::SynSent, C, S, detail), &mut Ladder)
            .unwrap();
        assert_eq!(l.cause, Cause::SynLost, "{}", l.evidence);
        let f = e.findings(1000, &mut Ladder);
        let f = f
            .iter()
            .find(|f| f.pathology == Pathology::SynRetransmit)
            .unwrap_or_else(|| panic!("{f:#?}"));
        (f.severity, l.evidence)
    };
    let (unknown, evidence) = severity(syn_after(1, None));
    assert!(unknown < Severity::Critical, "{unknown:?}: {evidence}");
    assert!(evidence.contains("its wait is unknown"), "{evidence}");
    let (traced, evidence) = severity(syn_after(1, Some(1_000_000)));
    assert_eq!(traced, Severity::Critical, "{evidence}");
    let (second, evidence) = severity(syn_after(2, None));
    assert_eq!(second, Severity::Critical, "{evidence}");
}
