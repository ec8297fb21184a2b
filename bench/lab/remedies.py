#!/usr/bin/env python3
"""Renders docs/remedies.md from the JSON of `tcpdoctor lab SCENARIO --remedies --json`.

Usage: remedies.py OUT.md COMMAND_LINE MACHINE_LINE scenario=file.json ...
Every table comes from the files given, i.e. from one run of bench/lab/remedies.sh.
"""
import json
import sys

TITLES = {
    "incast": "Incast: many senders, one shallow bottleneck",
    "port-exhaustion": "Port exhaustion: a new connection per request to one destination",
    "timewait-collision": "TIME_WAIT collision: reconnecting from one source port",
    "stale-ack-race": "Stale-ACK race: SO_LINGER 0 churn",
    "slow-reader": "Slow reader: a writer faster than its reader",
    "syn-drop": "Dropped SYNs",
    "accept-overflow": "Accept-queue overflow",
}

VERDICT = {
    "works": "**works**",
    "partial": "partial",
    "no_effect": "no effect",
    "nothing_to_fix": "nothing to fix",
    "cannot_build": "cannot build",
}


def cell(text):
    return (text or "-").replace("|", "\\|").replace("\n", "<br>")


def render(name, v):
    out = [f"## {TITLES.get(name, name)}", ""]
    out.append(f"Command: `sudo tcpdoctor {v['_command']}` (run {v['run_id']}).")
    out.append("")
    h = v["baseline_harm"]
    amount = f"{round(h['amount']):,}" if h["kind"] == "count" else "%.0f%%" % (h["amount"] * 100)
    out.append(f"Baseline: {v['baseline_label']}. Measured: {amount} {h['what']}.")
    diag = ", ".join(f"{f['pathology']} ({f['severity']})" for f in v["baseline"].get("findings", [])) or "none"
    out.append(f"Diagnosis of the baseline: {diag}.")
    out.append("")
    out.append("| remedy | what it changes | predicted (formula) | measured | prediction vs measurement | pathology gone | verdict |")
    out.append("|---|---|---|---|---|---|---|")
    for r in v["remedies"]:
        if r["prediction"]:
            pred = f"{r['prediction']['formula']}<br>=> {r['prediction']['effect']}"
        else:
            pred = f"no prediction: {r.get('not_predicted') or '-'}"
        gone = {True: "yes", False: "no", None: "-"}[r["pathology_gone"]]
        verdict = r["why"]
        head, _, rest = verdict.partition(": ")
        verdict = f"{VERDICT.get(r['verdict'], head)}: {rest}" if rest else VERDICT.get(r["verdict"], head)
        out.append("| " + " | ".join([
            f"`{r['remedy']}`",
            cell(r["changes"]),
            cell(pred),
            cell((r["measured"] or {}).get("text")),
            cell(r["agreement_note"]),
            gone,
            cell(verdict),
        ]) + " |")
    out.append("")
    if v.get("notes"):
        out.append("What the predictions rest on:")
        out.append("")
        for n in v["notes"]:
            out.append(f"- {n}")
        out.append("")
    lad = v.get("syn_ladder")
    if lad:
        out.append(f"What the SYN ladder cost the baseline ({lad['connects']} connects; rungs {', '.join(str(m) for m in lad['ladder_ms'])} ms):")
        out.append("")
        out.append("| lost SYNs | rung (model) | connects | predicted connects | median connect |")
        out.append("|---:|---:|---:|---:|---:|")
        for r in lad["rungs"]:
            pred = "-" if r["predicted_connects"] is None else "%.1f" % r["predicted_connects"]
            out.append(f"| {r['attempt']} | {r['rung_ms']} ms | {r['connects']} | {pred} | {r['typical_connect_us'] / 1e6:.3f} s |")
        out.append("")
        if lad.get("predicted_delay_per_connect_us") is not None:
            out.append(
                "Added delay per connect: predicted %.0f ms (sum of p^k (1 - p) x rung k), measured %.0f ms: %s (three standard deviations: %.0f ms)."
                % (lad["predicted_delay_per_connect_us"] / 1e3, lad["measured_delay_per_connect_us"] / 1e3,
                   "agrees" if lad["agrees"] else "disagrees", lad["tolerance_us"] / 1e3))
        else:
            out.append("Added delay per connect: measured %.1f ms; each lost SYN costs its connect one rung." % (lad["measured_delay_per_connect_us"] / 1e3))
        out.append("")
    return out


def main():
    out_path, command, machine = sys.argv[1:4]
    lines = [
        "# What works: every remedy, predicted and measured",
        "",
        "Each table below comes from `tcpdoctor lab SCENARIO --remedies`: the scenario's baseline and",
        "each remedy run in fresh network namespaces on one machine, one after another, with what",
        "tcpdoctor's arithmetic predicts (the formula and its inputs, several measured in the",
        "baseline), what was measured, whether the two agree within the stated noise (and why not),",
        "whether the pathology is gone, and a verdict. Read them before changing a production host:",
        "they say what each remedy does here, on this kernel, and where tcpdoctor's model is right.",
        "",
        f"Machine: {machine}. Command: `{command}`; the tables were written by `bench/lab/remedies.py`.",
        "",
    ]
    for arg in sys.argv[4:]:
        name, _, path = arg.partition("=")
        with open(path) as f:
            v = json.load(f)
        with open(path + ".cmd") as f:
            v["_command"] = f.read().strip()
        lines += render(name, v)
    with open(out_path, "w") as f:
        f.write("\n".join(lines).rstrip() + "\n")


if __name__ == "__main__":
    main()
