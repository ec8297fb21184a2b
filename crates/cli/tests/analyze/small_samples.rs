//! Issue 21, defect 6: severity follows absolute harm backed by enough evidence, never a share
//! of a tiny sample; a scan is a scan, a flood in progress is a flood, and the same capture
//! given twice is refused. Each capture is built here with exact timestamps (crates/capture's
//! writer) and read by the real binary.

use std::net::IpAddr;

use serde_json::Value;
use tcpdoctor_capture::write::{PcapWriter, WriteLink};
use tcpdoctor_capture::{Segment, TcpFlags, TcpOptions};

use super::{finding, pathologies, support, TempFile};

pub(super) const S: u8 = TcpFlags::SYN;
pub(super) const A: u8 = TcpFlags::ACK;
const R: u8 = TcpFlags::RST;
pub(super) const P: u8 = TcpFlags::PSH;

const T0_NS: u64 = 1_700_000_000_000_000_000;

/// One segment `t_us` after the start, `src:sp > dst:dp`.
#[allow(clippy::too_many_arguments)]
pub(super) fn at(
    t_us: u64,
    src: &str,
    sp: u16,
    dst: &str,
    dp: u16,
    flags: u8,
    seq: u32,
    ack: u32,
    len: u32,
    win: u16,
) -> Segment {
    let syn = flags & S != 0;
    Segment {
        frame: 0,
        ts_ns: T0_NS + t_us * 1_000,
        src: src.parse().unwrap(),
        dst: dst.parse().unwrap(),
        src_port: sp,
        dst_port: dp,
        seq,
        ack,
        flags: TcpFlags(flags),
        window: win,
        payload_len: len,
        ip_id: 0,
        options: TcpOptions {
            mss: syn.then_some(1460),
            ..TcpOptions::default()
        },
    }
}

/// A client 10.0.0.1:40000 talking to 10.0.0.2:80 (`c2s` picks the direction).
#[allow(clippy::too_many_arguments)]
pub(super) fn cs(
    t_us: u64,
    c2s: bool,
    flags: u8,
    seq: u32,
    ack: u32,
    len: u32,
    win: u16,
) -> Segment {
    if c2s {
        at(
            t_us, "10.0.0.1", 40000, "10.0.0.2", 80, flags, seq, ack, len, win,
        )
    } else {
        at(
            t_us, "10.0.0.2", 80, "10.0.0.1", 40000, flags, seq, ack, len, win,
        )
    }
}

/// The handshake of [`cs`]'s connection at `t_us`: client ISN 1000, server ISN 5000.
pub(super) fn handshake(t_us: u64) -> Vec<Segment> {
    vec![
        cs(t_us, true, S, 1000, 0, 0, 64240),
        cs(t_us + 100, false, S | A, 5000, 1001, 0, 65160),
        cs(t_us + 200, true, A, 1001, 5001, 0, 502),
    ]
}

/// Writes `segs` (sorted by time here) as a raw-IP pcap with nanosecond timestamps.
pub(super) fn write(file: &TempFile, mut segs: Vec<Segment>) {
    segs.sort_by_key(|s| s.ts_ns);
    let mut w = PcapWriter::new(
        std::io::BufWriter::new(std::fs::File::create(&file.0).unwrap()),
        WriteLink::RawIp,
        true,
        0,
    )
    .unwrap();
    for s in &segs {
        w.write_segment(s).unwrap();
    }
    w.into_inner().unwrap();
}

/// `analyze FILE --json`: exit code and report.
pub(super) fn run(file: &TempFile) -> (i32, Value) {
    let (code, out, err) = support::run(&["analyze", file.path(), "--json"]);
    assert!(code == 0 || code == 1, "exit {code}: {err}");
    (code, support::json(&out, &err))
}

/// A zero window that reopened after 10 ms, in a capture of 11 ms: 90.9% of the flow's time,
/// and 10 ms to its writer. It used to be CRITICAL ("time_lost"): now info, verdict healthy.
#[test]
fn a_zero_window_of_10_ms_in_an_11_ms_capture_is_info_not_critical() {
    let mut segs = handshake(0);
    segs.extend([
        cs(300, true, P | A, 1001, 5001, 1000, 502),
        cs(500, false, A, 5001, 2001, 0, 0),
        cs(10_500, false, A, 5001, 2001, 0, 65160),
        cs(10_600, true, P | A, 2001, 5001, 1000, 502),
        cs(11_000, false, A, 5001, 3001, 0, 65160),
    ]);
    let file = TempFile::new("zw10ms");
    write(&file, segs);
    let (code, v) = run(&file);
    let f = finding(&v, "slow_reader");
    assert_eq!(f["severity"], "info", "{f:#}");
    assert_eq!(f["severity_rule"], "negligible", "{f:#}");
    assert!(
        f["impact"]["time_lost_share"].as_f64().unwrap() > 0.9,
        "{f:#}"
    );
    assert_eq!(f["impact"]["time_lost_us"], 10_000, "{f:#}");
    assert_eq!(code, 0);
    assert_eq!(v["verdict"], "healthy");
}

/// One fast retransmission, reported back by a D-SACK (the original had arrived): nothing
/// lost, one spare segment. It used to be a WARNING (1 of 7 data segments): now info.
#[test]
fn one_spurious_fast_retransmission_is_info() {
    let mut segs = handshake(0);
    for i in 0..4u32 {
        segs.push(cs(
            1_000 + u64::from(i) * 10,
            true,
            A,
            1001 + i * 1000,
            5001,
            1000,
            502,
        ));
    }
    // Reordering: three duplicate ACKs, the sender resends 2001, then everything is
    // acknowledged and a D-SACK reports 2001-3001 twice.
    for k in 0..4u64 {
        segs.push(cs(2_000 + k * 10, false, A, 5001, 2001, 0, 65160));
    }
    segs.push(cs(2_100, true, A, 2001, 5001, 1000, 502));
    segs.push(cs(2_200, false, A, 5001, 5001, 0, 65160));
    let mut dsack = cs(2_300, false, A, 5001, 5001, 0, 65160);
    dsack.options.sack_count = 1;
    dsack.options.sack[0] = (2001, 3001);
    segs.push(dsack);
    let file = TempFile::new("spurfast");
    write(&file, segs);
    let (code, v) = run(&file);
    assert_eq!(v["totals"]["retransmissions_fast"], 1, "{:#}", v["totals"]);
    assert_eq!(v["totals"]["retransmissions_spurious"], 1);
    let f = finding(&v, "spurious_retransmission");
    assert_eq!(f["severity"], "info", "{f:#}");
    assert_eq!(f["severity_rule"], "rare", "{f:#}");
    assert_eq!(code, 0);
}

/// One tail loss probe among two data segments: "33% of data segments" of a sample of
/// three, one short stall. It used to be a WARNING: now info.
#[test]
fn one_tail_loss_probe_among_two_data_segments_is_info() {
    let mut segs = handshake(0);
    segs.extend([
        cs(1_000, true, P | A, 1001, 5001, 1000, 502),
        cs(1_010, true, P | A, 2001, 5001, 1000, 502),
        cs(2_000, false, A, 5001, 2001, 0, 65160),
        // The probe: the last segment again, 21 ms later.
        cs(22_000, true, P | A, 2001, 5001, 1000, 502),
        cs(23_000, false, A, 5001, 3001, 0, 65160),
    ]);
    let file = TempFile::new("tlp");
    write(&file, segs);
    let (code, v) = run(&file);
    assert_eq!(v["totals"]["retransmissions_tlp"], 1, "{:#}", v["totals"]);
    let f = finding(&v, "retransmission");
    assert_eq!(f["severity"], "info", "{f:#}");
    assert_eq!(f["severity_rule"], "rare", "{f:#}");
    assert_eq!(code, 0);
}

/// One SYN sent once, never answered and never resent, 3 s before the end of a 10 s capture
/// with another connection going on: it used to be CRITICAL "the shape of a SYN flood". One
/// source is no flood, and no client is known to have waited: info, and said so.
#[test]
fn one_syn_sent_once_and_unanswered_is_info_not_a_syn_flood() {
    let mut segs = handshake(0);
    segs.extend([
        cs(1_000, true, P | A, 1001, 5001, 100, 502),
        cs(2_000, false, A, 5001, 1101, 0, 65160),
        at(
            7_000_000, "10.0.0.1", 40001, "10.0.0.2", 80, S, 9000, 0, 0, 64240,
        ),
        cs(10_000_000, true, P | A, 1101, 5001, 100, 502),
        cs(10_001_000, false, A, 5001, 1201, 0, 65160),
    ]);
    let file = TempFile::new("onesyn");
    write(&file, segs);
    let (code, v) = run(&file);
    let f = finding(&v, "unanswered_syn");
    let summary = f["summary"].as_str().unwrap();
    assert!(!summary.contains("flood"), "{summary}");
    assert!(summary.contains("unexplained"), "{summary}");
    assert_eq!(f["severity"], "info", "{f:#}");
    assert_eq!(f["impact"]["failed"], 0, "{f:#}");
    assert_eq!(v["details"]["unanswered_syns"]["shape"], "sent_once");
    assert_eq!(code, 0);
}

/// A SYN scan: one source, one source port, 1000 ports of one host over 10 s; closed ports
/// answer with a reset, filtered ones not at all (the scanner resends once after 1 s), three
/// open ones with a SYN-ACK the scanner resets. It used to be a CRITICAL connect_failure (897
/// refused) or a SYN flood "toward 6 destinations (2 of them to host:6)": now one port_scan
/// finding (info) that says what it touched, and no refusal or unanswered SYN of its own.
#[test]
fn a_port_scan_is_named_a_port_scan_not_refused_connects_or_a_flood() {
    let (scanner, host) = ("10.0.0.66", "10.0.0.2");
    let mut segs = Vec::new();
    let open = [22u16, 80, 443];
    for i in 0..1000u32 {
        // Ports spread over the range, none of them the open three, then the open three.
        let port = if i < 997 {
            (1024 + i * 61) as u16
        } else {
            open[(i - 997) as usize]
        };
        let t = u64::from(i) * 10_000;
        segs.push(at(t, scanner, 61234, host, port, S, 777_000, 0, 0, 1024));
        if open.contains(&port) {
            segs.push(at(
                t + 100,
                host,
                port,
                scanner,
                61234,
                S | A,
                555,
                777_001,
                0,
                65535,
            ));
            segs.push(at(t + 200, scanner, 61234, host, port, R, 777_001, 0, 0, 0));
        } else if i % 10 == 0 {
            segs.push(at(
                t + 1_000_000,
                scanner,
                61234,
                host,
                port,
                S,
                777_000,
                0,
                0,
                1024,
            ));
        } else {
            segs.push(at(
                t + 100,
                host,
                port,
                scanner,
                61234,
                R | A,
                0,
                777_001,
                0,
                0,
            ));
        }
    }
    let file = TempFile::new("scan");
    write(&file, segs);
    let (code, v) = run(&file);
    assert_eq!(pathologies(&v), ["port_scan"], "{:#}", v["findings"]);
    let f = finding(&v, "port_scan");
    assert_eq!(f["severity"], "info");
    let summary = f["summary"].as_str().unwrap();
    assert!(
        summary.contains("10.0.0.66 probed 1000 port(s) of 10.0.0.2"),
        "{summary}"
    );
    let s = &v["details"]["port_scans"]["scans"][0];
    assert_eq!(
        (&s["ports"], &s["open"], &s["closed"], &s["filtered"]),
        (
            &Value::from(1000),
            &Value::from(3),
            &Value::from(897),
            &Value::from(100)
        ),
        "{s:#}"
    );
    assert_eq!(s["one_source_port"], true);
    assert_eq!(s["open_ports"], serde_json::json!([22, 80, 443]));
    assert_eq!(v["details"]["refused_connects"]["count"], 0);
    assert_eq!(v["details"]["unanswered_syns"]["connections"], 0);
    assert_eq!(code, 0);
}

/// Unanswered SYNs toward many destinations are counted exactly: 30 clients resending on
/// the ladder toward 8 servers. The count used to be the five listed plus one.
#[test]
fn unanswered_syns_toward_eight_destinations_count_eight() {
    let mut segs = Vec::new();
    for i in 0..30u32 {
        let client = format!("10.0.1.{}", i + 1);
        let server = format!("10.0.2.{}", i % 8 + 1);
        let t = u64::from(i) * 1_000;
        for off in [0u64, 1_000_000, 3_000_000] {
            segs.push(at(
                t + off,
                &client,
                41000,
                &server,
                443,
                S,
                100 + i,
                0,
                0,
                64240,
            ));
        }
    }
    // Another connection lasts 20 s, so every ladder runs out inside the capture.
    segs.extend(handshake(0));
    segs.push(cs(20_000_000, true, A, 1001, 5001, 0, 502));
    let file = TempFile::new("eightdest");
    write(&file, segs);
    let (_, v) = run(&file);
    let f = finding(&v, "unanswered_syn");
    let summary = f["summary"].as_str().unwrap();
    assert!(summary.contains("toward 8 destinations"), "{summary}");
    let u = &v["details"]["unanswered_syns"];
    assert_eq!(u["distinct_destinations"], 8, "{u:#}");
    assert_eq!(u["connections"], 30, "{u:#}");
    assert_eq!(f["severity"], "critical", "{f:#}");
}

/// 50,000 SYNs from 50,000 sources in 0.5 s, none answered, the capture ending while they
/// come: it used to be "healthy", exit 0 (only `waiting_at_end: 50000` in the JSON). A flood
/// in progress is the finding: the SYNs unanswered after 200 ms are counted, critical.
#[test]
fn a_syn_flood_still_in_progress_when_the_capture_ends_is_critical() {
    let mut segs = Vec::with_capacity(50_000);
    for i in 0..50_000u32 {
        let src = IpAddr::V4(std::net::Ipv4Addr::from(0x0b00_0000 + i));
        let mut s = at(
            u64::from(i) * 10,
            "0.0.0.0",
            0,
            "10.0.0.2",
            80,
            S,
            i.wrapping_mul(2_654_435_761),
            0,
            0,
            64240,
        );
        s.src = src;
        s.src_port = 1024 + (i % 60_000) as u16;
        segs.push(s);
    }
    let file = TempFile::new("flood-now");
    write(&file, segs);
    let (code, v) = run(&file);
    assert_eq!(code, 1);
    let u = &v["details"]["unanswered_syns"];
    assert_eq!(u["shape"], "flood", "{u:#}");
    assert_eq!(u["waiting_at_end"], 50_000, "{u:#}");
    // Those sent in the first 0.3 s had waited 200 ms or more.
    assert_eq!(u["waiting_overdue"], 30_000, "{u:#}");
    let f = finding(&v, "unanswered_syn");
    assert_eq!(f["severity"], "critical", "{f:#}");
    assert!(
        f["summary"].as_str().unwrap().contains("SYN flood"),
        "{f:#}"
    );
}

/// `analyze a.pcap a.pcap` used to merge the file with itself, inventing SYN
/// retransmissions, tail loss probes and an incast episode. The same file under two names,
/// or a byte-for-byte copy, is refused with one line and exit 2.
#[test]
fn the_same_capture_given_twice_is_refused_with_one_line() {
    let mut segs = handshake(0);
    segs.extend([
        cs(1_000, true, P | A, 1001, 5001, 100, 502),
        cs(2_000, false, A, 5001, 1101, 0, 65160),
    ]);
    let file = TempFile::new("twice");
    write(&file, segs);
    let copy = TempFile::new("twice-copy");
    std::fs::copy(&file.0, &copy.0).unwrap();
    let dotted = format!(
        "{}/./{}",
        file.0.parent().unwrap().display(),
        file.0.file_name().unwrap().to_str().unwrap()
    );
    for (second, what) in [
        (file.path(), "given twice"),
        (dotted.as_str(), "given twice"),
        (copy.path(), "same bytes"),
    ] {
        let (code, out, err) = support::run(&["analyze", file.path(), second]);
        assert_eq!(code, 2, "{out}{err}");
        assert!(out.is_empty(), "{out}");
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(err.contains(what) && err.contains(file.path()), "{err}");
    }
    // Two different captures still merge.
    let other = TempFile::new("twice-other");
    write(&other, handshake(5_000));
    let (code, _, err) = support::run(&["analyze", file.path(), other.path(), "--json"]);
    assert!(code == 0 || code == 1, "{err}");
}

/// One cause, one finding: a connect that completed after a SYN resend, and another still
/// resending its SYN when the capture ended (inside its ladder, not given up). The second is
/// the same SYN loss caught mid-ladder: one syn_retransmit finding says it as a consequence,
/// and no unanswered_syn ranks beside it. Without the completed connect it stays an
/// unanswered_syn of its own.
#[test]
fn a_connect_still_in_its_syn_ladder_at_the_end_is_the_resends_consequence() {
    let caught = |t_us: u64| {
        [
            at(
                t_us, "10.0.0.1", 40001, "10.0.0.2", 80, S, 9000, 0, 0, 64240,
            ),
            at(
                t_us + 1_000_000,
                "10.0.0.1",
                40001,
                "10.0.0.2",
                80,
                S,
                9000,
                0,
                0,
                64240,
            ),
        ]
    };
    // Connection 1: SYN at 0, resent at 1 s, answered; one exchange.
    let mut segs = vec![cs(0, true, S, 1000, 0, 0, 64240)];
    segs.extend(handshake(1_000_000));
    segs.extend([
        cs(1_001_000, true, P | A, 1001, 5001, 100, 502),
        cs(1_002_000, false, A, 5001, 1101, 0, 65160),
    ]);
    segs.extend(caught(2_000_000));
    segs.push(cs(3_100_000, true, P | A, 1101, 5001, 100, 502));
    let file = TempFile::new("inladder");
    write(&file, segs);
    let (_, v) = run(&file);
    let p = pathologies(&v);
    assert!(!p.contains(&"unanswered_syn".to_string()), "{p:?}");
    let f = finding(&v, "syn_retransmit");
    let summary = f["summary"].as_str().unwrap();
    assert!(summary.contains("consequence"), "{summary}");
    assert!(
        summary.contains("still inside their SYN ladder"),
        "{summary}"
    );
    assert_eq!(v["details"]["unanswered_syns"]["waiting_resent"], 1);

    // The same attempt alone: no resends completed, so it is a finding of its own.
    let mut alone = handshake(0);
    alone.extend([
        cs(1_000, true, P | A, 1001, 5001, 100, 502),
        cs(2_000, false, A, 5001, 1101, 0, 65160),
    ]);
    alone.extend(caught(2_000_000));
    alone.push(cs(3_100_000, true, P | A, 1101, 5001, 100, 502));
    let file = TempFile::new("inladder-alone");
    write(&file, alone);
    let (_, v) = run(&file);
    let f = finding(&v, "unanswered_syn");
    assert!(
        f["summary"]
            .as_str()
            .unwrap()
            .contains("still inside their SYN ladder"),
        "{f:#}"
    );

    // A lab capture of a full accept queue: beside connects answered after SYN resends,
    // attempts that had sent one SYN 0.5-0.96 s before the end were "unanswered after 200 ms
    // or more" and a CRITICAL unanswered_syn of their own ("their senders did not wait for
    // an answer"); their first resend was simply not due. One SYN sent 600 ms before the end:
    // inside its ladder, the resends' consequence.
    let mut segs = vec![cs(0, true, S, 1000, 0, 0, 64240)];
    segs.extend(handshake(1_000_000));
    segs.extend([
        cs(1_001_000, true, P | A, 1001, 5001, 100, 502),
        cs(1_002_000, false, A, 5001, 1101, 0, 65160),
    ]);
    segs.push(at(
        2_500_000, "10.0.0.1", 40002, "10.0.0.2", 80, S, 7000, 0, 0, 64240,
    ));
    segs.push(cs(3_100_000, true, P | A, 1101, 5001, 100, 502));
    let file = TempFile::new("inladder-first-rung");
    write(&file, segs);
    let (_, v) = run(&file);
    let p = pathologies(&v);
    assert!(!p.contains(&"unanswered_syn".to_string()), "{p:?}");
    let u = &v["details"]["unanswered_syns"];
    assert_eq!(
        (
            u["waiting_first_rung"].as_u64(),
            u["waiting_overdue"].as_u64()
        ),
        (Some(1), Some(0)),
        "{u:#}"
    );
    let summary = finding(&v, "syn_retransmit")["summary"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        summary.contains("had sent one SYN, less than the first SYN timeout"),
        "{summary}"
    );
}
