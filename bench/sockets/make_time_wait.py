#!/usr/bin/env python3
"""Creates N client-side TIME_WAIT sockets in the current network namespace: N connections
spread over D listeners on 127.0.0.1 (ports 20001..20000+D), each closed by the client first.
Bounded: N connections, and it stops after 50 s whatever happens (TIME_WAIT lasts 60 s).
Usage: make_time_wait.py N D"""
import socket
import sys
import time

n, d = int(sys.argv[1]), int(sys.argv[2])
listeners = []
for i in range(d):
    l = socket.socket()
    l.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    l.bind(("127.0.0.1", 20001 + i))
    l.listen(1024)
    listeners.append(l)
t0 = time.time()
done = 0
batch = 256
while done < n and time.time() - t0 < 50:
    k = min(batch, n - done)
    for j in range(k):
        l = listeners[(done + j) % d]
        c = socket.create_connection(l.getsockname())
        s, _ = l.accept()
        c.close()          # client closes first: TIME_WAIT lands on the client
        s.recv(1)          # EOF
        s.close()
    done += k
print(f"{done} connections in {time.time() - t0:.1f} s", file=sys.stderr)
