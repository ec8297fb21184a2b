//! One module per subcommand. Each has `Args` (clap) and `run(Args) -> anyhow::Result<i32>`
//! returning the exit code: flags, validation, wiring, progress and exit codes. Each body's text
//! is rendered by the `render` module of the crate that owns the body (README, Decisions).

pub mod analyze;
pub mod burst;
pub mod check;
pub mod counters;
pub mod doctor;
pub mod exporter;
pub mod install;
pub mod lab;
pub mod probe;
pub mod sockets;
pub mod trace;
