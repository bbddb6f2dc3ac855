"""NodeUnschedulable: cordoned nodes (spec.unschedulable) take no new pods, unless the pod
tolerates the node.kubernetes.io/unschedulable:NoSchedule taint (as DaemonSet pods do)."""

from __future__ import annotations

from typing import ClassVar

import numpy as np

from splitsched.core import framework, models
from splitsched.core.nodetable import BoolArray, NodeTable
from splitsched.core.plugins import basics

UNSCHEDULABLE_TAINT = models.Taint(
    key="node.kubernetes.io/unschedulable", value="", effect=models.TaintEffect.NO_SCHEDULE
)
REASON = "node(s) were unschedulable"


class NodeUnschedulable(basics.OneReason):
    name: ClassVar[str] = "NodeUnschedulable"
    reason: ClassVar[str] = REASON
    resolvable_by_preemption: ClassVar[bool] = False
    events: ClassVar[frozenset[framework.ClusterEvent]] = frozenset(
        {framework.ClusterEvent.NODE_ADD, framework.ClusterEvent.NODE_SCHEDULABLE}
    )

    def filter(self, state: framework.CycleState, pod: models.Pod, table: NodeTable) -> BoolArray:
        if any(t.tolerates(UNSCHEDULABLE_TAINT) for t in pod.tolerations):
            return np.ones(table.n, dtype=np.bool_)
        return ~table.unschedulable
