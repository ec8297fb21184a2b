#!/bin/bash
# Regenerates the outputs shown in docs/examples/probe.md: every example runs in network
# namespaces this script creates (removed on exit, also on error or Ctrl-C), against the
# embedded server, `probe --serve` across a veth, or hostile servers started here.
#
# usage: bench/probe/examples.sh TCPDOCTOR OUTDIR      (root)
set -euo pipefail
. "$(dirname "$0")/../need.sh"
need ethtool nftables iproute2
B=$(realpath "$1")
OUT=$2
mkdir -p "$OUT"
ID=$$
# Not named tdoc*: `tcpdoctor lab cleanup` (run by other tests) removes every tdoc* namespace.
C=pdocc-$ID S=pdocs-$ID L=pdocl-$ID
PIDS=()
cleanup() {
    for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
    for n in $C $S $L; do
        # Whatever still runs inside our namespaces was started by this script.
        for p in $(ip netns pids "$n" 2>/dev/null); do kill "$p" 2>/dev/null || true; done
        ip netns del "$n" 2>/dev/null || true
    done
}
trap cleanup EXIT INT TERM

for n in $C $S $L; do ip netns add "$n"; ip -n "$n" link set lo up; done
ip link add pdocx${ID}a netns $C type veth peer name pdocx${ID}b netns $S
ip -n $C addr add 10.77.1.1/24 dev pdocx${ID}a; ip -n $C link set pdocx${ID}a up
ip -n $S addr add 10.77.1.2/24 dev pdocx${ID}b; ip -n $S link set pdocx${ID}b up
for pair in "$C pdocx${ID}a" "$S pdocx${ID}b"; do
    set -- $pair
    ip netns exec "$1" ethtool -K "$2" tso off gso off gro off >/dev/null 2>&1 || true
    ip netns exec "$1" sh -c "echo 3 > /sys/class/net/$2/queues/rx-0/rps_cpus"
done
ip netns exec $S "$B" probe --serve 10.77.1.2:5001 >/dev/null 2>&1 &
PIDS+=($!)
sleep 0.5

run() { # name ns args...
    local name=$1 ns=$2; shift 2
    (cd /tmp && ip netns exec "$ns" "$B" probe "$@" >"$OUT/$name.txt" 2>&1) || true
}

# 1. Embedded server.
run 1-embedded $L -d 3s

# 2. Port exhaustion: 200 ports, no TIME_WAIT reuse.
ip netns exec $C sysctl -qw net.ipv4.ip_local_port_range="40000 40199" net.ipv4.tcp_tw_reuse=0
run 2-ports $C 10.77.1.2:5001 -n 400 -c 4 --spike-threshold 50ms
ip netns exec $C sysctl -qw net.ipv4.ip_local_port_range="32768 60999" net.ipv4.tcp_tw_reuse=2
sleep 1

# 3. SYN drops: a quarter of first SYNs, and the second too when bit 1 of the port is set.
ip netns exec $S nft -f - <<'EOF'
table inet tdoc {
  set seen1 { type ipv4_addr . inet_service; flags dynamic,timeout; timeout 60s; }
  set seen2 { type ipv4_addr . inet_service; flags dynamic,timeout; timeout 60s; }
  chain in {
    type filter hook input priority 0;
    tcp dport 5001 tcp flags & (syn|ack) == syn ip saddr . tcp sport @seen2 accept
    tcp dport 5001 tcp flags & (syn|ack) == syn tcp sport & 2 == 2 ip saddr . tcp sport @seen1 add @seen2 { ip saddr . tcp sport } drop
    tcp dport 5001 tcp flags & (syn|ack) == syn ip saddr . tcp sport @seen1 accept
    tcp dport 5001 tcp flags & (syn|ack) == syn numgen random mod 4 == 0 add @seen1 { ip saddr . tcp sport } drop
  }
}
EOF
run 3-syn $C 10.77.1.2:5001 -d 4s -c 4
run 3-syn-json $C 10.77.1.2:5001 -d 4s -c 4 --json
ip netns exec $S nft flush ruleset

# 4. Data RTO: 2% of requests dropped, no tail loss probe.
ip netns exec $S nft -f - <<'EOF'
table inet tdoc {
  chain in {
    type filter hook input priority 0;
    tcp dport 5001 ip length > 100 numgen random mod 50 == 0 drop
  }
}
EOF
ip netns exec $C sysctl -qw net.ipv4.tcp_early_retrans=0
run 4-rto $C 10.77.1.2:5001 -d 3s -c 2
ip netns exec $S nft flush ruleset

# 5. Hostile servers on the loopback of $L: accepts and never replies (5993), answers one
#    byte per second (5994), SYNs dropped (5995).
ip netns exec $L python3 -c '
import socket, threading, time
def listener(port):
    s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("127.0.0.1", port)); s.listen(128); return s
quiet, slow = listener(5993), listener(5994)
def dribble(c):
    try:
        c.recv(256)
        for _ in range(20):
            c.send(b"x"); time.sleep(1)
    except OSError:
        pass
slow.settimeout(1)
end = time.time() + 60
while time.time() < end:
    try:
        c, _ = slow.accept()
        threading.Thread(target=dribble, args=(c,), daemon=True).start()
    except socket.timeout:
        pass
' &
PIDS+=($!)
ip netns exec $L nft add table inet tdoc
ip netns exec $L nft add chain inet tdoc in '{ type filter hook input priority 0; }'
ip netns exec $L nft add rule inet tdoc in tcp dport 5995 drop
sleep 0.5
run 5-silent $L 127.0.0.1:5993 -d 2s
run 5-dribble $L 127.0.0.1:5994 -d 3s
run 5-blackhole $L 127.0.0.1:5995 -d 3s
run 5-timeout $L 127.0.0.1:5993 --timeout 1s -n 4 -c 4

# 6. HTTP statuses.
run 6-http404 $L --mode http --path /status/404 -n 200
run 6-http404-expected $L --mode http --path /status/404 -n 200 --expect-status 2xx,404
run 6-http404-json $L --mode http --path /status/404 -n 20 --json

# 8. Where the time went: Python's http.server thinking 300 ms per request on the loopback
#    of $L, as written by default (headers and body in two writes: 8300) and with a buffered
#    writer (one write: 8301).
for spec in "8300 0" "8301 65536"; do
    set -- $spec
    ip netns exec $L python3 -c '
import http.server, socketserver, sys, time
class H(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    wbufsize = int(sys.argv[2])
    def do_GET(self):
        time.sleep(0.3)
        self.send_response(200)
        self.send_header("Content-Length", "3")
        self.end_headers()
        self.wfile.write(b"ok\n")
    def log_message(self, *a):
        pass
class S(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True
    allow_reuse_address = True
S(("127.0.0.1", int(sys.argv[1])), H).serve_forever()
' "$1" "$2" &
    PIDS+=($!)
done
# Python starts slowly on a busy host: wait until both listen.
for _ in $(seq 100); do
    [ "$(ip netns exec $L ss -Hltn '( sport = :8300 or sport = :8301 )' | wc -l)" -ge 2 ] && break
    sleep 0.1
done
run 8-server $L http://127.0.0.1:8301/ -d 3s
run 8-server-json $L http://127.0.0.1:8301/ -d 3s --json
run 8-server-nagle $L http://127.0.0.1:8300/ -d 3s

# 9. A slow path: the client and server namespaces also joined by TUN devices whose packets
#    a relay here delays 60 ms each way (no netem on this kernel), `probe --serve` on it.
python3 - "$C" "$S" <<'PY' &
import ctypes, fcntl, os, queue, select, struct, sys, threading, time
libc = ctypes.CDLL(None, use_errno=True)
def tun(ns):
    fd = os.open("/var/run/netns/" + ns, os.O_RDONLY)
    assert libc.setns(fd, 0x40000000) == 0  # CLONE_NEWNET, this thread only
    os.close(fd)
    t = os.open("/dev/net/tun", os.O_RDWR)
    fcntl.ioctl(t, 0x400454CA, struct.pack("16sH", b"pdoctun0", 0x0001 | 0x1000))  # TUNSETIFF: TUN, no PI
    return t
a, b = tun(sys.argv[1]), tun(sys.argv[2])
until = time.monotonic() + 120
def line(src, dst):
    q = queue.Queue()
    def reader():
        while time.monotonic() < until:
            if select.select([src], [], [], 0.1)[0]:
                q.put((time.monotonic() + 0.060, os.read(src, 65536)))
        q.put(None)
    def writer():
        while (item := q.get()) is not None:
            time.sleep(max(0.0, item[0] - time.monotonic()))
            os.write(dst, item[1])
    for f in (reader, writer):
        threading.Thread(target=f).start()
line(a, b)
line(b, a)
PY
PIDS+=($!)
for _ in $(seq 100); do
    ip -n $S link show pdoctun0 >/dev/null 2>&1 && ip -n $C link show pdoctun0 >/dev/null 2>&1 && break
    sleep 0.1
done
ip -n $C addr add 10.77.4.1 peer 10.77.4.2 dev pdoctun0; ip -n $C link set pdoctun0 up
ip -n $S addr add 10.77.4.2 peer 10.77.4.1 dev pdoctun0; ip -n $S link set pdoctun0 up
ip netns exec $S "$B" probe --serve 10.77.4.2:5002 >/dev/null 2>&1 &
PIDS+=($!)
sleep 0.5
run 9-path $C 10.77.4.2:5002 -d 3s

# 7. A source address that is not on this host.
run 7-local-addr $L 127.0.0.1:5993 --local-addr 192.0.2.1
echo "outputs in $OUT"
