"""The Helm chart on a real node: our three images run under a real kubelet with
in-cluster configuration, schedule real pods, scale, upgrade and uninstall, and the host
is left as it was (issue 15). Runs only in ``make test-realnode`` (see conftest.py)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from splitsched.testing import kube, manifests
from splitsched.testing.controlplane import binary_path
from splitsched.testing.realnode import RealCluster, network
from tests.realnode.conftest import CHART, IMAGE_VALUES, RELEASE, Tools

COMPONENTS = ("watcher", "scheduler", "binder")
SCHEDULER_NAME = "splitsched"
PAUSE = "localhost/splitsched-pause:1.0"
WORK = "realnode-work"
KWOK_TAINT = {"key": "kwok.x-k8s.io/node", "value": "fake", "effect": "NoSchedule"}
KWOK_TOLERATION = {**KWOK_TAINT, "operator": "Equal"}


@pytest.fixture(scope="module")
def core(real_cluster: RealCluster) -> client.CoreV1Api:
    return client.CoreV1Api(kube.api_client_from_kubeconfig(real_cluster.kubeconfig_path))


@pytest.fixture(scope="module")
def kwok_nodes(real_cluster: RealCluster) -> list[str]:
    api = kube.api_client_from_kubeconfig(real_cluster.kubeconfig_path)
    # Tainted, as kwok's nodes should be in a cluster with real ones: nothing runs there
    # unless it says so (the chart's own pods must land on the real node).
    return kube.create_kwok_nodes(
        api, 2, name_prefix="kwok", cpu="8", memory="16Gi", taints=[KWOK_TAINT]
    )


@pytest.fixture(scope="module")
def work(real_cluster: RealCluster, tools: Tools) -> str:
    tools.kubectl("create", "namespace", WORK)
    return WORK


def chart_pods(core: client.CoreV1Api, namespace: str) -> list[Any]:
    selector = f"app.kubernetes.io/instance={RELEASE}"
    return list(core.list_namespaced_pod(namespace, label_selector=selector).items)


def ready(pod: Any) -> bool:
    conditions = {c.type: c.status for c in (pod.status.conditions or [])}
    statuses = pod.status.container_statuses or []
    return conditions.get("Ready") == "True" and bool(statuses) and all(s.ready for s in statuses)


def test_every_chart_pod_runs_ready_on_the_real_node(
    release: str, core: client.CoreV1Api, real_cluster: RealCluster
) -> None:
    pods = chart_pods(core, release)
    assert {p.metadata.labels["app.kubernetes.io/component"] for p in pods} == set(COMPONENTS)
    for pod in pods:
        assert pod.spec.node_name == real_cluster.layout.node_name
        assert ready(pod), f"{pod.metadata.name} not Ready: {pod.status}"
        container = pod.spec.containers[0]
        assert container.readiness_probe and container.liveness_probe, pod.metadata.name
        assert container.image.startswith("localhost/splitsched-"), container.image
        assert all(s.restart_count == 0 for s in pod.status.container_statuses), pod.status


def test_no_probe_fails_because_a_component_is_not_listening_yet(
    release: str, core: client.CoreV1Api
) -> None:
    """The startup probe holds readiness and liveness back until the process serves."""
    events = core.list_namespaced_event(release, field_selector="reason=Unhealthy").items
    refused = [
        e.message
        for e in events
        if e.message.startswith(("Readiness probe", "Liveness probe"))
        and "connection refused" in e.message
    ]
    assert refused == []


def test_kubectl_logs_show_each_components_start_line(release: str, tools: Tools) -> None:
    for component in COMPONENTS:
        logs = tools.kubectl("logs", "-n", release, f"deployment/{RELEASE}-{component}")
        assert f"splitsched-{component} listening grpc=" in logs, logs[-2000:]


def pod_on(name: str, node_type: str, *, real_node: str) -> dict[str, Any]:
    """A pause pod for our scheduler, pinned to the real node or to kwok's nodes."""
    if node_type == "real":
        selector = {"kubernetes.io/hostname": real_node}
        return manifests.make_pod(
            name, scheduler_name=SCHEDULER_NAME, image=PAUSE, node_selector=selector
        )
    return manifests.make_pod(
        name,
        scheduler_name=SCHEDULER_NAME,
        node_selector={"type": "kwok"},
        tolerations=[KWOK_TOLERATION],
    )


def test_pods_are_scheduled_onto_the_real_and_kwok_nodes(
    release: str,
    core: client.CoreV1Api,
    real_cluster: RealCluster,
    kwok_nodes: list[str],
    work: str,
) -> None:
    node = real_cluster.layout.node_name
    pods = [pod_on(f"real-{i}", "real", real_node=node) for i in range(3)]
    pods += [pod_on(f"kwok-{i}", "kwok", real_node=node) for i in range(3)]
    for pod in pods:
        core.create_namespaced_pod(work, pod)

    def all_running() -> list[Any] | None:
        listed = core.list_namespaced_pod(work).items
        mine = [p for p in listed if p.metadata.name.startswith(("real-", "kwok-"))]
        return mine if len(mine) == 6 and all(p.status.phase == "Running" for p in mine) else None

    running = kube.wait_for(all_running, timeout=120, interval=1.0, message="6 pods Running")
    placed = {p.metadata.name: p.spec.node_name for p in running}
    assert all(placed[f"real-{i}"] == node for i in range(3)), placed
    assert all(placed[f"kwok-{i}"] in kwok_nodes for i in range(3)), placed
    # On the real node the containers really run: the kubelet reports them ready, with
    # pod addresses from the node's bridge.
    for pod in running:
        if pod.spec.node_name == node:
            assert ready(pod), pod.status
            assert pod.status.pod_ip.startswith("10.85.0."), pod.status.pod_ip


PROBE = """
import json, socket
def tcp(host, port):
    try:
        socket.create_connection((host, port), timeout=3).close()
        return "open"
    except OSError as exc:
        return type(exc).__name__
def name(host):
    try:
        return socket.gethostbyname(host)
    except OSError:
        return "unresolved"
print(json.dumps({
    "api": tcp("kubernetes.default.svc", 443),
    "scheduler": tcp("%(scheduler)s", 50050),
    "outside_name": name("pypi.org"),
    "outside_address": tcp("%(gateway)s", 443),
}))
"""


def guard_drops() -> int:
    """Packets the forward guard dropped so far (they tried to leave the bridge)."""
    listing = subprocess.run(
        ["iptables", "-L", network.GUARD_CHAIN, "-v", "-x", "-n"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return sum(int(line.split()[0]) for line in listing.splitlines() if " DROP " in line)


def default_gateway() -> str:
    route = subprocess.run(["ip", "-4", "route", "show", "default"], capture_output=True, text=True)
    return route.stdout.split()[2]


def test_pods_reach_the_api_server_and_each_other_and_nothing_else(
    release: str, tools: Tools, core: client.CoreV1Api
) -> None:
    """In-cluster names resolve and connect (through kube-proxy's Service rules); a name
    outside the cluster does not resolve (CoreDNS has no forwarder), and a packet for an
    address outside the machine is dropped by the forward guard."""
    watcher = next(
        p.metadata.name for p in chart_pods(core, release) if "watcher" in p.metadata.name
    )
    scheduler = f"{RELEASE}-scheduler.{release}.svc.cluster.local"
    script = PROBE % {"scheduler": scheduler, "gateway": default_gateway()}
    dropped = guard_drops()
    result = json.loads(tools.kubectl("exec", "-n", release, watcher, "--", "python", "-c", script))
    assert result["api"] == "open" and result["scheduler"] == "open", result
    assert result["outside_name"] == "unresolved", result
    assert result["outside_address"] != "open", result
    assert guard_drops() > dropped, "the packet for an outside address was not stopped"


def binder_metric(tools: Tools, namespace: str, pod: str) -> float:
    """Bindings this binder made, read through ``kubectl exec`` from its metrics endpoint."""
    script = (
        "import urllib.request;"
        "print(urllib.request.urlopen('http://127.0.0.1:9092/metrics', timeout=5).read().decode())"
    )
    text = tools.kubectl("exec", "-n", namespace, pod, "--", "python", "-c", script)
    total = 0.0
    for line in text.splitlines():
        match = re.match(r'splitsched_binder_outcomes_total\{result="BOUND"\} (\S+)', line)
        if match:
            total += float(match.group(1))
    return total


def test_a_binder_scaled_to_three_replicas_gets_work(
    release: str, tools: Tools, core: client.CoreV1Api, kwok_nodes: list[str], work: str
) -> None:
    deployment = f"deployment/{RELEASE}-binder"
    tools.kubectl("scale", "-n", release, deployment, "--replicas=3")
    tools.kubectl("rollout", "status", "-n", release, deployment, "--timeout=180s")
    binders = [p for p in chart_pods(core, release) if "binder" in p.metadata.name]
    binders = [p.metadata.name for p in binders if ready(p)]
    assert len(binders) == 3, binders
    before = {b: binder_metric(tools, release, b) for b in binders}

    def every_binder_worked() -> dict[str, float] | None:
        batch = len(core.list_namespaced_pod(work).items)
        for i in range(batch, batch + 12):
            core.create_namespaced_pod(work, pod_on(f"spread-{i}", "kwok", real_node=""))
        after = {b: binder_metric(tools, release, b) for b in binders}
        return after if all(after[b] > before[b] for b in binders) else None

    after = kube.wait_for(
        every_binder_worked, timeout=150, interval=5.0, message="all 3 binders bind"
    )
    assert all(after[b] > before[b] for b in binders), (before, after)


def deployment_args(tools: Tools, namespace: str, component: str) -> list[str]:
    doc = json.loads(
        tools.kubectl("get", "-n", namespace, f"deployment/{RELEASE}-{component}", "-o", "json")
    )
    return list(doc["spec"]["template"]["spec"]["containers"][0].get("args", []))


def test_helm_upgrade_with_changed_values_rolls_the_components(
    release: str, tools: Tools, core: client.CoreV1Api
) -> None:
    old = {p.metadata.uid for p in chart_pods(core, release)}
    sets = [arg for value in (*IMAGE_VALUES, "global.logLevel=DEBUG") for arg in ("--set", value)]
    tools.helm(
        "upgrade", RELEASE, str(CHART),
        "--namespace", release, "--reuse-values", "--wait", "--timeout", "5m", *sets,
    )  # fmt: skip
    for component in COMPONENTS:
        tools.kubectl(
            "rollout",
            "status",
            "-n",
            release,
            f"deployment/{RELEASE}-{component}",
            "--timeout=180s",
        )

    def rolled() -> list[Any] | None:
        pods = [p for p in chart_pods(core, release) if p.metadata.deletion_timestamp is None]
        fresh = [p for p in pods if p.metadata.uid not in old]
        return pods if pods and len(fresh) == len(pods) and all(map(ready, pods)) else None

    pods = kube.wait_for(rolled, timeout=180, interval=2.0, message="every chart pod replaced")
    assert {p.metadata.labels["app.kubernetes.io/component"] for p in pods} == set(COMPONENTS)
    for pod in pods:
        env_and_args = json.dumps(pod.spec.containers[0].to_dict())
        assert "DEBUG" in env_and_args, pod.metadata.name


def test_kubectl_splitsched_reaches_the_scheduler_through_its_own_port_forward(
    release: str, tools: Tools, real_cluster: RealCluster
) -> None:
    """The kubectl plugin with no --server (issue 20): it finds the chart's scheduler pod,
    reads the ops certificate Secret, and talks mutual TLS through the port-forward it
    opens itself over pods/portforward to the real kubelet."""
    plugin = Path(sys.executable).parent / "kubectl-splitsched"
    kubectl_dir = binary_path("kubectl").parent
    env = {
        "PATH": f"{kubectl_dir}:{plugin.parent}:/usr/bin:/bin",
        "KUBECONFIG": str(tools.kubeconfig),
    }

    def plugin_run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            ["kubectl", "splitsched", *args],
            capture_output=True, text=True, env=env, timeout=120, check=False,
        )  # fmt: skip

    nodes = plugin_run("nodes")
    assert nodes.returncode == 0, nodes.stderr
    assert real_cluster.layout.node_name in nodes.stdout
    pods = plugin_run("pods", "-A", "-o", "json", "--splitsched-namespace", release)
    assert pods.returncode == 0, pods.stderr
    assert '"state": "BOUND"' in pods.stdout


def test_helm_uninstall_leaves_nothing_behind(release: str, tools: Tools) -> None:
    tools.helm("uninstall", RELEASE, "--namespace", release, "--wait", "--timeout", "3m")
    selector = f"app.kubernetes.io/instance={RELEASE}"
    kinds = "all,configmaps,secrets,serviceaccounts,roles,rolebindings,networkpolicies,pdb,leases"

    def gone() -> bool:
        left = tools.kubectl("get", kinds, "-n", release, "-l", selector, "-o", "name")
        return not left.strip()

    kube.wait_for(gone, timeout=120, interval=2.0, message="the release's objects deleted")
    cluster_wide = tools.kubectl(
        "get", "clusterroles,clusterrolebindings", "-l", selector, "-o", "name"
    )
    assert not cluster_wide.strip(), cluster_wide


def test_teardown_leaves_the_host_as_it_was(real_cluster: RealCluster) -> None:
    """Last: stop everything now and compare the host with the record taken before."""
    real_cluster.down()
    assert real_cluster.leftovers() == []
