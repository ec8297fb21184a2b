//! Port exhaustion: the budget, the range, and what is not exhaustion.

use super::*;

/// `n` connections from `client` to one server, one every `every_us`, each from its own
/// port (from `port0`, `ports` of them in turn), closed by the client with a FIN (`fin`) or
/// with a reset.
fn churn(c: &mut Cap, n: u32, every_us: u64, port0: u16, ports: u16, fin: bool) {
    for i in 0..n {
        let port = port0 + (i % u32::from(ports)) as u16;
        let tp = tuple("10.0.0.1", port, "10.0.0.2", 8080);
        let t = u64::from(i) * every_us;
        let isn = i.wrapping_mul(7_919_000);
        c.handshake(t, tp, isn, 5_000);
        let end = c.transfer(t + 110, tp, isn.wrapping_add(1), 5_001, 1, 100);
        if fin {
            c.close(t + 200, tp, end, 5_001, true);
        } else {
            c.pkt(t + 200, tp, true, R | A, end, 5_001, 0, 502);
        }
    }
}

/// Issue 9 defect 7: the rate is taken over the real span the connections were opened in
/// (it used to be floored at 1 s): 200 connections in 21 ms toward one destination, each
/// closed by the client first, is 20 times the default budget (28,232 ports / 60 s = 471/s).
/// A burst that short says nothing of a rate that lasts, and ports handed out in order, each
/// used once, are no sign that the range ran short: context. Over 1.3 s the same rate, with
/// the client coming back to its ports, is exhaustion.
#[test]
fn a_client_faster_than_the_default_port_budget_is_measured_over_its_real_span() {
    let mut c = Cap::new();
    churn(&mut c, 200, 105, 40_000, 200, true);
    let a = c.run(Config::default());
    let d = &a.details.destinations[0];
    assert_eq!(d.client_closed_first, 200);
    assert_eq!(d.port_range, "32768-60999");
    assert!(d.rate_vs_budget > 15.0 && d.rate_vs_budget < 25.0, "{d:?}");
    assert!(d.filled_block && !d.ran_short, "{d:?}");
    let f = only(&a, Pathology::PortExhaustion);
    assert_eq!(f.severity, tcpdoctor_model::Severity::Info, "{f:#?}");
    assert!(f.summary.contains("a burst of 21 ms"), "{}", f.summary);
    // A rate under the budget is no finding: the same 200 over 2 s (100/s).
    let mut c = Cap::new();
    churn(&mut c, 200, 10_000, 40_000, 200, true);
    let a = c.run(Config::default());
    assert!(
        !a.findings
            .iter()
            .any(|f| f.pathology == Pathology::PortExhaustion),
        "{:#?}",
        a.findings
    );
}

/// A client that hands out source ports in order (Windows, older BSDs) fills a contiguous
/// block with every connect. Measured on a public capture (markofu/pcaps, Practical Packet
/// Analysis' ftp-crack.pcap, its first half): 705 FTP logins from ports 2229-2932, each used
/// once, 16/s over 44 s, no connect failing; the block was taken for the client's whole range
/// and the rate for 1.3x its budget: a CRITICAL port exhaustion. Nothing ran short: the client
/// never came back to a port. The same churn coming back to its ports is exhaustion.
#[test]
fn ports_handed_out_in_order_each_used_once_are_not_a_range_that_ran_short() {
    let mut c = Cap::new();
    churn(&mut c, 700, 62_500, 2_229, 700, true);
    let a = c.run(Config::default());
    let d = &a.details.destinations[0];
    assert!(
        d.filled_block && d.port_reuses == 0 && !d.ran_short,
        "{d:?}"
    );
    assert_eq!(
        d.port_range_source,
        crate::detect::RangeSource::LinuxDefault
    );
    assert!(
        a.findings
            .iter()
            .all(|f| f.pathology != Pathology::PortExhaustion
                || f.severity == tcpdoctor_model::Severity::Info),
        "{:#?}",
        a.findings
    );
    let mut c = Cap::new();
    churn(&mut c, 1_400, 31_250, 2_229, 700, true);
    let a = c.run(Config::default());
    let f = only(&a, Pathology::PortExhaustion);
    assert_eq!(f.severity, tcpdoctor_model::Severity::Critical, "{f:#?}");
}

/// Linux scatters source ports (one parity first): a block it filled completely had run short
/// even when no port came round again, since connects then fail before any SYN (the lab's
/// port-exhaustion scenario: a 100-port range used up, EADDRNOTAVAIL). The same ports handed
/// out in order are a sequential allocator's and say nothing.
#[test]
fn a_block_filled_by_scattered_ports_ran_short_without_a_reuse() {
    let run = |scattered: bool| {
        let mut c = Cap::new();
        for i in 0..100u32 {
            let k = if scattered { (i * 37) % 100 } else { i };
            let tp = tuple("10.0.0.1", 40_000 + k as u16, "10.0.0.2", 8080);
            let t = u64::from(i) * 12_000;
            let isn = i.wrapping_mul(7_919_000);
            c.handshake(t, tp, isn, 5_000);
            let end = c.transfer(t + 110, tp, isn.wrapping_add(1), 5_001, 1, 100);
            c.close(t + 200, tp, end, 5_001, true);
        }
        c.run(Config::default())
    };
    let a = run(true);
    let d = &a.details.destinations[0];
    assert!(d.filled_block && d.port_reuses == 0 && d.ran_short, "{d:?}");
    assert_eq!(d.port_range, "40000-40099");
    let f = only(&a, Pathology::PortExhaustion);
    assert_eq!(f.severity, tcpdoctor_model::Severity::Critical, "{f:#?}");
    let a = run(false);
    let d = &a.details.destinations[0];
    assert!(d.filled_block && !d.ran_short, "{d:?}");
    assert!(
        a.findings
            .iter()
            .all(|f| f.pathology != Pathology::PortExhaustion
                || f.severity == tcpdoctor_model::Severity::Info),
        "{:#?}",
        a.findings
    );
}

/// Issue 9 defect 7: when the source ports fill a block completely and come round again,
/// the block is taken for the client's whole range and judged against.
#[test]
fn a_source_port_block_filled_completely_is_taken_for_the_whole_range() {
    let mut c = Cap::new();
    // 100 ports, 300 connections over 3 s: 100/s against 100 ports / 60 s = 1.7/s.
    churn(&mut c, 300, 10_000, 40_000, 100, true);
    let a = c.run(Config::default());
    let f = only(&a, Pathology::PortExhaustion);
    assert_eq!(f.severity, tcpdoctor_model::Severity::Critical);
    let d = &a.details.destinations[0];
    assert_eq!(d.port_range, "40000-40099");
    assert_eq!(d.port_range_source, crate::detect::RangeSource::FilledBlock);
    assert!(d.ports_in_use_share > 0.99, "{d:?}");
    assert!(
        f.summary.contains("probably the client's whole range"),
        "{}",
        f.summary
    );
}

/// Issue 9 defect 8: connections closed by a reset (SO_LINGER 0) leave no TIME_WAIT:
/// reconnecting on their ports at any rate spends no port budget.
#[test]
fn reset_closes_hold_no_port_and_are_not_port_exhaustion() {
    let mut c = Cap::new();
    churn(&mut c, 3_000, 105, 40_000, 100, false);
    let a = c.run(Config::default());
    assert!(
        !a.findings
            .iter()
            .any(|f| f.pathology == Pathology::PortExhaustion),
        "{:#?}",
        a.findings
    );
    assert_eq!(a.details.destinations[0].reset_closes, 3_000);
    assert_eq!(a.details.destinations[0].client_closed_first, 0);
}

/// Issue "Verdicts you can trust", accept-overflow: a client churning faster than the port
/// budget (2,000 connections closed by the client first at ~1,600/s, 3.4x the default
/// range's 471/s) on ports spread over the range as Linux hands them out, one parity, none
/// reused: nothing in the capture shows the ports running short, so the rate is context,
/// not a cause above info (probe reports the same rate at which no connect failed so).
#[test]
fn a_rate_over_the_port_budget_without_ports_running_short_is_an_exposure_not_exhaustion() {
    let mut c = Cap::new();
    for i in 0..2_000u32 {
        let port = 32_768 + ((i * 14) % 28_000) as u16;
        let tp = tuple("10.0.0.1", port, "10.0.0.2", 8080);
        let t = u64::from(i) * 625;
        let isn = i.wrapping_mul(7_919_000);
        c.handshake(t, tp, isn, 5_000);
        let end = c.transfer(t + 110, tp, isn.wrapping_add(1), 5_001, 1, 100);
        c.close(t + 200, tp, end, 5_001, true);
    }
    let a = c.run(Config::default());
    let d = &a.details.destinations[0];
    assert!(d.rate_vs_budget > 3.0 && d.rate_vs_budget < 4.0, "{d:?}");
    assert!(!d.ran_short && !d.filled_block, "{d:?}");
    let f = only(&a, Pathology::PortExhaustion);
    // Named, as an exposure: the rate would use the range up, but nothing ran short yet.
    assert_eq!(f.severity, tcpdoctor_model::Severity::Warning, "{f:#?}");
    assert!(f.impact.exposure, "{f:#?}");
    assert!(
        f.summary.contains("no sign in the capture"),
        "{}",
        f.summary
    );
}

/// Ports reused within the client's own TIME_WAIT toward loopback by SYNs carrying
/// timestamps are Linux's tcp_tw_reuse=2 (its default, loopback only) at work, which recycles
/// such ports whether or not the range is short: no sign of exhaustion (bench/analyze's wrk
/// capture on lo, 62,954 such reuses, was a CRITICAL port_exhaustion). The same churn without
/// timestamps, or toward another host, still is one.
#[test]
fn time_wait_reuse_toward_loopback_with_timestamps_is_not_exhaustion() {
    let churn = |server: &str, ts: bool| {
        let mut c = Cap::new();
        // 1,500 connections at 1,000/s over 100 ports: each port back within 100 ms.
        for i in 0..1_500u32 {
            // Spread over the range as Linux hands ports out (one parity, no block filled).
            let tp = tuple(server, 32_768 + ((i % 100) * 280) as u16, server, 8080);
            let t = u64::from(i) * 1_000;
            let isn = i.wrapping_mul(7_919_000);
            c.handshake(t, tp, isn, 5_000);
            if ts {
                let n = c.segs.len();
                c.segs[n - 3].options.timestamps = Some((1 + i, 0));
            }
            c.close(t + 200, tp, isn.wrapping_add(1), 5_001, true);
        }
        c.run(Config::default())
    };
    let a = churn("127.0.0.1", true);
    let d = &a.details.destinations[0];
    assert!(d.reuses_within_time_wait > 1_000, "{d:?}");
    assert_eq!(
        d.reuses_within_time_wait_loopback,
        d.reuses_within_time_wait
    );
    assert!(!d.ran_short, "{d:?}");
    let f = only(&a, Pathology::PortExhaustion);
    assert_eq!(f.severity, tcpdoctor_model::Severity::Info, "{f:#?}");
    assert!(f.summary.contains("tcp_tw_reuse=2"), "{}", f.summary);
    for (server, ts) in [("127.0.0.1", false), ("10.0.0.2", true)] {
        let a = churn(server, ts);
        let d = &a.details.destinations[0];
        assert!(d.ran_short, "{server} ts {ts}: {d:?}");
        let f = only(&a, Pathology::PortExhaustion);
        assert_eq!(f.severity, tcpdoctor_model::Severity::Critical, "{f:#?}");
    }
}
