"""The volume step's decisions as tables (``services.binder.claims``): what a claim and a
PV as read mean for one volume binding, before the write and while waiting for the PV
controller, and what the writes' answers mean. kube-scheduler's volume binder
(pkg/scheduler/framework/plugins/volumebinding/binder.go: ``GetBindVolumeToClaim``,
``bindAPIUpdate``, ``checkBindings``) is the reference for each row."""

from __future__ import annotations

from typing import Any

import pytest

from services.binder import claims
from services.binder.claims import (
    BOUND,
    CONFLICT,
    DONE,
    WAITING,
    WRITTEN,
    BindPv,
    ClaimRef,
    Failure,
    SelectNode,
    VolumeFailure,
)
from services.binder.jobs import DEADLINE_EXCEEDED, FAILED, Retry, VolumeBinding
from splitsched.runtime.kubeclient import Response

STATIC = VolumeBinding("ns", "data-web-0", "pv-a")
DYNAMIC = VolumeBinding("ns", "data-web-0")
COMPLETED = {claims.BIND_COMPLETED: "yes"}


def claim_json(
    *, uid: str = "c-uid", volume: str = "", annotations: dict[str, str] | None = None
) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": "data-web-0", "namespace": "ns", "uid": uid,
                            "resourceVersion": "41"}  # fmt: skip
    if annotations is not None:
        meta["annotations"] = annotations
    return {"kind": "PersistentVolumeClaim", "metadata": meta, "spec": {"volumeName": volume}}


def pv_json(claim_ref: dict[str, Any] | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"capacity": {"storage": "1Gi"}}
    if claim_ref is not None:
        spec["claimRef"] = claim_ref
    return {"kind": "PersistentVolume", "metadata": {"name": "pv-a", "resourceVersion": "7"},
            "spec": spec}  # fmt: skip


def claim(**kw: Any) -> claims.Claim:
    return claims.claim_of(claim_json(**kw))


def pv(claim_ref: dict[str, Any] | None = None) -> claims.Volume:
    return claims.volume_of(pv_json(claim_ref))


OURS = {"kind": "PersistentVolumeClaim", "namespace": "ns", "name": "data-web-0", "uid": "c-uid"}
BY_NAME = {"namespace": "ns", "name": "data-web-0"}  # pre-bound by the user, no uid
OLD_CLAIM = {"namespace": "ns", "name": "data-web-0", "uid": "deleted-uid"}
OTHER = {"namespace": "ns", "name": "data-web-1", "uid": "x-uid"}
REF = ClaimRef("ns", "data-web-0", "c-uid", "41")


def test_reads_take_what_the_step_needs_and_nothing_breaks_on_odd_json() -> None:
    seen = claim(volume="pv-a", annotations={**COMPLETED, "other": "1"})
    assert seen.ref == REF
    assert seen.volume_name == "pv-a" and seen.fully_bound and seen.selected_node == ""
    assert pv(OURS).claim_ref == ClaimRef("ns", "data-web-0", "c-uid")
    assert pv().claim_ref is None and pv().resource_version == "7"
    odd = claims.claim_of({"metadata": "x", "spec": None})
    assert odd.ref == ClaimRef("", "", "", "") and not odd.fully_bound
    assert claims.volume_of({"spec": {"claimRef": "x"}}).claim_ref is None


@pytest.mark.parametrize(
    ("seen_claim", "seen_pv", "plan"),
    [
        # An available PV: claimRef and the bound-by-controller annotation (kube's
        # GetBindVolumeToClaim), conditional on the PV's resourceVersion.
        (claim(), pv(), BindPv(REF, "7", bound_by_controller=True)),
        # Pre-bound by the user to the claim's name: completed, not marked as ours.
        (claim(), pv(BY_NAME), BindPv(REF, "7", bound_by_controller=False)),
        # Already claimed for this claim (an earlier attempt, another binder): nothing.
        (claim(), pv(OURS), DONE),
        (claim(volume="pv-a"), pv(OURS), DONE),
        (claim(volume="pv-a", annotations=COMPLETED), pv(), DONE),
    ],
)
def test_a_static_binding_writes_only_what_is_missing(
    seen_claim: claims.Claim, seen_pv: claims.Volume, plan: object
) -> None:
    assert claims.plan_static(STATIC, seen_claim, seen_pv) == plan


@pytest.mark.parametrize(
    ("seen_claim", "seen_pv", "reason", "message"),
    [
        (claim(volume="pv-b"), pv(), Failure.CLAIM_BOUND_ELSEWHERE,
         "claim ns/data-web-0 is bound to PV 'pv-b', not 'pv-a'"),
        (claim(), pv(OTHER), Failure.PV_CLAIMED_ELSEWHERE,
         "PV 'pv-a' is bound to claim ns/data-web-1 (uid x-uid), not to ns/data-web-0 "
         "(uid c-uid)"),
        # The claim was deleted and re-created under the same name: the PV is not ours.
        (claim(), pv(OLD_CLAIM), Failure.PV_CLAIMED_ELSEWHERE,
         "PV 'pv-a' is bound to claim ns/data-web-0 (uid deleted-uid), not to "
         "ns/data-web-0 (uid c-uid)"),
    ],
)  # fmt: skip
def test_a_static_binding_taken_by_another_fails_the_decision(
    seen_claim: claims.Claim, seen_pv: claims.Volume, reason: Failure, message: str
) -> None:
    assert claims.plan_static(STATIC, seen_claim, seen_pv) == VolumeFailure(reason, message)


SELECTED_A = {claims.SELECTED_NODE: "node-a"}


@pytest.mark.parametrize(
    ("seen", "plan"),
    [
        (claim(), SelectNode("41")),
        (claim(annotations={"unrelated": "x"}), SelectNode("41")),
        (claim(annotations=SELECTED_A), DONE),
        (claim(volume="pvc-123", annotations={**SELECTED_A, **COMPLETED}), DONE),
        (
            claim(annotations={claims.SELECTED_NODE: "node-b"}),
            VolumeFailure(
                Failure.CLAIM_SELECTED_ELSEWHERE,
                "claim ns/data-web-0 is being provisioned for node 'node-b', not 'node-a'",
            ),
        ),
        (
            claim(volume="pv-static"),
            VolumeFailure(
                Failure.CLAIM_BOUND_ELSEWHERE, "claim ns/data-web-0 is bound to PV 'pv-static'"
            ),
        ),
    ],
)
def test_provisioning_annotates_the_claim_once_for_the_decisions_node(
    seen: claims.Claim, plan: object
) -> None:
    assert claims.plan_provisioning(DYNAMIC, seen, node="node-a") == plan


# ---- the writes' answers -------------------------------------------------------------------


def status(code: int, message: str = "m", retry_after: float | None = None) -> Response:
    return Response(code, {"kind": "Status", "code": code, "message": message}, retry_after)


@pytest.mark.parametrize(
    ("answer", "meaning"),
    [
        (Response(200, {"kind": "PersistentVolume"}), WRITTEN),
        (status(409, "the object has been modified"), CONFLICT),
        (status(429, "slow down", 2.0), Retry("HTTP 429: slow down", retry_after=2.0)),
        (status(503, "unavailable"), Retry("HTTP 503: unavailable", unsure=True)),
        (status(404), VolumeFailure(Failure.PV_MISSING, "PV pv-a not found")),
        (status(422, "bad"), VolumeFailure(Failure.API_ERROR, "writing PV pv-a: HTTP 422: bad")),
        (status(403, "no"), VolumeFailure(Failure.API_ERROR, "writing PV pv-a: HTTP 403: no")),
    ],
)
def test_what_a_write_answer_means(answer: Response, meaning: object) -> None:
    assert claims.write_answer(answer, what="PV pv-a", missing=Failure.PV_MISSING) == meaning


def test_a_read_that_failed_says_what_is_missing_or_the_apis_error() -> None:
    missing = claims.read_failure(status(404), what="claim ns/c", missing=Failure.CLAIM_MISSING)
    assert missing == VolumeFailure(Failure.CLAIM_MISSING, "claim ns/c not found")
    other = claims.read_failure(status(403, "no"), what="PV p", missing=Failure.PV_MISSING)
    assert other == VolumeFailure(Failure.API_ERROR, "reading PV p: HTTP 403: no")


# ---- waiting for the PV controller ---------------------------------------------------------


@pytest.mark.parametrize(
    ("seen_claim", "seen_pv", "progress"),
    [
        # kube's isPVCFullyBound: the volume name and the bind-completed annotation.
        (claim(volume="pv-a", annotations=COMPLETED), None, BOUND),
        (claim(), pv(OURS), WAITING),
        (claim(volume="pv-a"), pv(OURS), WAITING),  # volumeName set, not completed yet
        (claim(), pv({**OURS, "uid": ""}),
         VolumeFailure(Failure.CLAIMREF_RESET, "ClaimRef got reset for pv 'pv-a'")),
        (claim(), pv(), VolumeFailure(Failure.CLAIMREF_RESET, "ClaimRef got reset for pv 'pv-a'")),
        (claim(), pv(OTHER), VolumeFailure(
            Failure.PV_CLAIMED_ELSEWHERE,
            "PV 'pv-a' is bound to claim ns/data-web-1 (uid x-uid), not to ns/data-web-0 "
            "(uid c-uid)")),
        (claim(volume="pv-b", annotations=COMPLETED), None, VolumeFailure(
            Failure.CLAIM_BOUND_ELSEWHERE,
            "claim ns/data-web-0 is bound to PV 'pv-b', not 'pv-a'")),
    ],
)  # fmt: skip
def test_a_static_binding_is_done_once_the_pv_controller_bound_the_claim(
    seen_claim: claims.Claim, seen_pv: claims.Volume | None, progress: object
) -> None:
    assert claims.static_progress(STATIC, seen_claim, seen_pv) == progress


def test_the_pv_is_read_while_the_claim_is_not_bound_to_it() -> None:
    assert claims.needs_pv_read(STATIC, claim())
    assert claims.needs_pv_read(STATIC, claim(volume="pv-a"))
    assert not claims.needs_pv_read(STATIC, claim(volume="pv-a", annotations=COMPLETED))
    assert not claims.needs_pv_read(STATIC, claim(volume="pv-b"))  # failed without it
    assert not claims.needs_pv_read(DYNAMIC, claim())


@pytest.mark.parametrize(
    ("seen", "progress"),
    [
        (claim(annotations=SELECTED_A), WAITING),
        (claim(volume="pvc-1", annotations=SELECTED_A), WAITING),
        (claim(volume="pvc-1", annotations={**SELECTED_A, **COMPLETED}), BOUND),
        # A provisioner that fails removes selected-node (kube's messages).
        (claim(), VolumeFailure(
            Failure.PROVISIONING_FAILED, "selectedNode annotation reset for PVC 'data-web-0'")),
        (claim(annotations={"x": "y"}), VolumeFailure(
            Failure.PROVISIONING_FAILED, "provisioning failed for PVC 'data-web-0'")),
        (claim(annotations={claims.SELECTED_NODE: "node-b"}), VolumeFailure(
            Failure.PROVISIONING_FAILED, "provisioning failed for PVC 'data-web-0'")),
    ],
)  # fmt: skip
def test_a_provisioned_claim_is_done_once_bound_and_failed_once_its_node_is_dropped(
    seen: claims.Claim, progress: object
) -> None:
    assert claims.provisioning_progress(DYNAMIC, seen, node="node-a") == progress


def test_a_failure_is_reported_failed_with_its_reason_and_a_timeout_as_deadline_exceeded() -> None:
    failed = VolumeFailure(Failure.PV_MISSING, "PV pv-a not found").result()
    assert failed.result == FAILED
    assert failed.message == "volume binding failed (pv_missing): PV pv-a not found"
    late = VolumeFailure(Failure.TIMEOUT, "claims not bound").result()
    assert late.result == DEADLINE_EXCEEDED
    assert late.message.startswith("volume binding failed (timeout): ")
