#!/usr/bin/env python3
"""Times the analyze benchmark's tools in interleaved rounds: `rounds.py TD CAP PRE ROUNDS READ`.

Each round runs every tool on the same input it is compared on: tcpdoctor on the prefix 5
times and on the whole file 3 times, `cat` 3 times, READ (the capture reader alone,
`capture_count`) 3 times on each, tshark, tcptrace and capinfos once; the
fast tools take the median of their runs in the round. A ratio is computed per round, between
runs seconds apart, and the printed ratio is the median over rounds: on a shared machine whose
speed drifts from minute to minute, timing one tool for a minute and then the other measures
the drift as much as the tools. Prints JSON: per tool the median wall and CPU (user + system,
from wait4) over rounds and the peak RSS (one run under /usr/bin/time), and the ratios.
"""
import json
import os
import statistics
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from timing import once, peak_rss_kib  # noqa: E402  (bench/timing.py)
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from need import need  # noqa: E402

need("tshark", "tcptrace")


def median_run(cmd, n):
    runs = [once(cmd) for _ in range(n)]
    return statistics.median(w for w, _ in runs), statistics.median(c for _, c in runs)


def main():
    td, cap, pre, rounds, read = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5]
    tools = {
        "td_full": ([td, "analyze", cap, "--json"], 3),
        "td_pre": ([td, "analyze", pre, "--json"], 5),
        "cat": (["cat", cap], 3),
        "cap": (["capinfos", cap], 1),
        "ts": (["tshark", "-r", pre, "-Y",
                "tcp.analysis.retransmission or tcp.analysis.reused_ports"], 1),
        "tt": (["tcptrace", "-l", pre], 1),
        "read_full": ([read, cap], 3),
        "read_pre": ([read, pre], 3),
    }
    for cmd, _ in tools.values():  # warm the page cache and the binaries
        once(cmd)
    per = {k: [] for k in tools}
    ratios = {"ts_td": [], "tt_td": [], "td_cat": [], "read_td_pre": [], "read_td_full": []}
    for i in range(rounds):
        r = {k: median_run(cmd, n) for k, (cmd, n) in tools.items()}
        for k in tools:
            per[k].append(r[k])
        ratios["ts_td"].append(r["ts"][0] / r["td_pre"][0])
        ratios["tt_td"].append(r["tt"][0] / r["td_pre"][0])
        ratios["td_cat"].append(r["td_full"][0] / r["cat"][0])
        ratios["read_td_pre"].append(r["read_pre"][0] / r["td_pre"][0])
        ratios["read_td_full"].append(r["read_full"][0] / r["td_full"][0])
        print(f"round {i + 1}/{rounds}: tshark/tcpdoctor {ratios['ts_td'][-1]:.0f}x, "
              f"tcpdoctor/cat {ratios['td_cat'][-1]:.1f}x", file=sys.stderr)
    out = {k: {"wall": statistics.median(w for w, _ in v),
               "cpu": statistics.median(c for _, c in v),
               "rss": peak_rss_kib(tools[k][0])} for k, v in per.items()}
    out["ratios"] = {k: statistics.median(v) for k, v in ratios.items()}
    out["ratios_range"] = {k: [min(v), max(v)] for k, v in ratios.items()}
    out["rounds"] = rounds
    json.dump(out, sys.stdout)


if __name__ == "__main__":
    main()
