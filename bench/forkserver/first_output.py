#!/usr/bin/env python3
"""A first run's first output from a fork-server pool against an ordinary pool (issue 39),
interleaved in one run: `python3 bench/forkserver/first_output.py [--rounds N] [--build DIR]`
(root; under a minute). Each round starts a `guestflow control-plane` with
`--warm-pool s-1vcpu-256mb=2` and `GUESTFLOW_PRELOAD=pandas`, with GUESTFLOW_FORK_POOL=1
(fork: pool guests cloned from a template that imported pandas) or 0 (ordinary: each pool
guest's python waiter imported it), and measures create + streamed exec to the first stdout
(bench/flowpool's first_output) for two snippets: `print(6)` (the path) and a pandas
DataFrame sum (the path plus what the run writes of pandas' objects: in a clone, pages it
shares with its template, copied on write). Stores DATE-HOST-COMMIT-forkpool-first-output.txt.
"""

import argparse
import os
import socket
import statistics
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "bench", "flowpool"))
sys.path.insert(0, os.path.join(ROOT, "bench"))
import flowpool  # noqa: E402 - its first_output and store

SNIPPETS = {
    "print": "print(6, flush=True)\n",
    "pandas": "import pandas\nprint(pandas.DataFrame({'a': [1, 2, 3]})['a'].sum(), flush=True)\n",
}


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--rounds", type=int, default=2, help="interleaved rounds per kind")
    ap.add_argument("--per", type=int, default=10, help="first outputs per round")
    ap.add_argument("--out-dir", default=os.path.join(ROOT, "bench", "results"))
    a = ap.parse_args(argv)
    binary = os.path.join(a.build, "apps", "guestflow")
    commit = flowpool.head_commit()
    load0 = open("/proc/loadavg").read().split()[0]
    res = {}
    for _ in range(a.rounds):
        for name, code in SNIPPETS.items():
            for kind in ("fork", "ordinary"):
                os.environ["GUESTFLOW_FORK_POOL"] = "1" if kind == "fork" else "0"
                with tempfile.TemporaryDirectory(prefix="guestflow-fo-", dir="/var/tmp") as d:
                    xs = flowpool.first_output(binary, os.path.join(d, "cp"), "pandas", a.per,
                                               code=code)
                res.setdefault((name, kind), []).extend(xs)
    lines = ["forkpool first output: create + streamed exec to the first stdout, pool "
             "s-1vcpu-256mb=2, GUESTFLOW_PRELOAD=pandas, fork-server against ordinary pool, "
             "%d interleaved rounds of %d" % (a.rounds, a.per),
             "date %s UTC, host %s, tree %s, load %s at start, %s at end" % (
                 time.strftime("%Y-%m-%d %H:%M", time.gmtime()), socket.gethostname(), commit,
                 load0, open("/proc/loadavg").read().split()[0])]
    for name in SNIPPETS:
        f = statistics.median(res[(name, "fork")])
        o = statistics.median(res[(name, "ordinary")])
        lines.append("%-7s fork p50 %.1f ms, ordinary p50 %.1f ms, fork / ordinary %.2f" %
                     (name, f, o, f / o))
    for s in lines:
        print(s, flush=True)
    path = os.path.join(a.out_dir, "%s-%s-%s-forkpool-first-output.txt" % (
        time.strftime("%Y-%m-%d", time.gmtime()), socket.gethostname(), commit))
    if os.path.exists(path):
        raise SystemExit("%s exists: results are never overwritten" % path)
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n\ncommand: python3 bench/forkserver/first_output.py " +
                " ".join(argv) + "\n")
    print("stored " + path, file=sys.stderr)


if __name__ == "__main__":
    main(sys.argv[1:])
