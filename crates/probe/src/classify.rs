//! Spike classification: each completed connection slower than the threshold gets a
//! [`SpikeCause`] from its timer signature (which phase was slow, and by how much), then the
//! cause is checked against the kernel counters that moved during the run.
//!
//! Pure: records, the host's timer values and the counter delta come in as arguments.
//!
//! Signatures:
//! * connect ~= a rung of the SYN ladder (`tcp_syn_retries`, `tcp_syn_linear_timeouts`,
//!   `tcp_rto_max_ms`, 1 s initial RTO; net/ipv4/tcp_timer.c, modelled by
//!   [`tcpdoctor_model::SynLadder`]), within the lateness the timer wheel adds to that rung: a
//!   SYN retransmission, attempt = rung index; when `TcpExtListenOverflows`/
//!   `TcpExtListenDrops` moved, the SYN was dropped by a full accept queue instead.
//! * reply wait ~= a rung of the SYN-ACK ladder (1, 3, 7 s ...: `tcp_synack_retries`, no
//!   linear part; `reqsk_timer_handler` in net/ipv4/inet_connection_sock.c) with the listen
//!   counters moving: the final ACK was dropped by a full accept queue.
//! * connect of a few ms with `TcpExtTCPSynRetrans` moving more than the ladder spikes
//!   explain: the quick SYN resend after a stale ACK (`tcp_rcv_synsent_state_process` in
//!   net/ipv4/tcp_input.c re-arms the SYN timer to `TCP_TIMEOUT_MIN`, 2 jiffies).
//! * reply wait >= the RTO floor (`tcp_rto_min_us` or the route's `rto_min`) with
//!   `TcpExtTCPTimeouts` moving: a data retransmission timeout; at most as many requests
//!   as data timeouts were counted, the longest waits first, so that a server that always
//!   thinks 300 ms does not turn every request into an RTO when one timeout fired.
//! * reply wait, or the reply's transfer (first byte to last), ~40 ms (`TCP_DELACK_MIN`,
//!   include/net/tcp.h) with `TcpExtDelayedACKs` moving: a delayed ACK holding a small
//!   write (the server's Nagle holding the body of a reply written in two parts until the
//!   client's delayed ACK of the first).
//! * anything else: unexplained here; [`crate::split`] then names the server or the network
//!   when the request's time split shows it and the client's own scheduling cannot.

use std::time::Duration;

use serde::{Deserialize, Serialize};
use tcpdoctor_host::counters::Delta;
use tcpdoctor_model::SynLadder;

use crate::record::Record;

/// Why a connection was slow.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "cause")]
pub enum SpikeCause {
    /// The SYN (or SYN-ACK) was retransmitted; `attempt` is the ladder rung (1 = first
    /// retransmission, 1 s after the SYN).
    SynRetransmit { attempt: u32 },
    /// The SYN met a stale ACK of an old connection, was reset and resent within ms.
    StaleAckResend,
    /// A data segment waited for the retransmission timeout.
    DataRto,
    /// A small write waited for a delayed ACK (Nagle).
    DelayedAck,
    /// The listener's accept queue was full; the handshake was retried on the SYN ladder.
    AcceptQueueOverflow,
    /// No TCP timer: the server's time to the first byte of the reply (the first-byte wait
    /// less the path's round trip) dominated the request (named by [`crate::split`]).
    ServerResponse,
    /// No TCP timer: the path's round trips (the handshake, the request's round trip)
    /// dominated the request (named by [`crate::split`]).
    NetworkLatency,
    /// No timer signature or counter explains it.
    Unexplained,
}

impl SpikeCause {
    /// Causes recognised by a kernel timer (SYN ladder, RTO): such connections are reported
    /// whatever the spike threshold, so a run where every connect is slow still names them.
    pub fn is_timer(&self) -> bool {
        matches!(
            self,
            SpikeCause::SynRetransmit { .. }
                | SpikeCause::AcceptQueueOverflow
                | SpikeCause::DataRto
        )
    }

    /// Causes inside TCP itself (its timers, its handshake): a request slowed by one of these
    /// was not slowed by the server or the path.
    pub fn is_tcp(&self) -> bool {
        !matches!(
            self,
            SpikeCause::ServerResponse | SpikeCause::NetworkLatency | SpikeCause::Unexplained
        )
    }

    pub fn label(&self) -> String {
        match self {
            SpikeCause::SynRetransmit { attempt } => format!("SYN retransmission #{attempt}"),
            SpikeCause::StaleAckResend => "SYN resent after stale ACK".into(),
            SpikeCause::DataRto => "data retransmission timeout".into(),
            SpikeCause::DelayedAck => "delayed ACK / Nagle".into(),
            SpikeCause::AcceptQueueOverflow => "accept queue overflow".into(),
            SpikeCause::ServerResponse => "server response".into(),
            SpikeCause::NetworkLatency => "network latency".into(),
            SpikeCause::Unexplained => "unexplained (scheduling?)".into(),
        }
    }
}

/// The slow part of a connection.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum SlowPhase {
    /// Waiting for the open-loop schedule, the TLS handshake, or closing.
    Other,
    Connect,
    FirstByte,
    /// From the first byte of the reply to its end.
    Transfer,
}

/// This host's timer values, read by the caller.
#[derive(Clone, Debug)]
pub struct Signatures {
    /// The client's SYN retransmissions.
    pub ladder: SynLadder,
    /// The server's SYN-ACK retransmissions (exponential: `SynLadder::new(tcp_synack_retries,
    /// None, 1 s)`); this host's value stands in for the server's.
    pub synack_ladder: SynLadder,
    /// Floor of the data RTO toward the target (route `rto_min`, else `tcp_rto_min_us`).
    pub rto_min: Duration,
    pub delack_min: Duration,
    /// TCP_NODELAY was set on the client sockets (reported; each request is one write, so
    /// Nagle cannot hold the client's requests either way).
    pub nodelay: bool,
}

/// One slow connection and its cause.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct Spike {
    /// Index into the run's records.
    pub record: usize,
    pub local_port: u16,
    pub total_us: u64,
    pub phase: SlowPhase,
    /// Duration of the slow phase.
    pub phase_us: u64,
    #[serde(flatten)]
    pub cause: SpikeCause,
    /// A kernel counter moved in the way the cause predicts.
    pub corroborated: bool,
    /// Where the request's time went (filled by [`crate::split::assign`]).
    #[serde(skip)]
    pub split: crate::split::Breakdown,
    /// The most CPU waiting that could hide in this request's timings, when the time split
    /// considered naming its server or path ([`crate::split::CpuWaits::bound_ns`]).
    #[serde(skip)]
    pub cpu_wait_bound_ns: Option<u64>,
}

/// Slack when matching a delay to a SYN ladder rung, beyond the rung's own timer lateness
/// ([`SynLadder::latest`]) and the path's round trip: waking the connecting thread and
/// softirq delays on a loaded host.
pub const LADDER_SLACK: Duration = Duration::from_millis(50);
/// Window of the quick resend after a stale ACK: `TCP_TIMEOUT_MIN` is 2 jiffies, 2 ms at
/// HZ=1000 to 20 ms at HZ=100; the upper bound leaves room for the round trips around it.
pub const STALE_ACK_WINDOW: (Duration, Duration) =
    (Duration::from_millis(1), Duration::from_millis(60));

/// How long a delayed ACK holds a write: the delayed-ACK timer fires `TCP_DELACK_MIN`
/// (include/net/tcp.h) after the segment, rounded up to a jiffy (up to 10 ms): a narrow
/// window, so scheduling stalls of 50-80 ms are not taken for it.
pub fn delack_window(sig: &Signatures) -> std::ops::RangeInclusive<Duration> {
    sig.delack_min.saturating_sub(Duration::from_millis(2))
        ..=sig.delack_min + Duration::from_millis(12)
}

/// The delayed-ACK window when the kernel counted delayed ACKs during the run
/// (`TcpExtDelayedACKs` moved), else `None`: no wait is a delayed ACK then.
pub fn delack_seen(sig: &Signatures, delta: &Delta) -> Option<std::ops::RangeInclusive<Duration>> {
    Moved::of(delta).delayed_acks.then(|| delack_window(sig))
}

/// Largest reply whose transfer (first byte to last) a delayed ACK is named for: it fits in
/// the first flight of any connection (10 segments of 1,448 bytes, the initial window of
/// RFC 6928 and Linux's `TCP_INIT_CWND`), so once its first byte arrived the rest needed no
/// round trip, and 40 ms more is a hold: the server's Nagle keeping the rest of a reply
/// written in parts until the client's delayed ACK of the first part.
pub const ONE_FLIGHT_BYTES: u32 = 10 * 1_448;

/// Lowest default spike threshold: a few scheduler slices. Longer stalls are common on a
/// loaded host too (measured here: 5 to 170 ms in 0.2 to 1.2% of the requests of a clean
/// loopback crr run while other work kept the CPUs busy); [`crate::split`] names the server
/// or the path for a slow request only above the CPU waits that could explain it.
pub const THRESHOLD_FLOOR: Duration = Duration::from_millis(5);

/// Times the run's median total from which a request is an outlier of its own run.
pub const THRESHOLD_MEDIANS: u64 = 20;

/// Highest default spike threshold: a request this slow is slow whatever the run's median,
/// so a run whose every request waits 300 ms for its server (or its path) is classified, not
/// called healthy. The policy's own bar for a stall worth a warning
/// ([`tcpdoctor_model::policy::STALL_WARNING`], Linux's RTO floor).
pub const THRESHOLD_CEILING: Duration = tcpdoctor_model::policy::STALL_WARNING;

/// Default spike threshold, the definition of a slow request: [`THRESHOLD_MEDIANS`] x the
/// run's median total (slow against the run itself), at least [`THRESHOLD_FLOOR`] and at most
/// [`THRESHOLD_CEILING`] (slow in absolute terms).
pub fn default_threshold(records: &[Record]) -> Duration {
    let mut totals: Vec<u64> = records
        .iter()
        .filter(|r| r.is_ok())
        .map(Record::total_ns)
        .collect();
    if totals.is_empty() {
        return THRESHOLD_FLOOR;
    }
    let mid = totals.len() / 2;
    let (_, median, _) = totals.select_nth_unstable(mid);
    THRESHOLD_FLOOR
        .max(Duration::from_nanos(
            median.saturating_mul(THRESHOLD_MEDIANS),
        ))
        .min(THRESHOLD_CEILING)
}

/// Counter deltas that corroborate causes.
struct Moved {
    syn_retrans: i64,
    listen: bool,
    /// Retransmission timeouts of data: those beyond the SYN retransmissions.
    timeouts: i64,
    delayed_acks: bool,
}

impl Moved {
    fn of(d: &Delta) -> Moved {
        Moved {
            syn_retrans: d.get("TcpExtTCPSynRetrans"),
            listen: d.get("TcpExtListenOverflows") > 0 || d.get("TcpExtListenDrops") > 0,
            // SYN timeouts count in TCPTimeouts too: only the excess is data RTOs.
            timeouts: (d.get("TcpExtTCPTimeouts") - d.get("TcpExtTCPSynRetrans")).max(0),
            delayed_acks: d.get("TcpExtDelayedACKs") > 0,
        }
    }
}

/// Classifies every successful record whose total is at least `threshold`, and every one
/// whose slow phase matches a kernel timer (SYN ladder, RTO) whatever the threshold.
pub fn classify(
    records: &[Record],
    threshold: Duration,
    sig: &Signatures,
    delta: &Delta,
) -> Vec<Spike> {
    let moved = Moved::of(delta);
    let thr = threshold.as_nanos() as u64;
    let base = Baseline::of(records);
    let mut spikes: Vec<Spike> = records
        .iter()
        .enumerate()
        .filter(|(_, r)| r.is_ok())
        .map(|(i, r)| classify_one(i, r, sig, &moved, &base))
        .filter(|s| s.total_us * 1_000 >= thr || s.cause.is_timer())
        .collect();
    // Each data RTO spike needs a timeout the kernel counted: the longest waits keep theirs.
    let mut rto: Vec<usize> = (0..spikes.len())
        .filter(|&i| spikes[i].cause == SpikeCause::DataRto)
        .collect();
    rto.sort_by_key(|&i| std::cmp::Reverse(spikes[i].phase_us));
    for &i in rto
        .iter()
        .skip(usize::try_from(moved.timeouts).unwrap_or(usize::MAX))
    {
        spikes[i].cause = SpikeCause::Unexplained;
        spikes[i].corroborated = false;
    }
    spikes.retain(|s| s.total_us * 1_000 >= thr || s.cause.is_timer());
    // Quick SYN resends: only when the SYN retransmissions counted by the kernel exceed those
    // the ladder spikes account for.
    let ladder_resends: i64 = spikes
        .iter()
        .map(|s| match s.cause {
            SpikeCause::SynRetransmit { attempt } => i64::from(attempt),
            SpikeCause::AcceptQueueOverflow => 1,
            _ => 0,
        })
        .sum();
    // Connects that never completed (cut at the end of the run, failed) resent their SYN on
    // the ladder as well: at most once per rung they outlived.
    let pending_resends: i64 = records
        .iter()
        .filter(|r| !r.is_ok() && r.connected_ns.is_none())
        .map(|r| {
            let waited = Duration::from_nanos(r.stopped_phase_wait_ns());
            sig.ladder.rungs().iter().filter(|&&t| t <= waited).count() as i64
        })
        .sum();
    let mut spare = moved.syn_retrans - ladder_resends - pending_resends;
    for s in spikes.iter_mut() {
        let in_window = s.phase == SlowPhase::Connect
            && s.phase_us >= STALE_ACK_WINDOW.0.as_micros() as u64
            && s.phase_us <= STALE_ACK_WINDOW.1.as_micros() as u64;
        if s.cause == SpikeCause::Unexplained && in_window && spare > 0 {
            s.cause = SpikeCause::StaleAckResend;
            s.corroborated = true;
            spare -= 1;
        }
    }
    spikes
}

/// The fastest connect and reply wait of the run: about one round trip on this path (more
/// when every connection was slow, which only widens the slack).
struct Baseline {
    connect_ns: u64,
    first_byte_ns: u64,
    transfer_ns: u64,
}

impl Baseline {
    fn of(records: &[Record]) -> Baseline {
        let ok = || records.iter().filter(|r| r.is_ok());
        Baseline {
            connect_ns: ok().filter_map(Record::connect_ns).min().unwrap_or(0),
            first_byte_ns: ok()
                .filter_map(Record::first_byte_wait_ns)
                .min()
                .unwrap_or(0),
            transfer_ns: ok().filter_map(Record::transfer_ns).min().unwrap_or(0),
        }
    }
}

fn classify_one(
    index: usize,
    r: &Record,
    sig: &Signatures,
    moved: &Moved,
    base: &Baseline,
) -> Spike {
    let connect = r.connect_ns().unwrap_or(0);
    let first = r.first_byte_wait_ns().unwrap_or(0);
    let transfer = r.transfer_ns().unwrap_or(0);
    let total = r.total_ns();
    let other = total.saturating_sub(connect + first + transfer);
    let (phase, phase_ns, base_ns) = [
        (SlowPhase::Connect, connect, base.connect_ns),
        (SlowPhase::FirstByte, first, base.first_byte_ns),
        (SlowPhase::Transfer, transfer, base.transfer_ns),
        (SlowPhase::Other, other, 0),
    ]
    .into_iter()
    // The longest phase; on a tie the earliest.
    .fold(None, |best: Option<(SlowPhase, u64, u64)>, p| match best {
        Some(b) if b.1 >= p.1 => Some(b),
        _ => Some(p),
    })
    .expect("four phases");
    let d = Duration::from_nanos(phase_ns);
    // A long path adds its round trip to every rung: widen the slack by the fastest one seen.
    let slack = LADDER_SLACK + Duration::from_nanos(base_ns).min(Duration::from_secs(1));
    let delack = moved.delayed_acks && delack_window(sig).contains(&d);
    let (cause, corroborated) = match phase {
        SlowPhase::Connect => match sig.ladder.attempt_for(d, slack) {
            Some(_) if moved.listen => (SpikeCause::AcceptQueueOverflow, true),
            Some(attempt) => (
                SpikeCause::SynRetransmit { attempt },
                moved.syn_retrans >= i64::from(attempt),
            ),
            None => (SpikeCause::Unexplained, false),
        },
        SlowPhase::FirstByte => {
            if moved.listen && sig.synack_ladder.attempt_for(d, slack).is_some() {
                // The final ACK was dropped by a full accept queue; the server resent its
                // SYN-ACK on the ladder before our request could be accepted.
                (SpikeCause::AcceptQueueOverflow, true)
            } else if moved.timeouts > 0 && d + Duration::from_millis(5) >= sig.rto_min {
                (SpikeCause::DataRto, true)
            } else if delack {
                (SpikeCause::DelayedAck, true)
            } else {
                (SpikeCause::Unexplained, false)
            }
        }
        SlowPhase::Transfer if delack && r.received_bytes <= ONE_FLIGHT_BYTES => {
            (SpikeCause::DelayedAck, true)
        }
        SlowPhase::Transfer | SlowPhase::Other => (SpikeCause::Unexplained, false),
    };
    Spike {
        record: index,
        local_port: r.local_port,
        total_us: total / 1_000,
        phase,
        phase_us: phase_ns / 1_000,
        cause,
        corroborated,
        split: crate::split::Breakdown::default(),
        cpu_wait_bound_ns: None,
    }
}

/// Counters a probe reports, with a fallback meaning (the shared table in
/// `tcpdoctor_model::counters` is preferred). Kernel names as nstat prints them.
pub const REPORTED_COUNTERS: &[(&str, &str)] = &[
    ("TcpActiveOpens", "connections this host opened (connect)"),
    ("TcpPassiveOpens", "connections this host accepted"),
    (
        "TcpAttemptFails",
        "connects that failed (refused, reset in SYN_SENT, timed out)",
    ),
    ("TcpEstabResets", "established connections reset"),
    ("TcpOutRsts", "resets sent"),
    ("TcpRetransSegs", "segments retransmitted (all causes)"),
    ("TcpExtTCPSynRetrans", "SYN and SYN-ACK retransmissions"),
    (
        "TcpExtListenOverflows",
        "handshakes dropped: accept queue full",
    ),
    (
        "TcpExtListenDrops",
        "SYNs or final ACKs a listener dropped (any reason)",
    ),
    ("TcpExtTCPTimeouts", "retransmission timer expirations"),
    ("TcpExtTCPLossProbes", "tail loss probes sent"),
    (
        "TcpExtDelayedACKs",
        "delayed ACKs sent (the 40 ms+ ACK timer fired)",
    ),
    (
        "TcpExtTW",
        "TIME_WAIT sockets that ended (timer expired or port reused)",
    ),
    (
        "TcpExtTWRecycled",
        "TIME_WAIT ports reused by connect (tcp_tw_reuse)",
    ),
    ("TcpExtTCPChallengeACK", "challenge ACKs sent (RFC 5961)"),
    (
        "TcpExtPAWSEstab",
        "segments dropped by PAWS (old timestamp)",
    ),
    (
        "TcpExtTCPAbortOnData",
        "connections reset because data arrived after close",
    ),
];

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::Outcome;
    use std::collections::BTreeMap;

    const MS: u64 = 1_000_000;

    fn rec(port: u16, connect_ms: f64, first_ms: f64) -> Record {
        let c = (connect_ms * MS as f64) as u64;
        let f = (first_ms * MS as f64) as u64;
        Record {
            worker: 0,
            local_port: port,
            status: 0,
            reused: false,
            received_bytes: 0,
            outcome: Outcome::Ok,
            scheduled_ns: 0,
            start_ns: 0,
            connected_ns: Some(c),
            tls_done_ns: None,
            first_byte_ns: Some(c + f),
            end_ns: c + f + 20_000,
            kernel_rtt_us: 0,
            handshake_rtt_us: 0,
            cpu_wait_us: None,
        }
    }

    fn sig(nodelay: bool) -> Signatures {
        Signatures {
            ladder: SynLadder::new(6, Some(4), Duration::from_secs(1)),
            synack_ladder: SynLadder::new(5, None, Duration::from_secs(1)),
            rto_min: Duration::from_millis(200),
            delack_min: Duration::from_millis(40),
            nodelay,
        }
    }

    fn delta(pairs: &[(&str, i64)]) -> Delta {
        Delta {
            changed: pairs
                .iter()
                .map(|(k, v)| (k.to_string(), *v))
                .collect::<BTreeMap<_, _>>(),
        }
    }

    fn causes(records: &[Record], d: &Delta, nodelay: bool) -> Vec<SpikeCause> {
        classify(records, Duration::from_millis(5), &sig(nodelay), d)
            .into_iter()
            .map(|s| s.cause)
            .collect()
    }

    #[test]
    fn syn_ladder_attempts_from_connect_time() {
        let rs = [
            rec(40001, 0.05, 0.03),
            rec(40002, 1_003.0, 0.03),
            rec(40003, 2_004.5, 0.03),
            rec(40004, 7_010.0, 0.03),
        ];
        let d = delta(&[("TcpExtTCPSynRetrans", 1 + 2 + 6)]);
        let s = classify(&rs, Duration::from_millis(5), &sig(false), &d);
        assert_eq!(s.len(), 3);
        assert_eq!(s[0].cause, SpikeCause::SynRetransmit { attempt: 1 });
        assert_eq!(s[0].local_port, 40002);
        assert_eq!(s[1].cause, SpikeCause::SynRetransmit { attempt: 2 });
        assert_eq!(s[2].cause, SpikeCause::SynRetransmit { attempt: 6 });
        assert!(s
            .iter()
            .all(|s| s.corroborated && s.phase == SlowPhase::Connect));
        // Without the counter moving, the timing still names the rung but is not corroborated.
        let s = classify(&rs, Duration::from_millis(5), &sig(false), &delta(&[]));
        assert!(!s[0].corroborated);
    }

    #[test]
    fn syn_retransmissions_past_the_linear_part_are_classified() {
        // Connect times measured with SYNs dropped in a namespace (6.18, defaults): rung 5
        // fires 130 ms late, rungs 7-9 at 11.2, 19.4 and 35.5 s (the timer wheel's lateness
        // grows with the rung). The old model (6 rungs ending at 7 s, 100 ms slack) left
        // them all unexplained.
        let rs = [
            rec(1, 0.05, 0.03),
            rec(2, 5_129.0, 0.03),
            rec(3, 11_205.0, 0.03),
            rec(4, 19_397.0, 0.03),
            rec(5, 35_529.0, 0.03),
            rec(6, 69_321.0, 0.03),
        ];
        let d = delta(&[("TcpExtTCPSynRetrans", 5 + 7 + 8 + 9 + 10)]);
        let s = classify(&rs, Duration::from_millis(5), &sig(false), &d);
        let attempts: Vec<SpikeCause> = s.iter().map(|s| s.cause).collect();
        assert_eq!(
            attempts,
            [5, 7, 8, 9, 10].map(|attempt| SpikeCause::SynRetransmit { attempt })
        );
        assert!(s.iter().all(|s| s.corroborated));
        // Between rungs: no timer explains 9 s.
        let s = classify(
            &[rec(7, 9_000.0, 0.03)],
            Duration::from_millis(5),
            &sig(false),
            &d,
        );
        assert_eq!(s[0].cause, SpikeCause::Unexplained);
    }

    #[test]
    fn final_ack_drops_follow_the_exponential_synack_ladder() {
        // SYN-ACK rungs are 1, 3, 7 s (no linear part): a 3 s reply wait under a full accept
        // queue is the second SYN-ACK retransmission, a 2 s one is not a SYN-ACK rung.
        let rs = [rec(1, 0.1, 0.1), rec(2, 0.1, 3_020.0), rec(3, 0.1, 2_010.0)];
        let d = delta(&[("TcpExtListenOverflows", 3), ("TcpExtTCPSynRetrans", 3)]);
        assert_eq!(
            causes(&rs, &d, false),
            vec![SpikeCause::AcceptQueueOverflow, SpikeCause::Unexplained]
        );
    }

    #[test]
    fn ladder_spikes_are_found_when_every_connect_is_slow() {
        let rs = [
            rec(1, 1_002.0, 0.1),
            rec(2, 1_003.0, 0.1),
            rec(3, 2_003.0, 0.1),
        ];
        assert_eq!(default_threshold(&rs), THRESHOLD_CEILING);
        let d = delta(&[("TcpExtTCPSynRetrans", 4), ("TcpExtTCPTimeouts", 4)]);
        let s = classify(&rs, Duration::from_secs(20), &sig(false), &d);
        assert_eq!(s.len(), 3);
        assert_eq!(s[2].cause, SpikeCause::SynRetransmit { attempt: 2 });
    }

    #[test]
    fn rto_waits_are_found_when_every_request_is_slow() {
        let rs = [rec(1, 0.1, 201.0), rec(2, 0.1, 203.0)];
        let d = delta(&[("TcpExtTCPTimeouts", 2)]);
        let s = classify(&rs, Duration::from_secs(1), &sig(false), &d);
        assert_eq!(s.len(), 2);
        assert!(s.iter().all(|s| s.cause == SpikeCause::DataRto));
    }

    #[test]
    fn a_run_whose_every_request_waits_300_ms_is_slow_whatever_its_median() {
        let rs: Vec<Record> = (0..50).map(|i| rec(i, 0.05, 300.0)).collect();
        assert_eq!(default_threshold(&rs), THRESHOLD_CEILING);
        let s = classify(&rs, default_threshold(&rs), &sig(false), &delta(&[]));
        assert_eq!(s.len(), 50);
        assert!(s.iter().all(|s| s.phase == SlowPhase::FirstByte));
        // A fast run: 20 x its median, at least 5 ms.
        let fast: Vec<Record> = (0..50).map(|i| rec(i, 0.05, 0.5)).collect();
        assert_eq!(default_threshold(&fast), Duration::from_micros(11_400));
    }

    #[test]
    fn one_timeout_behind_a_slow_server_is_one_rto_not_every_request() {
        // Every reply waits 300 ms for the server; one also waited 200 ms for an RTO, and the
        // kernel counted that one timeout.
        let mut rs: Vec<Record> = (0..20).map(|i| rec(i, 0.05, 300.0)).collect();
        rs[7] = rec(7, 0.05, 503.0);
        let d = delta(&[("TcpExtTCPTimeouts", 1)]);
        let s = classify(&rs, Duration::from_millis(200), &sig(false), &d);
        let rto: Vec<u16> = s
            .iter()
            .filter(|s| s.cause == SpikeCause::DataRto)
            .map(|s| s.local_port)
            .collect();
        assert_eq!(rto, [7]);
        assert_eq!(s.len(), 20);
    }

    #[test]
    fn a_small_reply_held_after_its_first_byte_is_a_delayed_ack() {
        let held = |bytes: u32| {
            let mut r = rec(1, 0.05, 0.1);
            r.end_ns += 41 * MS;
            r.received_bytes = bytes;
            r
        };
        let d = delta(&[("TcpExtDelayedACKs", 1)]);
        let s = classify(&[held(200)], Duration::from_millis(5), &sig(false), &d);
        assert_eq!(s[0].phase, SlowPhase::Transfer);
        assert_eq!(s[0].cause, SpikeCause::DelayedAck);
        // A reply larger than one flight may take 41 ms to arrive; without delayed ACKs
        // counted, nothing held it.
        let s = classify(&[held(1 << 20)], Duration::from_millis(5), &sig(false), &d);
        assert_eq!(s[0].cause, SpikeCause::Unexplained);
        let s = classify(
            &[held(200)],
            Duration::from_millis(5),
            &sig(false),
            &delta(&[]),
        );
        assert_eq!(s[0].cause, SpikeCause::Unexplained);
    }

    #[test]
    fn long_paths_widen_the_ladder_slack() {
        // 150 ms round trip: connects take 150 ms, or 1.15 s after one SYN retransmission.
        let rs = [rec(1, 150.0, 150.0), rec(2, 1_150.0, 150.0)];
        let d = delta(&[("TcpExtTCPSynRetrans", 1)]);
        let s = classify(&rs, Duration::from_millis(500), &sig(false), &d);
        assert_eq!(s.len(), 1);
        assert_eq!(s[0].cause, SpikeCause::SynRetransmit { attempt: 1 });
    }

    #[test]
    fn exponential_ladder_of_older_kernels() {
        let mut g = sig(false);
        g.ladder = SynLadder::new(6, None, Duration::from_secs(1));
        let rs = [rec(1, 3_010.0, 0.1)];
        let s = classify(
            &rs,
            Duration::from_millis(5),
            &g,
            &delta(&[("TcpExtTCPSynRetrans", 2)]),
        );
        assert_eq!(s[0].cause, SpikeCause::SynRetransmit { attempt: 2 });
    }

    #[test]
    fn accept_queue_overflow_when_listen_counters_move() {
        let rs = [rec(1, 1_002.0, 0.1), rec(2, 0.1, 1_001.0)];
        let d = delta(&[("TcpExtListenOverflows", 2), ("TcpExtTCPSynRetrans", 2)]);
        assert_eq!(
            causes(&rs, &d, false),
            vec![
                SpikeCause::AcceptQueueOverflow,
                SpikeCause::AcceptQueueOverflow
            ]
        );
    }

    #[test]
    fn stale_ack_needs_unexplained_syn_retransmissions() {
        let rs = [rec(1, 8.3, 0.1), rec(2, 1_001.0, 0.1), rec(3, 9.0, 0.1)];
        // 1 for the ladder spike + 1 quick resend: only one of the two fast connects.
        let d = delta(&[("TcpExtTCPSynRetrans", 2)]);
        assert_eq!(
            causes(&rs, &d, false),
            vec![
                SpikeCause::StaleAckResend,
                SpikeCause::SynRetransmit { attempt: 1 },
                SpikeCause::Unexplained
            ]
        );
        // No counter movement: both stay unexplained.
        let d = delta(&[]);
        assert_eq!(causes(&rs, &d, false)[0], SpikeCause::Unexplained);
    }

    #[test]
    fn syn_resends_of_connects_cut_at_the_end_are_not_stale_ack_resends() {
        // A SYN ladder run: one connect resent once and completed after 1 s, one still
        // waiting (resent once) when the run ended after 1.9 s, and a scheduling hiccup of
        // 13 ms. The kernel counted 2 SYN resends: both belong to the ladder.
        let mut cut = rec(3, 0.0, 0.0);
        cut.outcome = Outcome::Cut {
            phase: crate::record::Phase::Connect,
        };
        cut.connected_ns = None;
        cut.first_byte_ns = None;
        cut.end_ns = 1_900 * MS;
        let rs = [rec(1, 1_003.0, 0.1), rec(2, 13.0, 0.1), cut];
        let d = delta(&[("TcpExtTCPSynRetrans", 2)]);
        assert_eq!(
            causes(&rs, &d, false),
            vec![
                SpikeCause::SynRetransmit { attempt: 1 },
                SpikeCause::Unexplained
            ]
        );
        // A third resend the ladder does not explain: the quick connect may be one.
        let d = delta(&[("TcpExtTCPSynRetrans", 3)]);
        assert_eq!(causes(&rs, &d, false)[1], SpikeCause::StaleAckResend);
    }

    #[test]
    fn data_rto_and_delayed_ack_from_reply_wait() {
        let rs = [
            rec(1, 0.1, 204.0),
            rec(2, 0.1, 41.0),
            rec(3, 0.1, 120.0),
            rec(4, 0.1, 73.0),
        ];
        let d = delta(&[("TcpExtTCPTimeouts", 1), ("TcpExtDelayedACKs", 3)]);
        // Timeouts that the SYN retransmissions account for are not data RTOs.
        let syn_only = delta(&[("TcpExtTCPTimeouts", 1), ("TcpExtTCPSynRetrans", 1)]);
        assert_eq!(
            causes(&rs[..1], &syn_only, true),
            vec![SpikeCause::Unexplained]
        );
        assert_eq!(
            causes(&rs, &d, false),
            vec![
                SpikeCause::DataRto,
                SpikeCause::DelayedAck,
                SpikeCause::Unexplained,
                SpikeCause::Unexplained
            ]
        );
        // A 204 ms wait without TCPTimeouts is not an RTO; a 41 ms wait without delayed ACKs
        // is not a delayed ACK.
        assert_eq!(
            causes(&rs[..2], &delta(&[]), true),
            vec![SpikeCause::Unexplained, SpikeCause::Unexplained]
        );
    }

    #[test]
    fn threshold_and_failures() {
        let mut failed = rec(9, 3_000.0, 0.0);
        failed.outcome = Outcome::Error {
            kind: crate::ErrorKind::Refused,
            phase: crate::Phase::Connect,
        };
        let rs = [
            rec(1, 0.05, 0.05),
            rec(2, 0.06, 0.04),
            rec(3, 0.05, 4.0),
            failed,
        ];
        assert_eq!(default_threshold(&rs), Duration::from_millis(5));
        assert!(classify(&rs, Duration::from_millis(5), &sig(false), &delta(&[])).is_empty());
        let s = classify(&rs, Duration::from_millis(2), &sig(false), &delta(&[]));
        assert_eq!(s.len(), 1);
        assert_eq!(s[0].phase, SlowPhase::FirstByte);
    }
}
