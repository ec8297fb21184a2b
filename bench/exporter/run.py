#!/usr/bin/env python3
"""Scrape time and CPU of `tcpdoctor exporter` beside Debian's prometheus-node-exporter, at
50,000 TIME_WAIT sockets, on the same host state, in one run.

Host state: a network namespace this script creates (tdoc-bench-ex-PID), with N client-side
TIME_WAIT sockets over its loopback toward 5 listeners (bench/sockets/make_time_wait.py;
ports 20001-20005, outside the namespace's ip_local_port_range of 30000-65535, as are the
exporters' ports). TIME_WAIT lasts 60 s (TCP_TIMEWAIT_LEN, include/net/tcp.h), so each round
fills the namespace, measures for PHASE_S seconds while every socket is still there (the
count is taken before and after), then waits for them to expire before the next fill.

Both exporters run inside the namespace (`ip netns exec`) on its loopback:
  tcpdoctor exporter --listen 127.0.0.1:9977 --interval 15s --no-trace
  prometheus-node-exporter --collector.disable-defaults --collector.netstat
      --collector.sockstat --web.listen-address 127.0.0.1:9100
One client in the namespace scrapes them alternately (the order swapped every pair), each over
a kept-alive connection as Prometheus does, asking for OpenMetrics first with Prometheus'
Accept header and without gzip (tcpdoctor does not compress; node_exporter would, at a CPU
cost to itself). Scrape time: from sending the request to the last byte of the body.

CPU: utime + stime (+ children's, for tcpdoctor's `ip route`) from /proc/PID/stat over each
measurement phase. tcpdoctor's diagnosis runs on its own thread (tdoc-collector) every
--interval, whether scraped or not; its CPU (that thread's /proc/PID/task/TID/stat plus the
children) is reported per diagnosis (censuses_total counted from the scrapes), and the rest
of the process's CPU per scrape. /proc counts CPU in clock ticks (10 ms at USER_HZ 100); the
totals are several seconds.

usage: sudo bench/exporter/run.py   (env: N=50000 ROUNDS=2 PHASE_S=40 GAP_MS=50 INTERVAL=15s)
Writes the results between markers in BENCHMARKS.md's "## exporter" section.
"""

import http.client
import json
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
N = int(os.environ.get("N", "50000"))
ROUNDS = int(os.environ.get("ROUNDS", "2"))
PHASE_S = float(os.environ.get("PHASE_S", "40"))
GAP_MS = float(os.environ.get("GAP_MS", "50"))
INTERVAL = os.environ.get("INTERVAL", "15s")
DESTS = 5
NS = f"tdoc-bench-ex-{os.getpid()}"
BIN = os.path.join(ROOT, "target", "release", "tcpdoctor")
NODE = "/usr/bin/prometheus-node-exporter"
HZ = os.sysconf("SC_CLK_TCK")
TD_ADDR, NE_ADDR = ("127.0.0.1", 9977), ("127.0.0.1", 9100)
# What Prometheus 2.42 sends.
ACCEPT = ("application/openmetrics-text;version=1.0.0,application/openmetrics-text;"
          "version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1")

procs = []


def sh(*cmd, **kw):
    return subprocess.run(cmd, check=True, **kw)


def cleanup(*_):
    for p in procs:
        if p.poll() is None:
            p.terminate()
    for p in procs:
        try:
            p.wait(timeout=5)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
    # Anything else still in the namespace was started by this script (the fill).
    r = subprocess.run(["ip", "netns", "pids", NS], capture_output=True, text=True)
    for pid in r.stdout.split():
        try:
            os.kill(int(pid), signal.SIGKILL)
        except (ProcessLookupError, ValueError):
            pass
    subprocess.run(["ip", "netns", "del", NS], stderr=subprocess.DEVNULL)


def on_signal(sig, _frame):
    cleanup()
    sys.exit(128 + sig)


def ensure_packages():
    need = []
    if not os.path.exists(NODE):
        need.append("prometheus-node-exporter")
    for tool, pkg in (("ip", "iproute2"), ("ss", "iproute2"), ("curl", "curl")):
        if subprocess.run(["sh", "-c", f"command -v {tool}"], capture_output=True).returncode:
            need.append(pkg)
    if need:
        env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
        sh("apt-get", "update", "-qq", env=env)
        # The package's postinst may try to start the service; the binary is all we use.
        sh("apt-get", "install", "-y", "-qq", "--no-install-recommends", *sorted(set(need)),
           env=env, stdout=subprocess.DEVNULL)


def inns(*cmd):
    return ["ip", "netns", "exec", NS, *cmd]


def cpu_ticks(pid, children=False):
    """utime + stime (+ cutime + cstime) of a process, or of a thread via task/TID."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    # fields[0] is the state (field 3); utime is field 14.
    t = int(fields[11]) + int(fields[12])
    if children:
        t += int(fields[13]) + int(fields[14])
    return t


def collector_tid(pid):
    for tid in os.listdir(f"/proc/{pid}/task"):
        with open(f"/proc/{pid}/task/{tid}/comm") as f:
            if f.read().strip() == "tdoc-collector":
                return int(tid)
    raise RuntimeError("tcpdoctor exporter has no tdoc-collector thread")


def children_ticks(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return int(fields[13]) + int(fields[14])


def peak_rss_kib(pid):
    for l in open(f"/proc/{pid}/status"):
        if l.startswith("VmHWM:"):
            return int(l.split()[1])
    return 0


def time_wait():
    out = subprocess.run(inns("ss", "-Htan", "state", "time-wait"), capture_output=True,
                         text=True, check=True).stdout
    return out.count("\n")


def wait_http(addr, timeout=30):
    """Waits until an exporter in the namespace answers (its first census done)."""
    url = "http://%s:%d/metrics" % addr
    t0 = time.time()
    while time.time() - t0 < timeout:
        r = subprocess.run(inns("curl", "-sf", "-o", "/dev/null", "--max-time", "5", url))
        if r.returncode == 0:
            return
        time.sleep(0.2)
    raise RuntimeError(f"nothing serves {url} in namespace {NS}")


SCRAPER = r'''
import http.client, json, sys, time
accept, phase_s, gap_s = sys.argv[1], float(sys.argv[2]), float(sys.argv[3])
conns = {"td": ("127.0.0.1", 9977), "ne": ("127.0.0.1", 9100)}
c = {k: http.client.HTTPConnection(*a, timeout=10) for k, a in conns.items()}
hdr = {"Accept": accept}
def scrape(k):
    t = time.perf_counter_ns()
    c[k].request("GET", "/metrics", headers=hdr)
    r = c[k].getresponse()
    body = r.read()
    dt = time.perf_counter_ns() - t
    return dt, r.status, body
out = {"td": [], "ne": [], "bytes": {}, "series": {}, "status": {}, "censuses": []}
t0 = time.time()
i = 0
while time.time() - t0 < phase_s:
    order = ("td", "ne") if i % 2 == 0 else ("ne", "td")
    for k in order:
        dt, st, body = scrape(k)
        out[k].append(dt)
        out["status"][str(st)] = out["status"].get(str(st), 0) + 1
        if k not in out["bytes"]:
            out["bytes"][k] = len(body)
            out["series"][k] = sum(1 for l in body.split(b"\n") if l and not l.startswith(b"#"))
        if k == "td":
            for l in body.split(b"\n"):
                if l.startswith(b"tcpdoctor_censuses_total "):
                    out["censuses"].append(int(float(l.split()[1])))
                elif l.startswith(b"tcpdoctor_census_duration_seconds "):
                    out.setdefault("census_s", []).append(float(l.split()[1]))
        time.sleep(gap_s)
    i += 1
print(json.dumps(out))
'''


def main():
    if os.geteuid() != 0:
        sys.exit("run.py: needs root (network namespaces)")
    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    ensure_packages()
    sh("cargo", "build", "--release", "-q", "-p", "tcpdoctor", "--bin", "tcpdoctor", cwd=ROOT)
    load_before = open("/proc/loadavg").read().split()[:3]

    sh("ip", "netns", "add", NS)
    sh(*inns("ip", "link", "set", "lo", "up"))
    sh(*inns("sysctl", "-qw", "net.ipv4.ip_local_port_range=30000 65535",
             "net.ipv4.tcp_tw_reuse=0", "net.ipv4.tcp_max_tw_buckets=262144"))

    td = subprocess.Popen(inns(BIN, "exporter", "--listen", "%s:%d" % TD_ADDR, "--interval",
                               INTERVAL, "--no-trace"), stderr=subprocess.DEVNULL)
    procs.append(td)
    ne = subprocess.Popen(inns(NODE, "--collector.disable-defaults", "--collector.netstat",
                               "--collector.sockstat", "--web.listen-address",
                               "%s:%d" % NE_ADDR), stderr=subprocess.DEVNULL)
    procs.append(ne)
    wait_http(TD_ADDR)
    wait_http(NE_ADDR)
    tid = collector_tid(td.pid)

    fill = os.path.join(ROOT, "bench", "sockets", "make_time_wait.py")
    td_scrape, ne_scrape = [], []
    acc = {"td_rest": 0, "td_coll": 0, "ne": 0, "td_n": 0, "ne_n": 0, "censuses": 0,
           "census_s": [], "tw": [], "phase_s": 0.0, "status": {}}
    sizes = {}
    for rnd in range(ROUNDS):
        if rnd > 0:
            # Let the previous round's sockets expire (60 s after they were made).
            deadline = time.time() + 90
            while time_wait() > 100 and time.time() < deadline:
                time.sleep(2)
        sh(*inns("timeout", "55", "python3", fill, str(N), str(DESTS)))
        tw0 = time_wait()
        c0 = {"td": cpu_ticks(td.pid, children=True), "coll": cpu_ticks(f"{td.pid}/task/{tid}"),
              "ch": children_ticks(td.pid), "ne": cpu_ticks(ne.pid)}
        t0 = time.time()
        r = subprocess.run(inns("python3", "-c", SCRAPER, ACCEPT, str(PHASE_S),
                                str(GAP_MS / 1000)), capture_output=True, text=True, check=True)
        secs = time.time() - t0
        c1 = {"td": cpu_ticks(td.pid, children=True), "coll": cpu_ticks(f"{td.pid}/task/{tid}"),
              "ch": children_ticks(td.pid), "ne": cpu_ticks(ne.pid)}
        tw1 = time_wait()
        o = json.loads(r.stdout)
        td_scrape += o["td"]
        ne_scrape += o["ne"]
        coll = (c1["coll"] - c0["coll"]) + (c1["ch"] - c0["ch"])
        acc["td_coll"] += coll
        acc["td_rest"] += (c1["td"] - c0["td"]) - coll
        acc["ne"] += c1["ne"] - c0["ne"]
        acc["td_n"] += len(o["td"])
        acc["ne_n"] += len(o["ne"])
        acc["censuses"] += o["censuses"][-1] - o["censuses"][0]
        acc["census_s"] += o.get("census_s", [])
        acc["tw"] += [tw0, tw1]
        acc["phase_s"] += secs
        for k, v in o["status"].items():
            acc["status"][k] = acc["status"].get(k, 0) + v
        sizes = {"bytes": o["bytes"], "series": o["series"]}
        print(f"round {rnd + 1}: TIME_WAIT {tw0} -> {tw1}; {len(o['td'])} scrapes each; "
              f"tcpdoctor median {statistics.median(o['td']) / 1e6:.2f} ms, node_exporter "
              f"{statistics.median(o['ne']) / 1e6:.2f} ms", file=sys.stderr)

    load_after = open("/proc/loadavg").read().split()[:3]
    acc["rss"] = {"td": peak_rss_kib(td.pid), "ne": peak_rss_kib(ne.pid)}
    cleanup()
    report(td_scrape, ne_scrape, acc, sizes, load_before, load_after)


def node_version():
    r = subprocess.run([NODE, "--version"], capture_output=True, text=True)
    return (r.stdout + r.stderr).split("\n")[0].replace("node_exporter, version ", "")


def q(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(p * len(xs)))]


def report(td, ne, a, sizes, lb, la):
    ms = lambda ns: ns / 1e6
    tick_ms = 1000 / HZ
    td_med, ne_med = statistics.median(td), statistics.median(ne)
    td_cpu_scrape = a["td_rest"] * tick_ms / a["td_n"]
    ne_cpu_scrape = a["ne"] * tick_ms / a["ne_n"]
    per_census = a["td_coll"] * tick_ms / a["censuses"] if a["censuses"] else float("nan")
    census_wall = statistics.median(a["census_s"]) * 1000 if a["census_s"] else float("nan")
    interval_s = float(INTERVAL.rstrip("s"))
    cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo")
                if l.startswith("model name")), "?")
    cmd = (f"N={N} ROUNDS={ROUNDS} PHASE_S={PHASE_S:g} GAP_MS={GAP_MS:g} INTERVAL={INTERVAL} "
           "bench/exporter/run.py")
    lines = [
        f"Command: `{cmd}` (one run).",
        "",
        f"Machine: {os.cpu_count()} CPUs ({cpu}), Linux {os.uname().release}; load average "
        f"{' '.join(lb)} before, {' '.join(la)} after. node_exporter: "
        f"{node_version()}.",
        f"Host state: TIME_WAIT sockets in the namespace at the start and end of each "
        f"measurement phase: {', '.join(map(str, a['tw']))}; {ROUNDS} phases of "
        f"{PHASE_S:g} s, {a['td_n']} scrapes of each exporter, alternating, {GAP_MS:g} ms "
        f"apart; HTTP statuses {a['status']}.",
        f"Response: tcpdoctor {sizes['bytes'].get('td', 0)} bytes, "
        f"{sizes['series'].get('td', 0)} samples; node_exporter "
        f"{sizes['bytes'].get('ne', 0)} bytes, {sizes['series'].get('ne', 0)} samples. "
        f"Peak RSS (VmHWM): tcpdoctor {a['rss']['td'] / 1024:.1f} MiB, node_exporter "
        f"{a['rss']['ne'] / 1024:.1f} MiB.",
        "",
        "| exporter (in the namespace) | scrape median | p90 | p99 | CPU per scrape | "
        "scrape time vs node_exporter |",
        "|---|---|---|---|---|---|",
        f"| `tcpdoctor exporter --interval {INTERVAL} --no-trace` | {ms(td_med):.2f} ms | "
        f"{ms(q(td, .9)):.2f} ms | {ms(q(td, .99)):.2f} ms | {td_cpu_scrape:.2f} ms | "
        f"{td_med / ne_med:.2f}x |",
        f"| `prometheus-node-exporter` (netstat, sockstat) | {ms(ne_med):.2f} ms | "
        f"{ms(q(ne, .9)):.2f} ms | {ms(q(ne, .99)):.2f} ms | {ne_cpu_scrape:.2f} ms | 1.00x |",
        "",
        f"tcpdoctor's background diagnosis (two sock_diag censuses of the {N} sockets, the "
        f"process scan, the settings audit, two `ip route` runs): **{per_census:.0f} ms CPU "
        f"per diagnosis** ({a['censuses']} diagnoses, {a['td_coll'] * tick_ms:.0f} ms on the "
        f"collector thread and its children); the census dump itself (`tcpdoctor_census_"
        f"duration_seconds`) median {census_wall:.1f} ms wall. At one diagnosis per "
        f"{INTERVAL} and one scrape per {INTERVAL}, tcpdoctor costs "
        f"{(per_census + td_cpu_scrape) / interval_s / 10:.2f}% of a CPU, node_exporter "
        f"{ne_cpu_scrape / interval_s / 10:.3f}%.",
        "",
        f"Goals: a scrape at 50 k TIME_WAIT <= 50 ms: tcpdoctor's median {ms(td_med):.2f} ms "
        f"(p99 {ms(q(td, .99)):.2f} ms); no slower than node_exporter: "
        f"{'met' if td_med <= ne_med else 'not met'} on scrape time "
        f"({ne_med / td_med:.2f}x node_exporter's speed) and on CPU per scrape "
        f"({ne_cpu_scrape / td_cpu_scrape:.2f}x less); not on CPU over time, which the "
        f"background diagnosis dominates ({(per_census + td_cpu_scrape) / ne_cpu_scrape:.0f}x "
        f"node_exporter's at one scrape per interval).",
    ]
    text = "\n".join(lines)
    print(text)
    write_benchmarks(text)


def write_benchmarks(text):
    path = os.path.join(ROOT, "BENCHMARKS.md")
    notes = open(os.path.join(os.path.dirname(__file__), "NOTES.md")).read().strip()
    block = ("<!-- exporter:begin (written by bench/exporter/run.py) -->\n"
             + text + "\n\n" + notes + "\n<!-- exporter:end -->")
    doc = open(path).read()
    if "<!-- exporter:begin" in doc:
        doc = re.sub(r"<!-- exporter:begin.*?<!-- exporter:end -->", lambda _: block, doc,
                     flags=re.S)
    else:
        doc = doc.rstrip("\n") + "\n\n## exporter (issue 11)\n\n" + block + "\n"
    open(path, "w").write(doc)


if __name__ == "__main__":
    try:
        main()
    finally:
        cleanup()
