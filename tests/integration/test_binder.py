"""Integration tests of the binder as a real process against the real control plane.

The binder runs as ``python -m services.binder`` with a least-privilege kubeconfig (create
pods/binding, patch pods/status, create events, get pods) and reports to a fake
``Scheduler`` gRPC server in the test. Pods are bound to kwok nodes; what the binder did
is read back from the API server with the admin client: ``spec.nodeName``, the
``Scheduled`` / ``FailedScheduling`` Events as ``kubectl describe pod`` finds them, and
the PodScheduled condition.
"""

from __future__ import annotations

import asyncio
import signal
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from google.protobuf.timestamp_pb2 import Timestamp
from kubernetes import client

from services.binder import apirequests
from services.binder.kubeapi import KubeClient, load_endpoint
from splitsched.testing.kube import (
    create_kwok_nodes,
    create_pods,
    delete_nodes,
    make_pod,
    wait_for,
)
from splitsched.v1 import binder_pb2, scheduler_pb2, types_pb2
from tests.support.binderproc import BinderProcess, run_binder
from tests.support.fixtures import ControlPlaneHandle

Outcome = scheduler_pb2.BindingOutcome

#: What the binder needs less ``list`` on nodes (nothing to list, watch or update): the
#: guard then reads each node on its own, the fallback of ``services.binder.knownnodes``;
#: the e2e stack runs with the chart's rights (``splitsched.launch.rights``), list included.
BINDER_RULES: list[dict[str, Any]] = [
    {"apiGroups": [""], "resources": ["pods/binding"], "verbs": ["create"]},
    {"apiGroups": [""], "resources": ["pods/status"], "verbs": ["patch"]},
    {"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]},
    {"apiGroups": [""], "resources": ["nodes"], "verbs": ["get"]},
    {"apiGroups": ["events.k8s.io"], "resources": ["events"], "verbs": ["create"]},
]


@pytest.fixture
def kwok_nodes(kube_api: client.ApiClient) -> Iterator[list[str]]:
    names = create_kwok_nodes(
        kube_api, 2, name_prefix=f"binder-{uuid.uuid4().hex[:6]}", cpu="8", memory="32Gi"
    )
    yield names
    delete_nodes(kube_api, names)


@pytest.fixture
def binder(kube_api: client.ApiClient, namespace: str, tmp_path: Path) -> Iterator[BinderProcess]:
    with run_binder(
        kube_api, namespace=namespace, directory=tmp_path, rules=BINDER_RULES,
        extra_args=["--shutdown-grace", "5"],
    ) as process:  # fmt: skip
        yield process


def _deadline(seconds: float = 30.0) -> Timestamp:
    ts = Timestamp()
    ts.FromNanoseconds(int((time.time() + seconds) * 1e9))
    return ts


def _pod(core: client.CoreV1Api, namespace: str, name: str) -> Any:
    return core.read_namespaced_pod(name, namespace)


def _bind(b: BinderProcess, *, decision_id: str, namespace: str, name: str, uid: str,
          node: str) -> None:  # fmt: skip
    response = b.stub.Bind(
        binder_pb2.BindRequest(
            decision_id=decision_id,
            pod=types_pb2.PodRef(namespace=namespace, name=name, uid=uid),
            node=node,
            deadline=_deadline(),
            profile="splitsched",
        ),
        timeout=10,
    )
    assert response.accepted, response.reason


def _admin_bind(core: client.CoreV1Api, *, namespace: str, pod: str, node: str) -> int:
    """Bind with the admin client, reading the whole response before the connection goes
    back to the pool (``splitsched.testing.kube.bind_pod`` does not, which breaks the
    next request on that pooled connection)."""
    body = {
        "apiVersion": "v1",
        "kind": "Binding",
        "metadata": {"name": pod, "namespace": namespace},
        "target": {"apiVersion": "v1", "kind": "Node", "name": node},
    }
    resp = core.create_namespaced_binding(namespace, body, _preload_content=False)
    resp.read()
    status = int(resp.status)
    resp.release_conn()
    return status


def _events(core: client.CoreV1Api, namespace: str, pod: str, reason: str) -> list[Any]:
    """Events about a pod as ``kubectl describe pod`` lists them (core v1, field selector)."""
    items = core.list_namespaced_event(
        namespace, field_selector=f"involvedObject.name={pod},reason={reason}"
    ).items
    return list(items)


def test_the_node_list_the_guard_uses_names_every_node_of_the_real_api_server(
    control_plane: ControlPlaneHandle, kwok_nodes: list[str]
) -> None:
    """``services.binder.knownnodes`` lists the nodes as a Table (``apirequests``): the
    real API server answers one, and its name column holds every node. A silent failure
    here would only cost the binder a read per node, so it is checked on its own."""

    async def names() -> list[str] | None:
        kube = KubeClient(load_endpoint(str(control_plane.kubeconfig_path)))
        try:
            answer = await kube.send(apirequests.list_node_names(), budget=20.0)
        finally:
            await kube.close()
        assert answer.status == 200, answer.body
        return apirequests.table_names(answer.body)

    listed = asyncio.run(names())
    assert listed is not None and set(kwok_nodes) <= set(listed)


def test_bind_sets_node_name_writes_scheduled_event_and_reports_bound(
    core_api: client.CoreV1Api, kube_api: client.ApiClient, namespace: str,
    kwok_nodes: list[str], binder: BinderProcess,
) -> None:  # fmt: skip
    create_pods(kube_api, namespace=namespace, pods=[make_pod("web")])
    uid = _pod(core_api, namespace, "web").metadata.uid
    _bind(binder, decision_id="d-web", namespace=namespace, name="web", uid=uid,
          node=kwok_nodes[0])  # fmt: skip
    outcome = binder.scheduler.outcome("d-web")
    assert outcome.result == Outcome.BOUND, outcome.message
    assert outcome.last_http_status == 201
    assert outcome.binder_id == "it-binder"
    assert outcome.pod.uid == uid
    assert _pod(core_api, namespace, "web").spec.node_name == kwok_nodes[0]
    events = wait_for(
        lambda: _events(core_api, namespace, "web", "Scheduled"), message="Scheduled event"
    )
    event = events[0]
    assert event.type == "Normal"
    assert event.message == f"Successfully assigned {namespace}/web to {kwok_nodes[0]}"
    assert event.involved_object.uid == uid
    assert event.involved_object.kind == "Pod"
    assert event.reporting_component == "splitsched"


def test_a_pod_of_another_scheduler_or_a_missing_node_is_refused_and_stays_pending(
    core_api: client.CoreV1Api, kube_api: client.ApiClient, namespace: str,
    kwok_nodes: list[str], binder: BinderProcess,
) -> None:  # fmt: skip
    """The first attack of issue 17, from a caller the binder trusts: a pod of
    default-scheduler, and a node that does not exist, are refused and nothing is bound."""
    create_pods(
        kube_api, namespace=namespace,
        pods=[make_pod("theirs", scheduler_name="default-scheduler"), make_pod("ours")],
    )  # fmt: skip
    theirs, ours = (_pod(core_api, namespace, n).metadata.uid for n in ("theirs", "ours"))
    _bind(binder, decision_id="d-theirs", namespace=namespace, name="theirs", uid=theirs,
          node=kwok_nodes[0])  # fmt: skip
    _bind(binder, decision_id="d-ghost", namespace=namespace, name="ours", uid=ours,
          node=f"ghost-{uuid.uuid4().hex[:6]}")  # fmt: skip
    for decision, reason in (("d-theirs", "scheduler_name"), ("d-ghost", "node_missing")):
        outcome = binder.scheduler.outcome(decision)
        assert outcome.result == Outcome.FAILED
        assert outcome.message.startswith(f"refused by the binder ({reason})"), outcome.message
    assert not _pod(core_api, namespace, "theirs").spec.node_name
    assert not _pod(core_api, namespace, "ours").spec.node_name


def test_already_bound_pod_same_node_is_bound_other_node_is_conflict(
    core_api: client.CoreV1Api, kube_api: client.ApiClient, namespace: str,
    kwok_nodes: list[str], binder: BinderProcess,
) -> None:  # fmt: skip
    create_pods(kube_api, namespace=namespace, pods=[make_pod("a"), make_pod("b")])
    for name in ("a", "b"):
        assert _admin_bind(core_api, namespace=namespace, pod=name, node=kwok_nodes[0]) == 201
    uid_a = _pod(core_api, namespace, "a").metadata.uid
    uid_b = _pod(core_api, namespace, "b").metadata.uid
    _bind(binder, decision_id="d-a", namespace=namespace, name="a", uid=uid_a,
          node=kwok_nodes[0])  # fmt: skip
    _bind(binder, decision_id="d-b", namespace=namespace, name="b", uid=uid_b,
          node=kwok_nodes[1])  # fmt: skip
    same = binder.scheduler.outcome("d-a")
    assert same.result == Outcome.BOUND, same.message
    assert same.last_http_status == 409
    other = binder.scheduler.outcome("d-b")
    assert other.result == Outcome.CONFLICT, other.message
    assert kwok_nodes[0] in other.message
    assert _pod(core_api, namespace, "b").spec.node_name == kwok_nodes[0]


def test_deleted_or_recreated_pod_is_pod_gone(
    core_api: client.CoreV1Api, kube_api: client.ApiClient, namespace: str,
    kwok_nodes: list[str], binder: BinderProcess,
) -> None:  # fmt: skip
    create_pods(kube_api, namespace=namespace, pods=[make_pod("gone"), make_pod("again")])
    gone_uid = _pod(core_api, namespace, "gone").metadata.uid
    core_api.delete_namespaced_pod("gone", namespace, grace_period_seconds=0)
    wait_for(
        lambda: not any(p.metadata.name == "gone"
                        for p in core_api.list_namespaced_pod(namespace).items),
        message="pod deleted",
    )  # fmt: skip
    _bind(binder, decision_id="d-gone", namespace=namespace, name="gone", uid=gone_uid,
          node=kwok_nodes[0])  # fmt: skip
    outcome = binder.scheduler.outcome("d-gone")
    assert outcome.result == Outcome.POD_GONE, outcome.message
    assert outcome.last_http_status == 404

    # A stale decision for an earlier pod of the same name must not bind the new one.
    _bind(binder, decision_id="d-stale", namespace=namespace, name="again",
          uid=str(uuid.uuid4()), node=kwok_nodes[0])  # fmt: skip
    stale = binder.scheduler.outcome("d-stale")
    assert stale.result == Outcome.POD_GONE, stale.message
    assert not _pod(core_api, namespace, "again").spec.node_name


def test_report_unschedulable_writes_failed_scheduling_event_and_condition(
    core_api: client.CoreV1Api, kube_api: client.ApiClient, namespace: str,
    binder: BinderProcess,
) -> None:  # fmt: skip
    create_pods(kube_api, namespace=namespace, pods=[make_pod("big", cpu="500")])
    uid = _pod(core_api, namespace, "big").metadata.uid
    message = "0/2 nodes are available: 2 Insufficient cpu."
    ack = binder.stub.ReportUnschedulable(
        binder_pb2.UnschedulableReport(
            pod=types_pb2.PodRef(namespace=namespace, name="big", uid=uid),
            message=message, reason="Unschedulable", profile="splitsched",
        ),
        timeout=10,
    )  # fmt: skip
    assert ack.accepted, ack.reason
    events = wait_for(
        lambda: _events(core_api, namespace, "big", "FailedScheduling"),
        message="FailedScheduling event",
    )
    assert events[0].type == "Warning"
    assert events[0].message == message
    assert events[0].involved_object.uid == uid

    def condition() -> Any:
        conditions = _pod(core_api, namespace, "big").status.conditions or []
        return next((c for c in conditions if c.type == "PodScheduled"), None)

    cond = wait_for(condition, message="PodScheduled condition")
    assert cond.status == "False"
    assert cond.reason == "Unschedulable"
    assert cond.message == message
    assert not _pod(core_api, namespace, "big").spec.node_name


def test_sigterm_stops_the_binder_gracefully(binder: BinderProcess) -> None:
    binder.proc.send_signal(signal.SIGTERM)
    assert binder.proc.wait(timeout=20) == 0
    assert "stopped" in binder.log_path.read_text()
