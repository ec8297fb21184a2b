//! Renderers shared by every command: the ranked findings block, aligned tables, number and
//! duration formatting, and JSON. Generic over `io::Write`; no measurement, no I/O of its own.
//!
//! Command-specific bodies are rendered by the `cli` crate's command modules with these
//! pieces, so every command looks and reads the same.

pub mod findings;
pub mod fmt;
pub mod table;

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
