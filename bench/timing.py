#!/usr/bin/env python3
"""Times a command: `timing.py RUNS CMD [ARG...]` runs CMD RUNS times (stdout to /dev/null,
stderr kept in $TIMING_ERR or dropped) and prints "median_wall_s median_cpu_s max_rss_kib".

Wall time from a monotonic clock and CPU time (user + system) from wait4(2), both to the
microsecond, where /usr/bin/time rounds to 10 ms (too coarse for runs of 50 ms). Peak RSS
comes from one more run under /usr/bin/time: a child of this Python process would report at
least Python's own RSS (Linux carries the pre-exec high-water mark over exec).
"""
import os
import statistics
import subprocess
import sys
import time


def once(cmd, err_path=os.devnull):
    """Runs `cmd` once (stdout to /dev/null): (wall seconds, CPU seconds user + system)."""
    with open(os.devnull, "wb") as out, open(err_path, "wb") as err:
        t0 = time.perf_counter()
        p = subprocess.Popen(cmd, stdout=out, stderr=err)
        _, _, ru = os.wait4(p.pid, 0)
        wall = time.perf_counter() - t0
    return wall, ru.ru_utime + ru.ru_stime


def peak_rss_kib(cmd):
    """Peak RSS of one run of `cmd` under /usr/bin/time."""
    r = subprocess.run(
        ["/usr/bin/time", "-f", "%M", *cmd],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    return int(r.stderr.strip().splitlines()[-1])


def main() -> None:
    if len(sys.argv) < 3:
        sys.exit("usage: timing.py RUNS CMD [ARG...]")
    runs, cmd = int(sys.argv[1]), sys.argv[2:]
    err_path = os.environ.get("TIMING_ERR", os.devnull)
    timed = [once(cmd, err_path) for _ in range(runs)]
    walls = [w for w, _ in timed]
    cpus = [c for _, c in timed]
    print(f"{statistics.median(walls):.4f} {statistics.median(cpus):.4f} {peak_rss_kib(cmd)}")


if __name__ == "__main__":
    main()
