//! Microbursts, from the burst table the reading side keeps ([`crate::burst`]): the busiest
//! millisecond against the link speed (when given) or against the capture's average.

use tcpdoctor_model::{Finding, Impact, Pathology, Source};

use super::{bytes_h, rate_h, Conclusion, Context, Detector};
use crate::burst::BurstRow;
use crate::engine::Config;

/// Keeps no state while streaming: the table comes with the [`Context`].
pub(crate) struct Microbursts {
    link_speed_bits_per_s: Option<u64>,
}

impl Microbursts {
    pub(crate) fn new(cfg: &Config) -> Microbursts {
        Microbursts {
            link_speed_bits_per_s: cfg.link_speed_bits_per_s,
        }
    }
}

impl Detector for Microbursts {
    fn conclude(self, ctx: &Context, out: &mut Conclusion) {
        out.findings
            .extend(microburst_finding(ctx.bursts, self.link_speed_bits_per_s));
    }
}

/// Microbursts from the burst table. With a link speed: the busiest 1 ms (the time scale of
/// a shallow switch or qdisc buffer) reached 90% of the link while the 1 s average stayed
/// under half of it. Without one: the busiest 1 ms carried >= 100 Mbit/s and >= 10x the
/// capture's average (context: the link may be fast enough).
///
/// A burst is a risk, not harm seen: with a link speed its impact is the share of the link
/// the busiest millisecond used, as an exposure (losses, if any, are the loss detectors').
pub fn microburst_finding(rows: &[BurstRow], link: Option<u64>) -> Option<Finding> {
    let ms = rows.iter().find(|r| r.resolution_us == 1_000)?;
    let sec = rows.iter().find(|r| r.resolution_us == 1_000_000)?;
    if sec.bins < 2 || ms.max_bytes == 0 {
        return None;
    }
    let (impact, against) = match link.filter(|&l| l > 0) {
        Some(l) => {
            let l = l as f64;
            if ms.max_bits_per_s < 0.9 * l || sec.max_bits_per_s >= 0.5 * l {
                return None;
            }
            (
                Impact::budget(ms.max_bits_per_s / l).exposure(),
                format!(
                    "{:.0}% of the {} link, while the busiest second averaged {:.0}%",
                    100.0 * ms.max_bits_per_s / l,
                    rate_h(l),
                    100.0 * sec.max_bits_per_s / l
                ),
            )
        }
        None => {
            if ms.max_bits_per_s < 100e6 || ms.max_to_avg_ratio < 10.0 {
                return None;
            }
            (
                Impact::none(),
                format!(
                    "{:.0}x the capture's average of {} (give --link-speed to compare with the link)",
                    ms.max_to_avg_ratio,
                    rate_h(ms.avg_bits_per_s)
                ),
            )
        }
    };
    let mut f = Finding::new(
        Pathology::Microburst,
        Source::Analyze,
        format!(
            "the busiest 1 ms carried {} ({}): {against}",
            bytes_h(ms.max_bytes),
            rate_h(ms.max_bits_per_s)
        ),
        impact,
    );
    for r in rows.iter().filter(|r| r.resolution_us <= 100_000) {
        f = f.arithmetic(
            format!(
                "max {} in {} us / avg {:.0} B per bin",
                r.max_bytes, r.resolution_us, r.avg_bytes
            ),
            r.max_to_avg_ratio,
        );
    }
    Some(f)
}
