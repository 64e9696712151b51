"""What a run of guest/runner.py imports: every run compiles its modules afresh (a new run
directory, no bytecode), so a module a run does not use must not be imported
(bench/results/runner_start.txt). Read from the interpreter's own record of the imports
(PYTHONPROFILEIMPORTTIME), which lists each module it loads while the run goes."""

from __future__ import annotations

import unittest

from .test_runner_exports import grouped_flow, text_of
from .test_runner_harness import assert_well_formed, chat, flow_graph, run_runner, spec_for

# Only for a run that uses them: the runner's own modules for tweaks, groups, frames over
# 1 MiB, the Python Interpreter and lfx, and the standard library's heavier modules.
RUNNER_EXTRAS = ("run_tweaks", "flow_groups", "frame_limits", "core_python", "lfx_start",
                 "lfx_path")
HEAVY_STDLIB = ("subprocess", "traceback", "datetime", "asyncio", "ast", "inspect", "uuid", "copy")
CORE_RUN = ("frame_protocol", "flow_graph", "run_errors", "run_services",
            "core_values", "core_components", "core_executor")


def imported_by(spec: dict, test: unittest.TestCase):
    """(result, the modules the runner imported while it ran `spec`); the run must succeed."""
    result = run_runner(spec, env={"PYTHONPROFILEIMPORTTIME": "1"})
    assert_well_formed(test, result)
    lines = [line.rsplit("|", 1)[-1].strip() for line in result.stderr.splitlines()
             if line.startswith("import time:")]
    if "site" in lines:  # what the interpreter's start-up imported is not the runner's doing
        lines = lines[lines.index("site") + 1:]
    names = set(lines)
    test.assertIn("json", names, "no import record on stderr")
    return result, names


class RunnerStart(unittest.TestCase):
    def test_a_core_run_imports_only_what_it_uses(self):
        _, names = imported_by(spec_for(flow_graph("hello"), [chat("hi")]), self)
        for module in CORE_RUN:
            self.assertIn(module, names)
        for module in RUNNER_EXTRAS + HEAVY_STDLIB:
            self.assertNotIn(module, names)

    def test_what_a_run_uses_is_imported_when_it_uses_it(self):
        tweaks = {"Group-g1": {"greeting_Prompt-p1": "Salut"}}  # the group's proxied field
        result, names = imported_by(spec_for(grouped_flow(), [chat("Ada")], tweaks=tweaks), self)
        self.assertEqual(text_of(result), "<<Salut, Ada!>>")
        self.assertIn("flow_groups", names)
        self.assertIn("run_tweaks", names)
        self.assertNotIn("core_python", names)
        _, names = imported_by(spec_for(flow_graph("python"), [chat("hi")]), self)
        self.assertIn("core_python", names)
        for module in ("flow_groups", "run_tweaks", "lfx_start", "subprocess"):
            self.assertNotIn(module, names)


if __name__ == "__main__":
    unittest.main()
