"""The watcher's ring buffer, snapshot/resume logic and gRPC stream, in process.

A fake event source feeds `ClusterHub` directly (no API server); the stream is read over a
real gRPC server on a loopback port with the generated client stub, so the hand-encoded
batches are checked by the real protobuf decoder.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Awaitable, Callable
from typing import Any

import grpc
import pytest
from prometheus_client import CollectorRegistry

from services.watcher import entries, listwatch, metrics, ring, server
from splitsched import wire
from splitsched.core import models
from splitsched.runtime import grpcsrv, kubeclient
from splitsched.v1 import watcher_pb2, watcher_pb2_grpc
from tests.support import watcher as watcher_support
from tests.support.builders import RING_NOW, node_entry, pod_entry

E = watcher_pb2.ClusterEvent
NOW = RING_NOW  # when the ring's entries were observed


def describe(ev: watcher_pb2.ClusterEvent) -> tuple[str, str, str]:
    """(type, object name, resource_version) of a streamed event."""
    which = ev.WhichOneof("object")
    name = ""
    if which == "node":
        name = ev.node.name
    elif which == "pod":
        name = ev.pod.name
    return E.Type.Name(ev.type), name, ev.resource_version


Body = Callable[[ring.ClusterHub, watcher_pb2_grpc.WatcherStub], Awaitable[None]]


def run_with_server(body: Body, *, ring_size: int = 100, max_batch_events: int = 500) -> None:
    async def main() -> None:
        hub = ring.ClusterHub(ring_size=ring_size, first_sequence=1)
        service = server.WatcherService(hub, max_batch_events=max_batch_events)
        srv = await grpcsrv.serve(
            listen="127.0.0.1:0",
            servicers=[(service.add_to_server, service)],
            service_names=[server.SERVICE_NAME],
        )
        channel = grpcsrv.channel(f"127.0.0.1:{srv.port}")
        try:
            await asyncio.wait_for(body(hub, watcher_pb2_grpc.WatcherStub(channel)), 20)
        finally:
            await channel.close()
            await srv.stop(0)

    asyncio.run(main())


class Reader:
    """Reads events off one stream, one at a time, across batch boundaries."""

    def __init__(self, call: Any) -> None:
        self.call = call
        self.pending: list[watcher_pb2.ClusterEvent] = []
        self.batches = 0

    async def next(self) -> watcher_pb2.ClusterEvent:
        while not self.pending:
            batch = await asyncio.wait_for(self.call.read(), 5)
            assert batch is not grpc.aio.EOF
            self.batches += 1
            self.pending.extend(batch.events)
        return self.pending.pop(0)

    async def take(self, n: int) -> list[watcher_pb2.ClusterEvent]:
        return [await self.next() for _ in range(n)]

    async def until_synced(self) -> list[watcher_pb2.ClusterEvent]:
        out = [await self.next()]
        while out[-1].type != E.SYNCED:
            out.append(await self.next())
        return out


def subscribe(stub: watcher_pb2_grpc.WatcherStub, from_sequence: int = 0, **kw: Any) -> Reader:
    req = watcher_pb2.StreamClusterEventsRequest(from_sequence=from_sequence, subscriber="t", **kw)
    return Reader(stub.StreamClusterEvents(req))


def test_fresh_subscribe_gets_snapshot_then_deltas() -> None:
    async def body(hub: ring.ClusterHub, stub: watcher_pb2_grpc.WatcherStub) -> None:
        hub.upsert(node_entry("n1", "10"))
        hub.upsert(pod_entry("p1", "11", node="n1"))
        hub.upsert(pod_entry("p2", "12"))
        hub.mark_synced()
        r = subscribe(stub)
        snap = await r.until_synced()
        assert [describe(e)[0] for e in snap] == [
            "SNAPSHOT_BEGIN", "SNAPSHOT", "SNAPSHOT", "SNAPSHOT", "SYNCED",
        ]  # fmt: skip
        assert {describe(e)[1:] for e in snap[1:-1]} == {("n1", "10"), ("p1", "11"), ("p2", "12")}
        # Snapshot items carry the sequence the snapshot reflects: resuming from it is exact.
        assert {e.sequence for e in snap} == {hub.last_sequence} == {3}
        pod = next(e.pod for e in snap if e.WhichOneof("object") == "pod" and e.pod.name == "p1")
        assert wire.pod_from_proto(pod).node_name == "n1"
        assert snap[1].observed_at.seconds == int(NOW)

        hub.upsert(pod_entry("p2", "13", node="n1"))  # bound
        hub.upsert(pod_entry("p3", "14"))
        hub.delete(ring.POD, "ns/p1")
        hub.upsert(pod_entry("p3", "14"))  # same resourceVersion: no event
        deltas = await r.take(3)
        assert [describe(e) for e in deltas] == [
            ("MODIFIED", "p2", "13"), ("ADDED", "p3", "14"), ("DELETED", "p1", "11"),
        ]  # fmt: skip
        assert [e.sequence for e in deltas] == [4, 5, 6]
        assert hub.last_sequence == 6

    run_with_server(body)


def test_resume_from_held_sequence_gets_only_later_deltas() -> None:
    async def body(hub: ring.ClusterHub, stub: watcher_pb2_grpc.WatcherStub) -> None:
        for i in range(5):
            hub.upsert(node_entry(f"n{i}", str(i + 1)))
        hub.mark_synced()
        hub.upsert(node_entry("n0", "20"))  # seq 6
        hub.upsert(node_entry("n1", "21"))  # seq 7
        r = subscribe(stub, from_sequence=5)
        got = await r.take(2)
        assert [(describe(e), e.sequence) for e in got] == [
            (("MODIFIED", "n0", "20"), 6), (("MODIFIED", "n1", "21"), 7),
        ]  # fmt: skip
        hub.delete(ring.NODE, "n4")
        assert describe(await r.next()) == ("DELETED", "n4", "5")
        # Resuming at the head works too: nothing is replayed, the next delta arrives.
        r2 = subscribe(stub, from_sequence=hub.last_sequence)
        hub.upsert(node_entry("n9", "30"))
        e = await r2.next()
        assert (describe(e), e.sequence) == (("ADDED", "n9", "30"), 9)

    run_with_server(body)


def test_resume_from_evicted_or_unknown_sequence_gets_fresh_snapshot() -> None:
    async def body(hub: ring.ClusterHub, stub: watcher_pb2_grpc.WatcherStub) -> None:
        hub.upsert(node_entry("n1", "1"))
        hub.mark_synced()
        for i in range(10):  # ring of 4: sequences 1..7 are evicted
            hub.upsert(node_entry("n1", str(i + 2)))
        assert hub.first_sequence == 8
        for stale in (2, 6, 10_000):  # evicted, just evicted, from the future (a restart)
            r = subscribe(stub, from_sequence=stale)
            snap = await r.until_synced()
            assert describe(snap[0])[0] == "SNAPSHOT_BEGIN"
            assert [describe(e) for e in snap[1:-1]] == [("SNAPSHOT", "n1", "11")]
            r.call.cancel()
        # The oldest held sequence minus one is still resumable (its successor is held).
        # Sequence k carried resourceVersion k here, so the first delta after 7 is rv 8.
        r = subscribe(stub, from_sequence=7)
        assert describe(await r.next()) == ("MODIFIED", "n1", "8")

    run_with_server(body, ring_size=4)


def test_subscriber_waits_for_sync_before_snapshot() -> None:
    async def body(hub: ring.ClusterHub, stub: watcher_pb2_grpc.WatcherStub) -> None:
        r = subscribe(stub)
        hub.upsert(node_entry("n1", "1"))
        await asyncio.sleep(0.2)
        hub.upsert(node_entry("n2", "2"))
        hub.mark_synced()
        snap = await r.until_synced()
        assert {describe(e)[1] for e in snap[1:-1]} == {"n1", "n2"}

    run_with_server(body)


def test_snapshot_is_batched() -> None:
    async def body(hub: ring.ClusterHub, stub: watcher_pb2_grpc.WatcherStub) -> None:
        for i in range(25):
            hub.upsert(node_entry(f"n{i}", str(i + 1)))
        hub.mark_synced()
        r = subscribe(stub)
        snap = await r.until_synced()
        assert len(snap) == 27
        assert r.batches == 3  # 27 events, at most 10 per batch

    run_with_server(body, max_batch_events=10)


def test_slow_subscriber_does_not_block_others_and_gets_a_snapshot_later() -> None:
    async def body(hub: ring.ClusterHub, stub: watcher_pb2_grpc.WatcherStub) -> None:
        hub.upsert(node_entry("n0", "1"))
        hub.mark_synced()
        slow = subscribe(stub)
        fast = subscribe(stub)
        assert len(await slow.until_synced()) == 3
        assert len(await fast.until_synced()) == 3
        # The slow one stops reading; the producer keeps going far past the ring (50) and
        # the fast one sees every delta in order, promptly.
        seen: list[int] = []
        big = "x" * 20_000  # large events so the slow stream's transport buffers fill up
        for i in range(400):
            rv = str(i + 2)
            node = wire.node_to_proto(
                models.Node(name="n0", resource_version=rv, labels={"pad": big})
            )
            body = ring.encode_body(node, observed_at=NOW)
            hub.upsert(ring.Entry(kind=ring.NODE, key="n0", uid="", resource_version=rv, body=body))
            if i % 50 == 49:
                while len(seen) < i + 1:
                    seen.append((await fast.next()).sequence)
        assert seen == list(range(2, 402))
        # The slow subscriber, reading again, eventually gets a fresh snapshot (it fell
        # behind the ring) that reflects the latest state, and then live deltas.
        latest = ""
        while True:
            e = await slow.next()
            if e.type == E.SNAPSHOT_BEGIN:
                snap = await slow.until_synced()
                latest = describe(snap[0])[2]
                break
        assert latest == "401"
        hub.upsert(node_entry("n1", "500"))
        assert describe(await slow.next()) == ("ADDED", "n1", "500")

    run_with_server(body, ring_size=50, max_batch_events=5)


def test_lag_gauge_counts_the_deltas_the_slowest_subscriber_was_not_sent() -> None:
    """splitsched_watcher_subscriber_lag_events: the hub's newest sequence minus the
    slowest open stream's cursor; 0 once every delta went out, and with no subscriber."""

    def lag() -> float:
        return registry.get_sample_value("splitsched_watcher_subscriber_lag_events") or 0.0

    async def until(condition: Callable[[], bool], what: str) -> None:
        for _ in range(500):
            if condition():
                return
            await asyncio.sleep(0.01)
        raise AssertionError(f"never {what}; lag {lag()}")

    async def main() -> None:
        hub = ring.ClusterHub(ring_size=1000, first_sequence=1)
        async with (
            watcher_support.serving(hub, registry=registry) as port,
            grpcsrv.channel(f"127.0.0.1:{port}") as channel,
        ):
            stub = watcher_pb2_grpc.WatcherStub(channel)
            hub.upsert(node_entry("n0", "1"))
            hub.mark_synced()
            reader = subscribe(stub)
            await reader.until_synced()
            await until(lambda: lag() == 0, "caught up")
            for i in range(300):
                hub.upsert(node_entry("n0", str(i + 2)))
            # Nothing ran on the loop since: all 300 are unsent.
            assert lag() == 300
            assert [e.sequence for e in await reader.take(300)] == list(range(2, 302))
            await until(lambda: lag() == 0, "caught up")
            reader.call.cancel()
            subscribers = "splitsched_watcher_subscribers"
            await until(lambda: registry.get_sample_value(subscribers) == 0, "left")
            hub.upsert(node_entry("n0", "999"))
            assert lag() == 0  # the stream that left is not waited for

    registry = CollectorRegistry()
    asyncio.run(main())


def test_relist_emits_only_differences() -> None:
    hub = ring.ClusterHub(ring_size=100, first_sequence=1)
    hub.replace(ring.NODE, [node_entry("a", "1"), node_entry("b", "2"), node_entry("c", "3")])
    hub.upsert(pod_entry("p", "4"))
    start = hub.last_sequence
    counts = hub.replace(ring.NODE, [node_entry("a", "1"), node_entry("b", "7"),
                                     node_entry("d", "8")])  # fmt: skip
    assert counts == {ring.MODIFIED: 1, ring.ADDED: 1, ring.DELETED: 1}
    events = hub.read_after(start, limit=10)
    assert events is not None
    assert [(e.type, e.entry.key) for e in events] == [
        (ring.MODIFIED, "b"), (ring.ADDED, "d"), (ring.DELETED, "c"),
    ]  # fmt: skip
    assert sorted(hub.keys(ring.NODE)) == ["a", "b", "d"]
    assert hub.get(ring.POD, "ns/p") is not None  # other kinds untouched
    # A same-name object with a new uid is a delete and an add, not a modification.
    recreated = ring.Entry(kind=ring.NODE, key="a", uid="other", resource_version="9",
                           body=node_entry("a", "9").body)  # fmt: skip
    hub.upsert(recreated)
    tail = hub.read_after(start + 3, limit=10)
    assert tail is not None
    assert [(e.type, e.entry.key) for e in tail] == [(ring.DELETED, "a"), (ring.ADDED, "a")]


def test_scheduler_name_filter_per_subscriber() -> None:
    async def body(hub: ring.ClusterHub, stub: watcher_pb2_grpc.WatcherStub) -> None:
        hub.upsert(pod_entry("mine", "1"))
        hub.upsert(pod_entry("other", "2", scheduler="default-scheduler"))
        hub.upsert(pod_entry("other-bound", "3", node="n1", scheduler="default-scheduler"))
        hub.mark_synced()
        r = subscribe(stub, scheduler_names=["splitsched"])
        snap = await r.until_synced()
        assert {describe(e)[1] for e in snap[1:-1]} == {"mine", "other-bound"}
        hub.upsert(pod_entry("other2", "4", scheduler="default-scheduler"))  # invisible
        hub.upsert(pod_entry("other", "5", node="n2", scheduler="default-scheduler"))  # bound
        hub.delete(ring.POD, "ns/other2")  # never visible: no DELETED
        hub.upsert(pod_entry("mine2", "6"))
        got = await r.take(2)
        # The first time this subscriber sees "other" it is an ADDED, not a MODIFIED.
        assert [describe(e) for e in got] == [("ADDED", "other", "5"), ("ADDED", "mine2", "6")]

    run_with_server(body)


# ---- the conversion step of the list/watch loop ----------------------------------------


def _pod_json(name: str, **spec: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "namespace": "ns", "uid": f"u-{name}",
                     "resourceVersion": "7", "creationTimestamp": "2024-01-01T00:00:00Z"},
        "spec": {"schedulerName": "splitsched",
                 "containers": [{"name": "c", "resources": {"requests": {"cpu": "250m"}}}],
                 **spec},
        "status": {"phase": "Pending"},
    }  # fmt: skip


def _decode(entry: ring.Entry) -> watcher_pb2.ClusterEvent:
    return watcher_pb2.ClusterEvent.FromString(entry.body)


def test_converter_pods() -> None:
    conv = entries.Converter(scheduler_names=["splitsched"])
    entry = conv.pod(_pod_json("ok"), NOW)
    assert entry is not None
    ev = _decode(entry)
    assert ev.resource_version == "7"
    assert wire.pod_from_proto(ev.pod).requests == {"cpu": 250}
    # Terminal pods leave the view.
    done = _pod_json("done")
    done["status"]["phase"] = "Succeeded"
    assert conv.pod(done, NOW) is None
    # Pending pods of other schedulers are filtered; once assigned they use capacity.
    assert conv.pod(_pod_json("x", schedulerName="default-scheduler"), NOW) is None
    bound = conv.pod(_pod_json("y", schedulerName="default-scheduler", nodeName="n1"), NOW)
    assert bound is not None and bound.assigned
    assert entries.Converter().pod(_pod_json("z", schedulerName="other"), NOW) is not None
    # A malformed quantity is streamed with invalid_reason, not dropped.
    bad = _pod_json("bad")
    bad["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "12XB"
    bad_entry = conv.pod(bad, NOW)
    assert bad_entry is not None
    reason = _decode(bad_entry).pod.invalid_reason
    assert "spec.containers[0].resources.requests.cpu" in reason and "12XB" in reason
    # A terminating pod carries its real deletionTimestamp.
    deleting = _pod_json("del")
    deleting["metadata"]["deletionTimestamp"] = "2024-01-01T00:00:10Z"
    del_entry = conv.pod(deleting, NOW)
    assert del_entry is not None
    assert _decode(del_entry).pod.deletion_timestamp.seconds == 1704067210


def test_converter_skips_malformed_node(caplog: pytest.LogCaptureFixture) -> None:
    conv = entries.Converter()
    good = {"metadata": {"name": "n1", "resourceVersion": "3"},
            "status": {"allocatable": {"cpu": "2", "memory": "1Gi"}}}  # fmt: skip
    entry = conv.node(good, NOW)
    assert entry is not None
    assert dict(_decode(entry).node.allocatable) == {"cpu": 2000, "memory": 2**30}
    bad = {"metadata": {"name": "n2"}, "status": {"allocatable": {"cpu": "lots"}}}
    assert conv.node(bad, NOW) is None
    assert "node n2" in caplog.text and "lots" in caplog.text


def test_pdb_conversion() -> None:
    obj = {
        "metadata": {"name": "web", "namespace": "ns", "resourceVersion": "5", "uid": "u"},
        "spec": {"selector": {"matchLabels": {"app": "web"}}, "minAvailable": 1},
        "status": {"disruptionsAllowed": 2},
    }
    msg = entries.pdb_to_proto(obj)
    assert (msg.namespace, msg.name, msg.disruptions_allowed) == ("ns", "web", 2)
    assert dict(msg.selector.match_labels) == {"app": "web"}
    # A PDB without a selector selects nothing: the message stays unset.
    obj["spec"] = {}
    assert not entries.pdb_to_proto(obj).HasField("selector")


# ---- the list/watch loop against a fake API server -------------------------------------


class FakeApi:
    """A tiny API server for one resource (nodes): paginated LIST and a WATCH fed from a
    queue. The queue items are watch events, or "drop" (cut the connection) or "gone"
    (an ERROR event with code 410)."""

    def __init__(self) -> None:
        self.nodes: dict[str, dict[str, Any]] = {}
        self.rv = 100
        self.watch_events: asyncio.Queue[Any] = asyncio.Queue()
        self.requests: list[dict[str, str]] = []

    def put(self, name: str, cpu: str = "4") -> dict[str, Any]:
        self.rv += 1
        obj = {"metadata": {"name": name, "uid": f"u-{name}", "resourceVersion": str(self.rv)},
               "status": {"allocatable": {"cpu": cpu}}}  # fmt: skip
        self.nodes[name] = obj
        return obj

    async def handle(self, request: Any) -> Any:
        from aiohttp import web

        params = dict(request.query)
        self.requests.append(params)
        assert request.headers.get("Authorization") == "Bearer tok"
        if params.get("watch") != "1":
            names = sorted(self.nodes)
            start = int(params.get("continue") or 0)
            limit = int(params["limit"])
            page = names[start : start + limit]
            meta: dict[str, str] = {"resourceVersion": str(self.rv)}
            if start + limit < len(names):
                meta["continue"] = str(start + limit)
            return web.json_response({"items": [self.nodes[n] for n in page], "metadata": meta})
        resp = web.StreamResponse()
        await resp.prepare(request)
        while True:
            item = await self.watch_events.get()
            if item == "drop":
                assert request.transport is not None
                request.transport.close()
                return resp
            gone = item == "gone"
            if gone:  # the API server ends a watch after an ERROR event
                item = {"type": "ERROR", "object": {"kind": "Status", "code": 410}}
            await resp.write(json.dumps(item).encode() + b"\n")
            if gone:
                return resp


def test_reflector_lists_watches_rewatches_and_relists_on_gone() -> None:
    async def main() -> None:
        import aiohttp
        from aiohttp import web

        api = FakeApi()
        for i in range(5):
            api.put(f"n{i}")
        app = web.Application()
        app.router.add_get("/api/v1/nodes", api.handle)
        runner = web.AppRunner(app)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        hub = ring.ClusterHub(ring_size=100, first_sequence=1)
        synced = asyncio.Event()
        session = aiohttp.ClientSession()
        reflector = listwatch.Reflector(
            resource=listwatch.NODES,
            hub=hub,
            converter=entries.Converter(),
            endpoint=kubeclient.KubeEndpoint(
                host=f"http://127.0.0.1:{port}", auth_header=lambda: "Bearer tok"
            ),
            session=session,
            metrics=metrics.Metrics(None),
            page_size=2,
            on_synced=synced.set,
            backoff_initial=0.01,
        )
        task = asyncio.create_task(reflector.run())

        async def until(pred: Callable[[], bool]) -> None:
            for _ in range(500):
                if pred():
                    return
                await asyncio.sleep(0.01)
            raise AssertionError("condition not reached")

        try:
            await asyncio.wait_for(synced.wait(), 5)
            assert sorted(hub.keys(ring.NODE)) == [f"n{i}" for i in range(5)]
            lists = [r for r in api.requests if r.get("watch") != "1"]
            assert [r.get("continue") for r in lists] == [None, "2", "4"]  # 3 pages of 2
            await until(lambda: any(r.get("watch") == "1" for r in api.requests))
            first_watch = api.requests[-1]
            assert first_watch["resourceVersion"] == "105"
            assert first_watch["allowWatchBookmarks"] == "true"
            assert "timeoutSeconds" in first_watch

            api.watch_events.put_nowait({"type": "ADDED", "object": api.put("n5")})
            api.watch_events.put_nowait(
                {"type": "BOOKMARK", "object": {"metadata": {"resourceVersion": "200"}}}
            )
            await until(lambda: reflector.resource_version == "200")
            assert hub.get(ring.NODE, "n5") is not None
            # A cut connection: re-watch from the last resourceVersion (the bookmark's).
            watches = sum(r.get("watch") == "1" for r in api.requests)
            api.watch_events.put_nowait("drop")
            await until(lambda: sum(r.get("watch") == "1" for r in api.requests) > watches)
            assert api.requests[-1]["resourceVersion"] == "200"
            # Gone while changes were missed: relist, emitting only the differences.
            mark = hub.last_sequence
            api.put("n1", cpu="8")  # modified
            del api.nodes["n2"]  # deleted
            api.put("n9")  # added
            api.watch_events.put_nowait("gone")
            await until(lambda: hub.last_sequence >= mark + 3)
            events = hub.read_after(mark, limit=10)
            assert events is not None
            assert sorted((e.type, e.entry.key) for e in events) == sorted(
                [(ring.MODIFIED, "n1"), (ring.DELETED, "n2"), (ring.ADDED, "n9")]
            )
            n1 = hub.get(ring.NODE, "n1")
            assert n1 is not None
            assert dict(watcher_pb2.ClusterEvent.FromString(n1.body).node.allocatable) == {
                "cpu": 8000
            }
            # Deltas on the new watch still apply.
            await until(lambda: api.requests[-1].get("watch") == "1")
            api.watch_events.put_nowait({"type": "DELETED", "object": api.nodes.pop("n0")})
            await until(lambda: hub.get(ring.NODE, "n0") is None)
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
            api.watch_events.put_nowait("drop")  # release the open watch handler
            await session.close()
            await runner.cleanup()

    asyncio.run(main())


NOON = "2024-01-01T12:00:00Z"


def test_status_only_updates_are_absorbed_not_sent() -> None:
    """A bound pod going Running (new resourceVersion, phase, podIP, conditions) is no news
    to a scheduler: the view takes it silently. Anything a scheduler reads still goes out."""
    conv = entries.Converter()
    hub = ring.ClusterHub(ring_size=100)

    def version(rv: str, *, phase: str = "Pending", **meta: Any) -> ring.Entry:
        obj = _pod_json("p", nodeName="n1")
        obj["metadata"].update(resourceVersion=rv, **meta)
        ready = {"type": "Ready", "status": str(phase == "Running")}
        obj["status"] = {"phase": phase, "podIP": f"10.0.0.{rv}", "conditions": [ready]}
        entry = conv.pod(obj, NOW)
        assert entry is not None
        return entry

    assert hub.upsert(version("1")) == ring.ADDED
    running = version("2", phase="Running")
    assert hub.upsert(running) is None
    assert hub.absorbed == 1
    assert hub.get(ring.POD, "ns/p") is running  # the view holds the newest version
    assert hub.upsert(version("3", phase="Running", labels={"app": "web"})) == ring.MODIFIED
    deleting = version("4", phase="Running", labels={"app": "web"}, deletionTimestamp=NOON)
    assert hub.upsert(deleting) == ring.MODIFIED
    # A relist that finds the absorbed version emits nothing for it.
    assert hub.replace(ring.POD, [hub.get(ring.POD, "ns/p")]) == {}  # type: ignore[list-item]
    # Nodes: a heartbeat-only update is absorbed too, a new taint is not.
    node: dict[str, Any] = {"metadata": {"name": "n1", "uid": "un1", "resourceVersion": "5"},
            "status": {"allocatable": {"cpu": "4", "memory": "8Gi", "pods": "110"}}}  # fmt: skip
    first = conv.node(node, NOW)
    assert first is not None and hub.upsert(first) == ring.ADDED
    node["metadata"]["resourceVersion"] = "6"
    node["status"]["conditions"] = [{"type": "Ready", "status": "True",
                                     "lastHeartbeatTime": "2024-01-01T00:00:10Z"}]  # fmt: skip
    beat = conv.node(node, NOW)
    assert beat is not None and hub.upsert(beat) is None
    node["metadata"]["resourceVersion"] = "7"
    node["spec"] = {"taints": [{"key": "k", "effect": "NoSchedule"}]}
    tainted = conv.node(node, NOW)
    assert tainted is not None and hub.upsert(tainted) == ring.MODIFIED


def test_status_only_pod_updates_skip_conversion_in_the_watch_loop(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The watch loop judges a pod update on its JSON first: a status-only one is absorbed
    without converting, anything a scheduler reads is converted and sent."""
    hub = ring.ClusterHub(ring_size=100)
    reflector = listwatch.Reflector(
        resource=listwatch.PODS,
        hub=hub,
        converter=entries.Converter(),
        endpoint=kubeclient.KubeEndpoint(
            host="http://127.0.0.1:1", auth_header=lambda: "Bearer tok"
        ),
        session=None,  # type: ignore[arg-type]  # handle_event does no I/O
        metrics=metrics.Metrics(None),
    )
    conversions: list[str] = []
    convert = reflector._convert

    def counting(obj: dict[str, Any], now: float) -> ring.Entry | None:
        conversions.append(obj["metadata"]["resourceVersion"])
        return convert(obj, now)

    monkeypatch.setattr(reflector, "_convert", counting)

    def event(type_: str, rv: str, *, phase: str = "Running", **spec: Any) -> None:
        obj = _pod_json("p", nodeName="n1", **spec)
        obj["metadata"]["resourceVersion"] = rv
        obj["status"] = {"phase": phase, "podIP": f"10.0.0.{rv}"}
        reflector.handle_event({"type": type_, "object": obj})

    event("ADDED", "1", phase="Pending")
    event("MODIFIED", "2")  # kwok: Running, an IP -- absorbed, not converted
    assert conversions == ["1"] and hub.absorbed == 1
    assert reflector.resource_version == "2"
    entry = hub.get(ring.POD, "ns/p")
    assert entry is not None and entry.resource_version == "2"
    assert hub.last_sequence == hub.first_sequence  # one event (ADDED) in the ring
    event("MODIFIED", "3", priority=7)  # the spec changed: converted and sent
    event("MODIFIED", "4", phase="Succeeded", priority=7)  # terminal: leaves the view
    assert conversions == ["1", "3", "4"]
    assert hub.get(ring.POD, "ns/p") is None
