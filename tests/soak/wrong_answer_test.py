#!/usr/bin/env python3
"""The soak judges every answer: a short soak whose first runs 0-3 (one of each kind: code, flow,
component, session) get programs that answer other than the soak expects must fail, naming
those runs, and stop starting runs at once (the serve-kill phase never runs), leaving
nothing on the host. Real guests through a real serve and control plane, as soak_smoke.

Usage: wrong_answer_test.py --guestflow BIN --source DIR
"""

import sys

import failing_soak


def main():
    summary, problems = failing_soak.run(["--seed", "7", "--wrong-answer-at", "0,1,2,3"],
                                         "a wrong answer")
    if summary is None:
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
    if summary.get("runs", 0) >= 40:
        problems.append(f"{summary.get('runs')} runs: the soak did not stop at once")
    return failing_soak.report({"wrong_answers": wrong, "runs": summary.get("runs")}, problems)


if __name__ == "__main__":
    sys.exit(main())
