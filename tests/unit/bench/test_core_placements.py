"""bench.core's placements do not move: the speed-ups of the core change no decision.

The digests were recorded on the core before its mixed-shape speed-ups (score memo per
shape, incremental spread counts, ...); a change that moves any pod to another node, or
leaves one unplaced that was placed, changes its digest. If a change is meant to move
pods (a scoring fix), record the new digests in the same commit and say why.
"""

from __future__ import annotations

import pytest

from bench import core


@pytest.mark.parametrize(
    ("shape", "nodes", "pods", "init_pods", "bound_pods", "placed", "digest"),
    [
        # Full and mixed: some pods fit nowhere, spread and anti-affinity count neighbours.
        ("mixed", 400, 600, 0, 4000, 591, "e4dc24af40422e48"),
        ("mixed", 120, 300, 50, 600, 300, "eb208d6e043dce02"),
        ("basic", 200, 400, 100, 1000, 400, "9d0bf418dc881f90"),
    ],
)
def test_the_same_pods_land_on_the_same_nodes(
    shape: str, nodes: int, pods: int, init_pods: int, bound_pods: int, placed: int, digest: str
) -> None:
    result = core.run(nodes, pods, init_pods, profile=False, shape=shape, bound_pods=bound_pods)
    assert (result["placed"], result["placements_digest"]) == (placed, digest)


def test_the_digest_tells_placements_apart() -> None:
    one = core.placements_digest([("a", "node-1"), ("b", None)])
    assert one == core.placements_digest([("a", "node-1"), ("b", None)])
    assert one != core.placements_digest([("a", "node-2"), ("b", None)])
    assert one != core.placements_digest([("b", None), ("a", "node-1")])
