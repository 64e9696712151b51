#!/usr/bin/env python3
"""Where the control plane's threads sleep uninterruptibly (D) during flowpool's pooled runs
at 8: `python3 bench/flowpool/cp_offcpu.py [RUNS] [--binary PATH]` (root, TMPDIR=/var/tmp).
`perf record -e sched:sched_switch -g -p CP` over the window; each switch-out in state D is
charged, by its kernel stack (scheduler frames dropped, the next four), the time to the same
thread's next switch-out: an upper bound of its wait (it includes the run after waking).
Stored as bench/results/DATE-HOST-COMMIT[-dirty]-flowpool-cp-offcpu.txt."""

import collections
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import flowpool as fp  # noqa: E402


def stacks(path):
    out = subprocess.run(["perf", "script", "-i", path, "-F", "tid,time,trace,ip,sym"],
                         capture_output=True, text=True).stdout
    evs, cur = [], None
    for line in out.splitlines():
        if "prev_state=" in line and not line.startswith(("\t", "        ")):
            m = re.match(r"\s*(\d+)\s+([\d.]+):?\s+.*prev_state=(\S+)", line)
            if cur:
                evs.append(cur)
            cur = [int(m.group(1)), float(m.group(2)), m.group(3), []] if m else None
        elif cur is not None and line.strip():
            parts = line.split()
            if len(parts) >= 2:
                cur[3].append(parts[1])
    if cur:
        evs.append(cur)
    by = collections.defaultdict(list)
    for e in evs:
        by[e[0]].append(e)
    ms, n = collections.Counter(), collections.Counter()
    for es in by.values():
        for a, b in zip(es, es[1:]):
            if a[2].startswith("D"):
                frames = [f for f in a[3] if not f.startswith(
                    ("__schedule", "schedule", "preempt_schedule", "io_schedule"))]
                key = " < ".join(frames[:4])
                ms[key] += (b[1] - a[1]) * 1000
                n[key] += 1
    return ms, n


def main(argv):
    binary = os.path.join(fp.ROOT, "build", "apps", "guestflow")
    if "--binary" in argv:
        i = argv.index("--binary")
        binary = argv[i + 1]
        argv = argv[:i] + argv[i + 2:]
    runs = int(argv[0]) if argv else 96
    commit = fp.head_commit()
    work = tempfile.mkdtemp(prefix="guestflow-cp-offcpu-")
    lines = ["flowpool cp-offcpu: the control plane's uninterruptible sleeps (D) by kernel stack "
             "during %d pooled runs at 8 through serve" % runs,
             "date %s UTC, host %s, tree %s, binary %s, load at start %s" % (
                 time.strftime("%Y-%m-%d %H:%M", time.gmtime()), socket.gethostname(), commit,
                 binary, " ".join(open("/proc/loadavg").read().split()[:3]))]
    try:
        prefix = os.path.join(work, "engine")
        fp.make_engine(prefix)
        graph = fp.flow()
        state = os.path.join(work, "state")
        cp = fp.start_with_image(binary, state, prefix, ["--warm-pool", "%s@heavy=8" % fp.SHAPE])
        serve = fp.Serve(binary, state, cp.url)
        data = os.path.join(work, "off.perf")
        try:
            fp.warm_up(cp, serve, graph, 8)
            p = subprocess.Popen(["perf", "record", "-q", "-e", "sched:sched_switch", "-g", "-p",
                                  str(cp.p.pid), "-o", data], stdout=subprocess.DEVNULL,
                                 stderr=subprocess.DEVNULL)
            time.sleep(0.7)  # perf's own start
            lat, wall = fp.load(serve, graph, 8, runs)
            p.send_signal(signal.SIGINT)
            p.wait(60)
        finally:
            serve.stop()
            cp.stop()
        ms, n = stacks(data)
        lines.append("pooled at 8: %d runs in %.2f s = %.2f runs/s; D switch-outs %d, charged "
                     "%.0f ms (upper bound: to each thread's next switch-out)" % (
                         len(lat), wall, len(lat) / wall, sum(n.values()), sum(ms.values())))
        lines.append("%9s %6s  %s" % ("D ms", "count", "kernel stack (innermost first)"))
        for k, v in ms.most_common(16):
            lines.append("%9.0f %6d  %s" % (v, n[k], k))
        lines.append(fp.load_line())
        print("\n".join(lines))
        fp.store_result(os.path.join(fp.ROOT, "bench", "results"), "flowpool-cp-offcpu", commit,
                        fp.tree_dirty(), lines,
                        "python3 bench/flowpool/cp_offcpu.py " + " ".join(sys.argv[1:]))
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main(sys.argv[1:])
