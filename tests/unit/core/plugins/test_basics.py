"""NoArgs and OneReason: the constructor and failure reasons several plugins share."""

from __future__ import annotations

from typing import ClassVar

from splitsched.core.plugins import basics, node_name, node_ports, node_unschedulable
from tests.support.builders import fresh_state, node, pod, table_of


class _Closed(basics.OneReason):
    name: ClassVar[str] = "Closed"
    reason: ClassVar[str] = "node(s) were closed"


def test_one_reason_per_rejected_row() -> None:
    table = table_of([node("a"), node("b"), node("c")])
    reasons = _Closed({"ignored": 1}).failure_reasons(fresh_state(), pod(), table, [2, 0])
    assert reasons == [("node(s) were closed",), ("node(s) were closed",)]
    assert _Closed().failure_reasons(fresh_state(), pod(), table, []) == []


def test_one_reason_plugins_keep_their_kube_scheduler_wording() -> None:
    assert node_name.NodeName.reason == node_name.REASON
    assert node_ports.NodePorts.reason == node_ports.REASON
    assert node_unschedulable.NodeUnschedulable.reason == node_unschedulable.REASON
