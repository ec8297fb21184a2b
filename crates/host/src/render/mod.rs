//! Each host command's document and its human text: what `tcpdoctor sockets`, `counters`,
//! `burst` and `check` print, built on `tcpdoctor_report`'s printers (findings block, tables,
//! number formats). Writes to any `io::Write`; it measures nothing and reads no terminal: the
//! width and colour come from `tcpdoctor_report::style`, set by the binary, and anything else
//! a renderer needs (rows per table, `--all`) is a parameter.

pub mod burst;
pub mod check;
pub mod counters;
pub mod sockets;
