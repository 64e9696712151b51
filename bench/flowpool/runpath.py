#!/usr/bin/env python3
"""The pooled flow run's own Python path against the floor's, priced in one process tree:
`python3 bench/flowpool/runpath.py [--runs N] [--binary B [--upload R]] [--profile] [--tag T]
[--no-store]` (root: a loop device; TMPDIR=/var/tmp).

In a throwaway bwrap root (guest-side code never runs on the host as root), a python3 of
flowpool's heavy engine imports what a fork template imports (python_waiter.py's _preload
of guestflow:runner, gc.freeze) and then, per run and interleaved, forks:
  pooled   the run as a pooled guest's: the waiter's _main on a request as serve sends it
           (`python3 -c <unpack_run.py> /workspace/.run-bundle /tmp/run`) and _run; the bundle serve's
           own (--binary: one run of B's serve captured through a relay) or made here as
           actors/flow_spec.cpp makes it; /workspace ext4 on a loop device as the control
           plane makes a guest's;
  floor    flowpool's floor: the runner's files written to /tmp beside the floor's spec, then
           runpy of runner.py (the writes are the floor's parent's, outside the run's CPU);
and variants of the pooled path that price a lever without a build (`*-raw`: the bundle's
files not gzipped; `*-tmpfs`: /workspace on tmpfs; `alt-*`: --unpack-alt's unpack_run.py,
--waiter-alt's _main and _run). Each run's CPU is its process's rusage
(user + system, the exit's teardown included), with stamps of its steps (the waiter's _main,
unpack_run, the runner) and the modules it imported beyond the preload; medians per mode.
--upload R: the control plane's CPU a PUT of the bundle, gzipped against plain (the other
side of the gzip). --profile: one cProfile pass per mode. RUNPATH_TRACE=M1,M2 prints where a
run imports those modules. Stored as
bench/results/DATE-HOST-COMMIT[-dirty]-flowpool-runpath[-T].txt.
"""

import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import zlib

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import flowpool as fp  # noqa: E402

SKIP = ("session_files.py", "unpack_run.py")  # not in a flow run's bundle (flow_spec.cpp)


def gzip9(data):
    """As cmake/embed_guest_assets.cmake: raw gzip, level 9, MTIME 0."""
    c = zlib.compressobj(9, zlib.DEFLATED, 31)
    return c.compress(data) + c.flush()


def add(bundle, name, data):
    bundle += b"%d %s\n" % (len(data), name.encode()) + data
    return bundle


def bundle_for(guest, spec, gz):
    """flow_bundle_head + this run's spec.json, as actors/flow_spec.cpp builds it."""
    b = b""
    for name in sorted(os.listdir(guest)):
        if not name.endswith(".py") or name in SKIP:
            continue
        data = open(os.path.join(guest, name), "rb").read()
        b = add(b, name + ".gz", gzip9(data)) if gz else add(b, name, data)
    return add(b, "spec.json", spec)


def serve_spec(graph, text):
    """messages/flow_run_codec.cpp's encode(guest_run_spec) for flowpool's POST /v1/runs
    (one chat input, GUESTFLOW_RUNNER_EXECUTOR=lfx): compact JSON, every non-optional key."""
    return json.dumps({"graph": graph, "inputs": [{"input_value": text, "type": "chat",
                                                   "components": []}],
                       "outputs": [], "runtime_options": {}, "install_lfx": False, "pip": [],
                       "executor": "lfx"}, separators=(",", ":"), ensure_ascii=False).encode()


class Capture(fp.Relay):
    """flowpool's relay keeping every byte serve sends its control plane."""

    def __init__(self, port):
        self.sent = {}
        super().__init__(port)

    def record(self, cid, way, b):
        if way == "<":
            return super().record(cid, way, b)
        with self.lock:
            self.sent.setdefault(cid, bytearray()).extend(b)


def requests(stream):
    """(head, body) of each HTTP/1.1 request in what one connection sent (Content-Length)."""
    out, at = [], 0
    while at < len(stream):
        end = stream.find(b"\r\n\r\n", at)
        if end < 0:
            break
        head = bytes(stream[at:end])
        n = 0
        for line in head.split(b"\r\n")[1:]:
            k, _, v = line.partition(b":")
            if k.strip().lower() == b"content-length":
                n = int(v)
        out.append((head, bytes(stream[end + 4:end + 4 + n])))
        at = end + 4 + n
    return out


def capture(binary, work, prefix, graph):
    """serve's own upload and exec for one pooled run of the flow: (bundle bytes, exec JSON)."""
    state = os.path.join(work, "state-capture")
    cp = fp.start_with_image(binary, state, prefix, ["--warm-pool", "%s@heavy=1" % fp.SHAPE])
    relay = Capture(cp.port)
    serve = fp.Serve(binary, state, relay.url)
    try:
        fp.warm_up(cp, serve, graph, 1)
        serve.run(graph, "run pooled")
    finally:
        serve.stop()
        cp.stop()
    bundle = command = None
    for cid in sorted(relay.sent):
        for head, body in requests(relay.sent[cid]):
            if b"spec.json\n" in body and b'"run pooled"' in body:
                bundle = body
            elif body.startswith(b"{") and b"/workspace/.run-bundle" in body:
                command = json.loads(body)
    if bundle is None or command is None:
        raise RuntimeError("no bundle or exec seen between serve and its control plane")
    return bundle, command


def cpu_ns(pid):
    """A process's CPU so far, every thread's (schedstat: ns, not clock ticks)."""
    total = 0
    for t in os.listdir("/proc/%d/task" % pid):
        try:
            with open("/proc/%d/task/%s/schedstat" % (pid, t)) as f:
                total += int(f.read().split()[0])
        except OSError:
            pass  # a thread that ended meanwhile
    return total


def price_upload(binary, work, bundles, rounds, per):
    """The control plane's side of the bundle's bytes: PUT /workspace/.run-bundle of each
    variant on one guest, `per` puts a batch, batches interleaved for `rounds` rounds; the
    control plane's CPU (schedstat) a put, medians over batches."""
    import http.client
    state = os.path.join(work, "state-upload")
    os.makedirs(state)
    cp = fp.ControlPlane(binary, state, [])

    def call(method, path, body=None):
        c = http.client.HTTPConnection("127.0.0.1", cp.port, timeout=60)
        c.request(method, path, body=body)
        r = c.getresponse()
        data = r.read()
        c.close()
        if r.status >= 300:
            raise RuntimeError("%s %s: %d %s" % (method, path, r.status, data[:300]))
        return data

    try:
        gid = json.loads(call("POST", "/v1/sandboxes", json.dumps({"shape": fp.SHAPE})))[
            "data"]["id"]
        path = "/v1/sandboxes/%s/files?path=/workspace/.run-bundle" % gid
        out = {name: [] for name in bundles}
        for r in range(rounds):
            for name in fp.in_turn(list(bundles), r):
                c = http.client.HTTPConnection("127.0.0.1", cp.port, timeout=60)
                t0 = cpu_ns(cp.p.pid)
                for _ in range(per):
                    c.request("PUT", path, body=bundles[name])
                    resp = c.getresponse()
                    resp.read()
                    if resp.status >= 300:
                        raise RuntimeError("put: %d" % resp.status)
                out[name].append((cpu_ns(cp.p.pid) - t0) / per / 1e6)
                c.close()
        call("DELETE", "/v1/sandboxes/" + gid)
        return out
    finally:
        cp.stop()


def program():
    """Runs in the bwrap root. argv: GUEST WAITER SPOOL; stdin lines "MODE SEQ PROFILE"; per
    line one run, answered by a JSON line: the run's CPU (rusage), wall and first-output ms."""
    return r'''
import gc, json, os, sys, time
sys.dont_write_bytecode = True
GUEST, WAITER, SPOOL = sys.argv[1], sys.argv[2], sys.argv[3]
sys.argv = ["-c", "/tmp/.fork-template", "guestflow:runner"]
waiter = {"__name__": "guestflow_waiter", "__builtins__": __builtins__, "_FORKED": True}
exec(compile(open(WAITER, "rb").read(), "<python_waiter>", "exec"), waiter)
waiter["_preload"](["guestflow:runner"])
waiter_alt = waiter
if os.path.exists("/spool/waiter-alt.py"):  # another python_waiter.py, for the alt- modes
    waiter_alt = {"__name__": "guestflow_waiter", "__builtins__": __builtins__, "_FORKED": True}
    exec(compile(open("/spool/waiter-alt.py", "rb").read(), "<python_waiter>", "exec"),
         waiter_alt)
import resource  # noqa: F401 - os.wait4's rusage imports it: not counted as the run's
gc.freeze()
preloaded = set(sys.modules)
unpack_src = open(os.path.join(GUEST, "unpack_run.py"), "rb").read()
unpack_alt = (open("/spool/unpack-alt.py", "rb").read() if os.path.exists("/spool/unpack-alt.py")
              else unpack_src)
files = {n: open(os.path.join(GUEST, n), "rb").read() for n in os.listdir(GUEST)
         if n.endswith(".py") and n not in ("session_files.py", "unpack_run.py")}
blob = {n: open(os.path.join(SPOOL, n), "rb").read() for n in os.listdir(SPOOL)}
ENV = [b"PATH=/usr/local/bin:/usr/bin:/bin", b"HOME=/workspace", b"PYTHONUNBUFFERED=1",
       b"HOSTNAME=g"]

def request(ws, alt, into):
    argv = [b"-c", unpack_alt if alt else unpack_src, ws.encode() + b"/run/bundle", into.encode()]
    f = [b"guestflow-waiter-1", b"60", ws.encode(), b"%d" % len(argv)] + argv
    f += [b"%d" % len(ENV)] + ENV + [b""]
    return b"\0".join(f)

STAMPS = []

def stamp(what):
    STAMPS.append((what, time.process_time_ns()))

def hook(profile, out):
    # The run ends in os._exit (runner._entry): stats and modules written just before it.
    # Stamps (the process's CPU): the waiter's _main, then runpy.run_path's call (unpack_run
    # done: its compile, the bundle read, gunzip, the writes), zlib.decompress summed.
    import runpy, zlib
    run_path, decompress = runpy.run_path, zlib.decompress
    def timed_run_path(*a, **k):
        stamp("unpacked")
        return run_path(*a, **k)
    def timed_decompress(*a):
        t = time.process_time_ns()
        try:
            return decompress(*a)
        finally:
            STAMPS.append(("gunzip", time.process_time_ns() - t))
    runpy.run_path, zlib.decompress = timed_run_path, timed_decompress
    real = os._exit
    prof = None
    if profile:
        import cProfile
        prof = cProfile.Profile()
    def _exit(code):
        extra = sorted(set(sys.modules) - preloaded)
        text = ""
        if prof:
            prof.disable()
            import pstats, io
            s = io.StringIO()
            pstats.Stats(prof, stream=s).sort_stats("cumulative").print_stats(45)
            text = s.getvalue()
        stamp("exit")
        with open(out, "w") as f:
            f.write(json.dumps([extra, STAMPS]) + "\n" + text)
        real(code)
    os._exit = _exit
    if os.environ.get("RUNPATH_TRACE"):  # who imports these (stderr): the preload's gaps
        import traceback
        want = set(os.environ["RUNPATH_TRACE"].split(","))
        def traced(event, args):
            if event == "import" and args[0] in want and args[0] not in sys.modules:
                sys.stderr.write("import %s from:\n%s" % (
                    args[0], "".join(traceback.format_stack(limit=8)[:-1])))
        sys.addaudithook(traced)
    if prof:
        prof.enable()

def run(mode, seq, profile):
    out = "/tmp/prof-%s-%d.txt" % (mode, seq)
    prep = time.monotonic()
    if mode == "floor":
        d = "/tmp/run-%d" % seq
        os.mkdir(d)
        for n, b in files.items():
            with open(os.path.join(d, n), "wb") as f:
                f.write(b)
        with open(os.path.join(d, "spec.json"), "wb") as f:
            f.write(blob["floor-spec.json"])
    else:
        ws = "/tmp/ws" if mode.endswith("-tmpfs") else "/workspace"
        os.mkdir(ws + "/run")
        with open(ws + "/run/bundle", "wb") as f:  # the control plane's upload
            f.write(blob["bundle-raw" if "-raw" in mode else "bundle-gz"])
        d = "/tmp/unpacked-%d" % seq  # where the unpacker writes, as a guest's /tmp/run
        msg = request(ws, mode.startswith("alt-"), d)
    prep = (time.monotonic() - prep) * 1000
    r, w = os.pipe()
    t0 = time.monotonic()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        os.dup2(w, 1)
        os.close(w)
        hook(profile, out)
        stamp("start")
        if mode == "floor":
            os.chdir(d)
            sys.argv = [os.path.join(d, "runner.py"), os.path.join(d, "spec.json")]
            sys.path[0] = d
            import runpy
            runpy.run_path(sys.argv[0], run_name="__main__")
        else:
            w = waiter_alt if mode.startswith("alt-") else waiter
            got = w["_main"](msg, lambda s: None)
            stamp("main")
            w["_run"](*got)
        os._exit(0)
    os.close(w)
    data, first = b"", None
    while True:
        b = os.read(r, 65536)
        if first is None:
            first = (time.monotonic() - t0) * 1000
        if not b:
            break
        data += b
    os.close(r)
    _, status, ru = os.wait4(pid, 0)
    wall = (time.monotonic() - t0) * 1000
    import shutil
    shutil.rmtree(d, ignore_errors=True)
    if mode != "floor":  # a failed run's bundle
        shutil.rmtree(ws + "/run", ignore_errors=True)
    ok = status == 0 and b'"t":"done"' in data and b"RUN " in data
    res = {"mode": mode, "ok": ok, "cpu_ms": (ru.ru_utime + ru.ru_stime) * 1000,
           "user_ms": ru.ru_utime * 1000, "sys_ms": ru.ru_stime * 1000, "wall_ms": wall,
           "first_ms": first, "prep_ms": prep, "minflt": ru.ru_minflt,
           "frames": [l[:60].decode("utf-8", "replace") for l in data.splitlines()]}
    if not ok:
        res["tail"] = data[-600:].decode("utf-8", "replace")
    text = open(out).read()
    os.unlink(out)
    head, _, res["profile"] = text.partition("\n")
    res["modules"], stamps = json.loads(head)
    at = dict((k, v) for k, v in stamps if k != "gunzip")
    res["gunzip_ms"] = sum(v for k, v in stamps if k == "gunzip") / 1e6
    res["main_ms"] = (at["main"] - at["start"]) / 1e6 if "main" in at else 0.0
    res["unpack_ms"] = (at["unpacked"] - at.get("main", at["start"])) / 1e6 if "main" in at else 0.0
    res["runner_ms"] = (at["exit"] - at["unpacked"]) / 1e6
    return res

for line in sys.stdin:
    mode, seq, profile = line.split()
    print(json.dumps(run(mode, int(seq), profile == "1")), flush=True)
'''


def main(argv):
    import argparse
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=40, help="runs per mode (interleaved)")
    ap.add_argument("--modes", default="floor,pooled,pooled-raw,pooled-tmpfs")
    ap.add_argument("--profile", action="store_true")
    ap.add_argument("--guest", default=os.path.join(fp.ROOT, "guest"),
                    help="the guest/ tree priced (a copy with a lever applied)")
    ap.add_argument("--waiter", default=os.path.join(fp.ROOT, "controlplane/local/service/"
                                                     "python_waiter.py"))
    ap.add_argument("--binary", help="a guestflow binary (a private copy): the pooled modes "
                    "use the bundle its serve sends (one run captured through a relay); "
                    "without: the bundle as flow_spec.cpp builds it, made here")
    ap.add_argument("--upload", type=int, default=0, metavar="ROUNDS",
                    help="with --binary: also the control plane's CPU a PUT of the bundle, "
                    "gzipped against plain, ROUNDS interleaved batches each")
    ap.add_argument("--unpack-alt", help="another unpack_run.py, run by the modes named "
                    "alt-pooled, alt-pooled-raw")
    ap.add_argument("--waiter-alt", help="another python_waiter.py whose _main and _run the "
                    "alt- modes use (its preload is --waiter's: the same template)")
    ap.add_argument("--tag", default="")
    ap.add_argument("--no-store", action="store_true")
    a = ap.parse_args(argv)
    modes = a.modes.split(",")
    commit, dirty = fp.head_commit(), fp.tree_dirty()
    work = tempfile.mkdtemp(prefix="guestflow-runpath-", dir="/var/tmp")
    load0 = " ".join(open("/proc/loadavg").read().split()[:3])
    lines = ["flowpool runpath: the pooled run's own Python path against the floor's, one "
             "process tree, modes interleaved, %d runs each" % a.runs,
             "date %s UTC, host %s, tree %s%s, load at start %s" % (
                 time.strftime("%Y-%m-%d %H:%M", time.gmtime()), socket.gethostname(), commit,
                 " + uncommitted changes" if dirty else "", load0),
             "CPU = the run process's rusage (user + system, its exit included), ms; medians",
             "modes: floor = flowpool's floor (files written by its parent to tmpfs, runpy of "
             "runner.py); pooled = the waiter's _main + _run on serve's request and bundle "
             "(gzipped files), /workspace on ext4 on a loop device as a guest's; pooled-raw = the same bundle not gzipped; "
             "pooled-tmpfs = /workspace on tmpfs"]
    p = loop = mounted = None
    try:
        prefix = os.path.join(work, "engine")
        fp.make_engine(prefix)
        graph = fp.flow()
        spool = os.path.join(work, "spool")
        ws = os.path.join(work, "ws")
        os.makedirs(spool)
        os.makedirs(ws)
        # /workspace as a guest's: ext4 on a loop device, made and mounted as
        # controlplane/local/guests/workspace_disk.cpp does (no journal, nobarrier, noatime).
        image = os.path.join(work, "ws.img")
        with open(image, "wb") as f:
            f.truncate(256 << 20)
        subprocess.run(["mke2fs", "-q", "-F", "-t", "ext4", "-b", "4096", "-m", "0", "-O",
                        "^has_journal,^resize_inode", "-E", "lazy_itable_init=1,nodiscard",
                        image], check=True)
        loop = subprocess.run(["losetup", "--find", "--show", image], check=True,
                              capture_output=True, text=True).stdout.strip()
        subprocess.run(["mount", "-t", "ext4", "-o", "noinit_itable,nobarrier,noatime,nosuid,"
                        "nodev", loop, ws], check=True)
        mounted = ws
        spec = serve_spec(graph, "run pooled")
        if a.upload:
            both = {"gzipped": bundle_for(a.guest, spec, True),
                    "plain": bundle_for(a.guest, spec, False)}
            up = price_upload(a.binary, work, both, a.upload, 20)
            lines.append("the control plane's CPU a PUT of the bundle (%s, one guest, batches "
                         "of 20 interleaved, %d each; medians of the batches):" % (
                             a.binary, a.upload))
            for name, xs in up.items():
                lines.append("  %-8s bundle %6d bytes  control plane %.3f ms a put" % (
                    name, len(both[name]), fp.p50(xs)))
        if a.binary:  # serve's own bundle, and its command's -c source
            real, command = capture(a.binary, work, prefix, graph)
            lines.append("serve's bundle captured (%s): %d bytes, its spec.json %s the one "
                         "made here, its unpack source %s guest/unpack_run.py" % (
                             a.binary, len(real), "is" if real.endswith(spec) else "is NOT",
                             "is" if command["args"][-2].encode() == open(os.path.join(
                                 a.guest, "unpack_run.py"), "rb").read() else "is NOT"))
        else:
            real = bundle_for(a.guest, spec, True)
        for name, data in (("bundle-gz", real),
                           ("bundle-raw", bundle_for(a.guest, spec, False)),
                           ("floor-spec.json", json.dumps(
                               {"graph": graph, "inputs": [{"input_value": "run floor",
                                                            "type": "chat"}],
                                "executor": "lfx"}).encode())):
            with open(os.path.join(spool, name), "wb") as f:
                f.write(data)
        if a.unpack_alt:
            shutil.copy(a.unpack_alt, os.path.join(spool, "unpack-alt.py"))
        if a.waiter_alt:
            shutil.copy(a.waiter_alt, os.path.join(spool, "waiter-alt.py"))
        lines.append("bundle: %d bytes gzipped, %d not; spec.json %d bytes" % (
            os.path.getsize(os.path.join(spool, "bundle-gz")),
            os.path.getsize(os.path.join(spool, "bundle-raw")), len(spec)))
        cmd = ["bwrap", "--die-with-parent", "--unshare-all", "--ro-bind", "/usr", "/usr",
               "--symlink", "usr/lib", "/lib", "--symlink", "usr/lib64", "/lib64",
               "--symlink", "usr/bin", "/bin", "--ro-bind", "/etc", "/etc",
               "--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp",
               "--ro-bind", prefix, prefix, "--ro-bind", a.guest, "/guest",
               "--ro-bind", a.waiter, "/waiter.py", "--ro-bind", spool, "/spool",
               "--bind", ws, "/workspace", "--dir", "/tmp/ws",
               # A template's environment is the pool's exec environment (fork_template.cpp),
               # the request's below: the waiter's _main replaces the one by the other.
               "--clearenv", "--setenv", "PATH", "/usr/local/bin:/usr/bin:/bin",
               "--setenv", "HOME", "/workspace", "--setenv", "PYTHONUNBUFFERED", "1",
               "--setenv", "HOSTNAME", "g",
               os.path.join(prefix, "bin", "python3"), "-c", program(), "/guest",
               "/waiter.py", "/spool"]
        p = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)

        def one(mode, seq, profile=False):
            p.stdin.write("%s %d %d\n" % (mode, seq, profile))
            p.stdin.flush()
            line = p.stdout.readline()
            if not line:
                raise RuntimeError("the runpath process ended")
            r = json.loads(line)
            if not r["ok"]:
                raise RuntimeError("%s run failed: %s" % (mode, r.get("tail")))
            return r

        seq = 0
        for m in modes:  # warm: first-run costs out of the window
            seq += 1
            one(m, seq)
        res = {m: [] for m in modes}
        for i in range(a.runs):
            for m in (modes if i % 2 == 0 else modes[::-1]):
                seq += 1
                res[m].append(one(m, seq))
        base = fp.p50([r["cpu_ms"] for r in res[modes[0]]])
        for m in modes:
            rs = res[m]

            def med(k):
                return fp.p50([r[k] for r in rs])

            lines.append("%-14s CPU %6.2f ms (user %6.2f, sys %5.2f) = %.3fx %s  wall %6.2f ms  "
                         "minflt %6.0f  prep (parent) %5.2f ms" % (
                             m, med("cpu_ms"), med("user_ms"), med("sys_ms"),
                             med("cpu_ms") / base, modes[0], med("wall_ms"), med("minflt"),
                             med("prep_ms")))
        lines.append("steps (the run process's CPU, ms, medians): waiter _main (parse, env, "
                     "chdir); unpack (its -c compile, bundle read and unlink, gunzip, writes) "
                     "with gunzip alone; runner (runpy.run_path of runner.py to os._exit)")
        for m in modes:
            rs = res[m]
            lines.append("  %-14s main %5.2f  unpack %5.2f (gunzip %5.2f)  runner %6.2f" % (
                m, fp.p50([r["main_ms"] for r in rs]), fp.p50([r["unpack_ms"] for r in rs]),
                fp.p50([r["gunzip_ms"] for r in rs]), fp.p50([r["runner_ms"] for r in rs])))
        for m in modes:
            lines.append("%s: modules a run imported beyond the template's preload: %s" % (
                m, ", ".join(res[m][-1]["modules"])))
            lines.append("%s: output lines a run %d (each a write to the exec's stdout): %s" % (
                m, len(res[m][-1]["frames"]), ", ".join(
                    f.split(",")[0] for f in res[m][-1]["frames"])))
        for r in (x for m in modes for x in res[m]):
            del r["profile"]
        if a.profile:
            for m in modes:
                seq += 1
                r = one(m, seq, True)
                prof = r["profile"]
                lines.append("-- %s under cProfile (inflated), by cumulative time:" % m)
                lines += ["   " + s for s in prof.splitlines() if s.strip()][:60]
        lines.append(fp.load_line())
        for s in lines:
            print(s, flush=True)
        if not a.no_store:
            fp.store_result(os.path.join(fp.ROOT, "bench", "results"),
                            "flowpool-runpath" + (("-" + a.tag) if a.tag else ""), commit, dirty,
                            lines, "python3 bench/flowpool/runpath.py " + " ".join(argv))
    finally:
        if p is not None:
            p.stdin.close()
            p.wait(60)
        if mounted:
            subprocess.run(["umount", mounted])
        if loop:
            subprocess.run(["losetup", "-d", loop])
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main(sys.argv[1:])
