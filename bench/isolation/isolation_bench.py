#!/usr/bin/env python3
"""What each isolation kind costs: namespaces (bwrap) against gVisor (runsc), in ONE run.

    bench/run isolation [--bin BUILD/apps/guestflow] [--runs N] [--out FILE] [--quick]
                        [--networked]
    (or bench/isolation/isolation_bench.py with the same flags)

Starts one `guestflow control-plane` on 127.0.0.1:0 with its own state dir (real guests)
and, for each kind (create body `"isolation": KIND`), measures over loopback HTTP:
  first output   create request sent -> first stdout line of a streamed
                 `python3 -c "print(1)"` (the guest deleted afterwards, untimed)
  lifecycle x8   8 client threads, each create -> exec python3 -> delete back to back:
                 runs/s over the window
  exec           `/bin/true` (buffered) in a running guest: request -> answer
  stop, start    a persistent guest running a Python counter: POST .../stop and .../start
                 (gVisor: checkpoint and restore, the counter goes on; namespaces: processes
                 killed, a cold boot from the kept disk)
and, for gVisor, the heavy engine: create -> first output of `python3 -c "import pandas;
print(1)"` cold (debian:12) against an image whose snapshot imported pandas before its
checkpoint (`image add ... --snapshot --preload pandas`), when the build has snapshots.
With --networked (run it in a network namespace of your own: `unshare -n`, lo up), also
stop/start of a gVisor guest with egress: gVisor's netstack on its veth, checkpointed.
Goal: snapshot first output <= 0.3x cold, printed with met/MISSED.
Each timed series follows one untimed warm-up run (the workspace template, the page cache).
Figures are ratios within this run; the host's load average is printed beside them.
"""

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from bench_common import closed_loop, pct  # noqa: E402

KINDS = ("namespaces", "gvisor")
SHAPE = "s-1vcpu-256mb"
HEAVY_SHAPE = "s-1vcpu-512mb"  # pandas imported: ~100 MiB in the guest
COUNTER = ("import time\ni = 0\nwhile True:\n"
           "    open('/workspace/n', 'w').write(str(i)); i += 1; time.sleep(0.05)\n")


class cp:
    def __init__(self, binary, state):
        env = {k: v for k, v in os.environ.items()
               if not k.startswith(("GUESTFLOW_", "CREATEOS_", "LANGFLOW_"))}
        self.log = open(os.path.join(state, "control-plane.log"), "w")
        self.p = subprocess.Popen([binary, "control-plane", "--listen", "127.0.0.1:0",
                                   "--state-dir", os.path.join(state, "cp")],
                                  env=env, stdout=subprocess.PIPE, stderr=self.log, text=True)
        line = self.p.stdout.readline()
        if not line.startswith("listening on "):
            self.p.kill()
            sys.exit("control plane did not start: " + line)
        self.base = line.split()[-1].rstrip("/")

    def call(self, method, path, body=None, timeout=300):
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(self.base + path, data=data, method=method,
                                     headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=timeout) as r:
                return json.loads(r.read())["data"]
        except urllib.error.HTTPError as e:
            raise RuntimeError("%s %s: %s %s" % (method, path, e.code, e.read()[:400]))

    def first_line(self, gid, cmd, args):
        """Streamed exec: seconds until the first stdout chunk, and the exit code."""
        req = urllib.request.Request(self.base + "/v1/sandboxes/%s/exec?stream=true" % gid,
                                     data=json.dumps({"cmd": cmd, "args": args}).encode(),
                                     method="POST", headers={"Content-Type": "application/json"})
        first, code = None, None
        with urllib.request.urlopen(req, timeout=300) as r:
            for line in r:
                ev = json.loads(line)
                if "stdout" in ev and first is None:
                    first = time.perf_counter()
                if "exit_code" in ev:
                    code = ev["exit_code"]
        return first, code

    def close(self):
        self.p.terminate()
        self.p.wait(timeout=120)
        self.log.close()


def create(c, kind, **extra):
    # Deny-all, as the runtime asks by default (--networked adds a gVisor row with egress).
    body = {"shape": SHAPE, "isolation": kind, "egress": ["240.0.0.0/4"]}
    body.update(extra)
    return c.call("POST", "/v1/sandboxes", body)["id"]


def first_output(c, kind, code, runs, **extra):
    out = []
    for _ in range(runs):
        t = time.perf_counter()
        gid = create(c, kind, **extra)
        first, rc = c.first_line(gid, "python3", ["-c", code])
        if first is None or rc != 0:
            raise RuntimeError("%s: no output (exit %s)" % (kind, rc))
        out.append((first - t) * 1000)
        c.call("DELETE", "/v1/sandboxes/" + gid)
    return out


def lifecycles(c, kind, total, conc):
    def one(_):
        gid = create(c, kind)
        r = c.call("POST", "/v1/sandboxes/%s/exec" % gid,
                   {"cmd": "python3", "args": ["-c", "print(1)"]})
        assert r["result"]["stdout"] == "1\n", r
        c.call("DELETE", "/v1/sandboxes/" + gid)

    _, wall = closed_loop(one, total, conc)
    return total / wall


def exec_latency(c, kind, runs):
    gid = create(c, kind)
    out = []
    for _ in range(runs):
        t = time.perf_counter()
        r = c.call("POST", "/v1/sandboxes/%s/exec" % gid, {"cmd": "/bin/true", "args": []})
        out.append((time.perf_counter() - t) * 1000)
        assert r["result"]["exit_code"] == 0, r
    c.call("DELETE", "/v1/sandboxes/" + gid)
    return out


def stop_start(c, kind, runs, **extra):
    gid = create(c, kind, persistent=True, idle_ttl_seconds=0, **extra)
    c.call("POST", "/v1/sandboxes/%s/exec" % gid,
           {"cmd": "/bin/sh", "args": ["-c", 'python3 -c "$0" </dev/null >/dev/null 2>&1 &',
                                       COUNTER]})
    stops, starts, modes = [], [], set()
    for _ in range(runs):
        t = time.perf_counter()
        c.call("POST", "/v1/sandboxes/%s/stop" % gid)
        stops.append((time.perf_counter() - t) * 1000)
        t = time.perf_counter()
        v = c.call("POST", "/v1/sandboxes/%s/start" % gid)
        starts.append((time.perf_counter() - t) * 1000)
        modes.add(v.get("started_from", "boot"))
    c.call("DELETE", "/v1/sandboxes/" + gid)
    return stops, starts, modes


def snapshot_image(c, state):
    """An image whose snapshot imported pandas (a python-env image of the host's python3),
    or None when this build cannot make one."""
    prefix = os.path.join(state, "py")
    os.makedirs(os.path.join(prefix, "bin"))
    for name in ("python", "python3"):
        os.symlink("/usr/bin/python3", os.path.join(prefix, "bin", name))
    os.chmod(state, 0o755)
    for d in (prefix, os.path.join(prefix, "bin")):
        os.chmod(d, 0o755)
    try:
        c.call("POST", "/v1/images", {"name": "pandas-snap", "python_env": prefix,
                                      "preload": ["pandas"], "snapshot": True}, timeout=600)
    except RuntimeError as e:
        return None, str(e)
    info = [i for i in c.call("GET", "/v1/images")["data"] if i["name"] == "pandas-snap"]
    if not info or not info[0].get("snapshot"):
        c.call("DELETE", "/v1/images/pandas-snap")
        return None, "the image was added without a snapshot (this build makes none)"
    return "pandas-snap", ""


def main():
    ap = argparse.ArgumentParser()
    here = os.path.dirname(os.path.abspath(__file__))
    ap.add_argument("--bin", default=os.path.join(here, "..", "..", "build", "apps", "guestflow"))
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--quick", action="store_true", help="2 runs of each, no timing goal")
    ap.add_argument("--out")
    ap.add_argument("--note", default="")
    ap.add_argument("--networked", action="store_true",
                    help="also stop/start a gVisor guest with egress (its netns, veth and "
                         "rules: run in a network namespace of your own, e.g. `unshare -n`)")
    a = ap.parse_args()
    runs = 2 if a.quick else a.runs
    state = tempfile.mkdtemp(prefix="gf-isolation-bench-")
    load_before = os.getloadavg()
    c = cp(a.bin, state)
    rows, lines = {}, []
    heavy = {}
    try:
        kinds = [k for k in KINDS if k in c.call("GET", "/v1/capabilities").get("isolations", [])]
        for kind in kinds:
            r = rows[kind] = {}
            first_output(c, kind, "print(1)", 1)  # warm-up: the workspace template, caches
            r["first"] = first_output(c, kind, "print(1)", runs)
            r["tput8"] = lifecycles(c, kind, max(8, 4 * runs), 8)
            r["exec"] = exec_latency(c, kind, 2 * runs)
            r["stop"], r["start"], r["modes"] = stop_start(c, kind, max(2, runs // 2))
        if a.networked and "gvisor" in kinds:
            # gVisor's netstack on the guest's veth, its rules on the host side too; nothing
            # connected (an open TCP connection is not checkpointed by this runsc).
            net = rows["gvisor, networked"] = {}
            net["stop"], net["start"], net["modes"] = stop_start(
                c, "gvisor", max(2, runs // 2), egress=["198.51.100.9"])
        if "gvisor" in kinds:
            code = "import pandas; print(1)"
            first_output(c, "gvisor", code, 1, shape=HEAVY_SHAPE)  # warm-up (page cache)
            heavy["cold"] = first_output(c, "gvisor", code, max(2, runs // 2), shape=HEAVY_SHAPE)
            image, why = snapshot_image(c, state)
            if image:
                heavy["snapshot"] = first_output(c, "gvisor", code, max(2, runs // 2),
                                                 rootfs=image, shape=HEAVY_SHAPE)
                c.call("DELETE", "/v1/images/" + image)
            else:
                heavy["why"] = why
    finally:
        c.close()
        shutil.rmtree(state, ignore_errors=True)
    load_after = os.getloadavg()

    lines.append("# bench/isolation/isolation_bench.py --runs %d%s  (%s, %d cpus, %s)" % (
        runs, " --quick" if a.quick else "", platform.node(), os.cpu_count(),
        time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())))
    if a.note:
        lines.append(a.note)
    lines.append("one control plane, shape %s, deny-all egress; p50 (p95) ms unless said" % SHAPE)
    lines.append("%-11s %18s %12s %14s %16s %16s  %s" % (
        "kind", "create->1st out", "lifecyc x8/s", "exec true", "stop", "start", "started_from"))
    for kind, r in rows.items():
        if "first" not in r:
            continue
        lines.append("%-11s %9.1f (%6.1f) %12.1f %6.1f (%5.1f) %7.1f (%6.1f) %7.1f (%6.1f)  %s" % (
            kind, pct(r["first"], .5), pct(r["first"], .95), r["tput8"], pct(r["exec"], .5),
            pct(r["exec"], .95), pct(r["stop"], .5), pct(r["stop"], .95), pct(r["start"], .5),
            pct(r["start"], .95), ",".join(sorted(r["modes"]))))
    if "namespaces" in rows and "gvisor" in rows:
        n, g = rows["namespaces"], rows["gvisor"]
        lines.append("gvisor / namespaces: first output %.2fx, lifecycles/s %.2fx, exec %.2fx, "
                     "stop %.2fx, start %.2fx" % (
                         pct(g["first"], .5) / pct(n["first"], .5), g["tput8"] / n["tput8"],
                         pct(g["exec"], .5) / pct(n["exec"], .5),
                         pct(g["stop"], .5) / pct(n["stop"], .5),
                         pct(g["start"], .5) / pct(n["start"], .5)))
    if "gvisor, networked" in rows:
        w, g = rows["gvisor, networked"], rows["gvisor"]
        lines.append("gvisor, networked (egress [198.51.100.9]: netstack on its veth): stop %.1f "
                     "(%.1f), start %.1f (%.1f), started_from %s; / deny-all gvisor: stop "
                     "%.2fx, start %.2fx" % (
                         pct(w["stop"], .5), pct(w["stop"], .95), pct(w["start"], .5),
                         pct(w["start"], .95), ",".join(sorted(w["modes"])),
                         pct(w["stop"], .5) / pct(g["stop"], .5),
                         pct(w["start"], .5) / pct(g["start"], .5)))
    if "cold" in heavy:
        cold = pct(heavy["cold"], .5)
        lines.append("gvisor, %s, python3 -c 'import pandas; print(1)': cold boot create->1st "
                     "out p50 %.1f ms" % (HEAVY_SHAPE, cold))
        if "snapshot" in heavy:
            snap = pct(heavy["snapshot"], .5)
            ratio = snap / cold
            verdict = "" if a.quick else ("; target <= 0.3x: %s" % ("met" if ratio <= 0.3
                                                                      else "MISSED"))
            lines.append("  snapshot restore (pandas imported before the checkpoint): p50 %.1f "
                         "ms = %.2fx cold%s" % (snap, ratio, verdict))
        else:
            lines.append("  snapshot: not measured (%s); target <= 0.3x cold: MISSED" %
                         heavy.get("why", "?"))
    lines.append("load average (1/5/15 min) before %.2f %.2f %.2f, after %.2f %.2f %.2f" %
                 (load_before + load_after))
    print("\n".join(lines))
    if a.out:
        with open(a.out, "w") as f:
            f.write("\n".join(lines) + "\n")


if __name__ == "__main__":  # importing it (bench_common's users, a test) runs nothing
    main()
