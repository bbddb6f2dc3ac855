"""The watcher's gRPC side: `Watcher.StreamClusterEvents` over a `ClusterHub`.

Called by `services.watcher.main` (through `splitsched.runtime.grpcsrv.serve`) and by the
service tests. The handler is registered by hand rather than through the generated
`add_WatcherServicer_to_server` because it streams pre-serialised ClusterEventBatch bytes
(see `services.watcher.ring`): the response serializer is the identity.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Iterator
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
        #: Each open stream's cursor (the sequence it was last sent), for the lag gauge.
        self._cursors: dict[int, int] = {}
        Gauge(
            "splitsched_watcher_subscriber_lag_events",
            "Deltas in the ring not yet sent to the slowest subscriber (0 with none)",
            registry=registry,
        ).set_function(self.lag)

    def lag(self) -> int:
        """How many deltas the slowest streaming subscriber is behind the hub's newest; a
        subscriber still waiting for its snapshot counts as not behind."""
        last = self.hub.last_sequence
        return max((last - c for c in self._cursors.values() if c >= 0), default=0)

    async def stream(
        self,
        request: watcher_pb2.StreamClusterEventsRequest,
        context: grpc.aio.ServicerContext[Any, Any],
    ) -> AsyncIterator[bytes]:
        """The StreamClusterEvents handler (yields serialised ClusterEventBatch messages):
        a snapshot unless the subscriber can resume, then deltas as they come, and a new
        snapshot whenever its cursor falls out of the ring."""
        hub = self.hub
        names = frozenset(request.scheduler_names)
        who = request.subscriber or context.peer()
        self._subscribers.inc()
        hub.subscribers += 1
        key = id(context)
        try:
            await hub.wait_synced()
            cursor = self._resume_point(who, request.from_sequence)
            while True:
                self._cursors[key] = cursor
                if cursor < 0 or not hub.can_resume(cursor):
                    if cursor >= 0:
                        log.warning("subscriber %s fell behind the ring; new snapshot", who)
                    cursor, batches = self._snapshot(who, names)
                    for data in batches:
                        yield data
                    continue
                await hub.wait_after(cursor)
                cursor, batch = self._deltas_after(cursor, names)
                if batch:
                    yield batch
        finally:
            self._cursors.pop(key, None)
            hub.subscribers -= 1
            self._subscribers.dec()
            log.info("subscriber %s left", who)

    def _resume_point(self, who: str, sequence: int) -> int:
        """The subscriber's cursor: its `sequence` when the ring still holds what follows
        it, else -1 (a snapshot first)."""
        hub = self.hub
        if hub.can_resume(sequence):
            log.info("subscriber %s resumes after sequence %d", who, sequence)
            return sequence
        if sequence:
            log.info(
                "subscriber %s: sequence %d is not in the ring [%d, %d]; snapshot",
                who,
                sequence,
                hub.first_sequence,
                hub.last_sequence,
            )
        return -1

    def _snapshot(self, who: str, names: frozenset[str]) -> tuple[int, Iterator[bytes]]:
        """The view's sequence now and the batches of a snapshot at it."""
        cursor, entries = self.hub.snapshot(names)
        log.info("subscriber %s: snapshot of %d objects at %d", who, len(entries), cursor)
        batches = ring.batches_for_snapshot(
            cursor, entries, max_events=self.max_batch_events, max_bytes=self.max_batch_bytes
        )
        return cursor, batches

    def _deltas_after(self, cursor: int, names: frozenset[str]) -> tuple[int, bytes]:
        """The next batch of deltas after `cursor` this subscriber sees (b"" when none,
        or when they left the ring while it waited: a snapshot follows), and the cursor
        after it."""
        events = self.hub.read_after(cursor, limit=self.max_batch_events)
        if events is None:
            return cursor, b""
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
        return cursor, ring.batch_for_events(out) if out else b""

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
