"""The watch ingest's pure half: `WatchIngest.apply` turns each streamed ClusterEvent into a
change of the scheduler's state (snapshot, SYNCED, nodes, pods, PodDisruptionBudgets,
namespaces, storage) and keeps the sequence a new stream resumes from. No watcher, no
channel."""

from __future__ import annotations

import asyncio

from services.scheduler.ingest import APPLY_CHUNK, WatchIngest
from services.scheduler.metrics import SchedulerMetrics
from services.scheduler.state import SchedulerState
from splitsched import wire, wire_cluster, wire_storage
from splitsched.core import algorithm, models, profiles, storage
from splitsched.core.cache import SchedulerCache
from splitsched.core.clock import FakeClock
from splitsched.core.queue import SchedulingQueue
from splitsched.v1 import types_pb2, watcher_pb2

Event = watcher_pb2.ClusterEvent
PDB = models.PodDisruptionBudget("ns", "budget", models.LabelSelector((("app", "web"),)), 1)


def new_ingest() -> WatchIngest:
    clock = FakeClock(0.0)
    algo = algorithm.FrameworkAlgorithm(
        cache=SchedulerCache(clock=clock), profiles=profiles.load_profiles(None)
    )
    state = SchedulerState(
        algo=algo, queue=SchedulingQueue(clock=clock), clock=clock, scheduler_id="s"
    )
    return WatchIngest(
        state=state,
        metrics=SchedulerMetrics(),
        target="127.0.0.1:1",
        subscriber="s",
        tls=None,
        poke=lambda: None,
        stopping=asyncio.Event(),
    )


def node(name: str) -> models.Node:
    return models.Node(name=name, allocatable={models.CPU: 1000, models.PODS: 10})


def pod(name: str, node_name: str = "") -> models.Pod:
    return models.Pod(
        uid=f"uid-{name}",
        namespace="ns",
        name=name,
        scheduler_name="splitsched",
        node_name=node_name,
    )


def snapshot(ingest: WatchIngest) -> None:
    """A watcher's snapshot: one node, one pending pod, one bound pod, one PDB."""
    events = [
        Event(sequence=1, type=Event.SNAPSHOT_BEGIN),
        Event(sequence=2, type=Event.SNAPSHOT, node=wire.node_to_proto(node("n1"))),
        Event(sequence=3, type=Event.SNAPSHOT, pod=wire.pod_to_proto(pod("pending"))),
        Event(sequence=4, type=Event.SNAPSHOT, pod=wire.pod_to_proto(pod("bound", node_name="n1"))),
        Event(sequence=5, type=Event.SNAPSHOT, pdb=wire_cluster.pdb_to_proto(PDB)),
        Event(sequence=6, type=Event.SYNCED),
    ]
    for event in events:
        ingest.apply(event)


def applied(ingest: WatchIngest, etype: str) -> float:
    value = ingest.metrics.registry.get_sample_value(
        "splitsched_scheduler_watch_events_total", {"type": etype}
    )
    return value or 0.0


def test_a_snapshot_builds_the_view_and_synced_marks_it_complete() -> None:
    ingest = new_ingest()
    snapshot(ingest)
    state = ingest.state
    assert state.synced
    assert state.cache.node_names() == ["n1"]
    assert "uid-pending" in state.queue and "uid-bound" not in state.queue
    assert "uid-bound" in state.cache
    assert state.cache.table.pdbs == {("ns", "budget"): PDB}
    assert ingest.last_sequence == 6
    assert applied(ingest, "SNAPSHOT") == 4 and applied(ingest, "SYNCED") == 1


def test_deltas_change_and_delete_what_the_snapshot_brought() -> None:
    ingest = new_ingest()
    snapshot(ingest)
    relaxed = models.PodDisruptionBudget("ns", "budget", None, 3)
    ingest.apply(Event(sequence=7, type=Event.MODIFIED, pdb=wire_cluster.pdb_to_proto(relaxed)))
    assert ingest.state.cache.table.pdbs == {("ns", "budget"): relaxed}
    ingest.apply(Event(sequence=8, type=Event.DELETED, pdb=wire_cluster.pdb_to_proto(relaxed)))
    assert ingest.state.cache.table.pdbs == {}
    ingest.apply(Event(sequence=9, type=Event.DELETED, pod=wire.pod_to_proto(pod("pending"))))
    assert "uid-pending" not in ingest.state.queue
    ingest.apply(Event(sequence=10, type=Event.ADDED, node=wire.node_to_proto(node("n2"))))
    assert sorted(ingest.state.cache.node_names()) == ["n1", "n2"]
    assert ingest.last_sequence == 10


def test_a_new_snapshot_drops_the_view_until_synced_again() -> None:
    ingest = new_ingest()
    snapshot(ingest)
    ingest.apply(Event(sequence=20, type=Event.SNAPSHOT_BEGIN))
    assert not ingest.state.synced
    assert ingest.state.cache.node_names() == []
    assert ingest.state.cache.table.pdbs == {}
    assert ingest.last_sequence == 20


def test_an_event_without_a_sequence_keeps_the_resume_point() -> None:
    ingest = new_ingest()
    snapshot(ingest)
    ingest.apply(Event(type=Event.ADDED, node=wire.node_to_proto(node("n2"))))
    assert ingest.last_sequence == 6
    assert "n2" in ingest.state.cache.node_names()


def test_namespace_events_feed_the_namespace_labels() -> None:
    ingest = new_ingest()
    snapshot(ingest)
    ns = types_pb2.Namespace(name="team-a", labels={"team": "a"}, resource_version="3")
    ingest.apply(Event(sequence=7, type=Event.ADDED, namespace=ns))
    assert ingest.state.cache.table.namespace_labels == {"team-a": {"team": "a"}}
    ingest.apply(Event(sequence=8, type=Event.DELETED, namespace=ns))
    assert ingest.state.cache.table.namespace_labels == {}


def test_storage_events_reach_the_view() -> None:
    ingest = new_ingest()
    claim = storage.PersistentVolumeClaim("ns", "data", resource_version="1")
    volume = storage.PersistentVolume("pv-1", resource_version="1")
    events = [
        Event(sequence=1, type=Event.ADDED, pvc=wire_storage.claim_to_proto(claim)),
        Event(sequence=2, type=Event.ADDED, pv=wire_storage.volume_to_proto(volume)),
        Event(sequence=3, type=Event.ADDED,
              storage_class=wire_storage.class_to_proto(storage.StorageClass("local"))),
        Event(sequence=4, type=Event.ADDED,
              csi_node=wire_storage.csi_node_to_proto(storage.CSINode("n1", "1", {"d": 2}))),
        Event(sequence=5, type=Event.DELETED, pv=wire_storage.volume_to_proto(volume)),
    ]  # fmt: skip
    for event in events:
        ingest.apply(event)
    view = ingest.state.cache.table.storage
    assert view.claim("ns", "data") == claim
    assert set(view.classes) == {"local"} and view.csi_nodes["n1"].allocatable == {"d": 2}
    assert not view.volumes and ingest.last_sequence == 5


def test_a_long_batch_lets_the_scheduling_loop_run_between_chunks() -> None:
    """A batch of many pods wakes the scheduling loop after each `APPLY_CHUNK` events and
    yields to it: the first pods can be decided before the last are decoded."""

    async def body() -> None:
        ingest = new_ingest()
        snapshot(ingest)  # one pending pod
        queue = ingest.state.queue
        pokes: list[int] = []
        ingest.poke = lambda: pokes.append(len(queue))
        seen: list[int] = []

        async def scheduling_loop() -> None:
            while True:
                seen.append(len(queue))
                await asyncio.sleep(0)

        events = [
            Event(sequence=7 + i, type=Event.ADDED, pod=wire.pod_to_proto(pod(f"p{i}")))
            for i in range(2 * APPLY_CHUNK + 1)
        ]
        loop = asyncio.create_task(scheduling_loop())
        await asyncio.sleep(0)
        await ingest.apply_batch(events)
        loop.cancel()
        assert pokes == [1 + APPLY_CHUNK, 1 + 2 * APPLY_CHUNK, 2 + 2 * APPLY_CHUNK]
        assert 1 + APPLY_CHUNK in seen  # it ran with only the first chunk applied

    asyncio.run(body())
