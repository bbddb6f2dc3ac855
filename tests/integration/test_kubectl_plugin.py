"""`kubectl splitsched` (the CLI installed as ``kubectl-splitsched``) on the real control
plane:

* run by the real kubectl against `splitsched up`: ``explain NAME`` resolves the pod in
  the kubeconfig context's namespace, ``--context`` picks the context;
* without ``--server`` it finds the chart's scheduler pod by its labels, reads the ops
  certificate Secret beside the scheduler's own, and talks mutual TLS through its
  port-forward relay. kwok nodes serve no ``pods/portforward``, so here the relay's far
  end dials `up`'s scheduler directly (`pod_dialer` replaced); the stream through a real
  kubelet is the real-node tier's (tests/realnode);
* what it reads from the scheduler pod is what helm/splitsched renders.
"""

from __future__ import annotations

import base64
import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from splitsched import kubectl as plugin
from splitsched.kubectl import chart, portforward
from splitsched.testing import controlplane, kube
from tests.support.fixtures import ControlPlaneHandle
from tests.support.helm import one, render
from tests.support.up import UpSession, cli_env, up_on_admin_context

NODE_LABEL = "splitsched.io/test-kubectl-plugin"


@pytest.fixture
def up(
    control_plane: ControlPlaneHandle, kube_api: client.ApiClient, namespace: str, tmp_path: Path
) -> Iterator[UpSession]:
    """`splitsched up` on a kubeconfig whose good context's namespace is the test's, with
    one kwok node for our pods."""
    with up_on_admin_context(
        control_plane.kubeconfig_path,
        kube_api,
        namespace=namespace,
        directory=tmp_path,
        label=NODE_LABEL,
        context_namespace=namespace,
    ) as session:
        yield session


def _kubectl_splitsched(
    kubeconfig: Path, state: Path, *args: str
) -> subprocess.CompletedProcess[str]:
    """``kubectl splitsched ARGS`` as a user runs it: both on PATH, `up`'s settings in the
    environment."""
    controlplane.ensure_binaries(("kubectl",))
    plugin_bin = Path(sys.executable).parent / "kubectl-splitsched"
    assert plugin_bin.is_file(), "reinstall the package (make .venv/.installed)"
    path = f"{controlplane.binary_path('kubectl').parent}:{plugin_bin.parent}:/usr/bin:/bin"
    env = {**cli_env(state), "PATH": path, "KUBECONFIG": str(kubeconfig), "HOME": str(state)}
    return subprocess.run(
        ["kubectl", "splitsched", *args],
        capture_output=True, text=True, env=env, timeout=60, check=False,
    )  # fmt: skip


def test_kubectl_splitsched_explain_uses_the_context_s_namespace(
    up: UpSession, kube_api: client.ApiClient, namespace: str
) -> None:
    kubeconfig, state = up.kubeconfig, up.state
    unfit = kube.make_pod("unfit", node_selector={NODE_LABEL: "nowhere"})
    kube.create_pods(kube_api, namespace=namespace, pods=[unfit])
    kube.wait_for(
        lambda: (
            "unfit" in _kubectl_splitsched(kubeconfig, state, "pods", "--context", "admin").stdout
        ),
        timeout=30,
        message="the scheduler to track the pod",
    )
    explained = _kubectl_splitsched(kubeconfig, state, "explain", "unfit", "--context", "admin")
    assert explained.returncode == 0, explained.stderr
    assert explained.stdout.startswith(f"pod {namespace}/unfit: WAITING\n")
    assert "didn't match Pod's node affinity/selector" in explained.stdout
    listed = _kubectl_splitsched(kubeconfig, state, "pods", "--pending", "--context", "admin")
    assert f"{namespace}/unfit" in listed.stdout
    missing = _kubectl_splitsched(kubeconfig, state, "explain", "nope", "--context", "admin")
    assert missing.returncode == 4 and f"{namespace}/nope" in missing.stderr
    # The current context has no namespace: "default", where no such pod is.
    other = _kubectl_splitsched(kubeconfig, state, "explain", "unfit")
    assert other.returncode == 4 and "default/unfit" in other.stderr


def _chart_like_scheduler(
    kube_api: client.ApiClient, namespace: str, node: str, state: Path
) -> None:
    """A pod as the chart's scheduler looks (labels, args, port, its 'tls' Secret volume)
    on a kwok node, and the release's ops Secret holding `up`'s ops certificate."""
    tls = state / "tls"
    data = {
        "ca.crt": (tls / "ca.crt").read_bytes(),
        "tls.crt": (tls / "ops.crt").read_bytes(),
        "tls.key": (tls / "ops.key").read_bytes(),
    }
    core = client.CoreV1Api(kube_api)
    core.create_namespaced_secret(
        namespace,
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": "rel-ops-tls"},
            "type": "kubernetes.io/tls",
            "data": {k: base64.b64encode(v).decode() for k, v in data.items()},
        },
    )
    labels = dict(kv.split("=") for kv in chart.SELECTOR.split(","))
    pod: dict[str, Any] = kube.make_pod("rel-scheduler-0")
    pod["metadata"]["labels"] = {**labels, chart.INSTANCE_LABEL: "rel"}
    pod["spec"]["nodeName"] = node
    main = pod["spec"]["containers"][0]
    main["args"] = ["--listen=0.0.0.0:50050", "--tls-cert=/etc/splitsched-tls/tls.crt"]
    main["ports"] = [{"name": "grpc", "containerPort": 50050}]
    pod["spec"]["volumes"] = [{"name": "tls", "secret": {"secretName": "rel-scheduler-tls"}}]
    core.create_namespaced_pod(namespace, pod)


def test_without_server_it_finds_the_chart_s_scheduler_and_ops_certificate(
    up: UpSession,
    kube_api: client.ApiClient,
    namespace: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    kubeconfig, state = up.kubeconfig, up.state
    _chart_like_scheduler(kube_api, namespace, up.nodes[0], state)
    kube.wait_for(
        lambda: chart.ready(kube_api.sanitize_for_serialization(
            kube.get_pod(kube_api, namespace=namespace, name="rel-scheduler-0"))),
        timeout=60, message="kwok to run the scheduler-like pod",
    )  # fmt: skip
    scheduler = cli_env(state)["SPLITSCHED_SERVER"].rsplit(":", 1)
    asked: list[tuple[str, str, int]] = []

    def dialer(api: Any, *, namespace: str, pod: str, port: int) -> portforward.Dial:
        asked.append((namespace, pod, port))
        return lambda: socket.create_connection((scheduler[0], int(scheduler[1])), timeout=10)

    monkeypatch.setattr(portforward, "pod_dialer", dialer)
    for var in ("SPLITSCHED_SERVER", "SPLITSCHED_CA", "SPLITSCHED_CERT", "SPLITSCHED_KEY"):
        monkeypatch.delenv(var, raising=False)
    argv = ["pods", "--kubeconfig", str(kubeconfig), "--context", "admin", "-A", "-o", "json"]
    assert plugin.main(argv) == 0, capsys.readouterr().err
    assert '"name": "rel-scheduler-0"' in capsys.readouterr().out  # the scheduler sees it bound
    assert asked == [(namespace, "rel-scheduler-0", 50050)]
    denied = plugin.main([*argv, "--cert", os.devnull, "--key", os.devnull])
    assert denied == 3  # the (empty) certificate of the flags was used, not the Secret's
    assert up.run.proc.poll() is None


def test_what_the_plugin_reads_is_what_the_chart_renders() -> None:
    controlplane.ensure_binaries(("helm",))
    helm = controlplane.binary_path("helm")

    def scheduler_pod(*sets: str) -> chart.Scheduler:
        docs = render(helm, release="prod", namespace="ops", sets=sets)
        template = one(docs, "Deployment", "scheduler")["spec"]["template"]
        labels = template["metadata"]["labels"]
        for kv in chart.SELECTOR.split(","):
            key, _, value = kv.partition("=")
            assert labels[key] == value
        pod = {"metadata": {"name": "prod-splitsched-scheduler-x", "namespace": "ops"},
               "spec": template["spec"]}  # fmt: skip
        secrets = {d["metadata"]["name"] for d in docs if d["kind"] == "Secret"}
        found = chart.describe(pod)
        assert found.ops_secret is None or found.ops_secret in secrets
        return found

    default = scheduler_pod()
    assert (default.port, default.ops_secret, default.lease) == (
        50050,
        "prod-splitsched-ops-tls",
        None,
    )
    ha = scheduler_pod("scheduler.replicas=2", "scheduler.leaderElection.enabled=true")
    assert ha.lease == "prod-splitsched-scheduler"
    assert scheduler_pod("tls.enabled=false").ops_secret is None
