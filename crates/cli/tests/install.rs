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
    let in_git = std::process::Command::new("git")
        .args(["rev-parse", "--short=12", "HEAD"])
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
