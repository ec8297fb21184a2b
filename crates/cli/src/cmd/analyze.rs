//! `tcpdoctor analyze`: read a capture, run the flow engine and detectors
//! (`tcpdoctor_analyze`), print ranked findings with packet evidence (`tcpdoctor_analyze::render`).

use std::io::{self, Write};
use std::path::PathBuf;
use std::time::Duration;

use tcpdoctor_analyze::{pipeline, Config};
use tcpdoctor_capture::{Merge, Reader, Stats};
use tcpdoctor_model::{Measured, PortRange, Report};

use crate::output;
use tcpdoctor_analyze::render::{self, Body, CaptureInfo};

/// Long help of `tcpdoctor analyze --help`.
const ABOUT: &str = "\
Read a capture and name the TCP pathologies in it, with the frame numbers that prove them.\n\
\n\
Reads pcap (us/ns, either byte order), pcapng and snoop files, plain or compressed with\n\
gzip, xz or zstd (recognised by their first bytes, not by the file name), or `-` for stdin\n\
(`tcpdump -w - | tcpdoctor analyze -`). Several files are read as one capture, merged by\n\
packet time as `mergecap` merges them (ties go to the file named last); frame numbers are\n\
then those of the merged capture (`mergecap -w merged.pcap FILE...` opens them in\n\
Wireshark), and a capture split in parts keeps the frame numbers of the whole. A file given\n\
twice (or a byte-for-byte copy of another) is refused: its packets would count twice. A read error\n\
in any file ends the run at that point. Needs no root and no kernel\n\
feature: it only reads the file. Overhead: one pass, streaming, two threads; memory follows\n\
the connections open at once, not the file: a closed connection is summarised 2 s after its\n\
close, one that only sent SYNs when its SYN ladder says the client gave up (whatever\n\
--idle-timeout says), an idle one after --idle-timeout of capture time; per-destination and\n\
per-receiver tables are bounded (the least busy are forgotten, and counted). Headers are\n\
enough (`-s 128`).\n\
\n\
Detects: syn_retransmit (connects answered after SYN resends: delay, attempt, which SYN\n\
ladder fits), unanswered_syn (SYNs never answered: a SYN flood from many sources, also one\n\
still going on when the capture ends; a server that does not answer; a few SYNs sent once\n\
and never resent, unexplained), port_scan (one source probing many ports of one host with\n\
bare handshakes; its refusals and silences are the scan's, info), time_wait_collision (SYN on a recently closed 4-tuple answered\n\
by an old ACK or by a reset the client ignores; timestamps on/off; the tcp_rfc1337 stall),\n\
stale_ack_race (after a reset close: SYN -> old ACK -> RST -> SYN), port_exhaustion (per\n\
destination: connections the client closed first, each holding its port in TIME_WAIT, at\n\
their rate over the real span vs ports / TIME_WAIT; reset closes hold no port; the range is\n\
--port-range, else Linux's 32768-60999, else a block of ports the client filled\n\
completely), connect_failure (SYN refused by a reset that acknowledges it),\n\
retransmit_timeout (idle gap >= ~RTO floor ended by a retransmission), retransmission\n\
(fast, TLP, other), spurious_retransmission (data the receiver already had: acknowledged\n\
before the copy, or reported by a D-SACK), incast (losses of several flows into one\n\
receiver within --incast-window, repaired by timeouts long or short or by fast recovery;\n\
their retransmissions are its evidence), microburst (payload bytes per 10 us .. 1 s bin vs\n\
--link-speed), slow_reader (zero windows, probes, stall durations), and where the time of\n\
a connection's first answer went: server_response (request's last byte to response's first,\n\
less the path's share), network_latency (the handshake's and the request's round trips),\n\
client_delay (handshake to first request); one part alone past 200 ms and 3x the service's\n\
median. Severity follows the measured impact (impact{}, severity_rule).\n\
\n\
Output fields (JSON; units in names): capture {name, format, compression (gzip, xz or zstd;\n\
absent when plain), packets, tcp_segments, non_tcp, undecodable, cut_by_snaplen, ..., with several files\n\
inputs[] {name, format, compression, packets, tcp_segments, bytes_read}}; error (a read error, with byte offset);\n\
totals {segments, connections, connection_attempts, retransmissions,\n\
retransmissions_rto/_fast/_tlp/_syn/_other, retransmissions_spurious (a subset),\n\
out_of_order, reused_ports, zero_window_ads, duplicates (a segment captured twice within\n\
500 us: left out of every count), half_open_summarised_early,\n\
tombstones_forgotten_early, ...}; duration_us; details {syn_retransmits, unanswered_syns\n\
{connections, sent_once, resent, waiting_at_end, waiting_overdue, waiting_first_rung,\n\
overdue_after_us, shape\n\
(flood, not_answering, sent_once, mixed), sent_once_per_s, distinct_sources,\n\
distinct_destinations, destinations[], ...},
time_wait_collisions, stale_ack_races, refused_connects, destinations[] (rate_vs_budget,\n\
ports_in_use_share, port_range, port_range_source), retransmit_timeouts, incast[],\n\
slow_readers, retransmissions, spurious_retransmissions, port_scans {scans[] {source, target,\n\
ports, probes, open, closed, filtered, open_ports[], start_us, duration_us}}}; microbursts[] {resolution_us,\n\
max_bytes, avg_bytes, max_bits_per_s, avg_bits_per_s, max_to_avg_ratio, peak_link_share};\n\
services[] (per server ip:port: connections, exchanges, response_p50_us/_p99_us/_max_us,\n\
rtt_p50_us/_p99_us, client_delay_p50_us, client_between_p50_us, transfer_p50_us,\n\
capture_point near_client,\n\
near_server or between) and details.time {exchanges, exchanges_untracked, explained_by_tcp,\n\
ambiguous, client_waits_preconnected, syn_ack_beyond_path};\n\
with --flows, flows[] (one per connection incarnation).\n\
\n\
--html FILE also writes one self-contained page (inline SVG charts, no script, nothing\n\
fetched): the findings, a timeline of the 8 connections that waited longest (SYNs resent\n\
along the ladder, idle gaps ended by a timeout, zero windows; each from its own first\n\
packet) and the peak vs average rate per time scale (against --link-speed when given).\n\
\n\
Exit: 0 nothing wrong, 1 findings, 2 error (a read error still prints what was found\n\
before it, with interrupted=true), 3 nothing measured (no TCP segment). Ctrl-C prints the\n\
findings so far.\n\
\n\
Example: tcpdoctor analyze trace.pcap.gz --link-speed 1gbit ;\n\
         tcpdoctor analyze part1.pcap part2.pcap.zst --json ;\n\
         tcpdump -i eth0 -s 128 -w - | tcpdoctor analyze - --json";

/// Read a capture and name the TCP pathologies in it, with the frame numbers that prove them.
#[derive(clap::Args, Debug)]
#[command(after_long_help = ABOUT)]
pub struct Args {
    /// Capture files (pcap, pcapng, snoop; plain, gzip, xz or zstd), or `-` for stdin;
    /// several are merged by packet time.
    #[arg(value_name = "FILE", required = true, num_args = 1..)]
    files: Vec<PathBuf>,
    /// Print the JSON report.
    #[arg(long)]
    json: bool,
    /// Also list every connection incarnation (one row each; in JSON as flows[]).
    #[arg(long)]
    flows: bool,
    /// Print the connection list as CSV (header + one row per incarnation) instead of the report.
    #[arg(long, conflicts_with = "json")]
    csv: bool,
    /// Link speed for the microburst table, e.g. 1Gbit, 100Mbit, 10Gbps (bits per second).
    #[arg(long, value_name = "RATE", value_parser = link_speed)]
    link_speed: Option<u64>,
    /// The clients' ephemeral port range (net.ipv4.ip_local_port_range). A capture does not
    /// carry it: without this flag Linux's default 32768-60999 is assumed, or a smaller block
    /// of source ports that the clients filled completely.
    #[arg(long, value_name = "LOW-HIGH")]
    port_range: Option<PortRange>,
    /// RTO floor of the senders (TCP_RTO_MIN 200ms; lower if routes set rto_min).
    #[arg(long, value_name = "DURATION", default_value = "200ms", value_parser = crate::args::positive_duration)]
    rto_min: Duration,
    /// TIME_WAIT length of the peers (Linux TCP_TIMEWAIT_LEN 60s; illumos tcp_time_wait_interval).
    #[arg(long, value_name = "DURATION", default_value = "60s", value_parser = crate::args::positive_duration)]
    time_wait: Duration,
    /// Timeouts of different flows into one receiver within this window form an incast episode.
    #[arg(long, value_name = "DURATION", default_value = "20ms", value_parser = crate::args::positive_duration)]
    incast_window: Duration,
    /// Open connections silent this long (capture time) are summarised and evicted (not
    /// connections still sending SYNs: their SYN ladder ends them).
    #[arg(long, value_name = "DURATION", default_value = "300s", value_parser = crate::args::positive_duration)]
    idle_timeout: Duration,
    /// Also write a self-contained HTML report to FILE (created before reading): findings, a
    /// timeline of the connections that waited longest, the microburst chart.
    #[arg(long, value_name = "FILE")]
    html: Option<PathBuf>,
}

/// `--link-speed` in whole bits per second.
fn link_speed(s: &str) -> Result<u64, String> {
    crate::args::bit_rate(s).map(|r| r.round() as u64)
}

pub fn run(args: Args) -> anyhow::Result<i32> {
    let html = crate::html::open(args.html.as_ref())?;
    let cfg = Config {
        rto_min: args.rto_min,
        time_wait: args.time_wait,
        idle_timeout: args.idle_timeout,
        port_range: args.port_range,
        link_speed_bits_per_s: args.link_speed,
        incast_window: args.incast_window,
        keep_flows: args.flows || args.csv,
        timelines: if html.is_some() {
            render::html::WORST
        } else {
            0
        },
        ..Config::default()
    };
    let (name, run) = read(&args.files, cfg)?;
    let (analysis, stats, interrupted) = (run.analysis, run.stats, run.interrupted);
    let error = run.error.map(|e| e.to_string());
    let findings_v = analysis.findings.clone();
    let body = Body {
        capture: CaptureInfo { name, stats },
        error: error.clone(),
        analysis,
    };
    let measured = match body.capture.stats.tcp_segments {
        0 => Measured::Nothing(format!(
            "no TCP segment among {} packet(s)",
            body.capture.stats.packets
        )),
        n => Measured::Something(format!("{n} TCP segment(s)")),
    };
    let report = Report::new("analyze", findings_v, body, measured)
        .interrupted(interrupted || error.is_some());
    if let Some(out) = html {
        let b = &report.body;
        let what = format!(
            "{}: {} packets, {} TCP segments",
            b.capture.name, b.capture.stats.packets, b.capture.stats.tcp_segments
        );
        out.write(&render::html::page(
            &report,
            &b.analysis,
            &what,
            args.link_speed,
        ))?;
    }
    let code = if args.csv {
        output::with_stdout(|w| render::write_csv(w, &report.body.analysis.flows))?;
        report.verdict.exit_code()
    } else {
        let show_flows = args.flows;
        output::emit(&report, args.json, |w, r| render::text(w, r, show_flows))?
    };
    if let Some(e) = error {
        let _ = writeln!(io::stderr(), "tcpdoctor: error: {e}");
        return Ok(2);
    }
    Ok(code)
}

/// Reads the capture files (several merged by time) through the analysis pipeline, with a
/// progress bar over their total size.
fn read(files: &[PathBuf], cfg: Config) -> anyhow::Result<(String, pipeline::Outcome)> {
    if files.iter().filter(|f| f.as_os_str() == "-").count() > 1 {
        anyhow::bail!("stdin (`-`) can be read only once");
    }
    refuse_repeated(files)?;
    let size = files
        .iter()
        .map(|f| {
            std::fs::metadata(f)
                .ok()
                .filter(|m| m.is_file())
                .map(|m| m.len())
        })
        .sum::<Option<u64>>();
    let open = |e: tcpdoctor_capture::Error| anyhow::anyhow!("{e}");
    let bar = output::progress(size, "analyze");
    let progress = |st: &Stats| bar.set_position(st.bytes_read);
    let out = if let [file] = files {
        let reader = Reader::open(file).map_err(open)?;
        let name = reader.name().to_string();
        (
            name,
            pipeline::run(reader, cfg, output::stop_flag(), progress),
        )
    } else {
        let merge = Merge::open(files).map_err(open)?;
        let name = merge.name();
        (
            name,
            pipeline::run(merge, cfg, output::stop_flag(), progress),
        )
    };
    bar.finish_and_clear();
    Ok(out)
}

/// Refuses an input given twice: the same file under two names, or two files with the same
/// bytes (a copy). Merged, every packet would be there twice, and the duplicates would read
/// as SYN retransmissions, tail loss probes and synchronized losses that never happened.
/// Refused rather than deduplicated: which copy to drop is the user's choice, and overlapping
/// captures of one link (the same packets, other files) are told apart only by their bytes.
fn refuse_repeated(files: &[PathBuf]) -> anyhow::Result<()> {
    use std::os::unix::fs::MetadataExt;
    let meta: Vec<Option<std::fs::Metadata>> = files
        .iter()
        .map(|f| {
            (f.as_os_str() != "-")
                .then(|| std::fs::metadata(f).ok())
                .flatten()
                .filter(|m| m.is_file())
        })
        .collect();
    for (i, a) in meta.iter().enumerate() {
        let Some(a) = a else { continue };
        for (j, b) in meta.iter().enumerate().skip(i + 1) {
            let Some(b) = b else { continue };
            let (fa, fb) = (files[i].display(), files[j].display());
            if (a.dev(), a.ino()) == (b.dev(), b.ino()) {
                anyhow::bail!(
                    "{fa} is given twice (also as {fb}): its packets would be counted twice; give each capture once"
                );
            }
            if a.len() == b.len() && same_bytes(&files[i], &files[j])? {
                anyhow::bail!(
                    "{fa} and {fb} hold the same bytes (one is a copy of the other): their packets would be counted twice; give each capture once"
                );
            }
        }
    }
    Ok(())
}

/// Whether two files of the same length hold the same bytes (read until they differ).
fn same_bytes(a: &std::path::Path, b: &std::path::Path) -> anyhow::Result<bool> {
    use std::io::Read;
    let open = |p: &std::path::Path| {
        std::fs::File::open(p).map_err(|e| anyhow::anyhow!("{}: {e}", p.display()))
    };
    let (mut fa, mut fb) = (open(a)?, open(b)?);
    let (mut ba, mut bb) = (vec![0u8; 1 << 16], vec![0u8; 1 << 16]);
    loop {
        let n = read_full(&mut fa, &mut ba).map_err(|e| anyhow::anyhow!("{}: {e}", a.display()))?;
        let m = read_full(&mut fb, &mut bb).map_err(|e| anyhow::anyhow!("{}: {e}", b.display()))?;
        if n != m || ba[..n] != bb[..m] {
            return Ok(false);
        }
        if n == 0 {
            return Ok(true);
        }
    }

    /// Fills `buf` unless the file ends first; the bytes read.
    fn read_full(f: &mut std::fs::File, buf: &mut [u8]) -> io::Result<usize> {
        let mut n = 0;
        while n < buf.len() {
            match f.read(&mut buf[n..])? {
                0 => break,
                k => n += k,
            }
        }
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use super::link_speed;

    #[test]
    fn link_speeds_parse_with_units() {
        assert_eq!(link_speed("1gbit"), Ok(1_000_000_000));
        assert_eq!(link_speed("100Mbit"), Ok(100_000_000));
        assert_eq!(link_speed("2.5G"), Ok(2_500_000_000));
        assert!(link_speed("9600").is_err(), "a bare number has no unit");
        assert!(link_speed("fast").is_err());
        assert!(link_speed("-1g").is_err());
    }
}
