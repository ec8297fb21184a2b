#!/bin/sh
# Records the trace fixtures: real runs of `tcpdoctor trace --record` (root: BPF, network
# namespaces) over traffic this script makes in a namespace of its own, one per scenario.
# Each NAME.rec.jsonl here is what the trace recorded (the kernel's records, the answers of
# the live system, the counters' window: crates/trace/src/recording.rs); NAME.live.json is
# what the live command printed (--json) while it recorded. The tests replay the recordings
# without root (crates/trace/tests/fixtures.rs).
#
# Usage, from the repository root:
#   sudo tests/data/trace/record.sh [NAME...]    (all when no NAME)
# with target/debug/tcpdoctor built (or TDOC_BIN=path); then
#   TDOC_BLESS=1 cargo test -p tcpdoctor-trace --test fixtures
# writes the goldens anew (NAME.txt, NAME.report.json, NAME.merged.txt).
#
# Safety: traffic goes to 127.0.0.1 inside namespace tdoc-rec-NAME only, which the script
# creates and deletes (also on failure or Ctrl-C), with the processes it started in it.
# Every loop and every process is bounded in time (at most ~15 s per scenario).
set -eu
bin=$(realpath "${TDOC_BIN:-target/debug/tcpdoctor}")
dir=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d /tmp/tdoc-trace-record.XXXXXX)
ns=
only="$*"

cleanup() {
    if [ -n "$ns" ] && ip netns list | grep -q "^$ns\b"; then
        for p in $(ip netns pids "$ns"); do kill "$p" 2>/dev/null || true; done
        ip netns del "$ns"
    fi
    ns=
}
trap 'cleanup; rm -rf "$tmp"' EXIT
trap 'exit 2' INT TERM

fail() { echo "$name: $*" >&2; exit 2; }

# begin NAME: a fresh namespace with loopback up.
begin() {
    name=$1
    cleanup
    ns=tdoc-rec-$name
    ip netns add "$ns"
    ip -n "$ns" link set lo up
    echo "$name: recording in namespace $ns" >&2
}

in_ns() { ip netns exec "$ns" "$@"; }

# trace_start SECONDS: the trace, recording, until it is attached.
trace_start() {
    "$bin" trace --netns "$ns" --json --every 1h --duration "$1s" \
        --record "$tmp/$name.rec.jsonl" > "$tmp/$name.live.json" 2> "$tmp/$name.err" &
    trace=$!
    i=0
    until grep -q "tracing started" "$tmp/$name.err"; do
        i=$((i + 1))
        [ $i -le 300 ] || fail "the trace did not start: $(cat "$tmp/$name.err")"
        kill -0 "$trace" 2>/dev/null || fail "the trace exited: $(cat "$tmp/$name.err")"
        sleep 0.1
    done
}

# trace_end: waits for the trace's --duration; keeps its recording and output.
trace_end() {
    rc=0
    wait "$trace" || rc=$?
    # Exit 1 (findings) and 3 (nothing measured) are outcomes; 2 is an error.
    [ "$rc" -ne 2 ] || fail "the trace failed: $(cat "$tmp/$name.err")"
    # The recording replayed must print what the live trace printed (but the provenance).
    "$bin" trace --replay "$tmp/$name.rec.jsonl" --json > "$tmp/$name.replay.json" || true
    python3 - "$tmp/$name.live.json" "$tmp/$name.replay.json" <<'EOF' || fail "the replay differs"
import json, sys
stamp = {"generated_at", "host_name", "kernel_release", "tcpdoctor_version", "tcpdoctor_commit"}
def lines(p):
    return [{k: v for k, v in json.loads(l).items() if k not in stamp} for l in open(p)]
live, replay = lines(sys.argv[1]), lines(sys.argv[2])
for i, (a, b) in enumerate(zip(live, replay)):
    if a != b:
        print(f"line {i + 1}: live {a}\n   replay {b}", file=sys.stderr)
        sys.exit(1)
sys.exit(len(live) != len(replay))
EOF
    mv "$tmp/$name.rec.jsonl" "$dir/$name.rec.jsonl"
    mv "$tmp/$name.live.json" "$dir/$name.live.json"
    echo "$name: $(wc -l < "$dir/$name.rec.jsonl") lines recorded, exit $rc; replayed as printed live" >&2
    cleanup
}

# slow_acceptor SECONDS: in the background, a listener on 127.0.0.1:5206 (comm
# tdoc-slow-accept) with a backlog of 1 that accepts one connection every 300 ms and holds it.
slow_acceptor() {
    in_ns python3 - "$1" <<'EOF' &
import ctypes, socket, sys, time
ctypes.CDLL(None).prctl(15, b"tdoc-slow-accept", 0, 0, 0)
l = socket.socket()
l.bind(("127.0.0.1", 5206))
l.listen(1)
l.settimeout(1)
held, until = [], time.time() + float(sys.argv[1])
while time.time() < until:
    try:
        held.append(l.accept()[0])
    except socket.timeout:
        pass
    time.sleep(0.3)
EOF
}

want() { [ -z "$only" ] || echo " $only " | grep -q " $1 "; }

# syn-drop: nftables drops 30% of SYNs (not SYN-ACKs) to port 5201; two workers connect in
# a closed loop for 3 s (tcpdoctor probe --mode connect against its embedded server). Each
# dropped SYN is resent on the SYN ladder (1 s).
if want syn-drop; then
    begin syn-drop
    in_ns nft -f - <<'EOF'
table inet tdoc_rec {
  chain input {
    type filter hook input priority 0; policy accept;
    tcp dport 5201 tcp flags & (syn | ack) == syn numgen random mod 100 < 30 counter drop
  }
}
EOF
    in_ns "$bin" probe --serve 127.0.0.1:5201 -d 9s > /dev/null 2>&1 &
    sleep 0.5
    trace_start 7
    in_ns "$bin" probe 127.0.0.1:5201 --mode connect -c 2 -d 3s --json > "$tmp/probe.json" || true
    trace_end
fi

# port-exhaustion: 10 local ports (40000-40009); one worker opens a connection per request
# and closes first (TIME_WAIT here for 60 s): the 11th connect() fails with EADDRNOTAVAIL.
# 40 connects in all.
if want port-exhaustion; then
    begin port-exhaustion
    in_ns sysctl -qw net.ipv4.ip_local_port_range="40000 40009"
    in_ns "$bin" probe --serve 127.0.0.1:5202 -d 8s > /dev/null 2>&1 &
    sleep 0.5
    trace_start 5
    in_ns "$bin" probe 127.0.0.1:5202 --mode crr -c 1 -n 40 -d 3s --json > "$tmp/probe.json" || true
    trace_end
fi

# slow-reader: a reader (comm tdoc-reader, receive buffer 4 KiB) accepts and never reads; a
# writer (comm tdoc-writer) fills its window and waits 3 s: zero windows, and zero-window
# probes reaching the reader's socket.
if want slow-reader; then
    begin slow-reader
    in_ns python3 - <<'EOF' &
import ctypes, socket, time
ctypes.CDLL(None).prctl(15, b"tdoc-reader", 0, 0, 0)
l = socket.socket()
l.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
l.bind(("127.0.0.1", 5203))
l.listen(4)
l.settimeout(10)
a, _ = l.accept()
time.sleep(6)
EOF
    sleep 0.5
    trace_start 5
    in_ns python3 - <<'EOF'
import ctypes, socket, time
ctypes.CDLL(None).prctl(15, b"tdoc-writer", 0, 0, 0)
c = socket.create_connection(("127.0.0.1", 5203), timeout=5)
c.setblocking(False)
until = time.time() + 2
while time.time() < until:
    try:
        c.send(b"x" * 16384)
    except BlockingIOError:
        break
time.sleep(3.5)
EOF
    trace_end
fi

# timewait-collision: timestamps off; a client (comm tdoc-tw-client) reconnects 4 times from
# port 20012 to a server (comm tdoc-tw-server) that closes first and so holds the 4-tuple in
# TIME_WAIT. Each upload (4 MiB) pushes the old connection's sequence past the next
# connection's clock-driven ISN (64 ns per step, net/core/secure_seq.c): the next SYN looks
# like an old duplicate, is answered by the TIME_WAIT socket's ACK, reset and resent.
if want timewait-collision; then
    begin timewait-collision
    in_ns sysctl -qw net.ipv4.tcp_timestamps=0
    in_ns python3 - <<'EOF' &
import ctypes, socket
ctypes.CDLL(None).prctl(15, b"tdoc-tw-server", 0, 0, 0)
l = socket.socket()
l.bind(("127.0.0.1", 5204))
l.listen(16)
l.settimeout(12)
for _ in range(4):
    c, _ = l.accept()
    c.settimeout(5)
    got = 0
    while got < 4 << 20:
        n = len(c.recv(65536))
        if n == 0:
            break
        got += n
    c.sendall(b"done")
    c.close()
EOF
    sleep 0.5
    trace_start 6
    in_ns python3 - <<'EOF'
import ctypes, socket
ctypes.CDLL(None).prctl(15, b"tdoc-tw-client", 0, 0, 0)
data = b"\7" * (4 << 20)
for _ in range(4):
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("127.0.0.1", 20012))
    s.settimeout(5)
    s.connect(("127.0.0.1", 5204))
    s.sendall(data)
    while s.recv(65536):
        pass
    s.close()
EOF
    trace_end
fi

# accept-overflow: a listener (comm tdoc-slow-accept) with a backlog of 1 that accepts one
# connection every 300 ms and holds it; four workers connect in a closed loop for 3 s
# (tcpdoctor probe --mode connect). A handshake that finds the accept queue full is refused
# (the SYN dropped, or its last ACK: TcpExtListenOverflows) and the SYN resent on its ladder.
if want accept-overflow; then
    begin accept-overflow
    slow_acceptor 9
    sleep 0.5
    trace_start 6
    in_ns "$bin" probe 127.0.0.1:5206 --mode connect -c 4 -d 3s --connect-timeout 4s \
        --json > "$tmp/probe.json" || true
    trace_end
fi

# accept-overflow-late: the same listener and load, the trace attached 1 s into it (as
# doctor or an engineer attaches mid-incident): resends into connections never taken come
# before the trace's first sign of the overflow and are folded at the end.
if want accept-overflow-late; then
    begin accept-overflow-late
    slow_acceptor 12
    sleep 0.5
    in_ns "$bin" probe 127.0.0.1:5206 --mode connect -c 4 -d 8s --connect-timeout 4s \
        --json > "$tmp/probe.json" &
    load=$!
    sleep 1
    trace_start 5
    trace_end
    wait "$load" || true
fi
