"""Every service's registry renders in both formats /metrics negotiates (issue 21): the
OpenMetrics exposition, which alone carries exemplars, must parse as OpenMetrics (a name
clash between a counter and its `_total`, say, would make the whole scrape fail)."""

from __future__ import annotations

import pytest
from prometheus_client import CollectorRegistry
from prometheus_client.exposition import choose_encoder
from prometheus_client.openmetrics.parser import text_string_to_metric_families
from prometheus_client.parser import text_string_to_metric_families as parse_text

from services.binder.metrics import BinderMetrics
from services.scheduler.metrics import SchedulerMetrics
from services.watcher.metrics import Metrics as WatcherMetrics


def registries() -> dict[str, CollectorRegistry]:
    watcher = CollectorRegistry()
    WatcherMetrics(watcher)
    return {
        "scheduler": SchedulerMetrics().registry,
        "binder": BinderMetrics().registry,
        "watcher": watcher,
    }


@pytest.mark.parametrize("service", ["scheduler", "binder", "watcher"])
def test_each_registry_renders_in_openmetrics_and_in_text(service: str) -> None:
    registry = registries()[service]
    encode, content_type = choose_encoder("application/openmetrics-text; version=1.0.0")
    assert content_type.startswith("application/openmetrics-text")
    families = text_string_to_metric_families(encode(registry).decode())  # type: ignore[no-untyped-call]
    names = {f.name for f in families}
    encode, content_type = choose_encoder("")
    assert content_type.startswith("text/plain")
    plain = {f.name for f in parse_text(encode(registry).decode())}
    # The text parser makes a histogram's `_created` sample a family of its own.
    assert names and names == {n for n in plain if not n.endswith("_created")}
