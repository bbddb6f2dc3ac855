"""What each run saw of each pod, and whether splitsched agrees with kube-scheduler. Pure.

Both runs of a seed see the same state for every pod (the splitsched run is set back to
kube-scheduler's placements after each pod; ``runner``), so per pod they must agree on:

* ``binds``: whether the pod binds at all;
* ``feasible``: the set of nodes that pass every filter (kube-scheduler's, recorded by the
  extender; splitsched's, from its Simulate API in the same state);
* ``placement``: each scheduler's node lies in the other's feasible set (implied by equal
  feasible sets; kept apart because it is what a user sees);
* ``message``: the FailedScheduling message of a pod that binds nowhere, word for word;
* ``gated``: a pod created with scheduling gates is left alone (not bound, no Event, its
  PodScheduled condition still the API server's SchedulingGated) until they are removed.

A check that does not apply (messages of a bound pod) is None. Score tie-breaks never
matter: no check compares the chosen node itself.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

CHECKS = ("binds", "feasible", "placement", "message", "gated")


@dataclass(frozen=True)
class PodOutcome:
    """One pod in one run, in the scenario's local names."""

    pod: str
    node: str | None
    message: str | None = None
    #: Nodes that passed every filter; None when the scheduler did not say.
    feasible: frozenset[str] | None = None
    reporter: str = ""
    timed_out: bool = False
    #: After this pod the run's state was set back to the reference run's placement.
    realigned: bool = False
    #: A gated pod: nothing touched it until its gates were removed (None: not gated).
    gate_kept: bool | None = None
    #: Every ResourceClaim's allocation after this pod, local names (``deviceops``).
    claims: dict[str, Any] = field(default_factory=dict, compare=False)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"node": self.node}
        if self.message is not None:
            out["message"] = self.message
        if self.feasible is not None:
            out["feasible"] = sorted(self.feasible)
        for key in ("reporter", "timed_out", "realigned"):
            if getattr(self, key):
                out[key] = getattr(self, key)
        if self.gate_kept is not None:
            out["gate_kept"] = self.gate_kept
        return out


@dataclass(frozen=True)
class Verdict:
    pod: str
    kube: PodOutcome
    ours: PodOutcome
    checks: dict[str, bool | None] = field(default_factory=dict)
    #: The documented difference this disagreement is (``known.KNOWN``), if any.
    known: str | None = None

    @property
    def agrees(self) -> bool:
        return all(v is not False for v in self.checks.values())

    @property
    def failed(self) -> list[str]:
        return [name for name in CHECKS if self.checks.get(name) is False]


def checks(kube: PodOutcome, ours: PodOutcome) -> dict[str, bool | None]:
    """The checks of the module docstring for one pod."""
    if kube.timed_out or ours.timed_out:
        return dict.fromkeys(CHECKS, False)
    kube_set, our_set = kube.feasible, ours.feasible
    out: dict[str, bool | None] = {"binds": (kube.node is None) == (ours.node is None)}
    out["feasible"] = kube_set is not None and kube_set == our_set
    if kube.node is not None and ours.node is not None:
        out["placement"] = (
            kube_set is not None
            and our_set is not None
            and ours.node in kube_set
            and kube.node in our_set
        )
    else:
        out["placement"] = None
    if kube.node is None and ours.node is None:
        out["message"] = kube.message == ours.message
    else:
        out["message"] = None
    gated = (kube.gate_kept, ours.gate_kept)
    out["gated"] = None if gated == (None, None) else gated == (True, True)
    return out


def verdicts(kube: Sequence[PodOutcome], ours: Sequence[PodOutcome]) -> list[Verdict]:
    """One verdict per pod, in creation order (both runs must cover the same pods)."""
    if [k.pod for k in kube] != [o.pod for o in ours]:
        raise ValueError("the runs covered different pods")
    return [Verdict(k.pod, k, o, checks(k, o)) for k, o in zip(kube, ours, strict=True)]


@dataclass(frozen=True)
class Tally:
    pods: int
    agreed: int
    #: Disagreements that are documented differences (``known``), by id.
    known: dict[str, int]
    #: Pods failing each check.
    failed: dict[str, int]

    @property
    def percent(self) -> float:
        return 100.0 * self.agreed / self.pods if self.pods else 100.0

    @property
    def unexplained(self) -> int:
        return self.pods - self.agreed - sum(self.known.values())


def tally(results: Sequence[Verdict]) -> Tally:
    known: dict[str, int] = {}
    failed = dict.fromkeys(CHECKS, 0)
    for v in results:
        if not v.agrees and v.known:
            known[v.known] = known.get(v.known, 0) + 1
        for name in v.failed:
            failed[name] += 1
    return Tally(
        pods=len(results), agreed=sum(v.agrees for v in results), known=known, failed=failed
    )


@dataclass
class SeedResult:
    """Both runs of one seed."""

    seed: int
    nodes: int
    pods: int
    verdicts: list[Verdict] = field(default_factory=list)
    #: The runs' nodes differed (a controller changed their taints): not comparable.
    cluster_differs: str | None = None
    seconds: float = 0.0
    error: str | None = None

    @property
    def tally(self) -> Tally:
        return tally(self.verdicts)
