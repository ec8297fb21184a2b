//! Golden files for the fixture tests of several crates (included with `#[path]` by
//! crates/lab/tests/fixtures.rs and crates/trace/tests/fixtures.rs): text compared with the
//! file beside the recording, written anew with `TDOC_BLESS=1`.

use std::path::Path;

/// Compares `got` with the golden file `dir/name.ext`; with `TDOC_BLESS=1` writes it instead.
/// The error names the file and the first line that differs.
pub fn compare(dir: &Path, name: &str, ext: &str, got: &str) -> Result<(), String> {
    let path = dir.join(format!("{name}.{ext}"));
    if std::env::var_os("TDOC_BLESS").is_some() {
        std::fs::write(&path, got).unwrap();
        return Ok(());
    }
    let want = std::fs::read_to_string(&path)
        .map_err(|e| format!("{}: {e} (TDOC_BLESS=1 records it)", path.display()))?;
    if want == got {
        return Ok(());
    }
    let line = want
        .lines()
        .zip(got.lines())
        .position(|(a, b)| a != b)
        .unwrap_or_else(|| want.lines().count().min(got.lines().count()));
    Err(format!(
        "{name}.{ext} differs from line {}:\n  want: {:?}\n  got:  {:?}",
        line + 1,
        want.lines().nth(line).unwrap_or("<end>"),
        got.lines().nth(line).unwrap_or("<end>")
    ))
}
