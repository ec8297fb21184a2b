#!/usr/bin/env bash
# Records the three "where the time went" golden captures (issue 22): real TCP between two
# network namespaces (tdoc-time-c, tdoc-time-s, deleted on exit) joined by a veth pair,
# tcpdump -s 128 on the client's side.
#   time-server-300ms.pcap  the server sleeps 300 ms before each reply (4 connections, one
#                           request each, then one connection with 3 requests)
#   time-path-440ms.pcap    everything the server sends waits 440 ms on its way (a delay line:
#                           routed into a TUN device, held 440 ms by a small program, sent on
#                           the veth; this kernel has no netem); the server answers at once
#                           (4 connections)
#   time-client-1300ms.pcap the client sleeps 1.3 s between connect() and its request; the
#                           server answers at once (2 connections)
# Usage (root): tests/data/analyze/make-time-captures.sh   (writes next to itself)
set -euo pipefail
DIR=$(cd "$(dirname "$0")" && pwd)
C=tdoc-time-c
S=tdoc-time-s
cleanup() {
  [ -n "${LINE:-}" ] && kill "$LINE" 2>/dev/null || true
  [ -n "${SRV:-}" ] && kill "$SRV" 2>/dev/null || true
  [ -n "${CAP:-}" ] && kill "$CAP" 2>/dev/null || true
  ip netns del $C 2>/dev/null || true
  ip netns del $S 2>/dev/null || true
}
trap cleanup EXIT
cleanup
ip netns add $C
ip netns add $S
ip link add tdoc-time-vc netns $C type veth peer name tdoc-time-vs netns $S
ip -n $C addr add 10.79.1.1/24 dev tdoc-time-vc
ip -n $S addr add 10.79.1.2/24 dev tdoc-time-vs
ip -n $C link set tdoc-time-vc up
ip -n $S link set tdoc-time-vs up
ip -n $C link set lo up
ip -n $S link set lo up

# server.py SLEEP_S: answers each 100-byte request with 1000 bytes after SLEEP_S.
SERVER='
import socket, sys, threading, time
d = float(sys.argv[1])
l = socket.socket(); l.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
l.bind(("10.79.1.2", 8080)); l.listen(64)
def serve(c):
    with c:
        while True:
            got = b""
            while len(got) < 100:
                b = c.recv(100 - len(got))
                if not b: return
                got += b
            time.sleep(d)
            c.sendall(b"r" * 1000)
while True:
    c, _ = l.accept()
    threading.Thread(target=serve, args=(c,), daemon=True).start()
'
# client.py WAIT_S CONNS REQUESTS: CONNS connections one after the other, each sleeping WAIT_S
# after connect() and sending REQUESTS requests of 100 bytes, reading each 1000-byte answer.
CLIENT='
import socket, sys, time
wait, conns, reqs = float(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
for _ in range(conns):
    s = socket.create_connection(("10.79.1.2", 8080))
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    time.sleep(wait)
    for _ in range(reqs):
        s.sendall(b"q" * 100)
        got = 0
        while got < 1000:
            got += len(s.recv(1000 - got))
    s.close()
    time.sleep(0.05)
'

record() { # NAME SERVER_SLEEP CLIENT_WAIT CONNS REQS [CONNS2 REQS2]
  local name=$1
  ip netns exec $S python3 -c "$SERVER" "$2" & SRV=$!
  ip netns exec $C tcpdump -i tdoc-time-vc -s 128 -w "$DIR/$name.pcap" 'tcp port 8080' 2>/dev/null & CAP=$!
  sleep 1
  ip netns exec $C python3 -c "$CLIENT" "$3" "$4" "$5"
  if [ -n "${6:-}" ]; then ip netns exec $C python3 -c "$CLIENT" "$3" "$6" "$7"; fi
  sleep 0.5
  kill $CAP; wait $CAP 2>/dev/null || true; CAP=
  kill $SRV; wait $SRV 2>/dev/null || true; SRV=
}

# line.py DELAY_S DST_MAC SRC_MAC: reads IP packets from the TUN tdoc-time-t0 and sends each
# DELAY_S later, in order, on the veth tdoc-time-vs in an Ethernet frame to the client.
LINE_PY='
import collections, fcntl, os, socket, struct, sys, threading, time
delay = float(sys.argv[1])
mac = lambda m: bytes.fromhex(m.replace(":", ""))
head = mac(sys.argv[2]) + mac(sys.argv[3]) + b"\x08\x00"
fd = os.open("/dev/net/tun", os.O_RDWR)
fcntl.ioctl(fd, 0x400454CA, struct.pack("16sH", b"tdoc-time-t0", 0x0001 | 0x1000))
out = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
out.bind(("tdoc-time-vs", 0))
q, cv = collections.deque(), threading.Condition()
def send():
    while True:
        with cv:
            while not q:
                cv.wait()
            due, pkt = q.popleft()
        time.sleep(max(0.0, due - time.monotonic()))
        out.send(head + pkt)
threading.Thread(target=send, daemon=True).start()
while True:
    pkt = os.read(fd, 65536)
    with cv:
        q.append((time.monotonic() + delay, pkt))
        cv.notify()
'

record time-server-300ms 0.3 0 4 1 1 3
ip -n $S tuntap add dev tdoc-time-t0 mode tun
ip netns exec $S python3 -c "$LINE_PY" 0.44 \
  "$(ip netns exec $C cat /sys/class/net/tdoc-time-vc/address)" \
  "$(ip netns exec $S cat /sys/class/net/tdoc-time-vs/address)" & LINE=$!
sleep 0.5
ip -n $S link set tdoc-time-t0 up
ip -n $S route add 10.79.1.1/32 dev tdoc-time-t0
record time-path-440ms 0 0 4 1
ip -n $S route del 10.79.1.1/32 dev tdoc-time-t0
kill $LINE; wait $LINE 2>/dev/null || true; LINE=
record time-client-1300ms 0 1.3 2 1
ls -l "$DIR"/time-*.pcap
