#!/usr/bin/env python3
"""Re-takes the console blocks of docs/examples/lab.md from real runs.

Every ```console block whose first line is `$ tcpdoctor lab ...` is run again with the
release binary (as root, so without `sudo`) and its output replaces the block's, followed by
`$ echo $?` and the exit status when the block showed one. Long outputs keep their first
MAX_LINES lines and end with "...". The prose around the blocks is kept as written.

  sudo python3 bench/lab/examples.py            # after cargo build --release
"""
import re
import shlex
import subprocess
import sys

DOC = "docs/examples/lab.md"
BIN = "target/release/tcpdoctor"
MAX_LINES = int(sys.argv[1]) if len(sys.argv) > 1 else 70


def run(cmd):
    args = shlex.split(cmd)
    assert args[0] == "tcpdoctor", cmd
    p = subprocess.run([BIN] + args[1:], capture_output=True, text=True)
    out = (p.stdout + p.stderr).rstrip("\n").splitlines()
    out = [l.rstrip() for l in out]
    if len(out) > MAX_LINES:
        out = out[:MAX_LINES] + ["..."]
    return out, p.returncode


def main():
    text = open(DOC).read()
    blocks = re.split(r"(```console\n.*?```)", text, flags=re.S)
    for i, b in enumerate(blocks):
        if not b.startswith("```console\n$ tcpdoctor lab"):
            continue
        lines = b.split("\n")[1:-1]
        cmd = lines[0][2:]
        # Blocks with several commands (bad input, cleanup) are kept as written.
        if " cleanup" in cmd or sum(l.startswith("$ tcpdoctor") for l in lines) > 1:
            continue
        out, code = run(cmd)
        new = ["```console", f"$ {cmd}"] + out
        if any(l.startswith("$ echo $?") for l in lines):
            new += ["$ echo $?", str(code)]
        new.append("```")
        blocks[i] = "\n".join(new)
        print(f"{cmd}: exit {code}, {len(out)} lines", file=sys.stderr)
    open(DOC, "w").write("".join(blocks))


if __name__ == "__main__":
    main()
