#!/usr/bin/env python3
"""The soak bounds every run's time: a short soak (no faults) whose code run 36's program
sleeps past the code bound (lowered to 20 s with --bound, so the test is short) must fail,
naming that run as slow, and stop starting runs, leaving nothing on the host. Run 36 starts
well after the control plane's SIGKILL (at 20 runs done), which would cut a run in flight. Real guests
through a real serve and control plane, as soak_smoke.

Usage: slow_run_test.py --guestflow BIN --source DIR
"""

import argparse
import json
import os
import subprocess
import sys


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--guestflow", required=True)
    p.add_argument("--source", required=True)
    a = p.parse_args()
    soak = os.path.join(os.path.dirname(os.path.abspath(__file__)), "soak.py")
    # Other code runs take a second or two here; 20 s leaves them room on a loaded host.
    r = subprocess.run([sys.executable, soak, "--guestflow", a.guestflow, "--source", a.source,
                        "--size", "smoke", "--runs", "40", "--concurrency", "4",
                        "--fault-share", "0", "--bound", "code=20", "--slow-run-at", "36"],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    sys.stderr.write(r.stderr[-4000:])
    problems = []
    if r.returncode != 1:
        problems.append(f"the soak exited {r.returncode}, not 1")
    try:
        summary = json.loads(r.stdout.strip().splitlines()[-1])
    except Exception:
        print("no summary line on stdout:", r.stdout[-2000:])
        return 1
    slow = summary.get("slow_runs", [])
    if not any(s.startswith("code run 36: took ") for s in slow):
        problems.append(f"code run 36 is not named slow: {slow}")
    if summary.get("bounds_seconds", {}).get("code") != 20:
        problems.append(f"the code bound is not the one asked: {summary.get('bounds_seconds')}")
    if not any(f.startswith("slow run: code run 36:") for f in summary.get("failures", [])):
        problems.append("the failures do not name the slow run")
    if summary.get("wrong_answers"):
        problems.append(f"wrong answers where none were injected: {summary['wrong_answers']}")
    if summary.get("serve_kill_guests_tracked"):
        problems.append("the soak went on to the serve-kill phase after a slow run")
    if summary.get("guests_leaked"):
        problems.append(f"{summary['guests_leaked']} guests leaked")
    print(json.dumps({"slow_runs": slow, "runs": summary.get("runs")}))
    for x in problems:
        print("FAILED:", x)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
