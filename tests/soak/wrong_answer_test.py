#!/usr/bin/env python3
"""The soak judges every answer: a short soak whose first runs 0-3 (one of each kind: code, flow,
component, session) get programs that answer other than the soak expects must fail, naming
those runs, and stop starting runs at once (the serve-kill phase never runs), leaving
nothing on the host. Real guests through a real serve and control plane, as soak_smoke.

Usage: wrong_answer_test.py --guestflow BIN --source DIR
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
    r = subprocess.run([sys.executable, soak, "--guestflow", a.guestflow, "--source", a.source,
                        "--size", "smoke", "--runs", "40", "--concurrency", "4", "--seed", "7",
                        "--wrong-answer-at", "0,1,2,3"],
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
    wrong = summary.get("wrong_answers", [])
    # Seed 7's faults spare the first wave: all four are judged (at least two required, so
    # that a fault's timing cannot fail this test).
    if len(wrong) < 2:
        problems.append(f"{len(wrong)} wrong answers named, not the 2+ of runs 0-3")
    for w in wrong:
        if not any(w.split(":")[0].endswith(f" run {i}") for i in (0, 1, 2, 3)):
            problems.append(f"a wrong answer named a run that answered right: {w}")
    if not any(f.startswith("wrong answer from") for f in summary.get("failures", [])):
        problems.append("the failures do not say 'wrong answer'")
    if summary.get("serve_kill_guests_tracked"):
        problems.append("the soak went on to the serve-kill phase after a wrong answer")
    if summary.get("runs", 0) >= 40:
        problems.append(f"{summary.get('runs')} runs: the soak did not stop at once")
    if summary.get("guests_leaked"):
        problems.append(f"{summary['guests_leaked']} guests leaked")
    print(json.dumps({"wrong_answers": wrong, "runs": summary.get("runs")}))
    for x in problems:
        print("FAILED:", x)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
