"""The devices a node can use, gathered into pools as kube-scheduler's allocator gathers
them (its "incubating" allocator, the one default feature gates select in v1.36).

A pool is a driver's (driver, pool name) set of ResourceSlices. For one node:
- a slice counts when its nodeName is the node, it has allNodes, its nodeSelector matches,
  or (perDeviceNodeSelection) any of its devices can be used from the node; a slice that
  says none of these is ignored;
- of the slices that count, only the newest pool generation is kept;
- the pool is complete when it has resourceSliceCount slices of that generation, counted
  over every node (a pool may span nodes); a newer generation anywhere makes the pool
  obsolete and it is dropped; a pool still short is incomplete (never searched for an
  exact count, an error for an "All" request);
- two devices of the same name, or a slice the watcher could not read, make the pool
  invalid; an unreadable slice counts only when it is of the kept generation (an older
  one is outdated, and kube drops outdated slices) or its generation could not be read
  either, and where its devices can be used is taken from what could be read (a slice
  whose node selection is unknown, or per device, counts on every node);
- pools are taken by (driver, pool name), slices by name, devices in the slice's order.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TypeVar

from splitsched.core import models
from splitsched.core.devices import model, nodes
from splitsched.core.devices.selectors import CelDevice

_K = TypeVar("_K")


@dataclass(frozen=True, slots=True)
class Candidate:
    """A device the allocator may pick, with where it can be used: `node_local` for a
    device of one node, `node_selector` for a network-attached one (None: all nodes)."""

    driver: str
    pool: str
    device: model.Device
    cel: CelDevice = field(compare=False)
    node_local: bool = False
    node_selector: tuple[models.NodeSelectorTerm, ...] | None = None

    @property
    def device_id(self) -> tuple[str, str, str]:
        return (self.driver, self.pool, self.device.name)

    @property
    def path(self) -> str:
        return f"{self.driver}/{self.pool}/{self.device.name}"


@dataclass(frozen=True, slots=True)
class Pool:
    driver: str
    name: str
    candidates: tuple[Candidate, ...] = ()
    incomplete: bool = False
    invalid_reason: str = ""

    @property
    def path(self) -> str:
        return f"{self.driver}/{self.name}"


class Inventory:
    """Every ResourceSlice, with each device's compiled view kept until its slice changes
    (so a selector's verdict on a device is computed once, not once per pod and node).
    Indexed so that one node's pools are found without looking at other nodes' slices."""

    def __init__(self, slices: Iterable[model.ResourceSlice] = ()) -> None:
        self._slices: dict[str, tuple[model.ResourceSlice, tuple[CelDevice, ...]]] = {}
        self._of_node: dict[str, set[str]] = {}  # node-local slices by node name
        self._shared: set[str] = set()  # slices that may serve any node
        self._of_pool: dict[tuple[str, str], set[str]] = {}
        #: Bumped on every slice change: the pools kept per node are stale after it.
        self._generation = 0
        #: node name -> (generation, node, its pools): a node's pools, found once per
        #: change of the slices or of the node, not once per pod.
        self._kept: dict[str, tuple[int, models.Node, tuple[Pool, ...]]] = {}
        for s in slices:
            self.upsert(s)

    def upsert(self, slice_: model.ResourceSlice) -> None:
        kept = self._slices.get(slice_.name)
        if kept is not None and kept[0] == slice_:
            return
        self.remove(slice_.name)
        self._changed()
        views = tuple(CelDevice(slice_.driver, d) for d in slice_.devices)
        self._slices[slice_.name] = (slice_, views)
        if slice_.node_name:
            self._of_node.setdefault(slice_.node_name, set()).add(slice_.name)
        else:
            self._shared.add(slice_.name)
        self._of_pool.setdefault((slice_.driver, slice_.pool), set()).add(slice_.name)

    def remove(self, name: str) -> None:
        kept = self._slices.pop(name, None)
        if kept is None:
            return
        self._changed()
        s = kept[0]
        _discard(self._of_node, s.node_name, name)
        self._shared.discard(name)
        _discard(self._of_pool, (s.driver, s.pool), name)

    def __len__(self) -> int:
        return len(self._slices)

    def _changed(self) -> None:
        self._generation += 1
        self._kept.clear()

    def pools_for(self, node: models.Node) -> list[Pool]:
        """The pools `node` can use devices from, in the allocator's order (kept until a
        slice or the node changes: a node's labels pick network-attached slices)."""
        kept = self._kept.get(node.name)
        fresh = kept is not None and kept[0] == self._generation
        if kept is not None and fresh and (kept[1] is node or kept[1].labels == node.labels):
            return list(kept[2])
        pools = self._find_pools(node)
        self._kept[node.name] = (self._generation, node, tuple(pools))
        return pools

    def _find_pools(self, node: models.Node) -> list[Pool]:
        by_pool: dict[tuple[str, str], list[tuple[model.ResourceSlice, tuple[CelDevice, ...]]]]
        by_pool = {}
        for name in (*self._of_node.get(node.name, ()), *self._shared):
            s, views = self._slices[name]
            if _slice_counts(s, node):
                by_pool.setdefault((s.driver, s.pool), []).append((s, views))
        pools = []
        for key in sorted(by_pool):
            pool = self._gather(key, by_pool[key], node)
            if pool is not None:
                pools.append(pool)
        return pools

    def _gather(
        self,
        key: tuple[str, str],
        relevant: list[tuple[model.ResourceSlice, tuple[CelDevice, ...]]],
        node: models.Node,
    ) -> Pool | None:
        driver, name = key
        generation = max(s.generation for s, _ in relevant)
        unknown = _unread(s for s, _ in relevant if s.generation == model.UNKNOWN_GENERATION)
        if unknown:  # an unreadable slice that may be of any generation: the pool is unknown
            return Pool(driver, name, invalid_reason=unknown)
        kept = sorted((p for p in relevant if p[0].generation == generation), key=_by_name)
        expected = kept[0][0].slice_count
        incomplete = False
        if len(kept) != expected:
            everywhere = [self._slices[n][0] for n in self._of_pool.get(key, ())]
            if any(s.generation > generation for s in everywhere):
                return None  # obsolete: a newer generation is being published
            incomplete = sum(s.generation == generation for s in everywhere) != expected
        unread = _unread(s for s, _ in kept)  # a slice of this generation not read
        if incomplete or unread:
            return Pool(driver, name, incomplete=incomplete, invalid_reason=unread)
        candidates: list[Candidate] = []
        seen: set[str] = set()
        for s, views in kept:
            for device, view in zip(s.devices, views, strict=True):
                if device.name in seen:
                    return Pool(driver, name, invalid_reason=f"duplicate device name {device.name}")
                seen.add(device.name)
                candidate = _candidate(s, device, view, node)
                if candidate is not None:
                    candidates.append(candidate)
        return Pool(driver, name, tuple(candidates))


def _discard(index: dict[_K, set[str]], key: _K, name: str) -> None:
    names = index.get(key)
    if names is not None:
        names.discard(name)
        if not names:
            del index[key]


def _by_name(entry: tuple[model.ResourceSlice, tuple[CelDevice, ...]]) -> str:
    return entry[0].name


def _unread(slices: Iterable[model.ResourceSlice]) -> str:
    """Why the first of `slices` the watcher could not read is unusable ("" if none)."""
    s = next((s for s in slices if s.invalid_reason), None)
    return f"slice {s.name}: {s.invalid_reason}" if s is not None else ""


def _slice_counts(s: model.ResourceSlice, node: models.Node) -> bool:
    if s.node_name or s.all_nodes or s.node_selector is not None:
        return nodes.usable_on(node, s.node_name, s.all_nodes, s.node_selector)
    if s.invalid_reason:
        # Unreadable, and where its devices are used is not known: it may serve this node.
        # (Its pool must be known, or it would make invalid a pool no device belongs to.)
        return bool(s.driver and s.pool)
    if s.per_device_node_selection:
        return any(
            nodes.usable_on(node, d.node_name, d.all_nodes, d.node_selector) for d in s.devices
        )
    return False  # a slice saying nothing of where its devices are: a future field


def _candidate(
    s: model.ResourceSlice, device: model.Device, view: CelDevice, node: models.Node
) -> Candidate | None:
    if s.per_device_node_selection:
        if not nodes.usable_on(node, device.node_name, device.all_nodes, device.node_selector):
            return None
        local, selector = bool(device.node_name), device.node_selector
    else:
        local, selector = bool(s.node_name), s.node_selector
    return Candidate(s.driver, s.pool, device, view, node_local=local, node_selector=selector)
