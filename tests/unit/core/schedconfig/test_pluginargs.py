"""pluginConfig args: every args type is strict (an unknown field anywhere in it is named),
its type fields must be the plugin's, and each plugin takes the values kube-scheduler takes,
with kube's words for the ones it refuses, and does what they say."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from splitsched.core import profiles
from splitsched.core.plugins.default_preemption import DefaultPreemption
from splitsched.core.plugins.topology_spread import PodTopologySpread
from splitsched.core.schedconfig import pluginargs
from tests.support.builders import algorithm_over, cpu_node, cpu_pod

#: A place for an unknown field inside every args type and the core types they embed.
NESTED: list[tuple[str, dict[str, Any], str]] = [
    ("DefaultPreemption", {"minCandidateNodesAbsolut": 1}, "minCandidateNodesAbsolut"),
    ("InterPodAffinity", {"hardPodAffinityWeigth": 1}, "hardPodAffinityWeigth"),
    ("NodeResourcesFit", {"scoringStrategy": {"type": "RequestedToCapacityRatio",
        "requestedToCapacityRatio": {"shape": [{"utilization": 0, "score": 0, "x": 1}]}}},
        "scoringStrategy.requestedToCapacityRatio.shape[0].x"),
    ("NodeResourcesFit", {"scoringStrategy": {"type": "MostAllocated",
        "resources": [{"name": "cpu", "wieght": 2}]}}, "scoringStrategy.resources[0].wieght"),
    ("PodTopologySpread", {"defaultingType": "List", "defaultConstraints": [{"maxSkew": 1,
        "topologyKey": "zone", "whenUnsatisfiable": "ScheduleAnyway", "maxSkw": 2}]},
        "defaultConstraints[0].maxSkw"),
    ("NodeResourcesBalancedAllocation", {"resource": []}, "resource"),
    ("VolumeBinding", {"bindTimeout": 5}, "bindTimeout"),
    ("NodeAffinity", {"addedAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{"matchExpressions": [{"key": "a", "operator": "Exists",
        "value": []}]}]}}},
        "addedAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0]"
        ".matchExpressions[0].value"),
    ("NodeAffinity", {"addedAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
        {"weight": 1, "preference": {"matchFeilds": []}}]}},
        "addedAffinity.preferredDuringSchedulingIgnoredDuringExecution[0].preference.matchFeilds"),
    ("DynamicResources", {"filterTimout": "1s"}, "filterTimout"),
    ("DevicePacking", {"topologyAttribute": ["pcieRoot"]}, "topologyAttribute"),
]  # fmt: skip


def doc(name: str, args: Any) -> dict[str, Any]:
    return {"profiles": [{"pluginConfig": [{"name": name, "args": args}]}]}


def refusal(name: str, args: Any) -> str:
    with pytest.raises(profiles.ProfileError) as info:
        profiles.load(doc(name, args))
    return str(info.value)


def test_every_args_type_has_a_case_here() -> None:
    assert {n for n, _, _ in NESTED} == set(pluginargs.ARGS)


@pytest.mark.parametrize(("name", "args", "field"), NESTED, ids=[f for _, _, f in NESTED])
def test_an_unknown_field_anywhere_in_args_is_named(name: str, args: Any, field: str) -> None:
    assert refusal(name, args) == (
        f'strict decoding error: unknown field "profiles[0].pluginConfig[0].args.{field}"'
    )


def test_args_may_carry_their_own_type_fields() -> None:
    written = {"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "InterPodAffinityArgs"}
    profiles.load(doc("InterPodAffinity", {**written, "hardPodAffinityWeight": 5}))
    message = refusal(
        "InterPodAffinity", {**written, "apiVersion": "kubescheduler.config.k8s.io/v1beta3"}
    )
    assert message.startswith("profiles[0].pluginConfig[0].args.apiVersion: expected")


@pytest.mark.parametrize(
    ("name", "args", "message"),
    [
        ("DefaultPreemption", {"minCandidateNodesPercentage": 101},
         "args.minCandidateNodesPercentage: Invalid value: 101: not in valid range [0, 100]"),
        ("DefaultPreemption", {"minCandidateNodesAbsolute": -1},
         "args.minCandidateNodesAbsolute: Invalid value: -1: not in valid range [0, inf)"),
        ("DefaultPreemption", {"minCandidateNodesPercentage": 0, "minCandidateNodesAbsolute": 0},
         "args.minCandidateNodesPercentage: Invalid value: 0: cannot be zero at the same time"),
        ("InterPodAffinity", {"hardPodAffinityWeight": 101}, "args.hardPodAffinityWeight"),
        ("NodeResourcesBalancedAllocation", {"resources": [{"name": "cpu", "weight": 2}]},
         "args.resources[0].weight: Invalid value: 2: must be 1"),
        ("NodeResourcesBalancedAllocation", {"resources": [{"name": "cpu"}, {"name": "cpu"}]},
         "args.resources[1].name: Duplicate value: 'cpu'"),
        ("PodTopologySpread", {"defaultConstraints": [{"maxSkew": 1}]},
         'args.defaultingType: Invalid value: "System": when .defaultConstraints are not empty'),
        ("PodTopologySpread", {"defaultingType": "Some"},
         'args.defaultingType: Unsupported value: "Some"'),
        ("PodTopologySpread", {"defaultingType": "List", "defaultConstraints": [
            {"maxSkew": 1, "topologyKey": "z", "whenUnsatisfiable": "ScheduleAnyway",
             "labelSelector": {"matchLabels": {"a": "b"}}}]},
         "args.defaultConstraints[0].labelSelector: Forbidden: constraint must not define"),
        ("PodTopologySpread", {"defaultingType": "List", "defaultConstraints": [
            {"maxSkew": 1, "topologyKey": "z", "whenUnsatisfiable": "ScheduleAnyway"},
            {"maxSkew": 2, "topologyKey": "z", "whenUnsatisfiable": "ScheduleAnyway"}]},
         'args.defaultConstraints[1]: Duplicate value: "{z, ScheduleAnyway}"'),
        ("PodTopologySpread", {"defaultingType": "List", "defaultConstraints": [
            {"maxSkew": 1, "topologyKey": "z", "whenUnsatisfiable": "ScheduleAnyway",
             "nodeTaintsPolicy": "Sometimes"}]},
         'args.defaultConstraints[0].nodeTaintsPolicy: Unsupported value: "Sometimes"'),
        ("VolumeBinding", {"bindTimeoutSeconds": -1}, "args.bindTimeoutSeconds: Invalid value: -1"),
        ("NodeAffinity", {"addedAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [{"matchExpressions": [{"key": "a", "operator": "Near"}]}]}}},
         "args.addedAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0]"),
    ],
)  # fmt: skip
def test_values_kube_scheduler_refuses_are_refused_naming_the_field(
    name: str, args: Any, message: str
) -> None:
    assert refusal(name, args).startswith(f"profiles[0].pluginConfig[0].{message}")


def test_args_are_judged_even_for_a_disabled_plugin_as_kube_validates_them() -> None:
    bad = doc("InterPodAffinity", {"hardPodAffinityWeight": 101})
    bad["profiles"][0]["plugins"] = {"multiPoint": {"disabled": [{"name": "InterPodAffinity"}]}}
    with pytest.raises(profiles.ProfileError, match="hardPodAffinityWeight"):
        profiles.load(bad)


def test_default_preemption_finds_as_many_candidates_as_kube_would() -> None:
    plugin = DefaultPreemption({})  # 10%, at least 100
    assert [plugin.candidate_count(n) for n in (5, 100, 999, 2000)] == [5, 100, 100, 200]
    few = DefaultPreemption({"minCandidateNodesPercentage": 0, "minCandidateNodesAbsolute": 1})
    assert [few.candidate_count(n) for n in (0, 1, 50)] == [0, 1, 1]


def test_one_candidate_is_enough_when_the_args_say_so() -> None:
    """Node a's victim outranks node b's: with every candidate judged, b is chosen; with
    minCandidateNodesAbsolute 1 (and no percentage), the first candidate, a, is."""
    nodes = [cpu_node("a"), cpu_node("b")]
    bound = [
        cpu_pod("a-mid", 3000, priority=5, node="a"),
        cpu_pod("b-low", 3000, priority=1, node="b"),
    ]
    vip = cpu_pod("vip", 2000, priority=10)
    every = algorithm_over(nodes, bound).schedule(vip).preempt
    assert every is not None and every.node == "b"
    one = yaml.safe_dump(doc("DefaultPreemption", {"minCandidateNodesPercentage": 0,
                                                   "minCandidateNodesAbsolute": 1}))  # fmt: skip
    first = algorithm_over(nodes, bound, config=one).schedule(vip).preempt
    assert first is not None and first.node == "a"


def test_default_constraints_keep_their_policies_and_min_domains() -> None:
    constraint = {
        "maxSkew": 1,
        "topologyKey": "zone",
        "whenUnsatisfiable": "DoNotSchedule",
        "minDomains": 3,
        "nodeAffinityPolicy": "Ignore",
        "nodeTaintsPolicy": "Honor",
    }
    spread = PodTopologySpread({"defaultingType": "List", "defaultConstraints": [constraint]})
    [c] = spread.default_constraints
    assert (c.min_domains, c.node_affinity_policy, c.node_taints_policy) == (3, "Ignore", "Honor")
    assert PodTopologySpread({"defaultingType": ""}).system_defaulted  # "" is kube's System


def test_match_label_keys_of_a_default_constraint_are_noted() -> None:
    constraint = {
        "maxSkew": 1,
        "topologyKey": "zone",
        "whenUnsatisfiable": "ScheduleAnyway",
        "matchLabelKeys": ["pod-template-hash"],
    }
    args = {"defaultingType": "List", "defaultConstraints": [constraint]}
    config = profiles.load(doc("PodTopologySpread", args))
    assert config.notes == (
        "profiles[0].pluginConfig[0].args.defaultConstraints[0].matchLabelKeys: no effect: a "
        "default constraint's selector is the pod's owner's (in kube-scheduler too)",
    )


def test_the_volume_binding_deadline_is_the_configurations() -> None:
    assert profiles.load(None).volume_bind_timeout_seconds == 600
    config = profiles.load(doc("VolumeBinding", {"bindTimeoutSeconds": 90}))
    assert config.volume_bind_timeout_seconds == 90


def test_args_of_a_plugin_splitsched_does_not_run_are_checked_and_accepted() -> None:
    config = profiles.load(
        doc("DynamicResources", {"filterTimeout": "10s", "bindingTimeout": "10m0s"})
    )
    assert config.notes == ()
    assert "filterTimeout" in refusal("DynamicResources", {"filterTimeout": 10})
