"""DeerFlow's ``sandbox:`` config section as the Guestflow provider reads it, offline:
DeerFlow builds the provider with no arguments from ``sandbox.use`` (its
``get_sandbox_provider``), and every key the section names is honoured or refused at
construction naming it (the keys and their meaning are DeerFlow's
``deerflow/config/sandbox_config.py`` and ``config.example.yaml``). test_deerflow.py
checks the honoured keys with real guests."""

from __future__ import annotations

import importlib.util
import os
import re
import unittest
from unittest import mock
from types import SimpleNamespace

from deerflow.config import app_config
from deerflow.config.sandbox_config import SandboxConfig
from deerflow.sandbox.sandbox_provider import get_sandbox_provider, reset_sandbox_provider

from langflow_guestflow.deerflow import GuestflowConfigError, GuestflowSandboxProvider, SessionSettings
from tests._deerflow_server import DeerFlowHome

USE = "langflow_guestflow.deerflow:GuestflowSandboxProvider"


def _section(**keys: object) -> SandboxConfig:
    return SandboxConfig(use=USE, **keys)


class _Recorder:
    """A client recording each JSON request body; answers a session for every acquire."""

    def __init__(self) -> None:
        self.bodies: list[tuple[str, object]] = []

    def json(self, method: str, path: str, **kwargs: object) -> object:
        self.bodies.append((path, kwargs.get("json_body")))
        body = kwargs.get("json_body") or {}
        return {"session_id": "gf-b-" + str(body.get("thread_id", "x")), "state": "active", "user_id": body.get("user_id"), "thread_id": body.get("thread_id")}


class ConstructionTest(unittest.TestCase):
    """What the section does to the provider, offline."""

    def tearDown(self) -> None:
        reset_sandbox_provider()
        app_config.reset_app_config()

    def test_deerflow_builds_it_from_sandbox_use_with_no_arguments(self) -> None:
        app_config.set_app_config(SimpleNamespace(sandbox=_section(replicas=2, environment={"NODE_ENV": "production"})))
        provider = get_sandbox_provider()
        self.assertIsInstance(provider, GuestflowSandboxProvider)
        self.assertEqual(provider.settings.replicas, 2)
        self.assertEqual(provider.settings.environment, {"NODE_ENV": "production"})

    def test_without_a_section_key_the_defaults_are_deerflows(self) -> None:
        settings = GuestflowSandboxProvider(url="http://127.0.0.1:9", config=_section()).settings
        # overflow_policy "wait", acquire_timeout 30, bash_command_timeout 600 (SandboxConfig's defaults).
        self.assertEqual(settings, SessionSettings(wait_for_capacity=True, acquire_timeout=30.0, command_timeout=600))

    def test_every_key_it_cannot_honour_is_refused_naming_it(self) -> None:
        refused = {
            "idle_timeout": -1,
            "memory_mib": 0,
            "cpus": 1.5,
            "mounts": [{"host_path": "relative/x", "container_path": "/mnt/x", "read_only": True}],
            "sync_thread_dir": "no",
            "thread_data_mounts": True,
            "port": 8080,
            "container_prefix": "deer-flow-sandbox",
            "health_check_skip_seconds": 0.0,
            "ownership": {"type": "redis"},
            "provisioner_api_key": "k",
            "provisioner_url": "http://provisioner:8002",  # an AioSandboxProvider extra key
            "api_key": "e2b",  # E2B's / Tenki's own key
            "template": "base",
            "memory_mb": 2048,
            "overflow_policy": "burst",
            "burst_limit": 2,
            "allow_host_bash": True,
            "replicas": 0,
            "acquire_timeout": 0,
            "bash_command_timeout": 100000,
            "environment": {"BAD-NAME": "x"},
            "allow_network": "yes",
        }
        for key, value in refused.items():
            with self.subTest(key=key):
                section = {"use": USE, key: value}
                with self.assertRaises(GuestflowConfigError) as caught:
                    GuestflowSandboxProvider(url="http://127.0.0.1:9", config=section)
                self.assertTrue(re.match(rf"sandbox\.{key}(\[0\]\.host_path)?: ", str(caught.exception)), str(caught.exception))

    def test_a_refused_key_in_deerflows_model_is_refused_through_the_factory(self) -> None:
        app_config.set_app_config(SimpleNamespace(sandbox=_section(port=8080)))
        with self.assertRaisesRegex(GuestflowConfigError, r"^sandbox\.port: .*AioSandboxProvider"):
            get_sandbox_provider()

    def test_deerflows_own_keys_are_accepted(self) -> None:
        section = _section(bash_output_max_chars=100, read_file_output_max_chars=100, ls_output_max_chars=100, allow_host_bash=False, burst_limit=0)
        self.assertEqual(GuestflowSandboxProvider(url="http://127.0.0.1:9", config=section).settings, SessionSettings())

    @unittest.skipUnless(importlib.util.find_spec("yaml"), "PyYAML (DeerFlow's config loader) is not installed")
    def test_the_readme_config_yaml_excerpt_works(self) -> None:
        import yaml

        readme = open(os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "README.md"), encoding="utf-8").read()
        block = re.search(r"## DeerFlow\n.*?```yaml\n(.*?)```", readme, re.S)
        assert block is not None, "no config.yaml excerpt in the README's DeerFlow section"
        with mock.patch.dict(os.environ, {"MY_API_KEY": "k-123"}):
            data = app_config.AppConfig.resolve_env_variables(yaml.safe_load(block.group(1)))
        app_config.set_app_config(SimpleNamespace(sandbox=SandboxConfig(**data["sandbox"])))
        provider = get_sandbox_provider()
        self.assertIsInstance(provider, GuestflowSandboxProvider)
        self.assertEqual(
            provider.settings,
            SessionSettings(
                environment={"PYTHONUNBUFFERED": "1", "API_KEY": "k-123"},
                replicas=3,
                idle_timeout=600,
                memory_mib=1024,
                cpus=1,
                wait_for_capacity=True,
                acquire_timeout=30.0,
                command_timeout=600,
                mounts=({"host_path": "/srv/deerflow/shared", "container_path": "/mnt/shared", "read_only": True},),
            ),
        )

    def test_image_mounts_allow_network_and_the_thread_dir_go_with_every_acquire(self) -> None:
        home = DeerFlowHome()
        home.start()
        self.addCleanup(home.stop)
        mounts = [{"host_path": "/srv/project", "container_path": "/mnt/project", "read_only": True}, {"host_path": "/srv/shared", "container_path": "/home/user/shared"}]
        provider = GuestflowSandboxProvider(url="http://127.0.0.1:9", config=_section(image="python:3.12-slim", allow_network=True, mounts=mounts))
        recorder = _Recorder()
        provider._client = recorder  # type: ignore[assignment]
        provider.acquire("t1", user_id="u")
        provider.acquire(None, user_id="u")  # no thread: no thread directory
        thread_dir = os.path.join(home.path, "users", "u", "threads", "t1", "user-data")
        want_mounts = [dict(mounts[0]), dict(mounts[1], read_only=False)]
        self.assertEqual(recorder.bodies[0], ("/v1/sessions", {"user_id": "u", "thread_id": "t1", "allow_network": True, "image": "python:3.12-slim", "mounts": want_mounts, "thread_dir": thread_dir}))
        self.assertNotIn("thread_dir", recorder.bodies[1][1])
        # DeerFlow's ensure_thread_dirs made the thread's directories, as its providers do.
        for sub in ("user-data/workspace", "user-data/uploads", "user-data/outputs", "acp-workspace"):
            self.assertTrue(os.path.isdir(os.path.join(home.path, "users", "u", "threads", "t1", sub)), sub)
        # sync_thread_dir: false sends none.
        quiet = GuestflowSandboxProvider(url="http://127.0.0.1:9", config=_section(sync_thread_dir=False))
        quiet._client = recorder = _Recorder()  # type: ignore[assignment]
        quiet.acquire("t2", user_id="u")
        self.assertEqual(recorder.bodies, [("/v1/sessions", {"user_id": "u", "thread_id": "t2", "allow_network": False})])

    def test_idle_timeout_memory_mib_and_cpus_go_with_every_acquire(self) -> None:
        # DeerFlow's idle_timeout is declared by its SandboxConfig; memory_mib and cpus
        # (BoxLite's) are extra keys, in model_extra.
        section = _section(idle_timeout=0, memory_mib=1024, cpus=2, sync_thread_dir=False)
        self.assertEqual(section.model_extra, {"memory_mib": 1024, "cpus": 2, "sync_thread_dir": False})
        provider = GuestflowSandboxProvider(url="http://127.0.0.1:9", config=section)
        self.assertEqual((provider.settings.idle_timeout, provider.settings.memory_mib, provider.settings.cpus), (0, 1024, 2))
        provider._client = recorder = _Recorder()  # type: ignore[assignment]
        provider.acquire("t1", user_id="u")
        provider.acquire("t2", user_id="u")
        want = {"user_id": "u", "allow_network": False, "idle_timeout_seconds": 0, "memory_mib": 1024, "cpus": 2}
        self.assertEqual(recorder.bodies, [("/v1/sessions", dict(want, thread_id="t1")), ("/v1/sessions", dict(want, thread_id="t2"))])
        # Each alone; unset, the server's own (nothing sent).
        for key, value, wire in (("idle_timeout", 600, "idle_timeout_seconds"), ("memory_mib", 512, "memory_mib"), ("cpus", 4, "cpus")):
            with self.subTest(key=key):
                one = GuestflowSandboxProvider(url="http://127.0.0.1:9", config=_section(sync_thread_dir=False, **{key: value}))
                one._client = recorder = _Recorder()  # type: ignore[assignment]
                one.acquire("t", user_id="u")
                self.assertEqual(recorder.bodies, [("/v1/sessions", {"user_id": "u", "thread_id": "t", "allow_network": False, wire: value})])
        self.assertEqual(GuestflowSandboxProvider(url="http://127.0.0.1:9", config=_section(idle_timeout=None)).settings.idle_timeout, None)

    def test_idle_timeout_memory_mib_and_cpus_out_of_range_are_refused_naming_the_key(self) -> None:
        for key, value, says in (
            ("idle_timeout", 604801, "at most 604800 seconds"),
            ("idle_timeout", 1.5, "expected a whole number"),
            ("idle_timeout", "600", "expected a number"),
            ("memory_mib", -1, "expected at least 1"),
            ("memory_mib", "1g", "expected a number"),
            ("memory_mib", True, "expected a number"),
            ("cpus", 0, "expected at least 1"),
            ("cpus", 0.5, "expected a whole number"),
        ):
            with self.subTest(key=key, value=value):
                with self.assertRaises(GuestflowConfigError) as caught:
                    GuestflowSandboxProvider(url="http://127.0.0.1:9", config={"use": USE, key: value})
                self.assertTrue(str(caught.exception).startswith(f"sandbox.{key}: "), str(caught.exception))
                self.assertIn(says, str(caught.exception))

    def test_overflow_policy_and_acquire_timeout(self) -> None:
        self.assertFalse(GuestflowSandboxProvider(url="http://127.0.0.1:9", config=_section(overflow_policy="reject")).settings.wait_for_capacity)
        settings = GuestflowSandboxProvider(url="http://127.0.0.1:9", config=_section(overflow_policy="wait", acquire_timeout=7)).settings
        self.assertTrue(settings.wait_for_capacity)
        self.assertEqual(settings.acquire_timeout, 7.0)


if __name__ == "__main__":
    unittest.main()
