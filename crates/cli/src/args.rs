//! Flag value parsers shared by every command, all on `model::units` so that one grammar
//! holds everywhere (`5ms`, `1.5s`; `16kB` = 16,000 and `16KiB` = 16,384; `100Mbit`; `10k` =
//! 10,000). Each returns clap's `Result<T, String>`: the message becomes the one-line usage
//! error "invalid value '...' for --flag: ...".

use std::time::Duration;

use tcpdoctor_model::units;

/// A duration (a unit is required).
pub fn duration(s: &str) -> Result<Duration, String> {
    s.parse::<units::Duration>()
        .map(|d| d.get())
        .map_err(|e| e.0)
}

/// A duration above zero.
pub fn positive_duration(s: &str) -> Result<Duration, String> {
    match duration(s)? {
        d if d.is_zero() => Err(format!("'{s}' must be above zero")),
        d => Ok(d),
    }
}

/// A size in bytes.
pub fn bytes(s: &str) -> Result<u64, String> {
    s.parse::<units::Bytes>().map(|b| b.get()).map_err(|e| e.0)
}

/// A size above zero.
pub fn positive_bytes(s: &str) -> Result<u64, String> {
    match bytes(s)? {
        0 => Err(format!("'{s}' must be above zero")),
        n => Ok(n),
    }
}

/// A rate in bits per second (above zero by the grammar).
pub fn bit_rate(s: &str) -> Result<f64, String> {
    s.parse::<units::BitRate>()
        .map(|r| r.bits_per_s())
        .map_err(|e| e.0)
}

/// A count at least 1.
pub fn positive_count(s: &str) -> Result<u64, String> {
    match s.parse::<units::Count>().map_err(|e| e.0)?.get() {
        0 => Err(format!("'{s}' must be at least 1")),
        n => Ok(n),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_grammar() {
        assert_eq!(duration("1.5s"), Ok(Duration::from_millis(1500)));
        assert!(duration("4").unwrap_err().contains("no unit"));
        assert!(positive_duration("0s").is_err());
        assert_eq!(bytes("16kB"), Ok(16_000));
        assert_eq!(bytes("16KiB"), Ok(16_384));
        assert!(positive_bytes("0").is_err());
        assert_eq!(bit_rate("1Gbit"), Ok(1e9));
        assert_eq!(positive_count("10k"), Ok(10_000));
        assert!(positive_count("-1").unwrap_err().contains("negative"));
    }
}
