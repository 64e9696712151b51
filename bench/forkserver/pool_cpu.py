#!/usr/bin/env python3
"""CPU per pooled lifecycle, ordinary pool against fork-server pool, measured as the whole
control plane's tree's cpuacct.usage (a cpuacct cgroup of its own: its helpers, guests,
templates, keepers and clones inherit it; guestflow uses no cpuacct hierarchy itself), so
that a clone's CPU counts although no bench reaps it. Interleaved A/B rounds.
usage (root): python3 bench/forkserver/pool_cpu.py GUESTFLOW_BIN ROUNDS N CONC
(stored run: 2 96 8, a private copy of build/apps/guestflow)."""
import json, os, subprocess, sys, tempfile, time, urllib.request

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from bench_common import closed_loop  # noqa: E402

BIN, ROUNDS, N, CONC = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
CG = "/sys/fs/cgroup/cpuacct/guestflow-bench-pool-cpu"


def call(url, method, path, body=None):
    req = urllib.request.Request(url + path, method=method,
                                 data=None if body is None else body.encode())
    with urllib.request.urlopen(req, timeout=60) as r:
        return json.loads(r.read() or b"{}")


def usage():
    return int(open(CG + "/cpuacct.usage").read()) / 1e6  # ms


def pool_full(url, target):
    deadline = time.time() + 120
    while time.time() < deadline:
        p = call(url, "GET", "/v1/pool")["data"]["pools"][0]
        if p["ready"] >= target and p["creating"] == 0:
            return p
        time.sleep(0.02)
    raise RuntimeError("pool did not fill")


def lifecycle(url):
    g = call(url, "POST", "/v1/sandboxes", '{"shape":"s-1vcpu-256mb","egress":["240.0.0.0/4"]}')["data"]["id"]
    base = "/v1/sandboxes/" + g
    req = urllib.request.Request(url + base + "/files?path=/workspace/prog.py", method="PUT",
                                 data=b"print('hello')\n")
    urllib.request.urlopen(req, timeout=60).read()
    r = call(url, "POST", base + "/exec", '{"cmd":"python3","args":["prog.py"]}')
    assert r["data"]["result"]["stdout"] == "hello\n", r
    call(url, "DELETE", base)


def one(fork):
    state = tempfile.mkdtemp(prefix="guestflow-pool-cpu-")
    env = dict(os.environ, GUESTFLOW_FORK_POOL="1" if fork else "0")
    env.pop("GUESTFLOW_PRELOAD", None)
    p = subprocess.Popen(["sh", "-c", 'echo $$ > %s/cgroup.procs && exec "$@"' % CG, "sh", BIN,
                          "control-plane", "--state-dir", state, "--warm-pool",
                          "s-1vcpu-256mb=%d" % CONC], env=env, stdout=subprocess.PIPE,
                         stderr=open(state + ".err", "w"), text=True)
    try:
        url = p.stdout.readline().split()[2]
        pool_full(url, CONC)
        for _ in range(CONC):  # warm-up: the template (fork) and one refill each
            lifecycle(url)
        pool_full(url, CONC)
        time.sleep(0.5)
        errors = []

        def one(_):
            """A failed lifecycle is counted, not raised: the round runs all N."""
            try:
                lifecycle(url)
            except Exception as e:  # noqa: BLE001
                errors.append(repr(e))
        u0 = usage()
        _, wall = closed_loop(one, N, CONC)
        pool = pool_full(url, CONC)  # the refills belong to the lifecycles
        u1 = usage()
        return (u1 - u0) / N, N / wall, pool["takes"], pool["misses"], errors
    finally:
        p.terminate()
        p.wait()
        subprocess.run(["rm", "-rf", state])


os.makedirs(CG, exist_ok=True)
print("load at start:", open("/proc/loadavg").read().strip())
rows = {False: [], True: []}
for r in range(ROUNDS):
    for fork in (False, True):
        cpu, rate, takes, misses, errors = one(fork)
        rows[fork].append(cpu)
        print("round %d %-8s cpu_ms_per_lifecycle=%.2f runs_per_s=%.1f takes=%d misses=%d errors=%d %s"
              % (r, "fork" if fork else "ordinary", cpu, rate, takes, misses, len(errors),
                 errors[:1]), flush=True)
med = lambda v: sorted(v)[len(v) // 2]
print("median cpu ms/lifecycle: ordinary %.2f fork %.2f; fork/ordinary %.2fx"
      % (med(rows[False]), med(rows[True]), med(rows[True]) / med(rows[False])))
print("load at end:", open("/proc/loadavg").read().strip())
os.rmdir(CG)
