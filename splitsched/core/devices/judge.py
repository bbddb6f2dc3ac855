"""Whether a pod's ResourceClaims can be met on each node: kube-scheduler's
DynamicResources Filter, one answer per node table row, in its words.

A claim already allocated must be usable from the node (its allocation's node selector);
the claims still to allocate must all be allocated there at once (`allocator.allocate`,
with the devices other claims hold taken). A problem with the claims themselves (a CEL
selector that fails, a claim past its device limit) is the same on every node, so the
first one found is every node's answer and the search stops there.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from splitsched.core import models
from splitsched.core.devices import allocator, model, nodes
from splitsched.core.devices.view import DeviceView

NOT_AVAILABLE = "resourceclaim not available on the node"
CANNOT_ALLOCATE = "cannot allocate all claims"


@dataclass(frozen=True, slots=True)
class PodClaims:
    """The pod's claims, split as the Filter treats them."""

    allocated: tuple[model.ResourceClaim, ...]
    to_allocate: tuple[model.ResourceClaim, ...]

    @classmethod
    def of(cls, claims: Sequence[model.ResourceClaim]) -> PodClaims:
        return cls(
            tuple(c for c in claims if c.allocation is not None),
            tuple(c for c in claims if c.allocation is None),
        )


def judge_nodes(
    claims: PodClaims, nodes_: Sequence[models.Node], view: DeviceView
) -> list[tuple[str, model.Allocation | None]]:
    """Per node: ("", None) when every claim is already usable there, ("", allocation of
    the first claim to allocate) when the claims can be allocated there, or (reason,
    None) when they cannot."""
    in_use = view.in_use()
    out: list[tuple[str, model.Allocation | None]] = []
    for i, node in enumerate(nodes_):
        try:
            out.append(_judge(node, claims, view, in_use))
        except allocator.AllocationError as exc:
            return out + [(str(exc), None)] * (len(nodes_) - i)
    return out


def _judge(
    node: models.Node,
    claims: PodClaims,
    view: DeviceView,
    in_use: frozenset[tuple[str, str, str]],
) -> tuple[str, model.Allocation | None]:
    for claim in claims.allocated:
        terms = claim.allocation.node_selector if claim.allocation is not None else None
        if terms is not None and not nodes.usable_on(node, "", False, terms):
            return NOT_AVAILABLE, None
    if not claims.to_allocate:
        return "", None
    pools = view.inventory.pools_for(node)
    try:
        allocations = allocator.allocate(claims.to_allocate, pools, view.classes, in_use, node)
    except allocator.InvalidPools as exc:
        return str(exc), None
    if allocations is None:
        return CANNOT_ALLOCATE, None
    return "", allocations[0]
