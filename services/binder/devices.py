"""The device step before a Binding, as kube-scheduler's DynamicResources PreBind does it:
for each ResourceClaim of the decision, in order, write the allocation the scheduler chose
(after adding the finalizer ``resource.kubernetes.io/delete-protection``) and add the pod
to ``status.reservedFor``, or only add the pod when the claim is already allocated. Only
then does the worker POST the Binding.

``services.binder.worker`` calls ``DeviceStep.reserve`` after the volume step for a
decision that carries ``claim_writes`` (most carry none and never get here), and
``DeviceStep.undo`` when the Binding then fails for certain. What each read shows and
what each answer means is ``services.binder.deviceclaims``'; every request goes through the
binder's one retry loop. An update is conditional on the resourceVersion read: a 409 means
the claim changed, so it is read and planned again (at most ``MAX_CONFLICTS`` times, as
kube's ``retry.RetryOnConflict``). The step ends ``BINDING_RESERVE`` seconds (at most a
quarter of the time left) before the decision's deadline, so the Binding still has time.

A failure undoes the step (kube's Unreserve): the pod is removed from ``reservedFor`` of
every claim the step reserved (or found reserved) for it; allocations and finalizers stay,
as in kube. The undo is best effort with its own ``UNDO_SECONDS``: a reservation it could
not remove is logged, and the pod's next attempt finds it done, or kube-controller-manager
removes it once the pod is gone.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence

from services.binder import apirequests, deviceclaims
from services.binder.apirequests import ApiRequest
from services.binder.classify import Answer
from services.binder.deviceclaims import Claim, DeviceFailure, Failure
from services.binder.jobs import BindJob, BindResult, ClaimWrite, Retry
from services.binder.metrics import BinderMetrics
from services.binder.retrying import Attempted, Retrier
from splitsched.runtime import exemplars

log = logging.getLogger(__name__)

#: Seconds before the decision's deadline the device step ends, at most (the Binding's).
BINDING_RESERVE = 2.0
#: Updates refused in a row because the claim changed before the step gives up.
MAX_CONFLICTS = 5
#: How long the undo may take, whatever the decision's deadline.
UNDO_SECONDS = 5.0

Write = deviceclaims.AddFinalizer | deviceclaims.WriteStatus


def step_deadline(job: BindJob, now: float) -> float:
    """When the device step must be over, leaving the Binding its reserve."""
    left = max(0.0, job.deadline - now)
    return job.deadline - min(BINDING_RESERVE, left / 4)


class DeviceStep:
    """Allocates and reserves the decision's ResourceClaims for its pod, and undoes that."""

    def __init__(
        self, *, retrier: Retrier, metrics: BinderMetrics, clock: Callable[[], float]
    ) -> None:
        self._retrier = retrier
        self._metrics = metrics
        self._clock = clock

    async def reserve(self, job: BindJob) -> tuple[BindResult | None, tuple[ClaimWrite, ...]]:
        """None and the claims reserved for the pod when every claim of ``job`` is (go on
        with the Binding; undo those if it fails), else the decision's outcome (the step's
        reservations already undone) and no claims."""
        started = time.monotonic()
        deadline = step_deadline(job, self._clock())
        reserved: list[ClaimWrite] = []
        failure = None
        for write in job.claim_writes:
            failure = await self._claim(job, write, deadline)
            if failure is not None:
                break
            reserved.append(write)
        self._metrics.device_step_duration.observe(
            time.monotonic() - started, exemplar=exemplars.from_carrier(job.trace_context)
        )
        self._metrics.device_steps.labels(result=failure.reason if failure else "reserved").inc()
        if failure is None:
            return None, tuple(reserved)
        log.info("devices of %s on %s (decision %s): %s (%s)", job.pod, job.node,
                 job.decision_id, failure.message, failure.reason)  # fmt: skip
        await self.undo(job, reserved)
        return failure.result(), ()

    async def undo(self, job: BindJob, reserved: Sequence[ClaimWrite]) -> None:
        """Remove the pod from reservedFor of each of ``reserved``, last first (kube's
        Unreserve)."""
        deadline = self._clock() + UNDO_SECONDS
        for write in reversed(reserved):
            request = apirequests.unreserve_resource_claim(write, job.pod)
            done = await self._retrier.send(request, deadline=deadline)
            answer = done.value
            ok = answer is not None and (answer.status < 300 or answer.status == 404)
            self._metrics.device_unreserves.labels(result="done" if ok else "failed").inc()
            if not ok:
                why = done.error if answer is None else f"HTTP {answer.status}: {answer.message}"
                log.warning("undoing the device step of %s: %s failed: %s", job.decision_id,
                            request.what, why)  # fmt: skip

    async def _claim(
        self, job: BindJob, write: ClaimWrite, deadline: float
    ) -> DeviceFailure | None:
        """Write what ``write`` still needs, reading again after a 409."""
        for _ in range(MAX_CONFLICTS):
            claim: Claim | DeviceFailure | None = await self._read(write, deadline)
            while isinstance(claim, Claim):
                plan = deviceclaims.plan(write, claim, job.pod, now=self._clock())
                if isinstance(plan, DeviceFailure | deviceclaims.Done):
                    return plan if isinstance(plan, DeviceFailure) else None
                written = await self._write(write, plan, deadline)
                if isinstance(written, deviceclaims.Written):
                    if isinstance(plan, deviceclaims.WriteStatus):
                        return None
                    claim = written.claim  # the finalizer is on: plan the status with it
                else:
                    claim = None if isinstance(written, deviceclaims.Conflict) else written
            if isinstance(claim, DeviceFailure):
                return claim
        return DeviceFailure(
            Failure.CONFLICT, f"claim {write} changed under each of {MAX_CONFLICTS} updates"
        )

    # ---- reads and writes through the retry loop -------------------------------------

    async def _read(self, write: ClaimWrite, deadline: float) -> Claim | DeviceFailure:
        request = apirequests.read_resource_claim(write)
        done = await self._retrier.send(request, deadline=deadline)
        answer = done.value
        if answer is None:
            return DeviceFailure(Failure.TIMEOUT, f"reading {request.what}: {done.error}")
        if answer.status == 200 and isinstance(answer.body, dict):
            return deviceclaims.claim_of(answer.body)
        return deviceclaims.read_failure(answer, write=write)

    async def _write(
        self, write: ClaimWrite, plan: Write, deadline: float
    ) -> deviceclaims.Written | deviceclaims.Conflict | DeviceFailure:
        request = _request(write, plan)

        async def judge(
            answer: Answer, budget: float
        ) -> deviceclaims.Written | deviceclaims.Conflict | DeviceFailure | Retry:
            return deviceclaims.write_answer(answer, write=write, what=request.what)

        done: Attempted[deviceclaims.Written | deviceclaims.Conflict | DeviceFailure]
        done = await self._retrier.run(request, judge=judge, deadline=deadline)
        if done.value is None:
            return DeviceFailure(Failure.TIMEOUT, f"{request.what}: {done.error}")
        return done.value


def _request(write: ClaimWrite, plan: Write) -> ApiRequest:
    if isinstance(plan, deviceclaims.AddFinalizer):
        return apirequests.update_resource_claim(write, plan.body)
    return apirequests.update_resource_claim_status(write, plan.body, allocates=plan.allocates)
