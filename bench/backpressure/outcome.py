"""What became of every pod, from the API server: a watch that tells when each one is bound
or carries its reason (PodScheduled=False, Unschedulable), and the final checks from a
LIST (no node over allocatable, no pod bound twice, every pod accounted for)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Iterable, Mapping
from typing import Any

import aiohttp
import orjson

from bench.sidebyside.kubeio import ApiError, KubeIO
from splitsched.testing import invariants

log = logging.getLogger("bench.backpressure")

Json = dict[str, Any]


def has_reason(pod: Mapping[str, Any]) -> bool:
    """PodScheduled=False with reason Unschedulable and a message: the scheduler said why."""
    for cond in (pod.get("status") or {}).get("conditions") or ():
        if cond.get("type") == "PodScheduled" and cond.get("status") == "False":
            return cond.get("reason") == "Unschedulable" and bool(cond.get("message"))
    return False


def settled(pods: Iterable[Mapping[str, Any]]) -> dict[str, list[str]]:
    """Pod names by outcome: bound, reason (pending with its reason), neither."""
    out: dict[str, list[str]] = {"bound": [], "reason": [], "neither": []}
    for pod in pods:
        name = str(pod["metadata"]["name"])
        if (pod.get("spec") or {}).get("nodeName"):
            out["bound"].append(name)
        elif has_reason(pod):
            out["reason"].append(name)
        else:
            out["neither"].append(name)
    return out


class PodTracker:
    """Watches one namespace; ``wait(total)`` returns once every pod is bound or has its
    reason. A watch that ends resumes from its last resourceVersion (a 410 relists)."""

    def __init__(self, io: KubeIO, namespace: str) -> None:
        self.io = io
        self.namespace = namespace
        self.bound: set[str] = set()
        self.reason: set[str] = set()
        #: (seconds since start, pods bound, pods with a reason), at each change of second.
        self.curve: list[tuple[float, int, int]] = []
        self._task: asyncio.Task[None] | None = None
        self._start = time.monotonic()

    def _observe(self, pod: Json) -> None:
        name = str(pod["metadata"]["name"])
        if (pod.get("spec") or {}).get("nodeName"):
            self.bound.add(name)
            self.reason.discard(name)
        elif has_reason(pod):
            self.reason.add(name)
        t = round(time.monotonic() - self._start)
        if not self.curve or self.curve[-1][0] != t:
            self.curve.append((t, len(self.bound), len(self.reason)))

    async def start(self, start: float) -> None:
        self._start = start
        rv = await self._list()
        self._task = asyncio.create_task(self._run(rv))

    async def _list(self) -> str:
        listing = await self.io.list_pods(self.namespace)
        for item in listing.get("items", []):
            self._observe(item)
        return str(listing["metadata"]["resourceVersion"])

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    async def _run(self, rv: str) -> None:
        url = f"{self.io.server}/api/v1/namespaces/{self.namespace}/pods"
        while True:
            params = {"watch": "1", "resourceVersion": rv, "timeoutSeconds": "3600"}
            try:
                async with self.io.session.get(url, params=params) as resp:
                    if resp.status != 200:
                        raise ApiError(f"watch: HTTP {resp.status}")
                    async for line in resp.content:
                        if not line.strip():
                            continue
                        event = orjson.loads(line)
                        obj = event.get("object") or {}
                        if event.get("type") == "ERROR":
                            rv = await self._list()  # 410 Gone: start over from a LIST
                            break
                        rv = str((obj.get("metadata") or {}).get("resourceVersion") or rv)
                        if event.get("type") in ("ADDED", "MODIFIED"):
                            self._observe(obj)
            except (TimeoutError, aiohttp.ClientError, ApiError) as exc:
                log.warning("pod watch restarts: %s", exc)
                await asyncio.sleep(0.5)

    async def wait(self, total: int, *, within: float) -> bool:
        """True once ``total`` pods are bound or have their reason; False after ``within``."""
        deadline = time.monotonic() + within
        while len(self.bound) + len(self.reason) < total:
            if time.monotonic() > deadline:
                return False
            await asyncio.sleep(1.0)
        return True


def final_checks(api: Any, namespace: str) -> dict[str, Any]:
    """From a LIST of the namespace's pods and Events, and every node and pod: the
    outcome counts, nodes over allocatable, pods with more than one Scheduled Event."""
    pods = invariants.list_json(api, f"/api/v1/namespaces/{namespace}/pods")
    events = invariants.list_json(api, f"/apis/events.k8s.io/v1/namespaces/{namespace}/events")
    nodes, all_pods = invariants.cluster_state(api)
    outcome = settled(pods)
    failed = {
        str((e.get("regarding") or {}).get("name"))
        for e in events
        if e.get("reason") == "FailedScheduling"
    }
    return {
        "pods": len(pods),
        "bound": len(outcome["bound"]),
        "with_reason": len(outcome["reason"]),
        "with_failed_scheduling_event": len(failed & set(outcome["reason"])),
        "neither": sorted(outcome["neither"])[:20],
        "neither_count": len(outcome["neither"]),
        "over_allocatable": invariants.overcommitted(nodes, all_pods)[:20],
        "bound_twice": invariants.scheduled_more_than_once(events)[:20],
    }
