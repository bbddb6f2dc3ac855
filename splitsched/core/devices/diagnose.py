"""Why a pod's claims cannot be allocated on one node, in more words than kube's.

kube-scheduler's Filter says only "cannot allocate all claims"; the FailedScheduling
message keeps those words (kube-scheduler agrees with us on them). A person asking
Explain why a GPU pod is pending wants to know which request could not be met and why, so
Explain adds what this module finds, node by node:

- the first request (in the pod's claim order, then the claim's) that no device on the
  node could meet on its own: how many devices it wants, of which class, under which
  selector, how many of the node's devices pass its selectors, and how many of those are
  free; for a `firstAvailable` list, each subrequest's count;
- else the first claim that cannot be met on its own although each request could
  (its requests share devices, or a matchAttribute constraint cannot hold);
- else the claims together want more than the node has free.

Only called for a node where the allocator already answered no, and never changes that
answer; a selector that fails on a device counts as not passing here (the Filter has
already turned such a failure into the cycle's error, when the search reached it). A
device that passes the selectors but may not be used (an untolerated taint, a feature
splitsched does not support yet) is told apart, with the reason.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass

from splitsched.core import models
from splitsched.core.devices import allocator, model, usable
from splitsched.core.devices.pools import Candidate, Pool
from splitsched.core.devices.requests import (
    AllocationError,
    ClaimPlan,
    Plan,
    claim_label,
    own_name,
    plan_claims,
    selectors_pass,
)

#: Steps the search for one claim alone may take here (Explain runs it per node).
ALONE_BUDGET = 2_000
#: A selector longer than this is cut, so one reason stays one line.
SELECTOR_CHARS = 120

DeviceId = tuple[str, str, str]


def why_not(
    claims: Sequence[model.ResourceClaim],
    pools: Sequence[Pool],
    classes: Mapping[str, model.DeviceClass],
    in_use: Collection[DeviceId],
    node: models.Node,
) -> str:
    """What kept `claims` (the pod's claims still to allocate) off `node`, in a sentence."""
    if not any(p.candidates for p in pools):
        return "no ResourceSlice offers devices to this node"
    candidates = [c for p in pools if not (p.incomplete or p.invalid_reason) for c in p.candidates]
    try:
        plans = plan_claims(claims, pools, classes, len(candidates))
    except AllocationError as exc:
        return str(exc)
    for plan in plans:
        for alternatives in plan.requests:
            unmet = _unmet_request(plan, alternatives, candidates, in_use)
            if unmet:
                return unmet
    for plan in plans:
        if _fails_alone(plan.claim, pools, classes, in_use, node):
            return _claim_unmet(plan)
    return "the pod's claims together want more devices than the node has free"


def _unmet_request(
    plan: ClaimPlan,
    alternatives: tuple[Plan, ...],
    candidates: Sequence[Candidate],
    in_use: Collection[DeviceId],
) -> str:
    """Why the request cannot be met by any of its alternatives, or "" if one could."""
    told = []
    for request in alternatives:
        count = _count(plan.claim, request, candidates, in_use)
        if _enough(request, count):
            return ""
        told.append(_told(request, count))
    if not told:
        return ""
    head = f"claim {claim_label(plan.claim)}, request {alternatives[0].spec.name.split('/')[0]}"
    if len(told) == 1:
        return f"{head}: {told[0]}"
    return f"{head}: no subrequest can be met: " + "; ".join(
        f"{own_name(a.spec)} {t}" for a, t in zip(alternatives, told, strict=True)
    )


@dataclass(slots=True)
class _Count:
    """Of the node's candidates: how many pass the request's selectors and may be used,
    how many of those are free (any, for admin access, which may share a device), and
    how many pass but may not be used (a taint, a feature not supported), with the first
    such reason."""

    matching: int = 0
    free: int = 0
    unusable: int = 0
    unusable_reason: str = ""


def _count(
    claim: model.ResourceClaim,
    request: Plan,
    candidates: Sequence[Candidate],
    in_use: Collection[DeviceId],
) -> _Count:
    count = _Count()
    for candidate in candidates:
        try:
            if not selectors_pass(claim, request, candidate):
                continue
        except AllocationError:
            continue
        reason = usable.unusable_reason(candidate.device, request.spec)
        if reason:
            count.unusable += 1
            count.unusable_reason = count.unusable_reason or reason
            continue
        count.matching += 1
        count.free += request.spec.admin_access or candidate.device_id not in in_use
    return count


def _enough(request: Plan, count: _Count) -> bool:
    if request.every is not None:  # All: every matching device, each free
        return count.matching > 0 and count.free == count.matching
    return count.free >= request.spec.count


def _told(request: Plan, count: _Count) -> str:
    spec = request.spec
    wants = "all devices" if request.every is not None else _devices(spec.count)
    what = f"wants {wants} of class {spec.device_class}{_selector(request)}"
    if count.matching == 0:
        told = f"{what}; no device of the node passes"
    else:
        told = f"{what}; {count.matching} of the node's devices pass, {count.free} of them free"
    if count.unusable:
        told += f"; {count.unusable} more cannot be used ({count.unusable_reason})"
    return told


def _devices(count: int) -> str:
    return "1 device" if count == 1 else f"{count} devices"


def _selector(request: Plan) -> str:
    """The request's own selectors, or else its class's: what the person wrote."""
    sources = request.spec.selectors or request.device_class.selectors
    if not sources:
        return ""
    text = " && ".join(sources)
    if len(text) > SELECTOR_CHARS:
        text = text[: SELECTOR_CHARS - 1] + "…"
    owner = "selector" if request.spec.selectors else "class selector"
    return f" ({owner} {text})"


def _fails_alone(
    claim: model.ResourceClaim,
    pools: Sequence[Pool],
    classes: Mapping[str, model.DeviceClass],
    in_use: Collection[DeviceId],
    node: models.Node,
) -> bool:
    """Whether the search says the claim cannot be allocated even on its own (an error or
    a search past its budget says nothing: no reason to blame this claim)."""
    try:
        found = allocator.allocate([claim], pools, classes, in_use, node, budget=ALONE_BUDGET)
    except (AllocationError, allocator.InvalidPools, allocator.SearchBudgetExceeded):
        return False
    return found is None


def _claim_unmet(plan: ClaimPlan) -> str:
    claim = plan.claim
    label = f"claim {claim_label(claim)}"
    if claim.constraints:
        attributes = ", ".join(c.attribute for c in claim.constraints)
        return (
            f"{label}: each request could be met, but no set of free devices for all of them"
            f" has the same {attributes} (matchAttribute)"
        )
    return f"{label}: each request could be met, but together they want more free devices"
