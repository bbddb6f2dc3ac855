"""What a subscriber of `Watcher.StreamClusterEvents` receives of a pod and a node full of
what must not spread (env, command, volumes, secret-looking annotations, node info): the
watcher's conversion feeds its hub, a real gRPC server streams it, and the raw bytes on the
wire are read before any decoding, so nothing can hide in an unknown field."""

from __future__ import annotations

import asyncio

from services.watcher import entries, ring, server
from splitsched.runtime import grpcsrv
from splitsched.v1 import watcher_pb2
from tests.support import watcher
from tests.support.builders import SECRET_MARKER, leaky_node_json, leaky_pod_json

NOW = 1_700_000_000.0
METHOD = f"/{server.SERVICE_NAME}/StreamClusterEvents"
E = watcher_pb2.ClusterEvent


def _as_received(data: bytes) -> bytes:
    """The response bytes as they came over the wire, before any decoding."""
    return data


async def _raw_snapshot(port: int) -> list[bytes]:
    """The serialised ClusterEventBatch messages of one snapshot, up to SYNCED."""
    channel = grpcsrv.channel(f"127.0.0.1:{port}")
    call = channel.unary_stream(
        METHOD,
        request_serializer=watcher_pb2.StreamClusterEventsRequest.SerializeToString,
        response_deserializer=_as_received,
    )(watcher_pb2.StreamClusterEventsRequest(subscriber="test"))
    batches: list[bytes] = []
    try:
        while True:
            data = await asyncio.wait_for(call.read(), 5)
            assert isinstance(data, bytes)
            batches.append(data)
            events = watcher_pb2.ClusterEventBatch.FromString(data).events
            if any(ev.type == E.SYNCED for ev in events):
                return batches
    finally:
        call.cancel()
        await channel.close()


def test_the_stream_carries_no_env_command_volume_or_annotation_values() -> None:
    async def main() -> list[bytes]:
        converter = entries.Converter(scheduler_names=["splitsched"])
        hub = ring.ClusterHub(ring_size=100, first_sequence=1)
        for entry in (converter.node(leaky_node_json(), NOW), converter.pod(leaky_pod_json(), NOW)):
            assert entry is not None
            hub.upsert(entry)
        hub.mark_synced()
        async with watcher.serving(hub) as port:
            return await _raw_snapshot(port)

    batches = asyncio.run(main())
    wire_bytes = b"".join(batches)
    assert SECRET_MARKER.encode() not in wire_bytes
    events = [
        ev for data in batches for ev in watcher_pb2.ClusterEventBatch.FromString(data).events
    ]
    objects = {ev.WhichOneof("object"): ev for ev in events if ev.type == E.SNAPSHOT}
    assert objects.keys() == {"node", "pod"}
    pod = objects["pod"].pod
    assert (pod.namespace, pod.name, dict(pod.labels)) == ("ns", "leaky", {"app": "web"})
    assert dict(pod.annotations) == {"splitsched.io/group": "trio", "splitsched.io/min-member": "3"}
    assert pod.containers[0].requests["cpu"] == 250
    assert objects["node"].node.name == "n1" and not objects["node"].node.annotations
