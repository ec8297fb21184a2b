//! Installing tcpdoctor: completions and man pages generated from the clap definitions, and
//! `--version` naming the commit.

mod support;

use support::run;

const SUBCOMMANDS: [&str; 8] = [
    "doctor", "probe", "analyze", "sockets", "counters", "check", "burst", "lab",
];

#[test]
fn completions_for_bash_zsh_and_fish_name_every_subcommand() {
    for shell in ["bash", "zsh", "fish"] {
        let (code, out, err) = run(&["completions", shell]);
        assert_eq!(code, 0, "{shell}: {err}");
        for sub in SUBCOMMANDS {
            assert!(out.contains(sub), "{shell} completion lacks {sub}");
        }
        // A flag of a subcommand, so the script completes more than the first word.
        assert!(
            out.contains("link-speed"),
            "{shell} completion lacks analyze's flags"
        );
    }
    let (code, _, err) = run(&["completions", "tcsh"]);
    assert_eq!(code, 2);
    assert!(err.contains("tcsh"), "{err}");
}

#[test]
fn man_pages_are_written_for_every_subcommand() {
    let (code, page, err) = run(&["man"]);
    assert_eq!(code, 0, "{err}");
    assert!(
        page.starts_with(".ie") || page.contains(".TH tcpdoctor 1"),
        "{page}"
    );
    for sub in SUBCOMMANDS {
        assert!(page.contains(sub), "tcpdoctor.1 does not mention {sub}");
    }
    let dir = std::env::temp_dir().join(format!("tdoc-man-{}", std::process::id()));
    let (code, _, err) = run(&["man", "--dir", dir.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    for sub in SUBCOMMANDS {
        let p = dir.join(format!("tcpdoctor-{sub}.1"));
        let len = std::fs::metadata(&p).map(|m| m.len()).unwrap_or(0);
        assert!(len > 200, "{} missing or near empty", p.display());
        // Issue 24: every page gives all four exit statuses, examples and related pages.
        let text = std::fs::read_to_string(&p).unwrap();
        for section in [".SH \"EXIT STATUS\"", ".SH EXAMPLES", ".SH \"SEE ALSO\""] {
            assert!(text.contains(section), "{}: no {section}", p.display());
        }
        for code in ["\\fB0\\fR", "\\fB1\\fR", "\\fB2\\fR", "\\fB3\\fR"] {
            assert!(
                text.contains(code),
                "{}: exit status {code} missing",
                p.display()
            );
        }
        assert!(
            text.contains("tcpdoctor(1)"),
            "{}: SEE ALSO lacks tcpdoctor(1)",
            p.display()
        );
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Issue 24: the root --help gave exit statuses 0/1/2 and omitted 3.
#[test]
fn help_gives_every_exit_status() {
    let (code, out, _) = run(&["--help"]);
    assert_eq!(code, 0);
    for needle in ["0 healthy", "1 findings", "2 error", "3 inconclusive"] {
        assert!(out.contains(needle), "--help lacks {needle}:\n{out}");
    }
}

#[test]
fn version_names_the_git_commit() {
    let (code, out, _) = run(&["--version"]);
    assert_eq!(code, 0);
    // "tcpdoctor 0.1.0 (3f2a9c1d4e5b)": these tests run from a git checkout.
    let commit = out
        .trim()
        .rsplit_once('(')
        .and_then(|(_, c)| c.strip_suffix(')'))
        .unwrap_or_else(|| panic!("no commit in {out:?}"));
    // The build script asks git; outside a checkout (a source tarball) it says "unknown".
    // Any owner's checkout: the binary may have been built by another user (root) than the
    // one running the test, whose git would refuse a repository it does not own.
    let in_git = std::process::Command::new("git")
        .args(["-c", "safe.directory=*", "rev-parse", "--short=12", "HEAD"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .is_ok_and(|o| o.status.success());
    if in_git {
        assert_eq!(commit.len(), 12, "{out}");
        assert!(commit.chars().all(|c| c.is_ascii_hexdigit()), "{out}");
    } else {
        assert_eq!(commit, "unknown", "{out}");
    }
}

/// Completes `words` (the last one being completed) with the bash script tcpdoctor
/// generates, as bash's programmable completion would; the candidates offered.
fn bash_complete(words: &[&str]) -> Vec<String> {
    let (code, script, err) = run(&["completions", "bash"]);
    assert_eq!(code, 0, "{err}");
    let path = std::env::temp_dir().join(format!("tdoc-compl-{}.bash", std::process::id()));
    std::fs::write(&path, script).unwrap();
    let quoted: Vec<String> = words.iter().map(|w| format!("'{w}'")).collect();
    let cur = words.last().unwrap();
    let prev = words[words.len() - 2];
    let line = format!(
        "source {}; COMP_WORDS=({}); COMP_CWORD={}; _tcpdoctor tcpdoctor '{cur}' '{prev}'; printf '%s\\n' \"${{COMPREPLY[@]}}\"",
        path.display(),
        quoted.join(" "),
        words.len() - 1
    );
    let out = std::process::Command::new("bash")
        .args(["-c", &line])
        .output()
        .unwrap();
    std::fs::remove_file(&path).unwrap();
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(str::to_string)
        .collect()
}

/// Issue 24: bash completion offered file names after `--netns` and options as `burst`'s
/// interface. It now offers `ip netns list` names and /sys/class/net interfaces.
#[test]
fn bash_completes_interfaces_for_burst_and_namespaces_for_netns() {
    assert_eq!(bash_complete(&["tcpdoctor", "burst", "l"]), ["lo"]);
    if unsafe { libc::geteuid() } != 0 {
        if std::env::var("CI").is_ok_and(|v| v == "true") {
            panic!("namespace completion needs root, and CI=true forbids skipping");
        }
        eprintln!("SKIP the --netns half: needs root to create a namespace");
        return;
    }
    let name = format!("tdoc-compl-{}", std::process::id());
    let made = std::process::Command::new("ip")
        .args(["netns", "add", &name])
        .status()
        .unwrap();
    assert!(made.success());
    let offered = bash_complete(&["tcpdoctor", "doctor", "--netns", "tdoc-compl-"]);
    let _ = std::process::Command::new("ip")
        .args(["netns", "del", &name])
        .status();
    assert!(offered.contains(&name), "{offered:?}");
}
