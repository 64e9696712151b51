#!/usr/bin/env python3
"""The soak bounds every run's time: a short soak (no faults) whose code run 36's program
sleeps past the code bound (lowered to 20 s with --bound, so the test is short) must fail,
naming that run as slow, and stop starting runs, leaving nothing on the host. Run 36 starts
well after the control plane's SIGKILL (at 20 runs done), which would cut a run in flight. Real guests
through a real serve and control plane, as soak_smoke.

Usage: slow_run_test.py --guestflow BIN --source DIR
"""

import sys

import failing_soak


def main():
    # Other code runs take a second or two here; 20 s leaves them room on a loaded host.
    summary, problems = failing_soak.run(
        ["--fault-share", "0", "--bound", "code=20", "--slow-run-at", "36"], "a slow run")
    if summary is None:
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
    return failing_soak.report({"slow_runs": slow, "runs": summary.get("runs")}, problems)


if __name__ == "__main__":
    sys.exit(main())
