"""Deallocating the ResourceClaims the scheduler's DynamicResources PostFilter gave back,
as kube-scheduler's PostFilter does with one status update: ``status.allocation``,
``status.reservedFor`` and ``status.devices`` cleared, conditional on the resourceVersion
read (pkg/scheduler/framework/plugins/dynamicresources/dynamicresources.go, PostFilter).

Why it is needed: a binding that fails after its claim's allocation was written leaves the
allocation (kube's Unreserve does too). If the claim's node then no longer takes the pod,
only a deallocation lets the pod be placed elsewhere.

The scheduler sends the claims with the pod's unschedulable report
(``UnschedulableReport.deallocate_claims``); ``services.binder.unschedulable`` calls
``Deallocator.run`` once per report, before the report's writes. A claim is deallocated
only when the pod is one this binder serves and still exists (``Admission``), the claim is
in the pod's namespace with the uid the scheduler saw, is allocated, and is reserved for
no pod but this one, which kube checks too (as read, not as the scheduler saw it: a claim
reserved meanwhile is left alone). The finalizer stays: kube-controller-manager's
resourceclaim controller removes it. Best effort: a claim not deallocated is logged and
counted; the pod's next attempt finds it still allocated and asks again.
"""

from __future__ import annotations

import enum
import logging
from collections.abc import Awaitable, Callable, Coroutine, Mapping, Sequence
from typing import Any

from services.binder import apirequests, deviceclaims
from services.binder.admission import ReportCheck
from services.binder.deviceclaims import Claim
from services.binder.jobs import ClaimWrite, PodKey
from services.binder.metrics import BinderMetrics
from services.binder.retrying import Retrier
from services.binder.unschedulable import PodCheck, ReportWriter, UnschedulableReports

log = logging.getLogger(__name__)

#: Seconds one report's deallocations may take, reads and retries included.
DEALLOCATE_SECONDS = 10.0
#: Updates refused because the claim changed, per claim, before it is left alone.
MAX_CONFLICTS = 3


class Skip(enum.StrEnum):
    """Why a claim was left as it is (the ``result`` label of
    splitsched_binder_claim_deallocations_total; ``deallocated`` when it was not)."""

    GONE = "gone"  # 404, or re-created under another uid
    NOT_ALLOCATED = "not_allocated"  # someone deallocated it first
    IN_USE = "in_use"  # reserved for another pod
    NOT_OURS = "not_ours"  # the pod is gone, not ours, or in another namespace
    FAILED = "failed"  # the API answered an error, or kept conflicting, or time ran out


def plan(claim: Claim, target: ClaimWrite, pod: PodKey) -> dict[str, Any] | Skip:
    """The claim's body with its status cleared, or why it must be left alone."""
    if claim.uid != target.uid:
        return Skip.GONE
    if not claim.allocated:
        return Skip.NOT_ALLOCATED
    if any(ref.get("uid") != pod.uid for ref in claim.reserved_for):
        return Skip.IN_USE
    body = dict(claim.body)
    status = {k: v for k, v in _object(body.get("status")).items() if k not in _CLEARED}
    body["status"] = status
    return body


_CLEARED = frozenset({"allocation", "reservedFor", "devices"})


def _object(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


class Deallocator:
    """Deallocates claims for the scheduler's reports (see the module's docstring)."""

    def __init__(
        self,
        *,
        retrier: Retrier,
        admission: PodCheck | None,
        metrics: BinderMetrics,
        clock: Callable[[], float],
    ) -> None:
        self._retrier = retrier
        self._admission = admission
        self._metrics = metrics
        self._clock = clock

    async def run(self, pod: PodKey, claims: Sequence[ClaimWrite], *, caller: str = "") -> None:
        deadline = self._clock() + DEALLOCATE_SECONDS
        if not await self._pod_is_ours(pod, deadline, caller):
            self._count(Skip.NOT_OURS, len(claims))
            return
        for target in claims:
            if target.namespace != pod.namespace:
                result: Skip | str = Skip.NOT_OURS
            else:
                result = await self._one(target, pod, deadline)
            self._count(result)
            if result == Skip.FAILED:
                log.warning("could not deallocate resourceclaim %s for %s", target, pod)
            else:
                log.info("resourceclaim %s for %s: %s", target, pod, result)

    async def _pod_is_ours(self, pod: PodKey, deadline: float, caller: str) -> bool:
        if self._admission is None:
            return True
        check = await self._admission.unschedulable(pod, deadline=deadline, caller=caller)
        return check is ReportCheck.WRITE

    async def _one(self, target: ClaimWrite, pod: PodKey, deadline: float) -> Skip | str:
        for _ in range(MAX_CONFLICTS):
            read = await self._retrier.send(
                apirequests.read_resource_claim(target), deadline=deadline
            )
            answer = read.value
            if answer is None or answer.status not in (200, 404):
                return Skip.FAILED
            if answer.status == 404 or not isinstance(answer.body, dict):
                return Skip.GONE
            body = plan(deviceclaims.claim_of(answer.body), target, pod)
            if isinstance(body, Skip):
                return body
            request = apirequests.deallocate_resource_claim(target, body)
            written = await self._retrier.send(request, deadline=deadline)
            status = written.value.status if written.value is not None else 0
            if 200 <= status < 300:
                return "deallocated"
            if status == 404:
                return Skip.GONE
            if status != 409:
                return Skip.FAILED
        return Skip.FAILED

    def _count(self, result: Skip | str, n: int = 1) -> None:
        self._metrics.claim_deallocations.labels(result=str(result)).inc(n)


def reports_deallocating(
    *,
    retrier: Retrier,
    admission: PodCheck | None,
    recorder: ReportWriter,
    metrics: BinderMetrics,
    clock: Callable[[], float],
    sleep: Callable[[float], Awaitable[None]],
    spawn: Callable[[Coroutine[Any, Any, None]], None],
    stopping: Callable[[], bool],
) -> UnschedulableReports:
    """The binder's unschedulable reports, with the claims they carry deallocated first."""
    deallocator = Deallocator(retrier=retrier, admission=admission, metrics=metrics, clock=clock)
    return UnschedulableReports(
        admission=admission, recorder=recorder, clock=clock, sleep=sleep, spawn=spawn,
        stopping=stopping, deallocator=deallocator,
    )  # fmt: skip
