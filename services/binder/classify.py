"""What the API server's answers mean for a decision: pure functions, no I/O.

The binder's modules send requests (``apirequests``) through one retry loop
(``retrying``) and ask this module what each answer means:

* ``binding_answer``: a Binding POST's answer (201 bound, 404 gone, 409 read the pod,
  429/5xx again, another 4xx failed);
* ``pod_state``: where a pod stands relative to a decision (re-created, bound to the
  decision's node or another, being deleted, unbound). Three questions read it:
  ``after_conflict`` (the GET after a Binding's 409), ``settled`` (the GET after giving up
  unsure whether a Binding landed) and ``nomination_answer`` (the preemptor as its
  nominatedNodeName PATCH returned it);
* ``eviction_answer`` and ``retryable_eviction``: an Eviction's answer (PodDisruptionBudget
  refusals are final);
* ``retryable_status`` and ``retryable_create``: which answers to other writes are worth
  another try.
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final, Protocol

from services.binder.jobs import (
    BOUND,
    CONFLICT,
    FAILED,
    POD_GONE,
    BindResult,
    EvictionState,
    PodKey,
    Retry,
    Verdict,
)

#: The StatusCause type the Eviction API gives when a PodDisruptionBudget forbids it.
DISRUPTION_BUDGET_CAUSE = "DisruptionBudget"


class Answer(Protocol):
    """One API answer (``splitsched.runtime.kubeclient.Response`` is one)."""

    @property
    def status(self) -> int: ...

    @property
    def body(self) -> Any: ...

    @property
    def message(self) -> str: ...

    @property
    def retry_after(self) -> float | None: ...


def _body(answer: Answer) -> dict[str, Any]:
    return answer.body if isinstance(answer.body, dict) else {}


def _cause_list(answer: Answer) -> list[dict[str, Any]]:
    causes = (_body(answer).get("details") or {}).get("causes") or []
    return [c for c in causes if isinstance(c, dict)]


def causes(answer: Answer) -> list[str]:
    """The messages of a Status's ``details.causes``."""
    return [str(c["message"]) for c in _cause_list(answer) if c.get("message")]


def uid_cause(answer: Answer) -> bool:
    """A 422 because the patch's metadata.uid is not the object's (it was re-created)."""
    return any(c.get("field") == "metadata.uid" for c in _cause_list(answer))


def http_error(answer: Answer) -> str:
    return f"HTTP {answer.status}: {answer.message}"


# ---- which answers are worth another try --------------------------------------------------


def retryable_status(answer: Answer) -> bool:
    """A write conflict, throttling or a server error."""
    return answer.status in (409, 429) or answer.status >= 500


def retryable_create(answer: Answer) -> bool:
    """A create worth trying again: throttled or a server error. A 409 means an earlier
    attempt whose answer was lost created it (the name is the same)."""
    return answer.status == 429 or answer.status >= 500


def budget_refusal(answer: Answer) -> bool:
    """The Eviction API refused because of PodDisruptionBudgets (final, not retried):
    a 429 with a DisruptionBudget cause, or the 500 for a pod under several PDBs."""
    if answer.status == 429:
        return (
            any(c.get("reason") == DISRUPTION_BUDGET_CAUSE for c in _cause_list(answer))
            or "disruption budget" in answer.message.lower()
        )
    return answer.status == 500 and "more than one poddisruptionbudget" in answer.message.lower()


def retryable_eviction(answer: Answer) -> bool:
    if budget_refusal(answer):
        return False
    if answer.status == 409:  # retry a write conflict; a failed uid precondition is final
        return "precondition" not in answer.message.lower()
    return answer.status == 429 or answer.status >= 500


def again(answer: Answer) -> Retry:
    """The retry an answer ``retryable_*`` accepted asks for (Retry-After honoured; a 5xx
    may come after the write took effect)."""
    return Retry(http_error(answer), retry_after=answer.retry_after, unsure=answer.status >= 500)


# ---- a Binding's answer ---------------------------------------------------------------------


class ReadPod:
    """A Binding's 409: bound already (here or elsewhere), re-created, or a transient
    write conflict. Only the pod itself says which."""

    def __repr__(self) -> str:
        return "READ_POD"


READ_POD: Final = ReadPod()


def binding_answer(answer: Answer) -> Verdict | Retry | ReadPod:
    """What a ``pods/{name}/binding`` POST's answer means."""
    code = answer.status
    if 200 <= code < 300:
        return Verdict(BOUND)
    if code == 404:
        return Verdict(POD_GONE, answer.message or "pod not found")
    if code == 409:
        return READ_POD
    if code == 429 or code >= 500:
        return again(answer)
    return Verdict(FAILED, http_error(answer))


# ---- a pod relative to a decision -----------------------------------------------------------


class PodState(enum.Enum):
    RECREATED = "re-created"  # another uid under the decision's pod name
    BOUND_HERE = "bound here"  # spec.nodeName is the decision's node
    BOUND_ELSEWHERE = "bound elsewhere"
    DELETING = "deleting"  # unbound and being deleted
    UNBOUND = "unbound"


@dataclass(frozen=True)
class PodSeen:
    """What a read of the pod showed: ``state`` relative to the decision (in that order
    of precedence), and the facts behind it."""

    state: PodState
    uid: str
    bound_to: str
    deleting: bool


def pod_state(pod: Mapping[str, Any], *, uid: str, node: str) -> PodSeen:
    """Where ``pod`` (a Pod's JSON) stands relative to a decision for pod ``uid`` on
    ``node``: the one place that reads a pod's uid, nodeName and deletionTimestamp."""
    meta = pod.get("metadata") or {}
    seen_uid = str(meta.get("uid") or "")
    bound_to = str((pod.get("spec") or {}).get("nodeName") or "")
    deleting = bool(meta.get("deletionTimestamp"))
    if uid and seen_uid and seen_uid != uid:
        state = PodState.RECREATED
    elif bound_to and bound_to == node:
        state = PodState.BOUND_HERE
    elif bound_to:
        state = PodState.BOUND_ELSEWHERE
    elif deleting:
        state = PodState.DELETING
    else:
        state = PodState.UNBOUND
    return PodSeen(state, seen_uid, bound_to, deleting)


def _recreated(seen: PodSeen, uid: str) -> Verdict:
    return Verdict(POD_GONE, f"pod was re-created (uid {seen.uid}, the decision was for {uid})")


def after_conflict(pod: Answer, *, uid: str, node: str, conflict: Answer) -> Verdict | Retry:
    """The pod as read after a Binding's 409 ``conflict``: bound here -> BOUND (an earlier
    attempt's answer was lost), elsewhere -> CONFLICT, gone -> POD_GONE; unbound, or the
    read throttled or failing -> try the Binding again, unsure."""
    still = Retry(http_error(conflict), unsure=True)
    if pod.status == 404:
        return Verdict(POD_GONE, "pod deleted")
    if pod.status != 200 or not isinstance(pod.body, dict):
        if pod.status == 429 or pod.status >= 500:
            return still
        message = f"HTTP 409 ({conflict.message}); reading the pod: HTTP {pod.status}"
        return Verdict(FAILED, message)
    seen = pod_state(pod.body, uid=uid, node=node)
    match seen.state:
        case PodState.RECREATED:
            return _recreated(seen, uid)
        case PodState.BOUND_HERE:
            return Verdict(BOUND, f"already bound to {seen.bound_to}")
        case PodState.BOUND_ELSEWHERE:
            return Verdict(CONFLICT, f"pod is already bound to node {seen.bound_to}")
        case PodState.DELETING:
            return Verdict(POD_GONE, "pod is being deleted")
        case PodState.UNBOUND:
            return still


def settled(pod: Answer, *, uid: str, node: str, gave_up: BindResult) -> BindResult | None:
    """The pod as read after giving up on a Binding that may have landed unheard: what to
    report instead of ``gave_up`` (itself when the pod is still unbound, now known to be
    true); None when the read did not show the pod (retry the read)."""
    if pod.status == 404:
        return BindResult(POD_GONE, "pod deleted", gave_up.attempts, 404)
    if pod.status != 200 or not isinstance(pod.body, dict):
        return None
    seen = pod_state(pod.body, uid=uid, node=node)
    match seen.state:
        case PodState.RECREATED:
            verdict = _recreated(seen, uid)
        case PodState.BOUND_HERE:
            verdict = Verdict(
                BOUND, f"bound to {seen.bound_to} by an attempt whose answer was lost"
            )
        case PodState.BOUND_ELSEWHERE:
            verdict = Verdict(CONFLICT, f"pod is bound to node {seen.bound_to}")
        case PodState.DELETING:
            verdict = Verdict(POD_GONE, "pod is being deleted")
        case PodState.UNBOUND:
            return gave_up
    return dataclasses.replace(gave_up, result=verdict.result, message=verdict.message)


def nomination_answer(answer: Answer, *, preemptor: PodKey) -> Verdict:
    """What the preemptor's ``status.nominatedNodeName`` merge-PATCH answer means (BOUND:
    nominated). The patch carries the uid, so a re-created preemptor is refused with a
    422; a preemptor being deleted is gone whether or not it is bound."""
    code = answer.status
    if code == 404:
        return Verdict(POD_GONE, "preemptor not found")
    if code == 422 and uid_cause(answer):
        return Verdict(POD_GONE, f"preemptor was re-created (not uid {preemptor.uid})")
    if not 200 <= code < 300:
        return Verdict(FAILED, f"setting nominatedNodeName: {http_error(answer)}")
    seen = pod_state(_body(answer), uid=preemptor.uid, node="")
    if seen.deleting:
        return Verdict(POD_GONE, "preemptor is being deleted")
    if seen.bound_to:
        return Verdict(CONFLICT, f"preemptor is already bound to node {seen.bound_to}")
    return Verdict(BOUND)


# ---- an Eviction's answer -------------------------------------------------------------------


def eviction_answer(answer: Answer, *, victim: PodKey) -> tuple[EvictionState, str]:
    """What a final (not retried) Eviction answer means for ``victim``, and why."""
    code = answer.status
    if 200 <= code < 300:
        return EvictionState.EVICTED, ""
    if code == 404:
        return EvictionState.GONE, "already gone"
    if code == 409:  # the uid precondition failed: the victim was re-created
        return EvictionState.GONE, "re-created"
    if budget_refusal(answer):
        reason = answer.message
        why = causes(answer)
        if why:
            reason += f" ({'; '.join(why)})"
        return EvictionState.REFUSED, f"eviction of {victim} refused: {reason}"
    return EvictionState.FAILED, f"eviction of {victim} failed: {http_error(answer)}"
