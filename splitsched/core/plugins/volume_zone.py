"""VolumeZone: a pod using a bound volume with zone or region labels runs only on nodes in
those zones or regions, as kube-scheduler's volumezone plugin decides.

PreFilter reads the volume of each persistentVolumeClaim volume (ephemeral volumes are not
looked at, as in kube): a claim not yet bound is skipped when its class waits for the first
consumer (VolumeBinding decides those), and otherwise rejects the pod in kube's words
("PersistentVolume had no name", ...), as does a missing claim, class or volume. The
volume's `topology.kubernetes.io/zone` and `/region` labels and their deprecated
`failure-domain.beta.kubernetes.io` forms (a value may list several zones joined by "__")
are the topologies; with none, SKIP. Filter: a node that carries none of the four labels
fits; otherwise for every topology the node's value (under the key, or its GA form) must
be one of the volume's. UnschedulableAndUnresolvable.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from splitsched.core import framework, models, storage
from splitsched.core.nodetable import BoolArray, NodeTable
from splitsched.core.plugins import basics, volumes

REASON = "node(s) had no available volume zone"
ZONE = "topology.kubernetes.io/zone"
REGION = "topology.kubernetes.io/region"
BETA_ZONE = "failure-domain.beta.kubernetes.io/zone"
BETA_REGION = "failure-domain.beta.kubernetes.io/region"
TOPOLOGY_LABELS = (BETA_ZONE, BETA_REGION, ZONE, REGION)
_GA = {BETA_ZONE: ZONE, BETA_REGION: REGION}
_KEY = "PreFilterVolumeZone"


@dataclass(frozen=True, slots=True)
class _Topologies:
    """(label key, allowed values) of every bound volume of the pod."""

    items: tuple[tuple[str, frozenset[str]], ...]


class VolumeZone(basics.OneReason):
    name: ClassVar[str] = "VolumeZone"
    reason: ClassVar[str] = REASON
    resolvable_by_preemption: ClassVar[bool] = False
    volumes_only: ClassVar[bool] = True  # skipped whole for pods without volumes
    events: ClassVar[frozenset[framework.ClusterEvent]] = volumes.VOLUME_EVENTS

    def pre_filter(
        self, state: framework.CycleState, pod: models.Pod, table: NodeTable
    ) -> framework.Status:
        if not pod.volumes:
            return framework.Status.skip()
        found = _topologies(pod, table)
        if isinstance(found, str):
            return volumes.unresolvable(self.name, found)
        if not found.items:
            return framework.Status.skip()
        state.write(_KEY, found)
        return framework.Status.success()

    def filter(self, state: framework.CycleState, pod: models.Pod, table: NodeTable) -> BoolArray:
        found = state.read(_KEY)
        if not isinstance(found, _Topologies):
            got = _topologies(pod, table) if pod.volumes else _Topologies(())
            found = got if isinstance(got, _Topologies) else _Topologies(())
        if not found.items:
            return np.ones(table.n, dtype=np.bool_)
        constrained = np.zeros(table.n, dtype=np.bool_)
        for key in TOPOLOGY_LABELS:
            constrained |= table.label_exists(key)
        fits = np.ones(table.n, dtype=np.bool_)
        for key, values in found.items:
            ids, distinct = table.label_values(key)
            ga_ids, ga_distinct = table.label_values(_GA.get(key, key))
            here = _in(ids, distinct, values)
            # The key itself first; where the node lacks it, its GA form.
            fits &= np.where(ids >= 0, here, _in(ga_ids, ga_distinct, values))
        result: BoolArray = fits | ~constrained
        return result


def _in(ids: np.ndarray, distinct: Sequence[str], values: frozenset[str]) -> BoolArray:
    """Rows whose label value (an index into `distinct`, -1 when absent) is in `values`."""
    hit = np.zeros(len(distinct) + 1, dtype=np.bool_)  # the last slot: label absent
    hit[: len(distinct)] = [v in values for v in distinct]
    result: BoolArray = hit[ids]
    return result


def _zones(value: str) -> frozenset[str] | None:
    """volumehelpers.LabelZonesToSet: "a__b" -> {a, b}; None when a zone is empty."""
    zones = [z.strip() for z in value.split("__")]
    return None if any(not z for z in zones) else frozenset(zones)


def _topologies(pod: models.Pod, table: NodeTable) -> _Topologies | str:
    """The topologies of the pod's bound volumes, or why the pod cannot be judged."""
    view = table.storage
    items: list[tuple[str, frozenset[str]]] = []
    for volume in volumes.claim_volumes(pod, ephemeral=False):
        if not volume.claim_name:
            return "PersistentVolumeClaim had no name"
        claim = view.claim(pod.namespace, volume.claim_name)
        if claim is None:
            return volumes.claim_not_found(volume.claim_name)
        if not claim.volume_name:
            problem = _unbound(claim, view.classes)
            if problem:
                return problem
            continue
        bound = view.volume(claim.volume_name)
        if bound is None:
            return volumes.volume_not_found(claim.volume_name)
        for key in TOPOLOGY_LABELS:
            value = bound.labels.get(key)
            zones = _zones(value) if value is not None else None
            if zones is not None:
                items.append((key, zones))
    return _Topologies(tuple(items))


def _unbound(claim: storage.PersistentVolumeClaim, classes: dict[str, storage.StorageClass]) -> str:
    """Why an unbound claim stops VolumeZone ("" when its class waits for the consumer)."""
    if not claim.storage_class_name:
        return "PersistentVolumeClaim had no pv name and storageClass name"
    cls = classes.get(claim.storage_class_name)
    if cls is None:
        return volumes.class_not_found(claim.storage_class_name)
    return "" if cls.waits_for_first_consumer else "PersistentVolume had no name"
