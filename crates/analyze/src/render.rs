//! `tcpdoctor analyze`: the JSON document ([`Body`]), its human text and the `--csv` flow
//! table, and its HTML page ([`html`]).

pub mod html;

use std::io::{self, Write};

use crate::exchange::CapturePoint;
use crate::{Analysis, FlowRow, ServiceRow};
use serde::Serialize;
use tcpdoctor_capture::{Compression, Format, Stats};
use tcpdoctor_model::Report;
use tcpdoctor_report::{findings, fmt, table};

/// The capture as read.
#[derive(Serialize)]
pub struct CaptureInfo {
    pub name: String,
    #[serde(flatten)]
    pub stats: Stats,
}

/// The JSON document of `analyze`.
#[derive(Serialize)]
pub struct Body {
    pub capture: CaptureInfo,
    /// The read error that ended the analysis early (names the byte offset), if any.
    pub error: Option<String>,
    #[serde(flatten)]
    pub analysis: Analysis,
}

/// The human text: the capture, totals, (with `show_flows`) the flows, the findings and the
/// verdict.
pub fn text(w: &mut dyn Write, r: &Report<Body>, show_flows: bool) -> io::Result<()> {
    let b = &r.body;
    let s = &b.capture.stats;
    let a = &b.analysis;
    let t = &a.totals;
    writeln!(
        w,
        "Capture: {} ({}{}), {} packets over {}: {} TCP segments, {} non-TCP, {} undecodable, {} cut by the snap length",
        b.capture.name,
        match s.format {
            Format::Pcap { nanos: true, .. } => "pcap, ns",
            Format::Pcap { nanos: false, .. } => "pcap",
            Format::PcapNg => "pcapng",
            Format::Snoop => "snoop",
        },
        match s.compression {
            None => "",
            Some(Compression::Gzip) => ", gzip",
            Some(Compression::Xz) => ", xz",
            Some(Compression::Zstd) => ", zstd",
        },
        s.packets,
        fmt::micros(a.duration_us),
        s.tcp_segments,
        s.non_tcp,
        s.undecodable,
        s.cut_by_snaplen
    )?;
    writeln!(
        w,
        "Connections: {} ({} with handshake, {} reused 4-tuples); {} of payload in {} data segments",
        t.connections,
        t.connections_with_handshake,
        t.reused_ports,
        fmt::bytes(t.payload_bytes),
        t.data_segments
    )?;
    writeln!(
        w,
        "Retransmissions: {} ({} after timeout, {} fast, {} TLP, {} SYN, {} other); {} out of order; {} zero-window ads; {} resets",
        t.retransmissions,
        t.retransmissions_rto,
        t.retransmissions_fast,
        t.retransmissions_tlp,
        t.retransmissions_syn,
        t.retransmissions_other,
        t.out_of_order,
        t.zero_window_ads,
        t.resets
    )?;
    if t.duplicates > 0 {
        writeln!(
            w,
            "Duplicates: {} segment(s) were exact copies of the one before, captured microseconds later, or milliseconds later with the same IPv4 ID (one packet seen twice: two capture points, a bridge and its port, a mirror port); left out of the counts above and of the findings (the microburst table counts bytes as captured, copies included)",
            t.duplicates
        )?;
    }
    if !a.microbursts.is_empty() {
        writeln!(w, "\nMicrobursts (TCP payload per bin):")?;
        let mut tb = table::new([
            "resolution",
            "max",
            "avg",
            "max rate",
            "avg rate",
            "max/avg",
            "peak/link",
        ]);
        for m in &a.microbursts {
            tb.add_row(burst_cells(m));
        }
        table::align_right(&mut tb, &[0, 1, 2, 3, 4, 5, 6]);
        writeln!(w, "{tb}")?;
    }
    services(w, &a.services)?;
    if show_flows {
        writeln!(w, "\nConnections (one row per incarnation):")?;
        let mut tb = table::new([
            "id",
            "client",
            "server",
            "inc",
            "start",
            "dur",
            "pkts c>s",
            "pkts s>c",
            "bytes c>s",
            "bytes s>c",
            "rexmit",
            "rto",
            "zwin",
            "rtt",
            "close",
        ]);
        for f in &a.flows {
            tb.add_row(vec![
                f.id.to_string(),
                f.client.clone(),
                f.server.clone(),
                f.incarnation.to_string(),
                fmt::micros(f.start_us),
                fmt::micros(f.duration_us),
                f.packets_c2s.to_string(),
                f.packets_s2c.to_string(),
                f.bytes_c2s.to_string(),
                f.bytes_s2c.to_string(),
                (f.retrans_c2s + f.retrans_s2c).to_string(),
                f.rto.to_string(),
                f.zero_window_ads.to_string(),
                f.handshake_rtt_us
                    .map(fmt::micros)
                    .unwrap_or_else(|| "-".into()),
                close_name(f).to_string(),
            ]);
        }
        table::align_right(&mut tb, &[0, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13]);
        writeln!(w, "{tb}")?;
    }
    writeln!(w)?;
    findings::write(w, &r.findings)?;
    writeln!(w)?;
    if let Some(e) = &b.error {
        writeln!(w, "Stopped early: {e}")?;
    }
    findings::verdict(w, r)
}

/// Services shown in the text; the JSON has them all.
const SERVICES_SHOWN: usize = 10;

/// Where the time went, per service: its exchanges, the server's time, the round trip.
fn services(w: &mut dyn Write, rows: &[ServiceRow]) -> io::Result<()> {
    if rows.is_empty() {
        return Ok(());
    }
    writeln!(
        w,
        "\nServices (where the time went): resp = request's last byte to response's first, less the path's share; rtt = handshake; client wait = handshake to first request"
    )?;
    let mut tb = table::new([
        "server",
        "conns",
        "exch",
        "resp p50",
        "p99",
        "max",
        "rtt p50",
        "p99",
        "client wait",
        "captured",
    ]);
    let opt = |v: Option<u64>| v.map(fmt::micros).unwrap_or_else(|| "-".into());
    for r in rows.iter().take(SERVICES_SHOWN) {
        tb.add_row(vec![
            r.server.clone(),
            r.connections.to_string(),
            r.exchanges.to_string(),
            fmt::micros(r.response_p50_us),
            fmt::micros(r.response_p99_us),
            fmt::micros(r.response_max_us),
            opt(r.rtt_p50_us),
            opt(r.rtt_p99_us),
            opt(r.client_delay_p50_us),
            match r.capture_point {
                Some(CapturePoint::NearClient) => "near client",
                Some(CapturePoint::NearServer) => "near server",
                Some(CapturePoint::Between) => "between",
                None => "-",
            }
            .to_string(),
        ]);
    }
    table::align_right(&mut tb, &[1, 2, 3, 4, 5, 6, 7, 8]);
    writeln!(w, "{tb}")?;
    if rows.len() > SERVICES_SHOWN {
        writeln!(
            w,
            "({} more services in --json)",
            rows.len() - SERVICES_SHOWN
        )?;
    }
    Ok(())
}

fn close_name(f: &FlowRow) -> &'static str {
    use crate::flow::CloseKind;
    match f.close {
        CloseKind::Open => "open",
        CloseKind::Idle => "idle",
        CloseKind::Fin { client_first: true } => "fin(client)",
        CloseKind::Fin {
            client_first: false,
        } => "fin(server)",
        CloseKind::Rst { by_client: true } => "rst(client)",
        CloseKind::Rst { by_client: false } => "rst(server)",
        CloseKind::Unanswered => "unanswered",
    }
}

/// `--csv`: one line per flow.
pub fn write_csv(w: &mut dyn Write, rows: &[FlowRow]) -> io::Result<()> {
    writeln!(
        w,
        "id,client,server,incarnation,start_us,duration_us,first_frame,packets_c2s,packets_s2c,bytes_c2s,bytes_s2c,retrans_c2s,retrans_s2c,rto,fast_retrans,tlp,syn_retrans,out_of_order,zero_window_ads,zero_window_max_us,handshake_rtt_us,close,reuse_interval_us,exchanges,first_response_us,client_delay_us"
    )?;
    for f in rows {
        writeln!(
            w,
            "{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{}",
            f.id,
            f.client,
            f.server,
            f.incarnation,
            f.start_us,
            f.duration_us,
            f.first_frame,
            f.packets_c2s,
            f.packets_s2c,
            f.bytes_c2s,
            f.bytes_s2c,
            f.retrans_c2s,
            f.retrans_s2c,
            f.rto,
            f.fast_retrans,
            f.tlp,
            f.syn_retrans,
            f.out_of_order,
            f.zero_window_ads,
            f.zero_window_max_us,
            f.handshake_rtt_us
                .map(|v| v.to_string())
                .unwrap_or_default(),
            close_name(f),
            f.reuse_interval_us
                .map(|v| v.to_string())
                .unwrap_or_default(),
            f.exchanges,
            f.first_response_us
                .map(|v| v.to_string())
                .unwrap_or_default(),
            f.client_delay_us.map(|v| v.to_string()).unwrap_or_default()
        )?;
    }
    Ok(())
}

/// One time scale's row of the microburst table, as the text and the HTML page print it.
pub(crate) fn burst_cells(m: &crate::BurstRow) -> Vec<String> {
    vec![
        fmt::micros(m.resolution_us),
        fmt::bytes(m.max_bytes),
        fmt::bytes(m.avg_bytes as u64),
        fmt::bitrate(m.max_bits_per_s),
        fmt::bitrate(m.avg_bits_per_s),
        format!("{:.1}", m.max_to_avg_ratio),
        m.peak_link_share
            .map(|v| format!("{:.0}%", 100.0 * v))
            .unwrap_or_else(|| "-".into()),
    ]
}
