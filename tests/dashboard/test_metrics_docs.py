"""docs/dashboard.md's Grafana dashboard and alert rules: they parse, and every query names a
metric /metrics exports, with rate() and increase() only over counters and histogram buckets."""

from __future__ import annotations

import importlib
import json
import re
from pathlib import Path
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

from oncefire import App
from oncefire.web.dashboard.metrics import exposition

DOCS = Path(__file__).parents[2] / "docs"
yaml: Any = importlib.import_module("yaml")  # PyYAML ships no type hints
RATED = re.compile(r"\b(?:rate|increase)\(\s*(oncefire_\w+)")


def exported(app: App) -> tuple[set[str], set[str]]:
    """The sample names /metrics exports, and those of them that only grow."""
    app.on_document_created("orders/{o}", name="ship")(lambda event: None)
    names, growing = set(), set()
    for family in text_string_to_metric_families(exposition(app).decode()):
        for sample in family.samples:
            names.add(sample.name)
            if family.type == "counter" or sample.name.endswith("_bucket"):
                growing.add(sample.name)
    return names, growing


def check(expr: str, names: set[str], growing: set[str]) -> None:
    used = set(re.findall(r"\boncefire_\w+", expr))
    assert used, expr
    assert used <= names, (used - names, expr)
    assert set(RATED.findall(expr)) <= growing, expr  # never rate() over a gauge


def test_the_grafana_dashboard_is_json_whose_queries_read_exported_metrics(app: App) -> None:
    names, growing = exported(app)
    dashboard = json.loads((DOCS / "dashboard" / "grafana.json").read_text(encoding="utf-8"))
    exprs = [t["expr"] for p in dashboard["panels"] for t in p["targets"]]
    assert len(exprs) >= 10
    for expr in exprs:
        check(expr, names, growing)
    joined = " ".join(exprs)
    assert "histogram_quantile(" in joined and "rate(" in joined and "increase(" in joined


def test_the_alert_rules_are_yaml_whose_queries_read_exported_metrics(app: App) -> None:
    names, growing = exported(app)
    text = (DOCS / "dashboard.md").read_text(encoding="utf-8")
    (block,) = [b for b in re.findall(r"```yaml\n(.*?)```", text, re.S) if "groups:" in b]
    rules: dict[str, Any] = yaml.safe_load(block)
    alerts = {r["alert"]: r["expr"] for g in rules["groups"] for r in g["rules"]}
    assert {"OncefireDeadLetters", "OncefireFailureRatio", "OncefireBacklogAge"} <= set(alerts)
    for expr in alerts.values():
        check(expr, names, growing)
