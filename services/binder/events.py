"""The ``events.k8s.io/v1`` Events the binder writes about pods, built in one place.

Three kinds, shaped like kube-scheduler's recorder's: ``Scheduled`` after a Binding,
``FailedScheduling`` when the scheduler found no node, ``Preempted`` on each evicted
victim. ``services.binder.recorder`` writes them; ``apirequests`` borrows ``micro_time``
for the PodScheduled condition. No I/O here.
"""

from __future__ import annotations

import datetime as dt
import time
from dataclasses import dataclass
from typing import Any

from services.binder.jobs import PodKey

#: events.k8s.io/v1 limits ``note`` to 1 KiB.
EVENT_NOTE_LIMIT = 1024


@dataclass(frozen=True)
class EventKind:
    type: str  # Normal | Warning
    reason: str
    action: str


SCHEDULED = EventKind("Normal", "Scheduled", "Binding")
FAILED_SCHEDULING = EventKind("Warning", "FailedScheduling", "Scheduling")
PREEMPTED = EventKind("Normal", "Preempted", "Preempting")


def micro_time(when: float) -> str:
    """An RFC 3339 MicroTime (``2006-01-02T15:04:05.000000Z``)."""
    stamp = dt.datetime.fromtimestamp(when, tz=dt.UTC)
    return stamp.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _pod_ref(pod: PodKey) -> dict[str, str]:
    ref = {"apiVersion": "v1", "kind": "Pod", "namespace": pod.namespace, "name": pod.name}
    if pod.uid:
        ref["uid"] = pod.uid
    return ref


@dataclass(frozen=True)
class EventSource:
    """Who reports: the scheduler name (``reportingController``, a profile's name when the
    decision has one) and this binder replica (``reportingInstance``)."""

    controller: str
    binder_id: str

    def event(
        self,
        kind: EventKind,
        pod: PodKey,
        note: str,
        *,
        now: float,
        profile: str = "",
        related: PodKey | None = None,
    ) -> dict[str, Any]:
        """An Event of ``kind`` regarding ``pod`` (its uid left out when unknown)."""
        controller = profile or self.controller
        suffix = f".{time.time_ns():x}"
        event: dict[str, Any] = {
            "apiVersion": "events.k8s.io/v1",
            "kind": "Event",
            "metadata": {
                "name": pod.name[: 253 - len(suffix)] + suffix,
                "namespace": pod.namespace,
            },
            "eventTime": micro_time(now),
            "reportingController": controller[:128],
            "reportingInstance": f"{controller}-{self.binder_id}"[:128],
            "action": kind.action,
            "reason": kind.reason,
            "type": kind.type,
            "regarding": _pod_ref(pod),
            "note": note[:EVENT_NOTE_LIMIT],
        }
        if related is not None:
            event["related"] = _pod_ref(related)
        return event
