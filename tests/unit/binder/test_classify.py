"""What the API server's answers mean to the binder, as tables: no fake API, no event loop.

Each row is one answer (or one pod as read back) and what ``services.binder.classify``
makes of it.
"""

from __future__ import annotations

from typing import Any

import pytest

from services.binder import classify
from services.binder.classify import PodState
from services.binder.jobs import (
    BOUND,
    CONFLICT,
    DEADLINE_EXCEEDED,
    FAILED,
    POD_GONE,
    BindResult,
    EvictionState,
    PodKey,
    Retry,
    Verdict,
)
from splitsched.runtime.kubeclient import Response


def status(
    code: int, message: str = "", retry_after: float | None = None, **extra: Any
) -> Response:
    """A Status answer, as the API server sends for errors."""
    body: dict[str, Any] = {"kind": "Status", "code": code, "message": message, **extra}
    return Response(code, body, retry_after)


def pod(uid: str = "u1", node: str = "", *, deleting: bool = False) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": "p", "namespace": "ns", "uid": uid}
    if deleting:
        meta["deletionTimestamp"] = "2025-01-01T00:00:00Z"
    return {"kind": "Pod", "metadata": meta, "spec": {"nodeName": node}}


def read(body: Any, code: int = 200) -> Response:
    return Response(code, body)


PDB_CAUSE = {"causes": [{"reason": "DisruptionBudget", "message": "pdb needs 1 healthy pod"}]}
UID_CAUSE = {"causes": [{"field": "metadata.uid", "message": "field is immutable"}]}

# ---- a Binding's answer ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("answer", "meaning"),
    [
        (Response(201, {"kind": "Status", "status": "Success"}), Verdict(BOUND)),
        (Response(200, None), Verdict(BOUND)),
        (status(404, 'pods "p" not found'), Verdict(POD_GONE, 'pods "p" not found')),
        (status(404), Verdict(POD_GONE, "pod not found")),
        (status(409, "already assigned"), classify.READ_POD),
        (status(429, "slow down", 2.5), Retry("HTTP 429: slow down", 2.5, unsure=False)),
        (status(500, "boom"), Retry("HTTP 500: boom", None, unsure=True)),
        (status(503, "busy", 1.0), Retry("HTTP 503: busy", 1.0, unsure=True)),
        (status(403, "forbidden"), Verdict(FAILED, "HTTP 403: forbidden")),
        (status(422, "invalid"), Verdict(FAILED, "HTTP 422: invalid")),
    ],
)
def test_binding_answer(answer: Response, meaning: object) -> None:
    assert classify.binding_answer(answer) == meaning


# ---- a pod relative to a decision (for pod uid u1 on node n1) -------------------------------


@pytest.mark.parametrize(
    ("body", "uid", "state", "bound_to", "deleting"),
    [
        (pod("u1"), "u1", PodState.UNBOUND, "", False),
        (pod("u1", "n1"), "u1", PodState.BOUND_HERE, "n1", False),
        (pod("u1", "n2"), "u1", PodState.BOUND_ELSEWHERE, "n2", False),
        (pod("u1", deleting=True), "u1", PodState.DELETING, "", True),
        # bound wins over being deleted: the pod holds the node until it is gone
        (pod("u1", "n1", deleting=True), "u1", PodState.BOUND_HERE, "n1", True),
        (pod("u1", "n2", deleting=True), "u1", PodState.BOUND_ELSEWHERE, "n2", True),
        # another uid under the name wins over everything
        (pod("u2", "n1"), "u1", PodState.RECREATED, "n1", False),
        (pod("u2"), "u1", PodState.RECREATED, "", False),
        # an unknown uid on either side is not a re-creation
        (pod(""), "u1", PodState.UNBOUND, "", False),
        (pod("u2", "n1"), "", PodState.BOUND_HERE, "n1", False),
        ({}, "u1", PodState.UNBOUND, "", False),
        ({"metadata": None, "spec": None}, "u1", PodState.UNBOUND, "", False),
    ],
)
def test_pod_state(
    body: dict[str, Any], uid: str, state: PodState, bound_to: str, deleting: bool
) -> None:
    seen = classify.pod_state(body, uid=uid, node="n1")
    assert (seen.state, seen.bound_to, seen.deleting) == (state, bound_to, deleting)


CONFLICT_409 = status(409, "conflict on p")
RETRY_BINDING = Retry("HTTP 409: conflict on p", None, unsure=True)


@pytest.mark.parametrize(
    ("got", "meaning"),
    [
        (status(404), Verdict(POD_GONE, "pod deleted")),
        (status(500), RETRY_BINDING),
        (status(429), RETRY_BINDING),
        (status(403), Verdict(FAILED, "HTTP 409 (conflict on p); reading the pod: HTTP 403")),
        (read("not json"), Verdict(FAILED, "HTTP 409 (conflict on p); reading the pod: HTTP 200")),
        (
            read(pod("u2", "n1")),
            Verdict(POD_GONE, "pod was re-created (uid u2, the decision was for u1)"),
        ),
        (read(pod("u1", "n1")), Verdict(BOUND, "already bound to n1")),
        (read(pod("u1", "n2")), Verdict(CONFLICT, "pod is already bound to node n2")),
        (read(pod("u1", deleting=True)), Verdict(POD_GONE, "pod is being deleted")),
        (read(pod("u1")), RETRY_BINDING),
    ],
)
def test_after_conflict(got: Response, meaning: Verdict | Retry) -> None:
    assert classify.after_conflict(got, uid="u1", node="n1", conflict=CONFLICT_409) == meaning


GAVE_UP = BindResult(DEADLINE_EXCEEDED, "gave up after 3 attempts", 3, 503)


@pytest.mark.parametrize(
    ("got", "settled"),
    [
        (status(404), BindResult(POD_GONE, "pod deleted", 3, 404)),
        (status(500), None),
        (status(429), None),
        (status(403), None),
        (read("not json"), None),
        (
            read(pod("u2", "n1")),
            BindResult(POD_GONE, "pod was re-created (uid u2, the decision was for u1)", 3, 503),
        ),
        (
            read(pod("u1", "n1")),
            BindResult(BOUND, "bound to n1 by an attempt whose answer was lost", 3, 503),
        ),
        (read(pod("u1", "n2")), BindResult(CONFLICT, "pod is bound to node n2", 3, 503)),
        (read(pod("u1", deleting=True)), BindResult(POD_GONE, "pod is being deleted", 3, 503)),
        (read(pod("u1")), GAVE_UP),
    ],
)
def test_settled(got: Response, settled: BindResult | None) -> None:
    assert classify.settled(got, uid="u1", node="n1", gave_up=GAVE_UP) == settled


PREEMPTOR = PodKey("ns", "high", "u1")


@pytest.mark.parametrize(
    ("answer", "meaning"),
    [
        (status(404), Verdict(POD_GONE, "preemptor not found")),
        (
            status(422, "immutable", details=UID_CAUSE),
            Verdict(POD_GONE, "preemptor was re-created (not uid u1)"),
        ),
        (status(422, "invalid"), Verdict(FAILED, "setting nominatedNodeName: HTTP 422: invalid")),
        (status(503, "busy"), Verdict(FAILED, "setting nominatedNodeName: HTTP 503: busy")),
        (read(pod("u1")), Verdict(BOUND)),
        (read(None), Verdict(BOUND)),
        (read(pod("u1", "n1")), Verdict(CONFLICT, "preemptor is already bound to node n1")),
        (read(pod("u1", deleting=True)), Verdict(POD_GONE, "preemptor is being deleted")),
        # a preemptor on its way out is gone, bound or not
        (read(pod("u1", "n1", deleting=True)), Verdict(POD_GONE, "preemptor is being deleted")),
    ],
)
def test_nomination_answer(answer: Response, meaning: Verdict) -> None:
    assert classify.nomination_answer(answer, preemptor=PREEMPTOR) == meaning


# ---- an Eviction's answer -------------------------------------------------------------------

VICTIM = PodKey("ns", "v", "uv")
PDB_MESSAGE = "Cannot evict pod as it would violate the pod's disruption budget."


@pytest.mark.parametrize(
    ("answer", "retryable", "state", "message"),
    [
        (Response(201, {"kind": "Status"}), False, EvictionState.EVICTED, ""),
        (Response(200, {}), False, EvictionState.EVICTED, ""),
        (status(404), False, EvictionState.GONE, "already gone"),
        (status(409, "Precondition failed: UID"), False, EvictionState.GONE, "re-created"),
        (
            status(429, PDB_MESSAGE, details=PDB_CAUSE),
            False,
            EvictionState.REFUSED,
            f"eviction of ns/v refused: {PDB_MESSAGE} (pdb needs 1 healthy pod)",
        ),
        (
            status(429, "violates the disruption budget"),
            False,
            EvictionState.REFUSED,
            "eviction of ns/v refused: violates the disruption budget",
        ),
        (
            status(500, "This pod has more than one PodDisruptionBudget"),
            False,
            EvictionState.REFUSED,
            "eviction of ns/v refused: This pod has more than one PodDisruptionBudget",
        ),
        (
            status(403, "forbidden"),
            False,
            EvictionState.FAILED,
            "eviction of ns/v failed: HTTP 403: forbidden",
        ),
    ],
)
def test_eviction_answer(
    answer: Response, retryable: bool, state: EvictionState, message: str
) -> None:
    assert classify.retryable_eviction(answer) is retryable
    assert classify.eviction_answer(answer, victim=VICTIM) == (state, message)


@pytest.mark.parametrize(
    "answer",
    [status(409, "the object has been modified"), status(429, "slow"), status(500), status(503)],
)
def test_eviction_answers_worth_another_try(answer: Response) -> None:
    assert classify.retryable_eviction(answer)


# ---- which answers to other writes are worth another try ------------------------------------


@pytest.mark.parametrize(
    ("code", "write", "create"),
    [
        (200, False, False),
        (201, False, False),
        (404, False, False),
        (409, True, False),  # a create's 409: an earlier try whose answer was lost made it
        (422, False, False),
        (429, True, True),
        (500, True, True),
        (503, True, True),
    ],
)
def test_retryable_writes(code: int, write: bool, create: bool) -> None:
    assert classify.retryable_status(status(code)) is write
    assert classify.retryable_create(status(code)) is create


def test_status_causes() -> None:
    answer = status(422, details={"causes": [{"message": "a"}, "junk", {"field": "x"}]})
    assert classify.causes(answer) == ["a"]
    assert not classify.uid_cause(answer)
    assert classify.uid_cause(status(422, details=UID_CAUSE))
    assert classify.causes(read("text")) == []
