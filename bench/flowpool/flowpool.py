#!/usr/bin/env python3
"""Flow runs with a heavy engine on real guests: cold, pooled (engine imported before the
take), and the same flow in one process without a guest (the floor). `bench/run flowpool`.

The engine is the lfx stand-in (tests/fixtures/lfx_guest) whose import also imports
Debian's pandas and sympy (about a second, as `import lfx` pulls in langchain and pydantic),
in a venv of /usr/bin/python3 with the system site (image kind python-env). The flow is
ChatInput -> Uppercase -> ChatOutput, run by lfx (`executor: lfx`). Every run goes through
`guestflow serve` (POST /v1/runs, stream false) on its embedded control plane:
  cold    GUESTFLOW_WARM_POOL=off: each run builds its guest and imports the engine in it;
  pooled  GUESTFLOW_WARM_POOL=s-1vcpu-256mb@heavy=N, the image preloading guestflow:runner:
          each run takes a guest whose python waiter already imported lfx (and pandas,
          sympy); warm takes are read from serve's control plane (/metrics, pool takes);
  floor   one process (in a throwaway bwrap root, as guest-side code must be run on the host)
          that imported the engine once, then per run writes the run directory and forks
          the runner on it (`python3 runner.py spec.json` as the guest runs it: the runner's
          own modules are compiled afresh per run, in the guest too).
Also the sandbox surface's first output with a pandas snippet, from the pool with
`GUESTFLOW_PRELOAD=pandas` against without (control plane, create + streamed exec).
Prints and stores (bench/results/DATE-HOST-COMMIT-flowpool.txt) the ratios with met/MISSED.
`--price N`: the pooled run's path at 1, step by step. `--price8 N`: pooled runs at 8 priced
(sched_price.py: the window's idle share and CPU by process class from perf's scheduler
record, against the floor at 8; each run's steps through the stamping relay; the pool's
builds and ready guests through the window); SCHED_PRICE_DEBUG=PREFIX writes each task's
class and ancestry to PREFIX*.txt.
"""

import argparse
import http.client
import json
import os
import re
import selectors
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "bench"))
from bench_common import p50  # noqa: E402
SHAPE = "s-1vcpu-256mb"
TOKEN = "flowpool-bench-token"


def log(msg):
    print(msg, file=sys.stderr, flush=True)


# -- the heavy engine and the flow -----------------------------------------------------------

def make_engine(prefix):
    """A venv of /usr/bin/python3 (system site: Debian's pandas, sympy) with the lfx stand-in
    whose import first imports pandas and sympy."""
    subprocess.run(["/usr/bin/python3", "-m", "venv", "--without-pip", "--system-site-packages",
                    prefix], check=True)
    site = subprocess.run([os.path.join(prefix, "bin", "python3"), "-c",
                           "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          check=True, capture_output=True, text=True).stdout.strip()
    lfx = os.path.join(site, "lfx")
    shutil.copytree(os.path.join(ROOT, "tests/fixtures/lfx_guest/lfx"), lfx,
                    ignore=shutil.ignore_patterns("__pycache__"))
    init = os.path.join(lfx, "__init__.py")
    with open(init) as f:
        body = f.read()
    with open(init, "w") as f:
        f.write("import pandas  # noqa: F401 - the heavy engine: what langchain is to lfx\n"
                "import sympy  # noqa: F401\n" + body)
    return site


def flow():
    """ChatInput -> Uppercase -> ChatOutput, in the shape Langflow exports (the tests' builders)."""
    sys.path.insert(0, os.path.join(ROOT, "tests", "python"))
    import langflow_shapes as lf  # noqa: PLC0415
    nodes = [lf.chat_input(), lf.uppercase("Uppercase-up1"), lf.chat_output()]
    return lf.graph(nodes, lf.chain(*nodes))


# -- serve -------------------------------------------------------------------------------------

class ControlPlane:
    """`guestflow control-plane` on 127.0.0.1:0 (serve exports no pool series; this does)
    and on a Unix socket, which `url` names: serve reaches it there, as serve's embedded
    control plane is reached by default (docs/configuration.md); `port` is the TCP one
    (FLOWPOOL_CP_TCP=1: `url` names it too)."""

    def __init__(self, binary, state, args, env=None):
        e = dict(os.environ)
        e.pop("GUESTFLOW_PRELOAD", None)
        e.update(env or {})
        self.log = open(os.path.join(state, "control-plane.log"), "w")
        sock = os.path.join(state, "control-plane.sock")
        self.p = subprocess.Popen([binary, "control-plane", "--listen", "127.0.0.1:0",
                                   "--unix-socket", sock,
                                   "--state-dir", os.path.join(state, "cp")] + args, env=e,
                                  stdout=subprocess.PIPE, stderr=self.log, text=True)
        line = self.p.stdout.readline()
        if not line.startswith("listening on http://"):
            stop(self.p, self.log)
            raise RuntimeError("control plane did not start: " +
                               open(self.log.name).read()[-2000:])
        self.port = int(line.split()[2].rsplit(":", 1)[1])
        self.url = "unix://" + sock
        if os.environ.get("FLOWPOOL_CP_TCP") == "1":  # an A/B's other transport (ab8.py)
            self.url = "http://127.0.0.1:%d" % self.port

    def get(self, path):
        c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=60)
        c.request("GET", path)
        body = c.getresponse().read().decode()
        c.close()
        return body

    def stop(self):
        stop(self.p, self.log)


def stop(p, log_file):
    if p.poll() is None:
        p.terminate()
        try:
            p.wait(60)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
    log_file.close()


class Serve:
    def __init__(self, binary, state, cp_url):
        e = dict(os.environ)
        e.update({"GUESTFLOW_STATE_DIR": state, "GUESTFLOW_CONTROL_PLANE_URL": cp_url,
                  "CREATEOS_SANDBOX_API_KEY": "", "CREATEOS_API_KEY": "",
                  "CREATEOS_EXECUTOR_SHAPE": SHAPE, "CREATEOS_EXECUTOR_ROOTFS": "heavy",
                  "GUESTFLOW_RUNNER_EXECUTOR": "lfx", "GUESTFLOW_MAX_QUEUED": "64"})
        self.log = open(os.path.join(state, "serve.log"), "w")
        self.p = subprocess.Popen([binary, "serve", "--listen", "127.0.0.1:0", "--token", TOKEN],
                                  env=e, stdout=subprocess.PIPE, stderr=self.log, text=True)
        line = self.p.stdout.readline()
        if not line.startswith("listening on http://"):
            self.stop()
            raise RuntimeError("serve did not start: " + open(self.log.name).read()[-2000:])
        self.port = int(line.strip().rsplit(":", 1)[1])
        self.conns = threading.local()  # each caller thread's connection
        self.keep_alive = True  # False: a connection per call (an A/B's "before")

    def request(self, method, path, body=None, timeout=120):
        """One call on this thread's kept-alive connection, as a real caller's pooled client
        makes it (a connection per call was the bench client's own cost, not serve's). serve
        closes a kept connection only idle (its client timeout) or stopping: a reused one
        that fails before any answer is opened again and the call sent once more."""
        data = json.dumps(body) if body is not None else None
        headers = {"Authorization": "Bearer " + TOKEN, "Content-Type": "application/json"}
        c = getattr(self.conns, "c", None)
        for reused in ([True, False] if c is not None else [False]):
            if not reused:
                c = self.conns.c = http.client.HTTPConnection("127.0.0.1", self.port,
                                                              timeout=timeout)
            c.timeout = timeout
            if c.sock is not None:
                c.sock.settimeout(timeout)
            try:
                c.request(method, path, body=data, headers=headers)
                r = c.getresponse()
            except (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError):
                c.close()
                self.conns.c = None
                if reused:
                    continue
                raise
            out = r.read()  # a `Connection: close` answer closes it; the next call reopens
            if not self.keep_alive:
                c.close()
            return r.status, out

    def run(self, graph, text):
        t0 = time.monotonic()
        status, data = self.request("POST", "/v1/runs", {
            "flow": graph, "inputs": [{"input_value": text, "type": "chat"}], "stream": False})
        ms = (time.monotonic() - t0) * 1000
        if status != 200 or text.upper().encode() not in data:
            raise RuntimeError("run failed: %d %s" % (status, data[:600]))
        return ms

    def stop(self):
        stop(self.p, self.log)


def pool_counts(text):
    """(takes, misses) summed over serve's pools, from its /metrics (0, 0 when absent)."""
    takes = misses = 0
    for line in text.splitlines():
        if line.startswith("#"):
            continue
        name = line.split("{", 1)[0].split(" ", 1)[0]
        value = float(line.rsplit(" ", 1)[1]) if " " in line else 0
        if name.endswith("pool_takes_total"):
            takes += value
        elif name.endswith("pool_misses_total"):
            misses += value
    return takes, misses


def in_turn(items, r):
    """The order of an interleaved A/B's round r: as given, flipped every other round, so that
    neither side always runs first after the same thing."""
    return items if r % 2 == 0 else items[::-1]


def ab_rounds(variants, rounds, window):
    """An interleaved A/B: each round every variant in turn (in_turn); yields what
    window(variant, i) measured for the i-th window (from 1), its "round" set (from 1)."""
    i = 0
    for r in range(rounds):
        for v in in_turn(variants, r):
            i += 1
            x = window(v, i)
            x["round"] = r + 1
            yield x


def wait_until(pred, seconds, what):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if pred():
            return
        time.sleep(0.1)
    raise RuntimeError("timed out waiting for " + what)


def warm_up(cp, serve, graph, n):
    """Waits for n ready guests, runs the flow once through serve (its and the engine's
    first-run costs stay out of the window), then waits for the pool to be full again."""
    def full():
        return ready_guests(cp.get("/metrics")) >= n

    wait_until(full, 300, "the pool")
    serve.run(graph, "warm up")
    wait_until(full, 300, "the pool")


def ready_guests(text):
    n = 0
    for line in text.splitlines():
        if line.startswith("guestflow_pool_guests{") and 'state="ready"' in line:
            n += float(line.rsplit(" ", 1)[1])
    return n


def load(serve, graph, k, runs, before_each=None):
    """`runs` runs, `k` at a time, each of k kept connections back to back (or after
    `before_each()`): latencies (ms, from a run's request to its whole answer) and wall time.
    One thread and a selector with each run's request prebuilt: the caller's CPU competes
    with serve's on this host, and a thread per connection with http.client cost about three
    times as much a run (client_ab.py; bench/README.md, "The runs of record at 708a40b")."""
    return ClosedLoop(serve.port, graph, before_each).run(k, runs)


class ClosedLoop:
    """serve's flow runs over `k` kept HTTP/1.1 connections from one thread. An answer must be
    200 with a Content-Length and hold the run's input upper-cased (the flow's output); a
    connection serve closed while idle is opened again and its request sent once more (once:
    a request whose new connection closes unanswered too is an error)."""

    def __init__(self, port, graph, before_each=None):
        self.port = port
        self.before_each = before_each
        self.head = ("POST /v1/runs HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n"
                     "Authorization: Bearer %s\r\nContent-Type: application/json\r\n"
                     "Content-Length: %%d\r\n\r\n" % (port, TOKEN))
        # Every run's body is this one's with its input text in place of the marker.
        body = json.dumps({"flow": graph, "inputs": [{"input_value": "\0", "type": "chat"}],
                           "stream": False})
        self.before, self.after = body.split("\\u0000")

    def _send(self, conn):
        if self.before_each:
            self.before_each()
        i = self.left.pop()
        text = "run %d" % i
        body = (self.before + text + self.after).encode()
        conn["want"] = text.upper().encode()
        conn["req"] = (self.head % len(body)).encode() + body
        conn["buf"] = b""
        conn["resent"] = False
        conn["t0"] = time.monotonic()
        self._write(conn, reopen=True)

    def _write(self, conn, reopen):
        try:
            conn["sock"].sendall(conn["req"])
        except (BrokenPipeError, ConnectionResetError):
            if not reopen:
                raise
            self._reopen(conn)

    def _connect(self, conn):
        """conn's socket (a new one in place of the old)."""
        if "sock" in conn:
            self.sel.unregister(conn["sock"])
            conn["sock"].close()
        conn["sock"] = socket.create_connection(("127.0.0.1", self.port), timeout=120)
        conn["sock"].setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # as http.client
        self.sel.register(conn["sock"], selectors.EVENT_READ, conn)

    def _reopen(self, conn):
        if conn["resent"]:
            raise RuntimeError("serve closed the connection of a request sent twice, unanswered")
        conn["resent"] = True
        self._connect(conn)
        conn["buf"] = b""
        self._write(conn, reopen=False)

    def _answer(self, conn):
        """The whole answer's (status line, headers, body), or None while it is incomplete."""
        buf = conn["buf"]
        end = buf.find(b"\r\n\r\n")
        if end < 0:
            return None
        lines = buf[:end].split(b"\r\n")
        headers = {}
        for line in lines[1:]:
            name, _, value = line.partition(b":")
            headers[name.strip().lower()] = value.strip()
        if b"content-length" not in headers:
            raise RuntimeError("run answer without a Content-Length: %r" % buf[:600])
        size = int(headers[b"content-length"])
        if len(buf) < end + 4 + size:
            return None
        if len(buf) > end + 4 + size:
            raise RuntimeError("bytes after a run's answer: %r" % buf[end + 4 + size:][:200])
        return lines[0], headers, buf[end + 4:]

    def run(self, k, runs):
        self.sel = selectors.DefaultSelector()
        self.left = list(range(runs))
        lat, conns = [], []
        t0 = time.monotonic()
        try:
            for _ in range(min(k, runs)):
                conn = {}
                self._connect(conn)
                conns.append(conn)
                self._send(conn)
            live = len(conns)
            while live:
                events = self.sel.select(120)
                if not events:
                    raise RuntimeError("no answer from serve in 120 s")
                for key, _ in events:
                    conn = key.data
                    try:
                        data = conn["sock"].recv(1 << 16)
                    except ConnectionResetError:
                        data = b""  # closed with our request unread: as a close
                    if not data:
                        if conn["buf"]:
                            raise RuntimeError("serve closed a run's answer cut short: %r"
                                               % conn["buf"][:600])
                        self._reopen(conn)  # closed while idle: once more on a new one
                        continue
                    conn["buf"] += data
                    got = self._answer(conn)
                    if got is None:
                        continue
                    status, headers, body = got
                    lat.append((time.monotonic() - conn["t0"]) * 1000)
                    if not status.startswith(b"HTTP/1.1 200 ") or conn["want"] not in body:
                        raise RuntimeError("run failed: %r %r" % (status, body[:600]))
                    if headers.get(b"connection", b"").lower() == b"close" and self.left:
                        self._connect(conn)
                    if self.left:
                        self._send(conn)
                    else:
                        self.sel.unregister(conn["sock"])
                        conn["sock"].close()
                        live -= 1
            return lat, time.monotonic() - t0
        finally:
            for conn in conns:
                if conn["sock"].fileno() >= 0:
                    try:
                        self.sel.unregister(conn["sock"])
                    except KeyError:
                        pass
                    conn["sock"].close()
            self.sel.close()


# -- the pooled run's path, step by step -------------------------------------------------------

class Relay:
    """A TCP relay between serve and its control plane that stamps every chunk it passes
    (time.monotonic, the bench's own clock): where a pooled run's time goes, call by call.
    It adds its own hop (~0.1-0.3 ms per call), said in the report."""

    def __init__(self, port):
        self.port, self.log, self.lock = port, [], threading.Lock()
        self.ls = socket.socket()
        self.ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.ls.bind(("127.0.0.1", 0))
        self.ls.listen(64)
        self.url = "http://127.0.0.1:%d" % self.ls.getsockname()[1]
        self.conns = 0
        threading.Thread(target=self.accept, daemon=True).start()

    def accept(self):
        while True:
            try:
                c, _ = self.ls.accept()
            except OSError:
                return
            s = socket.create_connection(("127.0.0.1", self.port))
            for x in (c, s):
                x.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            self.conns += 1
            cid = self.conns
            threading.Thread(target=self.pump, args=(c, s, cid, ">"), daemon=True).start()
            threading.Thread(target=self.pump, args=(s, c, cid, "<"), daemon=True).start()

    def pump(self, src, dst, cid, way):
        while True:
            try:
                b = src.recv(65536)
            except OSError:
                b = b""
            if not b:
                for x in (src, dst):
                    try:
                        x.shutdown(socket.SHUT_RDWR)
                    except OSError:
                        pass
                return
            self.record(cid, way, b)
            try:
                dst.sendall(b)
            except OSError:
                return

    def record(self, cid, way, b):
        """What a chunk leaves behind: its time and head (">" toward the control plane)."""
        t = time.monotonic()
        with self.lock:
            self.log.append((t, cid, way, b[:200] if way == ">" else b[:1200]))

    def calls(self, t0, t1):
        """The control-plane calls between t0 and t1: [name, start, first reply byte, last
        reply byte, first stdout chunk, last stdout chunk, guest id], in order."""
        out, open_by_conn = [], {}
        with self.lock:
            log = [e for e in self.log if t0 <= e[0] <= t1]
        for t, cid, way, head in log:
            if way == ">" and head.split(b" ", 1)[0] in (b"GET", b"POST", b"PUT", b"DELETE"):
                method, path = head.split(b" ", 2)[:2]
                path = path.decode().split("?", 1)[0]
                name = {"POST": "exec" if path.endswith("/exec") else "create", "PUT": "put",
                        "DELETE": "delete", "GET": "get"}[method.decode()]
                gid = path.split("/")[3] if path.count("/") >= 3 else None
                call = [name, t, None, None, None, None, gid]
                out.append(call)
                open_by_conn[cid] = call
            elif way == "<" and cid in open_by_conn:
                call = open_by_conn[cid]
                if call[2] is None:
                    call[2] = t
                if call[6] is None:
                    m = re.search(rb'"id"\s*:\s*"([^"]+)"', head)
                    call[6] = m and m.group(1).decode()
                call[3] = t
                if b'"stdout"' in head:
                    call[4] = call[4] or t
                    call[5] = t
        return out

    def close(self):
        self.ls.close()


def start_with_image(binary, state, prefix, args):
    """A control plane on a new STATE whose store holds the engine's image "heavy" (PREFIX,
    preloading guestflow:runner), started with ARGS: the image first, as a pool names only
    images the store has."""
    os.makedirs(state)
    cp = ControlPlane(binary, state, [])
    add = subprocess.run([binary, "image", "add", "heavy", "--python-env", prefix,
                          "--preload", "guestflow:runner"],
                         env=dict(os.environ, GUESTFLOW_CONTROL_PLANE_URL=cp.url),
                         capture_output=True, text=True)
    cp.stop()
    if add.returncode:
        raise RuntimeError("image add: " + add.stderr)
    return ControlPlane(binary, state, args)


def price_path(binary, work, prefix, graph, runs, say):
    """Pooled runs at 1 (each once the pool is full again) with serve's control-plane calls
    through a Relay: p50 of each step of a run's path."""
    state = os.path.join(work, "state-price")
    cp = start_with_image(binary, state, prefix, ["--warm-pool", "%s@heavy=2" % SHAPE])
    relay = Relay(cp.port)
    serve = Serve(binary, state, relay.url)
    steps, totals, before_reply = {}, [], 0

    def full():
        return ready_guests(cp.get("/metrics")) >= 2

    try:
        wait_until(full, 300, "the pool")
        serve.run(graph, "warm up")
        for i in range(runs):
            wait_until(full, 300, "the pool")
            t0 = time.monotonic()
            serve.run(graph, "price %d" % i)
            t1 = time.monotonic()
            # serve may answer before its guest's delete has (or is even sent): its answer.
            def deleted():
                c = relay.calls(t0, time.monotonic())
                return len(c) == 4 and c[3][0] == "delete" and c[3][3] is not None
            wait_until(deleted, 60, "the run's delete")
            calls = relay.calls(t0, time.monotonic())
            names = [c[0] for c in calls]
            if names != ["create", "put", "exec", "delete"]:
                raise RuntimeError("unexpected control-plane calls: %s" % names)
            create, put, ex, delete = calls
            before_reply += delete[3] <= t1
            row = {
                "serve in (request -> create sent)": create[1] - t0,
                "create (pool take)": create[3] - create[1],
                "serve (create -> put sent)": put[1] - create[3],
                "put bundle": put[3] - put[1],
                "serve (put -> exec sent)": ex[1] - put[3],
                "exec: to its first reply byte": ex[2] - ex[1],
                "exec: first reply byte -> first stdout": ex[4] - ex[2],
                "exec: first -> last stdout (the run's events)": ex[5] - ex[4],
                "exec: last stdout -> exit line": ex[3] - ex[5],
                "serve (exit line -> delete sent)": delete[1] - ex[3],
                "delete": delete[3] - delete[1],
                "serve out (exit line -> reply received)": t1 - ex[3],
            }
            for k, v in row.items():
                steps.setdefault(k, []).append(v * 1000)
            totals.append((t1 - t0) * 1000)
    finally:
        serve.stop()
        relay.close()
        cp.stop()
    say("the pooled run's path at 1, step by step (p50 of %d runs, each once the pool is full "
        "again; serve's control-plane calls through a stamping TCP relay, +~0.1-0.3 ms a call):"
        % runs)
    for k, v in steps.items():
        say("  %-48s %8.1f ms" % (k, p50(v)))
    say("  %-48s %8.1f ms" % ("whole run (client)", p50(totals)))
    say("  runs whose delete answered before serve's reply: %d of %d" % (before_reply, runs))
    return p50(totals)


def price_at8(binary, work, prefix, site, spec_path, graph, runs, pool, say):
    """Pooled runs at 8 back to back, priced twice on one pool: (a) serve straight to the
    control plane under `perf record` of the scheduler (sched_price): the window's idle
    share and CPU by process class, against the floor at 8 recorded the same way; (b) serve
    through the stamping Relay: each run's steps and how many execs were in flight."""
    import sched_price  # noqa: PLC0415 - perf only here
    state = os.path.join(work, "state-price8")
    cp = start_with_image(binary, state, prefix, ["--warm-pool", "%s@heavy=%d" % (SHAPE, pool)])
    res = {}

    def window(serve, name, perf):
        warm_up(cp, serve, graph, pool)
        rec = sched_price.Recorder(os.path.join(work, name + ".perf")) if perf else None
        before = pool_counts(cp.get("/metrics"))
        fills0 = pool_fills(cp)
        stat0 = cpu_times()
        t0 = time.monotonic()
        ready, stop = [], threading.Event()

        def sample():  # the pool's ready guests through the window
            while not stop.wait(0.05):
                ready.append(min(p["ready"] for p in json.loads(cp.get("/v1/pool"))
                                 ["data"]["pools"]))

        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        try:
            lat, wall = load(serve, graph, 8, runs)
        finally:
            t1 = time.monotonic()
            stat1 = cpu_times()
            stop.set()
            sampler.join()
            if rec:
                rec.stop()
        after = pool_counts(cp.get("/metrics"))
        fills1 = pool_fills(cp)
        r = {"lat": lat, "wall": wall, "t0": t0, "t1": t1, "stat": (stat0, stat1),
             "takes": after[0] - before[0], "misses": after[1] - before[1],
             "fills": (fills1[0] - fills0[0], fills1[1] - fills0[1]), "ready": ready}
        if rec:
            roots = {os.getpid(): "bench (client)", serve.p.pid: "serve",
                     cp.p.pid: "control plane*"}
            roots.update(sched_price.fork_roots(rec.tree))
            r["sched"] = sched_price.account(rec.path, rec.tree, t0, t1, roots)
        return r

    try:
        serve = Serve(binary, state, cp.url)
        try:
            res["perf"] = window(serve, "pooled8", True)
        finally:
            serve.stop()
        relay = Relay(cp.port)
        serve = Serve(binary, state, relay.url)
        try:
            res["relay"] = window(serve, "relay8", False)
            res["calls"] = relay.calls(res["relay"]["t0"], res["relay"]["t1"])
        finally:
            serve.stop()
            relay.close()
    finally:
        cp.stop()
    fl = Floor(prefix, site, spec_path)
    try:
        fl.measure(8, 16)
        rec = sched_price.Recorder(os.path.join(work, "floor8.perf"))
        stat0 = cpu_times()
        t0 = time.monotonic()
        try:
            lat, wall = fl.measure(8, runs)
        finally:
            t1 = time.monotonic()
            stat1 = cpu_times()
            rec.stop()
        roots = {os.getpid(): "bench (client)", fl.p.pid: "floor*"}
        res["floor"] = {"lat": lat, "wall": wall, "stat": (stat0, stat1),
                        "sched": sched_price.account(rec.path, rec.tree, t0, t1, roots)}
    finally:
        fl.stop()

    for name, what in (("perf", "pooled at 8 (serve -> control plane, perf recording)"),
                       ("floor", "no guest (floor) at 8 (perf recording)"),
                       ("relay", "pooled at 8 (serve -> stamping relay -> control plane)")):
        r = res[name]
        n = len(r["lat"])
        busy, total = cpu_busy(*r["stat"])
        say("%s: %d runs in %.2f s = %.2f runs/s, p50 %.1f ms; CPU busy %.0f%% of the "
            "cores (/proc/stat: %.1f ms CPU a run, any process)%s" % (
                what, n, r["wall"], n / r["wall"], p50(r["lat"]), 100 * busy / total,
                busy * 1000 / os.sysconf("SC_CLK_TCK") / n,
                "" if "takes" not in r else "; takes %d, misses %d" % (r["takes"], r["misses"])))
        if "fills" in r:
            f = r["fills"]
            say("  pool: %d guests built in the window, %.0f ms each on average (build wall "
                "time); ready guests sampled every 50 ms: min %d, mean %.1f, 0 in %d of %d "
                "samples" % (f[0], f[1] / max(1, f[0]), min(r["ready"] or [0]),
                             sum(r["ready"]) / max(1, len(r["ready"])),
                             r["ready"].count(0), len(r["ready"])))
        if "sched" in r:
            on, wait, sleep, comms = r["sched"]
            say("  %-22s %9s %9s %12s %12s" % ("class", "on-CPU ms", "ms a run", "runnable ms",
                                               "asleep S/D ms"))
            for k in sorted(on, key=lambda k: -on[k]):
                sl = sleep.get(k, {})
                say("  %-22s %9.1f %9.2f %12.1f %12s" % (
                    k, on[k], on[k] / n if k != "idle" else 0, wait.get(k, 0),
                    "%.0f/%.0f" % (sl.get("S", 0), sl.get("D", 0))))
                if k != "idle":
                    top = sorted(comms.get(k, {}).items(), key=lambda x: -x[1])[:4]
                    say("  %-22s   %s" % ("", ", ".join("%s %.0f" % x for x in top)))
    calls = res["calls"]
    execs = [c for c in calls if c[0] == "exec"]
    t0, t1 = res["relay"]["t0"], res["relay"]["t1"]
    inflight = sum((c[3] or t1) - c[1] for c in execs) / (t1 - t0)
    guests = sum(min(d[3] or t1, t1) - cr[1] for cr, d in pair_calls(calls)) / (t1 - t0)
    say("relay window: execs in flight on average %.2f, guests held (create sent -> delete "
        "answered) %.2f, of 8 client runs" % (inflight, guests))
    steps = {}
    for cr, pu, ex, de in quads(calls):
        row = {"create (pool take)": cr[3] - cr[1], "serve (create -> put sent)": pu[1] - cr[3],
               "put bundle": pu[3] - pu[1], "serve (put -> exec sent)": ex[1] - pu[3],
               "exec: to its first reply byte": ex[2] - ex[1],
               "exec: first reply byte -> first stdout": (ex[4] or ex[3]) - ex[2],
               "exec: first -> last stdout": (ex[5] or ex[3]) - (ex[4] or ex[3]),
               "exec: last stdout -> exit line": ex[3] - (ex[5] or ex[3]),
               "serve (exit line -> delete sent)": de[1] - ex[3],
               "delete": de[3] - de[1]}
        for k, v in row.items():
            steps.setdefault(k, []).append(v * 1000)
    slow = [(c[1] - t0, c[3] - c[1]) for c in calls if c[0] == "create" and c[3] - c[1] > 0.05]
    say("  creates over 50 ms (a miss builds its guest; a create may wait for a clone in "
        "flight): %s" % (", ".join(
        "at +%.0f ms took %.0f ms" % (a * 1000, b * 1000) for a, b in slow) or "none"))
    say("  each run's steps at 8, p50 ms (%d runs matched):" % len(steps.get("delete", [])))
    for k, v in steps.items():
        say("    %-42s %8.1f" % (k, p50(v)))
    return res


def quads(calls):
    """(create, put, exec, delete) per guest, matched by the guest id in their paths."""
    by = {}
    for c in calls:
        by.setdefault(c[6], []).append(c)
    out = []
    for cs in by.values():
        names = [c[0] for c in cs]
        if names == ["create", "put", "exec", "delete"]:
            out.append(tuple(cs))
    return out


def pair_calls(calls):
    return [(q[0], q[3]) for q in quads(calls)]


def pool_fills(cp):
    """(guests built, their build time in ms) over every pool of `cp` (GET /v1/pool)."""
    pools = json.loads(cp.get("/v1/pool"))["data"]["pools"]
    return sum(p["fills"] for p in pools), sum(p["fill_ms"] for p in pools)


def cpu_times():
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    return v


def cpu_busy(a, b):
    d = [y - x for x, y in zip(a, b)]
    idle = d[3] + d[4]
    return sum(d[:8]) - idle, sum(d[:8])


# -- the floor: one process, no guest ----------------------------------------------------------

def floor_program():
    """Runs in the bwrap root: imports the engine once, then for each (k, runs) line on stdin
    runs the flow `runs` times, k children at a time, and prints latencies and wall time."""
    return r'''
import json, os, sys, time
sys.dont_write_bytecode = True
GUEST, SPEC = sys.argv[1], sys.argv[2]
sys.path.insert(0, GUEST)
for m in ("json", "heapq", "io", "math", "threading", "types", "runpy", "zlib", "asyncio",
          "copy", "inspect", "traceback", "uuid", "collections", "importlib.util",
          "importlib.metadata", "pkgutil"):  # the waiter's _RUNNER_STDLIB
    __import__(m)
import lfx, lfx.memory, lfx.events.event_manager, lfx.exceptions.component  # noqa
import lfx.graph.graph.base, lfx.schema.message, lfx.schema.data, lfx.schema.dataframe  # noqa
sys.path.remove(GUEST)
files = {n: open(os.path.join(GUEST, n), "rb").read() for n in os.listdir(GUEST)
         if n.endswith(".py") and n not in ("session_files.py", "unpack_run.py")}
spec = open(SPEC, "rb").read()
seq = 0

def start():
    global seq
    seq += 1
    d = "/tmp/run-%d" % seq
    t0 = time.monotonic()
    os.mkdir(d)
    for n, b in files.items():
        with open(os.path.join(d, n), "wb") as f:
            f.write(b)
    with open(os.path.join(d, "spec.json"), "wb") as f:
        f.write(spec)
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        os.dup2(w, 1)
        os.chdir(d)
        sys.argv = [os.path.join(d, "runner.py"), os.path.join(d, "spec.json")]
        sys.path[0] = d
        import runpy
        runpy.run_path(sys.argv[0], run_name="__main__")
        os._exit(0)
    os.close(w)
    return pid, r, t0, d

def finish(pid, r, t0, d):
    first.append((time.monotonic() - t0) * 1000)  # select said readable: its first output
    out = b""
    while True:
        b = os.read(r, 65536)
        if not b:
            break
        out += b
    os.close(r)
    _, status = os.waitpid(pid, 0)
    ms = (time.monotonic() - t0) * 1000
    if status != 0 or b'"t":"done"' not in out or b"RUN " not in out:
        raise SystemExit("floor run failed: %r" % out[-400:])
    import shutil
    shutil.rmtree(d)
    return ms

import select
for line in sys.stdin:
    k, runs = map(int, line.split())
    lat, first, live, left = [], [], {}, runs
    t0 = time.monotonic()
    while left or live:
        while left and len(live) < k:
            pid, r, ts, d = start()
            live[r] = (pid, ts, d)
            left -= 1
        ready, _, _ = select.select(list(live), [], [])
        fd = ready[0]
        pid, ts, d = live.pop(fd)
        lat.append(finish(pid, fd, ts, d))
    print(json.dumps({"lat": lat, "first": first, "wall": time.monotonic() - t0}), flush=True)
'''


class Floor:
    def __init__(self, prefix, site, spec_path):
        guest = os.path.join(ROOT, "guest")
        cmd = ["bwrap", "--die-with-parent", "--unshare-all", "--ro-bind", "/usr", "/usr",
               "--symlink", "usr/lib", "/lib", "--symlink", "usr/lib64", "/lib64",
               "--symlink", "usr/bin", "/bin", "--ro-bind", "/etc", "/etc",
               "--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp",
               "--ro-bind", prefix, prefix, "--ro-bind", guest, "/guest",
               "--ro-bind", spec_path, "/spec.json", "--setenv", "PYTHONUNBUFFERED", "1",
               os.path.join(prefix, "bin", "python3"), "-c", floor_program(), "/guest",
               "/spec.json"]
        self.p = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)

    def measure(self, k, runs):
        self.p.stdin.write("%d %d\n" % (k, runs))
        self.p.stdin.flush()
        line = self.p.stdout.readline()
        if not line:
            raise RuntimeError("the floor process ended")
        r = json.loads(line)
        self.first = r["first"]  # at 1: each run's first output, ms from its start
        return r["lat"], r["wall"]

    def stop(self):
        self.p.stdin.close()
        self.p.wait(30)


# -- the sandbox surface: a pandas snippet's first output ----------------------------------------

def first_output(binary, state, preload, rounds, code=None):
    """Create + streamed exec of a pandas snippet (or `code`, printing 6) on a pool guest: ms
    to its first stdout."""
    os.makedirs(state, exist_ok=True)
    cp = ControlPlane(binary, state, ["--warm-pool", SHAPE + "=2"],
                      {"GUESTFLOW_PRELOAD": preload} if preload else None)
    port = cp.port
    try:

        def call(method, path, body=None, stream=False):
            c = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
            c.request(method, path, body=json.dumps(body) if body is not None else None,
                      headers={"Content-Type": "application/json"})
            return c, c.getresponse()

        def ready():
            return ready_guests(cp.get("/metrics")) >= 2

        out = []
        code = code or ("import pandas\nprint(pandas.DataFrame({'a': [1, 2, 3]})['a'].sum(), "
                        "flush=True)\n")
        for _ in range(rounds):
            wait_until(ready, 120, "the pool")
            t0 = time.monotonic()
            c, r = call("POST", "/v1/sandboxes", {"shape": SHAPE, "egress": ["240.0.0.0/4"]})
            gid = json.loads(r.read())["data"]["id"]
            c.close()
            c, r = call("POST", "/v1/sandboxes/%s/exec?stream=true" % gid,
                        {"cmd": "python3", "args": ["-c", code]})
            ms = None
            for raw in r:
                ev = json.loads(raw)
                if "stdout" in ev and ms is None:
                    ms = (time.monotonic() - t0) * 1000
                    if ev["stdout"].strip() != "6":
                        raise RuntimeError("pandas snippet printed %r" % ev["stdout"])
            c.close()
            c, r = call("DELETE", "/v1/sandboxes/" + gid)
            r.read()
            c.close()
            if ms is None:
                raise RuntimeError("the pandas snippet printed nothing")
            out.append(ms)
        return out
    finally:
        cp.stop()


# -- report ------------------------------------------------------------------------------------

def met(ok):
    return "met" if ok else "MISSED"


def head_commit():
    return subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"],
                          capture_output=True, text=True).stdout.strip()


def reporter():
    """A report's lines and the say() that prints a line and keeps it."""
    lines = []

    def say(s):
        print(s, flush=True)
        lines.append(s)

    return lines, say


def tree_dirty():
    """Whether the tree holds uncommitted changes (to tracked files) now."""
    return bool(subprocess.run(["git", "-C", ROOT, "status", "--porcelain",
                                "--untracked-files=no"], capture_output=True,
                               text=True).stdout.strip())


def run_header(commit, dirty):
    """The report line saying when, where, which tree and under what load a run started."""
    return "date %s UTC, host %s, tree %s%s, load at start %s" % (
        time.strftime("%Y-%m-%d %H:%M", time.gmtime()), socket.gethostname(), commit,
        " + uncommitted changes" if dirty else "", " ".join(open("/proc/loadavg").read().split()[:3]))


def store_result(out_dir, suffix, commit, dirty, lines, command):
    """Stores lines as DATE-HOST-COMMIT[-dirty]-SUFFIX.txt in out_dir, never over an existing
    file, with the command that made them at the end."""
    name = "%s-%s-%s%s-%s.txt" % (time.strftime("%Y-%m-%d", time.gmtime()), socket.gethostname(),
                                  commit, "-dirty" if dirty else "", suffix)
    os.makedirs(out_dir, exist_ok=True)  # --out-dir may name a directory not made yet
    path = os.path.join(out_dir, name)
    if os.path.exists(path):
        raise SystemExit("%s exists: results are never overwritten" % path)
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n\ncommand: " + command + "\n")
    log("stored " + path)


def load_line():
    """A result's closing line: the load averages when its measuring ended."""
    return "load at end %s" % " ".join(open("/proc/loadavg").read().split()[:3])


def store_tool_result(store, suffix, commit, dirty, lines, script):
    """A bench/flowpool tool's result (unless --no-store): bench/results/...-SUFFIX.txt, its
    command `python3 bench/flowpool/SCRIPT ARGS`."""
    if store:
        store_result(os.path.join(ROOT, "bench", "results"), suffix, commit, dirty, lines,
                     "python3 bench/flowpool/%s %s" % (script, " ".join(sys.argv[1:])))


def store(a, lines, argv, suffix, commit):
    """Stores the report as DATE-HOST-COMMIT[-dirty]-SUFFIX.txt, COMMIT the tree's at the start
    (dirty: the tree holds uncommitted changes now)."""
    store_result(a.out_dir, suffix, commit, tree_dirty(), lines,
                 "bench/run flowpool " + " ".join(argv))


def price_only(a, argv, binary, work, prefix, site, spec_path, graph, import_ms):
    lines, say = reporter()
    commit = head_commit()
    say("flowpool --price: a pooled flow run's path, step by step, beside the no-guest floor "
        "(`import lfx` %.0f ms on the host)" % import_ms)
    say(run_header(commit, tree_dirty()))
    pooled = price_path(binary, work, prefix, graph, a.price, say)
    fl = Floor(prefix, site, spec_path)
    try:
        fl.measure(1, 3)
        lat, _ = fl.measure(1, a.price)
        first = fl.first
    finally:
        fl.stop()
    r = pooled / p50(lat)
    say("no guest (floor) at 1: p50 %.1f ms, first output %.1f ms (%d runs)" % (
        p50(lat), p50(first), len(lat)))
    say("pooled p50 / no-guest p50 = %.2f (<= 1.2) %s" % (r, met(r <= 1.2)))
    say(load_line())
    if not a.smoke:
        store(a, lines, argv, "flowpool-path", commit)


def price8_only(a, argv, binary, work, prefix, site, spec_path, graph, import_ms):
    lines, say = reporter()
    commit = head_commit()
    say("flowpool --price8: pooled flow runs at 8 back to back, priced (`import lfx` %.0f ms "
        "on the host)" % import_ms)
    say("%s; pool kind %s, pool %d" % (
        run_header(commit, tree_dirty()),
        "ordinary" if os.environ.get("GUESTFLOW_FORK_POOL") == "0" else "fork-server", a.pool))
    price_at8(binary, work, prefix, site, spec_path, graph, a.price8, a.pool, say)
    say(load_line())
    if not a.smoke:
        store(a, lines, argv, "flowpool-price8", commit)


def main(argv):
    ap = argparse.ArgumentParser(prog="bench/run flowpool", description=__doc__.split("\n")[0])
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--binary", help="the guestflow binary (default: BUILD/apps/guestflow)")
    ap.add_argument("--runs", type=int, default=10,
                    help="runs per chunk at 1 concurrent (cold: a quarter of a chunk's runs x 4)")
    ap.add_argument("--runs8", type=int, default=48, help="runs per chunk at 8 concurrent")
    ap.add_argument("--rounds", type=int, default=4,
                    help="alternating pooled/floor chunks at each concurrency")
    ap.add_argument("--pool", type=int, default=8, help="pool guests (pooled)")
    ap.add_argument("--out-dir", default=os.path.join(ROOT, "bench", "results"))
    ap.add_argument("--smoke", action="store_true", help="a few runs, nothing stored")
    ap.add_argument("--price8", type=int, metavar="N", default=0,
                    help="only price pooled runs at 8 (N runs, twice: under perf's scheduler "
                         "record, and through the stamping relay) beside the floor at 8; "
                         "stored as ...-flowpool-price8.txt")
    ap.add_argument("--price", type=int, metavar="N", default=0,
                    help="only price the pooled run's path step by step (N runs at 1) beside "
                         "the floor; stored as ...-flowpool-path.txt")
    a = ap.parse_args(argv)
    if a.smoke:
        a.runs, a.runs8, a.rounds = 4, 8, 1
    binary = a.binary or os.path.join(a.build, "apps", "guestflow")
    commit = head_commit()  # the tree measured, even if HEAD moves during the run
    dirty = tree_dirty()
    started, load_at_start = time.time(), open("/proc/loadavg").read().split()[0]
    work = tempfile.mkdtemp(prefix="guestflow-flowpool-")
    lines, say = reporter()
    try:
        prefix = os.path.join(work, "engine")
        site = make_engine(prefix)
        graph = flow()
        spec_path = os.path.join(work, "spec.json")
        with open(spec_path, "w") as f:
            json.dump({"graph": graph, "inputs": [{"input_value": "run floor", "type": "chat"}],
                       "executor": "lfx"}, f)
        t0 = time.monotonic()
        subprocess.run([prefix + "/bin/python3", "-c", "import lfx"], check=True,
                       env={"PATH": "/usr/bin:/bin"})
        import_ms = (time.monotonic() - t0) * 1000

        if a.price8:
            return price8_only(a, argv, binary, work, prefix, site, spec_path, graph,
                               import_ms)
        if a.price:
            return price_only(a, argv, binary, work, prefix, site, spec_path, graph, import_ms)
        res, rounds = {}, {}
        # The floor lives beside the pooled server: pooled and floor are measured in
        # alternating chunks (the order flipped every round), so a drift of this shared host's
        # speed lands on both sides of each ratio instead of on one.
        fl = Floor(prefix, site, spec_path)
        try:
            fl.measure(1, 3)
            for mode in ("cold", "pooled"):
                state = os.path.join(work, "state-" + mode)
                pool = [] if mode == "cold" else ["--warm-pool", "%s@heavy=%d" % (SHAPE, a.pool)]
                cp = start_with_image(binary, state, prefix, pool)
                serve = Serve(binary, state, cp.url)

                def full():
                    return ready_guests(cp.get("/metrics")) >= a.pool

                try:
                    if mode == "pooled":
                        wait_until(full, 300, "the pool")
                    serve.run(graph, "warm up")
                    for k, runs in ((1, a.runs), (8, a.runs8)):
                        if mode == "cold":
                            n = max(4, runs * a.rounds // 4)
                            lat, wall = load(serve, graph, k, n)
                            res[(mode, k)] = {"p50": p50(lat), "rps": len(lat) / wall,
                                              "takes": 0, "misses": 0, "n": len(lat)}
                            log("%s k=%d: %s" % (mode, k, res[(mode, k)]))
                            continue
                        acc = {m: {"lat": [], "wall": 0.0, "takes": 0, "misses": 0}
                               for m in ("pooled", "floor")}
                        rounds[k] = []
                        for r in range(a.rounds):
                            got = {}
                            for m in in_turn(("pooled", "floor"), r):
                                # Every chunk starts with the pool full: no refill runs beside
                                # the floor's chunk, and the pooled chunk takes warm guests.
                                wait_until(full, 300, "the pool")
                                if m == "floor":
                                    lat, wall = fl.measure(k, runs)
                                else:
                                    # At 1 each pooled run comes once the pool is full again
                                    # (the latency of a warm take); at 8 back to back.
                                    before = pool_counts(cp.get("/metrics"))
                                    lat, wall = load(serve, graph, k, runs,
                                                     (lambda: wait_until(full, 300, "the pool"))
                                                     if k == 1 else None)
                                    after = pool_counts(cp.get("/metrics"))
                                    acc[m]["takes"] += after[0] - before[0]
                                    acc[m]["misses"] += after[1] - before[1]
                                acc[m]["lat"] += lat
                                acc[m]["wall"] += wall
                                got[m] = (p50(lat), len(lat) / wall)
                            rounds[k].append(got)
                            log("k=%d round %d: %s" % (k, r + 1, got))
                        for m, v in acc.items():
                            res[(m, k)] = {"p50": p50(v["lat"]), "n": len(v["lat"]),
                                           "rps": 0 if (m, k) == ("pooled", 1)
                                           else len(v["lat"]) / v["wall"]}
                            if m == "pooled":
                                res[(m, k)].update(takes=v["takes"], misses=v["misses"])
                            log("%s k=%d: %s" % (m, k, res[(m, k)]))
                finally:
                    serve.stop()
                    cp.stop()
        finally:
            fl.stop()

        snippet = {}
        for name, preload in (("no preload", ""), ("--preload pandas", "pandas")):
            snippet[name] = first_output(binary, os.path.join(work, "cp-" + name.replace(" ", "")),
                                         preload, 5 if a.smoke else 20)

        say("flowpool: whole-flow runs through guestflow serve on real guests, heavy engine "
            "(lfx stand-in + pandas + sympy; `import lfx` %.0f ms on the host)" % import_ms)
        say("date %s UTC, host %s, tree %s%s, load %s at start, %s at the end" % (
            time.strftime("%Y-%m-%d %H:%M", time.gmtime(started)), socket.gethostname(),
            commit, " + uncommitted changes" if dirty else "", load_at_start,
            open("/proc/loadavg").read().split()[0]))
        if a.binary:
            say("binary: %s (a copy)" % a.binary)
        say("flow ChatInput -> Uppercase -> ChatOutput, executor lfx, shape %s, pool %d" %
            (SHAPE, a.pool))
        say("pool kind: %s (GUESTFLOW_FORK_POOL), work dir under %s" % (
            "ordinary" if os.environ.get("GUESTFLOW_FORK_POOL") == "0" else "fork-server",
            tempfile.gettempdir()))
        say("pooled at 1: each run once the pool is full again (runs/s 0: paced); at 8: back "
            "to back; cold runs: a quarter as many")
        say("pooled and floor in %d alternating chunks of %d runs at 1 and %d at 8 (order flipped "
            "every round, the pool full before each chunk); per round, pooled/floor:" % (
                a.rounds, a.runs, a.runs8))
        for k, rs in sorted(rounds.items()):
            say("  at %d: %s" % (k, " ".join(
                "%.2f" % ((g["pooled"][0] / g["floor"][0]) if k == 1
                          else (g["pooled"][1] / g["floor"][1])) for g in rs)))
        say("%-8s %3s %6s %10s %9s %7s %7s" % ("mode", "k", "runs", "p50 ms", "runs/s", "takes",
                                              "misses"))
        for (mode, k), r in sorted(res.items(), key=lambda x: (x[0][0], x[0][1])):
            say("%-8s %3d %6d %10.1f %9.2f %7s %7s" % (mode, k, r["n"], r["p50"], r["rps"],
                                                        int(r.get("takes", 0)) if "takes" in r else "-",
                                                        int(r.get("misses", 0)) if "misses" in r else "-"))
        for name, xs in snippet.items():
            say("pandas snippet first output, pool, %s: p50 %.1f ms (%d rounds)" %
                (name, p50(xs), len(xs)))
        pooled1, floor1, cold1 = res[("pooled", 1)], res[("floor", 1)], res[("cold", 1)]
        pooled8, floor8 = res[("pooled", 8)], res[("floor", 8)]
        warm8 = pooled8["takes"] / max(1, pooled8["takes"] + pooled8["misses"])
        say("targets:")
        r1 = pooled1["p50"] / floor1["p50"]
        say("  pooled p50 / no-guest p50 = %.2f (<= 1.2) %s" % (r1, met(r1 <= 1.2)))
        rc = cold1["p50"] / pooled1["p50"]
        say("  cold p50 / pooled p50 = %.1f (>= 10) %s" % (rc, met(rc >= 10)))
        say("  warm takes at 8 concurrent = %.0f%% (>= 90%%) %s" % (100 * warm8, met(warm8 >= 0.9)))
        rt = pooled8["rps"] / floor8["rps"]
        say("  throughput at 8, pooled / no-guest = %.2f (>= 0.8) %s" % (rt, met(rt >= 0.8)))
        sp = p50(snippet["--preload pandas"])
        say("  pandas snippet first output with --preload pandas = %.1f ms p50 (<= 20) %s" %
            (sp, met(sp <= 20)))
        if not a.smoke:
            store(a, lines, argv, "flowpool", commit)
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main(sys.argv[1:])
