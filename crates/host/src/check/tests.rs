use super::*;
use tcpdoctor_model::{Evidence, PortRange, Severity};

/// The settings of this machine kind (Linux 6.18 defaults).
fn defaults() -> Inputs {
    Inputs {
        tcp: TcpSettings {
            ip_local_port_range: PortRange::new(32768, 60999).unwrap(),
            tcp_tw_reuse: Some(2),
            tcp_timestamps: Some(1),
            tcp_rfc1337: Some(0),
            tcp_syn_retries: 6,
            tcp_syn_linear_timeouts: Some(4),
            tcp_synack_retries: Some(5),
            tcp_rto_min_us: Some(200_000),
            tcp_fin_timeout: Some(60),
            tcp_max_tw_buckets: Some(262_144),
            tcp_max_syn_backlog: Some(4096),
            somaxconn: Some(4096),
        },
        more: More {
            tcp_rmem_bytes: Some([4096, 131_072, 6_291_456]),
            tcp_wmem_bytes: Some([4096, 16_384, 4_194_304]),
            rmem_max_bytes: Some(6_291_456),
            wmem_max_bytes: Some(212_992),
            tcp_syncookies: Some(1),
            tcp_tw_recycle: None,
            tcp_abort_on_overflow: Some(0),
            tcp_tw_reuse_delay_ms: Some(1000),
            tcp_rto_max_ms: Some(120_000),
        },
        routes: vec![],
        listeners: vec![],
    }
}

fn arithmetic(f: &Finding) -> Vec<(String, f64)> {
    f.evidence
        .iter()
        .filter_map(|e| match e {
            Evidence::Arithmetic { formula, result } => Some((formula.clone(), *result)),
            _ => None,
        })
        .collect()
}

fn with_setting<'a>(fs: &'a [Finding], name: &str) -> Vec<&'a Finding> {
    fs.iter()
        .filter(|f| {
            f.evidence
                .iter()
                .any(|e| matches!(e, Evidence::Setting { name: n, .. } if n == name))
        })
        .collect()
}

#[test]
fn defaults_give_only_info() {
    let fs = audit(&defaults());
    assert!(fs.iter().all(|f| f.severity == Severity::Info), "{fs:#?}");
    let range = &with_setting(&fs, RANGE)[0];
    let a = arithmetic(range);
    assert!(
        a.iter()
            .any(|(s, r)| s.contains("28232 ports / 60 s") && (*r - 470.53).abs() < 0.01),
        "{a:?}"
    );
    // Parity: 32768 is even; connect() tries the 14116 even ports first.
    assert!(
        a.iter()
            .any(|(s, r)| s.starts_with("even ports") && *r == 14116.0),
        "{a:?}"
    );
    let reuse = &with_setting(&fs, "net.ipv4.tcp_tw_reuse")[0];
    assert!(reuse.summary.contains("loopback"), "{}", reuse.summary);
}

/// Issue 15 (check's side): the ladder printed "1, 2, 3, 4, 5, 7 s, fail at 11 s"; the kernel
/// bounds SYN retries by a time budget as well as by their count, and a blackholed connect
/// fails after about 131-135 s (measured 134.9 s on this machine kind).
#[test]
fn syn_ladder_is_bounded_by_time_and_fails_at_131_s_not_11_s() {
    let fs = audit(&defaults());
    let ladder = fs
        .iter()
        .find(|f| f.pathology == Pathology::SynRetransmit)
        .unwrap();
    assert!(
        ladder
            .summary
            .contains("1, 2, 3, 4, 5, 7, 11, 19, 35, 67 s, fail at 131 s"),
        "{}",
        ladder.summary
    );
    assert!(
        ladder.summary.contains("127 s time budget"),
        "{}",
        ladder.summary
    );
    let a = arithmetic(ladder);
    assert_eq!(a[0].1, 131.0, "{a:?}");
    assert!(a[0].0.contains("10 retransmissions"), "{a:?}");
    assert_eq!(a[1].1, 127.0, "{a:?}");
    // The measured 134.9 s lies between the nominal and the latest failure.
    assert!((134.9..150.0).contains(&a[2].1), "{a:?}");
    assert_eq!(ladder.severity, Severity::Info);
    // tcp_rto_max_ms caps the steps (6.15+): 2 s steps after the linear part.
    let mut i = defaults();
    i.more.tcp_rto_max_ms = Some(2_000);
    let fs = audit(&i);
    let capped = fs
        .iter()
        .find(|f| f.pathology == Pathology::SynRetransmit)
        .unwrap();
    assert!(
        capped.summary.contains("1, 2, 3, 4, 5, 7, 9, 11"),
        "{}",
        capped.summary
    );
}

#[test]
fn small_range_no_reuse_and_rfc1337_are_reported_with_arithmetic() {
    let mut i = defaults();
    i.tcp.ip_local_port_range = PortRange::new(40000, 40199).unwrap();
    i.tcp.tcp_tw_reuse = Some(0);
    i.tcp.tcp_rfc1337 = Some(1);
    let fs = audit(&i);
    let range = with_setting(&fs, RANGE)[0];
    assert_eq!(range.severity, Severity::Warning);
    assert!(arithmetic(range)
        .iter()
        .any(|(s, r)| s.contains("200 ports / 60 s") && *r == 3.33));
    let reuse = with_setting(&fs, "net.ipv4.tcp_tw_reuse")[0];
    assert_eq!(reuse.severity, Severity::Warning);
    assert_eq!(reuse.pathology, Pathology::PortExhaustion);
    assert!(reuse.summary.contains("3.33 conn/s"), "{}", reuse.summary);
    let rfc = with_setting(&fs, "net.ipv4.tcp_rfc1337")[0];
    assert_eq!(rfc.pathology, Pathology::TimeWaitCollision);
    assert_eq!(rfc.severity, Severity::Warning);
    // A colliding connect runs the whole ladder: 131 s with the default settings.
    assert_eq!(arithmetic(rfc)[0].1, 131.0);
}

#[test]
fn odd_low_port_changes_the_preferred_parity() {
    let mut i = defaults();
    i.tcp.ip_local_port_range = PortRange::new(1001, 1100).unwrap();
    let fs = audit(&i);
    let a = arithmetic(with_setting(&fs, RANGE)[0]);
    assert!(a.iter().any(|(s, _)| s.starts_with("odd ports")), "{a:?}");
}

#[test]
fn reuse_one_without_timestamps_is_useless_and_collisions_stall() {
    let mut i = defaults();
    i.tcp.tcp_tw_reuse = Some(1);
    i.tcp.tcp_timestamps = Some(0);
    let fs = audit(&i);
    let reuse = with_setting(&fs, "net.ipv4.tcp_tw_reuse")[0];
    assert_eq!(reuse.severity, Severity::Warning);
    assert!(reuse.summary.contains("no effect"));
    assert!(fs
        .iter()
        .any(|f| f.pathology == Pathology::TimeWaitCollision
            && f.summary.starts_with("tcp_timestamps=0")));
    // With timestamps on, reuse=1 lifts the budget: range finding is not a warning.
    i.tcp.tcp_timestamps = Some(1);
    i.tcp.ip_local_port_range = PortRange::new(40000, 40199).unwrap();
    let fs = audit(&i);
    assert_eq!(with_setting(&fs, RANGE)[0].severity, Severity::Info);
    let reuse = with_setting(&fs, "net.ipv4.tcp_tw_reuse")[0];
    assert!(arithmetic(reuse).iter().any(|(_, r)| *r == 200.0));
}

#[test]
fn unsafe_settings_are_called_unsafe() {
    let mut i = defaults();
    i.more.tcp_tw_recycle = Some(1);
    i.more.tcp_syncookies = Some(0);
    i.tcp.tcp_fin_timeout = Some(5);
    i.tcp.tcp_max_tw_buckets = Some(1000);
    let fs = audit(&i);
    let recycle = with_setting(&fs, "net.ipv4.tcp_tw_recycle")[0];
    // Clients behind NAT would fail outright: a critical harm, judged as an exposure
    // (nothing failed yet in what the audit saw) one level lower.
    assert_eq!(recycle.severity, Severity::Warning);
    assert!(recycle.impact.exposure && recycle.impact.failed > 0);
    assert!(recycle.summary.contains("unsafe"));
    assert!(with_setting(&fs, "net.ipv4.tcp_syncookies")[0]
        .summary
        .contains("unsafe"));
    assert!(with_setting(&fs, "net.ipv4.tcp_fin_timeout")[0]
        .summary
        .contains("does not shorten TIME_WAIT"));
    let tw = with_setting(&fs, "net.ipv4.tcp_max_tw_buckets")[0];
    assert_eq!(tw.severity, Severity::Warning);
}

fn ladder(fs: &[Finding]) -> &Finding {
    fs.iter()
        .find(|f| f.pathology == Pathology::SynRetransmit)
        .unwrap()
}

/// The kernel's own SYN ladder is context on any kernel (the old exponential one fails at
/// 127 s); more retries than the default `tcp_syn_retries=6` expose connects to a longer
/// hang.
#[test]
fn more_syn_retries_than_the_default_expose_a_longer_hang() {
    let mut i = defaults();
    i.tcp.tcp_syn_linear_timeouts = None;
    let fs = audit(&i);
    let l = ladder(&fs);
    assert_eq!(l.severity, Severity::Info);
    assert_eq!(arithmetic(l)[0].1, 127.0);
    let default_give_up = arithmetic(ladder(&audit(&defaults())))[0].1;
    let mut i = defaults();
    i.tcp.tcp_syn_retries = 8;
    let fs = audit(&i);
    let l = ladder(&fs);
    assert_eq!(l.severity, Severity::Warning);
    assert!(l.impact.exposure);
    assert!(arithmetic(l)[0].1 > default_give_up, "{l:#?}");
}

#[test]
fn rto_floor_is_the_smallest_of_sysctl_and_routes() {
    let mut i = defaults();
    assert_eq!(i.rto_floor(), Duration::from_millis(200));
    i.routes = parse_routes(
        "10.0.0.0/24 dev eth0 rto_min lock 5ms\n10.2.0.0/24 dev eth2 rto_min lock 300ms\n",
    );
    assert_eq!(i.rto_floor(), Duration::from_millis(5));
    i.tcp.tcp_rto_min_us = Some(1000);
    assert_eq!(i.rto_floor(), Duration::from_millis(1));
}

#[test]
fn rto_floor_routes_and_buffers() {
    let mut i = defaults();
    i.routes = parse_routes(
        "10.0.0.0/24 dev eth0 proto kernel scope link src 10.0.0.2 rto_min lock 5ms \n\
         10.1.0.0/24 dev eth1 rto_min 500us\n\
         default via 10.0.0.1 dev eth0\n",
    );
    assert_eq!(i.routes.len(), 2);
    assert_eq!(i.routes[0].rto_min_us, 5000);
    assert_eq!(i.routes[1].rto_min_us, 500);
    i.more.tcp_rmem_bytes = Some([4096, 87380, 262_144]);
    let fs = audit(&i);
    let incast = fs
        .iter()
        .find(|f| f.pathology == Pathology::Incast)
        .unwrap();
    assert_eq!(arithmetic(incast)[0].1, 2000.0);
    let risky = fs
        .iter()
        .find(|f| f.pathology == Pathology::RiskySetting && f.summary.contains("RTO floor"))
        .unwrap();
    assert_eq!(risky.evidence.len(), 1, "only the 500us route: {risky:#?}");
    let rmem = with_setting(&fs, "net.ipv4.tcp_rmem")[0];
    // 262144 B * 8 / 0.1 s = 20.97 Mbit/s
    assert_eq!(arithmetic(rmem)[0].1, 20.97);
}

#[test]
fn listener_backlogs_from_the_census() {
    let mut i = defaults();
    i.tcp.somaxconn = Some(128);
    i.listeners = vec![
        ListenerBacklog {
            local: "0.0.0.0:80".into(),
            backlog: 128,
        },
        ListenerBacklog {
            local: "127.0.0.1:7000".into(),
            backlog: 1,
        },
    ];
    let fs = audit(&i);
    let s = with_setting(&fs, "net.core.somaxconn")[0];
    assert_eq!(s.severity, Severity::Warning);
    assert!(s.evidence.iter().any(|e| matches!(e, Evidence::Examples { items, .. } if items == &vec!["0.0.0.0:80".to_string()])));
    assert!(fs.iter().any(|f| f.summary.contains("backlog under 16")));
}

#[test]
fn time_units_of_ip_route() {
    assert_eq!(parse_time_us("5ms"), Some(5000));
    assert_eq!(parse_time_us("1.5ms"), Some(1500));
    assert_eq!(parse_time_us("200us"), Some(200));
    assert_eq!(parse_time_us("1s"), Some(1_000_000));
    assert_eq!(parse_time_us("7"), Some(7000));
    assert_eq!(parse_time_us("x"), None);
}

#[test]
fn reads_this_host() {
    let i = Inputs::read().unwrap();
    assert!(!audit(&i).is_empty());
}

/// Issue 21, defect 7: on a stock host every finding is a fact (a budget, a timer, a cap),
/// and is titled as one: no "Ephemeral ports exhausted", "Incast: synchronized losses" or
/// "Slow reader: receive window closed" above a budget nothing used up.
#[test]
fn facts_of_a_stock_host_are_titled_as_facts_not_as_harm() {
    let mut i = defaults();
    // A stock 6.18 host: net.core.rmem_max 4 MiB below tcp_rmem's 32 MiB autotuning cap.
    i.more.rmem_max_bytes = Some(4_194_304);
    i.more.tcp_rmem_bytes = Some([4096, 131_072, 33_554_432]);
    i.listeners = vec![ListenerBacklog {
        local: "127.0.0.1:5300".into(),
        backlog: 1,
    }];
    let fs = audit(&i);
    let titles: Vec<String> = fs.iter().map(|f| f.title()).collect();
    for f in &fs {
        let harm = f.pathology.entry().title;
        assert_ne!(f.title(), harm, "{titles:?}");
    }
    for want in [
        "Port budget",
        "RTO floor",
        "SYN retransmission ladder",
        "Receive buffer limit",
        "Listen backlog",
    ] {
        assert!(titles.iter().any(|t| t == want), "{want}: {titles:?}");
    }
    let budget = &with_setting(&fs, RANGE)[0];
    assert!(
        budget
            .summary
            .starts_with("471 new connections/s per destination ip:port: 28232 ports"),
        "{}",
        budget.summary
    );
}

/// Issue 21, defect 7: "Widen the range" (the audit's) and "Widen
/// net.ipv4.ip_local_port_range" (the catalogue's) both appeared in one list.
#[test]
fn a_narrow_range_is_a_risk_with_each_remedy_once() {
    let mut i = defaults();
    i.tcp.ip_local_port_range = PortRange::new(40000, 40199).unwrap();
    let fs = audit(&i);
    let f = &with_setting(&fs, RANGE)[0];
    assert_eq!(f.title(), "Risk of ephemeral port exhaustion");
    let widen: Vec<&str> = f
        .remedies
        .iter()
        .map(|r| r.action.as_str())
        .filter(|a| a.contains("ip_local_port_range"))
        .collect();
    assert_eq!(widen.len(), 1, "{:#?}", f.remedies);
    assert!(
        widen[0].starts_with("Widen the range: sysctl -w"),
        "{widen:?}"
    );
    for f in &fs {
        for (n, r) in f.remedies.iter().enumerate() {
            assert!(
                !f.remedies[..n]
                    .iter()
                    .any(|m| tcpdoctor_model::catalogue::same_remedy(m, r)),
                "{}: {:#?}",
                f.summary,
                f.remedies
            );
        }
    }
}
