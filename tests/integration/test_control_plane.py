"""Integration tests of the local control plane itself: the ground the other tiers stand on.

They check what the scheduler relies on: kwok nodes become Ready, a pod addressed to the
``splitsched`` scheduler stays Pending when nobody binds it, a Binding sets
``spec.nodeName`` and kwok then runs the pod, a second Binding is refused (409), RBAC
refuses a Binding to a read-only ServiceAccount (403) while letting it list pods, kwok
leaves nodes without its annotation alone, and the API server reports the pinned version.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from kubernetes import client
from kubernetes.client.rest import ApiException

from splitsched.testing import kube as kube_module
from splitsched.testing.controlplane import ControlPlane, pid_alive, read_versions
from splitsched.testing.controlplane.processes import ProcessFiles
from splitsched.testing.kube import (
    api_client_from_kubeconfig,
    bind_pod,
    create_kwok_nodes,
    create_namespace,
    create_pods,
    delete_namespace,
    delete_nodes,
    get_pod,
    make_pod,
    node_is_ready,
    service_account_kubeconfig,
    wait_for,
)
from tests.support.fixtures import ControlPlaneHandle


def _unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:6]}"


@pytest.fixture
def kwok_nodes(kube_api: client.ApiClient) -> Iterator[list[str]]:
    """Two kwok nodes (unique names), deleted after the test."""
    names = create_kwok_nodes(kube_api, 2, name_prefix=_unique("kwok"), cpu="8", memory="32Gi")
    yield names
    delete_nodes(kube_api, names)


def test_apiserver_reports_pinned_version(control_plane: ControlPlaneHandle) -> None:
    if control_plane.backend != "local":
        pytest.skip("the version pin applies to the locally built kube-apiserver only")
    api = api_client_from_kubeconfig(control_plane.kubeconfig_path)
    info = client.VersionApi(api).get_code()
    assert info.git_version == read_versions()["KUBERNETES_VERSION"]


def test_kwok_nodes_become_ready_with_given_capacity(
    kube_api: client.ApiClient, kwok_nodes: list[str]
) -> None:
    core = client.CoreV1Api(kube_api)
    for name in kwok_nodes:
        node = core.read_node(name)
        assert node_is_ready(node), f"{name} not Ready"
        assert node.status.allocatable["cpu"] == "8"
        assert node.status.allocatable["memory"] == "32Gi"
        assert node.metadata.labels["type"] == "kwok"


def test_pod_for_splitsched_stays_pending_until_bound_then_runs(
    kube_api: client.ApiClient, namespace: str, kwok_nodes: list[str]
) -> None:
    create_pods(kube_api, namespace=namespace, pods=[make_pod("p0")])
    # Nothing schedules for "splitsched" here: the pod must stay unbound and Pending.
    deadline = time.monotonic() + 4.0
    while time.monotonic() < deadline:
        pod = get_pod(kube_api, namespace=namespace, name="p0")
        assert pod.spec.node_name is None
        assert pod.status.phase == "Pending"
        time.sleep(0.5)

    status = bind_pod(kube_api, namespace=namespace, pod="p0", node=kwok_nodes[0])
    assert status == 201
    pod = get_pod(kube_api, namespace=namespace, name="p0")
    assert pod.spec.node_name == kwok_nodes[0]

    running = wait_for(
        lambda: (
            p
            if (p := get_pod(kube_api, namespace=namespace, name="p0")).status.phase == "Running"
            else None
        ),
        timeout=30,
        message="kwok to move the bound pod to Running",
    )
    assert running.status.pod_ip, "kwok assigns a pod IP like a kubelet would"
    conditions = {c.type: c.status for c in running.status.conditions or []}
    assert conditions.get("Ready") == "True"


def test_second_binding_is_refused_with_conflict(
    kube_api: client.ApiClient, namespace: str, kwok_nodes: list[str]
) -> None:
    create_pods(kube_api, namespace=namespace, pods=[make_pod("p1")])
    assert bind_pod(kube_api, namespace=namespace, pod="p1", node=kwok_nodes[0]) == 201
    with pytest.raises(ApiException) as excinfo:
        bind_pod(kube_api, namespace=namespace, pod="p1", node=kwok_nodes[1])
    assert excinfo.value.status == 409
    assert get_pod(kube_api, namespace=namespace, name="p1").spec.node_name == kwok_nodes[0]


def test_read_only_service_account_cannot_bind_but_can_list(
    kube_api: client.ApiClient, namespace: str, kwok_nodes: list[str]
) -> None:
    create_pods(kube_api, namespace=namespace, pods=[make_pod("p2")])
    path = service_account_kubeconfig(
        kube_api,
        namespace=namespace,
        name="reader",
        cluster_role_rules=[
            {"apiGroups": [""], "resources": ["pods", "nodes"], "verbs": ["get", "list", "watch"]}
        ],
    )
    reader = api_client_from_kubeconfig(path)
    try:
        names = [
            p.metadata.name for p in client.CoreV1Api(reader).list_namespaced_pod(namespace).items
        ]
        assert names == ["p2"]
        with pytest.raises(ApiException) as excinfo:
            bind_pod(reader, namespace=namespace, pod="p2", node=kwok_nodes[0])
        assert excinfo.value.status == 403
        # Writes beyond the role are refused too, and the pod is untouched.
        with pytest.raises(ApiException) as excinfo:
            client.CoreV1Api(reader).delete_namespaced_pod("p2", namespace)
        assert excinfo.value.status == 403
    finally:
        reader.close()
    assert get_pod(kube_api, namespace=namespace, name="p2").spec.node_name is None


def test_kwok_ignores_nodes_without_its_annotation(
    kube_api: client.ApiClient, namespace: str, kwok_nodes: list[str]
) -> None:
    core = client.CoreV1Api(kube_api)
    plain = _unique("plain-node")
    core.create_node({"apiVersion": "v1", "kind": "Node", "metadata": {"name": plain}})
    try:
        create_pods(kube_api, namespace=namespace, pods=[make_pod("managed"), make_pod("orphan")])
        assert bind_pod(kube_api, namespace=namespace, pod="managed", node=kwok_nodes[0]) == 201
        assert bind_pod(kube_api, namespace=namespace, pod="orphan", node=plain) == 201
        wait_for(
            lambda: (
                get_pod(kube_api, namespace=namespace, name="managed").status.phase == "Running"
            ),
            timeout=30,
            message="the pod on the kwok node to run",
        )
        time.sleep(2.0)  # kwok had the time to act on the other one too, had it wanted to
        assert not node_is_ready(core.read_node(plain))
        assert get_pod(kube_api, namespace=namespace, name="orphan").status.phase == "Pending"
    finally:
        delete_nodes(kube_api, [plain])


def test_sigterm_during_up_stops_what_it_started(tmp_path: Path) -> None:
    """`make cluster-up` stopped by a process manager or `timeout` (SIGTERM) half-way:
    etcd and kube-apiserver, already started, are stopped as on Ctrl-C (issue 20: the
    demo stopped this way left etcd, kube-apiserver and kwok running)."""
    command = [sys.executable, "-m", "splitsched.testing.controlplane", "up"]
    up = subprocess.Popen(
        [*command, "--state-dir", str(tmp_path)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    files = ProcessFiles(tmp_path)
    try:
        wait_for(
            lambda: files.read_pid("kube-apiserver"),
            timeout=180,
            message="`controlplane up` to start kube-apiserver",
        )
        started = [pid for name in ("etcd", "kube-apiserver") if (pid := files.read_pid(name))]
        up.send_signal(signal.SIGTERM)
        _, err = up.communicate(timeout=60)
        left = [pid for pid in started if pid_alive(pid)]
    finally:
        if up.poll() is None:
            up.kill()
        ControlPlane(tmp_path).down()  # whatever the outcome, nothing stays behind
    assert up.returncode != 0, "an interrupted `up` must not report success"
    assert len(started) == 2
    assert not left, err.decode()


def test_delete_namespace_empties_it_a_page_at_a_time(
    kube_api: client.ApiClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The bench empties namespaces of 20,000 pods: one delete-collection of them all
    outlasts the server's request timeout, so pods go a page at a time (here 2 of 5)."""
    monkeypatch.setattr(kube_module, "POD_DELETE_PAGE", 2)
    name = create_namespace(kube_api, prefix="paged-delete")
    create_pods(kube_api, namespace=name, pods=[make_pod(f"p{i}") for i in range(5)])
    delete_namespace(kube_api, name)
    core = client.CoreV1Api(kube_api)
    assert core.list_namespaced_pod(name).items == []
    with pytest.raises(ApiException) as excinfo:
        core.read_namespace(name)
    assert excinfo.value.status == 404
