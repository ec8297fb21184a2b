#!/usr/bin/env bash
# Runs every cargo-fuzz target of the capture readers for SECONDS each (default 300), starting
# from the committed seeds, with overflow checks and debug assertions on. Needs nightly Rust
# and cargo-fuzz (`cargo install cargo-fuzz`). Prints the executions per target; a crash
# stops the script with libFuzzer's report and leaves the input in fuzz/artifacts/.
set -euo pipefail
cd "$(dirname "$0")"
secs=${1:-300}
for t in pcap pcapng snoop any; do
    mkdir -p "corpus/$t"
    cp -n seeds/"$t"/* "corpus/$t/" 2>/dev/null || true
    log=$(mktemp /tmp/tdoc-fuzz-XXXXXX.log)
    cargo +nightly fuzz run -O -a "$t" "corpus/$t" -- -max_total_time="$secs" -rss_limit_mb=2048 >"$log" 2>&1 || {
        tail -40 "$log"; echo "fuzz target $t FAILED (log $log)"; exit 1; }
    echo "$t: $(grep -E '^Done [0-9]+ runs' "$log" || tail -1 "$log")"
    rm -f "$log"
done
