"""The assigned pods as PodTopologySpread and InterPodAffinity see them, counted per node.

Owned by the node table (`splitsched.core.nodetable`), which keeps one `PodIndex` in step
with every pod it counts on a node, so those plugins never scan every pod: pods are
grouped by what a label selector can see of them (`PodGroup`), and pods' own affinity
terms are grouped by term, each with its pod count per node name (names, not rows,
because rows move when a node is removed). The plugins read `NodeTable.pod_groups`,
`NodeTable.affinity_terms` and `NodeTable.pod_counts_by_row`. A count per row that a
caller names with a key (a spread constraint's selector) is kept as a `_Tally` and
updated pod by pod, so the next pod asking the same costs no walk over the groups.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TypeVar

import numpy as np
import numpy.typing as npt

from splitsched.core import models

K = TypeVar("K")
V = TypeVar("V")
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


#: Groups on at least this many nodes keep a dense per-row count vector.
DENSE_GROUP_NODES = 32
#: Named counts kept up to date (`PodIndex.counts_by_row`'s key), least recently used
#: dropped first: an int64 per row each (about 0.5 MiB at 65,000 nodes).
TALLIES_KEPT = 64


@dataclass(slots=True)
class PodGroup:
    """Assigned pods that look alike to a selector, counted per node name. A group on many
    nodes (a Deployment's pods over thousands of nodes) also keeps its counts as one
    vector per row, for one row layout, updated in place as its pods come and go, so a
    selector that matches it costs one vector add."""

    namespace: str
    labels: Mapping[str, str]
    deleting: bool
    owner: str
    on_node: dict[str, int]
    dense: tuple[int, npt.NDArray[np.int64]] | None = field(default=None, repr=False, compare=False)

    def add_to(self, out: npt.NDArray[np.int64], row_of: Mapping[str, int], layout: int) -> None:
        """Add this group's pod count per row (row layout numbered `layout`) into `out`."""
        on_node = self.on_node
        if len(on_node) < DENSE_GROUP_NODES:
            for name, count in on_node.items():
                out[row_of[name]] += count
            return
        cached = self.dense
        if cached is None or cached[0] != layout or len(cached[1]) != len(out):
            vector = np.zeros(len(out), dtype=np.int64)
            for name, count in on_node.items():
                vector[row_of[name]] = count
            cached = self.dense = (layout, vector)
        out += cached[1]

    def moved(self, row: int | None, delta: int) -> None:
        """Keep the dense vector in step: `delta` pods on `row` (None: unknown, rebuild)."""
        cached = self.dense
        if cached is None:
            return
        if row is None or row >= len(cached[1]):
            self.dense = None
        else:
            cached[1][row] += delta


@dataclass(slots=True)
class _Tally:
    """The pods of the groups `match` accepts, counted per row of layout `layout`, kept in
    step with every pod counted since (`PodIndex.count`)."""

    match: Callable[[PodGroup], bool]
    required: LabelPair | None
    layout: int
    counts: npt.NDArray[np.int64]


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


LabelPair = tuple[str, str]


def required_pair(selector: models.LabelSelector | None) -> LabelPair | None:
    """A label every pod the selector matches must carry (its first matchLabels entry, or
    an `In` with one value), so a lookup can skip every group without it; None when the
    selector names no such label (it is then checked against every group)."""
    if selector is None:
        return None
    if selector.match_labels:
        return selector.match_labels[0]
    for req in selector.match_expressions:
        if req.operator == "In" and len(req.values) == 1:
            return (req.key, req.values[0])
    return None


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


def _discard(index: dict[K, set[V]], key: K, value: V) -> None:
    members = index.get(key)
    if members is not None:
        members.discard(value)
        if not members:
            del index[key]


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
        # Lookups by label, so a selector with a required label visits only the groups
        # (and an incoming pod only the existing anti-affinity terms) that can match.
        self._groups_by_pair: dict[LabelPair, set[PodGroupKey]] = {}
        self._anti_by_pair: dict[LabelPair | None, set[AffinityTermKey]] = {}
        self._tallies: OrderedDict[Hashable, _Tally] = OrderedDict()
        self._tallies_by_pair: dict[LabelPair | None, set[Hashable]] = {}

    def count(self, node_name: str, pod: models.Pod, delta: int, *, row: int | None = None) -> None:
        """Count the pod on the node (delta 1) or stop counting it there (delta -1); `row`
        is the node's row in the current layout, when known."""
        owner = owner_key(pod)
        gkey: PodGroupKey = (pod.namespace, frozenset(pod.labels.items()), pod.deleting, owner)
        group = self.groups.get(gkey)
        if group is None:
            group = PodGroup(pod.namespace, dict(pod.labels), pod.deleting, owner, {})
            self.groups[gkey] = group
            for pair in gkey[1]:
                self._groups_by_pair.setdefault(pair, set()).add(gkey)
        _bump(group.on_node, node_name, delta)
        group.moved(row, delta)
        if self._tallies:
            self._keep_tallies(group, gkey[1], row, delta)
        if not group.on_node:
            del self.groups[gkey]
            for pair in gkey[1]:
                _discard(self._groups_by_pair, pair, gkey)
        for kind, weight, term in _affinity_terms_of(pod):
            self._count_term(kind, weight, term, pod, node_name, delta)

    def _count_term(
        self,
        kind: str,
        weight: int,
        term: models.PodAffinityTerm,
        pod: models.Pod,
        node_name: str,
        delta: int,
    ) -> None:
        keys = (*term.match_label_keys, *term.mismatch_label_keys)
        own = tuple((k, pod.labels[k]) for k in keys if k in pod.labels)
        tkey: AffinityTermKey = (weight, pod.namespace, own, term)
        terms = self.affinity_terms[kind]
        per_node = terms.get(tkey)
        if per_node is None:
            per_node = terms[tkey] = {}
            if kind == REQUIRED_ANTI_AFFINITY:
                anti_pair = required_pair(term.label_selector)
                self._anti_by_pair.setdefault(anti_pair, set()).add(tkey)
        _bump(per_node, node_name, delta)
        if not per_node:
            del terms[tkey]
            if kind == REQUIRED_ANTI_AFFINITY:
                _discard(self._anti_by_pair, required_pair(term.label_selector), tkey)

    def anti_affinity_candidates(self, labels: Mapping[str, str]) -> list[AffinityTermKey]:
        """The existing required anti-affinity terms a pod with these labels may match
        (every one that can; some may still not, by namespace or other requirements)."""
        by_pair = self._anti_by_pair
        out = list(by_pair.get(None, ()))
        for pair in labels.items():
            out.extend(by_pair.get(pair, ()))
        return out

    def _keep_tallies(
        self, group: PodGroup, pairs: frozenset[LabelPair], row: int | None, delta: int
    ) -> None:
        """Count `delta` pods of `group` on `row` in every tally that accepts the group;
        a tally told of a pod on an unknown row (a node removed) is dropped."""
        lost: list[Hashable] = []
        for pair in (None, *pairs):
            for key in self._tallies_by_pair.get(pair, ()):
                tally = self._tallies[key]
                if not tally.match(group):
                    continue
                if row is None or row >= len(tally.counts):
                    lost.append(key)
                else:
                    tally.counts[row] += delta
        for key in lost:
            self._drop_tally(key)

    def _drop_tally(self, key: Hashable) -> None:
        tally = self._tallies.pop(key)
        _discard(self._tallies_by_pair, tally.required, key)

    def counts_by_row(
        self,
        match: Callable[[PodGroup], bool],
        row_of: Mapping[str, int],
        n: int,
        *,
        layout: int,
        required: LabelPair | None = None,
        key: Hashable = None,
    ) -> npt.NDArray[np.int64]:
        """Per row of a table of `n` rows, how many pods of the groups `match` accepts run
        there; `layout` numbers the row layout `row_of` describes (it changes whenever a
        row may have moved), and `required` (see `required_pair`) is a label every
        accepted group carries. A `key` names what `match` accepts, for good (it may read
        nothing but the group): the counts are then kept under it, updated as pods come
        and go, and returned read-only."""
        if key is None:
            return self._count_groups(match, n, row_of, layout, required)
        tally = self._tallies.get(key)
        if tally is None or tally.layout != layout or len(tally.counts) != n:
            if tally is not None:
                self._drop_tally(key)
            counts = self._count_groups(match, n, row_of, layout, required)
            tally = self._tallies[key] = _Tally(match, required, layout, counts)
            self._tallies_by_pair.setdefault(required, set()).add(key)
            if len(self._tallies) > TALLIES_KEPT:
                self._drop_tally(next(iter(self._tallies)))
        self._tallies.move_to_end(key)
        view = tally.counts.view()
        view.flags.writeable = False
        return view

    def _count_groups(
        self,
        match: Callable[[PodGroup], bool],
        n: int,
        row_of: Mapping[str, int],
        layout: int,
        required: LabelPair | None,
    ) -> npt.NDArray[np.int64]:
        out = np.zeros(n, dtype=np.int64)
        groups: Iterable[PodGroup]
        if required is None:
            groups = self.groups.values()
        else:
            groups = [self.groups[k] for k in self._groups_by_pair.get(required, ())]
        for group in groups:
            if match(group):
                group.add_to(out, row_of, layout)
        return out
