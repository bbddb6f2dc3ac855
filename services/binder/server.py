"""The ``splitsched.v1.Binder`` gRPC servicer: validates requests and hands them to the pool.

Registered by ``services.binder.main`` on the runtime's gRPC server. Every RPC answers at
once: a refused request gets ``accepted=false`` and a reason (never a gRPC error), the work
itself happens in ``services.binder.worker.BindingPool``.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from typing import Any

import grpc

from services.binder.jobs import BindJob, ClaimWrite, PodKey, PreemptJob, VolumeBinding
from services.binder.worker import BindingPool
from splitsched.runtime import security, tracing
from splitsched.v1 import binder_pb2, binder_pb2_grpc
from splitsched.wire_devices import allocation_from_proto

DEFAULT_MAX_ATTEMPTS = 5
MAX_ATTEMPTS_CAP = 20
#: Victims one PreemptRequest may name.
MAX_VICTIMS = 1000
#: Volume bindings one BindRequest may carry (a pod has at most a few dozen claims).
MAX_VOLUME_BINDINGS = 256
#: Claim writes one BindRequest may carry (kube allows a pod 128 resourceClaims).
MAX_CLAIM_WRITES = 128

Context = grpc.aio.ServicerContext[Any, Any]

# The API's own rules for a namespace (DNS label) and a pod name (DNS subdomain). The names
# go into request paths: "a/b" or ".." would address another URL than the pod's.
_DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
_DNS_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")


def name_problems(prefix: str, namespace: str, name: str) -> list[str]:
    """Why `namespace`/`name` cannot name a pod ("<prefix>namespace: ..."), if they cannot."""
    out = []
    if namespace and not (len(namespace) <= 63 and _DNS_LABEL.fullmatch(namespace)):
        out.append(f"{prefix}namespace {namespace[:80]!r} is not a valid namespace name")
    if name and not (len(name) <= 253 and _DNS_SUBDOMAIN.fullmatch(name)):
        out.append(f"{prefix}name {name[:80]!r} is not a valid pod name")
    return out


def _subdomain(name: str) -> bool:
    return len(name) <= 253 and _DNS_SUBDOMAIN.fullmatch(name) is not None


def volume_problem(request: binder_pb2.BindRequest) -> str | None:
    """Why ``request.volume_bindings`` cannot be carried out: a claim is named by a valid
    name in the pod's namespace (empty means it), at most once; a PV by a valid name, at
    most once. The names go into request paths."""
    if len(request.volume_bindings) > MAX_VOLUME_BINDINGS:
        count = len(request.volume_bindings)
        return f"{count} volume_bindings (at most {MAX_VOLUME_BINDINGS})"
    claims: set[str] = set()
    pvs: set[str] = set()
    for i, binding in enumerate(request.volume_bindings):
        where = f"volume_bindings[{i}]"
        if binding.claim_namespace not in ("", request.pod.namespace):
            return f"{where}.claim_namespace {binding.claim_namespace[:80]!r} is not the pod's"
        if not _subdomain(binding.claim_name):
            return f"{where}.claim_name {binding.claim_name[:80]!r} is not a valid claim name"
        if binding.pv_name and not _subdomain(binding.pv_name):
            return f"{where}.pv_name {binding.pv_name[:80]!r} is not a valid PV name"
        if binding.claim_name in claims or (binding.pv_name and binding.pv_name in pvs):
            return f"{where} names a claim or PV an earlier entry names"
        claims.add(binding.claim_name)
        pvs.add(binding.pv_name)
    return None


def claim_write_problem(request: binder_pb2.BindRequest) -> str | None:
    """Why ``request.claim_writes`` cannot be carried out: a ResourceClaim is named by a
    valid name in the pod's namespace (empty means it) with its uid, at most once. The
    names go into request paths."""
    if len(request.claim_writes) > MAX_CLAIM_WRITES:
        return f"{len(request.claim_writes)} claim_writes (at most {MAX_CLAIM_WRITES})"
    seen: set[str] = set()
    for i, write in enumerate(request.claim_writes):
        where = f"claim_writes[{i}]"
        if write.claim_namespace not in ("", request.pod.namespace):
            return f"{where}.claim_namespace {write.claim_namespace[:80]!r} is not the pod's"
        if not _subdomain(write.claim_name):
            return f"{where}.claim_name {write.claim_name[:80]!r} is not a valid claim name"
        if not write.claim_uid:
            return f"{where}.claim_uid is empty"
        if write.claim_name in seen:
            return f"{where} names a claim an earlier entry names"
        seen.add(write.claim_name)
    return None


def deallocation_problem(request: binder_pb2.UnschedulableReport) -> str | None:
    """Why ``request.deallocate_claims`` cannot be carried out: each names a claim of the
    pod's namespace (empty means it) by a valid name, with its uid."""
    if len(request.deallocate_claims) > MAX_CLAIM_WRITES:
        return f"{len(request.deallocate_claims)} deallocate_claims (at most {MAX_CLAIM_WRITES})"
    for i, claim in enumerate(request.deallocate_claims):
        where = f"deallocate_claims[{i}]"
        if claim.namespace not in ("", request.pod.namespace):
            return f"{where}.namespace {claim.namespace[:80]!r} is not the pod's"
        if not _subdomain(claim.name):
            return f"{where}.name {claim.name[:80]!r} is not a valid claim name"
        if not claim.uid:
            return f"{where}.uid is empty"
    return None


def node_problem(node: str) -> str | None:
    """Why `node` cannot name a Node (it goes into the path of the binder's node read)."""
    if node and not (len(node) <= 253 and _DNS_SUBDOMAIN.fullmatch(node)):
        return f"invalid request: node {node[:80]!r} is not a valid node name"
    return None


def caller_identity(context: Context) -> str:
    """Who is calling, for the log line of a refusal: the identities of the client's
    verified certificate, else its address."""
    ids = security.peer_identities(context.auth_context())
    if ids:
        return ", ".join(sorted(ids))
    return f"{context.peer()} (no client certificate)"


def validate_bind(request: binder_pb2.BindRequest, *, now: float) -> str | None:
    """Why a BindRequest cannot be accepted, or None when it is well formed."""
    if not request.decision_id:
        return "invalid request: decision_id is empty"
    missing = [
        field
        for field, value in (
            ("pod.namespace", request.pod.namespace),
            ("pod.name", request.pod.name),
            ("pod.uid", request.pod.uid),
            ("node", request.node),
        )
        if not value
    ]
    if missing:
        return f"invalid request: {', '.join(missing)} empty"
    bad = name_problems("pod.", request.pod.namespace, request.pod.name)
    if bad:
        return f"invalid request: {'; '.join(bad)}"
    if node_problem(request.node):
        return node_problem(request.node)
    volumes = volume_problem(request) if request.volume_bindings else None
    if volumes is not None:
        return f"invalid request: {volumes}"
    devices = claim_write_problem(request) if request.claim_writes else None
    if devices is not None:
        return f"invalid request: {devices}"
    if not request.HasField("deadline"):
        return "invalid request: deadline is required"
    deadline = request.deadline.seconds + request.deadline.nanos / 1e9
    if deadline <= now:
        return f"invalid request: deadline is {now - deadline:.3f}s in the past"
    return None


def job_from_request(request: binder_pb2.BindRequest, *, caller: str = "") -> BindJob:
    """The pool's job for a validated request (max_attempts defaulted and capped)."""
    attempts = request.max_attempts or DEFAULT_MAX_ATTEMPTS
    return BindJob(
        decision_id=request.decision_id,
        namespace=request.pod.namespace,
        name=request.pod.name,
        uid=request.pod.uid,
        node=request.node,
        deadline=request.deadline.seconds + request.deadline.nanos / 1e9,
        max_attempts=min(attempts, MAX_ATTEMPTS_CAP),
        node_version=request.node_version,
        profile=request.profile,
        trace_context=dict(request.trace_context),
        caller=caller,
        volumes=tuple(
            VolumeBinding(request.pod.namespace, v.claim_name, v.pv_name)
            for v in request.volume_bindings
        ),
        claim_writes=tuple(
            ClaimWrite(
                request.pod.namespace,
                w.claim_name,
                w.claim_uid,
                allocation_from_proto(w.allocation) if w.HasField("allocation") else None,
            )
            for w in request.claim_writes
        ),
    )


def validate_preempt(request: binder_pb2.PreemptRequest) -> str | None:
    """Why a PreemptRequest cannot be accepted, or None when it is well formed."""
    if not request.decision_id:
        return "invalid request: decision_id is empty"
    pod = request.preemptor
    missing = [
        field
        for field, value in (
            ("preemptor.namespace", pod.namespace),
            ("preemptor.name", pod.name),
            ("preemptor.uid", pod.uid),
            ("node", request.node),
        )
        if not value
    ]
    if missing:
        return f"invalid request: {', '.join(missing)} empty"
    bad = name_problems("preemptor.", pod.namespace, pod.name)
    if bad:
        return f"invalid request: {'; '.join(bad)}"
    if node_problem(request.node):
        return node_problem(request.node)
    if len(request.victims) > MAX_VICTIMS:
        return f"invalid request: {len(request.victims)} victims (at most {MAX_VICTIMS})"
    seen: set[tuple[str, str]] = {(pod.namespace, pod.name)}
    for i, victim in enumerate(request.victims):
        missing = [
            f"victims[{i}].{attr}"
            for attr in ("namespace", "name", "uid")
            if not getattr(victim, attr)
        ]
        if missing:
            return f"invalid request: {', '.join(missing)} empty"
        bad = name_problems(f"victims[{i}].", victim.namespace, victim.name)
        if bad:
            return f"invalid request: {'; '.join(bad)}"
        key = (victim.namespace, victim.name)
        if key in seen:
            what = "the preemptor" if key == (pod.namespace, pod.name) else "listed twice"
            return f"invalid request: victims[{i}] ({victim.namespace}/{victim.name}) is {what}"
        seen.add(key)
    return None


def preempt_job_from_request(
    request: binder_pb2.PreemptRequest, *, deadline: float, caller: str = ""
) -> PreemptJob:
    """The pool's job for a validated request."""
    pod = request.preemptor
    return PreemptJob(
        decision_id=request.decision_id,
        preemptor=PodKey(namespace=pod.namespace, name=pod.name, uid=pod.uid),
        node=request.node,
        victims=tuple(
            PodKey(namespace=v.namespace, name=v.name, uid=v.uid) for v in request.victims
        ),
        deadline=deadline,
        message=request.message,
        trace_context=dict(request.trace_context),
        caller=caller,
    )


class BinderServicer(binder_pb2_grpc.BinderServicer):
    """Bind, BindBatch, ReportUnschedulable and Preempt."""

    def __init__(self, pool: BindingPool, *, clock: Callable[[], float] = time.time) -> None:
        self._pool = pool
        self._clock = clock

    def _bind_one(self, request: binder_pb2.BindRequest, caller: str) -> binder_pb2.BindResponse:
        reason = validate_bind(request, now=self._clock())
        if reason is None:
            reason = self._pool.submit(job_from_request(request, caller=caller))
        return binder_pb2.BindResponse(
            decision_id=request.decision_id, accepted=reason is None, reason=reason or ""
        )

    async def Bind(
        self, request: binder_pb2.BindRequest, context: Context
    ) -> binder_pb2.BindResponse:
        if tracing.enabled() and not request.trace_context:
            request.trace_context.update(tracing.from_metadata(context.invocation_metadata()))
        return self._bind_one(request, caller_identity(context))

    async def BindBatch(
        self, request: binder_pb2.BindBatchRequest, context: Context
    ) -> binder_pb2.BindBatchResponse:
        if tracing.enabled():
            # A request without its own context continues the caller's (gRPC metadata).
            carrier = tracing.from_metadata(context.invocation_metadata())
            for r in request.requests if carrier else ():
                if not r.trace_context:
                    r.trace_context.update(carrier)
        caller = caller_identity(context)
        responses = [self._bind_one(r, caller) for r in request.requests]
        return binder_pb2.BindBatchResponse(responses=responses)

    async def ReportUnschedulable(
        self, request: binder_pb2.UnschedulableReport, context: Context
    ) -> binder_pb2.BinderAck:
        if not request.pod.namespace or not request.pod.name:
            return binder_pb2.BinderAck(
                accepted=False, reason="invalid request: pod.namespace and pod.name are required"
            )
        bad = name_problems("pod.", request.pod.namespace, request.pod.name)
        if bad:
            return binder_pb2.BinderAck(accepted=False, reason=f"invalid request: {'; '.join(bad)}")
        bad_claims = deallocation_problem(request)
        if bad_claims:
            return binder_pb2.BinderAck(accepted=False, reason=f"invalid request: {bad_claims}")
        reason = self._pool.report_unschedulable(
            namespace=request.pod.namespace,
            name=request.pod.name,
            uid=request.pod.uid,
            message=request.message,
            reason=request.reason,
            profile=request.profile,
            caller=caller_identity(context),
            deallocate=tuple(
                ClaimWrite(c.namespace or request.pod.namespace, c.name, c.uid)
                for c in request.deallocate_claims
            ),
        )
        return binder_pb2.BinderAck(accepted=reason is None, reason=reason or "")

    async def Preempt(
        self, request: binder_pb2.PreemptRequest, context: Context
    ) -> binder_pb2.BinderAck:
        reason = validate_preempt(request)
        if reason is None:
            job = preempt_job_from_request(
                request, deadline=self._pool.preemption_deadline(),
                caller=caller_identity(context),
            )  # fmt: skip
            reason = self._pool.submit_preemption(job)
        return binder_pb2.BinderAck(accepted=reason is None, reason=reason or "")
