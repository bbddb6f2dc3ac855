"""Every RPC of the contract, fuzzed: hypothesis-built requests and malformed wire bytes
sent to the real servicers on real gRPC servers, in process.

The scheduler API runs over a `SchedulerState` with nodes, bound, binding and pending
pods (fake clock); the binder over its real pool against the fake Kubernetes API of
``tests/support/fakes/kube.py``; the watcher over a synced hub. The RPC list comes from the protos'
descriptors, so a new RPC is fuzzed without touching this file. Every call must end OK or
with a status a client can act on (never UNKNOWN or INTERNAL, which is what an uncaught
exception becomes), an INVALID_ARGUMENT must name a request field, the scheduler's view
must be exactly as before (reads, Simulate, reports for unknown decisions), and the
servers must still answer health checks. Also: requests over the 8 MiB limit, and calls
whose deadline has passed.

Examples are few per RPC (the file runs in well under a minute); under CI=true hypothesis
is derandomized, so CI is reproducible while local runs explore new inputs.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import threading
import time
from collections.abc import AsyncIterator, Callable, Coroutine, Iterator
from dataclasses import dataclass
from typing import Any, TypeVar

import grpc
import pytest
import yaml
from google.protobuf import message as _message
from google.protobuf import message_factory, timestamp_pb2
from grpc_health.v1 import health_pb2, health_pb2_grpc
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from services.binder.server import BinderServicer
from services.scheduler.state import SchedulerState
from services.watcher import ring
from splitsched import wire
from splitsched.core import models
from splitsched.core.clock import FakeClock
from splitsched.runtime import grpcsrv
from splitsched.v1 import binder_pb2, binder_pb2_grpc, scheduler_pb2, types_pb2, watcher_pb2
from tests.support import builders, protofuzz, watcher
from tests.support.binder import Harness, harness
from tests.support.builders import node_entry, pod_entry
from tests.support.fakes.kube import FakePod
from tests.support.scheduler import schedule_all, serving

T = TypeVar("T")
Code = grpc.StatusCode

#: What a client can act on. UNAVAILABLE: not synced / standby; FAILED_PRECONDITION: not
#: the leader; PERMISSION_DENIED/UNAUTHENTICATED: identity checks on restricted RPCs.
ALLOWED = {
    Code.OK,
    Code.INVALID_ARGUMENT,
    Code.NOT_FOUND,
    Code.FAILED_PRECONDITION,
    Code.RESOURCE_EXHAUSTED,
    Code.OUT_OF_RANGE,
    Code.UNAVAILABLE,
    Code.PERMISSION_DENIED,
    Code.UNAUTHENTICATED,
}
# More for a deep local run: SPLITSCHED_FUZZ_EXAMPLES=2000 pytest tests/service/v1/test_grpc_fuzz.py
EXAMPLES = int(os.environ.get("SPLITSCHED_FUZZ_EXAMPLES", "60"))
CI = os.environ.get("CI") == "true"
FUZZ = settings(
    max_examples=EXAMPLES,
    deadline=None,
    derandomize=CI,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    database=None if CI else settings().database,
)
#: How long a server-streaming call is read: its first message, or proof it has not failed.
STREAM_PEEK = 0.05
MAX_MESSAGE = grpcsrv.DEFAULT_MAX_MESSAGE_BYTES


@dataclass(frozen=True)
class Rpc:
    service: str
    name: str
    request: type[_message.Message]
    response: type[_message.Message]
    streaming: bool

    @property
    def path(self) -> str:
        return f"/{self.service}/{self.name}"

    def __str__(self) -> str:
        return f"{self.service.rsplit('.', 1)[-1]}.{self.name}"


def _rpcs() -> list[Rpc]:
    out = []
    for module in (scheduler_pb2, binder_pb2, watcher_pb2):
        for service in module.DESCRIPTOR.services_by_name.values():
            for m in service.methods:
                out.append(
                    Rpc(
                        service=service.full_name,
                        name=m.name,
                        request=message_factory.GetMessageClass(m.input_type),
                        response=message_factory.GetMessageClass(m.output_type),
                        streaming=m.server_streaming,
                    )
                )
    return out


RPCS = _rpcs()


# ---- the servers, on a loop in a background thread ----------------------------------------


class LoopThread:
    """An event loop in a daemon thread: the servers live there; hypothesis examples (sync)
    submit coroutines to it."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()

    def run(self, coro: Coroutine[Any, Any, T], *, timeout: float = 60.0) -> T:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    def close(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)
        self.loop.close()


@dataclass
class Env:
    loop: LoopThread
    state: SchedulerState
    hub: ring.ClusterHub
    binder: Harness
    channels: dict[str, grpc.aio.Channel]  # by service full name
    targets: dict[str, str]  # by service full name
    decision_ids: frozenset[str]
    known_names: tuple[tuple[str, str], ...]  # (namespace, name) of tracked pods

    def channel(self, rpc: Rpc) -> grpc.aio.Channel:
        return self.channels[rpc.service]


def scheduler_state() -> SchedulerState:
    """Nodes with bound, binding (decision pending) and unschedulable pods."""
    gpu_only = models.Taint("gpu", "1", "NoSchedule")
    state = builders.scheduler_state(
        FakeClock(1000.0),
        nodes=[
            builders.node("a", cpu=2000, memory=8 * builders.GI, zone="z1"),
            builders.node("b", cpu=2000, memory=8 * builders.GI, taints=[gpu_only]),
        ],
    )
    state.apply_pod("ADDED", builders.splitsched_pod("web", cpu=500))
    state.apply_pod("ADDED", builders.splitsched_pod("db", cpu=500, namespace="data"))
    state.apply_pod("ADDED", builders.splitsched_pod("huge", cpu=50_000))
    schedule_all(state)
    state.apply_pod("ADDED", builders.splitsched_pod("late", cpu=100))
    return state


@contextlib.asynccontextmanager
async def watcher_serving() -> AsyncIterator[tuple[ring.ClusterHub, int]]:
    hub = ring.ClusterHub(ring_size=100, first_sequence=1)
    hub.upsert(node_entry("n1", "10"))
    hub.upsert(pod_entry("p1", "11", node="n1"))
    hub.upsert(pod_entry("p2", "12"))
    hub.mark_synced()
    async with watcher.serving(hub) as port:
        yield hub, port


@pytest.fixture(scope="module")
def env() -> Iterator[Env]:
    loop = LoopThread()
    stack = contextlib.AsyncExitStack()
    state = scheduler_state()

    async def start() -> Env:
        sched = await stack.enter_async_context(serving(state))
        binder = await stack.enter_async_context(harness())
        hub, watcher_port = await stack.enter_async_context(watcher_serving())
        # A second server over the harness's pool: the same servicer, a target we know.
        binder_srv = await grpcsrv.serve(
            listen="127.0.0.1:0",
            servicers=[(binder_pb2_grpc.add_BinderServicer_to_server, BinderServicer(binder.pool))],
            service_names=["splitsched.v1.Binder"],
        )
        stack.push_async_callback(binder_srv.stop, 0)
        targets = {
            "splitsched.v1.Scheduler": sched.target,
            "splitsched.v1.Binder": f"127.0.0.1:{binder_srv.port}",
            "splitsched.v1.Watcher": f"127.0.0.1:{watcher_port}",
        }
        channels = {}
        for service, target in targets.items():
            channels[service] = await stack.enter_async_context(grpcsrv.channel(target))
        return Env(
            loop=loop,
            state=state,
            hub=hub,
            binder=binder,
            channels=channels,
            targets=targets,
            decision_ids=frozenset(state.decisions),
            known_names=tuple((r.pod.namespace, r.pod.name) for r in state.iter_records()),
        )

    try:
        yield loop.run(start())
    finally:
        loop.run(stack.aclose())
        loop.close()


# ---- requests --------------------------------------------------------------------------------

RESOURCES = ("cpu", "memory", "pods", "ephemeral-storage", "example.com/foo", "nvidia.com/gpu")
QUANTITIES = ("abc", "1e400", "-1", "1e6", "0.0001m", "9Ei", "1Ki", "", "NaN", "1.5", "100m")
NASTY_YAML = (
    "---\n---\n",
    "a: *x",
    "&a [*a, *a]",
    "{",
    "[]",
    "null",
    "- 1",
    "kind: List\nitems: 3",
    "kind: List\nitems: [1, 'x']",
    "a: &a [1]\nb: *a",
    "kind: Pod\nspec: []",
    "kind: Pod\nmetadata: 3\nspec: {containers: 'x'}",
    "!!python/object:os.system ls",
)


def _names(*known: str) -> st.SearchStrategy[str]:
    return st.one_of(st.sampled_from(known), protofuzz.strings())


def json_values() -> st.SearchStrategy[Any]:
    leaves = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(), st.text(max_size=8))
    return st.recursive(
        leaves,
        lambda inner: (
            st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3)
        ),
        max_leaves=8,
    )


def manifests() -> st.SearchStrategy[str]:
    """Pod manifests from plausible to nonsense, as JSON or YAML, and broken documents."""
    quantity = st.one_of(
        st.sampled_from(QUANTITIES), st.integers().map(str), st.floats().map(str), json_values()
    )
    requests = st.dictionaries(_names(*RESOURCES), quantity, max_size=3)
    container = st.fixed_dictionaries(
        {"name": _names("c")},
        optional={
            "resources": st.fixed_dictionaries({"requests": requests | json_values()}),
            "ports": st.lists(
                st.fixed_dictionaries({"hostPort": st.integers() | json_values()}), max_size=2
            ),
        },
    )
    spec = st.fixed_dictionaries(
        {},
        optional={
            "containers": st.lists(container, max_size=3) | json_values(),
            "schedulerName": _names("splitsched"),
            "priority": st.integers() | json_values(),
            "nodeSelector": st.dictionaries(protofuzz.strings(), protofuzz.strings(), max_size=2),
            "affinity": json_values(),
            "tolerations": json_values(),
            "topologySpreadConstraints": json_values(),
        },
    )
    pod = st.fixed_dictionaries(
        {
            "apiVersion": st.just("v1"),
            "kind": st.sampled_from(["Pod", "Pod", "List", "Deployment"]),
        },
        optional={
            "metadata": st.fixed_dictionaries(
                {},
                optional={"name": _names("x"), "namespace": _names("ns"), "labels": json_values()},
            ),
            "spec": spec | json_values(),
            "items": json_values(),
        },
    )
    return st.one_of(
        pod.map(lambda d: json.dumps(d)),
        pod.map(lambda d: yaml.safe_dump(d)),
        st.sampled_from(NASTY_YAML),
        protofuzz.strings(),
    )


def _mostly(sane: st.SearchStrategy[T], wild: st.SearchStrategy[T]) -> st.SearchStrategy[T]:
    """Three draws in four from `sane`: enough valid input to reach the deeper code."""
    return st.one_of(sane, sane, sane, wild)


def _ints(*values: int) -> st.SearchStrategy[int]:
    return _mostly(st.sampled_from(values), protofuzz.integers(-(2**31), 2**31 - 1))


def amounts() -> st.SearchStrategy[dict[str, int]]:
    """Resource requests: mostly plausible, sometimes negative or at int64's ends."""
    amount = _mostly(st.integers(0, 10**7), protofuzz.integers(-(2**63), 2**63 - 1))
    return st.dictionaries(
        _mostly(st.sampled_from(RESOURCES), protofuzz.strings()), amount, max_size=3
    )


def bases(env: Env) -> dict[str, _message.Message]:
    """A valid request per RPC, for `protofuzz.around` to fuzz parts of."""
    ref = types_pb2.PodRef(namespace="ns", name="p1", uid="uid-p1")
    future = wire.timestamp_from_float(time.time() + 600)
    bind = binder_pb2.BindRequest(
        decision_id="d-fuzz", pod=ref, node="node-a", deadline=future, profile="splitsched"
    )
    sim_pod = types_pb2.Pod(
        namespace="ns", name="sim", scheduler_name="splitsched",
        containers=[types_pb2.Container(name="c", requests={"cpu": 100})],
    )  # fmt: skip
    outcome = scheduler_pb2.BindingOutcome(
        decision_id="fuzz-1",
        pod=types_pb2.PodRef(namespace="ns", name="web", uid="uid-unknown"),
        node="a",
        result=scheduler_pb2.BindingOutcome.BOUND,
    )
    return {
        "Scheduler.ReportBindingOutcome": scheduler_pb2.ReportBindingOutcomeRequest(
            outcomes=[outcome], binder_id="b"
        ),
        "Scheduler.GetPod": scheduler_pb2.GetPodRequest(namespace="ns", name="web"),
        "Scheduler.ListPods": scheduler_pb2.ListPodsRequest(page_size=2),
        "Scheduler.Explain": scheduler_pb2.ExplainRequest(
            namespace="ns", name="late", include_nodes=True
        ),
        "Scheduler.Simulate": scheduler_pb2.SimulateRequest(pods=[sim_pod], top_nodes=3),
        "Scheduler.ListNodes": scheduler_pb2.ListNodesRequest(page_size=1, include_pods=True),
        "Scheduler.WatchDecisions": scheduler_pb2.WatchDecisionsRequest(replay=10),
        "Scheduler.GetPodTrace": scheduler_pb2.GetPodTraceRequest(namespace="ns", name="web"),
        "Binder.Bind": bind,
        "Binder.BindBatch": binder_pb2.BindBatchRequest(requests=[bind]),
        "Binder.ReportUnschedulable": binder_pb2.UnschedulableReport(
            pod=ref, message="0/2 nodes are available", reason="Unschedulable"
        ),
        "Binder.Preempt": binder_pb2.PreemptRequest(
            decision_id="p-fuzz",
            preemptor=ref,
            node="node-a",
            victims=[types_pb2.PodRef(namespace="ns", name="p2", uid="uid-p2")],
        ),
        "Watcher.StreamClusterEvents": watcher_pb2.StreamClusterEventsRequest(),
    }


def strategy_for(rpc: Rpc, env: Env) -> st.SearchStrategy[Any]:
    """`rpc`'s requests: drawn from scratch, or its valid base with parts drawn."""
    namespaces = sorted({ns for ns, _ in env.known_names})
    pod_names = sorted({name for _, name in env.known_names})
    any_timestamp = protofuzz.messages(timestamp_pb2.Timestamp)
    future = st.floats(1, 3600).map(lambda s: wire.timestamp_from_float(time.time() + s))
    P = "splitsched.v1."
    ops = ("In", "NotIn", "Exists", "DoesNotExist")
    topology_keys = ("topology.kubernetes.io/zone", "kubernetes.io/hostname")
    overrides: dict[str, st.SearchStrategy[Any]] = {
        f"{P}GetPodRequest.namespace": _names(*namespaces),
        f"{P}GetPodRequest.name": _names(*pod_names),
        f"{P}ExplainRequest.namespace": _names(*namespaces),
        f"{P}ExplainRequest.name": _names(*pod_names),
        f"{P}ListPodsRequest.namespace": _names("", *namespaces),
        f"{P}ListNodesRequest.name_prefix": _names("", "a"),
        f"{P}WatchDecisionsRequest.namespace": _names("", *namespaces),
        # Never a decision the state knows: those reports are supposed to change it.
        f"{P}BindingOutcome.decision_id": protofuzz.strings().filter(
            lambda s: s not in env.decision_ids
        ),
        f"{P}SimulateRequest.manifests": st.lists(manifests(), max_size=2),
        f"{P}SimulateRequest.top_nodes": _ints(0, 3, 50, 51, -1),
        f"{P}Pod.scheduler_name": _names("", "splitsched"),
        f"{P}Pod.deletion_timestamp": any_timestamp,
        f"{P}Container.requests": amounts(),
        f"{P}Pod.overhead": amounts(),
        f"{P}Pod.pod_requests": amounts(),
        f"{P}NodeSelectorRequirement.operator": _names(*ops, "Gt", "Lt"),
        f"{P}LabelSelectorRequirement.operator": _names(*ops),
        f"{P}Toleration.operator": _names("Equal", "Exists"),
        f"{P}Toleration.effect": _names("", "NoSchedule", "NoExecute", "PreferNoSchedule"),
        f"{P}TopologySpreadConstraint.topology_key": _names(*topology_keys),
        f"{P}TopologySpreadConstraint.when_unsatisfiable": _names(
            "DoNotSchedule", "ScheduleAnyway"
        ),
        f"{P}TopologySpreadConstraint.max_skew": _ints(1, 2),
        f"{P}PodAffinityTerm.topology_key": _names(*topology_keys),
        f"{P}PodRef.namespace": _names("ns", "default"),
        f"{P}PodRef.name": _names("p1", "web"),
        f"{P}PodRef.uid": _names("uid-p1"),
        f"{P}BindRequest.node": _names("node-a"),
        f"{P}BindRequest.deadline": _mostly(future, any_timestamp),
        f"{P}PreemptRequest.node": _names("node-a"),
        f"{P}StreamClusterEventsRequest.scheduler_names": st.lists(
            _names("splitsched"), max_size=3
        ),
    }
    base = bases(env)[str(rpc)]
    if rpc.request is scheduler_pb2.SimulateRequest:
        sim_pod = base.pods[0]  # type: ignore[attr-defined]
        overrides[f"{P}SimulateRequest.pods"] = st.lists(
            protofuzz.around(sim_pod, overrides=overrides), min_size=1, max_size=3
        )
    return st.one_of(
        protofuzz.messages(rpc.request, overrides=overrides),
        protofuzz.around(base, overrides=overrides),
    )


# ---- calling -----------------------------------------------------------------------------------


@dataclass
class Answer:
    code: grpc.StatusCode
    details: str
    response: Any  # the response (first streamed message), or None


async def call(
    channel: grpc.aio.Channel,
    rpc: Rpc,
    request: Any,
    *,
    raw: bool = False,
    within: float = 30.0,
    peek: float = STREAM_PEEK,
) -> Answer:
    """One call; a server stream is read for its first message or STREAM_PEEK seconds (it
    never ends on its own), then cancelled."""
    serializer = None if raw else rpc.request.SerializeToString
    try:
        if not rpc.streaming:
            unary = channel.unary_unary(
                rpc.path,
                request_serializer=serializer,
                response_deserializer=rpc.response.FromString,
            )
            return Answer(Code.OK, "", await unary(request, timeout=within))
        stream = channel.unary_stream(
            rpc.path, request_serializer=serializer, response_deserializer=rpc.response.FromString
        )(request, timeout=within)
        try:
            first = await asyncio.wait_for(stream.read(), peek)
        except TimeoutError:
            first = None
        finally:
            stream.cancel()
        return Answer(Code.OK, "", None if first is grpc.aio.EOF else first)
    except grpc.aio.AioRpcError as exc:
        return Answer(exc.code(), exc.details() or "", None)


def describe(answer: Answer) -> str:
    """For hypothesis' statistics: how far the examples got."""
    accepted = getattr(answer.response, "accepted", None)
    return answer.code.name + ("" if accepted is None else f" accepted={bool(accepted)}")


def fingerprint(state: SchedulerState) -> dict[str, object]:
    """The scheduler's view and bookkeeping: what no rejected or read-only call may change."""
    table = state.cache.table
    return {
        "resources": list(table.resource_names),
        "requested": table.requested.tolist(),
        "pods": [sorted(row) for row in table.pods],
        "cache": sorted((c.uid, c.state.value, c.node_name) for c in state.cache),
        "rng": state.algo.rng.getstate(),
        "queue": len(state.queue),
        "records": sorted((r.pod.uid, r.phase.value, r.node) for r in state.iter_records()),
        "decisions": sorted(state.decisions),
        "events": len(state.recent_events),
    }


def field_names(cls: type[_message.Message]) -> set[str]:
    return {f.name for f in cls.DESCRIPTOR.fields}


def check_answer(env: Env, rpc: Rpc, request: Any, answer: Answer) -> None:
    """What every answer to every request must satisfy."""
    assert answer.code in ALLOWED, f"{rpc} answered {answer.code.name}: {answer.details}"
    if answer.code is Code.INVALID_ARGUMENT:
        named = [f for f in field_names(rpc.request) if f in answer.details]
        assert named or answer.details.startswith("request:"), (
            f"{rpc}: INVALID_ARGUMENT names no field: {answer.details}"
        )
    if rpc.service == "splitsched.v1.Binder":
        assert answer.code is Code.OK or answer.details.startswith("request:"), answer
    response = answer.response
    if (
        isinstance(response, binder_pb2.BindResponse | binder_pb2.BinderAck)
        and not response.accepted
    ):
        assert response.reason, f"{rpc}: refused without a reason"
    if (
        isinstance(request, binder_pb2.BindRequest)
        and isinstance(response, binder_pb2.BindResponse)
        and response.accepted
    ):
        assert valid_ref(request.pod), (
            f"{rpc} accepted a pod name the API cannot have: {request.pod}"
        )
    if isinstance(response, scheduler_pb2.SimulateResponse):
        for placement in response.placements:
            assert placement.node in ("a", "b") or placement.summary, placement
    if isinstance(response, scheduler_pb2.ReportBindingOutcomeResponse):
        assert response.accepted == 0, "an unknown decision was accepted"


DNS_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")


def valid_ref(ref: Any) -> bool:
    return bool(
        DNS_LABEL.fullmatch(ref.namespace)
        and len(ref.namespace) <= 63
        and DNS_SUBDOMAIN.fullmatch(ref.name)
        and len(ref.name) <= 253
    )


# ---- the tests ---------------------------------------------------------------------------------


@pytest.mark.parametrize("rpc", RPCS, ids=str)
def test_fuzzed_requests_get_ok_or_a_clear_error_and_change_nothing(env: Env, rpc: Rpc) -> None:
    start = view(env)

    @FUZZ
    @given(request=strategy_for(rpc, env))
    def check(request: Any) -> None:
        before = view(env)
        answer = env.loop.run(call(env.channel(rpc), rpc, request))
        event(describe(answer))
        check_answer(env, rpc, request, answer)
        assert_unchanged(rpc, before, view(env))

    check()
    assert_unchanged(rpc, start, view(env))
    assert_still_serving(env)


@pytest.mark.parametrize("rpc", RPCS, ids=str)
def test_malformed_wire_bytes_get_invalid_argument(env: Env, rpc: Rpc) -> None:
    start = view(env)

    @FUZZ
    @given(data=protofuzz.wire_bytes(rpc.request))
    def check(data: bytes) -> None:
        before = view(env)
        try:
            request: Any = rpc.request.FromString(data)
        except Exception:
            request = None
        # An undecodable request must fail: wait for that, however loaded the machine.
        peek = STREAM_PEEK if request is not None else 20.0
        answer = env.loop.run(call(env.channel(rpc), rpc, data, raw=True, peek=peek))
        if request is None:
            assert answer.code is Code.INVALID_ARGUMENT, f"{rpc}: {answer}"
            assert rpc.request.DESCRIPTOR.full_name in answer.details
        else:
            check_answer(env, rpc, request, answer)
        assert_unchanged(rpc, before, view(env))

    check()
    assert_unchanged(rpc, start, view(env))
    assert_still_serving(env)


async def _async(fn: Callable[[SchedulerState], T], state: SchedulerState) -> T:
    return fn(state)


def view(env: Env) -> dict[str, object]:
    """The scheduler's fingerprint, read on the servers' loop."""
    return env.loop.run(_async(fingerprint, env.state))


def assert_unchanged(rpc: Rpc, before: dict[str, object], after: dict[str, object]) -> None:
    changed = {k: (before[k], after[k]) for k in before if before[k] != after[k]}
    assert not changed, f"{rpc} changed the scheduler's view: {changed}"


def assert_still_serving(env: Env) -> None:
    """Every server answers health checks and a real request as before."""

    async def probe() -> None:
        for channel in env.channels.values():
            health = health_pb2_grpc.HealthStub(channel)
            await health.Check(health_pb2.HealthCheckRequest(), timeout=10)
        sched = env.channels["splitsched.v1.Scheduler"]
        rpc = RPC_BY_NAME["Scheduler.ListNodes"]
        answer = await call(sched, rpc, scheduler_pb2.ListNodesRequest())
        assert answer.code is Code.OK and [n.name for n in answer.response.nodes] == ["a", "b"]

    env.loop.run(probe())


RPC_BY_NAME = {str(r): r for r in RPCS}


def _unknown_field(number: int, size: int) -> bytes:
    """A length-delimited field `number` of `size` bytes, as the wire encodes it."""

    def varint(value: int) -> bytes:
        out = bytearray()
        while True:
            byte, value = value & 0x7F, value >> 7
            out.append(byte | (0x80 if value else 0))
            if not value:
                return bytes(out)

    return varint(number << 3 | 2) + varint(size) + b"x" * size


@pytest.mark.parametrize("rpc", RPCS, ids=str)
def test_request_over_the_message_limit_is_resource_exhausted(env: Env, rpc: Rpc) -> None:
    """A valid request padded past 8 MiB (an unknown field, which decoders would skip) is
    refused by the server's limit before any handler sees it; the server goes on."""
    before = view(env)
    payload = bases(env)[str(rpc)].SerializeToString() + _unknown_field(1000, MAX_MESSAGE)

    async def send() -> Answer:
        # This client would send anything: the server's limit is the one tested.
        options = [("grpc.max_send_message_length", -1)]
        async with grpc.aio.insecure_channel(env.targets[rpc.service], options=options) as ch:
            return await call(ch, rpc, payload, raw=True, peek=20.0)

    answer = env.loop.run(send())
    assert answer.code is Code.RESOURCE_EXHAUSTED, f"{rpc}: {answer}"
    assert_unchanged(rpc, before, view(env))
    assert_still_serving(env)


def test_bind_whose_deadline_passed_before_it_was_handled_does_nothing(env: Env) -> None:
    """The binder's loop is busy while a Bind arrives; by the time its handler could run
    the caller's deadline has passed. The caller sees DEADLINE_EXCEEDED and must be able to
    assume nothing happened: the pod is never bound."""
    kube = env.binder.kube
    kube.pods[("ns", "late-bind")] = FakePod(uid="uid-late-bind")
    request = binder_pb2.BindRequest(
        decision_id="d-late",
        pod=types_pb2.PodRef(namespace="ns", name="late-bind", uid="uid-late-bind"),
        node="node-a",
        deadline=wire.timestamp_from_float(time.time() + 600),
    )
    rpc = RPC_BY_NAME["Binder.Bind"]

    async def send() -> Answer:
        async with grpc.aio.insecure_channel(env.targets[rpc.service]) as ch:
            await ch.channel_ready()
            call_task = asyncio.ensure_future(call(ch, rpc, request, within=0.2))
            await asyncio.sleep(0)
            time.sleep(0.6)  # noqa: ASYNC251 - blocks the servers' loop: the deadline passes
            return await call_task

    answer = env.loop.run(send())
    assert answer.code is Code.DEADLINE_EXCEEDED, answer

    async def settle() -> int:
        await asyncio.sleep(0.5)
        return kube.binding_count("late-bind")

    assert env.loop.run(settle()) == 0, "a Bind its caller gave up on was performed"
