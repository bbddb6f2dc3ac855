"""The scheduler's view of Dynamic Resource Allocation: every DeviceClass, ResourceSlice
and ResourceClaim the watch shows, and the devices their allocations hold.

Kept beside the node table (`NodeTable.devices`) and fed by the scheduler's watch events,
as `splitsched.core.storageview.StorageView` is for volumes. The set of devices in use is
kept as the claims change, not rebuilt per pod: a device held by a claim's allocation is
in use, unless the claim holds it with admin access (kube's allocated-devices set).
"""

from __future__ import annotations

from collections import Counter

from splitsched.core.devices import model
from splitsched.core.devices.pools import Inventory

DeviceObject = model.DeviceClass | model.ResourceSlice | model.ResourceClaim
ClaimKey = tuple[str, str]


class DeviceView:
    def __init__(self) -> None:
        self.inventory = Inventory()
        self.classes: dict[str, model.DeviceClass] = {}
        self.claims: dict[ClaimKey, model.ResourceClaim] = {}
        self._in_use: Counter[tuple[str, str, str]] = Counter()

    # ---- the watch -----------------------------------------------------------------------
    def set(self, obj: DeviceObject) -> None:
        if isinstance(obj, model.ResourceSlice):
            self.inventory.upsert(obj)
        elif isinstance(obj, model.DeviceClass):
            self.classes[obj.name] = obj
        else:
            key = (obj.namespace, obj.name)
            self._count(self.claims.get(key), -1)
            self.claims[key] = obj
            self._count(obj, 1)

    def remove(self, obj: DeviceObject) -> None:
        if isinstance(obj, model.ResourceSlice):
            self.inventory.remove(obj.name)
        elif isinstance(obj, model.DeviceClass):
            self.classes.pop(obj.name, None)
        else:
            self._count(self.claims.pop((obj.namespace, obj.name), None), -1)

    def rewatch(self) -> None:
        """A fresh snapshot is coming: drop what the watch showed."""
        self.inventory = Inventory()
        self.classes.clear()
        self.claims.clear()
        self._in_use.clear()

    # ---- reads ---------------------------------------------------------------------------
    def claim(self, namespace: str, name: str) -> model.ResourceClaim | None:
        return self.claims.get((namespace, name))

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
