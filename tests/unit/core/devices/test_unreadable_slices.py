"""A ResourceSlice the watcher cannot read: it keeps what can be read of its place (pool,
generation, node selection), and makes its pool invalid only where kube would have used
it: on the nodes it may serve, and only while its generation is the pool's current one
(kube drops outdated slices, and obsolete pools)."""

from __future__ import annotations

import json
from typing import Any

import yaml

from splitsched.core import models
from splitsched.core.convert.devices import slice_from_k8s
from splitsched.core.devices import model
from splitsched.core.devices.pools import Inventory, Pool
from tests.support.devices import NODE_1, NODE_2, device, network_slice, node_slice

NETWORK = yaml.safe_load(
    """
metadata: {name: rack-1-nics, resourceVersion: "5"}
spec:
  driver: driver-a
  pool: {name: rack-1, generation: 4, resourceSliceCount: 2}
  nodeSelector:
    nodeSelectorTerms:
    - matchExpressions: [{key: region, operator: In, values: [region-1]}]
  devices:
  - {name: nic-0, capacity: {speed: {value: fast}}}
"""
)


def unreadable(**spec: Any) -> model.ResourceSlice:
    raw = json.loads(json.dumps(NETWORK))
    raw["spec"].update(spec)
    s = slice_from_k8s(raw)
    assert "spec.devices[0].capacity[speed].value" in s.invalid_reason
    return s


def test_an_unreadable_slice_keeps_its_pool_generation_and_node_selection() -> None:
    s = unreadable()
    assert (s.driver, s.pool, s.generation, s.slice_count) == ("driver-a", "rack-1", 4, 2)
    assert s.node_selector == (
        models.NodeSelectorTerm((models.NodeSelectorRequirement("region", "In", ("region-1",)),)),
    )
    per_device = unreadable(nodeSelector=None, perDeviceNodeSelection=True)
    assert per_device.per_device_node_selection and per_device.node_selector is None
    lost = unreadable(pool={"name": "rack-1", "generation": "four", "resourceSliceCount": 0})
    assert (lost.generation, lost.slice_count) == (model.UNKNOWN_GENERATION, 1)
    assert unreadable(nodeSelector={"nodeSelectorTerms": 3}).node_selector is None


def pools(node: models.Node, *slices: model.ResourceSlice) -> list[Pool]:
    return Inventory(slices).pools_for(node)


def readable(
    name: str, generation: int, node: str = "node-1", count: int = 1
) -> model.ResourceSlice:
    return node_slice(
        name, node, device(f"{name}-gpu"), pool="rack-1", generation=generation, count=count
    )


def invalid(found: list[Pool]) -> list[str]:
    return [p.invalid_reason for p in found]


def test_an_unreadable_slice_of_the_current_generation_makes_its_pool_invalid() -> None:
    bad = unreadable(pool={"name": "rack-1", "generation": 4, "resourceSliceCount": 2})
    found = pools(NODE_1, bad, readable("s2", 4, count=2))
    assert invalid(found) == [f"slice rack-1-nics: {bad.invalid_reason}"]
    # node-2 is not in region-1: the slice would serve no device there, the pool is fine.
    (pool,) = pools(NODE_2, bad, readable("s2", 4, "node-2", count=2))
    assert (pool.invalid_reason, pool.incomplete) == ("", False)
    assert [c.device.name for c in pool.candidates] == ["s2-gpu"]


def test_an_outdated_unreadable_slice_is_dropped_as_kube_drops_it() -> None:
    old = unreadable(pool={"name": "rack-1", "generation": 3, "resourceSliceCount": 1})
    (pool,) = pools(NODE_1, old, readable("s2", 4))
    assert (pool.invalid_reason, pool.incomplete) == ("", False)
    assert [c.device.name for c in pool.candidates] == ["s2-gpu"]


def test_an_unreadable_slice_of_an_obsolete_pool_is_dropped_with_it() -> None:
    old = unreadable(pool={"name": "rack-1", "generation": 4, "resourceSliceCount": 2})
    assert pools(NODE_1, old, readable("elsewhere", 5, "node-2", count=2)) == []


def test_an_unreadable_slice_of_unknown_generation_makes_its_pool_invalid() -> None:
    lost = unreadable(pool={"name": "rack-1", "generation": None, "resourceSliceCount": 1})
    assert lost.generation == model.UNKNOWN_GENERATION
    assert invalid(pools(NODE_1, lost, readable("s2", 4))) == [
        f"slice rack-1-nics: {lost.invalid_reason}"
    ]


def test_an_unreadable_slice_whose_node_selection_is_unknown_counts_on_every_node() -> None:
    per_device = unreadable(nodeSelector=None, perDeviceNodeSelection=True)
    for node in (NODE_1, NODE_2):
        assert invalid(pools(node, per_device)) == [
            f"slice rack-1-nics: {per_device.invalid_reason}"
        ]
    no_pool = unreadable(nodeSelector=None, pool=None)
    assert pools(NODE_1, no_pool) == []  # no pool to make invalid


def test_an_unreadable_slice_in_a_pool_still_short_is_both_incomplete_and_invalid() -> None:
    bad = unreadable(pool={"name": "rack-1", "generation": 4, "resourceSliceCount": 3})
    (pool,) = pools(NODE_1, bad, readable("s2", 4, count=3))
    assert pool.incomplete and pool.invalid_reason.startswith("slice rack-1-nics: ")


def test_a_nodes_pools_are_found_again_when_a_slice_or_its_labels_change() -> None:
    """The pools of a node are kept between pods; a slice's change or the node's new
    labels (which pick network-attached slices) must show at once."""
    gpu_zone = (models.NodeSelectorTerm(match_expressions=(
        models.NodeSelectorRequirement("zone", "In", ("a",)),)),)  # fmt: skip
    pools = Inventory([node_slice("s1", "node-1", device("gpu-0"))])
    plain = models.Node("node-1", labels={"zone": "b"})
    assert [p.name for p in pools.pools_for(plain)] == ["pool-1"]
    pools.upsert(network_slice("net", "pool-n", device("nic-0"), selector=gpu_zone))
    assert [p.name for p in pools.pools_for(plain)] == ["pool-1"]
    relabelled = models.Node("node-1", labels={"zone": "a"})
    assert [p.name for p in pools.pools_for(relabelled)] == ["pool-1", "pool-n"]
    pools.remove("s1")
    assert [p.name for p in pools.pools_for(relabelled)] == ["pool-n"]
