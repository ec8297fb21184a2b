//! Tail-loss probes the receiver already had: a slow reader's consequence, or spurious.

use super::*;

const W: &str = "10.0.0.1:43102";
const R: &str = "10.0.0.2:5001";

fn probe() -> Detail {
    Detail::Retransmit {
        class: RetransmitClass::TailLossProbe,
        attempt: 1,
        waited_us: None,
        peer_silent: false,
        unsent_errno: None,
    }
}

fn old_data() -> Detail {
    Detail::Drop {
        reason: 33,
        ifindex: 2,
        ifname: Some("tdocsv".into()),
        tcp_flags: 0x18,
        timewait: None,
    }
}

fn traced(window_shut: bool, probes: u64, drops: u64) -> Engine {
    let reasons = Reasons {
        drop: crate::btf::EnumNames::from_pairs(&[(33, "TCP_OLD_DATA")]),
        ..Reasons::default()
    };
    let mut e = Engine::new(Config::default(), 0, reasons);
    let mut t = 1;
    if window_shut {
        e.push(
            ev(t, 1, TcpState::Established, W, R, Detail::ZeroWindow),
            &mut NoLookup,
        );
    }
    for i in 0..probes {
        t += 10;
        e.push(
            ev(t, 1, TcpState::Established, W, R, probe()),
            &mut NoLookup,
        );
        if i < drops {
            // The reader's host drops the copy (the record names the packet's source first).
            e.push(
                ev(t + 1, 2, TcpState::Established, W, R, old_data()),
                &mut NoLookup,
            );
        }
    }
    e
}

fn find(f: &[Finding], p: Pathology) -> Option<&Finding> {
    f.iter().find(|f| f.pathology == p)
}

#[test]
fn probes_a_slow_reader_already_had_are_its_evidence_not_a_loss() {
    let e = traced(true, 3, 3);
    let f = e.findings(1, &mut NoLookup);
    assert!(find(&f, Pathology::Retransmission).is_none(), "{f:#?}");
    let slow = find(&f, Pathology::SlowReader).expect("slow reader");
    let text = format!("{:?}", slow.evidence);
    assert!(
        text.contains("tail-loss probes into the reader's full buffer"),
        "{text}"
    );
    assert!(text.contains(": 3"), "{text}");
    let s = e.summary();
    assert_eq!(s.consequence_resends[&Pathology::SlowReader].other, 3);
    assert_eq!(s.consequence_resends[&Pathology::SlowReader].timeouts, 0);
}

#[test]
fn probes_the_receiver_dropped_as_old_data_without_a_shut_window_are_spurious() {
    let e = traced(false, 2, 2);
    let f = e.findings(1, &mut NoLookup);
    assert!(find(&f, Pathology::Retransmission).is_none(), "{f:#?}");
    let s = find(&f, Pathology::SpuriousRetransmission).expect("spurious");
    assert_eq!(s.severity, tcpdoctor_model::Severity::Info);
    assert!(
        s.summary.starts_with("2 tail-loss probe(s) on 1 flow(s)"),
        "{}",
        s.summary
    );
}

#[test]
fn only_as_many_probes_as_old_data_drops_leave_the_loss_tally() {
    // Three probes, one copy dropped as old data: two stay losses (the trace cannot say
    // the receiver had them).
    let e = traced(true, 3, 1);
    let f = e.findings(1, &mut NoLookup);
    let loss = find(&f, Pathology::Retransmission).expect("the probes not shown repeated");
    assert!(
        loss.summary.starts_with("2 fast retransmission(s)"),
        "{}",
        loss.summary
    );
    assert_eq!(
        e.summary().consequence_resends[&Pathology::SlowReader].other,
        1
    );
}

#[test]
fn probes_with_no_drop_traced_at_the_receiver_stay_losses() {
    let e = traced(true, 2, 0);
    let f = e.findings(1, &mut NoLookup);
    let loss = find(&f, Pathology::Retransmission).expect("loss");
    assert!(
        loss.summary.starts_with("2 fast retransmission(s)"),
        "{}",
        loss.summary
    );
    assert!(e.summary().consequence_resends.is_empty());
}
