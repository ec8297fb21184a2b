//! Collisions of a new SYN with an older connection's state on the same 4-tuple: into
//! TIME_WAIT (the side that closed first), or the stale-ACK race after a reset close. One
//! [`Collisions`] per form, fed the incarnations [`super::handshake`] assigns to it.

use std::time::Duration;

use serde::Serialize;
use tcpdoctor_model::{Evidence, Finding, Impact, Pathology, Remedy, Source};

use super::handshake::{self, outcome, Outcome};
use super::{us, Conclusion, Context, Detector, Example, EXAMPLES};
use crate::engine::Config;
use crate::flow::Conn;

#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct CollisionDetails {
    pub count: u64,
    /// Colliding SYNs answered by an ACK of the old connection (the client resets it and
    /// resends at once on Linux).
    pub answered_by_stale_ack: u64,
    /// Colliding SYNs answered by a reset that did not acknowledge them, which the client
    /// ignored until its SYN timer resent the SYN (illumos TIME_WAIT).
    pub answered_by_reset: u64,
    /// Collisions whose connect never completed in the capture.
    pub failed: u64,
    /// The reset did not clear the old state: the SYN was answered by a stale ACK again.
    pub stalls: u64,
    /// Colliding SYNs without the timestamp option (RFC 7323): the peer cannot tell new from old.
    pub timestamps_off: u64,
    /// Colliding SYNs whose ISN was not above the old connection's last sequence number.
    pub isn_not_above_previous: u64,
    pub min_reuse_interval_us: Option<u64>,
    pub max_resend_delay_us: u64,
    pub max_connect_delay_us: u64,
    pub examples: Vec<Example>,
}

/// Which form a [`Collisions`] detector reports.
pub(crate) use handshake::Collision as Kind;

/// Collisions of one form.
pub(crate) struct Collisions {
    kind: Kind,
    time_wait_ns: u64,
    d: CollisionDetails,
}

impl Collisions {
    pub(crate) fn new(cfg: &Config, kind: Kind) -> Collisions {
        Collisions {
            kind,
            time_wait_ns: cfg.time_wait.as_nanos() as u64,
            d: CollisionDetails::default(),
        }
    }
}

impl Detector for Collisions {
    fn finished(&mut self, c: &Conn) {
        // A collision is a SYN answered by older state (a stale ACK or a reset), which only
        // the rare record holds: most connections have none and are passed over at once.
        if c.rare.is_none() || outcome(c, self.time_wait_ns) != Some(Outcome::Collision(self.kind))
        {
            return;
        }
        let syns = c.syn_list();
        let (t0, f0) = syns[0];
        let d = &mut self.d;
        d.count += 1;
        if c.rare().stale.is_empty() {
            d.answered_by_reset += 1;
        } else {
            d.answered_by_stale_ack += 1;
        }
        if c.synack.is_none() && c.close != crate::flow::CloseKind::Open {
            d.failed += 1;
        }
        // The old state answered again after the client's reset: the reset did not clear it.
        if c.rare().stale.total >= 2 {
            d.stalls += 1;
        }
        if !c.syn_ts_option {
            d.timestamps_off += 1;
        }
        let isn_low = match (c.half.c2s.isn, c.reuse.and_then(|r| r.prev_client_next)) {
            (Some(isn), Some(prev)) => isn <= prev,
            _ => false,
        };
        if isn_low {
            d.isn_not_above_previous += 1;
        }
        if let Some(r) = c.reuse {
            let v = r.interval_ns / 1_000;
            d.min_reuse_interval_us = Some(d.min_reuse_interval_us.map_or(v, |m| m.min(v)));
        }
        // Resend delay: from the client's reset of a stale answer (or the first answer, a
        // reset the client ignored) to the next SYN.
        let mark = if c.rare().client_rst.is_empty() {
            c.rare().first_answer_ts
        } else {
            c.rare().client_rst_ts
        };
        let resend_ns = syns
            .iter()
            .find(|s| s.0 > mark)
            .map(|s| s.0 - mark)
            .unwrap_or(0);
        d.max_resend_delay_us = d.max_resend_delay_us.max(resend_ns / 1_000);
        let connect_ns = match c.synack {
            Some((t, _)) => t.saturating_sub(t0),
            None => c.last_ts.saturating_sub(t0),
        };
        d.max_connect_delay_us = d.max_connect_delay_us.max(connect_ns / 1_000);
        if d.examples.len() < EXAMPLES {
            let mut frames = Vec::new();
            if let Some(r) = c.reuse {
                frames.push(r.prev_last_frame);
            }
            frames.push(f0);
            frames.extend_from_slice(c.rare().stale.as_slice());
            frames.extend_from_slice(c.rare().rst_answer.as_slice());
            frames.extend_from_slice(c.rare().client_rst.as_slice());
            frames.extend(syns[1..].iter().map(|s| s.1));
            if let Some((_, f)) = c.synack {
                frames.push(f);
            }
            frames.sort_unstable();
            frames.dedup();
            let reuse = c
                .reuse
                .map(|r| {
                    format!(
                        "4-tuple reused {} after its last packet",
                        us(r.interval_ns / 1_000)
                    )
                })
                .unwrap_or_else(|| "previous connection not in the capture".into());
            let answer = match (c.rare().stale.is_empty(), c.rare().client_rst.is_empty()) {
                (true, _) => {
                    "answered by a reset that did not acknowledge it; the client ignored the reset"
                }
                (false, false) => "answered by an ACK of the old connection; the client reset it",
                (false, true) => {
                    "answered by an ACK of the old connection; no reset of it by the client captured"
                }
            };
            let ts = if c.syn_ts_option {
                "timestamps on"
            } else {
                "timestamps off"
            };
            let outcome = match c.synack {
                Some(_) => format!("connected after {}", us(connect_ns / 1_000)),
                None => format!("still not connected after {}", us(connect_ns / 1_000)),
            };
            d.examples.push(Example {
                flow: c.label(),
                frames,
                description: format!(
                    "{reuse}; SYN ({ts}{}) {answer}; SYN resent {} after the answer; {outcome}",
                    if isn_low {
                        ", ISN not above the old sequence"
                    } else {
                        ""
                    },
                    us(resend_ns / 1_000)
                ),
            });
        }
    }

    fn conclude(self, ctx: &Context, out: &mut Conclusion) {
        let race = self.kind == Kind::StaleAck;
        if let Some(f) = finding(&self.d, race, ctx.totals.connection_attempts) {
            out.findings.push(f);
        }
        if race {
            out.details.stale_ack_races = self.d;
        } else {
            out.details.time_wait_collisions = self.d;
        }
    }
}

/// Colliding connects: each delayed until the SYN was resent and answered (the stall), out
/// of every connect; those never connected failed.
fn finding(d: &CollisionDetails, race: bool, attempts: u64) -> Option<Finding> {
    if d.count == 0 {
        return None;
    }
    let (p, what) = if race {
        (Pathology::StaleAckRace, "after a reset close (SO_LINGER 0)")
    } else {
        (Pathology::TimeWaitCollision, "into TIME_WAIT")
    };
    let mut answers = Vec::new();
    if d.answered_by_stale_ack > 0 {
        answers.push(format!(
            "{} answered by an ACK of the old connection (the client reset it)",
            d.answered_by_stale_ack
        ));
    }
    if d.answered_by_reset > 0 {
        answers.push(format!(
            "{} answered by a reset that did not acknowledge the SYN (the client ignored it)",
            d.answered_by_reset
        ));
    }
    let attempts = attempts.max(d.count);
    let impact = Impact::stalls(
        d.count,
        Some(attempts),
        Some(Duration::from_micros(d.max_connect_delay_us)),
    )
    .with_failed(d.failed);
    let mut f = Finding::new(
        p,
        Source::Analyze,
        format!(
            "{} of {} connection attempt(s) reused a 4-tuple {what}{}: {}; SYN resent up to {} after the answer, connect delayed up to {}{}",
            d.count,
            attempts,
            d.min_reuse_interval_us
                .map(|v| format!(" as soon as {} after its last packet", us(v)))
                .unwrap_or_default(),
            answers.join(", "),
            us(d.max_resend_delay_us),
            us(d.max_connect_delay_us),
            match d.failed {
                0 => String::new(),
                n => format!("; {n} never connected"),
            }
        ),
        impact,
    )
    .setting(
        "TCP timestamps in the colliding SYNs",
        if d.timestamps_off == d.count {
            "off".to_string()
        } else if d.timestamps_off == 0 {
            "on".to_string()
        } else {
            format!("off in {} of {}", d.timestamps_off, d.count)
        },
    );
    if d.isn_not_above_previous > 0 {
        f = f.with_evidence(Evidence::Examples {
            what: "new ISN not above the old connection's last sequence number".into(),
            items: vec![format!("{} of {} SYNs", d.isn_not_above_previous, d.count)],
        });
    }
    if d.stalls > 0 && !race {
        f = f
            .setting(
                "net.ipv4.tcp_rfc1337",
                "1 suspected: the reset did not clear TIME_WAIT and the SYN was refused again",
            )
            .with_first_remedy(Remedy::new(
                "Set net.ipv4.tcp_rfc1337=0 on the server so a reset ends TIME_WAIT and the resent SYN succeeds.",
            ));
    }
    for e in &d.examples {
        f = f.with_evidence(e.evidence());
    }
    Some(f)
}
