//! Printers shared by every command, one per format: human text (the ranked findings block,
//! tables and number formatting, fitted to the terminal's width and coloured by severity when
//! asked), JSON, CSV through serde, the JSON error document, and the Prometheus exposition
//! formats (text 0.0.4 and OpenMetrics). Generic over `io::Write`; no
//! measurement and no I/O of its own: the binary decides the layout ([`style::set`]) and where
//! output goes.
//!
//! Command-specific bodies are rendered with these pieces by the `render` module of the crate
//! that owns each body (e.g. `tcpdoctor_host::render`), so every command looks and reads the
//! same.

pub mod chart;
pub mod csv;
pub mod error;
pub mod findings;
pub mod fmt;
pub mod html;
pub mod prometheus;
pub mod style;
pub mod table;
pub mod wrap;

use std::io::{self, Write};

use serde::Serialize;

/// Writes `value` as pretty JSON followed by a newline.
pub fn json<W: Write + ?Sized, T: Serialize>(w: &mut W, value: &T) -> io::Result<()> {
    serde_json::to_writer_pretty(&mut *w, value).map_err(io::Error::other)?;
    writeln!(w)
}

/// Writes `value` as one JSON line (JSON Lines, for `--watch` streams).
pub fn json_line<W: Write + ?Sized, T: Serialize>(w: &mut W, value: &T) -> io::Result<()> {
    serde_json::to_writer(&mut *w, value).map_err(io::Error::other)?;
    writeln!(w)
}
