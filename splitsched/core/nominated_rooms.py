"""Rooms held for nominated pods: kube-scheduler's RunFilterPluginsWithNominatedPods.

A feasible node with pods nominated there (a preemptor waiting for its victims to go, a
pending pod an earlier leader nominated) stays feasible for another pod of lower or equal
priority only if that pod also fits with the nominees counted. The algorithm
(`splitsched.core.algorithm`) asks these helpers which rows hold such rooms, which of them
surely fit anyway (a few array operations instead of a filter pass), and why a lost row
rejects the pod; it runs the filters itself through `refilter`. Pure: the table is changed
only inside `counting` and restored exactly.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Mapping, Sequence

import numpy as np

from splitsched.core import framework, models
from splitsched.core.cache import SchedulerCache
from splitsched.core.nodetable import BoolArray, IntArray, NodeTable
from splitsched.core.nominator import Nominator, interacts

# Rows that fit only without the pods nominated there (of at least the pod's priority).
NOMINATED_PODS = "NominatedPods"
NOMINATED_REASON = "node(s) had room held for nominated pods of equal or higher priority"

Held = dict[int, list[models.Pod]]
#: PreFilter and Filter of the pod against the table as it is now (no nominees added):
#: (feasible mask, first rejecting filter per row, the cycle state), or None when
#: PreFilter rejects the pod outright.
Refilter = Callable[
    [framework.Profile, models.Pod],
    tuple[BoolArray, IntArray, framework.CycleState] | None,
]


def held_rooms(
    nominator: Nominator, cache: SchedulerCache, pod: models.Pod, rows: BoolArray
) -> Held:
    """Among `rows`, those with pods nominated there whose priority is at least the pod's
    (not the pod itself, nor a pod the cache already counts somewhere)."""
    held: Held = {}
    row_of = cache.table.row_of
    for node, pods in nominator.by_node():
        row = row_of.get(node)
        if row is None or not rows[row]:
            continue
        keep = [
            p
            for p in pods.values()
            if p.priority >= pod.priority and p.uid != pod.uid and p.uid not in cache
        ]
        if keep:
            held[row] = keep
    return held


def surely_fitting_dropped(
    nominator: Nominator, table: NodeTable, pod: models.Pod, held: Held
) -> Held:
    """Drop the rows where the pod fits beside its nominees on resources alone and nothing
    else about pods can matter (neither the pod nor those nominees `interacts`). The check
    is stricter than NodeResourcesFit (every column the pod requests, none ignored), and
    among the filters only it and NodePorts, InterPodAffinity and PodTopologySpread read
    pods, so a dropped row surely fits; the rest get the full what-if. The common case
    (plain pods) costs a few array operations instead of a filter pass."""
    if not held or interacts(pod):
        return held
    vec = table.pod_vectors(pod).request
    cols = np.flatnonzero(vec)  # includes the pods column
    interacting = nominator.interacting
    kept: Held = {}
    rows: list[int] = []
    starts: list[int] = []
    vectors: list[IntArray] = []
    for row, nominees in held.items():
        if interacting and any(n.uid in interacting for n in nominees):
            kept[row] = nominees
            continue
        rows.append(row)
        starts.append(len(vectors))
        # pod_vectors always spans the table's current columns.
        vectors.extend(table.pod_vectors(n).request for n in nominees)
    if rows:
        at = np.asarray(rows, dtype=np.int64)
        need = np.add.reduceat(np.stack(vectors)[:, cols], starts, axis=0) + vec[cols]
        free = table.allocatable[at][:, cols] - table.requested[at][:, cols]
        for row in at[~np.all(need <= free, axis=1)].tolist():
            kept[row] = held[row]
    return kept


@contextlib.contextmanager
def counting(table: NodeTable, held: Mapping[int, Sequence[models.Pod]]) -> Iterator[None]:
    """Count the held pods on their rows while the block runs; the table is restored
    exactly afterwards."""
    added: list[tuple[str, str]] = []
    try:
        for row, pods in held.items():
            node = table.names[row]
            for p in pods:
                table.add_pod(node, p)
                added.append((node, p.uid))
        yield
    finally:
        for node, uid in reversed(added):
            table.remove_pod(node, uid)


def held_room_reasons(
    *,
    nominator: Nominator,
    cache: SchedulerCache,
    profile: framework.Profile,
    pod: models.Pod,
    rows: Sequence[int],
    refilter: Refilter,
) -> tuple[dict[int, tuple[str, ...]], set[str]]:
    """Why each of `rows` (lost to nominated pods) rejects the pod with them counted, in
    the rejecting plugin's words ("Insufficient cpu"), and those plugins' names."""
    table = cache.table
    only = np.zeros(table.n, dtype=np.bool_)
    only[list(rows)] = True
    out: dict[int, tuple[str, ...]] = dict.fromkeys(rows, (NOMINATED_REASON,))
    failed: set[str] = set()
    with counting(table, held_rooms(nominator, cache, pod, only)):
        again = refilter(profile, pod)
        if again is not None:
            _, by, fresh = again
            for i, plugin in enumerate(profile.filter):
                mine = [r for r in rows if by[r] == i]
                if mine:
                    failed.add(plugin.name)
                    reasons = plugin.failure_reasons(fresh, pod, table, mine)
                    out.update(zip(mine, reasons, strict=True))
    if any(r == (NOMINATED_REASON,) for r in out.values()):
        failed.add(NOMINATED_PODS)  # not a filter's verdict: any event may change it
    return out, failed
