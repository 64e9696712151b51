#!/usr/bin/env python3
"""The kernel threads' CPU in pooled flow runs at 8, by what they ran:
`python3 bench/flowpool/kthreads.py [--binary B] [--no-store] RUNS` (root; TMPDIR=/var/tmp as
flowpool needs it). One window of flowpool's pooled runs through serve at 8 under
`perf record -a -g` (profile8.py's recorder); each sample of a kernel thread (kthreadd's
descendants, sched_price.py's class "kernel") is named by its thread (digits as N) and by
the work it was in: the function a workqueue ran (the frame under process_one_work), the
RCU callback (under rcu_do_batch), the softirq (under handle_softirqs) or the thread's own
loop (under kthread). Then ms of CPU a run, by work summed over threads and by thread and
work. Stored as bench/results/DATE-HOST-COMMIT[-dirty]-flowpool-kthreads.txt unless
--no-store."""

import os
import re
import shutil
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import flowpool as fp  # noqa: E402
import profile8  # noqa: E402
import sched_price  # noqa: E402

HEAD = re.compile(r"^(?:(.*?)\s+)?(\d+)/(\d+)\s+([\d.]+):\s+(\S+):\s*(.*)$")


def work_of(frames):
    """What a kernel thread's sample was doing (frames: innermost first)."""
    for i, s in enumerate(frames):
        if i and s == "rcu_do_batch":
            return "rcu callback " + frames[i - 1]
    for i, s in enumerate(frames):
        if i and s in ("process_one_work", "handle_softirqs", "kthread"):
            return {"process_one_work": "work ", "handle_softirqs": "softirq ",
                    "kthread": "thread "}[s] + frames[i - 1]
    return "other " + (frames[0] if frames else "?")


def kernel_samples(rec, t0, t1, roots):
    out = rec.script(comm=True)
    parent, proc = rec.ancestry()
    samples, cur = [], None
    for line in out.splitlines():
        f = profile8.FRAME.match(line)
        if f:
            if cur is not None:
                cur[2].append(re.sub(r"\+0x[0-9a-f]+$", "", f.group(1)))
            continue
        m = HEAD.match(line)
        cur = None
        if not m:
            continue
        comm, pid, tid, t, ev, rest = ((m.group(1) or "").strip(), int(m.group(2)),
                                       int(m.group(3)), float(m.group(4)), m.group(5),
                                       m.group(6))
        if pid != tid:
            proc[tid] = pid
        if ev.endswith("sched_process_fork"):
            fk = sched_price.FORK.search(rest)
            if fk:
                parent[int(fk.group(4))] = int(fk.group(2))
        elif t0 <= t <= t1:
            cur = (tid, re.sub(r"\d+", "N", comm), [])
            samples.append(cur)
    return [(comm, frames) for tid, comm, frames in samples
            if sched_price.class_of(tid, roots, parent, proc).rstrip("*") == "kernel"]


def main(argv):
    a = profile8.arguments(argv, "kthreads.py", tagged=False)
    store, binary, runs = a.store, a.binary, a.runs
    commit, dirty = fp.head_commit(), fp.tree_dirty()
    lines, say = fp.reporter()
    say("flowpool kthreads: the kernel threads' CPU in pooled flow runs at 8 under perf record "
        "-a -g (cpu-clock every %.2f ms), %d runs, by work" % (profile8.PERIOD_MS, runs))
    say(fp.run_header(commit, dirty) + "; binary " + binary)
    work = tempfile.mkdtemp(prefix="guestflow-kthreads-", dir=os.environ.get("TMPDIR"))
    try:
        prefix = os.path.join(work, "engine")
        fp.make_engine(prefix)
        graph = fp.flow()
        rec, t0, t1, roots, lat, wall = profile8.pooled_window(binary, work, prefix, graph,
                                                               runs)
        say("pooled at 8: %d runs in %.2f s = %.2f runs/s" % (len(lat), wall, len(lat) / wall))
        samples = kernel_samples(rec, t0, t1, roots)
        ms = profile8.PERIOD_MS / len(lat)
        say("kernel threads: %.2f ms a run" % (len(samples) * ms))
        by_work, by_both = {}, {}
        for comm, frames in samples:
            w = work_of(frames)
            by_work[w] = by_work.get(w, 0) + 1
            by_both[(comm, w)] = by_both.get((comm, w), 0) + 1
        say("by work, ms a run:")
        for w, n in sorted(by_work.items(), key=lambda x: -x[1]):
            if n * ms >= 0.01:
                say("  %-48s %.3f" % (w, n * ms))
        say("by thread and work, ms a run:")
        for (c, w), n in sorted(by_both.items(), key=lambda x: -x[1])[:30]:
            say("  %-20s %-48s %.3f" % (c, w, n * ms))
        say(fp.load_line())
        fp.store_tool_result(store, "flowpool-kthreads", commit, dirty, lines, "kthreads.py")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main(sys.argv[1:])
