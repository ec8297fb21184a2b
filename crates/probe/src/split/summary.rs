//! The run's time split ([`TimeSplit`], `time_split` in JSON): each part's p50/p99 over the
//! completed and the slow requests, which part dominated, what TCP itself did, and the one
//! line that says it. Pure.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use tcpdoctor_model::units;

use super::{attribute, Baseline, Component, CpuWaits};
use crate::classify::{Spike, SpikeCause};
use crate::record::Record;

/// What TCP itself did to the completed requests. JSON values: `fine`, `stalled`,
/// `unexplained`, `failed`, `unmeasured`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TcpState {
    /// No request failed or went unanswered, none waited for a TCP timer, and every slow
    /// one is explained by the server, the path or the client.
    Fine,
    /// Requests waited for TCP's timers (SYN resend, RTO, delayed ACK, accept queue).
    Stalled,
    /// Slow requests that neither a TCP timer nor the split explains.
    Unexplained,
    /// Requests failed or went unanswered (see the findings).
    Failed,
    /// No request completed.
    Unmeasured,
}

/// One part over the run.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ComponentStats {
    pub component: Component,
    /// Over all completed requests.
    pub p50_us: u64,
    pub p99_us: u64,
    pub max_us: u64,
    /// Share (0..=1) of the completed requests' summed time.
    pub share: f64,
    /// Slow requests whose largest part this was.
    pub slow_dominated: u64,
    /// Over the slow requests.
    pub slow_p50_us: u64,
    pub slow_p99_us: u64,
}

/// Requests whose small reply a delayed ACK held after its first byte (whatever else slowed
/// them).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TransferHolds {
    pub count: u64,
    pub p50_us: u64,
    pub max_us: u64,
    pub example_local_ports: Vec<u16>,
}

/// Where the time went over the run (`time_split` in JSON).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct TimeSplit {
    /// The path's typical round trip ([`Baseline::path_rtt_ns`]).
    pub path_rtt_us: u64,
    /// Completed requests split.
    pub requests: u64,
    /// Of which slow (above the spike threshold).
    pub slow_requests: u64,
    /// Median total of the completed requests.
    pub total_p50_us: u64,
    pub components: Vec<ComponentStats>,
    /// The part with the largest share of the completed requests' time.
    pub dominant: Option<Component>,
    /// The part that was largest in the most slow requests.
    pub slow_dominant: Option<Component>,
    pub tcp: TcpState,
    /// Requests whose reply a delayed ACK held after its first byte.
    pub transfer_holds: Option<TransferHolds>,
    /// CPU waits that bound the client's own scheduling in these timings: the workers'
    /// (summed) and the embedded server's threads'.
    pub workers_cpu_wait_us: Option<u64>,
    pub embedded_server_cpu_wait_us: Option<u64>,
    /// One line: TCP's state and the dominant part.
    pub headline: String,
}

/// p50, p99 and max of `v` (sorted here), microseconds.
fn quantiles_us(v: &mut [u64]) -> (u64, u64, u64) {
    if v.is_empty() {
        return (0, 0, 0);
    }
    v.sort_unstable();
    let at = |q: f64| v[((v.len() - 1) as f64 * q).round() as usize] / 1_000;
    (at(0.5), at(0.99), v[v.len() - 1] / 1_000)
}

/// The run's time split. `failed_or_unanswered`: requests that failed (other than by an
/// unexpected HTTP status) or went unanswered.
pub fn summarize(
    records: &[Record],
    spikes: &[Spike],
    base: &Baseline,
    waits: &CpuWaits,
    failed_or_unanswered: u64,
) -> TimeSplit {
    let spike_of: BTreeMap<usize, &Spike> = spikes.iter().map(|s| (s.record, s)).collect();
    let mut all: Vec<Vec<u64>> = vec![Vec::new(); Component::ALL.len()];
    let mut slow: Vec<Vec<u64>> = vec![Vec::new(); Component::ALL.len()];
    let mut dominated = vec![0u64; Component::ALL.len()];
    let mut totals = Vec::new();
    let mut holds = Vec::new();
    let mut hold_ports = Vec::new();
    let mut timer_stalled = 0u64;
    for (i, r) in records.iter().enumerate().filter(|(_, r)| r.is_ok()) {
        let spike = spike_of.get(&i).copied();
        let b = spike.map_or_else(|| attribute(r, base, None), |s| s.split);
        for (k, &c) in Component::ALL.iter().enumerate() {
            all[k].push(b.component_ns(c));
            if spike.is_some() {
                slow[k].push(b.component_ns(c));
            }
        }
        if spike.is_some() {
            dominated[Component::ALL
                .iter()
                .position(|&c| c == b.dominant())
                .unwrap_or(0)] += 1;
        }
        if b.transfer_timer_ns > 0 {
            holds.push(b.transfer_timer_ns);
            if hold_ports.len() < 8 && !hold_ports.contains(&r.local_port) {
                hold_ports.push(r.local_port);
            }
        }
        timer_stalled += u64::from(b.component_ns(Component::TcpTimer) > 0);
        totals.push(b.total_ns());
    }
    let sum_all: u64 = all.iter().flatten().sum();
    let mut components = Vec::new();
    for (k, &c) in Component::ALL.iter().enumerate() {
        let share = all[k].iter().sum::<u64>() as f64 / sum_all.max(1) as f64;
        let (p50, p99, max) = quantiles_us(&mut all[k]);
        let (sp50, sp99, _) = quantiles_us(&mut slow[k]);
        components.push(ComponentStats {
            component: c,
            p50_us: p50,
            p99_us: p99,
            max_us: max,
            share,
            slow_dominated: dominated[k],
            slow_p50_us: sp50,
            slow_p99_us: sp99,
        });
    }
    let requests = totals.len() as u64;
    let (total_p50_us, _, _) = quantiles_us(&mut totals);
    let dominant = (requests > 0)
        .then(|| {
            components
                .iter()
                .max_by(|a, b| a.share.total_cmp(&b.share))
                .map(|c| c.component)
        })
        .flatten();
    let slow_dominant = components
        .iter()
        .filter(|c| c.slow_dominated > 0)
        .max_by_key(|c| c.slow_dominated)
        .map(|c| c.component);
    let unexplained = spikes
        .iter()
        .filter(|s| s.cause == SpikeCause::Unexplained)
        .count() as u64;
    let tcp = if requests == 0 {
        TcpState::Unmeasured
    } else if failed_or_unanswered > 0 {
        TcpState::Failed
    } else if timer_stalled > 0 {
        TcpState::Stalled
    } else if unexplained > 0 {
        TcpState::Unexplained
    } else {
        TcpState::Fine
    };
    let transfer_holds = (!holds.is_empty()).then(|| {
        let (p50, _, max) = quantiles_us(&mut holds);
        TransferHolds {
            count: holds.len() as u64,
            p50_us: p50,
            max_us: max,
            example_local_ports: hold_ports,
        }
    });
    let mut split = TimeSplit {
        path_rtt_us: base.path_rtt_ns / 1_000,
        requests,
        slow_requests: spikes.len() as u64,
        total_p50_us,
        components,
        dominant,
        slow_dominant,
        tcp,
        transfer_holds,
        workers_cpu_wait_us: waits.workers_total_ns().map(|ns| ns / 1_000),
        embedded_server_cpu_wait_us: waits.embedded_server_ns.map(|ns| ns / 1_000),
        headline: String::new(),
    };
    split.headline = headline(&split, timer_stalled, unexplained, failed_or_unanswered);
    split
}

impl TimeSplit {
    pub fn component(&self, c: Component) -> Option<&ComponentStats> {
        self.components.iter().find(|s| s.component == c)
    }
}

fn headline(s: &TimeSplit, stalled: u64, unexplained: u64, failed: u64) -> String {
    let (requests, them) = match unexplained {
        1 => ("request stays", "it"),
        _ => ("requests stay", "them"),
    };
    let n = s.requests;
    let tcp = match s.tcp {
        TcpState::Unmeasured => return "no request completed: no time to split".into(),
        TcpState::Fine => {
            format!("TCP is fine: none of {n} requests failed or waited for a TCP timer")
        }
        TcpState::Stalled => {
            format!(
                "TCP stalled: {stalled} of {n} requests waited for its timers (see the findings)"
            )
        }
        TcpState::Unexplained => format!(
            "no request waited for a TCP timer, but {unexplained} slow {requests} unexplained: \
             CPU waits on this host could account for {them} (see the findings)"
        ),
        TcpState::Failed => {
            format!("{failed} requests failed or went unanswered (see the findings)")
        }
    };
    let Some(c) = s.dominant.and_then(|d| s.component(d)) else {
        return tcp;
    };
    let who = match c.component {
        Component::Network => "the path",
        Component::Tls => "the TLS handshake",
        Component::Server => "the server",
        Component::Transfer => "the reply's transfer",
        Component::TcpTimer => "TCP's timers",
        Component::Client => "the client's own time",
    };
    let what = c.component.describe();
    // Per request when the part is most of the typical request; else its share of the time
    // (a few long stalls: the typical request never met one).
    let took = if c.p50_us * 2 >= s.total_p50_us && c.p50_us > 0 {
        format!(
            "{who} took {} of {} per request (p50; {what})",
            units::micros(c.p50_us),
            units::micros(s.total_p50_us)
        )
    } else {
        format!(
            "{who} took {:.0}% of the requests' time ({what})",
            c.share * 100.0
        )
    };
    format!("{tcp}; {took}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::split::assign;
    use crate::split::tests::{rec, slow_run, waits};
    use std::time::Duration;

    #[test]
    fn the_summary_says_tcp_is_fine_and_the_server_took_the_time() {
        let (rs, mut spikes) = slow_run(10, 0.05, 300.05);
        let base = Baseline::of(&rs, &spikes, None);
        let w = waits(&[20, 20]);
        assign(&rs, &mut spikes, &base, &w);
        let s = summarize(&rs, &spikes, &base, &w, 0);
        assert_eq!(s.tcp, TcpState::Fine);
        assert_eq!(s.dominant, Some(Component::Server));
        assert_eq!(s.slow_dominant, Some(Component::Server));
        let server = s.component(Component::Server).unwrap();
        assert_eq!((server.p50_us, server.slow_dominated), (300_000, 10));
        assert!(server.share > 0.99, "{server:?}");
        assert_eq!(s.workers_cpu_wait_us, Some(40_000));
        assert!(
            s.headline.starts_with("TCP is fine: none of 10 requests"),
            "{}",
            s.headline
        );
        assert!(
            s.headline
                .contains("the server took 300ms of 300ms per request (p50; "),
            "{}",
            s.headline
        );
        // A failure, or an unexplained slow request, and TCP is no longer called fine.
        assert_eq!(summarize(&rs, &spikes, &base, &w, 1).tcp, TcpState::Failed);
        spikes[3].cause = SpikeCause::Unexplained;
        assert_eq!(
            summarize(&rs, &spikes, &base, &w, 0).tcp,
            TcpState::Unexplained
        );
        assert_eq!(summarize(&[], &[], &base, &w, 0).tcp, TcpState::Unmeasured);
    }

    #[test]
    fn a_delayed_ack_on_every_reply_is_a_tcp_stall_even_below_the_threshold() {
        let rs: Vec<Record> = (0..10).map(|_| rec(0, 0.05, 300.05, 41.0)).collect();
        let base = Baseline {
            delack: Some(Duration::from_millis(38)..=Duration::from_millis(52)),
            ..Baseline::of(&rs, &[], None)
        };
        let s = summarize(&rs, &[], &base, &waits(&[0]), 0);
        assert_eq!(s.tcp, TcpState::Stalled);
        let holds = s.transfer_holds.as_ref().unwrap();
        assert_eq!(holds.count, 10);
        assert!(s.headline.starts_with("TCP stalled"), "{}", s.headline);
    }
}
