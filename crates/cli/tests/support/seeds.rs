//! The field reports' own programs, built as published, for tests that must be right on
//! inputs nobody here wrote.
//!
//! The reports live outside this repository (`../shared/background/` beside the checkout, or
//! `$TDOC_SEEDS_DIR`), and none of their code is copied into it: a test reads the report,
//! takes the program text between the report's own section markers, restores the line breaks
//! the mail archive lost (each preprocessor directive on a line of its own; nothing else is
//! changed), and compiles it with the system's C compiler into a temporary directory that is
//! removed when the [`Seed`] is dropped.
//!
//! Outside CI a missing report or compiler skips the test with its reason; in CI
//! (`CI=true`) it fails, as every other skip does.

use std::path::{Path, PathBuf};
use std::process::Command;

/// Report 003: a SO_LINGER-0 connect/send/read/close loop against a server that reads and
/// closes first; a few connections in 100,000 meet a stale ACK.
pub const STALE_ACK_RACE: &str = "003_a3a59db202bbdf83.txt";

/// A field report's C programs, compiled.
pub struct Seed {
    dir: PathBuf,
}

impl Seed {
    /// The compiled programs of `report` (e.g. [`STALE_ACK_RACE`]), or `None` (after printing
    /// why) when the reports or a C compiler are not on this machine and the test may skip.
    pub fn build(report: &str, test: &str) -> Option<Seed> {
        let Some(path) = locate(report) else {
            return skip(
                test,
                &format!(
                    "field report {report} not found (set TDOC_SEEDS_DIR, or check out beside ../shared/background)"
                ),
            );
        };
        let text = std::fs::read_to_string(&path)
            .unwrap_or_else(|e| panic!("read {}: {e}", path.display()));
        let programs = programs(&text);
        assert!(
            !programs.is_empty(),
            "{}: no program section (`==== name.c ====`) found",
            path.display()
        );
        let dir = std::env::temp_dir().join(format!(
            "tdoc-seed-{}-{}",
            std::process::id(),
            super::unique_id()
        ));
        std::fs::create_dir_all(&dir).expect("create seed dir");
        let seed = Seed { dir };
        for (name, source) in programs {
            let src = seed.dir.join(&name);
            std::fs::write(&src, source).expect("write seed source");
            let exe = seed.dir.join(name.trim_end_matches(".c"));
            let out = match Command::new("cc").arg("-o").arg(&exe).arg(&src).output() {
                Ok(o) => o,
                Err(e) => return skip(test, &format!("no C compiler (cc: {e})")),
            };
            assert!(
                out.status.success(),
                "cc {name} from {}: {}",
                path.display(),
                String::from_utf8_lossy(&out.stderr)
            );
        }
        Some(seed)
    }

    /// Path of the compiled program `name` (its source file name without `.c`).
    pub fn program(&self, name: &str) -> PathBuf {
        let p = self.dir.join(name);
        assert!(p.exists(), "seed program {name} was not built");
        p
    }
}

impl Seed {
    /// Starts program `name` inside `ns`, its output discarded, on CPU `cpu` alone when
    /// given and the machine has it (`taskset`; the program is unchanged); it is killed when
    /// `ns` is dropped (or by the caller, by the child's PID). Report 003's race needs the
    /// client's reset and the server's close handled at once on two CPUs: its programs fired
    /// it 14, 0 and 4 times in 10 s pinned apart, 0, 1 and 0 times unpinned, interleaved,
    /// while a full suite and a release build ran on this machine (2 CPUs).
    pub fn spawn_on(
        &self,
        ns: &super::Netns,
        name: &str,
        cpu: Option<usize>,
    ) -> std::process::Child {
        let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
        let mut cmd = Command::new("ip");
        cmd.args(["netns", "exec", &ns.name]);
        if let Some(cpu) = cpu.filter(|&c| c < cpus) {
            cmd.args(["taskset", "-c", &cpu.to_string()]);
        }
        cmd.arg(self.program(name))
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("spawn seed program {name} in {}: {e}", ns.name))
    }
}

impl Drop for Seed {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn skip<T>(test: &str, why: &str) -> Option<T> {
    if std::env::var("CI").map(|v| v == "true").unwrap_or(false) {
        panic!("{test}: {why}, and CI=true forbids skipping");
    }
    eprintln!("SKIP {test}: {why}");
    None
}

/// The report's path: `$TDOC_SEEDS_DIR`, else `shared/background` beside the checkout.
fn locate(report: &str) -> Option<PathBuf> {
    let mut dirs: Vec<PathBuf> = Vec::new();
    if let Some(d) = std::env::var_os("TDOC_SEEDS_DIR") {
        dirs.push(PathBuf::from(d));
    }
    // CARGO_MANIFEST_DIR is crates/cli: the checkout is two levels up.
    let checkout = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    dirs.push(checkout.join("../shared/background"));
    dirs.into_iter()
        .map(|d| d.join(report))
        .find(|p| p.is_file())
}

/// The `(file name, source)` of each program section of a report: a header line
/// `==== name.c ====` followed by the program, up to the next `8<` marker or the end.
fn programs(text: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut rest = text;
    while let Some(at) = rest.find(".c =") {
        // The name runs back from ".c" to the space before it.
        let head = &rest[..at];
        let start = head.rfind(|c: char| c.is_whitespace()).map_or(0, |i| i + 1);
        let name = format!("{}.c", &head[start..]);
        // Skip the rest of the header's '=' run, then the marker line after it, if any.
        let after = &rest[at + ".c".len()..];
        let mut body = after.trim_start_matches(|c: char| c == '=' || c.is_whitespace());
        if let Some(m) = body.find("8<") {
            if body[..m]
                .trim_matches(|c: char| c == '=' || c.is_whitespace())
                .is_empty()
            {
                body = &body[m + 2..];
                body = body.trim_start_matches(|c: char| c == '=' || c.is_whitespace());
            }
        }
        let end = body.find("8<").map_or(body.len(), |m| {
            body[..m]
                .rfind(|c: char| c != '=' && !c.is_whitespace())
                .map_or(0, |i| i + 1)
        });
        let source = restore_lines(body[..end].trim());
        if !name.starts_with('.') && !source.is_empty() {
            out.push((name, source));
        }
        rest = &body[end..];
    }
    out
}

/// Puts each preprocessor directive back on a line of its own: `#include <...>` ends at its
/// `>`, `#define NAME(args) (body)` at the parenthesis that closes its body.
fn restore_lines(flat: &str) -> String {
    let b = flat.as_bytes();
    let mut out = String::with_capacity(flat.len() + 64);
    let mut i = 0;
    while i < b.len() {
        let end = if flat[i..].starts_with("#include") {
            flat[i..].find('>').map(|j| i + j + 1)
        } else if flat[i..].starts_with("#define") {
            define_end(flat, i)
        } else {
            None
        };
        match end {
            Some(e) => {
                out.push('\n');
                out.push_str(&flat[i..e]);
                out.push('\n');
                i = e;
            }
            None => {
                let c = flat[i..].chars().next().expect("in bounds");
                out.push(c);
                i += c.len_utf8();
            }
        }
    }
    out.push('\n');
    out
}

/// End of a `#define NAME(params) (body)` starting at `at`: the body's closing parenthesis.
fn define_end(s: &str, at: usize) -> Option<usize> {
    let params = at + s[at..].find(')')? + 1;
    let open = params + s[params..].find(|c: char| !c.is_whitespace())?;
    if !s[open..].starts_with('(') {
        return None;
    }
    let mut depth = 0usize;
    for (j, c) in s[open..].char_indices() {
        match c {
            '(' => depth += 1,
            ')' => {
                depth -= 1;
                if depth == 0 {
                    return Some(open + j + 1);
                }
            }
            _ => {}
        }
    }
    None
}
