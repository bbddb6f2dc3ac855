"""NodeUnschedulable: cordoned nodes reject pods unless they tolerate the unschedulable
taint."""

from __future__ import annotations

from splitsched.core import models
from splitsched.core.plugins.node_unschedulable import REASON, NodeUnschedulable
from tests.support.builders import bools, fresh_state, node, pod, table_of

KEY = "node.kubernetes.io/unschedulable"


def run(p: models.Pod) -> list[bool]:
    table = table_of([node("ok"), node("cordoned", unschedulable=True)])
    return bools(NodeUnschedulable().filter(fresh_state(), p, table))


def test_cordoned_node_rejected() -> None:
    assert run(pod()) == [True, False]


def test_toleration_for_unschedulable_taint_admits() -> None:
    tol = models.Toleration(key=KEY, operator="Exists", effect="NoSchedule")
    assert run(pod(tolerations=(tol,))) == [True, True]


def test_wildcard_toleration_admits() -> None:
    assert run(pod(tolerations=(models.Toleration(operator="Exists"),))) == [True, True]


def test_toleration_with_other_effect_does_not_admit() -> None:
    tol = models.Toleration(key=KEY, operator="Exists", effect="NoExecute")
    assert run(pod(tolerations=(tol,))) == [True, False]


def test_reason_wording() -> None:
    table = table_of([node("cordoned", unschedulable=True)])
    reasons = NodeUnschedulable().failure_reasons(fresh_state(), pod(), table, [0])
    assert reasons == [("node(s) were unschedulable",)] and reasons[0][0] == REASON
    assert NodeUnschedulable.resolvable_by_preemption is False
