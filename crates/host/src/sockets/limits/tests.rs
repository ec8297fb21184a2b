//! What limited a transfer, on sockets built by hand: the classification of injected times
//! and states, the window's counter growth, the floors, the reader's lookup and the findings
//! with their severities.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::time::Duration;

use super::*;
use crate::sockets::{Owner, Socket, TcpInfo, TcpState};
use tcpdoctor_model::{Rule, Severity};

const MS: u64 = 1000;

fn info() -> TcpInfo {
    let mut i = TcpInfo::parse(&[0u8; 280]).unwrap();
    i.snd_mss_bytes = 1448;
    i.snd_cwnd_segs = 10;
    i.snd_ssthresh_segs = 0x7fff_ffff;
    i.rtt_us = 1000;
    i.min_rtt_us = Some(50);
    i
}

/// A sender `local -> remote` with its totals since connect.
fn sender(
    local: &str,
    remote: &str,
    busy_ms: u64,
    rwnd_ms: u64,
    sndbuf_ms: u64,
    acked: u64,
) -> Socket {
    let mut i = info();
    i.busy_time_us = Some(busy_ms * MS);
    i.rwnd_limited_us = Some(rwnd_ms * MS);
    i.sndbuf_limited_us = Some(sndbuf_ms * MS);
    i.bytes_acked = Some(acked);
    i.bytes_retrans = Some(0);
    i.data_segs_out = Some((acked / 1448) as u32);
    Socket {
        inode: 7,
        rcvbuf_bytes: Some(131_072),
        sndbuf_bytes: Some(16_384),
        wmem_queued_bytes: Some(0),
        info: Some(Box::new(i)),
        owners: vec![Owner {
            pid: 100,
            comm: "writer".into(),
            fd: 3,
        }],
        ..Socket::new(
            TcpState::Established,
            local.parse().unwrap(),
            remote.parse().unwrap(),
        )
    }
}

/// The reader's end of `s`, holding `recv_q` unread bytes.
fn reader_of(s: &Socket, recv_q: u32) -> Socket {
    let mut r = sender(&s.remote.to_string(), &s.local.to_string(), 0, 0, 0, 0);
    r.recv_q = recv_q;
    r.owners = vec![Owner {
        pid: 200,
        comm: "reader".into(),
        fd: 4,
    }];
    r
}

fn window_of(before: &[Socket], now: &[Socket], window: Duration) -> Transfers {
    let map: HashMap<(SocketAddr, SocketAddr), &Socket> =
        before.iter().map(|s| ((s.local, s.remote), s)).collect();
    transfers(now, Some(&map), Some(window))
}

#[test]
fn the_largest_share_names_the_limit() {
    use Holding::*;
    // A reader holding the window 91% of the busy time.
    assert_eq!(
        classify(1008, 916, 0, Some(0), &[ReceiverWindow], false).0,
        Limit::ReceiverWindow
    );
    // The kernel's sndbuf-limited time the largest share.
    let (l, b, share) = classify(1000, 100, 540, None, &[SendBuffer], false);
    assert_eq!((l, b), (Limit::SendBuffer, Basis::KernelTime));
    assert!((share - 0.54).abs() < 1e-9);
    // Idle most of a window: the application had nothing to send.
    let (l, b, share) = classify(150, 0, 0, Some(1850), &[Idle], false);
    assert_eq!((l, b), (Limit::Application, Basis::KernelTime));
    assert!((share - 0.925).abs() < 1e-9);
    // Ties go to the named limit.
    assert_eq!(
        classify(200, 100, 0, Some(100), &[], false).0,
        Limit::ReceiverWindow
    );
}

#[test]
fn in_flight_time_is_named_by_what_held_the_data_at_the_censuses() {
    use Holding::*;
    let c = |h: &[Holding], lossy| {
        let (l, b, _) = classify(1000, 0, 0, Some(0), h, lossy);
        (l, b)
    };
    // Data unsent or a full congestion window at a census: the network.
    assert_eq!(
        c(&[Network, SendBuffer], false),
        (Limit::Network, Basis::KernelTime)
    );
    // The buffer full at both censuses, nothing unsent, the window open: the send buffer.
    assert_eq!(
        c(&[SendBuffer, SendBuffer], false),
        (Limit::SendBuffer, Basis::CensusState)
    );
    // Nothing queued at one census says nothing against a full buffer at the other.
    assert_eq!(
        c(&[Idle, SendBuffer], false),
        (Limit::SendBuffer, Basis::CensusState)
    );
    // Loss in the span outweighs a full buffer: the network.
    assert_eq!(c(&[SendBuffer], true), (Limit::Network, Basis::KernelTime));
    // Nothing unsent and room in the buffer: the application.
    assert_eq!(
        c(&[Application, Idle], false),
        (Limit::Application, Basis::CensusState)
    );
    // Mixed or unknown: the kernel's in-flight time, the network's.
    assert_eq!(
        c(&[SendBuffer, Application], false),
        (Limit::Network, Basis::KernelTime)
    );
    assert_eq!(c(&[], false), (Limit::Network, Basis::KernelTime));
    // Nothing busy at all: no share to name, and none claimed.
    assert_eq!(classify(0, 0, 0, None, &[], false).2, 0.0);
}

#[test]
fn holding_reads_unsent_data_the_windows_and_the_buffer() {
    let mut s = sender("10.0.0.1:40000", "10.0.0.2:5001", 0, 0, 0, 0);
    assert_eq!(holding(&s), Some(Holding::Idle));
    s.send_q = 65_483;
    let set = |s: &mut Socket, f: &dyn Fn(&mut TcpInfo)| f(s.info.as_mut().unwrap());
    // Loopback with 8 KiB SO_SNDBUF: one 64 KiB segment in flight, the buffer over its limit.
    set(&mut s, &|i| {
        i.notsent_bytes = Some(0);
        i.unacked_segs = 1;
        i.snd_cwnd_segs = 12;
    });
    s.sndbuf_bytes = Some(8192);
    s.wmem_queued_bytes = Some(66_315);
    assert_eq!(holding(&s), Some(Holding::SendBuffer));
    // Two thirds of the buffer: the kernel still does not wake the writer.
    s.sndbuf_bytes = Some(99_000);
    assert_eq!(holding(&s), Some(Holding::SendBuffer));
    // Behind this host's own shaper: the queued data sits in the qdisc.
    s.sndbuf_bytes = Some(8192);
    s.wmem_alloc_bytes = Some(40_392);
    s.wmem_queued_bytes = Some(40_144);
    assert_eq!(holding(&s), Some(Holding::Network));
    s.wmem_alloc_bytes = Some(0);
    s.wmem_queued_bytes = Some(66_315);
    // More than a third free: the application did not write.
    s.sndbuf_bytes = Some(99_500);
    assert_eq!(holding(&s), Some(Holding::Application));
    // The congestion window full.
    set(&mut s, &|i| i.unacked_segs = 12);
    assert_eq!(holding(&s), Some(Holding::Network));
    // Lost segments not yet resent.
    set(&mut s, &|i| {
        i.unacked_segs = 5;
        i.lost_segs = 2;
    });
    assert_eq!(holding(&s), Some(Holding::Network));
    // Data unsent: the network, or the peer's window when what is in flight fills it.
    set(&mut s, &|i| {
        i.lost_segs = 0;
        i.notsent_bytes = Some(60_000);
        i.snd_wnd_bytes = Some(1_000_000);
    });
    assert_eq!(holding(&s), Some(Holding::Network));
    set(&mut s, &|i| i.snd_wnd_bytes = Some(5_000));
    assert_eq!(holding(&s), Some(Holding::ReceiverWindow));
    // A kernel without tcpi_notsent_bytes: not known.
    set(&mut s, &|i| i.notsent_bytes = None);
    assert_eq!(holding(&s), None);
}

#[test]
fn a_window_counts_the_growth_between_the_censuses_and_names_the_reader() {
    let w0 = sender(
        "127.0.0.1:40000",
        "127.0.0.1:5601",
        3_000,
        2_000,
        0,
        5 << 20,
    );
    let mut w1 = sender(
        "127.0.0.1:40000",
        "127.0.0.1:5601",
        4_008,
        2_924,
        0,
        (5 << 20) + 368_640,
    );
    w1.send_q = 2_500_000;
    w1.info.as_mut().unwrap().notsent_bytes = Some(2_490_000);
    w1.info.as_mut().unwrap().snd_wnd_bytes = Some(8192);
    let r1 = reader_of(&w1, 16_384);
    let t = window_of(&[w0], &[w1, r1], Duration::from_millis(1010));
    assert_eq!(t.span, Span::Window);
    // The reader's own socket moves no data: one busy connection.
    assert_eq!(t.busy.len(), 1, "{t:#?}");
    let x = &t.busy[0];
    assert_eq!(
        (x.busy_us, x.rwnd_limited_us, x.in_flight_us),
        (1_008 * MS, 924 * MS, 84 * MS)
    );
    assert_eq!(x.idle_us, Some(2 * MS));
    assert_eq!(
        (x.limit, x.basis),
        (Limit::ReceiverWindow, Basis::KernelTime)
    );
    assert_eq!(x.bytes_acked, 368_640);
    assert_eq!(x.holding, vec![Holding::Idle, Holding::ReceiverWindow]);
    let r = x
        .reader
        .as_ref()
        .expect("the reader's socket is in the census");
    assert_eq!(
        (r.recv_q_bytes, r.owners[0].comm.as_str()),
        (16_384, "reader")
    );
    assert_eq!(t.by_limit.get(&Limit::ReceiverWindow), Some(&1));

    let f = findings(&t);
    assert_eq!(f.len(), 1, "{f:#?}");
    assert_eq!(f[0].pathology, Pathology::SlowReader);
    // 924 ms held of a 1.01 s window: 91% of the time lost, critical; the reader named as not
    // reading.
    assert_eq!(
        (f[0].severity, f[0].severity_rule),
        (Severity::Critical, Rule::TimeLost)
    );
    assert!((f[0].impact.time_lost_share.unwrap() - 924.0 / 1010.0).abs() < 1e-9);
    assert!(
        f[0].summary.contains("not reading: reader pid 200"),
        "{}",
        f[0].summary
    );
    assert!(
        f[0].summary.contains("writer waiting: writer pid 100"),
        "{}",
        f[0].summary
    );
}

#[test]
fn an_ipv4_mapped_reader_is_found_and_a_remote_one_said_to_be_elsewhere() {
    let w = sender(
        "[::ffff:127.0.0.1]:40000",
        "[::ffff:127.0.0.1]:5601",
        2_000,
        1_500,
        0,
        1 << 20,
    );
    let mut r = reader_of(&w, 4096);
    r.local = "127.0.0.1:5601".parse().unwrap();
    r.remote = "127.0.0.1:40000".parse().unwrap();
    let t = window_of(&[], &[w.clone(), r], Duration::from_secs(2));
    assert!(t.busy[0].reader.is_some());
    // Opened since the earlier census: its life is the span.
    assert_eq!(t.busy[0].span, Span::Life);
    assert_eq!(t.span, Span::Window);
    let far = sender("10.0.0.1:40000", "10.0.0.9:5601", 2_000, 1_500, 0, 1 << 20);
    let t = window_of(&[], &[far], Duration::from_secs(2));
    let f = findings(&t);
    assert!(
        f[0].summary
            .contains("reader 10.0.0.9:5601: not in this census"),
        "{}",
        f[0].summary
    );
    // Opened in the window: 1.5 s held of its 2 s busy life, 75%.
    assert_eq!(
        (f[0].severity, f[0].severity_rule),
        (Severity::Critical, Rule::TimeLost)
    );
}

#[test]
fn floors_keep_idle_and_small_connections_out() {
    let w = Duration::from_secs(2);
    // Busy under 100 ms in the window.
    let a0 = sender("10.0.0.1:40000", "10.0.0.2:80", 1_000, 0, 0, 1 << 20);
    let a1 = sender("10.0.0.1:40000", "10.0.0.2:80", 1_096, 0, 0, 2 << 20);
    assert!(window_of(&[a0], &[a1], w).busy.is_empty());
    // Busy 200 ms but under 64 KiB moved and queued.
    let b0 = sender("10.0.0.1:40001", "10.0.0.2:80", 1_000, 0, 0, 1 << 20);
    let b1 = sender(
        "10.0.0.1:40001",
        "10.0.0.2:80",
        1_200,
        0,
        0,
        (1 << 20) + 60_000,
    );
    assert!(window_of(&[b0], std::slice::from_ref(&b1), w)
        .busy
        .is_empty());
    // The same with 10 KiB queued now: 64 KiB in all.
    let mut b2 = b1.clone();
    b2.send_q = 10_000;
    let b0 = sender("10.0.0.1:40001", "10.0.0.2:80", 1_000, 0, 0, 1 << 20);
    assert_eq!(window_of(&[b0], &[b2], w).busy.len(), 1);
    // One census: a connection with nothing queued and no data sent for 1 s is history.
    let mut c = sender("10.0.0.1:40002", "10.0.0.2:80", 5_000, 4_000, 0, 9 << 20);
    c.info.as_mut().unwrap().last_data_sent_ms = 1_500;
    assert!(transfers(&[c.clone()], None, None).busy.is_empty());
    c.info.as_mut().unwrap().last_data_sent_ms = 20;
    let t = transfers(&[c], None, None);
    assert_eq!((t.span, t.busy.len()), (Span::Life, 1));
    // Over a life, nothing is judged: the time held may be an hour old.
    assert!(findings(&t).is_empty());
    // A kernel without chronographs: counted, not classified.
    let mut old = sender("10.0.0.1:40003", "10.0.0.2:80", 0, 0, 0, 9 << 20);
    old.info.as_mut().unwrap().busy_time_us = None;
    assert_eq!(transfers(&[old], None, None).without_chronographs, 1);
}

#[test]
fn counters_that_went_back_are_a_new_connection_on_the_same_4_tuple() {
    let a0 = sender("10.0.0.1:40000", "10.0.0.2:80", 9_000, 0, 0, 50 << 20);
    let a1 = sender("10.0.0.1:40000", "10.0.0.2:80", 800, 700, 0, 1 << 20);
    let t = window_of(&[a0], &[a1], Duration::from_secs(2));
    let x = &t.busy[0];
    assert_eq!(
        (x.span, x.busy_us, x.rwnd_limited_us),
        (Span::Life, 800 * MS, 700 * MS)
    );
}

#[test]
fn send_buffer_and_network_findings_follow_the_time_held_and_the_loss() {
    let w = Duration::from_secs(2);
    // The kernel's sndbuf-limited time, 600 ms of the window.
    let a0 = sender("10.0.0.1:40000", "10.0.0.2:80", 1_000, 0, 100, 1 << 20);
    let mut a1 = sender("10.0.0.1:40000", "10.0.0.2:80", 3_000, 0, 700, 9 << 20);
    // At the later census its buffer is full, nothing unsent, 5 of 10 segments in flight.
    a1.send_q = 7240;
    a1.wmem_queued_bytes = Some(16_384);
    a1.info.as_mut().unwrap().notsent_bytes = Some(0);
    a1.info.as_mut().unwrap().unacked_segs = 5;
    // Network-limited with 3% of its segments resent and a 300 ms queue.
    let b0 = sender("10.0.0.1:40001", "10.0.0.3:80", 1_000, 0, 0, 1 << 20);
    let mut b1 = sender(
        "10.0.0.1:40001",
        "10.0.0.3:80",
        3_000,
        0,
        0,
        (1 << 20) + 1448 * 1000,
    );
    {
        let i = b1.info.as_mut().unwrap();
        i.total_retrans = 30;
        i.bytes_retrans = Some(30 * 1448);
        i.rtt_us = 310_000;
        i.min_rtt_us = Some(10_000);
        i.notsent_bytes = Some(100_000);
    }
    b1.send_q = 150_000;
    let t = window_of(&[a0, b0], &[a1, b1], w);
    let by = |p| {
        findings(&t)
            .into_iter()
            .find(|f| f.pathology == p)
            .unwrap_or_else(|| panic!("{p:?} missing"))
    };
    let sb = by(Pathology::SendBufferLimited);
    // 600 ms of the 2 s window: 30%.
    assert_eq!(
        (sb.severity, sb.severity_rule),
        (Severity::Critical, Rule::TimeLost)
    );
    assert!(
        sb.summary.contains("600ms in the window, 30% of it"),
        "{}",
        sb.summary
    );
    assert!(
        sb.summary.contains("writer: writer pid 100"),
        "{}",
        sb.summary
    );
    let rt = by(Pathology::Retransmission);
    // 30 of 1000 segments: 3%, common, as TcpRetransSegs of TcpOutSegs would be.
    assert_eq!(
        (rt.severity, rt.severity_rule),
        (Severity::Warning, Rule::Common)
    );
    assert!(rt.summary.contains("30 segment(s)"), "{}", rt.summary);
    let nl = by(Pathology::NetworkLatency);
    assert_eq!(nl.impact.worst_stall_us, Some(300_000));
    assert_eq!(nl.severity, Severity::Warning);
    // The first transfer is the send buffer's (its in-flight time the largest share, the
    // buffer full at the census): no loss, no queue finding for it.
    let a = t
        .busy
        .iter()
        .find(|x| x.remote.to_string() == "10.0.0.2:80")
        .unwrap();
    assert_eq!((a.limit, a.basis), (Limit::SendBuffer, Basis::CensusState));
    assert_eq!(findings(&t).len(), 3);
}

#[test]
fn a_full_buffer_at_both_censuses_is_the_send_buffer_though_the_kernel_counted_little() {
    let mk = |busy, acked| {
        let mut s = sender("127.0.0.1:40000", "127.0.0.1:5601", busy, 0, 0, acked);
        s.send_q = 65_483;
        s.sndbuf_bytes = Some(8192);
        s.wmem_queued_bytes = Some(66_315);
        let i = s.info.as_mut().unwrap();
        i.notsent_bytes = Some(0);
        i.unacked_segs = 1;
        i.snd_cwnd_segs = 12;
        s
    };
    let t = window_of(
        &[mk(1_000, 10 << 20)],
        &[mk(2_000, 20 << 20)],
        Duration::from_millis(1_000),
    );
    let x = &t.busy[0];
    assert_eq!((x.limit, x.basis), (Limit::SendBuffer, Basis::CensusState));
    let f = findings(&t);
    assert_eq!(f[0].pathology, Pathology::SendBufferLimited);
    // The time is not measured, and one transfer is too few to call it common (the
    // policy's sample: 100 observed or 10 hurt): rare, info.
    assert_eq!(
        (f[0].severity, f[0].severity_rule),
        (Severity::Info, Rule::Rare)
    );
    assert_eq!(f[0].impact.worst_stall_us, None);
}

#[test]
fn path_stats_sum_the_window_and_keep_the_fastest_round_trip() {
    let a0 = sender("10.0.0.1:40000", "10.0.0.2:80", 1_000, 0, 0, 1 << 20);
    let mut a1 = sender("10.0.0.1:40000", "10.0.0.2:80", 2_000, 500, 100, 2 << 20);
    a1.info.as_mut().unwrap().rtt_us = 3000;
    let mut b1 = sender("10.0.0.1:40001", "10.0.0.2:80", 300, 0, 0, 1 << 20);
    b1.info.as_mut().unwrap().min_rtt_us = Some(20);
    let mut p = None;
    PathStats::add(&mut p, &a1, Some(&a0), true);
    PathStats::add(&mut p, &b1, None, true);
    let mut tw = b1.clone();
    tw.state = TcpState::TimeWait;
    PathStats::add(&mut p, &tw, None, true);
    let p = p.unwrap();
    assert_eq!(p.sockets, 2);
    assert_eq!(
        (p.rtt_us_mean, p.rtt_us_max, p.min_rtt_us),
        (2000, 3000, Some(20))
    );
    assert_eq!(p.busy_us, Some(1_300 * MS));
    assert_eq!(
        (p.rwnd_limited_us, p.sndbuf_limited_us),
        (Some(500 * MS), Some(100 * MS))
    );
    // One census: round trips only.
    let mut q = None;
    PathStats::add(&mut q, &a1, None, false);
    assert_eq!(q.unwrap().busy_us, None);
}

#[test]
fn a_zero_window_and_a_transfer_held_by_it_are_one_slow_reader_finding() {
    use crate::sockets::{analyze, Census};
    let census = |sockets, at| Census {
        taken_at: Some(at),
        ..Census::new(sockets, "32768-60999".parse().unwrap())
    };
    let mk = |busy, rwnd, acked| {
        let mut w = sender("127.0.0.1:40000", "127.0.0.1:5601", busy, rwnd, 0, acked);
        w.send_q = 2_000_000;
        let i = w.info.as_mut().unwrap();
        i.notsent_bytes = Some(1_990_000);
        i.snd_wnd_bytes = Some(0);
        let mut r = reader_of(&w, 100_000);
        r.info.as_mut().unwrap().rcv_wnd_bytes = Some(0);
        r.info.as_mut().unwrap().last_data_recv_ms = 300;
        vec![w, r]
    };
    let t0 = std::time::Instant::now();
    let c0 = census(mk(1_000, 500, 1 << 20), t0);
    let c1 = census(mk(3_000, 2_400, 2 << 20), t0 + Duration::from_secs(2));
    let a = analyze(&c1, Some(&c0));
    let slow: Vec<_> = a
        .findings
        .iter()
        .filter(|f| f.pathology == Pathology::SlowReader)
        .collect();
    assert_eq!(slow.len(), 1, "{:#?}", a.findings);
    let s = &slow[0].summary;
    assert_eq!(s.matches("not reading: reader pid 200").count(), 1, "{s}");
    assert!(
        s.contains("held by the receiver's window for up to 1.900s in the window, 95% of it"),
        "{s}"
    );
    // Held 95% of the window: critical (time lost).
    assert_eq!(slow[0].severity, Severity::Critical);
    assert_eq!(a.summary.transfers.busy[0].limit, Limit::ReceiverWindow);
}

#[test]
fn the_same_share_held_is_judged_alike_in_a_short_and_a_long_window() {
    // Held 15% of a 2 s window (300 ms) and of a 15 s window (2.25 s): critical both.
    // Held 5% of a 15 s window (750 ms): a warning, though longer than the 300 ms above.
    let judge = |window_ms: u64, held_ms: u64| {
        let a0 = sender("10.0.0.1:40000", "10.0.0.2:80", 1_000, 0, 0, 1 << 20);
        let a1 = sender(
            "10.0.0.1:40000",
            "10.0.0.2:80",
            1_000 + window_ms,
            held_ms,
            0,
            9 << 20,
        );
        let t = window_of(&[a0], &[a1], Duration::from_millis(window_ms));
        let f = findings(&t);
        (f[0].severity, f[0].severity_rule)
    };
    assert_eq!(judge(2_000, 300), (Severity::Critical, Rule::TimeLost));
    assert_eq!(judge(15_000, 2_250), (Severity::Critical, Rule::TimeLost));
    assert_eq!(judge(15_000, 750), (Severity::Warning, Rule::SomeTimeLost));
    // Under the 200 ms floor: no finding, whatever the share.
    let a0 = sender("10.0.0.1:40000", "10.0.0.2:80", 1_000, 0, 0, 1 << 20);
    let a1 = sender("10.0.0.1:40000", "10.0.0.2:80", 1_300, 150, 0, 9 << 20);
    assert!(findings(&window_of(&[a0], &[a1], Duration::from_millis(300))).is_empty());
}
