"""The Scheduler gRPC API: outcomes from binders, and the read/what-if API for tools.

A thin servicer over `SchedulerState` and the core algorithm, served by
`services.scheduler.main` and called by binders (`ReportBindingOutcome`), the `splitsched`
CLI (`splitsched.apiclient`), `examples/go-client` and anyone with grpcurl. It validates
requests, converts between proto and models (`splitsched.wire`), and keeps the loop
responsive: manifests are parsed in a worker thread; only the short, synchronous parts that
read the view (Explain, one Simulate pass) run on the loop, so they see one consistent view.

The contract, with every field's meaning, is `proto/splitsched/v1/scheduler.proto`;
docs/api.md shows how to call it.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import bisect
import contextlib
import dataclasses
import json
import logging
import time
from collections import Counter
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from typing import Any, NoReturn

import grpc
import numpy as np
import yaml

from services.scheduler import podcheck
from services.scheduler.state import DecisionEvent, Outcome, Phase, PodRecord, SchedulerState
from splitsched import wire
from splitsched.core import algorithm, convert, models
from splitsched.v1 import scheduler_pb2, scheduler_pb2_grpc, types_pb2

log = logging.getLogger(__name__)

MAX_PAGE = 5000
DEFAULT_PAGE = 500
MAX_SIMULATE_PODS = 1000
MAX_MANIFEST_BYTES = 4 * 1024 * 1024
DEFAULT_TOP_NODES = 3
MAX_TOP_NODES = 50
# Unplaced simulated pods beyond this many get a summary but no per-plugin verdicts
# (each verdict runs every filter on every node).
MAX_EXPLAINED_UNPLACED = 50
# How far a WatchDecisions consumer may fall behind before it loses the oldest decisions.
WATCH_BUFFER = 10000
NODE_CLASS_LABELS = ("topology.kubernetes.io/zone", "node.kubernetes.io/instance-type")
GANG_NOT_PLACED = "the gang does not fit as a whole"

_PHASE_TO_PROTO = {
    Phase.WAITING: scheduler_pb2.WAITING,
    Phase.PREEMPTING: scheduler_pb2.PREEMPTING,
    Phase.BINDING: scheduler_pb2.BINDING,
    Phase.BOUND: scheduler_pb2.BOUND,
}
_OUTCOME_FROM_PROTO = {
    scheduler_pb2.BindingOutcome.BOUND: Outcome.BOUND,
    scheduler_pb2.BindingOutcome.CONFLICT: Outcome.CONFLICT,
    scheduler_pb2.BindingOutcome.POD_GONE: Outcome.POD_GONE,
    scheduler_pb2.BindingOutcome.FAILED: Outcome.FAILED,
    scheduler_pb2.BindingOutcome.DEADLINE_EXCEEDED: Outcome.DEADLINE_EXCEEDED,
    scheduler_pb2.BindingOutcome.IN_PROGRESS: Outcome.IN_PROGRESS,
}
_DECISION_KIND = {
    name: scheduler_pb2.Decision.Kind.Value(name)
    for name in (
        "SCHEDULED",
        "UNSCHEDULABLE",
        "PREEMPTING",
        "BOUND",
        "BIND_FAILED",
        "CONFLICT",
        "POD_GONE",
    )
}
# The scheduler's own decisions; the rest are outcomes (WatchDecisionsRequest.include_outcomes).
_DECISION_KINDS = frozenset({"SCHEDULED", "UNSCHEDULABLE", "PREEMPTING"})


class InvalidRequest(ValueError):
    """The request cannot be answered as given; the message names the field."""


# ---- paging -----------------------------------------------------------------------------
# A page token names the last item of the previous page (a keyset, not an offset), so pods
# created or deleted between two pages neither shift nor repeat the others, plus the filters
# it was issued for, so it cannot be replayed against a different query.


def page_token(*, query: str, last: Sequence[str]) -> str:
    raw = json.dumps({"q": query, "after": list(last)}, separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def page_after(token: str, *, query: str, key_len: int) -> tuple[str, ...] | None:
    """The key a page starts after; None for the first page. Raises InvalidRequest."""
    if not token:
        return None
    try:
        raw = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4))
        doc = json.loads(raw)
    except (ValueError, binascii.Error, UnicodeDecodeError):
        raise InvalidRequest("page_token: not a token this server issued") from None
    after = doc.get("after") if isinstance(doc, dict) else None
    if (
        not isinstance(after, list)
        or len(after) != key_len
        or not all(isinstance(k, str) for k in after)
    ):
        raise InvalidRequest("page_token: not a token this server issued")
    if doc.get("q") != query:
        raise InvalidRequest("page_token: issued for different filters; keep them unchanged")
    return tuple(after)


def page_size(requested: int) -> int:
    if requested < 0:
        raise InvalidRequest("page_size: must not be negative")
    return min(requested or DEFAULT_PAGE, MAX_PAGE)


def node_class(node: models.Node) -> str:
    """What makes a node different for scheduling, in a few words."""
    parts = [
        f"{k.rsplit('/', 1)[-1]}={node.labels[k]}" for k in NODE_CLASS_LABELS if k in node.labels
    ]
    if node.taints:
        parts.append("taints=" + ",".join(f"{t.key}:{t.effect}" for t in node.taints))
    if node.unschedulable:
        parts.append("cordoned")
    return ",".join(parts) or "default"


# ---- Simulate's input -------------------------------------------------------------------


class _NoAliasCheck:
    """YAML aliases (`*ref`, `<<: *ref`) make the loader share one dict or list between
    several places; refusing shared containers refuses aliases (and "billion laughs")."""

    def __init__(self) -> None:
        self.seen: set[int] = set()

    def check(self, value: object) -> None:
        stack = [value]
        while stack:
            item = stack.pop()
            if isinstance(item, (dict, list)):
                if id(item) in self.seen:
                    raise InvalidRequest("YAML aliases (*ref) are not supported")
                self.seen.add(id(item))
                stack.extend(item.values() if isinstance(item, dict) else item)


def _documents(text: str) -> list[object]:
    stripped = text.lstrip()
    if stripped.startswith(("{", "[")):
        try:
            return [json.loads(stripped)]
        except ValueError:
            pass  # maybe YAML flow style after all; the YAML parser says what is wrong
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    try:
        docs = [d for d in yaml.load_all(text, Loader=loader) if d is not None]
    except yaml.YAMLError as exc:
        raise InvalidRequest(f"not valid YAML or JSON: {exc}") from None
    checker = _NoAliasCheck()
    for doc in docs:
        checker.check(doc)
    return docs


def _manifest_items(text: str) -> list[tuple[str, object]]:
    """(where, object) for every pod-ish object of one manifest string."""
    docs = _documents(text)
    out: list[tuple[str, object]] = []
    for d, doc in enumerate(docs):
        where = f"document {d}: " if len(docs) > 1 else ""
        if isinstance(doc, dict) and doc.get("kind") in ("List", "PodList"):
            items = doc.get("items")
            if not isinstance(items, list):
                raise InvalidRequest(f"{where}items: expected a list")
            out += [(f"{where}items[{j}]: ", item) for j, item in enumerate(items)]
        else:
            out.append((where, doc))
    return out


def simulated_pods(
    request: scheduler_pb2.SimulateRequest, *, profiles: Sequence[str]
) -> list[models.Pod]:
    """The pods of a Simulate request as models, validated, with the defaults the contract
    promises. Pure (no view access): runs in a worker thread. Raises InvalidRequest."""
    default_profile = profiles[0]
    pods: list[models.Pod] = []

    def add(pod: models.Pod, where: str) -> None:
        if len(pods) >= MAX_SIMULATE_PODS:
            raise InvalidRequest(f"at most {MAX_SIMULATE_PODS} pods per Simulate call")
        if pod.invalid_reason:
            raise InvalidRequest(f"{where}pod {pod.key}: {pod.invalid_reason}")
        problem = podcheck.resource_problem(pod)
        if problem:
            raise InvalidRequest(f"{where}pod {pod.key}: {problem}")
        if pod.scheduler_name not in profiles:
            raise InvalidRequest(
                f"{where}pod {pod.key}: spec.schedulerName: {pod.scheduler_name!r} is not a "
                f"profile of this scheduler ({', '.join(profiles)})"
            )
        uid = f"simulate-{len(pods)}-{pod.uid or pod.name}"
        pods.append(dataclasses.replace(pod, uid=uid, node_name=""))

    for i, msg in enumerate(request.pods):
        where = f"pods[{i}]: "
        _check_proto_pod(msg, where)
        pod = wire.pod_from_proto(msg)
        pod = dataclasses.replace(
            pod,
            namespace=pod.namespace or "default",
            name=pod.name or f"simulated-{len(pods)}",
            scheduler_name=pod.scheduler_name or default_profile,
        )
        add(pod, where)
    for i, text in enumerate(request.manifests):
        try:
            items = _manifest_items(text)
        except InvalidRequest as exc:
            raise InvalidRequest(f"manifests[{i}]: {exc}") from None
        for where, item in items:
            where = f"manifests[{i}]: {where}"
            if not isinstance(item, dict):
                raise InvalidRequest(f"{where}expected a Pod object")
            kind = item.get("kind", "Pod")
            if kind != "Pod":
                raise InvalidRequest(f"{where}kind: expected Pod, got {kind!r}")
            meta = item.setdefault("metadata", {})
            if isinstance(meta, dict) and not meta.get("name"):
                meta["name"] = f"simulated-{len(pods)}"
            spec = item.get("spec")
            if isinstance(spec, dict) and not spec.get("schedulerName"):
                spec["schedulerName"] = default_profile
            try:
                pod = convert.pod_from_k8s(item, strict=True)
            except ValueError as exc:  # ConversionError: "pod ns/name: field.path: problem"
                raise InvalidRequest(f"{where}{exc}") from None
            add(pod, where)
    if not pods:
        raise InvalidRequest("pods, manifests: give at least one pod")
    return pods


def _check_proto_pod(msg: types_pb2.Pod, where: str) -> None:
    """What the API server or the watcher's converter would have refused: negative
    quantities, and what `podcheck` checks."""
    lists: list[tuple[str, Mapping[str, int]]] = [
        ("overhead", msg.overhead),
        ("pod_requests", msg.pod_requests),
    ]
    for field_name, containers in (
        ("containers", msg.containers),
        ("init_containers", msg.init_containers),
    ):
        lists += [(f"{field_name}[{j}].requests", c.requests) for j, c in enumerate(containers)]
    for path, resources in lists:
        for resource, amount in resources.items():
            if amount < 0:
                raise InvalidRequest(f"{where}{path}[{resource!r}]: must not be negative")
    problem = podcheck.problem(msg)
    if problem:
        raise InvalidRequest(f"{where}{problem}")


# ---- the servicer -----------------------------------------------------------------------


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
    ) -> None:
        self.state = state
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
            result = _OUTCOME_FROM_PROTO.get(outcome.result)
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
            ):
                accepted += 1
        self.on_change()
        return scheduler_pb2.ReportBindingOutcomeResponse(accepted=accepted)

    # ---- pods --------------------------------------------------------------------------
    def _status(self, rec: PodRecord, wall: float) -> scheduler_pb2.PodStatus:
        msg = scheduler_pb2.PodStatus(
            pod=wire.pod_ref(rec.pod),
            state=_PHASE_TO_PROTO[rec.phase],
            node=rec.node,
            nominated_node=rec.nominated_node if rec.phase is Phase.PREEMPTING else "",
            scheduling_attempts=rec.scheduling_attempts,
            bind_attempts=rec.bind_attempts,
            message=rec.message,
            scheduler_name=rec.pod.scheduler_name,
            priority=rec.pod.priority,
            queue=self.state.queue.place_of(rec.pod.uid) or "",
            group=rec.pod.group.name if rec.pod.group else "",
        )
        plugins = rec.failed_node_plugins
        for node, reason in rec.failed_node_reasons.items():
            msg.last_failures.add(
                node=node,
                plugin=plugins.get(node, ""),
                reasons=reason.split("; ") if reason else [],
            )
        if rec.first_seen:
            wire.timestamp_from_float(rec.first_seen + wall, msg.first_seen)
        if rec.last_attempt:
            wire.timestamp_from_float(rec.last_attempt + wall, msg.last_attempt)
        return msg

    def _wall_offset(self) -> float:
        """Add to the state's clock readings to get wall-clock seconds."""
        return time.time() - self.state.clock.now()

    async def GetPod(
        self, request: scheduler_pb2.GetPodRequest, context: Any
    ) -> scheduler_pb2.PodStatus:
        rec = await self._find(request.namespace, request.name, context)
        return self._status(rec, self._wall_offset())

    async def ListPods(
        self, request: scheduler_pb2.ListPodsRequest, context: Any
    ) -> scheduler_pb2.ListPodsResponse:
        query = f"pods/{request.state}/{request.namespace}"
        try:
            size = page_size(request.page_size)
            after = page_after(request.page_token, query=query, key_len=2)
        except InvalidRequest as exc:
            await _fail(context, grpc.StatusCode.INVALID_ARGUMENT, str(exc))
        await self._require_synced(context)
        records = sorted(
            (
                ((r.pod.namespace, r.pod.name), r)
                for r in self.state.iter_records()
                if (not request.namespace or r.pod.namespace == request.namespace)
                and (not request.state or _PHASE_TO_PROTO[r.phase] == request.state)
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
        try:
            size = page_size(request.page_size)
            after = page_after(request.page_token, query=query, key_len=1)
        except InvalidRequest as exc:
            await _fail(context, grpc.StatusCode.INVALID_ARGUMENT, str(exc))
        await self._require_synced(context)
        table = self.state.cache.table
        names = sorted(n for n in table.names if n.startswith(request.name_prefix))
        start = 0 if after is None else bisect.bisect_right(names, after[0])
        page = names[start : start + size]
        out = scheduler_pb2.ListNodesResponse()
        requested = table.requested
        for name in page:
            row = table.row_of[name]
            node = table.nodes[row]
            view = out.nodes.add(
                name=name,
                pod_count=len(table.pods[row]),
                unschedulable=node.unschedulable,
                version=self.state.node_versions.get(name, 0),
            )
            for col, res in enumerate(table.resource_names):
                alloc = int(table.allocatable[row, col])
                req = int(requested[row, col])
                if alloc:
                    view.allocatable[res] = alloc
                    view.free[res] = alloc - req
                if req:
                    view.requested[res] = req
            view.labels.update(node.labels)
            for t in node.taints:
                view.taints.add(key=t.key, value=t.value, effect=t.effect)
            if request.include_pods:
                for pod in table.pods[row].values():
                    view.pods.append(wire.pod_ref(pod))
        if start + size < len(names):
            out.next_page_token = page_token(query=query, last=(page[-1],))
        return out

    # ---- explain -----------------------------------------------------------------------
    async def Explain(
        self, request: scheduler_pb2.ExplainRequest, context: Any
    ) -> scheduler_pb2.ExplainResponse:
        rec = await self._find(request.namespace, request.name, context)
        table = self.state.cache.table
        if rec.phase is not Phase.WAITING:
            # Not pending any more, or already making room: nothing to run the filters for
            # (the pod is counted on its node, so they would only confuse).
            summary = {
                Phase.BOUND: f"not pending: bound to node {rec.node}",
                Phase.BINDING: f"not pending: being bound to node {rec.node}",
                Phase.PREEMPTING: f"preempting on node {rec.nominated_node}: {rec.message}",
            }[rec.phase]
            return scheduler_pb2.ExplainResponse(
                pod=wire.pod_ref(rec.pod),
                state=_PHASE_TO_PROTO[rec.phase],
                summary=summary,
                total_nodes=table.n,
                preemption_might_help=rec.phase is Phase.PREEMPTING,
            )
        out = self.explain_pod(rec.pod, phase=rec.phase, include_nodes=request.include_nodes)
        if rec.pod.group is not None:
            blocker = self.state.gang_blockers.get((rec.pod.namespace, rec.pod.group.name))
            out.blocking_group_member = blocker or ""
        return out

    def explain_pod(
        self, pod: models.Pod, *, phase: Phase, include_nodes: bool
    ) -> scheduler_pb2.ExplainResponse:
        """Every filter's verdict on every node, against the view as it is now."""
        algo = self.state.algo
        table = algo.table
        exp = algo.explain(pod)
        out = scheduler_pb2.ExplainResponse(
            pod=wire.pod_ref(pod),
            state=_PHASE_TO_PROTO[phase],
            summary=exp.summary,
            total_nodes=exp.total_nodes,
            feasible_nodes=int(exp.feasible.size),
            preemption_might_help=exp.preemption_might_help,
            pod_error=exp.pod_error,
        )
        per_node: dict[int, list[tuple[str, tuple[str, ...]]]] = {}
        for rej in exp.rejections:
            reasons: Counter[str] = Counter()
            classes: Counter[str] = Counter()
            for row, rs in zip(rej.rows.tolist(), rej.reasons, strict=True):
                reasons.update(rs)
                classes[node_class(table.nodes[row])] += 1
                if include_nodes:
                    per_node.setdefault(row, []).append((rej.plugin, rs))
            verdict = out.plugins.add(
                plugin=rej.plugin,
                rejected_nodes=int(rej.rows.size),
                resolvable_by_preemption=rej.resolvable_by_preemption,
            )
            for reason, n in reasons.most_common():
                verdict.reasons.add(reason=reason, nodes=n)
            for cls, n in classes.most_common():
                verdict.node_classes.add(node_class=cls, nodes=n)
        if include_nodes:
            feasible = set(exp.feasible.tolist())
            for row, name in enumerate(table.names):
                nv = out.nodes.add(node=name, feasible=row in feasible)
                for plugin, rs in per_node.get(row, []):
                    nv.rejections.add(node=name, plugin=plugin, reasons=list(rs))
        return out

    # ---- simulate ----------------------------------------------------------------------
    async def Simulate(
        self, request: scheduler_pb2.SimulateRequest, context: Any
    ) -> scheduler_pb2.SimulateResponse:
        top = request.top_nodes or DEFAULT_TOP_NODES
        try:
            if not 0 <= request.top_nodes <= MAX_TOP_NODES:
                raise InvalidRequest(f"top_nodes: must be 0..{MAX_TOP_NODES}")
            if len(request.pods) > MAX_SIMULATE_PODS:
                raise InvalidRequest(f"pods: at most {MAX_SIMULATE_PODS} pods per Simulate call")
            size = sum(len(m) for m in request.manifests)
            if size > MAX_MANIFEST_BYTES:
                raise InvalidRequest(
                    f"manifests: {size} bytes in total; at most {MAX_MANIFEST_BYTES} per call"
                )
        except InvalidRequest as exc:
            await _fail(context, grpc.StatusCode.INVALID_ARGUMENT, str(exc))
        await self._require_synced(context)
        profiles = list(self.state.algo.profiles)
        try:
            pods = await asyncio.to_thread(simulated_pods, request, profiles=profiles)
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
        """Place the pods against the view, then answer. Synchronous, so nothing else
        touches the view meanwhile; the core undoes its assumptions, also on errors."""
        algo = self.state.algo
        results = algo.simulate(pods, gang=False)
        unplaced = [i for i, (_, r, _) in enumerate(results) if r.bind is None]
        blocking = pods[unplaced[0]] if gang and unplaced else None
        explained = self._explain_unplaced(results, unplaced[:MAX_EXPLAINED_UNPLACED])
        out = scheduler_pb2.SimulateResponse(all_placed=not unplaced)
        n = algo.table.n
        for i, (pod, result, scored) in enumerate(results):
            placement = out.placements.add(pod=wire.pod_ref(pod))
            if result.bind is None:
                placement.summary = _why_not(result)
                if i in explained:
                    placement.plugins.extend(explained[i].plugins)
            elif blocking is not None:
                placement.summary = f"{GANG_NOT_PLACED}: {blocking.key} fits nowhere"
            else:
                placement.node = result.bind.node
                placement.summary = f"fits on {result.bind.feasible_nodes}/{n} nodes"
            if scored is not None and scored.rows.size:
                order = np.argsort(-scored.total, kind="stable")[:top]
                for k in order.tolist():
                    ns = placement.top_nodes.add(
                        node=algo.table.names[int(scored.rows[k])], total=float(scored.total[k])
                    )
                    for plugin, arr in scored.per_plugin.items():
                        ns.plugin_scores[plugin] = float(arr[k])
        if blocking is not None:
            out.blocking_pod.CopyFrom(wire.pod_ref(blocking))
        return out

    def _explain_unplaced(
        self,
        results: Sequence[tuple[models.Pod, algorithm.ScheduleResult, Any]],
        wanted: Sequence[int],
    ) -> dict[int, scheduler_pb2.ExplainResponse]:
        """Explain the unplaced pods with the simulated pods before each one counted, as
        the simulation saw them: re-assume those in order, explain, forget them all."""
        if not wanted:
            return {}
        cache = self.state.cache
        todo = set(wanted)
        out: dict[int, scheduler_pb2.ExplainResponse] = {}
        assumed: list[str] = []
        try:
            for i, (pod, result, _) in enumerate(results[: max(wanted) + 1]):
                if result.bind is not None:
                    cache.assume(pod, result.bind.node)
                    assumed.append(pod.uid)
                elif i in todo:
                    out[i] = self.explain_pod(pod, phase=Phase.WAITING, include_nodes=False)
        finally:
            for uid in reversed(assumed):
                cache.forget(uid)
        return out

    # ---- decisions stream ----------------------------------------------------------------
    async def WatchDecisions(
        self, request: scheduler_pb2.WatchDecisionsRequest, context: Any
    ) -> AsyncIterator[scheduler_pb2.Decision]:
        queue: asyncio.Queue[DecisionEvent] = asyncio.Queue(maxsize=WATCH_BUFFER)

        def wanted(event: DecisionEvent) -> bool:
            if request.namespace and event.pod.namespace != request.namespace:
                return False
            return request.include_outcomes or event.kind in _DECISION_KINDS

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
                msg = scheduler_pb2.Decision(
                    decision_id=event.decision_id,
                    pod=wire.pod_ref(event.pod),
                    kind=_DECISION_KIND.get(event.kind, scheduler_pb2.Decision.KIND_UNSPECIFIED),
                    node=event.node,
                    message=event.message,
                    binder_id=event.binder_id,
                )
                msg.trace_id = self._trace_id(event)
                wire.timestamp_from_float(event.at + wall, msg.at)
                yield msg
        finally:
            unsubscribe()


def _why_not(result: algorithm.ScheduleResult) -> str:
    if result.preempt is not None:
        p = result.preempt
        return (
            f"{p.wait.summary} Preempting {len(p.victims)} pod(s) on {p.node} would make room: "
            + ", ".join(v.key for v in p.victims)
        )
    return result.wait.summary if result.wait is not None else ""
