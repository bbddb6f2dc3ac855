"""The scheduler state's books: what every part of it reads and writes, and the steps
they share.

`StateBooks` holds the cluster view (through the algorithm's cache), the queue, the pod
records, the decisions in flight and the event listeners, and does the few things several
parts need: register a decision (`_register`, the one place a Decision is made), release
one that did not end bound (`_release`, through the algorithm's one undo path), keep a
pod's nomination as the watch shows it, and tell listeners. The parts built on it:
`cycle` (deciding), `watch` (watch events) and `outcomes` (binders' reports).
"""

from __future__ import annotations

import dataclasses
import itertools
from collections import deque
from collections.abc import Iterator
from typing import Literal

from services.scheduler.state.flow import FlowWindow
from services.scheduler.state.records import (
    ADOPTED,
    Decision,
    DecisionEvent,
    EventKind,
    Listener,
    Phase,
    PodRecord,
)
from splitsched.core import algorithm, framework, models
from splitsched.core.cache import PodState, SchedulerCache
from splitsched.core.clock import Clock
from splitsched.core.nominator import Nominator
from splitsched.core.queue import QueuedPod, SchedulingQueue

#: Where a released decision's pod goes: back in the queue at once, after a backoff.
Requeue = Literal["now", "backoff"]


class StateBooks:
    def __init__(
        self,
        *,
        algo: algorithm.FrameworkAlgorithm,
        queue: SchedulingQueue,
        clock: Clock,
        scheduler_id: str,
        bind_timeout: float = 30.0,
        volume_bind_timeout: float = 600.0,
        preempt_timeout: float = 60.0,
        max_in_flight: int = 10_000,
        unschedulable_report_interval: float = 30.0,
        leading: bool = True,
        decision_prefix: str = "",
    ) -> None:
        self.algo = algo
        self.queue = queue
        self.clock = clock
        self.scheduler_id = scheduler_id
        self.bind_timeout = bind_timeout
        # A binder with volumes to bind first waits for the PV controller (and perhaps a
        # provisioner) before the Binding: kube-scheduler's VolumeBinding waits up to
        # bindTimeoutSeconds there.
        self.volume_bind_timeout = volume_bind_timeout
        self.preempt_timeout = preempt_timeout
        self.unschedulable_report_interval = unschedulable_report_interval
        self.records: dict[str, PodRecord] = {}
        self.by_name: dict[tuple[str, str], str] = {}
        self.decisions: dict[str, Decision] = {}
        self.decision_of_pod: dict[str, str] = {}
        #: Decision id -> when a binder last reported it IN_PROGRESS (`expire_overdue`
        #: holds a decision past its deadline while its binder is still on it).
        self.binder_working: dict[str, float] = {}
        #: How many bindings may be in flight (`flow`): the scheduling loop waits above it.
        self.flow = FlowWindow(cap=max_in_flight, bind_timeout=bind_timeout)
        # Preemptions waiting for their victims to disappear, and binds ready to go out.
        self.victims_left: dict[str, set[str]] = {}
        self.ready_binds: list[Decision] = []
        self.gang_blockers: dict[tuple[str, str], str] = {}
        self.node_versions: dict[str, int] = {}
        self.synced = False
        # False on a standby replica (leader election): it keeps the view warm but neither
        # schedules nor accepts binders' reports.
        self._leading = leading
        # Decision ids are `<prefix>-<n>`; the service makes the prefix unique per process
        # so a restarted scheduler never reuses an id a binder still remembers.
        self.decision_prefix = decision_prefix or scheduler_id
        self.listeners: list[Listener] = []
        self.recent_events: deque[DecisionEvent] = deque(maxlen=1000)
        self._ids = itertools.count(1)
        self.counters: dict[str, int] = {}

    @property
    def leading(self) -> bool:
        return self._leading

    def set_leading(self, leading: bool) -> None:
        """Leadership changed (leader election): only a leader decides and takes reports."""
        self._leading = leading

    @property
    def cache(self) -> SchedulerCache:
        return self.algo.cache

    @property
    def nominator(self) -> Nominator:
        return self.algo.nominator

    def is_ours(self, pod: models.Pod) -> bool:
        return pod.scheduler_name in self.algo.profiles

    # ---- nominations ---------------------------------------------------------------------
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

    # ---- counters and listeners ----------------------------------------------------------
    def _count(self, key: str) -> None:
        self.counters[key] = self.counters.get(key, 0) + 1

    def _emit(self, event: DecisionEvent) -> None:
        self.recent_events.append(event)
        for listener in list(self.listeners):
            listener(event)

    # ---- pod records ---------------------------------------------------------------------
    def _record(self, pod: models.Pod) -> PodRecord:
        rec = self.records.get(pod.uid)
        if rec is None:
            now = self.clock.now()
            rec = PodRecord(pod=pod, first_seen=now, queued_at=now)
            self.records[pod.uid] = rec
            self.by_name[(pod.namespace, pod.name)] = pod.uid
        else:
            rec.pod = pod
        return rec

    def _drop_record(self, uid: str) -> None:
        rec = self.records.pop(uid, None)
        if rec is not None and self.by_name.get((rec.pod.namespace, rec.pod.name)) == uid:
            del self.by_name[(rec.pod.namespace, rec.pod.name)]

    def find(self, namespace: str, name: str) -> PodRecord | None:
        uid = self.by_name.get((namespace, name))
        return self.records.get(uid) if uid is not None else None

    def iter_records(self) -> Iterator[PodRecord]:
        return iter(list(self.records.values()))

    # ---- decisions in flight -------------------------------------------------------------
    @property
    def bindings_in_flight(self) -> int:
        """Decisions in flight but the preemptions waiting for their victims (those are
        not in a binder's intake): what the flow window counts."""
        return max(0, len(self.decisions) - len(self.victims_left))

    def may_send(self) -> bool:
        """Whether the flow window has room for another pod's (or gang's) bindings."""
        return self.flow.open(self.bindings_in_flight)

    def _register(
        self,
        queued: QueuedPod,
        node: str,
        now: float,
        *,
        victims: tuple[models.Pod, ...] = (),
        adopted_from: str | None = None,
        decision_id: str = "",
    ) -> Decision:
        """Make a decision for the pod, its room already assumed on `node`: track it until
        its outcome, update the pod's record and tell the listeners. With `victims` it is
        a preemption (the room is held for the pod while they go). The one place a
        Decision is made: the scheduler's own (a fresh id) and one adopted from binder
        `adopted_from` (the id the binder reported)."""
        pod = queued.pod
        adopted = adopted_from is not None
        volumes = self.algo.prebind_volumes(pod.uid)
        decision = Decision(
            decision_id=decision_id or f"{self.decision_prefix}-{next(self._ids)}",
            pod=pod,
            node=node,
            node_version=self.node_versions.get(node, 0),
            queued=queued,
            deadline=now + self._timeout(victims=bool(victims), volumes=bool(volumes)),
            created=now,
            victims=victims,
            adopted=adopted,
            volume_bindings=volumes,
            claim_writes=self.algo.prebind_claims(pod.uid),
        )
        self.decisions[decision.decision_id] = decision
        self.decision_of_pod[pod.uid] = decision.decision_id
        rec = self._record(pod)
        rec.failed_node_reasons = {}
        if victims:
            self.victims_left[decision.decision_id] = {v.uid for v in victims}
            self.nominator.add(pod, node)
            rec.phase, rec.nominated_node, rec.node = Phase.PREEMPTING, node, ""
        else:
            rec.phase, rec.node, rec.message = Phase.BINDING, node, ""
        self._count("adopted" if adopted else "preempting" if victims else "scheduled")
        self._emit(
            DecisionEvent(
                EventKind.PREEMPTING if victims else EventKind.SCHEDULED,
                pod,
                node,
                _event_message(victims, adopted_from),
                decision.decision_id,
                now,
                adopted_from or "",
                adopted=adopted,
            )
        )
        return decision

    def _timeout(self, *, victims: bool, volumes: bool) -> float:
        """How long a decision may stay in flight: a preemption waits for its victims, a
        binding with volumes for the PV controller first."""
        if victims:
            return self.preempt_timeout
        return self.volume_bind_timeout if volumes else self.bind_timeout

    def _volumes_released(self, decision: Decision | None) -> None:
        """The volumes and devices a forgotten decision took are free again: requeue the
        pods the volume plugins and DynamicResources parked (kube-scheduler would wait for
        a storage or claim event, or the unschedulable timeout)."""
        if decision is not None and decision.volume_bindings:
            self.queue.on_event(framework.ClusterEvent.PV_UPDATE)
        if decision is not None and decision.claim_writes:  # devices, claims being allocated
            self.queue.on_event(framework.ClusterEvent.RESOURCE_CLAIM_UPDATE)

    def _release(self, decision: Decision, *, requeue: Requeue | None, message: str) -> None:
        """A decision that did not end bound: forget its assumption (Unreserve included),
        then requeue its pod, or drop it when `requeue` is None (the pod is gone)."""
        uid = decision.pod.uid
        self.decisions.pop(decision.decision_id, None)
        self.decision_of_pod.pop(uid, None)
        cached = self.cache.get(uid)
        if cached is not None and cached.state is not PodState.ASSUMED:
            return  # the watch already shows it bound: nothing to release
        if self.algo.forget(uid):
            self.queue.on_event(framework.ClusterEvent.ASSIGNED_POD_DELETE)
        self._volumes_released(decision)
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


def _event_message(victims: tuple[models.Pod, ...], adopted_from: str | None) -> str:
    """A new decision's event text: the victims of a preemption, and whose decision it was
    when adopted from a binder."""
    keys = ", ".join(v.key for v in victims)
    if adopted_from is None:
        return f"preempting {len(victims)} pod(s): {keys}" if victims else ""
    by = f"{ADOPTED} from binder {adopted_from or '?'}"
    if victims:
        return f"{by}: preempting {len(victims)} pod(s) before this scheduler led: {keys}"
    return f"{by}: in flight before this scheduler led"
