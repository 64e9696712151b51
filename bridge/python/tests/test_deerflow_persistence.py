"""A DeerFlow thread's files outlive its guest's eviction, through the provider, on a real
``guestflow serve`` with DeerFlow's default of 3 replicas: four threads are acquired, used
and released in turn, so the fourth evicts the first (stopped, not deleted), and when the
first thread comes back every upload and output is still there."""

from __future__ import annotations

import json
import unittest

from langflow_guestflow.deerflow import GuestflowSandboxProvider
from tests._deerflow_server import DeerFlowServer

MODULE = DeerFlowServer(extra_env={"GUESTFLOW_SESSION_REPLICAS": "3"})


def setUpModule() -> None:  # noqa: N802
    MODULE.start()


def tearDownModule() -> None:  # noqa: N802
    MODULE.stop()


class PersistenceTest(unittest.TestCase):
    def test_four_threads_with_three_replicas_the_first_keeps_every_file(self) -> None:
        assert MODULE.server is not None
        provider = GuestflowSandboxProvider(url=MODULE.server.url, token=MODULE.server.token, config={"sync_thread_dir": False})  # the guest's own files, no host copy
        self.addCleanup(lambda: [provider.delete(sid) for sid in list(provider._objects)])
        ids = []
        for n in range(4):
            sid = provider.acquire(f"thread-{n}", user_id="persist")
            sandbox = provider.get(sid)
            assert sandbox is not None
            sandbox.update_file(f"/mnt/user-data/uploads/upload-{n}.bin", bytes([n]) * 1000)
            sandbox.write_file(f"/mnt/user-data/outputs/report-{n}.md", f"# thread {n}\n")
            sandbox.write_file("/mnt/user-data/workspace/notes.txt", f"notes of {n}\n")
            provider.release(sid)
            ids.append(sid)
        status, body = MODULE.server.get("/v1/sessions/" + ids[0])
        self.assertEqual(status, 200, body)
        self.assertEqual(json.loads(body)["state"], "stopped", body)  # evicted: stopped, files kept
        self.assertEqual(provider.acquire("thread-0", user_id="persist"), ids[0])
        first = provider.get(ids[0])
        assert first is not None
        self.assertEqual(first.download_file("/mnt/user-data/uploads/upload-0.bin"), bytes([0]) * 1000)
        self.assertEqual(first.read_file("/mnt/user-data/outputs/report-0.md"), "# thread 0\n")
        self.assertEqual(first.read_file("/mnt/user-data/workspace/notes.txt"), "notes of 0\n")
        self.assertEqual(sorted(first.list_dir("/mnt/user-data/outputs")), ["/mnt/user-data/outputs/report-0.md"])


if __name__ == "__main__":
    unittest.main()
