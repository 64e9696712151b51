"""scripts/lint_figures.py (run by scripts/lint): a figure in a documentation table must
name an existing result file under bench/results/, in its row or the table's caption."""

import os
import subprocess
import sys
import tempfile
import unittest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRIPT = os.path.join(ROOT, "scripts", "lint_figures.py")


class LintFiguresTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.root = self.tmp.name
        os.makedirs(os.path.join(self.root, "bench", "results"))
        os.makedirs(os.path.join(self.root, "docs"))
        with open(os.path.join(self.root, "bench", "results", "bridge.txt"), "w") as f:
            f.write("p50 831 us\n")

    def tearDown(self):
        self.tmp.cleanup()

    def lint(self, readme, name="README.md"):
        path = os.path.join(self.root, name)
        with open(path, "w") as f:
            f.write(readme)
        env = dict(os.environ, GUESTFLOW_ROOT=self.root)
        return subprocess.run(
            [sys.executable, SCRIPT, path], env=env, capture_output=True, text=True
        )

    def test_a_figure_without_a_result_file_is_rejected(self):
        r = self.lint("Intro.\n\n| path | p50 |\n|---|---:|\n| serve | 831 µs |\n")
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertIn("README.md:5", r.stderr)
        self.assertIn("831 µs", r.stderr)

    def test_a_result_file_that_does_not_exist_does_not_trace(self):
        r = self.lint("| path | p50 |\n|---|---:|\n| serve | 831 µs, `bench/results/gone.txt` |\n")
        self.assertEqual(r.returncode, 1, r.stderr)

    def test_the_row_or_the_caption_may_name_the_file(self):
        in_row = "| path | p50 |\n|---|---:|\n| serve | 831 µs (`bench/results/bridge.txt`) |\n"
        self.assertEqual(self.lint(in_row).returncode, 0)
        caption = (
            "From `bench/results/bridge.txt`, medians:\n\n| path | p50 | ratio |\n"
            "|---|---:|---:|\n| serve | 831 | 0.87 |\n\n| target | measured |\n"
            "|---|---:|\n| under 1 ms | 4.4× |\n"
        )
        self.assertEqual(self.lint(caption).returncode, 0, self.lint(caption).stderr)

    def test_bench_readme_names_files_relative_to_its_folder(self):
        text = "`results/bridge.txt`:\n\n| path | CPU |\n|---|---:|\n| serve | 54.0 |\n"
        self.assertEqual(self.lint(text, "bench/README.md").returncode, 0)
        text = "`results/other.txt`:\n\n| path | CPU |\n|---|---:|\n| serve | 54.0 |\n"
        self.assertEqual(self.lint(text, "bench/README.md").returncode, 1)

    def test_a_setting_s_default_is_no_figure(self):
        text = (
            "| variable | default | effect |\n|---|---|---|\n"
            "| `X_TIMEOUT` | 30 | within 30 s; 80% of MemTotal; `--memory 256ms` |\n"
        )
        r = self.lint(text)
        self.assertEqual(r.returncode, 0, r.stderr)

    def test_the_repository_s_docs_trace(self):
        r = subprocess.run([sys.executable, SCRIPT], capture_output=True, text=True)
        self.assertEqual(r.returncode, 0, r.stderr)


if __name__ == "__main__":
    unittest.main()
