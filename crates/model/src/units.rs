//! One grammar for the quantities people type on the command line: [`Duration`], [`Bytes`],
//! [`BitRate`] and [`Count`], each with exactly one `FromStr`. Every flag of every command
//! parses through these, so `5ms`, `16KiB` and `1Gbit` mean the same thing everywhere.
//!
//! Decisions (also in the README):
//! - Durations need a unit: `ns`, `us` (or `µs`), `ms`, `s`, `m`/`min`, `h`; decimals and
//!   sums are fine (`1.5s`, `1m30s`). A bare number is refused: `10` could be seconds or ms.
//! - Sizes: SI prefixes are powers of 1000 and IEC prefixes powers of 1024, as the standards
//!   say: `16kB` = `16k` = 16,000 bytes, `16KiB` = `16Ki` = 16,384 bytes; `M`/`Mi`, `G`/`Gi`
//!   likewise; `B` is optional. (tc reads `16kb` as 16,384: tcpdoctor passes exact byte
//!   counts to tc, so what you type is what the qdisc gets.)
//! - Rates are bits per second with SI prefixes: `100Mbit`, `1gbit`, `1Gbit/s`, `10Gbps`
//!   (networking's "Gbps": bits, unlike tc's `mbps`, which means megabytes; write `MB/s` for
//!   bytes per second).
//! - Counts take SI suffixes: `10k` = 10,000, `1M` = 1,000,000.
//! - Negative values, NaN, infinities and empty strings are refused with a one-line reason.
//!
//! It is also the one home of durations printed for people ([`duration`], [`micros`] and
//! their siblings below): every report formats a duration through one of these. Their
//! styles differ where reports have always differed (a space before the unit or not, how
//! many decimals); each function names its style and its tests pin its exact text.

use std::fmt;
use std::str::FromStr;

/// A parse error: one line that names the text and says what was expected.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UnitError(pub String);

impl fmt::Display for UnitError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for UnitError {}

fn err<T>(msg: String) -> Result<T, UnitError> {
    Err(UnitError(msg))
}

/// Splits `s` into a non-negative decimal number and the unit text after it.
fn number_and_unit<'a>(s: &'a str, example: &str) -> Result<(f64, &'a str), UnitError> {
    let t = s.trim();
    if t.starts_with('-') {
        return err(format!("'{s}' is negative; expected e.g. {example}"));
    }
    let t = t.strip_prefix('+').unwrap_or(t);
    let end = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.' || c == '_'))
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(end);
    let num: String = num.chars().filter(|&c| c != '_').collect();
    if num.is_empty() {
        return err(format!(
            "'{s}' does not start with a number; expected e.g. {example}"
        ));
    }
    let v: f64 = num
        .parse()
        .map_err(|_| UnitError(format!("'{s}' is not a number; expected e.g. {example}")))?;
    if !v.is_finite() {
        return err(format!("'{s}' is not a finite number"));
    }
    Ok((v, unit.trim()))
}

/// A duration typed by a person (`250us`, `1.5s`, `1m30s`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Duration(pub std::time::Duration);

impl Duration {
    pub fn get(self) -> std::time::Duration {
        self.0
    }
}

impl From<Duration> for std::time::Duration {
    fn from(d: Duration) -> std::time::Duration {
        d.0
    }
}

const DURATION_EXAMPLE: &str = "250us, 5ms, 1.5s, 2m";

impl FromStr for Duration {
    type Err = UnitError;

    fn from_str(s: &str) -> Result<Duration, UnitError> {
        let mut rest = s.trim();
        if rest.is_empty() {
            return err(format!("empty duration; expected e.g. {DURATION_EXAMPLE}"));
        }
        let mut total_ns = 0f64;
        while !rest.is_empty() {
            let (v, after) = number_and_unit(rest, DURATION_EXAMPLE)?;
            let unit_end = after
                .find(|c: char| c.is_ascii_digit() || c == '.')
                .unwrap_or(after.len());
            let (unit, tail) = after.split_at(unit_end);
            let ns = match unit.trim() {
                "ns" => 1.0,
                "us" | "µs" => 1e3,
                "ms" => 1e6,
                "s" | "sec" => 1e9,
                "m" | "min" => 60e9,
                "h" => 3600e9,
                "" => {
                    return err(format!(
                        "'{s}' has no unit; expected e.g. {DURATION_EXAMPLE}"
                    ))
                }
                other => {
                    return err(format!(
                        "'{other}' in '{s}' is not a duration unit (ns, us, ms, s, m, h)"
                    ))
                }
            };
            total_ns += v * ns;
            rest = tail.trim_start();
        }
        // A year is far beyond anything tcpdoctor waits for, and far inside u64 nanoseconds.
        if total_ns > 365.0 * 86_400e9 {
            return err(format!("'{s}' is longer than a year"));
        }
        Ok(Duration(std::time::Duration::from_nanos(
            total_ns.round() as u64
        )))
    }
}

impl fmt::Display for Duration {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let ns = self.0.as_nanos();
        let (v, unit) = if ns == 0 {
            (0.0, "s")
        } else if ns.is_multiple_of(1_000_000_000) {
            (ns as f64 / 1e9, "s")
        } else if ns.is_multiple_of(1_000_000) {
            (ns as f64 / 1e6, "ms")
        } else if ns.is_multiple_of(1_000) {
            (ns as f64 / 1e3, "us")
        } else {
            (ns as f64, "ns")
        };
        write!(f, "{v}{unit}")
    }
}

/// A size in bytes (`1500`, `16KiB`, `64kB`, `1M`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Bytes(pub u64);

impl Bytes {
    pub fn get(self) -> u64 {
        self.0
    }
}

const BYTES_EXAMPLE: &str = "1500, 64kB, 16KiB, 1MiB";

/// The multiplier of an SI or IEC prefix (`k`, `Ki`, ...), case-insensitive for the letter.
fn prefix(p: &str) -> Option<f64> {
    let (letter, iec) = match p.strip_suffix('i').or_else(|| p.strip_suffix('I')) {
        Some(l) => (l, true),
        None => (p, false),
    };
    let power = match letter {
        "" => 0,
        "k" | "K" => 1,
        "m" | "M" => 2,
        "g" | "G" => 3,
        "t" | "T" => 4,
        _ => return None,
    };
    if iec && power == 0 {
        return None;
    }
    let base: f64 = if iec { 1024.0 } else { 1000.0 };
    Some(base.powi(power))
}

impl FromStr for Bytes {
    type Err = UnitError;

    fn from_str(s: &str) -> Result<Bytes, UnitError> {
        let (v, unit) = number_and_unit(s, BYTES_EXAMPLE)?;
        let p = unit
            .strip_suffix('B')
            .or_else(|| unit.strip_suffix('b'))
            .unwrap_or(unit);
        let Some(mult) = prefix(p) else {
            return err(format!(
                "'{unit}' in '{s}' is not a size unit (k/kB = 1000, Ki/KiB = 1024, M, Mi, G, Gi)"
            ));
        };
        let b = (v * mult).round();
        if b > u64::MAX as f64 / 2.0 {
            return err(format!("'{s}' is too large"));
        }
        Ok(Bytes(b as u64))
    }
}

impl fmt::Display for Bytes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let b = self.0;
        for (div, unit) in [(1u64 << 30, "GiB"), (1 << 20, "MiB"), (1 << 10, "KiB")] {
            if b >= div && b.is_multiple_of(div) {
                return write!(f, "{}{unit}", b / div);
            }
        }
        write!(f, "{b}B")
    }
}

/// A rate in bits per second (`100Mbit`, `1gbit`, `10Gbps`, `12.5MB/s`).
#[derive(Clone, Copy, Debug, PartialEq, PartialOrd, Default)]
pub struct BitRate(pub f64);

impl BitRate {
    pub fn bits_per_s(self) -> f64 {
        self.0
    }
}

const RATE_EXAMPLE: &str = "100Mbit, 1Gbit, 10Gbps, 12.5MB/s";

impl FromStr for BitRate {
    type Err = UnitError;

    fn from_str(s: &str) -> Result<BitRate, UnitError> {
        let (v, unit) = number_and_unit(s, RATE_EXAMPLE)?;
        let u = unit.strip_suffix("/s").unwrap_or(unit);
        let (p, bits_per_unit) = if let Some(p) = u
            .strip_suffix("bit")
            .or_else(|| u.strip_suffix("Bit"))
            .or_else(|| u.strip_suffix("bps"))
        {
            (p, 1.0)
        } else if let Some(p) = u.strip_suffix('B') {
            if !unit.ends_with("/s") {
                return err(format!(
                    "'{s}' is ambiguous: write bits as {v}{p}bit or bytes per second as {v}{p}B/s"
                ));
            }
            (p, 8.0)
        } else if u.is_empty() {
            return err(format!("'{s}' has no unit; expected e.g. {RATE_EXAMPLE}"));
        } else {
            (u, 1.0)
        };
        let Some(mult) = prefix(p) else {
            return err(format!(
                "'{unit}' in '{s}' is not a rate unit (bit, kbit, Mbit, Gbit, bps, MB/s)"
            ));
        };
        let r = v * mult * bits_per_unit;
        if r <= 0.0 {
            return err(format!("'{s}' must be above zero"));
        }
        Ok(BitRate(r))
    }
}

impl fmt::Display for BitRate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let r = self.0;
        for (div, unit) in [(1e12, "Tbit"), (1e9, "Gbit"), (1e6, "Mbit"), (1e3, "kbit")] {
            if r >= div {
                return write!(f, "{}{unit}", r / div);
            }
        }
        write!(f, "{r}bit")
    }
}

/// A count (`200`, `10k`, `1.5M`): SI suffixes, a whole number.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Count(pub u64);

impl Count {
    pub fn get(self) -> u64 {
        self.0
    }
}

impl FromStr for Count {
    type Err = UnitError;

    fn from_str(s: &str) -> Result<Count, UnitError> {
        let (v, unit) = number_and_unit(s, "200, 10k, 1.5M")?;
        let mult = match unit {
            "" => 1.0,
            "k" | "K" => 1e3,
            "M" => 1e6,
            "G" => 1e9,
            other => {
                return err(format!(
                    "'{other}' in '{s}' is not a count suffix (k = 1000, M = 1,000,000, G)"
                ))
            }
        };
        let n = v * mult;
        if n.fract() != 0.0 {
            return err(format!("'{s}' is not a whole number"));
        }
        if n > u64::MAX as f64 / 2.0 {
            return err(format!("'{s}' is too large"));
        }
        Ok(Count(n as u64))
    }
}

// Durations printed for people. Each style below is the exact text some report prints
// (and its goldens hold); a new report picks [`duration`] unless it matches another.

/// `850us`, `1.23ms`, `40.1ms`, `301ms`, `1.004s`: three significant digits, no space, the
/// unit chosen by magnitude. The style of tables and charts.
pub fn duration(d: std::time::Duration) -> String {
    micros(d.as_micros() as u64)
}

/// Like [`duration`], from microseconds.
pub fn micros(us: u64) -> String {
    if us < 1_000 {
        format!("{us}us")
    } else if us < 1_000_000 {
        let ms = us as f64 / 1_000.0;
        if ms < 10.0 {
            format!("{ms:.2}ms")
        } else if ms < 100.0 {
            format!("{ms:.1}ms")
        } else {
            format!("{ms:.0}ms")
        }
    } else {
        format!("{:.3}s", us as f64 / 1_000_000.0)
    }
}

/// Like [`micros`], from nanoseconds, keeping a tenth of a microsecond below 10 us:
/// `0.8us`, `9.5us`, then `12us`, `1.23ms`.
pub fn nanos(ns: u64) -> String {
    if ns < 10_000 {
        format!("{:.1}us", ns as f64 / 1000.0)
    } else {
        micros(ns / 1000)
    }
}

/// `850 us`, `12.5 ms`, `1.027 s`: a space before the unit; milliseconds to a tenth,
/// seconds to a thousandth. The style of `analyze`'s findings.
pub fn micros_spaced(us: u64) -> String {
    if us < 1_000 {
        format!("{us} us")
    } else if us < 1_000_000 {
        format!("{:.1} ms", us as f64 / 1e3)
    } else {
        format!("{:.3} s", us as f64 / 1e6)
    }
}

/// `840 us`, `4.2 ms`, `120 ms`, `1.02 s`: spaced and short; whole milliseconds (cut, not
/// rounded) from 10 ms, seconds to a hundredth. The style of `probe`'s findings.
pub fn micros_coarse(us: u64) -> String {
    if us >= 1_000_000 {
        format!("{:.2} s", us as f64 / 1e6)
    } else if us >= 10_000 {
        format!("{} ms", us / 1_000)
    } else if us >= 1_000 {
        format!("{:.1} ms", us as f64 / 1_000.0)
    } else {
        format!("{us} us")
    }
}

/// Always milliseconds, from microseconds: `0.8 ms`, `9.9 ms`, then whole (rounded) from
/// 10 ms: `12 ms`, `1500 ms`. The style of `trace`'s attributions.
pub fn micros_in_ms(us: u64) -> String {
    if us >= 10_000 {
        format!("{:.0} ms", us as f64 / 1000.0)
    } else {
        format!("{:.1} ms", us as f64 / 1000.0)
    }
}

/// Milliseconds to a tenth below a second, seconds to a hundredth from one (whole
/// microseconds first): `0.9 ms`, `250.0 ms`, `1.50 s`.
pub fn ms_or_s(d: std::time::Duration) -> String {
    let us = d.as_micros() as u64;
    if us >= 1_000_000 {
        format!("{:.2} s", us as f64 / 1e6)
    } else {
        format!("{:.1} ms", us as f64 / 1e3)
    }
}

/// Whole milliseconds below a second, seconds to a tenth from one: `250 ms`, `1.0 s`,
/// `1.5 s`.
pub fn ms_or_s_coarse(d: std::time::Duration) -> String {
    let ms = d.as_secs_f64() * 1000.0;
    if ms >= 1000.0 {
        format!("{:.1} s", ms / 1000.0)
    } else {
        format!("{ms:.0} ms")
    }
}

/// Seconds as a bare number rounded to a hundredth, as a SYN ladder is listed: `7`, `1.5`,
/// `0.33`.
pub fn bare_secs(d: std::time::Duration) -> String {
    format!("{}", (d.as_secs_f64() * 100.0).round() / 100.0)
}

/// Seconds as a bare number, exactly, from milliseconds: `3`, `1.5`, `1.234`.
pub fn bare_secs_of_ms(ms: u64) -> String {
    format!("{}", ms as f64 / 1000.0)
}

/// A time scale (a bin width, a resolution) by its short name: whole units where exact
/// (`250ns`, `100us`, `1ms`, `1s`), else milliseconds to a tenth (`1.5ms`).
pub fn time_scale(ns: u64) -> String {
    if ns >= 1_000_000_000 && ns.is_multiple_of(1_000_000_000) {
        format!("{}s", ns / 1_000_000_000)
    } else if ns >= 1_000_000 && ns.is_multiple_of(1_000_000) {
        format!("{}ms", ns / 1_000_000)
    } else if ns >= 1_000_000 {
        format!("{:.1}ms", ns as f64 / 1e6)
    } else if ns >= 1_000 && ns.is_multiple_of(1_000) {
        format!("{}us", ns / 1_000)
    } else {
        format!("{ns}ns")
    }
}

/// A count with its thousands grouped, as reports print counts: `6587` -> `6,587`.
pub fn thousands(n: u64) -> String {
    let s = n.to_string();
    let mut out = String::with_capacity(s.len() + s.len() / 3);
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration as D;

    fn d(s: &str) -> Result<D, UnitError> {
        s.parse::<Duration>().map(Duration::get)
    }

    #[test]
    fn durations() {
        assert_eq!(d("10s"), Ok(D::from_secs(10)));
        assert_eq!(d("500ms"), Ok(D::from_millis(500)));
        assert_eq!(d("1.5s"), Ok(D::from_millis(1500)));
        assert_eq!(d("2m"), Ok(D::from_secs(120)));
        assert_eq!(d("1m30s"), Ok(D::from_secs(90)));
        assert_eq!(d("1m 30s"), Ok(D::from_secs(90)));
        assert_eq!(d("250us"), Ok(D::from_micros(250)));
        assert_eq!(d("250µs"), Ok(D::from_micros(250)));
        assert_eq!(d("0s"), Ok(D::ZERO));
        assert!(d("10").unwrap_err().0.contains("no unit"));
        assert!(d("10x").unwrap_err().0.contains("not a duration unit"));
        assert!(d("-1s").unwrap_err().0.contains("negative"));
        assert!(d("s").is_err());
        assert!(d("").is_err());
        assert!(d("1.2.3s").is_err());
        assert!(d("2y").is_err());
        assert!(d("400d").is_err());
        assert_eq!(Duration(D::from_millis(5)).to_string(), "5ms");
        assert_eq!(Duration(D::from_secs(4)).to_string(), "4s");
        assert_eq!(
            d(&Duration(D::from_micros(1500)).to_string()),
            Ok(D::from_micros(1500))
        );
    }

    #[test]
    fn durations_for_people_keep_their_exact_text() {
        assert_eq!(micros(0), "0us");
        assert_eq!(micros(850), "850us");
        assert_eq!(micros(999), "999us");
        assert_eq!(micros(1_000), "1.00ms");
        assert_eq!(micros(1_234), "1.23ms");
        assert_eq!(micros(40_100), "40.1ms");
        assert_eq!(micros(301_000), "301ms");
        assert_eq!(micros(999_999), "1000ms");
        assert_eq!(micros(1_004_000), "1.004s");
        assert_eq!(duration(D::from_nanos(1_234_999)), "1.23ms");
        assert_eq!(duration(D::from_secs(2)), "2.000s");

        assert_eq!(nanos(800), "0.8us");
        assert_eq!(nanos(9_999), "10.0us");
        assert_eq!(nanos(10_000), "10us");
        assert_eq!(nanos(1_234_000), "1.23ms");

        assert_eq!(micros_spaced(850), "850 us");
        assert_eq!(micros_spaced(1_000), "1.0 ms");
        assert_eq!(micros_spaced(12_500), "12.5 ms");
        assert_eq!(micros_spaced(999_999), "1000.0 ms");
        assert_eq!(micros_spaced(1_027_000), "1.027 s");

        assert_eq!(micros_coarse(840), "840 us");
        assert_eq!(micros_coarse(4_200), "4.2 ms");
        assert_eq!(micros_coarse(9_999), "10.0 ms");
        assert_eq!(micros_coarse(10_999), "10 ms");
        assert_eq!(micros_coarse(120_900), "120 ms");
        assert_eq!(micros_coarse(1_020_000), "1.02 s");

        assert_eq!(micros_in_ms(800), "0.8 ms");
        assert_eq!(micros_in_ms(9_900), "9.9 ms");
        assert_eq!(micros_in_ms(12_400), "12 ms");
        assert_eq!(micros_in_ms(12_600), "13 ms");
        assert_eq!(micros_in_ms(1_500_000), "1500 ms");

        assert_eq!(ms_or_s(D::from_micros(900)), "0.9 ms");
        assert_eq!(ms_or_s(D::from_millis(250)), "250.0 ms");
        assert_eq!(ms_or_s(D::from_nanos(999_999_999)), "1000.0 ms");
        assert_eq!(ms_or_s(D::from_millis(1_500)), "1.50 s");

        assert_eq!(ms_or_s_coarse(D::from_millis(250)), "250 ms");
        assert_eq!(ms_or_s_coarse(D::from_micros(999_400)), "999 ms");
        assert_eq!(ms_or_s_coarse(D::from_secs(1)), "1.0 s");
        assert_eq!(ms_or_s_coarse(D::from_millis(1_500)), "1.5 s");

        assert_eq!(bare_secs(D::from_secs(7)), "7");
        assert_eq!(bare_secs(D::from_millis(1_500)), "1.5");
        assert_eq!(bare_secs(D::from_millis(333)), "0.33");
        assert_eq!(bare_secs(D::from_millis(1_005)), "1"); // 100.4999..., binary floating point
        assert_eq!(bare_secs(D::from_millis(1_006)), "1.01");

        assert_eq!(bare_secs_of_ms(3_000), "3");
        assert_eq!(bare_secs_of_ms(1_500), "1.5");
        assert_eq!(bare_secs_of_ms(1_234), "1.234");

        assert_eq!(time_scale(250), "250ns");
        assert_eq!(time_scale(1_500), "1500ns");
        assert_eq!(time_scale(100_000), "100us");
        assert_eq!(time_scale(1_000_000), "1ms");
        assert_eq!(time_scale(1_500_000), "1.5ms");
        assert_eq!(time_scale(2_500_000_000), "2500ms");
        assert_eq!(time_scale(1_000_000_000), "1s");
    }

    #[test]
    fn sizes_are_si_unless_iec() {
        let b = |s: &str| s.parse::<Bytes>().map(Bytes::get);
        assert_eq!(b("64"), Ok(64));
        assert_eq!(b("1500B"), Ok(1500));
        assert_eq!(b("4k"), Ok(4000));
        assert_eq!(b("64kB"), Ok(64_000));
        assert_eq!(b("16kb"), Ok(16_000));
        assert_eq!(b("16KiB"), Ok(16_384));
        assert_eq!(b("1Ki"), Ok(1024));
        assert_eq!(b("2MiB"), Ok(2 * 1_048_576));
        assert_eq!(b("1M"), Ok(1_000_000));
        assert_eq!(b("1.5KiB"), Ok(1536));
        assert!(b("x").is_err());
        assert!(b("-1").unwrap_err().0.contains("negative"));
        assert!(b("3Qi").is_err());
        assert!(b("1i").is_err());
        assert_eq!(Bytes(16_384).to_string(), "16KiB");
        assert_eq!(Bytes(16_000).to_string(), "16000B");
    }

    #[test]
    fn rates_are_bits_per_second() {
        let r = |s: &str| s.parse::<BitRate>().map(BitRate::bits_per_s);
        assert_eq!(r("1gbit"), Ok(1e9));
        assert_eq!(r("100Mbit"), Ok(1e8));
        assert_eq!(r("100mbit/s"), Ok(1e8));
        assert_eq!(r("10Gbps"), Ok(1e10));
        assert_eq!(r("2.5G"), Ok(2.5e9));
        assert_eq!(r("12.5MB/s"), Ok(1e8));
        assert_eq!(r("1000000bit"), Ok(1e6));
        assert!(r("10MB").unwrap_err().0.contains("ambiguous"));
        assert!(r("1000000").unwrap_err().0.contains("no unit"));
        assert!(r("0bit").is_err());
        assert!(r("-1Gbit").is_err());
        assert_eq!(BitRate(1e9).to_string(), "1Gbit");
    }

    #[test]
    fn counts() {
        let c = |s: &str| s.parse::<Count>().map(Count::get);
        assert_eq!(c("200"), Ok(200));
        assert_eq!(c("10k"), Ok(10_000));
        assert_eq!(c("1.5M"), Ok(1_500_000));
        assert_eq!(c("1_000"), Ok(1000));
        assert!(c("1.5").is_err());
        assert!(c("-1").unwrap_err().0.contains("negative"));
        assert!(c("5x").is_err());
    }

    #[test]
    fn groups_thousands() {
        assert_eq!(thousands(0), "0");
        assert_eq!(thousands(999), "999");
        assert_eq!(thousands(6587), "6,587");
        assert_eq!(thousands(1234567), "1,234,567");
    }
}
