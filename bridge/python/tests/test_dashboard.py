"""The Grafana dashboard (docs/grafana/guestflow.json) queries only series real servers export.

A real ``guestflow serve`` on 127.0.0.1 (``tests/_server.py``) and a real ``guestflow
control-plane`` with a warm pool (its pools and node: serve exports neither) answer ``GET
/metrics``; every metric name in every panel's PromQL and in the template variables must be
in one of them, every ``by (...)`` label must be on that metric's series, and every
``label="value"`` matcher must match a series (``instance`` and ``job`` are Prometheus's own,
added at scrape). A checker that finds nothing wrong in a dashboard naming a series neither
exports would pass anything: ``test_the_check_finds_a_missing_series`` shows it does not.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import time
import unittest
from pathlib import Path

from tests._server import ModuleServer, Server

MODULE = ModuleServer()
POOL_SHAPE = "s-1vcpu-256mb"
NODE = "dashboard-node"
POOL_DEADLINE_SECONDS = 60.0

REPO = Path(__file__).resolve().parents[3]
DASHBOARD = REPO / "docs" / "grafana" / "guestflow.json"
_SAMPLE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?\s+\S+")
_LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)\s*(=~|!=|!~|=)\s*"((?:[^"\\]|\\.)*)"')
_SELECTOR = re.compile(r"\b(guestflow_[a-z0-9_]+)\s*(?:\{([^}]*)\})?")
_BY = re.compile(r"\bby\s*\(([^)]*)\)")
_LABEL_VALUES = re.compile(r"label_values\(\s*(guestflow_[a-z0-9_]+)\s*,\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*\)")
PROMETHEUS_LABELS = {"instance", "job"}
# Series a control plane exports (GET /metrics on `guestflow control-plane`), not serve.
CONTROL_PLANE_SERIES = re.compile(r"\bguestflow_(pool|node)_")


class ControlPlane(Server):
    """``guestflow control-plane`` on 127.0.0.1:0 with an API key and a one-guest warm pool,
    stopped (SIGTERM, exit 0, its pool guest deleted) like serve."""

    def __init__(self) -> None:
        super().__init__()
        self.key = secrets.token_hex(16)

    STATE_PREFIX = "gf-python-cp-"

    def args(self) -> list[str]:
        assert self.state_dir is not None
        args = ["control-plane", "--state-dir", os.path.join(self.state_dir, "state"), "--listen", "127.0.0.1:0"]
        return [*args, "--api-key", self.key, "--node", NODE, "--warm-pool", f"{POOL_SHAPE}=1"]

    def auth_header(self) -> tuple[str, str]:
        return "X-Api-Key", self.key

    def scrape(self) -> str:
        status, body = self.get("/metrics")
        if status != 200:
            msg = f"control plane GET /metrics answered {status}: {body[:200]!r}"
            raise AssertionError(msg)
        return body.decode()


CONTROL_PLANE = ControlPlane()


def setUpModule() -> None:  # noqa: N802 (unittest looks this name up)
    MODULE.start()
    try:
        CONTROL_PLANE.start()
    except BaseException:
        MODULE.stop()
        raise


def tearDownModule() -> None:  # noqa: N802
    try:
        CONTROL_PLANE.stop()
    finally:
        MODULE.stop()


def parse_exposition(text: str) -> dict[str, list[dict[str, str]]]:
    """Prometheus text format -> {series name: [label sets]}."""
    out: dict[str, list[dict[str, str]]] = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        m = _SAMPLE.match(line)
        if not m:
            raise AssertionError(f"not a sample line: {line!r}")
        labels = {k: v for k, _, v in _LABEL.findall(m.group(2) or "")}
        out.setdefault(m.group(1), []).append(labels)
    return out


def queries(dashboard: dict) -> list[tuple[str, str]]:
    """(where, PromQL) for every panel target and every query variable."""
    out = []

    def walk(panels: list) -> None:
        for panel in panels:
            for target in panel.get("targets", []):
                out.append((f"panel {panel['title']!r} {target['refId']}", target["expr"]))
            walk(panel.get("panels", []))

    walk(dashboard["panels"])
    for var in dashboard["templating"]["list"]:
        if var["type"] == "query":
            query = var["query"]["query"] if isinstance(var["query"], dict) else var["query"]
            out.append((f"variable ${var['name']}", query))
    return out


def problems(dashboard: dict, series: dict[str, list[dict[str, str]]]) -> list[str]:
    found = []
    for where, expr in queries(dashboard):
        names = set()
        for name, matchers in _SELECTOR.findall(expr):
            names.add(name)
            if name not in series:
                found.append(f"{where}: {name} is not in /metrics")
                continue
            for label, op, value in _LABEL.findall(matchers):
                if label in PROMETHEUS_LABELS:
                    continue
                if op == "=" and not any(s.get(label) == value for s in series[name]):
                    found.append(f'{where}: no {name} series has {label}="{value}"')
                elif op != "=" and not any(label in s for s in series[name]):
                    found.append(f"{where}: no {name} series has the label {label}")
        for group in _BY.findall(expr):
            for label in (part.strip() for part in group.split(",")):
                if label and label not in PROMETHEUS_LABELS and not any(
                    label in s for name in names if name in series for s in series[name]
                ):
                    found.append(f"{where}: by ({label}), a label no series of {sorted(names)} has")
        for name, label in _LABEL_VALUES.findall(expr):
            if label not in PROMETHEUS_LABELS and not any(label in s for s in series.get(name, [])):
                found.append(f"{where}: label_values({name}, {label}) has no such label")
        if not names:
            found.append(f"{where}: queries no guestflow series: {expr}")
    return found


class Dashboard(unittest.TestCase):
    @classmethod
    def setUpClass(cls) -> None:
        cls.dashboard = json.loads(DASHBOARD.read_text())
        status, body = MODULE.server.get("/metrics")
        if status != 200:
            raise AssertionError(f"GET /metrics answered {status}: {body[:200]!r}")
        cls.serve_series = parse_exposition(body.decode())
        # The pool guest is polled for (a deadline, not a sleep): its series exist at once,
        # but a scrape that shows it ready shows the pool as the dashboard will.
        deadline = time.monotonic() + POOL_DEADLINE_SECONDS
        ready = f'guestflow_pool_guests{{node="{NODE}",shape="{POOL_SHAPE}",image="debian:12",state="ready"}} 1'
        while ready not in (text := CONTROL_PLANE.scrape()).splitlines():
            if time.monotonic() > deadline:
                msg = f"no ready pool guest in {POOL_DEADLINE_SECONDS} s:\n{text}"
                raise AssertionError(msg)
            time.sleep(0.1)
        cls.control_plane_series = parse_exposition(text)
        cls.series = {**cls.serve_series}
        for name, labels in cls.control_plane_series.items():
            cls.series.setdefault(name, []).extend(labels)

    def test_every_queried_series_is_in_a_real_serves_or_control_planes_metrics(self) -> None:
        self.assertEqual(problems(self.dashboard, self.series), [])

    def test_serve_alone_lacks_the_pool_and_node_series(self) -> None:
        """The control plane's scrape is what makes the pool and node panels pass."""
        found = problems(self.dashboard, self.serve_series)
        self.assertTrue(found)
        self.assertTrue(all(CONTROL_PLANE_SERIES.search(p) for p in found), found)
        self.assertFalse(set(self.serve_series) & set(self.control_plane_series))

    def test_the_control_plane_needs_its_api_key(self) -> None:
        status, body = CONTROL_PLANE.get("/metrics", auth=False)
        self.assertEqual(status, 401, body[:200])
        self.assertNotIn(b"guestflow_", body)

    def test_the_node_reads_ready_and_carries_its_name(self) -> None:
        self.assertEqual(self.control_plane_series["guestflow_node_ready"], [{"node": NODE}])
        self.assertIn(f'guestflow_node_ready{{node="{NODE}"}} 1', CONTROL_PLANE.scrape().splitlines())

    def test_it_covers_runs_outcomes_latency_guests_streams_pools_and_nodes(self) -> None:
        exprs = " ".join(expr for _, expr in queries(self.dashboard))
        for name in (
            "guestflow_runs_inflight",
            "guestflow_runs_total",
            "guestflow_controlplane_call_seconds_bucket",
            "guestflow_guests_created_total",
            "guestflow_guests_pending_delete",
            "guestflow_streams_open",
            "guestflow_http_requests_total",
            "guestflow_pool_guests",
            "guestflow_pool_target",
            "guestflow_node_ready",
            "guestflow_node_draining",
            "guestflow_node_guests",
            "guestflow_node_memory_committed_mib",
            "guestflow_node_memory_budget_mib",
        ):
            self.assertIn(name, exprs)
        self.assertIn("sum by (outcome)", exprs)
        self.assertIn("sum by (shape, image)", exprs)
        self.assertIn("sum by (node)", exprs)

    def test_panels_use_the_datasource_variable_and_the_instance_or_node_filter(self) -> None:
        ids = []
        for panel in self.dashboard["panels"]:
            ids.append(panel["id"])
            if panel["type"] == "row":
                continue
            self.assertEqual(panel["datasource"]["uid"], "${datasource}", panel["title"])
            self.assertTrue(panel["description"], panel["title"])
            for target in panel["targets"]:
                # serve's series by the serve variable, a control plane's by the node one.
                want = 'node=~"$node"' if CONTROL_PLANE_SERIES.search(target["expr"]) else 'instance=~"$instance"'
                self.assertIn(want, target["expr"], panel["title"])
        self.assertEqual(len(ids), len(set(ids)), "panel ids are unique")

    def test_the_check_finds_a_missing_series(self) -> None:
        broken = json.loads(json.dumps(self.dashboard))
        target = next(p for p in broken["panels"] if p["type"] != "row")["targets"][0]
        target["expr"] = 'sum by (shape) (guestflow_pool_guestz{node=~"$node",state="ready"})'
        broken["panels"].append(
            {
                "type": "timeseries",
                "id": 999,
                "title": "x",
                "targets": [{"refId": "A", "expr": 'sum(guestflow_runs_total{outcome="no_such_outcome"})'}],
            }
        )
        broken["panels"].append(
            {
                "type": "timeseries",
                "id": 998,
                "title": "y",
                "targets": [{"refId": "A", "expr": 'sum(guestflow_pool_guests{state="built"})'}],
            }
        )
        found = problems(broken, self.series)
        self.assertTrue(any("guestflow_pool_guestz is not in /metrics" in p for p in found), found)
        self.assertTrue(any('outcome="no_such_outcome"' in p for p in found), found)
        self.assertTrue(any('state="built"' in p for p in found), found)


if __name__ == "__main__":
    unittest.main()
