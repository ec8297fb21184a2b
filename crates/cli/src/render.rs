//! Printers that stay in the binary: `analyze`'s text, CSV and HTML page. Every other command's body is
//! rendered by the `render` module of the library that owns it (README, Decisions); analyze's
//! body is made of `tcpdoctor_analyze` and `tcpdoctor_capture` types, and neither home fits:
//! `tcpdoctor_analyze` stays pure of output (no printers: segments in, findings out), and
//! `tcpdoctor_report` depends on the model only, so it cannot name those types.

pub mod analyze;
