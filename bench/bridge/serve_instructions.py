#!/usr/bin/env python3
"""Instructions per streamed whole-flow run of `guestflow serve`, counted by callgrind.

    bench/bridge/serve_instructions.py --bin build/apps/guestflow [--small 40] [--large 140]
                                       [--concurrency 8] [--flow examples/flows/prompt.json]

CPU time on a shared machine moves with whatever else runs; instruction counts do not. Starts
the simulated control plane (5 ms per call, exec prints bench/bridge/prompt_frames.ndjson) and
`guestflow serve` under `valgrind --tool=callgrind`, sends SMALL and then LARGE streamed runs
(`POST /v1/runs`, stream: true) at CONCURRENCY on loopback, and prints the difference of the two
totals divided by LARGE - SMALL: the cost of one run, start-up and shutdown cancelled out.
Standard library only; needs valgrind. Kernel time is not counted (callgrind sees user space).
"""
import argparse
import glob
import http.client
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading

SRC = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))


def start(args, env, err_path):
    """Starts a guestflow process that prints its listening address first; returns (proc, port)."""
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=open(err_path, "w"), env=env,
                            text=True)
    line = proc.stdout.readline()
    match = re.search(r":(\d+)", line)
    if not match:
        proc.kill()
        sys.exit(f"{args[0]} did not print its address: {line!r} (see {err_path})")
    return proc, int(match.group(1))


def total_instructions(guestflow, runs, concurrency, body, work):
    os.makedirs(f"{work}/cp")
    os.makedirs(f"{work}/serve")
    cp, cp_port = start([guestflow, "control-plane", "--listen", "127.0.0.1:0", "--state-dir",
                         f"{work}/cp", "--simulate-latency-ms", "5", "--simulate-exec-stdout",
                         f"{SRC}/bench/bridge/prompt_frames.ndjson"], dict(os.environ),
                        f"{work}/cp.err")
    env = dict(os.environ, GUESTFLOW_CONTROL_PLANE_URL=f"http://127.0.0.1:{cp_port}",
               GUESTFLOW_CONTROL_PLANE_KEY="", GUESTFLOW_TOKEN="",
               GUESTFLOW_STATE_DIR=f"{work}/serve", GUESTFLOW_MAX_INFLIGHT="64")
    serve, port = start(["valgrind", "--tool=callgrind", f"--callgrind-out-file={work}/cg.out",
                         guestflow, "serve", "--listen", "127.0.0.1:0"], env, f"{work}/serve.err")
    left, lock, failures = [runs], threading.Lock(), []

    def worker():
        while True:
            with lock:
                if left[0] == 0:
                    return
                left[0] -= 1
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=300)
            conn.request("POST", "/v1/runs", body, {"Content-Type": "application/json"})
            resp = conn.getresponse()
            data = resp.read().decode(errors="replace")
            if resp.status != 200 or '"complete"' not in data:
                failures.append(f"{resp.status}: {data[-300:]}")
            conn.close()

    threads = [threading.Thread(target=worker) for _ in range(concurrency)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    serve.send_signal(signal.SIGTERM)
    serve.wait(300)
    cp.send_signal(signal.SIGTERM)
    cp.wait(60)
    if failures:
        sys.exit(f"{len(failures)} of {runs} runs failed, first: {failures[0]}")
    total = 0
    for path in glob.glob(f"{work}/cg.out*"):
        for line in open(path):
            if line.startswith(("summary:", "totals:")):
                total = max(total, int(line.split()[1]))
    return total


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bin", default=f"{SRC}/build/apps/guestflow")
    ap.add_argument("--small", type=int, default=40)
    ap.add_argument("--large", type=int, default=140)
    ap.add_argument("--concurrency", type=int, default=8)
    ap.add_argument("--flow", default=f"{SRC}/examples/flows/prompt.json")
    a = ap.parse_args()
    if shutil.which("valgrind") is None:
        sys.exit("valgrind is not installed")
    flow = open(a.flow, encoding="utf-8").read()
    body = ('{"flow":' + flow + ',"inputs":{"input_value":"hello","type":"chat"},'
            '"stream":true}').encode()
    totals = {}
    for runs in (a.small, a.large):
        work = tempfile.mkdtemp(prefix="guestflow-serve-ir-")
        try:
            totals[runs] = total_instructions(a.bin, runs, a.concurrency, body, work)
        finally:
            shutil.rmtree(work, ignore_errors=True)
        print(f"{runs} runs: {totals[runs]:,} instructions in serve (start-up included)")
    per_run = (totals[a.large] - totals[a.small]) / (a.large - a.small)
    print(f"serve, streamed run of {os.path.basename(a.flow)} ({len(flow):,} B): "
          f"{per_run / 1e6:.2f} M instructions per run")


if __name__ == "__main__":
    main()
