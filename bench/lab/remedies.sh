#!/usr/bin/env bash
# Every scenario's remedy table from one run, written to docs/remedies.md with the machine and
# the command. Needs root (network namespaces); everything runs inside namespaces the lab
# creates and is removed afterwards.
#
#   sudo bench/lab/remedies.sh           # ~15 min on 2 CPUs
set -euo pipefail
cd "$(dirname "$0")/../.."
OUT=bench/lab/out/remedies
mkdir -p "$OUT"
export DEBIAN_FRONTEND=noninteractive
for p in iproute2 nftables ethtool tcpdump python3; do
  dpkg -s "$p" >/dev/null 2>&1 || { apt-get update -qq; apt-get install -y -qq "$p" >/dev/null; }
done
cargo build --release -q
BIN=target/release/tcpdoctor
"$BIN" lab cleanup >/dev/null || true

run() { # name args...
  local name=$1; shift
  echo "lab $* --remedies --json" > "$OUT/$name.json.cmd"
  "$BIN" lab "$@" --remedies --json > "$OUT/$name.json" || [ $? -eq 1 ]
}
run incast incast --sweep senders=2,4,8,16 --rounds 50
run port-exhaustion port-exhaustion --duration 4s
run timewait-collision timewait-collision
run stale-ack-race stale-ack-race --duration 30s --concurrency 2
run slow-reader slow-reader --duration 5s
run syn-drop syn-drop --duration 10s
run accept-overflow accept-overflow --duration 5s

MACHINE="$(nproc) CPUs, Linux $(uname -r), $(sed -n 's/^model name\s*: //p' /proc/cpuinfo | head -1)"
python3 bench/lab/remedies.py docs/remedies.md "sudo bench/lab/remedies.sh" "$MACHINE" \
  incast="$OUT/incast.json" port-exhaustion="$OUT/port-exhaustion.json" \
  timewait-collision="$OUT/timewait-collision.json" stale-ack-race="$OUT/stale-ack-race.json" \
  slow-reader="$OUT/slow-reader.json" syn-drop="$OUT/syn-drop.json" \
  accept-overflow="$OUT/accept-overflow.json"
echo "wrote docs/remedies.md"
