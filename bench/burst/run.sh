#!/usr/bin/env bash
# Burst sampler precision: the sampling interval tcpdoctor burst achieves at a 100 us target
# (p50 and p99 of the gaps between samples, p99 error against the target), in each wait mode,
# next to the way such traffic is usually sampled: a script polling
# /sys/class/net/IF/statistics/rx_bytes (a Python loop that sleeps 100 us, and a shell loop).
#
# Same interface (lo), same target and duration for every tool; RUNS runs each, medians.
# Writes the table between the burst markers of the "sockets, counters, burst" section of
# BENCHMARKS.md.
#
# Usage: bench/burst/run.sh [RUNS] [DURATION_S]   (defaults 5 and 3)
set -euo pipefail
cd "$(dirname "$0")/../.."
RUNS=${1:-5}
DUR=${2:-3}
IFACE=lo

if ! command -v python3 >/dev/null; then
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3 >/dev/null
fi
cargo build --release -q
BIN=target/release/tcpdoctor
TMP=$(mktemp -d /tmp/tdoc-bench-burst.XXXXXX)
trap 'rm -rf "$TMP"' EXIT

# Gaps (ns, one per line) -> "p50_ns p99_ns err_p99_ns" against a 100 us target.
stats() {
    python3 - "$1" <<'PY'
import sys
g = sorted(int(x) for x in open(sys.argv[1]) if x.strip())
e = sorted(abs(x - 100_000) for x in g)
p = lambda v, q: v[min(len(v) - 1, round((len(v) - 1) * q))]
print(p(g, .5), p(g, .99), p(e, .99))
PY
}

# tcpdoctor in one mode -> stats line.
run_tcpdoctor() {
    local mode=$1 out=$TMP/td.json extra=()
    case $mode in
        *-rt) mode=${mode%-rt}; extra=(--realtime) ;;
    esac
    "$BIN" burst "$IFACE" --interval 100us --duration "${DUR}s" --direction rx \
        --mode "$mode" "${extra[@]}" --json >"$out" || true
    python3 - "$out" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))["sampling"]
print(s["p50_ns"], s["p99_ns"], s["error_p99_ns"])
PY
}

# The usual scripted approach in Python: open+read the counter, sleep 100 us, record the time.
run_python() {
    python3 - "$IFACE" "$DUR" >"$TMP/py.gaps" <<'PY'
import sys, time
path = f"/sys/class/net/{sys.argv[1]}/statistics/rx_bytes"
end = time.monotonic_ns() + int(float(sys.argv[2]) * 1e9)
ts = []
while True:
    with open(path) as f:
        f.read()
    t = time.monotonic_ns()
    ts.append(t)
    if t > end:
        break
    time.sleep(0.0001)
print("\n".join(str(b - a) for a, b in zip(ts, ts[1:])))
PY
    stats "$TMP/py.gaps"
}

# A shell loop: read the counter, take $EPOCHREALTIME (us), no sleep at all.
run_shell() {
    bash -c '
        f=/sys/class/net/'"$IFACE"'/statistics/rx_bytes
        end=$(( ${EPOCHREALTIME/./} + '"$DUR"' * 1000000 ))
        prev=${EPOCHREALTIME/./}
        while :; do
            read -r v < "$f"
            now=${EPOCHREALTIME/./}
            echo $(( (now - prev) * 1000 ))
            prev=$now
            (( now > end )) && break
        done' >"$TMP/sh.gaps"
    stats "$TMP/sh.gaps"
}

median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }

declare -A P50 P99 E99
TOOLS="busy-rt hybrid-rt busy hybrid sleep python shell"
for tool in $TOOLS; do
    : >"$TMP/$tool.res"
    for _ in $(seq "$RUNS"); do
        case $tool in
            busy*|hybrid*|sleep) run_tcpdoctor "$tool" ;;
            python) run_python ;;
            shell) run_shell ;;
        esac >>"$TMP/$tool.res"
    done
    P50[$tool]=$(awk '{print $1}' "$TMP/$tool.res" | median)
    P99[$tool]=$(awk '{print $2}' "$TMP/$tool.res" | median)
    E99[$tool]=$(awk '{print $3}' "$TMP/$tool.res" | median)
    echo "$tool: p50 ${P50[$tool]} ns, p99 ${P99[$tool]} ns, p99 error ${E99[$tool]} ns" >&2
done

us() { awk -v n="$1" 'BEGIN { v = n / 1000; if (v >= 1000) printf "%.1f ms", v / 1000; else printf "%.1f us", v }'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.1fx", a / b; else print "-" }'; }

CPU=$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')
LOAD=$(cut -d' ' -f1-3 /proc/loadavg)
{
    echo "<!-- burst:begin (written by bench/burst/run.sh) -->"
    echo "### burst: achieved sampling interval at a 100 us target"
    echo
    echo "Machine: $(nproc) CPUs ($CPU), Linux $(uname -r), load average $LOAD at the end"
    echo "(a shared 2-core machine: a high load means other work competed). Interface: $IFACE. $RUNS runs of ${DUR} s"
    echo "per tool, medians. Command: \`bench/burst/run.sh $RUNS $DUR\`."
    echo
    echo "| sampler | p50 interval | p99 interval | p99 error vs 100 us | p99 error / tcpdoctor busy --realtime |"
    echo "|---|---|---|---|---|"
    for tool in $TOOLS; do
        case $tool in
            busy-rt) name="tcpdoctor burst --mode busy --realtime (pinned, spinning, SCHED_FIFO)" ;;
            hybrid-rt) name="tcpdoctor burst --mode hybrid --realtime" ;;
            busy) name="tcpdoctor burst --mode busy (pinned, spinning; the default below 1 ms)" ;;
            hybrid) name="tcpdoctor burst --mode hybrid (sleep, spin last 40 us)" ;;
            sleep) name="tcpdoctor burst --mode sleep (clock_nanosleep, 1 ns slack)" ;;
            python) name="Python loop: open+read rx_bytes, sleep 100 us (a typical sampling script)" ;;
            shell) name="bash loop: read rx_bytes, no sleep" ;;
        esac
        echo "| $name | $(us "${P50[$tool]}") | $(us "${P99[$tool]}") | $(us "${E99[$tool]}") | $(ratio "${E99[$tool]}" "${E99[busy-rt]}") |"
    done
    echo
    echo "Goal: p99 error <= 20 us in busy-poll mode. The shell loop samples as fast as it can"
    echo "(no target), so its error is against 100 us only for comparison; the Python loop is"
    echo "the usual scripted method. Without --realtime a spinning sampler is preempted at the end"
    echo "of its time slice whenever the other core's work spills over; with it the kernel"
    echo "still takes ~5% of that CPU back (sched_rt_runtime_us), seen as rare gaps in max."
    echo "<!-- burst:end -->"
} >"$TMP/section.md"
cat "$TMP/section.md"

python3 - BENCHMARKS.md "$TMP/section.md" <<'PY'
import re, sys
path, new = sys.argv[1], open(sys.argv[2]).read().rstrip("\n")
text = open(path).read()
begin, end = "<!-- burst:begin", "<!-- burst:end -->"
if begin in text:
    a = text.index(begin)
    b = text.index(end) + len(end)
    text = text[:a] + new + text[b:]
else:
    head = "## sockets, counters, burst (issue 4)"
    a = text.index(head)
    nxt = text.find("\n## ", a + len(head))
    nxt = len(text) if nxt < 0 else nxt
    text = text[:nxt].rstrip("\n") + "\n\n" + new + "\n\n" + text[nxt:].lstrip("\n")
open(path, "w").write(text)
PY
