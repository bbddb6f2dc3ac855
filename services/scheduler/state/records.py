"""The scheduler state's values: pod records, decisions in flight, and the events it emits.

Plain data shared by the state's parts (`books`, `cycle`, `watch`, `outcomes`) and read by
the service around it: the API turns records into PodStatus and events into the
WatchDecisions stream, the main loop sends decisions to binders and counts events in its
metrics.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from splitsched.core import models, storage
from splitsched.core.devices.model import ClaimRef, ClaimWrite
from splitsched.core.queue import QueuedPod


class Phase(enum.Enum):
    GATED = "Gated"  # spec.schedulingGates not all removed: never tried, nothing written
    WAITING = "Waiting"
    PREEMPTING = "Preempting"
    BINDING = "Binding"
    BOUND = "Bound"


class Outcome(enum.Enum):
    BOUND = "Bound"
    CONFLICT = "Conflict"
    POD_GONE = "PodGone"
    FAILED = "Failed"
    DEADLINE_EXCEEDED = "DeadlineExceeded"
    # Not an outcome: the binder still works on the decision (re-reported every few
    # seconds), so a scheduler that took over or restarted learns what is in flight.
    IN_PROGRESS = "InProgress"


class EventKind(enum.StrEnum):
    """What a DecisionEvent reports; the names are the WatchDecisions stream's kinds."""

    # The scheduler's own decisions.
    SCHEDULED = "SCHEDULED"
    UNSCHEDULABLE = "UNSCHEDULABLE"
    PREEMPTING = "PREEMPTING"
    # Outcomes of decisions (a binder's report, the watch, or the deadline).
    BOUND = "BOUND"
    BIND_FAILED = "BIND_FAILED"
    CONFLICT = "CONFLICT"
    POD_GONE = "POD_GONE"

    @property
    def is_outcome(self) -> bool:
        return self in OUTCOME_KINDS


OUTCOME_KINDS = frozenset(
    {EventKind.BOUND, EventKind.BIND_FAILED, EventKind.CONFLICT, EventKind.POD_GONE}
)

#: Starts the message of the event of a decision adopted from a binder.
ADOPTED = "adopted"


@dataclass
class PodRecord:
    """What the API reports about one pod."""

    pod: models.Pod
    phase: Phase = Phase.WAITING
    node: str = ""
    nominated_node: str = ""
    scheduling_attempts: int = 0
    bind_attempts: int = 0
    message: str = ""
    failed_node_reasons: dict[str, str] = field(default_factory=dict)
    #: The plugin that rejected each node of `failed_node_reasons` (when one did).
    failed_node_plugins: dict[str, str] = field(default_factory=dict)
    first_seen: float = 0.0
    #: When it entered the scheduling queue: first seen, or when its last scheduling gate
    #: was removed (kube-scheduler's scheduling SLI starts there, not while gated).
    queued_at: float = 0.0
    last_attempt: float = 0.0
    last_reported_unschedulable: float = -1e18
    #: The decision the watch showed bound before its binder's report came: that late
    #: report still adds its Binding calls to `bind_attempts`, once.
    unreported_decision: str = ""


@dataclass(frozen=True)
class Decision:
    """A placement sent to a binder, awaiting its outcome."""

    decision_id: str
    pod: models.Pod
    node: str
    node_version: int
    queued: QueuedPod
    deadline: float
    created: float
    trace_context: Mapping[str, str] = field(default_factory=dict)
    # A preemption (not a binding): evict these, then bind the pod on `node`.
    victims: tuple[models.Pod, ...] = ()
    # Made by a predecessor and adopted from a binder's report (`adopt`).
    adopted: bool = False
    # What the binder writes before the Binding: volumes bound to claims, claims marked
    # for provisioning (VolumeBinding's Reserve chose them; `FrameworkAlgorithm.prebind_volumes`).
    volume_bindings: tuple[storage.VolumeBinding, ...] = ()
    # Then the ResourceClaims' allocations and reservations (DynamicResources' Reserve
    # chose them; `FrameworkAlgorithm.prebind_claims`).
    claim_writes: tuple[ClaimWrite, ...] = ()

    @property
    def is_preemption(self) -> bool:
        return bool(self.victims)


@dataclass(frozen=True)
class Unschedulable:
    """The pod fits nowhere; `report` says whether to record a FailedScheduling event now
    (rate limited per pod)."""

    pod: models.Pod
    message: str
    report: bool
    reason: str = "Unschedulable"  # the PodScheduled condition's; SchedulerError for errors
    #: The plugins that rejected the pod (the scheduler's per-plugin failure counter).
    plugins: frozenset[str] = frozenset()
    #: Claims DynamicResources' PostFilter gives back: the binder deallocates them (then
    #: `report` is always True, whatever the rate limit).
    deallocate: tuple[ClaimRef, ...] = ()


@dataclass(frozen=True)
class DecisionEvent:
    """One entry of the WatchDecisions stream."""

    kind: EventKind
    pod: models.Pod
    node: str
    message: str
    decision_id: str
    at: float
    binder_id: str = ""
    #: The decision was made by a predecessor and adopted from a binder (`adopt`).
    adopted: bool = False


Listener = Callable[[DecisionEvent], None]
