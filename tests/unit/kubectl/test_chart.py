"""Finding the chart's scheduler from its pods (`splitsched.kubectl.chart`): a ready pod
of one release, its gRPC port, the ops certificate's Secret beside its own, the Lease
holder among several. The pods are shaped as helm/splitsched renders them (the
integration test test_kubectl_plugin.py checks the rendered chart against this)."""

from __future__ import annotations

from typing import Any

import pytest

from splitsched.kubectl import chart


def pod(
    name: str,
    *,
    namespace: str = "splitsched",
    release: str = "splitsched",
    ready: bool = True,
    tls_secret: str | None = "splitsched-scheduler-tls",
    lease: str | None = None,
) -> dict[str, Any]:
    args = ["--listen=0.0.0.0:50050"]
    if tls_secret:
        args += ["--tls-cert=/etc/splitsched-tls/tls.crt", "--tls-key=/etc/splitsched-tls/tls.key"]
    if lease:
        args += ["--leader-elect", f"--lease-name={lease}"]
    volumes = [{"name": "tls", "secret": {"secretName": tls_secret}}] if tls_secret else []
    return {
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": {"app.kubernetes.io/instance": release},
        },
        "spec": {
            "containers": [
                {
                    "name": "scheduler",
                    "args": args,
                    "ports": [
                        {"name": "grpc", "containerPort": 50051},
                        {"name": "http", "containerPort": 9090},
                    ],
                }
            ],
            "volumes": [{"name": "profiles", "configMap": {"name": "x"}}, *volumes],
        },
        "status": {
            "phase": "Running",
            "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
        },
    }


def test_a_ready_scheduler_with_the_chart_s_certificates() -> None:
    [found] = chart.choose([pod("s-1", ready=False), pod("s-2")], where="any namespace")
    assert found == chart.Scheduler(
        namespace="splitsched", pod="s-2", port=50051, ops_secret="splitsched-ops-tls", lease=None
    )


def test_a_shared_secret_is_the_ops_certificate_and_plaintext_has_none() -> None:
    assert chart.describe(pod("s", tls_secret="team-tls")).ops_secret == "team-tls"
    assert chart.describe(pod("s", tls_secret=None)).ops_secret is None


def test_no_ready_pod_or_several_releases_say_what_to_give() -> None:
    with pytest.raises(chart.ChartError, match=r"no ready .* in any namespace \(1 not ready\)"):
        chart.choose([pod("s", ready=False)], where="any namespace")
    with pytest.raises(chart.ChartError, match="give --server"):
        chart.choose([], where="namespace x")
    two = [pod("a"), pod("b", namespace="other", release="prod")]
    with pytest.raises(chart.ChartError, match=r"\(other/prod, splitsched/splitsched\): give --"):
        chart.choose(two, where="any namespace")


def test_of_several_replicas_the_lease_holder_is_reached() -> None:
    replicas = chart.choose(
        [pod("s-b", lease="splitsched-scheduler"), pod("s-a", lease="splitsched-scheduler")],
        where="namespace splitsched",
    )
    assert [s.pod for s in replicas] == ["s-a", "s-b"]
    assert replicas[0].lease == "splitsched-scheduler"
    assert chart.leader(replicas, "s-b").pod == "s-b"
    assert chart.leader(replicas, None).pod == "s-a"
    assert chart.leader(replicas, "gone").pod == "s-a"


def test_a_tls_scheduler_without_its_secret_volume_is_refused() -> None:
    broken = pod("s")
    broken["spec"]["volumes"] = []
    with pytest.raises(chart.ChartError, match="give --ca --cert --key"):
        chart.describe(broken)
