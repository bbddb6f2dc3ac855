"""The Scheduler gRPC API: outcomes from binders, and the read/what-if API for tools.

A thin servicer over `SchedulerState` and the core algorithm, served by
`services.scheduler.main` and called by binders (`ReportBindingOutcome`), the `splitsched`
CLI (`splitsched.apiclient`), `examples/go-client` and anyone with grpcurl. Requests are
checked and turned into models by `api_input`, answers built by `api_views`; this module
reads the view and keeps the loop responsive: manifests are parsed in a worker thread; only
the short, synchronous parts that read the view (Explain, one Simulate pass) run on the
loop, so they see one consistent view. Explain and Simulate run in a what-if session of the
core (`FrameworkAlgorithm.what_if`), which puts the view back as it was: this module never
assumes or forgets in the cache.

The contract, with every field's meaning, is `proto/splitsched/v1/scheduler.proto`;
docs/api.md shows how to call it.
"""

from __future__ import annotations

import asyncio
import bisect
import contextlib
import logging
import time
from collections.abc import AsyncIterator, Callable, Sequence
from typing import Any, NoReturn

import grpc

from services.scheduler import api_input, api_views
from services.scheduler.api_input import InvalidRequest, page_after, page_size, page_token
from services.scheduler.attempts import AttemptStore
from services.scheduler.state import DecisionEvent, Phase, PodRecord, SchedulerState
from splitsched import wire_devices, wire_storage
from splitsched.core import models
from splitsched.v1 import scheduler_pb2, scheduler_pb2_grpc

log = logging.getLogger(__name__)

# Unplaced simulated pods beyond this many get a summary but no per-plugin verdicts
# (each verdict runs every filter on every node).
MAX_EXPLAINED_UNPLACED = 50
# How far a WatchDecisions consumer may fall behind before it loses the oldest decisions.
WATCH_BUFFER = 10000


async def _fail(context: Any, code: grpc.StatusCode, message: str) -> NoReturn:
    await context.abort(code, message)
    raise AssertionError("context.abort returned")  # pragma: no cover


#: Events whose trace id is remembered (the state keeps the last 1000 for replays).
MAX_EVENT_TRACES = 10_000


class SchedulerApi(scheduler_pb2_grpc.SchedulerServicer):
    def __init__(
        self,
        *,
        state: SchedulerState,
        on_change: Callable[[], None],
        trace_id_of: Callable[[str, str], str] | None = None,
        attempts: AttemptStore | None = None,
    ) -> None:
        self.state = state
        #: The pods' last attempts as span trees (GetPodTrace); None: none kept.
        self.attempts = attempts
        self.on_change = on_change
        #: (pod uid, decision id) -> the scheduling attempt's trace id; None: tracing off.
        self.trace_id_of = trace_id_of
        #: Trace ids of events without a decision id (UNSCHEDULABLE), fixed when the pod's
        #: next event comes (a later attempt would change the pod's latest trace); by
        #: id(event), with the event kept so the id is not reused.
        self._event_traces: dict[int, tuple[DecisionEvent, str]] = {}
        self._unfixed: dict[str, DecisionEvent] = {}  # by pod uid
        if trace_id_of is not None:
            state.listeners.append(self._fix_trace)

    def _fix_trace(self, event: DecisionEvent) -> None:
        """On every event (before its own attempt is traced): the pod's previous event
        without a decision id belongs to the pod's latest traced attempt."""
        assert self.trace_id_of is not None
        uid = event.pod.uid
        earlier = self._unfixed.pop(uid, None)
        if earlier is not None:
            if len(self._event_traces) >= MAX_EVENT_TRACES:
                self._event_traces.pop(next(iter(self._event_traces)))
            self._event_traces[id(earlier)] = (earlier, self.trace_id_of(uid, ""))
        if not event.decision_id:
            if len(self._unfixed) >= MAX_EVENT_TRACES:
                self._unfixed.pop(next(iter(self._unfixed)))
            self._unfixed[uid] = event

    def _trace_id(self, event: DecisionEvent) -> str:
        """The trace of the attempt behind `event` (read when sent: the loop traces an
        attempt right after the cycle that emitted its event); empty with tracing off."""
        if self.trace_id_of is None:
            return ""
        fixed = self._event_traces.get(id(event))
        if fixed is not None and fixed[0] is event:
            return fixed[1]
        return self.trace_id_of(event.pod.uid, event.decision_id)

    async def _require_synced(self, context: Any) -> None:
        if not self.state.synced:
            await _fail(
                context,
                grpc.StatusCode.UNAVAILABLE,
                "the scheduler has not synced its view with the watcher yet; retry",
            )

    async def _paging(
        self,
        request: scheduler_pb2.ListPodsRequest | scheduler_pb2.ListNodesRequest,
        context: Any,
        *,
        query: str,
        key_len: int,
    ) -> tuple[int, tuple[str, ...] | None]:
        """A list request's page size and the key its page starts after, once the view is
        synced; aborts with INVALID_ARGUMENT or UNAVAILABLE otherwise."""
        try:
            size = page_size(request.page_size)
            after = page_after(request.page_token, query=query, key_len=key_len)
        except InvalidRequest as exc:
            await _fail(context, grpc.StatusCode.INVALID_ARGUMENT, str(exc))
        await self._require_synced(context)
        return size, after

    async def _find(self, namespace: str, name: str, context: Any) -> PodRecord:
        if not namespace or not name:
            await _fail(context, grpc.StatusCode.INVALID_ARGUMENT, "namespace, name: required")
        await self._require_synced(context)
        rec = self.state.find(namespace, name)
        if rec is None:
            await _fail(
                context,
                grpc.StatusCode.NOT_FOUND,
                f"pod {namespace}/{name} is not tracked by this scheduler (no such pending or "
                f"bound pod with spec.schedulerName one of: {', '.join(self.state.algo.profiles)})",
            )
        return rec

    # ---- binders -----------------------------------------------------------------------
    async def ReportBindingOutcome(
        self, request: scheduler_pb2.ReportBindingOutcomeRequest, context: Any
    ) -> scheduler_pb2.ReportBindingOutcomeResponse:
        if not self.state.leading:
            # A standby: the binder's reporter retries, and its channel reaches the leader.
            await _fail(
                context,
                grpc.StatusCode.FAILED_PRECONDITION,
                "not the leader: this scheduler replica is a standby",
            )
        accepted = 0
        for outcome in request.outcomes:
            result = api_input.outcome_from_proto(outcome.result)
            if result is None or not outcome.decision_id:
                continue
            if self.state.on_outcome(
                decision_id=outcome.decision_id,
                result=result,
                message=outcome.message,
                attempts=outcome.attempts,
                binder_id=outcome.binder_id or request.binder_id,
                pod_uid=outcome.pod.uid,
                node=outcome.node,
                preemption=outcome.preemption,
                victim_uids=[v.uid for v in outcome.victims],
                volume_bindings=wire_storage.bindings_from_proto(
                    outcome.volume_bindings, namespace=outcome.pod.namespace
                ),
                claim_writes=[wire_devices.claim_write_from_proto(w) for w in outcome.claim_writes],
            ):
                accepted += 1
        self.on_change()
        return scheduler_pb2.ReportBindingOutcomeResponse(accepted=accepted)

    # ---- pods --------------------------------------------------------------------------
    def _status(self, rec: PodRecord, wall: float) -> scheduler_pb2.PodStatus:
        queue = self.state.queue.place_of(rec.pod.uid) or ""
        return api_views.pod_status(rec, queue=queue, wall=wall)

    def _wall_offset(self) -> float:
        """Add to the state's clock readings to get wall-clock seconds."""
        return time.time() - self.state.clock.now()

    async def GetPod(
        self, request: scheduler_pb2.GetPodRequest, context: Any
    ) -> scheduler_pb2.PodStatus:
        rec = await self._find(request.namespace, request.name, context)
        return self._status(rec, self._wall_offset())

    async def GetPodTrace(
        self, request: scheduler_pb2.GetPodTraceRequest, context: Any
    ) -> scheduler_pb2.PodTrace:
        ns, name = request.namespace, request.name
        if not ns or not name:
            await _fail(context, grpc.StatusCode.INVALID_ARGUMENT, "namespace, name: required")
        attempts = self.attempts.attempts(ns, name) if self.attempts is not None else []
        if not attempts:
            why = "no finished attempt of it is remembered"
            if self.attempts is None:
                why = "no attempts are kept (tracing is off and no --trace-store-pods)"
            await _fail(context, grpc.StatusCode.NOT_FOUND, f"pod {ns}/{name}: {why}")
        if request.attempts:
            attempts = attempts[-request.attempts :]
        return api_views.pod_trace(ns, name, attempts)

    async def ListPods(
        self, request: scheduler_pb2.ListPodsRequest, context: Any
    ) -> scheduler_pb2.ListPodsResponse:
        query = f"pods/{request.state}/{request.namespace}"
        size, after = await self._paging(request, context, query=query, key_len=2)
        records = sorted(
            (
                ((r.pod.namespace, r.pod.name), r)
                for r in self.state.iter_records()
                if (not request.namespace or r.pod.namespace == request.namespace)
                and (not request.state or api_views.PHASE_TO_PROTO[r.phase] == request.state)
            ),
            key=lambda kr: kr[0],
        )
        start = 0 if after is None else bisect.bisect_right(records, after, key=lambda kr: kr[0])
        page = records[start : start + size]
        wall = self._wall_offset()
        out = scheduler_pb2.ListPodsResponse(pods=[self._status(r, wall) for _, r in page])
        if start + size < len(records):
            out.next_page_token = page_token(query=query, last=page[-1][0])
        return out

    # ---- nodes -------------------------------------------------------------------------
    async def ListNodes(
        self, request: scheduler_pb2.ListNodesRequest, context: Any
    ) -> scheduler_pb2.ListNodesResponse:
        query = f"nodes/{request.name_prefix}"
        size, after = await self._paging(request, context, query=query, key_len=1)
        table = self.state.cache.table
        names = sorted(n for n in table.names if n.startswith(request.name_prefix))
        start = 0 if after is None else bisect.bisect_right(names, after[0])
        page = names[start : start + size]
        out = scheduler_pb2.ListNodesResponse()
        for name in page:
            api_views.add_node_view(
                out,
                table,
                name,
                version=self.state.node_versions.get(name, 0),
                include_pods=request.include_pods,
            )
        if start + size < len(names):
            out.next_page_token = page_token(query=query, last=(page[-1],))
        return out

    # ---- explain -----------------------------------------------------------------------
    async def Explain(
        self, request: scheduler_pb2.ExplainRequest, context: Any
    ) -> scheduler_pb2.ExplainResponse:
        rec = await self._find(request.namespace, request.name, context)
        if rec.phase is not Phase.WAITING:
            return api_views.not_pending(rec, self.state.cache.table.n)
        out = self.explain_pod(rec.pod, phase=rec.phase, include_nodes=request.include_nodes)
        if rec.pod.group is not None:
            blocker = self.state.gang_blockers.get((rec.pod.namespace, rec.pod.group.name))
            out.blocking_group_member = blocker or ""
        return out

    def explain_pod(
        self, pod: models.Pod, *, phase: Phase, include_nodes: bool
    ) -> scheduler_pb2.ExplainResponse:
        """Every filter's verdict on every node, against the view as it is now (with the
        pods of an open what-if session counted)."""
        algo = self.state.algo
        exp = algo.explain(pod)
        return api_views.explain_response(
            exp, phase=phase, table=algo.table, include_nodes=include_nodes
        )

    # ---- simulate ----------------------------------------------------------------------
    async def Simulate(
        self, request: scheduler_pb2.SimulateRequest, context: Any
    ) -> scheduler_pb2.SimulateResponse:
        try:
            top = api_input.simulate_limits(request)
        except InvalidRequest as exc:
            await _fail(context, grpc.StatusCode.INVALID_ARGUMENT, str(exc))
        await self._require_synced(context)
        profiles = list(self.state.algo.profiles)
        try:
            pods = await asyncio.to_thread(api_input.simulated_pods, request, profiles=profiles)
        except InvalidRequest as exc:
            await _fail(context, grpc.StatusCode.INVALID_ARGUMENT, str(exc))
        try:
            return self.simulate(pods, gang=request.gang, top=top)
        except Exception as exc:
            log.exception("Simulate failed")
            await _fail(
                context,
                grpc.StatusCode.INTERNAL,
                f"simulate failed ({type(exc).__name__}: {exc}); the view was not changed",
            )

    def simulate(
        self, pods: Sequence[models.Pod], *, gang: bool, top: int
    ) -> scheduler_pb2.SimulateResponse:
        """Place the pods one after another in a what-if session, explaining the first
        unplaced ones as they come (each sees the pods placed before it), then answer.
        Synchronous, so nothing else touches the view meanwhile; the session puts the view
        back, also on errors."""
        algo = self.state.algo
        explained: dict[int, scheduler_pb2.ExplainResponse] = {}
        with algo.what_if() as view:
            placements = []
            for i, pod in enumerate(pods):
                placement = view.place(pod)
                placements.append(placement)
                if placement.result.bind is None and len(explained) < MAX_EXPLAINED_UNPLACED:
                    explained[i] = self.explain_pod(pod, phase=Phase.WAITING, include_nodes=False)
        return api_views.simulate_response(
            placements, explained, gang=gang, top=top, table=algo.table
        )

    # ---- decisions stream ----------------------------------------------------------------
    async def WatchDecisions(
        self, request: scheduler_pb2.WatchDecisionsRequest, context: Any
    ) -> AsyncIterator[scheduler_pb2.Decision]:
        queue: asyncio.Queue[DecisionEvent] = asyncio.Queue(maxsize=WATCH_BUFFER)

        def wanted(event: DecisionEvent) -> bool:
            if request.namespace and event.pod.namespace != request.namespace:
                return False
            return request.include_outcomes or not event.kind.is_outcome

        def listener(event: DecisionEvent) -> None:
            if not wanted(event):
                return
            if queue.full():
                queue.get_nowait()  # a slow watcher loses the oldest, never blocks us
            queue.put_nowait(event)

        # Replay and subscribe in one synchronous step: no event falls in between.
        replay = [e for e in self.state.recent_events if wanted(e)] if request.replay else []
        for event in replay[-request.replay :] if request.replay else []:
            queue.put_nowait(event)
        self.state.listeners.append(listener)

        def unsubscribe(_: object = None) -> None:
            with contextlib.suppress(ValueError):
                self.state.listeners.remove(listener)

        # A cancelled stream may leave this generator suspended at `yield` until it is
        # garbage collected; the done callback unsubscribes as soon as the RPC ends.
        context.add_done_callback(unsubscribe)
        wall = self._wall_offset()
        try:
            while True:
                event = await queue.get()
                yield api_views.decision_message(event, trace_id=self._trace_id(event), wall=wall)
        finally:
            unsubscribe()
