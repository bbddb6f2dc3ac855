"""TaintToleration: NoSchedule/NoExecute taints must be tolerated; PreferNoSchedule taints
the pod doesn't tolerate lower the score (reverse-normalised)."""

from __future__ import annotations

from splitsched.core import framework, models
from splitsched.core.plugins.taint_toleration import TaintToleration, tolerates_all
from tests.support.builders import all_rows, bools, floats, fresh_state, node, pod, table_of

Tn = models.Taint
Tol = models.Toleration


def run(p: models.Pod, nodes: list[models.Node]) -> tuple[list[bool], list[tuple[str, ...]]]:
    table = table_of(nodes)
    state = fresh_state()
    mask = TaintToleration().filter(state, p, table)
    rejected = [i for i in range(table.n) if not mask[i]]
    return bools(mask), TaintToleration().failure_reasons(state, p, table, rejected)


def test_untainted_node_admits_anything() -> None:
    assert run(pod(), [node("n")])[0] == [True]


def test_untolerated_noschedule_taint_rejects_with_reason() -> None:
    n = node("n", taints=[Tn("dedicated", "user1", "NoSchedule")])
    mask, reasons = run(pod(), [n])
    assert mask == [False]
    assert reasons == [("node(s) had untolerated taint(s)",)]


def test_noexecute_taint_also_filters_but_prefernoschedule_does_not() -> None:
    nodes = [
        node("exec", taints=[Tn("k", "v", "NoExecute")]),
        node("prefer", taints=[Tn("k", "v", "PreferNoSchedule")]),
    ]
    assert run(pod(), nodes)[0] == [False, True]


def test_equal_toleration_needs_matching_key_value_and_effect() -> None:
    n = node("n", taints=[Tn("dedicated", "user1", "NoSchedule")])
    ok = Tol(key="dedicated", operator="Equal", value="user1", effect="NoSchedule")
    assert run(pod(tolerations=(ok,)), [n])[0] == [True]
    wrong_value = Tol(key="dedicated", operator="Equal", value="user2", effect="NoSchedule")
    assert run(pod(tolerations=(wrong_value,)), [n])[0] == [False]
    wrong_effect = Tol(key="dedicated", operator="Equal", value="user1", effect="NoExecute")
    assert run(pod(tolerations=(wrong_effect,)), [n])[0] == [False]
    wrong_key = Tol(key="other", operator="Equal", value="user1", effect="NoSchedule")
    assert run(pod(tolerations=(wrong_key,)), [n])[0] == [False]


def test_empty_effect_tolerates_every_effect() -> None:
    nodes = [
        node("a", taints=[Tn("dedicated", "user1", "NoSchedule")]),
        node("b", taints=[Tn("dedicated", "user1", "NoExecute")]),
    ]
    tol = Tol(key="dedicated", operator="Equal", value="user1")
    assert run(pod(tolerations=(tol,)), nodes)[0] == [True, True]


def test_exists_toleration_ignores_value() -> None:
    n = node("n", taints=[Tn("dedicated", "anything", "NoSchedule")])
    tol = Tol(key="dedicated", operator="Exists", effect="NoSchedule")
    assert run(pod(tolerations=(tol,)), [n])[0] == [True]


def test_exists_with_empty_key_tolerates_everything() -> None:
    n = node("n", taints=[Tn("a", "1", "NoSchedule"), Tn("b", "2", "NoExecute")])
    assert run(pod(tolerations=(Tol(operator="Exists"),)), [n])[0] == [True]
    # ... but only for its effect when it names one.
    only_ns = Tol(operator="Exists", effect="NoSchedule")
    mask, reasons = run(pod(tolerations=(only_ns,)), [n])
    assert mask == [False] and reasons == [("node(s) had untolerated taint(s)",)]


def test_every_taint_must_be_tolerated_and_reason_names_the_first() -> None:
    n = node("n", taints=[Tn("a", "1", "NoSchedule"), Tn("b", "2", "NoSchedule")])
    tol_a = Tol(key="a", operator="Equal", value="1", effect="NoSchedule")
    mask, reasons = run(pod(tolerations=(tol_a,)), [n])
    assert mask == [False] and reasons == [("node(s) had untolerated taint(s)",)]
    mask, reasons = run(pod(), [n])
    assert reasons == [("node(s) had untolerated taint(s)",)]
    tol_b = Tol(key="b", operator="Exists")
    assert run(pod(tolerations=(tol_a, tol_b)), [n])[0] == [True]


def test_nodes_sharing_taint_sets_are_judged_alike() -> None:
    t = [Tn("gpu", "true", "NoSchedule")]
    nodes = [node("a", taints=t), node("b"), node("c", taints=t), node("d")]
    assert run(pod(), nodes)[0] == [False, True, False, True]
    tol = Tol(key="gpu", operator="Equal", value="true", effect="NoSchedule")
    assert run(pod(tolerations=(tol,)), nodes)[0] == [True] * 4


def test_tolerates_all_helper() -> None:
    taints = [Tn("a", "1", "NoSchedule"), Tn("p", "1", "PreferNoSchedule")]
    tol_a = (Tol(key="a", operator="Exists"),)
    assert tolerates_all(tol_a, taints)
    assert not tolerates_all(tol_a, taints, {"PreferNoSchedule"})
    assert not tolerates_all((), taints)
    assert tolerates_all((), taints, {"NoExecute"})


# ---- score --------------------------------------------------------------------------------


def scores(p: models.Pod, nodes: list[models.Node]) -> tuple[list[float], list[float]]:
    plugin = TaintToleration()
    table = table_of(nodes)
    state = fresh_state()
    rows = all_rows(table)
    assert plugin.pre_score(state, p, table, rows).ok
    raw = plugin.score(state, p, table, rows)
    return floats(raw), floats(plugin.normalize(state, p, raw))


PREFER_NODES = [
    node("none"),
    node("one", taints=[Tn("cpu-type", "arm64", "PreferNoSchedule")]),
    node(
        "two",
        taints=[
            Tn("cpu-type", "arm64", "PreferNoSchedule"),
            Tn("disk-type", "hdd", "PreferNoSchedule"),
        ],
    ),
]


def test_untolerated_prefer_taints_are_counted_and_reversed() -> None:
    raw, norm = scores(pod(), PREFER_NODES)
    # Counts 0, 1, 2; reversed against the max (2): 100, 50, 0.
    assert raw == [0.0, 1.0, 2.0]
    assert norm == [100.0, 50.0, 0.0]


def test_tolerated_prefer_taints_do_not_count() -> None:
    tol = Tol(key="cpu-type", operator="Equal", value="arm64", effect="PreferNoSchedule")
    raw, norm = scores(pod(tolerations=(tol,)), PREFER_NODES)
    assert raw == [0.0, 0.0, 1.0]
    assert norm == [100.0, 100.0, 0.0]


def test_empty_effect_toleration_counts_for_prefer_taints() -> None:
    tol = Tol(key="disk-type", operator="Exists")
    raw, _ = scores(pod(tolerations=(tol,)), PREFER_NODES)
    assert raw == [0.0, 1.0, 1.0]


def test_noschedule_toleration_does_not_help_with_prefer_taints() -> None:
    tol = Tol(key="cpu-type", operator="Exists", effect="NoSchedule")
    raw, _ = scores(pod(tolerations=(tol,)), PREFER_NODES)
    assert raw == [0.0, 1.0, 2.0]


def test_noschedule_taints_do_not_affect_score() -> None:
    nodes = [node("a", taints=[Tn("x", "y", "NoSchedule")]), node("b")]
    raw, norm = scores(pod(), nodes)
    assert raw == [0.0, 0.0] and norm == [100.0, 100.0]


def test_declarations() -> None:
    assert TaintToleration.resolvable_by_preemption is False
    assert framework.ClusterEvent.NODE_TAINT in TaintToleration.events
