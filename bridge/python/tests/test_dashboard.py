"""The Grafana dashboard (docs/grafana/guestflow.json) queries only series a real serve exports.

A real ``guestflow serve`` on 127.0.0.1 (``tests/_server.py``) answers ``GET /metrics``;
every metric name in every panel's PromQL and in the template variables must be in it, every
``by (...)`` label must be on that metric's series, and every ``label="value"`` matcher must
match a series (``instance`` and ``job`` are Prometheus's own, added at scrape). A checker
that finds nothing wrong in a dashboard naming a series serve lacks would pass anything:
``test_the_check_finds_a_missing_series`` shows it does not.
"""

from __future__ import annotations

import json
import re
import unittest
from pathlib import Path

from tests._server import ModuleServer

MODULE = ModuleServer()
setUpModule = MODULE.start  # noqa: N816 (unittest looks these names up)
tearDownModule = MODULE.stop  # noqa: N816

REPO = Path(__file__).resolve().parents[3]
DASHBOARD = REPO / "docs" / "grafana" / "guestflow.json"
_SAMPLE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?\s+\S+")
_LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)\s*(=~|!=|!~|=)\s*"((?:[^"\\]|\\.)*)"')
_SELECTOR = re.compile(r"\b(guestflow_[a-z0-9_]+)\s*(?:\{([^}]*)\})?")
_BY = re.compile(r"\bby\s*\(([^)]*)\)")
_LABEL_VALUES = re.compile(r"label_values\(\s*(guestflow_[a-z0-9_]+)\s*,\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*\)")
PROMETHEUS_LABELS = {"instance", "job"}


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
        cls.series = parse_exposition(body.decode())

    def test_every_queried_series_is_in_a_real_serves_metrics(self) -> None:
        self.assertEqual(problems(self.dashboard, self.series), [])

    def test_it_covers_runs_outcomes_latency_guests_and_streams(self) -> None:
        exprs = " ".join(expr for _, expr in queries(self.dashboard))
        for name in (
            "guestflow_runs_inflight",
            "guestflow_runs_total",
            "guestflow_controlplane_call_seconds_bucket",
            "guestflow_guests_created_total",
            "guestflow_guests_pending_delete",
            "guestflow_streams_open",
            "guestflow_http_requests_total",
        ):
            self.assertIn(name, exprs)
        self.assertIn("sum by (outcome)", exprs)

    def test_panels_use_the_datasource_variable_and_the_instance_filter(self) -> None:
        ids = []
        for panel in self.dashboard["panels"]:
            ids.append(panel["id"])
            if panel["type"] == "row":
                continue
            self.assertEqual(panel["datasource"]["uid"], "${datasource}", panel["title"])
            self.assertTrue(panel["description"], panel["title"])
            for target in panel["targets"]:
                self.assertIn('instance=~"$instance"', target["expr"], panel["title"])
        self.assertEqual(len(ids), len(set(ids)), "panel ids are unique")

    def test_the_check_finds_a_missing_series(self) -> None:
        broken = json.loads(json.dumps(self.dashboard))
        target = next(p for p in broken["panels"] if p["type"] != "row")["targets"][0]
        target["expr"] = 'sum by (shape) (guestflow_pool_guests{instance=~"$instance",state="ready"})'
        broken["panels"].append(
            {
                "type": "timeseries",
                "id": 999,
                "title": "x",
                "targets": [{"refId": "A", "expr": 'sum(guestflow_runs_total{outcome="no_such_outcome"})'}],
            }
        )
        found = problems(broken, self.series)
        self.assertTrue(any("guestflow_pool_guests is not in /metrics" in p for p in found), found)
        self.assertTrue(any('outcome="no_such_outcome"' in p for p in found), found)


if __name__ == "__main__":
    unittest.main()
