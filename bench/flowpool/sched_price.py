"""Where the CPU goes during a window, from the scheduler's own record: `perf record` of
sched_switch, sched_process_fork and sched_process_exec on every CPU (monotonic clock, so the
window is the bench's), then each task's on-CPU time summed from its switches and charged to
a class by its ancestry (fork events, and /proc for the tasks alive when perf started).
Processes that start and end inside the window are counted too (a run, a clone, a helper),
which /proc and rusage miss when their parent ignores SIGCHLD. Also the off-CPU side: the
time tasks of a class spent runnable but waiting for a CPU, and asleep (by sleep state)."""

import os
import re
import signal
import subprocess
import time

SWITCH = re.compile(r"prev_comm=(.*?) prev_pid=(\d+) prev_prio=\d+ prev_state=(\S+) ==> "
                    r"next_comm=(.*?) next_pid=(\d+)")
FORK = re.compile(r"comm=(.*?) pid=(\d+) child_comm=(.*?) child_pid=(\d+)")
EXEC = re.compile(r"filename=(\S+) pid=(\d+)")
LINE = re.compile(r"^\s*(\d+)/(\d+)\s+\[(\d+)\]\s+([\d.]+):\s+(\S+):\s+(.*)$")


def proc_tree():
    """tid -> parent task (a thread's process, a process's parent), tid -> cmdline, the tids
    that are threads (not a process's first), and pid -> comm, for every task alive now."""
    parent, cmd, threads, comms = {}, {}, set(), {}
    for p in os.listdir("/proc"):
        if not p.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % p) as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
            with open("/proc/%s/cmdline" % p, "rb") as f:
                c = f.read().replace(b"\0", b" ").decode(errors="replace")
            with open("/proc/%s/comm" % p) as f:
                comms[int(p)] = f.read().strip()
            tids = os.listdir("/proc/%s/task" % p)
        except OSError:
            continue
        parent[int(p)] = ppid
        cmd[int(p)] = c
        for t in tids:
            if int(t) != int(p):
                parent[int(t)] = int(p)
                cmd[int(t)] = c
                threads.add(int(t))
    return parent, cmd, threads, comms


class Recorder:
    """perf record over every CPU until stop()."""

    def __init__(self, path):
        self.path = path
        self.tree = proc_tree()
        self.p = subprocess.Popen(
            ["perf", "record", "-q", "-k", "CLOCK_MONOTONIC", "-a", "-o", path,
             "-e", "sched:sched_switch", "-e", "sched:sched_process_fork",
             "-e", "sched:sched_process_exec"],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        time.sleep(0.5)  # perf's own start (its events open) before the window
        if self.p.poll() is not None:
            raise RuntimeError("perf record: " + self.p.stderr.read().decode()[-400:])

    def stop(self):
        self.p.send_signal(signal.SIGINT)
        self.p.wait(60)


def fork_roots(tree):
    """The fork templates' processes as roots: "template*" (its clones +1, their runs +2,
    what a run forks +3) and its keeper, the sandbox's reaper, if it has one."""
    roots, mark = {}, "python3 -c # guestflow fork template"
    parent, cmd, _threads, comms = tree
    for pid, c in cmd.items():
        if not c.startswith(mark) or pid in _threads:
            continue
        up = cmd.get(parent.get(pid), "")
        if comms.get(pid) == "fork-keeper":
            roots[pid] = "fork keeper"
        elif not up.startswith("python3") or comms.get(parent.get(pid)) == "fork-keeper":
            roots[pid] = "template*"
    return roots


def own_fork_roots(tree, state_dir):
    """fork_roots() of the templates of the control plane whose state is under `state_dir`
    (their command lines name their spool there): another bench's templates on the same
    host then count as "other", not as this one's."""
    mark = os.path.join(state_dir, "")
    return {pid: name for pid, name in fork_roots(tree).items() if mark in tree[1][pid]}


def class_of(tid, roots, parent, proc):
    """TID's class (account()'s rules): `parent` task -> parent, `proc` thread -> process."""
    if tid == 0:
        return "idle"
    depth, x, seen = 0, tid, set()
    while x and x not in seen:
        seen.add(x)
        if x in roots:
            name = roots[x]
            return name if depth == 0 or not name.endswith("*") else "%s+%d" % (
                name.rstrip("*"), min(depth, 4))
        if x == 2:
            return "kernel"
        if x in proc:  # a thread: its process, at the same depth
            x = proc[x]
            continue
        x = parent.get(x)
        depth += 1
    return "other"


def account(path, tree, t0, t1, roots):
    """On-CPU ms per class and off-CPU ms (runnable waiting, asleep) per class in [t0, t1].
    `roots`: pid -> class name for tasks whose descendants (threads, children) share it
    unless a nearer root names them; tasks under none: "kernel" (kthreadd's) or "other". A
    name ending in "*" splits its descendants by depth: "CLASS+1" its children, ... "CLASS+4"
    and deeper (a thread counts as its process)."""
    out = subprocess.run(["perf", "script", "-i", path, "-F", "pid,tid,cpu,time,event,trace"],
                         capture_output=True, text=True).stdout
    parent, cmd = dict(tree[0]), tree[1]
    on, runnable, asleep, comm = {}, {}, {}, {}
    proc = {t: p for t, p in tree[0].items() if t in tree[2]}  # thread -> its process
    last = {}  # cpu -> time of its last switch
    off = {}  # tid -> (since, "R" | state)
    for line in out.splitlines():
        m = LINE.match(line)
        if not m:
            continue
        tgid, tid, cpu, t, ev, rest = m.groups()
        t = float(t)
        if tgid != tid:
            proc[int(tid)] = int(tgid)
        if ev.endswith("sched_process_fork"):
            f = FORK.search(rest)
            if f:
                parent[int(f.group(4))] = int(f.group(2))
            continue
        if not ev.endswith("sched_switch"):
            continue
        s = SWITCH.search(rest)
        if not s:
            continue
        prev, state, nxt = int(s.group(2)), s.group(3), int(s.group(5))
        comm[prev] = s.group(1)
        a = last.get(cpu)
        last[cpu] = t
        lo, hi = max(a or t, t0), min(t, t1)
        if a is not None and hi > lo:
            on[prev] = on.get(prev, 0) + (hi - lo)
        if prev:
            off[prev] = (t, "R" if state.startswith("R") else state[0])
        if nxt in off:
            since, st = off.pop(nxt)
            lo, hi = max(since, t0), min(t, t1)
            if hi > lo:
                d = runnable if st == "R" else asleep
                d.setdefault(nxt, {}).setdefault(st, 0)
                d[nxt][st] += hi - lo

    def klass(tid):
        return class_of(tid, roots, parent, proc)

    by, wait, sleep, comms = {}, {}, {}, {}
    for tid, v in on.items():
        k = klass(tid).rstrip("*")
        by[k] = by.get(k, 0) + v * 1000
        c = comms.setdefault(k, {})
        c[comm.get(tid, "?")] = c.get(comm.get(tid, "?"), 0) + v * 1000
    for tid, d in runnable.items():
        k = klass(tid).rstrip("*")
        wait[k] = wait.get(k, 0) + sum(d.values()) * 1000
    for tid, d in asleep.items():
        k = klass(tid).rstrip("*")
        for st, v in d.items():
            sleep.setdefault(k, {}).setdefault(st, 0)
            sleep[k][st] += v * 1000
    if os.environ.get("SCHED_PRICE_DEBUG"):
        with open(os.environ["SCHED_PRICE_DEBUG"] + os.path.basename(path) + ".txt", "w") as f:
            for tid, v in sorted(on.items(), key=lambda x: -x[1]):
                chain, x = [], tid
                while x and len(chain) < 8:
                    chain.append(x)
                    x = parent.get(x)
                f.write("%d %s %.1f %s %s\n" % (tid, klass(tid), v * 1000, comm.get(tid),
                                              chain))
    return by, wait, sleep, comms
