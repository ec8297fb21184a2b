use super::*;
use tcpdoctor_model::Impact;
use tcpdoctor_report::prometheus::{write_text, Value};

#[test]
fn kernel_field_names_split_into_snake_case_words() {
    for (k, want) in [
        ("ListenOverflows", "listen_overflows"),
        ("TCPSynRetrans", "tcp_syn_retrans"),
        ("TCPOFOQueue", "tcp_ofo_queue"),
        ("DelayedACKs", "delayed_acks"),
        ("DelayedACKLocked", "delayed_ack_locked"),
        ("TCPSpuriousRTOs", "tcp_spurious_rtos"),
        ("TCPMD5NotFound", "tcp_md5_not_found"),
        ("TSEcrRejected", "ts_ecr_rejected"),
        ("TW", "tw"),
        ("TWRecycled", "tw_recycled"),
        ("PAWSOldAck", "paws_old_ack"),
        ("TCPACKSkippedFinWait2", "tcp_ack_skipped_fin_wait2"),
        ("TcpTimeoutRehash", "tcp_timeout_rehash"),
        ("TCPDeliveredCE", "tcp_delivered_ce"),
        ("OutOfWindowIcmps", "out_of_window_icmps"),
        ("InCsumErrors", "in_csum_errors"),
    ] {
        assert_eq!(snake(k), want, "{k}");
    }
    assert_eq!(
        kernel_name("TcpExtListenOverflows").as_deref(),
        Some("tcpdoctor_tcpext_listen_overflows")
    );
    assert_eq!(
        kernel_name("TcpActiveOpens").as_deref(),
        Some("tcpdoctor_tcp_active_opens")
    );
    assert_eq!(kernel_name("TcpRtoMin"), None);
    assert_eq!(kernel_name("UdpInDatagrams"), None);
}

#[test]
fn every_kernel_tcp_counter_of_this_host_gets_a_distinct_snake_case_name() {
    let snap = tcpdoctor_host::counters::snapshot().unwrap();
    let fams = kernel_counters(&snap);
    let tcp = snap
        .values
        .keys()
        .filter(|k| k.starts_with("Tcp") && !SKIPPED.contains(&k.as_str()))
        .count();
    assert_eq!(fams.len(), tcp);
    let names: HashSet<&str> = fams.iter().map(|f| f.name.as_str()).collect();
    assert_eq!(names.len(), fams.len());
    for f in &fams {
        assert!(
            f.name
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_'),
            "{}",
            f.name
        );
    }
    let lo = fams
        .iter()
        .find(|f| f.name == "tcpdoctor_tcpext_listen_overflows")
        .unwrap();
    assert!(lo
        .help
        .starts_with("TcpExtListenOverflows: a completed handshake"));
    let estab = fams
        .iter()
        .find(|f| f.name == "tcpdoctor_tcp_curr_estab")
        .unwrap();
    assert_eq!(estab.kind, tcpdoctor_report::prometheus::Kind::Gauge);
}

fn summary(dests: usize) -> Summary {
    use tcpdoctor_host::sockets::{Census, Socket, Timer};
    let mut sockets = Vec::new();
    // Destination i gets 10 * (i + 1) TIME_WAIT sockets.
    let mut port = 40000u16;
    for i in 0..dests {
        for _ in 0..10 * (i + 1) {
            sockets.push(Socket {
                timer: Timer::TimeWait,
                timer_expires_ms: 30_000,
                ..Socket::new(
                    TcpState::TimeWait,
                    format!("10.0.0.1:{port}").parse().unwrap(),
                    format!("10.0.1.{}:80", i + 1).parse().unwrap(),
                )
            });
            port += 1;
        }
    }
    let c = Census::new(sockets, "40000-40199".parse().unwrap());
    tcpdoctor_host::sockets::analyze(&c, None).summary
}

fn sample(fams: &[Family], name: &str, label: &str) -> Option<Value> {
    fams.iter()
        .find(|f| f.name == name)?
        .samples
        .iter()
        .find(|s| s.labels.iter().any(|(_, v)| v == label))
        .map(|s| s.value)
}

#[test]
fn destinations_beyond_the_top_are_summed_under_other() {
    let s = summary(4);
    let fams = census(
        &Census {
            summary: &s,
            inputs: None,
            findings: &[],
            duration: Duration::from_millis(3),
            window: None,
        },
        2,
    );
    let tw = "tcpdoctor_destination_time_wait_sockets";
    // The two with the fewest free ports (40 and 30 TIME_WAIT), then 20 + 10 summed.
    assert_eq!(sample(&fams, tw, "10.0.1.4:80"), Some(Value::U64(40)));
    assert_eq!(sample(&fams, tw, "10.0.1.3:80"), Some(Value::U64(30)));
    assert_eq!(sample(&fams, tw, OTHER), Some(Value::U64(30)));
    assert_eq!(sample(&fams, tw, "10.0.1.1:80"), None);
    let fam = fams.iter().find(|f| f.name == tw).unwrap();
    assert_eq!(fam.samples.len(), 3);
    // Headroom of "other": the smallest among them (200 - 20).
    assert_eq!(
        sample(&fams, "tcpdoctor_destination_port_headroom", OTHER),
        Some(Value::I64(180))
    );
    assert_eq!(
        sample(
            &fams,
            "tcpdoctor_destination_port_budget_used_ratio",
            "10.0.1.4:80"
        ),
        Some(Value::F64(0.2))
    );
    assert_eq!(
        sample(&fams, "tcpdoctor_sockets", "TIME_WAIT"),
        Some(Value::U64(100))
    );
    assert_eq!(
        sample(&fams, "tcpdoctor_sockets", "ESTABLISHED"),
        Some(Value::U64(0))
    );
    let n = fams
        .iter()
        .find(|f| f.name == "tcpdoctor_destinations")
        .unwrap();
    assert_eq!(n.samples[0].value, Value::U64(4));
}

/// Two censuses 2 s apart of connections toward three destinations: per destination its
/// RTT, fastest round trip, busy time in the window and the shares each limit held.
fn busy_summary() -> Summary {
    use tcpdoctor_host::sockets::{Census, Socket, TcpInfo};
    let sock =
        |port: u16, remote: &str, rtt_us: u32, busy_ms: u64, rwnd_ms: u64, sndbuf_ms: u64| {
            let mut i = TcpInfo::parse(&[0u8; 280]).unwrap();
            i.rtt_us = rtt_us;
            i.min_rtt_us = Some(rtt_us / 2);
            i.busy_time_us = Some(busy_ms * 1000);
            i.rwnd_limited_us = Some(rwnd_ms * 1000);
            i.sndbuf_limited_us = Some(sndbuf_ms * 1000);
            Socket {
                inode: 1,
                info: Some(Box::new(i)),
                ..Socket::new(
                    TcpState::Established,
                    format!("10.0.0.1:{port}").parse().unwrap(),
                    remote.parse().unwrap(),
                )
            }
        };
    let census = |sockets, at| Census {
        taken_at: Some(at),
        ..Census::new(sockets, "40000-40199".parse().unwrap())
    };
    let t0 = std::time::Instant::now();
    let before = census(
        vec![
            sock(40000, "10.0.1.1:80", 1000, 100, 0, 0),
            sock(40001, "10.0.1.2:80", 1000, 100, 0, 0),
            sock(40002, "10.0.1.3:80", 1000, 100, 0, 0),
        ],
        t0,
    );
    let after = census(
        vec![
            // 1.6 s busy in the window, 1.2 s of it held by the receiver's window.
            sock(40000, "10.0.1.1:80", 40_000, 1_700, 1_200, 0),
            sock(40001, "10.0.1.2:80", 2_000, 600, 0, 300),
            sock(40002, "10.0.1.3:80", 4_000, 300, 0, 0),
            // Opened since: its whole life counts.
            sock(40003, "10.0.1.3:80", 8_000, 100, 0, 0),
        ],
        t0 + Duration::from_secs(2),
    );
    tcpdoctor_host::sockets::analyze(&after, Some(&before)).summary
}

#[test]
fn round_trips_and_limited_shares_per_destination_the_rest_under_other() {
    let s = busy_summary();
    let fams = census(
        &Census {
            summary: &s,
            inputs: None,
            findings: &[],
            duration: Duration::from_millis(3),
            window: Some(Duration::from_secs(2)),
        },
        1,
    );
    let fam = |n: &str| fams.iter().find(|f| f.name == n).unwrap();
    let get = |n: &str, dest: &str, limit: Option<&str>| {
        fam(n)
            .samples
            .iter()
            .find(|x| {
                x.labels[0].1 == dest
                    && limit.is_none_or(|l| x.labels.get(1).is_some_and(|y| y.1 == l))
            })
            .map(|x| x.value.as_f64())
    };
    // The busiest destination by itself; the two others summed under "other".
    assert_eq!(
        get("tcpdoctor_destination_rtt_seconds", "10.0.1.1:80", None),
        Some(0.04)
    );
    assert_eq!(
        get("tcpdoctor_destination_busy_seconds", "10.0.1.1:80", None),
        Some(1.6)
    );
    let r = |l| {
        get(
            "tcpdoctor_destination_limited_ratio",
            "10.0.1.1:80",
            Some(l),
        )
        .unwrap()
    };
    assert!((r("receiver_window") - 0.75).abs() < 1e-9);
    assert_eq!(r("send_buffer"), 0.0);
    assert!((r("in_flight") - 0.25).abs() < 1e-9);
    // other: 0.5 + 0.2 + 0.1 s busy, 0.3 s of it send-buffer-limited; mean RTT over its
    // three sockets, the fastest round trip among them.
    assert_eq!(fam("tcpdoctor_destination_rtt_seconds").samples.len(), 2);
    let busy = get("tcpdoctor_destination_busy_seconds", OTHER, None).unwrap();
    assert!((busy - 0.8).abs() < 1e-9, "{busy}");
    let sb = get(
        "tcpdoctor_destination_limited_ratio",
        OTHER,
        Some("send_buffer"),
    )
    .unwrap();
    assert!((sb - 0.375).abs() < 1e-9, "{sb}");
    let rtt = get("tcpdoctor_destination_rtt_seconds", OTHER, None).unwrap();
    // Whole microseconds: 14 ms / 3.
    assert_eq!(rtt, 0.004666);
    assert_eq!(
        get("tcpdoctor_destination_min_rtt_seconds", OTHER, None),
        Some(0.001)
    );
    let mut text = String::new();
    write_text(&mut text, &fams).unwrap();
    assert!(text.contains("tcpdoctor_destination_limited_ratio{destination=\"10.0.1.1:80\",limit=\"receiver_window\"} 0.75\n"), "{text}");
    assert!(text.contains(
        "# HELP tcpdoctor_destination_limited_ratio Share of that busy time each limit held"
    ));
}

#[test]
fn findings_series_cover_every_pathology_severity_and_source_with_zeros() {
    let f = vec![
        Finding::new(
            Pathology::PortExhaustion,
            Source::Sockets,
            "x",
            Impact::budget(0.95),
        ),
        Finding::new(
            Pathology::PortExhaustion,
            Source::Check,
            "y",
            Impact::none(),
        ),
    ];
    let fam = findings(&f);
    assert_eq!(fam.samples.len(), Pathology::ALL.len() * 3 * 2);
    let mut text = String::new();
    write_text(&mut text, &[fam]).unwrap();
    assert!(text.contains(
        "tcpdoctor_findings{pathology=\"port_exhaustion\",severity=\"critical\",source=\"observed\"} 1\n"
    ), "{text}");
    assert!(text.contains(
        "tcpdoctor_findings{pathology=\"port_exhaustion\",severity=\"info\",source=\"settings\"} 1\n"
    ));
    assert!(text.contains(
        "tcpdoctor_findings{pathology=\"incast\",severity=\"warning\",source=\"observed\"} 0\n"
    ));
}

#[test]
fn trace_unavailable_says_why_and_nothing_else() {
    let t = Trace {
        unavailable: Some("loading BPF programs was refused".into()),
        ..Trace::default()
    };
    let fams = trace(&t);
    assert_eq!(fams.len(), 1);
    assert_eq!(fams[0].samples[0].value, Value::U64(0));
    assert_eq!(
        fams[0].samples[0].labels,
        vec![("reason", "loading BPF programs was refused".to_string())]
    );
    let on = trace(&Trace::default());
    assert_eq!(on[0].samples[0].value, Value::U64(1));
    assert_eq!(on.len(), 6);
    // The events the kernel skipped tracing, per hook.
    let skipped = trace(&Trace {
        missed: [("tcp_probe".to_string(), 3)].into(),
        ..Trace::default()
    });
    let missed = skipped
        .iter()
        .find(|f| f.sample_name() == "tcpdoctor_trace_missed_events_total")
        .expect("missed family");
    assert_eq!(missed.samples[0].value, Value::U64(3));
    assert_eq!(
        missed.samples[0].labels,
        vec![("hook", "tcp_probe".to_string())]
    );
}
