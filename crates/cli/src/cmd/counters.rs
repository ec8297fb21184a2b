//! `tcpdoctor counters` (not built yet: see its issue).

/// Not built yet.
#[derive(clap::Args, Debug)]
pub struct Args {}

pub fn run(_args: Args) -> anyhow::Result<i32> {
    anyhow::bail!("'counters' is not implemented yet")
}
