"""The scheduler's view of storage: claims, volumes, classes and CSINodes as the watch shows
them, the bindings the scheduler has assumed, and which pods use which claims.

Owned by the node table (`splitsched.core.nodetable.NodeTable.storage`) and fed by the
scheduler's state from the watch (`set`/`remove`). The volume plugins read it;
VolumeBinding's Reserve assumes and its Unreserve restores. A fresh snapshot from the
watcher builds a fresh cache around the same view (`rewatch`, then `prune` once synced):
the decisions still in flight keep what they assumed.

Assumptions follow kube-scheduler's passive assume cache (volumebinding's
passive_assume_cache.go): an assumed volume (claimRef set to the claim that will take it)
or claim (selected-node set) stands in for the version of the object it was made from,
and a newer version from the watch replaces it (the binder's write, or someone else's).
Restoring drops it. So two pods never take one volume while the first one's binding is on
its way.

Pods are counted here only if they have volumes (`count_pod`, called by the node table):
which claims are in use (VolumeRestrictions' ReadWriteOncePod) and which pods with volumes
run on each node (NodeVolumeLimits). A pod without volumes costs one attribute test.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from typing import Protocol, TypeVar

from splitsched.core import models, storage

ClaimKey = tuple[str, str]


class _Versioned(Protocol):
    @property
    def resource_version(self) -> str: ...


_K = TypeVar("_K")
_V = TypeVar("_V", bound=_Versioned)


class StorageView:
    def __init__(self) -> None:
        self.claims: dict[ClaimKey, storage.PersistentVolumeClaim] = {}
        self.volumes: dict[str, storage.PersistentVolume] = {}
        self.classes: dict[str, storage.StorageClass] = {}
        self.csi_nodes: dict[str, storage.CSINode] = {}
        self._assumed_volumes: dict[str, storage.PersistentVolume] = {}
        self._assumed_claims: dict[ClaimKey, storage.PersistentVolumeClaim] = {}
        #: Pods counted on nodes using each claim through a persistentVolumeClaim volume.
        self.claim_users: dict[ClaimKey, int] = {}
        #: Per node name, the pods counted there that have volumes.
        self.pods_with_volumes: dict[str, dict[str, models.Pod]] = {}
        #: Bumps whenever a volume changes (memos of volume node-affinity masks key on it).
        self.volume_version = 0

    # ---- the watch ----------------------------------------------------------------------
    def set(self, obj: storage.StorageObject) -> None:
        """An object added or updated; a newer version replaces an assumption."""
        if isinstance(obj, storage.PersistentVolumeClaim):
            self.claims[obj.key] = obj
            _expire(self._assumed_claims, obj.key, obj.resource_version)
        elif isinstance(obj, storage.PersistentVolume):
            self.volumes[obj.name] = obj
            _expire(self._assumed_volumes, obj.name, obj.resource_version)
            self.volume_version += 1
        elif isinstance(obj, storage.StorageClass):
            self.classes[obj.name] = obj
        else:
            self.csi_nodes[obj.name] = obj

    def remove(self, obj: storage.StorageObject) -> None:
        if isinstance(obj, storage.PersistentVolumeClaim):
            self.claims.pop(obj.key, None)
            self._assumed_claims.pop(obj.key, None)
        elif isinstance(obj, storage.PersistentVolume):
            self.volumes.pop(obj.name, None)
            self._assumed_volumes.pop(obj.name, None)
            self.volume_version += 1
        elif isinstance(obj, storage.StorageClass):
            self.classes.pop(obj.name, None)
        else:
            self.csi_nodes.pop(obj.name, None)

    # ---- a fresh snapshot ------------------------------------------------------------------
    def rewatch(self) -> None:
        """A fresh snapshot is coming (for a fresh node table, which counts its pods again):
        drop what the watch showed and the pods counted, but keep the assumptions. The
        decisions that made them are still in flight; the snapshot's objects replace each
        assumption as the watch does (a newer version), or keep it (the same one)."""
        self.claims.clear()
        self.volumes.clear()
        self.classes.clear()
        self.csi_nodes.clear()
        self.claim_users.clear()
        self.pods_with_volumes.clear()
        self.volume_version += 1

    def prune(self) -> None:
        """The snapshot is complete: an assumed object it did not bring was deleted
        meanwhile, and its assumption goes as `remove` would have taken it."""
        for name in [n for n in self._assumed_volumes if n not in self.volumes]:
            self.restore_volume(name)
        for key in [k for k in self._assumed_claims if k not in self.claims]:
            self.restore_claim(key)

    # ---- reads, assumptions included -------------------------------------------------------
    def claim(self, namespace: str, name: str) -> storage.PersistentVolumeClaim | None:
        key = (namespace, name)
        return self._assumed_claims.get(key) or self.claims.get(key)

    def volume(self, name: str) -> storage.PersistentVolume | None:
        return self._assumed_volumes.get(name) or self.volumes.get(name)

    def volumes_of_class(self, class_name: str) -> list[storage.PersistentVolume]:
        """The volumes of a class, by name (kube lists them in no particular order; a name
        order makes ties between equal sizes deterministic)."""
        out = [v for v in self.volumes.values() if v.storage_class_name == class_name]
        out.sort(key=lambda v: v.name)
        return [self._assumed_volumes.get(v.name, v) for v in out]

    def is_assumed(self, volume_name: str) -> bool:
        return volume_name in self._assumed_volumes

    # ---- VolumeBinding's Reserve and Unreserve ----------------------------------------------
    def assume_volume(
        self, volume: storage.PersistentVolume, claim: storage.PersistentVolumeClaim
    ) -> bool:
        """Take `volume` for `claim` until the watch shows a newer version of it (or
        `restore_volume`). False, changing nothing, when the view holds another version
        than the one the decision was made from."""
        current = self.volumes.get(volume.name)
        if current is None or current.resource_version != volume.resource_version:
            return False
        ref = storage.ClaimRef(claim.namespace, claim.name, claim.uid)
        self._assumed_volumes[volume.name] = dataclasses.replace(volume, claim_ref=ref)
        self.volume_version += 1
        return True

    def restore_volume(self, name: str) -> None:
        if self._assumed_volumes.pop(name, None) is not None:
            self.volume_version += 1

    def assume_claim_node(self, claim: storage.PersistentVolumeClaim, node: str) -> bool:
        """Mark the claim to be provisioned on `node` (as the binder will), until the watch
        shows a newer version of it or `restore_claim`."""
        current = self.claims.get(claim.key)
        if current is None or current.resource_version != claim.resource_version:
            return False
        self._assumed_claims[claim.key] = dataclasses.replace(claim, selected_node=node)
        return True

    def restore_claim(self, key: ClaimKey) -> None:
        self._assumed_claims.pop(key, None)

    def assumptions(self) -> int:
        return len(self._assumed_volumes) + len(self._assumed_claims)

    # ---- pods with volumes (the node table calls this) ---------------------------------------
    def count_pod(self, node_name: str, pod: models.Pod, delta: int) -> None:
        """Count (delta 1) or stop counting (-1) a pod with volumes on a node."""
        for volume in pod.volumes:
            if not volume.ephemeral:
                key = (pod.namespace, volume.claim_name)
                left = self.claim_users.get(key, 0) + delta
                if left > 0:
                    self.claim_users[key] = left
                else:
                    self.claim_users.pop(key, None)
        on_node = self.pods_with_volumes.setdefault(node_name, {})
        if delta > 0:
            on_node[pod.uid] = pod
        else:
            on_node.pop(pod.uid, None)
            if not on_node:
                del self.pods_with_volumes[node_name]

    def pods_on(self, node_name: str) -> Iterator[models.Pod]:
        return iter(self.pods_with_volumes.get(node_name, {}).values())


def _expire(assumed: dict[_K, _V], key: _K, version: str) -> None:
    """Drop an assumption once the watch brings another version than it was made from."""
    held = assumed.get(key)
    if held is not None and held.resource_version != version:
        del assumed[key]
