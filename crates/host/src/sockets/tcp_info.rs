//! `struct tcp_info` (include/uapi/linux/tcp.h) parsed from the raw attribute bytes by
//! offset, so that any kernel's length works: fields beyond what the kernel sent are `None`
//! (or absent) rather than an error. Older kernels send shorter structs, newer ones longer.
//!
//! The offsets are those of the uapi struct, checked against this kernel's BTF (Linux 6.18,
//! `bpftool btf dump file /sys/kernel/btf/vmlinux format raw`: `tcp_info` is 280 bytes there;
//! `tcpi_delivery_rate` at bit 1280, `tcpi_busy_time` 1344, `tcpi_rwnd_limited` 1408,
//! `tcpi_sndbuf_limited` 1472, `tcpi_bytes_sent` 1600, `tcpi_bytes_retrans` 1664,
//! `tcpi_total_rto_time` 1952). The kernel fills what it has and the attribute's length says
//! how much that is (`tcp_diag_get_info` copies `sizeof(struct tcp_info)` of its own build).

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
    /// `tcpi_delivery_rate_app_limited` (Linux 4.9+): the latest delivery-rate sample was
    /// taken while the sender had nothing more to send though its congestion window allowed
    /// more (`tcp_rate_check_app_limited`, net/ipv4/tcp_rate.c). `None` on older kernels.
    pub delivery_rate_app_limited: Option<bool>,
    pub rcv_wscale: u8,
    pub rto_us: u32,
    pub ato_us: u32,
    pub snd_mss_bytes: u32,
    pub rcv_mss_bytes: u32,
    /// Segments sent and not yet acknowledged.
    pub unacked_segs: u32,
    /// Segments the peer selectively acknowledged (`tcpi_sacked`).
    pub sacked_segs: u32,
    pub lost_segs: u32,
    /// Segments retransmitted and not yet acknowledged.
    pub retrans_segs: u32,
    pub last_data_sent_ms: u32,
    pub last_data_recv_ms: u32,
    pub last_ack_recv_ms: u32,
    pub rtt_us: u32,
    pub rttvar_us: u32,
    /// `tcpi_snd_ssthresh`; the kernel's "infinite" (`TCP_INFINITE_SSTHRESH`, 0x7fffffff)
    /// before the first loss.
    pub snd_ssthresh_segs: u32,
    pub snd_cwnd_segs: u32,
    pub rcv_space_bytes: u32,
    /// Retransmissions over the connection's life.
    pub total_retrans: u32,
    pub bytes_acked: Option<u64>,
    pub bytes_received: Option<u64>,
    pub notsent_bytes: Option<u32>,
    pub min_rtt_us: Option<u32>,
    /// Data segments sent, retransmissions included (`tcpi_data_segs_out`, Linux 4.6+).
    pub data_segs_out: Option<u32>,
    /// The latest delivery-rate sample (`tcpi_delivery_rate`, bytes per second, Linux 4.9+).
    pub delivery_rate_bytes_per_s: Option<u64>,
    /// Time with data queued or in flight (`tcpi_busy_time`, Linux 4.10+): the sum of the
    /// kernel's three sending chronographs (`tcp_get_info_chrono_stats`, net/ipv4/tcp.c),
    /// counted in jiffies (4 ms at HZ=250), so it includes the two below.
    pub busy_time_us: Option<u64>,
    /// Time limited by the peer's receive window (`tcpi_rwnd_limited`, Linux 4.10+): the
    /// sender had data its window did not allow out (`tcp_write_xmit`, net/ipv4/tcp_output.c).
    pub rwnd_limited_us: Option<u64>,
    /// Time limited by the send buffer (`tcpi_sndbuf_limited`, Linux 4.10+): the application
    /// was blocked on a full send buffer, everything in it sent and the congestion window not
    /// full (`tcp_cwnd_validate`, net/ipv4/tcp_output.c), until ACKs freed a third of it.
    pub sndbuf_limited_us: Option<u64>,
    /// Bytes sent, retransmissions included (`tcpi_bytes_sent`, Linux 4.19+).
    pub bytes_sent: Option<u64>,
    /// Bytes retransmitted (`tcpi_bytes_retrans`, Linux 4.19+).
    pub bytes_retrans: Option<u64>,
    /// The peer's advertised window, scaled (`tcpi_snd_wnd`, Linux 5.4+).
    pub snd_wnd_bytes: Option<u32>,
    /// The window this socket last advertised (`tcpi_rcv_wnd`, Linux 6.2+).
    pub rcv_wnd_bytes: Option<u32>,
    /// RTO expiries over the connection's life (`tcpi_total_rto`, Linux 6.7+).
    pub total_rto: Option<u16>,
    /// Time spent in RTO recovery over the connection's life (`tcpi_total_rto_time`, ms,
    /// Linux 6.7+).
    pub total_rto_time_ms: Option<u32>,
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
        // Byte 7 holds `tcpi_delivery_rate_app_limited:1` (then `tcpi_fastopen_client_fail:2`),
        // allocated from the least significant bit on little-endian targets and from the most
        // significant on big-endian ones (the C ABI's bit-field order). Before Linux 4.9 the
        // byte was padding: the flag is read only from a struct long enough to hold
        // `tcpi_delivery_rate`, added with it.
        let app_limited = if cfg!(target_endian = "little") {
            b[7] & 0x01 != 0
        } else {
            b[7] & 0x80 != 0
        };
        Some(TcpInfo {
            ca_state: b[1],
            retransmits: b[2],
            probes: b[3],
            backoff: b[4],
            snd_wscale: b[6] & 0x0f,
            rcv_wscale: b[6] >> 4,
            delivery_rate_app_limited: (b.len() >= 168).then_some(app_limited),
            rto_us: u32_at(8),
            ato_us: u32_at(12),
            snd_mss_bytes: u32_at(16),
            rcv_mss_bytes: u32_at(20),
            unacked_segs: u32_at(24),
            sacked_segs: u32_at(28),
            lost_segs: u32_at(32),
            retrans_segs: u32_at(36),
            last_data_sent_ms: u32_at(44),
            last_data_recv_ms: u32_at(52),
            last_ack_recv_ms: u32_at(56),
            rtt_us: u32_at(68),
            rttvar_us: u32_at(72),
            snd_ssthresh_segs: u32_at(76),
            snd_cwnd_segs: u32_at(80),
            rcv_space_bytes: u32_at(96),
            total_retrans: u32_at(100),
            bytes_acked: opt_u64(120),
            bytes_received: opt_u64(128),
            notsent_bytes: opt_u32(144),
            min_rtt_us: opt_u32(148),
            data_segs_out: opt_u32(156),
            delivery_rate_bytes_per_s: opt_u64(160),
            busy_time_us: opt_u64(168),
            rwnd_limited_us: opt_u64(176),
            sndbuf_limited_us: opt_u64(184),
            bytes_sent: opt_u64(200),
            bytes_retrans: opt_u64(208),
            snd_wnd_bytes: opt_u32(228),
            rcv_wnd_bytes: opt_u32(232),
            total_rto: opt_u16(240),
            total_rto_time_ms: opt_u32(244),
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

    fn put64(b: &mut [u8], o: usize, v: u64) {
        b[o..o + 8].copy_from_slice(&v.to_ne_bytes());
    }

    /// A 6.18 struct (280 bytes, as this kernel's BTF lays it out) with the sending
    /// chronographs and the delivery figures set, cut to the lengths older kernels send.
    fn linux_6_18() -> Vec<u8> {
        let mut b = vec![0u8; 280];
        b[7] = if cfg!(target_endian = "little") {
            0x01
        } else {
            0x80
        };
        put32(&mut b, 28, 3); // tcpi_sacked
        put32(&mut b, 76, 22); // tcpi_snd_ssthresh
        put32(&mut b, 80, 12); // tcpi_snd_cwnd
        put32(&mut b, 144, 2_547_712); // tcpi_notsent_bytes
        put32(&mut b, 148, 30); // tcpi_min_rtt
        put32(&mut b, 156, 113); // tcpi_data_segs_out
        put64(&mut b, 160, 1_608_956); // tcpi_delivery_rate
        put64(&mut b, 168, 2_336_000); // tcpi_busy_time
        put64(&mut b, 176, 2_136_000); // tcpi_rwnd_limited
        put64(&mut b, 184, 44_000); // tcpi_sndbuf_limited
        put64(&mut b, 200, 925_696); // tcpi_bytes_sent
        put64(&mut b, 208, 11_584); // tcpi_bytes_retrans
        b[240..242].copy_from_slice(&2u16.to_ne_bytes()); // tcpi_total_rto
        put32(&mut b, 244, 612); // tcpi_total_rto_time
        b
    }

    #[test]
    fn chronographs_and_delivery_by_kernel_length() {
        let b = linux_6_18();
        let i = TcpInfo::parse(&b).unwrap();
        assert_eq!(i.delivery_rate_app_limited, Some(true));
        assert_eq!(
            (i.sacked_segs, i.snd_ssthresh_segs, i.snd_cwnd_segs),
            (3, 22, 12)
        );
        assert_eq!(i.notsent_bytes, Some(2_547_712));
        assert_eq!(i.min_rtt_us, Some(30));
        assert_eq!(i.data_segs_out, Some(113));
        assert_eq!(i.delivery_rate_bytes_per_s, Some(1_608_956));
        assert_eq!(i.busy_time_us, Some(2_336_000));
        assert_eq!(i.rwnd_limited_us, Some(2_136_000));
        assert_eq!(i.sndbuf_limited_us, Some(44_000));
        assert_eq!(i.bytes_sent, Some(925_696));
        assert_eq!(i.bytes_retrans, Some(11_584));
        assert_eq!(i.total_rto, Some(2));
        assert_eq!(i.total_rto_time_ms, Some(612));

        // 4.19-4.x: through tcpi_reord_seen (224 bytes): no windows, no RTO totals.
        let i = TcpInfo::parse(&b[..224]).unwrap();
        assert_eq!(i.bytes_retrans, Some(11_584));
        assert_eq!((i.snd_wnd_bytes, i.total_rto_time_ms), (None, None));
        // 4.10-4.17: through tcpi_sndbuf_limited (192 bytes): the chronographs, no byte
        // totals of what was sent.
        let i = TcpInfo::parse(&b[..192]).unwrap();
        assert_eq!(i.sndbuf_limited_us, Some(44_000));
        assert_eq!((i.bytes_sent, i.bytes_retrans), (None, None));
        // 4.9: through tcpi_delivery_rate (168 bytes): the app-limited flag and the rate, no
        // chronographs.
        let i = TcpInfo::parse(&b[..168]).unwrap();
        assert_eq!(i.delivery_rate_app_limited, Some(true));
        assert_eq!(i.delivery_rate_bytes_per_s, Some(1_608_956));
        assert_eq!(
            (i.busy_time_us, i.rwnd_limited_us, i.sndbuf_limited_us),
            (None, None, None)
        );
        // Before 4.9 the flag's byte was padding: not read, whatever it holds.
        let i = TcpInfo::parse(&b[..160]).unwrap();
        assert_eq!(i.delivery_rate_app_limited, None);
        assert_eq!(i.data_segs_out, Some(113));
        // A length that cuts tcpi_busy_time in half: absent, not misread; the fields
        // before it stay.
        let i = TcpInfo::parse(&b[..172]).unwrap();
        assert_eq!(i.busy_time_us, None);
        assert_eq!(i.delivery_rate_bytes_per_s, Some(1_608_956));
        // Every length from the 2.6 base up parses without a panic, each field present
        // exactly when the kernel sent all of it.
        for len in BASE_LEN..=b.len() {
            let i = TcpInfo::parse(&b[..len]).unwrap();
            assert_eq!(i.busy_time_us.is_some(), len >= 176, "{len}");
            assert_eq!(i.sndbuf_limited_us.is_some(), len >= 192, "{len}");
            assert_eq!(i.bytes_retrans.is_some(), len >= 216, "{len}");
        }
    }
}
