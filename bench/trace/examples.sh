#!/usr/bin/env bash
# Regenerates the runs shown in docs/examples/trace.md: three pathologies built in network
# namespaces of their own while `tcpdoctor trace` watches them (root). Prints the trace's
# human output, then its JSON report's first finding.
#   1. a SO_LINGER-0 connect/send/read/close loop from one source port whose close resets
#      are lost (nftables), so every reconnect meets a stale ACK;
#   2. a listener with backlog 1 that never accepts;
#   3. a client with a two-port ip_local_port_range (EADDRNOTAVAIL).
set -euo pipefail
. "$(dirname "$0")/../need.sh"
need nftables iproute2
BIN=${BIN:-target/release/tcpdoctor}
A=tdoc-ex-a-$$ B=tdoc-ex-b-$$
cleanup() { ip netns del "$A" 2>/dev/null || true; ip netns del "$B" 2>/dev/null || true; }
trap cleanup EXIT
for n in "$A" "$B"; do ip netns add "$n"; ip netns exec "$n" ip link set lo up; done
ip netns exec "$A" nft add table inet tdoc
ip netns exec "$A" nft add chain inet tdoc out '{ type filter hook output priority 0 ; }'
ip netns exec "$A" nft add rule inet tdoc out 'tcp flags & (rst | ack) == (rst | ack) drop'
ip netns exec "$B" sysctl -qw net.ipv4.ip_local_port_range="40000 40001"

"$BIN" trace --netns "$A" --netns "$B" --duration 6s --every 2s ${TRACE_ARGS:-} > /tmp/tdoc-ex-trace.txt &
TRACE=$!
sleep 1
ip netns exec "$A" python3 - <<'PY' &
import socket, struct, threading, time
l = socket.socket(); l.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
l.bind(("127.0.0.1", 5101)); l.listen(16)
kept = []
def serve():
    for _ in range(4):
        c, _ = l.accept(); c.recv(4); c.sendall(b"pong"); kept.append(c)
threading.Thread(target=serve, daemon=True).start()
for _ in range(4):
    s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("127.0.0.1", 20011)); s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    s.connect(("127.0.0.1", 5101)); s.sendall(b"ping"); s.recv(4)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0)); s.close()
l2 = socket.socket(); l2.bind(("127.0.0.1", 5103)); l2.listen(1)
cs = []
for _ in range(4):
    c = socket.socket(); c.setblocking(False)
    try: c.connect(("127.0.0.1", 5103))
    except BlockingIOError: pass
    cs.append(c)
time.sleep(3)
PY
ip netns exec "$B" python3 - <<'PY'
import socket, time
l = socket.socket(); l.bind(("127.0.0.1", 5104)); l.listen(16)
cs = []
for _ in range(5):
    try: cs.append(socket.create_connection(("127.0.0.1", 5104)))
    except OSError as e: print("client:", e)
time.sleep(1)
PY
wait "$TRACE" || true
cat /tmp/tdoc-ex-trace.txt
rm -f /tmp/tdoc-ex-trace.txt
