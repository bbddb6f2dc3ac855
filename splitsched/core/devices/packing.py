"""Topology-aware choice among the allocations that satisfy a pod's claims on one node
(the opt-in DevicePacking plugin; HiveD's buddy idea on DRA's data).

kube's allocator takes the first complete answer in pool and device order. `Packing`
asks the same allocator again with the node's candidates reordered, one topology unit's
free devices first (`topology.unit_first`), for the units that could hold the pod's
devices, best fit first (fewest free, then innermost), at most `max_orders` of them; and
keeps the answer with the smallest fragmentation key (`topology.Layout.fragmentation`),
kube's own answer on a tie. Every answer comes from the allocator, so every kube rule
(selectors, constraints, devices in use, firstAvailable, the 32-device limit) holds for
the one chosen; an answer that picked other subrequests than kube's is not taken, and
where kube's order finds nothing, nothing is searched again (the search is complete:
the order cannot make claims fit). An alternative that errs or runs out of budget is
dropped: kube's answer stands.

`score` rates a node for the pod's devices there, 0-100: half how full the node's
devices are once they are taken (small claims go where devices are already in use,
leaving whole nodes for large ones), half how tightly the smallest unit holding them fits
them (a pod of 2 in a PCIe root with 2 free beats one with 4 free).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass

from splitsched.core import models
from splitsched.core.devices import allocator, model, topology
from splitsched.core.devices.pools import Pool
from splitsched.core.devices.topology import DeviceId, Layout

MAX_NODE_SCORE = 100
#: Reorderings tried per node by default (kube's own order is tried besides).
DEFAULT_MAX_ORDERS = 8


@dataclass(frozen=True, slots=True)
class Packing:
    """The topology levels to read (outermost first) and how many reorderings to try."""

    levels: tuple[str, ...] = topology.DEFAULT_LEVELS
    max_orders: int = DEFAULT_MAX_ORDERS

    def allocate(
        self,
        claims: Sequence[model.ResourceClaim],
        pools: Sequence[Pool],
        classes: Mapping[str, model.DeviceClass],
        in_use: Collection[DeviceId],
        node: models.Node,
    ) -> list[model.Allocation] | None:
        """`allocator.allocate`'s answer, or a better packed one (module docstring)."""
        first = allocator.allocate(claims, pools, classes, in_use, node)
        if first is None:
            return None
        layout = Layout.of(pools, in_use, self.levels)
        best, best_key = first, layout.fragmentation(taken_devices(first))
        need = len(taken_devices(first))
        units = [unit for unit, free in layout.units() if free >= need][: self.max_orders]
        for unit in units:
            reordered = topology.unit_first(pools, layout, unit)
            try:
                found = allocator.allocate(claims, reordered, classes, in_use, node)
            except (
                allocator.AllocationError,
                allocator.InvalidPools,
                allocator.SearchBudgetExceeded,
            ):
                continue
            if found is None or _requests(found) != _requests(first):
                continue
            key = layout.fragmentation(taken_devices(found))
            if key < best_key:
                best, best_key = found, key
        return best

    def score(
        self, pools: Sequence[Pool], in_use: Collection[DeviceId], taken: Collection[DeviceId]
    ) -> int:
        """`score` over the pools the pod's devices come from (a node's NICs do not make
        its GPUs look emptier)."""
        theirs = {(driver, pool) for driver, pool, _ in taken}
        mine = [p for p in pools if (p.driver, p.name) in theirs]
        return score(Layout.of(mine, in_use, self.levels), taken)


def taken_devices(allocations: Sequence[model.Allocation]) -> frozenset[DeviceId]:
    """The devices the allocations take for themselves (admin access takes none)."""
    return frozenset(r.device_id for a in allocations for r in a.results if not r.admin_access)


def _requests(allocations: Sequence[model.Allocation]) -> list[tuple[str, ...]]:
    return [tuple(r.request for r in a.results) for a in allocations]


def score(layout: Layout, taken: Collection[DeviceId]) -> int:
    """The module docstring's 0-100 rating of taking `taken` on the layout's node."""
    mine = [d for d in taken if d in layout.paths]
    if not mine:
        return 0
    unit = layout.smallest_unit(mine)
    fit = len(mine) / max(layout.free_in(unit), len(mine))
    fullness = (len(layout.paths) - len(layout.free) + len(mine)) / len(layout.paths)
    return round(MAX_NODE_SCORE * (fullness + fit) / 2)
