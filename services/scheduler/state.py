"""The scheduler's state: the cluster view, the queue, decisions in flight, pod statuses.

No I/O here: the service (`services.scheduler.main`) feeds watch events in, asks for the
next decision, hands decisions to binders and feeds their outcomes back. Keeping this
synchronous and single-threaded (one asyncio loop) is what makes assume/confirm safe:
every mutation of the cache happens in one place, in order.

Pod lifecycle, HiveD's states: WAITING (in the queue) -> BINDING (assumed, a binder has
the decision) -> BOUND (the binder reported success or the watch shows the pod on its
node). A bind failure forgets the assumption and requeues with backoff; a conflict
requeues at once; a pod gone is dropped. An assumption is only released by an outcome or
by the watch, never by a timer alone: a decision whose binder vanished is resolved when its
deadline has passed AND the watch still shows the pod unbound.

After a failover or a restart, binders still carry the previous scheduler's decisions and
re-report them as IN_PROGRESS every few seconds; one this scheduler does not know, for a
pod it sees pending, is adopted (`adopt`): assumed on its node, so nothing else takes that
room, and resolved like any other decision. A preemption in flight is adopted the same way,
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
"""

from __future__ import annotations

import dataclasses
import enum
import itertools
import logging
from collections import deque
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field

from splitsched.core import algorithm, framework, models
from splitsched.core.batch import queue_order_key as batch_order
from splitsched.core.cache import CacheError, PodState, SchedulerCache
from splitsched.core.clock import Clock
from splitsched.core.nominator import Nominator
from splitsched.core.queue import QueuedPod, SchedulingQueue

log = logging.getLogger(__name__)

GANG = "Gang"
_GANG_EVENTS = frozenset({framework.ClusterEvent.POD_GROUP_MEMBER_ADD})

# How many per-node failure reasons a pod status keeps (Explain recomputes all of them).
MAX_KEPT_NODE_REASONS = 20


class Phase(enum.Enum):
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


#: Starts the message of the SCHEDULED event of a decision adopted from a binder.
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
    last_attempt: float = 0.0
    last_reported_unschedulable: float = -1e18


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


@dataclass(frozen=True)
class DecisionEvent:
    """One entry of the WatchDecisions stream."""

    kind: str  # SCHEDULED | UNSCHEDULABLE | BOUND | BIND_FAILED | CONFLICT | POD_GONE
    pod: models.Pod
    node: str
    message: str
    decision_id: str
    at: float
    binder_id: str = ""


Listener = Callable[[DecisionEvent], None]


class SchedulerState:
    def __init__(
        self,
        *,
        algo: algorithm.FrameworkAlgorithm,
        queue: SchedulingQueue,
        clock: Clock,
        scheduler_id: str,
        bind_timeout: float = 30.0,
        preempt_timeout: float = 60.0,
        unschedulable_report_interval: float = 30.0,
    ) -> None:
        self.algo = algo
        self.queue = queue
        self.clock = clock
        self.scheduler_id = scheduler_id
        self.bind_timeout = bind_timeout
        self.preempt_timeout = preempt_timeout
        self.unschedulable_report_interval = unschedulable_report_interval
        self.records: dict[str, PodRecord] = {}
        self.by_name: dict[tuple[str, str], str] = {}
        self.decisions: dict[str, Decision] = {}
        self.decision_of_pod: dict[str, str] = {}
        # Preemptions waiting for their victims to disappear, and binds ready to go out.
        self.victims_left: dict[str, set[str]] = {}
        self.ready_binds: list[Decision] = []
        self.gang_blockers: dict[tuple[str, str], str] = {}
        self.node_versions: dict[str, int] = {}
        self.synced = False
        # False on a standby replica (leader election): it keeps the view warm but neither
        # schedules nor accepts binders' reports.
        self.leading = True
        # Decision ids are `<prefix>-<n>`; the service makes the prefix unique per process
        # so a restarted scheduler never reuses an id a binder still remembers.
        self.decision_prefix = scheduler_id
        self.listeners: list[Listener] = []
        self.recent_events: deque[DecisionEvent] = deque(maxlen=1000)
        self._ids = itertools.count(1)
        self.counters: dict[str, int] = {}

    @property
    def cache(self) -> SchedulerCache:
        return self.algo.cache

    @property
    def nominator(self) -> Nominator:
        return self.algo.nominator

    def _sync_nomination(self, pod: models.Pod) -> None:
        """The pod's nomination as the watch shows it (`pod` is its latest version); a
        preemption of ours in flight keeps its own. A room no longer held requeues the
        pods it kept out."""
        decision_id = self.decision_of_pod.get(pod.uid)
        decision = self.decisions.get(decision_id) if decision_id is not None else None
        node = decision.node if decision is not None and decision.is_preemption else ""
        node = node or pod.nominated_node_name
        if node:
            self.nominator.add(pod, node)
        else:
            self._unnominate(pod.uid)

    def _unnominate(self, uid: str, *, bound_on: str = "") -> None:
        node = self.nominator.remove(uid)
        if node and node != bound_on:
            self.queue.on_event(framework.ClusterEvent.ASSIGNED_POD_DELETE)

    def _count(self, key: str) -> None:
        self.counters[key] = self.counters.get(key, 0) + 1

    def _emit(self, event: DecisionEvent) -> None:
        self.recent_events.append(event)
        for listener in list(self.listeners):
            listener(event)

    def is_ours(self, pod: models.Pod) -> bool:
        return pod.scheduler_name in self.algo.profiles

    # ---- the view: watch events --------------------------------------------------------
    def reset(self) -> None:
        """A fresh snapshot is coming: forget the view but keep decisions in flight (their
        outcomes still arrive) so their pods are assumed again when seen pending."""
        self.synced = False
        fresh_cache = SchedulerCache(clock=self.clock)
        self.algo.cache = fresh_cache
        self.queue = SchedulingQueue(
            clock=self.clock,
            initial_backoff=self.queue.initial_backoff,
            max_backoff=self.queue.max_backoff,
            max_unschedulable_duration=self.queue.max_unschedulable_duration,
        )
        self.records.clear()
        self.by_name.clear()
        self.node_versions.clear()
        self.nominator.clear()

    def mark_synced(self) -> None:
        self.synced = True

    def apply_node(self, kind: str, node: models.Node) -> None:
        """kind: ADDED | MODIFIED | DELETED (snapshot items count as ADDED)."""
        events: list[framework.ClusterEvent] = []
        if kind == "DELETED":
            if node.name in self.cache.table.row_of:
                self.cache.remove_node(node.name)
            self.node_versions.pop(node.name, None)
            events.append(framework.ClusterEvent.NODE_DELETE)
        else:
            row = self.cache.table.row_of.get(node.name)
            old = self.cache.table.nodes[row] if row is not None else None
            self.cache.add_node(node)
            self.node_versions[node.name] = self.node_versions.get(node.name, 0) + 1
            if old is None:
                events.append(framework.ClusterEvent.NODE_ADD)
            else:
                if old.allocatable != node.allocatable:
                    events.append(framework.ClusterEvent.NODE_ALLOCATABLE)
                if old.labels != node.labels:
                    events.append(framework.ClusterEvent.NODE_LABEL)
                if old.taints != node.taints:
                    events.append(framework.ClusterEvent.NODE_TAINT)
                if old.unschedulable != node.unschedulable:
                    events.append(framework.ClusterEvent.NODE_SCHEDULABLE)
        for event in events:
            self.queue.on_event(event)

    def apply_pdb(self, kind: str, pdb: models.PodDisruptionBudget) -> None:
        """PodDisruptionBudgets steer preemption's choice of victims."""
        if kind == "DELETED":
            self.cache.remove_pdb(pdb.namespace, pdb.name)
        else:
            self.cache.set_pdb(pdb)

    def _record(self, pod: models.Pod) -> PodRecord:
        rec = self.records.get(pod.uid)
        if rec is None:
            rec = PodRecord(pod=pod, first_seen=self.clock.now())
            self.records[pod.uid] = rec
            self.by_name[(pod.namespace, pod.name)] = pod.uid
        else:
            rec.pod = pod
        return rec

    def _drop_record(self, uid: str) -> None:
        rec = self.records.pop(uid, None)
        if rec is not None and self.by_name.get((rec.pod.namespace, rec.pod.name)) == uid:
            del self.by_name[(rec.pod.namespace, rec.pod.name)]

    def apply_pod(self, kind: str, pod: models.Pod) -> None:
        """kind: ADDED | MODIFIED | DELETED. Assigned pods feed the cache (confirming our
        assumptions); pending pods of our profiles feed the queue."""
        if kind == "DELETED" or pod.is_terminal:
            self._pod_gone(pod)
            return
        if pod.node_name:
            self._pod_assigned(pod)
            return
        if not self.is_ours(pod):
            return
        if pod.deleting:
            self._unnominate(pod.uid)
            self.queue.delete(pod.uid)
            self._drop_record(pod.uid)
            return
        self._sync_nomination(pod)
        decision_id = self.decision_of_pod.get(pod.uid)
        if decision_id is not None:
            # Still pending in the API while a binder works on it (or after a resync):
            # keep (or re-establish) the assumption; don't queue it twice.
            decision = self.decisions[decision_id]
            rec = self._record(pod)
            if decision.is_preemption:
                rec.phase, rec.nominated_node = Phase.PREEMPTING, decision.node
            else:
                rec.phase, rec.node = Phase.BINDING, decision.node
            if pod.uid not in self.cache:
                self.cache.assume(pod, decision.node)
            return
        if pod.uid in self.cache:
            return  # assumed by us, outcome pending; the watch is just behind
        rec = self._record(pod)
        rec.phase = Phase.WAITING
        if pod.uid in self.queue:
            self.queue.update(pod)
        else:
            self.queue.add(pod)
            if pod.group is not None:
                self.queue.on_event(framework.ClusterEvent.POD_GROUP_MEMBER_ADD)

    def _pod_assigned(self, pod: models.Pod) -> None:
        cached = self.cache.get(pod.uid)
        was_new = cached is None or cached.state is PodState.ASSUMED
        try:
            self.cache.add_pod(pod)
        except CacheError as exc:  # never expected; keep going with a loud log
            log.error("cache rejected assigned pod %s: %s", pod.key, exc)
            return
        self._unnominate(pod.uid, bound_on=pod.node_name)
        self.queue.delete(pod.uid)
        decision_id = self.decision_of_pod.pop(pod.uid, None)
        if decision_id is not None:
            # The watch confirmed the binding before the binder's report arrived.
            self.decisions.pop(decision_id, None)
            self._count("bound")
            self._emit(
                DecisionEvent(
                    "BOUND", pod, pod.node_name, "", decision_id, self.clock.now(), "watch"
                )
            )
        if self.is_ours(pod) or pod.uid in self.records:
            rec = self._record(pod)
            if rec.phase is not Phase.BOUND:
                rec.phase, rec.node = Phase.BOUND, pod.node_name
        self.queue.on_event(
            framework.ClusterEvent.ASSIGNED_POD_ADD
            if was_new
            else framework.ClusterEvent.ASSIGNED_POD_UPDATE
        )

    def _pod_gone(self, pod: models.Pod) -> None:
        done: list[str] = []
        for preemption_id, left in list(self.victims_left.items()):
            if pod.uid in left:
                left.discard(pod.uid)
                if not left:
                    done.append(preemption_id)
        self.queue.delete(pod.uid)
        freed = False
        if pod.uid in self.cache:
            self.cache.remove_pod(pod.uid)
            freed = True
        decision_id = self.decision_of_pod.pop(pod.uid, None)
        if decision_id is not None:
            self.decisions.pop(decision_id, None)
        self._unnominate(pod.uid)
        self._drop_record(pod.uid)
        for preemption_id in done:  # after the last victim's room is free in the view
            self._victims_gone(preemption_id)
        if freed:
            self.queue.on_event(framework.ClusterEvent.ASSIGNED_POD_DELETE)

    # ---- the scheduling cycle ----------------------------------------------------------
    def schedule_one(self) -> list[Decision | Unschedulable] | None:
        """Pop the next pod and decide; None when nothing is ready. Bind decisions are
        already assumed in the cache (a gang yields one per member; a preemption is a
        Decision with victims, its pod assumed on the nominated node to hold the room);
        the caller sends them to binders."""
        qp = self.queue.pop()
        if qp is None:
            return None
        pod = qp.pod
        now = self.clock.now()
        rec = self._record(pod)
        rec.scheduling_attempts += 1
        rec.last_attempt = now
        if pod.group is not None and pod.group.min_member > 1:
            return self._schedule_gang(qp, rec, now)
        result = self._schedule_nominated_first(pod)
        if result.bind is not None:
            status = self.algo.assume(pod, result.bind.node, result.state)
            if status.ok:
                self.queue.done(pod.uid)
                return [self._decide(qp, result.bind.node, now)]
            message = "; ".join(status.reasons) or f"rejected by {status.plugin}"
            self.queue.add_backoff(qp)
            return [self._unschedulable(rec, message, {}, now)]
        if result.preempt is not None:
            preempt = result.preempt
            self.cache.assume(pod, preempt.node)  # hold the room for the preemptor
            self.queue.done(pod.uid)
            decision = self._decide(qp, preempt.node, now, victims=preempt.victims)
            rec.message = preempt.wait.summary
            return [decision]
        assert result.wait is not None
        return [self._park(qp, rec, result.wait, now)]

    def _schedule_nominated_first(self, pod: models.Pod) -> algorithm.ScheduleResult:
        """kube-scheduler's evaluateNominatedNode: a pod whose preemption (ours or an
        earlier leader's) nominated a node gets that node if it fits there now, rather
        than any other; else a full cycle."""
        nominated = pod.nominated_node_name
        if nominated and nominated in self.cache.table.row_of:
            result = self.algo.schedule(pod, suggested_nodes=[nominated])
            if result.bind is not None:
                return result
        return self.algo.schedule(pod)

    def _park(
        self, qp: QueuedPod, rec: PodRecord, wait: algorithm.WaitInfo, now: float
    ) -> Unschedulable:
        profile = self.algo.profile_for(qp.pod)
        events = (
            profile.events_for(set(wait.failed_plugins))
            if profile is not None and wait.failed_plugins
            else framework.ALL_EVENTS
        )
        self.queue.add_unschedulable(qp, plugins=wait.failed_plugins, events=events)
        kept = dict(itertools.islice(wait.failed_node_reasons.items(), MAX_KEPT_NODE_REASONS))
        plugins = wait.failed_node_plugins
        rec.failed_node_plugins = {n: plugins[n] for n in kept if n in plugins}
        return self._unschedulable(rec, wait.summary, kept, now)

    def _decide(
        self,
        qp: QueuedPod,
        node: str,
        now: float,
        *,
        victims: tuple[models.Pod, ...] = (),
    ) -> Decision:
        pod = qp.pod
        decision = Decision(
            decision_id=f"{self.decision_prefix}-{next(self._ids)}",
            pod=pod,
            node=node,
            node_version=self.node_versions.get(node, 0),
            queued=qp,
            deadline=now + (self.preempt_timeout if victims else self.bind_timeout),
            created=now,
            victims=victims,
        )
        self.decisions[decision.decision_id] = decision
        self.decision_of_pod[pod.uid] = decision.decision_id
        rec = self._record(pod)
        rec.failed_node_reasons = {}
        if victims:
            self.victims_left[decision.decision_id] = {v.uid for v in victims}
            self.nominator.add(pod, node)
            rec.phase, rec.nominated_node, rec.node = Phase.PREEMPTING, node, ""
            self._count("preempting")
            message = f"preempting {len(victims)} pod(s): " + ", ".join(v.key for v in victims)
            self._emit(DecisionEvent("PREEMPTING", pod, node, message, decision.decision_id, now))
        else:
            rec.phase, rec.node, rec.message = Phase.BINDING, node, ""
            self._count("scheduled")
            self._emit(DecisionEvent("SCHEDULED", pod, node, "", decision.decision_id, now))
        return decision

    def _victims_gone(self, decision_id: str) -> None:
        """Every victim of a preemption left the cluster: bind the preemptor where its room
        has been held all along."""
        self.victims_left.pop(decision_id, None)
        decision = self.decisions.pop(decision_id, None)
        if decision is None:
            return
        self.decision_of_pod.pop(decision.pod.uid, None)
        if not self.cache.is_assumed(decision.pod.uid):
            return
        if decision.adopted:
            # Held only since the adoption: check the pod still fits there.
            self.cache.forget(decision.pod.uid)
            self._bind_on(decision.queued, decision.node)
            return
        bind = self._decide(decision.queued, decision.node, self.clock.now())
        self.ready_binds.append(bind)

    def _bind_on(self, qp: QueuedPod, node: str) -> Decision | None:
        """Bind the (not assumed) pod on `node` if it fits there now, as a ready bind;
        else queue it (active) for a full cycle. For an adopted preemption whose victims
        are gone."""
        pod = self.records[qp.pod.uid].pod if qp.pod.uid in self.records else qp.pod
        result = self.algo.schedule(pod, suggested_nodes=[node])
        if result.bind is not None and self.algo.assume(pod, node, result.state).ok:
            self.queue.delete(pod.uid)
            bind = self._decide(dataclasses.replace(qp, pod=pod), node, self.clock.now())
            self.ready_binds.append(bind)
            return bind
        if pod.uid not in self.queue:
            self.queue.add(pod)
        rec = self.records.get(pod.uid)
        if rec is not None:
            rec.phase, rec.node = Phase.WAITING, ""
        return None

    def take_ready_binds(self) -> list[Decision]:
        ready, self.ready_binds = self.ready_binds, []
        return ready

    def _schedule_gang(
        self, qp: QueuedPod, rec: PodRecord, now: float
    ) -> list[Decision | Unschedulable]:
        """All of a gang in this one cycle, or none of it: no partial gang ever holds
        resources, so competing gangs cannot deadlock."""
        pod = qp.pod
        group = pod.group
        assert group is not None
        others = [
            other.pod
            for other in self.queue.pending_pods()
            if other.pod.group is not None
            and other.pod.group.name == group.name
            and other.pod.namespace == pod.namespace
        ]
        members = [pod, *sorted(others, key=batch_order)]
        if len(members) < group.min_member and (
            len(members) + self._gang_members_placed(pod.namespace, group.name) < group.min_member
        ):
            waiting = algorithm.WaitInfo(
                summary=(
                    f"pod group {pod.namespace}/{group.name}: {len(members)} of "
                    f"{group.min_member} members pending; waiting for the rest"
                ),
                reason_counts={},
                failed_plugins=frozenset({GANG}),
                total_nodes=self.cache.table.n,
            )
            self.queue.add_unschedulable(qp, plugins=waiting.failed_plugins, events=_GANG_EVENTS)
            return [self._unschedulable(rec, waiting.summary, {}, now)]
        placed, blocking, wait = self.algo.place_gang(members)
        if blocking is not None:
            assert wait is not None
            summary = (
                f"pod group {pod.namespace}/{group.name} does not fit as a whole: member "
                f"{blocking.key}: {wait.summary}"
            )
            blocked = dataclasses.replace(wait, summary=summary)
            self.gang_blockers[(pod.namespace, group.name)] = blocking.key
            return [self._park(qp, rec, blocked, now)]
        self.gang_blockers.pop((pod.namespace, group.name), None)
        out: list[Decision | Unschedulable] = []
        for member, node in placed:
            if member.uid == pod.uid:
                self.queue.done(pod.uid)
                out.append(self._decide(qp, node, now))
            else:
                member_qp = self.queue.get(member.uid) or QueuedPod(pod=member)
                self.queue.delete(member.uid)
                out.append(self._decide(member_qp, node, now))
        return out

    def _gang_members_placed(self, namespace: str, group: str) -> int:
        """Members of the gang already bound or assumed. A member requeued after its
        binding failed (say its binder died) rejoins a gang that already stands: it must
        not wait for a quorum of pending members that will never come."""
        return sum(
            1
            for c in self.cache
            if c.pod.group is not None
            and c.pod.group.name == group
            and c.pod.namespace == namespace
        )

    def _unschedulable(
        self, rec: PodRecord, message: str, reasons: dict[str, str], now: float
    ) -> Unschedulable:
        report = (
            now - rec.last_reported_unschedulable >= self.unschedulable_report_interval
            or message != rec.message
        )
        rec.phase, rec.node, rec.message = Phase.WAITING, "", message
        rec.failed_node_reasons = reasons
        if report:
            rec.last_reported_unschedulable = now
        self._count("unschedulable")
        self._emit(DecisionEvent("UNSCHEDULABLE", rec.pod, "", message, "", now))
        return Unschedulable(rec.pod, message, report)

    # ---- outcomes ----------------------------------------------------------------------
    def refused(self, decision: Decision, reason: str) -> None:
        """A binder would not take the decision (or could not be reached): undo, retry."""
        self._release(decision, requeue="backoff", message=f"binder refused: {reason}")

    def unsure(self, decision: Decision, reason: str) -> None:
        """The call handing the decision to a binder failed in a way that does not say
        whether the binder took it (a deadline, a connection lost mid-call): it may still
        bind (or evict). Keep it in flight, room assumed; its outcome, the watch, or its
        deadline with the watch still showing the pod unbound (`expire_overdue`) resolves
        it."""
        if self.decisions.get(decision.decision_id) is not decision:
            return  # already resolved (an outcome or the watch beat the error)
        self._count("unsure")
        rec = self.records.get(decision.pod.uid)
        if rec is not None:
            rec.message = (
                f"binder call failed ({reason}) after it may have taken the decision; "
                "waiting for its outcome or the watch until the deadline"
            )

    def on_outcome(
        self,
        *,
        decision_id: str,
        result: Outcome,
        message: str = "",
        attempts: int = 0,
        binder_id: str = "",
        pod_uid: str = "",
        node: str = "",
        preemption: bool = False,
        victim_uids: Sequence[str] = (),
    ) -> bool:
        """Apply a binder's report. Idempotent: an already resolved decision is ignored
        (returns False). An unknown one still in flight (IN_PROGRESS) or just bound (for a
        preemption: its victims evicted), for a pod the view shows pending, is adopted
        (`adopt`); any other is ignored."""
        decision = self.decisions.get(decision_id)
        if decision is None:
            if result not in (Outcome.IN_PROGRESS, Outcome.BOUND):
                return False
            decision = self.adopt(
                decision_id=decision_id, pod_uid=pod_uid, node=node, binder_id=binder_id,
                preemption=preemption, victim_uids=victim_uids,
            )  # fmt: skip
            if decision is None or result is Outcome.IN_PROGRESS or preemption:
                return decision is not None
        elif result is Outcome.IN_PROGRESS:
            return False  # ours, still in flight: nothing changes
        now = self.clock.now()
        uid = decision.pod.uid
        rec = self.records.get(uid)
        if decision.is_preemption and result is Outcome.BOUND:
            # The victims' evictions were accepted; their deletions reach us through the
            # watch, and the last one sends the preemptor to be bound (`_victims_gone`).
            return True
        if rec is not None:
            rec.bind_attempts += attempts
        if result is Outcome.BOUND:
            self.cache.finish_binding(uid)
            del self.decisions[decision_id]
            self.decision_of_pod.pop(uid, None)
            if rec is not None:
                rec.phase, rec.node = Phase.BOUND, decision.node
            self._count("bound")
            self._emit(
                DecisionEvent("BOUND", decision.pod, decision.node, "", decision_id, now, binder_id)
            )
            return True
        kind = {
            Outcome.CONFLICT: "CONFLICT",
            Outcome.POD_GONE: "POD_GONE",
        }.get(result, "BIND_FAILED")
        self._emit(
            DecisionEvent(kind, decision.pod, decision.node, message, decision_id, now, binder_id)
        )
        if result is Outcome.POD_GONE:
            self._release(decision, requeue=None, message=message)
        elif result is Outcome.CONFLICT:
            self._release(decision, requeue="now", message=message)
        else:
            self._release(decision, requeue="backoff", message=message)
        return True

    def adopt(
        self,
        *,
        decision_id: str,
        pod_uid: str,
        node: str,
        binder_id: str = "",
        preemption: bool = False,
        victim_uids: Sequence[str] = (),
    ) -> Decision | None:
        """Take over a decision a binder is carrying out that this scheduler did not make
        (its predecessor did, before a failover or a restart): count the pod on that node
        at once, so its room is not given to another pod while the bind may still land,
        and track the decision so its outcome (or the watch, or the deadline) resolves it
        as usual. A preemption holds the room for its preemptor the same way until the
        victims still in the view are gone, then binds it there if it fits
        (`_adopt_preemption`). Only for a pod the view shows pending and not already
        decided; returns None otherwise."""
        rec = self.records.get(pod_uid)
        if (
            not self.synced
            or not node
            or rec is None
            or rec.pod.node_name
            or pod_uid in self.decision_of_pod
            or pod_uid in self.cache
        ):
            return None
        now = self.clock.now()
        pod = rec.pod
        queued = self.queue.get(pod_uid) or QueuedPod(pod=pod, first_enqueued=now, enqueued_at=now)
        if preemption:
            return self._adopt_preemption(
                decision_id=decision_id, queued=queued, node=node, binder_id=binder_id,
                victim_uids=victim_uids, now=now,
            )  # fmt: skip
        self.queue.delete(pod_uid)
        self.cache.assume(pod, node)
        decision = Decision(
            decision_id=decision_id,
            pod=pod,
            node=node,
            node_version=self.node_versions.get(node, 0),
            queued=queued,
            deadline=now + self.bind_timeout,
            created=now,
        )
        self.decisions[decision_id] = decision
        self.decision_of_pod[pod_uid] = decision_id
        rec.phase, rec.node, rec.message = Phase.BINDING, node, ""
        rec.failed_node_reasons = {}
        self._count("adopted")
        message = f"{ADOPTED} from binder {binder_id or '?'}: in flight before this scheduler led"
        self._emit(DecisionEvent("SCHEDULED", pod, node, message, decision_id, now, binder_id))
        return decision

    def _adopt_preemption(
        self,
        *,
        decision_id: str,
        queued: QueuedPod,
        node: str,
        binder_id: str,
        victim_uids: Sequence[str],
        now: float,
    ) -> Decision | None:
        """A predecessor's preemption: hold the room on `node` for the preemptor while the
        victims the view still has are there; with none left, bind it there now if it fits
        (else it is queued and scheduled as usual, its nominated node first)."""
        pod = queued.pod
        victims = tuple(
            cached.pod for uid in victim_uids if (cached := self.cache.get(uid)) is not None
        )
        if not victims:
            return self._bind_on(queued, node)
        self.queue.delete(pod.uid)
        self.cache.assume(pod, node)
        decision = Decision(
            decision_id=decision_id,
            pod=pod,
            node=node,
            node_version=self.node_versions.get(node, 0),
            queued=queued,
            deadline=now + self.preempt_timeout,
            created=now,
            victims=victims,
            adopted=True,
        )
        self.decisions[decision_id] = decision
        self.decision_of_pod[pod.uid] = decision_id
        self.victims_left[decision_id] = {v.uid for v in victims}
        self.nominator.add(pod, node)
        rec = self._record(pod)
        rec.phase, rec.nominated_node, rec.node = Phase.PREEMPTING, node, ""
        self._count("adopted")
        message = (
            f"{ADOPTED} from binder {binder_id or '?'}: preempting {len(victims)} pod(s) "
            "before this scheduler led: " + ", ".join(v.key for v in victims)
        )
        self._emit(DecisionEvent("PREEMPTING", pod, node, message, decision_id, now, binder_id))
        return decision

    def _release(self, decision: Decision, *, requeue: str | None, message: str) -> None:
        uid = decision.pod.uid
        self.decisions.pop(decision.decision_id, None)
        self.decision_of_pod.pop(uid, None)
        cached = self.cache.get(uid)
        if cached is not None and cached.state is PodState.ASSUMED:
            self.cache.forget(uid)
            self.queue.on_event(framework.ClusterEvent.ASSIGNED_POD_DELETE)
        elif cached is not None:
            return  # the watch already shows it bound: nothing to release
        rec = self.records.get(uid)
        self.victims_left.pop(decision.decision_id, None)
        if requeue is None:
            self._unnominate(uid)
            self._drop_record(uid)
            return
        self._sync_nomination(rec.pod if rec is not None else decision.pod)
        if rec is not None:
            rec.phase, rec.node, rec.message = Phase.WAITING, "", message
        pod = rec.pod if rec is not None else decision.pod
        self._count(f"requeue_{requeue}")
        if requeue == "now":
            self.queue.add(pod)
        else:
            self.queue.add_backoff(dataclasses.replace(decision.queued, pod=pod))

    def overdue_decisions(self) -> list[Decision]:
        """Decisions past their deadline with no outcome. The watch decides: a pod the
        watch shows bound was confirmed already (removed in `_pod_assigned`); what is left
        is still unbound in the API after the deadline, so it is safe to forget."""
        now = self.clock.now()
        return [d for d in self.decisions.values() if d.deadline < now]

    def expire_overdue(self) -> int:
        overdue = self.overdue_decisions()
        for decision in overdue:
            self._emit(
                DecisionEvent(
                    "BIND_FAILED",
                    decision.pod,
                    decision.node,
                    "no outcome before the bind deadline; the watch shows the pod unbound",
                    decision.decision_id,
                    self.clock.now(),
                )
            )
            self._release(decision, requeue="backoff", message="bind deadline passed")
        return len(overdue)

    # ---- queries -----------------------------------------------------------------------
    def find(self, namespace: str, name: str) -> PodRecord | None:
        uid = self.by_name.get((namespace, name))
        return self.records.get(uid) if uid is not None else None

    def iter_records(self) -> Iterator[PodRecord]:
        return iter(list(self.records.values()))
