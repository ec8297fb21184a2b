#!/usr/bin/env bash
# Runs every test: the README's test command. As root on a fresh Debian machine it first
# installs what the tests drive (tcpdump, tshark, nginx, wrk, nftables, ...; apt-get, only
# the missing ones) and checks that the committed BPF object is what its source compiles
# to; then every test binary of `cargo test --workspace --locked`, in two lanes at once
# (below), or, with arguments (e.g. `-- --nocapture`, a filter), plain `cargo test` with them.
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

# With arguments (a filter, `-- --nocapture`, `-p crate`): plain `cargo test`, as given.
if [ $# -gt 0 ]; then
  exec cargo test --workspace --locked "$@"
fi

# Without: the same test binaries `cargo test --workspace` runs, in two lanes side by side
# (cargo runs them one after another). Most tests wait on timers, sleeps and namespaces'
# traffic rather than compute, and the tests that load eBPF programs already order
# themselves across binaries with a file lock (crates/cli/tests/support/mod.rs): one lane
# takes the binaries that mostly trace, the other the rest. Each binary runs in its
# package's directory, as under cargo; its output is printed whole when it ends.
work=$(mktemp -d "${TMPDIR:-/tmp}/tdoc-test.XXXXXX")
lanes=()
cleanup() {
  for pid in "${lanes[@]}"; do kill -- "-$pid" 2>/dev/null || kill "$pid" 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
# Build; then "<package dir> <binary>" per test binary, from cargo's own list of what it built.
cargo test --workspace --locked --no-run --message-format=json-render-diagnostics >"$work/built"
grep '"executable":"[^"]*/deps/' "$work/built" \
  | sed -E 's/.*"manifest_path":"([^"]*)\/Cargo.toml".*"executable":"([^"]*)".*/\1 \2/' \
  | sort -u >"$work/all"
# One lane for the binaries that trace most (the eBPF lock serializes them anyway: about
# 280 of the suite's 470 s, measured), the other for every other binary.
traced='/(lab|conformance|trace|doctor)-[0-9a-f]+$'
grep -E "$traced" "$work/all" >"$work/lane1" || true
grep -vE "$traced" "$work/all" >"$work/lane2" || true

run_lane() {
  local list=$1 failed=0 dir bin name
  while read -r dir bin; do
    name=$(basename "$bin")
    if ! (cd "$dir" && "$bin") >"$work/$name.log" 2>&1; then
      echo "$name" >>"$work/failed"
      failed=1
    fi
    flock "$work/print" sh -c 'echo "     Running $1 (in $2)"; cat "$3"' _ "$bin" "$dir" "$work/$name.log"
  done <"$list"
  return $failed
}
set -m
run_lane "$work/lane1" & lanes+=($!)
run_lane "$work/lane2" & lanes+=($!)
set +m
status=0
for pid in "${lanes[@]}"; do wait "$pid" || status=1; done
lanes=()
# Doc tests, last (a few seconds).
cargo test --workspace --locked --doc -q || status=1
if [ -s "$work/failed" ]; then
  echo "scripts/test.sh: failed test binaries: $(tr '\n' ' ' <"$work/failed")" >&2
  status=1
fi
exit $status
