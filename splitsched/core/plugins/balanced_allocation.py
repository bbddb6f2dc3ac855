"""NodeResourcesBalancedAllocation: favour nodes whose resources would be used evenly once
the pod is placed: score = (1 - std) * 100 over the requested/allocatable fractions (each
capped at 1), as kube-scheduler's noderesources.BalancedAllocation computes it.

Built by `splitsched.core.profiles` (args: `resources: [{name, weight}]`, default cpu and
memory); run by the framework at PreScore (skipped for pods requesting none of the
resources) and Score. Uses plain requests, not the non-zero defaults Fit scores with.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

import numpy as np

from splitsched.core import framework, models
from splitsched.core.nodetable import FloatArray, IntArray, NodeTable
from splitsched.core.plugins.resources_fit import (
    allocatable_and_requested,
    parse_resources,
    pod_score_requests,
)

_PRESCORE_KEY = "PreScoreNodeResourcesBalancedAllocation"


def balanced_scores(alloc: IntArray, req: IntArray) -> IntArray:
    """balancedResourceScorer per row of [rows, resources] matrices; resources with nothing
    allocatable are left out. Follows kube-scheduler's float steps so truncation agrees."""
    present = alloc > 0
    frac = np.where(present, req / np.where(present, alloc, 1), 0.0)
    frac = np.minimum(frac, 1.0)
    count = present.sum(axis=1)
    # Two fractions: |f1 - f2| / 2, exactly as kube-scheduler does it.
    hi = np.where(present, frac, -np.inf).max(axis=1, initial=-np.inf)
    lo = np.where(present, frac, np.inf).min(axis=1, initial=np.inf)
    std2 = np.where(count == 2, (hi - lo) / 2, 0.0)
    # More than two: the population standard deviation.
    safe_count = np.where(count > 0, count, 1)
    mean = frac.sum(axis=1) / safe_count
    dev = np.where(present, frac - mean[:, None], 0.0)
    std_n = np.sqrt((dev * dev).sum(axis=1) / safe_count)
    std = np.where(count > 2, std_n, std2)
    scores: IntArray = ((1 - std) * framework.MAX_NODE_SCORE).astype(np.int64)
    return scores


class NodeResourcesBalancedAllocation:
    name: ClassVar[str] = "NodeResourcesBalancedAllocation"

    def __init__(self, args: Mapping[str, Any] | None = None) -> None:
        args = args or {}
        resources = parse_resources(args.get("resources"), where="resources")
        self.resources = tuple(n for n, _ in resources)

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
        alloc, req = allocatable_and_requested(table, rows, self.resources, reqs, nonzero=False)
        return balanced_scores(alloc, req).astype(np.float64)

    def normalize(
        self, state: framework.CycleState, pod: models.Pod, scores: FloatArray
    ) -> FloatArray:
        return scores
