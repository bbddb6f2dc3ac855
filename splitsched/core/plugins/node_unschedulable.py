"""NodeUnschedulable: cordoned nodes (spec.unschedulable) take no new pods, unless the pod
tolerates the node.kubernetes.io/unschedulable:NoSchedule taint (as DaemonSet pods do)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

import numpy as np

from splitsched.core import framework, models
from splitsched.core.nodetable import BoolArray, NodeTable

UNSCHEDULABLE_TAINT = models.Taint(
    key="node.kubernetes.io/unschedulable", value="", effect=models.TaintEffect.NO_SCHEDULE
)
REASON = "node(s) were unschedulable"


class NodeUnschedulable:
    name: ClassVar[str] = "NodeUnschedulable"
    resolvable_by_preemption: ClassVar[bool] = False
    events: ClassVar[frozenset[framework.ClusterEvent]] = frozenset(
        {framework.ClusterEvent.NODE_ADD, framework.ClusterEvent.NODE_SCHEDULABLE}
    )

    def __init__(self, args: Mapping[str, Any] | None = None) -> None:
        del args

    def filter(self, state: framework.CycleState, pod: models.Pod, table: NodeTable) -> BoolArray:
        if any(t.tolerates(UNSCHEDULABLE_TAINT) for t in pod.tolerations):
            return np.ones(table.n, dtype=np.bool_)
        return ~table.unschedulable

    def failure_reasons(
        self,
        state: framework.CycleState,
        pod: models.Pod,
        table: NodeTable,
        rows: Sequence[int],
    ) -> list[tuple[str, ...]]:
        return [(REASON,) for _ in rows]
