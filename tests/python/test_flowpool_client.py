"""bench/flowpool/flowpool.py's client of serve: each load thread keeps its connection alive
(as a real caller's pooled client does), opens a new one when serve closed the kept one;
the load loop (ClosedLoop) keeps k runs in flight on k kept connections from one thread and
checks each answer; results go to an --out-dir made when missing. A real HTTP/1.1 server on
loopback."""

import http.server
import json
import os
import socketserver
import sys
import tempfile
import threading
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "bench", "flowpool"))
import flowpool as fp  # noqa: E402


class Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive unless an answer says close

    def log_message(self, *args):
        pass

    def setup(self):
        super().setup()
        with self.server.lock:
            self.server.connections += 1

    def do_POST(self):
        body = self.rfile.read(int(self.headers["Content-Length"]))
        if self.path == "/v1/runs":
            return self.run(body)
        close = self.path == "/close"
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        if close:
            self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.write(body)
        self.close_connection = close
        if self.path == "/drop-after":  # answered, then closed while idle (no header said so)
            self.close_connection = True


    def run(self, body):
        """serve's /v1/runs as the load loop sees it: the answer holds the input upper-cased,
        unless the server's `mode` says otherwise."""
        with self.server.lock:
            self.server.runs += 1
            n = self.server.runs
        mode = self.server.mode
        if mode == "mute":  # closed, never answered
            self.close_connection = True
            return
        text = json.loads(body)["inputs"][0]["input_value"]
        status, out = 200, json.dumps({"outputs": text.upper()}).encode()
        if mode == "fail" and n == 2:
            status, out = 500, b'{"error":"boom"}'
        if mode == "wrong" and n == 2:
            out = b'{"outputs":"something else"}'
        self.send_response(status)
        self.send_header("Content-Length", str(len(out)))
        close = mode == "close"
        if close:
            self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.write(out)
        # "drop": answered, then closed while idle, no header saying so
        self.close_connection = close or mode == "drop"


def client(port):
    """A flowpool.Serve talking to `port`, without starting a serve."""
    s = object.__new__(fp.Serve)
    s.port = port
    s.conns = threading.local()
    s.keep_alive = True
    return s


class KeptConnections(unittest.TestCase):
    def setUp(self):
        self.srv = Server(("127.0.0.1", 0), Handler)
        self.srv.lock = threading.Lock()
        self.srv.connections = 0
        self.t = threading.Thread(target=self.srv.serve_forever, daemon=True)
        self.t.start()
        self.s = client(self.srv.server_address[1])

    def tearDown(self):
        if getattr(self.s.conns, "c", None) is not None:
            self.s.conns.c.close()
        self.srv.shutdown()
        self.srv.server_close()

    def test_one_thread_uses_one_connection(self):
        for i in range(5):
            self.assertEqual(self.s.request("POST", "/", {"i": i}), (200, b'{"i": %d}' % i))
        self.assertEqual(self.srv.connections, 1)

    def test_each_thread_has_its_own(self):
        out = []
        threads = [threading.Thread(target=lambda: out.extend(
            self.s.request("POST", "/", {"n": 1})[0] for _ in range(3))) for _ in range(3)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        self.assertEqual(out, [200] * 9)
        self.assertEqual(self.srv.connections, 3)

    def test_a_close_answer_or_a_closed_idle_connection_is_opened_again(self):
        self.assertEqual(self.s.request("POST", "/close", {"a": 1})[0], 200)
        self.assertEqual(self.s.request("POST", "/drop-after", {"b": 2})[0], 200)
        # The server closed it after answering; the next call finds it closed and reconnects.
        self.assertEqual(self.s.request("POST", "/", {"c": 3}), (200, b'{"c": 3}'))
        self.assertEqual(self.s.request("POST", "/", {"d": 4}), (200, b'{"d": 4}'))
        self.assertEqual(self.srv.connections, 3)

    def test_keep_alive_off_opens_one_per_call(self):
        self.s.keep_alive = False
        for _ in range(3):
            self.assertEqual(self.s.request("POST", "/", {})[0], 200)
        self.assertEqual(self.srv.connections, 3)


class LoadLoop(unittest.TestCase):
    def serve(self, mode="ok"):
        srv = Server(("127.0.0.1", 0), Handler)
        srv.lock, srv.connections, srv.runs, srv.mode = threading.Lock(), 0, 0, mode
        threading.Thread(target=srv.serve_forever, daemon=True).start()
        self.addCleanup(srv.server_close)
        self.addCleanup(srv.shutdown)
        return srv

    def test_k_runs_in_flight_on_k_kept_connections(self):
        srv = self.serve()
        lat, wall = fp.ClosedLoop(srv.server_address[1], {"nodes": []}).run(3, 10)
        self.assertEqual(len(lat), 10)
        self.assertTrue(all(x >= 0 for x in lat) and wall > 0)
        self.assertEqual((srv.runs, srv.connections), (10, 3))

    def test_before_each_run_is_called(self):
        srv = self.serve()
        calls = []
        lat, _ = fp.ClosedLoop(srv.server_address[1], {}, lambda: calls.append(1)).run(1, 4)
        self.assertEqual((len(lat), len(calls), srv.connections), (4, 4, 1))

    def test_a_close_answer_or_a_closed_idle_connection_is_opened_again(self):
        for mode in ("close", "drop"):
            srv = self.serve(mode)
            lat, _ = fp.ClosedLoop(srv.server_address[1], {}).run(2, 6)
            self.assertEqual(len(lat), 6, mode)
            self.assertEqual(srv.runs, 6, mode)  # "drop": each request sent once more, not twice
            self.assertEqual(srv.connections, 6, mode)

    def test_a_request_closed_unanswered_twice_is_raised_not_sent_again(self):
        srv = self.serve("mute")
        with self.assertRaises(RuntimeError) as e:
            fp.ClosedLoop(srv.server_address[1], {}).run(1, 3)
        self.assertIn("sent twice", str(e.exception))
        self.assertEqual(srv.runs, 2)

    def test_a_failed_or_wrong_answer_is_raised(self):
        for mode, why in (("fail", "500"), ("wrong", "something else")):
            srv = self.serve(mode)
            with self.assertRaises(RuntimeError) as e:
                fp.ClosedLoop(srv.server_address[1], {}).run(1, 3)
            self.assertIn(why, str(e.exception), mode)


class OutDir(unittest.TestCase):
    def test_a_missing_out_dir_is_made(self):
        with tempfile.TemporaryDirectory() as d:
            out = os.path.join(d, "not", "yet")
            fp.store_result(out, "flowpool-test", "abc1234", False, ["a line"], "cmd")
            names = os.listdir(out)
            self.assertEqual(len(names), 1)
            self.assertTrue(names[0].endswith("-abc1234-flowpool-test.txt"), names)


if __name__ == "__main__":
    unittest.main()
