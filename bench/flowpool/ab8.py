#!/usr/bin/env python3
"""Interleaved A/B of pooled flow runs at 8 through serve (flowpool's pooled mode at 8):
`python3 bench/flowpool/ab8.py [--at1] [--tag T] [--note TEXT] ROUNDS RUNS NAME=BINARY[:K=V,...]`
(root; TMPDIR=/var/tmp as flowpool needs it; fork-server pools unless GUESTFLOW_FORK_POOL=0). Per
round, each variant in turn (the order reversed every other round): a control plane of BINARY
with K=V in its environment, a pool of 8 of the heavy engine's image, serve; then RUNS runs 8
at a time (--at1: one at a time, each once the pool is full) under perf's scheduler record
(sched_price.py). Reports per variant and round:
runs/s, misses, the pool's build time, and CPU per run by class: the fork templates' trees
(template, clones, runs), the control plane, serve, the kernel's threads. Stored as
bench/results/DATE-HOST-COMMIT[-dirty]-flowpool-ab8[-T].txt unless --no-store. A/B figures
are ratios within one run; the load is in each line."""

import json
import os
import shutil
import socket
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import flowpool as fp  # noqa: E402
import sched_price  # noqa: E402


def window(name, binary, env, work, prefix, graph, runs, i, k=8):
    saved = dict(os.environ)
    os.environ.update(env)
    try:
        state = os.path.join(work, "s%d" % i)
        cp = fp.start_with_image(binary, state, prefix, ["--warm-pool", "%s@heavy=8" % fp.SHAPE])
    finally:
        os.environ.clear()
        os.environ.update(saved)
    serve = fp.Serve(binary, state, cp.url)
    try:
        fp.warm_up(cp, serve, graph, 8)
        before, fills0 = fp.pool_counts(cp.get("/metrics")), fp.pool_fills(cp)
        load = open("/proc/loadavg").read().split()[0]
        rec = sched_price.Recorder(os.path.join(work, "p%d.perf" % i))
        t0 = time.monotonic()
        try:
            # At 1 each run after the pool is full again (a warm take's latency, as flowpool's
            # pooled runs at 1); at 8 back to back.
            lat, wall = fp.load(serve, graph, k, runs, None if k > 1 else lambda: fp.wait_until(
                lambda: fp.ready_guests(cp.get("/metrics")) >= 8, 300, "the pool"))
        finally:
            t1 = time.monotonic()
            rec.stop()
        after, fills1 = fp.pool_counts(cp.get("/metrics")), fp.pool_fills(cp)
    finally:
        serve.stop()
        cp.stop()
    roots = {os.getpid(): "bench", serve.p.pid: "serve", cp.p.pid: "control plane"}
    roots.update(sched_price.own_fork_roots(rec.tree, state))
    on = sched_price.account(rec.path, rec.tree, t0, t1, roots)[0]
    os.unlink(rec.path)
    n = len(lat)
    cls = {k: v / n for k, v in on.items() if k not in ("other", "idle", "bench")}
    built = fills1[0] - fills0[0]
    return {"variant": name, "load": load, "runs_per_s": n / wall, "p50_ms": fp.p50(lat),
            "misses": after[1] - before[1], "takes": after[0] - before[0],
            "build_ms": (fills1[1] - fills0[1]) / max(1, built),
            "guest_trees_ms": sum(v for k, v in cls.items()
                                  if k.startswith(("template", "fork keeper"))),
            "control_plane_ms": sum(v for k, v in cls.items() if k.startswith("control plane")),
            "serve_ms": cls.get("serve", 0), "kernel_ms": cls.get("kernel", 0),
            "classes_ms": {k: round(v, 2) for k, v in sorted(cls.items())}}


def main(argv):
    store = "--no-store" not in argv
    argv = [a for a in argv if a != "--no-store"]
    note = tag = ""
    k = 8
    if argv and argv[0] == "--at1":  # runs one at a time, paced by the pool's refill
        k, argv = 1, argv[1:]
    if argv and argv[0] == "--tag":  # results of one tree told apart: ...-flowpool-ab8-TAG
        tag, argv = "-" + argv[1], argv[2:]
    if argv and argv[0] == "--note":
        note, argv = argv[1], argv[2:]
    rounds, runs = int(argv[0]), int(argv[1])
    variants = []
    for v in argv[2:]:
        name, rest = v.split("=", 1)
        binary, _, envs = rest.partition(":")
        variants.append((name, binary, dict(kv.split("=", 1) for kv in envs.split(",") if kv)))
    commit = fp.head_commit()
    # Variants are binaries: "dirty" when the tree holds uncommitted changes (they may have
    # been built from it), as the store's names say.
    dirty = fp.tree_dirty()
    work = tempfile.mkdtemp(prefix="guestflow-ab8-")
    lines = ["flowpool ab8: pooled flow runs at %d through serve, variants interleaved, %d rounds "
             "of %d runs" % (k, rounds, runs),
             "date %s UTC, host %s, tree %s, load at start %s; %s" % (
                 time.strftime("%Y-%m-%d %H:%M", time.gmtime()), socket.gethostname(), commit,
                 " ".join(open("/proc/loadavg").read().split()[:3]),
                 "ordinary pools" if os.environ.get("GUESTFLOW_FORK_POOL") == "0"
                 else "fork-server pools"),
             "variants: " + "; ".join("%s = %s %s" % (n, b, " ".join(
                 "%s=%s" % kv for kv in e.items())) for n, b, e in variants),
             "note: " + (note or "-"),
             "CPU per run (ms) from perf's scheduler record: guest trees = the fork templates' "
             "processes and everything they clone and fork (template, clones, runs); control "
             "plane = its process and children; kernel = kthreadd's threads"]
    for s in lines:
        print(s, flush=True)
    res = []
    try:
        prefix = os.path.join(work, "engine")
        fp.make_engine(prefix)
        graph = fp.flow()
        for x in fp.ab_rounds(variants, rounds, lambda v, i: window(
                v[0], v[1], v[2], work, prefix, graph, runs, i, k)):
            res.append(x)
            s = ("round %d %-10s load %5s  runs/s %6.2f  p50 %7.1f ms  misses %d  build "
                 "%5.0f ms  CPU ms/run: guest trees %5.1f  control plane %5.1f  serve %4.1f  "
                 "kernel %4.1f" % (x["round"], x["variant"], x["load"], x["runs_per_s"],
                                   x["p50_ms"], x["misses"], x["build_ms"], x["guest_trees_ms"],
                                   x["control_plane_ms"], x["serve_ms"], x["kernel_ms"]))
            print(s, flush=True)
            lines.append(s)
        lines.append("medians per variant:")
        for name, _, _ in variants:
            xs = [x for x in res if x["variant"] == name]

            def med(k):
                return fp.p50([x[k] for x in xs])

            s = ("  %-10s runs/s %6.2f  p50 %7.1f ms  misses %s  CPU ms/run: guest trees %5.1f  "
                 "control plane %5.1f  serve %4.1f  kernel %4.1f" % (
                     name, med("runs_per_s"), med("p50_ms"), [int(x["misses"]) for x in xs],
                     med("guest_trees_ms"), med("control_plane_ms"), med("serve_ms"),
                     med("kernel_ms")))
            print(s, flush=True)
            lines.append(s)
        lines.append(fp.load_line())
        lines.append("raw:")
        lines += [json.dumps(x, sort_keys=True) for x in res]
        fp.store_tool_result(store, "flowpool-ab8" + tag, commit, dirty, lines, "ab8.py")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main(sys.argv[1:])
