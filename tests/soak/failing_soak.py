"""What the soak's own tests share: run a short soak that must fail (exit 1) on what the
test injects, read its summary, and check what every such soak must still do — stop before
the serve-kill phase and leave nothing on the host."""

import argparse
import json
import os
import subprocess
import sys


def run(extra, stops_for):
    """Runs soak.py (--guestflow/--source from this test's command line) with `extra`.
    Returns (summary, problems); summary is None when there was no summary line."""
    p = argparse.ArgumentParser()
    p.add_argument("--guestflow", required=True)
    p.add_argument("--source", required=True)
    a = p.parse_args()
    soak = os.path.join(os.path.dirname(os.path.abspath(__file__)), "soak.py")
    r = subprocess.run([sys.executable, soak, "--guestflow", a.guestflow, "--source", a.source,
                        "--size", "smoke", "--runs", "40", "--concurrency", "4"] + extra,
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    sys.stderr.write(r.stderr[-4000:])
    problems = []
    if r.returncode != 1:
        problems.append(f"the soak exited {r.returncode}, not 1")
    try:
        summary = json.loads(r.stdout.strip().splitlines()[-1])
    except Exception:
        print("no summary line on stdout:", r.stdout[-2000:])
        return None, problems
    if summary.get("serve_kill_guests_tracked"):
        problems.append(f"the soak went on to the serve-kill phase after {stops_for}")
    if summary.get("guests_leaked"):
        problems.append(f"{summary['guests_leaked']} guests leaked")
    return summary, problems


def report(shown, problems):
    """Prints what the test saw and each problem; the test's exit code."""
    print(json.dumps(shown))
    for x in problems:
        print("FAILED:", x)
    return 1 if problems else 0
