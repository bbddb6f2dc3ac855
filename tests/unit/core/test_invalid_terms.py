"""Node affinity terms kube-scheduler's label-selector parser refuses, through a whole
scheduling cycle: a required one matches no node (also for topology spread's
nodeAffinityPolicy), a preferred one stops the cycle at PreScore with kube's message when
more than one node fits, and leaves it alone when one does (kube does not score then).
Explain says the same as the cycle."""

from __future__ import annotations

from typing import Any

from splitsched.core import algorithm, framework, models, profiles
from splitsched.core.cache import SchedulerCache
from splitsched.core.plugins.node_affinity import REASON_POD, node_matches_mask
from splitsched.core.plugins.topology_spread import PodTopologySpread
from tests.support import builders

R = models.NodeSelectorRequirement
T = models.NodeSelectorTerm
GT_FOUR = T(match_expressions=(R("gen", "Gt", ("four",)),))
PRESCORE_ERROR = (
    'running PreScore plugin "NodeAffinity": [0].matchExpressions[0].values[0]: '
    "Invalid value: \"four\": for 'Gt', 'Lt' operators, the value must be an integer"
)


def algo_over(*names: str) -> algorithm.FrameworkAlgorithm:
    nodes = [builders.node(n, cpu=4000, hostname=True, zone="z1") for n in names]
    cache = SchedulerCache(table=builders.table_of(nodes))
    return algorithm.FrameworkAlgorithm(cache=cache, profiles=profiles.load_profiles(None))


def pod_with(affinity: models.NodeAffinity, **kw: Any) -> models.Pod:
    return builders.pod("p", scheduler_name="splitsched", node_affinity=affinity, **kw)


def test_an_invalid_preferred_term_stops_the_cycle_at_pre_score() -> None:
    algo = algo_over("n1", "n2")
    pod = pod_with(models.NodeAffinity(preferred=(models.PreferredSchedulingTerm(3, GT_FOUR),)))
    result = algo.schedule(pod)
    assert result.wait is not None and result.wait.scheduler_error
    assert result.wait.summary == PRESCORE_ERROR
    explanation = algo.explain(pod)
    assert explanation.pod_error == PRESCORE_ERROR and explanation.feasible.size == 2


def test_with_one_feasible_node_kube_does_not_score_so_it_binds() -> None:
    algo = algo_over("n1")
    pod = pod_with(models.NodeAffinity(preferred=(models.PreferredSchedulingTerm(3, GT_FOUR),)))
    result = algo.schedule(pod)
    assert result.bind is not None and result.bind.node == "n1"
    assert algo.explain(pod).pod_error == ""


def test_an_invalid_required_term_matches_no_node() -> None:
    algo = algo_over("n1", "n2")
    result = algo.schedule(pod_with(models.NodeAffinity(required=(GT_FOUR,))))
    assert result.wait is not None and not result.wait.scheduler_error
    assert result.wait.summary == (
        f"0/2 nodes are available: 2 {REASON_POD}. no new claims to deallocate, preemption: "
        "0/2 nodes are available: 2 Preemption is not helpful for scheduling."
    )


def test_spread_honouring_required_affinity_leaves_out_what_an_invalid_term_names() -> None:
    """nodeAffinityPolicy Honor counts only nodes the pod's required affinity matches: a
    term naming zone z2 beside a value the parser refuses matches nothing, so z2's node and
    its pods stay out of the domains (if it matched, n2 with 2 pods would break maxSkew)."""
    nodes = [
        builders.node("n1", hostname=True, zone="z1"),
        builders.node("n2", hostname=True, zone="z2"),
    ]
    web = [builders.pod(f"w{i}", node="n2", labels={"app": "web"}) for i in range(2)]
    table = builders.table_of(nodes, web)
    spread = models.TopologySpreadConstraint(
        max_skew=1,
        topology_key=builders.HOSTNAME,
        when_unsatisfiable="DoNotSchedule",
        label_selector=builders.selector(app="web"),
    )
    invalid_z2 = T(match_expressions=(R(builders.ZONE, "In", ("z2", "not a label value")),))
    z1 = T(match_expressions=(R(builders.ZONE, "In", ("z1",)),))
    pod = pod_with(
        models.NodeAffinity(required=(invalid_z2, z1)),
        labels={"app": "web"},
        topology_spread_constraints=(spread,),
    )
    assert node_matches_mask(table, pod).tolist() == [True, False]
    plugin = PodTopologySpread()
    state = framework.CycleState()
    plugin.pre_filter(state, pod, table)
    assert plugin.filter(state, pod, table).tolist() == [True, True]
