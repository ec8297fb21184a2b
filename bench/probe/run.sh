#!/usr/bin/env bash
# Benchmark of `tcpdoctor probe` against its floors, side by side in one run, on loopback
# inside a network namespace this script creates (tdoc-bench-PID, deleted on exit):
#   crr -c 1:  tcpdoctor probe --mode crr -c 1   vs  bench/probe/crr.c (connect/send/read/close)
#              both against the same server: tcpdoctor probe --serve (TCP responder)
#   http:      tcpdoctor probe http://... with and without keep-alive  vs  wrk (keep-alive, and
#              -H 'Connection: close'), same concurrency, against Debian's nginx
# Each pair runs interleaved, RUNS times, DURATION each; the medians and ratios go into the
# probe section of BENCHMARKS.md (and bench/probe/last-run.md).
#
# usage: sudo bench/probe/run.sh [RUNS] [DURATION_S] [CONCURRENCY]
set -euo pipefail
cd "$(dirname "$0")/../.."
RUNS=${1:-5}
DUR=${2:-5}
CONC=${3:-4}

need=()
for p in gcc wrk nginx iproute2 python3; do
  dpkg -s "$p" >/dev/null 2>&1 || need+=("$p")
done
if [ ${#need[@]} -gt 0 ]; then
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq && apt-get install -y -qq "${need[@]}" >/dev/null
fi

cargo build --release -q -p tcpdoctor
BIN=$PWD/target/release/tcpdoctor
WORK=$(mktemp -d /tmp/tdoc-bench-probe.XXXXXX)
gcc -O2 -o "$WORK/crr" bench/probe/crr.c
NS=tdoc-bench-$$
SERVE_PID=
cleanup() {
  [ -n "$SERVE_PID" ] && kill "$SERVE_PID" 2>/dev/null || true
  [ -f "$WORK/nginx.pid" ] && kill "$(cat "$WORK/nginx.pid")" 2>/dev/null || true
  sleep 0.2
  # Whatever still runs inside our namespace was started by this script.
  for p in $(ip netns pids "$NS" 2>/dev/null); do kill "$p" 2>/dev/null || true; done
  ip netns del "$NS" 2>/dev/null || true
  rm -rf "$WORK"
}
trap cleanup EXIT INT TERM
ip netns add "$NS"
ip netns exec "$NS" ip link set lo up
in_ns() { ip netns exec "$NS" "$@"; }

# The TCP responder: 64-byte request, 64-byte reply, the client closes first.
# Not through in_ns: `ip netns exec` execs the binary, so $! is the server's own pid.
ip netns exec "$NS" "$BIN" probe --serve 127.0.0.1:5001 --serve-threads 8 >/dev/null 2>&1 &
SERVE_PID=$!

body=$(printf 'x%.0s' $(seq 64))
cat >"$WORK/nginx.conf" <<EOF
worker_processes auto;
pid $WORK/nginx.pid;
error_log $WORK/error.log;
events { worker_connections 4096; }
http {
  access_log off;
  keepalive_requests 10000000;
  client_body_temp_path $WORK; proxy_temp_path $WORK; fastcgi_temp_path $WORK;
  uwsgi_temp_path $WORK; scgi_temp_path $WORK;
  server {
    listen 127.0.0.1:8080 backlog=4096;
    location / { return 200 "$body"; }
  }
}
EOF
in_ns nginx -c "$WORK/nginx.conf"
sleep 0.5

c_loop() { in_ns "$WORK/crr" 127.0.0.1 5001 "$DUR" | sed -n 's/.*conn_per_s=\([0-9.]*\).*/\1/p'; }
tdoc() { # prints requests_ok_per_s; checks every request was recorded; notes failures
  # Exit status 1 only means findings (e.g. a warning about slow requests): not a failure.
  { in_ns "$BIN" probe "$@" -d "${DUR}s" -n 1000000000 --json || [ $? -eq 1 ]; } | python3 -c '
import json, sys
d = json.load(sys.stdin)
total = next(p for p in d["phases"] if p["phase"] == "total")
assert total["count"] == d["requests_ok"], "a request was not recorded"
for f in d["findings"]:
    if f["severity"] != "info":
        print("note: %s: %s" % (f["pathology"], f["summary"]), file=sys.stderr)
if d["requests_failed"]:
    print("note: %s failed: %s" % (d["requests_failed"], d["errors"]), file=sys.stderr)
print(d["requests_ok_per_s"])'
}
wrk_rps() { in_ns wrk -t2 -c "$CONC" -d "${DUR}s" "$@" http://127.0.0.1:8080/ | sed -n 's/^Requests\/sec: *\([0-9.]*\).*/\1/p'; }

declare -A R
load_before=$(cut -d' ' -f1-3 /proc/loadavg)
# Each pair runs back to back, in alternating order: a churning run leaves tens of thousands
# of TIME_WAIT sockets in the namespace for 60 s, which slows the next run's connects.
for i in $(seq "$RUNS"); do
  if [ $((i % 2)) -eq 1 ]; then
    R[c]+="$(c_loop) "
    R[t_crr]+="$(tdoc 127.0.0.1:5001 --mode crr -c 1) "
    R[wrk_close]+="$(wrk_rps -H 'Connection: close') "
    R[t_close]+="$(tdoc http://127.0.0.1:8080/ --keepalive off -c "$CONC") "
    R[wrk_ka]+="$(wrk_rps) "
    R[t_ka]+="$(tdoc http://127.0.0.1:8080/ -c "$CONC") "
  else
    R[t_crr]+="$(tdoc 127.0.0.1:5001 --mode crr -c 1) "
    R[c]+="$(c_loop) "
    R[t_close]+="$(tdoc http://127.0.0.1:8080/ --keepalive off -c "$CONC") "
    R[wrk_close]+="$(wrk_rps -H 'Connection: close') "
    R[t_ka]+="$(tdoc http://127.0.0.1:8080/ -c "$CONC") "
    R[wrk_ka]+="$(wrk_rps) "
  fi
  ip netns pids "$NS" >/dev/null 2>&1 || { echo "namespace $NS vanished (a 'lab cleanup' elsewhere?)" >&2; exit 1; }
  echo "run $i/$RUNS done" >&2
done
load_after=$(cut -d' ' -f1-3 /proc/loadavg)

cpu=$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1)
report=$(python3 - "$RUNS" "$DUR" "$CONC" "$(nproc)" "$(uname -r)" "$cpu" "$load_before" "$load_after" \
  "${R[c]}" "${R[t_crr]}" "${R[wrk_close]}" "${R[t_close]}" "${R[wrk_ka]}" "${R[t_ka]}" <<'EOF'
import statistics, sys
runs, dur, conc, ncpu, kernel, cpu, lb, la = sys.argv[1:9]
vals = [[float(x) for x in a.split()] for a in sys.argv[9:15]]
c, tcrr, wclose, tclose, wka, tka = vals
m = statistics.median
def row(name, cmd, mine, peer, peer_name, peer_cmd):
    return (f"| {name} | `{cmd}` | {m(mine):,.0f} | `{peer_cmd}` | {m(peer):,.0f} | **{m(mine)/m(peer):.2f}x** |\n")
out = f"""Run by `bench/probe/run.sh {runs} {dur} {conc}`: loopback inside a fresh network namespace,
{runs} rounds of {dur} s runs, each pair back to back in alternating order, medians. Machine: {ncpu} CPUs ({cpu}), Linux {kernel};
load average before/after: {lb} / {la} (the 1-minute figure includes this benchmark's own load).
Every tcpdoctor run recorded every connection/request (per-phase HDR histograms, per-second
series, spike classification; the script checks that the total histogram counts every request).

| what | tcpdoctor | req/s | peer | req/s | ratio |
|---|---|---:|---|---:|---:|
"""
out += row("crr, 1 worker", "probe 127.0.0.1:5001 --mode crr -c 1", tcrr, c, "C loop", "bench/probe/crr.c (connect/send/read/close)")
out += row(f"http, no keep-alive, {conc} conns", f"probe http://127.0.0.1:8080/ --keepalive off -c {conc}", tclose, wclose, "wrk", f"wrk -t2 -c {conc} -H 'Connection: close'")
out += row(f"http keep-alive, {conc} conns", f"probe http://127.0.0.1:8080/ -c {conc}", tka, wka, "wrk", f"wrk -t2 -c {conc}")
pairs = lambda a, b: m([x / y for x, y in zip(a, b)])
out += (f"\nMedian of the per-round ratios (each pair ran back to back): crr {pairs(tcrr, c):.2f}x, "
        f"http no keep-alive {pairs(tclose, wclose):.2f}x, http keep-alive {pairs(tka, wka):.2f}x.\n")
out += "\nAll runs (req/s, in round order):\n\n"
for name, v in zip(["C loop", "probe crr -c 1", "wrk close", "probe http close", "wrk keep-alive", "probe http keep-alive"], vals):
    out += f"- {name}: " + ", ".join(f"{x:,.0f}" for x in v) + "\n"
print(out)
EOF
)
echo "$report" | tee bench/probe/last-run.md
python3 - "$report" <<'EOF'
import re, sys
path = "BENCHMARKS.md"
text = open(path).read()
start = text.index("## probe (issue 2)")
nxt = text.find("\n## ", start + 1)
section = "## probe (issue 2)\n\n" + sys.argv[1].strip() + "\n\n"
text = text[:start] + section + (text[nxt + 1:] if nxt != -1 else "")
open(path, "w").write(text)
EOF
