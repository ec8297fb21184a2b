#!/usr/bin/env python3
"""Holds P processes x K established loopback connections in the current network namespace,
for the process-attribution benchmark: each of P forked children opens K connections to one
listener on 127.0.0.1:20100 (the parent accepts and keeps the server ends), prints "ready"
when all are up, and everything stays until killed (at most 300 s).
Usage: hold_connections.py P K"""
import os
import socket
import sys
import time

p, k = int(sys.argv[1]), int(sys.argv[2])
l = socket.socket()
l.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
l.bind(("127.0.0.1", 20100))
l.listen(4096)
children = []
for i in range(p):
    pid = os.fork()
    if pid == 0:
        l.close()
        conns = [socket.create_connection(("127.0.0.1", 20100)) for _ in range(k)]
        time.sleep(300)
        os._exit(0)
    children.append(pid)
server_ends = []
t0 = time.time()
while len(server_ends) < p * k and time.time() - t0 < 60:
    s, _ = l.accept()
    server_ends.append(s)
print("ready", len(server_ends), flush=True)
time.sleep(300)
