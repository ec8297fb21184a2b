//! Records the git commit the binary is built from, for `--version` and the JSON envelope.
//! Outside a git checkout (a source tarball) the commit is "unknown".

use std::path::PathBuf;
use std::process::Command;

fn git(args: &[&str]) -> Option<String> {
    let out = Command::new("git").args(args).output().ok()?;
    if !out.status.success() {
        return None;
    }
    let s = String::from_utf8(out.stdout).ok()?.trim().to_string();
    (!s.is_empty()).then_some(s)
}

fn main() {
    let commit = git(&["rev-parse", "--short=12", "HEAD"]).unwrap_or_else(|| "unknown".into());
    println!("cargo:rustc-env=TCPDOCTOR_GIT_COMMIT={commit}");
    // Rebuild when HEAD moves: HEAD itself (branch switches) and the branch ref it names.
    if let Some(dir) = git(&["rev-parse", "--git-dir"]).map(PathBuf::from) {
        println!("cargo:rerun-if-changed={}", dir.join("HEAD").display());
    }
    if let Some(common) = git(&["rev-parse", "--git-common-dir"]).map(PathBuf::from) {
        println!(
            "cargo:rerun-if-changed={}",
            common.join("packed-refs").display()
        );
        if let Some(branch) = git(&["symbolic-ref", "-q", "HEAD"]) {
            println!("cargo:rerun-if-changed={}", common.join(branch).display());
        }
    }
    println!("cargo:rerun-if-changed=build.rs");
}
