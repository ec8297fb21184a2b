//! Retransmissions by what sent them: a SYN resent (after a stale ACK or a TIME_WAIT
//! collision, into a full accept queue, dropped where the trace saw it, or lost) and data
//! resent by the timer, a tail-loss probe or fast retransmit; timeouts of several flows into
//! one receiver are incast. Part of the engine ([`Engine`]); pure like it.

use super::*;

/// A connect's SYN resent sooner than this after connect() was not resent by the SYN ladder,
/// whose first rung is the initial RTO, 1 s (TCP_TIMEOUT_INIT, RFC 6298 section 2.1), but by
/// the timer re-armed at TCP_TIMEOUT_MIN (2 jiffies: 8 ms at HZ=250, 20 ms at HZ=100) after
/// an unacceptable ACK (net/ipv4/tcp_input.c, tcp_rcv_synsent_state_process). Measured here:
/// report 003's races resend their SYN about 10 ms after connect().
pub(super) const QUICK_RESEND: Duration = Duration::from_millis(200);

/// What the evidence of a resend that sent nothing adds (the tracepoint's result).
pub(super) fn unsent_text(errno: u16) -> String {
    match i32::from(errno) {
        libc::EBUSY => {
            "; nothing sent: EBUSY, the first copy was still in this host's qdisc or driver"
                .to_string()
        }
        e => {
            let what = std::io::Error::from_raw_os_error(e).to_string();
            let what = what.split(" (os error").next().unwrap_or_default();
            format!("; nothing sent: the kernel's result was -{e} ({what})")
        }
    }
}

impl Engine {
    // The fields of one Detail::Retransmit, as the other handlers take theirs.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn retransmit(
        &mut self,
        ev: &Event,
        class: RetransmitClass,
        attempt: u32,
        waited_us: Option<u32>,
        peer_silent: bool,
        unsent_errno: Option<u16>,
        lookup: &mut dyn Lookup,
    ) -> Option<Line> {
        let unsent = unsent_errno.is_some();
        let line = match class {
            RetransmitClass::Syn if ev.state == Some(TcpState::SynSent) => {
                Some(self.syn_resend(ev, attempt, waited_us, lookup))
            }
            RetransmitClass::Syn => Some(self.syn_ack_resend(ev, attempt, lookup)),
            RetransmitClass::Timeout => Some(self.retransmission_timeout(
                ev,
                attempt,
                waited_us,
                peer_silent,
                unsent,
                lookup,
            )),
            RetransmitClass::TailLossProbe => Some(self.data_resent(
                ev,
                Cause::TailLossProbe,
                "tail-loss probe: the last segment resent to draw an ACK (RFC 8985)".into(),
                lookup,
            )),
            RetransmitClass::Fast => Some(self.data_resent(
                ev,
                Cause::FastRetransmit,
                "fast retransmit: duplicate ACKs / SACK reported a hole".into(),
                lookup,
            )),
            RetransmitClass::AfterTimeout => Some(self.line(
                ev,
                Cause::AfterTimeout,
                Some(Pathology::RetransmitTimeout),
                "resent after a timeout (loss recovery)".into(),
                lookup,
            )),
            RetransmitClass::ZeroWindow => {
                let l = self.line(ev, Cause::ZeroWindow, Some(Pathology::SlowReader), "the retransmission timer fired with the peer's window at zero: its application is not reading, this socket's writer waits".into(), lookup);
                self.windows.resent_into(ev);
                self.writer_tally(&l);
                Some(l)
            }
            RetransmitClass::Other => {
                Some(self.data_resent(ev, Cause::Retransmission, "retransmission".into(), lookup))
            }
        };
        // A resend that sent nothing is still what happened (a timeout did fire, the kernel
        // counted it): attributed as any other, its line saying that nothing went out.
        line.map(|mut l| {
            if let Some(errno) = unsent_errno {
                l.evidence.push_str(&unsent_text(errno));
            }
            l
        })
    }

    /// A connect's SYN resent: attributed to its cause ([`Self::syn_cause`]), recorded on
    /// the handshake and, for a pathology, tallied with the wait its rung of this host's SYN
    /// ladder implies.
    ///
    /// `since_connect_us`: how long after connect() it came (the trace saw the connect), which
    /// tells two cases the handshake's own events may not: a resend within
    /// [`QUICK_RESEND`] followed an ACK the connecting socket could not accept; a resend with
    /// no connect traced whose ladder puts its first SYN before the trace began has a cause
    /// the trace could not see.
    fn syn_resend(
        &mut self,
        ev: &Event,
        attempt: u32,
        since_connect_us: Option<u32>,
        lookup: &mut dyn Lookup,
    ) -> Line {
        let ladder = lookup.syn_ladder(ev.netns);
        let known = self.handshakes.get(&ev.sk).and_then(|h| h.cause);
        let old_ack_seen = matches!(
            known,
            Some(Cause::StaleAckRace | Cause::TimeWaitCollision | Cause::OldAck)
        );
        let quick = since_connect_us
            .filter(|&us| !old_ack_seen && Duration::from_micros(us.into()) < QUICK_RESEND);
        let (cause, evidence) = match quick {
            Some(us) => self.quick_resend(ev, attempt, us),
            None => {
                let rung = ladder
                    .as_ref()
                    .and_then(|l| l.retransmit_at(attempt))
                    .map(|d| {
                        format!(
                            ", rung {attempt} of this host's SYN ladder ({} s after the first SYN)",
                            d.as_secs_f64()
                        )
                    })
                    .unwrap_or_else(|| format!(", attempt {attempt}"));
                let rung = match since_connect_us {
                    Some(us) => format!("{rung}, {} after connect()", units::micros(us.into())),
                    None => rung,
                };
                self.syn_cause(ev, attempt, &rung, lookup)
            }
        };
        // A ladder resend proves its SYN went unanswered for the RTO, whenever its connect()
        // came; a resend within QUICK_RESEND of one followed an unacceptable ACK instead.
        // With no connect() traced, a resend that soon after the trace began may be either
        // (later, too, for a first resend: below).
        if cause == Cause::SynLost
            && since_connect_us.is_none()
            && ev.ts_ns < self.start_ns + QUICK_RESEND.as_nanos() as u64
        {
            return self.line(
                ev,
                Cause::SynLost,
                None,
                format!("SYN resent (attempt {attempt}) {} after the trace began, its connect() before: on the SYN ladder (unanswered) or just after an old ACK (not traced), which the trace cannot tell: not attributed", units::micros_in_ms(ev.ts_ns.saturating_sub(self.start_ns) / 1000)),
                lookup,
            );
        }
        let hs = self.handshakes.entry(ev.sk).or_default();
        hs.resends += 1;
        hs.last_ts_ns = ev.ts_ns;
        if !matches!(
            hs.cause,
            Some(Cause::StaleAckRace | Cause::TimeWaitCollision | Cause::OldAck)
        ) {
            hs.cause = Some(cause);
        }
        // A first resend with no connect() record may also be a quick one: the owner
        // records are direct-mapped by socket address (trace.bpf.c, OWNER_SLOTS), and under
        // churn a later connect can take the slot in the milliseconds before a quick resend.
        // Measured with report 003's loop (about 9,000 connects/s) under CPU load: 1 of 74
        // ten-second traces had such a resend, which the capture shows came 13.4 ms after its
        // SYN, just after a stale ACK; judged as the ladder's 1 s it had made the trace say
        // critical (1 run of 137 before). Its wait is unknown: said, not tallied.
        let wait_unknown = cause == Cause::SynLost && since_connect_us.is_none() && attempt <= 1;
        let evidence = if wait_unknown {
            format!("{evidence}; no record of its connect() (made before the trace began, or its record taken by a later connect's): its wait is unknown, and it may have followed an old ACK the trace did not see")
        } else {
            evidence
        };
        let p = Self::pathology_of(cause);
        let l = self.line(ev, cause, p, evidence, lookup);
        if let Some(p) = p {
            *self.summary.syn_resends.entry(p).or_default() += 1;
            let t = self.tally(p, &l);
            t.resends += 1;
            // A stale-ACK resend comes within milliseconds, not on the ladder: its
            // stall is the connect time reported when the handshake completes.
            let on_ladder = !wait_unknown
                && !matches!(
                    cause,
                    Cause::StaleAckRace | Cause::TimeWaitCollision | Cause::OldAck
                );
            if let Some(d) = ladder
                .as_ref()
                .filter(|_| on_ladder)
                .and_then(|lad| lad.retransmit_at(attempt))
            {
                t.worst_us = t.worst_us.max(d.as_micros() as u64);
            }
        }
        l
    }

    /// A SYN resent `since_connect_us` after connect(), sooner than any rung of the SYN
    /// ladder: the kernel re-arms the SYN timer at TCP_TIMEOUT_MIN (2 jiffies) when the
    /// connecting socket gets an ACK it cannot accept (tcp_rcv_synsent_state_process): an
    /// ACK of an older connection on the 4-tuple, whose event the trace did not get. Its
    /// cause is the old ACK's, from the peer's refusing socket when that was traced.
    fn quick_resend(&mut self, ev: &Event, attempt: u32, since_connect_us: u32) -> (Cause, String) {
        let peer = self
            .tw_refused
            .remove(&(ev.local, ev.remote))
            .map(|(_, sub)| sub);
        let cause = old_ack::old_ack_cause(peer, None);
        if cause == Cause::TimeWaitCollision {
            self.timewait_netns.insert(ev.netns);
        }
        (
            cause,
            format!(
                "SYN resent {} after connect() (attempt {attempt}), sooner than the SYN ladder's first rung: the kernel resends this soon only after an ACK the connecting socket could not accept (an ACK of an older connection on this 4-tuple; that ACK and its reset were not traced)",
                units::micros_in_ms(u64::from(since_connect_us))
            ),
        )
    }

    /// Why a connect's SYN was resent, and the evidence: the old ACK its handshake already
    /// met, a TIME_WAIT socket refusing it, a drop the trace saw, a listener refusing SYNs,
    /// or else no answer seen. `rung` ends the evidence with where the SYN ladder is.
    fn syn_cause(
        &mut self,
        ev: &Event,
        attempt: u32,
        rung: &str,
        lookup: &mut dyn Lookup,
    ) -> (Cause, String) {
        let known = self.handshakes.get(&ev.sk).and_then(|h| h.cause);
        match known {
            Some(c @ (Cause::StaleAckRace | Cause::TimeWaitCollision | Cause::OldAck)) => {
                let when = self
                    .handshakes
                    .get(&ev.sk)
                    .map(|h| units::micros_in_ms(ev.ts_ns.saturating_sub(h.last_ts_ns) / 1000))
                    .unwrap_or_default();
                (
                    c,
                    format!("SYN resent {when} after the old ACK was reset (attempt {attempt})"),
                )
            }
            _ => {
                if let Some(found) = self.refused_by_timewait(ev, rung) {
                    found
                } else if let Some(d) = self.syn_drops.get(&(ev.local, ev.remote)) {
                    let at = d
                        .ifname
                        .as_ref()
                        .map(|i| format!(" on {i}"))
                        .unwrap_or_default();
                    (
                        Cause::SynDropped,
                        format!(
                            "SYN resent: the previous one was dropped{at}, reason {}{rung}",
                            d.reason
                        ),
                    )
                } else if let Some((li, counted)) = self.refusing_listener(ev, lookup) {
                    self.accept_queue_full(&li, counted, rung)
                } else {
                    (
                        Cause::SynLost,
                        format!("SYN resent with no answer seen{rung}"),
                    )
                }
            }
        }
    }

    /// A SYN resent because listener `li` refused it for a full accept queue (seen full, or
    /// `counted`: inferred from its namespace's TcpExtListenOverflows rise and the refused
    /// handshake ACKs traced); the listener is noted on the accept-queue tally.
    fn accept_queue_full(
        &mut self,
        li: &Listener,
        counted: Option<(u64, u64)>,
        rung: &str,
    ) -> (Cause, String) {
        let who = li
            .process
            .as_ref()
            .map(|p| format!(", held by {} (pid {})", p.comm, p.pid))
            .unwrap_or_default();
        let evidence = match counted {
            None => format!(
                "SYN resent: the listener {} accept queue full ({} queued, backlog {}){who}, so the kernel drops SYNs{rung}",
                li.local, li.queued, li.backlog
            ),
            Some((rise, acks)) => format!(
                "SYN resent: listener {} refused SYNs for a full accept queue (backlog {}){who}: TcpExtListenOverflows +{rise} in its namespace, {acks} of them handshake ACKs traced as TCP_LISTEN_OVERFLOW; a refused SYN leaves no drop record{rung}",
                li.local, li.backlog
            ),
        };
        self.overflowing.insert(li.local);
        self.tallies
            .entry(Pathology::AcceptQueueOverflow)
            .or_default()
            .detail(format!("listener {} backlog {}{who}", li.local, li.backlog));
        (Cause::AcceptQueueFull, evidence)
    }

    /// A listener's SYN-ACK resent: tallied as a SYN retransmission.
    fn syn_ack_resend(&mut self, ev: &Event, attempt: u32, lookup: &mut dyn Lookup) -> Line {
        let l = self.line(
            ev,
            Cause::SynAckResend,
            Some(Pathology::SynRetransmit),
            format!("SYN-ACK resent (attempt {attempt})"),
            lookup,
        );
        self.tally(Pathology::SynRetransmit, &l);
        *self
            .summary
            .syn_resends
            .entry(Pathology::SynRetransmit)
            .or_default() += 1;
        l
    }

    /// A retransmission timeout: tallied with how long the data waited, and (when the peer
    /// took part and the first copy left this host) counted toward incast.
    fn retransmission_timeout(
        &mut self,
        ev: &Event,
        attempt: u32,
        waited_us: Option<u32>,
        peer_silent: bool,
        unsent: bool,
        lookup: &mut dyn Lookup,
    ) -> Line {
        let waited = waited_us.map(u64::from);
        let mut text = waited
            .map(|w| {
                format!(
                    " after {} without an ACK of new data",
                    units::micros_in_ms(w)
                )
            })
            .unwrap_or_default();
        if let Some(l) = self.never_taken(ev, Cause::Timeout, peer_silent, lookup) {
            return l;
        }
        self.unfolded(ev, Cause::Timeout, peer_silent, waited_us);
        if peer_silent {
            text.push_str("; the peer has acknowledged none of this connection's data and sent none: it may never have taken the connection (a full accept queue drops the handshake's last ACK)");
        }
        let l = self.line(
            ev,
            Cause::Timeout,
            Some(Pathology::RetransmitTimeout),
            format!("retransmission timeout {attempt}{text}"),
            lookup,
        );
        let t = self.tally(Pathology::RetransmitTimeout, &l);
        if let Some(w) = waited {
            t.worst_us = t.worst_us.max(w);
        }
        // A peer that never took the connection is not a receiver whose buffer the
        // senders overflowed together (the capture analyzer leaves such flows out of
        // incast too); nor is a timeout whose first copy had not left this host.
        if !peer_silent && !unsent {
            self.incast(ev, waited.unwrap_or(0));
        }
        l
    }

    /// Data resent other than by the timer (tail-loss probe, fast retransmit, other): a line
    /// for `cause` with `evidence`, tallied as a retransmission.
    fn data_resent(
        &mut self,
        ev: &Event,
        cause: Cause,
        evidence: String,
        lookup: &mut dyn Lookup,
    ) -> Line {
        if let Some(l) = self.never_taken(ev, cause, false, lookup) {
            return l;
        }
        self.unfolded(ev, cause, false, None);
        let l = self.line(ev, cause, Some(Pathology::Retransmission), evidence, lookup);
        self.tally(Pathology::Retransmission, &l);
        l
    }

    fn incast(&mut self, ev: &Event, waited_us: u64) {
        let window = self.cfg.incast_window.as_nanos() as u64;
        let q = self.rtos.entry(ev.remote.ip()).or_default();
        q.push_back((ev.ts_ns, (ev.local, ev.remote), waited_us));
        while q
            .front()
            .is_some_and(|&(t, _, _)| ev.ts_ns.saturating_sub(t) > window)
        {
            q.pop_front();
        }
        let flows: BTreeSet<_> = q.iter().map(|&(_, f, _)| f).collect();
        if flows.len() < self.cfg.incast_min_flows {
            return;
        }
        let start_ns = q.front().map(|&(t, _, _)| t).unwrap_or(ev.ts_ns);
        let start_us = start_ns.saturating_sub(self.start_ns) / 1000;
        let worst = q.iter().map(|&(_, _, w)| w).max().unwrap_or(0);
        let receiver = ev.remote.ip();
        // One episode per burst: extend the last one if it started within the window.
        match self.summary.incast_episodes.last_mut() {
            Some(e)
                if e.receiver == receiver
                    && start_us.saturating_sub(e.start_us) * 1000 <= window =>
            {
                e.flows = e.flows.max(flows.len() as u64);
                e.worst_wait_us = e.worst_wait_us.max(worst);
            }
            _ => self.summary.incast_episodes.push(IncastEpisode {
                receiver,
                start_us,
                flows: flows.len() as u64,
                worst_wait_us: worst,
            }),
        }
        let t = self.tallies.entry(Pathology::Incast).or_default();
        for f in flows {
            t.flows.insert(f);
        }
        t.worst_us = t.worst_us.max(worst);
    }

    /// The listener of `ev.remote` (in a traced namespace) when it is refusing SYNs: its
    /// accept queue full now, or its namespace's TcpExtListenOverflows risen by more than
    /// the refused handshake ACKs traced and the SYN resends already put down to it (then
    /// with that rise and those ACKs). Either way the listener refused SYNs in the window;
    /// with the counter, which SYN it refused is inferred by count, not seen.
    fn refusing_listener(
        &mut self,
        ev: &Event,
        lookup: &mut dyn Lookup,
    ) -> Option<(Listener, Option<(u64, u64)>)> {
        let li = lookup.listener(ev.remote)?;
        if li.full() {
            return Some((li, None));
        }
        let mut rise = lookup.listen_overflows(li.netns)?;
        let o = self.listen_overflow.entry(li.netns).or_default();
        if rise.saturating_sub(o.acks_traced) <= o.syn_resends_attributed {
            // The refused handshake ACKs are counted as traced, the counter as last read:
            // ACKs refused since that reading would hide as many refused SYNs. Read it now.
            rise = lookup.listen_overflows_now(li.netns)?;
        }
        let unseen = rise.saturating_sub(o.acks_traced);
        if unseen <= o.syn_resends_attributed {
            return None;
        }
        o.syn_resends_attributed += 1;
        let acks = o.acks_traced;
        Some((li, Some((rise, acks))))
    }
}
