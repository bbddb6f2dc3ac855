"""The assigned pods as PodTopologySpread and InterPodAffinity see them, counted per node.

Owned by the node table (`splitsched.core.nodetable`), which keeps one `PodIndex` in step
with every pod it counts on a node, so those plugins never scan every pod: pods are
grouped by what a label selector can see of them (`PodGroup`), and pods' own affinity
terms are grouped by term, each with its pod count per node name (names, not rows,
because rows move when a node is removed). The plugins read `NodeTable.pod_groups`,
`NodeTable.affinity_terms` and `NodeTable.pod_counts_by_row`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from splitsched.core import models

PodGroupKey = tuple[str, frozenset[tuple[str, str]], bool, str]
"""(namespace, labels, deleting, controller owner uid): what a spread/affinity selector sees."""
AffinityTermKey = tuple[int, str, tuple[tuple[str, str], ...], models.PodAffinityTerm]
"""(weight, owner pod's namespace, owner's values of the term's (mis)matchLabelKeys, term)."""
REQUIRED_AFFINITY = "requiredAffinity"
REQUIRED_ANTI_AFFINITY = "requiredAntiAffinity"
PREFERRED_AFFINITY = "preferredAffinity"
PREFERRED_ANTI_AFFINITY = "preferredAntiAffinity"
AFFINITY_TERM_KINDS = (
    REQUIRED_AFFINITY,
    REQUIRED_ANTI_AFFINITY,
    PREFERRED_AFFINITY,
    PREFERRED_ANTI_AFFINITY,
)


@dataclass(slots=True)
class PodGroup:
    """Assigned pods that look alike to a selector, counted per node name."""

    namespace: str
    labels: Mapping[str, str]
    deleting: bool
    owner: str
    on_node: dict[str, int]


def with_label_keys(
    selector: models.LabelSelector | None,
    labels: Mapping[str, str],
    *,
    match_keys: Sequence[str] = (),
    mismatch_keys: Sequence[str] = (),
) -> models.LabelSelector | None:
    """The selector ANDed with `key In (labels[key])` per matchLabelKey and `key NotIn
    (labels[key])` per mismatchLabelKey (keys the labels lack are ignored); how the
    (mis)matchLabelKeys an AffinityTermKey records turn into a selector. Idempotent, so a
    selector the API server already merged these into keeps its meaning."""
    extra = [
        models.LabelSelectorRequirement(k, "In", (labels[k],)) for k in match_keys if k in labels
    ]
    extra += [
        models.LabelSelectorRequirement(k, "NotIn", (labels[k],))
        for k in mismatch_keys
        if k in labels
    ]
    if not extra or selector is None:
        return selector
    return models.LabelSelector(
        match_labels=selector.match_labels,
        match_expressions=(*selector.match_expressions, *extra),
    )


def owner_key(pod: models.Pod) -> str:
    """The pod's owner identity as PodGroup.owner holds it ("" when the pod has no owner)."""
    if pod.owner is None:
        return ""
    return pod.owner.uid or f"{pod.owner.kind}/{pod.owner.name}"


def _bump(counts: dict[str, int], key: str, delta: int) -> None:
    left = counts.get(key, 0) + delta
    if left > 0:
        counts[key] = left
    else:
        counts.pop(key, None)


def _affinity_terms_of(pod: models.Pod) -> list[tuple[str, int, models.PodAffinityTerm]]:
    out: list[tuple[str, int, models.PodAffinityTerm]] = []
    for kind_req, kind_pref, aff in (
        (REQUIRED_AFFINITY, PREFERRED_AFFINITY, pod.pod_affinity),
        (REQUIRED_ANTI_AFFINITY, PREFERRED_ANTI_AFFINITY, pod.pod_anti_affinity),
    ):
        if aff is None:
            continue
        out.extend((kind_req, 0, t) for t in aff.required)
        out.extend((kind_pref, w.weight, w.term) for w in aff.preferred)
    return out


class PodIndex:
    """Pod groups and affinity terms with their pod counts per node name."""

    def __init__(self) -> None:
        self.groups: dict[PodGroupKey, PodGroup] = {}
        self.affinity_terms: dict[str, dict[AffinityTermKey, dict[str, int]]] = {
            kind: {} for kind in AFFINITY_TERM_KINDS
        }

    def count(self, node_name: str, pod: models.Pod, delta: int) -> None:
        """Count the pod on the node (delta 1) or stop counting it there (delta -1)."""
        owner = owner_key(pod)
        gkey: PodGroupKey = (pod.namespace, frozenset(pod.labels.items()), pod.deleting, owner)
        group = self.groups.get(gkey)
        if group is None:
            group = PodGroup(pod.namespace, dict(pod.labels), pod.deleting, owner, {})
            self.groups[gkey] = group
        _bump(group.on_node, node_name, delta)
        if not group.on_node:
            del self.groups[gkey]
        for kind, weight, term in _affinity_terms_of(pod):
            keys = (*term.match_label_keys, *term.mismatch_label_keys)
            own = tuple((k, pod.labels[k]) for k in keys if k in pod.labels)
            tkey: AffinityTermKey = (weight, pod.namespace, own, term)
            per_node = self.affinity_terms[kind].setdefault(tkey, {})
            _bump(per_node, node_name, delta)
            if not per_node:
                del self.affinity_terms[kind][tkey]

    def counts_by_row(
        self, match: Callable[[PodGroup], bool], row_of: Mapping[str, int], n: int
    ) -> npt.NDArray[np.int64]:
        """Per row of a table of `n` rows, how many pods of the groups `match` accepts run
        there."""
        out = np.zeros(n, dtype=np.int64)
        for group in self.groups.values():
            if not match(group):
                continue
            on_node = group.on_node
            if len(on_node) == 1:
                for name, count in on_node.items():
                    out[row_of[name]] += count
                continue
            size = len(on_node)
            rows = np.fromiter((row_of[name] for name in on_node), dtype=np.int64, count=size)
            out[rows] += np.fromiter(on_node.values(), dtype=np.int64, count=size)
        return out
