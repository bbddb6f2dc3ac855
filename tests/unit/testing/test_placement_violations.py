"""``invariants.placement_violations``: the after-the-fact constraint checks the e2e, fault
and bench runs rely on find what is wrong, and only that."""

from __future__ import annotations

from splitsched.core import models
from splitsched.testing import invariants
from tests.support.builders import node, pod, selector

HOSTNAME = "kubernetes.io/hostname"
ZONE = "topology.kubernetes.io/zone"


def _spread(max_skew: int = 1, **match: str) -> models.TopologySpreadConstraint:
    return models.TopologySpreadConstraint(
        max_skew=max_skew,
        topology_key=ZONE,
        when_unsatisfiable="DoNotSchedule",
        label_selector=selector(**match),
    )


def _anti(**match: str) -> models.PodAffinity:
    return models.PodAffinity(
        required=(models.PodAffinityTerm(label_selector=selector(**match), topology_key=HOSTNAME),)
    )


ZONED = [node("a1", zone="a", hostname=True), node("b1", zone="b", hostname=True)]


def test_a_skew_over_the_limit_is_named_for_every_pod_of_the_constraint() -> None:
    spread = (_spread(app="w"),)
    pods = [
        pod(f"w{i}", node="a1", labels={"app": "w"}, topology_spread_constraints=spread)
        for i in range(3)
    ]
    found = invariants.placement_violations(ZONED, pods)
    assert found == [f"default/w{i}: spread over {ZONE} has skew 3 > 1" for i in range(3)]


def test_a_balanced_spread_and_another_namespaces_pods_are_no_violation() -> None:
    spread = (_spread(app="w"),)
    pods = [
        pod("w0", node="a1", labels={"app": "w"}, topology_spread_constraints=spread),
        pod("w1", node="b1", labels={"app": "w"}, topology_spread_constraints=spread),
        pod("w2", node="b1", labels={"app": "w"}, topology_spread_constraints=spread),
        # Same labels, other namespace: not counted in default's skew.
        *(pod(f"x{i}", namespace="other", node="b1", labels={"app": "w"}) for i in range(4)),
    ]
    assert invariants.placement_violations(ZONED, pods) == []


def test_terminating_pods_neither_count_nor_are_judged_for_spread() -> None:
    spread = (_spread(app="w"),)
    pods = [
        pod("w0", node="a1", labels={"app": "w"}, topology_spread_constraints=spread),
        pod("w1", node="b1", labels={"app": "w"}, topology_spread_constraints=spread),
        *(
            pod(f"t{i}", node="a1", labels={"app": "w"}, topology_spread_constraints=spread,
                deleting=True)
            for i in range(3)
        ),
    ]  # fmt: skip
    assert invariants.placement_violations(ZONED, pods) == []


def test_constraints_with_different_selectors_are_counted_apart() -> None:
    pods = [
        pod("w0", node="a1", labels={"app": "w"}, topology_spread_constraints=(_spread(app="w"),)),
        pod("v0", node="a1", labels={"app": "v"}, topology_spread_constraints=(_spread(app="v"),)),
        pod("v1", node="a1", labels={"app": "v"}, topology_spread_constraints=(_spread(app="v"),)),
    ]
    found = invariants.placement_violations(ZONED, pods)
    assert found == [
        f"default/v0: spread over {ZONE} has skew 2 > 1",
        f"default/v1: spread over {ZONE} has skew 2 > 1",
    ]


def test_hostname_anti_affinity_on_one_node_is_found_within_the_namespace_only() -> None:
    pods = [
        pod("s0", node="a1", labels={"app": "s"}, pod_anti_affinity=_anti(app="s")),
        pod("s1", node="a1", labels={"app": "s"}),
        pod("s2", node="b1", labels={"app": "s"}),
        pod("o0", namespace="other", node="a1", labels={"app": "s"}),
    ]
    found = invariants.placement_violations(ZONED, pods)
    assert found == ["default/s0 and default/s1 share a1 (anti-affinity)"]


def test_selectors_and_taints_are_checked_against_the_pods_own_node() -> None:
    taint = models.Taint(key="gpu", value="", effect="NoSchedule")
    nodes = [node("t1", labels={"disk": "hdd"}, taints=[taint])]
    pods = [pod("p0", node="t1", node_selector={"disk": "ssd"}), pod("gone", node="missing")]
    found = invariants.placement_violations(nodes, pods)
    assert found == [
        "default/p0 on t1: nodeSelector disk=ssd not met",
        "default/p0 on t1: untolerated taint gpu",
    ]
