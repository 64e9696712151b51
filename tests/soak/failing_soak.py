"""What the soak's own tests share: run a short soak that must fail (exit 1) on what the
test injects, read its summary, and check what every such soak must still do — stop before
the serve-kill phase and leave nothing on the host. The soak keeps its state dir and logs
when it fails, which these soaks must: each runs under a directory of its own, removed when
the test passes and kept (the failure says where) when it does not."""

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile

_dir = None  # this test's soak directory (run() makes it, report() removes it)


def run(extra, stops_for):
    """Runs soak.py (--guestflow/--source from this test's command line) with `extra`.
    Returns (summary, problems); summary is None when there was no summary line."""
    p = argparse.ArgumentParser()
    p.add_argument("--guestflow", required=True)
    p.add_argument("--source", required=True)
    a = p.parse_args()
    global _dir
    _dir = tempfile.mkdtemp(prefix="guestflow-soak-")
    soak = os.path.join(os.path.dirname(os.path.abspath(__file__)), "soak.py")
    r = subprocess.run([sys.executable, soak, "--guestflow", a.guestflow, "--source", a.source,
                        "--size", "smoke", "--runs", "40", "--concurrency", "4",
                        "--tmp", _dir] + extra,
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    sys.stderr.write(r.stderr[-4000:])
    problems = []
    if r.returncode != 1:
        problems.append(f"the soak exited {r.returncode}, not 1")
    try:
        summary = json.loads(r.stdout.strip().splitlines()[-1])
    except Exception:
        print("no summary line on stdout:", r.stdout[-2000:])
        print("FAILED: the soak's state dir and logs are kept in", _dir)
        return None, problems
    if summary.get("serve_kill_guests_tracked"):
        problems.append(f"the soak went on to the serve-kill phase after {stops_for}")
    if summary.get("guests_leaked"):
        problems.append(f"{summary['guests_leaked']} guests leaked")
    return summary, problems


def _mounts_under(path):
    """Mount points at or under `path` (rmtree would descend into them)."""
    with open("/proc/self/mountinfo") as f:
        points = [line.split()[4] for line in f]
    return [m for m in points if m == path or m.startswith(path + "/")]


def report(shown, problems):
    """Prints what the test saw and each problem; the test's exit code. Removes the soak's
    directory when there is none, else says where it is kept."""
    print(json.dumps(shown))
    if _dir and not problems:
        mounts = _mounts_under(os.path.realpath(_dir))
        if mounts:
            problems.append(f"mounts left under the soak's directory: {mounts}")
        else:
            shutil.rmtree(_dir)
            print("passed: removed the soak's directory", _dir, "(its log said kept)")
    for x in problems:
        print("FAILED:", x)
    if _dir and problems:
        print("FAILED: the soak's state dir and logs are kept in", _dir)
    return 1 if problems else 0
