"""What one delta costs the watcher's ring: about one copy of the object's body, not four.

The soak (docs/faults.md, "Soak") measured ~7 KiB a delta, ~700 MiB for the default ring
of 100,000: each ring event kept the event's bytes (a second copy of the body) and its view
entry's two fingerprints, the serialised object again and the pod's JSON as the converter
read it (orjson's output also keeps up to 4 KiB of spare allocation). Now the bytes are
built when sent and the fingerprints are 16-byte digests. ``bench.ring_memory`` measures
with tracemalloc: allocations, not time."""

from __future__ import annotations

from bench import ring_memory
from services.watcher import entries, ring
from splitsched.v1 import watcher_pb2


def test_a_delta_costs_about_one_copy_of_its_body() -> None:
    cost = ring_memory.measure(1_000)
    assert cost.deltas == 2_000
    # One body, the entry and event objects, and the view's dict slot: under twice the
    # body plus 512 bytes (before: 5,614 bytes a delta for a 330-byte body).
    assert cost.bytes_per_delta < 2 * cost.body_bytes + 512, cost


def test_the_event_sent_is_the_header_and_the_body() -> None:
    """The bytes built on the way out are the ClusterEvent the subscribers decode."""
    hub = ring.ClusterHub(ring_size=4, first_sequence=10)
    entry = entries.Converter().pod(ring_memory.pod_json(1, 7), ring_memory.NOW)
    assert entry is not None
    hub.upsert(entry)
    (event,) = hub.read_after(9, limit=10) or []
    decoded = watcher_pb2.ClusterEvent.FromString(event.data)
    assert (decoded.sequence, decoded.type, decoded.pod.name) == (10, ring.ADDED, "web-1")
    assert decoded.resource_version == "7"
