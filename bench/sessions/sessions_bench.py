#!/usr/bin/env python3
"""Acquire latency of agent sessions: from the warm pool vs cold (bridge/API.md "Sessions").

    bench/sessions/sessions_bench.py --bin BUILD/apps/guestflow [--n 20] [--out FILE]

Starts `guestflow serve` on 127.0.0.1:0 with its own state dir (the embedded local control
plane, real guests) and measures POST /v1/sessions, request written to
answer read:
  cold     a new (user, thread) each time, interleaved with `warm`: its guest is created
           (then deleted, untimed);
  warm     a NEW (user, thread) each time too, but with guests released by other threads
           idle in the session pool: what a new conversation gets when the pool has room
           (the answer's `reused`/`warm` say whether a pooled guest served it);
  reclaim  the same (user, thread) after its release: a lookup (the old "warm" figure).
Prints p50/p95 of each; the target is warm p95 <= cold p50 / 10 (a pooled take is
bookkeeping, a create starts a guest), reported as met or MISSED, with how many warm
acquires a pooled guest served, and the host's load average before and after (a shared
host is noisy: read the figures beside it).
"""

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
import urllib.request


def call(base, method, path, body=None):
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(base + path, data=data, method=method,
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=120) as r:
        return json.loads(r.read())


def pct(xs, q):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(q * (len(xs) - 1))))]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("--n", type=int, default=20)
    ap.add_argument("--out")
    a = ap.parse_args()
    state = tempfile.mkdtemp(prefix="gf-sessions-bench-")
    # Nothing of the caller's settings (another control plane, a token, other defaults).
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("GUESTFLOW_", "CREATEOS_", "LANGFLOW_SANDBOX_", "LANGFLOW_EXECUTOR_"))}
    env.update(GUESTFLOW_STATE_DIR=state, GUESTFLOW_SESSION_REPLICAS="4",
               GUESTFLOW_SESSION_IDLE_TIMEOUT_SECONDS="0")
    load_before = os.getloadavg()
    srv = subprocess.Popen([a.bin, "serve", "--listen", "127.0.0.1:0"], env=env,
                           stdout=subprocess.PIPE, stderr=open(os.path.join(state, "serve.log"), "w"),
                           text=True)
    try:
        line = srv.stdout.readline()
        if not line.startswith("listening on "):
            sys.exit("serve did not start: " + line)
        base = line.split()[-1]
        cold, warm, reclaim = [], [], []
        pooled = 0
        for i in range(a.n):
            t = time.perf_counter()
            s = call(base, "POST", "/v1/sessions", {"user_id": "bench", "thread_id": "cold-%d" % i})
            cold.append((time.perf_counter() - t) * 1000)
            call(base, "DELETE", "/v1/sessions/" + s["session_id"])
            # Another thread's guest released (idle in the pool), then a new thread acquires.
            other = call(base, "POST", "/v1/sessions", {"user_id": "bench", "thread_id": "idle-%d" % i})
            call(base, "POST", "/v1/sessions/%s/release" % other["session_id"])
            t = time.perf_counter()
            s = call(base, "POST", "/v1/sessions", {"user_id": "bench", "thread_id": "new-%d" % i})
            warm.append((time.perf_counter() - t) * 1000)
            pooled += bool(s.get("reused"))
            for sid in (s["session_id"], other["session_id"]):
                call(base, "DELETE", "/v1/sessions/" + sid)
        s = call(base, "POST", "/v1/sessions", {"user_id": "bench", "thread_id": "reclaim"})
        for i in range(a.n):
            call(base, "POST", "/v1/sessions/%s/release" % s["session_id"])
            t = time.perf_counter()
            again = call(base, "POST", "/v1/sessions", {"user_id": "bench", "thread_id": "reclaim"})
            reclaim.append((time.perf_counter() - t) * 1000)
            assert again["session_id"] == s["session_id"] and again["reused"], again
        call(base, "DELETE", "/v1/sessions/" + s["session_id"])
    finally:
        srv.terminate()
        srv.wait(timeout=60)
    load_after = os.getloadavg()
    c50, c95, w50, w95 = pct(cold, .5), pct(cold, .95), pct(warm, .5), pct(warm, .95)
    r50, r95 = pct(reclaim, .5), pct(reclaim, .95)
    ratio = c50 / w95 if w95 > 0 else float("inf")
    verdict = "met" if w95 <= c50 / 10 else "MISSED"
    lines = [
        "# bench/sessions/sessions_bench.py --n %d  (%s, %d cpus, %s)" % (
            a.n, platform.node(), os.cpu_count(), time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())),
        "POST /v1/sessions, request written -> answer read, embedded local control plane, real guests",
        "cold (new thread, guest created)            p50 %8.1f ms   p95 %8.1f ms" % (c50, c95),
        "warm (new thread, another thread's idle)    p50 %8.1f ms   p95 %8.1f ms   (%d of %d served by a pooled guest)" % (
            w50, w95, pooled, a.n),
        "reclaim (same thread after its release)     p50 %8.1f ms   p95 %8.1f ms" % (r50, r95),
        "cold p50 / warm p95 = %.1fx; target warm p95 <= cold p50 / 10: %s" % (ratio, verdict),
        "load average (1/5/15 min) before %.2f %.2f %.2f, after %.2f %.2f %.2f" % (load_before + load_after),
    ]
    print("\n".join(lines))
    if a.out:
        with open(a.out, "w") as f:
            f.write("\n".join(lines) + "\n")


main()
