"""The reads behind the binder's refusals (``services.binder.guard`` decides): before a
Binding (and its volume step), the pod and the node; before a preemption, the preemptor,
the node and each victim; before the FailedScheduling Event and PodScheduled=False of an
unschedulable report, the pod. Nothing is written for a refused decision or report, nor
for one whose pod cannot be read.

A pending pod is mostly known without a read (``services.binder.pendingpods``: a watch of
the served profiles' pending pods shows it, with every field the guard reads); other pods
and nodes are read from the API server's watch cache.

Used by ``services.binder.worker`` for every binding, preemption and unschedulable report.
Which nodes exist is mostly known without a read of each (``services.binder.knownnodes``:
one list of every node's name stands for them, for ``NODE_TTL`` seconds).
Each refusal is logged with the caller's identity and counted in
``splitsched_binder_refused_total{reason}``.
"""

from __future__ import annotations

import asyncio
import enum
import logging
import time
from collections.abc import Callable, Collection, Mapping
from typing import Any, cast

from services.binder import apirequests, classify, guard
from services.binder.apirequests import ApiRequest
from services.binder.jobs import (
    DEADLINE_EXCEEDED,
    FAILED,
    BindJob,
    BindResult,
    PodKey,
    PreemptJob,
)
from services.binder.knownnodes import LIST_BUDGET, KnownNodes
from services.binder.metrics import BinderMetrics
from services.binder.pendingpods import PendingPods
from services.binder.retrying import Retrier

log = logging.getLogger(__name__)

#: Victims read at once.
READ_CONCURRENCY = 16


class ReportCheck(enum.Enum):
    """What ``Admission.unschedulable`` found."""

    WRITE = "write"
    SKIP = "skip"
    UNREADABLE = "unreadable"


class Admission:
    """Reads what a decision touches and refuses what ``guard`` refuses."""

    def __init__(
        self,
        *,
        retrier: Retrier,
        metrics: BinderMetrics,
        profiles: Collection[str],
        monotonic: Callable[[], float] = time.monotonic,
        clock: Callable[[], float] = time.time,
        pending: PendingPods | None = None,
    ) -> None:
        """``clock`` is the deadlines' (wall clock, as ``BindJob.deadline``); ``monotonic``
        times how long a node stays known; ``pending`` holds the pods a watch showed (None:
        every pod is read)."""
        self._retrier = retrier
        self._pending = pending
        self._metrics = metrics
        self.profiles = frozenset(profiles)
        self._nodes = KnownNodes(self._list_node_names, monotonic=monotonic)
        self._clock = clock
        self._list_refused = False

    @classmethod
    def serving(
        cls,
        profiles: Collection[str] | None,
        retrier: Retrier,
        metrics: BinderMetrics,
        clock: Callable[[], float],
        pending: PendingPods | None,
    ) -> Admission | None:
        """The admission of a binder serving ``profiles``; None when not told which (tests
        of other parts: nothing is checked)."""
        if profiles is None:
            return None
        return cls(retrier=retrier, metrics=metrics, profiles=profiles, clock=clock,
                   pending=pending)  # fmt: skip

    async def binding(self, job: BindJob) -> BindResult | None:
        """None when ``job`` may be bound, else the result to report instead. The pod and
        an unremembered node are read at once: two reads, nothing written before both
        are judged, in the same order as one after the other (the pod's checks first), so
        the guard refuses exactly what it did while a binding waits one round trip less."""
        what = f"binding {job.pod} to {job.node}"
        pod_read = self._read_pod(job.pod, deadline=job.deadline)
        if self._nodes.known(job.node):
            pod, node = await pod_read, None
        else:
            pod, node = await asyncio.gather(pod_read, self._find_node(job.node, job.deadline))
        if pod is None or isinstance(pod, BindResult):
            return pod
        refusal = guard.foreign_pod(pod, who=f"pod {job.pod}", profiles=self.profiles)
        if refusal is None and job.volumes:
            refusal = guard.unused_claims(pod, job.volumes, who=f"pod {job.pod}")
        if refusal is None and isinstance(node, guard.Refusal):
            refusal = node
        if refusal is not None:
            return self._refuse(refusal, what=what, caller=job.caller)
        return node

    async def preemption(self, job: PreemptJob) -> BindResult | None:
        """None when ``job`` may go ahead, else the result to report instead."""
        what = f"preemption for {job.preemptor} on {job.node}"
        pod = await self._read_pod(job.preemptor, deadline=job.deadline)
        if pod is None or isinstance(pod, BindResult):
            return pod
        who = f"preemptor {job.preemptor}"
        refusal = guard.foreign_pod(pod, who=who, profiles=self.profiles)
        if refusal is not None:
            return self._refuse(refusal, what=what, caller=job.caller)
        missing = await self._node(job.node, deadline=job.deadline, what=what, caller=job.caller)
        if missing is not None:
            return missing
        return await self._victims(job, preemptor_priority=guard.priority(pod), what=what)

    async def unschedulable(self, pod: PodKey, *, deadline: float, caller: str) -> ReportCheck:
        """Whether the scheduler's report that ``pod`` is unschedulable may be written:
        the pod exists (with the report's uid, when it names one) and is of a served
        profile. SKIP when gone or refused; UNREADABLE when the pod could not be read
        (the API server failing or throttling us): worth trying again later."""
        what = f"FailedScheduling report for {pod}"
        found = await self._read_pod(pod, deadline=deadline)
        if isinstance(found, BindResult):
            log.warning("%s not written yet: %s", what, found.message)
            return ReportCheck.UNREADABLE
        if found is None:
            return ReportCheck.SKIP  # gone or re-created: about a pod no longer there
        refusal = guard.foreign_pod(found, who=f"pod {pod}", profiles=self.profiles)
        if refusal is not None:
            self._refuse(refusal, what=what, caller=caller)
            return ReportCheck.SKIP
        return ReportCheck.WRITE

    async def _victims(
        self, job: PreemptJob, *, preemptor_priority: int, what: str
    ) -> BindResult | None:
        limit = asyncio.Semaphore(READ_CONCURRENCY)

        async def check(victim: PodKey) -> BindResult | guard.Refusal | None:
            async with limit:
                pod = await self._read_pod(victim, deadline=job.deadline)
            if pod is None or isinstance(pod, BindResult):
                return pod  # None: gone, and its uid-checked Eviction will say so
            return guard.victim_not_lower(
                pod, who=str(victim), preemptor=str(job.preemptor),
                preemptor_priority=preemptor_priority,
            )  # fmt: skip

        for found in await asyncio.gather(*(check(v) for v in job.victims)):
            if isinstance(found, guard.Refusal):
                return self._refuse(found, what=what, caller=job.caller)
            if found is not None:
                return found
        return None

    async def _read_pod(
        self, pod: PodKey, *, deadline: float
    ) -> Mapping[str, Any] | BindResult | None:
        """The pod's JSON; None when it is gone or re-created (another uid; any uid when
        ``pod.uid`` is empty, as an unschedulable report may be): nothing to check, the
        uid-checked write that follows fails and says so; the result to report when it
        cannot be read. Read from the API server's cache first (the fields
        checked never change); a pod the cache does not show is read again from etcd, as
        the cache may lag a little. A pod the pending pods' watch shows is not read."""
        shown = (
            None if self._pending is None else self._pending.get(pod.namespace, pod.name, pod.uid)
        )
        if shown is not None:
            self._metrics.pods_shown.inc()
            return shown
        for cached in (True, False):
            request = apirequests.read_pod(pod.namespace, pod.name, cached=cached)
            answer = await self._get(request, deadline)
            if isinstance(answer, BindResult):
                return answer
            if answer.status == 200 and pod.uid in ("", _uid(answer.body)):
                return cast(Mapping[str, Any], answer.body)
            if answer.status not in (200, 404):
                message = f"reading {request.what}: {classify.http_error(answer)}"
                return BindResult(FAILED, message, 0, answer.status)
        return None

    async def _node(
        self, node: str, *, deadline: float, what: str, caller: str
    ) -> BindResult | None:
        """None when ``node`` exists (or was seen to within ``NODE_TTL``)."""
        if self._nodes.known(node):
            return None
        found = await self._find_node(node, deadline)
        if isinstance(found, guard.Refusal):
            return self._refuse(found, what=what, caller=caller)
        return found

    async def _find_node(self, node: str, deadline: float) -> BindResult | guard.Refusal | None:
        """As ``_read_node``, after a list of every node when one is due: a node the list
        shows is not read on its own."""
        await self._nodes.refresh(min(deadline, self._clock() + LIST_BUDGET))
        if self._nodes.known(node):
            return None
        return await self._read_node(node, deadline)

    async def _list_node_names(self, deadline: float) -> list[str] | None:
        """Every node's name (``KnownNodes``' lister); None when the list failed, which
        is logged (as a warning the first time: a binder without ``list`` on nodes still
        works, reading each node on its own)."""
        answer = await self._get(apirequests.list_node_names(), deadline)
        names = apirequests.table_names(answer.body) if not isinstance(answer, BindResult) else None
        if isinstance(answer, BindResult) or answer.status != 200 or names is None:
            why = answer.message if isinstance(answer, BindResult) else classify.http_error(answer)
            level = logging.DEBUG if self._list_refused else logging.WARNING
            log.log(level, "listing the nodes failed, reading each on its own: %s", why)
            self._list_refused = True
            return None
        return names

    async def _read_node(self, node: str, deadline: float) -> BindResult | guard.Refusal | None:
        """Read ``node``: None when it exists (remembered for ``NODE_TTL``), the refusal
        when it does not, the result to report when it cannot be read. From the API
        server's watch cache first, as the pod: at 5,000 nodes most bindings go to a node
        not read in the last ``NODE_TTL``, and an etcd read each costs the API server far
        more. A node the cache does not show is read again from etcd before it is refused."""
        answer = await self._get(apirequests.read_node(node, cached=True), deadline)
        if not isinstance(answer, BindResult) and answer.status == 404:
            answer = await self._get(apirequests.read_node(node), deadline)
        if isinstance(answer, BindResult):
            return answer
        refusal = guard.missing_node(node, status=answer.status)
        if refusal is not None:
            return refusal
        if answer.status != 200:
            message = f"reading node {node}: {classify.http_error(answer)}"
            return BindResult(FAILED, message, 0, answer.status)
        self._nodes.saw(node)
        return None

    async def _get(self, request: ApiRequest, deadline: float) -> classify.Answer | BindResult:
        done = await self._retrier.send(request, deadline=deadline)
        if done.value is None:
            message = f"reading {request.what}: {done.error}"
            return BindResult(DEADLINE_EXCEEDED, message, done.attempts, done.last_status)
        return done.value

    def _refuse(self, refusal: guard.Refusal, *, what: str, caller: str) -> BindResult:
        log.warning("refused %s asked by %s: %s", what, caller or "unknown caller",
                    refusal.message)  # fmt: skip
        self._metrics.refused.labels(reason=refusal.reason.value).inc()
        return refusal.result(attempts=0, status=0)


def _uid(body: Any) -> str:
    meta = body.get("metadata") if isinstance(body, dict) else None
    return str(meta.get("uid") or "") if isinstance(meta, dict) else ""
