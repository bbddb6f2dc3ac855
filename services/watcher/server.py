"""The watcher's gRPC side: `Watcher.StreamClusterEvents` over a `ClusterHub`.

Called by `services.watcher.main` (through `splitsched.runtime.grpcsrv.serve`) and by the
service tests. The handler is registered by hand rather than through the generated
`add_WatcherServicer_to_server` because it streams pre-serialised ClusterEventBatch bytes
(see `services.watcher.ring`): the response serializer is the identity.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from typing import Any

import grpc
from prometheus_client import CollectorRegistry, Gauge

from services.watcher import ring
from splitsched.v1 import watcher_pb2

log = logging.getLogger(__name__)

SERVICE_NAME = "splitsched.v1.Watcher"
MAX_BATCH_EVENTS = 500
MAX_BATCH_BYTES = 4 * 1024 * 1024  # under the 8 MiB message limit with room to spare


class WatcherService:
    """Streams the hub to every subscriber from its own cursor (never blocking the hub)."""

    def __init__(
        self,
        hub: ring.ClusterHub,
        *,
        registry: CollectorRegistry | None = None,
        max_batch_events: int = MAX_BATCH_EVENTS,
        max_batch_bytes: int = MAX_BATCH_BYTES,
    ) -> None:
        self.hub = hub
        self.max_batch_events = max_batch_events
        self.max_batch_bytes = max_batch_bytes
        self._subscribers = Gauge(
            "splitsched_watcher_subscribers",
            "Open StreamClusterEvents streams",
            registry=registry,
        )

    async def stream(
        self,
        request: watcher_pb2.StreamClusterEventsRequest,
        context: grpc.aio.ServicerContext[Any, Any],
    ) -> AsyncIterator[bytes]:
        """The StreamClusterEvents handler (yields serialised ClusterEventBatch messages)."""
        hub = self.hub
        names = frozenset(request.scheduler_names)
        who = request.subscriber or context.peer()
        self._subscribers.inc()
        hub.subscribers += 1
        try:
            await hub.wait_synced()
            cursor = request.from_sequence
            if hub.can_resume(cursor):
                log.info("subscriber %s resumes after sequence %d", who, cursor)
            else:
                if cursor:
                    log.info(
                        "subscriber %s: sequence %d is not in the ring [%d, %d]; snapshot",
                        who,
                        cursor,
                        hub.first_sequence,
                        hub.last_sequence,
                    )
                cursor = -1  # snapshot first
            while True:
                if cursor < 0 or not hub.can_resume(cursor):
                    if cursor >= 0:
                        log.warning("subscriber %s fell behind the ring; new snapshot", who)
                    cursor, entries = hub.snapshot(names)
                    log.info(
                        "subscriber %s: snapshot of %d objects at %d", who, len(entries), cursor
                    )
                    for data in ring.batches_for_snapshot(
                        cursor,
                        entries,
                        max_events=self.max_batch_events,
                        max_bytes=self.max_batch_bytes,
                    ):
                        yield data
                    continue
                await hub.wait_after(cursor)
                events = hub.read_after(cursor, limit=self.max_batch_events)
                if events is None:
                    continue  # evicted while we waited: snapshot on the next turn
                out: list[bytes] = []
                size = 0
                for ev in events:
                    item = ring.event_for(ev, names)
                    cursor = ev.sequence
                    if item is None:
                        continue
                    out.append(item)
                    size += len(item)
                    if size >= self.max_batch_bytes:
                        break
                if out:
                    yield ring.batch_for_events(out)
        finally:
            hub.subscribers -= 1
            self._subscribers.dec()
            log.info("subscriber %s left", who)

    def add_to_server(self, _servicer: object, server: grpc.aio.Server) -> None:
        """An `add_*_to_server` function for `grpcsrv.serve`."""
        handler = grpc.unary_stream_rpc_method_handler(
            self.stream,
            request_deserializer=watcher_pb2.StreamClusterEventsRequest.FromString,
            response_serializer=_identity,
        )
        server.add_generic_rpc_handlers(
            (grpc.method_handlers_generic_handler(SERVICE_NAME, {"StreamClusterEvents": handler}),)
        )


def _identity(data: bytes) -> bytes:
    return data
