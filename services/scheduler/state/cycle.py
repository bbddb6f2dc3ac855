"""The scheduling cycle: pop the next pod, decide, and commit the decision in the view.

`schedule_one` runs one pod (or a whole gang) through the algorithm and returns what to
send to binders (Decisions, their rooms already assumed) or why the pod waits
(Unschedulable, the pod parked in the queue until an event may help). A preemption is a
Decision with victims: its pod is assumed on the nominated node to hold the room, and bound
there once the victims are gone (`_victims_gone`).
"""

from __future__ import annotations

import dataclasses
import itertools

from services.scheduler.state.books import StateBooks
from services.scheduler.state.records import (
    Decision,
    DecisionEvent,
    EventKind,
    Phase,
    PodRecord,
    Unschedulable,
)
from splitsched.core import framework, models, results
from splitsched.core.batch import queue_order_key as batch_order
from splitsched.core.queue import QueuedPod

GANG = "Gang"
_GANG_EVENTS = frozenset({framework.ClusterEvent.POD_GROUP_MEMBER_ADD})

# How many per-node failure reasons a pod status keeps (Explain recomputes all of them).
MAX_KEPT_NODE_REASONS = 20


class SchedulingCycle(StateBooks):
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
        victims: tuple[models.Pod, ...] = ()
        if result.bind is not None:
            node = result.bind.node
        elif result.preempt is not None:
            # Hold the room for the pod while its victims go.
            node, victims = result.preempt.node, result.preempt.victims
        else:
            assert result.wait is not None
            return [_with_deallocations(self._park(qp, rec, result.wait, now), result)]
        status = self.algo.assume(pod, node, result.state)
        if not status.ok:
            message = "; ".join(status.reasons) or f"rejected by {status.plugin}"
            self.queue.add_backoff(qp)
            return [self._unschedulable(rec, message, {}, now)]
        self.queue.done(pod.uid)
        decision = self._register(qp, node, now, victims=victims)
        if result.preempt is not None:
            rec.message = result.preempt.wait.summary
        return [decision]

    def _schedule_nominated_first(self, pod: models.Pod) -> results.ScheduleResult:
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
        self, qp: QueuedPod, rec: PodRecord, wait: results.WaitInfo, now: float
    ) -> Unschedulable:
        profile = self.algo.profile_for(qp.pod)
        events = (
            profile.events_for(set(wait.failed_plugins))
            if profile is not None and wait.failed_plugins
            else framework.ALL_EVENTS
        )
        if wait.scheduler_error:  # kube retries an error after a backoff
            self.queue.add_backoff(qp)
        else:
            self.queue.add_unschedulable(qp, plugins=wait.failed_plugins, events=events)
        kept = dict(itertools.islice(wait.failed_node_reasons.items(), MAX_KEPT_NODE_REASONS))
        plugins = wait.failed_node_plugins
        rec.failed_node_plugins = {n: plugins[n] for n in kept if n in plugins}
        unschedulable = self._unschedulable(
            rec, wait.summary, kept, now, plugins=wait.failed_plugins
        )
        if wait.scheduler_error:
            return dataclasses.replace(unschedulable, reason="SchedulerError")
        return unschedulable

    def _unschedulable(
        self,
        rec: PodRecord,
        message: str,
        reasons: dict[str, str],
        now: float,
        *,
        plugins: frozenset[str] = frozenset(),
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
        self._emit(DecisionEvent(EventKind.UNSCHEDULABLE, rec.pod, "", message, "", now))
        return Unschedulable(rec.pod, message, report, plugins=plugins)

    # ---- gangs -----------------------------------------------------------------------------
    def _schedule_gang(
        self, qp: QueuedPod, rec: PodRecord, now: float
    ) -> list[Decision | Unschedulable]:
        """All of a gang in this one cycle, or none of it: no partial gang ever holds
        resources, so competing gangs cannot deadlock."""
        pod = qp.pod
        group = pod.group
        assert group is not None
        members = [pod, *sorted(self._pending_members(pod), key=batch_order)]
        if len(members) < group.min_member and (
            len(members) + self._gang_members_placed(pod.namespace, group.name) < group.min_member
        ):
            waiting = results.WaitInfo(
                summary=(
                    f"pod group {pod.namespace}/{group.name}: {len(members)} of "
                    f"{group.min_member} members pending; waiting for the rest"
                ),
                reason_counts={},
                failed_plugins=frozenset({GANG}),
                total_nodes=self.cache.table.n,
            )
            self.queue.add_unschedulable(qp, plugins=waiting.failed_plugins, events=_GANG_EVENTS)
            return [
                self._unschedulable(rec, waiting.summary, {}, now, plugins=waiting.failed_plugins)
            ]
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
                out.append(self._register(qp, node, now))
            else:
                member_qp = self.queue.get(member.uid) or QueuedPod(pod=member)
                self.queue.delete(member.uid)
                out.append(self._register(member_qp, node, now))
        return out

    def _pending_members(self, pod: models.Pod) -> list[models.Pod]:
        """The other members of the pod's gang waiting in the queue."""
        group = pod.group
        assert group is not None
        return [
            other.pod
            for other in self.queue.pending_pods()
            if other.pod.group is not None
            and other.pod.group.name == group.name
            and other.pod.namespace == pod.namespace
        ]

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

    # ---- preemptions whose victims are gone -------------------------------------------------
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
            self.algo.forget(decision.pod.uid)
            self._bind_on(decision.queued, decision.node)
            return
        bind = self._register(decision.queued, decision.node, self.clock.now())
        self.ready_binds.append(bind)

    def _bind_on(self, qp: QueuedPod, node: str) -> Decision | None:
        """Bind the (not assumed) pod on `node` if it fits there now, as a ready bind;
        else queue it (active) for a full cycle. For an adopted preemption whose victims
        are gone."""
        pod = self.records[qp.pod.uid].pod if qp.pod.uid in self.records else qp.pod
        result = self.algo.schedule(pod, suggested_nodes=[node])
        if result.bind is not None and self.algo.assume(pod, node, result.state).ok:
            self.queue.delete(pod.uid)
            bind = self._register(dataclasses.replace(qp, pod=pod), node, self.clock.now())
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


def _with_deallocations(parked: Unschedulable, result: results.ScheduleResult) -> Unschedulable:
    """The claims DynamicResources' PostFilter gave back, for the binder to write with the
    report (reported whatever the rate limit: kube writes them in its PostFilter)."""
    refs = result.state.read(framework.DEALLOCATE_CLAIMS) if result.state is not None else None
    if not refs:
        return parked
    return dataclasses.replace(parked, deallocate=tuple(refs), report=True)
