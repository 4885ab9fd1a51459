#!/usr/bin/env python3
"""Whole-process timings of two commands run in turn, A B A B ...

    bench/pairs.py [-n RUNS] [--warmup W] --vs 'COMMAND B' -- COMMAND A ...

Each run is one process, timed from just before its start to just after it
is reaped (a monotonic clock); its CPU time (user + system) is the kernel's
accounting of the reaped child. A and B alternate, so a drift in the
machine's speed reaches both; the ratio A/B is taken pair by pair and its
median printed with the medians of each command. Output is discarded; the
commands' exit statuses are counted, not acted on. docs/BENCHMARKS.md quotes
figures taken this way ("pair by pair", "alternating").
"""
import argparse
import os
import shlex
import statistics
import subprocess
import sys
import time


def run_once(argv):
    t0 = time.monotonic()
    p = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL)
    _, status, ru = os.wait4(p.pid, 0)
    wall = time.monotonic() - t0
    p.returncode = os.waitstatus_to_exitcode(status)
    return wall, ru.ru_utime + ru.ru_stime, p.returncode


def spread(xs, scale=1.0, unit=""):
    xs = sorted(x * scale for x in xs)
    return f"{statistics.median(xs):.3g}{unit} ({xs[0]:.3g}-{xs[-1]:.3g})"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-n", type=int, default=20, help="counted pairs (default 20)")
    ap.add_argument("--warmup", type=int, default=3, help="uncounted pairs first (default 3)")
    ap.add_argument("--vs", required=True, help="command B, split as a shell splits words")
    ap.add_argument("a", nargs=argparse.REMAINDER, help="-- command A and its arguments")
    o = ap.parse_args()
    a = o.a[1:] if o.a[:1] == ["--"] else o.a
    b = shlex.split(o.vs)
    if not a or not b:
        ap.error("both commands are needed")
    rows = {"A": [], "B": []}
    fails = {"A": 0, "B": 0}
    for i in range(o.warmup + o.n):
        for name, argv in (("A", a), ("B", b)):
            wall, cpu, rc = run_once(argv)
            if i >= o.warmup:
                rows[name].append((wall, cpu))
                fails[name] += rc != 0
    print(f"load average {os.getloadavg()[0]:.2f}, {o.n} pairs after {o.warmup} warm-up pairs")
    for name in ("A", "B"):
        walls = [w for w, _ in rows[name]]
        cpus = [c for _, c in rows[name]]
        print(f"{name}: wall {spread(walls, 1e3, ' ms')}, cpu {spread(cpus, 1e3, ' ms')}, "
              f"non-zero exits {fails[name]}")
    wr = [ra[0] / rb[0] for ra, rb in zip(rows["A"], rows["B"]) if rb[0] > 0]
    cr = [ra[1] / rb[1] for ra, rb in zip(rows["A"], rows["B"]) if rb[1] > 0 and ra[1] > 0]
    print(f"A/B wall, median of pairs: {spread(wr)}; B/A {1 / statistics.median(wr):.1f}x")
    if cr:
        print(f"A/B cpu, median of pairs: {spread(cr)}; B/A {1 / statistics.median(cr):.1f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
