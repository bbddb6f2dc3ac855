"""A pod's claims checked and made ready for one node's search, before any search, as
kube's allocator does it (validateDeviceRequest and the checks around it).

Claim after claim: each request, and each of a `firstAvailable` list's subrequests, is
checked in turn (an empty selector, then its class, then its mode). An `All` request's
devices are listed there and then, once: a pool still being published or invalid is an
error for it, and so is a selector failing on one of its devices, whether or not the
search would reach the request. Then the claim's fewest devices (the smallest
subrequest of each list, an `All` request's whole list) must be within the 32 a claim
holds, and only then are its constraints checked.

kube names a subrequest by its own name in these errors ("request big"), not
"request/subrequest" as the allocation records it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from splitsched.core.devices import model, usable
from splitsched.core.devices.pools import Candidate, Pool
from splitsched.core.devices.selectors import Selector, SelectorError, compile_selector


class AllocationError(Exception):
    """The claims cannot be allocated on any node as they stand (kube: a Filter error)."""


def claim_label(claim: model.ResourceClaim) -> str:
    return f"{claim.namespace}/{claim.name}" if claim.namespace else claim.name


def own_name(spec: model.RequestSpec) -> str:
    """The name kube's messages give a request: a subrequest's own ("big" of "gpu/big")."""
    return spec.name.rpartition("/")[2]


def constraint_applies(constraint: model.MatchAttribute, request: str) -> bool:
    """Whether a constraint binds the devices of `request` (a subrequest is bound by its
    own name and by its list's)."""
    names = constraint.requests
    return not names or request in names or request.split("/", 1)[0] in names


@dataclass(slots=True, eq=False)
class Plan:
    """One request or subrequest, checked, with its class. Candidates are named by their
    place in the search's list (the devices of the node's complete, valid pools, in
    order): `verdicts` keeps whether each passes the selectors (kube's
    deviceMatchesRequest), and `every`, for `All`, holds the places of the devices it
    must take."""

    spec: model.RequestSpec
    device_class: model.DeviceClass
    verdicts: list[bool | None]
    every: tuple[int, ...] | None = None
    #: the class's selectors, then the request's own, compiled
    selectors: tuple[tuple[Selector, ...], tuple[Selector, ...]] = ((), ())

    @property
    def need(self) -> int:
        return len(self.every) if self.every is not None else self.spec.count


@dataclass(frozen=True, slots=True)
class ClaimPlan:
    """A claim ready for the search: per request, its plan (or its subrequests' plans, in
    order), and whether it is a prioritized list."""

    claim: model.ResourceClaim
    requests: tuple[tuple[Plan, ...], ...]
    prioritized: tuple[bool, ...]


def plan_claims(
    claims: Sequence[model.ResourceClaim],
    pools: Sequence[Pool],
    classes: Mapping[str, model.DeviceClass],
    searched: int,
) -> list[ClaimPlan]:
    """Every claim checked, in order; `searched` is how many candidates the search walks
    (the devices of the node's complete, valid pools). Raises AllocationError."""
    return [_plan_claim(claim, pools, classes, searched) for claim in claims]


def _plan_claim(
    claim: model.ResourceClaim,
    pools: Sequence[Pool],
    classes: Mapping[str, model.DeviceClass],
    searched: int,
) -> ClaimPlan:
    requests: list[tuple[Plan, ...]] = []
    fewest = 0
    for request in claim.requests:
        plans = tuple(
            _plan_request(claim, spec, pools, classes, searched) for spec in request.alternatives()
        )
        requests.append(plans)
        if plans:
            fewest += min(p.need for p in plans)
    if fewest > model.MAX_ALLOCATION_RESULTS:
        raise AllocationError(
            f"claim {claim_label(claim)}: number of requested devices {fewest} exceeds the"
            f" claim limit of {model.MAX_ALLOCATION_RESULTS}"
        )
    for i, constraint in enumerate(claim.constraints):
        if constraint.distinct_attribute:  # kube's is on by default; not modelled yet
            unsupported = "distinctAttribute is not supported by splitsched yet"
            raise AllocationError(f"claim {claim_label(claim)}, constraint #{i}: {unsupported}")
        if not constraint.attribute:
            unsupported = "empty constraint (unsupported constraint type?)"
            raise AllocationError(f"claim {claim_label(claim)}, constraint #{i}: {unsupported}")
    prioritized = tuple(r.exactly is None for r in claim.requests)
    return ClaimPlan(claim, tuple(requests), prioritized)


def _plan_request(
    claim: model.ResourceClaim,
    spec: model.RequestSpec,
    pools: Sequence[Pool],
    classes: Mapping[str, model.DeviceClass],
    searched: int,
) -> Plan:
    if not all(spec.selectors):
        i = spec.selectors.index("")
        raise AllocationError(
            f"{_where(claim, spec)}, selector #{i}: CEL expression empty"
            " (unsupported selector type?)"
        )
    if not spec.device_class:
        raise AllocationError(
            f"{_where(claim, spec)}: missing device class name (unsupported request type?)"
        )
    device_class = classes.get(spec.device_class)
    if device_class is None:
        raise AllocationError(
            f"{_where(claim, spec)}: could not retrieve device class {spec.device_class}"
        )
    compiled = (
        tuple(compile_selector(source) for source in device_class.selectors),
        tuple(compile_selector(source) for source in spec.selectors),
    )
    plan = Plan(spec, device_class, [None] * searched, selectors=compiled)
    if spec.mode == model.ALLOCATION_MODE_EXACT_COUNT:
        return plan
    if spec.mode != model.ALLOCATION_MODE_ALL:
        raise AllocationError(f"{_where(claim, spec)}: unsupported count mode {spec.mode}")
    plan.every = _every(claim, plan, pools, _where(claim, spec))
    return plan


def _where(claim: model.ResourceClaim, spec: model.RequestSpec) -> str:
    return f"claim {claim_label(claim)}, request {own_name(spec)}"


def _every(
    claim: model.ResourceClaim, plan: Plan, pools: Sequence[Pool], where: str
) -> tuple[int, ...]:
    """The places of the devices an `All` request takes: all its selectors pass, pool
    after pool; a pool that cannot be trusted is an error once the walk reaches it."""
    places: list[int] = []
    place = 0  # the pools walked so far are all complete and valid: the search's list
    for pool in pools:
        state = "being updated" if pool.incomplete else "invalid" if pool.invalid_reason else ""
        if state:
            raise AllocationError(
                f"{where}: asks for all devices, but resource pool {pool.path} is currently {state}"
            )
        for candidate in pool.candidates:
            if selectable(claim, plan, place, candidate):
                places.append(place)
            place += 1
    return tuple(places)


def selectable(claim: model.ResourceClaim, plan: Plan, position: int, candidate: Candidate) -> bool:
    """Whether `candidate` (at `position` in the search's list) passes the class's and
    then the request's selectors; a selector that fails raises AllocationError."""
    verdict = plan.verdicts[position]
    if verdict is None:
        verdict = _judge(claim, plan, candidate)
        plan.verdicts[position] = verdict
    return verdict


def peek(
    claim: model.ResourceClaim, plan: Plan, position: int, candidate: Candidate
) -> bool | None:
    """`selectable`, or None where it would raise (nothing is kept then)."""
    try:
        return selectable(claim, plan, position, candidate)
    except AllocationError:
        return None


def _judge(claim: model.ResourceClaim, plan: Plan, candidate: Candidate) -> bool:
    if usable.unusable_reason(candidate.device, plan.spec):
        return False  # an untolerated taint, or a feature not modelled yet: never offered
    return selectors_pass(claim, plan, candidate)


def selectors_pass(claim: model.ResourceClaim, plan: Plan, candidate: Candidate) -> bool:
    """Whether the device passes the class's and then the request's selectors, whether or
    not the request may use it; a selector that fails raises AllocationError."""
    for of_class, selectors in zip((True, False), plan.selectors, strict=True):
        for i, selector in enumerate(selectors):
            try:
                if not candidate.cel.matches(selector):
                    return False
            except SelectorError as exc:
                where = (
                    f"class {plan.device_class.name}" if of_class else f"claim {claim_label(claim)}"
                )
                raise AllocationError(f"{where}: selector #{i}: {_kube_words(exc)}") from exc
    return True


def _kube_words(exc: SelectorError) -> str:
    text = str(exc)
    return f"CEL compile error: {text}" if text.startswith("compilation failed") else text
