#!/usr/bin/env bash
# Lab figures for BENCHMARKS.md: the incast sweep (goodput vs senders, rto_min 200 ms vs 5 ms,
# senders on CUBIC unless CC says otherwise, median of REPS sweeps) and the port-exhaustion
# sustainable rate, measured vs computed. bench/lab/remedies.sh writes docs/remedies.md.
# Needs root (network namespaces). Everything runs inside namespaces the lab creates.
#
#   sudo bench/lab/run.sh            # writes bench/lab/out/* and prints the Markdown section
set -euo pipefail
cd "$(dirname "$0")/../.."
REPS=${REPS:-3}
SENDERS=${SENDERS:-1,2,4,8,16,32}
PE_SECS=${PE_SECS:-130}
BLOCK=${BLOCK:-1MiB}
ROUNDS=${ROUNDS:-50}
RATE=${RATE:-100mbit}
CC=${CC:-cubic}
OUT=bench/lab/out
mkdir -p "$OUT"
export DEBIAN_FRONTEND=noninteractive
for p in iproute2 nftables ethtool tcpdump python3; do
  dpkg -s "$p" >/dev/null 2>&1 || { apt-get update -qq; apt-get install -y -qq "$p" >/dev/null; }
done
cargo build --release -q
BIN=target/release/tcpdoctor
"$BIN" lab cleanup >/dev/null || true

for i in $(seq 1 "$REPS"); do
  "$BIN" lab incast --sweep "senders=$SENDERS" --rto-min 200ms,5ms --block "$BLOCK" --rounds "$ROUNDS" --rate "$RATE" --cc "$CC" --out "$OUT/incast-sweep-$i" --json \
    > "$OUT/incast-sweep-$i.json" || [ $? -eq 1 ]
done
[ "${SKIP_PE:-0}" = 1 ] || "$BIN" lab port-exhaustion --ports 40000-40099 --duration "${PE_SECS}s" --json > "$OUT/port-exhaustion.json" || [ $? -eq 1 ]

python3 - "$OUT" "$REPS" "$BLOCK" "$RATE" "$CC" <<'PY'
import json, statistics, sys, platform, os, subprocess
out, reps, block, rate, cc = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5]
runs = {}
for i in range(1, reps + 1):
    v = json.load(open(f"{out}/incast-sweep-{i}.json"))
    for r in v["runs"]:
        runs.setdefault((r["senders"], r["rto_min_us"]), []).append(r)
def med(rs, k): return statistics.median(r[k] for r in rs)
rows = []
for (n, rto) in sorted(runs, key=lambda k: (k[0], -k[1])):
    rs = runs[(n, rto)]
    rows.append((n, rto, med(rs, "goodput_bits_per_s") / 1e6, med(rs, "slow_rounds"), rs[0]["rounds"],
                 med(rs, "round_p99_us") / 1e3, med(rs, "rto_expiries"), med(rs, "loss_probes"),
                 med(rs, "time_lost_share")))
# Median sweep as CSV + SVG through the lab's own chart writer: re-emit a merged JSON is not
# needed; the per-run SVGs are in OUT. Write the median CSV here.
with open(f"{out}/incast-median.csv", "w") as f:
    f.write("senders,rto_min_ms,goodput_mbit_per_s,slow_rounds,rounds,round_p99_ms,rto_expiries,loss_probes,time_lost_share\n")
    for r in rows:
        f.write(f"{r[0]},{r[1]//1000},{r[2]:.0f},{r[3]:.0f},{r[4]},{r[5]:.1f},{r[6]:.0f},{r[7]:.0f},{r[8]:.3f}\n")
pe = json.load(open(f"{out}/port-exhaustion.json"))
kernel = platform.release()
cpus = os.cpu_count()
print("Machine: %d CPUs, Linux %s. Command: `sudo bench/lab/run.sh` (REPS=%d)." % (cpus, kernel, reps))
print()
print("Incast: %d rounds per run, %s per round split over N senders (%s), tbf %s burst 16 KiB limit 32 KiB "
      "on the bridge port toward the receiver; median of %d sweeps." % (rows[0][4], block, cc, rate, reps))
print()
print("| senders | rto_min | goodput (Mbit/s) | rounds stalled 100 ms beyond the median | p99 round (ms) | RTO expiries | tail loss probes | time lost |")
print("|---:|---:|---:|---:|---:|---:|---:|---:|")
for r in rows:
    print(f"| {r[0]} | {r[1]//1000} ms | {r[2]:.0f} | {r[3]:.0f} / {r[4]} | {r[5]:.1f} | {r[6]:.0f} | {r[7]:.0f} | {r[8] * 100:.0f}% |")
print()
b = pe["before"]["summary"]
m = pe.get("measured_sustainable_per_s")
print("Port exhaustion: client range %s (%d ports), tcp_tw_reuse=0, client closes first, %d s run: "
      "computed sustainable rate %.2f conn/s (ports / 60 s TIME_WAIT), measured %s conn/s "
      "(successful connects per second over whole 60 s periods after the first); %d connects succeeded, %s." % (
      "40000-40099", 100, pe["config"]["duration_ms"] // 1000, pe["computed_sustainable_per_s"],
      ("%.2f" % m) if m is not None else "n/a", b["requests_ok"],
      ", ".join("%s x%d" % (e["errno"], e["count"]) for e in b["errors"]) or "no errors"))
PY
