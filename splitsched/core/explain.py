"""Explain: every filter's verdict on every node for one pod, not just the first rejection.

A scheduling cycle stops at the first filter that rejects a node; a person asking "why is
my pod pending?" wants all of them, grouped by plugin, and whether evicting lower-priority
pods could help. Its summary, for a pod that fits nowhere, is the FailedScheduling message
a cycle writes (one more cycle, `run_cycle`, which tells the observer nothing). Runs inside
a what-if session (`splitsched.core.whatif`), so it sees the pods simulated before it;
reads the table and changes nothing. Called through
`FrameworkAlgorithm.explain` by the scheduler's Explain and Simulate API.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from splitsched.core import filter_pass, framework, models
from splitsched.core.nodetable import BoolArray, NodeTable
from splitsched.core.results import Explanation, PluginRejections

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
    rejections = _pre_filter_rejections(profile, state, pod, table)
    if rejections:
        mask[:] = False
    else:
        rejections = _filter_rejections(profile, state, pod, table, mask)
        if algo.nominator and mask.any():
            kept = algo.nominated_rejections(profile, pod, mask)
            if kept is not None:
                rejections.append(kept)
                mask[kept.rows] = False
    feasible = np.flatnonzero(mask)
    if feasible.size > 1:  # the cycle would score, and a PreScore error stops it
        error = algo.score(profile, state, pod, feasible).error
        if error:
            return Explanation(pod, n, feasible, rejections, error, False, pod_error=error)
    summary = f"{feasible.size}/{n} nodes are available." if feasible.size else _why_not(algo, pod)
    might_help = feasible.size == 0 and _preemption_might_help(pod, table, rejections)
    return Explanation(pod, n, feasible, rejections, summary, might_help)


def _why_not(algo: FrameworkAlgorithm, pod: models.Pod) -> str:
    """The FailedScheduling message a cycle writes for the pod (with a nomination, the
    filters' histogram alone, as kube-scheduler writes it then)."""
    result = algo.run_cycle(pod)
    wait = result.wait if result.wait is not None else result.preempt.wait  # type: ignore[union-attr]
    return wait.summary


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
) -> list[PluginRejections]:
    """Every Filter's rejections over all nodes; `mask` keeps the nodes all of them pass."""
    out: list[PluginRejections] = []
    for plugin in profile.filter:
        if plugin.name in state.skip_filter:
            continue
        try:
            fits = plugin.filter(state, pod, table)
        except framework.FilterError as exc:  # the cycle's error: every node's answer
            rows = np.arange(table.n, dtype=np.int64)
            message = (filter_pass.error_message(plugin.name, exc),)
            out.append(PluginRejections(plugin.name, rows, [message] * rows.size, False))
            mask[:] = False
            continue
        rows = np.flatnonzero(~fits)
        if rows.size == 0:
            continue
        said = getattr(plugin, "explain_reasons", plugin.failure_reasons)  # more words, if any
        reasons = said(state, pod, table, rows.tolist())
        out.append(PluginRejections(plugin.name, rows, reasons, plugin.resolvable_by_preemption))
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
