//! The catalogue: for each [`Pathology`], its title, explanation, remedies (best first, with
//! cautions), and the kernel counters and sysctls that bear on it. Data only.

use serde::{Deserialize, Serialize};

use crate::finding::Pathology;

/// A remedy as printed and serialized.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Remedy {
    /// What to do, imperative.
    pub action: String,
    /// When this remedy is dangerous (e.g. on internet-facing hosts), or `None`.
    pub caution: Option<String>,
}

impl Remedy {
    pub fn new(action: impl Into<String>) -> Remedy {
        Remedy {
            action: action.into(),
            caution: None,
        }
    }
}

/// The settings a remedy's action changes or names (`net.ipv4.tcp_tw_reuse`), as sysctl
/// names: the words that start with `net.` up to `=` or punctuation.
pub fn settings_named(action: &str) -> Vec<&str> {
    action
        .split(|c: char| c.is_whitespace() || matches!(c, '=' | '(' | ')' | ',' | ';' | '"'))
        .map(|w| w.trim_end_matches(['.', ':']))
        .filter(|w| w.starts_with("net.") && w.len() > 4)
        .collect()
}

/// Whether two remedies say the same thing: the same action, or actions that change a
/// setting in common (a detector's specific "sysctl -w net.ipv4.tcp_timestamps=1" and the
/// catalogue's "Keep TCP timestamps on (net.ipv4.tcp_timestamps=1)").
pub fn same_remedy(a: &Remedy, b: &Remedy) -> bool {
    if a.action == b.action {
        return true;
    }
    let sa = settings_named(&a.action);
    settings_named(&b.action).iter().any(|s| sa.contains(s))
}

/// A remedy as stored in the static catalogue.
#[derive(Debug)]
pub struct StaticRemedy {
    pub action: &'static str,
    pub caution: Option<&'static str>,
}

impl StaticRemedy {
    pub fn to_owned_remedy(&self) -> Remedy {
        Remedy {
            action: self.action.to_string(),
            caution: self.caution.map(str::to_string),
        }
    }
}

/// Whether a pathology explains others or is what the user sees. Findings are ranked cause
/// before symptom ([`crate::finding::rank`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    /// A mechanism that produces symptoms (a TIME_WAIT collision, a full accept queue).
    Cause,
    /// What the user or the kernel counters see (a SYN resent, a timeout, a failed connect).
    Symptom,
}

/// What tcpdoctor knows about one pathology.
#[derive(Debug)]
pub struct CatalogueEntry {
    pub pathology: Pathology,
    pub role: Role,
    /// snake_case name, as in JSON.
    pub name: &'static str,
    /// A short title for human output.
    pub title: &'static str,
    /// Lower is more damaging when severities tie.
    pub rank: u8,
    pub explanation: &'static str,
    pub remedies: &'static [StaticRemedy],
    /// Counters as `nstat` names them.
    pub counters: &'static [&'static str],
    pub sysctls: &'static [&'static str],
}

const fn r(action: &'static str) -> StaticRemedy {
    StaticRemedy {
        action,
        caution: None,
    }
}

const fn rc(action: &'static str, caution: &'static str) -> StaticRemedy {
    StaticRemedy {
        action,
        caution: Some(caution),
    }
}

/// The entry of one pathology.
pub fn entry(p: Pathology) -> &'static CatalogueEntry {
    CATALOGUE
        .iter()
        .find(|e| e.pathology == p)
        .expect("every pathology has a catalogue entry (checked by a test)")
}

/// How a finding that describes no harm seen names itself: a setting or a state that would
/// cause the pathology (an exposure) is a *risk*, and a budget or a timer that only says what
/// the pathology would cost (context) is a *fact*. "Ephemeral ports exhausted" above a
/// port budget would claim harm nobody saw (issue 21, defect 7).
#[derive(Debug)]
pub struct Titles {
    pub pathology: Pathology,
    /// For an exposure: "Risk of ..." (the harm is not seen happening).
    pub risk: &'static str,
    /// For context: the budget or timer the finding states ("Port budget").
    pub fact: &'static str,
}

/// Titles of findings that are not harm seen, per pathology; a pathology missing here falls
/// back to its harm title marked as a risk or as context ([`risk_title`], [`fact_title`]).
pub static TITLES: &[Titles] = &[
    Titles {
        pathology: Pathology::PortExhaustion,
        risk: "Risk of ephemeral port exhaustion",
        fact: "Port budget",
    },
    Titles {
        pathology: Pathology::TimeWaitCollision,
        risk: "Risk of SYNs colliding with TIME_WAIT",
        fact: "TIME_WAIT reuse",
    },
    Titles {
        pathology: Pathology::SynRetransmit,
        risk: "Risk of SYN retransmissions",
        fact: "SYN retransmission ladder",
    },
    Titles {
        pathology: Pathology::AcceptQueueOverflow,
        risk: "Risk of accept queue overflow",
        fact: "Listen backlog",
    },
    Titles {
        pathology: Pathology::Incast,
        risk: "Risk of incast stalls",
        fact: "RTO floor",
    },
    Titles {
        pathology: Pathology::RetransmitTimeout,
        risk: "Risk of retransmission timeouts",
        fact: "Retransmission timer",
    },
    Titles {
        pathology: Pathology::SlowReader,
        risk: "Risk of receive windows closing",
        fact: "Receive buffer limit",
    },
    Titles {
        pathology: Pathology::SendBufferLimited,
        risk: "Risk of a send buffer smaller than the path needs",
        fact: "Send buffer limit",
    },
    Titles {
        pathology: Pathology::RiskySetting,
        risk: "Risky setting",
        fact: "Setting",
    },
];

/// The title of an exposure to `p`: a risk, not harm seen.
pub fn risk_title(p: Pathology) -> String {
    match TITLES.iter().find(|t| t.pathology == p) {
        Some(t) => t.risk.to_string(),
        None => format!("Risk: {} (not seen happening)", entry(p).title),
    }
}

/// The title of a finding that states a budget or a timer about `p`, nothing hurt.
pub fn fact_title(p: Pathology) -> String {
    match TITLES.iter().find(|t| t.pathology == p) {
        Some(t) => t.fact.to_string(),
        None => format!("{} (context, nothing hurt)", entry(p).title),
    }
}

/// Every entry, in rank order.
pub static CATALOGUE: &[CatalogueEntry] = &[
    CatalogueEntry {
        pathology: Pathology::PortExhaustion,
        role: Role::Cause,
        name: "port_exhaustion",
        title: "Ephemeral ports exhausted",
        rank: 0,
        explanation: "Every outgoing connection to one destination needs its own local port. The side that closes first keeps the 4-tuple in TIME_WAIT for 60 s on Linux, so a client that opens and closes connections faster than (ports in ip_local_port_range / 60 s) to one ip:port runs out of ports: connect() fails with EADDRNOTAVAIL or bind() with EADDRINUSE.",
        remedies: &[
            r("Reuse connections (HTTP keep-alive, a connection pool) so each request does not cost a 4-tuple."),
            r("Spread connections over more 4-tuples: several destination ports or addresses, or several local source addresses."),
            rc("Set net.ipv4.tcp_tw_reuse=1 so outgoing connects may reuse a TIME_WAIT port when timestamps prove it safe.", "needs tcp_timestamps on both ends; it only affects outgoing connections, never the server side"),
            r("Widen net.ipv4.ip_local_port_range (e.g. 1024 65535), keeping listening ports out of it (ip_local_reserved_ports)."),
            r("Let the server close first so TIME_WAIT lands on the server, which does not spend ephemeral ports on it."),
        ],
        counters: &["TcpExtTW", "TcpExtTWRecycled", "TcpActiveOpens"],
        sysctls: &["net.ipv4.ip_local_port_range", "net.ipv4.tcp_tw_reuse", "net.ipv4.tcp_max_tw_buckets", "net.ipv4.ip_local_reserved_ports"],
    },
    CatalogueEntry {
        pathology: Pathology::TimeWaitCollision,
        role: Role::Cause,
        name: "time_wait_collision",
        title: "4-tuple collided with a TIME_WAIT socket",
        rank: 1,
        explanation: "A new SYN reused a 4-tuple whose previous connection is still in TIME_WAIT at the peer. If the peer cannot prove the SYN is new (its sequence number is not above the old one, or timestamps are off), it answers with an ACK of the old connection instead of a SYN-ACK; the client resets that and its SYN waits for the retransmission timer (1 s, then the ladder). With net.ipv4.tcp_rfc1337=1 the peer ignores the reset and the connect can stall for many seconds.",
        remedies: &[
            r("Keep TCP timestamps on (net.ipv4.tcp_timestamps=1) on both ends: the peer can then accept a SYN that reuses a TIME_WAIT 4-tuple."),
            r("Reuse connections instead of reconnecting from the same source port; do not bind a fixed source port for short connections."),
            r("Let the client close first, so TIME_WAIT stays on the client, which will not reuse the port while it holds it."),
            rc("Leave net.ipv4.tcp_rfc1337 at 0 unless you need its protection.", "with 1, a collision becomes a multi-second stall instead of a 1 s one"),
        ],
        counters: &["TcpExtTCPSynRetrans", "TcpExtTWRecycled", "TcpExtPAWSEstab", "TcpExtTCPChallengeACK", "TcpOutRsts"],
        sysctls: &["net.ipv4.tcp_timestamps", "net.ipv4.tcp_rfc1337", "net.ipv4.tcp_tw_reuse"],
    },
    CatalogueEntry {
        pathology: Pathology::SynRetransmit,
        role: Role::Symptom,
        name: "syn_retransmit",
        title: "SYN retransmitted",
        rank: 2,
        explanation: "A SYN (or its SYN-ACK) was lost, dropped by a full accept queue or a firewall, or ignored, so the client resent it when its connect timer fired. The delay is a rung of the SYN ladder, a little late as kernel timers are: the initial RTO of 1 s, repeated for tcp_syn_linear_timeouts retransmissions on current kernels, then doubling; connect() gives up after tcp_syn_retries + tcp_syn_linear_timeouts retransmissions or when the time an exponential ladder of tcp_syn_retries would take has passed (1, 2, 3, 4, 5, 7, 11, 19, 35, 67 s and 131 s with the defaults).",
        remedies: &[
            r("Find where the SYN is lost: compare ListenOverflows/ListenDrops on the server, firewall drop counters, and a capture on both ends."),
            r("If the server's accept queue overflows, accept faster and raise the listen backlog with net.core.somaxconn."),
            r("If ports collide with TIME_WAIT, see time_wait_collision."),
            rc("Lower the initial SYN timeout per route only where the path is known (ip route ... rto_min applies to data, not SYNs).", "client-side timeouts shorter than the ladder turn a delay into a failure"),
        ],
        counters: &["TcpExtTCPSynRetrans", "TcpRetransSegs", "TcpExtListenOverflows", "TcpExtListenDrops"],
        sysctls: &["net.ipv4.tcp_syn_retries", "net.ipv4.tcp_syn_linear_timeouts", "net.ipv4.tcp_synack_retries"],
    },
    CatalogueEntry {
        pathology: Pathology::AcceptQueueOverflow,
        role: Role::Cause,
        name: "accept_queue_overflow",
        title: "Listener accept queue overflowed",
        rank: 3,
        explanation: "A listening socket holds completed connections until the application calls accept(). When that queue (the listen backlog, capped by net.core.somaxconn) is full, the kernel drops the client's final ACK or SYN; the client sees a 1 s connect delay or, after its first data, a retransmission.",
        remedies: &[
            r("Accept faster: more acceptor threads, or a non-blocking accept loop that drains the queue."),
            r("Raise the backlog passed to listen() and net.core.somaxconn together (the smaller wins)."),
            rc("net.ipv4.tcp_abort_on_overflow=1 makes overflow visible as resets instead of delays.", "clients then see errors instead of slowness"),
        ],
        counters: &["TcpExtListenOverflows", "TcpExtListenDrops", "TcpExtTCPSynRetrans"],
        sysctls: &["net.core.somaxconn", "net.ipv4.tcp_max_syn_backlog", "net.ipv4.tcp_abort_on_overflow"],
    },
    CatalogueEntry {
        pathology: Pathology::Incast,
        role: Role::Cause,
        name: "incast",
        title: "Incast: synchronized losses from many senders",
        rank: 4,
        explanation: "Many senders answer one receiver at the same moment. Their combined burst exceeds the bottleneck buffer, several flows lose their tail segments together and, with too few packets left to trigger fast retransmit, wait for the retransmission timeout (200 ms minimum on Linux). Throughput collapses while average link utilisation stays low.",
        remedies: &[
            r("Lower the RTO floor inside the datacenter: ip route change ... rto_min 5ms, or net.ipv4.tcp_rto_min_us."),
            r("Limit the fan-in or stagger the requests (fewer simultaneous responders, smaller blocks per round)."),
            r("Give the bottleneck more buffer, or enable ECN so senders slow down before losses."),
            rc("Cap each sender's rate (tc fq maxrate, SO_MAX_PACING_RATE).", "lowers peak throughput of single flows"),
        ],
        counters: &["TcpExtTCPTimeouts", "TcpRetransSegs", "TcpExtTCPLossProbes", "TcpExtTCPFastRetrans"],
        sysctls: &["net.ipv4.tcp_rto_min_us", "net.ipv4.tcp_ecn"],
    },
    CatalogueEntry {
        pathology: Pathology::RetransmitTimeout,
        role: Role::Symptom,
        name: "retransmit_timeout",
        title: "Data retransmitted after a timeout",
        rank: 5,
        explanation: "A segment was lost and nothing after it arrived to trigger fast retransmit, so the sender waited for its retransmission timer (at least tcp_rto_min_us, 200 ms by default, or the route's rto_min) before sending it again. Each such timeout stalls the connection for the whole RTO.",
        remedies: &[
            r("Find the loss: interface drops (ip -s link), qdisc drops (tc -s qdisc), softnet drops (/proc/net/softnet_stat)."),
            r("On low-latency paths lower the RTO floor: ip route change ... rto_min 5ms."),
            r("Keep SACK and TLP enabled (net.ipv4.tcp_sack, tcp_early_retrans) so tail losses are repaired without a timeout."),
        ],
        counters: &["TcpExtTCPTimeouts", "TcpRetransSegs", "TcpExtTCPLossProbes"],
        sysctls: &["net.ipv4.tcp_rto_min_us", "net.ipv4.tcp_early_retrans", "net.ipv4.tcp_sack"],
    },
    CatalogueEntry {
        pathology: Pathology::SlowReader,
        role: Role::Cause,
        name: "slow_reader",
        title: "Slow reader: receive window closed",
        rank: 6,
        explanation: "The receiving application reads slower than the sender writes. Its receive buffer fills, it advertises a zero window, the sender's send buffer fills and its writes block (or fail with EAGAIN). Latency grows with the buffered backlog; nothing is lost, so retransmission counters stay quiet.",
        remedies: &[
            r("Make the reader keep up: read in larger chunks, move processing off the reading thread, add readers."),
            r("Apply backpressure in the protocol so the writer slows down instead of queueing."),
            rc("Raise the receive buffer (SO_RCVBUF, net.ipv4.tcp_rmem) to absorb bursts.", "a bigger buffer hides a reader that is permanently too slow and adds latency"),
        ],
        counters: &["TcpExtTCPFromZeroWindowAdv", "TcpExtTCPToZeroWindowAdv", "TcpExtTCPWantZeroWindowAdv", "TcpExtTCPRcvQDrop", "TcpExtPruneCalled"],
        sysctls: &["net.ipv4.tcp_rmem", "net.ipv4.tcp_wmem", "net.core.rmem_max"],
    },
    CatalogueEntry {
        pathology: Pathology::StaleAckRace,
        role: Role::Cause,
        name: "stale_ack_race",
        title: "SYN answered by a stale ACK",
        rank: 7,
        explanation: "A client reconnected on a 4-tuple the server still held from the previous connection (closed with SO_LINGER 0 or a lost final ACK). The server answered the SYN with an ACK of the old connection; the client reset it and sent the SYN again. Current Linux resends immediately (a few ms); older kernels waited for the 1 s SYN timer.",
        remedies: &[
            r("Avoid closing with SO_LINGER 0 as a matter of course; let connections close normally."),
            r("Let the client close first, before the server's FIN: a reset then reaches an established server socket and ends it, and no server socket is left half-closed in FIN_WAIT2 waiting for a reset it may process out of order."),
            r("Reuse connections instead of reconnecting at a high rate on the same destination."),
            r("Run a kernel with the quick SYN resend after a reset (Linux 4.x and later)."),
        ],
        counters: &["TcpExtTCPSynRetrans", "TcpOutRsts", "TcpExtTCPChallengeACK"],
        sysctls: &["net.ipv4.tcp_tw_reuse"],
    },
    CatalogueEntry {
        pathology: Pathology::Microburst,
        role: Role::Cause,
        name: "microburst",
        title: "Microbursts",
        rank: 8,
        explanation: "Over short windows the traffic rate is many times its average. A buffer sized for the average overflows during the peak; counters sampled every second or minute show a lightly loaded link.",
        remedies: &[
            r("Pace senders (tc qdisc fq, SO_MAX_PACING_RATE) so bursts are spread out."),
            r("Give the bottleneck more buffer or move the burst-heavy flows to a less shared path."),
            r("Measure at the time scale of the buffer: bytes per 100 us to 1 ms, not per second."),
        ],
        counters: &["TcpRetransSegs", "TcpExtTCPTimeouts"],
        sysctls: &[],
    },
    CatalogueEntry {
        pathology: Pathology::Retransmission,
        role: Role::Symptom,
        name: "retransmission",
        title: "Retransmissions (loss repaired without a timeout)",
        rank: 9,
        explanation: "Segments were lost or reordered and repaired by fast retransmit or a tail loss probe. Each repair costs about one round trip; many of them point at a lossy path or an overflowing queue.",
        remedies: &[
            r("Find where packets are dropped: interface, qdisc and softnet counters on both ends."),
            r("If the loss is at a shallow buffer, pace senders or add buffer."),
        ],
        counters: &["TcpRetransSegs", "TcpExtTCPFastRetrans", "TcpExtTCPLossProbes", "TcpExtTCPSACKReorder"],
        sysctls: &["net.ipv4.tcp_sack"],
    },
    CatalogueEntry {
        pathology: Pathology::ConnectFailure,
        role: Role::Symptom,
        name: "connect_failure",
        title: "Connections refused, reset or timed out",
        rank: 10,
        explanation: "Connections did not complete: the peer refused them (no listener, RST), reset them mid-request, or never answered within the timeout.",
        remedies: &[
            r("Check that the server listens on that address and port (ss -ltn) and that no firewall rejects the traffic."),
            r("Look for resets in the server's counters (TcpOutRsts, TcpExtTCPAbortOnData) and logs."),
        ],
        counters: &["TcpAttemptFails", "TcpEstabResets", "TcpOutRsts", "TcpExtTCPAbortOnData"],
        sysctls: &[],
    },
    CatalogueEntry {
        pathology: Pathology::DelayedAck,
        role: Role::Cause,
        name: "delayed_ack",
        title: "Delayed ACK and Nagle",
        rank: 11,
        explanation: "A small write waited because Nagle's algorithm holds it until the previous segment is acknowledged, and the peer delays that ACK (up to ~40 ms on Linux). Request/reply protocols that write a message in several pieces see ~40 ms steps.",
        remedies: &[
            r("Write each message with one send() (build it in a buffer, or use writev)."),
            r("Set TCP_NODELAY on latency-sensitive sockets."),
            r("Set TCP_QUICKACK on the receiver where replies follow requests immediately."),
        ],
        counters: &["TcpExtDelayedACKs", "TcpExtDelayedACKLocked"],
        sysctls: &[],
    },
    CatalogueEntry {
        pathology: Pathology::UnexplainedDelay,
        role: Role::Symptom,
        name: "unexplained_delay",
        title: "Latency spikes without a TCP cause",
        rank: 12,
        explanation: "Some requests were slow, but no kernel counter moved and the delay matches no TCP timer. The usual causes are outside TCP: CPU scheduling, page faults, garbage collection, the server's own work.",
        remedies: &[
            r("Check CPU saturation and run-queue latency (e.g. perf sched, runqlat) on both ends."),
            r("Compare with the server's own processing time."),
        ],
        counters: &[],
        sysctls: &[],
    },
    CatalogueEntry {
        pathology: Pathology::RiskySetting,
        role: Role::Cause,
        name: "risky_setting",
        title: "Risky or limiting setting",
        rank: 13,
        explanation: "A tunable is set to a value that limits connection rate, turns a rare event into a long stall, or is unsafe on hosts that talk to the internet.",
        remedies: &[r("Review the setting named in the evidence; the summary says what to change and why.")],
        counters: &[],
        sysctls: &[],
    },
    CatalogueEntry {
        pathology: Pathology::UnansweredSyn,
        role: Role::Symptom,
        name: "unanswered_syn",
        title: "SYNs never answered",
        rank: 14,
        explanation: "Connection attempts got neither a SYN-ACK nor a reset: every SYN and its retransmissions went unanswered until the client gave up. Many sources each sending a SYN once and never completing a handshake is the shape of a SYN flood (often with spoofed addresses); a few clients resending on the SYN ladder toward one address is a server, route or firewall that does not answer.",
        remedies: &[
            r("Check that the destination is up and listening, and that no firewall silently drops its SYNs (nft list ruleset, iptables -L -v)."),
            r("For a flood: keep SYN cookies on (net.ipv4.tcp_syncookies=1) and filter or rate-limit the sources upstream."),
            r("Capture on the server as well: a SYN that arrives there but gets no SYN-ACK points at the listener or its host; one that never arrives points at the path."),
        ],
        counters: &["TcpExtTCPSynRetrans", "TcpAttemptFails", "TcpExtSyncookiesSent", "TcpExtTCPReqQFullDrop"],
        sysctls: &["net.ipv4.tcp_syncookies", "net.ipv4.tcp_max_syn_backlog", "net.ipv4.tcp_syn_retries"],
    },
    CatalogueEntry {
        pathology: Pathology::NoReply,
        role: Role::Symptom,
        name: "no_reply",
        title: "Accepted, never replied",
        rank: 15,
        explanation: "The handshake completed, so the server's kernel accepted the connection, but the application sent no reply (or only a trickle of it) before the client's timeout or the end of the run. TCP did its part; the wait is in the server application, its queue of work, or something it depends on.",
        remedies: &[
            r("Look at the server application: is it accepting and reading connections, are its workers busy or blocked (thread dumps, its own request log)?"),
            r("Compare with a request the server answers quickly (a health endpoint) to tell a stuck application from a slow handler."),
            r("If the reply dribbles out, check the server's send path: its writes, its socket's Send-Q (ss -tni), and a slow or stalled peer downstream."),
        ],
        counters: &["TcpExtTCPAbortOnData", "TcpExtTCPAbortOnClose"],
        sysctls: &[],
    },
    CatalogueEntry {
        pathology: Pathology::HttpError,
        role: Role::Symptom,
        name: "http_error",
        title: "HTTP error statuses",
        rank: 16,
        explanation: "The server answered, quickly or not, but with a status outside the expected classes (by default anything but 2xx): the transport worked and the application refused, failed or redirected the request. Such answers are failures for a load test, as wrk and oha count them.",
        remedies: &[
            r("Check the path, host name and method the requests use; 404 and 400 mean the request itself is wrong."),
            r("For 5xx, read the server's error log; for 429 or 503, the server is shedding load: lower the rate or add capacity."),
            r("If a status is expected (a redirect, a 404 probe), widen the accepted set with --expect-status."),
        ],
        counters: &[],
        sysctls: &[],
    },
    CatalogueEntry {
        pathology: Pathology::SpuriousRetransmission,
        role: Role::Symptom,
        name: "spurious_retransmission",
        title: "Spurious retransmissions (no loss)",
        rank: 17,
        explanation: "Segments were sent again although the receiver already had them: the receiver reported the duplicate with a D-SACK block, or the original was acknowledged before the copy could have been. Nothing was lost. A tail loss probe that repeats delivered data is normal; many spurious timeouts mean the retransmission timer is shorter than the path's real round trip (a lowered rto_min, delay spikes).",
        remedies: &[
            r("Do not treat these as loss: look for real drops elsewhere before changing the path."),
            r("If they follow timeouts, raise the RTO floor back toward the path's worst round trip (ip route ... rto_min, net.ipv4.tcp_rto_min_us)."),
            r("Keep SACK and D-SACK on (net.ipv4.tcp_sack, net.ipv4.tcp_dsack) so the sender can undo needless window reductions."),
        ],
        counters: &["TcpExtTCPDSACKRecv", "TcpExtTCPSpuriousRTOs", "TcpExtTCPLossProbes"],
        sysctls: &["net.ipv4.tcp_dsack", "net.ipv4.tcp_rto_min_us"],
    },
    CatalogueEntry {
        pathology: Pathology::PacketDrop,
        role: Role::Cause,
        name: "packet_drop",
        title: "TCP packets dropped for lack of room",
        rank: 18,
        explanation: "The kernel threw TCP packets away because a queue on their way was full: an interface's queueing discipline (a shallow tbf or pfifo limit, or a burst larger than it), the per-CPU input backlog (net.core.netdev_max_backlog), a socket's backlog while its owner held the lock, or the socket's receive memory. Each drop costs the sender a retransmission, and a drop at the tail of a burst costs a retransmission timeout.",
        remedies: &[
            r("Find the queue from the drop reason and the interface: for qdisc drops, raise the qdisc limit or shape the senders below the bottleneck (tc -s qdisc shows its drops)."),
            r("For CPU backlog drops, raise net.core.netdev_max_backlog or spread receive work over CPUs (RPS)."),
            r("For socket backlog or receive-memory drops, read faster or raise the buffer limits (net.ipv4.tcp_rmem, net.core.rmem_max)."),
        ],
        counters: &["TcpExtTCPBacklogDrop", "TcpExtTCPRcvQDrop", "TcpExtTCPOFODrop"],
        sysctls: &["net.core.netdev_max_backlog", "net.ipv4.tcp_rmem"],
    },
    CatalogueEntry {
        pathology: Pathology::ServerResponse,
        role: Role::Cause,
        name: "server_response",
        title: "Slow server response",
        rank: 19,
        explanation: "The request reached the server and was acknowledged, then nothing came back for a long time: the wait is between the request's last byte and the response's first byte, inside the server application (its handler, its queue of work, or what it waits on: a database, a lock, another service). TCP delivered both ways on time; no retransmission or window explains the wait.",
        remedies: &[
            r("Profile the server's handler for this request: its own timing log, traces, or a thread dump while it waits."),
            r("Check what the handler depends on (databases, downstream services, locks) and their latencies."),
            r("If every request waits the same, look for a fixed delay in the server (a sleep, a batch interval, Nagle's algorithm with a delayed ACK on a small write)."),
        ],
        counters: &[],
        sysctls: &[],
    },
    CatalogueEntry {
        pathology: Pathology::NetworkLatency,
        role: Role::Cause,
        name: "network_latency",
        title: "Slow network path",
        rank: 20,
        explanation: "The round trip itself is long: the SYN-ACK, or the acknowledgement of a request, took a large share of the exchange, and no loss, retransmission or window stall explains it. The time is spent on the path: distance, a congested queue on the way (bufferbloat), a slow middlebox or a relay.",
        remedies: &[
            r("Measure the path's round trip at both ends (ping, ss -ti rtt and minrtt) to see whether it is constant (distance) or varies with load (a queue filling)."),
            r("If it grows under load, find the queue: tc -s qdisc on each hop, and consider shaping below the bottleneck or an AQM such as fq_codel."),
            r("Reduce round trips per request: reuse connections (keep-alive), and avoid request patterns that wait for one answer before sending the next."),
        ],
        counters: &[],
        sysctls: &[],
    },
    CatalogueEntry {
        pathology: Pathology::ClientDelay,
        role: Role::Cause,
        name: "client_delay",
        title: "Client waited before sending",
        rank: 21,
        explanation: "The client held the connection without sending: after the handshake completed its first request came late, or between a response and its next request it stayed silent. Neither the network nor the server was waiting; the time is in the client application (its own work, a pool handing out a connection late, TLS or name resolution done after connecting).",
        remedies: &[
            r("Look at the client's code path between connect() and its first write: work done after connecting belongs before it."),
            r("For pooled connections, check the pool: a connection opened early and used late shows as this delay."),
            r("If the gap is between requests on one connection, the client is pacing itself or waiting on something else; it is not a network problem."),
        ],
        counters: &[],
        sysctls: &[],
    },
    CatalogueEntry {
        pathology: Pathology::PortScan,
        role: Role::Cause,
        name: "port_scan",
        title: "Port scan",
        rank: 22,
        explanation: "One source address tried many ports of one host with bare handshakes that carried no data: closed ports answered with a reset, filtered ones not at all, open ones with a SYN-ACK that the prober left. That is a search for open ports (a security scanner, an inventory tool, or an attacker), not clients whose connections fail: its refusals and unanswered SYNs are the scan's, and say nothing of the host's own connections.",
        remedies: &[
            r("Find out whether the source is expected (a scanner of your own, monitoring); if not, filter or rate-limit it at the edge."),
            r("Check that the open ports it found are meant to be reachable from that source."),
        ],
        counters: &["TcpOutRsts", "TcpAttemptFails"],
        sysctls: &[],
    },
    CatalogueEntry {
        pathology: Pathology::SendBufferLimited,
        role: Role::Cause,
        name: "send_buffer_limited",
        title: "Sender held by its send buffer",
        rank: 23,
        explanation: "The sending application had more to write, but its socket's send buffer was full of data still waiting to be acknowledged, while the congestion window and the receiver's window would have let more out: the kernel counts that time as sndbuf-limited (tcpi_sndbuf_limited, ss -ti sndbuf_limited). A buffer smaller than the path's bandwidth-delay product caps the transfer at buffer / round trip whatever the network could carry. The usual cause is an SO_SNDBUF set by the application (it also turns off the kernel's send-buffer autotuning) or a low net.ipv4.tcp_wmem maximum.",
        remedies: &[
            r("Let the kernel size the buffer: remove the application's SO_SNDBUF setting, so autotuning grows it up to net.ipv4.tcp_wmem's maximum."),
            rc("Or set SO_SNDBUF to at least the path's bandwidth x round trip (ss -ti: rtt and delivery_rate); raise net.core.wmem_max if the kernel caps it.", "every connection may hold that much memory: size it for the connections the host really carries"),
            r("If the buffer is already large, raise net.ipv4.tcp_wmem's maximum (the third value) to the bandwidth-delay product of the longest paths."),
        ],
        counters: &[],
        sysctls: &["net.ipv4.tcp_wmem", "net.core.wmem_max", "net.ipv4.tcp_notsent_lowat"],
    },
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_pathology_has_one_entry_with_matching_name() {
        for p in Pathology::ALL {
            let n = CATALOGUE.iter().filter(|e| e.pathology == p).count();
            assert_eq!(n, 1, "{p:?}");
            let json = serde_json::to_value(p).unwrap();
            assert_eq!(json.as_str().unwrap(), entry(p).name);
            assert!(!entry(p).remedies.is_empty());
        }
        assert_eq!(CATALOGUE.len(), Pathology::ALL.len());
    }

    #[test]
    fn remedies_that_change_the_same_setting_are_the_same_remedy() {
        let general = Remedy::new("Widen net.ipv4.ip_local_port_range (e.g. 1024 65535), keeping listening ports out of it (ip_local_reserved_ports).");
        let specific = Remedy::new(
            "Widen the range: sysctl -w net.ipv4.ip_local_port_range=\"32768 60999\" (or 1024 65535).",
        );
        assert_eq!(
            settings_named(&specific.action),
            ["net.ipv4.ip_local_port_range"]
        );
        assert!(same_remedy(&general, &specific));
        let other = Remedy::new("Reuse connections (HTTP keep-alive, a connection pool).");
        assert!(!same_remedy(&general, &other));
        assert!(same_remedy(&other, &other.clone()));
    }

    #[test]
    fn risk_and_fact_titles_never_claim_harm() {
        for p in Pathology::ALL {
            let harm = entry(p).title;
            assert_ne!(risk_title(p), harm, "{p:?}");
            assert_ne!(fact_title(p), harm, "{p:?}");
        }
        assert_eq!(fact_title(Pathology::PortExhaustion), "Port budget");
        assert_eq!(
            risk_title(Pathology::PortExhaustion),
            "Risk of ephemeral port exhaustion"
        );
        assert_eq!(
            TITLES
                .iter()
                .filter(|t| t.pathology == Pathology::Incast)
                .count(),
            1
        );
    }
}
