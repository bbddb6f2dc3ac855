"""What the four volume plugins share: a pod's claims as the storage view holds them, with
kube-scheduler's words for a claim that is missing, and which nodes a volume's node
affinity or a class's allowed topologies admit.

Read by `volume_restrictions`, `node_volume_limits`, `volume_binding` and `volume_zone`
(kube-scheduler v1.36's nodevolumelimits, volumebinding, volumerestrictions and volumezone
plugins). The node masks are memoised on the node table until a node's spec changes.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import numpy as np

from splitsched.core import framework, models, storage
from splitsched.core.nodetable import BoolArray, NodeTable
from splitsched.core.plugins.node_affinity import term_mask
from splitsched.core.selector_syntax import term_parses

#: What may make a volume fit a node: new or relabelled nodes, claims, volumes and classes
#: (the events VolumeZone registers; VolumeBinding registers more).
VOLUME_EVENTS = frozenset(
    {
        framework.ClusterEvent.NODE_ADD,
        framework.ClusterEvent.NODE_LABEL,
        framework.ClusterEvent.PVC_ADD,
        framework.ClusterEvent.PVC_UPDATE,
        framework.ClusterEvent.PV_ADD,
        framework.ClusterEvent.PV_UPDATE,
        framework.ClusterEvent.STORAGE_CLASS_ADD,
    }
)


def claim_not_found(name: str) -> str:
    """The lister's NotFound error, as kube-scheduler reports a missing claim."""
    return f'persistentvolumeclaim "{name}" not found'


def volume_not_found(name: str) -> str:
    return f'persistentvolume "{name}" not found'


def class_not_found(name: str) -> str:
    return f'storageclass.storage.k8s.io "{name}" not found'


def ephemeral_claim_not_found(name: str) -> str:
    """A generic ephemeral volume's claim not created yet: normal right after the pod."""
    return f'waiting for ephemeral volume controller to create the persistentvolumeclaim "{name}"'


def unresolvable(plugin: str, reason: str) -> framework.Status:
    """A PreFilter rejection no eviction can resolve (UnschedulableAndUnresolvable)."""
    return framework.Status.unschedulable(reason, plugin=plugin, resolvable=False)


def claim_volumes(pod: models.Pod, *, ephemeral: bool = True) -> Iterator[models.PodVolume]:
    """The pod's volumes that reach a claim, each claim once (a pod may mount one claim
    twice); without `ephemeral`, only persistentVolumeClaim volumes."""
    seen: set[str] = set()
    for volume in pod.volumes:
        if (ephemeral or not volume.ephemeral) and volume.claim_name not in seen:
            seen.add(volume.claim_name)
            yield volume


def volume_node_mask(table: NodeTable, volume: storage.PersistentVolume) -> BoolArray:
    """Rows whose labels satisfy the volume's node affinity (volume.CheckNodeAffinity):
    any node when it has none, none when it is invalid; a term the label-selector parser
    refuses (a value that is no label value, say) matches no node. kube checks it against
    the node's labels alone, so matchFields are checked for validity and otherwise
    ignored."""
    if volume.invalid_reason:
        return np.zeros(table.n, dtype=np.bool_)
    terms = volume.node_affinity
    if terms is None:
        return np.ones(table.n, dtype=np.bool_)
    return table.memoised(("VolumeNodeAffinity", terms), lambda: _terms_mask(table, terms))


def _terms_mask(table: NodeTable, terms: Sequence[models.NodeSelectorTerm]) -> BoolArray:
    mask = np.zeros(table.n, dtype=np.bool_)
    for term in terms:
        if not (term.match_expressions or term.match_fields) or not term_parses(term):
            continue  # an empty term, or one the label-selector parser refuses, matches none
        if not term.match_expressions:
            return np.ones(table.n, dtype=np.bool_)
        mask |= term_mask(table, models.NodeSelectorTerm(term.match_expressions))
    return mask


def topology_mask(table: NodeTable, cls: storage.StorageClass) -> BoolArray:
    """Rows a class may provision for (v1helper.MatchTopologySelectorTerms over its
    allowedTopologies): every node when it has none; terms ORed, skipping empty ones and
    ones whose requirement has no values; requirements ANDed as `key In values`."""
    terms = cls.allowed_topologies
    if not terms:
        return np.ones(table.n, dtype=np.bool_)
    return table.memoised(("AllowedTopologies", terms), lambda: _topology(table, terms))


def _topology(
    table: NodeTable, terms: Sequence[Sequence[storage.TopologySelectorRequirement]]
) -> BoolArray:
    mask = np.zeros(table.n, dtype=np.bool_)
    for term in terms:
        if not term or any(not req.values for req in term):
            continue
        hit = np.ones(table.n, dtype=np.bool_)
        for req in term:
            hit &= table.label_in(req.key, req.values)
        mask |= hit
    return mask
