"""A resource the API server does not serve (resource.k8s.io before Kubernetes 1.34), or
does not serve to the watcher (a role from an older chart): the reflector counts it as
listed with nothing, so the watcher still becomes ready, and lists it again later, so
turning DRA on or granting the right afterwards works without a restart (and taking it
away later deletes what was listed)."""

from __future__ import annotations

import asyncio

import aiohttp
import pytest
from aiohttp import web

from services.watcher import entries, listwatch, metrics, ring
from splitsched.runtime import kubeclient
from tests.support.fakes.kube import serving_app

CLASSES = next(r for r in listwatch.DEVICES if r.name == "deviceclasses")
CLASS = {"metadata": {"name": "gpu", "resourceVersion": "5"}, "spec": {}}


def test_not_served_counts_as_synced_and_is_listed_again(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(listwatch, "NOT_SERVED_RETRY", 0.05)
    served = asyncio.Event()
    revoked = asyncio.Event()
    lists: list[int] = []

    async def deviceclasses(request: web.Request) -> web.StreamResponse:
        if request.query.get("watch"):
            await asyncio.sleep(0.2)
            return web.json_response({"kind": "Status", "code": 410}, status=410)
        lists.append(1)
        if not served.is_set() or revoked.is_set():
            code = 404 if len(lists) == 1 else 403  # not served, then served but not to us
            return web.json_response({"kind": "Status", "code": code}, status=code)
        return web.json_response({"metadata": {"resourceVersion": "5"}, "items": [CLASS]})

    async def scenario() -> None:
        app = web.Application()
        app.router.add_get(CLASSES.path, deviceclasses)
        synced: list[str] = []
        became_synced = asyncio.Event()

        def on_synced() -> None:
            synced.append("deviceclasses")
            became_synced.set()

        hub = ring.ClusterHub(ring_size=10, first_sequence=1)
        async with serving_app(app) as url, aiohttp.ClientSession() as session:
            reflector = listwatch.Reflector(
                resource=CLASSES, hub=hub, converter=entries.Converter(),
                endpoint=kubeclient.KubeEndpoint(host=url, auth_header=lambda: ""),
                session=session, metrics=metrics.Metrics(None),
                on_synced=on_synced,
            )  # fmt: skip
            task = asyncio.create_task(reflector.run())
            try:
                await asyncio.wait_for(became_synced.wait(), 5)
                assert reflector.synced and hub.get(ring.DEVICE_CLASS, "gpu") is None
                while len(lists) < 2:  # noqa: ASYNC110
                    await asyncio.sleep(0.01)  # a 403 next: still synced, still empty
                assert hub.get(ring.DEVICE_CLASS, "gpu") is None
                served.set()  # the API is turned on: the next LIST finds the class
                async with asyncio.timeout(5):
                    while hub.get(ring.DEVICE_CLASS, "gpu") is None:  # noqa: ASYNC110
                        await asyncio.sleep(0.01)  # the hub has no event to wait on
                revoked.set()  # the right is taken away: what was listed goes
                async with asyncio.timeout(5):
                    while hub.get(ring.DEVICE_CLASS, "gpu") is not None:  # noqa: ASYNC110
                        await asyncio.sleep(0.01)
            finally:
                task.cancel()
        assert synced == ["deviceclasses"]  # ready once, not again
        assert len(lists) >= 3

    asyncio.run(scenario())


def test_a_404_of_a_required_resource_is_an_error_not_an_empty_list() -> None:
    """Nodes and pods are not optional: a 404 there is the API server's error, and the
    reflector retries it instead of calling an empty cluster synced."""

    async def refused(request: web.Request) -> web.StreamResponse:
        return web.json_response({"kind": "Status", "code": 404}, status=404)

    async def scenario() -> None:
        app = web.Application()
        app.router.add_get(listwatch.NODES.path, refused)
        hub = ring.ClusterHub(ring_size=10, first_sequence=1)
        async with serving_app(app) as url, aiohttp.ClientSession() as session:
            reflector = listwatch.Reflector(
                resource=listwatch.NODES, hub=hub, converter=entries.Converter(),
                endpoint=kubeclient.KubeEndpoint(host=url, auth_header=lambda: ""),
                session=session, metrics=metrics.Metrics(None),
            )  # fmt: skip
            with pytest.raises(kubeclient.ApiError):
                await reflector.relist()
            assert not reflector.synced

    asyncio.run(scenario())
