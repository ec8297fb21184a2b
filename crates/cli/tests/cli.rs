//! Behaviour of the binary itself: help, usage errors, exit codes.

mod support;

#[test]
fn help_lists_every_command() {
    let (code, out, _) = support::run(&["--help"]);
    assert_eq!(code, 0);
    for c in [
        "doctor", "probe", "analyze", "sockets", "counters", "check", "burst", "lab",
    ] {
        assert!(out.contains(c), "--help lacks {c}:\n{out}");
    }
}

#[test]
fn unknown_command_is_a_usage_error() {
    let (code, _, err) = support::run(&["frobnicate"]);
    assert_eq!(code, 2);
    assert!(err.contains("frobnicate"), "{err}");
}

/// Every command's JSON (one document, or each `--watch` line) is stamped with when, where
/// and by which build it was printed, so saved outputs can be lined up later.
#[test]
fn every_commands_json_carries_its_provenance() {
    let root = env!("CARGO_MANIFEST_DIR").to_string() + "/../..";
    let pcap = format!("{root}/tests/data/analyze/syn-drop.pcap");
    let nstat1 = format!("{root}/tests/data/counters/linux-nstat-a.1.txt");
    let nstat2 = format!("{root}/tests/data/counters/linux-nstat-a.2.txt");
    let (_, version, _) = support::run(&["--version"]);
    let uname = |flag: &str| {
        let o = std::process::Command::new("uname")
            .arg(flag)
            .output()
            .unwrap();
        String::from_utf8_lossy(&o.stdout).trim().to_string()
    };
    let (host, kernel) = (uname("-n"), uname("-r"));
    let runs: Vec<Vec<&str>> = vec![
        vec!["check", "--json"],
        vec!["sockets", "--json"],
        vec!["sockets", "--json", "--watch", "100ms", "--count", "2"],
        vec!["counters", "--json"],
        vec!["counters", "--json", "--watch", "100ms", "--count", "2"],
        vec!["counters", "--json", "--from", &nstat1, "--to", &nstat2],
        vec!["doctor", "--json", "--quick", "--window", "100ms"],
        vec!["probe", "--json", "-n", "20"],
        vec!["analyze", "--json", &pcap],
        vec!["burst", "lo", "--json", "--duration", "100ms"],
        vec!["lab", "cleanup", "--json", "--prefix", "tdocnosuchthing"],
    ];
    let mut runs = runs;
    // trace loads BPF programs: root only (a skip outside CI, a failure in CI).
    if support::require_root("every_commands_json_carries_its_provenance (trace)") {
        runs.push(vec![
            "trace",
            "--json",
            "--duration",
            "700ms",
            "--every",
            "300ms",
        ]);
    }
    for args in runs {
        let t0 = std::time::SystemTime::now();
        let (code, out, err) = support::run(&args);
        assert!((0..=3).contains(&code), "{args:?}: exit {code}\n{err}");
        let watch = args.contains(&"--watch") || args[0] == "trace";
        let docs: Vec<serde_json::Value> = if watch {
            out.lines()
                .map(|l| support::json(l, &err))
                // trace's per-event lines carry their time from the start (t_us) only; its
                // periodic summaries and the final report are stamped.
                .filter(|d| d["type"] != "event")
                .collect()
        } else {
            vec![support::json(&out, &err)]
        };
        assert!(docs.len() >= if watch { 2 } else { 1 }, "{args:?}: {out}");
        let mut stamps = Vec::new();
        for d in &docs {
            let at = d["generated_at"].as_str().expect("generated_at");
            let t = humantime::parse_rfc3339(at).unwrap_or_else(|e| panic!("{at}: {e}"));
            // Printed during this run (the clock's millisecond rounding aside).
            let slack = std::time::Duration::from_millis(1);
            assert!(t + slack >= t0, "{args:?}: {at} before the run");
            assert!(
                t <= std::time::SystemTime::now(),
                "{args:?}: {at} in the future"
            );
            stamps.push(t);
            if d["type"] == "summary" {
                continue; // trace's periodic line: a timestamp, not a report
            }
            assert_eq!(d["host_name"], host.as_str(), "{args:?}");
            assert_eq!(d["kernel_release"], kernel.as_str(), "{args:?}");
            let v = d["tcpdoctor_version"].as_str().unwrap();
            let c = d["tcpdoctor_commit"].as_str().unwrap();
            assert!(
                version.contains(&format!("{v} ({c})")),
                "{args:?}: {v} {c} vs {version}"
            );
        }
        // Each line is stamped when printed: the second one interval (>= 100 ms) later.
        if watch {
            let gap = stamps[1].duration_since(stamps[0]).unwrap();
            assert!(
                gap >= std::time::Duration::from_millis(99),
                "{args:?}: {gap:?}"
            );
            let last = docs.last().unwrap();
            assert_eq!(last["schema_version"], 1, "{args:?}: the report comes last");
        }
    }
}
