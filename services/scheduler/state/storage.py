"""Watch events of storage into the scheduler's view: PersistentVolumeClaims,
PersistentVolumes, StorageClasses and CSINodes.

The service turns the watcher's `pvc`, `pv`, `storage_class` and `csi_node` events into
`apply_storage` calls (a snapshot's items count as ADDED). The objects go to the node
table's `StorageView`, where a newer version of a volume or claim also replaces what
VolumeBinding assumed of it; an addition or update requeues the pods the volume plugins
rejected (kube registers no deletions: a deleted object makes no pod fit).
"""

from __future__ import annotations

from services.scheduler.state.books import StateBooks
from splitsched.core import framework, storage

_Event = framework.ClusterEvent
#: (added, updated) cluster events per kind of storage object.
_EVENTS: dict[type, tuple[_Event, _Event]] = {
    storage.PersistentVolumeClaim: (_Event.PVC_ADD, _Event.PVC_UPDATE),
    storage.PersistentVolume: (_Event.PV_ADD, _Event.PV_UPDATE),
    storage.StorageClass: (_Event.STORAGE_CLASS_ADD, _Event.STORAGE_CLASS_UPDATE),
    storage.CSINode: (_Event.CSI_NODE_ADD, _Event.CSI_NODE_UPDATE),
}


class StorageEvents(StateBooks):
    def apply_storage(self, kind: str, obj: storage.StorageObject) -> None:
        """kind: ADDED | MODIFIED | DELETED (snapshot items count as ADDED)."""
        view = self.cache.table.storage
        if kind == "DELETED":
            view.remove(obj)
            return
        added, updated = _EVENTS[type(obj)]
        view.set(obj)
        self.queue.on_event(added if kind == "ADDED" else updated)
