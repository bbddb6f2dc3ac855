"""DevicePacking: topology-aware device packing, splitsched's own plugin, off unless a
profile enables it (it is not kube-scheduler's; its default profile never runs it).

PreFilter hands DynamicResources a `devices.packing.Packing` through the cycle state
(`dynamic_resources.PACKING`): among the allocations that satisfy the pod's claims on a
node, DynamicResources' Filter then keeps the one that holds the pod's devices in the
smallest topology unit and leaves the largest free units whole, and its Reserve assumes
that one. Score (0-100) prefers the nodes where the kept allocation fits the smallest
free unit most tightly and leaves the node's devices fullest, so small claims fill nodes
already in use and whole nodes stay free for 8-device claims. Pods without claims are
left alone (PreFilter SKIP, Score 0 everywhere).

Args (`DevicePackingArgs`): `topologyAttributes`, the attribute names of the topology
levels, outermost first (default island, numaNode, pcieRoot; see
`devices.topology` for how a name is read).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

import numpy as np

from splitsched.core import framework, models
from splitsched.core.devices import packing, topology
from splitsched.core.nodetable import FloatArray, IntArray, NodeTable
from splitsched.core.plugins import dynamic_resources

ARG_LEVELS = "topologyAttributes"


class DevicePacking:
    name: ClassVar[str] = "DevicePacking"

    def __init__(self, args: Mapping[str, Any] | None = None) -> None:
        levels = (args or {}).get(ARG_LEVELS)
        if levels is None:
            levels = topology.DEFAULT_LEVELS
        if not levels or not all(isinstance(n, str) and n for n in levels):
            raise ValueError(f"{ARG_LEVELS}: must list one attribute name or more, got {levels!r}")
        self.packing = packing.Packing(tuple(levels))

    def pre_filter(
        self, state: framework.CycleState, pod: models.Pod, table: NodeTable
    ) -> framework.Status:
        if not pod.resource_claims:
            return framework.Status.skip()
        state.write(dynamic_resources.PACKING, self.packing)
        return framework.Status.success()

    def score(
        self, state: framework.CycleState, pod: models.Pod, table: NodeTable, rows: IntArray
    ) -> FloatArray:
        scores = np.zeros(rows.size, dtype=np.float64)
        if not pod.resource_claims:
            return scores
        allocations, in_use = dynamic_resources.chosen(state)
        for i, row in enumerate(rows.tolist()):
            taken = packing.taken_devices(allocations.get(row, ()))
            if taken:
                pools = table.devices.inventory.pools_for(table.nodes[row])
                scores[i] = self.packing.score(pools, in_use, taken)
        return scores

    def normalize(
        self, state: framework.CycleState, pod: models.Pod, scores: FloatArray
    ) -> FloatArray:
        return scores  # already 0-100
