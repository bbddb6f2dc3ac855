"""Parts several default plugins share word for word, written once.

`NoArgs`: the registry hands every plugin its pluginConfig args; some take none.
`OneReason`: Filter plugins whose every rejected node fails for the same reason
(NodeName, NodePorts, NodeUnschedulable) answer failure_reasons from `reason`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

from splitsched.core import framework, models
from splitsched.core.nodetable import NodeTable


class NoArgs:
    """A plugin that takes no pluginConfig args."""

    def __init__(self, args: Mapping[str, Any] | None = None) -> None:
        del args


class OneReason(NoArgs):
    """A Filter plugin with one failure reason, kube-scheduler's wording in `reason`."""

    reason: ClassVar[str]

    def failure_reasons(
        self, state: framework.CycleState, pod: models.Pod, table: NodeTable, rows: Sequence[int]
    ) -> list[tuple[str, ...]]:
        return [(self.reason,) for _ in rows]
