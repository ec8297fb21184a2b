//! One incast run measured: the rounds with the first N senders (the receiver asks each for its
//! share at once and times the round), the senders' counters and the bottleneck's drops
//! around them, and the trace window of the run.

use std::net::SocketAddrV4;
use std::os::fd::{AsFd, AsRawFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

use super::{
    bottleneck_drops, payload_share, Config, Run, SenderStats, SenderTcp, Topology, ROUND_TIMEOUT,
    RTO_COUNTERS, SLOW_ROUND,
};
use crate::{Error, Result};
use tcpdoctor_sandbox::netns;
use tcpdoctor_sandbox::traffic::{self, SERVER_PORT};

/// Runs the rounds with the first `n` senders. `pace`: each sender's tbf rate, when paced
/// (the round at line rate is then the round at the senders' combined rate, if lower).
pub(super) fn measure(
    t: &Topology,
    cfg: &Config,
    n: u32,
    rto_min_us: u64,
    pace: Option<f64>,
    stop: &AtomicBool,
) -> Result<Run> {
    let label = format!("{n} senders, rto_min {} ms", rto_min_us / 1000);
    // Its own trace window: attached before the first counter snapshot, detached after the
    // last, over every namespace of the topology.
    let tracer = tcpdoctor_trace::run::Tracer::start(&t.trace_mode, &label, t.lab.namespaces());
    let before: Vec<_> = t.senders[..n as usize]
        .iter()
        .map(|ns| netns::counters(ns))
        .collect::<Result<_>>()?;
    let drops_before = bottleneck_drops(t);

    let deadline = Instant::now() + Duration::from_millis(cfg.max_run_duration_ms);
    let local_stop = Arc::new(AtomicBool::new(false));

    let workers = spawn_senders(t, n, deadline, &local_stop)?;

    // Receiver: connect to every sender, then request rounds.
    let sender_addrs: Vec<SocketAddrV4> = (0..n)
        .map(|i| SocketAddrV4::new(t.subnet.host(10 + i), SERVER_PORT))
        .collect();
    let rounds = cfg.rounds;
    let block = cfg.block_bytes;
    let ext_stop: &AtomicBool = stop;
    // The receiver thread polls a flag it owns; Ctrl-C is forwarded below.
    let rx_stop = Arc::clone(&local_stop);
    let receiver = netns::spawn(&t.receiver, "tdoc-rx", move || {
        receive_rounds(&sender_addrs, rounds, block, deadline, &rx_stop)
    })?;
    netns::wait(|| receiver.is_finished(), ext_stop, &local_stop);
    let result = receiver.join();
    local_stop.store(true, Ordering::Relaxed);
    let tcp: Vec<SenderTcp> = workers
        .into_iter()
        .map(|w| w.join().unwrap_or_default())
        .collect();
    let (round_us, cut_short) = result?;

    let after: Vec<_> = t.senders[..n as usize]
        .iter()
        .map(|ns| netns::counters(ns))
        .collect::<Result<_>>()?;
    let trace = tracer.finish();
    let per_sender = per_sender(&before, &after, &tcp);
    let mut sorted = round_us.clone();
    sorted.sort_unstable();
    let total_us: u64 = round_us.iter().sum();
    let share = block / u64::from(n) * u64::from(n);
    let bytes = share * round_us.len() as u64;
    let line_round_us = line_round_us(cfg, n, share, pace, &per_sender);
    let slow_threshold_us = tcpdoctor_analyze::fan_in::reference_round_us(&round_us, line_round_us)
        .unwrap_or(0)
        + SLOW_ROUND.as_micros() as u64;
    Ok(Run {
        label,
        senders: n,
        rto_min_us,
        rounds: round_us.len() as u32,
        slow_rounds: round_us.iter().filter(|&&u| u > slow_threshold_us).count() as u32,
        slow_round_threshold_us: slow_threshold_us,
        goodput_bits_per_s: if total_us > 0 {
            bytes as f64 * 8.0 / (total_us as f64 / 1e6)
        } else {
            0.0
        },
        round_p50_us: traffic::percentile(&sorted, 50.0),
        round_p99_us: traffic::percentile(&sorted, 99.0),
        round_max_us: sorted.last().copied().unwrap_or(0),
        retrans_segs: per_sender.iter().map(|s| s.retrans_segs).sum(),
        timeouts: per_sender.iter().map(|s| s.timeouts).sum(),
        rto_expiries: per_sender.iter().map(|s| s.rto_expiries).sum(),
        loss_probes: per_sender.iter().map(|s| s.loss_probes).sum(),
        senders_with_timeouts: per_sender.iter().filter(|s| s.rto_expiries > 0).count() as u32,
        bottleneck_drops: match (drops_before, bottleneck_drops(t)) {
            (Some(b), Some(a)) => Some(a.saturating_sub(b)),
            _ => None,
        },
        per_sender,
        round_us,
        hit_time_limit: cut_short && !ext_stop.load(Ordering::Relaxed),
        interrupted: ext_stop.load(Ordering::Relaxed),
        time_lost_share: 0.0,
        findings: Vec::new(),
        trace,
        line_round_us,
        congestion_control: String::new(),
        bottleneck_limit_bytes: cfg.limit_bytes,
        sender_rate_bits_per_s: None,
    })
}

/// The first `n` senders, each on a thread in its namespace: listen, accept the receiver,
/// answer each request with that many bytes; returns once each listens (or 5 s passed).
fn spawn_senders(
    t: &Topology,
    n: u32,
    deadline: Instant,
    stop: &Arc<AtomicBool>,
) -> Result<Vec<netns::Worker<SenderTcp>>> {
    let (ready_tx, ready_rx) = mpsc::channel();
    let mut workers = Vec::new();
    for i in 0..n {
        let addr = SocketAddrV4::new(t.subnet.host(10 + i), SERVER_PORT);
        let ready = ready_tx.clone();
        let stop = Arc::clone(stop);
        workers.push(netns::spawn(
            &t.senders[i as usize],
            &format!("tdoc-s{i}"),
            move || {
                let l = traffic::listen(addr, 16)
                    .map_err(|e| Error::io(format!("sender {i}: listen on {addr}"), e));
                let _ = ready.send(l.is_ok());
                let l = l?;
                let mut s = traffic::accept_one(&l, &stop, deadline + ROUND_TIMEOUT)
                    .map_err(|e| Error::io(format!("sender {i}: accept"), e))?;
                s.set_nodelay(true)
                    .map_err(|e| Error::io("set TCP_NODELAY", e))?;
                let chunk = vec![0x5au8; 64 * 1024];
                let mut req = [0u8; 8];
                while let Ok(true) =
                    traffic::read_full(&mut s, &mut req, &stop, deadline + ROUND_TIMEOUT)
                {
                    let want = u64::from_be_bytes(req);
                    if want == 0 {
                        break;
                    }
                    if traffic::write_bytes(&mut s, want, &chunk).is_err() {
                        break;
                    }
                }
                Ok(SenderTcp::of(&s))
            },
        )?);
    }
    drop(ready_tx);
    for _ in 0..n {
        match ready_rx.recv_timeout(Duration::from_secs(5)) {
            Ok(true) => {}
            _ => break,
        }
    }
    Ok(workers)
}

/// Each sender's counter deltas (`after` against `before`) and its socket's view.
fn per_sender(
    before: &[tcpdoctor_host::counters::Snapshot],
    after: &[tcpdoctor_host::counters::Snapshot],
    tcp: &[SenderTcp],
) -> Vec<SenderStats> {
    before
        .iter()
        .zip(after)
        .enumerate()
        .map(|(i, (b, a))| {
            let d = a.delta_since(b);
            SenderStats {
                tcp: tcp.get(i).copied().unwrap_or_default(),
                sender: i as u32,
                retrans_segs: d.get("TcpRetransSegs"),
                timeouts: d.get("TcpExtTCPTimeouts"),
                rto_expiries: RTO_COUNTERS.iter().map(|c| d.get(c)).sum(),
                loss_probes: d.get("TcpExtTCPLossProbes"),
                timer_events: RTO_COUNTERS.iter().map(|c| d.get(c)).sum::<i64>()
                    + d.get("TcpExtTCPLossProbes"),
                fast_retrans: d.get("TcpExtTCPFastRetrans"),
            }
        })
        .collect()
}

/// A round of `share` bytes at the bottleneck's line rate (or the paced senders' combined
/// rate, if lower), when the rate is known.
fn line_round_us(
    cfg: &Config,
    n: u32,
    share: u64,
    pace: Option<f64>,
    per_sender: &[SenderStats],
) -> Option<u64> {
    let mss = per_sender
        .iter()
        .map(|s| s.tcp.mss_bytes)
        .find(|&m| m > 0)
        .unwrap_or(0);
    cfg.rate_bits_per_s().ok().map(|rate| {
        // The round's frames at the line rate (or the paced senders' combined rate), less
        // what the bucket's burst lets through at once (it refills between rounds).
        let rate = pace.map_or(rate, |p| rate.min(p * f64::from(n)));
        let frames = share as f64 / payload_share(mss);
        ((frames - cfg.burst_bytes as f64).max(0.0) * 8.0 / rate * 1e6) as u64
    })
}

/// The receiver's loop. Returns the round durations and whether the run was cut short.
fn receive_rounds(
    senders: &[SocketAddrV4],
    rounds: u32,
    block: u64,
    deadline: Instant,
    stop: &AtomicBool,
) -> Result<(Vec<u64>, bool)> {
    use std::io::Write;
    let opts = traffic::ClientOptions {
        nodelay: true,
        connect_timeout: Some(Duration::from_secs(5)),
        ..Default::default()
    };
    let mut socks = Vec::new();
    for a in senders {
        let (s, _) = traffic::connect(*a, &opts);
        socks.push(s.map_err(|e| Error::io(format!("receiver: connect to sender {a}"), e))?);
    }
    let share = block / senders.len() as u64;
    let mut buf = vec![0u8; 256 * 1024];
    let mut out = Vec::new();
    let mut cut_short = false;
    'rounds: for _ in 0..rounds {
        if stop.load(Ordering::Relaxed) || Instant::now() > deadline {
            cut_short = true;
            break;
        }
        let start = Instant::now();
        for s in socks.iter_mut() {
            s.write_all(&share.to_be_bytes())
                .map_err(|e| Error::io("receiver: send request", e))?;
        }
        let mut left: Vec<u64> = vec![share; socks.len()];
        while left.iter().any(|&l| l > 0) {
            if stop.load(Ordering::Relaxed) || start.elapsed() > ROUND_TIMEOUT {
                cut_short = true;
                break 'rounds;
            }
            let mut fds: Vec<nix::poll::PollFd> = socks
                .iter()
                .zip(&left)
                .filter(|(_, &l)| l > 0)
                .map(|(s, _)| nix::poll::PollFd::new(s.as_fd(), nix::poll::PollFlags::POLLIN))
                .collect();
            let _ = nix::poll::poll(&mut fds, nix::poll::PollTimeout::from(50u16));
            drop(fds);
            for (s, l) in socks.iter().zip(left.iter_mut()) {
                while *l > 0 {
                    let want = buf.len().min(*l as usize);
                    // SAFETY: recv into our own buffer of at least `want` bytes.
                    let n = unsafe {
                        libc::recv(
                            s.as_raw_fd(),
                            buf.as_mut_ptr().cast(),
                            want,
                            libc::MSG_DONTWAIT,
                        )
                    };
                    if n > 0 {
                        *l -= n as u64;
                    } else if n == 0 {
                        return Err(Error::io(
                            "receiver: read reply",
                            std::io::ErrorKind::UnexpectedEof.into(),
                        ));
                    } else {
                        let e = std::io::Error::last_os_error();
                        if e.kind() == std::io::ErrorKind::WouldBlock
                            || e.kind() == std::io::ErrorKind::Interrupted
                        {
                            break;
                        }
                        return Err(Error::io("receiver: read reply", e));
                    }
                }
            }
        }
        out.push(start.elapsed().as_micros() as u64);
    }
    for s in socks.iter_mut() {
        let _ = s.write_all(&0u64.to_be_bytes());
    }
    Ok((out, cut_short))
}
