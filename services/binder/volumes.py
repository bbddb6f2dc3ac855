"""The volume step before a Binding, as kube-scheduler's VolumeBinding PreBind does it:
for each claim of the decision, claim its static PV (the PV's ``spec.claimRef``) or mark
it for provisioning on the node (``volume.kubernetes.io/selected-node``), static PVs
first; then wait until the PV controller reports every claim bound. Only then does the
worker POST the Binding.

``services.binder.worker`` calls ``VolumeStep.run`` for a decision that carries
``volume_bindings`` (most carry none and never get here). What each read shows and what
each answer means is ``services.binder.claims``'; every request goes through the binder's
one retry loop. A write is conditional on the resourceVersion read: a 409 means the object
changed, so it is read and planned again (at most ``MAX_CONFLICTS`` times). The step
ends ``BINDING_RESERVE`` seconds (at most a quarter of the time left) before the
decision's deadline, so the Binding still has time; a claim not bound by then fails the
decision (``timeout``), and the scheduler forgets it and tries the pod again.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from services.binder import apirequests, claims
from services.binder.apirequests import ApiRequest
from services.binder.claims import Failure, VolumeFailure
from services.binder.classify import Answer
from services.binder.jobs import BindJob, BindResult, Retry, VolumeBinding
from services.binder.metrics import BinderMetrics
from services.binder.retrying import Attempted, Retrier
from splitsched.runtime import exemplars

log = logging.getLogger(__name__)

#: Seconds before the decision's deadline the volume step ends, at most (the Binding's).
BINDING_RESERVE = 2.0
#: The first pause between two checks of the claims, doubled up to ``POLL_MAX``: the PV
#: controller binds a claim within milliseconds of the PV's claimRef (kube polls each 1 s).
POLL_FIRST = 0.05
POLL_MAX = 1.0
#: Writes refused in a row because the object changed before the step gives up.
MAX_CONFLICTS = 5


def step_deadline(job: BindJob, now: float) -> float:
    """When the volume step must be over, leaving the Binding its reserve."""
    left = max(0.0, job.deadline - now)
    return job.deadline - min(BINDING_RESERVE, left / 4)


class VolumeStep:
    """Claims the decision's PVs (or marks its claims for provisioning) and waits until
    they are bound."""

    def __init__(
        self,
        *,
        retrier: Retrier,
        metrics: BinderMetrics,
        clock: Callable[[], float],
        sleep: Callable[[float], Awaitable[None]],
    ) -> None:
        self._retrier = retrier
        self._metrics = metrics
        self._clock = clock
        self._sleep = sleep

    async def run(self, job: BindJob) -> BindResult | None:
        """None when every claim of ``job`` is bound as decided (go on with the Binding),
        else the decision's outcome."""
        started = time.monotonic()
        deadline = step_deadline(job, self._clock())
        failure = await self._claim_all(job, deadline) or await self._wait(job, deadline)
        self._metrics.volume_step_duration.observe(
            time.monotonic() - started, exemplar=exemplars.from_carrier(job.trace_context)
        )
        self._metrics.volume_steps.labels(result=failure.reason if failure else "bound").inc()
        if failure is None:
            return None
        log.info("volumes of %s on %s (decision %s): %s (%s)", job.pod, job.node,
                 job.decision_id, failure.message, failure.reason)  # fmt: skip
        return failure.result()

    async def _claim_all(self, job: BindJob, deadline: float) -> VolumeFailure | None:
        """The writes, static PVs first as kube-scheduler's ``bindAPIUpdate`` does."""
        ordered = sorted(job.volumes, key=lambda v: not v.pv)
        for volume in ordered:
            failure = await self._claim(job, volume, deadline)
            if failure is not None:
                return failure
        return None

    async def _claim(
        self, job: BindJob, volume: VolumeBinding, deadline: float
    ) -> VolumeFailure | None:
        """Write what ``volume`` still needs, reading again after a 409."""
        for _ in range(MAX_CONFLICTS):
            claim = await self._read_claim(volume, deadline)
            if isinstance(claim, VolumeFailure):
                return claim
            plan: claims.Done | claims.BindPv | claims.SelectNode | VolumeFailure
            if volume.pv:
                pv = await self._read_pv(volume.pv, deadline)
                if isinstance(pv, VolumeFailure):
                    return pv
                plan = claims.plan_static(volume, claim, pv)
            else:
                plan = claims.plan_provisioning(volume, claim, node=job.node)
            if isinstance(plan, VolumeFailure | claims.Done):
                return plan if isinstance(plan, VolumeFailure) else None
            written = await self._write(self._request(volume, plan, node=job.node), deadline,
                                        missing=_missing(volume))  # fmt: skip
            if not isinstance(written, claims.Conflict):
                return written if isinstance(written, VolumeFailure) else None
        return VolumeFailure(
            Failure.CONFLICT,
            f"claim {volume} or its PV changed under each of {MAX_CONFLICTS} writes",
        )

    @staticmethod
    def _request(
        volume: VolumeBinding, plan: claims.BindPv | claims.SelectNode, *, node: str
    ) -> ApiRequest:
        if isinstance(plan, claims.BindPv):
            return apirequests.bind_pv(
                volume.pv, resource_version=plan.pv_resource_version, claim=plan.claim,
                bound_by_controller=plan.bound_by_controller,
            )  # fmt: skip
        return apirequests.select_node(
            volume, node=node, resource_version=plan.claim_resource_version
        )

    async def _wait(self, job: BindJob, deadline: float) -> VolumeFailure | None:
        """Until the PV controller reports every claim bound (kube's ``checkBindings``),
        a claim's state says it never will, or ``deadline``."""
        started = self._clock()
        pending = list(job.volumes)
        delay = POLL_FIRST
        while True:
            waiting = []
            for volume in pending:
                progress = await self._progress(job, volume, deadline)
                if isinstance(progress, VolumeFailure):
                    return progress
                if isinstance(progress, claims.Waiting):
                    waiting.append(volume)
            if not waiting:
                return None
            pending = waiting
            if self._clock() + delay >= deadline:
                names = ", ".join(str(v) for v in pending)
                return VolumeFailure(
                    Failure.TIMEOUT,
                    f"claims not bound by the PV controller within "
                    f"{self._clock() - started:.1f}s: {names}",
                )
            await self._sleep(delay)
            delay = min(delay * 2, POLL_MAX)

    async def _progress(
        self, job: BindJob, volume: VolumeBinding, deadline: float
    ) -> claims.Bound | claims.Waiting | VolumeFailure:
        claim = await self._read_claim(volume, deadline)
        if isinstance(claim, VolumeFailure):
            return claim
        if not volume.pv:
            return claims.provisioning_progress(volume, claim, node=job.node)
        if not claims.needs_pv_read(volume, claim):
            return claims.static_progress(volume, claim, None)
        pv = await self._read_pv(volume.pv, deadline)
        if isinstance(pv, VolumeFailure):
            return pv
        return claims.static_progress(volume, claim, pv)

    # ---- reads and writes through the retry loop -------------------------------------

    async def _read_claim(
        self, volume: VolumeBinding, deadline: float
    ) -> claims.Claim | VolumeFailure:
        body = await self._read(apirequests.read_claim(volume), deadline, Failure.CLAIM_MISSING)
        return body if isinstance(body, VolumeFailure) else claims.claim_of(body)

    async def _read_pv(self, name: str, deadline: float) -> claims.Volume | VolumeFailure:
        body = await self._read(apirequests.read_pv(name), deadline, Failure.PV_MISSING)
        return body if isinstance(body, VolumeFailure) else claims.volume_of(body)

    async def _read(
        self, request: ApiRequest, deadline: float, missing: Failure
    ) -> Mapping[str, Any] | VolumeFailure:
        done = await self._retrier.send(request, deadline=deadline)
        answer = done.value
        if answer is None:
            return VolumeFailure(Failure.TIMEOUT, f"reading {request.what}: {done.error}")
        if answer.status == 200 and isinstance(answer.body, dict):
            return answer.body
        return claims.read_failure(answer, what=request.what, missing=missing)

    async def _write(
        self, request: ApiRequest, deadline: float, *, missing: Failure
    ) -> claims.Written | claims.Conflict | VolumeFailure:
        async def judge(
            answer: Answer, budget: float
        ) -> claims.Written | claims.Conflict | VolumeFailure | Retry:
            return claims.write_answer(answer, what=request.what, missing=missing)

        done: Attempted[claims.Written | claims.Conflict | VolumeFailure]
        done = await self._retrier.run(request, judge=judge, deadline=deadline)
        if done.value is None:
            return VolumeFailure(Failure.TIMEOUT, f"{request.what}: {done.error}")
        return done.value


def _missing(volume: VolumeBinding) -> Failure:
    """What a 404 to the step's write means: the PV is written for a static binding."""
    return Failure.PV_MISSING if volume.pv else Failure.CLAIM_MISSING
