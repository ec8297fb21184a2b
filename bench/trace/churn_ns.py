"""A network namespace with tcpdoctor's churn responder listening, for bench/trace's scripts:
created for one run, deleted (every process in it killed) afterwards, also when the run fails."""

import contextlib
import os
import signal
import subprocess
import time
import sys
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from need import need  # noqa: E402

need("iproute2")

PORT = 5001


def create(name, binary):
    """Creates namespace `name` with `binary probe --serve` listening on 127.0.0.1:PORT;
    returns the responder's process."""
    subprocess.run(["ip", "netns", "add", name], check=True)
    ex = ["ip", "netns", "exec", name]
    subprocess.run(ex + ["ip", "link", "set", "lo", "up"], check=True)
    # One run's churn must not run out of ports: the widest range (loopback reuses
    # TIME_WAIT ports by default, net.ipv4.tcp_tw_reuse=2).
    subprocess.run(ex + ["sysctl", "-qw", "net.ipv4.ip_local_port_range=1024 65535"],
                   check=True)
    server = subprocess.Popen(ex + [binary, "probe", "--serve", f"127.0.0.1:{PORT}",
                                    "--serve-threads", "4"],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        ss = subprocess.run(ex + ["ss", "-Htln", "sport", f"= :{PORT}"],
                            capture_output=True, text=True)
        if ss.stdout.strip():
            return server
        time.sleep(0.05)
    remove(name, server)
    raise RuntimeError(f"responder not listening in {name} within 10 s")


def remove(name, server=None):
    """Ends the responder and every process left in namespace `name`, then deletes it."""
    if server:
        server.terminate()
        server.wait()
    out = subprocess.run(["ip", "netns", "pids", name], capture_output=True, text=True)
    for pid in out.stdout.split():
        os.kill(int(pid), signal.SIGKILL)
    subprocess.run(["ip", "netns", "del", name])


@contextlib.contextmanager
def namespace(name, binary):
    """`create`, then `remove` when the block ends."""
    server = None
    try:
        server = create(name, binary)
        yield
    finally:
        if server is None:
            subprocess.run(["ip", "netns", "del", name], stderr=subprocess.DEVNULL)
        else:
            remove(name, server)
