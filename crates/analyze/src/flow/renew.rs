//! [`Conn::renew`]: a summarised connection's box made into a new connection in place.

use super::{CloseKind, Conn, Endpoint, Halves};

impl Conn {
    /// Makes this connection the one [`Conn::new`] makes, in place. The engine reuses the
    /// boxes of summarised connections: building a new `Conn` (~1 KB) and copying it over
    /// the old one cost about twice the stores of writing the fields. The destructuring
    /// names every field, so a field added to `Conn` cannot be left out here.
    pub fn renew(
        &mut self,
        id: u64,
        incarnation: u32,
        client: Endpoint,
        server: Endpoint,
        roles_known: bool,
        ts: u64,
    ) {
        let Conn {
            id: c_id,
            last_ts,
            last_frame,
            half_open_at,
            synack,
            syn_count,
            close,
            client_lo,
            awaiting_answer,
            rtt_ns,
            established_ts,
            first_ts,
            wscale_ok,
            fin_first,
            in_incast,
            incast_receiver_is_client,
            in_scan,
            roles_known: c_roles_known,
            syn_ts_option,
            rst_answer_acks_syn,
            last_fp,
            half,
            client: c_client,
            server: c_server,
            incarnation: c_incarnation,
            first_frame,
            syns,
            reuse,
            rare,
            marks,
            turns,
        } = self;
        *c_id = id;
        *c_incarnation = incarnation;
        *c_client = client;
        *c_server = server;
        *client_lo = false;
        *c_roles_known = roles_known;
        *first_ts = ts;
        *last_ts = ts;
        *first_frame = 0;
        *last_frame = 0;
        *half = Halves::default();
        *wscale_ok = false;
        *syns = [(0, 0); 8];
        *syn_count = 0;
        *syn_ts_option = false;
        *synack = None;
        *awaiting_answer = false;
        *established_ts = None;
        *rtt_ns = None;
        *rst_answer_acks_syn = false;
        *last_fp = 0;
        *reuse = None;
        *close = CloseKind::Open;
        *fin_first = None;
        *in_incast = false;
        *incast_receiver_is_client = false;
        *in_scan = false;
        *rare = None;
        *marks = crate::timeline::Marks::default();
        *turns = crate::exchange::Turns::default();
        *half_open_at = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::flow::{Dir, Frames, Rare};
    use crate::seq::SeqNumber;
    use crate::timeline::{Mark, MarkKind};

    /// A connection with every part written, renewed, reads as a new one.
    #[test]
    fn renewed_reads_as_new() {
        let e = |port| Endpoint {
            addr: std::net::Ipv4Addr::LOCALHOST.into(),
            port,
        };
        let mut c = Conn::new(1, 1, e(40000), e(80), false, 5);
        c.last_ts = 9;
        c.synack = Some((6, 2));
        c.syn_count = 3;
        c.close = CloseKind::Rst { by_client: true };
        c.client_lo = true;
        c.rtt_ns = Some(1);
        c.fin_first = Some(Dir::S2c);
        c.in_incast = true;
        c.last_fp = 77;
        c.half.c2s.next_seq = Some(SeqNumber(5));
        c.half.s2c.packets = 4;
        c.syns[0] = (5, 1);
        c.first_frame = 1;
        let mut stale = Frames::<4>::EMPTY;
        stale.push(3);
        c.rare = Some(Box::new(Rare {
            stale,
            ..Rare::EMPTY
        }));
        c.marks.push(Mark {
            kind: MarkKind::TimeoutGap,
            start_ns: 1,
            end_ns: Some(2),
            frame: 3,
        });
        c.turns.count = 2;
        c.half_open_at = 8;
        c.renew(2, 3, e(40001), e(443), true, 11);
        let fresh = Conn::new(2, 3, e(40001), e(443), true, 11);
        assert_eq!(format!("{c:?}"), format!("{fresh:?}"));
    }
}
