"""InterPodAffinity: podAffinity / podAntiAffinity between the pod being scheduled and the pods
already assigned (kube-scheduler's interpodaffinity plugin, v1.36 semantics).

Built by `splitsched.core.profiles` from the `InterPodAffinity` pluginConfig args
(`hardPodAffinityWeight`, `ignorePreferredTermsOfExistingPods`) and run by the scheduling
algorithm at PreFilter/Filter and PreScore/Score/NormalizeScore. Existing pods' terms are read
from `NodeTable.affinity_terms` (terms grouped by identity with a pod count per node) and
existing pods are counted through `NodeTable.pod_groups`, so a pod without affinity in a
cluster without required anti-affinity costs one dict check.

Namespaces, as kube-scheduler picks them: a term looks in its `namespaces` and in the
namespaces its `namespaceSelector` matches by their labels (`NodeTable.namespace_labels`,
streamed by the watcher); an empty selector `{}` matches every namespace, and with neither
(a nil selector, no list) the term looks in its owner's namespace. The incoming pod's
terms only see namespaces that exist (kube lists them); an existing pod's term is matched
against the incoming pod's namespace labels, an empty set when that namespace is unknown.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, cast

import numpy as np

from splitsched.core import framework, models
from splitsched.core.nodetable import BoolArray, FloatArray, IntArray, NodeTable
from splitsched.core.plugins import masks
from splitsched.core.plugins.domains import domain_sums, rows_in
from splitsched.core.podindex import (
    PREFERRED_AFFINITY,
    PREFERRED_ANTI_AFFINITY,
    REQUIRED_AFFINITY,
    REQUIRED_ANTI_AFFINITY,
    AffinityTermKey,
    LabelPair,
    PodGroup,
    required_pair,
    with_label_keys,
)

REASON_AFFINITY = "node(s) didn't match pod affinity rules"
REASON_ANTI_AFFINITY = "node(s) didn't match pod anti-affinity rules"
REASON_EXISTING_ANTI_AFFINITY = "node(s) didn't satisfy existing pods anti-affinity rules"

_PREFILTER_KEY = "PreFilterInterPodAffinity"
_PRESCORE_KEY = "PreScoreInterPodAffinity"
_TERM_CACHE_LIMIT = 10_000


@dataclass(frozen=True, slots=True)
class Term:
    """A pod affinity term resolved against the pod that owns it: the namespaces it looks
    in and its selector with (mis)matchLabelKeys merged."""

    selector: models.LabelSelector | None  # None matches nothing
    namespaces: frozenset[str]
    all_namespaces: bool
    namespace_selector: models.LabelSelector | None  # a non-empty selector, else None
    topology_key: str

    def matches(
        self,
        namespace: str,
        labels: Mapping[str, str],
        namespace_labels: Mapping[str, str] | None,
    ) -> bool:
        """Whether a pod in `namespace` (whose labels are `namespace_labels`, None when the
        namespace is unknown: no selector matches it) with `labels` matches."""
        if self.selector is None:
            return False
        if not (
            self.all_namespaces
            or namespace in self.namespaces
            or (
                self.namespace_selector is not None
                and namespace_labels is not None
                and self.namespace_selector.matches(namespace_labels)
            )
        ):
            return False
        return self.selector.matches(labels)


def resolve_term(
    term: models.PodAffinityTerm, *, namespace: str, labels: Mapping[str, str]
) -> Term:
    """kube-scheduler's AffinityTerm: with neither namespaces nor a namespaceSelector the
    term looks in its owner's namespace; an empty namespaceSelector means all namespaces."""
    ns_sel = term.namespace_selector
    all_ns = ns_sel is not None and not ns_sel.match_labels and not ns_sel.match_expressions
    if not term.namespaces and ns_sel is None:
        namespaces = frozenset({namespace})
    else:
        namespaces = frozenset(term.namespaces)
    return Term(
        selector=with_label_keys(
            term.label_selector,
            labels,
            match_keys=term.match_label_keys,
            mismatch_keys=term.mismatch_label_keys,
        ),
        namespaces=namespaces,
        all_namespaces=all_ns,
        namespace_selector=None if all_ns else ns_sel,
        topology_key=term.topology_key,
    )


def _any_required_pair(terms: Sequence[Term]) -> LabelPair | None:
    """A label every pod matching all `terms` carries (see `podindex.required_pair`)."""
    for t in terms:
        pair = required_pair(t.selector)
        if pair is not None:
            return pair
    return None


@dataclass(frozen=True, slots=True)
class _FilterState:
    affinity_ok: BoolArray
    anti_affinity_ok: BoolArray
    existing_ok: BoolArray
    mask: BoolArray


@dataclass(frozen=True, slots=True)
class _ScoreState:
    by_key: dict[str, FloatArray]  # topology key -> score per distinct label value


class _DomainScores:
    """PreScore's tally: per topology key, a score per distinct label value (domain).
    A term credits its weight per matching pod to the domain of the pod's node, for pods
    on nodes that have the topology key (kube-scheduler creates a score entry only for
    those); a term that credits nothing creates no entry."""

    def __init__(self, table: NodeTable) -> None:
        self._table = table
        self.by_key: dict[str, FloatArray] = {}

    def add_per_row(self, topology_key: str, per_row: IntArray, weight: int) -> None:
        """Matching pods counted per table row."""
        ids, values = self._table.label_values(topology_key)
        has = ids >= 0
        if not per_row[has].any():
            return
        # float64, as bincount with weights always returns (numpy's stubs say intp)
        sums = cast(FloatArray, np.bincount(ids[has], weights=per_row[has], minlength=len(values)))
        self._credit(topology_key, sums, weight)

    def add_on_nodes(self, topology_key: str, on_node: Mapping[str, int], weight: int) -> None:
        """Matching pods counted per node name."""
        ids, values = self._table.label_values(topology_key)
        row_of = self._table.row_of
        sums = np.zeros(len(values), dtype=np.float64)
        hit = False
        for node_name, count in on_node.items():
            row = row_of.get(node_name)
            if row is not None and ids[row] >= 0:
                sums[ids[row]] += count
                hit = True
        if hit:
            self._credit(topology_key, sums, weight)

    def _credit(self, topology_key: str, sums: FloatArray, weight: int) -> None:
        acc = self.by_key.get(topology_key)
        if acc is None:
            acc = self.by_key[topology_key] = np.zeros(len(sums), dtype=np.float64)
        acc += weight * sums


class InterPodAffinity(masks.MaskFilter[_FilterState]):
    name: ClassVar[str] = "InterPodAffinity"
    prefilter_key: ClassVar[str] = _PREFILTER_KEY
    state_kind = _FilterState
    # Anti-affinity failures only: a required affinity no pod satisfies is
    # UnschedulableAndUnresolvable in kube-scheduler (`unresolvable`).
    resolvable_by_preemption: ClassVar[bool] = True
    events: ClassVar[frozenset[framework.ClusterEvent]] = frozenset(
        {
            framework.ClusterEvent.NODE_ADD,
            framework.ClusterEvent.NODE_LABEL,
            framework.ClusterEvent.ASSIGNED_POD_ADD,
            framework.ClusterEvent.ASSIGNED_POD_UPDATE,
            framework.ClusterEvent.ASSIGNED_POD_DELETE,
            # Not among kube-scheduler's events (its pod waits for another pod or node
            # event, or the 5-minute flush); a relabelled namespace may free a pod at once.
            framework.ClusterEvent.NAMESPACE_CHANGE,
        }
    )

    def __init__(self, args: Mapping[str, Any] | None = None) -> None:
        args = args or {}
        weight = args.get("hardPodAffinityWeight", 1)
        if not isinstance(weight, int) or isinstance(weight, bool) or not 0 <= weight <= 100:
            raise ValueError("hardPodAffinityWeight: must be an integer in [0, 100]")
        ignore = args.get("ignorePreferredTermsOfExistingPods", False)
        if not isinstance(ignore, bool):
            raise ValueError("ignorePreferredTermsOfExistingPods: must be a boolean")
        self.hard_pod_affinity_weight = weight
        self.ignore_preferred_terms_of_existing_pods = ignore
        self._terms: dict[AffinityTermKey, Term] = {}

    # ---- terms ---------------------------------------------------------------------------
    def _existing_term(self, key: AffinityTermKey) -> Term:
        term = self._terms.get(key)
        if term is None:
            if len(self._terms) >= _TERM_CACHE_LIMIT:
                self._terms.clear()
            _, namespace, own_labels, raw = key
            term = resolve_term(raw, namespace=namespace, labels=dict(own_labels))
            self._terms[key] = term
        return term

    @staticmethod
    def _group_matcher(terms: Sequence[Term], table: NodeTable) -> Callable[[PodGroup], bool]:
        """The incoming pod's terms against existing pods: only known namespaces match a
        namespaceSelector (kube-scheduler lists the namespaces it selects)."""
        ns_labels = table.namespace_labels

        def match(g: PodGroup) -> bool:
            return all(t.matches(g.namespace, g.labels, ns_labels.get(g.namespace)) for t in terms)

        return match

    @staticmethod
    def _pod_matches(term: Term, pod: models.Pod, table: NodeTable) -> bool:
        """An existing pod's term against the incoming pod: its namespace's labels, an empty
        set when the namespace is unknown (kube's GetNamespaceLabelsSnapshot)."""
        return term.matches(
            pod.namespace, pod.labels, table.namespace_labels.get(pod.namespace, {})
        )

    # ---- PreFilter / Filter ----------------------------------------------------------------
    def _filter_state(self, pod: models.Pod, table: NodeTable) -> _FilterState | None:
        required = pod.pod_affinity.required if pod.pod_affinity else ()
        required_anti = pod.pod_anti_affinity.required if pod.pod_anti_affinity else ()
        existing_anti = table.affinity_terms[REQUIRED_ANTI_AFFINITY]
        if not required and not required_anti and not existing_anti:
            return None
        n = table.n
        affinity_ok = np.ones(n, dtype=np.bool_)
        anti_ok = np.ones(n, dtype=np.bool_)

        if required:
            terms = [resolve_term(t, namespace=pod.namespace, labels=pod.labels) for t in required]
            # An existing pod counts only when it matches every required term.
            counts = table.pod_counts_by_row(
                self._group_matcher(terms, table), required=_any_required_pair(terms)
            )
            pods_exist = np.ones(n, dtype=np.bool_)
            total = 0
            for t in terms:
                ids, values = table.label_values(t.topology_key)
                has = ids >= 0
                per_domain = np.bincount(ids[has], weights=counts[has], minlength=len(values) + 1)
                total += int(per_domain.sum())
                affinity_ok &= has  # every topology key must be on the node
                pods_exist &= has & (per_domain[np.maximum(ids, 0)] > 0)
            # The first pod of a group with affinity to itself: nothing matches anywhere yet
            # (its own terms judge it as an existing pod would be judged).
            own_ns = table.namespace_labels.get(pod.namespace)
            first_pod = total == 0 and all(
                t.matches(pod.namespace, pod.labels, own_ns) for t in terms
            )
            if not first_pod:
                affinity_ok &= pods_exist

        for raw in required_anti:
            t = resolve_term(raw, namespace=pod.namespace, labels=pod.labels)
            counts = table.pod_counts_by_row(
                self._group_matcher([t], table), required=required_pair(t.selector)
            )
            ids, values = table.label_values(t.topology_key)
            per_domain = domain_sums(ids, counts, ids >= 0, len(values))
            anti_ok &= ~rows_in(ids, per_domain[:-1] > 0)

        existing_ok = self._existing_anti_ok(pod, table)
        return _FilterState(affinity_ok, anti_ok, existing_ok, affinity_ok & anti_ok & existing_ok)

    def _existing_anti_ok(self, pod: models.Pod, table: NodeTable) -> BoolArray:
        """Where no existing pod's required anti-affinity term that the incoming pod
        matches closes the node's domain to it."""
        existing_anti = table.affinity_terms[REQUIRED_ANTI_AFFINITY]
        existing_ok = np.ones(table.n, dtype=np.bool_)
        forbidden: dict[str, set[int]] = {}
        for key in table.anti_affinity_candidates(pod.labels):
            on_node = existing_anti[key]
            t = self._existing_term(key)
            if not self._pod_matches(t, pod, table):
                continue
            ids, _ = table.label_values(t.topology_key)
            closed = forbidden.setdefault(t.topology_key, set())
            for node_name in on_node:
                row = table.row_of.get(node_name)
                if row is not None and ids[row] >= 0:
                    closed.add(int(ids[row]))
        for topology_key, closed in forbidden.items():
            if closed:
                ids, values = table.label_values(topology_key)
                domains = np.zeros(len(values), dtype=np.bool_)
                domains[list(closed)] = True
                existing_ok &= ~rows_in(ids, domains)
        return existing_ok

    def failure_reasons(
        self, state: framework.CycleState, pod: models.Pod, table: NodeTable, rows: Sequence[int]
    ) -> list[tuple[str, ...]]:
        fs = self._get_filter_state(state, pod, table)
        out: list[tuple[str, ...]] = []
        for row in rows:
            if fs is None or not fs.affinity_ok[row]:
                out.append((REASON_AFFINITY,))
            elif not fs.anti_affinity_ok[row]:
                out.append((REASON_ANTI_AFFINITY,))
            else:
                out.append((REASON_EXISTING_ANTI_AFFINITY,))
        return out

    def unresolvable(
        self, state: framework.CycleState, pod: models.Pod, table: NodeTable, rows: Sequence[int]
    ) -> list[bool]:
        """Where the pod's required affinity fails (the rows `failure_reasons` gives
        REASON_AFFINITY): evicting pods never makes a pod match."""
        fs = self._get_filter_state(state, pod, table)
        return [fs is None or not bool(fs.affinity_ok[row]) for row in rows]

    # ---- PreScore / Score / NormalizeScore -----------------------------------------------
    def pre_score(
        self, state: framework.CycleState, pod: models.Pod, table: NodeTable, rows: IntArray
    ) -> framework.Status:
        preferred = pod.pod_affinity.preferred if pod.pod_affinity else ()
        preferred_anti = pod.pod_anti_affinity.preferred if pod.pod_anti_affinity else ()
        if self.ignore_preferred_terms_of_existing_pods and not preferred and not preferred_anti:
            return framework.Status.skip()
        scores = _DomainScores(table)
        # The incoming pod's preferred terms against every existing pod.
        for sign, weighted in ((1, preferred), (-1, preferred_anti)):
            for wt in weighted:
                t = resolve_term(wt.term, namespace=pod.namespace, labels=pod.labels)
                counts = table.pod_counts_by_row(
                    self._group_matcher([t], table), required=required_pair(t.selector)
                )
                scores.add_per_row(t.topology_key, counts, sign * wt.weight)
        self._score_existing_terms(pod, table, scores)
        # kube-scheduler skips scoring when no (topology key, value) pair was touched.
        if not scores.by_key:
            return framework.Status.skip()
        state.write(_PRESCORE_KEY, _ScoreState(scores.by_key))
        return framework.Status.success()

    def _score_existing_terms(
        self, pod: models.Pod, table: NodeTable, scores: _DomainScores
    ) -> None:
        """Existing pods' terms that the incoming pod matches: preferred ones with their
        weight (negative for anti-affinity), required affinity with hardPodAffinityWeight."""
        kinds: list[tuple[str, int, int]] = [
            (PREFERRED_AFFINITY, 1, 0),
            (PREFERRED_ANTI_AFFINITY, -1, 0),
        ]
        if self.hard_pod_affinity_weight > 0:
            kinds.append((REQUIRED_AFFINITY, 0, self.hard_pod_affinity_weight))
        for kind, sign, fixed in kinds:
            for key, on_node in table.affinity_terms[kind].items():
                t = self._existing_term(key)
                if self._pod_matches(t, pod, table):
                    scores.add_on_nodes(t.topology_key, on_node, fixed or sign * key[0])

    def score(
        self, state: framework.CycleState, pod: models.Pod, table: NodeTable, rows: IntArray
    ) -> FloatArray:
        ss = state.read(_PRESCORE_KEY)
        rows = np.asarray(rows, dtype=np.int64)
        total = np.zeros(len(rows), dtype=np.float64)
        if not isinstance(ss, _ScoreState):
            return total
        for topology_key, per_value in ss.by_key.items():
            ids = table.label_values(topology_key)[0][rows]
            total += np.where(ids >= 0, per_value[np.maximum(ids, 0)], 0.0)
        return total

    def normalize(
        self, state: framework.CycleState, pod: models.Pod, scores: FloatArray
    ) -> FloatArray:
        if not isinstance(state.read(_PRESCORE_KEY), _ScoreState) or scores.size == 0:
            return scores
        lo, hi = float(scores.min()), float(scores.max())
        if hi - lo <= 0:
            return np.zeros_like(scores)
        # int64(float64(MaxNodeScore) * (s - min) / (max - min)): truncation.
        return np.floor(framework.MAX_NODE_SCORE * ((scores - lo) / (hi - lo)))
