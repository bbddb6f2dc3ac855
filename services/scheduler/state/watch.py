"""Watch events into the scheduler's view: nodes, pods, disruption budgets, namespaces.

The service turns the watcher's stream into `apply_node`, `apply_pod`, `apply_pdb` and
`apply_namespace` calls (a snapshot's items count as ADDED; `reset` before a fresh
snapshot, `mark_synced` after it). Assigned pods feed the cache and confirm our
assumptions; pending pods of our profiles feed the queue; a pod that goes away frees its
room and may complete a preemption. A pending pod with scheduling gates is GATED: held
apart in the queue, never nominated, never tried, nothing written for it, until an update
shows its last gate gone.
"""

from __future__ import annotations

import logging

from services.scheduler.state.cycle import SchedulingCycle
from services.scheduler.state.records import DecisionEvent, EventKind, Phase
from splitsched.core import framework, models
from splitsched.core.cache import CacheError, PodState, SchedulerCache
from splitsched.core.nodetable import NodeTable
from splitsched.core.queue import SchedulingQueue

log = logging.getLogger("services.scheduler.state")


class WatchEvents(SchedulingCycle):
    def reset(self) -> None:
        """A fresh snapshot is coming: forget the view but keep decisions in flight (their
        outcomes still arrive) so their pods are assumed again when seen pending, and keep
        the volumes and claims they assumed (the storage view outlives the cache), so no
        other pod takes them while the binder works."""
        self.synced = False
        storage, devices = self.cache.table.storage, self.cache.table.devices
        storage.rewatch()
        devices.rewatch()
        table = NodeTable(storage=storage, devices=devices)
        self.algo.cache = SchedulerCache(clock=self.clock, table=table)
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
        self.cache.table.storage.prune()
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
            events += _node_changes(old, node)
        for event in events:
            self.queue.on_event(event)

    def apply_pdb(self, kind: str, pdb: models.PodDisruptionBudget) -> None:
        """PodDisruptionBudgets steer preemption's choice of victims."""
        if kind == "DELETED":
            self.cache.remove_pdb(pdb.namespace, pdb.name)
        else:
            self.cache.set_pdb(pdb)

    def apply_namespace(self, kind: str, namespace: models.Namespace) -> None:
        """Namespace labels feed namespaceSelectors; a change requeues the pods that
        InterPodAffinity rejected."""
        if kind == "DELETED":
            changed = self.cache.remove_namespace(namespace.name)
        else:
            changed = self.cache.set_namespace(namespace)
        if changed:
            self.queue.on_event(framework.ClusterEvent.NAMESPACE_CHANGE)

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
        if pod.scheduling_gates:
            self._gated(pod)
            return
        self._sync_nomination(pod)
        if pod.uid in self.decision_of_pod:
            self._pending_in_flight(pod)
            return
        if pod.uid in self.cache:
            return  # assumed by us, outcome pending; the watch is just behind
        rec = self._record(pod)
        ungated = rec.phase is Phase.GATED
        if ungated:  # its last gate was removed: it enters the scheduling queue now
            rec.message, rec.queued_at = "", self.clock.now()
        rec.phase = Phase.WAITING
        joins = ungated or pod.uid not in self.queue
        self.queue.add(pod)  # an update when already queued (or gated until now)
        if joins and pod.group is not None:
            self.queue.on_event(framework.ClusterEvent.POD_GROUP_MEMBER_ADD)

    def _gated(self, pod: models.Pod) -> None:
        """kube-scheduler's SchedulingGates (a PreEnqueue plugin): the pod waits apart in
        the queue, not nominated (its room is not held). The API server refuses to add a
        gate after creation, so a gated pod was never decided and nothing of ours is in
        flight for it."""
        self._unnominate(pod.uid)
        rec = self._record(pod)
        rec.phase, rec.message = Phase.GATED, gated_message(pod.scheduling_gates)
        self.queue.add(pod)

    def _pending_in_flight(self, pod: models.Pod) -> None:
        """Still pending in the API while a binder works on its decision (or after a
        resync): keep (or re-establish) the assumption; don't queue it twice."""
        decision = self.decisions[self.decision_of_pod[pod.uid]]
        rec = self._record(pod)
        if decision.is_preemption:
            rec.phase, rec.nominated_node = Phase.PREEMPTING, decision.node
        else:
            rec.phase, rec.node = Phase.BINDING, decision.node
        if pod.uid not in self.cache:
            self.cache.assume(pod, decision.node)

    def _pod_assigned(self, pod: models.Pod) -> None:
        cached = self.cache.get(pod.uid)
        was_new = cached is None or cached.state is PodState.ASSUMED
        try:
            self.cache.add_pod(pod)
        except CacheError as exc:  # never expected; keep going with a loud log
            log.error("cache rejected assigned pod %s: %s", pod.key, exc)
            return
        self.algo.confirm(pod.uid)
        self._unnominate(pod.uid, bound_on=pod.node_name)
        self.queue.delete(pod.uid)
        decision_id = self.decision_of_pod.pop(pod.uid, None)
        if decision_id is not None:
            # The watch confirmed the binding before the binder's report arrived.
            decision = self.decisions.pop(decision_id, None)
            if decision is not None:
                self.flow.bound(
                    created=decision.created, now=self.clock.now(),
                    in_flight=self.bindings_in_flight,
                )  # fmt: skip
            self._count("bound")
            self._emit(
                DecisionEvent(
                    EventKind.BOUND, pod, pod.node_name, "", decision_id, self.clock.now(),
                    "watch",
                )
            )  # fmt: skip
        if self.is_ours(pod) or pod.uid in self.records:
            rec = self._record(pod)
            if rec.phase is not Phase.BOUND:
                rec.phase, rec.node = Phase.BOUND, pod.node_name
            if decision_id is not None:
                rec.unreported_decision = decision_id
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
        cached = self.cache.get(pod.uid)
        if cached is not None and cached.state is PodState.ADDED:
            self.cache.remove_pod(pod.uid)
        else:
            self.algo.forget(pod.uid)  # an assumption never bound: Unreserve too
        self.cache.table.forget_pod_vectors(pod.uid)
        decision_id = self.decision_of_pod.pop(pod.uid, None)
        if decision_id is not None:
            self._volumes_released(self.decisions.pop(decision_id, None))
        self._unnominate(pod.uid)
        self._drop_record(pod.uid)
        for preemption_id in done:  # after the last victim's room is free in the view
            self._victims_gone(preemption_id)
        if cached is not None:
            self.queue.on_event(framework.ClusterEvent.ASSIGNED_POD_DELETE)


def gated_message(gates: tuple[str, ...]) -> str:
    """What the API says of a gated pod (kube-scheduler keeps the same words to itself:
    "waiting for scheduling gates: [...]")."""
    return "waiting for its scheduling gates: " + ", ".join(gates)


def _node_changes(old: models.Node | None, node: models.Node) -> list[framework.ClusterEvent]:
    """The cluster events a node's add or update makes (those the queue requeues by)."""
    if old is None:
        return [framework.ClusterEvent.NODE_ADD]
    changes = (
        (old.allocatable != node.allocatable, framework.ClusterEvent.NODE_ALLOCATABLE),
        (old.labels != node.labels, framework.ClusterEvent.NODE_LABEL),
        (old.taints != node.taints, framework.ClusterEvent.NODE_TAINT),
        (old.unschedulable != node.unschedulable, framework.ClusterEvent.NODE_SCHEDULABLE),
    )
    return [event for changed, event in changes if changed]
