"""What a binder refuses even from a caller with a trusted identity (defence in depth,
issue 17): a pod another scheduler owns, a victim whose priority is not lower than its
preemptor's, a node that does not exist, a volume step for a claim the pod does not use
(issue 18: else a decision could claim any available PV for any claim). Pure functions on
the API's JSON; the reads are ``services.binder.admission``'s.

A refusal becomes a FAILED outcome whose message starts with ``REFUSED``: the scheduler
releases the decision and requeues the pod with backoff, as for any failed bind, so no pod
is lost, and the binder writes nothing for it.
"""

from __future__ import annotations

import enum
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Any

from services.binder.jobs import FAILED, BindResult, VolumeBinding

#: What the API server sets spec.schedulerName to when a pod names none.
API_DEFAULT_SCHEDULER_NAME = "default-scheduler"
#: The profile a binder serves unless told others (--scheduler-names).
DEFAULT_PROFILES = ("splitsched",)
#: Starts the message of every refusal's outcome.
REFUSED = "refused by the binder"


class Reason(enum.StrEnum):
    """Why a binder refused (the ``reason`` label of splitsched_binder_refused_total)."""

    SCHEDULER_NAME = "scheduler_name"
    VICTIM_PRIORITY = "victim_priority"
    NODE_MISSING = "node_missing"
    CLAIM_NOT_USED = "claim_not_used"


@dataclass(frozen=True)
class Refusal:
    reason: Reason
    message: str

    def result(self, *, attempts: int, status: int) -> BindResult:
        """The outcome reported for the refused decision (final: FAILED, not retried)."""
        return BindResult(FAILED, f"{REFUSED} ({self.reason}): {self.message}", attempts, status)


def _spec(pod: Mapping[str, Any]) -> Mapping[str, Any]:
    spec = pod.get("spec")
    return spec if isinstance(spec, Mapping) else {}


def scheduler_name(pod: Mapping[str, Any]) -> str:
    """The pod's spec.schedulerName, as the API server defaults it."""
    return str(_spec(pod).get("schedulerName") or API_DEFAULT_SCHEDULER_NAME)


def priority(pod: Mapping[str, Any]) -> int:
    """The pod's spec.priority; 0 when unset, as without a PriorityClass (kube-scheduler's
    ``corev1helpers.PodPriority``)."""
    value = _spec(pod).get("priority")
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def foreign_pod(pod: Mapping[str, Any], *, who: str, profiles: Collection[str]) -> Refusal | None:
    """A refusal when ``pod`` (``who``: "pod ns/name") is not for one of ``profiles``."""
    name = scheduler_name(pod)
    if name in profiles:
        return None
    served = ", ".join(sorted(profiles)) or "none"
    message = f"{who} has schedulerName {name[:80]!r}, not a profile this binder serves ({served})"
    return Refusal(Reason.SCHEDULER_NAME, message)


def victim_not_lower(
    victim: Mapping[str, Any], *, who: str, preemptor: str, preemptor_priority: int
) -> Refusal | None:
    """A refusal when a victim's priority is not lower than its preemptor's:
    kube-scheduler's DefaultPreemption only ever picks lower-priority pods."""
    theirs = priority(victim)
    if theirs < preemptor_priority:
        return None
    message = (
        f"victim {who} has priority {theirs}, not lower than preemptor {preemptor}'s "
        f"{preemptor_priority}"
    )
    return Refusal(Reason.VICTIM_PRIORITY, message)


def missing_node(node: str, *, status: int) -> Refusal | None:
    """A refusal when reading ``node`` answered 404: the API server accepts a Binding to any
    name, and a pod bound to no node never runs (until the pod GC deletes it)."""
    if status != 404:
        return None
    return Refusal(Reason.NODE_MISSING, f"node {node[:253]!r} does not exist")


def pod_claims(pod: Mapping[str, Any]) -> set[str]:
    """The claims ``pod`` mounts: each ``persistentVolumeClaim.claimName``, and for a
    generic ephemeral volume the claim Kubernetes makes for it, ``<pod>-<volume>``."""
    name = str((pod.get("metadata") or {}).get("name") or "")
    found: set[str] = set()
    volumes = _spec(pod).get("volumes")
    for volume in volumes if isinstance(volumes, list) else ():
        if not isinstance(volume, Mapping):
            continue
        claim = volume.get("persistentVolumeClaim")
        if isinstance(claim, Mapping) and claim.get("claimName"):
            found.add(str(claim["claimName"]))
        elif isinstance(volume.get("ephemeral"), Mapping):
            found.add(f"{name}-{volume.get('name') or ''}")
    return found


def unused_claims(
    pod: Mapping[str, Any], volumes: Collection[VolumeBinding], *, who: str
) -> Refusal | None:
    """A refusal when the decision's volume step names a claim ``pod`` does not mount."""
    used = pod_claims(pod)
    strangers = sorted(str(v) for v in volumes if v.claim not in used)
    if not strangers:
        return None
    return Refusal(Reason.CLAIM_NOT_USED, f"{who} does not use claim(s) {', '.join(strangers)}")
