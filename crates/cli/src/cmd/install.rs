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
    if args.shell == Shell::Bash {
        script = bash_values(&String::from_utf8_lossy(&script)).into_bytes();
    }
    crate::output::with_stdout(|w| w.write_all(&script))?;
    Ok(0)
}

/// Values clap's static bash script cannot know, asked of the host when completing: the
/// namespaces of `ip netns list` after `--netns`, and the interfaces of /sys/class/net as
/// `burst`'s first argument.
fn bash_values(script: &str) -> String {
    let files = "COMPREPLY=($(compgen -f \"${cur}\"))";
    let netns =
        "COMPREPLY=($(compgen -W \"$(ip netns list 2>/dev/null | cut -d' ' -f1)\" -- \"${cur}\"))";
    let mut out = String::with_capacity(script.len() + 512);
    let mut after_netns = false;
    for line in script.lines() {
        if after_netns && line.trim() == files {
            out.push_str(&line.replace(files, netns));
        } else {
            out.push_str(line);
        }
        out.push('\n');
        after_netns = line.trim() == "--netns)";
        if line.trim() == "tcpdoctor__subcmd__burst)" {
            out.push_str(
                "            if [[ ${cur} != -* && ${COMP_CWORD} -eq 2 ]] ; then\n\
                 \x20               COMPREPLY=( $(compgen -W \"$(ls /sys/class/net 2>/dev/null)\" -- \"${cur}\") )\n\
                 \x20               return 0\n\
                 \x20           fi\n",
            );
        }
    }
    out
}

pub fn man(args: ManArgs, cmd: clap::Command) -> anyhow::Result<i32> {
    let mut cmd = cmd.disable_help_subcommand(true);
    cmd.build();
    let Some(dir) = args.dir else {
        let page = page(&cmd, None)?;
        crate::output::with_stdout(|w| w.write_all(&page))?;
        return Ok(0);
    };
    fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    let subcommands: Vec<String> = cmd
        .get_subcommands()
        .filter(|s| !s.is_hide_set())
        .map(|s| s.get_name().to_string())
        .collect();
    let mut pages = vec![("tcpdoctor.1".to_string(), page(&cmd, None)?)];
    for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
        let name = format!("tcpdoctor-{}", sub.get_name());
        let sub = sub
            .clone()
            .display_name(&name)
            .bin_name(format!("tcpdoctor {}", sub.get_name()));
        pages.push((format!("{name}.1"), page(&sub, Some(&subcommands))?));
    }
    for (file, bytes) in pages {
        let path = dir.join(&file);
        fs::write(&path, bytes).with_context(|| format!("writing {}", path.display()))?;
    }
    Ok(0)
}

/// Exit statuses, the same for every command (README, `--help`).
pub const EXIT_STATUS: &[(u8, &str)] = &[
    (0, "healthy: something was measured and nothing above info was found"),
    (1, "findings: at least one finding above info (warning or critical)"),
    (
        2,
        "error: bad input, a refused flag or a failed system call; the one-line message says what and where",
    ),
    (
        3,
        "inconclusive: nothing could be measured, or the run was interrupted before it measured enough (what was measured is still printed); never reported as healthy",
    ),
];

/// Examples per command: (command line, what it does).
fn examples(name: &str) -> &'static [(&'static str, &'static str)] {
    match name {
        "doctor" => &[
            ("tcpdoctor doctor", "diagnose this host"),
            (
                "sudo tcpdoctor doctor --netns blue --window 10s --json",
                "one network namespace, a 10 s window, JSON",
            ),
        ],
        "probe" => &[
            (
                "tcpdoctor probe",
                "connection churn against an embedded loopback server",
            ),
            (
                "tcpdoctor probe http://10.0.0.5:8080/ --mode http -d 30s",
                "HTTP load; each slow request split into network, server and TCP time",
            ),
        ],
        "analyze" => &[
            (
                "tcpdoctor analyze trace.pcap",
                "name the pathologies in a capture, with frame numbers",
            ),
            (
                "tcpdump -i eth0 -w - port 80 | tcpdoctor analyze -",
                "a live capture, read as it is written",
            ),
        ],
        "sockets" => &[
            (
                "tcpdoctor sockets",
                "a census: TIME_WAIT per destination, accept queues, slow readers",
            ),
            (
                "sudo tcpdoctor sockets --watch 1s",
                "sample every second; name the process that closed each TIME_WAIT socket",
            ),
        ],
        "counters" => &[
            (
                "tcpdoctor counters --interval 5s",
                "the kernel TCP counters that moved in 5 s, with their meaning",
            ),
            (
                "tcpdoctor counters --from before.txt --to after.txt",
                "the delta of two saved nstat or netstat -s outputs",
            ),
        ],
        "check" => &[(
            "tcpdoctor check",
            "audit the TCP sysctls and routes, with the arithmetic",
        )],
        "burst" => &[(
            "tcpdoctor burst eth0 --duration 10s",
            "max/avg traffic per time scale from 100 us to 1 s",
        )],
        "lab" => &[
            (
                "sudo tcpdoctor lab incast --rto-min 200ms,5ms",
                "reproduce incast in namespaces, at two RTO floors",
            ),
            (
                "sudo tcpdoctor lab port-exhaustion --fix",
                "reproduce, apply the remedy, measure again",
            ),
            (
                "sudo tcpdoctor lab cleanup",
                "remove what a killed lab run left behind",
            ),
        ],
        "trace" => &[(
            "sudo tcpdoctor trace --duration 30s",
            "each TCP event with its cause and process",
        )],
        "exporter" => &[(
            "tcpdoctor exporter",
            "Prometheus metrics on 127.0.0.1:9977/metrics",
        )],
        "completions" => &[(
            "tcpdoctor completions bash > /usr/share/bash-completion/completions/tcpdoctor",
            "install bash completion",
        )],
        "man" => &[(
            "tcpdoctor man --dir /usr/local/share/man/man1",
            "install these pages",
        )],
        _ => &[
            ("tcpdoctor doctor", "diagnose this host"),
            ("tcpdoctor analyze trace.pcap", "read a capture"),
        ],
    }
}

/// One page: clap_mangen's sections, then EXIT STATUS, EXAMPLES and SEE ALSO. `siblings`:
/// the other subcommands (None for the top page, which lists them all).
fn page(cmd: &clap::Command, siblings: Option<&[String]>) -> anyhow::Result<Vec<u8>> {
    let mut out = Vec::new();
    clap_mangen::Man::new(cmd.clone()).render(&mut out)?;
    let name = cmd.get_name();
    let mut roff = String::new();
    roff.push_str(".SH \"EXIT STATUS\"\n");
    for (code, what) in EXIT_STATUS {
        roff.push_str(&format!(".TP\n\\fB{code}\\fR\n{}\n", escape(what)));
    }
    roff.push_str(".SH EXAMPLES\n");
    for (line, what) in examples(name) {
        roff.push_str(&format!(
            ".TP\n\\fB{}\\fR\n{}\n",
            escape(line),
            escape(what)
        ));
    }
    roff.push_str(".SH \"SEE ALSO\"\n");
    let others: Vec<String> = match siblings {
        Some(all) => std::iter::once("tcpdoctor(1)".to_string())
            .chain(
                all.iter()
                    .filter(|s| s.as_str() != name)
                    .map(|s| format!("tcpdoctor\\-{s}(1)")),
            )
            .collect(),
        None => cmd
            .get_subcommands()
            .filter(|s| !s.is_hide_set())
            .map(|s| format!("tcpdoctor\\-{}(1)", s.get_name()))
            .collect(),
    };
    let tools = "ss(8), nstat(8), tcpdump(8), tc(8), ip\\-netns(8), bpftool(8)";
    roff.push_str(&format!("{}, {tools}\n", others.join(", ")));
    out.extend_from_slice(roff.as_bytes());
    Ok(out)
}

/// Text for roff: backslashes doubled, hyphens escaped, a leading dot or quote protected.
fn escape(text: &str) -> String {
    let t = text.replace('\\', "\\\\").replace('-', "\\-");
    if t.starts_with('.') || t.starts_with('\'') {
        format!("\\&{t}")
    } else {
        t
    }
}
