#!/usr/bin/env python3
"""The control plane's CPU a pooled flow run, A/B in short alternating windows:
`python3 bench/flowpool/cp_ab.py BASE NEW ROUNDS RUNS` (root; TMPDIR=/var/tmp as flowpool
needs it). Both stacks (a control plane of the binary with a pool of 8 of the heavy engine's
image, its serve) stay up; per round each in turn (the order reversed every other round) runs
RUNS flow runs 8 at a time, then waits for its pool to be full again; the control plane's
CPU (its process's utime + stime, every thread, from /proc/<pid>/stat) over that window, per
run. Short windows side by side: the host's drifting speed and load move both alike, which
ab8.py's one-stack-at-a-time windows of minutes do not. Resolution: one clock tick / RUNS."""

import os
import shutil
import statistics
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import flowpool as fp  # noqa: E402

TICK = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid):
    f = open("/proc/%d/stat" % pid).read().rsplit(")", 1)[1].split()
    return (int(f[11]) + int(f[12])) / TICK


def full(cp):
    return fp.ready_guests(cp.get("/metrics")) >= 8


def main(argv):
    base, new, rounds, runs = argv[0], argv[1], int(argv[2]), int(argv[3])
    work = tempfile.mkdtemp(prefix="cp-ab-", dir="/var/tmp")
    stacks = []
    try:
        prefix = os.path.join(work, "engine")
        fp.make_engine(prefix)
        graph = fp.flow()
        for name, binary in (("base", base), ("new", new)):
            state = os.path.join(work, name)
            cp = fp.start_with_image(binary, state, prefix,
                                     ["--warm-pool", "%s@heavy=8" % fp.SHAPE])
            stacks.append((name, cp, fp.Serve(binary, state, cp.url)))
            fp.warm_up(cp, stacks[-1][2], graph, 8)
        got = {"base": [], "new": []}
        for r in range(rounds):
            for name, cp, serve in fp.in_turn(stacks, r):
                load = open("/proc/loadavg").read().split()[0]
                c0 = cpu_seconds(cp.p.pid)
                fp.load(serve, graph, 8, runs)
                fp.wait_until(lambda: full(cp), 300, "the pool")  # its refills count
                ms = (cpu_seconds(cp.p.pid) - c0) * 1000 / runs
                got[name].append(ms)
                print("round %d %-4s load %5s runs %d control plane CPU %.2f ms a run"
                      % (r + 1, name, load, runs, ms), flush=True)
        for name in ("base", "new"):
            print("%-4s control plane CPU ms a run: median %.2f mean %.2f (rounds %s)"
                  % (name, statistics.median(got[name]), statistics.mean(got[name]),
                     " ".join("%.2f" % x for x in got[name])))
        lower = sum(1 for x, y in zip(got["base"], got["new"]) if y < x)
        print("new/base median %.3f; new lower in %d of %d rounds"
              % (statistics.median(got["new"]) / statistics.median(got["base"]), lower, rounds))
    finally:
        for _, cp, serve in stacks:
            serve.stop()
            cp.stop()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main(sys.argv[1:])
