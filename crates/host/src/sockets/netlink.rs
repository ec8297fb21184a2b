//! The sock_diag dump: one `SOCK_DIAG_BY_FAMILY` request per address family, answered by a
//! multipart stream of `inet_diag_msg` + attributes, ended by `NLMSG_DONE`.

use netlink_packet_core::{
    NetlinkHeader, NetlinkMessage, NetlinkPayload, NLM_F_DUMP, NLM_F_REQUEST,
};
use netlink_packet_sock_diag::{
    constants::{AF_INET, AF_INET6, IPPROTO_TCP},
    inet::{nlas::Nla, ExtensionFlags, InetRequest, InetResponse, SocketId, StateFlags},
    SockDiagMessage,
};
use netlink_sys::{protocols::NETLINK_SOCK_DIAG, Socket as NlSocket, SocketAddr as NlAddr};

use super::{tcp_info::TcpInfo, Error, Filter, Socket, TcpState, Timer};

#[derive(Clone, Copy, Debug)]
pub enum Family {
    V4,
    V6,
}

impl Family {
    fn af(self) -> u8 {
        match self {
            Family::V4 => AF_INET,
            Family::V6 => AF_INET6,
        }
    }

    fn name(self) -> &'static str {
        match self {
            Family::V4 => "AF_INET",
            Family::V6 => "AF_INET6",
        }
    }
}

/// What the dumps collected.
#[derive(Default)]
pub struct Dump {
    pub sockets: Vec<Socket>,
    pub undecoded: u64,
}

/// Receive buffer: the kernel fills at most ~32 KiB per dump message batch
/// (`netlink_dump`, net/netlink/af_netlink.c); a larger buffer never truncates one.
const RECV_BUF: usize = 256 * 1024;

/// Dumps every TCP socket of `family` whose state is in `states` (bitmask of `1 << state`).
pub fn dump(family: Family, states: u32, out: &mut Dump, filter: &Filter) -> Result<(), Error> {
    let mut sock = NlSocket::new(NETLINK_SOCK_DIAG).map_err(Error::Socket)?;
    sock.bind_auto().map_err(Error::Socket)?;
    sock.connect(&NlAddr::new(0, 0)).map_err(Error::Socket)?;

    let mut header = NetlinkHeader::default();
    header.flags = NLM_F_REQUEST | NLM_F_DUMP;
    let mut req = NetlinkMessage::new(
        header,
        SockDiagMessage::InetRequest(InetRequest {
            family: family.af(),
            protocol: IPPROTO_TCP,
            extensions: ExtensionFlags::INFO | ExtensionFlags::SKMEMINFO,
            states: StateFlags::from_bits_retain(states),
            socket_id: match family {
                Family::V4 => SocketId::new_v4(),
                Family::V6 => SocketId::new_v6(),
            },
        })
        .into(),
    );
    req.finalize();
    let mut buf = vec![0u8; req.buffer_len()];
    req.serialize(&mut buf);
    sock.send(&buf, 0).map_err(Error::Socket)?;

    let mut rx = vec![0u8; RECV_BUF];
    loop {
        let n = sock.recv(&mut &mut rx[..], 0).map_err(Error::Socket)?;
        let mut off = 0;
        while off + 16 <= n {
            let len = u32::from_ne_bytes([rx[off], rx[off + 1], rx[off + 2], rx[off + 3]]) as usize;
            if len < 16 || off + len > n {
                // A message that does not fit what was received: count it, stop this batch.
                out.undecoded += 1;
                break;
            }
            let bytes = &rx[off..off + len];
            off += (len + 3) & !3;
            match NetlinkMessage::<SockDiagMessage>::deserialize(bytes) {
                Ok(msg) => match msg.payload {
                    NetlinkPayload::Done(_) => return Ok(()),
                    NetlinkPayload::Error(e) => {
                        if let Some(code) = e.code {
                            return Err(Error::Kernel {
                                family: family.name(),
                                code: code.get(),
                            });
                        }
                    }
                    NetlinkPayload::InnerMessage(SockDiagMessage::InetResponse(r)) => {
                        match convert(&r) {
                            Some(s) if filter.matches(&s) => out.sockets.push(s),
                            Some(_) => {}
                            None => out.undecoded += 1,
                        }
                    }
                    _ => {}
                },
                Err(_) => out.undecoded += 1,
            }
        }
        if n == 0 {
            return Ok(());
        }
    }
}

fn convert(r: &InetResponse) -> Option<Socket> {
    let h = &r.header;
    let id = &h.socket_id;
    let state = TcpState::from_kernel(h.state)?;
    let (timer, timer_expires_ms, timer_retransmits) = match &h.timer {
        None => (Timer::Off, 0, 0),
        Some(t) => {
            use netlink_packet_sock_diag::inet::Timer as T;
            match t {
                T::Retransmit(d, n) => (Timer::Retransmit, d.as_millis() as u32, *n),
                T::KeepAlive(d) => (Timer::KeepAlive, d.as_millis() as u32, 0),
                T::TimeWait => (Timer::TimeWait, 0, 0),
                T::Probe(d) => (Timer::ZeroWindowProbe, d.as_millis() as u32, 0),
            }
        }
    };
    let mut s = Socket {
        state,
        local: (id.source_address, id.source_port).into(),
        remote: (id.destination_address, id.destination_port).into(),
        recv_q: h.recv_queue,
        send_q: h.send_queue,
        timer,
        timer_expires_ms,
        timer_retransmits,
        uid: h.uid,
        inode: h.inode,
        rcvbuf_bytes: None,
        sndbuf_bytes: None,
        info: None,
    };
    for nla in &r.nlas {
        match nla {
            Nla::TcpInfo(bytes) => s.info = TcpInfo::parse(bytes),
            Nla::MemInfo(m) => {
                s.rcvbuf_bytes = Some(m.receive_queue_max);
                s.sndbuf_bytes = Some(m.send_queue_max);
            }
            _ => {}
        }
    }
    Some(s)
}
