"""Picking devices for a pod's ResourceClaims on one node, with kube-scheduler's semantics.

First every claim is checked and its `All` requests' devices listed (`requests`), as
kube's allocator does before it searches; then a depth-first search, as kube's
structured allocator does it: claims in the pod's order, requests in the claim's order,
then one device slot after another, each tried against the node's candidates in pool
order; the first complete answer wins and every claim is allocated or none is. For one
request, devices are tried as combinations (each next device after the previous one's
place), so no set of devices is tried twice.

- `ExactCount` takes `count` devices; `All` takes every device the selectors pass in the
  node's pools, and fails if one of them is in use; a pool still being published is an
  error for `All` (kube's words) and is skipped otherwise.
- `firstAvailable` tries its subrequests in order; the first one under which everything
  after it can be allocated wins, and the result names it "request/subrequest".
- Admin access may take devices in use (by other claims, or earlier in this search), and
  its devices do not count as in use for others.
- `matchAttribute`: the first device sets the value the others must equal; a device
  without the attribute fails it.
- At most 32 devices per claim; a claim that must take more is an error, and a
  subrequest that would go past it gives way to the next, as soon as that is known (the
  devices picked before it do not change how many there are).

The search is bounded: kube stops a node's allocation after DRASchedulerFilterTimeout
(10 s), here it stops after `budget` steps (a step: one candidate tried for one device,
or one device of an `All` request taken), counted so the answer never depends on the
machine's speed. A step costs 0.4-0.6 µs in CPython (1.2 µs under 32 constraints), so
`SEARCH_STEP_BUDGET`, the default, is 10-25 ms of one node's search. A search still
going after `COUNT_DEVICES_AFTER` steps (or its whole budget, when that is smaller)
counts the devices its claims could take (`shortfall`): claims short of devices are
answered None there, not searched through every combination, and never time out.

What can only be an answer about this node (no devices that fit) is `None`; what is wrong
with the claims or classes themselves raises `AllocationError`, with kube's message; a
search past its budget raises `SearchBudgetExceeded` ("timed out trying to allocate
devices": kube v1.36's Filter turns it into an Error status "node <name>: timed out
trying to allocate devices", which sends the pod to backoff rather than waiting for an
event).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field

from splitsched.core import models
from splitsched.core.devices import model, shortfall
from splitsched.core.devices.pools import Candidate, Pool
from splitsched.core.devices.requests import (
    AllocationError,
    ClaimPlan,
    Plan,
    claim_label,
    constraint_applies,
    own_name,
    plan_claims,
    selectable,
)

__all__ = [
    "COUNT_DEVICES_AFTER",
    "INVALID_POOLS",
    "SEARCH_STEP_BUDGET",
    "TIMED_OUT",
    "AllocationError",
    "DeviceId",
    "InvalidPools",
    "SearchBudgetExceeded",
    "allocate",
    "claim_label",
]

DeviceId = tuple[str, str, str]
#: kube's per-node answer when nothing fit and a pool could not be trusted.
INVALID_POOLS = "invalid resource pools were encountered"
#: kube's words when a node's allocation runs out of time.
TIMED_OUT = "timed out trying to allocate devices"
#: Steps one node's search may take (see the module's docstring).
SEARCH_STEP_BUDGET = 20_000
#: Steps after which a search that has not ended counts the devices its claims could
#: take (`shortfall`); most searches end sooner, and need no count.
COUNT_DEVICES_AFTER = 64
NAME_FIELD = "metadata.name"


class InvalidPools(Exception):
    """Nothing fit on this node, and one of its pools was invalid."""


class SearchBudgetExceeded(Exception):
    """The search on this node took `steps` steps without an answer (kube: the Filter's
    timeout). A node's answer, not the claims': another node may answer quickly."""

    def __init__(self, steps: int) -> None:
        super().__init__(TIMED_OUT)
        self.steps = steps


class _Short(Exception):
    """The claims are short of devices on this node (`shortfall`): no search can help."""


class _LimitReached(Exception):
    """The request being started would take its claim past 32 devices, whichever devices
    the requests before it took: only another subrequest before it can help (kube's
    errAllocationResultMaxSizeExceeded)."""


def allocate(
    claims: Sequence[model.ResourceClaim],
    pools: Sequence[Pool],
    classes: Mapping[str, model.DeviceClass],
    allocated: Collection[DeviceId],
    node: models.Node,
    budget: int = SEARCH_STEP_BUDGET,
) -> list[model.Allocation] | None:
    """One allocation per claim (same order), or None when they do not fit on `node`.

    `allocated` holds the devices other claims hold or are being given (not those held
    with admin access). Raises AllocationError, InvalidPools or SearchBudgetExceeded as
    described above."""
    candidates = [c for p in pools if not (p.incomplete or p.invalid_reason) for c in p.candidates]
    plans = plan_claims(claims, pools, classes, len(candidates))
    search = _Search(plans, candidates, allocated, budget)
    if not search.run():
        if any(p.invalid_reason for p in pools):
            raise InvalidPools(INVALID_POOLS)
        return None
    return [search.allocation(i, node, classes) for i in range(len(claims))]


@dataclass(slots=True)
class _Constraint:
    """A matchAttribute being checked: the value the first device set, and how many
    devices hold it (back to no value when backtracking removes them all)."""

    spec: model.MatchAttribute
    value: model.AttributeValue | None = None
    held: int = 0

    def applies(self, request: str) -> bool:
        return constraint_applies(self.spec, request)

    def admits(self, device: model.Device) -> bool:
        value = device.attributes.get(self.spec.attribute)
        if value is None:
            return False
        return self.held == 0 or (
            self.value is not None and model.same_attribute(self.value, value)
        )

    def add(self, device: model.Device) -> None:
        if self.held == 0:
            self.value = device.attributes[self.spec.attribute]
        self.held += 1

    def remove(self) -> None:
        self.held -= 1
        if self.held == 0:
            self.value = None


@dataclass(slots=True)
class _ClaimState:
    plan: ClaimPlan
    constraints: list[_Constraint]
    picked: list[tuple[model.RequestSpec, Candidate]] = field(default_factory=list)
    #: request or subrequest name -> the constraints that bind its devices
    binding: dict[str, list[_Constraint]] = field(default_factory=dict)

    def constraints_of(self, spec: model.RequestSpec) -> list[_Constraint]:
        found = self.binding.get(spec.name)
        if found is None:
            found = [c for c in self.constraints if c.applies(spec.name)]
            self.binding[spec.name] = found
        return found


class _Search:
    def __init__(
        self,
        plans: Sequence[ClaimPlan],
        candidates: Sequence[Candidate],
        allocated: Collection[DeviceId],
        budget: int,
    ) -> None:
        self.plans = plans
        self.candidates = candidates
        self.allocated = allocated
        self.budget = budget
        self.steps = 0
        self.count_at = min(COUNT_DEVICES_AFTER, budget)
        self.states = [
            _ClaimState(p, [_Constraint(spec) for spec in p.claim.constraints]) for p in plans
        ]
        # device -> how many picks hold it, and by which claims (admin access may share).
        self.taking: dict[DeviceId, list[int]] = {}

    def run(self) -> bool:
        try:
            return self._claim(0)
        except _Short:
            return False
        except _LimitReached:  # cannot happen once the claims passed their checks
            return False

    def _step(self) -> None:
        if self.steps == self.count_at:
            if shortfall.short_of_devices(self.plans, self.candidates, self.allocated):
                raise _Short
            self.count_at = -1
        if self.steps == self.budget:
            raise SearchBudgetExceeded(self.steps)
        self.steps += 1

    # -- the search ----------------------------------------------------------------------

    def _claim(self, ci: int) -> bool:
        return ci == len(self.states) or self._request(ci, 0)

    def _request(self, ci: int, ri: int) -> bool:
        plan = self.states[ci].plan
        if ri == len(plan.requests):
            try:
                return self._claim(ci + 1)
            except _LimitReached:  # a later claim's limit: this claim's choices cannot help
                return False
        alternatives = plan.requests[ri]
        if not plan.prioritized[ri]:
            return self._start(ci, ri, alternatives[0])
        over_limit = bool(alternatives)
        for alternative in alternatives:
            try:
                if self._start(ci, ri, alternative):
                    return True
            except _LimitReached:
                continue  # a smaller subrequest may fit
            over_limit = False
        if over_limit:
            raise _LimitReached
        return False

    def _start(self, ci: int, ri: int, plan: Plan) -> bool:
        if plan.every is not None and not plan.every:
            return False  # All, and no device passes: this alternative cannot be met
        if len(self.states[ci].picked) + plan.need > model.MAX_ALLOCATION_RESULTS:
            raise _LimitReached
        if plan.every is not None:
            return self._every(ci, ri, plan, 0)
        return self._slot(ci, ri, plan, plan.need, 0)

    def _slot(self, ci: int, ri: int, plan: Plan, left: int, start: int) -> bool:
        if left == 0:
            return self._request(ci, ri + 1)
        state = self.states[ci]
        spec, verdicts = plan.spec, plan.verdicts
        binding = state.constraints_of(spec)
        for place in range(start, len(self.candidates)):
            self._step()
            candidate = self.candidates[place]
            if not self._free(ci, spec, candidate):
                continue
            verdict = verdicts[place]  # selectable()'s memo, read here on the hot path
            if verdict is None:
                verdict = selectable(state.plan.claim, plan, place, candidate)
            if not verdict:
                continue
            if binding and not all(c.admits(candidate.device) for c in binding):
                continue
            found = False
            self._take(ci, spec, candidate, binding)
            try:
                found = self._slot(ci, ri, plan, left - 1, place + 1)
            finally:
                if not found:
                    self._give_back(ci, candidate, binding)
            if found:
                return True
        return False

    def _every(self, ci: int, ri: int, plan: Plan, index: int) -> bool:
        """All: the next device is decided, with no alternative."""
        assert plan.every is not None
        if index == len(plan.every):
            return self._request(ci, ri + 1)
        self._step()
        state = self.states[ci]
        candidate = self.candidates[plan.every[index]]
        if not self._free(ci, plan.spec, candidate):
            return False
        binding = state.constraints_of(plan.spec)
        if not all(c.admits(candidate.device) for c in binding):
            raise AllocationError(
                f"claim {claim_label(state.plan.claim)}, request {own_name(plan.spec)}:"
                f" cannot add device {candidate.path} because a claim constraint would not be"
                " satisfied"
            )
        found = False
        self._take(ci, plan.spec, candidate, binding)
        try:
            found = self._every(ci, ri, plan, index + 1)
        finally:
            if not found:
                self._give_back(ci, candidate, binding)
        return found

    def _take(
        self, ci: int, spec: model.RequestSpec, candidate: Candidate, binding: list[_Constraint]
    ) -> None:
        self.states[ci].picked.append((spec, candidate))
        self.taking.setdefault(candidate.device_id, []).append(ci)
        for constraint in binding:
            constraint.add(candidate.device)

    def _give_back(self, ci: int, candidate: Candidate, binding: list[_Constraint]) -> None:
        for constraint in binding:
            constraint.remove()
        holders = self.taking[candidate.device_id]
        holders.pop()
        if not holders:
            del self.taking[candidate.device_id]
        self.states[ci].picked.pop()

    # -- the checks ----------------------------------------------------------------------

    def _free(self, ci: int, spec: model.RequestSpec, candidate: Candidate) -> bool:
        holders = self.taking.get(candidate.device_id, ())
        if spec.admin_access:
            return ci not in holders
        return not holders and candidate.device_id not in self.allocated

    # -- the answer ----------------------------------------------------------------------

    def allocation(
        self, ci: int, node: models.Node, classes: Mapping[str, model.DeviceClass]
    ) -> model.Allocation:
        state = self.states[ci]
        results = tuple(
            model.DeviceResult(spec.name, c.driver, c.pool, c.device.name, spec.admin_access)
            for spec, c in state.picked
        )
        return model.Allocation(
            results,
            _node_selector(state.plan.claim, [c for _, c in state.picked], node),
            _configs(state.plan.claim, [(spec.name, spec) for spec, _ in state.picked], classes),
        )


def _node_selector(
    claim: model.ResourceClaim, picked: Sequence[Candidate], node: models.Node
) -> tuple[models.NodeSelectorTerm, ...] | None:
    """Where the claim's devices can be used from, device after device as kube builds it:
    this node once one is node-local, else the network-attached slices' selectors merged
    into one term (a selector without terms adds nothing; None: any node)."""
    expressions: list[models.NodeSelectorRequirement] = []
    fields: list[models.NodeSelectorRequirement] = []
    for c in picked:
        if c.node_local:
            return (
                models.NodeSelectorTerm(
                    match_fields=(models.NodeSelectorRequirement(NAME_FIELD, "In", (node.name,)),)
                ),
            )
        if not c.node_selector:
            continue
        if len(c.node_selector) > 1:
            raise AllocationError(
                f"create NodeSelector for claim {claim.name}: unsupported"
                f" ResourceSlice.NodeSelector with {len(c.node_selector)} terms"
            )
        term = c.node_selector[0]
        for have, more in ((fields, term.match_fields), (expressions, term.match_expressions)):
            for req in more:
                if not any(_same_requirement(req, h) for h in have):
                    have.append(req)
    if not expressions and not fields:
        return None
    return (models.NodeSelectorTerm(tuple(expressions), tuple(fields)),)


def _same_requirement(a: models.NodeSelectorRequirement, b: models.NodeSelectorRequirement) -> bool:
    return a.key == b.key and a.operator == b.operator and set(a.values) == set(b.values)


def _configs(
    claim: model.ResourceClaim,
    picked: Sequence[tuple[str, model.RequestSpec]],
    classes: Mapping[str, model.DeviceClass],
) -> tuple[model.AllocatedConfig, ...]:
    """The class configurations of the classes used, then the claim's own for the
    requests (or chosen subrequests) it names, as kube copies them."""
    chosen: dict[str, model.RequestSpec] = {}
    for name, spec in picked:
        chosen.setdefault(name.split("/", 1)[0], spec)
    by_class: dict[str, list[str]] = {}
    for spec in chosen.values():
        if classes[spec.device_class].config:
            by_class.setdefault(spec.device_class, []).append(spec.name)
    configs = [
        model.AllocatedConfig("FromClass", tuple(names), text)
        for class_name, names in by_class.items()
        for text in classes[class_name].config
    ]
    for config in claim.config:
        if not config.requests:
            configs.append(model.AllocatedConfig("FromClaim", (), config.configuration))
            continue
        for request, spec in chosen.items():
            if request in config.requests or spec.name in config.requests:
                configs.append(
                    model.AllocatedConfig("FromClaim", config.requests, config.configuration)
                )
    return tuple(configs)
