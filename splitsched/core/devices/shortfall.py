"""Claims that cannot be met on a node for want of devices, told without searching.

The search can take combinatorially long to find that out (a request for 8 of 32
devices followed by one no device passes tries all C(32, 8) sets of the 8), so a search
that does not end quickly counts, for each request, the devices it could take: free ones
(any, for admin access) its selectors pass. The claims are short of devices when:
- a request has none of its alternatives possible: an exact count with fewer such
  devices than the count, an `All` with no device or (without admin access) one in use;
- a claim needs more results than the 32 it may hold, counting each request's smallest
  possible alternative;
- a claim's requests without admin access need more devices together than they can
  share (they never share one), or the pod's claims do.

Saying "no" early must give the answer kube's full search gives. It does when the search
could raise no error on the way: so the count gives up (and the search decides) when a
selector fails on a device the search might judge, or when an `All` request is under a
constraint (kube raises when one of its devices breaks it).
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass

from splitsched.core.devices import model
from splitsched.core.devices.pools import Candidate
from splitsched.core.devices.requests import ClaimPlan, Plan, constraint_applies, peek

DeviceId = tuple[str, str, str]


class _Unsure(Exception):
    """A selector failed on a device: only the search can tell whether kube reaches it."""


@dataclass(frozen=True, slots=True)
class _Need:
    """What one request needs at the least: devices, the places of those it could take,
    and whether they are its own (no admin access: a device no other request shares)."""

    count: int
    places: frozenset[int]
    exclusive: bool


def short_of_devices(
    plans: Sequence[ClaimPlan], candidates: Sequence[Candidate], allocated: Collection[DeviceId]
) -> bool:
    """True when the claims cannot all be allocated from `candidates` (the search's list),
    and kube's search would have ended without an error."""
    if any(_all_under_constraint(p) for p in plans):
        return False
    free = [c.device_id not in allocated for c in candidates]
    pod_count, pod_places = 0, set[int]()
    for plan in plans:
        try:
            needs = [_need(plan, alternatives, candidates, free) for alternatives in plan.requests]
        except _Unsure:
            return False
        if any(n is None for n in needs):
            return True
        counted = [n for n in needs if n is not None]
        if sum(n.count for n in counted) > model.MAX_ALLOCATION_RESULTS:
            return True
        own = [n for n in counted if n.exclusive]
        count, places = sum(n.count for n in own), set[int]().union(*(n.places for n in own))
        if count > len(places):
            return True
        pod_count += count
        pod_places |= places
    return pod_count > len(pod_places)


def _all_under_constraint(plan: ClaimPlan) -> bool:
    return any(
        p.every is not None and constraint_applies(c, p.spec.name)
        for alternatives in plan.requests
        for p in alternatives
        for c in plan.claim.constraints
    )


def _need(
    plan: ClaimPlan,
    alternatives: tuple[Plan, ...],
    candidates: Sequence[Candidate],
    free: Sequence[bool],
) -> _Need | None:
    """The least one request needs over its possible alternatives; None if none is."""
    possible = [
        n for n in (_alternative(plan, p, candidates, free) for p in alternatives) if n is not None
    ]
    if not possible:
        return None
    return _Need(
        min(n.count for n in possible),
        frozenset().union(*(n.places for n in possible)),
        all(n.exclusive for n in possible),
    )


def _alternative(
    plan: ClaimPlan, request: Plan, candidates: Sequence[Candidate], free: Sequence[bool]
) -> _Need | None:
    admin = request.spec.admin_access
    if request.every is not None:  # All: its devices are known, each must be free
        places = frozenset(request.every)
        if not places or not (admin or all(free[i] for i in places)):
            return None
        return _Need(len(places), places, not admin)
    passing = set()
    for i, candidate in enumerate(candidates):
        if not (admin or free[i]):
            continue
        verdict = peek(plan.claim, request, i, candidate)
        if verdict is None:
            raise _Unsure
        if verdict:
            passing.add(i)
    if len(passing) < request.spec.count:
        return None
    return _Need(request.spec.count, frozenset(passing), not admin)
