"""bench/flowfarm/farm.py's result files: named by date, host and commit, never written over
a stored run (a figure quoted from one stays true)."""

import datetime
import os
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "bench", "flowfarm"))
import farm  # noqa: E402

STAMP = datetime.datetime(2026, 12, 7, 0, 30)


class ResultStem(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.dir = self.tmp.name

    def tearDown(self):
        self.tmp.cleanup()

    def touch(self, name):
        open(os.path.join(self.dir, name), "w").close()

    def test_date_host_and_commit(self):
        m = {"host": "vm", "commit": "5484f97", "dirty": False}
        self.assertEqual(farm.result_stem(self.dir, STAMP, m), "2026-12-07-vm-5484f97")
        m["dirty"] = True
        self.assertEqual(farm.result_stem(self.dir, STAMP, m), "2026-12-07-vm-5484f97-dirty")

    def test_a_stored_run_is_never_the_name_of_the_next(self):
        m = {"host": "vm", "commit": "5484f97", "dirty": False}
        self.touch("2026-12-07-vm-5484f97.json")
        self.assertEqual(farm.result_stem(self.dir, STAMP, m), "2026-12-07-vm-5484f97-2")
        self.touch("2026-12-07-vm-5484f97-2-cpu.png")  # a run that got as far as its plots
        self.assertEqual(farm.result_stem(self.dir, STAMP, m), "2026-12-07-vm-5484f97-3")


if __name__ == "__main__":
    unittest.main()
