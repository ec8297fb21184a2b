//! `--html FILE`: the file is created before the run (so a bad path fails at once, not after
//! minutes of measuring) and filled with the page when the report is ready.

use std::fs::File;
use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};

use anyhow::Context as _;

/// An HTML report file opened for writing.
pub struct HtmlOut {
    path: PathBuf,
    file: File,
}

impl HtmlOut {
    /// Creates (or truncates) `path`.
    pub fn create(path: &Path) -> anyhow::Result<HtmlOut> {
        let file = File::create(path)
            .with_context(|| format!("--html {}: cannot create", path.display()))?;
        Ok(HtmlOut {
            path: path.to_path_buf(),
            file,
        })
    }

    /// Writes the page and closes the file; says where on a terminal.
    pub fn write(mut self, page: &str) -> anyhow::Result<()> {
        self.file
            .write_all(page.as_bytes())
            .and_then(|_| self.file.sync_all())
            .with_context(|| format!("--html {}: cannot write", self.path.display()))?;
        if std::io::stderr().is_terminal() {
            let _ = writeln!(
                std::io::stderr(),
                "tcpdoctor: HTML report written to {}",
                self.path.display()
            );
        }
        Ok(())
    }
}

/// Opens `--html` when it was given.
pub fn open(path: Option<&PathBuf>) -> anyhow::Result<Option<HtmlOut>> {
    path.map(|p| HtmlOut::create(p)).transpose()
}
