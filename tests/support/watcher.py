"""The watcher's gRPC side in process for tests: a `ClusterHub` the test fills by hand,
streamed by the real `WatcherService` on a loopback port (`serving`)."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator

from services.watcher import ring, server
from splitsched.runtime import grpcsrv


@contextlib.asynccontextmanager
async def serving(hub: ring.ClusterHub) -> AsyncIterator[int]:
    """`hub` served by a `WatcherService` on a loopback port; yields the port."""
    service = server.WatcherService(hub)
    srv = await grpcsrv.serve(
        listen="127.0.0.1:0",
        servicers=[(service.add_to_server, service)],
        service_names=[server.SERVICE_NAME],
    )
    try:
        yield srv.port
    finally:
        await srv.stop(0)
