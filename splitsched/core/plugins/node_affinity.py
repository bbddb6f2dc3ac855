"""NodeAffinity: a pod fits nodes matching its nodeSelector and its required node affinity
(terms ORed, requirements in a term ANDed), and prefers nodes matching its weighted
preferred terms, as kube-scheduler's nodeaffinity plugin does; `addedAffinity` args apply
scheduler-enforced affinity to every pod.

Built by `splitsched.core.profiles`; run by the framework at PreFilter, Filter, PreScore and
Score. Requirements are judged per distinct label value through the node table's memoised
label indexes, never per node. `node_matches_mask` is reused by PodTopologySpread
(nodeAffinityPolicy: Honor).

A term kube-scheduler's label-selector parser refuses (`splitsched.core.selector_syntax`:
a Gt/Lt value that is no integer, a value that is no label value, ...) matches no node;
a pod whose preferred terms include one fails PreScore with the parser's message, as in
kube (so it waits while more than one node fits it).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, ClassVar

import numpy as np

from splitsched.core import framework, models
from splitsched.core.nodetable import BoolArray, FloatArray, IntArray, NodeTable
from splitsched.core.selector_syntax import (
    parse_int64,
    preferred_terms_error,
    term_errors,
    term_parses,
)

REASON_POD = "node(s) didn't match Pod's node affinity/selector"
REASON_ENFORCED = "node(s) didn't match scheduler-enforced node affinity"
REASON_CONFLICT = "pod affinity terms conflict"
NAME_FIELD = "metadata.name"


def _expression_mask(table: NodeTable, req: models.NodeSelectorRequirement) -> BoolArray:
    op = req.operator
    if op in ("In", "NotIn"):
        # A lookup over the distinct values, then one gather (cheaper than np.isin).
        ids, distinct = table.label_values(req.key)
        wanted = set(req.values)
        hit = np.zeros(len(distinct) + 1, dtype=np.bool_)  # last slot: label absent (-1)
        hit[: len(distinct)] = [v in wanted for v in distinct]
        mask: BoolArray = hit[ids]
        return mask if op == "In" else ~mask
    if op == "Exists":
        return table.label_exists(req.key)
    if op == "DoesNotExist":
        return ~table.label_exists(req.key)
    # Gt / Lt: compare each distinct label value once; unparsable values never match.
    bound = parse_int64(req.values[0])
    assert bound is not None  # checked by term_parses
    ids, distinct = table.label_values(req.key)
    good = np.zeros(len(distinct) + 1, dtype=np.bool_)  # last slot: label absent (-1)
    for i, value in enumerate(distinct):
        parsed = parse_int64(value)
        if parsed is not None:
            good[i] = parsed > bound if op == "Gt" else parsed < bound
    result: BoolArray = good[ids]
    return result


def _field_mask(table: NodeTable, req: models.NodeSelectorRequirement) -> BoolArray:
    value = req.values[0]
    if req.key == NAME_FIELD:
        hit = np.zeros(table.n, dtype=np.bool_)
        row = table.row_of.get(value)
        if row is not None:
            hit[row] = True
    else:
        # Nodes expose no other field: it reads as "" (fields.Set.Get).
        hit = np.full(table.n, value == "", dtype=np.bool_)
    return hit if req.operator == "In" else ~hit


def term_mask(table: NodeTable, term: models.NodeSelectorTerm) -> BoolArray:
    """Rows matching one node selector term; an empty term, or one the parser refuses,
    matches none."""
    if (not term.match_expressions and not term.match_fields) or not term_parses(term):
        return np.zeros(table.n, dtype=np.bool_)
    mask = np.ones(table.n, dtype=np.bool_)
    for req in term.match_expressions:
        mask &= _expression_mask(table, req)
    for req in term.match_fields:
        mask &= _field_mask(table, req)
    return mask


def terms_mask(table: NodeTable, terms: Iterable[models.NodeSelectorTerm]) -> BoolArray:
    """Rows matching any of the (ORed) terms."""
    mask = np.zeros(table.n, dtype=np.bool_)
    for term in terms:
        mask |= term_mask(table, term)
    return mask


def selector_mask(table: NodeTable, selector: Mapping[str, str]) -> BoolArray:
    mask = np.ones(table.n, dtype=np.bool_)
    for key, value in selector.items():
        mask &= table.label_equals(key, value)
    return mask


def node_matches_mask(table: NodeTable, pod: models.Pod) -> BoolArray:
    """Rows satisfying the pod's nodeSelector and required node affinity
    (nodeaffinity.GetRequiredNodeAffinity(pod).Match). Kept per selector and terms while
    the nodes' labels stand (`NodeTable.recently`): many pods share them. A copy: the
    caller may change it."""
    aff = pod.node_affinity
    required = aff.required if aff is not None else None
    selector = pod.node_selector
    key = ("NodeAffinity", tuple(sorted(selector.items())), required)

    def compute() -> BoolArray:
        mask = selector_mask(table, selector)
        if required is not None:
            mask &= terms_mask(table, required)
        return mask

    return table.recently(key, compute).copy()


def preferred_score(
    table: NodeTable, terms: Sequence[models.PreferredSchedulingTerm], rows: IntArray
) -> IntArray:
    """Sum of the weights of the preferred terms each row matches."""
    total = np.zeros(rows.size, dtype=np.int64)
    for pref in terms:
        if pref.weight == 0:
            continue
        total += np.where(term_mask(table, pref.preference)[rows], pref.weight, 0)
    return total


def _parse_requirements(raw: Any, where: str) -> tuple[models.NodeSelectorRequirement, ...]:
    if raw is None:
        return ()
    if not isinstance(raw, list):
        raise ValueError(f"{where}: expected a list")
    out: list[models.NodeSelectorRequirement] = []
    for i, r in enumerate(raw):
        if not isinstance(r, Mapping) or not isinstance(r.get("key"), str):
            raise ValueError(f"{where}[{i}]: needs a string 'key'")
        values = r.get("values") or []
        if not isinstance(values, list) or not all(isinstance(v, str) for v in values):
            raise ValueError(f"{where}[{i}].values: must be a list of strings")
        req = models.NodeSelectorRequirement(
            key=r["key"], operator=str(r.get("operator", "")), values=tuple(values)
        )
        out.append(req)
    return tuple(out)


def _parse_term(raw: Any, where: str) -> models.NodeSelectorTerm:
    if not isinstance(raw, Mapping):
        raise ValueError(f"{where}: expected a node selector term")
    term = models.NodeSelectorTerm(
        match_expressions=_parse_requirements(
            raw.get("matchExpressions"), f"{where}.matchExpressions"
        ),
        match_fields=_parse_requirements(raw.get("matchFields"), f"{where}.matchFields"),
    )
    if not term_parses(term):
        raise ValueError(f"{where}: {'; '.join(term_errors(term))}")
    return term


def parse_added_affinity(raw: Any) -> models.NodeAffinity | None:
    """The `addedAffinity` arg (a nodeAffinity in API camelCase) as a models.NodeAffinity."""
    if raw is None:
        return None
    if not isinstance(raw, Mapping):
        raise ValueError("addedAffinity: must be a mapping")
    required: tuple[models.NodeSelectorTerm, ...] | None = None
    req_raw = raw.get("requiredDuringSchedulingIgnoredDuringExecution")
    if req_raw is not None:
        terms = req_raw.get("nodeSelectorTerms") if isinstance(req_raw, Mapping) else None
        if not isinstance(terms, list):
            raise ValueError("addedAffinity.requiredDuringScheduling...: needs nodeSelectorTerms")
        where = "addedAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms"
        required = tuple(_parse_term(t, f"{where}[{i}]") for i, t in enumerate(terms))
    preferred: list[models.PreferredSchedulingTerm] = []
    for i, p in enumerate(raw.get("preferredDuringSchedulingIgnoredDuringExecution") or []):
        where = f"addedAffinity.preferredDuringSchedulingIgnoredDuringExecution[{i}]"
        if not isinstance(p, Mapping) or not isinstance(p.get("weight"), int):
            raise ValueError(f"{where}: needs an integer 'weight'")
        if not 0 < p["weight"] <= 100:
            raise ValueError(f"{where}.weight: must be in 1..100")
        preferred.append(
            models.PreferredSchedulingTerm(
                weight=p["weight"], preference=_parse_term(p.get("preference"), where)
            )
        )
    return models.NodeAffinity(required=required, preferred=tuple(preferred))


class NodeAffinity:
    name: ClassVar[str] = "NodeAffinity"
    # Its raw score of a node depends only on that node and the pod (see algorithm).
    row_local: ClassVar[bool] = True
    resolvable_by_preemption: ClassVar[bool] = False
    events: ClassVar[frozenset[framework.ClusterEvent]] = frozenset(
        {framework.ClusterEvent.NODE_ADD, framework.ClusterEvent.NODE_LABEL}
    )

    def __init__(self, args: Mapping[str, Any] | None = None) -> None:
        added = parse_added_affinity((args or {}).get("addedAffinity"))
        self.added_required = added.required if added is not None else None
        self.added_preferred = added.preferred if added is not None else ()

    def _added_mask(self, table: NodeTable) -> BoolArray:
        if self.added_required is None:
            return np.ones(table.n, dtype=np.bool_)
        return terms_mask(table, self.added_required)

    def pre_filter(
        self, state: framework.CycleState, pod: models.Pod, table: NodeTable
    ) -> framework.Status:
        aff = pod.node_affinity
        required = aff.required if aff is not None else None
        if required is None and self.added_required is None and not pod.node_selector:
            return framework.Status.skip()
        if not required:
            return framework.Status.success()
        # When every term pins metadata.name, only the pinned nodes are worth filtering
        # (kube's PreFilterResult); none at all if no name satisfies all pins of any term.
        names: set[str] = set()
        for term in required:
            pinned: set[str] | None = None
            for r in term.match_fields:
                if r.key == NAME_FIELD and r.operator == "In":
                    pinned = set(r.values) if pinned is None else pinned & set(r.values)
            if pinned is None:
                return framework.Status.success()
            names |= pinned
        if not names:
            return framework.Status.unschedulable(
                REASON_CONFLICT, plugin=self.name, resolvable=False
            )
        return framework.Status(node_names=frozenset(names), plugin=self.name)

    def filter(self, state: framework.CycleState, pod: models.Pod, table: NodeTable) -> BoolArray:
        mask = node_matches_mask(table, pod)
        if self.added_required is not None:
            mask &= self._added_mask(table)
        return mask

    def failure_reasons(
        self, state: framework.CycleState, pod: models.Pod, table: NodeTable, rows: Sequence[int]
    ) -> list[tuple[str, ...]]:
        added = self._added_mask(table)
        return [(REASON_POD,) if added[row] else (REASON_ENFORCED,) for row in rows]

    def pre_score(
        self, state: framework.CycleState, pod: models.Pod, table: NodeTable, rows: IntArray
    ) -> framework.Status:
        aff = pod.node_affinity
        if (aff is None or not aff.preferred) and not self.added_preferred:
            return framework.Status.skip()
        error = preferred_terms_error(aff.preferred) if aff is not None else ""
        if error:
            return framework.Status(framework.Code.ERROR, (error,), self.name)
        return framework.Status.success()

    def score(
        self, state: framework.CycleState, pod: models.Pod, table: NodeTable, rows: IntArray
    ) -> FloatArray:
        aff = pod.node_affinity
        total = preferred_score(table, self.added_preferred, rows)
        if aff is not None:
            total += preferred_score(table, aff.preferred, rows)
        return total.astype(np.float64)

    def normalize(
        self, state: framework.CycleState, pod: models.Pod, scores: FloatArray
    ) -> FloatArray:
        return framework.default_normalize(scores)
