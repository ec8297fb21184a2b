//! Issue 21: `analyze` on captures other people recorded (tests/data/public, origins and
//! licenses in its SOURCES.md). Every file is read without a panic; a file that cannot be
//! read is one line on stderr; every finding's severity is the one the policy gives its
//! impact, and a finding at warning or above states an absolute harm. What analyze finds in
//! each file must match the judgement written for it (tests/data/public/judgements.tsv: a
//! network engineer's reading of the capture, and whether the findings are right), and
//! docs/public-captures.md is generated from both (`TDOC_BLESS=1` rewrites it; otherwise it
//! must be up to date). A change in what analyze finds fails here until it is judged again.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;
use tcpdoctor_model::policy::{PATTERN_MIN, SAMPLE_MIN, SHARE_COMMON, STALL_WARNING};
use tcpdoctor_model::{Impact, Rule, Severity};

use super::{support, workspace};

/// The corpus directory, relative to the workspace root.
const DIR: &str = "tests/data/public";

/// Files of the corpus that are not captures.
const NOT_CAPTURES: [&str; 2] = ["SOURCES.md", "judgements.tsv"];

/// One capture as analyze read it.
struct Row {
    file: String,
    code: i32,
    packets: u64,
    tcp_segments: u64,
    connections: u64,
    duplicates: u64,
    /// `pathology:severity` in report order.
    findings: Vec<String>,
    /// The one line on stderr, for a file that cannot be read.
    error: Option<String>,
}

/// The captures of the corpus, by name.
fn captures(root: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(root.join(DIR))
        .unwrap()
        .map(|e| e.unwrap())
        .filter(|e| e.file_type().unwrap().is_file())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| !NOT_CAPTURES.contains(&n.as_str()))
        .collect();
    v.sort();
    v
}

/// Whether an impact states an absolute harm that a warning or more can rest on: operations
/// that failed, a stall or time lost of the policy's warning length, a finite budget under
/// pressure, or short stalls hurting a share of a sample large enough to show it.
fn states_harm(i: &Impact) -> bool {
    let warn_us = STALL_WARNING.as_micros() as u64;
    let common = match i.observed {
        Some(n) if n > 0 => {
            (i.affected >= PATTERN_MIN || n >= SAMPLE_MIN)
                && i.affected as f64 / n as f64 >= SHARE_COMMON
        }
        _ => false,
    };
    i.failed > 0
        || i.worst_stall_us.is_some_and(|s| s >= warn_us)
        || i.time_lost_us.is_some_and(|t| t >= warn_us)
        || i.budget_used.is_some_and(|b| b >= 0.5)
        || i.rate_vs_budget.is_some_and(|r| r >= 1.0)
        || common
}

/// Runs `analyze FILE --json` from the workspace root and checks what every run must hold.
fn read(root: &Path, name: &str) -> Row {
    let rel = format!("{DIR}/{name}");
    let out = Command::new(support::bin())
        .current_dir(root)
        .env("COLUMNS", support::COLUMNS)
        .args(["analyze", &rel, "--json"])
        .output()
        .unwrap();
    let code = out.status.code().unwrap_or(-1);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        [0, 1, 2, 3].contains(&code),
        "{name}: exit {code} (a panic is 101): {stderr}"
    );
    assert!(!stderr.contains("panicked"), "{name}: {stderr}");
    let error = (code == 2).then(|| {
        assert_eq!(stderr.lines().count(), 1, "{name}: one line: {stderr}");
        assert!(
            stderr.contains(&rel),
            "{name}: the line names the file: {stderr}"
        );
        stderr.trim_end().to_string()
    });
    if code != 2 {
        assert!(stderr.trim().is_empty(), "{name}: {stderr}");
    }
    let v: Value = serde_json::from_str(&stdout)
        .unwrap_or_else(|e| panic!("{name}: JSON on stdout ({e}): {stdout}"));
    let mut findings = Vec::new();
    for f in v["findings"].as_array().map(Vec::as_slice).unwrap_or(&[]) {
        let p = f["pathology"].as_str().unwrap();
        let severity: Severity = serde_json::from_value(f["severity"].clone()).unwrap();
        let rule: Rule = serde_json::from_value(f["severity_rule"].clone()).unwrap();
        let impact: Impact = serde_json::from_value(f["impact"].clone()).unwrap();
        let j = impact.judge();
        assert_eq!(
            (j.severity, j.rule),
            (severity, rule),
            "{name}: {p}: the severity is not the policy's for its impact: {f:#}"
        );
        if severity >= Severity::Warning {
            assert!(
                states_harm(&impact),
                "{name}: {p} is {severity:?} without a stated absolute harm: {f:#}"
            );
        }
        findings.push(format!("{p}:{}", f["severity"].as_str().unwrap()));
    }
    let n = |v: &Value| v.as_u64().unwrap_or(0);
    Row {
        file: name.to_string(),
        code,
        packets: n(&v["capture"]["packets"]),
        tcp_segments: n(&v["capture"]["tcp_segments"]),
        connections: n(&v["totals"]["connections"]),
        duplicates: n(&v["totals"]["duplicates"]),
        findings,
        error,
    }
}

/// tests/data/public/judgements.tsv: file, the findings judged (`-` for none, `error` for a
/// file that cannot be read), the judgement (its first word: right, partly, wrong, n/a).
fn judgements(root: &Path) -> BTreeMap<String, (String, String)> {
    let text = std::fs::read_to_string(root.join(DIR).join("judgements.tsv")).unwrap();
    text.lines()
        .filter(|l| !l.trim().is_empty() && !l.starts_with('#'))
        .map(|l| {
            let mut it = l.splitn(3, '\t');
            let (f, found, why) = (it.next().unwrap(), it.next(), it.next());
            let (Some(found), Some(why)) = (found, why) else {
                panic!("judgements.tsv: three tab-separated fields: {l}");
            };
            (f.to_string(), (found.to_string(), why.to_string()))
        })
        .collect()
}

fn found_words(r: &Row) -> String {
    if r.error.is_some() {
        "error".to_string()
    } else if r.findings.is_empty() {
        "-".to_string()
    } else {
        r.findings.join(",")
    }
}

/// docs/public-captures.md from the rows and their judgements.
fn render(rows: &[Row], judged: &BTreeMap<String, (String, String)>) -> String {
    let mut verdicts: BTreeMap<&str, u32> = BTreeMap::new();
    let mut warned = 0;
    for r in rows {
        let why = &judged[&r.file].1;
        *verdicts
            .entry(why.split([':', ' ']).next().unwrap_or(""))
            .or_default() += 1;
        warned += r
            .findings
            .iter()
            .filter(|f| f.ends_with(":warning") || f.ends_with(":critical"))
            .count();
    }
    let mut s = String::from(
        "# What analyze finds in public captures\n\n\
         Generated by `public_captures_are_read_without_panic_and_judged_by_stated_harm`\n\
         (`crates/cli/tests/analyze/public.rs`; `TDOC_BLESS=1 cargo test -p tcpdoctor --test analyze public`\n\
         rewrites it) from `tcpdoctor analyze FILE --json` on every capture in `tests/data/public`\n\
         (origins and licenses: its `SOURCES.md`) and the judgement written for each in its\n\
         `judgements.tsv`: a network engineer's reading of the packets (tshark), and whether\n\
         the findings name the right cause at a severity its absolute harm supports. The test\n\
         fails when what analyze finds changes, until it is judged again.\n\n",
    );
    s.push_str(&format!(
        "{} captures, {} findings at warning or above. Judgements: {}.\n\n",
        rows.len(),
        warned,
        verdicts
            .iter()
            .map(|(k, n)| format!("{n} {k}"))
            .collect::<Vec<_>>()
            .join(", ")
    ));
    s.push_str(
        "| capture | exit | packets | TCP segments | connections | findings (severity) | judgement |\n\
         |---|---:|---:|---:|---:|---|---|\n",
    );
    for r in rows {
        let findings = match &r.error {
            Some(e) => format!(
                "error: {}",
                e.trim_start_matches("tcpdoctor: error: ")
                    .replace(&format!("{DIR}/"), "")
            ),
            None if r.findings.is_empty() => "none".to_string(),
            None => r
                .findings
                .iter()
                .map(|f| {
                    let (p, sev) = f.split_once(':').unwrap();
                    format!("{p} ({sev})")
                })
                .collect::<Vec<_>>()
                .join(", "),
        };
        let dups = if r.duplicates > 0 {
            format!(" ({} duplicates)", r.duplicates)
        } else {
            String::new()
        };
        s.push_str(&format!(
            "| `{}` | {} | {} | {}{dups} | {} | {} | {} |\n",
            r.file,
            r.code,
            r.packets,
            r.tcp_segments,
            r.connections,
            findings.replace('|', "\\|"),
            judged[&r.file].1.replace('|', "\\|")
        ));
    }
    s
}

#[test]
fn public_captures_are_read_without_panic_and_judged_by_stated_harm() {
    let root = workspace();
    let names = captures(&root);
    assert!(names.len() >= 30, "{names:?}");
    // Every capture has its origin and license written down.
    let sources = std::fs::read_to_string(root.join(DIR).join("SOURCES.md")).unwrap();
    for n in &names {
        assert!(
            sources.contains(&format!("`{n}`")),
            "{n} is not in SOURCES.md"
        );
    }
    let rows: Vec<Row> = names.iter().map(|n| read(&root, n)).collect();
    let judged = judgements(&root);
    let mut stale = Vec::new();
    for r in &rows {
        match judged.get(&r.file) {
            Some((found, _)) if *found == found_words(r) => {}
            Some((found, _)) => stale.push(format!(
                "{}: judged {found}, analyze now finds {}",
                r.file,
                found_words(r)
            )),
            None => stale.push(format!("{}: not judged ({})", r.file, found_words(r))),
        }
    }
    for f in judged.keys() {
        if !names.contains(f) {
            stale.push(format!("{f}: judged, but no such capture"));
        }
    }
    assert!(
        stale.is_empty(),
        "judge these again in tests/data/public/judgements.tsv:\n{}",
        stale.join("\n")
    );
    let doc = render(&rows, &judged);
    let path: PathBuf = root.join("docs/public-captures.md");
    if std::env::var_os("TDOC_BLESS").is_some() {
        std::fs::write(&path, &doc).unwrap();
    }
    let written = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        written == doc,
        "docs/public-captures.md is out of date: TDOC_BLESS=1 cargo test -p tcpdoctor --test analyze public"
    );
}
