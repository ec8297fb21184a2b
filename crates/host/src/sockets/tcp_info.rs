//! `struct tcp_info` (include/uapi/linux/tcp.h) parsed from the raw attribute bytes by
//! offset, so that any kernel's length works: fields beyond what the kernel sent are `None`
//! (or absent) rather than an error. Older kernels send shorter structs, newer ones longer.

use serde::Serialize;

/// The `tcp_info` fields tcpdoctor uses. Times as the kernel gives them (`_us`, `_ms`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct TcpInfo {
    /// `tcpi_ca_state`: 0 open, 1 disorder, 2 CWR, 3 recovery, 4 loss.
    pub ca_state: u8,
    /// `tcpi_retransmits`: consecutive RTO expiries of the current head segment.
    pub retransmits: u8,
    /// `tcpi_probes`: unanswered zero-window probes or keepalives.
    pub probes: u8,
    /// `tcpi_backoff`: exponential backoff applied to the RTO (`icsk_backoff`).
    pub backoff: u8,
    pub snd_wscale: u8,
    pub rcv_wscale: u8,
    pub rto_us: u32,
    pub ato_us: u32,
    pub snd_mss_bytes: u32,
    pub rcv_mss_bytes: u32,
    /// Segments sent and not yet acknowledged.
    pub unacked_segs: u32,
    pub lost_segs: u32,
    /// Segments retransmitted and not yet acknowledged.
    pub retrans_segs: u32,
    pub last_data_sent_ms: u32,
    pub last_data_recv_ms: u32,
    pub last_ack_recv_ms: u32,
    pub rtt_us: u32,
    pub rttvar_us: u32,
    pub snd_cwnd_segs: u32,
    pub rcv_space_bytes: u32,
    /// Retransmissions over the connection's life.
    pub total_retrans: u32,
    pub bytes_acked: Option<u64>,
    pub bytes_received: Option<u64>,
    pub notsent_bytes: Option<u32>,
    pub min_rtt_us: Option<u32>,
    /// Time limited by the peer's receive window (`tcpi_rwnd_limited`, Linux 4.10+).
    pub rwnd_limited_us: Option<u64>,
    /// The peer's advertised window, scaled (`tcpi_snd_wnd`, Linux 5.4+).
    pub snd_wnd_bytes: Option<u32>,
    /// The window this socket last advertised (`tcpi_rcv_wnd`, Linux 6.2+).
    pub rcv_wnd_bytes: Option<u32>,
    /// RTO expiries over the connection's life (`tcpi_total_rto`, Linux 6.7+).
    pub total_rto: Option<u16>,
}

/// The fixed part every kernel since 2.6 sends (through `tcpi_total_retrans`).
const BASE_LEN: usize = 104;

impl TcpInfo {
    /// Parses raw `INET_DIAG_INFO` bytes; `None` when shorter than the 2.6-era struct.
    pub fn parse(b: &[u8]) -> Option<TcpInfo> {
        if b.len() < BASE_LEN {
            return None;
        }
        let u32_at = |o: usize| u32::from_ne_bytes([b[o], b[o + 1], b[o + 2], b[o + 3]]);
        let opt_u32 = |o: usize| (b.len() >= o + 4).then(|| u32_at(o));
        let opt_u64 = |o: usize| {
            (b.len() >= o + 8).then(|| {
                let mut a = [0u8; 8];
                a.copy_from_slice(&b[o..o + 8]);
                u64::from_ne_bytes(a)
            })
        };
        let opt_u16 = |o: usize| (b.len() >= o + 2).then(|| u16::from_ne_bytes([b[o], b[o + 1]]));
        Some(TcpInfo {
            ca_state: b[1],
            retransmits: b[2],
            probes: b[3],
            backoff: b[4],
            snd_wscale: b[6] & 0x0f,
            rcv_wscale: b[6] >> 4,
            rto_us: u32_at(8),
            ato_us: u32_at(12),
            snd_mss_bytes: u32_at(16),
            rcv_mss_bytes: u32_at(20),
            unacked_segs: u32_at(24),
            lost_segs: u32_at(32),
            retrans_segs: u32_at(36),
            last_data_sent_ms: u32_at(44),
            last_data_recv_ms: u32_at(52),
            last_ack_recv_ms: u32_at(56),
            rtt_us: u32_at(68),
            rttvar_us: u32_at(72),
            snd_cwnd_segs: u32_at(80),
            rcv_space_bytes: u32_at(96),
            total_retrans: u32_at(100),
            bytes_acked: opt_u64(120),
            bytes_received: opt_u64(128),
            notsent_bytes: opt_u32(144),
            min_rtt_us: opt_u32(148),
            rwnd_limited_us: opt_u64(176),
            snd_wnd_bytes: opt_u32(228),
            rcv_wnd_bytes: opt_u32(232),
            total_rto: opt_u16(240),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn put32(b: &mut [u8], o: usize, v: u32) {
        b[o..o + 4].copy_from_slice(&v.to_ne_bytes());
    }

    #[test]
    fn parses_by_length() {
        assert_eq!(TcpInfo::parse(&[0u8; 103]), None, "truncated: rejected");
        let mut b = vec![0u8; 104];
        b[2] = 3;
        b[4] = 2;
        b[6] = 0x97;
        put32(&mut b, 8, 800_000);
        put32(&mut b, 68, 1234);
        put32(&mut b, 100, 7);
        let old = TcpInfo::parse(&b).unwrap();
        assert_eq!((old.retransmits, old.backoff), (3, 2));
        assert_eq!((old.snd_wscale, old.rcv_wscale), (7, 9));
        assert_eq!(old.rto_us, 800_000);
        assert_eq!(old.rtt_us, 1234);
        assert_eq!(old.total_retrans, 7);
        assert_eq!(old.snd_wnd_bytes, None);
        assert_eq!(old.rcv_wnd_bytes, None);

        let mut b = vec![0u8; 248];
        put32(&mut b, 228, 65535);
        put32(&mut b, 232, 0);
        b[240..242].copy_from_slice(&5u16.to_ne_bytes());
        let new = TcpInfo::parse(&b).unwrap();
        assert_eq!(new.snd_wnd_bytes, Some(65535));
        assert_eq!(new.rcv_wnd_bytes, Some(0));
        assert_eq!(new.total_rto, Some(5));
        // A length between fields: the partial field is absent, not misread.
        let new = TcpInfo::parse(&b[..230]).unwrap();
        assert_eq!(new.snd_wnd_bytes, None);
    }
}
