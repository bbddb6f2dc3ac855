"""Metrics and health of the three services as real processes (the module's `running_stack`:
a watcher, three binders and a scheduler against the real control plane).

* /metrics of every service is Prometheus text with the documented metrics
  (docs/observability.md), and the counters move as pods bind;
* every metric the chart's Grafana dashboard and PrometheusRule alerts query is served,
  and an unfit pod counts against the plugin that rejected it;
* the standard gRPC health service answers SERVING (what `grpc_health_probe` and the
  kubelet's gRPC probes call) and server reflection lists each service, to any client
  with a certificate the stack's CA signed (the stack is mutual TLS; neither is restricted);
* readiness is false until the watch has synced, and the scheduler's /readyz also waits
  for a SERVING binder.
"""

from __future__ import annotations

import subprocess
import urllib.error
import urllib.request
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc
from kubernetes import client
from prometheus_client.parser import text_string_to_metric_families

from splitsched.launch import processes
from splitsched.testing import controlplane, kube, stack
from tests.support import promql
from tests.support.helm import CHART

pytestmark = pytest.mark.e2e

Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]

DASHBOARD = CHART / "files" / "grafana-dashboard.json"
RULES = CHART / "files" / "prometheus-rules.yaml"
SERVICE_NAMES = {
    "watcher": "splitsched.v1.Watcher",
    "scheduler": "splitsched.v1.Scheduler",
    "binder": "splitsched.v1.Binder",
}
# The metrics docs/observability.md lists, by service (families, as Prometheus names them).
EXPECTED = {
    "watcher": {
        "splitsched_watcher_events",
        "splitsched_watcher_relists",
        "splitsched_watcher_subscribers",
        "splitsched_watcher_ring_events",
        "splitsched_watcher_subscriber_lag_events",
        "splitsched_tls_certificate_expiry_seconds",
    },
    "scheduler": {
        "scheduler_schedule_attempts",
        "scheduler_scheduling_attempt_duration_seconds",
        "scheduler_pod_scheduling_sli_duration_seconds",
        "scheduler_pod_scheduling_attempts",
        "splitsched_pod_creation_to_bound_seconds",
        "scheduler_pending_pods",
        "splitsched_scheduler_pods_bound",
        "splitsched_scheduler_binding_outcomes",
        "splitsched_scheduler_watch_events",
        "splitsched_scheduler_binders_reachable",
        "splitsched_scheduler_plugin_rejections",
        "splitsched_scheduler_leader",
        "splitsched_scheduler_binder_calls_in_flight",
        "splitsched_scheduler_decisions_in_flight",
        "splitsched_grpc_stream_reconnects",
        "splitsched_tls_certificate_expiry_seconds",
    },
    "binder": {
        "splitsched_binder_binding_attempts",
        "splitsched_binder_outcomes",
        "splitsched_binder_bind_duration_seconds",
        "splitsched_binder_inflight",
        "splitsched_binder_report_backlog",
        "splitsched_binder_queued",
        "splitsched_binder_side_writes",
        "splitsched_binder_api_requests",
        "splitsched_grpc_stream_reconnects",
        "splitsched_tls_certificate_expiry_seconds",
    },
}


def scrape(svc: stack.Service) -> tuple[set[str], Samples]:
    """(metric family names, every sample by name and labels)."""
    families = list(text_string_to_metric_families(svc.metrics()))
    samples: Samples = {}
    for family in families:
        for s in family.samples:
            samples[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return {f.name for f in families}, samples


def total(samples: Samples, name: str, **labels: str) -> float:
    """Sum of `name`'s samples whose labels include `labels`."""
    want = set(labels.items())
    return sum(v for (n, lbl), v in samples.items() if n == name and want <= set(lbl))


def cluster_total(services: Sequence[stack.Service], name: str, **labels: str) -> float:
    return sum(total(scrape(s)[1], name, **labels) for s in services)


def http_status(url: str) -> int:
    try:
        with urllib.request.urlopen(url, timeout=5) as resp:
            return int(resp.status)
    except urllib.error.HTTPError as exc:
        return int(exc.code)
    except (urllib.error.URLError, OSError):
        return 0  # nothing listening (yet)


def grpc_health(running: stack.Stack, target: str, service: str = "") -> str:
    """What `grpc_health_probe -addr=<target> -service=<service>` would print, with the
    stack's `ops` client certificate."""
    with running.channel(target) as channel:
        try:
            resp = health_pb2_grpc.HealthStub(channel).Check(
                health_pb2.HealthCheckRequest(service=service), timeout=5
            )
        except grpc.RpcError as exc:
            return str(exc.code().name)
    return str(health_pb2.HealthCheckResponse.ServingStatus.Name(resp.status))


def reflected_services(running: stack.Stack, target: str) -> set[str]:
    with running.channel(target) as channel:
        stub = reflection_pb2_grpc.ServerReflectionStub(channel)
        request = reflection_pb2.ServerReflectionRequest(list_services="")
        responses = list(stub.ServerReflectionInfo(iter([request]), timeout=5))
    return {s.name for r in responses for s in r.list_services_response.service}


def role(svc: stack.Service) -> str:
    return "binder" if svc.name.startswith("binder") else svc.name


def test_every_service_exposes_its_metrics(running_stack: stack.Stack) -> None:
    for svc in running_stack.services:
        names, _ = scrape(svc)
        missing = EXPECTED[role(svc)] - names
        assert not missing, f"{svc.name} lacks {sorted(missing)}"


def test_dashboard_and_alerts_name_only_served_metrics(running_stack: stack.Stack) -> None:
    """Every metric the chart's Grafana dashboard and PrometheusRule query is one a running
    service serves, as the sample name its type gives (a counter's `_total`, a histogram's
    `_bucket`, ...): a renamed metric or a typo in a query fails here."""
    served: set[str] = set()
    for svc in running_stack.services:
        families = text_string_to_metric_families(svc.metrics())
        served |= promql.served_names((f.name, f.type) for f in families)
    queries = {f"dashboard: {e}": e for e in promql.dashboard_exprs(DASHBOARD)}
    queries |= {f"alert {a}": e for a, e in promql.rule_exprs(RULES).items()}
    named = {where: promql.metric_names(expr) for where, expr in queries.items()}
    unserved = {where: sorted(names - served) for where, names in named.items() if names - served}
    assert not unserved, unserved
    everything = set().union(*named.values())
    assert len(everything) >= 15, everything
    assert {"splitsched_watcher_subscriber_lag_events",
            "splitsched_scheduler_plugin_rejections_total"} <= everything  # fmt: skip


def test_counters_move_as_pods_bind(
    running_stack: stack.Stack, kube_api: client.ApiClient, namespace: str
) -> None:
    watcher, scheduler = running_stack.watcher, running_stack.scheduler
    binders = running_stack.binder_services
    _, w0 = scrape(watcher)
    _, s0 = scrape(scheduler)
    b0 = {
        name: cluster_total(binders, name, **labels)
        for name, labels in (
            ("splitsched_binder_binding_attempts_total", {"code": "201"}),
            ("splitsched_binder_outcomes_total", {"result": "BOUND"}),
            ("splitsched_binder_bind_duration_seconds_count", {}),
        )
    }
    n = 12
    kube.create_pods(kube_api, namespace=namespace, pods=kube.make_pods(n, name_prefix="m"))
    core = client.CoreV1Api(kube_api)
    kube.wait_for(
        lambda: sum(1 for p in core.list_namespaced_pod(namespace).items if p.spec.node_name) == n,
        timeout=60,
        interval=0.5,
        message="pods bound",
    )
    bound0 = total(s0, "splitsched_scheduler_pods_bound_total")
    kube.wait_for(
        lambda: total(scrape(scheduler)[1], "splitsched_scheduler_pods_bound_total") >= bound0 + n,
        timeout=30,
        message="the scheduler to count the bindings",
    )
    _, w1 = scrape(watcher)
    _, s1 = scrape(scheduler)

    def grew(before: Samples, after: Samples, name: str, **labels: str) -> float:
        return total(after, name, **labels) - total(before, name, **labels)

    # Watcher: each pod was at least ADDED pending and MODIFIED when bound.
    assert grew(w0, w1, "splitsched_watcher_events_total", resource="pods") >= 2 * n
    assert total(w1, "splitsched_watcher_relists_total", resource="pods", reason="initial") >= 1
    # Scheduler: attempts, cycle latency, SLI and creation-to-bound, bound pods.
    profile = {"profile": "splitsched"}
    assert grew(s0, s1, "scheduler_schedule_attempts_total", result="scheduled", **profile) >= n
    cycle = "scheduler_scheduling_attempt_duration_seconds_count"
    assert grew(s0, s1, cycle, result="scheduled", **profile) >= n
    assert grew(s0, s1, "scheduler_pod_scheduling_sli_duration_seconds_count") >= n
    assert grew(s0, s1, "splitsched_pod_creation_to_bound_seconds_count") >= n
    assert grew(s0, s1, "scheduler_pod_scheduling_attempts_count") >= n
    assert grew(s0, s1, "splitsched_scheduler_pods_bound_total") >= n
    assert grew(s0, s1, "splitsched_scheduler_binding_outcomes_total", result="BOUND") >= n
    assert grew(s0, s1, "splitsched_scheduler_watch_events_total", type="MODIFIED") >= n
    assert total(s1, "splitsched_scheduler_binders_reachable") == 1
    assert {"active", "backoff", "unschedulable"} <= {
        dict(lbl).get("queue") for (name, lbl) in s1 if name == "scheduler_pending_pods"
    }
    # Binders: Binding API calls answered 201, BOUND outcomes, bind latency observations.
    for name, labels in (
        ("splitsched_binder_binding_attempts_total", {"code": "201"}),
        ("splitsched_binder_outcomes_total", {"result": "BOUND"}),
        ("splitsched_binder_bind_duration_seconds_count", {}),
    ):
        assert cluster_total(binders, name, **labels) - b0[name] >= n, name


def test_an_unfit_pod_counts_against_the_plugin_that_rejected_it(
    running_stack: stack.Stack, kube_api: client.ApiClient, namespace: str
) -> None:
    """The dashboard's "failures per plugin": a pod no node has room for is rejected by
    NodeResourcesFit, and the scheduler counts it under that plugin."""
    rejections = "splitsched_scheduler_plugin_rejections_total"
    labels = {"plugin": "NodeResourcesFit", "profile": "splitsched"}
    before = total(scrape(running_stack.scheduler)[1], rejections, **labels)
    kube.create_pods(
        kube_api, namespace=namespace, pods=kube.make_pods(1, name_prefix="huge", cpu="1000")
    )
    kube.wait_for(
        lambda: total(scrape(running_stack.scheduler)[1], rejections, **labels) > before,
        timeout=30,
        message="the rejection counted under NodeResourcesFit",
    )


def test_grpc_health_and_reflection_on_every_service(running_stack: stack.Stack) -> None:
    for svc in running_stack.services:
        service = SERVICE_NAMES[role(svc)]
        assert grpc_health(running_stack, svc.grpc_target) == "SERVING", svc.name
        assert grpc_health(running_stack, svc.grpc_target, service) == "SERVING", svc.name
        assert grpc_health(running_stack, svc.grpc_target, "no.such.Service") == "NOT_FOUND", (
            svc.name
        )
        listed = reflected_services(running_stack, svc.grpc_target)
        assert {service, "grpc.health.v1.Health"} <= listed, (svc.name, listed)
        assert http_status(f"{svc.http_url}/healthz") == 200
        assert http_status(f"{svc.http_url}/readyz") == 200


@contextmanager
def process(
    running: stack.Stack,
    name: str,
    module: str,
    args: Sequence[str],
    workdir: Path,
    *,
    grpc_port: int = 0,
) -> Iterator[stack.Service]:
    """One service process (``services.<component>``) beside ``running``, with its TLS
    flags, on free ports (or gRPC on `grpc_port`), terminated (then killed) on exit."""
    grpc_port, http_port = grpc_port or controlplane.free_port(), controlplane.free_port()
    argv = processes.service_argv(
        module,
        listen=f"127.0.0.1:{grpc_port}",
        http_port=http_port,
        args=[*running.tls_args(module.rpartition(".")[2]), *args],
    )
    svc = stack.Service(name, argv, workdir / f"{name}.log", grpc_port, http_port)
    processes.start(svc, cwd=controlplane.REPO_ROOT)
    assert svc.proc is not None
    try:
        kube.wait_for(
            lambda: http_status(f"{svc.http_url}/healthz") == 200 or not svc.alive(),
            timeout=30,
            message=f"{name} to serve HTTP",
        )
        assert svc.alive(), svc.log_tail()
        yield svc
    finally:
        svc.proc.terminate()
        try:
            svc.proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            svc.proc.kill()
            svc.proc.wait(timeout=5)


def test_scheduler_is_not_ready_before_its_watch_has_synced(
    running_stack: stack.Stack, tmp_path: Path
) -> None:
    binders = ",".join(b.grpc_target for b in running_stack.binder_services)
    watcher_port = controlplane.free_port()
    args = ["--watcher", f"127.0.0.1:{watcher_port}", "--binders", f"ipv4:{binders}",
            "--scheduler-id", "not-yet"]  # fmt: skip
    with process(
        running_stack, "scheduler-early", "services.scheduler", args, tmp_path
    ) as scheduler:
        # No watcher yet: alive, not ready, gRPC NOT_SERVING, even with binders SERVING.
        kube.wait_for(
            lambda: total(scrape(scheduler)[1], "splitsched_scheduler_binders_reachable") == 1,
            timeout=30,
            message="the scheduler to see a SERVING binder",
        )
        assert http_status(f"{scheduler.http_url}/healthz") == 200
        assert http_status(f"{scheduler.http_url}/readyz") == 503
        assert grpc_health(running_stack, scheduler.grpc_target) == "NOT_SERVING"
        assert (
            grpc_health(running_stack, scheduler.grpc_target, SERVICE_NAMES["scheduler"])
            == "NOT_SERVING"
        )
        # The watcher appears where the scheduler looks for it: the view syncs, it is ready.
        watcher_args = ["--kubeconfig", str(running_stack.watcher_kubeconfig)]
        with process(
            running_stack,
            "watcher-late",
            "services.watcher",
            watcher_args,
            tmp_path,
            grpc_port=watcher_port,
        ):
            kube.wait_for(
                lambda: http_status(f"{scheduler.http_url}/readyz") == 200,
                timeout=60,
                message="the scheduler to become ready",
            )
            kube.wait_for(
                lambda: grpc_health(running_stack, scheduler.grpc_target) == "SERVING",
                timeout=10,
                message="the scheduler's gRPC health to follow",
            )


def test_scheduler_without_a_binder_is_synced_but_not_ready(
    running_stack: stack.Stack, tmp_path: Path
) -> None:
    nobody = controlplane.free_port()
    args = ["--watcher", running_stack.watcher.grpc_target, "--binders",
            f"ipv4:127.0.0.1:{nobody}", "--scheduler-id", "no-binders"]  # fmt: skip
    with process(
        running_stack, "scheduler-alone", "services.scheduler", args, tmp_path
    ) as scheduler:
        kube.wait_for(
            lambda: grpc_health(running_stack, scheduler.grpc_target) == "SERVING",
            timeout=60,
            message="the scheduler's view to sync",
        )
        assert http_status(f"{scheduler.http_url}/readyz") == 503
        assert total(scrape(scheduler)[1], "splitsched_scheduler_binders_reachable") == 0


def test_watcher_readiness_follows_its_sync(running_stack: stack.Stack, tmp_path: Path) -> None:
    """A watcher whose credentials cannot list pods never syncs: alive, never ready."""
    args = ["--kubeconfig", str(running_stack.binder_kubeconfig)]  # get pods, no list
    with process(running_stack, "watcher-blind", "services.watcher", args, tmp_path) as watcher:
        kube.wait_for(
            lambda: (
                total(scrape(watcher)[1], "splitsched_watcher_relists_total", reason="error") >= 1
            ),
            timeout=30,
            message="a LIST retried after an error",
        )
        assert http_status(f"{watcher.http_url}/healthz") == 200
        assert http_status(f"{watcher.http_url}/readyz") == 503
        assert grpc_health(running_stack, watcher.grpc_target) == "NOT_SERVING"
        assert (
            grpc_health(running_stack, watcher.grpc_target, SERVICE_NAMES["watcher"])
            == "NOT_SERVING"
        )
