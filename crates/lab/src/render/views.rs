//! What each scenario's run report shows of its own ([`super::View`]): its headline, the runs
//! side by side, its lines and charts. Each scenario's view is written once over its runs
//! ([`Runs`]): a plain run shows the baseline, `--fix` the baseline and each remedied run
//! (beside the remedies table); a report whose plain run has more than its baseline
//! (port-exhaustion, stale-ack-race, incast) has a view of each (`stale_ack`, `stale_ack_fix`).

use tcpdoctor_model::remedy::Check;
use tcpdoctor_report::fmt;

use super::{pathology_names, Cells, Chart, View};
use crate::scenario::driver::{Record, Remedies};
use crate::scenario::harness::ProbeRun;
use crate::scenario::{
    accept_overflow, incast, port_exhaustion, slow_reader, stale_ack, syn_drop, timewait, Header,
    Runs,
};

/// A table with one column per run (the baseline, then each remedied run), filled row by
/// row.
struct Side<'a, R> {
    runs: &'a [&'a R],
    cells: Cells,
}

impl<'a, R: Record> Side<'a, R> {
    /// The table of `runs`, a column each under its label.
    fn new(runs: &'a [&'a R]) -> Side<'a, R> {
        let mut header = vec![String::new()];
        header.extend(runs.iter().map(|r| r.label().to_string()));
        Side {
            runs,
            cells: Cells::new(header),
        }
    }

    /// Adds the row `name` with one cell per run.
    fn row(&mut self, name: &str, cell: impl Fn(&R) -> String) {
        let mut v = vec![name.to_string()];
        v.extend(self.runs.iter().map(|r| cell(r)));
        self.cells.rows.push(v);
    }
}

/// Probe runs side by side.
fn probe_side(runs: &[&ProbeRun]) -> Cells {
    let mut t = Side::new(runs);
    t.row("requests ok", |r| r.summary.requests_ok.to_string());
    t.row("requests failed", |r| r.summary.requests_failed.to_string());
    t.row("ok per second", |r| {
        format!("{:.1}", r.summary.requests_ok_per_s)
    });
    t.row("connections opened", |r| {
        r.summary.connections_opened.to_string()
    });
    t.row("errors", |r| {
        times(r.summary.errors.iter().map(|e| (&e.errno, e.count)))
    });
    for phase in ["connect", "total"] {
        t.row(&format!("{phase} p50 / p99 / max"), |r| {
            r.summary
                .phases
                .iter()
                .find(|p| p.phase == phase)
                .map(|p| {
                    format!(
                        "{} / {} / {}",
                        fmt::micros(p.p50_us),
                        fmt::micros(p.p99_us),
                        fmt::micros(p.max_us)
                    )
                })
                .unwrap_or_else(|| "-".into())
        });
    }
    t.row("slow connections by cause", |r| {
        times(r.summary.spikes.groups.iter().map(|g| (&g.label, g.count)))
    });
    t.row("client TcpExtTCPSynRetrans", |r| {
        r.client_counter("TcpExtTCPSynRetrans").to_string()
    });
    t.row("server TcpExtListenOverflows", |r| {
        r.server_counter("TcpExtListenOverflows").to_string()
    });
    t.row("findings", |r| pathology_names(&r.findings));
    t.cells
}

/// `name xcount, ...`; `-` when there is none.
fn times<'a>(counts: impl Iterator<Item = (&'a String, u64)>) -> String {
    let v: Vec<String> = counts.map(|(name, n)| format!("{name} x{n}")).collect();
    if v.is_empty() {
        "-".into()
    } else {
        v.join(", ")
    }
}

/// A probe scenario's view: the runs side by side, the baseline's diagnosis.
fn probe_view<'a>(
    scenario: &'a str,
    header: &'a Header,
    headline: String,
    runs: &[&'a ProbeRun],
) -> View<'a> {
    View::new(
        (scenario, header),
        headline,
        probe_side(runs),
        &runs[0].findings,
    )
}

pub fn accept_overflow<B: Runs<accept_overflow::Config, ProbeRun>>(b: &B) -> View<'_> {
    let c = b.config();
    let headline = format!(
        "{} server thread(s), backlog {}, {} concurrent clients",
        c.server_threads, c.backlog, c.concurrency
    );
    probe_view("accept-overflow", b.header(), headline, &b.runs())
}

pub fn syn_drop<B: Runs<syn_drop::Config, ProbeRun>>(b: &B) -> View<'_> {
    let headline = format!(
        "nftables in the server namespace drops {}% of SYNs",
        b.config().drop_percent
    );
    probe_view("syn-drop", b.header(), headline, &b.runs())
}

pub fn port_exhaustion(b: &port_exhaustion::Report) -> View<'_> {
    let sustainable = (b.computed_sustainable_per_s, b.measured_sustainable_per_s);
    port_exhaustion_of(&b.header, &b.config, &[&b.before], sustainable)
}

/// The baseline's and each remedied run's first probe (`--fix` measures one destination).
pub fn port_exhaustion_fix(b: &Remedies<port_exhaustion::PortExhaustion>) -> View<'_> {
    let runs: Vec<&ProbeRun> = b.runs().iter().filter_map(|r| r.probes.first()).collect();
    let sustainable = (
        port_exhaustion::sustainable_per_s(b.config.ports),
        runs.first()
            .and_then(|r| port_exhaustion::measured_steady(r)),
    );
    port_exhaustion_of(&b.header, &b.config, &runs, sustainable)
}

/// `sustainable`: new connections per second, computed and measured.
fn port_exhaustion_of<'a>(
    header: &'a Header,
    c: &port_exhaustion::Config,
    runs: &[&'a ProbeRun],
    (computed, measured): (f64, Option<f64>),
) -> View<'a> {
    let headline = format!(
        "client port range {} ({} ports), tcp_tw_reuse=0, {} closes first, {} s per run",
        c.ports,
        c.ports.len(),
        match c.close_first {
            tcpdoctor_probe::CloseFirst::Client => "client",
            tcpdoctor_probe::CloseFirst::Server => "server",
        },
        c.duration_ms / 1000,
    );
    let mut v = probe_view("port-exhaustion", header, headline, runs);
    v.lines.push(format!(
        "Sustainable new connections to one destination: computed {} ports / 60 s = {computed:.2}/s; measured {}",
        c.ports.len(),
        match measured {
            Some(m) => format!("{m:.2}/s (whole 60 s periods after the first)"),
            None => "- (needs --duration 121s or more)".into(),
        }
    ));
    v.charts.extend(crate::chart::connects_per_second(runs));
    v
}

pub fn timewait<B: Runs<timewait::Config, timewait::Run>>(b: &B) -> View<'_> {
    let (c, runs) = (b.config(), b.runs());
    let mut t = Side::new(&runs);
    t.row("connect times", |r| {
        let v: Vec<String> = r
            .connections
            .iter()
            .map(|c| fmt::micros(c.connect_us))
            .collect();
        v.join(", ")
    });
    t.row("failed", |r| {
        let v: Vec<&str> = r.failures().map(|c| c.outcome.name()).collect();
        v.join(", ")
    });
    t.row("connects slower than 100 ms", |r| {
        r.slow_connects.to_string()
    });
    for (side, name) in [
        ("client", "TcpExtTCPSynRetrans"),
        ("client", "TcpOutRsts"),
        ("server", "TcpExtTW"),
    ] {
        t.row(&format!("{side} {name}"), |r| {
            let m = if side == "client" {
                &r.client_counters
            } else {
                &r.server_counters
            };
            m.get(name).copied().unwrap_or(0).to_string()
        });
    }
    t.row("findings", |r| pathology_names(&r.findings));
    let headline = format!(
        "{} connections from source port {}, {} uploaded each, server closes first{}",
        c.connections,
        timewait::CLIENT_PORT,
        fmt::bytes(c.request_bytes as u64),
        if c.rfc1337 { ", tcp_rfc1337=1" } else { "" },
    );
    let scenario = ("timewait-collision", b.header());
    View::new(scenario, headline, t.cells, &runs[0].findings)
}

pub fn slow_reader<B: Runs<slow_reader::Config, slow_reader::Run>>(b: &B) -> View<'_> {
    let (c, runs) = (b.config(), b.runs());
    let mut t = Side::new(&runs);
    t.row("reader SO_RCVBUF", |r| {
        fmt::bytes(r.reader_rcvbuf_bytes as u64)
    });
    // faster-reader's reader is not paced (u64::MAX): it reads as data arrives.
    t.row("reader rate", |r| match r.reader_rate_bytes_per_s {
        u64::MAX => "as data arrives".to_string(),
        rate => format!("{}/s", fmt::bytes(rate)),
    });
    t.row("bytes written", |r| fmt::bytes(r.bytes_written));
    t.row("bytes read", |r| fmt::bytes(r.bytes_read));
    t.row("writer stalled", |r| {
        format!(
            "{} ({:.0}%)",
            fmt::micros(r.writer_stall_us),
            r.writer_stall_share * 100.0
        )
    });
    t.row("zero-window advertisements", |r| {
        r.zero_window_advertisements.to_string()
    });
    t.row("findings", |r| pathology_names(&r.findings));
    let headline = format!(
        "writer {}/s, reader {}/s, reader SO_RCVBUF {}",
        fmt::bytes(c.writer_rate_bytes_per_s),
        fmt::bytes(c.reader_rate_bytes_per_s),
        fmt::bytes(c.reader_rcvbuf_bytes as u64)
    );
    let scenario = ("slow-reader", b.header());
    View::new(scenario, headline, t.cells, &runs[0].findings)
}

pub fn stale_ack(b: &stale_ack::Report) -> View<'_> {
    let resends = (
        b.syn_resends_per_million,
        b.stale_ack_resends,
        b.syn_timer_resends,
    );
    stale_ack_of(&b.header, &b.config, &[&b.loop_run.run], resends, &b.facts)
}

pub fn stale_ack_fix(b: &Remedies<stale_ack::StaleAck>) -> View<'_> {
    let runs: Vec<&ProbeRun> = b.runs().iter().map(|r| &r.run).collect();
    let resends = stale_ack::resends(&b.baseline.run);
    stale_ack_of(&b.header, &b.config, &runs, resends, &b.facts)
}

/// `resends`: the loop's SYN resends ([`stale_ack::resends`]); `race`: the forced check, the
/// kernel and the loop's CPUs.
fn stale_ack_of<'a>(
    header: &'a Header,
    c: &stale_ack::Config,
    runs: &[&'a ProbeRun],
    (per_million, stale, timer): (f64, u64, u64),
    race: &stale_ack::Facts,
) -> View<'a> {
    let headline = format!(
        "report 003's loop for {} s, {} loop(s), on Linux {}{}",
        c.duration_ms as f64 / 1000.0,
        c.concurrency,
        race.kernel_release,
        match race.loop_cpus {
            Some([server, client]) => format!(", server on CPU {server}, client on CPU {client}"),
            None => ", one CPU: the server and client share it".to_string(),
        },
    );
    let mut v = probe_view("stale-ack-race", header, headline, runs);
    v.lines.push(format!(
        "SYN resends: {per_million:.0} per million connections; classified: {stale} resent after a stale ACK, {timer} on the SYN timer"
    ));
    v.lines.push(format!(
        "Forced stale ACK (client reset dropped, reconnect from port {}): connect took {}, behaviour: {}",
        stale_ack::FORCED_PORT,
        fmt::micros(race.forced.connect_us),
        match race.forced.behaviour {
            stale_ack::ResendBehaviour::QuickResend => "quick SYN resend after the reset (mitigated kernel)",
            stale_ack::ResendBehaviour::TimerResend => "SYN waited for the 1 s retransmission timer",
            stale_ack::ResendBehaviour::NotReproduced => "no stale ACK (no SYN resend)",
            stale_ack::ResendBehaviour::Failed => "connect failed",
        }
    ));
    v
}

pub fn incast(b: &incast::Report) -> View<'_> {
    let runs: Vec<&incast::Run> = b.runs.iter().collect();
    let before_after = (b.before.as_ref(), b.after.as_ref());
    incast_of(&b.header, &b.config, &runs, before_after, &b.remedies)
}

/// The baseline and each remedied run; before and after: the baseline and the first remedied
/// run at the baseline's sender count.
pub fn incast_fix(b: &Remedies<incast::Incast>) -> View<'_> {
    let runs = b.runs();
    let after = runs[1..]
        .iter()
        .copied()
        .find(|r| r.senders == b.baseline.senders);
    incast_of(&b.header, &b.config, &runs, (Some(&b.baseline), after), &[])
}

/// `checks`: the last RTO floor judged against the first (a plain run of several floors).
fn incast_of<'a>(
    header: &'a Header,
    c: &incast::Config,
    runs: &[&'a incast::Run],
    (before, after): (Option<&'a incast::Run>, Option<&'a incast::Run>),
    checks: &'a [Check],
) -> View<'a> {
    let mut tables = vec![incast_runs(runs)];
    let mut lines = Vec::new();
    if let Some(before) = before {
        let mut t = Cells::new([
            "sender",
            "RTO expiries",
            "TcpExtTCPTimeouts",
            "TcpRetransSegs",
            "TcpExtTCPLossProbes",
            "TcpExtTCPFastRetrans",
        ]);
        t.caption = Some(format!(
            "Per sender ({} senders, rto_min {}):",
            before.senders,
            fmt::micros(before.rto_min_us)
        ));
        t.right = vec![1, 2, 3, 4, 5];
        for s in &before.per_sender {
            t.rows.push(vec![
                format!("s{}", s.sender),
                s.rto_expiries.to_string(),
                s.timeouts.to_string(),
                s.retrans_segs.to_string(),
                s.loss_probes.to_string(),
                s.fast_retrans.to_string(),
            ]);
        }
        tables.push(t);
        lines.push("RTO expiries: TcpExtTCPTimeouts plus the recovery-state variants (TcpExtTCPSackRecoveryFail, TcpExtTCPSackFailures, TcpExtTCPLossFailures) that tcp_retransmit_timer counts instead.".to_string());
    }
    if let (Some(before), Some(after)) = (before, after) {
        tables.push(incast_before_after(before, after));
    }
    let mut charts = Vec::new();
    // A sweep is several sender counts; several RTO floors at one count are not one.
    if c.senders.len() > 1 {
        charts.push(Chart {
            section: "Incast sweep".into(),
            xy: crate::chart::incast_chart(runs),
            caption: "Goodput of each run against its number of senders, one line per RTO floor: \
                      timeouts stall whole rounds, and the longer the floor the more goodput they cost."
                .into(),
        });
    }
    View {
        scenario: "incast",
        header,
        headline: format!(
            "{} per round split over N senders, bottleneck tbf at {} (burst {}, limit {}), senders on {}",
            fmt::bytes(c.block_bytes),
            c.rate_bits_per_s()
                .map(fmt::bitrate)
                .unwrap_or_else(|_| c.rate.clone()),
            fmt::bytes(c.burst_bytes),
            fmt::bytes(c.limit_bytes),
            c.congestion_control
        ),
        tables,
        lines,
        charts,
        diagnosis: before.map(|r| r.findings.as_slice()).unwrap_or(&[]),
        checks,
    }
}

/// The incast runs, one row each.
fn incast_runs(runs: &[&incast::Run]) -> Cells {
    let mut t = Cells::new([
        "senders",
        "rto_min",
        "rounds",
        "stalled >100ms",
        "goodput",
        "p50 round",
        "p99 round",
        "max round",
        "RTOs",
        "TLPs",
        "retrans",
        "tbf drops",
    ]);
    t.right = (0..12).collect();
    for run in runs {
        let stalled = if run.rounds == 0 {
            0.0
        } else {
            f64::from(run.slow_rounds) * 100.0 / f64::from(run.rounds)
        };
        t.rows.push(vec![
            run.senders.to_string(),
            fmt::micros(run.rto_min_us),
            run.rounds.to_string(),
            format!("{} ({stalled:.1}%)", run.slow_rounds),
            fmt::bitrate(run.goodput_bits_per_s),
            fmt::micros(run.round_p50_us),
            fmt::micros(run.round_p99_us),
            fmt::micros(run.round_max_us),
            run.rto_expiries.to_string(),
            run.loss_probes.to_string(),
            run.retrans_segs.to_string(),
            run.bottleneck_drops
                .map(|d| d.to_string())
                .unwrap_or_else(|| "-".into()),
        ]);
    }
    t
}

/// The baseline's sender count before and after the fix (the remedy of `--fix`, or the last
/// RTO floor of a plain run).
fn incast_before_after(before: &incast::Run, after: &incast::Run) -> Cells {
    let mut t = Cells::new([
        String::new(),
        format!("before: rto_min {}", fmt::micros(before.rto_min_us)),
        format!("after: rto_min {}", fmt::micros(after.rto_min_us)),
    ]);
    t.caption = Some(format!(
        "Before and after the fix ({} senders):",
        before.senders
    ));
    t.right = vec![1, 2];
    let row = |name: &str, f: &dyn Fn(&incast::Run) -> String| {
        vec![name.to_string(), f(before), f(after)]
    };
    t.rows = vec![
        row("goodput", &|r| fmt::bitrate(r.goodput_bits_per_s)),
        row("rounds stalled 100 ms beyond a typical round", &|r| {
            format!("{} of {}", r.slow_rounds, r.rounds)
        }),
        row("p99 round", &|r| fmt::micros(r.round_p99_us)),
        row("retransmission timer expiries", &|r| {
            r.rto_expiries.to_string()
        }),
        row("tail loss probes", &|r| r.loss_probes.to_string()),
        row("time lost to stalled rounds", &|r| {
            format!("{:.0}%", r.time_lost_share * 100.0)
        }),
        row("findings", &|r| pathology_names(&r.findings)),
    ];
    t
}
