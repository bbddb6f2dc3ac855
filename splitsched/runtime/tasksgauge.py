"""``splitsched_asyncio_tasks``: how many asyncio tasks the service's event loop holds,
counted when /metrics is scraped (nothing runs between scrapes). A task count that grows
with uptime is a leak the soak (``bench.soak``) looks for.

The HTTP server answers /metrics on the service's own event loop, so the scrape runs
where ``asyncio.all_tasks()`` sees that loop; called with no running loop (a test
rendering a registry by hand) the gauge is simply absent.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

from prometheus_client import CollectorRegistry
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

NAME = "splitsched_asyncio_tasks"


class AsyncioTasks(Collector):
    """Collects the running loop's task count at scrape time."""

    def collect(self) -> Iterator[GaugeMetricFamily]:
        try:
            tasks = asyncio.all_tasks()
        except RuntimeError:  # no running loop in this thread
            return
        yield GaugeMetricFamily(NAME, "Asyncio tasks not yet done on the event loop.", len(tasks))


def register(registry: CollectorRegistry) -> None:
    """Add the gauge to a service's registry."""
    registry.register(AsyncioTasks())
