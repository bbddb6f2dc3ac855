"""A leader's release of its Lease when the Lease changed after it was last noted (its own
renewal landing late, CI saw it under load): the 409 reads the Lease again and the release
is retried while the Lease is still ours; one taken by another replica is left alone."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

from aiohttp import web

from services.scheduler import leader
from splitsched.runtime import kubeclient
from tests.support.fakes.kube import serving_app

NS, NAME = "kube-system", "splitsched"


class LeaseServer:
    """One Lease with optimistic concurrency, as the API server keeps it."""

    def __init__(self, holder: str) -> None:
        self.version = 1
        self.spec: dict[str, Any] = {"holderIdentity": holder, "leaseDurationSeconds": 10}
        self.puts: list[int] = []

    def lease(self) -> dict[str, Any]:
        meta = {"name": NAME, "namespace": NS, "resourceVersion": str(self.version)}
        return {"metadata": meta, "spec": dict(self.spec)}

    async def get(self, request: web.Request) -> web.Response:
        return web.json_response(self.lease())

    async def put(self, request: web.Request) -> web.Response:
        body = await request.json()
        sent = int(body["metadata"]["resourceVersion"])
        self.puts.append(sent)
        if sent != self.version:
            return web.json_response({"kind": "Status", "code": 409}, status=409)
        self.version += 1
        self.spec = body["spec"]
        return web.json_response(self.lease())

    def app(self) -> web.Application:
        app = web.Application()
        path = leader.lease_path(NS, NAME)
        app.router.add_get(path, self.get)
        app.router.add_put(path, self.put)
        return app


async def lead(url: str) -> leader.LeaderElector:
    """An elector that won the Lease and was then stopped, as the scheduler stops it
    before releasing (its `run` cancelled)."""
    elector = leader.LeaderElector(
        client=kubeclient.KubeClient(kubeclient.KubeEndpoint(host=url, auth_header=lambda: "")),
        namespace=NS, name=NAME, identity="a",
    )  # fmt: skip
    started = asyncio.Event()
    task = asyncio.create_task(
        elector.run(on_started_leading=started.set, on_stopped_leading=lambda: None)
    )
    await asyncio.wait_for(started.wait(), 10)
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task
    assert elector.is_leading()
    return elector


def test_a_release_after_a_late_renewal_reads_the_lease_again_and_releases() -> None:
    async def body() -> None:
        server = LeaseServer(holder="")
        async with serving_app(server.app()) as url:
            elector = await lead(url)
            server.version += 1  # our renewal landed after we noted the Lease
            assert await elector.release()
            assert server.spec["holderIdentity"] == ""
            assert len(server.puts) == 3  # acquire, the refused release, the release
            await elector.client.close()

    asyncio.run(body())


def test_a_lease_another_replica_took_meanwhile_is_not_released() -> None:
    async def body() -> None:
        server = LeaseServer(holder="")
        async with serving_app(server.app()) as url:
            elector = await lead(url)
            server.version += 1
            server.spec["holderIdentity"] = "b"
            assert not await elector.release()
            assert server.spec["holderIdentity"] == "b"
            await elector.client.close()

    asyncio.run(body())
