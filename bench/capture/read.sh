#!/usr/bin/env bash
# Read throughput of the capture readers (tcpdoctor-capture), side by side on the same file:
#   ours      crates/capture Reader (hand-written framing + decoding), all TCP fields decoded
#   crates    the same loop with pcap-parser 0.17 framing + etherparse 0.21 LaxSlicedPacket
#   capinfos  Wireshark's capinfos (framing only, counts packets)
#   tshark    tshark -T fields -e tcp.seq (on the first 1 M packets only: it is slow)
#   cat       cat FILE > /dev/null (the I/O floor; file in page cache)
# Input: a synthetic headers-only capture (snap length 128, Ethernet, 10% IPv6, 1% ARP) of
# PACKETS packets (default 10 M) written by the capture_synth example, plus its pcapng and gzip
# variants. Median of RUNS runs (default 5) of wall time and of CPU time (user + sys: the
# build machine is shared, so wall time depends on other load). Markdown table on stdout.
set -euo pipefail
cd "$(dirname "$0")/../.."
packets=${PACKETS:-10000000}
runs=${RUNS:-5}
out=${OUT:-/tmp/tdoc-bench-capture}
mkdir -p "$out"
[ -x /usr/bin/time ] || DEBIAN_FRONTEND=noninteractive apt-get install -y time >/dev/null
command -v capinfos >/dev/null && command -v editcap >/dev/null && command -v tshark >/dev/null || {
    DEBIAN_FRONTEND=noninteractive apt-get install -y tshark >/dev/null; }
cargo build -q --release -p tcpdoctor-capture --examples
ex=target/release/examples
f=$out/synth-$packets.pcap
[ -s "$f" ] || $ex/capture_synth "$f" "$packets"
[ -s "$f.pcapng" ] || editcap -F pcapng "$f" "$f.pcapng"
[ -s "$f.gz" ] || gzip -1 -c "$f" > "$f.gz"
[ -s "$out/first1m.pcap" ] || editcap -r "$f" "$out/first1m.pcap" 1-1000000

median() { sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
# One run: prints "wall_s cpu_s" (cpu = user + sys, less sensitive to other load on the box).
one() {
    local t; t=$(mktemp /tmp/tdoc-bench-XXXXXX)
    /usr/bin/time -o "$t" -f "%e %U %S" "$@" >/dev/null 2>&1
    awk '{printf "%s %.3f\n", $1, $2 + $3}' "$t"; rm -f "$t"
}
row() { # name packets cmd...
    local name=$1 n=$2; shift 2
    local all wall cpu
    all=$(for _ in $(seq "$runs"); do one "$@"; done)
    wall=$(echo "$all" | cut -d' ' -f1 | median)
    cpu=$(echo "$all" | cut -d' ' -f2 | median)
    printf '| %s | %s | %.3f | %.2f | %.3f | %.2f |\n' "$name" "$n" "$wall" \
        "$(echo "$n / $wall / 1000000" | bc -l)" "$cpu" "$(echo "$n / $cpu / 1000000" | bc -l)"
}
cat "$f" > /dev/null # warm the page cache
echo "Machine: $(nproc) cores, $(uname -r); $(date -u +%F); $packets packets, $(du -h "$f" | cut -f1) pcap"
echo
echo "Load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
echo
echo '| reader | packets | wall s | M packets/s (wall) | CPU s | M packets/CPU-s |'
echo '|---|---|---|---|---|---|'
row "tcpdoctor-capture, pcap" "$packets" $ex/capture_count "$f"
row "tcpdoctor-capture, pcapng" "$packets" $ex/capture_count "$f.pcapng"
row "tcpdoctor-capture, pcap.gz" "$packets" $ex/capture_count "$f.gz"
row "pcap-parser 0.17 + etherparse 0.21, pcap" "$packets" $ex/capture_count "$f" --pcap-parser
row "capinfos -c, pcap" "$packets" capinfos -c "$f"
row "tshark -T fields -e tcp.seq, first 1 M" 1000000 tshark -n -r "$out/first1m.pcap" -T fields -e tcp.seq
row "cat > /dev/null, pcap" "$packets" cat "$f"
row "gzip -dc > /dev/null, pcap.gz" "$packets" gzip -dc "$f.gz"
