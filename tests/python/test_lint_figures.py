"""scripts/lint_figures.py (run by scripts/lint): a figure in a documentation table must
name an existing result file under bench/results/, in its row or the table's caption; a
figure in bench/README.md's prose must be in a result file its paragraph or section names."""

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

    def prose(self, text):
        return self.lint(text, "bench/README.md")

    def test_a_prose_figure_in_no_named_file_is_rejected(self):
        r = self.prose("## Bridge\n\nServe runs at 1,650 µs per run.\n")
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertIn("bench/README.md:3", r.stderr)
        self.assertIn("1,650 µs", r.stderr)
        # Named, but the file holds another figure: still rejected, naming what was read.
        r = self.prose("## Bridge\n\nServe runs at 1,650 µs per run (`results/bridge.txt`).\n")
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertIn("named: bridge.txt", r.stderr)

    def test_a_prose_figure_traces_at_its_precision_and_in_a_nearby_unit(self):
        for figure in ("831 us", "831 µs", "0.83 ms", "~830 µs", "831us"):
            r = self.prose(f"Serve at 1,000 streams: {figure} (`results/bridge.txt`).\n")
            self.assertEqual(r.returncode, 0, figure + ": " + r.stderr)
        r = self.prose("Serve at 1,000 streams: 840 µs (`results/bridge.txt`).\n")
        self.assertEqual(r.returncode, 1, r.stderr)
        # A ratio has no family to convert within: 831 is no 0.831×.
        r = self.prose("Serve at 1,000 streams: 0.831× (`results/bridge.txt`).\n")
        self.assertEqual(r.returncode, 1, r.stderr)

    def test_the_section_may_name_the_file_for_its_paragraphs(self):
        text = (
            "## Bridge (`results/bridge.txt`)\n\nServe: 831 µs.\n\n## Other\n\n"
            "Serve again: 831 µs.\n"
        )
        r = self.prose(text)
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertIn("bench/README.md:7", r.stderr)
        self.assertNotIn("bench/README.md:3", r.stderr)

    def test_a_derived_figure_needs_both_of_its_figures_traced(self):
        with open(os.path.join(self.root, "bench", "results", "ab.txt"), "w") as f:
            f.write("old 190 MB\nnew 103 MB\n")
        ok = "Before and after (`results/ab.txt`): 190 → 103 MB (0.54×, 46% less; 87 MB).\n"
        self.assertEqual(self.prose(ok).returncode, 0, self.prose(ok).stderr)
        bad = "Before and after (`results/ab.txt`): 190 → 103 MB (0.6×).\n"
        self.assertEqual(self.prose(bad).returncode, 1)

    def test_not_stored_exempts_its_sentence_only(self):
        ok = "A hand run gave 592.5 us (not stored). Stored: 831 us (`results/bridge.txt`).\n"
        self.assertEqual(self.prose(ok).returncode, 0, self.prose(ok).stderr)
        bad = "A hand run gave 592.5 us (not stored). Another gave 600 us.\n"
        r = self.prose(bad)
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertIn("600 us", r.stderr)
        self.assertNotIn("592.5", r.stderr)

    def test_targets_code_and_tables_are_no_prose_figures(self):
        text = (
            "The target: serve ≤ 300 µs per run, runtime ≥ 20× below; run `sleep 5 s`.\n\n"
            "```\nreal 4.2 s\n```\n"
        )
        r = self.prose(text)
        self.assertEqual(r.returncode, 0, r.stderr)
        # The README's prose is not held to it: only bench/README.md (lab notes).
        self.assertEqual(self.lint("Serve runs at 1,650 µs per run.\n").returncode, 0)

    def test_a_replaced_result_file_is_named_with_its_commit(self):
        def git(*args):
            subprocess.run(["git", "-C", self.root, *args], check=True, capture_output=True)

        git("init", "-q")
        git("-c", "user.name=t", "-c", "user.email=t@t", "add", "bench/results/bridge.txt")
        git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "a run")
        commit = subprocess.run(
            ["git", "-C", self.root, "rev-parse", "--short", "HEAD"],
            capture_output=True, text=True, check=True,
        ).stdout.strip()
        with open(os.path.join(self.root, "bench", "results", "bridge.txt"), "w") as f:
            f.write("p50 1650 us\n")  # the run that replaced it
        old = f"The run before: 831 µs (`results/bridge.txt@{commit}`).\n"
        self.assertEqual(self.prose(old).returncode, 0, self.prose(old).stderr)
        self.assertEqual(self.prose(old.replace(commit, "")).returncode, 1)

    def test_the_repository_s_docs_trace(self):
        r = subprocess.run([sys.executable, SCRIPT], capture_output=True, text=True)
        self.assertEqual(r.returncode, 0, r.stderr)


if __name__ == "__main__":
    unittest.main()
