#!/usr/bin/env python3
"""The fault-injecting soak: mixed runs through a real `guestflow serve` against a real
local control plane that answers a share of every kind of call wrongly
(`guestflow control-plane --faults`), with the control plane and then serve SIGKILLed
mid-soak and restarted, and a second runtime (another owner) beside it whose guests must
never be touched. Every answer is judged against what its run must give (stdout bytes,
exit code, a flow's output text): a run ends with the right answer or a typed error, and a
wrong answer fails the soak at once, naming the run. The kills assert what they hit (runs
and guests in flight at least a floor) and what came back (correct runs after them); each
phase has a floor on correct completions. Afterwards: every run ended with exactly one terminal outcome, no
ephemeral guest is left, the reusable set is what the runs made, and nothing of this soak's
state dir is left on the host (guest process, cgroup, netns, workspace).

Sizes: --size smoke (ctest, a few minutes on 2 cores) or --size long (2,000 runs at 100
concurrent); --runs/--concurrency override. Exit 0 when every check held; the summary (the
counts tests/soak/README.md quotes) is printed as JSON on stdout's last line.
Python 3 standard library only.
"""

import argparse
import collections
import glob
import http.client
import json
import os
import random
import select
import shutil
import signal
import socket
import sqlite3
import string
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor

KNOWN_CODES = {
    "bad_request", "policy_refused", "unavailable", "transient", "paused", "not_found",
    "egress_drift", "artifact_too_large", "timeout", "oom", "capacity", "guest_failed",
    "cancelled", "killed",
}
# messages/http_status.hpp: the status an answer carrying a code has on every surface.
STATUS_OF = {
    "bad_request": {400, 413}, "policy_refused": {401, 403}, "not_found": {404},
    "paused": {409}, "egress_drift": {409}, "cancelled": {409}, "artifact_too_large": {413},
    "capacity": {429}, "guest_failed": {502}, "unavailable": {503}, "transient": {503},
    "timeout": {504}, "oom": {507},
}
OPS = ["create", "exec", "files", "delete", "pause", "resume", "list", "get"]
KINDS = ["5xx", "429", "drop", "timeout", "lost"]
ENDED = {"destroyed", "failed"}  # every other status (a persistent guest's "stopped" too) is live


def log(*parts):
    print(time.strftime("%H:%M:%S"), *parts, file=sys.stderr, flush=True)


def eventually(check, deadline_s, interval_s=0.2):
    """Polls `check` until it returns truthy or the deadline passes; its last value."""
    end = time.monotonic() + deadline_s
    while True:
        value = check()
        if value or time.monotonic() >= end:
            return value
        time.sleep(interval_s)


def fault_spec(share_per_kind, hold, seed):
    items = [f"{op}:{kind}={share_per_kind}" for op in OPS for kind in KINDS]
    items += ["any:delay=0-300ms@0.1", f"seed={seed}"]
    if hold:
        items.append(f"hold={hold}")
    return ",".join(items)


class Process:
    """A guestflow child: started, its `listening on URL` line awaited, killed by pid."""

    def __init__(self, binary, args, env, stderr_path, name):
        self.name = name
        self.stderr_path = stderr_path
        self.stderr = open(stderr_path, "ab")
        self.proc = subprocess.Popen([binary] + args, env=env, stdout=subprocess.PIPE,
                                     stderr=self.stderr, stdin=subprocess.DEVNULL)
        self.url = self._listening(60)
        if not self.url:
            self.proc.kill()
            self.proc.wait()
            raise RuntimeError(f"{name} did not start; see {stderr_path}")
        self.port = int(self.url.rsplit(":", 1)[1]) if self.url.startswith("http") else 0

    def _listening(self, deadline_s):
        end = time.monotonic() + deadline_s
        line = b""
        fd = self.proc.stdout.fileno()
        while time.monotonic() < end:
            ready, _, _ = select.select([fd], [], [], 0.5)
            if not ready:
                if self.proc.poll() is not None:
                    return None
                continue
            chunk = os.read(fd, 1)
            if not chunk:
                return None
            line += chunk
            if line.endswith(b"\n"):
                text = line.decode().strip()
                if text.startswith("listening on "):
                    return text[len("listening on "):]
                line = b""
        return None

    def signal(self, sig):
        if self.proc.poll() is None:
            os.kill(self.proc.pid, sig)

    def wait(self, timeout_s):
        try:
            return self.proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            return None

    def close(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self.stderr.close()


class ControlPlaneView:
    """The soak's own look at the control plane (through its TCP port): every call is
    retried until a good answer, since the control plane injects faults into it too."""

    def __init__(self):
        self.port = None

    def call(self, method, path, deadline_s=60, valid=lambda data: True):
        end = time.monotonic() + deadline_s
        while True:
            try:
                c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=5)
                c.request(method, path)
                r = c.getresponse()
                body = r.read()
                c.close()
                # A held call ends with an answer that is not the endpoint's: not an answer.
                if r.status == 200 and valid(json.loads(body)["data"]):
                    return json.loads(body)["data"]
                if r.status == 404:
                    return None
            except Exception:
                pass
            if time.monotonic() >= end:
                raise RuntimeError(f"control plane: {method} {path} never answered")
            time.sleep(0.1)

    def guests(self):
        """Every guest not destroyed, as {id: (name, status)}."""
        out, offset = {}, 0
        while True:
            page = self.call("GET", f"/v1/sandboxes?limit=1000&offset={offset}",
                             valid=lambda d: "data" in d and "pagination" in d)
            rows = page["data"]
            for g in rows:
                if g["status"] not in ENDED:
                    out[g["id"]] = (g["name"], g["status"])
            offset += len(rows)
            if not rows or offset >= page["pagination"]["total"]:
                return out

    def delete(self, gid):
        self.call("DELETE", f"/v1/sandboxes/{gid}")


class Serve:
    """One `guestflow serve` (a runtime of one owner) and calls to it."""

    def __init__(self, soak, owner, state_dir, name):
        self.soak, self.owner, self.state_dir, self.name = soak, owner, state_dir, name
        self.proc = None
        self.restarts = 0

    def start(self):
        env = dict(os.environ)
        env.update({
            "GUESTFLOW_CONTROL_PLANE_URL": self.soak.cp_url,
            "GUESTFLOW_STATE_DIR": self.state_dir,
            "GUESTFLOW_OWNER": self.owner,
            "GUESTFLOW_SWEEP_GRACE_SECONDS": "0",  # a restart reaps its predecessor's guests
            "GUESTFLOW_SHUTDOWN_SECONDS": str(self.soak.args.shutdown_seconds),
            # Room for every run the soak keeps in flight: a serve full of slots answers 429 at
            # once, and the refused runs would spin through the soak's run count unmeasured.
            "GUESTFLOW_MAX_INFLIGHT": str(self.soak.args.concurrency * 2 + 20),
            # Likewise a session guest for each session run in flight (a quarter of them): at
            # the default 3, 25 sessions at once were 40% `capacity`, and the 2C runs after
            # serve A's restart, started all at once, fell below their floor on that alone.
            "GUESTFLOW_SESSION_REPLICAS": str(self.soak.args.session_replicas),
            "GUESTFLOW_TOKEN": self.soak.token,
            # Flows run in a guest that fits a host's memory budget 100 at a time.
            "CREATEOS_EXECUTOR_SHAPE": "s-1vcpu-1gb",
        })
        env.pop("GUESTFLOW_FAULTS", None)
        self.proc = Process(self.soak.binary, ["serve", "--listen", "127.0.0.1:0"], env,
                            os.path.join(self.soak.dir, f"{self.name}.stderr"), self.name)
        self.restarts += 1

    def connection(self, timeout_s):
        return http.client.HTTPConnection("127.0.0.1", self.proc.port, timeout=timeout_s)

    def headers(self):
        return {"Authorization": f"Bearer {self.soak.token}",
                "Content-Type": "application/json"}

    def metric(self, name):
        c = self.connection(10)
        c.request("GET", "/metrics", headers=self.headers())
        text = c.getresponse().read().decode()
        c.close()
        for line in text.splitlines():
            if line.startswith(name + " "):
                return float(line.split()[1])
        return None

    def owes_nothing(self):
        try:
            return self.metric("guestflow_guests_tracked") == 0 and \
                self.metric("guestflow_guests_pending_delete") == 0
        except Exception:
            return False


# A guest program's own end that a fault can cause (its guest killed under it, a held call
# past its limit): typed, as bridge/API.md's "Outcomes of a guest program" classes them.
TYPED_EXITS = {-1: "timeout", 137: "killed"}


# The bound on a run's time, per kind, in seconds: the sum of the deadlines of the calls on
# its path (each control-plane call ends by its deadline, whatever a fault does: a held call
# (hold 150 s, past every deadline) ends at it, a retried one retries inside it), plus the
# program's own limit, plus SLACK for the HTTP hop and actor scheduling on a loaded host.
# The deadlines are the runtime's (actors/controlplane.hpp controlplane_timeouts: create
# 120, files 120, remove 60, query 30 per list page; exec: the run's timeout_seconds + 30 s
# grace + 10 s backstop, actors/execution.cpp; a session's mkdir exec 30 and its command
# timeout + 40, actors/session_manager.cpp, session_task.cpp; a session call's CAF limit 120
# on create and list). A run over its bound waited in serve outside every call's deadline.
SLACK = 20
CREATE, FILES, REMOVE, CAF_CALL = 120, 120, 60, 120
# A run answered `capacity` (429) is tried again, as a client does, for up to this long in
# all: after Retry-After (serve sends 1 s) or its own backoff, whichever is longer. The
# refusals are counted (by the cap that answered), and a run still refused at the end of this
# wait ends `capacity` and counts against its phase's floor. The attempt that answers is
# judged against its kind's bound; the time before it (refused attempts and waits) is at
# most this: a run's time is its kind's bound plus CAPACITY_WAIT at most.
CAPACITY_WAIT = 120


def refusing_cap(message):
    """Which cap a `capacity` answer's message names."""
    for needle, cap in (("GUESTFLOW_MAX_INFLIGHT", "serve-inflight"),
                        ("GUESTFLOW_SESSION_REPLICAS", "session-replicas"),
                        ("--memory-budget-mb", "cp-memory-budget"),
                        ("--max-guests", "cp-max-guests"),
                        ("fault injected", "injected-429")):
        if needle in message:
            return cap
    return "other"


def exec_bound(timeout_seconds):
    return timeout_seconds + 30 + 10


def run_bounds():
    """{key: seconds}: each kind's bound (and each session call's)."""
    code = CREATE + FILES + exec_bound(60) + REMOVE  # create, the program's upload, exec, delete
    # A session: acquire = create (a refused one: its adopting list) + DeerFlow's mkdir exec;
    # then the command (stream: timeout 60 + 30 + 10), then the DELETE (remove).
    acquire = CREATE + CAF_CALL + 30
    command = exec_bound(60)
    return {
        "code": code + SLACK,
        "component": code + SLACK,  # reuse "none": a code run's path
        # reuse "flow": runs of one flow take its one guest in turn, so a run may queue behind
        # the others: bounded by serve's own run limit (timeout_seconds + 10 min, service.cpp).
        "component-reuse": 60 + 600 + SLACK,
        "flow": CREATE + FILES + exec_bound(120) + REMOVE + SLACK,  # one bundle upload
        "session-acquire": acquire + SLACK,
        "session-command": command + SLACK,
        "session-delete": REMOVE + SLACK,
        "session": acquire + command + REMOVE + SLACK,
    }


def reuses(i):
    """Whether component run i asks for `reuse: "flow"`: every other component run. (Not
    i % 2: with four kinds every component run's i is 2 mod 4, and all of them reused.)"""
    return (i // 4) % 2 == 0


def program_outcome(r, expected_stdout):
    """A 200 run answer judged: `success` only with exit 0 and exactly the expected stdout;
    `exit:CLASS` for a typed end of the program (timeout, killed, oom); else `wrong:…`."""
    code, stdout = r.get("exit_code"), r.get("stdout")
    if code == 0 and stdout == expected_stdout:
        return "success"
    if code in TYPED_EXITS and r.get("outcome", TYPED_EXITS[code]) in ("timeout", "killed",
                                                                       "oom"):
        return f"exit:{r.get('outcome', TYPED_EXITS[code])}"
    return f"wrong:exit {code}, stdout {stdout!r} (expected exit 0, {expected_stdout!r})"


def texts(value):
    """Every string under a `text` key in a JSON value."""
    if isinstance(value, dict):
        for k, v in value.items():
            if k == "text" and isinstance(v, str):
                yield v
            else:
                yield from texts(v)
    elif isinstance(value, list):
        for v in value:
            yield from texts(v)


# The message of the last typed error this thread saw (a run is one thread): run-times.tsv
# says why a run was refused (which cap answered `capacity`, say).
last_error = threading.local()


def error_outcome(status, body):
    """The typed error of a non-2xx answer, or an `untyped:` outcome saying what is wrong."""
    try:
        err = json.loads(body)["error"]
        code = err["code"]
        last_error.message = str(err.get("message", ""))[:200]
    except Exception:
        return f"untyped:status {status} without an error body"
    if code not in KNOWN_CODES:
        return f"untyped:unknown code {code}"
    if code in STATUS_OF and status not in STATUS_OF[code]:
        return f"untyped:{code} with status {status}"
    return f"error:{code}"


class Soak:
    def __init__(self, args):
        self.args = args
        self.binary = args.guestflow
        self.dir = tempfile.mkdtemp(prefix="guestflow-soak-", dir=args.tmp)
        os.chmod(self.dir, 0o711)
        self.cp_state = os.path.join(self.dir, "cp")
        self.cp_socket = os.path.join(self.dir, "cp.sock")
        self.cp_url = f"unix://{self.cp_socket}"
        self.token = "soak-" + "".join(random.choices(string.ascii_lowercase, k=8))
        tag = "".join(random.choices(string.ascii_lowercase + string.digits, k=4))
        self.tag = tag
        self.cp = None
        self.cp_starts = 0
        self.view = ControlPlaneView()
        self.a = Serve(self, "sa" + tag, os.path.join(self.dir, "runtime-a"), "serve-a")
        self.b = Serve(self, "sb" + tag, os.path.join(self.dir, "runtime-b"), "serve-b")
        self.outcomes = collections.Counter()  # (kind, outcome) → runs
        self.phase_outcomes = collections.Counter()  # (phase, kind, outcome) → runs
        self.phase = "mixed"
        self.untyped = []
        self.wrong = threading.Event()  # a wrong answer: the soak stops starting runs
        self.wrong_runs = []
        self.bounds = run_bounds()
        self.bounds.update(args.bound)
        self.slow_runs = []  # runs (or session calls) over their bound: each fails the soak
        self.slowest = collections.Counter()  # bound key → the slowest judged run's seconds
        self.refusals = collections.Counter()  # (phase, cap) → `capacity` answers tried again
        self.right_after_refusal = collections.Counter()  # phase → runs right after a refusal
        self.capacity_wait_max = 0.0
        self.times = open(os.path.join(self.dir, "run-times.tsv"), "w", buffering=1)
        self.kills = {}  # what each kill hit and what came back
        self.reusable_names = collections.defaultdict(set)  # flow id → guest names answered
        self.reuse_flow_ids = set()  # flow ids a run asked a reusable guest for
        self.lock = threading.Lock()
        self.failures = []
        self.started_runs = 0
        self.finished_runs = 0
        self.sessions_to_release = set()
        self.in_flight_at_serve_kill = 0
        self.serve_killed = threading.Event()
        self.b_hung_up = threading.Event()
        self.serve_stops_past_bound = 0
        self.load_start = os.getloadavg()
        self.sessions = False

    # ---- processes -----------------------------------------------------------------

    def start_cp(self, faults=True):
        env = dict(os.environ)
        env.pop("GUESTFLOW_FAULTS", None)
        args = ["control-plane", "--state-dir", self.cp_state, "--listen", "127.0.0.1:0",
                "--unix-socket", self.cp_socket, "--workers", str(self.args.cp_workers)]
        if faults and self.args.fault_share > 0:
            args += ["--faults", fault_spec(self.args.fault_share, self.args.hold,
                                            self.args.seed)]
        self.cp = Process(self.binary, args, env,
                          os.path.join(self.dir, f"cp-{self.cp_starts}.stderr"), "control plane")
        self.cp_starts += 1
        self.view.port = self.cp.port

    def fail(self, what):
        log("CHECK FAILED:", what)
        self.failures.append(what)

    # ---- runs ----------------------------------------------------------------------

    def record(self, kind, outcome, i=None):
        with self.lock:
            self.outcomes[(kind, outcome)] += 1
            self.phase_outcomes[(self.phase, kind, outcome)] += 1
            if outcome.startswith("untyped:"):
                self.untyped.append((kind, outcome))
            if outcome.startswith("wrong:"):
                self.wrong_runs.append(f"{kind} run {i}: {outcome[len('wrong:'):]}")
                self.wrong.set()
        if outcome.startswith("wrong:"):
            self.fail(f"wrong answer from {kind} run {i} (phase {self.phase}): "
                      f"{outcome[len('wrong:'):]}")

    def skew(self, i):
        """--wrong-answer-at: run i's program gives another answer than the soak expects
        (the soak's own test: a wrong answer must fail it at once)."""
        return 1 if i in self.args.wrong_answer_at else 0

    def run_code(self, serve, i, sleep_s=0, conns=None):
        value = i * 7 + self.skew(i)
        if i in self.args.slow_run_at:  # its own test: this run's program outlasts its bound
            sleep_s = self.bounds["code"] + 5
        program = f"import time\ntime.sleep({sleep_s})\nprint({value})" if sleep_s else \
            f"print({value})"
        body = json.dumps({"code": program, "timeout_seconds": 60 + sleep_s})
        status, data = self.post(serve, "/v1/sandbox/run", body, conns)
        if status is None:
            return data
        if status != 200:
            return error_outcome(status, data)
        return program_outcome(json.loads(data), f"{i * 7}\n")

    def run_component(self, serve, i, flow_id=None):
        reuse = "flow" if reuses(i) else "none"
        flow_id = flow_id or f"soak-flow-{i % self.args.reusable}"
        if reuse == "flow":
            with self.lock:
                self.reuse_flow_ids.add(flow_id)
        body = json.dumps({"flow_id": flow_id, "component_id": "soak-component",
                           "reuse": reuse, "program": f"print({i + 1 + self.skew(i)})",
                           "timeout_seconds": 60})
        status, data = self.post(serve, "/v1/components/run", body)
        if status is None:
            return data
        if status != 200:
            return error_outcome(status, data)
        r = json.loads(data)
        if reuse == "flow" and r.get("reusable") and r.get("guest"):
            with self.lock:
                self.reusable_names[flow_id].add(r["guest"])
        return program_outcome(r, f"{i + 1}\n")

    def run_flow(self, serve, i):
        with open(os.path.join(self.args.source, "examples", "flows", "hello.json")) as f:
            flow = json.load(f)
        expected = f"soak {i}"
        body = json.dumps({"flow": flow, "inputs": expected + "!" * self.skew(i), "stream": True,
                           "timeout_seconds": 120})
        try:
            c = serve.connection(self.args.call_timeout)
            c.request("POST", "/v1/runs", body=body, headers=serve.headers())
            r = c.getresponse()
            if r.status != 200:
                if r.status == 429:
                    last_error.retry_after = r.getheader("Retry-After")
                out = error_outcome(r.status, r.read())
                c.close()
                return out
            events = []
            for raw in r:
                line = raw.strip()
                if not line:
                    continue  # a keepalive
                events.append(json.loads(line))
            c.close()
        except Exception as e:  # the stream broke before its terminal event
            return self.transport_outcome(e)
        terminal = [e for e in events if e.get("type") in ("complete", "error")]
        if len(terminal) != 1 or events[-1] is not terminal[0]:
            return f"untyped:{len(terminal)} terminal events"
        if [e.get("seq") for e in events] != list(range(len(events))):
            return "untyped:seq not gapless"
        end = terminal[0]
        if end["type"] == "complete":
            # Chat Input → Chat Output: the output's message is the input, exactly.
            got = list(texts(end.get("outputs")))
            if end.get("ok", True) is not False and got and all(t == expected for t in got):
                return "success"
            return f"wrong:complete with ok {end.get('ok')}, output texts {got[:3]!r} " \
                f"(expected [{expected!r}])"
        code = end.get("code")
        last_error.message = str(end.get("message", ""))[:200]
        if code not in KNOWN_CODES:
            return f"untyped:unknown code {code}"
        return f"error:{code}"

    def run_session(self, serve, i, calls):
        """Acquire, one command, delete: a session's three calls (each timed in `calls`), one
        outcome."""
        t = time.monotonic()
        status, data = self.post(serve, "/v1/sessions", json.dumps(
            {"user_id": f"soak-{self.tag}", "thread_id": f"thread-{i}"}))
        calls["acquire"] = time.monotonic() - t
        if status is None or status != 200:
            outcome = data if status is None else error_outcome(status, data)
            # Its guest may exist all the same (released at the end), unless the pool refused
            # it before any create (every replica active; a 429 of the control plane, also
            # `capacity`, may come after the create).
            if not (status == 429 and b"GUESTFLOW_SESSION_REPLICAS" in data):
                with self.lock:
                    self.sessions_to_release.add(i)
            return outcome
        sid = json.loads(data)["session_id"]
        t = time.monotonic()
        status, data = self.post(serve, f"/v1/sessions/{sid}/commands",
                                 json.dumps({"command": f"echo {i * 3 + self.skew(i)}",
                                             "timeout_seconds": 60}))
        calls["command"] = time.monotonic() - t
        outcome = data if status is None else error_outcome(status, data) if status != 200 \
            else program_outcome(json.loads(data), f"{i * 3}\n")
        t = time.monotonic()
        status, body = self.delete_session(serve, sid)
        calls["delete"] = time.monotonic() - t
        if status != 200:
            with self.lock:  # a session guest is persistent: only a DELETE ends it
                self.sessions_to_release.add(i)
            if outcome == "success":
                outcome = body if status is None else "delete " + error_outcome(status, body)
        return outcome

    def delete_session(self, serve, sid):
        try:
            c = serve.connection(self.args.call_timeout)
            c.request("DELETE", f"/v1/sessions/{sid}", headers=serve.headers())
            r = c.getresponse()
            body = r.read()
            c.close()
            return r.status, body
        except Exception as e:
            return None, self.transport_outcome(e)

    def release_sessions(self):
        """What a client does with the sessions whose acquire or DELETE a fault failed: it
        acquires each thread again and deletes it, until a DELETE answers 200 (session
        guests are persistent; nothing else deletes them before their retention). Up to eight
        threads at a time, fewer than the replicas (an acquire that adopts a guest lists every
        guest under the faults: one after another, a long run's took over 10 minutes)."""

        def release(i):
            for _ in range(20):
                status, data = self.post(self.a, "/v1/sessions", json.dumps(
                    {"user_id": f"soak-{self.tag}", "thread_id": f"thread-{i}"}))
                if status == 200 and \
                        self.delete_session(self.a, json.loads(data)["session_id"])[0] == 200:
                    return None
                time.sleep(0.2)
            return i

        with ThreadPoolExecutor(max_workers=max(1, min(8, self.args.session_replicas - 1))) \
                as pool:
            left = [i for i in pool.map(release, sorted(self.sessions_to_release))
                    if i is not None]
        log(f"released {len(self.sessions_to_release) - len(left)} sessions a fault had "
            f"left; could not: {left}")
        if left:
            self.fail(f"sessions of threads {left} could not be deleted in 20 tries")

    def sessions_exist(self):
        status, _ = self.post(self.a, "/v1/sessions", "{}")  # 400 (no user) where it exists
        return status not in (None, 404, 405)

    def transport_outcome(self, e, serve=None):
        if self.serve_killed.is_set():
            return "serve-killed"  # its server was SIGKILLed under it: no answer is right
        if serve is self.b and self.b_hung_up.is_set():
            return "hung-up-by-soak"  # B's long run, ended by closing its connection
        return f"untyped:transport {type(e).__name__}: {e}"

    def post(self, serve, path, body, conns=None):
        try:
            c = serve.connection(self.args.call_timeout)
            if conns is not None:
                conns.append(c)
            c.request("POST", path, body=body, headers=serve.headers())
            r = c.getresponse()
            data = r.read()
            c.close()
            if r.status == 429:
                last_error.retry_after = r.getheader("Retry-After")
            return r.status, data
        except Exception as e:
            return None, self.transport_outcome(e, serve)

    def one_run(self, serve, i, sleep_s=0):
        kinds = ["code", "flow", "component"] + (["session"] if self.sessions else [])
        kind = "code" if sleep_s else kinds[i % len(kinds)]
        if self.wrong.is_set():  # a wrong answer already failed the soak: start nothing more
            return "skipped"
        with self.lock:
            self.started_runs += 1
        t0 = time.monotonic()
        refusals = []  # the cap of each `capacity` answer this run was tried again after
        while True:
            t_try = time.monotonic()
            calls = {}  # a session's calls: name → seconds
            last_error.message, last_error.retry_after = "", None
            if kind == "code":
                outcome = self.run_code(serve, i, sleep_s)
            elif kind == "flow":
                outcome = self.run_flow(serve, i)
            elif kind == "session":
                outcome = self.run_session(serve, i, calls)
            else:
                outcome = self.run_component(serve, i)
            if outcome != "error:capacity" or self.wrong.is_set():
                break
            refusals.append(refusing_cap(last_error.message))
            wait = min(8.0, 0.5 * 2 ** (len(refusals) - 1)) * random.uniform(0.5, 1.5)
            try:
                wait = max(wait, float(last_error.retry_after))
            except (TypeError, ValueError):
                pass  # none given (a flow's stream answers 200 and ends `capacity`)
            if time.monotonic() - t0 + wait > CAPACITY_WAIT:
                refusals[-1] += " (gave up)"
                break
            time.sleep(wait)
        with self.lock:
            for cap in refusals:
                self.refusals[(self.phase, cap)] += 1
            if refusals and outcome == "success":
                self.right_after_refusal[self.phase] += 1
            self.capacity_wait_max = max(self.capacity_wait_max, round(t_try - t0, 1))
        self.record(kind, outcome, i)
        self.judge_time(kind, i, outcome, time.monotonic() - t_try, sleep_s, calls,
                        t_try - t0, refusals)
        with self.lock:
            self.finished_runs += 1
        return outcome

    def judge_time(self, kind, i, outcome, seconds, sleep_s, calls, waited=0.0, refusals=()):
        """A run (or a session's call) slower than its bound fails the soak at once, naming
        it, as a wrong answer does; a run its server was SIGKILLed under is not judged."""
        if outcome in ("serve-killed", "skipped", "hung-up-by-soak"):
            return
        key = "component-reuse" if kind == "component" and reuses(i) else kind
        over = []
        bound = self.bounds[key] + sleep_s
        if seconds > bound:
            over.append(f"took {seconds:.0f} s, over its bound {bound} s")
        for call, took in calls.items():
            b = self.bounds[f"session-{call}"]
            if took > b:
                over.append(f"its {call} took {took:.0f} s, over the bound {b} s")
        with self.lock:
            # Every judged run's time, for a look afterwards (kept with --keep).
            why = getattr(last_error, "message", "") if outcome != "success" else ""
            self.times.write(f"{self.phase}\t{kind}\t{i}\t{outcome}\t{seconds:.1f}\t" +
                             " ".join(f"{c}={t:.1f}" for c, t in calls.items()) + "\t" +
                             why.replace("\t", " ").replace("\n", " ") + "\t" +
                             (f"refused {len(refusals)}: {' '.join(refusals)}; waited "
                              f"{waited:.1f}" if refusals else "") + "\n")
            self.slowest[key] = max(self.slowest[key], round(seconds, 1))
            for call, took in calls.items():
                self.slowest[f"session-{call}"] = max(self.slowest[f"session-{call}"],
                                                      round(took, 1))
            if not over:
                return
            what = f"{kind} run {i}: " + "; ".join(over) + f" (ended {outcome})"
            self.slow_runs.append(what)
            self.wrong.set()
        self.fail(f"slow run: {what} (phase {self.phase})")

    # ---- phases --------------------------------------------------------------------

    def phase_mixed(self):
        """N mixed runs at C; the control plane SIGKILLed and restarted half-way."""
        n, c = self.args.runs, self.args.concurrency
        done = [0]
        killed = threading.Event()
        restarted = threading.Event()
        after = collections.Counter()  # outcomes of the runs that started after the restart

        def one(i):
            late = restarted.is_set()
            out = self.one_run(self.a, i)
            with self.lock:
                done[0] += 1
                if late:
                    after[out] += 1
                kill_now = done[0] == n // 2 and not killed.is_set() and not self.wrong.is_set()
                if kill_now:
                    killed.set()
            if kill_now:
                with self.lock:
                    in_flight = self.started_runs - self.finished_runs
                tracked = self.a_tracked()
                self.kills["control_plane"] = {"runs_in_flight": in_flight,
                                               "guests_tracked": tracked}
                log(f"SIGKILL control plane (pid {self.cp.proc.pid}) with {in_flight} runs "
                    f"in flight, serve A tracking {tracked} guests")
                self.cp.signal(signal.SIGKILL)
                self.cp.wait(30)
                self.cp.close()
                self.start_cp()
                restarted.set()
                log("control plane restarted")
            return out

        log(f"phase 1: {n} mixed runs at {c} concurrent")
        self.phase = "mixed"
        with ThreadPoolExecutor(max_workers=c) as pool:
            list(pool.map(one, range(n)))
        if self.wrong.is_set():
            return
        hit = self.kills.get("control_plane", {})
        floor = max(1, c // 2)
        if hit.get("runs_in_flight", 0) < floor:
            self.fail(f"the control plane's SIGKILL hit {hit.get('runs_in_flight', 0)} runs in "
                      f"flight, below the floor {floor}: it tested nothing")
        if hit.get("guests_tracked", 0) < 1:
            self.fail("the control plane's SIGKILL hit no guest serve A was tracking")
        hit["correct_after_restart"] = after["success"]
        hit["runs_after_restart"] = sum(after.values())
        if after["success"] < 1:
            self.fail(f"no run started after the control plane's restart came back right: "
                      f"{dict(after)}")
        self.check_floor("mixed", n)

    def check_floor(self, phase, runs, per_kind=True):
        """At least --success-floor of a phase's runs ended with the right answer, and (with
        per_kind) each kind that ran there at least once."""
        with self.lock:
            rows = [(k, o, n) for (ph, k, o), n in self.phase_outcomes.items() if ph == phase]
        ok = sum(n for _, o, n in rows if o == "success")
        floor = int(self.args.success_floor * runs)
        log(f"phase {phase}: {ok} of {runs} runs correct (floor {floor})")
        if ok < floor:
            self.fail(f"phase {phase}: {ok} correct runs of {runs}, below the floor {floor} "
                      f"(--success-floor {self.args.success_floor})")
        for kind in sorted({k for k, _, _ in rows}) if per_kind else []:
            if not any(k == kind and o == "success" for k, o, _ in rows):
                self.fail(f"phase {phase}: no {kind} run ended with the right answer")

    def phase_serve_kill(self):
        """Runs in flight when serve A is SIGKILLed; A restarted reaps them; B untouched.
        B's long run is exposed to the exec faults too (a dropped or lost exec stream ends
        it `transient`: seen in one ctest smoke run of four): a phase whose B run ended
        before A's sweep was judged tells nothing about B, so it is run once more, and only
        a second such phase fails the soak as inconclusive."""
        if self.serve_kill_once(last=False):
            return
        log("serve-kill phase once more: runtime B's long run ended before A's sweep was judged")
        self.serve_kill_once(last=True)

    def serve_kill_once(self, last):
        """One serve-kill phase; False when B's long run ended too early to judge B."""
        self.b_hung_up.clear()
        c = self.args.concurrency
        b_pool = ThreadPoolExecutor(max_workers=2)
        b_comp = b_pool.submit(self.run_component, self.b, 0, f"soak-other-{self.tag}")
        # B's long run, tried again until its guest runs (a fault may refuse its create).
        b_owner = f"-{self.b.owner}-"
        b_before, b_long, b_conns = {}, None, []
        for attempt in range(8):
            # Sleeps past anything this phase waits for; hung up on once A's sweep is judged.
            b_long = b_pool.submit(self.run_code, self.b, 10_000 + attempt, self.args.b_sleep,
                                   b_conns)
            b_before = eventually(
                lambda: b_long.done() or {g: v for g, v in self.view.guests().items()
                                          if b_owner in v[0] and v[1] == "running"}, 60, 0.5)
            if isinstance(b_before, dict) and b_before:
                break
            self.record("other-owner-long", b_long.result() if b_long.done() else "never ran")
            b_before = {}
        if not b_before:
            self.fail("runtime B's long run never had a running guest")
        log(f"runtime B holds {len(b_before)} guest(s); phase 2: {c} runs, then SIGKILL serve")
        pool = ThreadPoolExecutor(max_workers=c)
        futures = [pool.submit(self.one_run, self.a, 100_000 + i, self.args.kill_sleep)
                   for i in range(c)]
        a_owner = f"-{self.a.owner}-"
        self.phase = "serve-kill"
        floor = max(1, c // 2)
        eventually(lambda: self.a_tracked() >= floor, 60, 0.2)
        self.in_flight_at_serve_kill = self.a_tracked()
        if self.in_flight_at_serve_kill < floor:
            self.fail(f"serve A was SIGKILLed with {self.in_flight_at_serve_kill} guests "
                      f"tracked, below the floor {floor}: the kill tested nothing")
        self.kills["serve_a"] = {"guests_tracked": self.in_flight_at_serve_kill}
        self.serve_killed.set()
        log(f"SIGKILL serve A with {self.in_flight_at_serve_kill} guests tracked")
        self.a.proc.signal(signal.SIGKILL)
        self.a.proc.wait(30)
        self.a.proc.close()
        for f in futures:
            f.result()
        pool.shutdown()
        self.serve_killed.clear()
        self.a.start()
        log("serve A restarted: its start sweep reaps its predecessor's guests")
        left = eventually(lambda: not any(a_owner in v[0] for v in self.view.guests().values()),
                          self.args.sweep_deadline, 1)
        if not left:
            self.fail("serve A's orphans were not reaped after its restart: " + str(
                [v for v in self.view.guests().values() if a_owner in v[0]]))
        # What came back: the restarted serve A answers runs right again.
        self.phase = "after-serve-kill"
        with ThreadPoolExecutor(max_workers=c) as again:
            outs = list(again.map(lambda i: self.one_run(self.a, 200_000 + i), range(2 * c)))
        self.kills["serve_a"]["correct_after_restart"] = outs.count("success")
        self.check_floor("after-serve-kill", 2 * c, per_kind=False)
        now = self.view.guests()
        conclusive = not b_long.done()
        if not conclusive:  # B deleted its own guest: nothing to tell about A
            if last:
                self.fail("inconclusive: runtime B's long run ended before A's sweep did "
                          "(raise b_sleep)")
            b_before = {}
        for gid, (name, _) in b_before.items():
            if gid not in now:
                self.fail(f"runtime B's guest {name} ({gid}) was deleted while B ran")
        log(f"runtime B's {len(b_before)} guest(s) untouched by A's restart")
        # B's caller hangs up: serve B cancels the run and deletes its guest itself.
        self.b_hung_up.set()
        for c in b_conns:
            try:
                c.sock.shutdown(socket.SHUT_RDWR)
            except Exception:
                pass
        self.phase = "other-owner"
        b_outcome = b_long.result()
        if b_before and not eventually(
                lambda: not any(g in self.view.guests() for g in b_before), 120, 0.5):
            self.fail(f"runtime B kept its guest after its caller hung up: {b_before}")
        self.record("other-owner-long", b_outcome)
        self.record("other-owner-component", b_comp.result())
        b_pool.shutdown()
        log(f"runtime B's long run ended: {b_outcome}")
        return conclusive

    def a_tracked(self):
        try:
            return int(self.a.metric("guestflow_guests_tracked") or 0)
        except Exception:
            return 0

    def stop_serves(self):
        """SIGTERM: each serve deletes its ephemeral guests (its reaper's drain) and exits 0;
        or, when the deletes outlast GUESTFLOW_SHUTDOWN_SECONDS (faults on every delete and
        list: retries back off), exits 125 leaving them to its next start's sweep, as
        documented: then it is started again (its sweep deletes them) and stopped again."""
        for s in (self.a, self.b):
            for attempt in range(3):
                log(f"SIGTERM {s.name}")
                s.proc.signal(signal.SIGTERM)
                rc = s.proc.wait(self.args.shutdown_seconds + 60)
                s.proc.close()
                if rc == 0:
                    break
                with open(s.proc.stderr_path, errors="replace") as f:
                    said = "exiting with guest deletes still owed" in f.read()
                if rc != 125 or not said or attempt == 2:
                    self.fail(f"{s.name} exited {rc} after SIGTERM")
                    break
                self.serve_stops_past_bound += 1
                log(f"{s.name} exited 125 past its stop bound: restarted to sweep what it owed")
                s.start()

    def check_guests(self):
        """Live guests: only reusable ones, each one the runs named (or B's)."""
        live = self.view.guests()
        expected = set()
        for names in self.reusable_names.values():
            expected |= names
        ephemeral = {g: v for g, v in live.items() if not v[0].startswith("gf-c-")}
        if ephemeral:
            self.fail(f"ephemeral guests left: {sorted(v[0] for v in ephemeral.values())}")
        reusable = {v[0] for g, v in live.items() if v[0].startswith("gf-c-")}
        if len(reusable) != len([1 for v in live.values() if v[0].startswith("gf-c-")]):
            self.fail("a reusable name has more than one live guest")
        # One reusable guest per (flow, component, egress) at most. A run that failed after
        # its reusable guest was made (a fault on its exec, a lost answer) leaves that guest
        # for the flow's next run to adopt by name: kept, though no answer named it.
        if len(reusable) > len(self.reuse_flow_ids):
            self.fail(f"{len(reusable)} reusable guests for {len(self.reuse_flow_ids)} flows: "
                      f"{sorted(reusable)}")
        if expected - reusable:
            log(f"reusable guests named by a run and since replaced: {sorted(expected - reusable)}")
        return live, reusable, expected

    # ---- the host ------------------------------------------------------------------

    def records(self):
        db = sqlite3.connect(f"file:{self.cp_state}/control-plane.db?mode=ro", uri=True)
        rows = db.execute("SELECT id, name, status FROM guests").fetchall()
        db.close()
        return rows

    def host_leftovers(self, ids):
        """What of these guests is still on the host: {id: [what]}."""
        procs = collections.defaultdict(list)
        for cg in glob.glob("/proc/[0-9]*/cgroup"):
            try:
                with open(cg) as f:
                    text = f.read()
            except OSError:
                continue
            for part in text.split("/guestflow/")[1:]:
                procs[part.split("\n")[0].split("/")[0]].append(cg.split("/")[2])
        out = {}
        for gid in ids:
            what = []
            cgroups = glob.glob(f"/sys/fs/cgroup/*/guestflow/{gid}") + \
                glob.glob(f"/sys/fs/cgroup/guestflow/{gid}")
            if cgroups:
                what.append(f"cgroups {cgroups}")
            if os.path.exists(f"/run/netns/gf-{gid}"):
                what.append("netns")
            if os.path.exists(os.path.join(self.cp_state, "guests", gid)):
                what.append("workspace")
            if procs.get(gid):
                what.append(f"processes {procs[gid]}")
            if what:
                out[gid] = what
        return out

    def processes_of_state_dir(self):
        mine = []
        for cmd in glob.glob("/proc/[0-9]*/cmdline"):
            try:
                with open(cmd, "rb") as f:
                    text = f.read().replace(b"\0", b" ").decode(errors="replace")
            except OSError:
                continue
            if self.cp_state in text and "soak.py" not in text:
                mine.append(cmd.split("/")[2] + ": " + text[:120])
        return mine

    # ---- the whole soak ------------------------------------------------------------

    def faults_injected(self):
        kinds, by_op = collections.Counter(), collections.Counter()
        for path in glob.glob(os.path.join(self.dir, "cp-*.stderr")):
            with open(path, errors="replace") as f:
                for line in f:
                    if not line.startswith("fault injected: "):
                        continue
                    words = line.split()
                    op, kind = words[2], words[3]
                    kinds[kind] += 1
                    by_op[f"{op}:{kind}"] += 1
        return kinds, by_op

    def run(self):
        t0 = time.monotonic()
        log(f"soak in {self.dir}: {self.args.runs} runs at {self.args.concurrency}, "
            f"faults {fault_spec(self.args.fault_share, self.args.hold, self.args.seed)}")
        self.start_cp()
        self.a.start()
        self.b.start()
        self.sessions = self.sessions_exist()
        log("sessions: " + ("part of the mix" if self.sessions else "no /v1/sessions here"))
        self.phase_mixed()
        if not self.wrong.is_set():
            self.phase_serve_kill()
        if self.sessions:
            self.release_sessions()
        self.stop_serves()
        live, reusable, expected = self.check_guests()
        log(f"live after the serves stopped: {len(live)} ({len(reusable)} reusable)")
        # Afterwards: the control plane without faults deletes the reusable set, and then
        # nothing of this soak's guests may be left on the host.
        self.cp.signal(signal.SIGTERM)
        # A held PUT (files:timeout) keeps its worker for the hold: the stop waits for it.
        if self.cp.wait(240) != 0:
            self.fail("the control plane did not exit 0 after SIGTERM")
        self.cp.close()
        self.start_cp(faults=False)
        for gid in live:
            self.view.delete(gid)
        self.cp.signal(signal.SIGTERM)
        self.cp.wait(60)
        self.cp.close()
        rows = self.records()
        not_destroyed = [r for r in rows if r[2] not in ("destroyed", "failed")]
        if not_destroyed:
            self.fail(f"records not destroyed: {not_destroyed[:10]}")
        leftovers = eventually(lambda: not self.host_leftovers([r[0] for r in rows]), 30, 0.5)
        leaks = self.host_leftovers([r[0] for r in rows])
        if not leftovers:
            self.fail(f"left on the host: {dict(list(leaks.items())[:10])}")
        workspaces = os.listdir(os.path.join(self.cp_state, "guests")) \
            if os.path.isdir(os.path.join(self.cp_state, "guests")) else []
        if workspaces:
            self.fail(f"workspaces left: {workspaces[:10]}")
        strays = self.processes_of_state_dir()
        if strays:
            self.fail(f"processes naming the state dir: {strays[:5]}")
        if self.untyped:
            self.fail(f"{len(self.untyped)} runs without a typed outcome: "
                      f"{collections.Counter(o for _, o in self.untyped).most_common(5)}")
        kinds, by_op = self.faults_injected()
        for kind in KINDS:
            if kinds[kind] == 0 and self.args.require_every_kind and not self.wrong.is_set():
                self.fail(f"no '{kind}' fault was injected")
        summary = {
            "runs": sum(self.outcomes.values()),
            "outcomes": {f"{k}/{o}": n for (k, o), n in sorted(self.outcomes.items())},
            "faults_injected": dict(sorted(kinds.items())),
            "faults_by_operation": dict(sorted(by_op.items())),
            "guests_created": len(rows),
            "guests_deleted": sum(1 for r in rows if r[2] == "destroyed"),
            "guests_failed_creates": sum(1 for r in rows if r[2] == "failed"),
            "reusable_left_before_cleanup": len(reusable),
            "guests_leaked": len(leaks) + len(not_destroyed),
            "serve_kill_guests_tracked": self.in_flight_at_serve_kill,
            "kills": self.kills,
            "correct_by_phase": {ph: sum(n for (p, _, o), n in self.phase_outcomes.items()
                                         if p == ph and o == "success")
                                 for ph in sorted({p for p, _, _ in self.phase_outcomes})},
            "wrong_answers": self.wrong_runs,
            "slow_runs": self.slow_runs,
            "bounds_seconds": self.bounds,
            "slowest_seconds": dict(sorted(self.slowest.items())),
            "capacity_refusals_tried_again": {f"{p}/{c}": n for (p, c), n in
                                              sorted(self.refusals.items())},
            "right_after_a_refusal": dict(sorted(self.right_after_refusal.items())),
            "capacity_wait_max_seconds": self.capacity_wait_max,
            "control_plane_starts": self.cp_starts,
            "serve_stops_past_bound": self.serve_stops_past_bound,
            "seconds": round(time.monotonic() - t0),
            "load_average_start": [round(x, 1) for x in self.load_start],
            "load_average_end": [round(x, 1) for x in os.getloadavg()],
            "failures": self.failures,
        }
        print(json.dumps(summary))
        return 0 if not self.failures else 1

    def cleanup(self):
        self.times.close()
        for p in (self.a.proc, self.b.proc, self.cp):
            if p:
                p.close()
        if not self.args.keep and not self.failures:
            shutil.rmtree(self.dir, ignore_errors=True)
        else:
            log(f"kept {self.dir}")


def main():
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--guestflow", required=True, help="the guestflow binary")
    p.add_argument("--source", required=True, help="the source tree (examples/flows)")
    p.add_argument("--size", choices=["smoke", "long"], default="smoke")
    p.add_argument("--runs", type=int)
    p.add_argument("--concurrency", type=int)
    p.add_argument("--fault-share", type=float, default=0.02,
                   help="share per operation and kind (5 kinds: 0.02 → 10%% of each op)")
    p.add_argument("--hold", help="how long a `timeout` fault holds a call (default: the "
                   "plan's 150s, past every client deadline; smoke: 5s)")
    p.add_argument("--seed", type=int, default=42)
    p.add_argument("--tmp", default=None, help="where the soak's state dir goes")
    p.add_argument("--keep", action="store_true", help="keep the state dir and logs")
    p.add_argument("--success-floor", type=float, default=0.4,
                   help="the share of each phase's runs that must end with the right answer")
    p.add_argument("--wrong-answer-at", default=set(),
                   type=lambda v: {int(x) for x in v.split(",") if x},
                   help="I,J,…: these runs' programs answer other than expected: the soak must "
                   "fail at once naming them (its own test)")
    p.add_argument("--slow-run-at", default=set(),
                   type=lambda v: {int(x) for x in v.split(",") if x},
                   help="I,J,…: code runs whose programs sleep past the code bound: the soak must "
                   "fail naming them (its own test)")
    p.add_argument("--bound", default={},
                   type=lambda v: {k: int(x) for k, x in (kv.split("=") for kv in v.split(",")
                                                          if kv)},
                   help="KEY=SECONDS,…: replace a derived bound (keys: the summary's "
                   "bounds_seconds)")
    a = p.parse_args()
    smoke = a.size == "smoke"
    a.runs = a.runs or (80 if smoke else 2000)
    a.concurrency = a.concurrency or (8 if smoke else 100)
    a.hold = a.hold or ("5s" if smoke else None)
    a.reusable = 3
    a.session_replicas = a.concurrency // 4 + 2
    a.cp_workers = 16 if smoke else 64
    a.call_timeout = 300 if smoke else 900
    a.kill_sleep = 20 if smoke else 60
    a.b_sleep = 600 if smoke else 1800  # hung up on by the soak long before
    a.shutdown_seconds = 60 if smoke else 180
    a.sweep_deadline = 120 if smoke else 400
    a.require_every_kind = a.fault_share > 0 and (not smoke or a.runs >= 24)
    soak = Soak(a)
    try:
        return soak.run()
    finally:
        soak.cleanup()


if __name__ == "__main__":
    sys.exit(main())
