"""Whether a pod's ResourceClaims can be met on one node: kube-scheduler's
DynamicResources Filter, in its words.

The claims still to allocate must all be allocated there at once (`allocator.allocate`,
with the devices other claims hold taken); the claims already allocated must be usable
from the node (their allocation's node selector). As in kube, the allocator speaks first:
its error, "invalid resource pools were encountered" or "cannot allocate all claims" wins
over "resourceclaim not available on the node", which a node gets only where the new
claims would fit. A problem with the claims themselves (a CEL selector that fails, a claim
past its device limit) is not a verdict on the node: `allocator.AllocationError` is
raised, and the plugin fails the cycle with it, as kube's Filter returns an Error; so is a
search that ran out of its budget ("node N: timed out trying to allocate devices").

With `packing` (the opt-in DevicePacking plugin), the allocation among those that fit is
chosen by topology (`devices.packing`); without it, kube's first answer, as kube.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from splitsched.core import models
from splitsched.core.devices import allocator, model, nodes
from splitsched.core.devices.packing import Packing
from splitsched.core.devices.requests import plan_claims
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


@dataclass(slots=True)
class BareNodes:
    """Whether the pod's claims passed the checks kube's allocator makes on a node without
    devices (its classes, selectors present, modes, counts): the same answer on every
    such node, so it is found once per pod, and the other nodes without devices (9,900 of
    10,000, say) are answered without a search."""

    checked: bool = False


def judge_node(
    node: models.Node,
    claims: PodClaims,
    view: DeviceView,
    in_use: frozenset[tuple[str, str, str]],
    packing: Packing | None = None,
    bare: BareNodes | None = None,
) -> tuple[str, tuple[model.Allocation, ...]]:
    """("", one allocation per claim to allocate) when the pod's claims can be met on the
    node, else (kube's reason, ()). `in_use` is `view.in_use()`, taken once per pod.
    Raises allocator.AllocationError for what is wrong with the claims themselves. With
    `bare`, a node without devices is answered from what the pod's first such node
    found."""
    allocations: tuple[model.Allocation, ...] = ()
    if claims.to_allocate:
        pools = view.inventory.pools_for(node)
        if not pools and bare is not None and all(c.requests for c in claims.to_allocate):
            if not bare.checked:  # raises as the allocator would, on the first such node
                plan_claims(claims.to_allocate, pools, view.classes, 0)
                bare.checked = True
            return CANNOT_ALLOCATE, ()
        try:
            allocate = packing.allocate if packing is not None else allocator.allocate
            found = allocate(claims.to_allocate, pools, view.classes, in_use, node)
        except allocator.InvalidPools as exc:
            return str(exc), ()
        except allocator.SearchBudgetExceeded as exc:  # kube: an Error, the pod backs off
            raise allocator.AllocationError(f"node {node.name}: {exc}") from exc
        if found is None:
            return CANNOT_ALLOCATE, ()
        allocations = tuple(found)
    if unavailable_on(node, claims):
        return NOT_AVAILABLE, ()
    return "", allocations


def unavailable_on(node: models.Node, claims: PodClaims) -> list[model.ResourceClaim]:
    """The pod's allocated claims whose devices the node cannot use (their allocation's
    node selector leaves it out): what DynamicResources' PostFilter may deallocate."""
    out = []
    for claim in claims.allocated:
        terms = claim.allocation.node_selector if claim.allocation is not None else None
        if terms is not None and not nodes.usable_on(node, "", False, terms):
            out.append(claim)
    return out
