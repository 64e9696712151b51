#!/usr/bin/env python3
"""Pooled flow runs at 8 against the floor at 8, profiled with kernel and user symbols:
`python3 bench/flowpool/profile8.py [--binary B] [--tag T] [--no-store] RUNS` (root; TMPDIR=/var/tmp
as flowpool needs it). Each window (flowpool's pooled runs through serve at 8, then the
floor's at 8) under `perf record -a -g` of the CPU clock every 0.25 ms with the scheduler's
forks; each sample charged to a process class by its task's ancestry (sched_price.py's
classes: since c0d8eb7 template+1 the guest's run and its static init, template+2 what the
run forks; before it template+1 the clone's python init, template+2 the run; floor+3 the
floor's run) and, per class, its ms of CPU a run, the kernel's share, the symbols it was in
(self) and the functions under which it was (inclusive: page faults, fork, exit, seccomp,
...). Stored as
bench/results/DATE-HOST-COMMIT[-dirty]-flowpool-profile[-T].txt unless --no-store."""

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
                "tlb_finish_mmu", "clear_page_erms", "copy_page"]


class Record:
    def __init__(self, path):
        self.path = path
        self.tree = sched_price.proc_tree()
        self.p = subprocess.Popen(
            ["perf", "record", "-q", "-k", "CLOCK_MONOTONIC", "-a", "-g", "-o", path,
             "-e", "cpu-clock/period=%d/" % int(PERIOD_MS * 1e6),
             "-e", "sched:sched_process_fork"],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        time.sleep(0.5)
        if self.p.poll() is not None:
            raise RuntimeError("perf record: " + self.p.stderr.read().decode()[-400:])

    def stop(self):
        self.p.send_signal(signal.SIGINT)
        self.p.wait(120)


def profile(rec, t0, t1, roots, runs):
    """Per class: samples, kernel samples, self {sym: n}, under {sym: n}."""
    out = subprocess.run(["perf", "script", "-i", rec.path,
                          "-F", "trace:pid,tid,time,event,trace",
                          "-F", "sw:pid,tid,time,event,ip,sym,dso"],
                         capture_output=True, text=True).stdout
    parent = dict(rec.tree[0])
    proc = {t: p for t, p in rec.tree[0].items() if t in rec.tree[2]}
    samples = []  # (tid, [(sym, dso), ...])
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
            elif t0 <= t <= t1:
                cur = (tid, [])
                samples.append(cur)
            continue
        f = FRAME.match(line)
        if f and cur is not None:
            sym = re.sub(r"\+0x[0-9a-f]+$", "", f.group(1))
            cur[1].append((sym, os.path.basename(f.group(2))))
    res = {}
    for tid, frames in samples:
        k = sched_price.class_of(tid, roots, parent, proc).rstrip("*")
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
    return res


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


def main(argv):
    store = "--no-store" not in argv
    argv = [a for a in argv if a != "--no-store"]
    binary = os.path.join(fp.ROOT, "build", "apps", "guestflow")
    if argv and argv[0] == "--binary":
        binary, argv = argv[1], argv[2:]
    tag = ""
    if argv and argv[0] == "--tag":
        tag, argv = "-" + argv[1], argv[2:]
    runs = int(argv[0])
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
        state = os.path.join(work, "state")
        cp = fp.start_with_image(binary, state, prefix,
                                 ["--warm-pool", "%s@heavy=8" % fp.SHAPE])
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
                say("pooled at 8: %d runs in %.2f s = %.2f runs/s, p50 %.1f ms" % (
                    len(lat), wall, len(lat) / wall, fp.p50(lat)))
                report("pooled", profile(rec, t0, t1, roots, len(lat)), len(lat), say,
                       ["template+2", "template+1", "template", "control plane", "kernel"])
            finally:
                serve.stop()
        finally:
            cp.stop()
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
        say("load at end %s" % " ".join(open("/proc/loadavg").read().split()[:3]))
        if store:
            fp.store_result(os.path.join(fp.ROOT, "bench", "results"), "flowpool-profile" + tag,
                            commit, dirty, lines,
                            "python3 bench/flowpool/profile8.py " + " ".join(sys.argv[1:]))
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main(sys.argv[1:])
