#!/usr/bin/env python3
"""Kernel-side cost of recording each close's owner (tgid + comm) in the trace's history table.

Connection churn on loopback inside a namespace this script creates (tdoc-bench-hist-PID,
deleted on exit): `tcpdoctor probe --mode crr` against `tcpdoctor probe --serve`. Each round
runs, in a rotating order, three tracers over the namespace, with BPF run-time statistics on
(BPF_ENABLE_STATS, held by this script):

  before:  `OLD trace --netns NS`   (the BPF object without comm in the history entry)
  after:   `NEW trace --netns NS`   (comm copied into the entry at each close)
  sockets: `NEW sockets --netns NS --watch 1s --json` (only the state-change program)

Reported per condition (medians over rounds): ns per run of the state-change program
(inet_sock_set_state, where the entry is written), and ns per connection of all of
tcpdoctor's programs (run_time_ns / run_cnt of the programs the tracer process holds, from
/proc/PID/fdinfo, named by bpftool).

usage: sudo bench/trace/close_history.py OLD_BIN NEW_BIN [ROUNDS] [DURATION_S]
"""

import ctypes
import json
import os
import statistics
import subprocess
import sys
import threading
import time
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from need import need  # noqa: E402

need("bpftool", "iproute2")

OLD, NEW = sys.argv[1], sys.argv[2]
ROUNDS = int(sys.argv[3]) if len(sys.argv) > 3 else 5
DUR = int(sys.argv[4]) if len(sys.argv) > 4 else 5
NS = f"tdoc-bench-hist-{os.getpid()}"
PROGS = {"tcp_retransmit_skb", "tcp_retransmit_synack", "tcp_send_reset",
         "tcp_receive_reset", "inet_sock_set_state", "kfree_skb", "tcp_probe"}


def enable_stats():
    """BPF_ENABLE_STATS (bpf(2) command 32, BPF_STATS_RUN_TIME): run-time statistics stay on
    while the returned fd is open, whatever else sets kernel.bpf_stats_enabled meanwhile."""
    libc = ctypes.CDLL(None, use_errno=True)
    attr = ctypes.create_string_buffer(8)
    fd = libc.syscall(321, 32, attr, 8)  # SYS_bpf on x86_64
    if fd < 0:
        raise OSError(ctypes.get_errno(), "BPF_ENABLE_STATS")
    return fd


def stats(pid):
    """(run count, run time ns) per program name, of the BPF programs process `pid` holds
    (its fds, /proc/PID/fdinfo): other tracers on the machine are not counted."""
    per = {}
    for fd in os.listdir(f"/proc/{pid}/fdinfo"):
        try:
            info = open(f"/proc/{pid}/fdinfo/{fd}").read()
        except OSError:
            continue
        f = dict(l.split(":", 1) for l in info.splitlines() if ":" in l)
        if "prog_id" not in f or "run_cnt" not in f:
            continue
        pid_ = int(f["prog_id"])
        if pid_ not in NAMES:
            out = subprocess.run(["bpftool", "prog", "show", "id", str(pid_), "-j"],
                                 capture_output=True, text=True, check=True).stdout
            NAMES[pid_] = json.loads(out).get("name", "")
        name = NAMES[pid_]
        if name in PROGS:
            r, n = per.get(name, (0, 0))
            per[name] = (r + int(f["run_cnt"]), n + int(f["run_time_ns"]))
    return per


NAMES = {}


def load():
    out = subprocess.run(["ip", "netns", "exec", NS, NEW, "probe", "127.0.0.1:5001", "--mode",
                          "crr", "-c", "2", "-d", f"{DUR}s", "-n", "1000000000", "--json"],
                         capture_output=True, text=True)
    d = json.loads(out.stdout)
    return d["requests_ok"] if "requests_ok" in d else d["requests_ok_per_s"] * DUR


def tracer(cmd, ready_on_stdout):
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    stream = p.stdout if ready_on_stdout else p.stderr
    deadline = time.time() + 30
    while time.time() < deadline:
        line = stream.readline()
        if not line:
            raise RuntimeError(f"{cmd[1]} ended before it was ready: {p.stderr.read()}")
        if ready_on_stdout or "tracing started" in line:
            # Keep reading both streams so the tracer never blocks on a full pipe.
            for st in (p.stdout, p.stderr):
                threading.Thread(target=lambda st=st: [None for _ in st], daemon=True).start()
            return p
    raise RuntimeError("not ready in 30 s")


def run(cond):
    if cond == "before":
        p = tracer([OLD, "trace", "--netns", NS, "--json", "--every", "1h"], False)
    elif cond == "after":
        p = tracer([NEW, "trace", "--netns", NS, "--json", "--every", "1h"], False)
    else:
        p = tracer([NEW, "sockets", "--netns", NS, "--watch", "1s", "--json"], True)
    try:
        target = p.pid
        s0 = stats(target)
        conns = load()
        s1 = stats(target)
    finally:
        p.terminate()
        p.wait(timeout=30)
        # Programs are freed after their last fd closes, not at once: let them go before
        # the next condition reads its first statistics.
        time.sleep(2)
    if set(s0) != set(s1):
        raise RuntimeError(f"programs changed during the run: {sorted(s0)} -> {sorted(s1)}")
    d = {k: (s1[k][0] - s0[k][0], s1[k][1] - s0[k][1]) for k in s1}
    runs, ns = d.get("inet_sock_set_state", (0, 0))
    total = sum(v[1] for v in d.values())
    return ns / max(runs, 1), total / max(conns, 1), conns / DUR


def main():
    if os.geteuid() != 0:
        sys.exit("run as root")
    subprocess.run(["ip", "netns", "add", NS], check=True)
    server = None
    stats_fd = enable_stats()
    try:
        subprocess.run(["ip", "netns", "exec", NS, "ip", "link", "set", "lo", "up"], check=True)
        subprocess.run(["ip", "netns", "exec", NS, "sysctl", "-qw",
                        "net.ipv4.ip_local_port_range=1024 65535"], check=True)
        server = subprocess.Popen(["ip", "netns", "exec", NS, NEW, "probe", "--serve",
                                   "127.0.0.1:5001"], stdout=subprocess.DEVNULL,
                                  stderr=subprocess.DEVNULL)
        time.sleep(0.5)
        conds = ["before", "after", "sockets"]
        res = {c: [] for c in conds}
        for r in range(ROUNDS):
            for c in conds[r % 3:] + conds[:r % 3]:
                v = run(c)
                res[c].append(v)
                print(f"round {r + 1} {c}: set_state {v[0]:.0f} ns/run, "
                      f"{v[1]:.0f} ns/conn all programs, {v[2]:.0f} conn/s", file=sys.stderr)
        print("| condition | inet_sock_set_state ns/run (median, range) | "
              "all programs ns/connection (median) | conn/s (median) |")
        print("|---|---|---|---|")
        for c in conds:
            a = [v[0] for v in res[c]]
            print(f"| {c} | {statistics.median(a):.0f} ({min(a):.0f}-{max(a):.0f}) | "
                  f"{statistics.median(v[1] for v in res[c]):.0f} | "
                  f"{statistics.median(v[2] for v in res[c]):.0f} |")
    finally:
        os.close(stats_fd)
        if server:
            server.terminate()
        subprocess.run(["ip", "netns", "del", NS])


if __name__ == "__main__":
    main()
