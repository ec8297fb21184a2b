#!/bin/sh
# Regenerates docs/conformance.md: runs the conformance test (every lab scenario and a clean
# baseline, seen by lab, analyze, counters, sockets, probe and doctor) with
# TDOC_CONFORMANCE_OUT pointing at the doc. Needs root (network namespaces); about a minute
# on 2 cores. Usage: sudo bench/conformance/run.sh   (from the repository root)
set -eu
. "$(dirname "$0")/../need.sh"
need tcpdump nginx wrk iproute2 ethtool
cd "$(dirname "$0")/../.."
TDOC_CONFORMANCE_OUT="$PWD/docs/conformance.md" CI=true \
    cargo test -p tcpdoctor --test conformance -- --nocapture
echo "wrote docs/conformance.md"
