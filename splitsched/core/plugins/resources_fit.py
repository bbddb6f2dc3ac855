"""NodeResourcesFit: a node fits when its free allocatable covers the pod's requests, and
nodes are scored by how much of them would be allocated (LeastAllocated, MostAllocated or
RequestedToCapacityRatio), as kube-scheduler's noderesources.Fit does.

Built by `splitsched.core.profiles` from its `pluginConfig` args; run by the framework at
PreFilter (the pod's request vector, once), Filter (all nodes at once), PreScore and Score.
Scores use kube-scheduler's int64 arithmetic so they match it exactly.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from splitsched.core import framework, models
from splitsched.core.nodetable import (
    COL_CPU,
    COL_MEMORY,
    COL_PODS,
    BoolArray,
    FloatArray,
    IntArray,
    NodeTable,
    PodVectors,
    RowsMark,
)

LEAST_ALLOCATED = "LeastAllocated"
MOST_ALLOCATED = "MostAllocated"
REQUESTED_TO_CAPACITY_RATIO = "RequestedToCapacityRatio"
_STRATEGIES = (LEAST_ALLOCATED, MOST_ALLOCATED, REQUESTED_TO_CAPACITY_RATIO)
MAX_CUSTOM_PRIORITY_SCORE = 10  # shape scores are 0..10, scaled to 0..MAX_NODE_SCORE
MAX_UTILIZATION = 100
TOO_MANY_PODS = "Too many pods"
#: Requests whose Filter mask is kept (one bool per row each).
REQUESTS_KEPT = 32

_PREFILTER_KEY = "PreFilterNodeResourcesFit"
_PRESCORE_KEY = "PreScoreNodeResourcesFit"
_DEFAULT_RESOURCES: tuple[tuple[str, int], ...] = ((models.CPU, 1), (models.MEMORY, 1))


def is_extended_resource(name: str) -> bool:
    """v1helper.IsExtendedResourceName: a domain-prefixed name outside kubernetes.io/."""
    return "/" in name and "kubernetes.io/" not in name and not name.startswith("requests.")


def is_scalar_resource(name: str) -> bool:
    """schedutil.IsScalarResourceName: the names the Fit filter checks besides cpu, memory
    and ephemeral-storage (others, like a bare "storage", kube-scheduler ignores)."""
    return (
        is_extended_resource(name)
        or name.startswith("hugepages-")
        or "kubernetes.io/" in name
        or name.startswith("attachable-volumes-")
    )


def parse_resources(raw: Any, *, where: str) -> tuple[tuple[str, int], ...]:
    """A `resources: [{name, weight}]` list; a weight left out or 0 is 1, as kube-scheduler
    defaults it, and must then be in 1..100."""
    if raw is None or raw == []:
        return _DEFAULT_RESOURCES
    if not isinstance(raw, list):
        raise ValueError(f"{where}: expected a list of {{name, weight}}")
    out: list[tuple[str, int]] = []
    for i, entry in enumerate(raw):
        if not isinstance(entry, Mapping) or not isinstance(entry.get("name"), str):
            raise ValueError(f"{where}[{i}].name: Required value")
        weight = entry.get("weight") or 1
        if not isinstance(weight, int) or isinstance(weight, bool) or not 1 <= weight <= 100:
            raise ValueError(
                f"{where}[{i}].weight: Invalid value: {weight!r}: resource weight of "
                f"{entry['name']} not in valid range (0, 100]"
            )
        out.append((entry["name"], weight))
    return tuple(out)


def go_div(a: IntArray, b: IntArray | int) -> IntArray:
    """int64 division truncating toward zero, as Go does (numpy's // floors)."""
    q = np.abs(a) // np.abs(b)
    return np.where((a < 0) != (np.asarray(b) < 0), -q, q)


@dataclass(frozen=True, slots=True)
class _FitState:
    vectors: PodVectors
    cols: IntArray  # table columns the pod must fit (request > 0, not ignored), pods included
    need: IntArray  # the request in those columns
    unknown: tuple[str, ...]  # checked resources no node offers: the pod fits nowhere


def pod_score_requests(
    pod: models.Pod, vectors: PodVectors, resources: Sequence[str], *, nonzero: bool
) -> list[int]:
    """The pod's request per scored resource: with `nonzero`, cpu and memory count a
    container that asks for nothing as the scheduler's defaults (Fit); plain otherwise
    (BalancedAllocation)."""
    out: list[int] = []
    for name in resources:
        if nonzero and name == models.CPU:
            out.append(vectors.nonzero_cpu)
        elif nonzero and name == models.MEMORY:
            out.append(vectors.nonzero_memory)
        else:
            out.append(int(pod.requests.get(name, 0)))
    return out


def _column(matrix: IntArray, col: int, rows: IntArray) -> IntArray:
    """matrix[rows, col]; rows are sorted and distinct, so all of them means a plain view."""
    column = matrix[:, col]
    return column if rows.size == matrix.shape[0] else column[rows]


def allocatable_and_requested(
    table: NodeTable,
    rows: IntArray,
    resources: Sequence[str],
    pod_requests: Sequence[int],
    *,
    nonzero: bool,
) -> tuple[list[IntArray | None], list[IntArray | None]]:
    """Per scored resource, allocatable and requested-after-placing-the-pod over `rows`;
    None where kube-scheduler's calculateResourceAllocatableRequest returns (0, 0) for every
    node (an extended resource the pod does not request, or one no node has ever had).
    `rows` must be sorted and distinct (feasible rows are)."""
    allocs: list[IntArray | None] = []
    reqs: list[IntArray | None] = []
    for name, pod_req in zip(resources, pod_requests, strict=True):
        col = table.column(name)
        if col is None or (pod_req == 0 and is_scalar_resource(name)):
            allocs.append(None)
            reqs.append(None)
            continue
        allocs.append(_column(table.allocatable, col, rows))
        if nonzero and col in (COL_CPU, COL_MEMORY):
            reqs.append(_column(table.nonzero_requested, col, rows) + pod_req)
        else:
            reqs.append(_column(table.requested, col, rows) + pod_req)
    return allocs, reqs


def broken_linear(shape: Sequence[tuple[int, int]], p: IntArray) -> IntArray:
    """helper.BuildBrokenLinearFunction over an array of utilisations."""
    out = np.full(p.shape, shape[-1][1], dtype=np.int64)
    done = np.zeros(p.shape, dtype=np.bool_)
    for i, (util, score) in enumerate(shape):
        hit = ~done & (p <= util)
        if i == 0:
            out[hit] = score
        else:
            u0, s0 = shape[i - 1]
            out[hit] = s0 + go_div((score - s0) * (p[hit] - u0), util - u0)
        done |= hit
    return out


def _fits(table: NodeTable, s: _FitState, rows: IntArray | None) -> BoolArray:
    """Where the request fits, over `rows` (None: every row)."""
    alloc, requested = table.allocatable, table.requested
    if rows is not None:
        alloc, requested = alloc[rows], requested[rows]
    fits = np.ones(len(alloc), dtype=np.bool_)
    for col, need in zip(s.cols.tolist(), s.need.tolist(), strict=True):
        fits &= alloc[:, col] - requested[:, col] >= need
    return fits


class NodeResourcesFit:
    name: ClassVar[str] = "NodeResourcesFit"
    # Its raw score of a node depends only on that node and the pod (see algorithm).
    row_local: ClassVar[bool] = True
    resolvable_by_preemption: ClassVar[bool] = True
    events: ClassVar[frozenset[framework.ClusterEvent]] = frozenset(
        {
            framework.ClusterEvent.NODE_ADD,
            framework.ClusterEvent.NODE_ALLOCATABLE,
            framework.ClusterEvent.ASSIGNED_POD_DELETE,
            framework.ClusterEvent.ASSIGNED_POD_UPDATE,
        }
    )

    def __init__(self, args: Mapping[str, Any] | None = None) -> None:
        """NodeResourcesFitArgs, checked as kube-scheduler checks them (its defaults: no
        ignored resources, LeastAllocated over cpu and memory)."""
        args = args or {}
        # Filter's masks by request (columns, amounts), for one table (`filter`).
        self._kept: OrderedDict[tuple[tuple[int, ...], ...], tuple[RowsMark, BoolArray]] = (
            OrderedDict()
        )
        self._kept_table: NodeTable | None = None
        self.ignored_resources = frozenset(args.get("ignoredResources") or ())
        self.ignored_groups = frozenset(args.get("ignoredResourceGroups") or ())
        for i, group in enumerate(args.get("ignoredResourceGroups") or ()):
            if "/" in group:
                raise ValueError(
                    f"ignoredResourceGroups[{i}]: Invalid value: {group!r}: resource group "
                    "name can't contain '/'"
                )
        strategy = args.get("scoringStrategy")
        if strategy is None:
            strategy = {"type": LEAST_ALLOCATED}
        if not isinstance(strategy, Mapping):
            raise ValueError("scoringStrategy: must be a mapping")
        self.strategy: str = strategy.get("type") or ""
        if self.strategy not in _STRATEGIES:
            supported = ", ".join(f'"{s}"' for s in _STRATEGIES)
            raise ValueError(
                f'scoringStrategy.type: Unsupported value: "{self.strategy}": supported '
                f"values: {supported}"
            )
        resources = parse_resources(strategy.get("resources"), where="scoringStrategy.resources")
        self.resources = tuple(n for n, _ in resources)
        self.weights = np.asarray([w for _, w in resources], dtype=np.int64)
        self.shape: tuple[tuple[int, int], ...] = ()
        ratio = strategy.get("requestedToCapacityRatio")
        if self.strategy == REQUESTED_TO_CAPACITY_RATIO:
            self.shape = _parse_shape(ratio)
        elif ratio is not None:
            raise ValueError(
                "scoringStrategy.requestedToCapacityRatio: Forbidden: must be nil when type "
                "is not RequestedToCapacityRatio"
            )

    # ---- filter ----------------------------------------------------------------------
    def _ignored(self, name: str) -> bool:
        if not is_extended_resource(name):
            return False
        return name in self.ignored_resources or name.split("/", 1)[0] in self.ignored_groups

    def _checked(self, name: str) -> bool:
        if name in (models.CPU, models.MEMORY, models.EPHEMERAL_STORAGE):
            return True
        return is_scalar_resource(name) and not self._ignored(name)

    def _state(self, state: framework.CycleState, pod: models.Pod, table: NodeTable) -> _FitState:
        cached = state.read(_PREFILTER_KEY)
        if isinstance(cached, _FitState) and cached.vectors.request.size == len(
            table.resource_names
        ):
            return cached
        vectors = table.pod_vectors(pod)
        cols = [COL_PODS]
        for col, name in enumerate(table.resource_names):
            if col != COL_PODS and vectors.request[col] > 0 and self._checked(name):
                cols.append(col)
        col_arr = np.asarray(cols, dtype=np.int64)
        fit_state = _FitState(
            vectors=vectors,
            cols=col_arr,
            need=vectors.request[col_arr],
            unknown=tuple(n for n in vectors.unknown if self._checked(n)),
        )
        state.write(_PREFILTER_KEY, fit_state)
        return fit_state

    def pre_filter(
        self, state: framework.CycleState, pod: models.Pod, table: NodeTable
    ) -> framework.Status:
        self._state(state, pod, table)
        return framework.Status.success()

    def filter(self, state: framework.CycleState, pod: models.Pod, table: NodeTable) -> BoolArray:
        """Where the request fits; kept per request (a few sizes serve most pods) and
        judged again only on the rows whose pods or allocatable changed since."""
        s = self._state(state, pod, table)
        if s.unknown:
            return np.zeros(table.n, dtype=np.bool_)
        if table is not self._kept_table:  # a fresh table (a new snapshot) starts afresh
            self._kept.clear()
            self._kept_table = table
        key = (tuple(s.cols.tolist()), tuple(s.need.tolist()))
        kept = self._kept.get(key)
        stale = None if kept is None else table.stale_rows(kept[0])
        if kept is None or stale is None:
            fits = _fits(table, s, None)
        else:
            fits = kept[1]
            if stale.size:
                fits[stale] = _fits(table, s, stale)
        self._kept[key] = (table.rows_mark(), fits)
        self._kept.move_to_end(key)
        if len(self._kept) > REQUESTS_KEPT:
            self._kept.popitem(last=False)
        return fits.copy()

    def failure_reasons(
        self, state: framework.CycleState, pod: models.Pod, table: NodeTable, rows: Sequence[int]
    ) -> list[tuple[str, ...]]:
        s = self._state(state, pod, table)
        out: list[tuple[str, ...]] = []
        for row in rows:
            reasons: list[str] = []
            for col, need in zip(s.cols.tolist(), s.need.tolist(), strict=True):
                free = int(table.allocatable[row, col]) - int(table.requested[row, col])
                if need > free:
                    name = table.resource_names[col]
                    reasons.append(TOO_MANY_PODS if col == COL_PODS else f"Insufficient {name}")
            reasons.extend(f"Insufficient {n}" for n in s.unknown)
            out.append(tuple(reasons))
        return out

    def unresolvable(
        self, state: framework.CycleState, pod: models.Pod, table: NodeTable, rows: Sequence[int]
    ) -> list[bool]:
        """Where the pod asks for more of some resource than the node has at all (or one it
        does not have): no eviction makes room there. Too many pods is never such a case."""
        s = self._state(state, pod, table)
        if s.unknown:
            return [True] * len(rows)
        sized = s.cols != COL_PODS
        alloc = table.allocatable[np.asarray(rows, dtype=np.int64)][:, s.cols[sized]]
        return [bool(x) for x in (alloc < s.need[sized]).any(axis=1)]

    # ---- score -----------------------------------------------------------------------
    def _score_requests(
        self, state: framework.CycleState, pod: models.Pod, table: NodeTable
    ) -> list[int]:
        cached = state.read(_PRESCORE_KEY)
        if isinstance(cached, list):
            return cached
        vectors = self._state(state, pod, table).vectors
        reqs = pod_score_requests(pod, vectors, self.resources, nonzero=True)
        state.write(_PRESCORE_KEY, reqs)
        return reqs

    def pre_score(
        self, state: framework.CycleState, pod: models.Pod, table: NodeTable, rows: IntArray
    ) -> framework.Status:
        self._score_requests(state, pod, table)
        return framework.Status.success()

    def score(
        self, state: framework.CycleState, pod: models.Pod, table: NodeTable, rows: IntArray
    ) -> FloatArray:
        pod_reqs = self._score_requests(state, pod, table)
        allocs, reqs = allocatable_and_requested(
            table, rows, self.resources, pod_reqs, nonzero=True
        )
        return self.score_matrix(allocs, reqs, rows.size).astype(np.float64)

    def score_matrix(
        self, allocs: Sequence[IntArray | None], reqs: Sequence[IntArray | None], size: int
    ) -> IntArray:
        """The strategy's score per row from per-resource allocatable and requested columns;
        a resource with nothing allocatable on a row is left out of that row's weighted
        average. Column by column: a few 1-D operations per resource."""
        total = np.zeros(size, dtype=np.int64)
        wsum: IntArray | int = 0
        for alloc, req, weight in zip(allocs, reqs, self.weights.tolist(), strict=True):
            if alloc is None or req is None:
                continue
            present = alloc > 0
            everywhere = bool(present.all())  # the common case: skip the masking
            safe = alloc if everywhere else np.where(present, alloc, 1)
            if self.strategy == REQUESTED_TO_CAPACITY_RATIO:
                fits = present & (req <= alloc)
                util = np.where(fits, req * MAX_UTILIZATION // safe, MAX_UTILIZATION)
                per = broken_linear(self.shape, util)
                present &= per > 0
                everywhere = False
            elif self.strategy == MOST_ALLOCATED:
                per = np.minimum(req, alloc) * framework.MAX_NODE_SCORE // safe
            else:
                per = np.maximum(alloc - req, 0) * framework.MAX_NODE_SCORE // safe
            if everywhere:
                total += per * weight
                wsum = wsum + weight
            else:
                total += np.where(present, per * weight, 0)
                wsum = wsum + np.where(present, weight, 0)
        if isinstance(wsum, int):
            return total // wsum if wsum else total
        safe_wsum = np.where(wsum > 0, wsum, 1)
        if self.strategy == REQUESTED_TO_CAPACITY_RATIO:
            # math.Round: half away from zero (scores are never negative).
            result: IntArray = np.floor(total / safe_wsum + 0.5).astype(np.int64)
        else:
            result = total // safe_wsum
        return np.where(wsum > 0, result, 0)

    def normalize(
        self, state: framework.CycleState, pod: models.Pod, scores: FloatArray
    ) -> FloatArray:
        return scores


def _parse_shape(raw: Any) -> tuple[tuple[int, int], ...]:
    """requestedToCapacityRatio.shape: utilisations strictly increasing in 0..100, scores
    0..10 (scaled to 0..100 here, as kube-scheduler does)."""
    where = "scoringStrategy.requestedToCapacityRatio"
    if not isinstance(raw, Mapping):
        raise ValueError(
            f"{where}: Required value: must be specified when type is RequestedToCapacityRatio"
        )
    return _shape_points(raw.get("shape"), where=f"{where}.shape")


def _shape_points(raw: Any, *, where: str) -> tuple[tuple[int, int], ...]:
    """A utilization shape: points with utilisations strictly increasing in 0..100 and
    scores in 0..10 (returned scaled to 0..100)."""
    if not isinstance(raw, list) or not raw:
        raise ValueError(f"{where}: Required value: at least one point must be specified")
    points: list[tuple[int, int]] = []
    for i, p in enumerate(raw):
        if not isinstance(p, Mapping):
            raise ValueError(f"{where}[{i}]: expected {{utilization, score}}")
        util, score = p.get("utilization", 0), p.get("score", 0)
        if not isinstance(util, int) or not 0 <= util <= MAX_UTILIZATION:
            raise ValueError(
                f"{where}[{i}].utilization: Invalid value: {util!r}: not in valid range [0, 100]"
            )
        if not isinstance(score, int) or not 0 <= score <= MAX_CUSTOM_PRIORITY_SCORE:
            raise ValueError(
                f"{where}[{i}].score: Invalid value: {score!r}: not in valid range [0, 10]"
            )
        if points and util <= points[-1][0]:
            raise ValueError(
                f"{where}[{i}].utilization: Invalid value: {util}: values must be sorted in "
                "increasing order"
            )
        points.append((util, score * (framework.MAX_NODE_SCORE // MAX_CUSTOM_PRIORITY_SCORE)))
    return tuple(points)
