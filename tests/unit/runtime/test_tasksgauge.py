"""``splitsched_asyncio_tasks`` counts the event loop's tasks at scrape time (the soak
watches it for leaks), and is simply absent when no loop runs."""

from __future__ import annotations

import asyncio

from prometheus_client import CollectorRegistry

from splitsched.runtime import tasksgauge


def test_counts_the_running_loops_tasks_at_scrape_time() -> None:
    registry = CollectorRegistry()
    tasksgauge.register(registry)

    async def scrape_with(extra: int) -> float | None:
        stop = asyncio.Event()
        tasks = [asyncio.create_task(stop.wait()) for _ in range(extra)]
        await asyncio.sleep(0)
        value = registry.get_sample_value(tasksgauge.NAME)
        stop.set()
        await asyncio.gather(*tasks)
        return value

    assert asyncio.run(scrape_with(0)) == 1.0  # the scraping coroutine's own task
    assert asyncio.run(scrape_with(5)) == 6.0


def test_absent_without_a_running_loop() -> None:
    registry = CollectorRegistry()
    tasksgauge.register(registry)
    assert registry.get_sample_value(tasksgauge.NAME) is None
