"""Binders' reports, failed hand-overs and deadlines: how a decision in flight ends.

`on_outcome` applies a binder's report (BOUND confirms, CONFLICT requeues at once, FAILED
and DEADLINE_EXCEEDED back off, POD_GONE drops the pod); `refused` and `unsure` cover a
hand-over that failed before or maybe after the binder took it; `expire_overdue` releases
decisions past their deadline that the watch still shows unbound, unless a binder still
reports one IN_PROGRESS (`binder_working`). A report of a decision
this scheduler did not make, for a pod it sees pending, is adopted (`adopt`): after a
failover or a restart the binders still carry the predecessor's decisions.
"""

from __future__ import annotations

from collections.abc import Sequence

from services.scheduler.state.cycle import SchedulingCycle
from services.scheduler.state.records import Decision, DecisionEvent, EventKind, Outcome, Phase
from splitsched.core import storage
from splitsched.core.devices.model import ClaimWrite
from splitsched.core.plugins import dynamic_resources, volume_binding
from splitsched.core.queue import QueuedPod

_FAILURE_KINDS = {Outcome.CONFLICT: EventKind.CONFLICT, Outcome.POD_GONE: EventKind.POD_GONE}
#: How long after a binder's last IN_PROGRESS report (binders send them every 2 s) its
#: decision still counts as worked on: a few lost rounds do not expire it.
IN_PROGRESS_GRACE = 10.0
#: How long past its deadline a decision a binder still reports stays: a binder whose
#: Binding's answer was lost reads the pod for up to 30 s after its own deadline to learn
#: whether it landed (`services.binder.binding.UNSURE_SETTLE_SECONDS`); past that, a
#: binder still reporting it is stuck, and the decision expires as usual.
IN_PROGRESS_OVERTIME = 45.0


class BinderOutcomes(SchedulingCycle):
    def refused(self, decision: Decision, reason: str, *, congested: bool = False) -> None:
        """A binder would not take the decision (or could not be reached): undo, retry.
        `congested`: refused because its intake is full; nothing is wrong with the pod,
        so it waits in the active queue, not in backoff, and the flow window shrinks."""
        message = f"binder refused: {reason}"
        if congested and self.decisions.get(decision.decision_id) is decision:
            self.flow.congested(created=decision.created, now=self.clock.now())
            self._release(decision, requeue="now", message=message)
            return
        self._release(decision, requeue="backoff", message=message)

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
        volume_bindings: Sequence[storage.VolumeBinding] = (),
        claim_writes: Sequence[ClaimWrite] = (),
    ) -> bool:
        """Apply a binder's report. Idempotent: an already resolved decision is ignored
        (returns False), but for the Binding calls of the first final report of one the
        watch showed bound (`_late_report`). An unknown one still in flight (IN_PROGRESS)
        or just bound (for a preemption: its victims evicted), for a pod the view shows
        pending, is adopted (`adopt`); any other is ignored."""
        decision = self.decisions.get(decision_id)
        if decision is None:
            if self._late_report(decision_id, pod_uid, result, attempts):
                return False
            if result not in (Outcome.IN_PROGRESS, Outcome.BOUND):
                return False
            decision = self.adopt(
                decision_id=decision_id, pod_uid=pod_uid, node=node, binder_id=binder_id,
                preemption=preemption, victim_uids=victim_uids, volume_bindings=volume_bindings,
                claim_writes=claim_writes,
            )  # fmt: skip
            if decision is not None and result is Outcome.IN_PROGRESS:
                self.binder_working[decision_id] = self.clock.now()
            if decision is None or result is Outcome.IN_PROGRESS or preemption:
                return decision is not None
        elif result is Outcome.IN_PROGRESS:
            self.binder_working[decision_id] = self.clock.now()
            return False  # ours, still in flight: it does not expire while reported
        if decision.is_preemption and result is Outcome.BOUND:
            # The victims' evictions were accepted; their deletions reach us through the
            # watch, and the last one sends the preemptor to be bound (`_victims_gone`).
            return True
        rec = self.records.get(decision.pod.uid)
        if rec is not None:
            rec.bind_attempts += attempts
        if result is Outcome.BOUND:
            self._bound(decision, binder_id)
            return True
        self._bind_failed(decision, result, message, binder_id, started=attempts > 0)
        return True

    def _bind_failed(
        self, decision: Decision, result: Outcome, message: str, binder_id: str, *, started: bool
    ) -> None:
        """A binder's failure report: POD_GONE drops the pod, CONFLICT requeues it at once.
        DEADLINE_EXCEEDED before any request (`started` False: it waited in the binder's
        intake until too late) too: the binders were too slow for the deadline, nothing is
        wrong with the pod, and the flow window shrinks instead. Any other failure, a
        binding tried and given up included, backs off (the pod's attempts count on)."""
        kind = _FAILURE_KINDS.get(result, EventKind.BIND_FAILED)
        self._emit(
            DecisionEvent(
                kind, decision.pod, decision.node, message, decision.decision_id, self.clock.now(),
                binder_id,
            )
        )  # fmt: skip
        if result is Outcome.POD_GONE:
            self._release(decision, requeue=None, message=message)
        elif result is Outcome.CONFLICT:
            self._release(decision, requeue="now", message=message)
        elif result is Outcome.DEADLINE_EXCEEDED and not started:
            self.flow.congested(created=decision.created, now=self.clock.now())
            self._release(decision, requeue="now", message=message)
        else:
            self._release(decision, requeue="backoff", message=message)

    def _late_report(self, decision_id: str, pod_uid: str, result: Outcome, attempts: int) -> bool:
        """The final report of a decision the watch showed bound before it came: the
        binder made its Binding calls all the same, so they count (once: a re-sent report
        finds nothing); nothing else about the pod changes. False if it is not one."""
        rec = self.records.get(pod_uid)
        if rec is None or not decision_id or rec.unreported_decision != decision_id:
            return False
        if result is Outcome.IN_PROGRESS:
            return False  # still at it: its final report follows
        rec.unreported_decision = ""
        rec.bind_attempts += attempts
        return True

    def _bound(self, decision: Decision, binder_id: str) -> None:
        """A binder bound the pod: its room stays taken until the watch confirms it."""
        uid = decision.pod.uid
        self.flow.bound(
            created=decision.created, now=self.clock.now(), in_flight=self.bindings_in_flight
        )
        self.cache.finish_binding(uid)
        self.algo.confirm(uid)
        del self.decisions[decision.decision_id]
        self.decision_of_pod.pop(uid, None)
        rec = self.records.get(uid)
        if rec is not None:
            rec.phase, rec.node = Phase.BOUND, decision.node
        self._count("bound")
        self._emit(
            DecisionEvent(
                EventKind.BOUND, decision.pod, decision.node, "", decision.decision_id,
                self.clock.now(), binder_id,
            )
        )  # fmt: skip

    # ---- adopting a predecessor's decisions ------------------------------------------------
    def adopt(
        self,
        *,
        decision_id: str,
        pod_uid: str,
        node: str,
        binder_id: str = "",
        preemption: bool = False,
        victim_uids: Sequence[str] = (),
        volume_bindings: Sequence[storage.VolumeBinding] = (),
        claim_writes: Sequence[ClaimWrite] = (),
    ) -> Decision | None:
        """Take over a decision a binder is carrying out that this scheduler did not make
        (its predecessor did, before a failover or a restart): count the pod on that node
        at once, so its room is not given to another pod while the bind may still land,
        and track the decision so its outcome (or the watch, or the deadline) resolves it
        as usual. A preemption holds the room for its preemptor the same way until the
        victims still in the view are gone, then binds it there if it fits
        (`_adopt_preemption`). Only for a pod the view shows pending, not gated and not
        already decided; returns None otherwise. The predecessor chose; this scheduler's
        Reserve holds the `volume_bindings` the binder reports (VolumeBinding assumes them
        rather than choosing), so no other pod takes those volumes, and the decision
        gets the deadline of one with volumes; DynamicResources' Reserve holds the
        `claim_writes` the same way (their devices are in use, the claims reserved)."""
        rec = self.records.get(pod_uid)
        if (
            not self.synced
            or not node
            or rec is None
            or rec.pod.node_name
            or rec.phase is Phase.GATED  # its Binding would be refused: never ours to hold
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
        chosen = volume_binding.reserve_chosen(self.cache.table.storage, volume_bindings)
        dynamic_resources.hold_chosen(chosen, self.cache.table.devices, claim_writes)
        if not self.algo.assume(pod, node, chosen).ok:
            return None  # a Permit plugin would not have it: never expected
        self.queue.delete(pod_uid)
        return self._register(queued, node, now, adopted_from=binder_id, decision_id=decision_id)

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
        return self._register(
            queued, node, now, victims=victims, adopted_from=binder_id, decision_id=decision_id
        )

    # ---- deadlines -------------------------------------------------------------------------
    def overdue_decisions(self) -> list[Decision]:
        """Decisions past their deadline with no outcome and no binder still on them. The
        watch decides: a pod the watch shows bound was confirmed already (removed in
        `_pod_assigned`); what is left is still unbound in the API after the deadline, so
        it is safe to forget, unless its binder still reports it IN_PROGRESS: it may be
        reading the pod to learn whether a Binding whose answer was lost landed, and a
        second decision for the pod meanwhile would bind it twice over (the second one's
        409 reads as bound, both write a Scheduled Event) or give its room away."""
        now = self.clock.now()
        return [
            d for d in self.decisions.values()
            if d.deadline < now and not self._binder_still_on(d, now)
        ]  # fmt: skip

    def _binder_still_on(self, decision: Decision, now: float) -> bool:
        seen = self.binder_working.get(decision.decision_id)
        return (
            seen is not None
            and now - seen <= IN_PROGRESS_GRACE
            and now < decision.deadline + IN_PROGRESS_OVERTIME
        )

    def expire_overdue(self) -> int:
        overdue = self.overdue_decisions()
        for decision in overdue:
            self.flow.congested(created=decision.created, now=self.clock.now())
            self._emit(
                DecisionEvent(
                    EventKind.BIND_FAILED,
                    decision.pod,
                    decision.node,
                    "no outcome before the bind deadline; the watch shows the pod unbound",
                    decision.decision_id,
                    self.clock.now(),
                )
            )
            self._release(decision, requeue="backoff", message="bind deadline passed")
        for decision_id in [i for i in self.binder_working if i not in self.decisions]:
            del self.binder_working[decision_id]  # resolved
        return len(overdue)
