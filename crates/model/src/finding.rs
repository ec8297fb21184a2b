//! [`Finding`]: one diagnosed problem, with the evidence that proves it.

use serde::{Deserialize, Serialize};

use crate::catalogue::{self, Remedy, Role};
use crate::policy::{Impact, Rule};

/// What went wrong. Every detector in every command names one of these; the catalogue
/// ([`Pathology::entry`]) holds its explanation and remedies.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Pathology {
    /// A SYN went unanswered and was retransmitted after the initial RTO (1 s, 2 s, ...).
    SynRetransmit,
    /// A SYN reused a 4-tuple whose previous incarnation is still in TIME_WAIT at the peer,
    /// was answered by a bare ACK or dropped, and the connect stalled.
    TimeWaitCollision,
    /// A SYN was answered by an ACK of an old connection, the client reset it and resent the
    /// SYN. Current kernels resend within milliseconds; older ones after the RTO.
    StaleAckRace,
    /// Connects fail with EADDRNOTAVAIL or stall because ephemeral ports toward one
    /// destination are used up, mostly by TIME_WAIT.
    PortExhaustion,
    /// A listener's accept queue overflowed; SYNs or final ACKs were dropped.
    AcceptQueueOverflow,
    /// Data was retransmitted after a retransmission timeout (an idle gap >= RTO min).
    RetransmitTimeout,
    /// Data was retransmitted quickly (fast retransmit, TLP): loss without a timeout.
    Retransmission,
    /// Many senders answer one receiver at once, overflow a shallow buffer and stall on
    /// synchronized retransmission timeouts.
    Incast,
    /// Traffic arrives in bursts far above its average rate on a short time scale.
    Microburst,
    /// The receiver reads slower than the sender writes: zero windows, full receive queues,
    /// stalled writers.
    SlowReader,
    /// A reply waited ~40 ms for a delayed ACK interacting with Nagle's algorithm.
    DelayedAck,
    /// Connections were refused, reset or timed out.
    ConnectFailure,
    /// A latency spike that no kernel counter or timer signature explains.
    UnexplainedDelay,
    /// A tunable whose value exposes the host to one of the pathologies above, or is unsafe.
    RiskySetting,
    /// SYNs that were never answered at all: a SYN flood, or a server or firewall that does
    /// not answer.
    UnansweredSyn,
    /// The server accepted the connection but did not reply, or replied too slowly, before
    /// the client gave up.
    NoReply,
    /// HTTP answers outside the expected status classes (by default anything but 2xx).
    HttpError,
    /// Retransmissions of data the receiver already had (proven by D-SACK or by the ACK of
    /// the original): not loss, but wasted sends and often a timer set too short.
    SpuriousRetransmission,
    /// The kernel dropped TCP packets for lack of room (a full qdisc, CPU backlog, socket
    /// backlog or receive memory), named by its drop reason.
    PacketDrop,
    /// The server application took long to answer: the request had arrived (and was
    /// acknowledged) well before the first byte of the response left. TCP was not the wait.
    ServerResponse,
    /// The path itself is slow: round trips (handshake, request to acknowledgement) long
    /// compared with the exchange, with no loss or timer to explain them.
    NetworkLatency,
    /// The client waited: between the handshake and its first request, or between a
    /// response and its next request. Neither the network nor the server was the wait.
    ClientDelay,
    /// One source probing many ports of one host with bare handshakes (refused, unanswered,
    /// or left after the SYN-ACK): a port scan, whose refusals are not failures of the host.
    PortScan,
    /// The sender's socket buffer (SO_SNDBUF, or net.ipv4.tcp_wmem's maximum) held less than
    /// the path could carry: the application waited for room while the congestion and receive
    /// windows would have let more data out.
    SendBufferLimited,
}

impl Pathology {
    pub const ALL: [Pathology; 24] = [
        Pathology::SynRetransmit,
        Pathology::TimeWaitCollision,
        Pathology::StaleAckRace,
        Pathology::PortExhaustion,
        Pathology::AcceptQueueOverflow,
        Pathology::RetransmitTimeout,
        Pathology::Retransmission,
        Pathology::Incast,
        Pathology::Microburst,
        Pathology::SlowReader,
        Pathology::DelayedAck,
        Pathology::ConnectFailure,
        Pathology::UnexplainedDelay,
        Pathology::RiskySetting,
        Pathology::UnansweredSyn,
        Pathology::NoReply,
        Pathology::HttpError,
        Pathology::SpuriousRetransmission,
        Pathology::PacketDrop,
        Pathology::ServerResponse,
        Pathology::NetworkLatency,
        Pathology::ClientDelay,
        Pathology::PortScan,
        Pathology::SendBufferLimited,
    ];

    /// The snake_case name used in JSON and on the command line.
    pub fn name(self) -> &'static str {
        self.entry().name
    }

    /// The catalogue entry: title, explanation, remedies, counters and sysctls.
    pub fn entry(self) -> &'static catalogue::CatalogueEntry {
        catalogue::entry(self)
    }

    /// Whether this pathology is a cause (it explains others) or a symptom.
    pub fn role(self) -> Role {
        self.entry().role
    }
}

impl std::fmt::Display for Pathology {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// How much a finding hurts. Ordered: `Info < Warning < Critical`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Severity {
    /// Worth knowing; does not make the verdict unhealthy.
    Info,
    /// Hurts latency or throughput now, or will under load.
    Warning,
    /// Requests fail or stall for seconds.
    Critical,
}

impl std::fmt::Display for Severity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Severity::Info => "info",
            Severity::Warning => "warning",
            Severity::Critical => "critical",
        })
    }
}

/// Which part of tcpdoctor produced a finding.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Source {
    Probe,
    Analyze,
    Sockets,
    Counters,
    Check,
    Burst,
    Lab,
    Doctor,
    Trace,
}

/// One fact that backs a finding. Tagged by `kind` in JSON.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Evidence {
    /// A kernel counter that moved, named as `nstat` prints it (`TcpExtTCPSynRetrans`).
    Counter { name: String, delta: i64 },
    /// A sysctl (`net.ipv4.tcp_tw_reuse`) or route attribute and its value.
    Setting { name: String, value: String },
    /// Sockets: how many, in which state, toward what, with a detail.
    Sockets {
        state: String,
        count: u64,
        local: Option<String>,
        remote: Option<String>,
        detail: Option<String>,
    },
    /// A measured duration: what, how many times, and a representative value.
    Timing {
        what: String,
        count: u64,
        value_us: u64,
    },
    /// Packets of a capture (1-based frame numbers, as Wireshark counts them).
    Packets {
        flow: String,
        frames: Vec<u64>,
        description: String,
    },
    /// A computation shown with its inputs, e.g. `28232 ports / 60 s = 470 conn/s`.
    Arithmetic { formula: String, result: f64 },
    /// Examples that let a user find the case again (local ports, flows, sockets).
    Examples { what: String, items: Vec<String> },
}

/// One diagnosed problem.
///
/// Its severity is never chosen by a detector: it follows from the [`Impact`] through the
/// policy ([`crate::policy`]), and `severity_rule` names the rule that applied.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Finding {
    pub pathology: Pathology,
    /// Set from `impact` by [`Finding::new`] and [`Finding::with_impact`]; do not assign.
    pub severity: Severity,
    /// The policy rule that set `severity`.
    pub severity_rule: Rule,
    /// What the pathology cost, as measured.
    pub impact: Impact,
    pub source: Source,
    /// One line: what was seen, with the key figure.
    pub summary: String,
    pub evidence: Vec<Evidence>,
    /// Why it happens (from the catalogue unless a detector knows more).
    pub explanation: String,
    /// What to do, best first.
    pub remedies: Vec<Remedy>,
    /// Set by a detector that proved this finding a consequence of another pathology (SYNs
    /// resent toward a listener whose accept queue is full): where findings are combined
    /// ([`crate::merge`]) it becomes evidence of that cause's finding instead of a finding of
    /// its own. Kept (and serialized) only while no finding of the cause is beside it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub consequence_of: Option<Pathology>,
}

impl Finding {
    /// A finding whose severity follows from `impact` (the policy) and whose explanation and
    /// remedies come from the catalogue.
    pub fn new(
        pathology: Pathology,
        source: Source,
        summary: impl Into<String>,
        impact: Impact,
    ) -> Finding {
        let entry = pathology.entry();
        let judgement = impact.judge();
        Finding {
            pathology,
            severity: judgement.severity,
            severity_rule: judgement.rule,
            impact,
            source,
            summary: summary.into(),
            evidence: Vec::new(),
            explanation: entry.explanation.to_string(),
            remedies: entry.remedies.iter().map(|r| r.to_owned_remedy()).collect(),
            consequence_of: None,
        }
    }

    /// The title every printer shows. Harm seen takes the catalogue's title ("Ephemeral ports
    /// exhausted"); an exposure is titled as a risk ("Risk of ephemeral port exhaustion") and
    /// a finding that states a budget or a timer, nothing hurt, as that fact ("Port budget"):
    /// a title never claims harm the impact does not show.
    pub fn title(&self) -> String {
        if self.impact.exposure {
            catalogue::risk_title(self.pathology)
        } else if self.severity_rule == Rule::Context {
            catalogue::fact_title(self.pathology)
        } else {
            self.pathology.entry().title.to_string()
        }
    }

    /// Marks this finding as a consequence of `cause` (see [`Finding::consequence_of`]).
    pub fn consequence_of(mut self, cause: Pathology) -> Finding {
        self.consequence_of = Some(cause);
        self
    }

    /// Replaces the impact and re-derives the severity from it.
    pub fn with_impact(mut self, impact: Impact) -> Finding {
        let judgement = impact.judge();
        self.severity = judgement.severity;
        self.severity_rule = judgement.rule;
        self.impact = impact;
        self
    }

    pub fn with_evidence(mut self, evidence: Evidence) -> Finding {
        self.evidence.push(evidence);
        self
    }

    pub fn with_explanation(mut self, explanation: impl Into<String>) -> Finding {
        self.explanation = explanation.into();
        self
    }

    /// Puts a remedy first (a detector that knows the best fix for this case). A remedy it
    /// makes specific replaces the general one that changes the same setting ("Widen the
    /// range: sysctl -w net.ipv4.ip_local_port_range=..." replaces "Widen
    /// net.ipv4.ip_local_port_range"), so that no list says the same thing twice.
    pub fn with_first_remedy(mut self, remedy: Remedy) -> Finding {
        self.remedies
            .retain(|r| !catalogue::same_remedy(r, &remedy));
        self.remedies.insert(0, remedy);
        self
    }

    /// Adds `more` after this finding's remedies, each at most once ([`catalogue::same_remedy`]).
    pub fn add_remedies(&mut self, more: &[Remedy]) {
        for r in more {
            if !self.remedies.iter().any(|m| catalogue::same_remedy(m, r)) {
                self.remedies.push(r.clone());
            }
        }
    }

    /// Shorthand for counter evidence.
    pub fn counter(self, name: &str, delta: i64) -> Finding {
        self.with_evidence(Evidence::Counter {
            name: name.to_string(),
            delta,
        })
    }

    /// Shorthand for setting evidence.
    pub fn setting(self, name: &str, value: impl ToString) -> Finding {
        self.with_evidence(Evidence::Setting {
            name: name.to_string(),
            value: value.to_string(),
        })
    }

    /// Shorthand for arithmetic evidence.
    pub fn arithmetic(self, formula: impl Into<String>, result: f64) -> Finding {
        self.with_evidence(Evidence::Arithmetic {
            formula: formula.into(),
            result,
        })
    }
}

/// The absolute harm a finding measured, ordered: harm seen before a risk (an exposure), then
/// operations failed, then the longest stall, then operations affected. A share of a sample
/// never enters: 3 failures of 3 weigh less than 400 of 40,000.
pub fn harm(f: &Finding) -> impl Ord {
    let i = &f.impact;
    if i.exposure {
        (false, 0, 0, 0)
    } else {
        (true, i.failed, i.worst_stall_us.unwrap_or(0), i.affected)
    }
}

/// Orders findings: those above info first; among them harm seen before a risk (an
/// exposure explains no symptom: a port budget that would run out at this rate, with no sign
/// it did, is not why connects stalled), then causes before the symptoms they explain, then
/// the more severe, then the more harmful ([`harm`]: failed, then the longest stall, then
/// affected), then the catalogue's rank. Informational findings follow in the same order.
pub fn rank(findings: &mut [Finding]) {
    findings.sort_by_cached_key(|f| {
        (
            f.severity == Severity::Info,
            f.impact.exposure,
            f.pathology.role(),
            std::cmp::Reverse(f.severity),
            std::cmp::Reverse(harm(f)),
            f.pathology.entry().rank,
        )
    });
}

/// The finding a verdict names as the worst: the most severe, then the most harmful
/// ([`harm`]), whatever its role; the first in `findings`' order among equals.
pub fn worst(findings: &[Finding]) -> Option<&Finding> {
    findings.iter().rev().max_by_key(|f| (f.severity, harm(f)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn finding_takes_catalogue_text_and_serializes_snake_case() {
        let f = Finding::new(
            Pathology::PortExhaustion,
            Source::Probe,
            "connects failed",
            Impact::failures(3, None),
        )
        .counter("TcpExtTW", 3);
        assert!(!f.explanation.is_empty());
        assert!(!f.remedies.is_empty());
        let json = serde_json::to_value(&f).unwrap();
        assert_eq!(json["pathology"], "port_exhaustion");
        assert_eq!(json["severity"], "critical");
        assert_eq!(json["severity_rule"], "failures");
        assert_eq!(json["impact"]["failed"], 3);
        assert_eq!(json["evidence"][0]["kind"], "counter");
        assert_eq!(json["evidence"][0]["name"], "TcpExtTW");
    }

    #[test]
    fn severity_follows_the_impact() {
        let f = Finding::new(
            Pathology::SynRetransmit,
            Source::Analyze,
            "x",
            Impact::stalls(1, Some(1000), Some(Duration::from_millis(1_010))),
        );
        assert_eq!(f.severity, Severity::Critical);
        let f = f.with_impact(Impact::stalls(1, Some(1000), None));
        assert_eq!(f.severity, Severity::Info);
    }

    fn f(p: Pathology, impact: Impact, summary: &str) -> Finding {
        Finding::new(p, Source::Probe, summary, impact)
    }

    #[test]
    fn rank_puts_causes_before_symptoms_and_info_last() {
        let second = Some(Duration::from_secs(1));
        let mut v = vec![
            f(
                Pathology::DelayedAck,
                Impact::stalls(1, Some(1000), None),
                "info",
            ),
            f(
                Pathology::SynRetransmit,
                Impact::stalls(9, None, second),
                "symptom",
            ),
            f(
                Pathology::StaleAckRace,
                Impact::stalls(9, Some(100), None),
                "cause",
            ),
            f(
                Pathology::Retransmission,
                Impact::stalls(9, Some(100), None),
                "symptom2",
            ),
        ];
        rank(&mut v);
        let order: Vec<&str> = v.iter().map(|f| f.summary.as_str()).collect();
        assert_eq!(order, ["cause", "symptom", "symptom2", "info"]);
    }

    /// A capture of a full accept queue (lab accept-overflow, `--pcap`): the rate of new
    /// connections would use up the port range in 7 s, with no sign it did (an exposure,
    /// warning), beside connects that waited 3 s on resent SYNs. The risk, a cause by its
    /// pathology, ranked first and read as the reason for the stalls; it explains none.
    #[test]
    fn a_risk_ranks_after_harm_seen_whatever_its_role() {
        let risk = f(
            Pathology::PortExhaustion,
            Impact::rate(8.1).exposure(),
            "risk",
        );
        let seen = f(
            Pathology::SynRetransmit,
            Impact::stalls(26, Some(14790), Some(Duration::from_secs(3))),
            "seen",
        );
        assert_eq!(risk.severity, Severity::Warning);
        let mut v = vec![risk, seen];
        rank(&mut v);
        let order: Vec<&str> = v.iter().map(|f| f.summary.as_str()).collect();
        assert_eq!(order, ["seen", "risk"]);
    }

    /// Issue 24: within one severity the catalogue's order decided, so a 43 ms delayed ACK
    /// ranked (and was named worst) above a 301 ms server response.
    #[test]
    fn within_a_severity_the_more_harmful_ranks_first_and_is_the_worst() {
        let ms = |n| Some(Duration::from_millis(n));
        let delayed_ack = f(
            Pathology::DelayedAck,
            Impact::stalls(40, Some(400), ms(43)),
            "43 ms",
        );
        let server = f(
            Pathology::ServerResponse,
            Impact::stalls(12, Some(400), ms(301)),
            "301 ms",
        );
        assert_eq!(delayed_ack.severity, Severity::Warning);
        assert_eq!(server.severity, Severity::Warning);
        assert!(delayed_ack.pathology.entry().rank < server.pathology.entry().rank);
        let mut v = vec![delayed_ack, server];
        rank(&mut v);
        let order: Vec<&str> = v.iter().map(|f| f.summary.as_str()).collect();
        assert_eq!(order, ["301 ms", "43 ms"]);
        assert_eq!(worst(&v).unwrap().summary, "301 ms");
    }

    /// Absolute harm: failures before the longest stall, the longest stall before the
    /// number affected, measured harm before a risk; the catalogue decides only ties.
    #[test]
    fn harm_orders_failures_then_the_longest_stall_then_affected() {
        let s = |n| Some(Duration::from_secs(n));
        let mut v = vec![
            f(
                Pathology::SynRetransmit,
                Impact::stalls(900, Some(1000), s(3)),
                "3 s stall, 900 hurt",
            ),
            f(
                Pathology::UnansweredSyn,
                Impact::failures(2, Some(100)).with_stall(Duration::from_secs(1)),
                "2 failed",
            ),
            f(
                Pathology::ConnectFailure,
                Impact::failures(5, Some(100)),
                "5 failed",
            ),
            f(
                Pathology::RetransmitTimeout,
                Impact::stalls(3, Some(1000), s(3)),
                "3 s stall, 3 hurt",
            ),
        ];
        assert!(v.iter().all(|f| f.severity == Severity::Critical));
        rank(&mut v);
        let order: Vec<&str> = v.iter().map(|f| f.summary.as_str()).collect();
        assert_eq!(
            order,
            [
                "5 failed",
                "2 failed",
                "3 s stall, 900 hurt",
                "3 s stall, 3 hurt"
            ]
        );
        // A risk of a 3 s stall is judged a warning, and weighs less than a 300 ms stall seen.
        let risk = f(
            Pathology::RiskySetting,
            Impact::stalls(0, None, s(3)).exposure(),
            "risk",
        );
        let seen = f(
            Pathology::RetransmitTimeout,
            Impact::stalls(1, Some(10), Some(Duration::from_millis(300))),
            "seen",
        );
        assert_eq!(
            (risk.severity, seen.severity),
            (Severity::Warning, Severity::Warning)
        );
        assert!(harm(&seen) > harm(&risk));
        assert_eq!(worst(&[risk, seen]).unwrap().summary, "seen");
    }

    /// Causes still rank before symptoms; the worst named may be a symptom, and among equal
    /// harm it is the first in rank order.
    #[test]
    fn the_worst_is_the_most_harmful_whatever_its_role() {
        let stall = |n| Impact::stalls(n, Some(1000), Some(Duration::from_millis(300)));
        let mut v = vec![
            f(Pathology::RetransmitTimeout, stall(50), "symptom"),
            f(Pathology::Incast, stall(20), "cause"),
        ];
        rank(&mut v);
        assert_eq!(v[0].summary, "cause");
        assert_eq!(worst(&v).unwrap().summary, "symptom");
        let mut tie = vec![
            f(Pathology::SlowReader, stall(20), "second in the catalogue"),
            f(Pathology::Incast, stall(20), "first in the catalogue"),
        ];
        rank(&mut tie);
        assert_eq!(worst(&tie).unwrap().summary, "first in the catalogue");
        assert!(worst(&[]).is_none());
    }

    #[test]
    fn every_new_pathology_is_in_all() {
        for p in [
            Pathology::UnansweredSyn,
            Pathology::NoReply,
            Pathology::HttpError,
            Pathology::SpuriousRetransmission,
            Pathology::PacketDrop,
            Pathology::PortScan,
        ] {
            assert!(Pathology::ALL.contains(&p));
        }
    }
}
