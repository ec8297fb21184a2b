#!/usr/bin/env python3
"""Overhead of `tcpdoctor trace` beside bcc's tcpretrans + tcpdrop, side by side in one run.

Connection churn at full speed on loopback inside a network namespace: `tcpdoctor probe
--mode crr` against a `tcpdoctor probe --serve` responder. Every run gets a namespace of its
own (tdoc-bench-trace-PID-N, created before the run and deleted after it), so no run inherits
the TIME_WAIT sockets of the runs before it: with one namespace for all runs, each run left
~100 k TIME_WAIT sockets for 60 s and the next run's rate depended on how many were left
(the untraced rate alone varied by 20-40% between rounds). Each round runs three conditions
back to back, in an order that rotates every round: untraced; traced by `tcpdoctor trace
--netns NS`; traced by bcc's tcpretrans and tcpdrop together. Reported: the median connections/s per condition and
the median of the per-round ratios to the untraced run, the tracers' own CPU during the load
window (utime + stime from /proc/PID/stat, all threads), and tcpdoctor's lost records.

bcc needs kernel headers, which this kernel does not ship: its tools run in a private mount
namespace where tracefs is mounted and /lib/modules/$(uname -r) points at Debian's
linux-headers-6.1 (tracepoint arguments come from tracefs at run time; struct layouts from
the 6.1 headers may be off for 6.18, which changes what tcpdrop prints, not what it costs).
This kernel has no kprobes, so tcpdrop is run with its kprobe branch disabled (it then uses
the skb:kfree_skb tracepoint, as it does on kernels without tcp_drop).

usage: sudo [TDOC_BIN=path] [BCC_EVERY=N] bench/trace/run.py [ROUNDS] [DURATION_S] [CONCURRENCY]
"""

import contextlib
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import time

import churn_ns

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
ROUNDS = int(sys.argv[1]) if len(sys.argv) > 1 else 5
DUR = int(sys.argv[2]) if len(sys.argv) > 2 else 5
CONC = int(sys.argv[3]) if len(sys.argv) > 3 else 2
# bcc's tools take ~20 s to compile at each start: BCC_EVERY=N runs them in every Nth round
# only (untraced and tcpdoctor run in every round).
BCC_EVERY = max(1, int(os.environ.get("BCC_EVERY", "1")))
BCC = "bcc tcpretrans + tcpdrop"
NS_PREFIX = f"tdoc-bench-trace-{os.getpid()}"
NS = None  # the current run's namespace (fresh_namespace)
RUN = 0
# TDOC_BIN: a tcpdoctor binary to measure instead of building this tree's release binary.
BIN = os.environ.get("TDOC_BIN") or os.path.join(ROOT, "target", "release", "tcpdoctor")
HZ = os.sysconf("SC_CLK_TCK")
HEADERS = "linux-headers-6.1.0-47"

BCC_WRAP = r"""#!/bin/sh
set -e
mount -t tracefs nodev /sys/kernel/tracing
mount -t tmpfs tmpfs /sys/kernel/debug
mkdir -p /sys/kernel/debug/kprobes /sys/kernel/debug/tracing
: > /sys/kernel/debug/kprobes/blacklist
mount -t tracefs nodev /sys/kernel/debug/tracing
mount -t tmpfs tmpfs /lib/modules
mkdir -p /lib/modules/$(uname -r)
ln -s /usr/src/HEADERS-amd64 /lib/modules/$(uname -r)/build
ln -s /usr/src/HEADERS-common /lib/modules/$(uname -r)/source
exec "$@"
""".replace("HEADERS", HEADERS)


def sh(*cmd, **kw):
    return subprocess.run(cmd, check=True, **kw)


def ensure_packages():
    need = [p for p in ("bpfcc-tools", f"{HEADERS}-amd64", "iproute2")
            if subprocess.run(["dpkg", "-s", p], capture_output=True).returncode != 0]
    if need:
        env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
        sh("apt-get", "update", "-qq", env=env)
        sh("apt-get", "install", "-y", "-qq", *need, env=env, stdout=subprocess.DEVNULL)


def cpu_ticks(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return int(fields[11]) + int(fields[12])  # utime, stime
    except OSError:
        return 0


def tree_ticks(pids):
    return sum(cpu_ticks(p) for p in pids)


def probe_rate():
    import json
    for attempt in range(3):
        out = subprocess.run(
            ["ip", "netns", "exec", NS, BIN, "probe", "127.0.0.1:5001", "--mode", "crr",
             "-c", str(CONC), "-d", f"{DUR}s", "-n", "1000000000", "--json"],
            capture_output=True, text=True)
        try:
            d = json.loads(out.stdout)
            break
        except ValueError:
            print(f"note: probe printed no report (exit {out.returncode}): {out.stderr.strip()}",
                  file=sys.stderr)
            time.sleep(2)
    else:
        raise RuntimeError("probe failed three times")
    if d.get("requests_failed"):
        print(f"note: {d['requests_failed']} failed: {d.get('errors')}", file=sys.stderr)
    return d["requests_ok_per_s"]


def wait_for(stream, pattern, timeout_s):
    """Reads lines from stream until one matches (in a helper thread: no blocking forever)."""
    import threading
    found = threading.Event()
    lines = []

    def read():
        for line in stream:
            lines.append(line)
            if re.search(pattern, line):
                found.set()
                break
    t = threading.Thread(target=read, daemon=True)
    t.start()
    if not found.wait(timeout_s):
        raise RuntimeError(f"no '{pattern}' within {timeout_s} s: {''.join(lines)[-500:]}")


def untraced():
    return probe_rate(), None, None


TRACE_PROGS = {"tcp_retransmit_skb", "tcp_retransmit_synack", "tcp_send_reset",
               "tcp_receive_reset", "inet_sock_set_state", "kfree_skb", "tcp_probe"}


def bpf_run_ns(pid):
    """Run count and run time (ns) of tcpdoctor's BPF programs (kernel.bpf_stats_enabled).

    Debian's bpftool lists no owning pids, so programs are told by their names: nothing
    else attaches programs of these names while the benchmark runs."""
    import json
    out = subprocess.run(["bpftool", "prog", "show", "-j"], capture_output=True, text=True)
    runs = ns = 0
    for prog in json.loads(out.stdout or "[]"):
        if prog.get("type") == "tracing" and prog.get("name") in TRACE_PROGS:
            runs += prog.get("run_cnt", 0)
            ns += prog.get("run_time_ns", 0)
    return runs, ns


def tcpdoctor(stats=None):
    p = subprocess.Popen([BIN, "trace", "--netns", NS, "--json", "--every", "1h"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    wait_for(p.stderr, "tracing started", 30)
    before = cpu_ticks(p.pid)
    if stats is not None:
        runs0, ns0 = bpf_run_ns(p.pid)
    rate = probe_rate()
    if stats is not None:
        runs1, ns1 = bpf_run_ns(p.pid)
        stats.update(runs=runs1 - runs0, ns=ns1 - ns0, conns=rate * DUR)
    cpu = (cpu_ticks(p.pid) - before) / HZ
    p.send_signal(signal.SIGINT)
    out, _ = p.communicate(timeout=60)
    import json
    report = json.loads(out.strip().splitlines()[-1])
    return rate, cpu, report["lost_events"]


def bcc(wrap):
    procs = []
    for tool in (["tcpretrans-bpfcc"], ["/usr/bin/python3", wrap + ".tcpdrop"]):
        p = subprocess.Popen(["unshare", "-m", wrap] + tool, stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, text=True, bufsize=1)
        wait_for(p.stdout, r"^(TIME|Tracing)", 120)
        procs.append(p)
    # Keep draining their output so a full pipe never blocks them.
    import threading
    for p in procs:
        threading.Thread(target=lambda s=p.stdout: [None for _ in s], daemon=True).start()
    before = tree_ticks(p.pid for p in procs)
    rate = probe_rate()
    cpu = (tree_ticks(p.pid for p in procs) - before) / HZ
    for p in procs:
        p.send_signal(signal.SIGINT)
    for p in procs:
        try:
            p.wait(timeout=30)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
    return rate, cpu, None


@contextlib.contextmanager
def fresh_namespace():
    """A namespace for one run, with the responder listening (churn_ns)."""
    global NS, RUN
    RUN += 1
    NS = f"{NS_PREFIX}-{RUN}"
    with churn_ns.namespace(NS, BIN):
        yield


def main():
    if os.geteuid() != 0:
        sys.exit("run as root")
    ensure_packages()
    if not os.environ.get("TDOC_BIN"):
        sh("cargo", "build", "--release", "-q", "-p", "tcpdoctor", cwd=ROOT)
    work = tempfile.mkdtemp(prefix="tdoc-bench-trace.")
    wrap = os.path.join(work, "bcc.sh")
    with open(wrap, "w") as f:
        f.write(BCC_WRAP)
    os.chmod(wrap, 0o755)
    with open("/usr/sbin/tcpdrop-bpfcc") as f:
        src = f.read()
    src = src.replace('if b.get_kprobe_functions(b"tcp_drop"):', "if False:  # no kprobes here")
    with open(wrap + ".tcpdrop", "w") as f:
        f.write(src)
    load_before = open("/proc/loadavg").read().split()[:3]
    conds = [("untraced", untraced), ("tcpdoctor trace", tcpdoctor),
             (BCC, lambda: bcc(wrap))]
    results = {name: [] for name, _ in conds}
    stats = {}
    try:
        for r in range(ROUNDS):
            present = [c for c in conds if c[0] != BCC or r % BCC_EVERY == 0]
            k = r % len(present)
            for name, fn in present[k:] + present[:k]:
                with fresh_namespace():
                    rate, cpu, lost = fn()
                results[name].append((r, rate, cpu, lost))
                print(f"round {r + 1}: {name}: {rate:.0f} conn/s, tracer cpu {cpu}, lost {lost}",
                      file=sys.stderr)
        load_after = open("/proc/loadavg").read().split()[:3]
        # The programs' own run time is charged to the traced tasks, not to the tracer: one
        # more traced run with kernel.bpf_stats_enabled measures it (the statistics add
        # their own clock reads, about 70 ns per program run here, so this overstates it).
        old_stats = open("/proc/sys/kernel/bpf_stats_enabled").read().strip()
        with open("/proc/sys/kernel/bpf_stats_enabled", "w") as f:
            f.write("1")
        try:
            with fresh_namespace():
                tcpdoctor(stats)
        finally:
            with open("/proc/sys/kernel/bpf_stats_enabled", "w") as f:
                f.write(old_stats)
    finally:
        subprocess.run(["rm", "-rf", work])

    base = {x[0]: x[1] for x in results["untraced"]}
    print(f"Machine: {os.cpu_count()} CPUs, kernel {os.uname().release}; load average "
          f"{' '.join(load_before)} before, {' '.join(load_after)} after (other work shares "
          "the machine).")
    print(f"Command: sudo BCC_EVERY={BCC_EVERY} bench/trace/run.py {ROUNDS} {DUR} {CONC} "
          f"(probe --mode crr -c {CONC}, {DUR} s per run, {ROUNDS} interleaved rounds, bcc in "
          f"every {BCC_EVERY}. round; every run in a fresh namespace)\n")
    print("| condition | runs | conn/s (median) | vs untraced: median of per-round ratios "
          "(range) | mean ratio, 95% interval | tracer CPU during the run (median) "
          "| lost records |")
    print("|---|---:|---:|---|---|---|---|")
    for name, rows in results.items():
        rates = [x[1] for x in rows]
        ratios = [x[1] / base[x[0]] for x in rows if x[0] in base]
        cpu = [x[2] for x in rows if x[2] is not None]
        lost = [x[3] for x in rows if x[3] is not None]
        cpu_s = f"{statistics.median(cpu):.2f} s of {DUR} s ({100 * statistics.median(cpu) / DUR:.1f}% of a core)" if cpu else "-"
        lost_s = f"{max(lost)} (max of {len(lost)})" if lost else "not counted"
        mean = statistics.fmean(ratios)
        half = 1.96 * statistics.stdev(ratios) / len(ratios) ** 0.5 if len(ratios) > 1 else 0.0
        print(f"| {name} | {len(rows)} | {statistics.median(rates):.0f} | "
              f"{statistics.median(ratios):.3f} ({min(ratios):.3f}-{max(ratios):.3f}) | "
              f"{mean:.3f} ({mean - half:.3f}-{mean + half:.3f}) | {cpu_s} | {lost_s} |")
    if stats.get("runs"):
        print(f"\ntcpdoctor's BPF programs in the kernel (one extra traced run with "
              f"kernel.bpf_stats_enabled=1): {stats['runs']} runs, "
              f"{stats['ns'] / stats['runs']:.0f} ns per run, "
              f"{stats['ns'] / stats['conns'] / 1000:.2f} us per connection, "
              f"{100 * stats['ns'] / (DUR * 1e9):.1f}% of one core over the run")


if __name__ == "__main__":
    main()
