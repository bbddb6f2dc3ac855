"""The volume step's decisions, pure: what a claim and a PV as read say about one
``VolumeBinding`` of a decision, before the write (``plan``) and while waiting for the PV
controller (``progress``). The reads and writes are ``services.binder.volumes``'.

kube-scheduler's VolumeBinding PreBind (pkg/scheduler/framework/plugins/volumebinding/
binder.go, ``BindPodVolumes``) writes only this: for a static PV, the PV's
``spec.claimRef`` to the claim plus ``pv.kubernetes.io/bound-by-controller: "yes"``
unless the PV was pre-bound to the claim by name; for dynamic provisioning, the claim's
``volume.kubernetes.io/selected-node`` annotation. The PV controller then binds the claim
(``spec.volumeName`` and ``pv.kubernetes.io/bind-completed``) and the scheduler waits for
that (``checkBindings``): a claim is done once fully bound; a PV whose claimRef was reset
or a claim whose selected-node annotation was removed (its provisioner failed) fails the
decision. Here as there, nothing is rolled back on failure: a PV claimed for a claim stays
so, and the PV controller completes that binding, so the pod's next attempt goes where
the PV is.

Every write is conditional on the resourceVersion read, and a claim or PV already as the
decision wants it is not written again, so the step is idempotent: a retry, another binder
or a restarted one finds it done. One bound elsewhere fails the decision.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from services.binder.classify import Answer, again, http_error
from services.binder.jobs import DEADLINE_EXCEEDED, FAILED, BindResult, Retry, VolumeBinding

#: What kube-scheduler sets on a PV it binds to a claim the user did not pre-bind it to.
BOUND_BY_CONTROLLER = "pv.kubernetes.io/bound-by-controller"
#: What kube's PV controller sets on a claim once it is bound (``AnnBindCompleted``).
BIND_COMPLETED = "pv.kubernetes.io/bind-completed"
#: The annotation kube-scheduler sets on a claim for dynamic provisioning.
SELECTED_NODE = "volume.kubernetes.io/selected-node"
#: Starts the message of every failed volume step's outcome.
VOLUME_BINDING_FAILED = "volume binding failed"


class Failure(enum.StrEnum):
    """Why a volume step failed (in the outcome's message and the ``result`` label of
    splitsched_binder_volume_steps_total)."""

    CLAIM_MISSING = "claim_missing"
    PV_MISSING = "pv_missing"
    CLAIM_BOUND_ELSEWHERE = "claim_bound_elsewhere"  # spec.volumeName is another PV
    PV_CLAIMED_ELSEWHERE = "pv_claimed_elsewhere"  # claimRef names another claim
    CLAIM_SELECTED_ELSEWHERE = "claim_selected_elsewhere"  # selected-node is another node
    CLAIMREF_RESET = "claimref_reset"  # the PV controller dropped our claimRef
    PROVISIONING_FAILED = "provisioning_failed"  # the provisioner removed selected-node
    CONFLICT = "conflict"  # the objects kept changing under the writes
    API_ERROR = "api_error"  # a read or write answered another error
    TIMEOUT = "timeout"  # the PV controller did not bind every claim in time


@dataclass(frozen=True)
class VolumeFailure:
    reason: Failure
    message: str

    def result(self, *, attempts: int = 0, status: int = 0) -> BindResult:
        """The decision's outcome: FAILED, or DEADLINE_EXCEEDED for a timeout; either way
        the scheduler forgets the decision (its assumed PVs too) and requeues the pod."""
        code = DEADLINE_EXCEEDED if self.reason is Failure.TIMEOUT else FAILED
        message = f"{VOLUME_BINDING_FAILED} ({self.reason}): {self.message}"
        return BindResult(code, message, attempts, status)


@dataclass(frozen=True)
class ClaimRef:
    """A PV's ``spec.claimRef``, or the reference to write there."""

    namespace: str
    name: str
    uid: str
    resource_version: str = ""


@dataclass(frozen=True)
class Claim:
    """What the step reads of a PersistentVolumeClaim."""

    ref: ClaimRef  # its own reference (uid and resourceVersion as read)
    volume_name: str
    annotations: Mapping[str, str]

    @property
    def selected_node(self) -> str:
        return self.annotations.get(SELECTED_NODE, "")

    @property
    def fully_bound(self) -> bool:
        """kube's ``isPVCFullyBound``: a volume name and the bind-completed annotation."""
        return bool(self.volume_name) and BIND_COMPLETED in self.annotations


@dataclass(frozen=True)
class Volume:
    """What the step reads of a PersistentVolume."""

    name: str
    resource_version: str
    claim_ref: ClaimRef | None


def _meta(body: Mapping[str, Any]) -> Mapping[str, Any]:
    meta = body.get("metadata")
    return meta if isinstance(meta, Mapping) else {}


def _spec(body: Mapping[str, Any]) -> Mapping[str, Any]:
    spec = body.get("spec")
    return spec if isinstance(spec, Mapping) else {}


def _annotations(meta: Mapping[str, Any]) -> dict[str, str]:
    found = meta.get("annotations")
    return {str(k): str(v) for k, v in found.items()} if isinstance(found, Mapping) else {}


def claim_of(body: Mapping[str, Any]) -> Claim:
    """A claim's JSON as the step reads it."""
    meta = _meta(body)
    ref = ClaimRef(
        namespace=str(meta.get("namespace") or ""),
        name=str(meta.get("name") or ""),
        uid=str(meta.get("uid") or ""),
        resource_version=str(meta.get("resourceVersion") or ""),
    )
    return Claim(ref, str(_spec(body).get("volumeName") or ""), _annotations(meta))


def volume_of(body: Mapping[str, Any]) -> Volume:
    """A PV's JSON as the step reads it."""
    meta = _meta(body)
    found = _spec(body).get("claimRef")
    ref = None
    if isinstance(found, Mapping):
        ref = ClaimRef(
            namespace=str(found.get("namespace") or ""),
            name=str(found.get("name") or ""),
            uid=str(found.get("uid") or ""),
        )
    return Volume(str(meta.get("name") or ""), str(meta.get("resourceVersion") or ""), ref)


# ---- before the write ------------------------------------------------------------------


class Done:
    """Nothing to write: the claim or PV already is as the decision wants it."""

    def __repr__(self) -> str:
        return "DONE"


DONE: Final = Done()


@dataclass(frozen=True)
class BindPv:
    """Write the PV's claimRef (``bound_by_controller``: and the annotation saying the
    binding was not the user's)."""

    claim: ClaimRef
    pv_resource_version: str
    bound_by_controller: bool


@dataclass(frozen=True)
class SelectNode:
    """Annotate the claim with the decision's node, for its provisioner."""

    claim_resource_version: str


def _claimed_for(ref: ClaimRef, claim: Claim) -> bool:
    """kube's ``IsVolumeBoundToClaim``: the claimRef names the claim, and its uid, when
    set, is the claim's."""
    return (
        ref.namespace == claim.ref.namespace
        and ref.name == claim.ref.name
        and ref.uid in ("", claim.ref.uid)
    )


def _bound_elsewhere(volume: VolumeBinding, claim: Claim) -> VolumeFailure:
    return VolumeFailure(
        Failure.CLAIM_BOUND_ELSEWHERE,
        f"claim {volume} is bound to PV {claim.volume_name!r}"
        + (f", not {volume.pv!r}" if volume.pv else ""),
    )


def _claimed_elsewhere(volume: Volume, claim: Claim) -> VolumeFailure:
    ref = volume.claim_ref
    assert ref is not None
    return VolumeFailure(
        Failure.PV_CLAIMED_ELSEWHERE,
        f"PV {volume.name!r} is bound to claim {ref.namespace}/{ref.name} (uid {ref.uid}), "
        f"not to {claim.ref.namespace}/{claim.ref.name} (uid {claim.ref.uid})",
    )


def plan_static(
    binding: VolumeBinding, claim: Claim, volume: Volume
) -> Done | BindPv | VolumeFailure:
    """What binding the claim to the static PV ``binding.pv`` takes, as read now."""
    if claim.volume_name:
        return DONE if claim.volume_name == binding.pv else _bound_elsewhere(binding, claim)
    ref = volume.claim_ref
    if ref is None:
        return BindPv(claim.ref, volume.resource_version, bound_by_controller=True)
    if not _claimed_for(ref, claim):
        return _claimed_elsewhere(volume, claim)
    if ref.uid == claim.ref.uid:
        return DONE  # claimed for this claim already (an earlier attempt, or the user's)
    # Pre-bound to the claim by name: complete the reference, the binding is the user's.
    return BindPv(claim.ref, volume.resource_version, bound_by_controller=False)


def plan_provisioning(
    binding: VolumeBinding, claim: Claim, *, node: str
) -> Done | SelectNode | VolumeFailure:
    """What marking the claim for provisioning on ``node`` takes, as read now."""
    if claim.volume_name and claim.selected_node != node:
        return _bound_elsewhere(binding, claim)
    if claim.selected_node == node:
        return DONE
    if claim.selected_node:
        return VolumeFailure(
            Failure.CLAIM_SELECTED_ELSEWHERE,
            f"claim {binding} is being provisioned for node {claim.selected_node!r}, not {node!r}",
        )
    return SelectNode(claim.ref.resource_version)


class Written:
    """The write landed."""

    def __repr__(self) -> str:
        return "WRITTEN"


class Conflict:
    """409: the object changed since it was read; read it again and plan again."""

    def __repr__(self) -> str:
        return "CONFLICT"


WRITTEN: Final = Written()
CONFLICT: Final = Conflict()


def write_answer(
    answer: Answer, *, what: str, missing: Failure
) -> Written | Conflict | Retry | VolumeFailure:
    """What a PV's or a claim's PATCH answer means: a 409 is a changed resourceVersion
    (read again); 429 and 5xx are tried again; 404 is ``missing`` (``what`` is gone)."""
    code = answer.status
    if 200 <= code < 300:
        return WRITTEN
    if code == 409:
        return CONFLICT
    if code == 429 or code >= 500:
        return again(answer)
    if code == 404:
        return VolumeFailure(missing, f"{what} not found")
    return VolumeFailure(Failure.API_ERROR, f"writing {what}: {http_error(answer)}")


def read_failure(answer: Answer, *, what: str, missing: Failure) -> VolumeFailure:
    """A read of ``what`` ("claim ns/c", "PV p") that answered neither 200 nor a retried
    429/5xx: 404 is ``missing``, anything else the API's error."""
    if answer.status == 404:
        return VolumeFailure(missing, f"{what} not found")
    return VolumeFailure(Failure.API_ERROR, f"reading {what}: {http_error(answer)}")


# ---- waiting for the PV controller -------------------------------------------------------


class Bound:
    """The claim is fully bound as the decision wants."""

    def __repr__(self) -> str:
        return "BOUND"


BOUND: Final = Bound()


class Waiting:
    """Not bound yet; nothing says it will not be."""

    def __repr__(self) -> str:
        return "WAITING"


WAITING: Final = Waiting()


def static_progress(
    binding: VolumeBinding, claim: Claim, volume: Volume | None
) -> Bound | Waiting | VolumeFailure:
    """Where a static binding stands: ``volume`` is the PV as read now, None when the
    claim was read bound (the PV then is not read)."""
    if claim.volume_name:
        if claim.volume_name != binding.pv:
            return _bound_elsewhere(binding, claim)
        if claim.fully_bound:
            return BOUND
    if volume is None:
        return WAITING
    ref = volume.claim_ref
    if ref is None or not ref.uid:  # kube: "ClaimRef got reset for pv"
        return VolumeFailure(Failure.CLAIMREF_RESET, f"ClaimRef got reset for pv {volume.name!r}")
    if not _claimed_for(ref, claim):
        return _claimed_elsewhere(volume, claim)
    return WAITING


def provisioning_progress(
    binding: VolumeBinding, claim: Claim, *, node: str
) -> Bound | Waiting | VolumeFailure:
    """Where a claim being provisioned stands: its provisioner removes selected-node when
    it fails (kube's messages)."""
    if not claim.annotations:
        return VolumeFailure(
            Failure.PROVISIONING_FAILED,
            f"selectedNode annotation reset for PVC {binding.claim!r}",
        )
    if claim.selected_node != node:
        return VolumeFailure(
            Failure.PROVISIONING_FAILED, f"provisioning failed for PVC {binding.claim!r}"
        )
    return BOUND if claim.fully_bound else WAITING


def needs_pv_read(binding: VolumeBinding, claim: Claim) -> bool:
    """Whether ``static_progress`` needs the PV: the claim is not bound to it yet."""
    return bool(binding.pv) and not claim.fully_bound and claim.volume_name in ("", binding.pv)
