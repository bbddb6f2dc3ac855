"""Explain: every filter's verdict on every node for one pod, not just the first rejection.

A scheduling cycle stops at the first filter that rejects a node; a person asking "why is
my pod pending?" wants all of them, grouped by plugin, and whether evicting lower-priority
pods could help. Runs inside a what-if session (`splitsched.core.whatif`), so it sees the
pods simulated before it; reads the table and changes nothing. Called through
`FrameworkAlgorithm.explain` by the scheduler's Explain and Simulate API.
"""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING

import numpy as np

from splitsched.core import framework, models
from splitsched.core.nodetable import BoolArray, NodeTable
from splitsched.core.results import Explanation, PluginRejections, format_summary

if TYPE_CHECKING:
    from splitsched.core.algorithm import FrameworkAlgorithm


def explain_pod(algo: FrameworkAlgorithm, pod: models.Pod) -> Explanation:
    """Run every PreFilter and Filter on every node and keep all rejections."""
    table = algo.table
    n = table.n
    profile = algo.profile_for(pod)
    if profile is None or pod.invalid_reason:
        error = (
            f"pod is invalid: {pod.invalid_reason}"
            if pod.invalid_reason
            else f"no scheduler profile named {pod.scheduler_name!r}"
        )
        return Explanation(pod, n, np.zeros(0, dtype=np.int64), [], error, False, pod_error=error)
    state = framework.CycleState()
    mask = np.ones(n, dtype=np.bool_)
    first_counts: Counter[str] = Counter()
    rejections = _pre_filter_rejections(profile, state, pod, table)
    pre_rejected = bool(rejections)
    if rejections:
        mask[:] = False
        first_counts.update({r: n for r in rejections[0].reasons[0]} if n else {})
    else:
        rejections = _filter_rejections(profile, state, pod, table, mask, first_counts)
        if algo.nominator and mask.any():
            kept = algo.nominated_rejections(profile, pod, mask)
            if kept is not None:
                rejections.append(kept)
                for rs in kept.reasons:
                    first_counts.update(rs)
                mask[kept.rows] = False
    feasible = np.flatnonzero(mask)
    if feasible.size > 1:  # the cycle would score, and a PreScore error stops it
        error = algo.score(profile, state, pod, feasible).error
        if error:
            return Explanation(pod, n, feasible, rejections, error, False, pod_error=error)
    summary = (
        f"{feasible.size}/{n} nodes are available."
        if feasible.size
        else format_summary(n, first_counts)
    )
    if pre_rejected and n:
        # As the cycle (and kube-scheduler) words a PreFilter rejection: once, not per node.
        summary = f"0/{n} nodes are available: {', '.join(rejections[0].reasons[0])}."
    might_help = feasible.size == 0 and _preemption_might_help(pod, table, rejections)
    return Explanation(pod, n, feasible, rejections, summary, might_help)


def _pre_filter_rejections(
    profile: framework.Profile, state: framework.CycleState, pod: models.Pod, table: NodeTable
) -> list[PluginRejections]:
    """Each PreFilter that rejects the pod outright, as a rejection of every node."""
    out: list[PluginRejections] = []
    for pre in profile.pre_filter:
        status = pre.pre_filter(state, pod, table)
        if status.code is framework.Code.SKIP:
            state.skip_filter.add(pre.name)
        elif not status.ok:
            rows = np.arange(table.n, dtype=np.int64)
            reasons = [status.reasons or (f"rejected by {pre.name}",)] * table.n
            out.append(PluginRejections(pre.name, rows, reasons, False))
    return out


def _filter_rejections(
    profile: framework.Profile,
    state: framework.CycleState,
    pod: models.Pod,
    table: NodeTable,
    mask: BoolArray,
    first_counts: Counter[str],
) -> list[PluginRejections]:
    """Every Filter's rejections over all nodes; `mask` keeps the nodes all of them pass
    and `first_counts` the reasons of each node's first rejection (the cycle's summary)."""
    out: list[PluginRejections] = []
    first_seen = np.zeros(table.n, dtype=np.bool_)
    for plugin in profile.filter:
        if plugin.name in state.skip_filter:
            continue
        fits = plugin.filter(state, pod, table)
        rows = np.flatnonzero(~fits)
        if rows.size == 0:
            continue
        reasons = plugin.failure_reasons(state, pod, table, rows.tolist())
        out.append(PluginRejections(plugin.name, rows, reasons, plugin.resolvable_by_preemption))
        for row, rs in zip(rows.tolist(), reasons, strict=True):
            if not first_seen[row]:
                first_counts.update(rs)
                first_seen[row] = True
        mask &= fits
    return out


def _preemption_might_help(
    pod: models.Pod, table: NodeTable, rejections: list[PluginRejections]
) -> bool:
    """Some node rejected only for reasons evictions resolve holds a pod of lower
    priority, and the pod may preempt."""
    unresolvable = np.zeros(table.n, dtype=np.bool_)
    for rej in rejections:
        if not rej.resolvable_by_preemption:
            unresolvable[rej.rows] = True
    return (
        pod.preemption_policy != "Never"
        and bool((~unresolvable).any())
        and any(
            any(p.priority < pod.priority for p in table.pods[row].values())
            for row in np.flatnonzero(~unresolvable).tolist()
        )
    )
