"""The Scheduler gRPC API: outcomes from binders, and the read/what-if API for tools.

A thin servicer over `SchedulerState` and the core algorithm: it validates requests,
converts between proto and models (`splitsched.wire`), and never blocks the loop for
long (Explain and Simulate run the vectorised core once per pod).
"""

from __future__ import annotations

import asyncio
import base64
import dataclasses
import time
from collections import Counter
from collections.abc import AsyncIterator, Callable
from typing import Any

import grpc
import numpy as np
import yaml

from services.scheduler.state import DecisionEvent, Outcome, Phase, PodRecord, SchedulerState
from splitsched import wire
from splitsched.core import convert, models
from splitsched.v1 import scheduler_pb2, scheduler_pb2_grpc

MAX_PAGE = 5000
DEFAULT_PAGE = 500
MAX_SIMULATE_PODS = 1000
NODE_CLASS_LABELS = ("topology.kubernetes.io/zone", "node.kubernetes.io/instance-type")

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


def _page_token(offset: int) -> str:
    return base64.urlsafe_b64encode(str(offset).encode()).decode() if offset else ""


def _page_offset(token: str) -> int:
    if not token:
        return 0
    try:
        value = int(base64.urlsafe_b64decode(token.encode()).decode())
    except (ValueError, UnicodeDecodeError) as exc:
        raise ValueError("page_token is not a token this server issued") from exc
    if value < 0:
        raise ValueError("page_token is not a token this server issued")
    return value


def _page_size(requested: int) -> int:
    if requested < 0:
        raise ValueError("page_size must not be negative")
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


class SchedulerApi(scheduler_pb2_grpc.SchedulerServicer):
    def __init__(self, *, state: SchedulerState, on_change: Callable[[], None]) -> None:
        self.state = state
        self.on_change = on_change

    # ---- binders -----------------------------------------------------------------------
    async def ReportBindingOutcome(
        self, request: scheduler_pb2.ReportBindingOutcomeRequest, context: Any
    ) -> scheduler_pb2.ReportBindingOutcomeResponse:
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
            ):
                accepted += 1
        self.on_change()
        return scheduler_pb2.ReportBindingOutcomeResponse(accepted=accepted)

    # ---- pods --------------------------------------------------------------------------
    def _status(self, rec: PodRecord) -> scheduler_pb2.PodStatus:
        st = self.state
        msg = scheduler_pb2.PodStatus(
            pod=wire.pod_ref(rec.pod),
            state=_PHASE_TO_PROTO[rec.phase],
            node=rec.node,
            scheduling_attempts=rec.scheduling_attempts,
            bind_attempts=rec.bind_attempts,
            message=rec.message,
            scheduler_name=rec.pod.scheduler_name,
            priority=rec.pod.priority,
            queue=st.queue.place_of(rec.pod.uid) or "",
            group=rec.pod.group.name if rec.pod.group else "",
        )
        for node, reason in rec.failed_node_reasons.items():
            msg.last_failures.add(node=node, reasons=[reason])
        wall = time.time() - st.clock.now()
        if rec.first_seen:
            wire.timestamp_from_float(rec.first_seen + wall, msg.first_seen)
        if rec.last_attempt:
            wire.timestamp_from_float(rec.last_attempt + wall, msg.last_attempt)
        return msg

    async def GetPod(
        self, request: scheduler_pb2.GetPodRequest, context: Any
    ) -> scheduler_pb2.PodStatus:
        if not request.namespace or not request.name:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, "namespace and name are required")
        rec = self.state.find(request.namespace, request.name)
        if rec is None:
            await context.abort(
                grpc.StatusCode.NOT_FOUND,
                f"pod {request.namespace}/{request.name} is not tracked by this scheduler",
            )
        assert rec is not None
        return self._status(rec)

    async def ListPods(
        self, request: scheduler_pb2.ListPodsRequest, context: Any
    ) -> scheduler_pb2.ListPodsResponse:
        try:
            size = _page_size(request.page_size)
            offset = _page_offset(request.page_token)
        except ValueError as exc:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(exc))
            raise
        records = sorted(
            (
                r
                for r in self.state.iter_records()
                if (not request.namespace or r.pod.namespace == request.namespace)
                and (not request.state or _PHASE_TO_PROTO[r.phase] == request.state)
            ),
            key=lambda r: (r.pod.namespace, r.pod.name),
        )
        page = records[offset : offset + size]
        more = offset + size < len(records)
        return scheduler_pb2.ListPodsResponse(
            pods=[self._status(r) for r in page],
            next_page_token=_page_token(offset + size) if more else "",
        )

    # ---- nodes -------------------------------------------------------------------------
    async def ListNodes(
        self, request: scheduler_pb2.ListNodesRequest, context: Any
    ) -> scheduler_pb2.ListNodesResponse:
        try:
            size = _page_size(request.page_size)
            offset = _page_offset(request.page_token)
        except ValueError as exc:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(exc))
            raise
        table = self.state.cache.table
        names = sorted(n for n in table.names if n.startswith(request.name_prefix))
        out = scheduler_pb2.ListNodesResponse()
        for name in names[offset : offset + size]:
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
                req = int(table.requested[row, col])
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
        if offset + size < len(names):
            out.next_page_token = _page_token(offset + size)
        return out

    # ---- explain -----------------------------------------------------------------------
    async def Explain(
        self, request: scheduler_pb2.ExplainRequest, context: Any
    ) -> scheduler_pb2.ExplainResponse:
        if not request.namespace or not request.name:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, "namespace and name are required")
        rec = self.state.find(request.namespace, request.name)
        if rec is None:
            await context.abort(
                grpc.StatusCode.NOT_FOUND,
                f"pod {request.namespace}/{request.name} is not tracked by this scheduler",
            )
        assert rec is not None
        return self.explain_pod(rec.pod, phase=rec.phase, include_nodes=request.include_nodes)

    def explain_pod(
        self, pod: models.Pod, *, phase: Phase, include_nodes: bool
    ) -> scheduler_pb2.ExplainResponse:
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
        try:
            pods = self._simulate_pods(request)
        except ValueError as exc:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(exc))
            raise
        top = request.top_nodes or 3
        if top < 0 or top > 50:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, "top_nodes must be 0..50")
        algo = self.state.algo
        results = algo.simulate(pods, gang=request.gang)
        out = scheduler_pb2.SimulateResponse(all_placed=all(r.bind for _, r, _ in results))
        for pod, result, scored in results:
            placement = out.placements.add(pod=wire.pod_ref(pod))
            if result.bind is not None:
                placement.node = result.bind.node
                placement.summary = f"fits on {result.bind.feasible_nodes}/{algo.table.n} nodes"
            else:
                wait = result.wait or (result.preempt.wait if result.preempt else None)
                placement.summary = wait.summary if wait else ""
                explained = self.explain_pod(pod, phase=Phase.WAITING, include_nodes=False)
                placement.plugins.extend(explained.plugins)
            if scored is not None and scored.rows.size:
                order = np.argsort(-scored.total, kind="stable")[:top]
                for i in order.tolist():
                    ns = placement.top_nodes.add(
                        node=algo.table.names[int(scored.rows[i])], total=float(scored.total[i])
                    )
                    for plugin, arr in scored.per_plugin.items():
                        ns.plugin_scores[plugin] = float(arr[i])
        return out

    def _simulate_pods(self, request: scheduler_pb2.SimulateRequest) -> list[models.Pod]:
        pods: list[models.Pod] = []
        for i, msg in enumerate(request.pods):
            pod = wire.pod_from_proto(msg)
            pods.append(self._sim_identity(pod, i))
        for i, text in enumerate(request.manifests):
            try:
                docs = [d for d in yaml.safe_load_all(text) if d is not None]
            except yaml.YAMLError as exc:
                raise ValueError(f"manifests[{i}]: not valid YAML or JSON: {exc}") from exc
            for doc in docs:
                items = (
                    doc.get("items", [])
                    if isinstance(doc, dict) and doc.get("kind") == "List"
                    else [doc]
                )
                for j, item in enumerate(items):
                    if not isinstance(item, dict) or item.get("kind", "Pod") != "Pod":
                        raise ValueError(f"manifests[{i}] item {j}: expected a Pod")
                    meta = item.setdefault("metadata", {})
                    if not isinstance(meta, dict):
                        raise ValueError(f"manifests[{i}] item {j}: metadata must be a mapping")
                    meta.setdefault("namespace", "default")
                    meta.setdefault("name", f"simulated-{len(pods)}")
                    spec = item.setdefault("spec", {})
                    if isinstance(spec, dict):
                        spec.setdefault("schedulerName", next(iter(self.state.algo.profiles)))
                    try:
                        pod = convert.pod_from_k8s(item, strict=True)
                    except ValueError as exc:
                        raise ValueError(f"manifests[{i}]: {exc}") from exc
                    pods.append(self._sim_identity(pod, len(pods)))
        if not pods:
            raise ValueError("give at least one pod (pods or manifests)")
        if len(pods) > MAX_SIMULATE_PODS:
            raise ValueError(f"at most {MAX_SIMULATE_PODS} pods per Simulate call")
        for pod in pods:
            if pod.invalid_reason:
                raise ValueError(f"pod {pod.key}: {pod.invalid_reason}")
            if pod.scheduler_name not in self.state.algo.profiles:
                raise ValueError(
                    f"pod {pod.key}: spec.schedulerName {pod.scheduler_name!r} is not a profile "
                    f"of this scheduler ({', '.join(sorted(self.state.algo.profiles))})"
                )
        return pods

    @staticmethod
    def _sim_identity(pod: models.Pod, index: int) -> models.Pod:
        return dataclasses.replace(pod, uid=f"simulate-{index}-{pod.uid or pod.name}", node_name="")

    # ---- decisions stream ----------------------------------------------------------------
    async def WatchDecisions(
        self, request: scheduler_pb2.WatchDecisionsRequest, context: Any
    ) -> AsyncIterator[scheduler_pb2.Decision]:
        queue: asyncio.Queue[DecisionEvent] = asyncio.Queue(maxsize=10000)

        def listener(event: DecisionEvent) -> None:
            if request.namespace and event.pod.namespace != request.namespace:
                return
            if not request.include_outcomes and event.kind not in ("SCHEDULED", "UNSCHEDULABLE"):
                return
            if queue.full():
                queue.get_nowait()  # a slow watcher loses the oldest, never blocks us
            queue.put_nowait(event)

        self.state.listeners.append(listener)
        wall = time.time() - self.state.clock.now()
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
                wire.timestamp_from_float(event.at + wall, msg.at)
                yield msg
        finally:
            self.state.listeners.remove(listener)
