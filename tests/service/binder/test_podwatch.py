"""The pending pods' watch (``services.binder.pendingpods``) in process: a pod it showed is
checked without a read of its pod, and judged exactly as a read one; the watch resumes from
its last version, starts over on 410 and stops, reading each pod, when it is refused. The
real API server's side (field selectors, a bound pod leaving them): the integration test
``tests/integration/test_binder_podwatch.py``."""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
from collections.abc import AsyncIterator, Callable
from typing import Any

import orjson
import pytest
from aiohttp import web

from services.binder.kubeapi import KubeClient, KubeEndpoint
from services.binder.pendingpods import PendingPods, PodWatch
from splitsched.v1 import scheduler_pb2
from tests.support.binder import add_pod, bind_request, eventually, harness, run
from tests.support.fakes.kube import serving_app

Outcome = scheduler_pb2.BindingOutcome


def added(name: str, *, scheduler: str = "splitsched", rv: str = "1") -> dict[str, Any]:
    meta = {"namespace": "ns", "name": name, "uid": f"uid-{name}", "resourceVersion": rv}
    return {"type": "ADDED", "object": {"metadata": meta, "spec": {"schedulerName": scheduler}}}


def pod_reads(reads: list[str]) -> list[str]:
    return [r for r in reads if "/pods/" in r]


def test_a_pod_the_watch_showed_is_bound_without_a_read_and_others_are_read() -> None:
    async def body() -> None:
        pending = PendingPods()
        async with harness(pending=pending) as h:
            for name in ("shown", "unseen"):
                add_pod(h, name)
            pending.handle(added("shown"))
            for decision, name in (("d1", "shown"), ("d2", "unseen")):
                assert (await h.stub.Bind(bind_request(decision, name))).accepted
                assert (await h.outcome(decision)).result == Outcome.BOUND
            assert pod_reads(h.kube.reads) == ["/api/v1/namespaces/ns/pods/unseen"]
            shown = h.metrics.registry.get_sample_value("splitsched_binder_pods_shown_total")
            assert shown == 1

    run(body())


def test_a_shown_pod_is_judged_as_a_read_one() -> None:
    """Another profile's pod (the selector never shows one; the guard still judges what it
    is given) is refused, and a pod shown with another uid is read."""

    async def body() -> None:
        pending = PendingPods()
        async with harness(pending=pending) as h:
            add_pod(h, "theirs")
            pending.handle(added("theirs", scheduler="default-scheduler"))
            assert (await h.stub.Bind(bind_request("d1", "theirs"))).accepted
            outcome = await h.outcome("d1")
            assert outcome.result == Outcome.FAILED and "scheduler_name" in outcome.message
            add_pod(h, "again")
            pending.handle(added("again"))
            request = bind_request("d2", "again", uid="uid-recreated")
            h.kube.pods[("ns", "again")].uid = "uid-recreated"
            assert (await h.stub.Bind(request)).accepted
            assert (await h.outcome("d2")).result == Outcome.BOUND
            assert pod_reads(h.kube.reads) == ["/api/v1/namespaces/ns/pods/again"]
            assert [name for _, _, name, _ in h.kube.bindings] == ["again"]

    run(body())


Answer = Callable[[web.Request], Any]


@contextlib.asynccontextmanager
async def watch_server(answers: list[Answer]) -> AsyncIterator[tuple[str, list[dict[str, str]]]]:
    """An API server whose pod watches get `answers` in turn (the last one from then on):
    yields its URL and the query of every watch."""
    queries: list[dict[str, str]] = []

    async def watch(request: web.Request) -> web.StreamResponse:
        queries.append(dict(request.query))
        answer = answers[min(len(queries), len(answers)) - 1]
        result = answer(request)
        if inspect.isawaitable(result):
            streamed: web.StreamResponse = await result  # the answer streams on its own
            return streamed
        if isinstance(result, web.StreamResponse):
            return result
        response = web.StreamResponse()
        await response.prepare(request)
        for line in result:
            await response.write(orjson.dumps(line) + b"\n")
        return response

    app = web.Application()
    app.router.add_get("/api/v1/pods", watch)
    async with serving_app(app) as url:
        yield url, queries


async def watching(url: str, pending: PendingPods, profiles: tuple[str, ...]) -> Any:
    kube = KubeClient(KubeEndpoint(host=url))
    watch = PodWatch(kube, pending, profiles, backoff=(0.01, 0.05))
    return kube, watch, asyncio.create_task(watch.run())


def test_the_watch_resumes_from_its_last_version_and_starts_over_on_410() -> None:
    async def body() -> None:
        bookmark = {"type": "BOOKMARK", "object": {"metadata": {"resourceVersion": "10"}}}
        gone = {"type": "ERROR", "object": {"code": 410, "message": "too old resource version"}}
        hold = asyncio.Event()

        async def held(request: web.Request) -> web.StreamResponse:
            response = web.StreamResponse()
            await response.prepare(request)
            await response.write(orjson.dumps(added("c", rv="12")) + b"\n")
            await hold.wait()
            return response

        answers: list[Answer] = [
            lambda _: [added("a", rv="3"), added("b", rv="4"), bookmark],
            lambda _: [gone],
            held,
        ]
        pending = PendingPods()
        async with watch_server(answers) as (url, queries):
            kube, watch, task = await watching(url, pending, ("splitsched",))
            await eventually(lambda: pending.get("ns", "c", "uid-c"))
            assert [q["resourceVersion"] for q in queries] == ["0", "10", "0"]
            assert pending.get("ns", "a", "") is None  # forgotten when it started over
            assert watch.versions["splitsched"] == "12"
            query = queries[0]
            assert query["fieldSelector"] == "spec.schedulerName=splitsched,spec.nodeName="
            assert query["watch"] == "1" and query["allowWatchBookmarks"] == "true"
            task.cancel()
            hold.set()
            with contextlib.suppress(asyncio.CancelledError):
                await task
            await kube.close()

    run(body())


def test_a_refused_watch_stops_with_a_warning_and_each_profile_has_its_own(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING, logger="services.binder.pendingpods")

    def forbidden(_: web.Request) -> web.Response:
        return web.json_response({"kind": "Status", "code": 403, "message": "forbidden"},
                                 status=403)  # fmt: skip

    async def body() -> None:
        async with watch_server([forbidden]) as (url, queries):
            kube, _, task = await watching(url, PendingPods(), ("a", "b"))
            await asyncio.wait_for(task, 5)  # ends: nothing more to do
            await kube.close()
        selectors = sorted(q["fieldSelector"] for q in queries)
        assert selectors == ["spec.schedulerName=a,spec.nodeName=",
                             "spec.schedulerName=b,spec.nodeName="]  # fmt: skip
        warnings = [r.getMessage() for r in caplog.records]
        assert len(warnings) == 2 and all("reading each pod" in w for w in warnings)

    run(body())
