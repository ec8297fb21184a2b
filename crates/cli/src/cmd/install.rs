//! `tcpdoctor completions SHELL` and `tcpdoctor man`: generated from the clap definitions, so
//! they never drift from the flags the binary accepts.

use std::fs;
use std::path::PathBuf;

use anyhow::Context;
use clap_complete::Shell;

#[derive(clap::Args, Debug)]
#[command(after_help = "Install, e.g.:\n  \
    tcpdoctor completions bash > /usr/share/bash-completion/completions/tcpdoctor\n  \
    tcpdoctor completions zsh > /usr/local/share/zsh/site-functions/_tcpdoctor\n  \
    tcpdoctor completions fish > ~/.config/fish/completions/tcpdoctor.fish")]
pub struct CompletionsArgs {
    /// The shell to generate for.
    #[arg(value_enum)]
    shell: Shell,
}

#[derive(clap::Args, Debug)]
#[command(after_help = "Install, e.g.: tcpdoctor man --dir /usr/local/share/man/man1 && mandb")]
pub struct ManArgs {
    /// Write tcpdoctor.1 and tcpdoctor-SUBCOMMAND.1 into this directory (created if missing)
    /// instead of printing tcpdoctor.1 to standard output.
    #[arg(long, value_name = "DIR")]
    dir: Option<PathBuf>,
}

pub fn completions(args: CompletionsArgs, mut cmd: clap::Command) -> anyhow::Result<i32> {
    let mut script = Vec::new();
    clap_complete::generate(args.shell, &mut cmd, "tcpdoctor", &mut script);
    crate::output::with_stdout(|w| w.write_all(&script))?;
    Ok(0)
}

pub fn man(args: ManArgs, cmd: clap::Command) -> anyhow::Result<i32> {
    let Some(dir) = args.dir else {
        let mut page = Vec::new();
        clap_mangen::Man::new(cmd).render(&mut page)?;
        crate::output::with_stdout(|w| w.write_all(&page))?;
        return Ok(0);
    };
    fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    clap_mangen::generate_to(cmd, &dir)
        .with_context(|| format!("writing man pages into {}", dir.display()))?;
    Ok(0)
}
