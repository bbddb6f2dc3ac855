"""The FailedScheduling message word for word as kube-scheduler v1.36 writes it.

Each expected string follows kube's code path, named in the test: FitError.Error()
(pkg/scheduler/framework/types.go) writes "0/N nodes are available: <sorted histogram>."
then, after a space, what RunPostFilterPlugins returned: the Unschedulable PostFilter
plugins' words joined by ", ", in profile order (DynamicResources, then
DefaultPreemption). DefaultPreemption's words are "preemption: " + either its eligibility
message or a FitError over its dry run: each node it tried with that node's reasons (no
lower-priority pod: "No preemption victims found for incoming pod"; otherwise the first
filter that still rejects the pod without them), and every node it never tried
(UnschedulableAndUnresolvable ones) as "Preemption is not helpful for scheduling".
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from splitsched.core import algorithm, models, profiles
from tests.support.builders import algorithm_over, cpu_node, cpu_pod, node, selector

NO_CLAIMS = "no new claims to deallocate"


def tail(total: int, histogram: str) -> str:
    """The default profile's PostFilter words when preemption finds no candidate."""
    return f" {NO_CLAIMS}, preemption: 0/{total} nodes are available: {histogram}."


def schedule(algo: algorithm.FrameworkAlgorithm, pod: models.Pod) -> str:
    result = algo.schedule(pod)
    assert result.wait is not None, result
    return result.wait.summary


def with_profile(
    nodes: list[models.Node], bound: list[models.Pod], config: Mapping[str, Any]
) -> algorithm.FrameworkAlgorithm:
    algo = algorithm_over(nodes, bound)
    algo.profiles = profiles.load_profiles(config)
    return algo


# ---- DefaultPreemption's dry run ------------------------------------------------------------


def test_no_lower_priority_pod_means_no_victims_and_a_request_above_allocatable_no_try() -> None:
    """NodeResourcesFit is Unschedulable where the request fits the node's allocatable
    (tried: no pod of lower priority there) and UnschedulableAndUnresolvable where it does
    not (never tried)."""
    algo = algorithm_over(
        [cpu_node("a", 2000), cpu_node("b", 2000), cpu_node("small", 1000)],
        [cpu_pod("busy-a", 1500, node="a", priority=5), cpu_pod("busy-b", 1500, node="b")],
    )
    result = algo.schedule(cpu_pod("p", 1500, priority=0))
    assert result.wait is not None
    assert result.wait.summary == "0/3 nodes are available: 3 Insufficient cpu." + tail(
        3, "1 Preemption is not helpful for scheduling, 2 No preemption victims found for "
        "incoming pod"
    )  # fmt: skip
    # The reason histogram stays the filters' alone.
    assert result.wait.reason_counts == {"Insufficient cpu": 3}


def test_a_node_that_stays_full_without_its_victims_says_why() -> None:
    """SelectVictimsOnNode removes every lower-priority pod; if the pod still does not fit,
    that node's status is the rejecting filter's ("Insufficient cpu")."""
    algo = algorithm_over(
        [cpu_node("a", 4000)],
        [cpu_pod("vip", 3000, node="a", priority=10), cpu_pod("low", 500, node="a")],
    )
    assert schedule(algo, cpu_pod("p", 2000, priority=5)) == (
        "0/1 nodes are available: 1 Insufficient cpu." + tail(1, "1 Insufficient cpu")
    )


def test_a_found_victim_nominates_and_the_message_keeps_the_filters_words_only() -> None:
    """DefaultPreemption succeeds: RunPostFilterPlugins returns its Success status, whose
    message is empty, so FitError adds nothing."""
    algo = algorithm_over([cpu_node("a", 2000)], [cpu_pod("low", 1500, node="a")])
    result = algo.schedule(cpu_pod("p", 1500, priority=5))
    assert result.preempt is not None and result.preempt.node == "a"
    assert result.preempt.wait.summary == "0/1 nodes are available: 1 Insufficient cpu."


def test_preemption_policy_never_is_not_eligible() -> None:
    """PodEligibleToPreemptOthers' message, before any dry run."""
    algo = algorithm_over([cpu_node("a", 2000)], [cpu_pod("low", 1500, node="a")])
    pod = cpu_pod("p", 1500, priority=5, policy="Never")
    assert schedule(algo, pod) == (
        "0/1 nodes are available: 1 Insufficient cpu. no new claims to deallocate, "
        "preemption: not eligible due to preemptionPolicy=Never."
    )


def test_unresolvable_rejections_are_not_helpful() -> None:
    """Taints, cordons and node affinity are UnschedulableAndUnresolvable: no dry run."""
    taint = models.Taint("dedicated", "gpu", "NoSchedule")
    algo = algorithm_over(
        [
            node("tainted", cpu=4000, taints=(taint,)),
            node("cordoned", cpu=4000, unschedulable=True),
            node("elsewhere", cpu=4000, labels={"disk": "hdd"}),
        ]
    )
    pod = replace(cpu_pod("p", 100, priority=5), node_selector={"disk": "ssd"})
    assert schedule(algo, pod) == (
        "0/3 nodes are available: 1 node(s) didn't match Pod's node affinity/selector, "
        "1 node(s) had untolerated taint(s), 1 node(s) were unschedulable."
        + tail(3, "3 Preemption is not helpful for scheduling")
    )


def test_required_pod_affinity_no_pod_satisfies_is_not_helpful() -> None:
    """InterPodAffinity: a required affinity term no pod matches is
    UnschedulableAndUnresolvable."""
    algo = algorithm_over([node(n, cpu=4000, hostname=True) for n in ("a", "b")])
    pod = replace(cpu_pod("p", 100, priority=5), pod_affinity=models.PodAffinity((DB_ON_HOST,)))
    assert schedule(algo, pod) == (
        "0/2 nodes are available: 2 node(s) didn't match pod affinity rules."
        + tail(2, "2 Preemption is not helpful for scheduling")
    )


def test_anti_affinity_is_tried_and_says_why_the_victims_would_not_do() -> None:
    """The pod's anti-affinity is Unschedulable: the dry run removes the lower-priority pod
    on "a", but the matching pod there has a higher priority, so the anti-affinity still
    rejects it; "b" has no pod of lower priority at all."""
    algo = algorithm_over(
        [node(n, cpu=4000, hostname=True) for n in ("a", "b")],
        [
            cpu_pod("db-a", 100, node="a", labels={"app": "db"}, priority=10),
            cpu_pod("low-a", 100, node="a"),
            cpu_pod("db-b", 100, node="b", labels={"app": "db"}, priority=10),
        ],
    )
    pod = replace(
        cpu_pod("p", 100, priority=5), pod_anti_affinity=models.PodAffinity((DB_ON_HOST,))
    )
    assert schedule(algo, pod) == (
        "0/2 nodes are available: 2 node(s) didn't match pod anti-affinity rules."
        + tail(2, "1 No preemption victims found for incoming pod, 1 node(s) didn't match "
               "pod anti-affinity rules")
    )  # fmt: skip


def test_a_missing_topology_label_is_not_helpful_but_a_skew_is_tried() -> None:
    """PodTopologySpread: a node without the constraint's key ("c") is
    UnschedulableAndUnresolvable, a skew ("a") Unschedulable; "b" is full."""
    algo = algorithm_over(
        [node("a", cpu=4000, zone="z1"), node("b", cpu=4000, zone="z2"), node("c", cpu=4000)],
        [
            cpu_pod("web-a", 100, node="a", labels={"app": "web"}, priority=10),
            cpu_pod("filler", 4000, node="b", priority=10),
        ],
    )
    spread = models.TopologySpreadConstraint(
        1, "topology.kubernetes.io/zone", "DoNotSchedule", selector(app="web")
    )
    pod = replace(
        cpu_pod("p", 100, labels={"app": "web"}, priority=5), topology_spread_constraints=(spread,)
    )
    assert schedule(algo, pod) == (
        "0/3 nodes are available: 1 Insufficient cpu, 1 node(s) didn't match pod topology "
        "spread constraints, 1 node(s) didn't match pod topology spread constraints "
        "(missing required label)."
        + tail(3, "1 Preemption is not helpful for scheduling, 2 No preemption victims found "
               "for incoming pod")
    )  # fmt: skip


# ---- which PostFilter plugins the profile has ----------------------------------------------


def test_the_words_come_from_the_profiles_post_filter_plugins() -> None:
    """A profile without DynamicResources or DefaultPreemption lacks its words; one with
    neither ends at the filters' histogram, as kube-scheduler without PostFilter plugins."""
    nodes = [cpu_node("a", 2000)]
    bound = [cpu_pod("vip", 1500, node="a", priority=10)]
    pod = cpu_pod("p", 1500, priority=5)
    filters = "0/1 nodes are available: 1 Insufficient cpu."

    def message(*disabled: str) -> str:
        config = {"plugins": {"postFilter": {"disabled": [{"name": n} for n in disabled]}}}
        return schedule(with_profile(nodes, bound, {"profiles": [config]}), pod)

    victims = "preemption: 0/1 nodes are available: 1 No preemption victims found for incoming pod."
    assert message() == f"{filters} {NO_CLAIMS}, {victims}"
    assert message("DynamicResources") == f"{filters} {victims}"
    assert message("DefaultPreemption") == f"{filters} {NO_CLAIMS}"
    assert message("*") == filters


# ---- PreFilter ----------------------------------------------------------------------------


def test_a_pre_filter_rejection_is_named_once_then_not_helpful_everywhere() -> None:
    """findNodesThatFitPod: a PreFilter rejection is the absent nodes' status, every node
    UnschedulableAndUnresolvable, so preemption tries none. (kube-scheduler v1.36.3 itself
    ends this message with ". not found": its DynamicResources PostFilter fails to read the
    state its PreFilter never wrote; bench/agreement/known.py's kube-not-found.)"""
    algo = algorithm_over([cpu_node("a"), cpu_node("b")])
    conflict = models.NodeSelectorTerm(
        match_fields=tuple(
            models.NodeSelectorRequirement("metadata.name", "In", (name,)) for name in "ab"
        )
    )
    pod = replace(cpu_pod("p", 100), node_affinity=models.NodeAffinity((conflict,)))
    assert schedule(algo, pod) == (
        "0/2 nodes are available: pod affinity terms conflict."
        + tail(2, "2 Preemption is not helpful for scheduling")
    )


def test_nodes_a_name_pin_leaves_out_are_never_filtered() -> None:
    """NodeAffinity's PreFilter returns the pinned names (matchFields metadata.name In);
    kube-scheduler filters only those and counts the rest as one reason."""
    taint = models.Taint("dedicated", "gpu", "NoSchedule")
    algo = algorithm_over([cpu_node("a"), node("b", cpu=4000, taints=(taint,)), cpu_node("c")])
    pod = replace(cpu_pod("p", 100), node_affinity=_pinned(("b",)))
    result = algo.schedule(pod)
    assert result.wait is not None
    assert result.wait.summary == (
        "0/3 nodes are available: 1 node(s) had untolerated taint(s), 2 node(s) didn't "
        "satisfy plugin(s) [NodeAffinity]." + tail(3, "3 Preemption is not helpful for scheduling")
    )
    assert result.wait.failed_plugins == frozenset({"TaintToleration", "NodeAffinity"})
    # Explain judges every node by every filter, but its summary is the cycle's message.
    explained = algo.explain(pod)
    assert explained.summary == result.wait.summary and len(explained.rejections) == 2
    assert result.wait.failed_node_reasons["a"] == "node(s) didn't satisfy plugin(s) [NodeAffinity]"
    assert algo.schedule(replace(pod, node_affinity=_pinned(("a",), ("b",)))).bind is not None


def test_a_pin_to_unknown_nodes_leaves_every_node_out() -> None:
    """Names of no node are dropped (GetNodeInPlacement fails): nothing is filtered."""
    algo = algorithm_over([cpu_node("a"), cpu_node("b")])
    pod = replace(cpu_pod("p", 100), node_affinity=_pinned(("ghost",)))
    assert schedule(algo, pod) == (
        "0/2 nodes are available: 2 node(s) didn't satisfy plugin(s) [NodeAffinity]."
        + tail(2, "2 Preemption is not helpful for scheduling")
    )


def test_a_term_without_a_name_pin_keeps_every_node() -> None:
    """Terms are ORed: one that pins no name makes every node worth filtering."""
    algo = algorithm_over([cpu_node("a"), cpu_node("b", 50)])
    by_label = models.NodeSelectorTerm(
        match_expressions=(models.NodeSelectorRequirement("kubernetes.io/os", "DoesNotExist"),)
    )
    pinned = _pinned(("ghost",)).required or ()
    pod = replace(cpu_pod("p", 100), node_affinity=models.NodeAffinity((*pinned, by_label)))
    result = algo.schedule(pod)
    assert result.bind is not None and result.bind.node == "a"


DB_ON_HOST = models.PodAffinityTerm(selector(app="db"), "kubernetes.io/hostname")


def _pinned(*terms: tuple[str, ...]) -> models.NodeAffinity:
    """Required node affinity: one term per tuple, each pinning metadata.name In those
    names (the API allows one value per matchFields requirement: several pins AND)."""
    return models.NodeAffinity(
        required=tuple(
            models.NodeSelectorTerm(
                match_fields=tuple(
                    models.NodeSelectorRequirement("metadata.name", "In", (name,)) for name in names
                )
            )
            for names in terms
        )
    )
