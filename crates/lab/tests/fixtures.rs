//! Lab reports recorded from real runs (`tests/data/lab/*.json`, made by
//! `tests/data/lab/record.sh` as root) read back and rendered without root: the text and the
//! HTML page must be byte for byte the golden ones recorded beside them (`NAME.txt`,
//! `NAME.html`), and the JSON printed again must be the recorded JSON itself. The renderers
//! and the report's records can then change shape while their output cannot.
//!
//! `TDOC_BLESS=1 cargo test -p tcpdoctor-lab --test fixtures` writes the goldens anew (after a
//! deliberate change of the output, or new recordings).

#[path = "../../../tests/support/golden.rs"]
mod golden;

use std::io::Write;
use std::path::{Path, PathBuf};

use serde::de::DeserializeOwned;
use serde::Serialize;
use tcpdoctor_lab::render;
use tcpdoctor_lab::scenario::{
    accept_overflow, incast, port_exhaustion, slow_reader, stale_ack, syn_drop, timewait, NoFacts,
    RemedyReport,
};
use tcpdoctor_model::{Finding, Provenance, Report, Stamped};

fn dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/data/lab")
}

/// The recorded fixtures, by name.
fn fixtures() -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir())
        .expect("tests/data/lab")
        .filter_map(|e| {
            let name = e.ok()?.file_name().into_string().ok()?;
            name.strip_suffix(".json").map(str::to_string)
        })
        .collect();
    v.sort();
    v
}

/// A fixture read back: the report, the provenance it was printed with, the text printed.
struct Read<B> {
    report: Report<B>,
    provenance: Provenance,
    json: String,
}

fn read<B: DeserializeOwned>(name: &str) -> Read<B> {
    let json = std::fs::read_to_string(dir().join(format!("{name}.json"))).unwrap();
    let report: Report<B> =
        serde_json::from_str(&json).unwrap_or_else(|e| panic!("{name}.json: {e}"));
    let provenance: Provenance =
        serde_json::from_str(&json).unwrap_or_else(|e| panic!("{name}.json: {e}"));
    Read {
        report,
        provenance,
        json,
    }
}

/// A page compared without what the report crate draws: the style sheet and the charts' SVG
/// (their legends and captions stay).
fn page_without_drawing(page: &str) -> String {
    let mut out = String::new();
    let mut rest = page;
    while let Some(i) = rest.find("<svg") {
        out.push_str(&rest[..i]);
        out.push_str("<svg/>");
        rest = rest[i..]
            .find("</svg>")
            .map_or("", |j| &rest[i + j + "</svg>".len()..]);
    }
    out.push_str(rest);
    match (out.find("<style>"), out.find("</style>")) {
        (Some(a), Some(b)) => format!("{}<style/>{}", &out[..a], &out[b + "</style>".len()..]),
        _ => out,
    }
}

/// Compares `got` with the golden file `name.ext` (writes it with `TDOC_BLESS=1`).
fn golden(name: &str, ext: &str, got: &str) -> Result<(), String> {
    golden::compare(&dir(), name, ext, got)
}

/// Reads fixture `name`, completes what its JSON leaves to the provenance (`complete`),
/// prints it again as JSON, as text and as a page, and compares each with its golden.
fn check<B: Serialize + DeserializeOwned>(
    name: &str,
    complete: impl FnOnce(&mut Read<B>),
    text: impl FnOnce(&mut dyn Write, &Report<B>) -> std::io::Result<()>,
    page: impl FnOnce(&Report<B>) -> String,
) -> Vec<String> {
    let mut r = read::<B>(name);
    complete(&mut r);
    let mut errors = Vec::new();
    let mut printed = Vec::new();
    let stamped = Stamped {
        report: &r.report,
        provenance: &r.provenance,
    };
    tcpdoctor_report::json(&mut printed, &stamped).unwrap();
    if String::from_utf8(printed).unwrap() != r.json {
        errors.push(format!("{name}.json: printed again, it is not the same"));
    }
    let mut out = Vec::new();
    text(&mut out, &r.report).unwrap();
    errors.extend(golden(name, "txt", &String::from_utf8(out).unwrap()).err());
    errors.extend(golden(name, "html", &page_without_drawing(&page(&r.report))).err());
    errors
}

fn run<B: Serialize + DeserializeOwned>(
    name: &str,
    view: for<'a> fn(&'a B) -> render::View<'a>,
) -> Vec<String> {
    check::<B>(
        name,
        |_| {},
        |w, r| render::run_text(w, r, view),
        |r| render::run_page(r, view),
    )
}

/// A view of a remedies report's runs (`--fix`).
type FixView<C, R, F> = for<'a> fn(&'a RemedyReport<C, R, F>) -> render::View<'a>;

/// A `--remedies` fixture, or (`NAME-fix`) a `--fix` one printed beside `fix`, the view of
/// its runs; `findings` of the baseline run.
fn remedies<C, R, F>(
    name: &str,
    scenario: &str,
    findings: fn(&R) -> Vec<Finding>,
    fix: FixView<C, R, F>,
) -> Vec<String>
where
    RemedyReport<C, R, F>: Serialize + DeserializeOwned,
{
    remedies_completed(
        name,
        scenario,
        |r| r.report.body.baseline_findings = findings(&r.report.body.baseline),
        fix,
    )
}

/// [`remedies`], the report completed from its provenance by `complete`.
fn remedies_completed<C, R, F>(
    name: &str,
    scenario: &str,
    complete: impl FnOnce(&mut Read<RemedyReport<C, R, F>>),
    fix: FixView<C, R, F>,
) -> Vec<String>
where
    RemedyReport<C, R, F>: Serialize + DeserializeOwned,
{
    let view = name.ends_with("-fix").then_some(fix);
    check::<RemedyReport<C, R, F>>(
        name,
        complete,
        |w, r| render::remedies(w, r, scenario, view.map(|v| v(&r.body)).as_ref()),
        |r| render::html::remedies_page(r, view.map(|v| v(&r.body)).as_ref()),
    )
}

/// Renders fixture `name` by its scenario, and by whether it is a remedies table.
fn render_fixture(name: &str) -> Vec<String> {
    use render::views;
    use tcpdoctor_lab::scenario::harness::ProbeRun;
    let text = std::fs::read_to_string(dir().join(format!("{name}.json"))).unwrap();
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    let scenario = v["scenario"].as_str().unwrap_or_default().to_string();
    let table = v.get("baseline_label").is_some();
    let probe: fn(&ProbeRun) -> Vec<Finding> = |r| r.findings.clone();
    match (scenario.as_str(), table) {
        ("accept-overflow", false) => run::<accept_overflow::Report>(name, views::accept_overflow),
        ("accept-overflow", true) => remedies::<accept_overflow::Config, _, NoFacts>(
            name,
            &scenario,
            probe,
            views::accept_overflow,
        ),
        ("syn-drop", false) => run::<syn_drop::Report>(name, views::syn_drop),
        ("syn-drop", true) => {
            remedies::<syn_drop::Config, _, NoFacts>(name, &scenario, probe, views::syn_drop)
        }
        ("port-exhaustion", false) => run(name, views::port_exhaustion),
        ("port-exhaustion", true) => {
            remedies::<port_exhaustion::Config, port_exhaustion::PortRun, port_exhaustion::Facts>(
                name,
                &scenario,
                |r| r.findings.clone(),
                views::port_exhaustion_fix,
            )
        }
        ("timewait-collision", false) => run::<timewait::Report>(name, views::timewait),
        ("timewait-collision", true) => remedies::<timewait::Config, timewait::Run, NoFacts>(
            name,
            &scenario,
            |r| r.findings.clone(),
            views::timewait,
        ),
        ("slow-reader", false) => run::<slow_reader::Report>(name, views::slow_reader),
        ("slow-reader", true) => remedies::<slow_reader::Config, slow_reader::Run, NoFacts>(
            name,
            &scenario,
            |r| r.findings.clone(),
            views::slow_reader,
        ),
        ("stale-ack-race", false) => check::<stale_ack::Report>(
            name,
            |r| r.report.body.facts.kernel_release = r.provenance.kernel_release.clone(),
            |w, r| render::run_text(w, r, views::stale_ack),
            |r| render::run_page(r, views::stale_ack),
        ),
        ("stale-ack-race", true) => remedies_completed(
            name,
            "stale-ack-race",
            |r: &mut Read<StaleAckRemedies>| {
                let b = &mut r.report.body;
                b.baseline_findings = b.baseline.run.findings.clone();
                b.facts.kernel_release = r.provenance.kernel_release.clone();
            },
            views::stale_ack_fix,
        ),
        ("incast", false) => run(name, views::incast),
        ("incast", true) => remedies::<incast::Config, incast::Run, incast::Facts>(
            name,
            &scenario,
            |r| r.findings.clone(),
            views::incast_fix,
        ),
        (other, _) => vec![format!("{name}.json: unknown scenario '{other}'")],
    }
}

type StaleAckRemedies = RemedyReport<stale_ack::Config, stale_ack::LoopRun, stale_ack::Facts>;

#[test]
fn recorded_lab_reports_render_as_their_goldens() {
    let names = fixtures();
    assert!(names.len() >= 22, "{names:?}");
    let errors: Vec<String> = names.iter().flat_map(|n| render_fixture(n)).collect();
    assert!(errors.is_empty(), "{}", errors.join("\n"));
}

/// A fixture's text and page (the page with its charts), rendered by `view`.
fn rendered<B: DeserializeOwned>(
    name: &str,
    view: for<'a> fn(&'a B) -> render::View<'a>,
) -> (String, String) {
    let r = read::<B>(name).report;
    let mut text = Vec::new();
    render::run_text(&mut text, &r, view).unwrap();
    (String::from_utf8(text).unwrap(), render::run_page(&r, view))
}

/// A `--fix` fixture's text and page (the page with its charts).
fn rendered_fix<C, R, F>(name: &str, view: FixView<C, R, F>) -> (String, String)
where
    RemedyReport<C, R, F>: DeserializeOwned,
{
    let r = read::<RemedyReport<C, R, F>>(name).report;
    let v = view(&r.body);
    let mut text = Vec::new();
    render::remedies(&mut text, &r, &r.body.header.scenario, Some(&v)).unwrap();
    let page = render::html::remedies_page(&r, Some(&v));
    (String::from_utf8(text).unwrap(), page)
}

#[test]
fn an_incast_run_at_one_sender_count_draws_no_sweep_chart() {
    // Issue 24: two RTO floors at 8 senders (--fix) drew an "Incast sweep".
    let (_, page) = rendered_fix("incast-fix", render::views::incast_fix);
    assert!(!page.contains("Incast sweep"), "incast-fix");
    let (_, page) = rendered::<incast::Report>("incast-sweep", render::views::incast);
    assert!(page.contains("Incast sweep"), "incast-sweep");
}

#[test]
fn the_port_exhaustion_page_charts_connects_ok_and_eaddrnotavail_per_second() {
    // Issue 24: the port-exhaustion page had no chart of its own.
    let (_, page) = rendered_fix("port-exhaustion-fix", render::views::port_exhaustion_fix);
    assert!(page.contains("<h2>Connects per second</h2>"), "{page}");
    assert!(page.contains("<svg"), "no chart drawn");
    for legend in [
        "connects ok: before: new connection per request, tcp_tw_reuse=0",
        "EADDRNOTAVAIL: before: new connection per request, tcp_tw_reuse=0",
        "connects ok: tcp_tw_reuse=1",
    ] {
        assert!(page.contains(legend), "{legend}");
    }
    // Keep-alive opens one connection per worker: not drawn, and the caption says so.
    assert!(page.contains(
        "Not drawn (one persistent connection per worker): keep-alive: one connection per worker"
    ));
}

#[test]
fn the_incast_bottleneck_rate_is_printed_in_units_not_in_tcs_syntax() {
    // Issue 24: "tbf rate 100000000bit".
    let (text, page) = rendered::<incast::Report>("incast", render::views::incast);
    let first = text.lines().next().unwrap();
    assert!(first.contains("bottleneck tbf at 100 Mbit/s"), "{first}");
    assert!(!text.contains("100000000bit") && !page.contains("100000000bit"));
    // The headline is written once: the page says the same words.
    let headline = first
        .strip_prefix("lab incast: ")
        .and_then(|l| l.rsplit_once(" (run "))
        .unwrap()
        .0;
    assert!(page.contains(headline), "{headline}");
}

#[test]
fn trace_lines_name_each_namespace_in_words() {
    // Issue 24: "clfc: stale_ack_race=2", "svfc: drop=1".
    let r = read::<StaleAckRemedies>("stale-ack-race-remedies").report;
    let mut text = Vec::new();
    render::remedies(&mut text, &r, "stale-ack-race", None).unwrap();
    let text = String::from_utf8(text).unwrap();
    assert!(text.contains("    client: stale_ack_race=2"), "{text}");
    assert!(text.contains("    server: "), "{text}");
    for short in ["cl:", "sv:", "clfc:", "svfc:", "clr0:", "svr0:"] {
        assert!(!text.contains(&format!("    {short}")), "{short}");
    }
}
