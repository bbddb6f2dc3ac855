"""The promises a soak checks every 30 s, from the API server's objects only:

* nothing lost: every pod of ours (the soak's namespaces) is bound, finished, being
  deleted, or pending with a FailedScheduling reason (the PodScheduled=False condition);
  a pod younger than ``GRACE`` seconds may still be pending without one (it is on its way);
* no node over allocatable (``invariants.overcommitted``, every node);
* no pod bound twice: no pod's node changes from one check to the next, and the binders'
  proxy saw the API server accept at most one Binding per pod.
"""

from __future__ import annotations

import datetime as dt
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from kubernetes import client

from splitsched.core import convert
from splitsched.testing import faultproxy, invariants

Json = dict[str, Any]
#: Seconds a new pod may be pending without a FailedScheduling reason: past the
#: scheduler's bind deadline (30 s) and a binder's restart, with room for a busy machine.
GRACE = 120.0
SOAK_PREFIXES = ("soak-",)


@dataclass
class CheckResult:
    at: float
    pods: int
    bound: int
    pending: int
    lost: list[str]
    overcommitted: list[str]
    bound_twice: list[str]

    @property
    def ok(self) -> bool:
        return not (self.lost or self.overcommitted or self.bound_twice)


def _ours(namespace: str) -> bool:
    return namespace.startswith(SOAK_PREFIXES) and not namespace.startswith("soak-lease")


def _age(obj: Json, now: dt.datetime) -> float:
    created = obj["metadata"].get("creationTimestamp")
    if not created:
        return 0.0
    when = dt.datetime.fromisoformat(str(created).replace("Z", "+00:00"))
    return (now - when).total_seconds()


def _has_failed_scheduling(obj: Json) -> bool:
    return any(
        c.get("type") == "PodScheduled" and c.get("status") == "False"
        for c in (obj.get("status") or {}).get("conditions") or ()
    )


def lost(pods: list[Json], *, now: dt.datetime, grace: float = GRACE) -> list[str]:
    """Pods pending past ``grace`` without a FailedScheduling reason."""
    out = []
    for obj in pods:
        meta, spec = obj["metadata"], obj.get("spec") or {}
        phase = (obj.get("status") or {}).get("phase")
        if (
            spec.get("nodeName")
            or meta.get("deletionTimestamp")
            or phase in ("Succeeded", "Failed")
        ):
            continue
        if _age(obj, now) > grace and not _has_failed_scheduling(obj):
            out.append(
                f"{meta['namespace']}/{meta['name']}: pending {_age(obj, now):.0f}s, no reason"
            )
    return out


@dataclass
class Checker:
    api: client.ApiClient
    binder_proxy: faultproxy.FaultProxy
    results: list[CheckResult] = field(default_factory=list)
    #: pod uid -> (namespace/name, node) as first seen bound.
    _bound: dict[str, tuple[str, str]] = field(default_factory=dict)

    def check(self, at: float) -> CheckResult:
        every = invariants.list_json(self.api, "/api/v1/pods")
        raw = [o for o in every if _ours(o["metadata"]["namespace"])]
        nodes = [convert.node_from_k8s(o) for o in invariants.list_json(self.api, "/api/v1/nodes")]
        every_pod = [convert.pod_from_k8s(o, strict=False) for o in every]
        now = dt.datetime.now(dt.UTC)
        result = CheckResult(
            at=round(at, 1),
            pods=len(raw),
            bound=sum(1 for o in raw if (o.get("spec") or {}).get("nodeName")),
            pending=sum(1 for o in raw if not (o.get("spec") or {}).get("nodeName")),
            lost=lost(raw, now=now),
            overcommitted=invariants.overcommitted(nodes, every_pod),
            bound_twice=self._moved(raw) + self._doubly_accepted(),
        )
        self.results.append(result)
        return result

    def _moved(self, raw: list[Json]) -> list[str]:
        """Pods whose node differs from the one they were first seen bound to (pods gone
        since are forgotten)."""
        out = []
        present = {o["metadata"]["uid"] for o in raw}
        for uid in [u for u in self._bound if u not in present]:
            del self._bound[uid]
        for o in raw:
            node = (o.get("spec") or {}).get("nodeName")
            if not node:
                continue
            meta = o["metadata"]
            key = f"{meta['namespace']}/{meta['name']}"
            first = self._bound.setdefault(meta["uid"], (key, node))
            if first[1] != node:
                out.append(f"{key}: bound to {first[1]}, now to {node}")
        return out

    def _doubly_accepted(self) -> list[str]:
        accepted: Counter[str] = self.binder_proxy.accepted_bindings()
        return [f"{k}: {n} Bindings accepted" for k, n in accepted.items() if n > 1]
