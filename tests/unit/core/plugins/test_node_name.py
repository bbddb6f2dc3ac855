"""NodeName: a pod naming its node fits only that node."""

from __future__ import annotations

from splitsched.core.plugins.node_name import NodeName
from tests.support.builders import fresh_state, node, pod, table_of


def test_no_node_name_fits_everywhere() -> None:
    table = table_of([node("a"), node("b")])
    assert NodeName().filter(fresh_state(), pod(), table).tolist() == [True, True]


def test_node_name_fits_only_that_node() -> None:
    table = table_of([node("a"), node("b"), node("c")])
    assert NodeName().filter(fresh_state(), pod(node="b"), table).tolist() == [
        False,
        True,
        False,
    ]


def test_unknown_node_name_fits_nowhere() -> None:
    table = table_of([node("a"), node("b")])
    mask = NodeName().filter(fresh_state(), pod(node="zzz"), table)
    assert mask.tolist() == [False, False]
    reasons = NodeName().failure_reasons(fresh_state(), pod(node="zzz"), table, [0, 1])
    assert reasons == [("node(s) didn't match the requested node name",)] * 2
    assert NodeName.resolvable_by_preemption is False
