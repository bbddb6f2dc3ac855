"""Picking devices for a pod's ResourceClaims on one node, with kube-scheduler's semantics.

A depth-first search, as kube's structured allocator does it: claims in the pod's order,
requests in the claim's order, then one device slot after another, each tried against the
node's candidates in pool order; the first complete answer wins and every claim is
allocated or none is. For one request, devices are tried as combinations (each next
device after the previous one's place), so no set of devices is tried twice.

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
  subrequest that would go past it gives way to the next.

What can only be an answer about this node (no devices that fit) is `None`; what is wrong
with the claims or classes themselves raises `AllocationError`, with kube's message.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field

from splitsched.core import models
from splitsched.core.devices import model
from splitsched.core.devices.pools import Candidate, Pool
from splitsched.core.devices.selectors import SelectorError, compile_selector

DeviceId = tuple[str, str, str]
#: kube's per-node answer when nothing fit and a pool could not be trusted.
INVALID_POOLS = "invalid resource pools were encountered"
NAME_FIELD = "metadata.name"


class AllocationError(Exception):
    """The claims cannot be allocated on any node as they stand (kube: a Filter error)."""


class InvalidPools(Exception):
    """Nothing fit on this node, and one of its pools was invalid."""


def allocate(
    claims: Sequence[model.ResourceClaim],
    pools: Sequence[Pool],
    classes: Mapping[str, model.DeviceClass],
    allocated: Collection[DeviceId],
    node: models.Node,
) -> list[model.Allocation] | None:
    """One allocation per claim (same order), or None when they do not fit on `node`.

    `allocated` holds the devices other claims hold or are being given (not those held
    with admin access). Raises AllocationError or InvalidPools as described above."""
    search = _Search(claims, pools, classes, allocated)
    if not search.run():
        if any(p.invalid_reason for p in pools):
            raise InvalidPools(INVALID_POOLS)
        return None
    return [search.allocation(i, node) for i in range(len(claims))]


def claim_label(claim: model.ResourceClaim) -> str:
    return f"{claim.namespace}/{claim.name}" if claim.namespace else claim.name


@dataclass(slots=True)
class _Constraint:
    """A matchAttribute being checked: the value the first device set, and how many
    devices hold it (back to no value when backtracking removes them all)."""

    spec: model.MatchAttribute
    value: model.AttributeValue | None = None
    held: int = 0

    def applies(self, request: str) -> bool:
        names = self.spec.requests
        return not names or request in names or request.split("/", 1)[0] in names

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
    claim: model.ResourceClaim
    constraints: list[_Constraint]
    picked: list[tuple[str, model.RequestSpec, Candidate]] = field(default_factory=list)


class _Search:
    def __init__(
        self,
        claims: Sequence[model.ResourceClaim],
        pools: Sequence[Pool],
        classes: Mapping[str, model.DeviceClass],
        allocated: Collection[DeviceId],
    ) -> None:
        self.pools = pools
        self.classes = classes
        self.allocated = allocated
        self.candidates = [c for p in pools if not p.incomplete for c in p.candidates]
        self.states = [
            _ClaimState(c, [_Constraint(spec) for spec in c.constraints]) for c in claims
        ]
        # device -> how many picks hold it, and by which claims (admin access may share).
        self.taking: dict[DeviceId, list[int]] = {}
        for state in self.states:
            self._validate(state.claim)

    def run(self) -> bool:
        return self._claim(0)

    # -- the search ----------------------------------------------------------------------

    def _claim(self, ci: int) -> bool:
        return ci == len(self.states) or self._request(ci, 0)

    def _request(self, ci: int, ri: int) -> bool:
        state = self.states[ci]
        if ri == len(state.claim.requests):
            return self._claim(ci + 1)
        for spec in state.claim.requests[ri].alternatives():
            fixed = self._all_devices(state.claim, spec) if spec.mode == "All" else None
            need = len(fixed) if fixed is not None else spec.count
            if fixed is not None and not fixed:
                continue  # All, and no device passes: this alternative cannot be met
            if len(state.picked) + need > model.MAX_ALLOCATION_RESULTS:
                continue  # past the claim's limit: let a smaller subrequest try
            if self._slot(ci, ri, spec, need, 0, fixed):
                return True
        return False

    def _slot(
        self,
        ci: int,
        ri: int,
        spec: model.RequestSpec,
        left: int,
        start: int,
        fixed: list[Candidate] | None,
    ) -> bool:
        if left == 0:
            return self._request(ci, ri + 1)
        if fixed is not None:  # All: the next device is decided, with no alternative
            candidate = fixed[len(fixed) - left]
            if not self._free(ci, spec, candidate):
                return False
            if not self._constraints_admit(ci, spec, candidate):
                raise AllocationError(
                    f"claim {claim_label(self.states[ci].claim)}, request {spec.name}: cannot"
                    f" add device {candidate.path} because a claim constraint would not be"
                    " satisfied"
                )
            return self._take_and_go_on(ci, ri, spec, left, 0, fixed, candidate)
        for pos in range(start, len(self.candidates)):
            candidate = self.candidates[pos]
            if not self._free(ci, spec, candidate) or not self._selectable(ci, spec, candidate):
                continue
            if not self._constraints_admit(ci, spec, candidate):
                continue
            if self._take_and_go_on(ci, ri, spec, left, pos + 1, None, candidate):
                return True
        return False

    def _take_and_go_on(
        self,
        ci: int,
        ri: int,
        spec: model.RequestSpec,
        left: int,
        next_start: int,
        fixed: list[Candidate] | None,
        candidate: Candidate,
    ) -> bool:
        state = self.states[ci]
        state.picked.append((spec.name, spec, candidate))
        self.taking.setdefault(candidate.device_id, []).append(ci)
        touched = [c for c in state.constraints if c.applies(spec.name)]
        for constraint in touched:
            constraint.add(candidate.device)
        if self._slot(ci, ri, spec, left - 1, next_start, fixed):
            return True
        for constraint in touched:
            constraint.remove()
        holders = self.taking[candidate.device_id]
        holders.pop()
        if not holders:
            del self.taking[candidate.device_id]
        state.picked.pop()
        return False

    # -- the checks ----------------------------------------------------------------------

    def _free(self, ci: int, spec: model.RequestSpec, candidate: Candidate) -> bool:
        holders = self.taking.get(candidate.device_id, ())
        if spec.admin_access:
            return ci not in holders
        return not holders and candidate.device_id not in self.allocated

    def _selectable(self, ci: int, spec: model.RequestSpec, candidate: Candidate) -> bool:
        claim = self.states[ci].claim
        device_class = self.classes[spec.device_class]
        for where, sources in (
            (f"class {device_class.name}", device_class.selectors),
            (f"claim {claim_label(claim)}", spec.selectors),
        ):
            for i, source in enumerate(sources):
                try:
                    if not candidate.cel.matches(compile_selector(source)):
                        return False
                except SelectorError as exc:
                    raise AllocationError(f"{where}: selector #{i}: {_kube_words(exc)}") from exc
        return True

    def _constraints_admit(self, ci: int, spec: model.RequestSpec, candidate: Candidate) -> bool:
        return all(
            c.admits(candidate.device) for c in self.states[ci].constraints if c.applies(spec.name)
        )

    def _all_devices(self, claim: model.ResourceClaim, spec: model.RequestSpec) -> list[Candidate]:
        for pool in self.pools:
            state = "being updated" if pool.incomplete else "invalid" if pool.invalid_reason else ""
            if state:
                raise AllocationError(
                    f"claim {claim_label(claim)}, request {spec.name}: asks for all devices,"
                    f" but resource pool {pool.path} is currently {state}"
                )
        ci = next(i for i, s in enumerate(self.states) if s.claim is claim)
        return [c for c in self.candidates if self._selectable(ci, spec, c)]

    def _validate(self, claim: model.ResourceClaim) -> None:
        label = claim_label(claim)
        minimum = 0
        for request in claim.requests:
            specs = request.alternatives()
            for spec in specs:
                problem = _request_problem(spec, self.classes)
                if problem:
                    raise AllocationError(f"claim {label}, request {spec.name}{problem}")
            minimum += min((s.count if s.mode != "All" else 0 for s in specs), default=0)
        for i, constraint in enumerate(claim.constraints):
            if not constraint.attribute:
                unsupported = "empty constraint (unsupported constraint type?)"
                raise AllocationError(f"claim {label}, constraint #{i}: {unsupported}")
        if minimum > model.MAX_ALLOCATION_RESULTS:
            raise AllocationError(
                f"claim {label}: number of requested devices {minimum} exceeds the claim"
                f" limit of {model.MAX_ALLOCATION_RESULTS}"
            )

    # -- the answer ----------------------------------------------------------------------

    def allocation(self, ci: int, node: models.Node) -> model.Allocation:
        state = self.states[ci]
        results = tuple(
            model.DeviceResult(name, c.driver, c.pool, c.device.name, spec.admin_access)
            for name, spec, c in state.picked
        )
        return model.Allocation(
            results,
            _node_selector([c for _, _, c in state.picked], node),
            _configs(state.claim, [(name, spec) for name, spec, _ in state.picked], self.classes),
        )


def _request_problem(spec: model.RequestSpec, classes: Mapping[str, model.DeviceClass]) -> str:
    """What makes a request impossible on every node, in kube's words after "claim C,
    request R"; "" when nothing does."""
    if not spec.device_class:
        return ": missing device class name (unsupported request type?)"
    if spec.device_class not in classes:
        return f": could not retrieve device class {spec.device_class}"
    if spec.mode not in (model.ALLOCATION_MODE_EXACT_COUNT, model.ALLOCATION_MODE_ALL):
        return f": unsupported count mode {spec.mode}"
    for i, source in enumerate(spec.selectors):
        if not source:
            return f", selector #{i}: CEL expression empty (unsupported selector type?)"
    return ""


def _kube_words(exc: SelectorError) -> str:
    text = str(exc)
    return f"CEL compile error: {text}" if text.startswith("compilation failed") else text


def _node_selector(
    picked: Sequence[Candidate], node: models.Node
) -> tuple[models.NodeSelectorTerm, ...] | None:
    """Where the claim's devices can be used from: this node if any is node-local, else
    the network-attached slices' selectors merged into one term (None: any node)."""
    if any(c.node_local for c in picked):
        return (
            models.NodeSelectorTerm(
                match_fields=(models.NodeSelectorRequirement(NAME_FIELD, "In", (node.name,)),)
            ),
        )
    expressions: list[models.NodeSelectorRequirement] = []
    fields: list[models.NodeSelectorRequirement] = []
    for c in picked:
        if c.node_selector is None:
            continue
        if len(c.node_selector) != 1:
            raise AllocationError(
                f"unsupported ResourceSlice.NodeSelector with {len(c.node_selector)} terms"
            )
        term = c.node_selector[0]
        for have, more in ((expressions, term.match_expressions), (fields, term.match_fields)):
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
