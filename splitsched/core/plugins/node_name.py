"""NodeName: a pod that names its node (spec.nodeName) fits only that node."""

from __future__ import annotations

from typing import ClassVar

import numpy as np

from splitsched.core import framework, models
from splitsched.core.nodetable import BoolArray, NodeTable
from splitsched.core.plugins import basics

REASON = "node(s) didn't match the requested node name"


class NodeName(basics.OneReason):
    name: ClassVar[str] = "NodeName"
    reason: ClassVar[str] = REASON
    resolvable_by_preemption: ClassVar[bool] = False
    events: ClassVar[frozenset[framework.ClusterEvent]] = frozenset(
        {framework.ClusterEvent.NODE_ADD}
    )

    def filter(self, state: framework.CycleState, pod: models.Pod, table: NodeTable) -> BoolArray:
        mask = np.zeros(table.n, dtype=np.bool_)
        if not pod.node_name:
            mask[:] = True
            return mask
        row = table.row_of.get(pod.node_name)
        if row is not None:
            mask[row] = True
        return mask
