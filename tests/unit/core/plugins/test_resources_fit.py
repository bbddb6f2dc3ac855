"""NodeResourcesFit: filter by free allocatable, score by LeastAllocated / MostAllocated /
RequestedToCapacityRatio. Expected values are worked out by hand from kube-scheduler's
formulas (int64 arithmetic) in each test's comments."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from splitsched.core import framework, models
from splitsched.core.plugins.resources_fit import NodeResourcesFit
from tests.support.builders import (
    GI,
    MI,
    Assigned,
    all_rows,
    bools,
    container,
    floats,
    fresh_state,
    node,
    pod,
    req_pod,
    table_of,
)

GPU = "example.com/gpu"


def run_filter(
    plugin: NodeResourcesFit,
    p: models.Pod,
    table_nodes: list[models.Node],
    assigned: Assigned = None,
) -> tuple[list[bool], list[tuple[str, ...]]]:
    table = table_of(table_nodes, assigned=assigned)
    state = fresh_state()
    assert plugin.pre_filter(state, p, table).ok
    mask = plugin.filter(state, p, table)
    rejected = [i for i in range(table.n) if not mask[i]]
    return bools(mask), plugin.failure_reasons(state, p, table, rejected)


def used(cpu: int = 0, memory: int = 0, extra: dict[str, int] | None = None) -> models.Pod:
    """An already-placed pod with these requests."""
    reqs = dict(extra or {})
    if cpu:
        reqs[models.CPU] = cpu
    if memory:
        reqs[models.MEMORY] = memory
    return pod(containers=[container(reqs)])


# ---- filter -------------------------------------------------------------------------------


def test_pod_without_requests_fits_a_full_node() -> None:
    n = node("n", cpu=10, memory=20)
    mask, _ = run_filter(NodeResourcesFit(), pod(), [n], {"n": [used(10, 20)]})
    assert mask == [True]


def test_too_many_resources_reports_each_insufficient_resource() -> None:
    n = node("n", cpu=10, memory=20)
    mask, reasons = run_filter(NodeResourcesFit(), req_pod(1, 1), [n], {"n": [used(10, 20)]})
    assert mask == [False]
    assert reasons == [("Insufficient cpu", "Insufficient memory")]


def test_one_resource_short_reports_only_that_one() -> None:
    n = node("n", cpu=10, memory=20)
    mask, reasons = run_filter(NodeResourcesFit(), req_pod(2, 1), [n], {"n": [used(9, 5)]})
    assert mask == [False]
    assert reasons == [("Insufficient cpu",)]
    mask, reasons = run_filter(NodeResourcesFit(), req_pod(1, 16), [n], {"n": [used(5, 5)]})
    assert reasons == [("Insufficient memory",)]


def test_exact_fit_is_a_fit() -> None:
    n = node("n", cpu=10, memory=20)
    mask, _ = run_filter(NodeResourcesFit(), req_pod(5, 19), [n], {"n": [used(5, 1)]})
    assert mask == [True]


def test_init_container_peak_counts() -> None:
    # Containers 1 cpu; an init container wanting 3 cpu: the pod needs max(1, 3) = 3.
    p = pod(
        containers=[container({"cpu": 1, "memory": 1})], init_containers=[container({"cpu": 3})]
    )
    n = node("n", cpu=10, memory=20)
    mask, reasons = run_filter(NodeResourcesFit(), p, [n], {"n": [used(8, 0)]})
    assert mask == [False] and reasons == [("Insufficient cpu",)]
    mask, _ = run_filter(NodeResourcesFit(), p, [n], {"n": [used(7, 0)]})
    assert mask == [True]


def test_init_container_memory_peak() -> None:
    p = pod(
        containers=[container({"cpu": 1, "memory": 1})],
        init_containers=[container({"memory": 3}), container({"memory": 2})],
    )
    n = node("n", cpu=10, memory=20)
    mask, reasons = run_filter(NodeResourcesFit(), p, [n], {"n": [used(0, 18)]})
    assert mask == [False] and reasons == [("Insufficient memory",)]


def test_sidecars_add_to_containers_and_to_later_init_containers() -> None:
    # Sidecar 2 cpu (started first) + app 3 cpu = 5 running; the regular init container
    # after the sidecar runs beside it: 4 + 2 = 6. The pod needs max(5, 6) = 6 cpu.
    p = pod(
        containers=[container({"cpu": 3})],
        init_containers=[container({"cpu": 2}, sidecar=True), container({"cpu": 4})],
    )
    assert p.requests[models.CPU] == 6
    n = node("n", cpu=10, memory=20)
    assert run_filter(NodeResourcesFit(), p, [n], {"n": [used(4)]})[0] == [True]
    assert run_filter(NodeResourcesFit(), p, [n], {"n": [used(5)]})[0] == [False]


def test_regular_init_container_before_sidecar_does_not_overlap_it() -> None:
    # init 4 cpu runs alone, then sidecar 2 + app 3 = 5 run together: needs max(4, 5) = 5.
    p = pod(
        containers=[container({"cpu": 3})],
        init_containers=[container({"cpu": 4}), container({"cpu": 2}, sidecar=True)],
    )
    assert p.requests[models.CPU] == 5


def test_pod_overhead_is_added() -> None:
    p = pod(containers=[container({"cpu": 1, "memory": 1})], overhead={"cpu": 3, "memory": 13})
    n = node("n", cpu=10, memory=20)
    assert run_filter(NodeResourcesFit(), p, [n], {"n": [used(5, 5)]})[0] == [True]
    mask, reasons = run_filter(NodeResourcesFit(), p, [n], {"n": [used(5, 7)]})
    assert mask == [False] and reasons == [("Insufficient memory",)]


def test_extended_resource_fits_and_is_enforced() -> None:
    n = node("n", cpu=10, memory=20, extra={GPU: 5})
    ok = pod(containers=[container({GPU: 3})])
    assert run_filter(NodeResourcesFit(), ok, [n], {"n": [used(extra={GPU: 2})]})[0] == [True]
    big = pod(containers=[container({GPU: 4})])
    mask, reasons = run_filter(NodeResourcesFit(), big, [n], {"n": [used(extra={GPU: 2})]})
    assert mask == [False] and reasons == [(f"Insufficient {GPU}",)]


def test_extended_resource_missing_on_one_node() -> None:
    with_gpu = node("a", cpu=10, memory=20, extra={GPU: 1})
    without = node("b", cpu=10, memory=20)
    mask, reasons = run_filter(
        NodeResourcesFit(), pod(containers=[container({GPU: 1})]), [with_gpu, without]
    )
    assert mask == [True, False]
    assert reasons == [(f"Insufficient {GPU}",)]


def test_resource_no_node_offers_fails_everywhere() -> None:
    p = pod(containers=[container({"example.com/unknown": 1})])
    mask, reasons = run_filter(NodeResourcesFit(), p, [node("a", cpu=10), node("b", cpu=10)])
    assert mask == [False, False]
    assert reasons == [("Insufficient example.com/unknown",)] * 2


def test_zero_quantity_request_is_not_checked() -> None:
    p = pod(containers=[container({"example.com/unknown": 0, GPU: 0})])
    n = node("n", cpu=10, memory=20, extra={GPU: 0})
    assert run_filter(NodeResourcesFit(), p, [n])[0] == [True]


def test_hugepages_are_checked() -> None:
    n = node("n", cpu=10, memory=20, extra={"hugepages-2Mi": 4 * MI})
    p = pod(containers=[container({"hugepages-2Mi": 6 * MI})])
    mask, reasons = run_filter(NodeResourcesFit(), p, [n])
    assert mask == [False] and reasons == [("Insufficient hugepages-2Mi",)]


def test_ignored_resources_and_groups_are_skipped() -> None:
    n = node("n", cpu=10, memory=20)
    p = pod(containers=[container({GPU: 1, "other.io/fpga": 1})])
    assert run_filter(NodeResourcesFit(), p, [n])[0] == [False]
    plugin = NodeResourcesFit({"ignoredResources": [GPU], "ignoredResourceGroups": ["other.io"]})
    assert run_filter(plugin, p, [n])[0] == [True]
    only_gpu = NodeResourcesFit({"ignoredResources": [GPU]})
    mask, reasons = run_filter(only_gpu, p, [n])
    assert mask == [False] and reasons == [("Insufficient other.io/fpga",)]


def test_ignoring_applies_only_to_extended_resources() -> None:
    # hugepages-* is not an extended resource name, so ignoredResources cannot skip it.
    n = node("n", cpu=10, memory=20)
    p = pod(containers=[container({"hugepages-1Gi": GI})])
    plugin = NodeResourcesFit({"ignoredResources": ["hugepages-1Gi"]})
    assert run_filter(plugin, p, [n])[0] == [False]


def test_ephemeral_storage() -> None:
    n = node("n", cpu=10, memory=20, extra={"ephemeral-storage": 20})
    p = pod(containers=[container({"ephemeral-storage": 10})])
    mask, reasons = run_filter(
        NodeResourcesFit(), p, [n], {"n": [used(extra={"ephemeral-storage": 15})]}
    )
    assert mask == [False] and reasons == [("Insufficient ephemeral-storage",)]


def test_pod_count_is_always_checked() -> None:
    n = node("n", cpu=10, memory=20, pods=1)
    mask, reasons = run_filter(NodeResourcesFit(), pod(), [n], {"n": [used()]})
    assert mask == [False] and reasons == [("Too many pods",)]
    mask, reasons = run_filter(NodeResourcesFit(), req_pod(20, 1), [n], {"n": [used(5, 5)]})
    assert reasons == [("Too many pods", "Insufficient cpu")]
    assert run_filter(NodeResourcesFit(), pod(), [n])[0] == [True]


def test_filter_covers_all_rows() -> None:
    nodes = [node(f"n{i}", cpu=1000 * i, memory=GI) for i in range(1, 6)]
    mask, _ = run_filter(NodeResourcesFit(), req_pod(2500, GI // 2), nodes)
    assert mask == [False, False, True, True, True]


# ---- score --------------------------------------------------------------------------------


def score(
    plugin: NodeResourcesFit, p: models.Pod, nodes: list[models.Node], assigned: Assigned = None
) -> list[float]:
    table = table_of(nodes, assigned=assigned)
    state = fresh_state()
    rows = all_rows(table)
    assert plugin.pre_score(state, p, table, rows).ok
    return floats(plugin.normalize(state, p, plugin.score(state, p, table, rows)))


MOST = {"scoringStrategy": {"type": "MostAllocated"}}


def test_least_allocated_by_hand() -> None:
    # cpu (4000-3000)*100/4000 = 25; memory (10-5)*100/10 = 50; (25+50)/2 = 37 (int).
    n = node("n", cpu=4000, memory=10 * GI)
    assert score(NodeResourcesFit(), req_pod(3000, 5 * GI), [n]) == [37.0]


def test_most_allocated_by_hand() -> None:
    # cpu 3000*100/4000 = 75; memory 5*100/10 = 50; 125/2 = 62.
    n = node("n", cpu=4000, memory=10 * GI)
    assert score(NodeResourcesFit(MOST), req_pod(3000, 5 * GI), [n]) == [62.0]


def test_scores_include_pods_already_on_the_node() -> None:
    # Node 4000m / 8Gi with 1000m / 2Gi used; the pod adds 1000m / 2Gi: both at 50%.
    n = node("n", cpu=4000, memory=8 * GI)
    existing = {"n": [req_pod(1000, 2 * GI)]}
    assert score(NodeResourcesFit(), req_pod(1000, 2 * GI), [n], existing) == [50.0]
    assert score(NodeResourcesFit(MOST), req_pod(1000, 2 * GI), [n], existing) == [50.0]


def test_zero_request_pod_is_scored_with_nonzero_defaults() -> None:
    # 100m of 4000m: 3900*100/4000 = 97; 200Mi of 10Gi: 10040*100/10240 = 98; 195/2 = 97.
    n = node("n", cpu=4000, memory=10 * GI)
    assert score(NodeResourcesFit(), req_pod(), [n]) == [97.0]


def test_existing_zero_request_pods_count_nonzero_defaults() -> None:
    # Existing best-effort pod counts 100m / 200Mi. cpu: 100 + 400 = 500 of 1000 -> 50.
    # memory: existing 200Mi + pod's default 200Mi = 400Mi of 1Gi -> 624*100/1024 = 60.
    # (50 + 60) / 2 = 55.
    n = node("n", cpu=1000, memory=GI)
    assert score(NodeResourcesFit(), req_pod(400), [n], {"n": [req_pod()]}) == [55.0]


def test_over_capacity_scores() -> None:
    # Least: cpu over capacity -> 0; memory 50 -> 25. Most: cpu capped at 100; 150/2 = 75.
    n = node("n", cpu=1000, memory=2 * GI)
    assert score(NodeResourcesFit(), req_pod(1500, GI), [n]) == [25.0]
    assert score(NodeResourcesFit(MOST), req_pod(1500, GI), [n]) == [75.0]


def test_weights() -> None:
    # cpu 25 * 2 + memory 50 * 1 = 100; / 3 = 33.
    args = {
        "scoringStrategy": {
            "type": "LeastAllocated",
            "resources": [{"name": "cpu", "weight": 2}, {"name": "memory", "weight": 1}],
        }
    }
    n = node("n", cpu=4000, memory=10 * GI)
    assert score(NodeResourcesFit(args), req_pod(3000, 5 * GI), [n]) == [33.0]


def test_extended_resource_scoring() -> None:
    args = {
        "scoringStrategy": {
            "type": "LeastAllocated",
            "resources": [
                {"name": "cpu", "weight": 1},
                {"name": "memory", "weight": 1},
                {"name": GPU, "weight": 2},
            ],
        }
    }
    with_gpu = node("a", cpu=4000, memory=10 * GI, extra={GPU: 4})
    without = node("b", cpu=4000, memory=10 * GI)
    plugin = NodeResourcesFit(args)
    # Pod without a gpu request: the gpu is left out everywhere -> (25 + 50) / 2 = 37.
    assert score(plugin, req_pod(3000, 5 * GI), [with_gpu, without]) == [37.0, 37.0]
    # Pod asking 1 gpu: node a (25 + 50 + 75*2) / 4 = 56; node b has none -> left out: 37.
    p = pod(containers=[container({"cpu": 3000, "memory": 5 * GI, GPU: 1})])
    assert score(plugin, p, [with_gpu, without]) == [56.0, 37.0]


def _rtcr(shape: list[tuple[int, int]]) -> NodeResourcesFit:
    return NodeResourcesFit(
        {
            "scoringStrategy": {
                "type": "RequestedToCapacityRatio",
                "requestedToCapacityRatio": {
                    "shape": [{"utilization": u, "score": s} for u, s in shape]
                },
            }
        }
    )


def test_requested_to_capacity_ratio_rounds_half_up() -> None:
    # Shape 0->0, 100->10 (x10 = 100): score = utilisation. cpu 75, memory 50:
    # round(125 / 2) = round(62.5) = 63 (math.Round rounds half away from zero).
    n = node("n", cpu=4000, memory=10 * GI)
    assert score(_rtcr([(0, 0), (100, 10)]), req_pod(3000, 5 * GI), [n]) == [63.0]


def test_requested_to_capacity_ratio_truncates_toward_zero_and_drops_zero_scores() -> None:
    # Shape 0->100, 30->0 (scaled). cpu 400/4000 = 10%: 100 + (-100*10)/30 = 100 - 33 = 67
    # (Go truncates -33.3 to -33). memory 50% is past 30% -> 0, which is left out of the
    # average: the score is 67 alone.
    n = node("n", cpu=4000, memory=10 * GI)
    assert score(_rtcr([(0, 10), (30, 0)]), req_pod(400, 5 * GI), [n]) == [67.0]


def test_fit_score_is_not_normalised() -> None:
    nodes = [node("a", cpu=4000, memory=10 * GI), node("b", cpu=8000, memory=10 * GI)]
    # a: 25, 50 -> 37. b: (8000-3000)*100/8000 = 62, 50 -> 56.
    assert score(NodeResourcesFit(), req_pod(3000, 5 * GI), nodes) == [37.0, 56.0]


@pytest.mark.parametrize(
    "args",
    [
        {"scoringStrategy": {"type": "Bogus"}},
        {
            "scoringStrategy": {
                "type": "LeastAllocated",
                "resources": [{"name": "cpu", "weight": 101}],
            }
        },
        {"scoringStrategy": {"resources": [{"name": "cpu"}]}},  # no type: kube refuses it
        {"scoringStrategy": {"type": "RequestedToCapacityRatio"}},
        {
            "scoringStrategy": {
                "type": "MostAllocated",
                "requestedToCapacityRatio": {"shape": [{"utilization": 0, "score": 0}]},
            }
        },
        {"ignoredResourceGroups": ["example.com/gpu"]},
        {
            "scoringStrategy": {
                "type": "RequestedToCapacityRatio",
                "requestedToCapacityRatio": {
                    "shape": [{"utilization": 50, "score": 1}, {"utilization": 10, "score": 2}]
                },
            }
        },
    ],
)
def test_invalid_args_are_rejected(args: dict[str, object]) -> None:
    with pytest.raises(ValueError):
        NodeResourcesFit(args)


def test_a_resource_weight_of_zero_is_one_as_kube_defaults_it() -> None:
    fit = NodeResourcesFit({"scoringStrategy": {"type": "MostAllocated", "resources": [
        {"name": "cpu", "weight": 0}, {"name": "memory", "weight": 3}]}})  # fmt: skip
    assert fit.weights.tolist() == [1, 3]


def test_declares_kube_scheduler_semantics() -> None:
    assert NodeResourcesFit.resolvable_by_preemption is True
    assert framework.ClusterEvent.ASSIGNED_POD_DELETE in NodeResourcesFit.events
    assert framework.ClusterEvent.NODE_ALLOCATABLE in NodeResourcesFit.events
    assert isinstance(NodeResourcesFit(), framework.FilterPlugin)
    assert isinstance(NodeResourcesFit(), framework.ScorePlugin)


_CPUS = (100, 700, 1500)


@settings(max_examples=100, deadline=None)
@given(
    ops=st.lists(
        st.tuples(
            st.sampled_from(["pod", "remove", "resize", "drop_node", "add_node", "ask"]),
            st.integers(min_value=0, max_value=7),
            st.sampled_from(_CPUS),
        ),
        max_size=40,
    )
)
def test_a_kept_mask_equals_a_fresh_filter_whatever_happens_in_between(
    ops: list[tuple[str, int, int]],
) -> None:
    """Filter's masks kept per request, judged again on touched rows only, equal what a
    fresh plugin computes, through pods, resizes and nodes coming and going."""
    table = table_of([node(f"n{i}", cpu=2000, pods=3) for i in range(4)])
    kept = NodeResourcesFit()
    placed: list[tuple[str, models.Pod]] = []
    for step, (op, arg, cpu) in enumerate(ops):
        names = table.names
        if op == "pod" and names:
            p = req_pod(cpu=cpu, name=f"p{step}")
            table.add_pod(names[arg % len(names)], p)
            placed.append((names[arg % len(names)], p))
        elif op == "remove" and placed:
            where, p = placed.pop(arg % len(placed))
            table.remove_pod(where, p.uid)
        elif op == "resize" and names:
            table.set_node(node(names[arg % len(names)], cpu=500 * (arg + 1), pods=3))
        elif op == "drop_node" and names:
            gone = names[arg % len(names)]
            table.remove_node(gone)
            placed = [(w, p) for w, p in placed if w != gone]
        elif op == "add_node":
            table.set_node(node(f"m{step}", cpu=1000, pods=3))
        if op != "ask" and step != len(ops) - 1:
            continue  # the kept masks follow the table until asked again
        for size in _CPUS:
            p = req_pod(cpu=size, name="incoming")
            got = kept.filter(fresh_state(), p, table)
            assert bools(got) == bools(NodeResourcesFit().filter(fresh_state(), p, table))


def test_a_request_whose_mask_was_dropped_is_judged_afresh(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from splitsched.core.plugins import resources_fit

    monkeypatch.setattr(resources_fit, "REQUESTS_KEPT", 1)
    table = table_of([node("a", cpu=1000), node("b", cpu=2000)])
    kept = NodeResourcesFit()
    small, big = req_pod(cpu=600, name="s"), req_pod(cpu=1500, name="b")
    assert bools(kept.filter(fresh_state(), small, table)) == [True, True]
    assert bools(kept.filter(fresh_state(), big, table)) == [False, True]  # drops small's
    table.add_pod("b", req_pod(cpu=1000, name="x"))
    assert bools(kept.filter(fresh_state(), small, table)) == [True, True]
    assert bools(kept.filter(fresh_state(), big, table)) == [False, False]
    table.add_pod("a", req_pod(cpu=500, name="y"))
    assert bools(kept.filter(fresh_state(), small, table)) == [False, True]
