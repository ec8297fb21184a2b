//! Wrong causes and alarming severities found by running analyze on public captures nobody
//! here wrote (docs/public-captures.md): each test rebuilds the shape of the capture that
//! showed it, with exact timestamps, and is named after the behaviour.

use tcpdoctor_model::{Pathology, Severity};

use super::{only, tuple, Cap, A, F, P, R, S};
use crate::engine::Config;

/// Zeek's m57 HTTP traces hold every packet twice, 1-2 us apart (same IP ID): analyze read
/// the copies as 81 tail loss probes ("50% of data segments", a warning) and a SYN
/// retransmission. A copy of the connection's previous segment within microseconds is the
/// capture seeing one packet twice: counted as a duplicate, out of everything else.
#[test]
fn a_segment_captured_twice_within_microseconds_is_a_duplicate_not_a_retransmission() {
    let tp = tuple("192.168.1.105", 49600, "65.54.95.185", 80);
    let mut c = Cap::new();
    // Each packet twice, 1 us apart.
    let twice = |c: &mut Cap, t, c2s, flags, seq, ack, len, win| {
        c.pkt(t, tp, c2s, flags, seq, ack, len, win);
        c.pkt(t + 1, tp, c2s, flags, seq, ack, len, win);
    };
    twice(&mut c, 0, true, S, 100, 0, 0, 64240);
    twice(&mut c, 23_540, false, S | A, 900, 101, 0, 65160);
    twice(&mut c, 23_990, true, A, 101, 901, 0, 502);
    twice(&mut c, 28_230, true, P | A, 101, 901, 373, 502);
    twice(&mut c, 47_030, false, A, 901, 474, 0, 1000);
    for k in 0..20u32 {
        twice(
            &mut c,
            52_000 + u64::from(k) * 20,
            false,
            A,
            901 + k * 1380,
            474,
            1380,
            1000,
        );
    }
    twice(&mut c, 60_000, true, A, 474, 901 + 20 * 1380, 0, 502);
    let a = c.run(Config::default());
    // SYN, SYN-ACK, request, 20 data segments: 23 copies (duplicate pure ACKs are left alone:
    // duplicate ACKs are exact copies by design).
    assert_eq!(a.totals.duplicates, 23, "{:#?}", a.totals);
    assert_eq!(a.totals.retransmissions, 0, "{:#?}", a.totals);
    assert!(a.findings.is_empty(), "{:#?}", a.findings);
    // A copy far apart in time is a retransmission again (a tail loss probe 20 ms later).
    let mut c = Cap::new();
    c.handshake(0, tp, 100, 900);
    c.pkt(1_000, tp, true, P | A, 101, 901, 100, 502);
    c.pkt(21_000, tp, true, P | A, 101, 901, 100, 502);
    let a = c.run(Config::default());
    assert_eq!((a.totals.duplicates, a.totals.retransmissions_tlp), (0, 1));
}

/// A capture that sees every packet twice milliseconds apart (a mirror port: Practical Packet
/// Analysis' hauntedbrowser.pcap, copies 1.3 to 6.8 ms late) read the copies as 5 SYN and 6
/// data retransmissions. A copy carrying the same non-zero IPv4 ID as the previous segment
/// of its connection is the same datagram (senders number each one: a retransmission, or a
/// duplicate ACK, carries a new ID), pure ACKs included; a resend with a new ID is a
/// retransmission however soon it comes.
#[test]
fn copies_with_the_same_ip_id_milliseconds_apart_are_one_datagram() {
    let tp = tuple("10.0.0.1", 40000, "10.0.0.2", 80);
    let mut c = Cap::new();
    let mut id = 100u16;
    let mut twice = |c: &mut Cap, t: u64, c2s: bool, flags: u8, seq: u32, ack: u32, len: u32| {
        id += 1;
        for late in [0, 4_000] {
            c.pkt(t + late, tp, c2s, flags, seq, ack, len, 1000);
            c.segs.last_mut().unwrap().ip_id = id;
        }
    };
    twice(&mut c, 0, true, S, 100, 0, 0);
    twice(&mut c, 30_000, false, S | A, 900, 101, 0);
    twice(&mut c, 60_000, true, A, 101, 901, 0);
    twice(&mut c, 70_000, true, P | A, 101, 901, 300);
    twice(&mut c, 100_000, false, P | A, 901, 401, 1000);
    twice(&mut c, 130_000, true, A, 401, 1901, 0);
    let a = c.run(Config::default());
    assert_eq!(a.totals.duplicates, 6, "{:#?}", a.totals);
    assert_eq!(a.totals.retransmissions, 0, "{:#?}", a.totals);
    assert!(a.findings.is_empty(), "{:#?}", a.findings);
    // The same copy with a new ID is the sender's: a retransmission (a tail loss probe).
    let mut c = Cap::new();
    c.handshake(0, tp, 100, 900);
    c.pkt(1_000, tp, true, P | A, 101, 901, 100, 502);
    c.segs.last_mut().unwrap().ip_id = 7;
    c.pkt(5_000, tp, true, P | A, 101, 901, 100, 502);
    c.segs.last_mut().unwrap().ip_id = 8;
    let a = c.run(Config::default());
    assert_eq!((a.totals.duplicates, a.totals.retransmissions), (0, 1));
}

/// Zeek's mysql_auth: 13 clients each send their FIN again 0.4 ms after the first: analyze
/// called them 13 tail loss probes, "36% of data segments", a warning. A FIN sent again
/// repairs no data: counted among the retransmissions (as tshark counts it), not as a loss of
/// data; and a FIN resent after a timeout delays the close, not the data (Zeek's
/// fin_retransmission, http-bad-request, smb1, ssl-v2: warnings by a 200-700 ms "stall").
#[test]
fn a_fin_sent_again_is_not_a_loss_of_data() {
    let mut c = Cap::new();
    for i in 0..13u16 {
        let tp = tuple("192.168.1.3", 55_834 + i, "192.168.1.8", 3306);
        let t = u64::from(i) * 1_000_000;
        c.handshake(t, tp, 0, 0);
        c.pkt(t + 200, tp, false, P | A, 1, 1, 76, 1000);
        c.pkt(t + 210, tp, false, F | A, 77, 1, 0, 1000);
        c.pkt(t + 5_000, tp, true, A, 1, 77, 0, 502);
        c.pkt(t + 5_400, tp, true, F | A, 1, 77, 0, 502);
        c.pkt(t + 5_410, tp, false, A, 78, 2, 0, 1000);
        c.pkt(t + 5_800, tp, true, F | A, 1, 78, 0, 502);
        c.pkt(t + 9_000, tp, true, A, 2, 78, 0, 502);
    }
    let a = c.run(Config::default());
    assert_eq!(a.totals.retransmissions, 13, "{:#?}", a.totals);
    assert!(
        a.findings
            .iter()
            .all(|f| f.pathology != Pathology::Retransmission),
        "{:#?}",
        a.findings
    );
    // A FIN resent after 290 ms: the close waited, no data did.
    let tp = tuple("10.1.30.117", 55344, "17.167.193.62", 443);
    let mut c = Cap::new();
    c.handshake(0, tp, 0, 0);
    c.pkt(1_000, tp, true, P | A, 1, 1, 100, 502);
    c.pkt(2_000, tp, false, A, 1, 101, 0, 1000);
    c.pkt(3_000, tp, true, F | A, 101, 1, 0, 502);
    c.pkt(293_700, tp, true, F | A, 101, 1, 0, 502);
    c.pkt(294_000, tp, false, F | A, 1, 102, 0, 1000);
    c.pkt(294_100, tp, true, A, 102, 2, 0, 502);
    let a = c.run(Config::default());
    let f = only(&a, Pathology::RetransmitTimeout);
    assert!(f.summary.contains("the close waited"), "{}", f.summary);
    assert_eq!(f.severity, Severity::Info, "{f:#?}");
    let d = &a.details.retransmit_timeouts;
    assert_eq!((d.count, d.close_timeouts), (0, 1), "{d:?}");
    assert_eq!(d.close_flows_after_peer, 0);
}

/// A public capture (NetworkForensics' evidence03.pcap): a client closes 11 web connections
/// first; each server's FIN, captured, goes unacknowledged and is resent 0.3-0.9 s later.
/// Judged a warning ("11 FINs of 11 flows"): but the peer had closed first, so no
/// application read this end of the stream any more. A resent first FIN is still judged.
#[test]
fn a_fin_resent_after_the_peer_closed_first_kept_nobody_waiting() {
    let mut c = Cap::new();
    for i in 0..11u16 {
        let tp = tuple("192.168.1.10", 49_160 + i, "8.18.65.32", 80);
        let t = u64::from(i) * 1_000_000;
        c.handshake(t, tp, 0, 0);
        c.pkt(t + 1_000, tp, true, P | A, 1, 1, 100, 502);
        c.pkt(t + 2_000, tp, false, P | A, 1, 101, 1000, 1000);
        c.pkt(t + 3_000, tp, true, A, 101, 1_001, 0, 502);
        // The client closes first; the server's FIN is resent 280 ms later.
        c.pkt(t + 10_000, tp, true, F | A, 101, 1_001, 0, 502);
        c.pkt(t + 60_000, tp, false, F | A, 1_001, 102, 0, 1000);
        c.pkt(t + 340_000, tp, false, F | A, 1_001, 102, 0, 1000);
        c.pkt(t + 340_100, tp, true, A, 102, 1_002, 0, 502);
    }
    let a = c.run(Config::default());
    let d = &a.details.retransmit_timeouts;
    assert_eq!(
        (d.close_timeouts, d.close_flows_after_peer),
        (11, 11),
        "{d:?}"
    );
    let f = only(&a, Pathology::RetransmitTimeout);
    assert_eq!(f.severity, Severity::Info, "{f:#?}");
    assert!(
        f.summary.contains("no application was waiting"),
        "{}",
        f.summary
    );
}

/// Zeek's rdp-unknown-keyboard: the server's answer, which carried the ACK of the client's
/// request, was lost after the capture point; the client resent its request after 3 s with
/// an ACK that leaves the answer out, and the server resent the answer. analyze called the
/// client's resend spurious ("the receiver already had it: not loss"). The sender's own ACK
/// shows it never got the acknowledgement: a timeout that repaired a loss.
#[test]
fn a_resend_by_a_sender_that_never_got_the_ack_is_not_spurious() {
    let tp = tuple("192.168.1.1", 54990, "192.168.1.2", 3389);
    let mut c = Cap::new();
    c.handshake(0, tp, 0, 0);
    c.pkt(1_000, tp, true, P | A, 1, 1, 47, 502);
    // The answer acknowledges the request; it never reaches the client.
    c.pkt(1_100, tp, false, P | A, 1, 48, 19, 1000);
    // The server's timer resends the answer; the client's resends the request, its ACK
    // still at 1 (it has none of the answer).
    c.pkt(2_907_000, tp, false, P | A, 1, 48, 19, 1000);
    c.pkt(3_000_600, tp, true, P | A, 1, 1, 47, 502);
    c.pkt(3_000_700, tp, false, A, 20, 48, 0, 1000);
    c.pkt(3_001_000, tp, true, A, 48, 20, 0, 502);
    let a = c.run(Config::default());
    assert_eq!(a.totals.retransmissions, 2, "{:#?}", a.totals);
    assert_eq!(a.totals.retransmissions_spurious, 0, "{:#?}", a.totals);
    assert!(
        a.findings
            .iter()
            .all(|f| f.pathology != Pathology::SpuriousRetransmission),
        "{:#?}",
        a.findings
    );
    only(&a, Pathology::RetransmitTimeout);
    // The same resend by a sender whose ACK covers everything the receiver sent is spurious
    // (the acknowledgement was late, not lost).
    let mut c = Cap::new();
    c.handshake(0, tp, 0, 0);
    c.pkt(1_000, tp, true, P | A, 1, 1, 47, 502);
    c.pkt(1_100, tp, false, A, 1, 48, 0, 1000);
    c.pkt(300_000, tp, true, P | A, 1, 1, 47, 502);
    let a = c.run(Config::default());
    assert_eq!(a.totals.retransmissions_spurious, 1, "{:#?}", a.totals);
}

/// Zeek's handshake-reorder and ipv6-http-atomic-frag hold a SYN-ACK before its SYN
/// (timestamps 30 to 260 us apart): analyze saw a connection opened by the SYN-ACK and a SYN
/// reusing its 4-tuple "into TIME_WAIT", a CRITICAL time_wait_collision with a connection
/// that "never connected". The SYN that the SYN-ACK answers is that handshake's.
#[test]
fn a_syn_ack_captured_before_its_syn_is_one_handshake_not_a_collision() {
    let tp = tuple("141.142.228.5", 59856, "192.150.187.43", 80);
    let mut c = Cap::new();
    c.pkt(0, tp, false, S | A, 2_779_762_238, 4_263_588_411, 0, 65160);
    c.pkt(260, tp, true, S, 4_263_588_410, 0, 0, 64240);
    c.pkt(294, tp, true, A, 4_263_588_411, 2_779_762_239, 0, 502);
    c.pkt(443, tp, true, P | A, 4_263_588_411, 2_779_762_239, 136, 502);
    c.pkt(69_425, tp, false, A, 2_779_762_239, 4_263_588_547, 0, 1000);
    c.pkt(
        70_428,
        tp,
        false,
        P | A,
        2_779_762_239,
        4_263_588_547,
        1448,
        1000,
    );
    c.pkt(70_771, tp, true, A, 4_263_588_547, 2_779_763_687, 0, 502);
    let a = c.run(Config::default());
    assert!(a.findings.is_empty(), "{:#?}", a.findings);
    assert_eq!(
        (a.totals.connections, a.totals.connection_attempts),
        (1, 1),
        "{:#?}",
        a.totals
    );
    assert_eq!(a.totals.connections_with_handshake, 1);
}

/// Zeek's zip64, irc-353 and redis traces: a client connects to `localhost`, is refused on
/// `::1` and reaches `127.0.0.1` 100 us later (the fallback every resolver-driven client
/// does). analyze called it a CRITICAL connect failure, "1 of 2 refused". A refusal whose
/// client reached the same service on a new attempt at once is a delay, not a failure.
#[test]
fn a_refusal_recovered_on_another_address_of_the_host_is_a_delay_not_a_failure() {
    let v6 = tuple("::1", 50528, "::1", 80);
    let v4 = tuple("127.0.0.1", 50529, "127.0.0.1", 80);
    let mut c = Cap::new();
    c.pkt(0, v6, true, S, 100, 0, 0, 65535);
    c.pkt(58, v6, false, R | A, 0, 101, 0, 0);
    c.handshake(153, v4, 500, 900);
    c.pkt(300, v4, true, P | A, 501, 901, 80, 502);
    c.pkt(400, v4, false, P | A, 901, 581, 200, 1000);
    let a = c.run(Config::default());
    let f = only(&a, Pathology::ConnectFailure);
    assert_eq!(f.severity, Severity::Info, "{f:#?}");
    assert_eq!(f.impact.failed, 0, "{f:#?}");
    assert!(f.summary.contains("recovered"), "{}", f.summary);
    assert_eq!(a.details.refused_connects.recovered, 1);
    // Refused and never retried: a failure.
    let mut c = Cap::new();
    c.pkt(0, v6, true, S, 100, 0, 0, 65535);
    c.pkt(58, v6, false, R | A, 0, 101, 0, 0);
    c.handshake(
        5_000_000,
        tuple("127.0.0.1", 50529, "127.0.0.1", 8080),
        500,
        900,
    );
    let a = c.run(Config::default());
    let f = only(&a, Pathology::ConnectFailure);
    assert_eq!(f.severity, Severity::Critical, "{f:#?}");
}

/// Zeek's echo-connections: 500 connections closed by the client first in 130 ms (3,842/s,
/// 8.2 times the default budget of 471/s), 2% of the range held at once: analyze warned
/// that "the range would be used up after 7.3 s". A rate per second seen over less than a
/// second is a burst: context, not an exposure.
#[test]
fn a_burst_over_the_port_budget_shorter_than_a_second_is_context() {
    let mut c = Cap::new();
    for i in 0..500u32 {
        let port = 40_000 + (i * 2) as u16;
        let tp = tuple("127.0.0.1", port, "127.0.0.1", 7000);
        let t = u64::from(i) * 260;
        c.handshake(t, tp, i * 1000, 5_000);
        c.close(t + 150, tp, i * 1000 + 1, 5_001, true);
    }
    let a = c.run(Config::default());
    let d = &a.details.destinations[0];
    assert!(d.rate_vs_budget > 5.0, "{d:?}");
    assert!(d.span_us < 1_000_000, "{d:?}");
    let f = only(&a, Pathology::PortExhaustion);
    assert_eq!(f.severity, Severity::Info, "{f:#?}");
    assert!(f.summary.contains("a burst"), "{}", f.summary);
}

/// Zeek's smb_v2_only trace: four tail loss probes repeated data the receiver had already
/// acknowledged (the ACKs were late at the sender), 2.8% of 143 data segments: analyze
/// warned ("common"). A probe that repeats delivered data is the probe working as designed
/// (RFC 8985 section 7; the catalogue says so): named, info.
#[test]
fn spurious_tail_loss_probes_are_the_probe_working_not_harm() {
    let tp = tuple("172.31.112.17", 57832, "172.31.112.16", 445);
    let mut c = Cap::new();
    c.handshake(0, tp, 0, 0);
    let mut seq = 1u32;
    for i in 0..140u64 {
        let t = 1_000 + i * 50_000;
        c.pkt(t, tp, true, P | A, seq, 1, 1000, 502);
        c.pkt(t + 200, tp, false, A, 1, seq + 1000, 0, 1000);
        if i % 35 == 34 {
            // The probe: the last segment again 20 ms later, already acknowledged.
            c.pkt(t + 20_000, tp, true, P | A, seq, 1, 1000, 502);
        }
        seq += 1000;
    }
    let a = c.run(Config::default());
    assert_eq!(
        a.details.spurious_retransmissions.tlp, 4,
        "{:#?}",
        a.details.spurious_retransmissions
    );
    let f = only(&a, Pathology::SpuriousRetransmission);
    assert_eq!(f.severity, Severity::Info, "{f:#?}");
}

/// Zeek's 206_example_a: a Windows client's SYN is answered at once, the SYN-ACK is lost
/// after the capture point, the client resends its SYN 3 s later and connects on the second
/// SYN-ACK. analyze measured the connect delay to the first SYN-ACK, 408 us (info); the
/// client waited 3 s (critical): the connect ends when the client acknowledges a SYN-ACK.
#[test]
fn a_syn_resent_after_its_syn_ack_was_lost_waited_until_it_connected() {
    let tp = tuple("10.101.84.70", 10978, "129.174.93.161", 80);
    let mut c = Cap::new();
    c.pkt(0, tp, true, S, 2_872_276_979, 0, 0, 64240);
    c.pkt(408, tp, false, S | A, 2_785_015_667, 2_872_276_980, 0, 5840);
    c.pkt(3_002_168, tp, true, S, 2_872_276_979, 0, 0, 64240);
    c.pkt(
        3_002_650,
        tp,
        false,
        S | A,
        2_785_015_667,
        2_872_276_980,
        0,
        5840,
    );
    c.pkt(3_002_700, tp, true, A, 2_872_276_980, 2_785_015_668, 0, 502);
    c.pkt(
        3_003_000,
        tp,
        true,
        P | A,
        2_872_276_980,
        2_785_015_668,
        300,
        502,
    );
    let a = c.run(Config::default());
    let d = &a.details.syn_retransmits;
    assert_eq!(d.max_connect_delay_us, 3_002_700, "{d:?}");
    let f = only(&a, Pathology::SynRetransmit);
    assert_eq!(f.severity, Severity::Critical, "{f:#?}");
}

/// NetworkForensics' evidence05.pcap: a SYN resent after 3 s is answered first by a bare ACK
/// of its own ISN + 1, then by the SYN-ACK. A stale answer of an old connection acknowledges
/// something else; this one was called a TIME_WAIT collision "the client reset" (no reset in
/// the capture), CRITICAL.
#[test]
fn an_ack_of_the_syn_itself_is_no_stale_answer() {
    let tp = tuple("192.168.23.129", 1064, "59.53.91.102", 80);
    let mut c = Cap::new();
    c.pkt(0, tp, true, S, 1_000, 0, 0, 64240);
    c.pkt(2_913_000, tp, true, S, 1_000, 0, 0, 64240);
    c.pkt(2_913_020, tp, false, A, 5_000, 1_001, 0, 65160);
    c.pkt(3_607_000, tp, false, S | A, 5_000, 1_001, 0, 65160);
    c.pkt(3_607_100, tp, true, A, 1_001, 5_001, 0, 502);
    let a = c.run(Config::default());
    assert!(
        a.findings
            .iter()
            .all(|f| f.pathology != Pathology::TimeWaitCollision
                && f.pathology != Pathology::StaleAckRace),
        "{:#?}",
        a.findings
    );
    assert_eq!(
        a.details.syn_retransmits.connections, 1,
        "{:#?}",
        a.details.syn_retransmits
    );
}
