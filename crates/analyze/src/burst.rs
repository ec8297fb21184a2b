//! Microburst meter: TCP payload bytes per time bin at several resolutions (10 us .. 1 s),
//! from packet timestamps alone. Streaming, O(resolutions) per packet, no allocation.

use serde::Serialize;

/// Bin widths, finest first. 10 us is below what counter polling can see (a field report of incast stopped at
/// ~1 ms); 1 s is what dashboards show.
pub const RESOLUTIONS_NS: [u64; 6] = [
    10_000,
    100_000,
    1_000_000,
    10_000_000,
    100_000_000,
    1_000_000_000,
];

#[derive(Clone, Copy, Debug, Default)]
struct Bin {
    /// End (exclusive, relative ns) of the current bin: a division only when it is crossed.
    end_ns: u64,
    index: u64,
    bytes: u64,
    max_bytes: u64,
    max_index: u64,
}

impl Bin {
    /// Folds the open bin into the maximum.
    fn close(&mut self) {
        if self.bytes > self.max_bytes {
            self.max_bytes = self.bytes;
            self.max_index = self.index;
        }
    }
}

/// Accumulates bytes per bin for every resolution in [`RESOLUTIONS_NS`].
#[derive(Clone, Debug, Default)]
pub struct BurstMeter {
    first_ns: Option<u64>,
    last_ns: u64,
    total_bytes: u64,
    bins: [Bin; RESOLUTIONS_NS.len()],
}

/// One row of the microburst table.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct BurstRow {
    pub resolution_us: u64,
    /// Bins covering the capture at this resolution.
    pub bins: u64,
    pub max_bytes: u64,
    /// Mean bytes per bin over the whole capture.
    pub avg_bytes: f64,
    pub max_bits_per_s: f64,
    pub avg_bits_per_s: f64,
    /// `max_bytes / avg_bytes`: how much the busiest bin exceeds the average.
    pub max_to_avg_ratio: f64,
    /// Offset of the busiest bin from the start of the capture.
    pub max_at_us: u64,
    /// Peak rate as a share of `--link-speed`, when given.
    pub peak_link_share: Option<f64>,
}

impl BurstMeter {
    pub fn add(&mut self, ts_ns: u64, bytes: u32) {
        let first = *self.first_ns.get_or_insert(ts_ns);
        // Timestamps may step back slightly (multi-queue captures): count into the current bin.
        let rel = ts_ns.saturating_sub(first);
        self.last_ns = self.last_ns.max(ts_ns);
        self.total_bytes += u64::from(bytes);
        if bytes == 0 {
            return;
        }
        for (bin, res) in self.bins.iter_mut().zip(RESOLUTIONS_NS) {
            if rel >= bin.end_ns {
                let idx = rel / res;
                bin.end_ns = (idx + 1) * res;
                if idx > bin.index || bin.bytes == 0 {
                    // A bin's count only grows while it is open: compare it with the busiest
                    // one when it closes (the earliest busiest bin wins, as `>` keeps it).
                    bin.close();
                    bin.index = idx;
                    bin.bytes = 0;
                }
            }
            bin.bytes += u64::from(bytes);
        }
    }

    pub fn total_bytes(&self) -> u64 {
        self.total_bytes
    }

    /// The table, finest resolution first.
    pub fn rows(&self, link_speed_bits_per_s: Option<u64>) -> Vec<BurstRow> {
        let Some(first) = self.first_ns else {
            return Vec::new();
        };
        let span = self.last_ns.saturating_sub(first);
        self.bins
            .iter()
            .zip(RESOLUTIONS_NS)
            .map(|(bin, res)| {
                let mut bin = *bin;
                bin.close();
                let bins = span / res + 1;
                let avg = self.total_bytes as f64 / bins as f64;
                let secs = res as f64 / 1e9;
                let max_rate = bin.max_bytes as f64 * 8.0 / secs;
                BurstRow {
                    resolution_us: res / 1_000,
                    bins,
                    max_bytes: bin.max_bytes,
                    avg_bytes: avg,
                    max_bits_per_s: max_rate,
                    avg_bits_per_s: avg * 8.0 / secs,
                    max_to_avg_ratio: if avg > 0.0 {
                        bin.max_bytes as f64 / avg
                    } else {
                        0.0
                    },
                    max_at_us: bin.max_index * res / 1_000,
                    peak_link_share: link_speed_bits_per_s
                        .filter(|&l| l > 0)
                        .map(|l| max_rate / l as f64),
                }
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn burst_of_ten_packets_in_50us_within_a_second() {
        let mut m = BurstMeter::default();
        let t0 = 1_000_000_000_000;
        m.add(t0, 100);
        for i in 0..10 {
            m.add(t0 + 500_000_000 + i * 5_000, 1_000);
        }
        m.add(t0 + 999_000_000, 100);
        let rows = m.rows(Some(1_000_000_000));
        assert_eq!(rows.len(), 6);
        let r10 = &rows[0];
        assert_eq!(r10.resolution_us, 10);
        assert_eq!(r10.max_bytes, 2_000); // two packets 5 us apart share a 10 us bin
        let r100 = &rows[1];
        assert_eq!(r100.max_bytes, 10_000);
        assert_eq!(r100.max_at_us, 500_000);
        let r1s = &rows[5];
        assert_eq!(r1s.max_bytes, 10_200);
        assert!((r1s.max_to_avg_ratio - 1.0).abs() < 1e-9);
        // 10 kB in 100 us = 800 Mbit/s = 0.8 of the link.
        assert!((r100.peak_link_share.unwrap() - 0.8).abs() < 1e-9);
        assert!(r100.max_to_avg_ratio > 1000.0);
    }
}
