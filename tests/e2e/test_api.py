"""The Scheduler API of a running scheduler, end to end: every RPC called over gRPC against
the three services on the real control plane, including its errors, and issue 10's two
acceptance tests: Explain names taints, resources and the nodeSelector with node counts;
Simulate agrees with where the scheduler then really places the pod.

Tests that need an exact situation make their own kwok nodes, labelled with a unique key
that their pods select, so the module's other nodes and pods cannot interfere.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import grpc
import pytest
from google.protobuf import descriptor_pool
from grpc_reflection.v1alpha.proto_reflection_descriptor_database import (
    ProtoReflectionDescriptorDatabase,
)
from kubernetes import client

from splitsched.core import models
from splitsched.testing import invariants, kube, stack
from splitsched.v1 import scheduler_pb2, scheduler_pb2_grpc

pytestmark = pytest.mark.e2e

Code = grpc.StatusCode
GI = 1024**3
RPCS = {
    "ReportBindingOutcome",
    "GetPod",
    "ListPods",
    "Explain",
    "Simulate",
    "ListNodes",
    "WatchDecisions",
    "GetPodTrace",
}


@pytest.fixture(scope="module")
def channel(running_stack: stack.Stack) -> Iterator[grpc.Channel]:
    with running_stack.channel(
        options=[("grpc.max_send_message_length", 16 * 1024 * 1024)],
    ) as ch:
        yield ch


@pytest.fixture(scope="module")
def stub(channel: grpc.Channel) -> scheduler_pb2_grpc.SchedulerStub:
    return scheduler_pb2_grpc.SchedulerStub(channel)


def rpc_error(call: Any, *args: Any) -> grpc.RpcError:
    with pytest.raises(grpc.RpcError) as info:
        call(*args, timeout=30)
    return info.value


def get_pod(stub: scheduler_pb2_grpc.SchedulerStub, ns: str, name: str) -> Any:
    try:
        return stub.GetPod(scheduler_pb2.GetPodRequest(namespace=ns, name=name), timeout=10)
    except grpc.RpcError as exc:
        if exc.code() == Code.NOT_FOUND:
            return None
        raise


def wait_state(
    stub: scheduler_pb2_grpc.SchedulerStub,
    ns: str,
    name: str,
    state: int,
    *,
    timeout: float = 30,
) -> scheduler_pb2.PodStatus:
    """Poll GetPod until the pod is in `state` (and, if WAITING, tried at least once)."""

    def reached() -> scheduler_pb2.PodStatus | None:
        status = get_pod(stub, ns, name)
        if status is None or status.state != state:
            return None
        if state == scheduler_pb2.WAITING and status.scheduling_attempts == 0:
            return None
        return status  # type: ignore[no-any-return]

    name_of = scheduler_pb2.PodState.Name(state)  # type: ignore[arg-type]
    return kube.wait_for(reached, timeout=timeout, message=f"{ns}/{name} {name_of}")


MakeNodes = Callable[..., dict[str, str]]


@pytest.fixture
def make_nodes(kube_api: client.ApiClient) -> Iterator[MakeNodes]:
    """make_nodes(specs, label=KEY, value="yes"): one kwok node per spec (`make_node`
    kwargs; a spec's "value" overrides the label's value); returns short name -> node
    name. The nodes are deleted when the test ends, pass or fail."""
    created: list[str] = []

    def make(specs: dict[str, dict[str, Any]], *, label: str, value: str = "yes") -> dict[str, str]:
        suffix = uuid.uuid4().hex[:6]
        names: dict[str, str] = {}
        for short, spec in specs.items():
            spec = dict(spec)
            labels = {label: spec.pop("value", value), **spec.pop("labels", {})}
            name = f"api-{short}-{suffix}"
            created.append(f"{name}-0")
            names[short] = kube.create_kwok_nodes(
                kube_api, 1, name_prefix=name, labels=labels, **spec
            )[0]
        return names

    yield make
    kube.delete_nodes(kube_api, created)


def wait_scheduler_sees(
    stub: scheduler_pb2_grpc.SchedulerStub, kube_api: client.ApiClient
) -> list[models.Node]:
    """Wait until the scheduler's nodes are exactly the API server's; return them."""

    def same() -> list[models.Node] | None:
        nodes, _ = invariants.cluster_state(kube_api)
        seen = {n.name for n in stub.ListNodes(scheduler_pb2.ListNodesRequest(), timeout=10).nodes}
        return nodes if seen == {n.name for n in nodes} else None

    return kube.wait_for(same, timeout=30, message="the scheduler's view of the nodes")


# ---- reflection and the binders' RPC ------------------------------------------------------------


def test_reflection_serves_the_scheduler_contract(channel: grpc.Channel) -> None:
    """What grpcurl relies on: list services, then resolve their descriptors."""
    db = ProtoReflectionDescriptorDatabase(channel)
    services = set(db.get_services())
    assert {"splitsched.v1.Scheduler", "grpc.health.v1.Health"} <= services
    pool = descriptor_pool.DescriptorPool(db)
    service = pool.FindServiceByName("splitsched.v1.Scheduler")
    assert {m.name for m in service.methods} == RPCS
    explain = pool.FindMessageTypeByName("splitsched.v1.ExplainResponse")
    assert "plugins" in explain.fields_by_name


def test_report_binding_outcome_ignores_unknown_decisions(running_stack: stack.Stack) -> None:
    outcome = scheduler_pb2.BindingOutcome(
        decision_id="no-such-decision", result=scheduler_pb2.BindingOutcome.BOUND, node="x"
    )
    # Only binders may report outcomes (the ops identity may not: test_tls_stack).
    with running_stack.channel(who="binder") as ch:
        resp = scheduler_pb2_grpc.SchedulerStub(ch).ReportBindingOutcome(
            scheduler_pb2.ReportBindingOutcomeRequest(outcomes=[outcome], binder_id="test"),
            timeout=10,
        )
    assert resp.accepted == 0


# ---- pods -------------------------------------------------------------------------------------


def test_get_pod_and_list_pods_follow_pods_to_bound(
    kube_api: client.ApiClient, namespace: str, stub: scheduler_pb2_grpc.SchedulerStub
) -> None:
    pods = [kube.make_pod(f"web-{i}", cpu="100m") for i in range(3)]
    pods.append(kube.make_pod("huge", cpu="100"))
    kube.create_pods(kube_api, namespace=namespace, pods=pods)
    for i in range(3):
        status = wait_state(stub, namespace, f"web-{i}", scheduler_pb2.BOUND)
        api_pod = kube.get_pod(kube_api, namespace=namespace, name=f"web-{i}")
        assert status.node == api_pod.spec.node_name != ""
        assert status.scheduling_attempts >= 1 and status.scheduler_name == "splitsched"
        assert status.pod.uid == api_pod.metadata.uid
        assert status.HasField("first_seen") and status.message == ""
    # One Binding call each, counted also when the watch showed the pod bound before the
    # binder's report came (issue 21: those reports were dropped, leaving 0).
    web = [f"web-{i}" for i in range(3)]

    def calls() -> list[int] | None:
        counts = [get_pod(stub, namespace, name).bind_attempts for name in web]
        return counts if all(counts) else None

    assert kube.wait_for(calls, timeout=30, message="bind_attempts reported") == [1, 1, 1]
    huge = wait_state(stub, namespace, "huge", scheduler_pb2.WAITING)
    assert "Insufficient cpu" in huge.message and huge.message.startswith("0/")
    # Per node, why: the module's GPU nodes are tainted, every other node is too small.
    assert {tuple(f.reasons) for f in huge.last_failures} == {
        ("Insufficient cpu",),
        ("node(s) had untolerated taint(s)",),
    }
    assert huge.node == "" and huge.queue in ("unschedulable", "backoff", "active", "in_flight")

    def names(**filters: Any) -> list[str]:
        resp = stub.ListPods(scheduler_pb2.ListPodsRequest(**filters), timeout=10)
        return [p.pod.name for p in resp.pods]

    assert names(namespace=namespace) == ["huge", "web-0", "web-1", "web-2"]
    assert names(namespace=namespace, state=scheduler_pb2.WAITING) == ["huge"]
    assert names(namespace=namespace, state=scheduler_pb2.BOUND) == ["web-0", "web-1", "web-2"]
    # Paging: one pod per page, a stable token each time.
    request = scheduler_pb2.ListPodsRequest(namespace=namespace, page_size=1)
    paged: list[str] = []
    for _ in range(10):
        resp = stub.ListPods(request, timeout=10)
        paged += [p.pod.name for p in resp.pods]
        if not resp.next_page_token:
            break
        request.page_token = resp.next_page_token
    assert paged == ["huge", "web-0", "web-1", "web-2"]
    err = rpc_error(
        stub.ListPods, scheduler_pb2.ListPodsRequest(namespace=namespace, page_token="bogus")
    )
    assert err.code() == Code.INVALID_ARGUMENT and "page_token" in str(err.details())


def test_unknown_pods_are_not_found(
    kube_api: client.ApiClient, namespace: str, stub: scheduler_pb2_grpc.SchedulerStub
) -> None:
    # A pod of another scheduler exists in the API server but is not ours.
    kube.create_pods(
        kube_api,
        namespace=namespace,
        pods=[kube.make_pod("theirs", scheduler_name="someone-else")],
    )
    for name in ("nope", "theirs"):
        for call, request in (
            (stub.GetPod, scheduler_pb2.GetPodRequest(namespace=namespace, name=name)),
            (stub.Explain, scheduler_pb2.ExplainRequest(namespace=namespace, name=name)),
        ):
            err = rpc_error(call, request)
            assert err.code() == Code.NOT_FOUND, err
            assert f"{namespace}/{name}" in str(err.details())
    err = rpc_error(stub.GetPod, scheduler_pb2.GetPodRequest(name="x"))
    assert err.code() == Code.INVALID_ARGUMENT


# ---- nodes ------------------------------------------------------------------------------------


def test_list_nodes_reports_allocatable_requested_free_pods_and_taints(
    kube_api: client.ApiClient,
    namespace: str,
    stub: scheduler_pb2_grpc.SchedulerStub,
    make_nodes: MakeNodes,
) -> None:
    label = f"nodes.splitsched.io/t-{uuid.uuid4().hex[:6]}"
    taint = {"key": "team", "value": "infra", "effect": "NoSchedule"}
    nodes = make_nodes(
        {"used": {"cpu": "4", "memory": "8Gi"}, "tainted": {"cpu": "2", "taints": [taint]}},
        label=label,
    )
    pods = [
        kube.make_pod(f"p{i}", cpu="500m", memory="1Gi", node_selector={label: "yes"})
        for i in range(3)
    ]
    kube.create_pods(kube_api, namespace=namespace, pods=pods)
    for i in range(3):
        wait_state(stub, namespace, f"p{i}", scheduler_pb2.BOUND)
    # Ask by prefix, one node per page.
    views: dict[str, scheduler_pb2.NodeView] = {}
    for short, name in nodes.items():
        request = scheduler_pb2.ListNodesRequest(name_prefix=name, include_pods=True, page_size=1)
        resp = stub.ListNodes(request, timeout=10)
        assert [n.name for n in resp.nodes] == [name] and not resp.next_page_token
        views[short] = resp.nodes[0]
    used = views["used"]
    assert used.allocatable["cpu"] == 4000 and used.allocatable["memory"] == 8 * GI
    assert used.requested["cpu"] == 1500 and used.requested["memory"] == 3 * GI
    assert used.free["cpu"] == 2500 and used.free["memory"] == 5 * GI
    assert used.pod_count == 3 and sorted(p.name for p in used.pods) == ["p0", "p1", "p2"]
    assert {p.namespace for p in used.pods} == {namespace}
    assert used.labels[label] == "yes" and not used.taints and not used.unschedulable
    tainted = views["tainted"]
    assert [(t.key, t.value, t.effect) for t in tainted.taints] == [("team", "infra", "NoSchedule")]
    assert tainted.pod_count == 0 and dict(tainted.requested) == {}
    assert tainted.free["cpu"] == 2000 and tainted.version >= 1


# ---- explain: the first acceptance test ----------------------------------------------------------


def expected_rejections(
    nodes: list[models.Node], pods: list[models.Pod], pod: models.Pod
) -> dict[str, set[str]]:
    """Which nodes each plugin must reject, computed from the API server's objects: the
    pod tolerates nothing, selects one label, and requests cpu and memory."""
    used: dict[str, dict[str, int]] = {n.name: {} for n in nodes}
    for p in pods:
        if p.node_name in used and not p.is_terminal:
            for res, amount in p.requests.items():
                used[p.node_name][res] = used[p.node_name].get(res, 0) + amount
            used[p.node_name]["pods"] = used[p.node_name].get("pods", 0) + 1
    wanted = {**pod.requests, "pods": 1}
    out: dict[str, set[str]] = {"TaintToleration": set(), "NodeAffinity": set()}
    out["NodeResourcesFit"] = set()
    for n in nodes:
        if any(t.effect in ("NoSchedule", "NoExecute") for t in n.taints):
            out["TaintToleration"].add(n.name)
        if any(n.labels.get(k) != v for k, v in pod.node_selector.items()):
            out["NodeAffinity"].add(n.name)
        if any(
            used[n.name].get(res, 0) + amount > n.allocatable.get(res, 0)
            for res, amount in wanted.items()
        ):
            out["NodeResourcesFit"].add(n.name)
    return out


def test_explain_names_taints_resources_and_node_selector_with_node_counts(
    kube_api: client.ApiClient,
    namespace: str,
    stub: scheduler_pb2_grpc.SchedulerStub,
    make_nodes: MakeNodes,
) -> None:
    """A pod that fits nowhere: tainted on some nodes, too big for others, and its
    nodeSelector matching none of the rest. Nodes A (tainted) and B (too small) carry the
    selected label; C carries it with the wrong value; every other node lacks it."""
    key = f"explain.splitsched.io/t-{uuid.uuid4().hex[:6]}"
    taint = {"key": key, "value": "x", "effect": "NoSchedule"}
    zone = "topology.kubernetes.io/zone"
    mine = make_nodes(
        {
            "a-tainted": {"cpu": "8", "taints": [taint], "labels": {zone: "explain"}},
            "b-small": {"cpu": "1", "labels": {zone: "explain"}},
            "c-wrong-label": {"cpu": "8", "value": "no"},
        },
        label=key,
    )
    manifest = kube.make_pod("stuck", cpu="2", memory="64Mi", node_selector={key: "yes"})
    kube.create_pods(kube_api, namespace=namespace, pods=[manifest])
    wait_state(stub, namespace, "stuck", scheduler_pb2.WAITING)
    nodes = wait_scheduler_sees(stub, kube_api)
    _, pods = invariants.cluster_state(kube_api)
    stuck = next(p for p in pods if p.namespace == namespace and p.name == "stuck")
    expected = expected_rejections(nodes, pods, stuck)
    # Exactly one of our nodes per reason.
    assert expected["TaintToleration"] & set(mine.values()) == {mine["a-tainted"]}
    assert expected["NodeResourcesFit"] & set(mine.values()) == {mine["b-small"]}
    assert expected["NodeAffinity"] & set(mine.values()) == {mine["c-wrong-label"]}

    resp = stub.Explain(
        scheduler_pb2.ExplainRequest(namespace=namespace, name="stuck", include_nodes=True),
        timeout=30,
    )
    assert resp.state == scheduler_pb2.WAITING
    assert resp.total_nodes == len(nodes) and resp.feasible_nodes == 0
    verdicts = {v.plugin: v for v in resp.plugins}
    assert {p: verdicts[p].rejected_nodes for p in expected} == {
        p: len(names) for p, names in expected.items()
    }
    assert set(verdicts) == set(expected)  # nothing else objects
    # Why, in kube-scheduler's words, and on which classes of nodes.
    fit = verdicts["NodeResourcesFit"]
    assert {r.reason for r in fit.reasons} == {"Insufficient cpu"}
    assert fit.resolvable_by_preemption and not verdicts["NodeAffinity"].resolvable_by_preemption
    taint_reasons = {r.reason: r.nodes for r in verdicts["TaintToleration"].reasons}
    # One reason for every tainted node (kube v1.36's words name no taint); the node
    # classes say which taint each has.
    tainted = verdicts["TaintToleration"].rejected_nodes
    assert taint_reasons == {"node(s) had untolerated taint(s)": tainted} and tainted >= 1
    assert (f"zone=explain,taints={key}:NoSchedule", 1) in {
        (c.node_class, c.nodes) for c in verdicts["TaintToleration"].node_classes
    }
    assert ("zone=explain", 1) in {(c.node_class, c.nodes) for c in fit.node_classes}
    assert {r.reason for r in verdicts["NodeAffinity"].reasons} == {
        "node(s) didn't match Pod's node affinity/selector"
    }
    # Per node: each of ours is rejected by exactly its one plugin.
    per_node = {n.node: {r.plugin for r in n.rejections} for n in resp.nodes}
    assert per_node[mine["a-tainted"]] == {"TaintToleration"}
    assert per_node[mine["b-small"]] == {"NodeResourcesFit"}
    assert per_node[mine["c-wrong-label"]] == {"NodeAffinity"}
    assert not any(n.feasible for n in resp.nodes)
    # The kube-scheduler-style summary names all three.
    assert resp.summary.startswith(f"0/{len(nodes)} nodes are available: ")
    for words in ("untolerated taint", "Insufficient cpu", "didn't match Pod's node affinity"):
        assert words in resp.summary, resp.summary
    assert not resp.preemption_might_help  # nothing of lower priority to evict


# ---- simulate: the second acceptance test ------------------------------------------------------


def test_simulate_agrees_with_where_the_scheduler_then_places_the_pod(
    kube_api: client.ApiClient,
    namespace: str,
    stub: scheduler_pb2_grpc.SchedulerStub,
    make_nodes: MakeNodes,
) -> None:
    """Three dedicated nodes; the largest is mostly taken by a filler pod, so the medium one
    is the unique best (LeastAllocated + BalancedAllocation): only the live view says so."""
    key = f"simulate.splitsched.io/t-{uuid.uuid4().hex[:6]}"
    nodes = make_nodes(
        {
            "small": {"cpu": "4", "memory": "8Gi"},
            "medium": {"cpu": "8", "memory": "16Gi"},
            "large": {"cpu": "16", "memory": "32Gi"},
        },
        label=key,
    )
    filler = kube.make_pod(
        "filler",
        cpu="12",
        memory="24Gi",
        node_selector={key: "yes", "kubernetes.io/hostname": nodes["large"]},
    )
    kube.create_pods(kube_api, namespace=namespace, pods=[filler])
    wait_state(stub, namespace, "filler", scheduler_pb2.BOUND)

    def view() -> list[tuple[str, dict[str, int], int]]:
        resp = stub.ListNodes(scheduler_pb2.ListNodesRequest(name_prefix="api-"), timeout=10)
        return [(n.name, dict(n.requested), n.pod_count) for n in resp.nodes]

    def pods_listed() -> list[str]:
        resp = stub.ListPods(scheduler_pb2.ListPodsRequest(namespace=namespace), timeout=10)
        return [p.pod.name for p in resp.pods]

    before = (view(), pods_listed())
    pod = kube.make_pod("probe", cpu="1", memory="2Gi", node_selector={key: "yes"})
    pod["metadata"]["namespace"] = namespace
    resp = stub.Simulate(
        scheduler_pb2.SimulateRequest(manifests=[json.dumps(pod)], top_nodes=5), timeout=30
    )
    assert resp.all_placed and len(resp.placements) == 1
    placement = resp.placements[0]
    assert (placement.pod.namespace, placement.pod.name) == (namespace, "probe")
    assert placement.node == nodes["medium"]
    assert placement.summary.startswith("fits on 3/")
    assert [n.node for n in placement.top_nodes] == [nodes[s] for s in ("medium", "small", "large")]
    totals = [n.total for n in placement.top_nodes]
    assert totals == sorted(totals, reverse=True) and totals[0] > totals[1]
    assert {"NodeResourcesFit", "NodeResourcesBalancedAllocation"} <= set(
        placement.top_nodes[0].plugin_scores
    )
    # Nothing changed: same usage, no new pod tracked.
    assert (view(), pods_listed()) == before
    # Now for real: the same pod goes where Simulate said.
    kube.create_pods(kube_api, namespace=namespace, pods=[pod])
    bound = wait_state(stub, namespace, "probe", scheduler_pb2.BOUND)
    api_pod = kube.get_pod(kube_api, namespace=namespace, name="probe")
    assert api_pod.spec.node_name == bound.node == placement.node


def test_simulate_gang_is_all_or_nothing(
    stub: scheduler_pb2_grpc.SchedulerStub, make_nodes: MakeNodes
) -> None:
    key = f"gang.splitsched.io/t-{uuid.uuid4().hex[:6]}"
    nodes = make_nodes({"g1": {"cpu": "2"}, "g2": {"cpu": "2"}}, label=key)
    manifests = [
        json.dumps(kube.make_pod(f"member-{i}", cpu="1500m", node_selector={key: "yes"}))
        for i in range(3)
    ]
    alone = stub.Simulate(scheduler_pb2.SimulateRequest(manifests=manifests), timeout=30)
    placed = [p.node for p in alone.placements]
    assert sorted(placed[:2]) == sorted(nodes.values()) and placed[2] == ""
    assert not alone.all_placed
    third = alone.placements[2]
    assert "Insufficient cpu" in third.summary
    verdicts = {v.plugin: v.rejected_nodes for v in third.plugins}
    assert verdicts["NodeResourcesFit"] == 2  # both taken by the two before it
    gang = stub.Simulate(scheduler_pb2.SimulateRequest(manifests=manifests, gang=True), timeout=30)
    assert [p.node for p in gang.placements] == ["", "", ""]
    assert gang.blocking_pod.name == "member-2" and not gang.all_placed


def test_simulate_refuses_malformed_and_oversized_requests(
    stub: scheduler_pb2_grpc.SchedulerStub,
) -> None:
    bad = kube.make_pod("x", cpu="abc")
    err = rpc_error(stub.Simulate, scheduler_pb2.SimulateRequest(manifests=[json.dumps(bad)]))
    assert err.code() == Code.INVALID_ARGUMENT
    assert err.details() == (
        "manifests[0]: pod default/x: spec.containers[0].resources.requests.cpu: "
        "invalid quantity 'abc'"
    )
    other = kube.make_pod("y", scheduler_name="not-a-profile")
    err = rpc_error(stub.Simulate, scheduler_pb2.SimulateRequest(manifests=[json.dumps(other)]))
    assert err.code() == Code.INVALID_ARGUMENT and "spec.schedulerName" in str(err.details())
    many = {"kind": "List", "items": [kube.make_pod(f"p{i}") for i in range(1001)]}
    err = rpc_error(stub.Simulate, scheduler_pb2.SimulateRequest(manifests=[json.dumps(many)]))
    assert err.code() == Code.INVALID_ARGUMENT and "at most 1000 pods" in str(err.details())
    big = "#" * (5 * 1024 * 1024)  # over our 4 MiB limit, under gRPC's 8 MiB
    err = rpc_error(stub.Simulate, scheduler_pb2.SimulateRequest(manifests=[big]))
    assert err.code() == Code.INVALID_ARGUMENT and "bytes in total" in str(err.details())
    huge = "#" * (9 * 1024 * 1024)  # over gRPC's message limit
    err = rpc_error(stub.Simulate, scheduler_pb2.SimulateRequest(manifests=[huge]))
    assert err.code() == Code.RESOURCE_EXHAUSTED


# ---- the decision stream ------------------------------------------------------------------------


def test_watch_decisions_streams_decisions_and_outcomes_for_one_namespace(
    kube_api: client.ApiClient, namespace: str, stub: scheduler_pb2_grpc.SchedulerStub
) -> None:
    other = kube.create_namespace(kube_api, prefix="watch-other")
    try:
        kube.create_pods(kube_api, namespace=namespace, pods=[kube.make_pod("w-0")])
        kube.create_pods(kube_api, namespace=other, pods=[kube.make_pod("o-0")])
        wait_state(stub, namespace, "w-0", scheduler_pb2.BOUND)
        wait_state(stub, other, "o-0", scheduler_pb2.BOUND)
        stream = stub.WatchDecisions(
            scheduler_pb2.WatchDecisionsRequest(
                namespace=namespace, include_outcomes=True, replay=50
            ),
            timeout=40,
        )
        kinds = scheduler_pb2.Decision.Kind.Name
        seen: list[tuple[str, str, str]] = []
        decision_ids: dict[str, set[str]] = {}
        for d in stream:
            assert d.pod.namespace == namespace, d
            seen.append((d.pod.name, kinds(d.kind), d.node))
            decision_ids.setdefault(d.pod.name, set()).add(d.decision_id)
            if len(seen) == 2:
                # Both of w-0's entries were replayed; the next pod's arrive live.
                kube.create_pods(kube_api, namespace=namespace, pods=[kube.make_pod("w-1")])
            if len(seen) == 4:
                break
        stream.cancel()
        assert [(n, k) for n, k, _ in seen] == [
            ("w-0", "SCHEDULED"),
            ("w-0", "BOUND"),
            ("w-1", "SCHEDULED"),
            ("w-1", "BOUND"),
        ]
        for name in ("w-0", "w-1"):
            api_pod = kube.get_pod(kube_api, namespace=namespace, name=name)
            assert {node for n, _, node in seen if n == name} == {api_pod.spec.node_name}
            assert len(decision_ids[name]) == 1  # the outcome carries its decision's id
    finally:
        kube.delete_namespace(kube_api, other)
