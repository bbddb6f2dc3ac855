"""bench.core's streams: the mixed shape really mixes, and a snapshot binds every pod."""

from __future__ import annotations

import itertools
from collections import Counter

from bench import core, core_shapes


def test_mixed_pods_differ_in_the_proportions_the_issue_asks_for() -> None:
    pods = core_shapes.make_pods(4000, shape="mixed", prefix="p")
    spread = sum(1 for p in pods if p.topology_spread_constraints) / len(pods)
    affinity = sum(1 for p in pods if p.node_affinity) / len(pods)
    anti = sum(1 for p in pods if p.pod_anti_affinity) / len(pods)
    assert 0.27 < spread < 0.33 and 0.17 < affinity < 0.23 and 0.08 < anti < 0.12
    sizes = Counter(p.containers[0].requests["cpu"] for p in pods)
    assert len(sizes) == len(core_shapes.SIZES)
    differ = sum(
        1
        for a, b in itertools.pairwise(pods)
        if (a.labels, a.containers) != (b.labels, b.containers)
    )
    assert differ > len(pods) / 2  # consecutive pods differ: the score memo cannot coast


def test_a_snapshot_binds_every_pod_and_spreads_them_over_the_nodes() -> None:
    nodes = core_shapes.make_nodes(30, shape="mixed")
    bound = core_shapes.bind_round(core_shapes.make_pods(300, shape="mixed", prefix="b"), nodes)
    per_node = Counter(p.node_name for p in bound)
    assert set(per_node) == {n.name for n in nodes} and set(per_node.values()) == {10}
    assert all(p.phase == "Running" for p in bound)


def test_a_full_mixed_run_places_pods_and_reports_the_build_and_rss() -> None:
    result = core.run(60, 50, 0, profile=False, shape="mixed", bound_pods=300)
    assert result["placed"] == 50 and result["bound_pods"] == 300
    build, rss = result["view_build_seconds"], result["peak_rss_mib"]
    assert isinstance(build, float) and build >= 0
    assert isinstance(rss, int) and rss > 0
