//! HTML reports (`--html FILE`) rendered by a real browser: headless Chromium loads each
//! report from disk with networking off, and the test checks that the page logged no console
//! message, that its key texts are in the rendered DOM, that its charts are inline SVG, and
//! that the screenshot is a real image.

mod support;

use std::path::{Path, PathBuf};
use std::process::Command;

/// A directory removed when dropped.
struct TempDir(PathBuf);

impl TempDir {
    fn new(tag: &str) -> TempDir {
        let p = std::env::temp_dir().join(format!("tdoc-html-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&p);
        std::fs::create_dir_all(&p).unwrap();
        TempDir(p)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn chromium() -> Option<&'static str> {
    ["chromium", "chromium-browser"].into_iter().find(|c| {
        Command::new(c)
            .arg("--version")
            .output()
            .is_ok_and(|o| o.status.success())
    })
}

/// What the browser made of a page.
struct Rendered {
    dom: String,
    console: Vec<String>,
    png_bytes: u64,
}

/// Loads `page` in headless Chromium: the DOM after load, console lines, screenshot size.
fn render(page: &Path, dir: &Path) -> Rendered {
    let browser = chromium().expect("chromium");
    let url = format!("file://{}", page.display());
    let run = |extra: &[&str], profile: &str| {
        Command::new(browser)
            .args([
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                "--no-first-run",
                "--enable-logging=stderr",
                "--v=0",
                "--window-size=1100,2400",
            ])
            .arg(format!("--user-data-dir={}", dir.join(profile).display()))
            .args(extra)
            .arg(&url)
            .output()
            .expect("run chromium")
    };
    let dom = run(&["--dump-dom"], "profile-dom");
    let png = dir.join("page.png");
    let shot = run(
        &[&format!("--screenshot={}", png.display())],
        "profile-shot",
    );
    let console = [&dom.stderr, &shot.stderr]
        .iter()
        .flat_map(|e| {
            String::from_utf8_lossy(e)
                .lines()
                .filter(|l| l.contains("CONSOLE"))
                .map(str::to_string)
                .collect::<Vec<_>>()
        })
        .collect();
    Rendered {
        dom: String::from_utf8_lossy(&dom.stdout).into_owned(),
        console,
        png_bytes: std::fs::metadata(&png).map(|m| m.len()).unwrap_or(0),
    }
}

/// What the browser laid out in each chart of a page.
#[derive(Debug)]
struct Layout {
    /// Per `<svg>`: pairs of texts whose boxes intersect (more than 1 px each way).
    overlaps: Vec<Vec<String>>,
    /// Per `<svg>`: (fill, height in CSS pixels) of every `<rect>`.
    rects: Vec<Vec<(String, f64)>>,
}

/// Measures in Chromium, on a copy of `page` with a script added (the page itself has
/// none): the rendered boxes of every text in every chart (tick labels, titles, axis
/// descriptions, lane labels, turned ones included), and every rectangle's height.
fn layout(page: &Path, dir: &Path) -> Layout {
    const MEASURE: &str = r#"<script>
(function () {
  const svgs = [...document.querySelectorAll('svg')].map(svg => {
    const texts = [...svg.querySelectorAll('text')]
      .filter(t => t.textContent.trim() !== '')
      .map(t => { const r = t.getBoundingClientRect(); return [t.textContent.trim(), r]; });
    const overlaps = [];
    for (let a = 0; a < texts.length; a++) for (let b = a + 1; b < texts.length; b++) {
      const p = texts[a][1], q = texts[b][1];
      const w = Math.min(p.right, q.right) - Math.max(p.left, q.left);
      const h = Math.min(p.bottom, q.bottom) - Math.max(p.top, q.top);
      if (w > 1 && h > 1) overlaps.push(texts[a][0] + ' / ' + texts[b][0]);
    }
    const rects = [...svg.querySelectorAll('rect')].map(r =>
      [(r.getAttribute('fill') || '').toLowerCase(), r.getBoundingClientRect().height]);
    return { overlaps, rects };
  });
  const pre = document.createElement('pre');
  pre.id = 'measured';
  pre.textContent = JSON.stringify(svgs);
  document.body.appendChild(pre);
})();
</script>"#;
    let html = std::fs::read_to_string(page).unwrap();
    let measured = dir.join("measured.html");
    std::fs::write(
        &measured,
        html.replace("</main></body>", &format!("</main>{MEASURE}</body>")),
    )
    .unwrap();
    let dom = render(&measured, dir).dom;
    let json = dom
        .split_once("<pre id=\"measured\">")
        .and_then(|(_, r)| r.split_once("</pre>"))
        .map(|(j, _)| {
            j.replace("&lt;", "<")
                .replace("&gt;", ">")
                .replace("&amp;", "&")
        })
        .unwrap_or_else(|| panic!("the measuring script did not run: {dom}"));
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    let svgs = v.as_array().unwrap();
    Layout {
        overlaps: svgs
            .iter()
            .map(|s| {
                s["overlaps"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|o| o.as_str().unwrap().to_string())
                    .collect()
            })
            .collect(),
        rects: svgs
            .iter()
            .map(|s| {
                s["rects"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|r| (r[0].as_str().unwrap().to_string(), r[1].as_f64().unwrap()))
                    .collect()
            })
            .collect(),
    }
}

/// Issue 24: the findings come first, before the charts and tables that back them.
fn assert_findings_first(dom: &str) {
    let findings = dom.find("<h2>Findings").expect("no findings section");
    for evidence in ["<figure", "<table"] {
        if let Some(at) = dom.find(evidence) {
            assert!(findings < at, "a {evidence} comes before the findings");
        }
    }
}

/// Issue 24: no two texts of a chart overlap (tick labels thinned or turned by the room
/// they need).
fn assert_no_overlap(l: &Layout) {
    for (i, o) in l.overlaps.iter().enumerate() {
        assert!(o.is_empty(), "chart {i}: overlapping texts: {o:?}");
    }
}

/// True when the test can run: chromium present (in CI it must be).
fn require_chromium(test: &str) -> bool {
    if chromium().is_some() {
        return true;
    }
    if std::env::var("CI").is_ok_and(|v| v == "true") {
        panic!("{test}: chromium is not installed, and CI=true forbids skipping");
    }
    eprintln!("SKIP {test}: chromium is not installed");
    false
}

/// Checks a report page: self-contained, rendered without console messages, key texts shown.
fn check_page(page: &Path, dir: &Path, texts: &[&str], charts: usize) {
    let html = std::fs::read_to_string(page).unwrap();
    for fetch in ["src=", "href=", "url(", "@import", "<script"] {
        assert!(!html.contains(fetch), "{fetch} in a self-contained page");
    }
    let r = render(page, dir);
    assert!(r.console.is_empty(), "console messages: {:?}", r.console);
    assert!(r.dom.contains("</html>"), "no DOM: {}", r.dom);
    for t in texts {
        assert!(r.dom.contains(t), "{t:?} not on the page");
    }
    let svgs = r.dom.matches("<svg").count();
    let figures = r.dom.matches("<figure").count();
    assert_eq!(
        (svgs, figures),
        (charts, charts),
        "inline SVG charts and figures on the page"
    );
    assert!(r.png_bytes > 20_000, "screenshot of {} bytes", r.png_bytes);
    // The lab's page is drawn by the lab (crates/lab/src/render), which orders its own.
    if !r.dom.contains("<title>tcpdoctor lab") {
        assert_findings_first(&r.dom);
    }
    assert_no_overlap(&layout(page, dir));
}

#[test]
fn probe_html_report_renders_in_chromium() {
    if !require_chromium("probe_html_report_renders_in_chromium") {
        return;
    }
    let dir = TempDir::new("probe");
    let page = dir.0.join("probe.html");
    let (code, out, err) = support::run(&[
        "probe",
        "-d",
        "1s",
        "--json",
        "--html",
        page.to_str().unwrap(),
    ]);
    assert!(matches!(code, 0 | 1), "exit {code}: {err}");
    let v = support::json(&out, &err);
    let ok = v["requests_ok"].as_u64().unwrap();
    let ok = ok.to_string();
    let mut texts = vec![
        "tcpdoctor probe",
        "Verdict",
        "Latency over time",
        "Latency histogram",
        "Total latency of successful requests",
        &ok,
        "Findings",
    ];
    // The host's CPU contention during the run, where the kernel has PSI (as the JSON says).
    if !v["cpu_wait"].is_null() {
        texts.push("CPU contention");
    }
    // Where the time went: a waterfall when some request was slow, the server-time
    // histogram when some request left the server any time (as the JSON says).
    texts.push("Where the time went");
    let t = &v["time_split"];
    let slow = t["slow_requests"].as_u64().unwrap() > 0;
    let server_time = t["components"]
        .as_array()
        .unwrap()
        .iter()
        .any(|c| c["component"] == "server" && c["max_us"].as_u64().unwrap() > 0);
    check_page(
        &page,
        &dir.0,
        &texts,
        2 + usize::from(slow) + usize::from(server_time),
    );
}

#[test]
fn html_to_an_unwritable_path_fails_before_the_run() {
    let t0 = std::time::Instant::now();
    let (code, out, err) = support::run(&["probe", "-d", "5s", "--html", "/nonexistent/x.html"]);
    assert_eq!(code, 2);
    assert!(out.is_empty());
    assert!(err.contains("--html /nonexistent/x.html"), "{err}");
    assert!(
        t0.elapsed() < std::time::Duration::from_secs(4),
        "ran before failing"
    );
}

fn workspace() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

#[test]
fn analyze_html_report_shows_the_syn_ladder_and_the_rate_per_time_scale() {
    if !require_chromium("analyze_html_report_shows_the_syn_ladder_and_the_rate_per_time_scale") {
        return;
    }
    let dir = TempDir::new("analyze-syn");
    let page = dir.0.join("analyze.html");
    let pcap = workspace().join("tests/data/analyze/syn-drop.pcap");
    let (code, out, err) = support::run(&[
        "analyze",
        pcap.to_str().unwrap(),
        "--link-speed",
        "1gbit",
        "--json",
        "--html",
        page.to_str().unwrap(),
    ]);
    assert_eq!(code, 1, "{err}");
    let v = support::json(&out, &err);
    assert_eq!(v["totals"]["retransmissions_syn"], 4);
    check_page(
        &page,
        &dir.0,
        &[
            "tcpdoctor analyze",
            "syn-drop.pcap",
            "Verdict",
            "Connections that waited longest",
            "The 2 connections that waited longest",
            // Both connections of the capture, each SYN resent twice along the ladder.
            "10.77.12.1:55836 &gt; 10.77.12.2:7002",
            "10.77.12.1:55848 &gt; 10.77.12.2:7002",
            "SYN resent",
            "SYN-ACK",
            "Rate per time scale",
            "link speed 1.00 Gbit/s",
            "SYN retransmitted",
        ],
        2,
    );
}

#[test]
fn analyze_html_report_draws_zero_windows_on_the_timeline() {
    if !require_chromium("analyze_html_report_draws_zero_windows_on_the_timeline") {
        return;
    }
    let dir = TempDir::new("analyze-zero");
    let page = dir.0.join("analyze.html");
    let pcap = workspace().join("tests/data/analyze/slow-reader-16k.pcap");
    let (code, _, err) = support::run(&[
        "analyze",
        pcap.to_str().unwrap(),
        "--html",
        page.to_str().unwrap(),
    ]);
    assert_eq!(code, 1, "{err}");
    check_page(
        &page,
        &dir.0,
        &[
            "The connection that waited longest",
            "zero window",
            "give --link-speed",
            "Slow reader",
        ],
        2,
    );
}

/// Issue 22 item 4: where the time went, on the page: the services table, a waterfall of the
/// slow exchanges the findings named (each part in its colour), and each service's histogram
/// of server time. A server that sleeps 300 ms before each reply (a real capture).
#[test]
fn analyze_html_report_shows_where_the_time_of_slow_exchanges_went() {
    if !require_chromium("analyze_html_report_shows_where_the_time_of_slow_exchanges_went") {
        return;
    }
    let dir = TempDir::new("analyze-time");
    let page = dir.0.join("analyze.html");
    let pcap = workspace().join("tests/data/analyze/time-server-300ms.pcap");
    let (code, out, err) = support::run(&[
        "analyze",
        pcap.to_str().unwrap(),
        "--json",
        "--html",
        page.to_str().unwrap(),
    ]);
    assert_eq!(code, 1, "{err}");
    let v = support::json(&out, &err);
    let slow = v["details"]["time"]["slow_exchanges"].as_array().unwrap();
    assert_eq!(slow.len(), 5, "{slow:?}");
    for x in slow {
        assert_eq!(x["named"], "server_response");
        let server = x["server_us"].as_u64().unwrap();
        assert!((299_000..302_000).contains(&server), "{x}");
    }
    assert_eq!(
        v["services"][0]["response_histogram"],
        serde_json::json!([[200000, 7]])
    );
    check_page(
        &page,
        &dir.0,
        &[
            "Where the time went",
            "10.79.1.2:8080",
            "Where the time of the 5 slowest exchanges went",
            "server",
            "handshake",
            "Server time at 10.79.1.2:8080",
            "Slow server response",
        ],
        // The waterfall, the service's histogram, the rate per time scale.
        3,
    );
}

#[test]
fn analyze_html_to_an_unwritable_path_fails_before_reading() {
    let pcap = workspace().join("tests/data/analyze/syn-drop.pcap");
    let (code, out, err) = support::run(&[
        "analyze",
        pcap.to_str().unwrap(),
        "--html",
        "/nonexistent/a.html",
    ]);
    assert_eq!(code, 2);
    assert!(out.is_empty(), "{out}");
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(err.contains("--html /nonexistent/a.html"), "{err}");
}

#[test]
fn lab_html_report_shows_the_harm_before_and_after_each_remedy() {
    let name = "lab_html_report_shows_the_harm_before_and_after_each_remedy";
    if !support::require_root(name) || !require_chromium(name) {
        return;
    }
    // It loads the trace's eBPF programs, compares no traced count with the kernel's.
    let _bpf = support::bpf_shared();
    let dir = TempDir::new("lab-fix");
    let page = dir.0.join("lab.html");
    let (code, out, err) = support::run(&[
        "lab",
        "port-exhaustion",
        "--duration",
        "1s",
        "--fix",
        "--json",
        "--html",
        page.to_str().unwrap(),
    ]);
    // 3: the lab's rule for a run that did not reproduce its pathology (`lab --help`).
    assert!(matches!(code, 0 | 1 | 3), "exit {code}: {err}");
    let v = support::json(&out, &err);
    let failed = v["baseline"]["probes"][0]["summary"]["errors"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["errno"] == "EADDRNOTAVAIL")
        .and_then(|e| e["count"].as_u64())
        .expect("the baseline did not exhaust its ports");
    check_page(
        &page,
        &dir.0,
        &[
            "tcpdoctor lab port-exhaustion",
            "Verdict",
            "Measurement",
            "Before and after each remedy",
            "The harm before and after each remedy",
            "keep-alive: remedy worked: connects failed with EADDRNOTAVAIL fell from",
            "keep-alive",
            "tcp_tw_reuse=1",
            &format!("EADDRNOTAVAIL x{failed}"),
            "Diagnosis of the baseline",
            "Ephemeral ports exhausted",
            "Trace (eBPF)",
            &trace_eaddrnotavail(&v),
            // Issue 24: the connects of each run per second, ok and failed.
            "Connects per second",
        ],
        // The harm before and after each remedy, and the connects per second.
        2,
    );
}

/// The trace's EADDRNOTAVAIL count of the baseline run as the page prints it.
fn trace_eaddrnotavail(v: &serde_json::Value) -> String {
    let n = v["trace"]["runs"][0]["eaddrnotavail"]
        .as_u64()
        .unwrap_or_else(|| panic!("no traced baseline: {:#}", v["trace"]));
    assert!(n > 0, "{:#}", v["trace"]);
    format!("{n} EADDRNOTAVAIL")
}

#[test]
fn lab_html_report_draws_the_incast_sweep_and_its_svg_file() {
    let name = "lab_html_report_draws_the_incast_sweep_and_its_svg_file";
    if !support::require_root(name) || !require_chromium(name) {
        return;
    }
    // It loads the trace's eBPF programs, compares no traced count with the kernel's.
    let _bpf = support::bpf_shared();
    let dir = TempDir::new("lab-incast");
    let page = dir.0.join("incast.html");
    let prefix = dir.0.join("sweep");
    let (code, out, err) = support::run(&[
        "lab",
        "incast",
        "--sweep",
        "senders=1,2",
        "--rto-min",
        "200ms,5ms",
        "--rounds",
        "3",
        "--block",
        "64kb",
        "--out",
        prefix.to_str().unwrap(),
        "--json",
        "--html",
        page.to_str().unwrap(),
    ]);
    // 3: a sweep this short may not reproduce incast (`lab --help`).
    assert!(matches!(code, 0 | 1 | 3), "exit {code}: {err}");
    let v = support::json(&out, &err);
    assert_eq!(v["runs"].as_array().unwrap().len(), 4);
    // Two RTO floors: the sweep chart, and the harm before and after the shorter floor.
    check_page(
        &page,
        &dir.0,
        &[
            "tcpdoctor lab incast",
            "Incast sweep",
            "Incast: goodput vs senders",
            "rto_min 200ms",
            "rto_min 5.00ms",
            "The harm before and after each remedy",
            "Diagnosis of the baseline",
        ],
        2,
    );
    // The stand-alone SVG file is drawn by the same charting code, with its legend inside.
    let svg = std::fs::read_to_string(prefix.with_extension("svg")).unwrap();
    assert!(svg.contains("Incast: goodput vs senders"), "{svg}");
    assert!(svg.contains("rto_min 200ms") && svg.contains("rto_min 5.00ms"));
    let csv = std::fs::read_to_string(prefix.with_extension("csv")).unwrap();
    assert_eq!(csv.lines().count(), 5, "{csv}");
}

#[test]
fn lab_html_to_an_unwritable_path_fails_before_the_run() {
    let (code, out, err) = support::run(&[
        "lab",
        "port-exhaustion",
        "--duration",
        "1s",
        "--html",
        "/nonexistent/l.html",
    ]);
    assert_eq!(code, 2);
    assert!(out.is_empty(), "{out}");
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(err.contains("--html /nonexistent/l.html"), "{err}");
}

#[test]
fn doctor_html_report_charts_the_census_and_the_counter_window() {
    let name = "doctor_html_report_charts_the_census_and_the_counter_window";
    if !support::require_root(name) || !require_chromium(name) {
        return;
    }
    // It loads the trace's eBPF programs (support::bpf_exclusive).
    let _bpf = support::bpf_exclusive();
    let dir = TempDir::new("doctor");
    let page = dir.0.join("doctor.html");
    // Churn inside a namespace of our own during the window: sockets for the census and
    // counters that move, the embedded server's one listener (killed after the census).
    let ns = support::Netns::new("htmldoc");
    let mut load = ns.spawn(&format!("exec {} probe -d 60s", support::bin().display()));
    std::thread::sleep(std::time::Duration::from_millis(1000));
    let (code, out, err) = support::run(&[
        "doctor",
        "--netns",
        &ns.name,
        "--quick",
        "--window",
        "1s",
        "--json",
        "--html",
        page.to_str().unwrap(),
    ]);
    let _ = load.kill();
    let _ = load.wait();
    assert!(matches!(code, 0 | 1), "exit {code}: {err}");
    let v = support::json(&out, &err);
    let moved = v["counters_moved"]["TcpActiveOpens"].as_i64().unwrap_or(0);
    assert!(
        moved > 0,
        "no connection opened in the window: {}",
        v["counters_moved"]
    );
    check_page(
        &page,
        &dir.0,
        &[
            "tcpdoctor doctor",
            &format!("network namespace {}", ns.name),
            "Verdict",
            "Budgets",
            "net.ipv4.ip_local_port_range",
            "TCP sockets by state",
            "Kernel counters over the window",
            "TcpActiveOpens",
            "Findings",
        ],
        2,
    );
    // Issue 24: the one LISTEN socket beside thousands in TIME_WAIT is a bar one can see.
    let by_state = v["sockets"]["by_state"].as_object().unwrap();
    assert_eq!(by_state["LISTEN"], 1, "{by_state:?}");
    let census: Vec<f64> = layout(&page, &dir.0).rects[0]
        .iter()
        .filter(|(fill, _)| *fill == "#1f6fb4")
        .map(|(_, h)| *h)
        .collect();
    assert_eq!(census.len(), by_state.len(), "{census:?} for {by_state:?}");
    assert!(
        census.iter().all(|h| *h >= 8.0),
        "{census:?} for {by_state:?}"
    );
}

#[test]
fn doctor_html_to_an_unwritable_path_fails_before_the_run() {
    let (code, out, err) = support::run(&["doctor", "--quick", "--html", "/nonexistent/d.html"]);
    assert_eq!(code, 2);
    assert!(out.is_empty(), "{out}");
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(err.contains("--html /nonexistent/d.html"), "{err}");
}

/// Issue 24: on log axes a LISTEN=1 bar beside 14,000 TIME_WAIT sockets, and counters that
/// rose by 10 beside millions, were drawn zero pixels tall; kernel counter names under their
/// bars, and ticks crowded into one decade (`20 k ... 90 k, 100 k`), printed on top of each
/// other. The charts of every page, drawn by one module, laid out by Chromium.
#[test]
fn charts_show_every_nonzero_bar_and_no_overlapping_labels_in_chromium() {
    use tcpdoctor_report::chart::{self, Axis, Bars, Lane, Mark, Rgb, Series, Style, Timeline};
    use tcpdoctor_report::chart::{Unit, Xy};
    use tcpdoctor_report::html::Page;
    if !require_chromium("charts_show_every_nonzero_bar_and_no_overlapping_labels_in_chromium") {
        return;
    }
    let dir = TempDir::new("charts");
    let mut p = Page::new("charts");
    let census = Bars {
        title: "TCP sockets by state".into(),
        categories: vec!["ESTABLISHED".into(), "TIME_WAIT".into(), "LISTEN".into()],
        series: vec![("sockets".into(), Rgb::BLUE, vec![4.0, 14_139.0, 1.0])],
        y: Axis::log("sockets", Unit::Count),
        x_label: "state".into(),
    };
    p.chart(census.draw(), "census");
    // The doctor's counter chart of a real window: twelve kernel names, 10 to 17 million.
    let names = [
        "IpExtInOctets",
        "IpExtOutOctets",
        "IpExtInNoECTPkts",
        "IpInDelivers",
        "IpInReceives",
        "IpOutRequests",
        "IpOutTransmits",
        "TcpInSegs",
        "TcpOutSegs",
        "TCPDelivered",
        "TCPOrigDataSent",
        "TCPPureAcks",
    ];
    let counters = Bars {
        title: "Kernel counters over the window".into(),
        categories: names.iter().map(|n| n.to_string()).collect(),
        series: vec![(
            "increase".into(),
            Rgb::ORANGE,
            (0..names.len())
                .map(|i| 17_000_000.0 / 5f64.powi(i as i32) + 10.0)
                .chain([10.0])
                .skip(1)
                .collect(),
        )],
        y: Axis::log("increase", Unit::Count),
        x_label: "counter".into(),
    };
    p.chart(counters.draw(), "counters");
    // A latency histogram over seven decades: 22 buckets (1-2-5) of 1 to 2,000 requests.
    let latencies: Vec<u64> = (0..22u32)
        .flat_map(|i| {
            let edge = [1, 2, 5][i as usize % 3] * 10u64.pow(i / 3);
            std::iter::repeat_n(edge, [1, 2_000, 30][i as usize % 3])
        })
        .collect();
    let histogram = Bars::histogram(
        "Total latency",
        &chart::log_buckets_us(&latencies),
        Axis::log("requests", Unit::Count),
        "total latency (bucket lower bound)",
    );
    p.chart(histogram.draw(), "histogram");
    // Values inside one decade: plotters ticks every 10 k from 10 k to 100 k.
    let narrow = Xy {
        title: "One decade".into(),
        x: Axis::linear("time", Unit::Seconds),
        y: Axis::log("latency", Unit::Micros),
        series: vec![Series {
            name: "p99".into(),
            color: Rgb::BLUE,
            style: Style::Line,
            points: (0..18)
                .map(|i| (i as f64 * 0.1, 12_000.0 + 4_000.0 * i as f64))
                .collect(),
        }],
    };
    p.chart(narrow.draw(), "one decade");
    // A waterfall 20 ms wide: its ticks read in milliseconds.
    let waterfall = Timeline {
        title: "Waterfall".into(),
        kinds: vec![("server".into(), Rgb::GREEN)],
        lanes: (0..3)
            .map(|i| Lane {
                label: format!("4000{i} unexplained 20.0ms"),
                span_s: (0.0, 0.020 - i as f64 * 0.005),
                marks: vec![Mark {
                    start_s: 0.001,
                    end_s: Some(0.015),
                    kind: 0,
                }],
            })
            .collect(),
    };
    p.chart(
        waterfall.draw_along("time since the request started"),
        "waterfall",
    );
    let page = dir.0.join("charts.html");
    std::fs::write(&page, p.finish()).unwrap();

    let l = layout(&page, &dir.0);
    assert_eq!(l.rects.len(), 5, "{l:?}");
    assert_no_overlap(&l);
    // Every bar of a non-zero value stands at least 8 px tall (0.3 decade on the census).
    for (chart, color, bars) in [(0, Rgb::BLUE, 3), (1, Rgb::ORANGE, 12), (2, Rgb::BLUE, 22)] {
        let heights: Vec<f64> = l.rects[chart]
            .iter()
            .filter(|(fill, _)| *fill == color.hex())
            .map(|(_, h)| *h)
            .collect();
        assert_eq!(heights.len(), bars, "chart {chart}: {heights:?}");
        assert!(
            heights.iter().all(|h| *h >= 8.0),
            "chart {chart}: a bar is (almost) invisible: {heights:?}"
        );
    }
    let dom = render(&page, &dir.0).dom;
    // Ticks read in the waterfall's unit (they were "0.0 s" eleven times), without
    // trailing zeros ("1 k", not "1.00 k").
    assert!(
        dom.contains("10 ms") && !dom.contains("0.0 s"),
        "waterfall ticks"
    );
    assert!(
        dom.contains("1 k") && !dom.contains("1.00 k"),
        "count ticks"
    );
}
