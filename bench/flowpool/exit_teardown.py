"""What a pooled flow run's exit tail is made of, measured apart on the host (no guest):
a process forked from a parent that imported flowpool's engine modules (Debian's pandas and
sympy, as a fork-server template does) writes its last line and calls os._exit(0), as the
runner does after its done frame; the parent times that line to the child's exit being
visible on a pidfd (the kernel tears the child's address space down before it reports the
exit, and before the child's pipes close). The same fork from a parent that imported
nothing, interleaved in rounds, is the baseline.

usage: python3 bench/flowpool/exit_teardown.py [--rounds R] [--forks N] [--out-dir DIR]
(the run's interpreter is /usr/bin/python3, where pandas and sympy are installed)
"""
import argparse
import json
import os
import select
import socket
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

CHILD = r"""
import gc, json, os, select, sys, time
if sys.argv[1] == "engine":
    import pandas, sympy  # noqa: F401 - what the template holds
    gc.freeze()
out = []
for _ in range(int(sys.argv[2])):
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        os.write(w, b"done\n")
        os._exit(0)
    os.close(w)
    pfd = os.pidfd_open(pid)
    os.read(r, 16)
    t0 = time.monotonic()
    select.select([pfd], [], [])
    out.append((time.monotonic() - t0) * 1000)
    os.waitpid(pid, 0)
    os.close(pfd)
    os.close(r)
print(json.dumps(out))
"""


def measure(kind, forks):
    p = subprocess.run(["/usr/bin/python3", "-c", CHILD, kind, str(forks)],
                       capture_output=True, text=True, check=True)
    return json.loads(p.stdout)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--forks", type=int, default=40)
    ap.add_argument("--out-dir", default=os.path.join(ROOT, "bench", "results"))
    a = ap.parse_args()
    load = " ".join(open("/proc/loadavg").read().split()[:3])
    got = {"bare": [], "engine": []}
    for _ in range(a.rounds):
        for kind in ("bare", "engine"):
            got[kind] += measure(kind, a.forks)
    commit = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"],
                            capture_output=True, text=True).stdout.strip()
    dirty = subprocess.run(["git", "-C", ROOT, "status", "--porcelain", "--untracked-files=no"],
                           capture_output=True, text=True).stdout.strip() != ""
    bare, engine = statistics.median(got["bare"]), statistics.median(got["engine"])
    lines = [
        "exit teardown: a forked child's last write -> its exit visible on a pidfd (host, no guest)",
        "date %s UTC, host %s, tree %s%s, load at start %s" % (
            time.strftime("%Y-%m-%d %H:%M", time.gmtime()), socket.gethostname(), commit,
            " + uncommitted changes" if dirty else "", load),
        "%d rounds of %d forks each, interleaved" % (a.rounds, a.forks),
        "  parent imported nothing:        p50 %.2f ms" % bare,
        "  parent imported pandas, sympy:  p50 %.2f ms" % engine,
        "  engine / bare: %.1fx" % (engine / bare),
        "load at end %s" % " ".join(open("/proc/loadavg").read().split()[:3]),
    ]
    print("\n".join(lines))
    name = "%s-%s-%s%s-exit-teardown.txt" % (time.strftime("%Y-%m-%d", time.gmtime()),
                                             socket.gethostname(), commit,
                                             "-dirty" if dirty else "")
    path = os.path.join(a.out_dir, name)
    if os.path.exists(path):
        sys.exit("%s exists: results are never overwritten" % path)
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n\ncommand: python3 bench/flowpool/exit_teardown.py " +
                " ".join(sys.argv[1:]) + "\n")
    print("stored " + path)


if __name__ == "__main__":
    main()
