#!/usr/bin/env bash
# Peak memory of `tcpdoctor analyze` on two adversarial captures written by
# crates/analyze/examples/memory_captures.rs (no root, no network):
#
# * clients: N distinct client addresses, one short connection each (handshake, 100-byte
#   request, 300-byte answer, the client closes first) to 10.200.0.1:80, CLIENT_RATE new
#   connections a second: memory must follow the open connections, not the addresses seen;
# * synflood: N SYNs from N distinct addresses to 10.200.0.1:80, SYN_RATE a second, none
#   answered or resent: half-open state must be bounded, and the flood named.
#
# Each capture is analyzed RUNS times under /usr/bin/time -f '%M %e' (peak RSS in KiB, wall
# seconds); the medians go to $OUT/memory.md with the findings of the last run. Goal: <= 256
# MiB for each (issue 9). Captures live in $SCRATCH and are reused when present.
#
# Usage: bench/analyze/memory.sh     env: N CLIENT_RATE SYN_RATE RUNS SCRATCH OUT TD
set -euo pipefail
cd "$(dirname "$0")/../.."
ROOT=$PWD
N=${N:-1000000}
CLIENT_RATE=${CLIENT_RATE:-10000}
SYN_RATE=${SYN_RATE:-10000}
RUNS=${RUNS:-5}
SCRATCH=${SCRATCH:-/var/tmp/an-scratch}
OUT=${OUT:-/tmp/tdoc-bench-analyze}
mkdir -p "$SCRATCH" "$OUT"

if [ -z "${TD:-}" ]; then
  cargo build --release -p tcpdoctor >/dev/null
  TD=$ROOT/target/release/tcpdoctor
fi
cargo build --release -p tcpdoctor-analyze --example memory_captures >/dev/null
GEN=$ROOT/target/release/examples/memory_captures

clients=$SCRATCH/clients-$N-$CLIENT_RATE.pcap
flood=$SCRATCH/synflood-$N-$SYN_RATE.pcap
[ -s "$clients" ] || "$GEN" clients "$N" "$clients" "$CLIENT_RATE"
[ -s "$flood" ] || "$GEN" synflood "$N" "$flood" "$SYN_RATE"

measure() { # name file -> "median_rss_kib median_wall_s findings"
  local f=$1 rss=() wall=() line
  for _ in $(seq "$RUNS"); do
    line=$( { /usr/bin/time -f '%M %e' "$TD" analyze "$f" --json >"$OUT/memory-last.json"; } 2>&1 | tail -1)
    rss+=("${line% *}")
    wall+=("${line#* }")
  done
  python3 - "$OUT/memory-last.json" "${rss[*]}" "${wall[*]}" <<'PY'
import json, statistics, sys
r = json.load(open(sys.argv[1]))
rss = [int(x) for x in sys.argv[2].split()]
wall = [float(x) for x in sys.argv[3].split()]
t = r["totals"]
found = ", ".join("%s (%s)" % (f["pathology"], f["severity"]) for f in r["findings"]) or "none"
print("%d|%d|%d|%.2f|%d connections; findings: %s" % (
    statistics.median(rss), min(rss), max(rss), statistics.median(wall), t["connections"], found))
PY
}

row() { # label file rate
  local m rss lo hi wall what
  m=$(measure "$2")
  IFS='|' read -r rss lo hi wall what <<<"$m"
  printf '| %s | %s (%.0f MB) | %d MiB [%d-%d] | %s s | %s |\n' "$1" "$(basename "$2")" \
    "$(echo "$(stat -c %s "$2") / 1000000" | bc -l)" $((rss / 1024)) $((lo / 1024)) $((hi / 1024)) "$wall" "$what"
}

{
  echo "Peak memory (\`bench/analyze/memory.sh\`, N=$N RUNS=$RUNS): \`/usr/bin/time -f '%M %e' tcpdoctor analyze FILE --json\`, median of $RUNS runs [range]. Captures by \`crates/analyze/examples/memory_captures.rs\`: $N distinct clients at $CLIENT_RATE connections/s (one short connection each), and $N unanswered SYNs from distinct addresses at $SYN_RATE/s. Goal: <= 256 MiB each."
  echo
  echo "| capture | file | peak RSS | wall | what analyze said |"
  echo "|---|---|---:|---:|---|"
  row "$N distinct clients" "$clients"
  row "$N unanswered SYNs" "$flood"
} > "$OUT/memory.md"
cat "$OUT/memory.md"
