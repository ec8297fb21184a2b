//! Human formatting of durations, rates and sizes. Units always printed. Durations are
//! formatted in [`tcpdoctor_model::units`], their one home; [`duration`] and [`micros`] are
//! re-exported here for the printers.

use std::fmt::Display;

pub use tcpdoctor_model::units::{duration, micros};

/// `NETFILTER_DROP 4, TCP_INVALID_SYN 3`: labelled counts in the order given (per cause,
/// drop reason, hook, state), as every report lists them; empty for none.
pub fn tally<K: Display, V: Display>(items: impl IntoIterator<Item = (K, V)>) -> String {
    let parts: Vec<String> = items.into_iter().map(|(k, v)| format!("{k} {v}")).collect();
    parts.join(", ")
}

/// `1.2 k`, `3.4 M` style counts (SI, three significant digits).
pub fn count(n: f64) -> String {
    let (v, unit) = if n >= 1e9 {
        (n / 1e9, " G")
    } else if n >= 1e6 {
        (n / 1e6, " M")
    } else if n >= 1e3 {
        (n / 1e3, " k")
    } else {
        (n, "")
    };
    if unit.is_empty() && v.fract() == 0.0 {
        format!("{v:.0}")
    } else if v < 10.0 {
        format!("{v:.2}{unit}")
    } else if v < 100.0 {
        format!("{v:.1}{unit}")
    } else {
        format!("{v:.0}{unit}")
    }
}

/// Bits per second: `940 Mbit/s`.
pub fn bitrate(bits_per_s: f64) -> String {
    let c = count(bits_per_s);
    if c.contains(' ') {
        format!("{c}bit/s")
    } else {
        format!("{c} bit/s")
    }
}

/// Bytes with binary units: `16 KiB`, `1.5 MiB`.
pub fn bytes(n: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = n as f64;
    let mut i = 0;
    while v >= 1024.0 && i + 1 < UNITS.len() {
        v /= 1024.0;
        i += 1;
    }
    if i == 0 {
        format!("{n} B")
    } else if v < 10.0 {
        format!("{v:.1} {}", UNITS[i])
    } else {
        format!("{v:.0} {}", UNITS[i])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tallies_keep_their_order_and_are_empty_for_none() {
        let m: std::collections::BTreeMap<&str, u64> = [("b", 2), ("a", 10)].into();
        assert_eq!(tally(&m), "a 10, b 2");
        assert_eq!(tally(Vec::<(&str, u64)>::new()), "");
    }

    #[test]
    fn counts_and_bytes() {
        assert_eq!(count(12.0), "12");
        assert_eq!(count(12_345.0), "12.3 k");
        assert_eq!(bytes(16 * 1024), "16 KiB");
        assert_eq!(bytes(100), "100 B");
        assert_eq!(bitrate(940e6), "940 Mbit/s");
    }
}
