#!/usr/bin/env python3
"""The thread-per-run peer: what a Python client of the control plane's API does, written as
well as such a client can be (the seed plugin's architecture, standard library only).

One thread per run in flight, each with its own keep-alive connection (http.client, reused
for every call of every run the thread makes), running code runs back to back in a closed
loop: create -> upload -> exec -> delete, the same 4 calls and bodies as bench_runtime's
runs. Parsing is kept to what a correct client needs: the created guest's id, the exec's
exit code, every status code. Over a window after a warm-up, prints one `peer:` line of
key=value figures: runs/s, p50/p95/p99 latency, this process's CPU per run (every thread:
getrusage, less the main thread that only samples), the control plane's CPU per run (--cp-pid, /proc), RSS per run in flight
((peak - before the threads started) / N), errors by code.

usage: python_threads.py --url http://127.0.0.1:PORT|unix:///PATH --concurrency N
                         [--warmup-s S] [--duration-s S] [--cp-pid PID]
"""

import argparse
import http.client
import json
import os
import resource
import socket
import sys
import threading
import time

CREATE = json.dumps({"shape": "s-1vcpu-256mb", "rootfs": "debian:12", "name": None,
                     "egress": ["240.0.0.0/4"], "envs": {}, "auto_pause_after_seconds": 150,
                     "ingress_enabled": False})
PROGRAM = b"print('hello from a guest')\n"
PATH = "/workspace/main_0a1b2c3d.py"
EXEC = json.dumps({"cmd": "timeout",
                   "args": ["--signal=KILL", "30", "python3", PATH]}).encode()
JSON_HEADERS = {"Content-Type": "application/json"}
BIN_HEADERS = {"Content-Type": "application/octet-stream"}
PAGE = os.sysconf("SC_PAGE_SIZE")
TICK = os.sysconf("SC_CLK_TCK")


class UnixHTTPConnection(http.client.HTTPConnection):
    """http.client over the control plane's Unix socket (the cheaper path on one host)."""

    def __init__(self, path, timeout):
        super().__init__("localhost", timeout=timeout)
        self.unix_path = path

    def connect(self):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(self.timeout)
        s.connect(self.unix_path)
        self.sock = s


def connect(url, timeout=120):
    if url.startswith("unix://"):
        return UnixHTTPConnection(url[len("unix://"):], timeout)
    host, _, port = url[len("http://"):].rstrip("/").partition(":")
    return http.client.HTTPConnection(host, int(port), timeout=timeout)


class Failure(Exception):
    def __init__(self, code):
        super().__init__(code)
        self.code = code


def call(conn, method, path, body=None, headers=None):
    """One request on the thread's connection; (status, body bytes)."""
    conn.request(method, path, body=body, headers=headers or {})
    r = conn.getresponse()
    return r.status, r.read()


def one_run(conn, name):
    body = CREATE.replace('"name": null', '"name": "%s"' % name).encode()
    status, data = call(conn, "POST", "/v1/sandboxes", body, JSON_HEADERS)
    if status not in (200, 201):
        raise Failure("create_http_%d" % status)
    gid = json.loads(data)["data"]["id"]
    base = "/v1/sandboxes/" + gid
    try:
        status, _ = call(conn, "PUT", base + "/files?path=%2Fworkspace%2Fmain_0a1b2c3d.py",
                         PROGRAM, BIN_HEADERS)
        if status != 200:
            raise Failure("upload_http_%d" % status)
        status, data = call(conn, "POST", base + "/exec", EXEC, JSON_HEADERS)
        if status != 200:
            raise Failure("exec_http_%d" % status)
        if json.loads(data)["data"]["result"]["exit_code"] != 0:
            raise Failure("exec_exit")
    finally:  # every guest asked for is deleted, whatever failed
        status, _ = call(conn, "DELETE", base)
        if status != 200:
            raise Failure("delete_http_%d" % status)


class Tally:
    def __init__(self):
        self.lock = threading.Lock()
        self.records = []  # (start, end) of runs that finished
        self.errors = {}

    def error(self, code):
        with self.lock:
            self.errors[code] = self.errors.get(code, 0) + 1


def worker(index, url, go, stop, tally):
    go.wait()
    conn = connect(url)
    records = []
    seq = 0
    while not stop.is_set():
        seq += 1
        start = time.monotonic()
        try:
            one_run(conn, "gf-peer-%d-%d" % (index, seq))
            records.append((start, time.monotonic()))
        except Failure as f:
            tally.error(f.code)
        except (OSError, http.client.HTTPException, ValueError, KeyError) as e:
            tally.error(type(e).__name__)
            conn.close()
            conn = connect(url)
    conn.close()
    with tally.lock:
        tally.records.extend(records)


def rss_bytes():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * PAGE


def self_cpu():
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return ru.ru_utime + ru.ru_stime


def pid_cpu(pid):
    if not pid:
        return 0.0
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / TICK


def percentile(v, q):
    if not v:
        return 0.0
    return v[min(len(v) - 1, int(q * (len(v) - 1) + 0.5))]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--url", required=True)
    ap.add_argument("--concurrency", type=int, required=True)
    ap.add_argument("--warmup-s", type=float, default=3)
    ap.add_argument("--duration-s", type=float, default=5)
    ap.add_argument("--cp-pid", type=int, default=0)
    a = ap.parse_args()
    if a.concurrency < 1:
        ap.error("--concurrency must be at least 1")

    tally = Tally()
    rss_before = rss_bytes()
    go, stop = threading.Event(), threading.Event()
    threads = [threading.Thread(target=worker, args=(i, a.url, go, stop, tally), daemon=True)
               for i in range(a.concurrency)]
    t0 = time.monotonic()
    # Every thread is started before any works: a thread's start waits for it to take the
    # GIL, which 10,000 busy threads would make a matter of minutes.
    for t in threads:
        t.start()
    go.set()
    start_s = time.monotonic() - t0
    w0 = time.monotonic() + a.warmup_s
    w1 = w0 + a.duration_s
    while time.monotonic() < w0:
        time.sleep(0.01)
    # The main thread only samples (as bench_runtime's, whose CPU it leaves out too).
    cpu0, cp0, main0 = self_cpu(), pid_cpu(a.cp_pid), time.thread_time()
    peak = rss_bytes()
    while time.monotonic() < w1:
        time.sleep(0.02)
        peak = max(peak, rss_bytes())
    cpu1, cp1, main1 = self_cpu(), pid_cpu(a.cp_pid), time.thread_time()
    time.sleep(0.5)  # the load stays steady while the window's edges are sampled
    stop.set()
    for t in threads:
        t.join(timeout=120 + a.concurrency / 10)
    unfinished = sum(t.is_alive() for t in threads)
    inside = [(s, e) for s, e in tally.records if w0 <= e < w1]
    lat = sorted((e - s) * 1e3 for s, e in inside if s >= w0)
    runs = len(inside)
    per_run = (lambda sec: sec * 1e6 / runs if runs else 0.0)
    errors = ",".join("%s:%d" % kv for kv in sorted(tally.errors.items())) or "-"
    print("peer: concurrency=%d window_s=%g runs=%d runs_per_s=%.2f p50_ms=%.2f p95_ms=%.2f "
          "p99_ms=%.2f cpu_us_per_run=%.1f cp_cpu_us_per_run=%.1f rss_before=%d rss_peak=%d "
          "rss_per_inflight=%.1f errors=%d errors_by=%s unfinished=%d thread_start_s=%.2f"
          % (a.concurrency, a.duration_s, runs, runs / a.duration_s, percentile(lat, .5),
             percentile(lat, .95), percentile(lat, .99), per_run(cpu1 - cpu0 - (main1 - main0)),
             per_run(cp1 - cp0), rss_before, peak, (peak - rss_before) / a.concurrency,
             sum(tally.errors.values()), errors, unfinished, start_s))
    sys.stdout.flush()
    return 1 if tally.errors or unfinished or not runs else 0


if __name__ == "__main__":
    sys.exit(main())
