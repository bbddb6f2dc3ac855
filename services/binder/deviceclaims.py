"""The device step's decisions, pure: what a ResourceClaim as read says about one
``ClaimWrite`` of a decision, the JSON of the writes, and what their answers mean. The reads
and writes are ``services.binder.devices``'.

kube-scheduler's DynamicResources PreBind (pkg/scheduler/framework/plugins/
dynamicresources/dynamicresources.go, ``bindClaim``) does this for each of the pod's claims
not yet reserved for it: a claim being deleted fails ("got deleted in the meantime"); with
an allocation to write, a claim already allocated fails ("got allocated elsewhere in the
meantime"), else the finalizer ``resource.kubernetes.io/delete-protection`` is added by a
normal update (when missing) and one status update writes the allocation (with its
``allocationTimestamp``: DRADeviceBindingConditions and DRAResourceClaimDeviceStatus are on
by default in 1.36) and appends the pod to ``reservedFor``; without one, only the pod is
appended. Each update carries the resourceVersion read: a 409 means the claim changed, so it
is read again and planned again.

One difference, for idempotence: a claim already holding exactly the decision's allocation
(an earlier attempt of this decision wrote it, then its reservation was undone) is only
reserved, where kube fails it. kube never meets that case, as its scheduler is one process.
A claim holding another allocation fails even when it is reserved for the pod already (a
binder killed before the Binding left it so, and a decision from a stale view chose other
devices, maybe on another node): done would bind the pod where the decision's devices are
not, and report devices the claim does not hold.

On a failure, kube's Unreserve removes the pod from ``reservedFor`` with a strategic-merge
patch keyed by the pod's uid (``unreserve_patch``) and leaves the allocation and the
finalizer: the scheduler's next attempt reserves the allocated claim again, or its
PostFilter deallocates a claim allocated for a node that no longer fits.
"""

from __future__ import annotations

import datetime
import enum
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from services.binder.classify import Answer, again, http_error
from services.binder.jobs import DEADLINE_EXCEEDED, FAILED, BindResult, ClaimWrite, PodKey, Retry
from splitsched.core import models
from splitsched.core.convert.devices import claim_from_k8s
from splitsched.core.devices.model import AllocatedConfig, Allocation, DeviceResult

#: The finalizer kube-scheduler puts on a claim it allocates (resourceapi.Finalizer); the
#: resource claim controller removes it once the claim is deallocated.
FINALIZER = "resource.kubernetes.io/delete-protection"
#: Starts the message of every failed device step's outcome.
DEVICE_BINDING_FAILED = "device binding failed"


class Failure(enum.StrEnum):
    """Why a device step failed (in the outcome's message and the ``result`` label of
    splitsched_binder_device_steps_total)."""

    CLAIM_MISSING = "claim_missing"  # 404, or re-created under another uid
    CLAIM_DELETING = "claim_deleting"  # deletionTimestamp set
    ALLOCATED_ELSEWHERE = "allocated_elsewhere"  # another allocation was written first
    NOT_ALLOCATED = "not_allocated"  # a shared claim to reserve has no allocation
    CONFLICT = "conflict"  # the claim kept changing under the writes
    API_ERROR = "api_error"  # a read or write answered another error
    TIMEOUT = "timeout"  # retries ran out before the step's deadline


@dataclass(frozen=True)
class DeviceFailure:
    reason: Failure
    message: str

    def result(self) -> BindResult:
        """The decision's outcome: FAILED, or DEADLINE_EXCEEDED for a timeout; either way
        the scheduler forgets the decision and requeues the pod."""
        code = DEADLINE_EXCEEDED if self.reason is Failure.TIMEOUT else FAILED
        return BindResult(code, f"{DEVICE_BINDING_FAILED} ({self.reason}): {self.message}", 0, 0)


@dataclass(frozen=True)
class Claim:
    """What the step reads of a ResourceClaim: ``body`` is the JSON as read, which an
    update sends back changed (kube's Update and UpdateStatus send the whole object)."""

    body: Mapping[str, Any]
    uid: str
    deleting: bool
    finalizers: tuple[str, ...]
    allocated: bool  # status.allocation is set (``allocation`` None: it could not be read)
    allocation: Allocation | None
    reserved_for: tuple[Mapping[str, Any], ...]

    def reserved_for_pod(self, pod: PodKey) -> bool:
        """kube's ``IsReservedForPod``: an entry with the pod's uid."""
        return any(ref.get("uid") == pod.uid for ref in self.reserved_for)


def _object(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def claim_of(body: Mapping[str, Any]) -> Claim:
    """A ResourceClaim's JSON as the step reads it; its allocation is read the way the
    watcher reads it, so the scheduler's allocation and the one written compare equal."""
    meta, status = _object(body.get("metadata")), _object(body.get("status"))
    finalizers = meta.get("finalizers")
    reserved = status.get("reservedFor")
    allocated = status.get("allocation") is not None
    return Claim(
        body=body,
        uid=str(meta.get("uid") or ""),
        deleting=meta.get("deletionTimestamp") is not None,
        finalizers=tuple(str(f) for f in finalizers) if isinstance(finalizers, list) else (),
        allocated=allocated,
        allocation=claim_from_k8s(body).allocation if allocated else None,
        reserved_for=tuple(_object(r) for r in reserved) if isinstance(reserved, list) else (),
    )


# ---- the allocation as the API's JSON -----------------------------------------------------


def _requirement(req: models.NodeSelectorRequirement) -> dict[str, Any]:
    out: dict[str, Any] = {"key": req.key, "operator": req.operator}
    if req.values:
        out["values"] = list(req.values)
    return out


def _term(term: models.NodeSelectorTerm) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if term.match_expressions:
        out["matchExpressions"] = [_requirement(r) for r in term.match_expressions]
    if term.match_fields:
        out["matchFields"] = [_requirement(r) for r in term.match_fields]
    return out


def _result(result: DeviceResult) -> dict[str, Any]:
    out: dict[str, Any] = {
        "request": result.request,
        "driver": result.driver,
        "pool": result.pool,
        "device": result.device,
    }
    if result.admin_access:
        out["adminAccess"] = True
    return out


def _config(config: AllocatedConfig) -> dict[str, Any]:
    """An allocated config entry: the model keeps its DeviceConfiguration (``opaque``) as
    the JSON text it was read as, copied back untouched."""
    out: dict[str, Any] = {"source": config.source}
    if config.requests:
        out["requests"] = list(config.requests)
    parsed = json.loads(config.configuration) if config.configuration else {}
    out.update(parsed if isinstance(parsed, dict) else {})
    return out


def rfc3339(now: float) -> str:
    """A metav1.Time: whole seconds, UTC."""
    moment = datetime.datetime.fromtimestamp(int(now), tz=datetime.UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def allocation_json(allocation: Allocation, *, now: float | None = None) -> dict[str, Any]:
    """``status.allocation`` (resource.k8s.io/v1 AllocationResult) for ``allocation``;
    ``now``: its allocationTimestamp, as kube-scheduler sets it."""
    devices: dict[str, Any] = {"results": [_result(r) for r in allocation.results]}
    if allocation.config:
        devices["config"] = [_config(c) for c in allocation.config]
    out: dict[str, Any] = {"devices": devices}
    if allocation.node_selector is not None:
        out["nodeSelector"] = {"nodeSelectorTerms": [_term(t) for t in allocation.node_selector]}
    if now is not None:
        out["allocationTimestamp"] = rfc3339(now)
    return out


# ---- before the write ------------------------------------------------------------------


class Done:
    """Nothing to write: the claim is already reserved for the pod."""

    def __repr__(self) -> str:
        return "DONE"


DONE: Final = Done()


@dataclass(frozen=True)
class AddFinalizer:
    """Update the claim (PUT) with the finalizer added, before the allocation is written."""

    body: dict[str, Any]


@dataclass(frozen=True)
class WriteStatus:
    """Update the claim's status (PUT .../status): the pod appended to reservedFor, and
    the allocation when ``allocates``."""

    body: dict[str, Any]
    allocates: bool


def _consumer(pod: PodKey) -> dict[str, Any]:
    return {"resource": "pods", "name": pod.name, "uid": pod.uid}


def _with_status(claim: Claim, pod: PodKey, allocation: dict[str, Any] | None) -> dict[str, Any]:
    body = dict(claim.body)
    status = dict(_object(body.get("status")))
    if allocation is not None:
        status["allocation"] = allocation
    status["reservedFor"] = [*claim.reserved_for, _consumer(pod)]
    body["status"] = status
    return body


def _with_finalizer(claim: Claim) -> dict[str, Any]:
    body = dict(claim.body)
    meta = dict(_object(body.get("metadata")))
    meta["finalizers"] = [*claim.finalizers, FINALIZER]
    body["metadata"] = meta
    return body


def plan(
    write: ClaimWrite, claim: Claim, pod: PodKey, *, now: float
) -> Done | AddFinalizer | WriteStatus | DeviceFailure:
    """What allocating (when ``write.allocation`` is set) and reserving the claim for
    ``pod`` takes, as read now; kube's checks in kube's order."""
    if claim.uid != write.uid:
        return missing(write, f"re-created (uid {claim.uid}, the decision was for {write.uid})")
    other_devices = write.allocation is not None and claim.allocated
    other_devices = other_devices and claim.allocation != write.allocation
    if claim.reserved_for_pod(pod) and not other_devices:
        return DONE  # reserved already: an earlier attempt, or another binder, wrote it
    if claim.deleting:
        return DeviceFailure(Failure.CLAIM_DELETING, f"claim {write} got deleted in the meantime")
    if write.allocation is None:
        if not claim.allocated:
            message = f"claim {write} got deallocated elsewhere in the meantime"
            return DeviceFailure(Failure.NOT_ALLOCATED, message)
        return WriteStatus(_with_status(claim, pod, None), allocates=False)
    if other_devices:  # even when reserved for the pod: the decision is stale
        return DeviceFailure(
            Failure.ALLOCATED_ELSEWHERE, f"claim {write} got allocated elsewhere in the meantime"
        )
    if claim.allocated:  # with exactly the decision's allocation
        return WriteStatus(_with_status(claim, pod, None), allocates=False)
    if FINALIZER not in claim.finalizers:
        return AddFinalizer(_with_finalizer(claim))
    allocation = allocation_json(write.allocation, now=now)
    return WriteStatus(_with_status(claim, pod, allocation), allocates=True)


def missing(write: ClaimWrite, how: str = "not found") -> DeviceFailure:
    return DeviceFailure(Failure.CLAIM_MISSING, f"claim {write} {how}")


def unreserve_patch(claim_uid: str, pod: PodKey) -> dict[str, Any]:
    """kube's Unreserve: a strategic-merge patch of the status deleting the pod's entry of
    reservedFor (keyed by uid, so no resourceVersion is needed), for the claim's uid only."""
    return {
        "metadata": {"uid": claim_uid},
        "status": {"reservedFor": [{"$patch": "delete", "uid": pod.uid}]},
    }


# ---- answers ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Written:
    """The update landed; ``claim`` is the claim as the API server answered it."""

    claim: Claim


class Conflict:
    """409: the claim changed since it was read; read it again and plan again."""

    def __repr__(self) -> str:
        return "CONFLICT"


CONFLICT: Final = Conflict()


def write_answer(
    answer: Answer, *, write: ClaimWrite, what: str
) -> Written | Conflict | Retry | DeviceFailure:
    """What an update's answer means: 409 a changed resourceVersion (read again); 429 and
    5xx are tried again; 404 the claim is gone; anything else (a 422 from validation) the
    API's error."""
    code = answer.status
    if 200 <= code < 300:
        return Written(claim_of(_object(answer.body)))
    if code == 409:
        return CONFLICT
    if code == 429 or code >= 500:
        return again(answer)
    if code == 404:
        return missing(write)
    return DeviceFailure(Failure.API_ERROR, f"{what}: {http_error(answer)}")


def read_failure(answer: Answer, *, write: ClaimWrite) -> DeviceFailure:
    """A read that answered neither 200 nor a retried 429/5xx."""
    if answer.status == 404:
        return missing(write)
    return DeviceFailure(Failure.API_ERROR, f"reading claim {write}: {http_error(answer)}")
