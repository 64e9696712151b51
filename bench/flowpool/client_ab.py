#!/usr/bin/env python3
"""The bench's own client CPU per pooled flow run at 8, A/B:
`python3 bench/flowpool/client_ab.py [--binary B] [--no-store] ROUNDS RUNS` (root;
TMPDIR=/var/tmp as flowpool needs it). One stack (a control plane with a pool of 8 of the
heavy engine's image, its serve); per round each client in turn (the order flipped every
other round) runs RUNS flow runs 8 at a time, then waits for the pool to be full again:
"threads" is 8 threads each calling serve with http.client on a kept connection (the load
loop before ClosedLoop), "loop" is flowpool.load (ClosedLoop: one thread, a selector, each
request prebuilt). The client's CPU is this process's (getrusage: utime + stime, all its
threads) over the window, per run. Stored as
bench/results/DATE-HOST-COMMIT[-dirty]-flowpool-client-ab.txt unless --no-store."""

import argparse
import os
import resource
import shutil
import statistics
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import flowpool as fp  # noqa: E402
from bench_common import closed_loop, p50  # noqa: E402


def cpu_seconds():
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def threads(serve, graph, k, runs):
    return closed_loop(lambda i: serve.run(graph, "run %d" % i), runs, k)


def main(argv):
    ap = argparse.ArgumentParser()
    ap.add_argument("--binary", default=os.path.join(fp.ROOT, "build", "apps", "guestflow"))
    ap.add_argument("--no-store", action="store_true")
    ap.add_argument("rounds", type=int)
    ap.add_argument("runs", type=int)
    a = ap.parse_args(argv)
    commit, dirty = fp.head_commit(), fp.tree_dirty()
    lines = ["flowpool client-ab: the bench client's own CPU per pooled flow run at 8, "
             "http.client threads against ClosedLoop",
             fp.run_header(commit, dirty)]

    def say(line):
        print(line, flush=True)
        lines.append(line)

    work = tempfile.mkdtemp(prefix="client-ab-", dir="/var/tmp")
    got = {"threads": [], "loop": []}
    try:
        prefix = os.path.join(work, "engine")
        fp.make_engine(prefix)
        graph = fp.flow()
        state = os.path.join(work, "s")
        cp = fp.start_with_image(a.binary, state, prefix,
                                 ["--warm-pool", "%s@heavy=8" % fp.SHAPE])
        serve = fp.Serve(a.binary, state, cp.url)
        try:
            fp.warm_up(cp, serve, graph, 8)
            for r in range(a.rounds):
                for name in fp.in_turn(("threads", "loop"), r):
                    load = open("/proc/loadavg").read().split()[0]
                    c0 = cpu_seconds()
                    lat, wall = (threads if name == "threads" else fp.load)(serve, graph, 8,
                                                                           a.runs)
                    ms = (cpu_seconds() - c0) * 1000 / a.runs
                    got[name].append(ms)
                    say("round %d %-7s load %5s client CPU %.3f ms a run, %.2f runs/s, "
                        "p50 %.1f ms" % (r + 1, name, load, ms, a.runs / wall, p50(lat)))
                    fp.wait_until(lambda: fp.ready_guests(cp.get("/metrics")) >= 8, 300,
                                  "the pool")
        finally:
            serve.stop()
            cp.stop()
    finally:
        shutil.rmtree(work, ignore_errors=True)
    for name in ("threads", "loop"):
        say("%-7s client CPU ms a run: median %.3f (rounds %s)" % (
            name, statistics.median(got[name]), " ".join("%.3f" % x for x in got[name])))
    say("loop/threads median %.2f" % (statistics.median(got["loop"]) /
                                      statistics.median(got["threads"])))
    fp.store_tool_result(not a.no_store, "flowpool-client-ab", commit, dirty, lines,
                         "client_ab.py")


if __name__ == "__main__":
    main(sys.argv[1:])
