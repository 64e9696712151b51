"""bench/flowfarm/farm.py's bookkeeping, without running a bench: which try of a point is
kept, and the report's ratios and Markdown from a result with and without floors."""

import os
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "bench", "flowfarm"))
import farm  # noqa: E402


def point(path, k, cpu, **extra):
    p = dict(path=path, vertices=0, concurrency=k, runs_per_s=1000.0, p50_ms=200.0,
             p95_ms=210.0, p99_ms=220.0, cpu_us_per_run=cpu, cp_cpu_us_per_run=100.0,
             loadgen_cpu_us_per_run=0.0, rss_per_inflight=7000.0 if path.startswith(
                 "runtime") else 30000.0, guests_leaked=0, errors=0, errors_by="-")
    p.update(extra)
    return p


def tries(*points):
    """A measure() that returns `points` one call after another."""
    it = iter(points)
    return lambda: next(it)


class BestOf(unittest.TestCase):
    def test_keeps_the_try_with_the_least_cpu_and_every_try_figure(self):
        best = farm.best_of(2, tries(point("peer-code", 1000, 4992.0),
                                     point("peer-code", 1000, 650.0)))
        self.assertEqual(best["cpu_us_per_run"], 650.0)
        self.assertEqual(best["cpu_us_per_run_tries"], [4992.0, 650.0])

    def test_a_failed_or_leaking_try_is_kept_instead_of_a_good_one(self):
        leaky = point("runtime-code", 1000, 80.0, guests_leaked=1)
        best = farm.best_of(2, tries(point("runtime-code", 1000, 50.0), leaky))
        self.assertEqual(best["guests_leaked"], 1)
        failed = {"concurrency": 1000, "failed": "exit 1", "errors": 1}
        best = farm.best_of(2, tries(failed, point("runtime-code", 1000, 50.0)))
        self.assertEqual(best["failed"], "exit 1")

    def test_one_try_adds_nothing(self):
        best = farm.best_of(1, tries(point("peer-code", 10, 600.0)))
        self.assertNotIn("cpu_us_per_run_tries", best)


def result(floors):
    g = farm.best_of(2, tries(point("runtime-code", 1000, 60.0),
                              point("runtime-code", 1000, 50.0)))
    q = farm.best_of(2, tries(point("peer-code", 1000, 700.0),
                              point("peer-code", 1000, 1000.0)))
    res = {"started": "2026-12-03T00:00:00Z", "command": "bench/run", "latency_ms": 50,
           "transport": "unix", "levels": [1000], "vertices": [], "real_levels": [],
           "note": "", "points": [g, q], "floors": floors,
           "machine": {"host": "h", "cores": 2, "cpu": "c", "mem_bytes": 2**30, "kernel": "k",
                       "commit": "c", "dirty": False},
           "load_before": [0, 0, 0], "load_after": [0, 0, 0]}
    res["ratios"], res["ratio_lines"], res["targets"] = farm.ratios(res)
    return res


class Report(unittest.TestCase):
    def test_ratios_use_each_sides_best_try_and_print_the_tries(self):
        res = result({"inflight": 1000, "round_trip_us": 6.0, "call_work_us": 5.0,
                      "actor_us": 4.0, "sum_us": 15.0})
        self.assertAlmostEqual(res["ratios"][0]["cpu_below"], 700.0 / 50.0)
        self.assertIn("runtime 60 / 50, peer 700 / 1000", "\n".join(res["ratio_lines"]))
        floors = [t for t in res["targets"] if "floors" in t["target"]]
        self.assertEqual(floors[0]["measured"], "3.33x")
        self.assertIn("Floors at 1000", farm.markdown(res))

    def test_the_runtime_is_split_against_each_parts_floors(self):
        res = result({"inflight": 1000, "round_trip_us": 6.0, "call_work_us": 5.0,
                      "actor_us": 4.0, "sum_us": 15.0})
        self.assertNotIn("by part", "\n".join(res["ratio_lines"]))  # no client-alone figure
        res["points"][0]["client_alone_cpu_us_per_run"] = 30.0
        _, lines, _ = farm.ratios(res)
        split = [l for l in lines if "by part" in l]
        self.assertEqual(len(split), 1)
        # 50 = client 30 (30 / 11 = 2.7x) + rest 20 (20 / 4 = 5.0x); 11 + 20 = 31 us = 2.07x
        # the floors; 1.5x (22.5 us) leaves the rest 22.5 - 11 = 11.5 us.
        for part in ("client alone 30.0 us (2.7x its floors", "11.0 us) + the rest 20.0 us",
                     "5.0x the actor floor", "would be 31.0 us, 2.07x", "rest at 11.5 us"):
            self.assertIn(part, split[0])

    def test_a_run_that_skipped_the_floors_reports_without_them(self):
        res = result({"inflight": 0, "sum_us": 0})
        md = farm.markdown(res)
        self.assertNotIn("Floors at", md)
        self.assertFalse([t for t in res["targets"] if "floors" in t["target"]])


if __name__ == "__main__":
    unittest.main()
