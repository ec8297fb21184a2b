#!/usr/bin/env bash
# Makes the Linux fixtures of this directory: `nstat -a`, `nstat -a --json` and `netstat -s`
# taken in a fresh network namespace before (.1) and after (.2) a scenario that moves the
# counters tcpdoctor cares about: an accept-queue flood (ListenOverflows, TCPSynRetrans), a
# slow reader (zero-window counters), dropped data (TCPTimeouts, retransmissions) and
# client-closed churn (TIME_WAIT). Traffic stays on the namespace's loopback.
# Needs root, iproute2, nftables, net-tools (netstat), python3. Takes ~15 s.
set -euo pipefail
cd "$(dirname "$0")"
ns=tdoc-fixtures-$$
cleanup() { ip netns pids "$ns" 2>/dev/null | xargs -r kill -9 2>/dev/null || true; ip netns del "$ns" 2>/dev/null || true; }
trap cleanup EXIT INT TERM
ip netns add "$ns"
ip netns exec "$ns" ip link set lo up

snap() {
  ip netns exec "$ns" nstat -a -s -z > "linux-nstat-a.$1.txt"
  ip netns exec "$ns" nstat -a -s -z --json > "linux-nstat.$1.json"
  ip netns exec "$ns" netstat -s > "linux-netstat-s.$1.txt"
}

snap 1
ip netns exec "$ns" timeout 30 python3 - <<'PY'
import socket, time, subprocess
# 1. Accept-queue flood: backlog 1, never accepted; 20 connects retransmit their SYNs.
l = socket.socket(); l.bind(("127.0.0.1", 5100)); l.listen(1)
cs = []
for _ in range(20):
    c = socket.socket(); c.setblocking(False)
    try: c.connect(("127.0.0.1", 5100))
    except BlockingIOError: pass
    cs.append(c)
# 2. Slow reader: 4 KiB receive buffer, never read.
l2 = socket.socket(); l2.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
l2.bind(("127.0.0.1", 5200)); l2.listen(8)
w = socket.create_connection(("127.0.0.1", 5200)); r, _ = l2.accept()
w.setblocking(False)
sent = 0
t0 = time.time()
while time.time() - t0 < 2:
    try: sent += w.send(b"x" * 16384)
    except BlockingIOError: time.sleep(0.05)
# 3. Churn: 50 client-closed connections leave TIME_WAIT.
l3 = socket.socket(); l3.bind(("127.0.0.1", 5300)); l3.listen(64)
for _ in range(50):
    c = socket.create_connection(("127.0.0.1", 5300)); s, _ = l3.accept()
    c.close(); s.recv(1); s.close()
# 4. Data dropped by a firewall rule: retransmission timeouts.
l4 = socket.socket(); l4.bind(("127.0.0.1", 5400)); l4.listen(8)
c4 = socket.create_connection(("127.0.0.1", 5400)); s4, _ = l4.accept()
subprocess.run(["nft", "-f", "-"], input=b"""
table inet tdoc_fixture {
  chain inp {
    type filter hook input priority 0; tcp dport 5400 drop
  }
}
""", check=True)
c4.send(b"y" * 1000)
time.sleep(4)   # RTO 200 ms, 400, 800, 1600 ms: about four timeouts
subprocess.run(["nft", "delete", "table", "inet", "tdoc_fixture"], check=True)
time.sleep(1)
PY
snap 2
echo "fixtures written; kernel $(uname -r)"
