"""NodeName: a pod that names its node (spec.nodeName) fits only that node."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

import numpy as np

from splitsched.core import framework, models
from splitsched.core.nodetable import BoolArray, NodeTable

REASON = "node(s) didn't match the requested node name"


class NodeName:
    name: ClassVar[str] = "NodeName"
    resolvable_by_preemption: ClassVar[bool] = False
    events: ClassVar[frozenset[framework.ClusterEvent]] = frozenset(
        {framework.ClusterEvent.NODE_ADD}
    )

    def __init__(self, args: Mapping[str, Any] | None = None) -> None:
        del args

    def filter(self, state: framework.CycleState, pod: models.Pod, table: NodeTable) -> BoolArray:
        mask = np.zeros(table.n, dtype=np.bool_)
        if not pod.node_name:
            mask[:] = True
            return mask
        row = table.row_of.get(pod.node_name)
        if row is not None:
            mask[row] = True
        return mask

    def failure_reasons(
        self,
        state: framework.CycleState,
        pod: models.Pod,
        table: NodeTable,
        rows: Sequence[int],
    ) -> list[tuple[str, ...]]:
        return [(REASON,) for _ in rows]
