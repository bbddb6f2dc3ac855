"""The scheduler's view of Dynamic Resource Allocation: every DeviceClass, ResourceSlice
and ResourceClaim the watch shows, and the devices their allocations hold.

Kept beside the node table (`NodeTable.devices`) and fed by the scheduler's watch events,
as `splitsched.core.storageview.StorageView` is for volumes. The set of devices in use is
kept as the claims change, not rebuilt per pod: a device held by a claim's allocation is
in use, unless the claim holds it with admin access (kube's allocated-devices set).

Decisions in flight are assumed on top of the watch (kube's assume cache for claims): the
allocation a Reserve chose, and the pods it reserves the claim for, are part of the claim
every read sees, and their devices are in use, until the watch shows the binder's write
(or Unreserve drops them). So no device is given twice, and a claim shared by two pods is
allocated once.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field

from splitsched.core.devices import model
from splitsched.core.devices.pools import Inventory

DeviceObject = model.DeviceClass | model.ResourceSlice | model.ResourceClaim
ClaimKey = tuple[str, str]


@dataclass(slots=True)
class _Pending:
    """What decisions in flight add to one claim: the allocation one of them chose (None:
    the claim was allocated before), and the pods they reserve it for."""

    allocation: model.Allocation | None = None
    consumers: list[model.ConsumerRef] = field(default_factory=list)


class DeviceView:
    def __init__(self) -> None:
        self.inventory = Inventory()
        self.classes: dict[str, model.DeviceClass] = {}
        self.claims: dict[ClaimKey, model.ResourceClaim] = {}
        self._pending: dict[ClaimKey, _Pending] = {}
        self._in_use: Counter[tuple[str, str, str]] = Counter()

    # ---- the watch -----------------------------------------------------------------------
    def set(self, obj: DeviceObject) -> None:
        if isinstance(obj, model.ResourceSlice):
            self.inventory.upsert(obj)
        elif isinstance(obj, model.DeviceClass):
            self.classes[obj.name] = obj
        else:
            key = (obj.namespace, obj.name)
            with self._changing(key):
                self.claims[key] = obj
                self._confirm(key, obj)

    def remove(self, obj: DeviceObject) -> None:
        if isinstance(obj, model.ResourceSlice):
            self.inventory.remove(obj.name)
        elif isinstance(obj, model.DeviceClass):
            self.classes.pop(obj.name, None)
        else:
            key = (obj.namespace, obj.name)
            with self._changing(key):
                self.claims.pop(key, None)
                self._pending.pop(key, None)

    # ---- decisions in flight -------------------------------------------------------------
    def assume(
        self, key: ClaimKey, consumer: model.ConsumerRef, allocation: model.Allocation | None
    ) -> None:
        """A Reserve's choice: `allocation` (None: the claim is allocated already) and the
        pod it is reserved for, seen by every read until the watch shows them written."""
        with self._changing(key):
            pending = self._pending.setdefault(key, _Pending())
            if allocation is not None and pending.allocation is None:
                pending.allocation = allocation
            if all(c.uid != consumer.uid for c in pending.consumers):
                pending.consumers.append(consumer)

    def unassume(self, key: ClaimKey, consumer_uid: str) -> None:
        """Unreserve: the pod no longer reserves the claim; the allocation assumed for it
        goes once no pod in flight reserves the claim."""
        pending = self._pending.get(key)
        if pending is None:
            return
        with self._changing(key):
            pending.consumers = [c for c in pending.consumers if c.uid != consumer_uid]
            if not pending.consumers:
                del self._pending[key]

    def _confirm(self, key: ClaimKey, claim: model.ResourceClaim) -> None:
        """The watch shows a claim: what it shows written is no longer assumed."""
        pending = self._pending.get(key)
        if pending is None:
            return
        if claim.allocation is not None:
            pending.allocation = None
        shown = {c.uid for c in claim.reserved_for}
        pending.consumers = [c for c in pending.consumers if c.uid not in shown]
        if not pending.consumers:
            del self._pending[key]

    @contextlib.contextmanager
    def _changing(self, key: ClaimKey) -> Iterator[None]:
        """Keep the devices in use right while the claim (as reads see it) changes."""
        self._count(self.claim(*key), -1)
        yield
        self._count(self.claim(*key), 1)

    def rewatch(self) -> None:
        """A fresh snapshot is coming: drop what the watch showed (decisions in flight stay
        assumed, and count again once their claims are shown)."""
        self.inventory = Inventory()
        self.classes.clear()
        self.claims.clear()
        self._in_use.clear()

    # ---- reads ---------------------------------------------------------------------------
    def claim(self, namespace: str, name: str) -> model.ResourceClaim | None:
        """The claim as the watch shows it, with what decisions in flight assume on it."""
        key = (namespace, name)
        claim = self.claims.get(key)
        pending = self._pending.get(key)
        if claim is None or pending is None:
            return claim
        shown = {c.uid for c in claim.reserved_for}
        return dataclasses.replace(
            claim,
            allocation=claim.allocation or pending.allocation,
            reserved_for=claim.reserved_for
            + tuple(c for c in pending.consumers if c.uid not in shown),
        )

    def allocating_for_others(self, namespace: str, name: str, pod_uid: str) -> bool:
        """Whether the claim's allocation is only a decision in flight that is not this
        pod's (kube: "in the process of being allocated", until the write is seen)."""
        pending = self._pending.get((namespace, name))
        return (
            pending is not None
            and pending.allocation is not None
            and all(c.uid != pod_uid for c in pending.consumers)
        )

    def in_use(self) -> frozenset[tuple[str, str, str]]:
        """The devices the claims' allocations hold (not those held with admin access)."""
        return frozenset(self._in_use)

    def _count(self, claim: model.ResourceClaim | None, step: int) -> None:
        if claim is None or claim.allocation is None:
            return
        for result in claim.allocation.results:
            if not result.admin_access:
                self._in_use[result.device_id] += step
                if self._in_use[result.device_id] <= 0:
                    del self._in_use[result.device_id]
