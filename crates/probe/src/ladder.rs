//! What the SYN ladder cost in a run: the connects the classifier ([`crate::classify`]) put on
//! each rung of the client's SYN retransmission ladder, their delay per connect, and, when
//! the share of SYNs dropped is known (the lab's `syn-drop` sets it), the drop model's
//! prediction of both with its tolerance. Pure: a run's [`Summary`] in, a [`LadderCost`] out.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::stats::{SpikeGroup, Summary};
use crate::SpikeCause;

/// Connects that waited for rung `attempt` of the SYN ladder.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct LadderRung {
    /// 1 = the first SYN retransmission.
    pub attempt: u32,
    /// When the model sends this retransmission, from the first SYN.
    pub rung_ms: u64,
    /// Connects probe's classifier matched to this rung.
    pub connects: u64,
    /// Their median connect time.
    pub typical_connect_us: u64,
    /// With a known drop share p: connects x p^k (1 - p).
    pub predicted_connects: Option<f64>,
}

/// What the SYN ladder cost in a run: per lost SYN, and per connect.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct LadderCost {
    /// The client namespace's SYN ladder (probe's model of it), milliseconds.
    pub ladder_ms: Vec<u64>,
    /// Connects that finished (ok or failed).
    pub connects: u64,
    /// The share of SYNs dropped, when the scenario sets it.
    pub drop_share: Option<f64>,
    pub rungs: Vec<LadderRung>,
    /// sum over k of p^k (1 - p) x rung k.
    pub predicted_delay_per_connect_us: Option<f64>,
    /// sum of (connects x typical connect) over the rungs / connects.
    pub measured_delay_per_connect_us: f64,
    /// Three standard deviations of the per-connect mean under the drop model.
    pub tolerance_us: Option<f64>,
    pub agrees: Option<bool>,
}

/// The SYN ladder's cost in a run (its summary): connects by rung (probe's classifier: SYN
/// retransmissions, and accept-queue overflows placed on the nearest rung), and with a
/// drop share `p` the prediction: a connect loses exactly k SYNs with probability
/// p^k (1 - p) and then waits rung k.
pub fn cost(run: &Summary, drop_share: Option<f64>) -> LadderCost {
    cost_of(
        run.settings.syn_ladder_ms.clone(),
        &run.spikes.groups,
        run.requests,
        drop_share,
    )
}

/// [`cost`] from the ladder (ms from the first SYN), the classifier's spike groups and the
/// connects that finished.
pub fn cost_of(
    ladder_ms: Vec<u64>,
    groups: &[SpikeGroup],
    requests: u64,
    drop_share: Option<f64>,
) -> LadderCost {
    let nearest = |us: u64| -> u32 {
        ladder_ms
            .iter()
            .enumerate()
            .min_by_key(|(_, &ms)| (ms * 1000).abs_diff(us))
            .map(|(i, _)| i as u32 + 1)
            .unwrap_or(1)
    };
    let mut by: BTreeMap<u32, (u64, Vec<(u64, u64)>)> = BTreeMap::new();
    for g in groups {
        let attempt = match g.cause {
            SpikeCause::SynRetransmit { attempt } => attempt,
            SpikeCause::AcceptQueueOverflow => nearest(g.typical_phase_us),
            _ => continue,
        };
        let e = by.entry(attempt).or_insert((0, Vec::new()));
        e.0 += g.count;
        e.1.push((g.count, g.typical_phase_us));
    }
    let connects = requests.max(1);
    let rung_ms = |k: u32| ladder_ms.get(k as usize - 1).copied().unwrap_or(0);
    let rungs: Vec<LadderRung> = by
        .iter()
        .map(|(&attempt, (count, typ))| {
            // The typical time of the biggest group of this rung.
            let typical = typ
                .iter()
                .max_by_key(|(c, _)| *c)
                .map(|(_, t)| *t)
                .unwrap_or(0);
            LadderRung {
                attempt,
                rung_ms: rung_ms(attempt),
                connects: *count,
                typical_connect_us: typical,
                predicted_connects: drop_share
                    .map(|p| connects as f64 * p.powi(attempt as i32) * (1.0 - p)),
            }
        })
        .collect();
    let measured = rungs
        .iter()
        .map(|r| r.connects as f64 * r.typical_connect_us as f64)
        .sum::<f64>()
        / connects as f64;
    let (predicted, tolerance) = match drop_share {
        Some(p) => {
            let (mut mean, mut sq) = (0.0, 0.0);
            for (k, &ms) in ladder_ms.iter().enumerate() {
                let w = p.powi(k as i32 + 1) * (1.0 - p);
                let us = ms as f64 * 1000.0;
                mean += w * us;
                sq += w * us * us;
            }
            let sd = ((sq - mean * mean).max(0.0) / connects as f64).sqrt();
            (Some(mean), Some(3.0 * sd))
        }
        None => (None, None),
    };
    LadderCost {
        agrees: predicted
            .zip(tolerance)
            .map(|(p, t)| (measured - p).abs() <= t),
        ladder_ms,
        connects,
        drop_share,
        rungs,
        predicted_delay_per_connect_us: predicted,
        measured_delay_per_connect_us: measured,
        tolerance_us: tolerance,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn group(cause: SpikeCause, count: u64, typical_phase_us: u64) -> SpikeGroup {
        SpikeGroup {
            cause,
            label: String::new(),
            count,
            corroborated: 0,
            typical_phase_us,
            max_phase_us: typical_phase_us,
            max_total_us: typical_phase_us,
            example_local_ports: Vec::new(),
        }
    }

    #[test]
    fn a_known_drop_share_predicts_the_connects_per_rung_and_the_delay() {
        let resent = |attempt| SpikeCause::SynRetransmit { attempt };
        let groups = [
            group(resent(1), 90, 1_000_500),
            group(resent(2), 9, 3_001_000),
        ];
        let c = cost_of(vec![1000, 3000, 7000], &groups, 1000, Some(0.1));
        assert_eq!(c.rungs.len(), 2);
        assert_eq!((c.rungs[1].attempt, c.rungs[1].rung_ms), (2, 3000));
        assert!((c.rungs[0].predicted_connects.unwrap() - 90.0).abs() < 1e-9);
        // 0.09 x 1 s + 0.009 x 3 s + 0.0009 x 7 s per connect; measured (90 x 1.0005 s +
        // 9 x 3.001 s) / 1000.
        assert!((c.predicted_delay_per_connect_us.unwrap() - 123_300.0).abs() < 1e-6);
        assert!((c.measured_delay_per_connect_us - 117_054.0).abs() < 1e-6);
        assert_eq!(c.agrees, Some(true));
        // Accept-queue overflows wait on the nearest rung; no drop share, no prediction.
        let full = [group(SpikeCause::AcceptQueueOverflow, 4, 2_900_000)];
        let c = cost_of(vec![1000, 3000, 7000], &full, 100, None);
        assert_eq!((c.rungs[0].attempt, c.rungs[0].connects), (2, 4));
        assert_eq!((c.agrees, c.tolerance_us), (None, None));
    }
}
