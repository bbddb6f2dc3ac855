"""The watcher's gRPC side in process for tests: a `ClusterHub` the test fills by hand,
streamed by the real `WatcherService` on a loopback port (`serving`)."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator

from prometheus_client import CollectorRegistry

from services.watcher import ring, server
from splitsched.runtime import grpcsrv


@contextlib.asynccontextmanager
async def serving(
    hub: ring.ClusterHub, *, port: int = 0, registry: CollectorRegistry | None = None
) -> AsyncIterator[int]:
    """`hub` served by a `WatcherService` on a loopback port (`port`, or any), its metrics
    in `registry`; yields the port. Serving the same hub again on the same port is a
    watcher that restarted."""
    service = server.WatcherService(hub, registry=registry)
    srv = await grpcsrv.serve(
        listen=f"127.0.0.1:{port}",
        servicers=[(service.add_to_server, service)],
        service_names=[server.SERVICE_NAME],
    )
    try:
        yield srv.port
    finally:
        await srv.stop(0)
