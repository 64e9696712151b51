#!/usr/bin/env python3
"""Pooled flow runs at 8 against the floor at 8, profiled with kernel and user symbols:
`python3 bench/flowpool/profile8.py [--binary B] [--tag T] [--no-store] [--rounds R] RUNS` (root;
TMPDIR=/var/tmp as flowpool needs it). With --rounds: R rounds of a pooled and a floor chunk
of RUNS at 8, alternating, both servers up throughout, then the sums and where the run
(template+1; its phases: the guest's init, the run process's setup before its request, and
its run from the request on, split at its setsid) and the floor's run (floor+3) differ, symbol
by symbol. Each window (flowpool's pooled runs through serve at 8, then the
floor's at 8) under `perf record -a -g` of the CPU clock every 0.25 ms with the scheduler's
forks; each sample charged to a process class by its task's ancestry (sched_price.py's
classes: since c0d8eb7 template+1 the guest's run and its static init, template+2 what the
run forks; before it template+1 the clone's python init, template+2 the run; floor+3 the
floor's run) and, per class, its ms of CPU a run, the kernel's share, the symbols it was in
(self) and the functions under which it was (inclusive: page faults, fork, exit, seccomp,
...). Stored as
bench/results/DATE-HOST-COMMIT[-dirty]-flowpool-profile[-T].txt unless --no-store."""

import argparse
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import flowpool as fp  # noqa: E402
import sched_price  # noqa: E402

PERIOD_MS = 0.25
HEAD = re.compile(r"^\s*(\d+)/(\d+)\s+([\d.]+):\s+(\S+):\s*(.*)$")
FRAME = re.compile(r"^\s+[0-9a-f]+\s+(.*?)\s+\((.*)\)$")
# Where kernel time goes, as functions a sample sits under (inclusive).
KERNEL_UNDER = ["asm_exc_page_fault", "do_wp_page", "wp_page_copy", "do_anonymous_page",
                "filemap_map_pages", "__mem_cgroup_charge", "mem_cgroup_charge_statistics",
                "copy_page_range", "dup_mm", "exit_mmap", "unmap_vmas", "free_pgtables",
                "release_pages", "do_exit", "__seccomp_filter", "syscall_trace_enter",
                "do_syscall_64", "__x64_sys_clone", "__x64_sys_exit_group", "__x64_sys_execve",
                "ext4_file_write_iter", "path_openat", "__x64_sys_mount", "schedule",
                "tlb_finish_mmu", "clear_page_erms", "copy_page",
                # softirqs run in whatever task they interrupt: which ones
                "handle_softirqs", "rcu_core", "net_rx_action", "net_tx_action",
                "blk_complete_reqs", "run_timer_softirq", "tasklet_action", "sched_balance_softirq",
                "rcu_do_batch"]


class Record:
    def __init__(self, path):
        self.path = path
        self.tree = sched_price.proc_tree()
        self.p = subprocess.Popen(
            ["perf", "record", "-q", "-k", "CLOCK_MONOTONIC", "-a", "-g", "-o", path,
             "-e", "cpu-clock/period=%d/" % int(PERIOD_MS * 1e6),
             "-e", "sched:sched_process_fork", "-e", "sched:sched_process_exec",
             "-e", "syscalls:sys_enter_setsid"],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        time.sleep(0.5)
        if self.p.poll() is not None:
            raise RuntimeError("perf record: " + self.p.stderr.read().decode()[-400:])

    def stop(self):
        self.p.send_signal(signal.SIGINT)
        self.p.wait(120)

    def script(self, comm=False):
        """`perf script` of the record: its trace events, and its samples (with their task's
        name when `comm`) each with its frames under it."""
        sw = "sw:" + ("comm," if comm else "") + "pid,tid,time,event,ip,sym,dso"
        return subprocess.run(["perf", "script", "-i", self.path,
                               "-F", "trace:pid,tid,time,event,trace", "-F", sw],
                              capture_output=True, text=True).stdout

    def ancestry(self):
        """(each task's parent, each thread's process) when the record began: the script's
        fork events add to them."""
        return dict(self.tree[0]), {t: p for t, p in self.tree[0].items() if t in self.tree[2]}


def phase(pid, t, execs, setsid, forked):
    """A pooled guest's process's phase at time T: "init" (the guest's static init: it
    execs), "setup" (the run process before its request: fork_template.py's guest(), its
    wait in the pool), "run" (from the request on: serve()'s setsid). A process with no
    setsid in the window ran it before (if forked before the window) or was never taken."""
    if pid in execs:
        return "init"
    if pid in setsid:
        return "setup" if t < setsid[pid] else "run"
    return "setup" if pid in forked else "run"


def profile(rec, t0, t1, roots, runs, split=("template+1",)):
    """Per class: samples, kernel samples, self {sym: n}, under {sym: n}; the classes in
    SPLIT also per phase() as "CLASS:PHASE"."""
    out = rec.script()
    parent, proc = rec.ancestry()
    samples = []  # (tid, time, [(sym, dso), ...])
    execs, setsid, forked = set(), {}, set()
    cur = None
    for line in out.splitlines():
        if not line.strip():
            cur = None
            continue
        m = HEAD.match(line)
        if m and not line.startswith("\t"):
            pid, tid, t, ev, rest = int(m.group(1)), int(m.group(2)), float(m.group(3)), \
                m.group(4), m.group(5)
            if pid != tid:
                proc[tid] = pid
            cur = None
            if ev.endswith("sched_process_fork"):
                f = sched_price.FORK.search(rest)
                if f:
                    parent[int(f.group(4))] = int(f.group(2))
                    forked.add(int(f.group(4)))
            elif ev.endswith("sched_process_exec"):
                execs.add(pid)
            elif ev.endswith("sys_enter_setsid"):
                setsid.setdefault(pid, t)
            elif t0 <= t <= t1:
                cur = (tid, t, [])
                samples.append(cur)
            continue
        f = FRAME.match(line)
        if f and cur is not None:
            sym = re.sub(r"\+0x[0-9a-f]+$", "", f.group(1))
            cur[2].append((sym, os.path.basename(f.group(2))))
    res = {}
    for tid, t, frames in samples:
        k = sched_price.class_of(tid, roots, parent, proc).rstrip("*")
        keys = [k]
        if k in split:
            keys.append(k + ":" + phase(proc.get(tid, tid), t, execs, setsid, forked))
        for k in keys:
            add_sample(res, k, frames)
    return res


def add_sample(res, k, frames):
    c = res.setdefault(k, {"n": 0, "kernel": 0, "self": {}, "under": {}, "dso": {}})
    c["n"] += 1
    top = frames[0] if frames else ("?", "?")
    if top[1] == "[kernel.kallsyms]":
        c["kernel"] += 1
    key = "%s %s" % (top[0], top[1])
    c["self"][key] = c["self"].get(key, 0) + 1
    c["dso"][top[1]] = c["dso"].get(top[1], 0) + 1
    for sym in {s for s, _ in frames}:
        c["under"][sym] = c["under"].get(sym, 0) + 1


def report(name, res, runs, say, classes):
    say("%s: ms of CPU a run by class (samples x %.2f ms / %d runs)" % (name, PERIOD_MS, runs))
    for k, c in sorted(res.items(), key=lambda kv: -kv[1]["n"]):
        if k in ("idle",) or c["n"] * PERIOD_MS / runs < 0.3:
            continue
        say("  %-16s %6.2f ms a run, kernel %4.1f%%" % (
            k, c["n"] * PERIOD_MS / runs, 100.0 * c["kernel"] / c["n"]))
    for k in classes:
        c = res.get(k)
        if not c:
            continue
        ms = PERIOD_MS / runs
        say("  %s (%.2f ms a run): by object %s" % (k, c["n"] * ms, ", ".join(
            "%s %.2f" % (d, n * ms) for d, n in sorted(c["dso"].items(), key=lambda x: -x[1])
            if n * ms >= 0.1)))
        say("    self, ms a run: " + ", ".join(
            "%s %.2f" % (s, n * ms) for s, n in sorted(c["self"].items(), key=lambda x: -x[1])
            [:28]))
        say("    kernel, under, ms a run: " + ", ".join(
            "%s %.2f" % (s, c["under"][s] * ms) for s in KERNEL_UNDER if c["under"].get(s)))
        calls = sorted(((n, s) for s, n in c["under"].items()
                        if s.startswith(("__x64_sys_", "__do_sys_"))), reverse=True)
        say("    system calls, under, ms a run: " + ", ".join(
            "%s %.2f" % (s, n * ms) for n, s in calls[:14] if n * ms >= 0.05))


def merge(acc, res):
    """Adds profile()'s per-class counts RES into ACC."""
    for k, c in res.items():
        a = acc.setdefault(k, {"n": 0, "kernel": 0, "self": {}, "under": {}, "dso": {}})
        a["n"] += c["n"]
        a["kernel"] += c["kernel"]
        for d in ("self", "under", "dso"):
            for s, n in c[d].items():
                a[d][s] = a[d].get(s, 0) + n


def differences(say, pooled, np_, floor, nf, a="template+1", b="floor+3", top=24):
    """The symbols where class A of the pooled runs and class B of the floor's differ most,
    ms a run (A minus B): self, and the kernel's functions a sample sits under."""
    pa, fb = pooled.get(a), floor.get(b)
    if not pa or not fb:
        return
    ma, mb = PERIOD_MS / np_, PERIOD_MS / nf
    say("%s (pooled) - %s (floor): %.2f ms a run (%.2f against %.2f)" % (
        a, b, pa["n"] * ma - fb["n"] * mb, pa["n"] * ma, fb["n"] * mb))
    for d, what in (("dso", "by object"), ("self", "self"), ("under", "under")):
        keys = set(pa[d]) | set(fb[d])
        diff = sorted(((pa[d].get(k, 0) * ma - fb[d].get(k, 0) * mb, k) for k in keys),
                      key=lambda x: -abs(x[0]))
        say("  %s, ms a run: %s" % (what, ", ".join(
            "%s %+.2f" % (k, v) for v, k in diff[:top] if abs(v) >= 0.05)))


def total(ms):
    """A chunk's ms of CPU a run summed over its classes, but others' work and idle (the
    phases are parts of their class)."""
    return sum(v for k, v in ms.items() if k not in ("other", "idle") and ":" not in k)


def interleaved(binary, work, prefix, site, spec_path, graph, runs, rounds, say):
    """Pooled and floor chunks of RUNS at 8, alternating (the order flipped every round, the
    pool full before each chunk), each under its own perf record: the host's drift lands on
    both sides. Both servers live through all chunks (idle in the other's)."""
    state = os.path.join(work, "state")
    cp = fp.start_with_image(binary, state, prefix, ["--warm-pool", "%s@heavy=8" % fp.SHAPE])
    serve = fl = None
    try:
        serve = fp.Serve(binary, state, cp.url)
        fl = fp.Floor(prefix, site, spec_path)
        fp.warm_up(cp, serve, graph, 8)
        fl.measure(8, 16)
        acc, n, per = {"pooled": {}, "floor": {}}, {"pooled": 0, "floor": 0}, []

        def full():
            return fp.ready_guests(cp.get("/metrics")) >= 8

        for r in range(rounds):
            got = {}
            for m in fp.in_turn(("pooled", "floor"), r):
                fp.wait_until(full, 300, "the pool")
                load = open("/proc/loadavg").read().split()[0]
                rec = Record(os.path.join(work, "%s-%d.perf" % (m, r)))
                t0 = time.monotonic()
                try:
                    lat, wall = fp.load(serve, graph, 8, runs) if m == "pooled" else \
                        fl.measure(8, runs)
                finally:
                    t1 = time.monotonic()
                    rec.stop()
                roots = {os.getpid(): "bench", serve.p.pid: "serve",
                         cp.p.pid: "control plane*", fl.p.pid: "floor*"}
                roots.update(sched_price.own_fork_roots(rec.tree, state))
                res = profile(rec, t0, t1, roots, len(lat))
                os.unlink(rec.path)
                merge(acc[m], res)
                n[m] += len(lat)
                got[m] = ({k: c["n"] * PERIOD_MS / len(lat) for k, c in res.items()},
                          len(lat) / wall, load)
            per.append(got)
            p, f = got["pooled"], got["floor"]
            tp, tf = total(p[0]), total(f[0])
            say("round %d: pooled %.2f runs/s (load %s), template+1 %.2f (init %.2f, setup "
                "%.2f, run %.2f), template %.2f, control plane %.2f, kernel %.2f, serve %.2f ms "
                "a run; floor %.2f runs/s (load %s), floor+3 %.2f, floor+2 %.2f ms a run; "
                "template+1:run / floor+3 %.3f" % (
                    r + 1, p[1], p[2], p[0].get("template+1", 0),
                    p[0].get("template+1:init", 0), p[0].get("template+1:setup", 0),
                    p[0].get("template+1:run", 0), p[0].get("template", 0),
                    p[0].get("control plane", 0), p[0].get("kernel", 0), p[0].get("serve", 0),
                    f[1], f[2], f[0].get("floor+3", 0), f[0].get("floor+2", 0),
                    p[0].get("template+1:run", 0) / max(1e-9, f[0].get("floor+3", 0))))
            say("round %d: CPU a run, every class but other and idle: pooled %.2f ms, floor "
                "%.2f ms, floor / pooled %.3f" % (r + 1, tp, tf, tf / max(1e-9, tp)))
        say("all rounds: %d pooled runs, %d floor runs" % (n["pooled"], n["floor"]))
        report("pooled", acc["pooled"], n["pooled"], say,
               ["template+1:run", "template+1:setup", "template+1:init", "template",
                "control plane", "kernel"])
        report("floor", acc["floor"], n["floor"], say, ["floor+3", "floor+2"])
        differences(say, acc["pooled"], n["pooled"], acc["floor"], n["floor"])
        differences(say, acc["pooled"], n["pooled"], acc["floor"], n["floor"],
                    a="template+1:run")
        return per
    finally:
        if fl:
            fl.stop()
        if serve:
            serve.stop()
        cp.stop()


def pooled_window(binary, work, prefix, graph, runs):
    """`runs` pooled runs at 8 through serve on a new control plane with the engine's pool of
    8, under Record once the pool is full: (rec, t0, t1, roots, latencies, wall)."""
    state = os.path.join(work, "state")
    cp = fp.start_with_image(binary, state, prefix, ["--warm-pool", "%s@heavy=8" % fp.SHAPE])
    try:
        serve = fp.Serve(binary, state, cp.url)
        try:
            fp.warm_up(cp, serve, graph, 8)
            rec = Record(os.path.join(work, "pooled.perf"))
            t0 = time.monotonic()
            try:
                lat, wall = fp.load(serve, graph, 8, runs)
            finally:
                t1 = time.monotonic()
                rec.stop()
            roots = {os.getpid(): "bench", serve.p.pid: "serve", cp.p.pid: "control plane*"}
            roots.update(sched_price.own_fork_roots(rec.tree, state))
        finally:
            serve.stop()
    finally:
        cp.stop()
    return rec, t0, t1, roots, lat, wall


def arguments(argv, prog, tagged=True, rounds=False):
    """The flowpool profilers' flags, in any order: RUNS [--binary B] [--no-store] (and
    --tag T, --rounds R where asked)."""
    ap = argparse.ArgumentParser(prog=prog)
    ap.add_argument("runs", type=int)
    ap.add_argument("--binary", default=os.path.join(fp.ROOT, "build", "apps", "guestflow"))
    ap.add_argument("--no-store", dest="store", action="store_false")
    if tagged:
        ap.add_argument("--tag", default="")
    if rounds:
        ap.add_argument("--rounds", type=int, default=0)
    return ap.parse_args(argv)


def main(argv):
    a = arguments(argv, "profile8.py", rounds=True)
    store, binary, runs, rounds = a.store, a.binary, a.runs, a.rounds
    tag = "-" + a.tag if a.tag else ""
    commit, dirty = fp.head_commit(), fp.tree_dirty()
    lines, say = fp.reporter()
    say("flowpool profile8: pooled flow runs at 8 and the floor at 8 under perf record -a -g "
        "(cpu-clock every %.2f ms), %d runs each" % (PERIOD_MS, runs))
    say(fp.run_header(commit, dirty) + "; binary " + binary)
    work = tempfile.mkdtemp(prefix="guestflow-profile8-", dir=os.environ.get("TMPDIR"))
    try:
        prefix = os.path.join(work, "engine")
        site = fp.make_engine(prefix)
        graph = fp.flow()
        spec_path = os.path.join(work, "spec.json")
        with open(spec_path, "w") as f:
            json.dump({"graph": graph, "inputs": [{"input_value": "run floor", "type": "chat"}],
                       "executor": "lfx"}, f)
        if rounds:
            say("interleaved: %d rounds of a pooled and a floor chunk of %d runs at 8 each" % (
                rounds, runs))
            interleaved(binary, work, prefix, site, spec_path, graph, runs, rounds, say)
            say(fp.load_line())
            fp.store_tool_result(store, "flowpool-profile" + tag, commit, dirty, lines,
                                 "profile8.py")
            return
        rec, t0, t1, roots, lat, wall = pooled_window(binary, work, prefix, graph, runs)
        say("pooled at 8: %d runs in %.2f s = %.2f runs/s, p50 %.1f ms" % (
            len(lat), wall, len(lat) / wall, fp.p50(lat)))
        report("pooled", profile(rec, t0, t1, roots, len(lat)), len(lat), say,
               ["template+2", "template+1", "template", "control plane", "kernel"])
        fl = fp.Floor(prefix, site, spec_path)
        try:
            fl.measure(8, 16)
            rec = Record(os.path.join(work, "floor.perf"))
            t0 = time.monotonic()
            try:
                lat, wall = fl.measure(8, runs)
            finally:
                t1 = time.monotonic()
                rec.stop()
            say("floor at 8: %d runs in %.2f s = %.2f runs/s, p50 %.1f ms" % (
                len(lat), wall, len(lat) / wall, fp.p50(lat)))
            report("floor", profile(rec, t0, t1, {fl.p.pid: "floor*"}, len(lat)), len(lat),
                   say, ["floor+3", "floor+2"])
        finally:
            fl.stop()
        say(fp.load_line())
        fp.store_tool_result(store, "flowpool-profile" + tag, commit, dirty, lines, "profile8.py")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main(sys.argv[1:])
