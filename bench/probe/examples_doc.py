#!/usr/bin/env python3
"""Refreshes docs/examples/probe.md from the outputs of bench/probe/examples.sh: every console
block, the JSON excerpts, and the figures quoted in the text around them.

usage: python3 bench/probe/examples_doc.py OUTDIR [docs/examples/probe.md]
"""
import json
import re
import sys
import os
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from need import need  # noqa: E402

need("iproute2")

out = sys.argv[1].rstrip("/") + "/"
doc = sys.argv[2] if len(sys.argv) > 2 else "docs/examples/probe.md"


def text(name):
    with open(out + name + ".txt") as f:
        return f.read().rstrip("\n")


def load(name):
    with open(out + name + ".txt") as f:
        return json.load(f)


md = open(doc).read()

BLOCKS = [
    ("1-embedded", "tcpdoctor probe -d 3s"),
    ("2-ports", "ip netns exec client tcpdoctor probe 10.77.1.2:5001 -n 400 -c 4 --spike-threshold 50ms"),
    ("3-syn", "ip netns exec client tcpdoctor probe 10.77.1.2:5001 -d 4s -c 4"),
    ("4-rto", "ip netns exec client tcpdoctor probe 10.77.1.2:5001 -d 3s -c 2"),
    ("5-silent", "tcpdoctor probe 127.0.0.1:5993 -d 2s"),
    ("5-dribble", "tcpdoctor probe 127.0.0.1:5994 -d 3s"),
    ("5-blackhole", "tcpdoctor probe 127.0.0.1:5995 -d 3s"),
    ("5-timeout", "tcpdoctor probe 127.0.0.1:5993 --timeout 1s -n 4 -c 4"),
    ("6-http404", "tcpdoctor probe --mode http --path /status/404 -n 200"),
    ("6-http404-expected", "tcpdoctor probe --mode http --path /status/404 -n 200 --expect-status 2xx,404"),
    ("7-local-addr", "tcpdoctor probe 127.0.0.1:5993 --local-addr 192.0.2.1"),
    ("8-server", "tcpdoctor probe http://127.0.0.1:8301/ -d 3s"),
    ("8-server-nagle", "tcpdoctor probe http://127.0.0.1:8300/ -d 3s"),
    ("9-path", "ip netns exec client tcpdoctor probe 10.77.4.2:5002 -d 3s"),
]
for name, cmd in BLOCKS:
    head = "```\n$ " + cmd + "\n"
    i = md.index(head) + len(head)
    j = md.index("\n```", i)
    md = md[:i] + text(name) + md[j:]


def sub(pattern, repl):
    global md
    md, n = re.subn(pattern, repl, md)
    if n != 1:
        sys.exit(f"pattern {pattern!r} matched {n} times")


# Section 1.
e = text("1-embedded")
cut = re.search(r"(\d+) in flight cut at the end", e).group(1)
sub(r"cuts them there \(here \d+;", f"cuts them there (here {cut};")
m = re.search(r"(\d+) of (\d+) requests were slower", e)
if m:
    sub(r"Rare \([\d,]+ of [\d,]+\)", f"Rare ({int(m.group(1)):,} of {int(m.group(2)):,})")

# Section 2.
m = re.search(r"(\d+) connects in ([\d.]+) s before the first failure", text("2-ports"))
sub(r"\(\d+ connects in \d+ ms\)", f"({m.group(1)} connects in {float(m.group(2)) * 1000:.0f} ms)")

# Section 3.
syn = text("3-syn")
retrans = re.search(r"TcpExtTCPSynRetrans\s+\+(\d+)", syn).group(1)
attempts = " + ".join(f"{n} x {a}" for a, n in re.findall(r"SYN retransmission #(\d+)\s+(\d+)", syn))
cut = re.search(r"(\d+) in flight cut at the end", syn).group(1)
sub(r"delta \(\+\d+: [^,]*, plus the SYNs of the \d+ connections", f"delta (+{retrans}: {attempts}, plus the SYNs of the {cut} connections")
share = re.search(r";\s+(\d+)% of the workers' time", syn)
sub(r"The stalls took \d+% of the", f"The stalls took {share.group(1)}% of the")
v = load("3-syn-json")
group = max((g for g in v["spikes"]["groups"] if g["cause"] == "syn_retransmit"), key=lambda g: g["attempt"])
i = md.index('```json\n{\n  "cause": "syn_retransmit"')
j = md.index("```", i + 7)
md = md[:i] + "```json\n" + json.dumps(group, indent=2) + "\n" + md[j:]

# Section 6.
v = load("6-http404-json")
sub(r"the finding's impact `[^`]*`", f"the finding's impact `{json.dumps(v['findings'][0]['impact'])}`")

# Section 5 (where the time went).
v = load("8-server-json")
t = v["time_split"]
i = md.index('```json\n{\n  "path_rtt_us"')
j = md.index("```", i + 7)
md = md[:i] + "```json\n" + json.dumps(t, indent=2) + "\n" + md[j:]
server = next(c for c in t["components"] if c["component"] == "server")
sub(r"server's part: p50 [\d,]+ us", f"server's part: p50 {server['p50_us']:,} us")
m = re.search(r"server time of these requests (\d+) ms / the CPU waits that could\s+hide in them: their\s+workers'\s+\(schedstat\s+run_delay\s+since\s+each\s+one's\s+previous\s+slow\s+request\)\s+(\d+)\s+ms", text("8-server"))
sub(r"\d+ ms of server time named, against at most \d+ ms", f"{m.group(1)} ms of server time named, against at most {m.group(2)} ms")
m = re.search(r"waited for a CPU during (\d+)% of the run", text("8-server"))
sub(r"here busy \d+% of the run", f"here busy {m.group(1)}% of the run")
nagle = text("8-server-nagle")
m = re.search(r"(\d+) of (\d+) replies waited ~([\d.]+ms) after\s+their\s+first\s+byte", nagle)
sub(r"- \d+ of \d+ replies waited ~[\d.]+ms after", f"- {m.group(1)} of {m.group(2)} replies waited ~{m.group(3)} after")

m = re.search(r"path round trip: median of the connections \(the kernel's where\s+read, else the handshake\): \d+ x ~([\d.]+ms)", text("9-path"))
sub(r"the handshake and the request's, ~[\d.]+ms each as the", f"the handshake and the request's, ~{m.group(1)} each as the")

open(doc, "w").write(md)
print(f"refreshed {doc}")
