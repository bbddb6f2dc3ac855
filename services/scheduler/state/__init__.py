"""The scheduler's state: the cluster view, the queue, decisions in flight, pod statuses.

No I/O here (an import contract keeps grpc, aiohttp, opentelemetry and asyncio out): the
service (`services.scheduler.main`) feeds watch events in, asks for the next decision,
hands decisions to binders and feeds their outcomes back. Keeping this synchronous and
single-threaded (one asyncio loop) is what makes assume/confirm safe: every mutation of the
cache happens in one place, in order.

Pod lifecycle, HiveD's states: WAITING (in the queue) -> BINDING (assumed, a binder has
the decision) -> BOUND (the binder reported success or the watch shows the pod on its
node). A bind failure forgets the assumption and requeues with backoff; a conflict
requeues at once; a pod gone is dropped. An assumption is only released by an outcome or
by the watch, never by a timer alone: a decision whose binder vanished is resolved when its
deadline has passed AND the watch still shows the pod unbound. Every release goes through
the algorithm's one undo path (`FrameworkAlgorithm.forget`: Unreserve, then the cache).

After a failover or a restart, binders still carry the previous scheduler's decisions and
re-report them as IN_PROGRESS every few seconds; one this scheduler does not know, for a
pod it sees pending, is adopted (`adopt`): assumed on its node with the volumes its binder
reports, so nothing else takes that room or those volumes, and resolved like any other
decision. A preemption in flight is adopted the same way,
as a room held for its preemptor until the victims are gone. The service waits a settle
period after becoming active, before its first decision, so this happens first.

When the fate of a decision cannot be known (the BindBatch or Preempt call failed after the
binder may have taken it, `unsure`; a binder shut down mid-Binding reports IN_PROGRESS),
the decision stays in flight, its room assumed, until an outcome, the watch, or the deadline
with the watch resolves it: never a guess that frees room a late bind uses. A pending pod
carrying `status.nominatedNodeName` (an earlier leader's preemption) tries that node first.

Nominated pods keep their room (kube-scheduler's nominator): the algorithm's `Nominator`
holds every pending pod of ours the watch shows with a nominatedNodeName, and the preemptor
of each preemption in flight; pods of lower or equal priority are filtered as if those ran
on their nominated nodes. A nomination ends when its pod binds, is deleted, or the watch
shows it cleared (the pods it kept out are requeued then).

The parts, each a layer of `SchedulerState`: `records` (the values), `books` (what they
all share: records, decisions in flight, `_register`, `_release`), `cycle` (deciding),
`watch` (watch events in), `storage` and `devices` (storage's and DRA's watch events),
`outcomes` (binders' reports, adoption, deadlines).
"""

from __future__ import annotations

from services.scheduler.state.books import Requeue, StateBooks
from services.scheduler.state.cycle import GANG, MAX_KEPT_NODE_REASONS, SchedulingCycle
from services.scheduler.state.devices import DeviceEvents
from services.scheduler.state.outcomes import BinderOutcomes
from services.scheduler.state.records import (
    ADOPTED,
    OUTCOME_KINDS,
    Decision,
    DecisionEvent,
    EventKind,
    Listener,
    Outcome,
    Phase,
    PodRecord,
    Unschedulable,
)
from services.scheduler.state.storage import StorageEvents
from services.scheduler.state.watch import WatchEvents

__all__ = [
    "ADOPTED",
    "GANG",
    "MAX_KEPT_NODE_REASONS",
    "OUTCOME_KINDS",
    "BinderOutcomes",
    "Decision",
    "DecisionEvent",
    "DeviceEvents",
    "EventKind",
    "Listener",
    "Outcome",
    "Phase",
    "PodRecord",
    "Requeue",
    "SchedulerState",
    "SchedulingCycle",
    "StateBooks",
    "StorageEvents",
    "Unschedulable",
    "WatchEvents",
]


class SchedulerState(WatchEvents, BinderOutcomes, StorageEvents, DeviceEvents):
    """The whole state: watch events in (`apply_*`, storage's and devices' too), decisions
    out (`schedule_one`, `take_ready_binds`), outcomes back (`on_outcome`, `refused`,
    `unsure`, `expire_overdue`), and the queries the API reads (`find`, `iter_records`)."""
