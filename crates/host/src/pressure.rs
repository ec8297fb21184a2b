//! CPU pressure stall information (`/proc/pressure/cpu`, Documentation/accounting/psi.rst):
//! the time during which at least one runnable task on the host waited for a CPU. A probe
//! reads it around its run, so that a latency spike no TCP timer explains can be set against
//! how contended the host's CPUs were (the probe, its server and everything else share them).

use std::path::Path;

use crate::Error;

/// Where the kernel publishes CPU pressure.
pub const CPU_PRESSURE_PATH: &str = "/proc/pressure/cpu";

/// Microseconds, since boot, during which some task waited for a CPU (the `some` line's
/// `total`). `Ok(None)` when the kernel has no PSI (built without it, or booted with
/// `psi=0`: the file is absent or refuses reads).
pub fn cpu_some_total_us() -> Result<Option<u64>, Error> {
    read_some_total(Path::new(CPU_PRESSURE_PATH))
}

fn read_some_total(path: &Path) -> Result<Option<u64>, Error> {
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e)
            if matches!(
                e.kind(),
                std::io::ErrorKind::NotFound | std::io::ErrorKind::Unsupported
            ) || e.raw_os_error() == Some(libc::EOPNOTSUPP) =>
        {
            return Ok(None)
        }
        Err(source) => {
            return Err(Error::Read {
                path: path.to_path_buf(),
                source,
            })
        }
    };
    parse_some_total(&text)
        .map(Some)
        .map_err(|message| Error::Parse {
            path: path.to_path_buf(),
            line: 1,
            message,
        })
}

/// The `total=` of the `some` line of a pressure file.
fn parse_some_total(text: &str) -> Result<u64, String> {
    let line = text
        .lines()
        .find(|l| l.starts_with("some "))
        .ok_or("no 'some' line")?;
    let total = line
        .split_whitespace()
        .find_map(|f| f.strip_prefix("total="))
        .ok_or("no total= on the 'some' line")?;
    total
        .parse()
        .map_err(|_| format!("total '{total}' is not an integer"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_some_total_is_read_in_microseconds() {
        let text = "some avg10=0.12 avg60=1.06 avg300=5.70 total=6210363360\n\
                    full avg10=0.00 avg60=0.00 avg300=0.00 total=0\n";
        assert_eq!(parse_some_total(text), Ok(6_210_363_360));
    }

    #[test]
    fn a_malformed_pressure_file_is_an_error() {
        assert!(parse_some_total("full avg10=0.00 total=0\n").is_err());
        assert!(parse_some_total("some avg10=0.00 avg60=0.00\n").is_err());
        assert!(parse_some_total("some total=lots\n").is_err());
    }

    #[test]
    fn this_hosts_cpu_pressure_only_grows() {
        // PSI may be off on a host: then there is nothing to compare.
        let Some(a) = cpu_some_total_us().expect("readable") else {
            eprintln!("skipped: no /proc/pressure/cpu on this kernel");
            return;
        };
        let b = cpu_some_total_us().expect("readable").expect("still there");
        assert!(b >= a, "{a} then {b}");
    }
}
