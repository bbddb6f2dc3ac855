"""NodeResourcesBalancedAllocation: favour nodes whose resources would be used evenly once
the pod is placed: score = (1 - std) * 100 over the requested/allocatable fractions (each
capped at 1), as kube-scheduler's noderesources.BalancedAllocation computes it.

Built by `splitsched.core.profiles` (args: `resources: [{name, weight}]`, default cpu and
memory); run by the framework at PreScore (skipped for pods requesting none of the
resources) and Score. Uses plain requests, not the non-zero defaults Fit scores with.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

import numpy as np

from splitsched.core import framework, models
from splitsched.core.nodetable import BoolArray, FloatArray, IntArray, NodeTable
from splitsched.core.plugins.resources_fit import (
    allocatable_and_requested,
    parse_resources,
    pod_score_requests,
)

_PRESCORE_KEY = "PreScoreNodeResourcesBalancedAllocation"


def balanced_scores(
    allocs: Sequence[IntArray | None], reqs: Sequence[IntArray | None], size: int
) -> IntArray:
    """balancedResourceScorer per row from per-resource allocatable and requested columns;
    resources with nothing allocatable on a row are left out of it. Follows
    kube-scheduler's float steps (and summation order) so the truncation agrees."""
    fracs: list[FloatArray] = []
    masks: list[BoolArray] = []
    everywhere = True
    for alloc, req in zip(allocs, reqs, strict=True):
        if alloc is None or req is None:
            continue
        present = alloc > 0
        if present.all():
            fracs.append(np.minimum(req / alloc, 1.0))
        else:
            everywhere = False
            frac = np.minimum(req / np.where(present, alloc, 1), 1.0)
            fracs.append(np.where(present, frac, 0.0))
        masks.append(present)
    if not fracs:
        return np.full(size, framework.MAX_NODE_SCORE, dtype=np.int64)
    if everywhere and len(fracs) == 2:  # the default cpu + memory on nodes having both
        fast: IntArray = ((1 - np.abs(fracs[0] - fracs[1]) / 2) * framework.MAX_NODE_SCORE).astype(
            np.int64
        )
        return fast
    count = np.zeros(size, dtype=np.int64)
    total = np.zeros(size, dtype=np.float64)
    hi = np.full(size, -np.inf)
    lo = np.full(size, np.inf)
    for frac, present in zip(fracs, masks, strict=True):
        count += present
        total += frac  # excluded resources add exactly 0.0
        hi = np.where(present, np.maximum(hi, frac), hi)
        lo = np.where(present, np.minimum(lo, frac), lo)
    # Two fractions: |f1 - f2| / 2, as kube-scheduler computes it.
    std = np.where(count == 2, (hi - lo) / 2, 0.0)
    many = count > 2
    if many.any():
        mean = total / np.where(count > 0, count, 1)
        sq = np.zeros(size, dtype=np.float64)
        for frac, present in zip(fracs, masks, strict=True):
            dev = np.where(present, frac - mean, 0.0)
            sq += dev * dev
        std = np.where(many, np.sqrt(sq / np.where(count > 0, count, 1)), std)
    scores: IntArray = ((1 - std) * framework.MAX_NODE_SCORE).astype(np.int64)
    return scores


class NodeResourcesBalancedAllocation:
    name: ClassVar[str] = "NodeResourcesBalancedAllocation"
    # Its raw score of a node depends only on that node and the pod (see algorithm).
    row_local: ClassVar[bool] = True

    def __init__(self, args: Mapping[str, Any] | None = None) -> None:
        """NodeResourcesBalancedAllocationArgs: the resources to balance, each named once
        with weight 1 (kube-scheduler refuses any other weight)."""
        args = args or {}
        resources = parse_resources(args.get("resources"), where="resources")
        names = [n for n, _ in resources]
        for i, (name, weight) in enumerate(resources):
            if name in names[:i]:
                raise ValueError(f"resources[{i}].name: Duplicate value: {name!r}")
            if weight != 1:
                raise ValueError(f"resources[{i}].weight: Invalid value: {weight}: must be 1")
        self.resources = tuple(names)

    def _pod_requests(
        self, state: framework.CycleState, pod: models.Pod, table: NodeTable
    ) -> list[int]:
        cached = state.read(_PRESCORE_KEY)
        if isinstance(cached, list):
            return cached
        reqs = pod_score_requests(pod, table.pod_vectors(pod), self.resources, nonzero=False)
        state.write(_PRESCORE_KEY, reqs)
        return reqs

    def pre_score(
        self, state: framework.CycleState, pod: models.Pod, table: NodeTable, rows: IntArray
    ) -> framework.Status:
        # Best-effort pods are not scored: they would all pile onto one node
        # (kubernetes/kubernetes#129138).
        if not any(self._pod_requests(state, pod, table)):
            return framework.Status.skip()
        return framework.Status.success()

    def score(
        self, state: framework.CycleState, pod: models.Pod, table: NodeTable, rows: IntArray
    ) -> FloatArray:
        reqs = self._pod_requests(state, pod, table)
        if not any(reqs):
            return np.zeros(rows.size, dtype=np.float64)
        allocs, reqd = allocatable_and_requested(table, rows, self.resources, reqs, nonzero=False)
        return balanced_scores(allocs, reqd, rows.size).astype(np.float64)

    def normalize(
        self, state: framework.CycleState, pod: models.Pod, scores: FloatArray
    ) -> FloatArray:
        return scores
