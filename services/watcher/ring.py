"""The watcher's cluster view, its ring buffer of deltas and the subscriber read side.

`ClusterHub` is fed by the list/watch loop (`services.watcher.listwatch`) through `upsert`,
`delete` and `replace` (a relist: diffed against the view, so subscribers only see
ADDED/MODIFIED/DELETED deltas), and read by the gRPC stream (`services.watcher.server`)
through `snapshot` and `read_after`.

Events are encoded once, when they happen, never per subscriber: the view keeps each
object's serialised ClusterEvent *body* (object, resource_version, observed_at,
trace_context) and an event on the wire is `sequence` and `type` fields prepended to a body
(protobuf fields may come in any order). A ClusterEventBatch is the concatenation of its
events as length-delimited field 1, so a batch is a `b"".join(...)` of cached bytes.

Subscribers do not get queues the producer pushes into: each one keeps a cursor (the last
sequence it sent) into the shared ring, so the producer never waits for anyone. A
subscriber whose cursor fell out of the ring gets a fresh snapshot.

Sequence numbers start at the process start time in microseconds, so a subscriber that
resumes with a sequence from an earlier watcher process (a restart) always finds it older
than this ring and gets a snapshot instead of a wrong resume.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass

from google.protobuf.timestamp_pb2 import Timestamp

from splitsched.v1 import types_pb2, watcher_pb2

Type = watcher_pb2.ClusterEvent.Type
SNAPSHOT_BEGIN = watcher_pb2.ClusterEvent.SNAPSHOT_BEGIN
SNAPSHOT = watcher_pb2.ClusterEvent.SNAPSHOT
SYNCED = watcher_pb2.ClusterEvent.SYNCED
ADDED = watcher_pb2.ClusterEvent.ADDED
MODIFIED = watcher_pb2.ClusterEvent.MODIFIED
DELETED = watcher_pb2.ClusterEvent.DELETED

NODE = "node"
POD = "pod"
PDB = "pdb"
NAMESPACE = "namespace"
PVC = "pvc"
PV = "pv"
STORAGE_CLASS = "storage_class"
CSI_NODE = "csi_node"
DEVICE_CLASS = "device_class"
RESOURCE_SLICE = "resource_slice"
RESOURCE_CLAIM = "resource_claim"

StorageMsg = (
    types_pb2.PersistentVolumeClaim
    | types_pb2.PersistentVolume
    | types_pb2.StorageClass
    | types_pb2.CSINode
)
DeviceMsg = types_pb2.DeviceClass | types_pb2.ResourceSlice | types_pb2.ResourceClaim
ObjectMsg = (
    types_pb2.Node
    | types_pb2.Pod
    | types_pb2.PodDisruptionBudget
    | types_pb2.Namespace
    | StorageMsg
    | DeviceMsg
)


def _varint(n: int) -> bytes:
    out = bytearray()
    while n > 0x7F:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def _header(sequence: int, type_: int) -> bytes:
    """Fields 1 (sequence) and 2 (type) of a ClusterEvent."""
    return b"\x08" + _varint(sequence) + b"\x10" + _varint(type_)


def _batch_item(event: bytes) -> bytes:
    """One ClusterEventBatch.events entry (field 1, length-delimited)."""
    return b"\x0a" + _varint(len(event)) + event


_OBJECT_TAGS = {
    types_pb2.Node: b"\x1a",
    types_pb2.Pod: b"\x22",
    types_pb2.PodDisruptionBudget: b"\x2a",
    types_pb2.Namespace: b"\x4a",  # field 9
    types_pb2.PersistentVolumeClaim: b"\x52",  # field 10
    types_pb2.PersistentVolume: b"\x5a",  # 11
    types_pb2.StorageClass: b"\x62",  # 12
    types_pb2.CSINode: b"\x6a",  # 13
    types_pb2.DeviceClass: b"\x72",  # 14
    types_pb2.ResourceSlice: b"\x7a",  # 15
    types_pb2.ResourceClaim: b"\x82\x01",  # 16: the tag's varint takes two bytes
}


def _length_delimited(tag: bytes, data: bytes) -> bytes:
    return tag + _varint(len(data)) + data


def encode_body(
    obj: ObjectMsg, *, observed_at: float, trace_context: Mapping[str, str] | None = None
) -> bytes:
    """The type-independent part of a ClusterEvent carrying `obj`: fields 3/4/5/9-16 (the
    object), 6 (resource_version), 7 (observed_at) and 8 (trace_context, the watcher span
    that observed a pending pod), encoded by hand so the object is serialised once and
    never copied into an event message."""
    seconds = int(observed_at)
    ts = Timestamp(seconds=seconds, nanos=int((observed_at - seconds) * 1e9))
    return b"".join(
        (
            _length_delimited(_OBJECT_TAGS[type(obj)], obj.SerializeToString()),
            _length_delimited(b"\x32", obj.resource_version.encode())
            if obj.resource_version
            else b"",
            _length_delimited(b"\x3a", ts.SerializeToString()),
            watcher_pb2.ClusterEvent(trace_context=trace_context).SerializeToString()
            if trace_context
            else b"",
        )
    )


@dataclass(frozen=True, slots=True)
class Entry:
    """One object of the view. For pods, `scheduler_name`/`assigned` let a subscriber's
    scheduler-name filter decide without decoding the body."""

    kind: str
    key: str
    uid: str
    resource_version: str
    body: bytes
    scheduler_name: str | None = None  # None for all but pods
    assigned: bool = True
    # What a scheduler can see of the object, minus resourceVersion and a pod's non-terminal
    # phase: two versions with equal fingerprints differ only in status a scheduler ignores
    # (a pod going Running, a node heartbeat), so the second is not sent (see `upsert`).
    fingerprint: bytes = b""
    # The same promise taken from the API JSON before converting (pods only, see
    # `listwatch.raw_pod_fingerprint`): an update with an equal one skips conversion.
    raw_fingerprint: bytes = b""

    def visible_to(self, names: frozenset[str]) -> bool:
        return (
            not names
            or self.scheduler_name is None
            or self.assigned
            or (self.scheduler_name in names)
        )


@dataclass(frozen=True, slots=True)
class RingEvent:
    sequence: int
    type: int
    entry: Entry
    was_assigned: bool  # for a MODIFIED pod: was the previous version assigned?

    @property
    def data(self) -> bytes:
        """The serialised ClusterEvent: built when sent, not kept (the ring would hold a
        second copy of every body it holds)."""
        return _header(self.sequence, self.type) + self.entry.body


class ClusterHub:
    """The current view plus the last `ring_size` deltas (see the module docstring)."""

    def __init__(self, *, ring_size: int, first_sequence: int | None = None) -> None:
        if ring_size < 1:
            raise ValueError("ring_size must be >= 1")
        self.ring_size = ring_size
        base = time.time_ns() // 1000 if first_sequence is None else first_sequence - 1
        self._last = base  # sequence of the newest event (the base when there is none)
        self._ring: list[RingEvent | None] = [None] * ring_size
        self._count = 0  # events held in the ring
        self._view: dict[tuple[str, str], Entry] = {}
        self._new = asyncio.Event()
        self._synced = asyncio.Event()
        self.subscribers = 0
        self.absorbed = 0  # updates taken into the view without an event (equal fingerprint)

    # ---- state ----------------------------------------------------------------------

    @property
    def last_sequence(self) -> int:
        return self._last

    @property
    def first_sequence(self) -> int:
        """The oldest sequence held in the ring (last + 1 when it is empty)."""
        return self._last - self._count + 1

    @property
    def ring_events(self) -> int:
        return self._count

    @property
    def synced(self) -> bool:
        return self._synced.is_set()

    def mark_synced(self) -> None:
        self._synced.set()

    async def wait_synced(self) -> None:
        await self._synced.wait()

    def get(self, kind: str, key: str) -> Entry | None:
        return self._view.get((kind, key))

    def keys(self, kind: str) -> list[str]:
        return [k for (kd, k) in self._view if kd == kind]

    def __len__(self) -> int:
        return len(self._view)

    # ---- producer side --------------------------------------------------------------

    def _append(self, type_: int, entry: Entry, *, was_assigned: bool) -> int:
        seq = self._last + 1
        self._ring[seq % self.ring_size] = RingEvent(seq, type_, entry, was_assigned)
        self._last = seq
        if self._count < self.ring_size:
            self._count += 1
        new, self._new = self._new, asyncio.Event()
        new.set()
        return type_

    def upsert(self, entry: Entry) -> int | None:
        """Add or replace an object; returns the delta type emitted (None when the view
        already holds this resourceVersion, or when only ignored status changed: the view
        takes the new version silently, so a relist later does not see a difference)."""
        k = (entry.kind, entry.key)
        old = self._view.get(k)
        if old is not None and old.uid != entry.uid and old.uid and entry.uid:
            # Same name, new object (deleted and re-created while we were not watching).
            self.delete(entry.kind, entry.key)
            old = None
        if (
            old is not None
            and old.resource_version == entry.resource_version
            and (entry.resource_version)
        ):
            return None
        self._view[k] = entry
        if old is not None and entry.fingerprint and old.fingerprint == entry.fingerprint:
            self.absorbed += 1
            return None
        if old is None:
            return self._append(ADDED, entry, was_assigned=True)
        return self._append(MODIFIED, entry, was_assigned=old.assigned)

    def absorb(self, kind: str, key: str, resource_version: str) -> None:
        """Note a newer version of an object whose update changed nothing a scheduler reads
        (the caller checked the fingerprint): the view remembers the new resourceVersion,
        so a relist finds nothing to send; its body still carries the version sent."""
        k = (kind, key)
        old = self._view.get(k)
        if old is not None:
            self._view[k] = dataclasses.replace(old, resource_version=resource_version)
            self.absorbed += 1

    def delete(self, kind: str, key: str, last: Entry | None = None) -> int | None:
        """Remove an object; the DELETED event carries `last` (its final state) when given,
        else the version the view held. Returns DELETED, or None if it was not in view."""
        old = self._view.pop((kind, key), None)
        if old is None:
            return None
        entry = old if last is None else last
        return self._append(DELETED, entry, was_assigned=old.assigned)

    def replace(self, kind: str, entries: Iterable[Entry]) -> dict[int, int]:
        """A relist: make the view's `kind` objects equal to `entries`, emitting only the
        differences. Returns counts per delta type."""
        counts: dict[int, int] = {}
        seen: set[str] = set()
        for entry in entries:
            seen.add(entry.key)
            t = self.upsert(entry)
            if t is not None:
                counts[t] = counts.get(t, 0) + 1
        for key in [k for (kd, k) in self._view if kd == kind and k not in seen]:
            self.delete(kind, key)
            counts[DELETED] = counts.get(DELETED, 0) + 1
        return counts

    # ---- subscriber side ------------------------------------------------------------

    def can_resume(self, sequence: int) -> bool:
        """Whether the deltas after `sequence` are all still in the ring."""
        return sequence != 0 and self.first_sequence - 1 <= sequence <= self._last

    def snapshot(self, names: frozenset[str]) -> tuple[int, list[Entry]]:
        """The view as of the current sequence (copied, so later changes don't leak in)."""
        return self._last, [e for e in self._view.values() if e.visible_to(names)]

    def read_after(self, sequence: int, *, limit: int) -> list[RingEvent] | None:
        """Up to `limit` ring events after `sequence`; None when some were evicted."""
        if not self.can_resume(sequence):
            return None
        end = min(self._last, sequence + limit)
        ring, size = self._ring, self.ring_size
        out: list[RingEvent] = []
        for seq in range(sequence + 1, end + 1):
            ev = ring[seq % size]
            assert ev is not None and ev.sequence == seq
            out.append(ev)
        return out

    async def wait_after(self, sequence: int) -> None:
        """Return once an event after `sequence` exists."""
        if self._last > sequence:
            return
        await self._new.wait()


# ---- batch encoding for the stream ----------------------------------------------------


def event_for(ev: RingEvent, names: frozenset[str]) -> bytes | None:
    """The bytes a subscriber with scheduler-name filter `names` gets for `ev` (None: skip).

    A pending pod of another scheduler is invisible until it is assigned; that MODIFIED is
    then the subscriber's ADDED. schedulerName is immutable and nodeName set once, so no
    other visibility change exists."""
    entry = ev.entry
    if not names or entry.scheduler_name is None or entry.scheduler_name in names:
        return ev.data
    if not entry.assigned:
        return None
    if ev.type == MODIFIED and not ev.was_assigned:
        return _header(ev.sequence, ADDED) + entry.body
    if ev.type == DELETED and not ev.was_assigned:
        return None
    return ev.data


def batches_for_snapshot(
    sequence: int, entries: list[Entry], *, max_events: int, max_bytes: int
) -> Iterator[bytes]:
    """SNAPSHOT_BEGIN, one SNAPSHOT per entry, SYNCED: as serialised ClusterEventBatches."""
    snap = _header(sequence, SNAPSHOT)
    items = [_batch_item(_header(sequence, SNAPSHOT_BEGIN))]
    size = len(items[0])
    for entry in entries:
        item = _batch_item(snap + entry.body)
        if len(items) >= max_events or (size + len(item) > max_bytes and items):
            yield b"".join(items)
            items, size = [], 0
        items.append(item)
        size += len(item)
    items.append(_batch_item(_header(sequence, SYNCED)))
    yield b"".join(items)


def batch_for_events(events: list[bytes]) -> bytes:
    return b"".join(_batch_item(e) for e in events)
