#!/usr/bin/env bash
# Runs every test: the README's test command. As root on a fresh Debian machine it first
# installs what the tests drive (tcpdump, tshark, nginx, wrk, nftables, ...; apt-get, only
# the missing ones) and checks that the committed BPF object is what its source compiles
# to; then `cargo test --workspace --locked` with any arguments given (e.g. `-- --nocapture`).
# Without root nothing is installed: tests that need root or a missing tool skip with their
# reason, except under CI=true, where a skip fails. `.ci/run` calls this script.
set -euo pipefail
cd "$(dirname "$0")/.."

pkgs=(tcpdump tshark tcptrace nftables ethtool iproute2 procps wrk nginx prometheus clang llvm libbpf-dev chromium util-linux)
if [ "$(id -u)" = 0 ]; then
  missing=()
  for p in "${pkgs[@]}"; do
    dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
  done
  if [ ${#missing[@]} -gt 0 ]; then
    echo "scripts/test.sh: installing ${missing[*]}" >&2
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq "${missing[@]}" >/dev/null
  fi
fi

# The committed BPF object must be what its source compiles to (pinned clang 14 flags).
if command -v clang >/dev/null 2>&1; then
  crates/trace/bpf/build.sh --check
else
  echo "scripts/test.sh: clang not installed: the BPF object check is skipped" >&2
  [ "${CI:-}" != true ] || { echo "CI=true: the BPF object check may not be skipped" >&2; exit 1; }
fi

exec cargo test --workspace --locked "$@"
