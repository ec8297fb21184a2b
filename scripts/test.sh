#!/usr/bin/env bash
# Runs every test: the README's test command. As root on a fresh Debian machine it first
# installs what the tests drive (tcpdump, tshark, nginx, wrk, nftables, ...; apt-get, only
# the missing ones) and checks that the committed BPF object is what its source compiles
# to; then `cargo test` over the whole workspace, in two lanes (below), with any arguments
# given (cargo's before `--`, the tests' after it: `--no-fail-fast -- --nocapture`).
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

# Two lanes at once, after one build. The test binaries that set up namespaces, labs and
# traces (lane A, as before: one binary after another) spend most of their time waiting on
# timers and the kernel, not on the CPU (a serial run: 8 min 6 s of wall time for 4 min of CPU
# on 2 cores), so the other binaries (lane B: captures, probes, the browser, the unit tests)
# run beside them. Tests that load the trace's eBPF programs in either lane take one file
# lock (support::bpf_exclusive), so no trace attaches while another test compares its counts
# with the kernel's. Lane B's output is printed when both lanes are done.
cargo_args=()
while [ $# -gt 0 ] && [ "$1" != -- ]; do cargo_args+=("$1"); shift; done
test_args=("$@")
cargo test --workspace --locked --no-run "${cargo_args[@]}"

lane_a=(lab conformance trace doctor sockets exporter)
lane_b=()
for f in crates/cli/tests/*.rs; do
  t=$(basename "$f" .rs)
  [[ " ${lane_a[*]} " == *" $t "* ]] || lane_b+=(--test "$t")
done
a_tests=()
for t in "${lane_a[@]}"; do a_tests+=(--test "$t"); done

log_b=$(mktemp "${TMPDIR:-/tmp}/tdoc-test-lane-b.XXXXXX")
trap 'rm -f "$log_b"' EXIT
(
  cargo test --locked -p tcpdoctor --bins "${lane_b[@]}" "${cargo_args[@]}" "${test_args[@]}" &&
    cargo test --workspace --locked --exclude tcpdoctor "${cargo_args[@]}" "${test_args[@]}"
) >"$log_b" 2>&1 &
pid_b=$!
rc_a=0
cargo test --locked -p tcpdoctor "${a_tests[@]}" "${cargo_args[@]}" "${test_args[@]}" || rc_a=$?
rc_b=0
wait "$pid_b" || rc_b=$?
echo "---- lane B (run beside the above) ----"
cat "$log_b"
echo "scripts/test.sh: lane A exit $rc_a, lane B exit $rc_b"
[ "$rc_a" = 0 ] && [ "$rc_b" = 0 ]
