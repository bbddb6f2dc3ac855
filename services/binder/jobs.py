"""The binder's work as values: what it was asked to do and what came of it.

``services.binder.server`` turns requests into ``BindJob`` and ``PreemptJob``; the
worker, ``binding`` and ``preemption`` modules carry them; ``classify`` answers in
``Verdict`` and ``Retry``; a finished job becomes one ``BindingOutcome`` (``outcome``).
No I/O here.
"""

from __future__ import annotations

import enum
import time
from collections.abc import Mapping
from dataclasses import dataclass, field

from splitsched import wire_devices
from splitsched.core.devices import model
from splitsched.core.devices.model import Allocation
from splitsched.v1 import scheduler_pb2, types_pb2

Result = scheduler_pb2.BindingOutcome.Result
BOUND = scheduler_pb2.BindingOutcome.BOUND
CONFLICT = scheduler_pb2.BindingOutcome.CONFLICT
POD_GONE = scheduler_pb2.BindingOutcome.POD_GONE
FAILED = scheduler_pb2.BindingOutcome.FAILED
DEADLINE_EXCEEDED = scheduler_pb2.BindingOutcome.DEADLINE_EXCEEDED
IN_PROGRESS = scheduler_pb2.BindingOutcome.IN_PROGRESS


@dataclass(frozen=True)
class PodKey:
    """A pod by namespace, name and uid (a preemptor or a preemption victim)."""

    namespace: str
    name: str
    uid: str

    def __str__(self) -> str:
        return f"{self.namespace}/{self.name}"

    def ref(self) -> types_pb2.PodRef:
        return types_pb2.PodRef(namespace=self.namespace, name=self.name, uid=self.uid)


@dataclass(frozen=True)
class VolumeBinding:
    """One claim of a decision's volume step (kube-scheduler's VolumeBinding PreBind):
    bind it to the static PV ``pv``, or, with ``pv`` empty, mark it for provisioning on the
    decision's node."""

    namespace: str
    claim: str
    pv: str = ""

    def __str__(self) -> str:
        return f"{self.namespace}/{self.claim}"


@dataclass(frozen=True)
class ClaimWrite:
    """One ResourceClaim of a decision's device step (kube-scheduler's DynamicResources
    PreBind): write ``allocation`` to it and reserve it for the pod; with ``allocation``
    None the claim is already allocated (shared) and only reserved."""

    namespace: str
    name: str
    uid: str
    allocation: Allocation | None = None

    def __str__(self) -> str:
        return f"{self.namespace}/{self.name}"


@dataclass(frozen=True)
class BindJob:
    """One accepted decision."""

    decision_id: str
    namespace: str
    name: str
    uid: str
    node: str
    deadline: float  # wall-clock seconds (time.time())
    max_attempts: int
    node_version: int = 0
    profile: str = ""
    trace_context: Mapping[str, str] = field(default_factory=dict)
    accepted_at: float = field(default_factory=time.monotonic)
    #: Who asked (the caller's certificate identity), for the log line of a refusal.
    caller: str = ""
    #: The claims to bind (or provision) before the Binding; empty for most pods.
    volumes: tuple[VolumeBinding, ...] = ()
    #: The ResourceClaims to allocate or reserve before the Binding; empty for most pods.
    claim_writes: tuple[ClaimWrite, ...] = ()

    @property
    def pod(self) -> PodKey:
        return PodKey(self.namespace, self.name, self.uid)


@dataclass(frozen=True)
class PreemptJob:
    """One accepted preemption: nominate ``preemptor`` to ``node``, evict ``victims``."""

    decision_id: str
    preemptor: PodKey
    node: str
    victims: tuple[PodKey, ...]
    deadline: float  # wall-clock seconds (time.time())
    message: str = ""
    trace_context: Mapping[str, str] = field(default_factory=dict)
    accepted_at: float = field(default_factory=time.monotonic)
    #: Who asked (the caller's certificate identity), for the log line of a refusal.
    caller: str = ""


@dataclass(frozen=True)
class Verdict:
    """What an API answer decided: a result for the decision and why."""

    result: int  # a BindingOutcome.Result
    message: str = ""


@dataclass(frozen=True)
class Retry:
    """An answer that decided nothing: try again (after ``retry_after`` when the server
    said so). ``unsure``: the request may have taken effect although the answer says not
    (no answer at all, a 5xx, a 409 the pod could not be read after)."""

    error: str
    retry_after: float | None = None
    unsure: bool = False


@dataclass(frozen=True)
class BindResult:
    """What happened to a decision, before it becomes a ``BindingOutcome``."""

    result: int
    message: str
    attempts: int
    last_http_status: int


class EvictionState(enum.StrEnum):
    """What happened to one preemption victim."""

    EVICTED = "evicted"
    GONE = "gone"  # already deleted, or re-created under another uid
    REFUSED = "refused"  # a PodDisruptionBudget forbids it
    FAILED = "failed"  # another final error
    DEADLINE = "deadline"  # retries ran out
    SKIPPED = "skipped"  # not attempted: another victim's eviction failed first


@dataclass(frozen=True)
class Eviction:
    """What happened to one victim."""

    victim: PodKey
    state: EvictionState
    message: str
    attempts: int
    last_status: int


def outcome(
    decision_id: str,
    *,
    pod: PodKey,
    node: str,
    result: BindResult,
    binder_id: str,
    trace_context: Mapping[str, str],
    volumes: tuple[VolumeBinding, ...] = (),
    claims: tuple[ClaimWrite, ...] = (),
) -> scheduler_pb2.BindingOutcome:
    """The report of a decision about ``pod`` and ``node``, with its volume step's claims
    and its device step's writes (a scheduler that took over holds them while the
    decision is in flight)."""
    report = scheduler_pb2.BindingOutcome(
        decision_id=decision_id,
        pod=pod.ref(),
        node=node,
        result=result.result,  # type: ignore[arg-type]
        message=result.message,
        attempts=result.attempts,
        last_http_status=result.last_http_status,
        binder_id=binder_id,
        trace_context=dict(trace_context),
        volume_bindings=[
            types_pb2.VolumeBinding(claim_namespace=v.namespace, claim_name=v.claim, pv_name=v.pv)
            for v in volumes
        ],
    )
    for claim in claims:
        write = model.ClaimWrite(claim.namespace, claim.name, claim.uid, claim.allocation)
        wire_devices.claim_write_to_proto(write, report.claim_writes.add())
    return report


def preemption_outcome(
    job: PreemptJob, result: BindResult, *, binder_id: str
) -> scheduler_pb2.BindingOutcome:
    """A preemption's report: pod = the preemptor, node = the nominated node, and the
    victims, so a scheduler that did not make it can hold its room."""
    report = outcome(
        job.decision_id, pod=job.preemptor, node=job.node, result=result, binder_id=binder_id,
        trace_context=job.trace_context,
    )  # fmt: skip
    report.preemption = True
    report.victims.extend(v.ref() for v in job.victims)
    return report
