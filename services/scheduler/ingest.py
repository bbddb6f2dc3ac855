"""The watch ingest: the watcher's event stream into the scheduler's state.

`WatchIngest.run` is the socket loop: it subscribes to `Watcher.StreamClusterEvents`,
resumes from the last applied sequence after a broken stream (with backoff), and wakes
the scheduling loop after every `APPLY_CHUNK` events of a batch, yielding to it in between
(`apply_batch`). `WatchIngest.apply` is the part without I/O: one
`ClusterEvent` decoded through `splitsched.wire` and applied to the `SchedulerState`
(snapshot begin and SYNCED markers, nodes, pods, PodDisruptionBudgets, namespaces, storage),
plus the trace steps a pod event closes when tracing is on. Created by
`services.scheduler.main`.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping, Sequence

import grpc

from services.scheduler.metrics import SchedulerMetrics
from services.scheduler.state import SchedulerState
from services.scheduler.traces import SchedulingTraces
from splitsched import wire, wire_cluster, wire_devices, wire_storage
from splitsched.core import models
from splitsched.runtime import grpcsrv
from splitsched.v1 import watcher_pb2, watcher_pb2_grpc

log = logging.getLogger("splitsched.scheduler")

#: The state's change kind for each object event (a snapshot entry is an addition).
EVENT_KIND = {
    watcher_pb2.ClusterEvent.SNAPSHOT: "ADDED",
    watcher_pb2.ClusterEvent.ADDED: "ADDED",
    watcher_pb2.ClusterEvent.MODIFIED: "MODIFIED",
    watcher_pb2.ClusterEvent.DELETED: "DELETED",
}
FIRST_BACKOFF = 0.2
#: Events applied before the scheduling loop gets a turn. A backlogged stream's batch (up
#: to the watcher's 500 events, each decoded here) would otherwise hold every queued pod,
#: and the decisions of the pods it brings, until the whole batch is applied.
APPLY_CHUNK = 64
MAX_BACKOFF = 10.0


class WatchIngest:
    """Keeps `state` in step with the watcher at `target` (see the module docstring)."""

    def __init__(
        self,
        *,
        state: SchedulerState,
        metrics: SchedulerMetrics,
        target: str,
        subscriber: str,
        tls: grpcsrv.ClientTls | None,
        poke: Callable[[], None],
        stopping: asyncio.Event,
        traces: SchedulingTraces | None = None,
    ) -> None:
        self.state = state
        self.metrics = metrics
        self.target = target
        self.subscriber = subscriber
        self.tls = tls
        self.poke = poke
        self.stopping = stopping
        self.traces = traces
        #: The sequence of the last event applied: a new stream resumes after it.
        self.last_sequence = 0

    async def run(self) -> None:
        """Stream until `stopping`, reconnecting with doubling backoff (reset by a batch)."""
        backoff = FIRST_BACKOFF
        while not self.stopping.is_set():
            if await self._stream():
                backoff = FIRST_BACKOFF
            if self.stopping.is_set():
                return
            self.metrics.reconnects.labels("watcher").inc()
            await asyncio.sleep(backoff)
            backoff = min(backoff * 2, MAX_BACKOFF)

    async def _stream(self) -> bool:
        """One subscription until it ends; whether any batch arrived."""
        received = False
        channel = grpcsrv.channel(self.target, tls=self.tls)
        stub = watcher_pb2_grpc.WatcherStub(channel)
        try:
            request = watcher_pb2.StreamClusterEventsRequest(
                from_sequence=self.last_sequence,
                subscriber=self.subscriber,
                scheduler_names=list(self.state.algo.profiles),
            )
            async for batch in stub.StreamClusterEvents(request):
                received = True
                await self.apply_batch(batch.events)
        except grpc.aio.AioRpcError as exc:
            log.warning("watcher stream ended: %s %s", exc.code().name, exc.details())
        finally:
            await channel.close()
        return received

    async def apply_batch(self, events: Sequence[watcher_pb2.ClusterEvent]) -> None:
        """Apply a batch `APPLY_CHUNK` events at a time, waking the scheduling loop after
        each chunk and letting it run before the next: a prefix of the stream is a view as
        of its last sequence, so the loop may decide on it."""
        for start in range(0, len(events), APPLY_CHUNK):
            if start:
                await asyncio.sleep(0)
            for event in events[start : start + APPLY_CHUNK]:
                self.apply(event)
            self.poke()

    def apply(self, event: watcher_pb2.ClusterEvent) -> None:
        """Apply one event to the state (no I/O)."""
        etype = event.type
        self.last_sequence = event.sequence or self.last_sequence
        self.metrics.watch_events.labels(watcher_pb2.ClusterEvent.Type.Name(etype)).inc()
        if etype == watcher_pb2.ClusterEvent.SNAPSHOT_BEGIN:
            log.info("snapshot begins at sequence %d: rebuilding the view", event.sequence)
            self.state.reset()
            return
        if etype == watcher_pb2.ClusterEvent.SYNCED:
            self.state.mark_synced()
            log.info(
                "view synced: %d nodes, %d pods in cache, %d pending",
                self.state.cache.table.n,
                len(self.state.cache),
                len(self.state.queue),
            )
            return
        kind = EVENT_KIND.get(etype)
        if kind is None:
            return
        which = event.WhichOneof("object")
        if which == "node":
            self.state.apply_node(kind, wire.node_from_proto(event.node))
        elif which == "pod":
            pod = wire.pod_from_proto(event.pod)
            self.state.apply_pod(kind, pod)
            if self.traces is not None:
                self._trace_pod(self.traces, kind, pod, event.trace_context)
        elif which == "pdb":
            self.state.apply_pdb(kind, wire_cluster.pdb_from_proto(event.pdb))
        elif which == "namespace":
            self.state.apply_namespace(kind, wire_cluster.namespace_from_proto(event.namespace))
        elif (volume_object := wire_storage.storage_from_event(event)) is not None:
            self.state.apply_storage(kind, volume_object)
        elif (device_object := wire_devices.devices_from_event(event)) is not None:
            self.state.apply_devices(kind, device_object)

    @staticmethod
    def _trace_pod(
        traces: SchedulingTraces,
        kind: str,
        pod: models.Pod,
        trace_context: Mapping[str, str],
    ) -> None:
        """The trace step a pod event closes: gone, bound (confirmed), or first seen."""
        if kind == "DELETED" or pod.is_terminal:
            traces.gone(pod.uid)
        elif pod.node_name:
            traces.confirmed(pod.uid, pod.node_name)
        elif trace_context:
            traces.observed(pod.uid, trace_context)
