//! TCP drops with the kernel's reason name, per reason and per flow, and the queue drops
//! among them (qdisc, backlog, memory) with their interface. Part of the engine
//! ([`Engine`]); pure like it.

use super::*;

/// Drop reasons that mean a queue or memory was full (include/net/dropreason-core.h): the
/// packet was lost for lack of room, not rejected as invalid or late.
const QUEUE_DROPS: &[&str] = &[
    "QDISC_DROP",
    "QDISC_OVERLIMIT",
    "QDISC_CONGESTED",
    "CPU_BACKLOG",
    "SOCKET_BACKLOG",
    "SOCKET_RCVBUFF",
    "PROTO_MEM",
    "FULL_RING",
    "TCP_OFO_DROP",
    "TCP_OFO_QUEUE_PRUNE",
    "TC_EGRESS",
    "TC_INGRESS",
    "TC_DROP",
];

impl Engine {
    pub(super) fn drop(
        &mut self,
        ev: &Event,
        reason: u32,
        ifname: Option<String>,
        tcp_flags: u8,
        timewait: Option<TcpState>,
        lookup: &mut dyn Lookup,
    ) -> Line {
        let name = self.reasons.drop.describe(reason);
        *self.summary.drop_reasons.entry(name.clone()).or_default() += 1;
        let key = (ev.local, ev.remote, name.clone(), ifname.clone());
        if self.drop_flows.len() < 10_000 || self.drop_flows.contains_key(&key) {
            *self.drop_flows.entry(key).or_default() += 1;
        }
        if name == "NO_SOCKET" && self.no_socket.len() < 100_000 {
            self.no_socket.insert((ev.local, ev.remote));
        }
        if name == "TCP_LISTEN_OVERFLOW" {
            self.overflowing.insert(ev.remote);
            self.listen_overflow
                .entry(ev.netns)
                .or_default()
                .acks_traced += 1;
            if self.listen_acks_refused.len() < 100_000 {
                self.listen_acks_refused.insert((ev.local, ev.remote));
            }
        }
        let syn = tcp_flags & 0x12 == 0x02;
        if syn && timewait.is_some() {
            // A SYN a timewait socket did not take: the peer's old socket refused it, as its
            // own record (TimeWaitAck) says when that record is seen. Measured: a lab
            // timewait-collision run whose second TimeWaitAck record was missing put that
            // resend down to "the previous SYN was dropped" (reason NOT_SPECIFIED, the
            // drop taken at the TIME_WAIT socket) instead of the collision (1 of 2).
            let key = (ev.local, ev.remote);
            if self.tw_refused.len() < old_ack::TW_REFUSED_MAX || self.tw_refused.contains_key(&key)
            {
                self.tw_refused.entry(key).or_insert((ev.ts_ns, timewait));
            }
        } else if syn {
            self.syn_drops.insert(
                (ev.local, ev.remote),
                SynDrop {
                    reason: name.clone(),
                    ifname: ifname.clone(),
                },
            );
        }
        let queue = QUEUE_DROPS.contains(&name.as_str());
        let pathology = if name == "TCP_ZEROWINDOW" {
            Some(Pathology::SlowReader)
        } else if queue {
            Some(Pathology::PacketDrop)
        } else {
            None
        };
        let at = ifname
            .as_ref()
            .map(|i| format!(" on {i}"))
            .unwrap_or_default();
        let what = if syn {
            "SYN"
        } else if tcp_flags & 0x04 != 0 {
            "RST"
        } else {
            "segment"
        };
        let socket = match timewait {
            Some(TcpState::FinWait2) if what == "RST" => {
                " (at an orphaned FIN_WAIT2 timewait mini-socket, which a reset in its window ends)"
            }
            Some(TcpState::FinWait2) => " (at an orphaned FIN_WAIT2 timewait mini-socket)",
            Some(_) => " (at a TIME_WAIT socket)",
            None => "",
        };
        let mut l = self.line(
            ev,
            Cause::Drop,
            pathology,
            format!("{what} dropped{at}: {name}{socket}"),
            lookup,
        );
        l.drop_reason = Some(name.clone());
        if let Some(p) = pathology {
            let t = self.tally(p, &l);
            t.detail(format!("{name}{at}"));
        }
        l
    }
}
