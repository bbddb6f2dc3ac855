"""The Scheduler API's answers: the state's records and the core's results as protos.

Each function builds one message (or one part of a response) from models, so the
servicer (`services.scheduler.api`) only checks requests, reads the view and sends. Field
meanings are in `proto/splitsched/v1/scheduler.proto`.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence

import numpy as np

from services.scheduler.attempt_records import StoredAttempt
from services.scheduler.state import DecisionEvent, EventKind, Phase, PodRecord
from splitsched import wire
from splitsched.core import models, results, whatif
from splitsched.core.nodetable import NodeTable
from splitsched.v1 import scheduler_pb2

NODE_CLASS_LABELS = ("topology.kubernetes.io/zone", "node.kubernetes.io/instance-type")
GANG_NOT_PLACED = whatif.GANG_NOT_PLACED

PHASE_TO_PROTO = {
    Phase.GATED: scheduler_pb2.GATED,
    Phase.WAITING: scheduler_pb2.WAITING,
    Phase.PREEMPTING: scheduler_pb2.PREEMPTING,
    Phase.BINDING: scheduler_pb2.BINDING,
    Phase.BOUND: scheduler_pb2.BOUND,
}
_DECISION_KIND = {kind: scheduler_pb2.Decision.Kind.Value(kind.value) for kind in EventKind}


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


# ---- pods and nodes -----------------------------------------------------------------------
def pod_status(rec: PodRecord, *, queue: str, wall: float) -> scheduler_pb2.PodStatus:
    """A pod's record; `queue` is where the queue holds it, `wall` turns the state's clock
    readings into wall-clock seconds."""
    msg = scheduler_pb2.PodStatus(
        pod=wire.pod_ref(rec.pod),
        state=PHASE_TO_PROTO[rec.phase],
        node=rec.node,
        nominated_node=rec.nominated_node if rec.phase is Phase.PREEMPTING else "",
        scheduling_attempts=rec.scheduling_attempts,
        bind_attempts=rec.bind_attempts,
        message=rec.message,
        scheduler_name=rec.pod.scheduler_name,
        priority=rec.pod.priority,
        queue=queue,
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


def add_node_view(
    out: scheduler_pb2.ListNodesResponse,
    table: NodeTable,
    name: str,
    *,
    version: int,
    include_pods: bool,
) -> None:
    """One node of the table, its use of every resource and (if asked) its pods."""
    row = table.row_of[name]
    node = table.nodes[row]
    view = out.nodes.add(
        name=name,
        pod_count=len(table.pods[row]),
        unschedulable=node.unschedulable,
        version=version,
    )
    requested = table.requested
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
    if include_pods:
        for pod in table.pods[row].values():
            view.pods.append(wire.pod_ref(pod))


# ---- explain ------------------------------------------------------------------------------
def not_pending(rec: PodRecord, total_nodes: int) -> scheduler_pb2.ExplainResponse:
    """Explain for a pod not pending any more, already making room, or not to be tried
    yet (gated): nothing to run the filters for (the pod is counted on its node, or
    kube-scheduler would not run them either, so they would only confuse)."""
    summary = {
        Phase.GATED: rec.message,
        Phase.BOUND: f"not pending: bound to node {rec.node}",
        Phase.BINDING: f"not pending: being bound to node {rec.node}",
        Phase.PREEMPTING: f"preempting on node {rec.nominated_node}: {rec.message}",
    }[rec.phase]
    return scheduler_pb2.ExplainResponse(
        pod=wire.pod_ref(rec.pod),
        state=PHASE_TO_PROTO[rec.phase],
        summary=summary,
        total_nodes=total_nodes,
        preemption_might_help=rec.phase is Phase.PREEMPTING,
    )


def explain_response(
    exp: results.Explanation, *, phase: Phase, table: NodeTable, include_nodes: bool
) -> scheduler_pb2.ExplainResponse:
    """Every filter's verdict, grouped by plugin, reason and node class; per node too
    with `include_nodes`."""
    out = scheduler_pb2.ExplainResponse(
        pod=wire.pod_ref(exp.pod),
        state=PHASE_TO_PROTO[phase],
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


# ---- simulate -----------------------------------------------------------------------------
def simulate_response(
    placements: list[whatif.Placement],
    explained: Mapping[int, scheduler_pb2.ExplainResponse],
    *,
    gang: bool,
    top: int,
    table: NodeTable,
) -> scheduler_pb2.SimulateResponse:
    """Where each pod would go (or why not, with the verdicts of `explained`), its `top`
    best nodes, and for a `gang` with an unplaced pod, the first one blocking it."""
    unplaced = [i for i, p in enumerate(placements) if p.result.bind is None]
    blocking = placements[unplaced[0]].pod if gang and unplaced else None
    out = scheduler_pb2.SimulateResponse(all_placed=not unplaced)
    names = np.asarray(table.names, dtype=np.str_)
    for i, (pod, result, scored) in enumerate(placements):
        placement = out.placements.add(pod=wire.pod_ref(pod))
        if result.bind is None:
            placement.summary = why_not(result)
            if i in explained:
                placement.plugins.extend(explained[i].plugins)
        elif blocking is not None:
            placement.summary = f"{GANG_NOT_PLACED}: {blocking.key} fits nowhere"
        else:
            placement.node = result.bind.node
            placement.summary = f"fits on {result.bind.feasible_nodes}/{table.n} nodes"
        if scored is not None and scored.rows.size:
            for k in whatif.best_nodes(scored, names, chosen=placement.node, top=top):
                ns = placement.top_nodes.add(
                    node=table.names[int(scored.rows[k])], total=float(scored.total[k])
                )
                for plugin, arr in scored.per_plugin.items():
                    ns.plugin_scores[plugin] = float(arr[k])
    if blocking is not None:
        out.blocking_pod.CopyFrom(wire.pod_ref(blocking))
    return out


def why_not(result: results.ScheduleResult) -> str:
    if result.preempt is not None:
        p = result.preempt
        return (
            f"{p.wait.summary} Preempting {len(p.victims)} pod(s) on {p.node} would make room: "
            + ", ".join(v.key for v in p.victims)
        )
    return result.wait.summary if result.wait is not None else ""


# ---- the decision stream --------------------------------------------------------------------
def decision_message(event: DecisionEvent, *, trace_id: str, wall: float) -> scheduler_pb2.Decision:
    msg = scheduler_pb2.Decision(
        decision_id=event.decision_id,
        pod=wire.pod_ref(event.pod),
        kind=_DECISION_KIND.get(event.kind, scheduler_pb2.Decision.KIND_UNSPECIFIED),
        node=event.node,
        message=event.message,
        binder_id=event.binder_id,
    )
    msg.trace_id = trace_id
    wire.timestamp_from_float(event.at + wall, msg.at)
    return msg


# ---- a pod's last attempts (GetPodTrace) ----------------------------------------------------
def pod_trace(
    namespace: str, name: str, attempts: Sequence[StoredAttempt]
) -> scheduler_pb2.PodTrace:
    """The attempts `services.scheduler.attempts` remembers of one pod, oldest first."""
    msg = scheduler_pb2.PodTrace()
    msg.pod.namespace, msg.pod.name = namespace, name
    for attempt in attempts:
        out = msg.attempts.add(trace_id=attempt.trace_id, exported=attempt.exported)
        for span in attempt.spans:
            s = out.spans.add(
                name=span.name,
                span_id=span.span_id,
                parent_span_id=span.parent_span_id,
                duration_ns=max(span.end_ns - span.start_ns, 0),
                error=span.error,
                status_message=span.status_message,
            )
            s.start.FromNanoseconds(span.start_ns)
            s.attributes.update(dict(span.attributes))
            if span.name == "schedule_pod" and "k8s.pod.uid" in s.attributes:
                msg.pod.uid = s.attributes["k8s.pod.uid"]
    return msg
