#!/usr/bin/env bash
# Benchmark: `tcpdoctor analyze` side by side with tshark's retransmission/reused-port
# analysis, `tcptrace -l`, `capinfos`, `cat` and tcpdoctor's capture reader alone (the reading
# floor: crates/capture/examples/capture_count.rs), on one capture this script records.
#
# The capture: a namespace (tdoc-bench-an-PID) whose lo has MTU 1500 and offloads off, an
# nftables rule dropping 0.2% of TCP packets at random in the input hook (after the capture
# tap, so every original is in the file), nginx answering thousands of short connections per
# second (wrk with "Connection: close"), plus two bulk iperf3 flows at a bounded rate;
# tcpdump -s 128 stops after $PKTS packets. Every load is bounded in time ($MAX_GEN_S).
#
# Timings: interleaved rounds (bench/analyze/rounds.py); peak memory from /usr/bin/time. tshark and tcptrace
# run on the first $PREFIX packets (editcap -r), as does tcpdoctor for the same-input ratio;
# tcpdoctor, capinfos and cat also run on the whole file. Results go to $OUT/result.md and
# replace the "analyze" section of BENCHMARKS.md, followed by the peak memory on a 1 M-distinct-
# client capture and a 1 M-unanswered-SYN capture (bench/analyze/memory.sh).
#
# Usage (root): bench/analyze/run.sh        env: PKTS ROUNDS PREFIX OUT KEEP=1 (keep capture)
set -euo pipefail
cd "$(dirname "$0")/../.."
ROOT=$PWD
PKTS=${PKTS:-10000000}
PREFIX=${PREFIX:-1000000}
ROUNDS=${ROUNDS:-5}
OUT=${OUT:-/tmp/tdoc-bench-analyze}
MAX_GEN_S=${MAX_GEN_S:-600}
NS=tdoc-bench-an-$$

need=(tcpdump tshark tcptrace wireshark-common nginx-light wrk iperf3 nftables ethtool iproute2 time bc)
missing=()
for p in "${need[@]}"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
if [ ${#missing[@]} -gt 0 ]; then
  # nginx may come as nginx or nginx-light; accept either.
  if [[ " ${missing[*]} " == *" nginx-light "* ]] && command -v nginx >/dev/null; then
    missing=("${missing[@]/nginx-light}")
  fi
  if [ -n "${missing[*]// /}" ]; then
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq && apt-get install -y -qq ${missing[*]} >/dev/null
  fi
fi

cargo build --release -p tcpdoctor >/dev/null
# The reading floor: crates/capture's reader alone (framing and decoding every segment, one
# thread, no analysis), the part of analyze's work that every packet costs before any state.
cargo build --release -p tcpdoctor-capture --example capture_count >/dev/null
TD=$ROOT/target/release/tcpdoctor
READ=$ROOT/target/release/examples/capture_count
mkdir -p "$OUT"
CAP=$OUT/bench.pcap
PRE=$OUT/prefix.pcap

pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  [ -f "$OUT/nginx.pid" ] && kill "$(cat "$OUT/nginx.pid")" 2>/dev/null || true
  ip netns del "$NS" 2>/dev/null || true
  if [ "${KEEP:-0}" != 1 ]; then rm -f "$PRE"; fi
}
trap cleanup EXIT INT TERM

packets_in() { capinfos -Mc "$1" 2>/dev/null | awk -F: '/Number of packets/ {gsub(/ /,"",$2); print $2}'; }

generate() {
  echo "generating $PKTS packets into $CAP ..." >&2
  rm -f "$CAP"
  ip netns add "$NS"
  local X="ip netns exec $NS"
  $X ip link set lo up
  $X ip link set lo mtu 1500
  $X ethtool -K lo tso off gso off gro off >/dev/null 2>&1 || true
  $X nft -f - <<NFT
table inet tdocbench {
  chain in {
    type filter hook input priority 0;
    meta l4proto tcp numgen random mod 1000 < 2 drop
  }
}
NFT
  cat > "$OUT/nginx.conf" <<NGX
worker_processes 1;
pid $OUT/nginx.pid;
error_log $OUT/nginx.err;
daemon off;
events { worker_connections 8192; }
http {
  access_log off;
  server { listen 127.0.0.1:8080 backlog=8192; location / { return 200 "ok\n"; } }
}
NGX
  $X nginx -c "$OUT/nginx.conf" -e "$OUT/nginx.err" & pids+=($!)
  $X iperf3 -s -p 5201 >/dev/null 2>&1 & pids+=($!)
  sleep 1
  $X timeout "$MAX_GEN_S" tcpdump -i lo -s 128 -B 262144 -c "$PKTS" -w "$CAP" tcp 2>"$OUT/tcpdump.err" & local tp=$!
  sleep 1
  $X timeout "$MAX_GEN_S" iperf3 -c 127.0.0.1 -p 5201 -P 2 -b 100M -t "$MAX_GEN_S" >/dev/null 2>&1 & pids+=($!)
  $X timeout "$MAX_GEN_S" wrk -t 1 -c 32 -d "${MAX_GEN_S}s" -H "Connection: close" http://127.0.0.1:8080/ >"$OUT/wrk.txt" 2>&1 & pids+=($!)
  local t0=$SECONDS
  wait "$tp" || true
  echo "capture done in $((SECONDS - t0)) s: $(tail -3 "$OUT/tcpdump.err" | tr '\n' ' ')" >&2
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  pids=()
  GEN_SECONDS=$((SECONDS - t0))
  ip netns del "$NS"
}

GEN_SECONDS=reused
if [ ! -s "$CAP" ] || [ "$(packets_in "$CAP")" -lt "$PKTS" ]; then generate; fi
N=$(packets_in "$CAP")
if [ ! -s "$PRE" ] || [ "$(packets_in "$PRE")" -ne "$PREFIX" ] || [ "$PRE" -ot "$CAP" ]; then
  editcap -r "$CAP" "$PRE" "1-$PREFIX"
fi
NPRE=$(packets_in "$PRE")
# Every tool reads from the page cache: flush the freshly written prefix, then warm both.
sync
cat "$CAP" "$PRE" >/dev/null
SIZE=$(stat -c %s "$CAP")

# Interleaved rounds (bench/analyze/rounds.py): every tool once or a few times per round, the
# ratios taken per round and their median reported, so the machine's drift between minutes
# does not land on one tool only.
echo "timing ($ROUNDS interleaved rounds; tshark/tcptrace on $NPRE packets) ..." >&2
python3 "$ROOT/bench/analyze/rounds.py" "$TD" "$CAP" "$PRE" "$ROUNDS" "$READ" > "$OUT/rounds.json"

# Agreement on the prefix: retransmissions by tcpdoctor vs tshark.
ours=$("$TD" analyze "$PRE" --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["totals"]["retransmissions"])' || true)
theirs=$(tshark -r "$PRE" -Y tcp.analysis.retransmission -T fields -e frame.number 2>/dev/null | wc -l)
summary=$("$TD" analyze "$CAP" --json | python3 -c '
import json,sys
r=json.load(sys.stdin); t=r["totals"]
print("%d connections, %d retransmissions (%d RTO), %d reused 4-tuples; findings: %s" % (t["connections"], t["retransmissions"], t["retransmissions_rto"], t["reused_ports"], ", ".join(f["pathology"] for f in r["findings"])))' || true)

python3 - "$OUT/result.md" <<PY
import sys
import json
N, NPRE, SIZE = $N, $NPRE, $SIZE
t = json.load(open("$OUT/rounds.json"))
tools = ("td_full", "td_pre", "cat", "cap", "ts", "tt", "read_full", "read_pre")
td_full, td_pre, cat_full, cap_full, ts_pre, tt_pre, read_full, read_pre = (t[k]["wall"] for k in tools)
cpu = {k: t[k]["cpu"] for k in tools}
rss = {k: t[k]["rss"] for k in tools}
rt, rr = t["ratios"], t["ratios_range"]
rate = lambda n, s: n / s if s > 0 else float("inf")
mib = lambda k: k / 1024
def ratio(a, b): return a / b if b > 0 else float("inf")
lines = []
gen = "${GEN_SECONDS}"
gen = "recorded by an earlier run of this script" if gen == "reused" else "recorded in %s s" % gen
lines.append("Capture: %d packets (%.2f GB, \`-s 128\`), lo MTU 1500 offloads off, 0.2%% random drop after the tap; thousands of short connections/s (wrk, Connection: close) + 2 iperf3 flows at 100 Mbit/s; %s. Prefix: first %d packets (\`editcap -r\`)." % (N, SIZE/1e9, gen, NPRE))
lines.append("")
lines.append("| tool | input | wall (median of rounds) | CPU user+sys | packets/s (wall) | peak RSS |")
lines.append("|---|---|---:|---:|---:|---:|")
rows = [
 ("tcpdoctor analyze --json", "full", td_full, cpu["td_full"], N, rss["td_full"]),
 ("cat > /dev/null", "full", cat_full, cpu["cat"], N, rss["cat"]),
 ("capinfos", "full", cap_full, cpu["cap"], N, rss["cap"]),
 ("tcpdoctor analyze --json", "prefix", td_pre, cpu["td_pre"], NPRE, rss["td_pre"]),
 ("tshark -Y 'tcp.analysis.retransmission or tcp.analysis.reused_ports'", "prefix", ts_pre, cpu["ts"], NPRE, rss["ts"]),
 ("tcptrace -l", "prefix", tt_pre, cpu["tt"], NPRE, rss["tt"]),
 ("capture_count (reading floor)", "full", read_full, cpu["read_full"], N, rss["read_full"]),
 ("capture_count (reading floor)", "prefix", read_pre, cpu["read_pre"], NPRE, rss["read_pre"]),
]
for name, inp, s, c, n, r in rows:
    lines.append("| \`%s\` | %s | %.3f s | %.3f s | %.0f k | %.0f MiB |" % (name, inp, s, c, rate(n, s)/1e3, mib(r)))
lines.append("")
lines.append("Ratios, median over %d interleaved rounds (each round's ratio from runs seconds apart; range in brackets): tcpdoctor is **%.0fx** [%.0f-%.0f] faster than tshark and **%.0fx** [%.0f-%.0f] faster than tcptrace in wall time on the prefix (CPU: %.0fx, %.0fx); the full file takes **%.1fx** [%.1f-%.1f] the wall time of \`cat\` (CPU %.1fx); %.0f MiB peak. Goals (issue 22): >= 200x tshark, within 5x of cat; and >= 40x tcptrace, < 1 GiB." % (t["rounds"], rt["ts_td"], rr["ts_td"][0], rr["ts_td"][1], rt["tt_td"], rr["tt_td"][0], rr["tt_td"][1], ratio(cpu["ts"], cpu["td_pre"]), ratio(cpu["tt"], cpu["td_pre"]), rt["td_cat"], rr["td_cat"][0], rr["td_cat"][1], ratio(cpu["td_full"], cpu["cat"]), mib(rss["td_full"])))
lines.append("")
lines.append("The reading floor: \`capture_count\` (crates/capture/examples, the reader analyze uses, alone on one thread: framing and decoding every segment, no analysis) reads the prefix in %.3f s, **%.0f%%** of analyze's wall time on it (tshark / 200 is %.3f s: reading alone is %.0f%% of that budget), and the full file in %.3f s, %.1fx \`cat\`; analyze's second thread (connection state and detectors) runs beside it and takes the rest. Medians over rounds of per-round ratios: reading/analyze %.2f on the prefix, %.2f on the full file." % (read_pre, 100 * rt["read_td_pre"], ts_pre / 200, 100 * read_pre / (ts_pre / 200), read_full, ratio(read_full, cat_full), rt["read_td_pre"], rt["read_td_full"]))
lines.append("")
lines.append("Agreement on the prefix: tcpdoctor counts $ours retransmissions, \`tshark -Y tcp.analysis.retransmission\` $theirs. Full file: $summary.")
open(sys.argv[1], "w").write("\n".join(lines) + "\n")
PY

# Peak memory on the two adversarial captures (bench/analyze/memory.sh, same binary).
TD="$TD" OUT="$OUT" bash "$ROOT/bench/analyze/memory.sh" >/dev/null

machine="$(nproc) cores, $(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo), Linux $(uname -r), load average at start $(cut -d' ' -f1 /proc/loadavg)"
{
  echo "Measured $(date -u +%Y-%m-%d) by \`bench/analyze/run.sh\` (PKTS=$PKTS PREFIX=$PREFIX ROUNDS=$ROUNDS) on $machine."
  echo
  cat "$OUT/result.md"
  echo
  cat "$OUT/memory.md"
} > "$OUT/section.md"
python3 - "$ROOT/BENCHMARKS.md" "$OUT/section.md" <<'PY'
import re, sys
path, sec = sys.argv[1], open(sys.argv[2]).read()
text = open(path).read()
head = "## analyze (issue 3)\n"
i = text.index(head) + len(head)
j = text.find("\n## ", i)
j = len(text) if j < 0 else j + 1
text = text[:i] + "\n" + sec + "\n" + text[j:]
open(path, "w").write(text)
PY
cat "$OUT/section.md"
