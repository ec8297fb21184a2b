//! Where the time went, through the engine: which waits name a part and which do not.

use tcpdoctor_model::Pathology;

use super::{tuple, Cap, A, P};
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
