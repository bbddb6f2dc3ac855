"""The example configurations of kube-scheduler's documentation on kubernetes.io (stored in
data/schedconfig, each with its source in data/schedconfig/README.md) load unchanged, and
each profile's documented effect shows on a placement; the examples that name the docs'
own out-of-tree plugins (MyPlugin) are refused, naming the field, as kube-scheduler
refuses them (tests/integration/test_kube_scheduler_config.py runs kube-scheduler on
every file)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from splitsched.core import algorithm, models, profiles
from tests.support.builders import GI, algorithm_over, container, node, pod

DATA = Path(__file__).parents[1] / "data" / "schedconfig"
FOO, BAR = "intel.com/foo", "intel.com/bar"


def text(name: str) -> str:
    return (DATA / name).read_text()


def place(algo: algorithm.FrameworkAlgorithm, p: models.Pod) -> str | None:
    result = algo.schedule(p)
    return result.bind.node if result.bind is not None else None


def asking(name: str, requests: dict[str, int], scheduler: str, **kw: Any) -> models.Pod:
    return pod(name, containers=[container(requests)], scheduler_name=scheduler, **kw)


def test_the_minimal_configuration_is_the_default_profile() -> None:
    config = profiles.load_yaml(text("docs-config-minimal.yaml"))
    assert list(config.profiles) == [profiles.DEFAULT_SCHEDULER_NAME]
    assert [n.split(":")[0] for n in config.notes] == ["clientConnection"]
    nodes = [node("busy", cpu=4000, memory=8 * GI), node("idle", cpu=4000, memory=8 * GI)]
    bound = [asking("x", {models.CPU: 3000}, "", node="busy")]
    algo = algorithm_over(nodes, bound, config=text("docs-config-minimal.yaml"))
    assert place(algo, asking("p", {models.CPU: 100}, "splitsched")) == "idle"


def test_the_no_scoring_profile_scores_nothing_while_the_default_one_scores() -> None:
    """Multiple profiles: default-scheduler keeps the default plugins (the idle node wins on
    scores), no-scoring-scheduler has no PreScore or Score plugin (every feasible node
    scores 0, and the pick among them is random)."""
    config = text("docs-config-multiple-profiles.yaml")
    nodes = [node("busy", cpu=4000, memory=8 * GI), node("idle", cpu=4000, memory=8 * GI)]
    bound = [asking("x", {models.CPU: 3000}, "", node="busy")]
    loaded = profiles.load_yaml(config).profiles
    assert loaded["no-scoring-scheduler"].score == []
    assert loaded["no-scoring-scheduler"].pre_score == []
    picks = set()
    for seed in range(20):
        algo = algorithm_over(nodes, bound, config=config, seed=seed)
        assert place(algo, asking("p", {models.CPU: 100}, "default-scheduler")) == "idle"
        [placed] = algo.simulate([asking("q", {models.CPU: 100}, "no-scoring-scheduler")])
        assert placed.scored is not None and not placed.scored.total.any()
        picks.add(placed.result.bind.node if placed.result.bind else None)
    assert picks == {"busy", "idle"}


@pytest.mark.parametrize(
    ("name", "field", "plugin"),
    [
        ("docs-config-custom-score-plugins.yaml", "profiles[0].plugins.score.enabled[0]",
         "MyCustomPluginA"),
        ("docs-config-multipoint.yaml", "profiles[0].plugins.multiPoint.enabled[0]", "MyPlugin"),
    ],
)  # fmt: skip
def test_examples_with_out_of_tree_plugins_are_refused_naming_the_field(
    name: str, field: str, plugin: str
) -> None:
    with pytest.raises(profiles.ProfileError) as info:
        profiles.load_yaml(text(name))
    assert str(info.value).startswith(f"{field}: ") and f'"{plugin}" does not exist' in str(
        info.value
    )


def bin_packing_nodes() -> tuple[list[models.Node], list[models.Pod]]:
    """Two nodes with 4 of each extended resource: `packed` has 3 intel.com/foo in use and
    most of its cpu, `empty` nothing."""
    extra = {FOO: 4, BAR: 4}
    nodes = [
        node("packed", cpu=4000, memory=8 * GI, extra=extra),
        node("empty", cpu=4000, memory=8 * GI, extra=extra),
    ]
    bound = [asking("x", {FOO: 3, models.CPU: 3000, models.MEMORY: GI}, "", node="packed")]
    return nodes, bound


@pytest.mark.parametrize(
    "name",
    ["docs-bin-packing-most-allocated.yaml", "docs-bin-packing-requested-to-capacity-ratio.yaml"],
)
def test_bin_packing_puts_the_pod_where_the_extended_resource_is_most_used(name: str) -> None:
    """The default (LeastAllocated) spreads the pod onto the empty node; with either of the
    docs' bin-packing strategies it goes where intel.com/foo is already used."""
    nodes, bound = bin_packing_nodes()
    p = asking("p", {FOO: 1, models.CPU: 100, models.MEMORY: GI}, "splitsched")
    assert place(algorithm_over(nodes, bound), p) == "empty"
    assert place(algorithm_over(nodes, bound, config=text(name)), p) == "packed"


def test_requested_to_capacity_ratio_scores_only_the_listed_resources() -> None:
    """The docs: with only intel.com/foo and intel.com/bar listed, cpu and memory do not
    count: NodeResourcesFit scores the nodes by foo's use alone (bar is not requested)."""
    nodes, bound = bin_packing_nodes()
    algo = algorithm_over(
        nodes, bound, config=text("docs-bin-packing-requested-to-capacity-ratio.yaml")
    )
    [placed] = algo.simulate([asking("p", {FOO: 1, models.CPU: 100}, "splitsched")])
    assert placed.scored is not None
    fit = dict(
        zip(placed.scored.rows.tolist(), placed.scored.per_plugin["NodeResourcesFit"], strict=True)
    )
    rows = {name: algo.table.row_of[name] for name in ("packed", "empty")}
    # shape 0 -> 0, 100 -> 10 (x10): utilisation after placing, 4/4 and 1/4.
    assert (fit[rows["packed"]], fit[rows["empty"]]) == (100, 25)


def spread_pods() -> tuple[list[models.Node], list[models.Pod], models.Pod]:
    """Zones a and b; two pods of ReplicaSet web in zone a, whose node is otherwise the
    less loaded; the next web pod, which has no spread constraints of its own."""
    nodes = [
        node("a1", cpu=8000, memory=16 * GI, zone="a", hostname=True),
        node("b1", cpu=8000, memory=16 * GI, zone="b", hostname=True),
    ]
    web = models.OwnerRef(kind="ReplicaSet", name="web", uid="rs-web", controller=True)
    bound = [
        asking("web-0", {models.CPU: 100}, "", node="a1", owner=web, labels={"app": "web"}),
        asking("web-1", {models.CPU: 100}, "", node="a1", owner=web, labels={"app": "web"}),
        asking("other", {models.CPU: 3000, models.MEMORY: 6 * GI}, "", node="b1"),
    ]
    new = asking("web-2", {models.CPU: 100}, "default-scheduler", owner=web, labels={"app": "web"})
    return nodes, bound, new


def test_cluster_level_default_constraints_spread_a_replica_set_over_zones() -> None:
    nodes, bound, new = spread_pods()
    spread = text("docs-topology-spread-default-constraints.yaml")
    none = text("docs-topology-spread-no-default-constraints.yaml")
    assert place(algorithm_over(nodes, bound, config=spread), new) == "b1"
    assert place(algorithm_over(nodes, bound, config=none), new) == "a1"


def test_node_affinity_per_profile_keeps_foo_scheduler_pods_on_foo_nodes() -> None:
    config = text("docs-node-affinity-per-profile.yaml")
    nodes = [
        node("plain", cpu=4000, memory=8 * GI),
        node("foo", cpu=4000, memory=8 * GI, labels={"scheduler-profile": "foo"}),
    ]
    bound = [asking("x", {models.CPU: 2000}, "", node="foo")]
    algo = algorithm_over(nodes, bound, config=config)
    assert place(algo, asking("d", {models.CPU: 100}, "default-scheduler")) == "plain"
    assert place(algo, asking("f", {models.CPU: 100}, "foo-scheduler")) == "foo"
    too_big = algo.schedule(asking("g", {models.CPU: 3000}, "foo-scheduler"))
    assert too_big.wait is not None
    # kube-scheduler's words for a node the profile's addedAffinity excludes.
    assert too_big.wait.summary == (
        "0/2 nodes are available: 1 Insufficient cpu, 1 node(s) didn't match "
        "scheduler-enforced node affinity. no new claims to deallocate, preemption: 0/2 nodes "
        "are available: 1 No preemption victims found for incoming pod, 1 Preemption is not "
        "helpful for scheduling."
    )


def test_a_second_scheduler_named_my_scheduler() -> None:
    """The multiple-schedulers task's config: one profile, my-scheduler; leaderElection
    is splitsched's own flags' business, so it is noted as ignored."""
    config = profiles.load_yaml(text("docs-multiple-schedulers.yaml"))
    assert list(config.profiles) == ["my-scheduler"]
    assert [n.split(":")[0] for n in config.notes] == ["leaderElection"]
    algo = algorithm_over([node("n", cpu=1000)], config=text("docs-multiple-schedulers.yaml"))
    assert place(algo, asking("p", {models.CPU: 100}, "my-scheduler")) == "n"


@pytest.mark.parametrize(
    "name", ["docs-topology-spread-default-constraints.yaml", "docs-node-affinity-per-profile.yaml"]
)
def test_the_v1beta3_text_of_the_english_pages_is_refused_saying_why(name: str) -> None:
    """These pages' English text still says v1beta3 (see README.md), which kube-scheduler
    v1.36 no longer reads either."""
    old = text(name).replace(
        "kubescheduler.config.k8s.io/v1\n", "kubescheduler.config.k8s.io/v1beta3\n"
    )
    with pytest.raises(
        profiles.ProfileError, match=r"v1beta3 was removed in kube-scheduler v1\.29"
    ):
        profiles.load_yaml(old)
