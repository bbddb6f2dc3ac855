"""PodTopologySpread: spread a pod's group evenly over topology domains (kube-scheduler's
podtopologyspread plugin, v1.36 semantics).

Built by `splitsched.core.profiles` from the `PodTopologySpread` pluginConfig args and run by
the scheduling algorithm at PreFilter/Filter (DoNotSchedule constraints) and
PreScore/Score/NormalizeScore (ScheduleAnyway constraints). Matching pods are counted through
`NodeTable.pod_groups` (pods grouped by namespace and labels), so a cycle costs one selector
check per distinct group plus a few numpy operations over all rows; pods without constraints
(and without system defaults) cost one attribute check.

Selectors as kube-scheduler resolves them: matchLabelKeys are merged into the labelSelector
(not into a null one, which matches nothing), and a selector that is empty after the merge
(`{}`) counts no existing pod while the incoming pod still matches it (countPodsMatchSelector
returns 0 for an empty selector; Filter's self-match uses Matches). nodeAffinityPolicy
(Honor by default) and nodeTaintsPolicy (Ignore by default) decide, per constraint, whether
nodes the pod's nodeSelector/required node affinity exclude, or whose NoSchedule/NoExecute
taints it does not tolerate, count as domains and have their pods counted; hostname
scoring counts a node's own pods whatever the policies.

System default constraints (defaultingType System: hostname maxSkew 3 and zone maxSkew 5,
ScheduleAnyway) need the selector of the pod's Services/ReplicaSet/StatefulSet/
ReplicationController, which the core does not see. They are applied to pods whose owner is a
ReplicaSet, StatefulSet or ReplicationController, counting the pods of the same owner (what
that controller's selector matches in practice); pods owned by nothing else get no defaults.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from splitsched.core import framework, models
from splitsched.core.nodetable import BoolArray, FloatArray, IntArray, NodeTable
from splitsched.core.plugins import masks
from splitsched.core.plugins.domains import domain_sums, rows_in
from splitsched.core.plugins.node_affinity import node_matches_mask
from splitsched.core.plugins.taint_toleration import tolerated_mask
from splitsched.core.podindex import PodGroup, required_pair, with_label_keys

REASON_CONSTRAINTS = "node(s) didn't match pod topology spread constraints"
REASON_MISSING_LABEL = REASON_CONSTRAINTS + " (missing required label)"

DO_NOT_SCHEDULE = "DoNotSchedule"
SCHEDULE_ANYWAY = "ScheduleAnyway"
HONOR = "Honor"
IGNORE = "Ignore"
LABEL_HOSTNAME = "kubernetes.io/hostname"
LABEL_ZONE = "topology.kubernetes.io/zone"
# Owner kinds whose selector kube-scheduler's DefaultSelector can use (besides Services).
DEFAULTABLE_OWNER_KINDS = frozenset({"ReplicaSet", "StatefulSet", "ReplicationController"})

SYSTEM_DEFAULT_CONSTRAINTS = (
    models.TopologySpreadConstraint(
        max_skew=3, topology_key=LABEL_HOSTNAME, when_unsatisfiable=SCHEDULE_ANYWAY
    ),
    models.TopologySpreadConstraint(
        max_skew=5, topology_key=LABEL_ZONE, when_unsatisfiable=SCHEDULE_ANYWAY
    ),
)

_PREFILTER_KEY = "PreFilterPodTopologySpread"
_PRESCORE_KEY = "PreScorePodTopologySpread"
_TALLY = "PodTopologySpread"  # names this plugin's kept counts (`NodeTable.pod_counts_by_row`)


# ---- the plugin ----------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class _Constraint:
    """A constraint with its selector resolved for one pod."""

    max_skew: int
    topology_key: str
    selector: models.LabelSelector | None  # None matches nothing
    owner: str  # system/list defaults: count pods of this owner instead of a selector
    min_domains: int
    honor_affinity: bool
    honor_taints: bool

    def matches(self, namespace: str, labels: Mapping[str, str], owner: str) -> bool:
        if self.owner:
            return owner == self.owner
        return self.selector is not None and self.selector.matches(labels)


class _HonoredNodes:
    """The nodes a pod's node affinity and tolerations allow, each computed at most once per
    cycle and only when a constraint honours it (nodeAffinityPolicy / nodeTaintsPolicy)."""

    def __init__(self, table: NodeTable, pod: models.Pod) -> None:
        self._table = table
        self._pod = pod
        self._affinity: BoolArray | None = None
        self._tolerated: BoolArray | None = None

    def narrow(self, c: _Constraint, eligible: BoolArray) -> BoolArray:
        """`eligible` less the nodes that constraint `c`'s policies exclude."""
        if c.honor_affinity:
            if self._affinity is None:
                self._affinity = node_matches_mask(self._table, self._pod)
            eligible = eligible & self._affinity
        if c.honor_taints:
            if self._tolerated is None:
                self._tolerated = tolerated_mask(self._table, self._pod.tolerations)
            eligible = eligible & self._tolerated
        return eligible


@dataclass(frozen=True, slots=True)
class _Domains:
    """What Filter reads of the node specs alone for one pod's constraints: the same for
    every pod with these constraints' keys and policies and this node affinity (and
    tolerations, when honoured), so it is kept while the nodes stand."""

    has_key: tuple[BoolArray, ...]  # per constraint: rows carrying its topology key
    has_all: BoolArray  # rows carrying every constraint's key
    eligible: tuple[BoolArray, ...]  # per constraint: rows whose pods and domains count
    present: tuple[BoolArray, ...]  # per constraint: per domain id, an eligible row has it


def _domains(table: NodeTable, pod: models.Pod, constraints: Sequence[_Constraint]) -> _Domains:
    """The pod's `_Domains`, through `NodeTable.recently`."""
    affinity = tolerations = None
    if any(c.honor_affinity for c in constraints):
        aff = pod.node_affinity
        affinity = (tuple(sorted(pod.node_selector.items())), aff.required if aff else None)
    if any(c.honor_taints for c in constraints):
        tolerations = pod.tolerations
    policies = tuple((c.topology_key, c.honor_affinity, c.honor_taints) for c in constraints)
    key = ("PodTopologySpread", policies, affinity, tolerations)
    return table.recently(key, lambda: _compute_domains(table, pod, constraints))


def _compute_domains(
    table: NodeTable, pod: models.Pod, constraints: Sequence[_Constraint]
) -> _Domains:
    has_key = tuple(table.label_exists(c.topology_key) for c in constraints)
    has_all = np.logical_and.reduce(has_key) if table.n else np.zeros(0, dtype=np.bool_)
    honored = _HonoredNodes(table, pod)
    eligible = tuple(honored.narrow(c, has_all) for c in constraints)
    present: list[BoolArray] = []
    for c, rows in zip(constraints, eligible, strict=True):
        ids, values = table.label_values(c.topology_key)
        seen = np.zeros(len(values) + 1, dtype=np.bool_)
        seen[ids[rows]] = True
        present.append(seen)
    return _Domains(has_key, has_all, eligible, tuple(present))


@dataclass(frozen=True, slots=True)
class _FilterState:
    constraints: tuple[_Constraint, ...]
    has_key: tuple[BoolArray, ...]  # per constraint: rows carrying its topology key
    too_skewed: tuple[BoolArray, ...]  # per constraint: rows where placing breaks maxSkew
    mask: BoolArray


@dataclass(frozen=True, slots=True)
class _ScoreState:
    constraints: tuple[_Constraint, ...]
    require_all: bool
    ignored: BoolArray | None = None  # set by score(): per scored row, missing a key


class PodTopologySpread(masks.MaskFilter[_FilterState]):
    name: ClassVar[str] = "PodTopologySpread"
    prefilter_key: ClassVar[str] = _PREFILTER_KEY
    state_kind = _FilterState
    resolvable_by_preemption: ClassVar[bool] = True
    events: ClassVar[frozenset[framework.ClusterEvent]] = frozenset(
        {
            framework.ClusterEvent.NODE_ADD,
            framework.ClusterEvent.NODE_DELETE,
            framework.ClusterEvent.NODE_LABEL,
            framework.ClusterEvent.NODE_TAINT,
            framework.ClusterEvent.ASSIGNED_POD_ADD,
            framework.ClusterEvent.ASSIGNED_POD_UPDATE,
            framework.ClusterEvent.ASSIGNED_POD_DELETE,
        }
    )

    def __init__(self, args: Mapping[str, Any] | None = None) -> None:
        args = args or {}
        defaulting = args.get("defaultingType") or "System"
        given = args.get("defaultConstraints") or []
        if defaulting not in ("System", "List"):
            raise ValueError(
                f'defaultingType: Unsupported value: "{defaulting}": supported values: '
                '"List", "System"'
            )
        if not isinstance(given, list):
            raise ValueError("defaultConstraints: expected a list")
        if defaulting == "System" and given:
            raise ValueError(
                'defaultingType: Invalid value: "System": when .defaultConstraints are not empty'
            )
        self.system_defaulted = defaulting == "System"
        self.default_constraints: tuple[models.TopologySpreadConstraint, ...] = (
            SYSTEM_DEFAULT_CONSTRAINTS
            if self.system_defaulted
            else tuple(_parse_default(i, c) for i, c in enumerate(given))
        )
        seen: set[tuple[str, str]] = set()
        for i, c in enumerate(self.default_constraints):
            if (c.topology_key, c.when_unsatisfiable) in seen:
                raise ValueError(
                    f'defaultConstraints[{i}]: Duplicate value: "{{{c.topology_key}, '
                    f'{c.when_unsatisfiable}}}"'
                )
            seen.add((c.topology_key, c.when_unsatisfiable))

    # ---- constraints ---------------------------------------------------------------------
    def _constraints(self, pod: models.Pod, action: str) -> tuple[_Constraint, ...]:
        if pod.topology_spread_constraints:
            return tuple(
                _Constraint(
                    max_skew=c.max_skew,
                    topology_key=c.topology_key,
                    selector=_spread_selector(c, pod.labels),
                    owner="",
                    min_domains=c.min_domains if c.min_domains is not None else 1,
                    honor_affinity=c.node_affinity_policy == HONOR,
                    honor_taints=c.node_taints_policy == HONOR,
                )
                for c in pod.topology_spread_constraints
                if c.when_unsatisfiable == action
            )
        if (
            not self.default_constraints
            or pod.owner is None
            or pod.owner.kind not in DEFAULTABLE_OWNER_KINDS
        ):
            return ()
        owner = pod.owner.uid or f"{pod.owner.kind}/{pod.owner.name}"
        return tuple(
            _Constraint(
                max_skew=c.max_skew,
                topology_key=c.topology_key,
                selector=None,
                owner=owner,
                min_domains=c.min_domains if c.min_domains is not None else 1,
                honor_affinity=c.node_affinity_policy == HONOR,
                honor_taints=c.node_taints_policy == HONOR,
            )
            for c in self.default_constraints
            if c.when_unsatisfiable == action
        )

    @staticmethod
    def _counts(
        table: NodeTable, pod: models.Pod, c: _Constraint, memo: dict[object, IntArray]
    ) -> IntArray:
        """Per row, the pod's namespace's non-terminating pods the constraint selects;
        memoised per selector within one call (default constraints share one) and kept
        up to date between calls by the pod index."""
        key = (c.selector, c.owner)
        hit = memo.get(key)
        if hit is not None:
            return hit
        ns = pod.namespace
        sel = c.selector
        if not c.owner and sel is not None and not sel.match_labels and not sel.match_expressions:
            memo[key] = counts = np.zeros(table.n, dtype=np.int64)
            return counts
        if c.owner:
            owner = c.owner

            def match(g: PodGroup) -> bool:
                return g.owner == owner and g.namespace == ns and not g.deleting

        else:

            def match(g: PodGroup) -> bool:
                return (
                    g.namespace == ns
                    and not g.deleting
                    and sel is not None
                    and sel.matches(g.labels)
                )

        memo[key] = counts = table.pod_counts_by_row(
            match,
            required=None if c.owner else required_pair(sel),
            key=(_TALLY, ns, sel, c.owner),  # `match` reads these alone
        )
        return counts

    # ---- PreFilter / Filter ----------------------------------------------------------------
    def _filter_state(self, pod: models.Pod, table: NodeTable) -> _FilterState | None:
        constraints = self._constraints(pod, DO_NOT_SCHEDULE)
        if not constraints:
            return None
        frame = _domains(table, pod, constraints)
        mask = frame.has_all.copy()
        too_skewed: list[BoolArray] = []
        memo: dict[object, IntArray] = {}
        for c, eligible, present in zip(constraints, frame.eligible, frame.present, strict=True):
            ids, values = table.label_values(c.topology_key)
            per_domain = domain_sums(ids, self._counts(table, pod, c, memo), eligible, len(values))
            n_domains = int(present.sum())
            min_match = int(per_domain[present].min()) if n_domains >= c.min_domains else 0
            self_match = int(c.matches(pod.namespace, pod.labels, _owner(pod)))
            # Per domain, whether placing the pod there breaks maxSkew (a row without the
            # key, id -1, is in no domain).
            over = per_domain[:-1] + self_match - min_match > c.max_skew
            bad = rows_in(ids, over)
            too_skewed.append(bad)
            mask &= ~bad
        return _FilterState(constraints, frame.has_key, tuple(too_skewed), mask)

    def failure_reasons(
        self, state: framework.CycleState, pod: models.Pod, table: NodeTable, rows: Sequence[int]
    ) -> list[tuple[str, ...]]:
        fs = self._get_filter_state(state, pod, table)
        return [(_first_failure(fs, row),) for row in rows]

    def unresolvable(
        self, state: framework.CycleState, pod: models.Pod, table: NodeTable, rows: Sequence[int]
    ) -> list[bool]:
        """Where a node lacks a constraint's topology key: evicting pods cannot add it
        (UnschedulableAndUnresolvable in kube-scheduler; a skew is Unschedulable)."""
        fs = self._get_filter_state(state, pod, table)
        return [_first_failure(fs, row) == REASON_MISSING_LABEL for row in rows]

    # ---- PreScore / Score / NormalizeScore -----------------------------------------------
    def pre_score(
        self, state: framework.CycleState, pod: models.Pod, table: NodeTable, rows: IntArray
    ) -> framework.Status:
        constraints = self._constraints(pod, SCHEDULE_ANYWAY)
        if not constraints or table.n == 0:
            return framework.Status.skip()
        # Only non-system-default rules require every key: a node without a zone label
        # still gets hostname spreading from the system defaults.
        require_all = bool(pod.topology_spread_constraints) or not self.system_defaulted
        state.write(_PRESCORE_KEY, _ScoreState(constraints, require_all))
        return framework.Status.success()

    def score(
        self, state: framework.CycleState, pod: models.Pod, table: NodeTable, rows: IntArray
    ) -> FloatArray:
        ss = state.read(_PRESCORE_KEY)
        if not isinstance(ss, _ScoreState):
            return np.zeros(len(rows), dtype=np.float64)
        rows = np.asarray(rows, dtype=np.int64)
        has_key = [table.label_exists(c.topology_key) for c in ss.constraints]
        has_all = np.logical_and.reduce(has_key)
        ignored = ~has_all[rows] if ss.require_all else np.zeros(len(rows), dtype=np.bool_)
        considered = rows[~ignored]
        honored = _HonoredNodes(table, pod)
        total = np.zeros(len(rows), dtype=np.float64)
        memo: dict[object, IntArray] = {}
        for c, has in zip(ss.constraints, has_key, strict=True):
            counts = self._counts(table, pod, c, memo)
            ids, values = table.label_values(c.topology_key)
            ids64 = ids.astype(np.int64, copy=False)
            if c.topology_key == LABEL_HOSTNAME:
                size = len(considered)
                in_domain = counts[rows]  # the node's own pods, no inclusion policy
            else:
                # Distinct values among the candidates; a missing key counts as domain "".
                seen = np.zeros(len(values) + 1, dtype=np.bool_)
                seen[ids64[considered]] = True  # -1 lands in the spare last slot
                size = int(seen.sum())
                eligible = honored.narrow(
                    c, has_all if ss.require_all else np.ones(table.n, dtype=np.bool_)
                )
                per_domain = domain_sums(ids, counts, eligible, len(values))
                in_domain = per_domain[np.maximum(ids64[rows], 0)]
            weight = math.log(size + 2)
            part = in_domain * weight + (c.max_skew - 1)
            total += np.where(has[rows], part, 0.0)
        # Go's math.Round: halves away from zero (scores are never negative here).
        raw = np.floor(total + 0.5)
        raw[ignored] = 0.0
        state.write(
            _PRESCORE_KEY,
            _ScoreState(ss.constraints, ss.require_all, ignored),
        )
        return raw

    def normalize(
        self, state: framework.CycleState, pod: models.Pod, scores: FloatArray
    ) -> FloatArray:
        ss = state.read(_PRESCORE_KEY)
        if not isinstance(ss, _ScoreState) or scores.size == 0:
            return scores
        ignored = (
            ss.ignored
            if ss.ignored is not None and ss.ignored.shape == scores.shape
            else np.zeros(scores.shape, dtype=np.bool_)
        )
        valid = scores[~ignored].astype(np.int64)
        out = np.zeros(scores.shape, dtype=np.float64)
        if valid.size == 0:
            return out
        lo, hi = int(valid.min()), int(valid.max())
        if hi == 0:
            out[~ignored] = framework.MAX_NODE_SCORE
            return out
        # Fewer matching pods score higher: MAX * (max + min - s) / max, integer division.
        out[~ignored] = (framework.MAX_NODE_SCORE * (hi + lo - valid)) // hi
        return out


def _owner(pod: models.Pod) -> str:
    if pod.owner is None:
        return ""
    return pod.owner.uid or f"{pod.owner.kind}/{pod.owner.name}"


def _spread_selector(
    c: models.TopologySpreadConstraint, labels: Mapping[str, str]
) -> models.LabelSelector | None:
    """The constraint's selector with matchLabelKeys merged in; a None selector stays None
    (kube's mergeLabelSetWithSelector leaves labels.Nothing() as it is, and the API refuses
    matchLabelKeys without a labelSelector anyway)."""
    return with_label_keys(c.label_selector, labels, match_keys=c.match_label_keys)


def _parse_default(i: int, raw: Any) -> models.TopologySpreadConstraint:
    """One of the args' defaultConstraints, checked as kube-scheduler checks them; its
    selector is the pod's owner's, so it may not have one (and matchLabelKeys does
    nothing, in kube-scheduler too)."""
    where = f"defaultConstraints[{i}]"
    if not isinstance(raw, Mapping):
        raise ValueError(f"{where}: expected a mapping")
    if raw.get("labelSelector") is not None:
        raise ValueError(
            f"{where}.labelSelector: Forbidden: constraint must not define a selector, as "
            "they deduced for each pod"
        )
    max_skew = raw.get("maxSkew")
    key = raw.get("topologyKey")
    action = raw.get("whenUnsatisfiable")
    min_domains = raw.get("minDomains")
    if not isinstance(max_skew, int) or max_skew <= 0:
        raise ValueError(
            f"{where}.maxSkew: Invalid value: {max_skew!r}: not in valid range (0, inf)"
        )
    if not isinstance(key, str) or not key:
        raise ValueError(f"{where}.topologyKey: Required value: can not be empty")
    if action not in (DO_NOT_SCHEDULE, SCHEDULE_ANYWAY):
        raise ValueError(
            f'{where}.whenUnsatisfiable: Unsupported value: "{action or ""}": supported values: '
            f'"{DO_NOT_SCHEDULE}", "{SCHEDULE_ANYWAY}"'
        )
    if min_domains is not None and (not isinstance(min_domains, int) or min_domains <= 0):
        raise ValueError(f"{where}.minDomains: Invalid value: {min_domains!r}: must be positive")
    policies = {
        f: raw.get(f) or d for f, d in (("nodeAffinityPolicy", HONOR), ("nodeTaintsPolicy", IGNORE))
    }
    for f, policy in policies.items():
        if policy not in (HONOR, IGNORE):
            raise ValueError(
                f'{where}.{f}: Unsupported value: "{policy}": supported values: "Honor", "Ignore"'
            )
    return models.TopologySpreadConstraint(
        max_skew=max_skew,
        topology_key=key,
        when_unsatisfiable=action,
        min_domains=min_domains,
        node_affinity_policy=policies["nodeAffinityPolicy"],
        node_taints_policy=policies["nodeTaintsPolicy"],
    )


def _first_failure(fs: _FilterState | None, row: int) -> str:
    """kube-scheduler checks the constraints in order and reports the first failure."""
    if fs is not None:
        for has, bad in zip(fs.has_key, fs.too_skewed, strict=True):
            if not has[row]:
                return REASON_MISSING_LABEL
            if bad[row]:
                break
    return REASON_CONSTRAINTS
