//! Collisions of a new SYN with an older connection's state on the same 4-tuple: into
//! TIME_WAIT (the side that closed first), or the stale-ACK race after a reset close. One
//! [`Collisions`] per form, fed the incarnations [`super::handshake`] assigns to it.

use serde::Serialize;
use tcpdoctor_model::{Evidence, Finding, Pathology, Remedy, Severity, Source};

use super::handshake::{self, outcome, Outcome};
use super::{us, Conclusion, Context, Detector, Example, EXAMPLES};
use crate::engine::Config;
use crate::flow::Conn;

#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct CollisionDetails {
    pub count: u64,
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
        if outcome(c, self.time_wait_ns) != Some(Outcome::Collision(self.kind)) {
            return;
        }
        let syns = c.syn_list();
        let (t0, f0) = syns[0];
        let d = &mut self.d;
        d.count += 1;
        let stall = c.stale.total >= 2 || (c.synack.is_none() && c.syn_count >= 2);
        if stall {
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
        // Resend delay: from the client's reset (or the stale answer) to the next SYN.
        let mark = if c.client_rst.is_empty() {
            c.stale_first_ts
        } else {
            c.client_rst_ts
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
            frames.extend_from_slice(c.stale.as_slice());
            frames.extend_from_slice(c.rst_answer.as_slice());
            frames.extend_from_slice(c.client_rst.as_slice());
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
            let answer = if c.stale.is_empty() {
                "answered by a reset"
            } else {
                "answered by an ACK of the old connection"
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
                    "{reuse}; SYN ({ts}{}) {answer}; client reset it; SYN resent after {}; {outcome}",
                    if isn_low { ", ISN not above the old sequence" } else { "" },
                    us(resend_ns / 1_000)
                ),
            });
        }
    }

    fn conclude(self, _ctx: &Context, out: &mut Conclusion) {
        let race = self.kind == Kind::StaleAck;
        if let Some(f) = finding(&self.d, race) {
            out.findings.push(f);
        }
        if race {
            out.details.stale_ack_races = self.d;
        } else {
            out.details.time_wait_collisions = self.d;
        }
    }
}

#[allow(deprecated)]
fn finding(d: &CollisionDetails, race: bool) -> Option<Finding> {
    if d.count == 0 {
        return None;
    }
    let (p, sev, what) = if race {
        (
            Pathology::StaleAckRace,
            if d.max_connect_delay_us >= 500_000 {
                Severity::Critical
            } else {
                Severity::Warning
            },
            "after a reset close (SO_LINGER 0)",
        )
    } else {
        (
            Pathology::TimeWaitCollision,
            // A resend at the 1 s SYN timer (older kernels, illumos) stalls requests for
            // seconds; Linux 4.x+ resends at TCP_TIMEOUT_MIN after the reset (milliseconds).
            if d.max_connect_delay_us >= 500_000 {
                Severity::Critical
            } else {
                Severity::Warning
            },
            "into TIME_WAIT",
        )
    };
    let mut f = Finding::legacy(
        p,
        sev,
        Source::Analyze,
        format!(
            "{} SYN(s) reused a 4-tuple {what}{} and were answered by an ACK of the old connection; SYN resent after up to {}, connect delayed up to {}",
            d.count,
            d.min_reuse_interval_us
                .map(|v| format!(" {} after it closed", us(v)))
                .unwrap_or_default(),
            us(d.max_resend_delay_us),
            us(d.max_connect_delay_us)
        ),
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
