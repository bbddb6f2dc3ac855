"""``KnownNodes``: one list of every node stands for a read of each, for ``NODE_TTL``;
lists are shared by the callers waiting on them and never closer than ``LIST_INTERVAL``."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Collection

import pytest

from services.binder.knownnodes import LIST_INTERVAL, NODE_TTL, KnownNodes
from splitsched.core.clock import FakeClock


class Lister:
    """Answers each list with ``names`` once ``gate`` opens; records each call's deadline."""

    def __init__(self, names: Collection[str] | None) -> None:
        self.names = names
        self.deadlines: list[float] = []
        self.gate = asyncio.Event()
        self.gate.set()
        self.error: Exception | None = None

    async def __call__(self, deadline: float) -> Collection[str] | None:
        self.deadlines.append(deadline)
        await self.gate.wait()
        if self.error is not None:
            raise self.error
        return self.names


def _nodes(lister: Lister, clock: FakeClock) -> KnownNodes:
    return KnownNodes(lister, monotonic=clock.now)


def test_listed_nodes_are_known_for_the_ttl_and_others_not() -> None:
    async def body() -> None:
        clock, lister = FakeClock(100.0), Lister(["a", "b"])
        nodes = _nodes(lister, clock)
        assert not nodes.known("a")
        await nodes.refresh(deadline=200.0)
        assert nodes.known("a") and nodes.known("b") and not nodes.known("c")
        assert lister.deadlines == [200.0]
        clock.advance(NODE_TTL)
        assert not nodes.known("a")

    asyncio.run(body())


def test_callers_during_a_list_share_it_and_no_list_follows_within_the_interval() -> None:
    async def body() -> None:
        clock, lister = FakeClock(), Lister(["a"])
        nodes = _nodes(lister, clock)
        lister.gate.clear()
        waiting = [asyncio.create_task(nodes.refresh(deadline=9.0)) for _ in range(5)]
        await asyncio.sleep(0)
        assert not any(task.done() for task in waiting)
        lister.gate.set()
        await asyncio.gather(*waiting)
        assert len(lister.deadlines) == 1 and nodes.known("a")
        clock.advance(LIST_INTERVAL - 0.1)
        await nodes.refresh(deadline=20.0)
        assert len(lister.deadlines) == 1
        clock.advance(0.1)
        await nodes.refresh(deadline=20.0)
        assert len(lister.deadlines) == 2

    asyncio.run(body())


def test_a_read_node_is_known_and_a_failed_list_knows_nothing_until_the_next() -> None:
    async def body() -> None:
        clock, lister = FakeClock(), Lister(None)
        nodes = _nodes(lister, clock)
        await nodes.refresh(deadline=5.0)
        assert not nodes.known("a")
        nodes.saw("a")
        assert nodes.known("a")
        lister.names = ["b"]
        await nodes.refresh(deadline=5.0)  # within the interval of the failed list
        assert not nodes.known("b") and len(lister.deadlines) == 1
        clock.advance(LIST_INTERVAL)
        await nodes.refresh(deadline=50.0)
        assert nodes.known("a") and nodes.known("b")  # a list adds, forgets no read node

    asyncio.run(body())


def test_a_lister_that_raises_is_logged_and_breaks_no_caller(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async def body() -> None:
        clock, lister = FakeClock(), Lister(["a"])
        lister.error = RuntimeError("boom")
        nodes = _nodes(lister, clock)
        await nodes.refresh(deadline=5.0)
        assert not nodes.known("a")

    with caplog.at_level(logging.ERROR, logger="services.binder.knownnodes"):
        asyncio.run(body())
    assert "listing the nodes failed" in caplog.text


def test_a_cancelled_caller_leaves_the_list_to_the_others() -> None:
    async def body() -> None:
        clock, lister = FakeClock(), Lister(["a"])
        nodes = _nodes(lister, clock)
        lister.gate.clear()
        first = asyncio.create_task(nodes.refresh(deadline=5.0))
        second = asyncio.create_task(nodes.refresh(deadline=5.0))
        await asyncio.sleep(0)
        first.cancel()
        await asyncio.sleep(0)
        lister.gate.set()
        await second
        assert first.cancelled() and nodes.known("a") and len(lister.deadlines) == 1

    asyncio.run(body())
