"""The metric names the chart's Grafana dashboard and PrometheusRule alerts query, and the
names a service's /metrics can serve, so a test can check the first are all among the
second (tests/e2e/test_metrics_health.py; the tokenizer's own tests in
tests/unit/test_promql_names.py).

The tokenizer is deliberately simple: PromQL is not parsed, but every identifier that
starts with one of our metric prefixes, outside string literals, is taken as a metric
name. Our label names (`queue`, `result`, `plugin`, ...) and PromQL's functions and
keywords never start with a prefix, so nothing else is caught.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import yaml

PREFIXES = ("splitsched_", "scheduler_")
_STRING = re.compile(r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'|`[^`]*`')
_IDENT = re.compile(r"(?<![A-Za-z0-9_:])[A-Za-z_:][A-Za-z0-9_:]*")
#: Grafana's variables outside strings, replaced by a value of their kind before parsing.
GRAFANA_VARIABLES = {"$__rate_interval": "5m"}
#: The sample names a family of each type is exposed as (OpenMetrics' `_created` aside).
_SUFFIXES = {
    "counter": ("_total",),
    "gauge": ("",),
    "histogram": ("_bucket", "_sum", "_count"),
    "summary": ("", "_sum", "_count"),
}


def metric_names(expr: str) -> set[str]:
    """The metric names an expression names: identifiers with one of `PREFIXES`, outside
    quoted strings (label values, regexes)."""
    bare = _STRING.sub('""', expr)
    return {m.group() for m in _IDENT.finditer(bare) if m.group().startswith(PREFIXES)}


def as_promql(expr: str) -> str:
    """A dashboard query as Prometheus would receive it (Grafana's variables replaced)."""
    for name, value in GRAFANA_VARIABLES.items():
        expr = expr.replace(name, value)
    return expr


def served_names(families: Iterable[tuple[str, str]]) -> set[str]:
    """The sample names that (family name, type) pairs from a scrape can serve, e.g. a
    counter `x` serves `x_total`, a histogram `h` serves `h_bucket`, `h_sum`, `h_count`."""
    return {name + suffix for name, kind in families for suffix in _SUFFIXES.get(kind, ("",))}


def dashboard_exprs(path: Path, *, variables: bool = True) -> list[str]:
    """Every query of a Grafana dashboard JSON: panel targets (rows' nested panels too)
    and, with `variables`, its query variables (Grafana's `label_values(...)`, not PromQL)."""
    dashboard = json.loads(path.read_text())
    exprs = [t["expr"] for p in _panels(dashboard["panels"]) for t in p.get("targets", [])]
    for var in dashboard.get("templating", {}).get("list", []) if variables else []:
        if var.get("type") == "query":
            query = var["query"]
            exprs.append(query["query"] if isinstance(query, dict) else query)
    return exprs


def _panels(panels: list[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    for panel in panels:
        yield panel
        yield from _panels(panel.get("panels", []))


def rule_exprs(path: Path) -> dict[str, str]:
    """A PrometheusRule spec's expressions by alert (or recording rule) name."""
    spec = yaml.safe_load(path.read_text())
    return {
        rule.get("alert") or rule["record"]: rule["expr"]
        for group in spec["groups"]
        for rule in group["rules"]
    }
