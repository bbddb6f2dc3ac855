"""NodeVolumeLimits: a node attaches at most as many volumes of a CSI driver as its CSINode
allows (spec.drivers[].allocatable.count), counting the distinct volumes of the pods
already there, as kube-scheduler's nodevolumelimits (CSILimits) plugin does.

A claim counts against the driver of its bound volume's `spec.csi`, or, while unbound,
against its class's provisioner (a volume that is still to be provisioned by it); a
claim without either counts nowhere. A volume the node already attaches for another pod
is not counted twice. Nodes without a CSINode, or whose CSINode gives the driver no
count, have no limit. Unschedulable (evicting pods frees attachments).

Unlike kube, volumes are identified by driver and PersistentVolume name (the stream has no
volumeHandle), VolumeAttachments of volumes no pod on the node uses are not counted (they
are not streamed), and in-tree volumes migrated to CSI are not counted. A node whose
CSINode could not be read takes no pod that would attach volumes, with a reason saying so.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import ClassVar

import numpy as np

from splitsched.core import framework, models
from splitsched.core.nodetable import BoolArray, NodeTable
from splitsched.core.plugins import basics, volumes
from splitsched.core.storageview import StorageView

REASON = "node(s) exceed max volume count"
REASON_INVALID = "node(s) had a CSINode whose volume limits cannot be read"
_KEY = "PreFilterNodeVolumeLimits"

Attached = dict[str, str]
"""A volume's unique name ("<driver>/<volume>") -> its driver."""


class NodeVolumeLimits(basics.NoArgs):
    name: ClassVar[str] = "NodeVolumeLimits"
    resolvable_by_preemption: ClassVar[bool] = True
    volumes_only: ClassVar[bool] = True  # skipped whole for pods without volumes
    events: ClassVar[frozenset[framework.ClusterEvent]] = frozenset(
        {
            framework.ClusterEvent.CSI_NODE_ADD,
            framework.ClusterEvent.CSI_NODE_UPDATE,
            framework.ClusterEvent.ASSIGNED_POD_DELETE,
            framework.ClusterEvent.PVC_ADD,
        }
    )

    def pre_filter(
        self, state: framework.CycleState, pod: models.Pod, table: NodeTable
    ) -> framework.Status:
        if not pod.volumes or not table.storage.csi_nodes:
            return framework.Status.skip()  # nothing to attach, or no node has limits
        new: Attached = {}
        attachable(pod, table.storage, new)
        if not new:
            return framework.Status.skip()
        state.write(_KEY, new)
        return framework.Status.success()

    def _new(self, state: framework.CycleState, pod: models.Pod, view: StorageView) -> Attached:
        new = state.read(_KEY)
        if not isinstance(new, dict):
            new = {}
            attachable(pod, view, new)
        return new

    def filter(self, state: framework.CycleState, pod: models.Pod, table: NodeTable) -> BoolArray:
        mask = np.ones(table.n, dtype=np.bool_)
        view = table.storage
        new = self._new(state, pod, view)
        if not new:
            return mask
        for node_name in view.csi_nodes:
            row = table.row_of.get(node_name)
            if row is not None and not self._fits(view, node_name, new):
                mask[row] = False
        return mask

    @staticmethod
    def _fits(view: StorageView, node_name: str, new: Attached) -> bool:
        csi = view.csi_nodes[node_name]
        if csi.invalid_reason:
            return False
        limits = {d: csi.allocatable[d] for d in set(new.values()) if d in csi.allocatable}
        if not limits:
            return True
        attached: Attached = {}
        for pod in view.pods_on(node_name):
            attachable(pod, view, attached)
        in_use = Counter(attached.values())
        adding = Counter(d for unique, d in new.items() if unique not in attached)
        return all(in_use[d] + adding[d] <= limit for d, limit in limits.items() if adding[d])

    def failure_reasons(
        self, state: framework.CycleState, pod: models.Pod, table: NodeTable, rows: Sequence[int]
    ) -> list[tuple[str, ...]]:
        csi_nodes = table.storage.csi_nodes
        out: list[tuple[str, ...]] = []
        for row in rows:
            csi = csi_nodes.get(table.names[row])
            out.append((REASON_INVALID if csi is not None and csi.invalid_reason else REASON,))
        return out


def attachable(pod: models.Pod, view: StorageView, into: Attached) -> None:
    """The CSI volumes the pod's claims attach, into `into` (filterAttachableVolumes);
    claims missing from the view are skipped."""
    for volume in volumes.claim_volumes(pod):
        claim = view.claim(pod.namespace, volume.claim_name)
        if claim is None:
            continue
        bound = view.volume(claim.volume_name) if claim.volume_name else None
        if bound is not None:
            if bound.csi_driver:
                into[f"{bound.csi_driver}/{bound.name}"] = bound.csi_driver
            continue
        cls = view.classes.get(claim.storage_class_name) if claim.storage_class_name else None
        if cls is not None and cls.provisioner:
            # Still to be provisioned by the class's driver: one new volume per claim.
            into[f"{cls.provisioner}/~{claim.namespace}/{claim.name}"] = cls.provisioner
