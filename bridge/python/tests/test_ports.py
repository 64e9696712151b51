"""Service URLs through a real ``guestflow serve`` (its embedded control plane, reached over
its Unix socket) with real guests: the DeerFlow sandbox's ``expose_port`` and the plugin's
``langflow_guestflow.expose_port`` give a URL that reaches a server in the session's guest —
plain HTTP and a WebSocket — without the server's token, and that stops working once it
expires."""

from __future__ import annotations

import base64
import os
import socket
import time
import unittest
import urllib.error
import urllib.parse
import urllib.request
from typing import Any

import langflow_guestflow
from langflow_guestflow.deerflow import GuestflowSandboxProvider
from tests._deerflow_server import DeerFlowServer

# A DeerFlow home: the provider makes the thread's directories under it.
MODULE = DeerFlowServer(extra_env={"GUESTFLOW_PORT_URL_TTL_SECONDS": "600"})
DEADLINE_SECONDS = 30.0

# A WebSocket echo in the guest (standard library only), on the port given.
ECHO = r'''
import base64, hashlib, socketserver, struct, sys
class H(socketserver.StreamRequestHandler):
    def handle(self):
        key = ""
        while True:
            line = self.rfile.readline().decode("latin-1")
            if line in ("\r\n", ""):
                break
            if line.lower().startswith("sec-websocket-key:"):
                key = line.split(":", 1)[1].strip()
        acc = base64.b64encode(hashlib.sha1((key + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11").encode()).digest())
        self.wfile.write(b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: " + acc + b"\r\n\r\n")
        while True:
            head = self.rfile.read(2)
            if len(head) < 2:
                return
            n = head[1] & 0x7F
            if n == 126:
                n = struct.unpack(">H", self.rfile.read(2))[0]
            mask = self.rfile.read(4)
            data = bytes(b ^ mask[i % 4] for i, b in enumerate(self.rfile.read(n)))
            if head[0] & 0x0F == 8:
                return
            self.wfile.write(bytes([0x81, n]) + data if n < 126 else bytes([0x81, 126]) + struct.pack(">H", n) + data)
class S(socketserver.ThreadingTCPServer):
    allow_reuse_address = True
    daemon_threads = True
S(("0.0.0.0", int(sys.argv[1])), H).serve_forever()
'''


def setUpModule() -> None:  # noqa: N802
    MODULE.start()


def tearDownModule() -> None:  # noqa: N802
    MODULE.stop()


def _get(url: str) -> tuple[int, bytes]:
    """GET without any token (the URL carries its own) and without a proxy."""
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    try:
        with opener.open(url, timeout=30) as resp:
            return resp.status, resp.read()
    except urllib.error.HTTPError as err:
        return err.code, err.read()


def _until(url: str, status: int) -> tuple[int, bytes]:
    """Polls ``url`` until it answers ``status`` (a server starting in the background)."""
    deadline = time.monotonic() + DEADLINE_SECONDS
    while True:
        got = _get(url)
        if got[0] == status or time.monotonic() > deadline:
            return got
        time.sleep(0.05)


def _ws_frame(payload: bytes) -> bytes:
    mask = os.urandom(4)
    body = bytes(b ^ mask[i % 4] for i, b in enumerate(payload))
    return bytes([0x81, 0x80 | len(payload)]) + mask + body


def _ws_open(url: urllib.parse.SplitResult) -> tuple[socket.socket, Any]:
    """A WebSocket through the URL once the guest's echo listens (polled: it starts in the
    background; before that the control plane answers 502)."""
    deadline = time.monotonic() + DEADLINE_SECONDS
    while True:
        s = socket.create_connection((url.hostname, url.port), timeout=30)
        key = base64.b64encode(os.urandom(16)).decode()
        s.sendall(
            f"GET {url.path} HTTP/1.1\r\nHost: {url.netloc}\r\nUpgrade: websocket\r\n"
            f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n".encode()
        )
        reader = s.makefile("rb")
        status = reader.readline()
        while reader.readline() not in (b"\r\n", b""):
            pass
        if b" 101 " in status:
            return s, reader
        reader.close()
        s.close()
        if time.monotonic() > deadline:
            msg = f"no WebSocket through {url.geturl()}: {status!r}"
            raise AssertionError(msg)
        time.sleep(0.05)


class PortsTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls) -> None:
        assert MODULE.server is not None
        cls.server = MODULE.server
        cls.provider = GuestflowSandboxProvider(url=cls.server.url, token=cls.server.token, config={})
        cls.sandbox_id = cls.provider.acquire("thread-ports", user_id="user-1")
        sandbox = cls.provider.get(cls.sandbox_id)
        assert sandbox is not None
        cls.sandbox = sandbox
        sandbox.write_file("/workspace/site/hello.txt", "hello through the URL\n")
        sandbox.write_file("/workspace/echo.py", ECHO)
        out = sandbox.execute_command(
            "cd /workspace/site && (setsid python3 -m http.server 8000 >/workspace/http.log 2>&1 &) && "
            "(setsid python3 /workspace/echo.py 8001 >/workspace/echo.log 2>&1 &)"
        )
        assert "Error" not in out, out

    @classmethod
    def tearDownClass(cls) -> None:
        if hasattr(cls, "provider"):
            cls.provider.delete(cls.sandbox_id)

    def test_the_sandbox_and_the_plugin_give_urls_that_reach_the_guests_server(self) -> None:
        url = self.sandbox.expose_port(8000)
        self.assertTrue(url.startswith(self.server.url + "/v1/ports/"), url)
        status, body = _until(url + "hello.txt", 200)
        self.assertEqual((status, body), (200, b"hello through the URL\n"))
        listing = _until(url, 200)[1]
        self.assertIn(b"hello.txt", listing)
        plugin_url = langflow_guestflow.expose_port(self.sandbox_id, 8000, url=self.server.url, token=self.server.token)
        self.assertEqual(_get(plugin_url + "hello.txt"), (200, b"hello through the URL\n"))

    def test_a_websocket_echo_round_trips(self) -> None:
        url = urllib.parse.urlsplit(self.sandbox.expose_port(8001))
        s, reader = _ws_open(url)
        with s, reader:
            for i in range(50):
                msg = f"message {i}".encode()
                s.sendall(_ws_frame(msg))
                head = reader.read(2)
                self.assertEqual(head[0], 0x81)
                self.assertEqual(reader.read(head[1] & 0x7F), msg)

    def test_an_expired_or_altered_url_is_refused_and_bad_ports_are_value_errors(self) -> None:
        url = self.sandbox.expose_port(8000, ttl_seconds=1)
        self.assertEqual(_until(url, 401)[0], 401)
        good = self.sandbox.expose_port(8000)
        self.assertEqual(_until(good, 200)[0], 200)
        altered = good[:-2] + ("0" if good[-2] != "0" else "1") + "/"
        self.assertEqual(_get(altered)[0], 401)
        for port in (0, 65536, True, "8000"):
            with self.assertRaises(ValueError):
                self.sandbox.expose_port(port)  # type: ignore[arg-type]
            with self.assertRaises(ValueError):
                langflow_guestflow.expose_port(self.sandbox_id, port, url=self.server.url, token=self.server.token)  # type: ignore[arg-type]


if __name__ == "__main__":
    unittest.main()
