"""TaintToleration: a pod fits only nodes whose NoSchedule/NoExecute taints it all
tolerates, and prefers nodes with fewer untolerated PreferNoSchedule taints, as
kube-scheduler's tainttoleration plugin does.

Built by `splitsched.core.profiles`; run by the framework at Filter, PreScore and Score.
Tolerations are checked once per distinct taint set (`NodeTable.taint_groups`), not per
node. `tolerates_all` is reused by PodTopologySpread (nodeTaintsPolicy: Honor).
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Sequence
from typing import ClassVar

import numpy as np

from splitsched.core import framework, models
from splitsched.core.nodetable import BoolArray, FloatArray, IntArray, NodeTable
from splitsched.core.plugins import basics

DO_NOT_SCHEDULE = frozenset(
    {models.TaintEffect.NO_SCHEDULE.value, models.TaintEffect.NO_EXECUTE.value}
)
_PREFER = models.TaintEffect.PREFER_NO_SCHEDULE.value
_PRESCORE_KEY = "PreScoreTaintToleration"


def tolerated(tolerations: Iterable[models.Toleration], taint: models.Taint) -> bool:
    return any(t.tolerates(taint) for t in tolerations)


def first_untolerated(
    tolerations: Sequence[models.Toleration],
    taints: Iterable[models.Taint],
    effects: Collection[str] = DO_NOT_SCHEDULE,
) -> models.Taint | None:
    """The first taint with one of `effects` that no toleration tolerates
    (v1helper.FindMatchingUntoleratedTaint)."""
    for taint in taints:
        if taint.effect in effects and not tolerated(tolerations, taint):
            return taint
    return None


def tolerates_all(
    tolerations: Sequence[models.Toleration],
    taints: Iterable[models.Taint],
    effects: Collection[str] = DO_NOT_SCHEDULE,
) -> bool:
    """True when every taint whose effect is in `effects` is tolerated."""
    return first_untolerated(tolerations, taints, effects) is None


def tolerated_mask(
    table: NodeTable,
    tolerations: Sequence[models.Toleration],
    effects: Collection[str] = DO_NOT_SCHEDULE,
) -> BoolArray:
    """Rows whose taints with `effects` the tolerations all tolerate: one check per
    distinct taint set."""
    ids, groups = table.taint_groups()
    ok = np.fromiter(
        (tolerates_all(tolerations, g, effects) for g in groups), dtype=np.bool_, count=len(groups)
    )
    if ok.all():
        return np.ones(table.n, dtype=np.bool_)
    result: BoolArray = ok[ids]
    return result


#: kube-scheduler v1.36's words; since v1.34 it no longer names the taint (one reason for
#: every taint keeps the summary short). Explain's node classes still show each taint.
UNTOLERATED = "node(s) had untolerated taint(s)"


class TaintToleration(basics.NoArgs):
    name: ClassVar[str] = "TaintToleration"
    # Its raw score of a node depends only on that node and the pod (see algorithm).
    row_local: ClassVar[bool] = True
    resolvable_by_preemption: ClassVar[bool] = False
    events: ClassVar[frozenset[framework.ClusterEvent]] = frozenset(
        {framework.ClusterEvent.NODE_ADD, framework.ClusterEvent.NODE_TAINT}
    )

    def filter(self, state: framework.CycleState, pod: models.Pod, table: NodeTable) -> BoolArray:
        return tolerated_mask(table, pod.tolerations)

    def failure_reasons(
        self, state: framework.CycleState, pod: models.Pod, table: NodeTable, rows: Sequence[int]
    ) -> list[tuple[str, ...]]:
        out: list[tuple[str, ...]] = []
        for row in rows:
            taint = first_untolerated(pod.tolerations, table.nodes[row].taints)
            out.append((UNTOLERATED,) if taint is not None else ())
        return out

    def pre_score(
        self, state: framework.CycleState, pod: models.Pod, table: NodeTable, rows: IntArray
    ) -> framework.Status:
        # Only tolerations that can tolerate a PreferNoSchedule taint matter for scoring.
        prefer = tuple(t for t in pod.tolerations if t.effect in ("", _PREFER))
        state.write(_PRESCORE_KEY, prefer)
        return framework.Status.success()

    def score(
        self, state: framework.CycleState, pod: models.Pod, table: NodeTable, rows: IntArray
    ) -> FloatArray:
        prefer = state.read(_PRESCORE_KEY)
        if not isinstance(prefer, tuple):
            prefer = tuple(t for t in pod.tolerations if t.effect in ("", _PREFER))
        ids, groups = table.taint_groups()
        counts = np.fromiter(
            (sum(1 for t in g if t.effect == _PREFER and not tolerated(prefer, t)) for g in groups),
            dtype=np.float64,
            count=len(groups),
        )
        result: FloatArray = counts[ids[rows]]
        return result

    def normalize(
        self, state: framework.CycleState, pod: models.Pod, scores: FloatArray
    ) -> FloatArray:
        return framework.reverse_normalize(scores)
