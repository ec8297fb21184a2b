//! Typed command-line values: durations (`10s`, `500ms`, `1.5s`, `2m`) and byte sizes
//! (`64`, `4k`, `1MiB`). A unit is required for durations so `10` is never ambiguous.

use std::str::FromStr;
use std::time::Duration;

/// A duration typed on the command line.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DurationArg(pub Duration);

impl FromStr for DurationArg {
    type Err = String;

    fn from_str(s: &str) -> Result<DurationArg, String> {
        let t = s.trim();
        let split = t
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .ok_or_else(|| format!("'{s}' has no unit (use e.g. 10s, 500ms, 250us, 2m)"))?;
        let (num, unit) = t.split_at(split);
        let value: f64 = num
            .parse()
            .map_err(|_| format!("'{s}' does not start with a number"))?;
        let ns_per_unit = match unit.trim() {
            "ns" => 1.0,
            "us" | "µs" => 1e3,
            "ms" => 1e6,
            "s" | "sec" => 1e9,
            "m" | "min" => 60e9,
            "h" => 3600e9,
            other => {
                return Err(format!(
                    "'{other}' in '{s}' is not a unit (ns, us, ms, s, m, h)"
                ))
            }
        };
        let ns = value * ns_per_unit;
        if !ns.is_finite() || ns > 1e9 * 86_400.0 * 365.0 {
            return Err(format!("'{s}' is too long"));
        }
        Ok(DurationArg(Duration::from_nanos(ns.round() as u64)))
    }
}

/// A byte count typed on the command line: plain, or with k/K (1000), Ki (1024), M, Mi.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BytesArg(pub usize);

impl FromStr for BytesArg {
    type Err = String;

    fn from_str(s: &str) -> Result<BytesArg, String> {
        let t = s.trim().trim_end_matches(['B', 'b']);
        let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
        let (num, unit) = t.split_at(split);
        let n: u64 = num
            .parse()
            .map_err(|_| format!("'{s}' is not a byte count (e.g. 64, 4k, 1Mi)"))?;
        let mult: u64 = match unit {
            "" => 1,
            "k" | "K" => 1_000,
            "Ki" | "ki" => 1_024,
            "M" | "m" => 1_000_000,
            "Mi" | "mi" => 1_048_576,
            _ => {
                return Err(format!(
                    "'{unit}' in '{s}' is not a size unit (k, Ki, M, Mi)"
                ))
            }
        };
        let v = n
            .checked_mul(mult)
            .filter(|&v| v <= 64 * 1_048_576)
            .ok_or_else(|| format!("'{s}' is above the 64 MiB limit"))?;
        Ok(BytesArg(v as usize))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        let d = |s: &str| s.parse::<DurationArg>().map(|d| d.0);
        assert_eq!(d("10s"), Ok(Duration::from_secs(10)));
        assert_eq!(d("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(d("1.5s"), Ok(Duration::from_millis(1500)));
        assert_eq!(d("2m"), Ok(Duration::from_secs(120)));
        assert_eq!(d("250us"), Ok(Duration::from_micros(250)));
        assert!(d("10").unwrap_err().contains("no unit"));
        assert!(d("10x").unwrap_err().contains("not a unit"));
        assert!(d("s").is_err());
        assert!(d("1.2.3s").is_err());
    }

    #[test]
    fn sizes() {
        let b = |s: &str| s.parse::<BytesArg>().map(|b| b.0);
        assert_eq!(b("64"), Ok(64));
        assert_eq!(b("4k"), Ok(4000));
        assert_eq!(b("1Ki"), Ok(1024));
        assert_eq!(b("2MiB"), Ok(2 * 1_048_576));
        assert!(b("x").is_err());
        assert!(b("1G").is_err());
        assert!(b("100M").is_err());
    }
}
