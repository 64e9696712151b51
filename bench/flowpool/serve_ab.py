#!/usr/bin/env python3
"""serve's and the bench client's CPU a pooled run at 8, variants interleaved:
`python3 bench/flowpool/serve_ab.py [--cp-binary B] [--tag T] [--no-store] ROUNDS RUNS
NAME=BINARY[:close][:tcp] ...` (root; TMPDIR=/var/tmp as flowpool needs it). Per round, each
variant in turn (the order reversed every other round): a control plane (--cp-binary, default
the variant's binary) with a pool of 8 of the heavy engine's image, serve of BINARY, then
RUNS runs 8 at a time through flowpool's Serve client (`close`: a new connection per run, as
before 7b71afe; `tcp`: serve reaches the control plane over loopback TCP, not its Unix
socket). CPU a run from the kernel's per-thread run time (/proc/PID/task/*/schedstat, ns):
serve's threads by name (caf.multiplexer is CAF 0.17's name for its scheduler's workers, which
also run the control-plane client's loop; the binary's own name: the HTTP server's I/O thread
and main, "I/O thread" below), the control plane's own threads
(not its guests), and this process (the client: getrusage). Stored as
bench/results/DATE-HOST-COMMIT[-dirty]-flowpool-serve-ab[-T].txt unless --no-store."""

import json
import os
import resource
import shutil
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import flowpool as fp  # noqa: E402


def threads(pid):
    """{tid: (name, ns on CPU)} of PID's live threads."""
    out = {}
    for t in os.listdir("/proc/%d/task" % pid):
        try:
            name = open("/proc/%d/task/%s/comm" % (pid, t)).read().strip()
            ns = int(open("/proc/%d/task/%s/schedstat" % (pid, t)).read().split()[0])
        except OSError:
            continue  # gone in between
        out[t] = (name, ns)
    return out


def ms_a_run(before, after, n):
    """{thread name: ms a run} between two threads() samples."""
    out = {}
    for t, (name, ns) in after.items():
        out[name] = out.get(name, 0) + (ns - before.get(t, (name, 0))[1]) / 1e6 / n
    return out


def window(name, binary, cp_binary, opts, work, prefix, graph, runs, i):
    saved = dict(os.environ)
    if "tcp" in opts:
        os.environ["FLOWPOOL_CP_TCP"] = "1"
    try:
        state = os.path.join(work, "s%d" % i)
        cp = fp.start_with_image(cp_binary or binary, state, prefix,
                                 ["--warm-pool", "%s@heavy=8" % fp.SHAPE])
    finally:
        os.environ.clear()
        os.environ.update(saved)
    serve = fp.Serve(binary, state, cp.url)
    serve.keep_alive = "close" not in opts
    try:
        fp.warm_up(cp, serve, graph, 8)
        load = open("/proc/loadavg").read().split()[0]
        c0, s0, r0 = threads(cp.p.pid), threads(serve.p.pid), resource.getrusage(
            resource.RUSAGE_SELF)
        lat, wall = fp.load(serve, graph, 8, runs)
        c1, s1, r1 = threads(cp.p.pid), threads(serve.p.pid), resource.getrusage(
            resource.RUSAGE_SELF)
    finally:
        serve.stop()
        cp.stop()
    n = len(lat)
    by = ms_a_run(s0, s1, n)
    return {"variant": name, "load": load, "runs_per_s": n / wall, "p50_ms": fp.p50(lat),
            "serve_ms": sum(by.values()),
            "io_ms": sum(v for k, v in by.items() if not k.startswith("caf.")),
            "serve_threads_ms": {k: round(v, 3) for k, v in sorted(by.items()) if v >= 0.005},
            "cp_ms": sum(ms_a_run(c0, c1, n).values()),
            "client_ms": (r1.ru_utime - r0.ru_utime + r1.ru_stime - r0.ru_stime) * 1000 / n}


def main(argv):
    store = "--no-store" not in argv
    argv = [a for a in argv if a != "--no-store"]
    cp_binary, tag = None, ""
    if argv and argv[0] == "--cp-binary":
        cp_binary, argv = argv[1], argv[2:]
    if argv and argv[0] == "--tag":
        tag, argv = "-" + argv[1], argv[2:]
    rounds, runs = int(argv[0]), int(argv[1])
    variants = []
    for v in argv[2:]:
        name, rest = v.split("=", 1)
        binary, *opts = rest.split(":")
        variants.append((name, binary, opts))
    commit, dirty = fp.head_commit(), fp.tree_dirty()
    lines, say = fp.reporter()
    say("flowpool serve-ab: serve's, the control plane's own and the client's CPU a pooled run "
        "at 8 (kernel run time per thread), variants interleaved, %d rounds of %d runs" % (
            rounds, runs))
    say(fp.run_header(commit, dirty) + "; control plane " + (cp_binary or "each variant's"))
    say("variants: " + "; ".join("%s = %s %s" % (n, b, " ".join(o) or "keep-alive, unix")
                                 for n, b, o in variants))
    work = tempfile.mkdtemp(prefix="guestflow-serve-ab-", dir=os.environ.get("TMPDIR"))
    res = []
    try:
        prefix = os.path.join(work, "engine")
        fp.make_engine(prefix)
        graph = fp.flow()
        for x in fp.ab_rounds(variants, rounds, lambda v, i: window(
                v[0], v[1], cp_binary, v[2], work, prefix, graph, runs, i)):
            res.append(x)
            say("round %d %-10s load %5s  runs/s %6.2f  CPU ms/run: serve %.3f (I/O thread "
                "%.3f)  client %.3f  control plane (own threads) %.3f  serve by thread %s" % (
                    x["round"], x["variant"], x["load"], x["runs_per_s"], x["serve_ms"],
                    x["io_ms"], x["client_ms"], x["cp_ms"], json.dumps(x["serve_threads_ms"])))
        say("medians per variant:")
        for name, _, _ in variants:
            xs = [x for x in res if x["variant"] == name]
            say("  %-10s CPU ms/run: serve %.3f  serve I/O thread %.3f  client %.3f  control "
                "plane (own threads) %.3f  runs/s %.2f" % (
                    name, fp.p50([x["serve_ms"] for x in xs]), fp.p50([x["io_ms"] for x in xs]),
                                 fp.p50([x["client_ms"] for x in xs]),
                                 fp.p50([x["cp_ms"] for x in xs]),
                                 fp.p50([x["runs_per_s"] for x in xs])))
        say(fp.load_line())
        fp.store_tool_result(store, "flowpool-serve-ab" + tag, commit, dirty, lines, "serve_ab.py")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main(sys.argv[1:])
