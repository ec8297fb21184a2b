#!/usr/bin/env python3
"""Throughput cost of `tcpdoctor trace`, measured on two churn loads running at the same time.

run.py compares runs made one after the other; on this machine the untraced rate alone moves
by 10-30% from one run to the next (the host, not the tool), so a cost of a few percent hides
in the noise. Here every round runs two identical loads at once, each in a namespace of its
own (tdoc-bench-pair-PID-N-a and -b: `tcpdoctor probe --mode crr` against `tcpdoctor probe
--serve`), and `tcpdoctor trace --netns` watches one of them; which one alternates from round
to round. Both loads share the CPUs and whatever the host does during the round, so the
ratio of their rates is the traced load's cost.

What it leaves out: the trace's programs are attached to kernel-wide tracepoints and return
early for the other namespace (a namespace compare after the tracepoint's dispatch), so the
untraced load pays that early exit too. The early-exit cost is measured on its own, per
program run, with kernel.bpf_stats_enabled (printed at the end: it is the floor under both).

usage: sudo [TDOC_BIN=path] [TDOC_TRACE_BIN=path] bench/trace/paired.py [ROUNDS] [DURATION_S] [CONCURRENCY]
"""

import json
import os
import signal
import statistics
import subprocess
import sys
import threading
import time

import churn_ns
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from need import need  # noqa: E402

need("bpftool", "iproute2")

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
ROUNDS = int(sys.argv[1]) if len(sys.argv) > 1 else 20
DUR = int(sys.argv[2]) if len(sys.argv) > 2 else 4
CONC = int(sys.argv[3]) if len(sys.argv) > 3 else 2
BIN = os.environ.get("TDOC_BIN") or os.path.join(ROOT, "target", "release", "tcpdoctor")
# TDOC_TRACE_BIN: another build for the tracer only (e.g. a BPF object variant); the loads
# always run BIN.
TRACE_BIN = os.environ.get("TDOC_TRACE_BIN") or BIN
PREFIX = f"tdoc-bench-pair-{os.getpid()}"


def sh(*cmd):
    subprocess.run(cmd, check=True)


def probe(name, out, key):
    p = subprocess.run(["ip", "netns", "exec", name, BIN, "probe", "127.0.0.1:5001", "--mode",
                        "crr", "-c", str(CONC), "-d", f"{DUR}s", "-n", "1000000000", "--json"],
                       capture_output=True, text=True)
    try:
        out[key] = json.loads(p.stdout)["requests_ok_per_s"]
    except (ValueError, KeyError):
        out[key] = None
        print(f"note: probe in {name} printed no report: {p.stderr.strip()}", file=sys.stderr)


def start_trace(name):
    p = subprocess.Popen([TRACE_BIN, "trace", "--netns", name, "--json", "--every", "1h"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    for line in p.stderr:
        if "tracing started" in line:
            break
    else:
        raise RuntimeError(f"trace did not start: exit {p.wait()}")
    threading.Thread(target=lambda: [None for _ in p.stderr], daemon=True).start()
    return p


def stop_trace(p):
    p.send_signal(signal.SIGINT)
    out, _ = p.communicate(timeout=60)
    return json.loads(out.strip().splitlines()[-1])["lost_events"]


def one_round(r, stats=False):
    """Both loads at once, one traced. With `stats`, the trace watches a third, idle
    namespace instead: every program run is then an early exit, timed by bpf_stats."""
    a, b = f"{PREFIX}-{r}-a", f"{PREFIX}-{r}-b"
    servers = {}
    try:
        servers[a] = churn_ns.create(a, BIN)
        servers[b] = churn_ns.create(b, BIN)
        traced = a if r % 2 == 0 else b
        watched = traced
        if stats:
            watched = f"{PREFIX}-{r}-idle"
            servers[watched] = None
            sh("ip", "netns", "add", watched)
        tracer = start_trace(watched)
        rates = {}
        if stats:
            before = prog_stats()
        loads = [threading.Thread(target=probe, args=(n, rates, n)) for n in (a, b)]
        for t in loads:
            t.start()
        for t in loads:
            t.join()
        if stats:
            after = prog_stats()
        lost = stop_trace(tracer)
        other = b if traced == a else a
        result = (rates[traced], rates[other], lost)
        if stats:
            return result, before, after
        return result
    finally:
        for n, s in servers.items():
            churn_ns.remove(n, s)


TRACE_PROGS = {"tcp_retransmit_skb", "tcp_retransmit_synack", "tcp_send_reset",
               "tcp_receive_reset", "inet_sock_set_state", "kfree_skb", "tcp_probe"}


def prog_stats():
    out = subprocess.run(["bpftool", "prog", "show", "-j"], capture_output=True, text=True)
    return {p["name"]: (p.get("run_cnt", 0), p.get("run_time_ns", 0))
            for p in json.loads(out.stdout or "[]")
            if p.get("type") == "tracing" and p.get("name") in TRACE_PROGS}


def main():
    if os.geteuid() != 0:
        sys.exit("run as root")
    if not os.environ.get("TDOC_BIN"):
        subprocess.run(["cargo", "build", "--release", "-q", "-p", "tcpdoctor"], cwd=ROOT,
                       check=True)
    load_before = open("/proc/loadavg").read().split()[:3]
    ratios, lost_max, rows = [], 0, []
    for r in range(ROUNDS):
        traced, untraced, lost = one_round(r)
        if traced and untraced:
            ratios.append(traced / untraced)
            rows.append((traced, untraced))
        lost_max = max(lost_max, lost)
        print(f"round {r + 1}: traced {traced:.0f}, untraced {untraced:.0f} conn/s, "
              f"lost {lost}", file=sys.stderr)
    load_after = open("/proc/loadavg").read().split()[:3]
    # The early exit alone: one more round with run-time statistics while the trace
    # watches an idle namespace (both loads then pay only the early exit).
    old = open("/proc/sys/kernel/bpf_stats_enabled").read().strip()
    with open("/proc/sys/kernel/bpf_stats_enabled", "w") as f:
        f.write("1")
    try:
        (t_rate, u_rate, _), before, after = one_round(ROUNDS, stats=True)
    finally:
        with open("/proc/sys/kernel/bpf_stats_enabled", "w") as f:
            f.write(old)
    runs = sum(after[k][0] - before.get(k, (0, 0))[0] for k in after)
    ns = sum(after[k][1] - before.get(k, (0, 0))[1] for k in after)
    conns = (t_rate + u_rate) * DUR

    mean = statistics.fmean(ratios)
    half = 1.96 * statistics.stdev(ratios) / len(ratios) ** 0.5
    print(f"Machine: {os.cpu_count()} CPUs, kernel {os.uname().release}; load average "
          f"{' '.join(load_before)} before, {' '.join(load_after)} after.")
    print(f"Command: sudo bench/trace/paired.py {ROUNDS} {DUR} {CONC} (two `probe --mode crr "
          f"-c {CONC}` loads at once for {DUR} s, one traced, alternating)\n")
    print("| rounds | traced conn/s (median) | untraced conn/s (median) | traced / untraced: "
          "median (range) | mean, 95% interval | lost records |")
    print("|---:|---:|---:|---|---|---:|")
    print(f"| {len(ratios)} | {statistics.median(r[0] for r in rows):.0f} | "
          f"{statistics.median(r[1] for r in rows):.0f} | {statistics.median(ratios):.3f} "
          f"({min(ratios):.3f}-{max(ratios):.3f}) | {mean:.3f} ({mean - half:.3f}-"
          f"{mean + half:.3f}) | {lost_max} |")
    print(f"\nThe early exit both loads pay (one more round, the trace watching an idle "
          f"namespace, kernel.bpf_stats_enabled=1; the statistics' own clock reads included): "
          f"{runs} program runs for {conns:.0f} connections, {ns / max(runs, 1):.0f} ns per "
          f"run, {ns / max(conns, 1) / 1000:.2f} us per connection.")


if __name__ == "__main__":
    main()
