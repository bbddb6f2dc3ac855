"""VolumeRestrictions: a claim with the ReadWriteOncePod access mode is used by one pod at
most, as kube-scheduler's volumerestrictions plugin has it.

PreFilter looks up each claim of the pod's persistentVolumeClaim volumes (a missing one
rejects the pod: `persistentvolumeclaim "x" not found`, before any other volume plugin
speaks) and counts those ReadWriteOncePod claims that pods on nodes already use; none
means nothing to filter (SKIP). Otherwise every node is rejected (Unschedulable: evicting
the pod using the claim resolves it, so preemption may). The storage view counts the
claims used by the pods on nodes (`StorageView.claim_users`), pods nominated or assumed
included, so the check costs a lookup per claim.

kube's other restriction, the same GCE PD, AWS EBS, iSCSI or RBD disk mounted twice on a
node, concerns in-tree volume sources the watcher does not stream.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from splitsched.core import framework, models, storage
from splitsched.core.nodetable import BoolArray, NodeTable
from splitsched.core.plugins import basics, volumes

REASON = (
    "node(s) unavailable due to PersistentVolumeClaim with ReadWriteOncePod access mode "
    "already in-use by another pod"
)
_KEY = "PreFilterVolumeRestrictions"


@dataclass(frozen=True, slots=True)
class _InUse:
    """How many of the pod's ReadWriteOncePod claims other pods use."""

    conflicts: int


class VolumeRestrictions(basics.OneReason):
    name: ClassVar[str] = "VolumeRestrictions"
    reason: ClassVar[str] = REASON
    resolvable_by_preemption: ClassVar[bool] = True
    volumes_only: ClassVar[bool] = True  # skipped whole for pods without volumes
    events: ClassVar[frozenset[framework.ClusterEvent]] = frozenset(
        {
            framework.ClusterEvent.ASSIGNED_POD_DELETE,
            framework.ClusterEvent.NODE_ADD,
            framework.ClusterEvent.PVC_ADD,
        }
    )

    def pre_filter(
        self, state: framework.CycleState, pod: models.Pod, table: NodeTable
    ) -> framework.Status:
        if not pod.volumes:
            return framework.Status.skip()
        in_use = _in_use(pod, table)
        if isinstance(in_use, str):
            return volumes.unresolvable(self.name, in_use)
        if not in_use.conflicts:
            return framework.Status.skip()
        state.write(_KEY, in_use)
        return framework.Status.success()

    def filter(self, state: framework.CycleState, pod: models.Pod, table: NodeTable) -> BoolArray:
        in_use = state.read(_KEY)
        if not isinstance(in_use, _InUse):
            found = _in_use(pod, table) if pod.volumes else _InUse(0)
            in_use = found if isinstance(found, _InUse) else _InUse(0)
        return np.full(table.n, not in_use.conflicts, dtype=np.bool_)


def _in_use(pod: models.Pod, table: NodeTable) -> _InUse | str:
    """The count of the pod's ReadWriteOncePod claims in use, or why the pod cannot be
    judged (a claim is missing)."""
    view = table.storage
    conflicts = 0
    for volume in volumes.claim_volumes(pod, ephemeral=False):
        claim = view.claim(pod.namespace, volume.claim_name)
        if claim is None:
            return volumes.claim_not_found(volume.claim_name)
        if storage.READ_WRITE_ONCE_POD in claim.access_modes and view.claim_users.get(claim.key, 0):
            conflicts += 1
    return _InUse(conflicts)
