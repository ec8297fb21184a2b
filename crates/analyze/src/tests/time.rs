//! Where the time went, through the engine: which waits name a part and which do not.

use tcpdoctor_model::Pathology;

use super::{tuple, Cap, A, P, S};
use crate::engine::Config;

const TIME: [Pathology; 3] = [
    Pathology::NetworkLatency,
    Pathology::ServerResponse,
    Pathology::ClientDelay,
];

fn time_findings(a: &crate::Analysis) -> Vec<Pathology> {
    a.findings
        .iter()
        .map(|f| f.pathology)
        .filter(|p| TIME.contains(p))
        .collect()
}

/// A server that speaks first (a banner), a person who types the command 2 s later, an
/// answer at once: the wait after the server's words is the client's turn in a conversation,
/// not a first request held back; nothing is named, and the exchange is in the table.
#[test]
fn a_wait_after_a_servers_banner_names_nothing() {
    let tp = tuple("10.0.0.1", 40000, "10.0.0.2", 21);
    let mut c = Cap::new();
    c.handshake(0, tp, 1000, 5000);
    c.pkt(1_000, tp, false, P | A, 5001, 1001, 40, 1000);
    c.pkt(1_050, tp, true, A, 1001, 5041, 0, 502);
    c.pkt(2_001_000, tp, true, P | A, 1001, 5041, 12, 502);
    c.pkt(2_001_500, tp, false, P | A, 5041, 1013, 30, 1000);
    c.pkt(2_001_550, tp, true, A, 1013, 5071, 0, 502);
    let a = c.run(Config::default());
    assert_eq!(time_findings(&a), [], "{:#?}", a.findings);
    assert_eq!(a.services.len(), 1);
    assert_eq!(a.services[0].exchanges, 1);
    assert_eq!(a.services[0].client_delay_p50_us, None);
    assert!(a.services[0].response_max_us < 1_000, "{:?}", a.services);
}

/// The client waited 2 s after the handshake and the server 2 s more: two parts past the
/// floor, no one of them the cause (a conversation between people, a protocol where either
/// side speaks in turn): nothing named, counted as ambiguous.
#[test]
fn two_slow_parts_in_one_exchange_name_neither() {
    let tp = tuple("10.0.0.1", 40000, "10.0.0.2", 6667);
    let mut c = Cap::new();
    c.handshake(0, tp, 1000, 5000);
    c.pkt(2_000_100, tp, true, P | A, 1001, 5001, 20, 502);
    c.pkt(2_000_150, tp, false, A, 5001, 1021, 0, 1000);
    c.pkt(4_000_100, tp, false, P | A, 5001, 1021, 20, 1000);
    c.pkt(4_000_150, tp, true, A, 1021, 5021, 0, 502);
    let a = c.run(Config::default());
    assert_eq!(time_findings(&a), [], "{:#?}", a.findings);
    assert_eq!(a.details.time.ambiguous, 1);
    assert_eq!(a.details.time.exchanges, 1);
}

/// Ten connections to one server, nine answered after `usual_us` and one after 250 ms.
fn one_slower_than_usual(usual_us: u64) -> crate::Analysis {
    let mut c = Cap::new();
    for i in 0..10u16 {
        let tp = tuple("10.0.0.1", 40000 + i, "10.0.0.2", 80);
        let t = u64::from(i) * 1_000_000;
        let think = if i == 4 { 250_000 } else { usual_us };
        c.handshake(t, tp, 1000, 5000);
        c.pkt(t + 200, tp, true, P | A, 1001, 5001, 100, 502);
        c.pkt(t + 200 + think, tp, false, P | A, 5001, 1101, 1000, 1000);
        c.pkt(t + 250 + think, tp, true, A, 1101, 6001, 0, 502);
    }
    c.run(Config::default())
}

/// A reply of 250 ms stands out from a server that usually answers in 20 ms (12 times its
/// median): named, one of ten. From one that usually takes 100 ms it is 2.5 times the median:
/// the service's normal spread, not named, though past the 200 ms floor.
#[test]
fn a_slow_reply_is_named_only_well_above_the_services_median() {
    let a = one_slower_than_usual(20_000);
    assert_eq!(
        time_findings(&a),
        [Pathology::ServerResponse],
        "{:#?}",
        a.findings
    );
    let f = &a.findings[a
        .findings
        .iter()
        .position(|f| f.pathology == Pathology::ServerResponse)
        .unwrap()];
    assert_eq!((f.impact.affected, f.impact.observed), (1, Some(10)));
    let a = one_slower_than_usual(100_000);
    assert_eq!(time_findings(&a), [], "{:#?}", a.findings);
    assert_eq!(a.services[0].exchanges, 10);
}

/// `--flows` rows carry each connection's exchanges, its first one's server time and the
/// client's wait after the handshake, also once later exchanges have replaced the first.
#[test]
fn a_flow_row_keeps_its_first_exchange() {
    let tp = tuple("10.0.0.1", 40000, "10.0.0.2", 80);
    let mut c = Cap::new();
    // SYN-ACK 50 us after the SYN: the path's share.
    c.handshake(0, tp, 1000, 5000);
    c.pkt(5_100, tp, true, P | A, 1001, 5001, 100, 502);
    c.pkt(305_100, tp, false, P | A, 5001, 1101, 1000, 1000);
    c.pkt(306_000, tp, true, P | A, 1101, 6001, 100, 502);
    c.pkt(307_000, tp, false, P | A, 6001, 1201, 1000, 1000);
    c.pkt(307_050, tp, true, A, 1201, 7001, 0, 502);
    let a = c.run(Config {
        keep_flows: true,
        ..Config::default()
    });
    let f = &a.flows[0];
    assert_eq!(f.exchanges, 2);
    assert_eq!(f.first_response_us, Some(299_950));
    assert_eq!(f.client_delay_us, Some(5_000));
}

/// A handshake whose SYN-ACK comes `leg_us` after the SYN, the client's ACK 100 us later;
/// the request at once, its acknowledgement `ack_us` after it, the answer `answer_us` after it.
fn slow_path(leg_us: u64, ack_us: u64, answer_us: u64) -> crate::Analysis {
    let tp = tuple("10.0.0.1", 40000, "10.0.0.2", 80);
    let mut c = Cap::new();
    c.pkt(0, tp, true, S, 1000, 0, 0, 64240);
    c.pkt(leg_us, tp, false, S | A, 5000, 1001, 0, 65160);
    c.pkt(leg_us + 100, tp, true, A, 1001, 5001, 0, 502);
    let req = leg_us + 200;
    c.pkt(req, tp, true, P | A, 1001, 5001, 600, 502);
    c.pkt(req + ack_us, tp, false, A, 5001, 1601, 0, 1000);
    c.pkt(req + answer_us, tp, false, P | A, 5001, 1601, 1400, 1000);
    c.pkt(req + answer_us + 100, tp, true, A, 1601, 6401, 0, 502);
    c.run(Config::default())
}

/// The SYN-ACK takes 878 ms, the request's ACK 1.155 s and the answer 16 ms after that
/// (latency2.pcapng of Practical Packet Analysis, tests/data/public): the path's 1.77 s and
/// the server's 293 ms (the gap less the handshake's leg) both pass the floor, and the path is
/// six times the server: the path is named, the server's part said beside it. A server of
/// 1 s behind a 150 ms path (300 ms of the path's, 850 ms of the server's) is the server's.
/// Parts within twice each other name neither.
#[test]
fn the_path_and_a_part_twice_smaller_name_the_larger() {
    let a = slow_path(878_000, 1_155_000, 1_171_000);
    assert_eq!(
        time_findings(&a),
        [Pathology::NetworkLatency],
        "{:#?}",
        a.findings
    );
    let f = &a.findings[0];
    assert!(
        f.summary.contains("took at most half as long"),
        "{}",
        f.summary
    );
    let text = format!("{:?}", f.evidence);
    assert!(text.contains("the server's part 293"), "{text}");
    assert_eq!(a.details.time.ambiguous, 0);

    let a = slow_path(150_000, 150_000, 1_000_000);
    assert_eq!(
        time_findings(&a),
        [Pathology::ServerResponse],
        "{:#?}",
        a.findings
    );

    // 400 ms of path, 500 ms of server: neither twice the other.
    let a = slow_path(200_000, 200_000, 700_000);
    assert_eq!(time_findings(&a), [], "{:#?}", a.findings);
    assert_eq!(a.details.time.ambiguous, 1);
}
