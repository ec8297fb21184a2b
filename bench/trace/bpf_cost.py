#!/usr/bin/env python3
"""Nanoseconds per BPF program run of `tcpdoctor trace`, two or more binaries side by side.

Each round runs every binary once, in an order that alternates between rounds: a namespace of
its own (tdoc-bench-cost-PID-R, made by churn_ns and deleted after the run) with tcpdoctor's
churn responder, `BIN trace --netns NS` attached, then 4 s of `BIN probe --mode crr -c 2`
inside it. The kernel's own statistics (kernel.bpf_stats_enabled=1, turned off again at the
end) give each program's run count and run time, read from /proc/<trace pid>/fdinfo before
the trace ends. Printed: per run, ns per program run and the number of runs; at the end, the
median per binary.

usage: sudo bench/trace/bpf_cost.py BIN_A,BIN_B [ROUNDS]
"""

import os
import re
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import churn_ns  # noqa: E402
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from need import need  # noqa: E402

need("iproute2")


def program_stats(pid):
    """(run time ns, runs) summed over the BPF programs process `pid` holds."""
    total_ns = runs = 0
    for fd in os.listdir(f"/proc/{pid}/fdinfo"):
        try:
            text = open(f"/proc/{pid}/fdinfo/{fd}").read()
        except OSError:
            continue
        t = re.search(r"run_time_ns:\s+(\d+)", text)
        n = re.search(r"run_cnt:\s+(\d+)", text)
        if t and n:
            total_ns += int(t.group(1))
            runs += int(n.group(1))
    return total_ns, runs


def one_run(binary, ns):
    with churn_ns.namespace(ns, binary):
        trace = subprocess.Popen([binary, "trace", "--netns", ns, "--duration", "9s"],
                                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            time.sleep(2)  # attached well before the load starts
            subprocess.run(["ip", "netns", "exec", ns, binary, "probe", "--mode", "crr",
                            "-c", "2", "-d", "4s", f"127.0.0.1:{churn_ns.PORT}"],
                           capture_output=True, check=True, timeout=30)
            return program_stats(trace.pid)
        finally:
            trace.terminate()
            trace.wait()


def main():
    binaries = sys.argv[1].split(",")
    rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 6
    per_run = {b: [] for b in binaries}
    subprocess.run(["sysctl", "-qw", "kernel.bpf_stats_enabled=1"], check=True)
    try:
        for r in range(rounds):
            for b in binaries if r % 2 == 0 else binaries[::-1]:
                total_ns, runs = one_run(b, f"tdoc-bench-cost-{os.getpid()}-{r}")
                per_run[b].append(total_ns / max(runs, 1))
                print(f"{b}: {per_run[b][-1]:.1f} ns/run over {runs} runs", flush=True)
    finally:
        subprocess.run(["sysctl", "-qw", "kernel.bpf_stats_enabled=0"])
    for b in binaries:
        print(f"{b}: median {statistics.median(per_run[b]):.1f} ns/run ({rounds} runs)")


if __name__ == "__main__":
    main()
