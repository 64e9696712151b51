#!/usr/bin/env python3
"""What a guest's lifecycle costs the host's disk, and CPU, binaries interleaved:
`python3 bench/local/lifecycle_io.py [--note TEXT] ROUNDS N CONC NAME=BINARY ...` (root; the
host's disk is DISK, default vda). Per round, each variant in turn (the order reversed every
other round): a plain control plane of BINARY (no warm pool; the workspace pool as default) on
a new state dir under /var/tmp, one lifecycle to warm it, then N lifecycles by CONC workers:
create, exec (python3 writes 100 kB into /workspace), delete; then until the background
unmounts and refills are done (only the workspace pool's images attached). Per lifecycle: the disk's writes, flushes and discards
(/sys/block/DISK/stat: every process's, so others' I/O counts too), the CPU of the control
plane and everything it starts (a cpuacct group of the bench's own, minus the bench's own
CPU), the control plane's own (utime+stime, in clock ticks), and kthreadd's threads' (kworkers,
loop workers: host-wide, schedstat). Stored as bench/results/DATE-HOST-COMMIT[-dirty]-
lifecycle-io.txt unless --no-store. Ratios within one run."""
import http.client
import json
import os
import shutil
import socket
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                                "flowpool"))
import flowpool as fp  # noqa: E402
from bench_common import closed_loop  # noqa: E402

DISK = os.environ.get("DISK", "vda")
POOL_DEPTH = 2  # GUESTFLOW_WORKSPACE_POOL for the control planes it starts


def disk():
    f = open("/sys/block/%s/stat" % DISK).read().split()
    return {"writes": int(f[4]), "wsect": int(f[6]), "discards": int(f[11]),
            "dsect": int(f[13]), "flushes": int(f[15])}


def proc_cpu(pid):
    """ms of utime+stime of PID's threads, and of its reaped children."""
    f = open("/proc/%d/stat" % pid).read().rsplit(")", 1)[1].split()
    tck = os.sysconf("SC_CLK_TCK")
    return (int(f[11]) + int(f[12])) * 1000.0 / tck, (int(f[13]) + int(f[14])) * 1000.0 / tck


def kworkers():
    """ms on CPU of kthreadd's threads alive now (kworkers, loop workers...), from schedstat."""
    t = 0
    for p in os.listdir("/proc"):
        if not p.isdigit():
            continue
        try:
            st = open("/proc/%s/stat" % p).read().rsplit(")", 1)[1].split()
            if st[1] != "2":  # ppid: kthreadd
                continue
            t += int(open("/proc/%s/schedstat" % p).read().split()[0])
        except OSError:
            continue
    return t / 1e6


ACCT = "/sys/fs/cgroup/cpuacct/guestflow-lifecycle-io-%d" % os.getpid()


def tree_ms():
    return int(open(ACCT + "/cpuacct.usage").read()) / 1e6


def self_ms():
    import resource  # noqa: PLC0415
    r = resource.getrusage(resource.RUSAGE_SELF)
    return (r.ru_utime + r.ru_stime) * 1000


def call(port, method, path, body=None):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    c.request(method, path, body=json.dumps(body) if body is not None else None,
              headers={"Content-Type": "application/json"})
    r = c.getresponse()
    data = r.read()
    c.close()
    if r.status >= 300:
        raise RuntimeError("%s %s: %d %s" % (method, path, r.status, data[:300]))
    return json.loads(data) if data else None


def lifecycle(port):
    gid = call(port, "POST", "/v1/sandboxes", {"shape": fp.SHAPE})["data"]["id"]
    try:  # deleted whatever happens: a guest outlives its control plane's stop
        r = call(port, "POST", "/v1/sandboxes/%s/exec" % gid,
                 {"cmd": "python3", "args": ["-c", "open('/workspace/f','w').write('x'*100000)"]})
        if r["data"]["result"].get("exit_code") != 0:
            raise RuntimeError("exec: %r" % r)
    finally:
        call(port, "DELETE", "/v1/sandboxes/" + gid)


def attached(work):
    """Loop devices backed by a file under `work`: the workspace pool's ready images and the
    guests' (a deleted guest's is detached by the releaser, after the delete's answer)."""
    n = 0
    for dev in os.listdir("/sys/block"):
        try:
            n += open("/sys/block/%s/loop/backing_file" % dev).read().startswith(work)
        except OSError:
            continue
    return n


def settle(work, deadline_s=30):
    """Polls until only the workspace pool's POOL_DEPTH ready images are attached: the refill
    and the releaser's unmounts are done, and counted in the window."""
    end = time.monotonic() + deadline_s
    while attached(work) != POOL_DEPTH:
        if time.monotonic() > end:
            raise RuntimeError("%d workspace images attached after %d s, want %d" % (
                attached(work), deadline_s, POOL_DEPTH))
        time.sleep(0.02)


def window(binary, n, conc):
    work = tempfile.mkdtemp(prefix="guestflow-lifecycle-io-", dir="/var/tmp")
    os.environ["GUESTFLOW_WORKSPACE_POOL"] = str(POOL_DEPTH)
    cp = fp.ControlPlane(binary, work, [])
    try:
        lifecycle(cp.port)  # the template, the workspace pool
        settle(work)
        v0, c0, k0, a0, s0 = disk(), proc_cpu(cp.p.pid), kworkers(), tree_ms(), self_ms()
        closed_loop(lambda _: lifecycle(cp.port), n, conc)
        settle(work)
        v1, c1, k1, a1, s1 = disk(), proc_cpu(cp.p.pid), kworkers(), tree_ms(), self_ms()
    finally:
        cp.stop()
        shutil.rmtree(work, ignore_errors=True)
    d = {k: (v1[k] - v0[k]) / n for k in v0}
    d.update({"cp_ms": (c1[0] - c0[0]) / n, "kworker_ms": (k1 - k0) / n,
              "tree_ms": ((a1 - a0) - (s1 - s0)) / n})
    return d


def row(d):
    return ("%s writes %5.1f (%6.1f KiB)  flushes %5.2f  discards %5.2f (%6.1f KiB)  CPU ms: "
            "tree %5.2f  cp %5.2f  kworkers %5.2f" % (
                DISK, d["writes"], d["wsect"] / 2, d["flushes"], d["discards"], d["dsect"] / 2,
                d["tree_ms"], d["cp_ms"], d["kworker_ms"]))


def run(argv):
    store = "--no-store" not in argv
    argv = [a for a in argv if a != "--no-store"]
    note = ""
    if argv and argv[0] == "--note":
        note, argv = argv[1], argv[2:]
    rounds, n, conc = int(argv[0]), int(argv[1]), int(argv[2])
    variants = [a.split("=", 1) for a in argv[3:]]
    commit, dirty = fp.head_commit(), fp.tree_dirty()
    lines = []

    def say(s):
        print(s, flush=True)
        lines.append(s)

    say("lifecycle-io: a guest's lifecycle (create, exec writing 100 kB, delete) on a plain "
        "control plane: the host disk's I/O and CPU per lifecycle, variants interleaved, "
        "%d rounds of %d lifecycles by %d workers" % (rounds, n, conc))
    say("date %s UTC, host %s, tree %s%s, load at start %s" % (
        time.strftime("%Y-%m-%d %H:%M", time.gmtime()), socket.gethostname(), commit,
        " (dirty)" if dirty else "", " ".join(open("/proc/loadavg").read().split()[:3])))
    say("variants: " + "; ".join("%s = %s" % (name, b) for name, b in variants))
    say("note: " + (note or "-"))
    say("tree = the control plane and all it starts (cpuacct); cp = its own threads (clock "
        "ticks); kworkers = kthreadd's threads, host-wide; disk I/O: every process's")
    res = {}
    for r in range(rounds):
        for name, binary in (variants if r % 2 == 0 else variants[::-1]):
            load = open("/proc/loadavg").read().split()[0]
            d = window(binary, n, conc)
            res.setdefault(name, []).append(d)
            say("round %d %-8s load %5s  per lifecycle: %s" % (r + 1, name, load, row(d)))
    say("medians per lifecycle:")
    for name, _ in variants:
        xs = res[name]
        say("  %-8s %s" % (name, row({k: fp.p50([x[k] for x in xs]) for k in xs[0]})))
    say("load at end %s" % " ".join(open("/proc/loadavg").read().split()[:3]))
    if store:
        fp.store_result(os.path.join(fp.ROOT, "bench", "results"), "lifecycle-io", commit, dirty,
                        lines, "python3 bench/local/lifecycle_io.py " + " ".join(sys.argv[1:]))


def main(argv):
    os.makedirs(ACCT, exist_ok=True)
    with open(ACCT + "/cgroup.procs", "w") as f:
        f.write(str(os.getpid()))
    try:
        run(argv)
    finally:
        with open("/sys/fs/cgroup/cpuacct/cgroup.procs", "w") as f:
            f.write(str(os.getpid()))
        for _ in range(50):
            try:
                os.rmdir(ACCT)
                break
            except OSError:
                time.sleep(0.1)


if __name__ == "__main__":
    main(sys.argv[1:])
