#!/usr/bin/env python3
"""Two builds of tcpdoctor side by side on one capture, for a host whose speed drifts.

    bench/analyze/ab.py OLD_BINARY NEW_BINARY [PAIRS] [CAPTURE]

Runs `BINARY analyze CAPTURE --json` for both builds PAIRS times (default 30), alternating
which goes first, and prints the medians of wall and CPU (user+sys) time of each, and the
median over pairs of NEW/OLD: each pair ran seconds apart, so a drift of the host between
minutes (measured on the benchmark machine: the same build 0.60 s at one time, 0.85 s a
quarter of an hour later) falls on both builds of a pair instead of on one of them.
CAPTURE defaults to bench/analyze/run.sh's full capture. Output is discarded.
"""
import os
import statistics as st
import subprocess
import sys
import time


def run(binary, capture):
    t0 = time.perf_counter()
    p = subprocess.Popen([binary, "analyze", capture, "--json"],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, _, ru = os.wait4(p.pid, 0)
    return time.perf_counter() - t0, ru.ru_utime + ru.ru_stime


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__.strip())
    old, new = sys.argv[1], sys.argv[2]
    pairs = int(sys.argv[3]) if len(sys.argv) > 3 else 30
    capture = sys.argv[4] if len(sys.argv) > 4 else "/tmp/tdoc-bench-analyze/bench.pcap"
    for b in (old, new):
        if not os.access(b, os.X_OK):
            sys.exit(f"ab.py: {b}: not an executable file")
    if not os.path.isfile(capture):
        sys.exit(f"ab.py: {capture}: no such capture (bench/analyze/run.sh with KEEP=1 leaves one)")
    res = {"old": [], "new": []}
    for i in range(pairs):
        order = ("old", "new") if i % 2 == 0 else ("new", "old")
        for which in order:
            res[which].append(run(old if which == "old" else new, capture))
    for which in ("old", "new"):
        wall = [w for w, _ in res[which]]
        cpu = [c for _, c in res[which]]
        print("%s: wall median %.4f s (min %.4f), CPU median %.4f s (min %.4f)"
              % (which, st.median(wall), min(wall), st.median(cpu), min(cpu)))
    rw = [n[0] / o[0] for o, n in zip(res["old"], res["new"])]
    rc = [n[1] / o[1] for o, n in zip(res["old"], res["new"])]
    print("new/old, median over %d pairs: wall %.3f, CPU %.3f" % (pairs, st.median(rw), st.median(rc)))


if __name__ == "__main__":
    main()
