#!/usr/bin/env bash
# Rebuilds trace.bpf.o from trace.bpf.c with pinned flags, or (--check) rebuilds it into a
# temporary file and fails when it differs from the committed object.
#
# Needs: clang 14 (Debian's clang-14), llvm-strip, and libbpf's BPF headers (libbpf-dev,
# /usr/include/bpf). `cargo build` does not run this: the committed object is embedded.
#
# Reproducible by construction: no vmlinux.h (types.h holds the few kernel types used, each
# relocated by CO-RE at load time), no host paths in the output (DWARF is stripped; the BTF
# the loader needs is kept), fixed target and optimisation level.
set -euo pipefail
cd "$(dirname "$0")"

CLANG=${CLANG:-clang-14}
STRIP=${STRIP:-llvm-strip-14}
command -v "$CLANG" >/dev/null || CLANG=clang
command -v "$STRIP" >/dev/null || STRIP=llvm-strip
version=$("$CLANG" --version | head -1)
case "$version" in
  *"clang version 14."*) ;;
  *) echo "build.sh: warning: $version; the committed object was built by clang 14" >&2 ;;
esac

build() {
  local out=$1
  "$CLANG" -target bpf -mcpu=v3 -O2 -g -Wall -Werror \
    -fno-ident -fdebug-prefix-map="$PWD"=. \
    -I. -c trace.bpf.c -o "$out"
  "$STRIP" --strip-debug "$out"
}

if [ "${1:-}" = "--check" ]; then
  tmp=$(mktemp /tmp/tdoc-bpf-XXXXXX.o)
  tmp2=$(mktemp /tmp/tdoc-bpf-XXXXXX.o)
  trap 'rm -f "$tmp" "$tmp2"' EXIT
  build "$tmp"
  build "$tmp2"
  if ! cmp -s "$tmp" "$tmp2"; then
    echo "build.sh: two rebuilds of trace.bpf.c differ: the build is not reproducible" >&2
    exit 1
  fi
  if cmp -s "$tmp" trace.bpf.o; then
    echo "build.sh: trace.bpf.o matches trace.bpf.c"
  else
    echo "build.sh: trace.bpf.o differs from a rebuild of trace.bpf.c: run crates/trace/bpf/build.sh and commit" >&2
    exit 1
  fi
else
  build trace.bpf.o
  echo "build.sh: wrote $(pwd)/trace.bpf.o ($(stat -c %s trace.bpf.o) bytes)"
fi
