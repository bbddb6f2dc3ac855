"""NodeResourcesBalancedAllocation: (1 - std) * 100 over requested/allocatable fractions
after placing the pod, plain requests; expected values worked out by hand."""

from __future__ import annotations

import pytest

from splitsched.core import framework, models
from splitsched.core.plugins.balanced_allocation import NodeResourcesBalancedAllocation
from tests.support.builders import (
    GI,
    Assigned,
    all_rows,
    container,
    floats,
    fresh_state,
    node,
    pod,
    req_pod,
    table_of,
)

GPU = "example.com/gpu"


def score(
    plugin: NodeResourcesBalancedAllocation,
    p: models.Pod,
    nodes: list[models.Node],
    assigned: Assigned = None,
) -> list[float]:
    table = table_of(nodes, assigned=assigned)
    state = fresh_state()
    rows = all_rows(table)
    assert plugin.pre_score(state, p, table, rows).code == framework.Code.SUCCESS
    return floats(plugin.normalize(state, p, plugin.score(state, p, table, rows)))


def test_two_resources_by_hand() -> None:
    # cpu 1000/4000 = 0.25, memory 2/10 = 0.2: std = 0.05/2 = 0.025 -> 97.5 -> 97.
    n = node("n", cpu=4000, memory=10 * GI)
    assert score(NodeResourcesBalancedAllocation(), req_pod(1000, 2 * GI), [n]) == [97.0]


def test_pods_already_on_the_node_count() -> None:
    # cpu (2000 + 1000)/4000 = 0.75, memory (2 + 2)/10 = 0.4: std 0.175 -> 82.5 -> 82.
    n = node("n", cpu=4000, memory=10 * GI)
    existing = {"n": [req_pod(2000, 2 * GI)]}
    assert score(NodeResourcesBalancedAllocation(), req_pod(1000, 2 * GI), [n], existing) == [82.0]


def test_uses_plain_requests_not_nonzero_defaults() -> None:
    # A best-effort pod already there counts nothing (Fit would count 100m / 200Mi).
    # cpu 1000/4000 = 0.25, memory 2.5/10 = 0.25: perfectly balanced -> 100.
    n = node("n", cpu=4000, memory=10 * GI)
    existing = {"n": [req_pod()]}
    assert score(NodeResourcesBalancedAllocation(), req_pod(1000, 10 * GI // 4), [n], existing) == [
        100.0
    ]


def test_fractions_are_capped_at_one() -> None:
    # cpu 6000/4000 -> 1 (capped), memory 0.5: std 0.25 -> 75.
    n = node("n", cpu=4000, memory=10 * GI)
    assert score(NodeResourcesBalancedAllocation(), req_pod(6000, 5 * GI), [n]) == [75.0]


def test_three_resources_use_population_std() -> None:
    # 0.25, 0.5, 0.75: mean 0.5, std = sqrt(0.125/3) = 0.2041 -> 79.58 -> 79.
    args = {"resources": [{"name": "cpu"}, {"name": "memory"}, {"name": GPU, "weight": 1}]}
    n = node("n", cpu=4000, memory=10 * GI, extra={GPU: 4})
    p = pod(containers=[container({"cpu": 1000, "memory": 5 * GI, GPU: 3})])
    assert score(NodeResourcesBalancedAllocation(args), p, [n]) == [79.0]


def test_extended_resource_missing_on_node_or_not_requested_is_left_out() -> None:
    args = {"resources": [{"name": "cpu"}, {"name": "memory"}, {"name": GPU}]}
    plugin = NodeResourcesBalancedAllocation(args)
    with_gpu = node("a", cpu=4000, memory=10 * GI, extra={GPU: 4})
    without = node("b", cpu=4000, memory=10 * GI)
    # No gpu request: only cpu 0.25 and memory 0.2 count on both -> 97.
    assert score(plugin, req_pod(1000, 2 * GI), [with_gpu, without]) == [97.0, 97.0]
    # gpu 2 of 4: a: 0.25, 0.2, 0.5 -> mean 0.3167, std 0.1312 -> 86.88 -> 86;
    # b has no gpu -> two fractions -> 97.
    p = pod(containers=[container({"cpu": 1000, "memory": 2 * GI, GPU: 2})])
    assert score(plugin, p, [with_gpu, without]) == [86.0, 97.0]


def test_best_effort_pod_skips_scoring() -> None:
    table = table_of([node("n", cpu=4000, memory=10 * GI)])
    plugin = NodeResourcesBalancedAllocation()
    status = plugin.pre_score(fresh_state(), req_pod(), table, all_rows(table))
    assert status.code == framework.Code.SKIP


def test_pod_requesting_only_one_resource_is_scored() -> None:
    # cpu 2000/4000 = 0.5, memory 0: std 0.25 -> 75.
    n = node("n", cpu=4000, memory=10 * GI)
    assert score(NodeResourcesBalancedAllocation(), req_pod(2000), [n]) == [75.0]


def test_invalid_resources_rejected() -> None:
    with pytest.raises(ValueError):
        NodeResourcesBalancedAllocation({"resources": [{"name": "cpu", "weight": 101}]})
