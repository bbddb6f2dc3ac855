"""The traces through a real OpenTelemetry Collector (issue 21): the three services as
processes against the real control plane export over OTLP/gRPC to the collector built by
scripts/get-binaries.sh (`otelcol`: OTLP receiver, file exporter), and the test reads only
what the collector wrote to its JSON file. A change the real collector refuses or reads
differently (protocol, encoding, ids, attribute types) fails here, where the in-process
receiver of test_tracing.py would not notice.

Checked per pod: one trace holding spans of all three services, the tree and attributes of
docs/observability.md; the binder's bind latency and the scheduler's SLI observations
carry the pods' trace ids as OpenMetrics exemplars on /metrics; and over the whole file,
once the services and the collector have stopped and flushed, no orphan span.
"""

from __future__ import annotations

import re
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from kubernetes import client

from splitsched.testing import kube, stack
from splitsched.testing.otlp import Span
from tests.support.otelcol import Collector

pytestmark = pytest.mark.e2e

PODS = ("web-0", "web-1", "web-2", "web-3")
SERVICES = {"splitsched-watcher", "splitsched-scheduler", "splitsched-binder"}
STEPS = {"queue_wait", "filter", "score", "assume", "bind_request", "confirm"}
OPENMETRICS = "application/openmetrics-text; version=1.0.0"


@dataclass
class Exported:
    stack: stack.Stack
    collector: Collector


@pytest.fixture(scope="module")
def exported(
    kube_api: client.ApiClient, e2e_nodes: list[str], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Exported]:
    """A watcher, a binder and a scheduler exporting to a collector."""
    workdir: Path = tmp_path_factory.mktemp("otelcol")
    collector = Collector(workdir).start()
    sa_namespace = kube.create_namespace(kube_api, prefix="splitsched-system")
    running: stack.Stack | None = None
    try:
        configs = stack.component_kubeconfigs(kube_api, namespace=sa_namespace, directory=workdir)
        running = stack.Stack(
            workdir=workdir,
            watcher_kubeconfig=configs["watcher"],
            binder_kubeconfig=configs["binder"],
            binders=1,
            env={
                "OTEL_EXPORTER_OTLP_ENDPOINT": collector.endpoint,
                "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc",
                "OTEL_BSP_SCHEDULE_DELAY": "200",
                "OTEL_TRACES_SAMPLER": "parentbased_always_on",
            },
        )
        running.start(timeout=90)
        yield Exported(running, collector)
    finally:
        if running is not None:
            running.stop()
        collector.stop()
        kube.delete_namespace(kube_api, sa_namespace)


def attempt_root(spans: list[Span], namespace: str, pod: str) -> Span | None:
    """The pod's `schedule_pod` once its `confirm` and the binder's `bind` are written."""
    for root in spans:
        if root.name == "schedule_pod" and (
            root.pod,
            root.attributes.get("k8s.namespace.name"),
        ) == (
            pod,
            namespace,
        ):
            names = {s.name for s in spans if s.trace_id == root.trace_id}
            if {"confirm", "bind"} <= names:
                return root
    return None


def exemplar_trace_ids(text: str, family: str) -> set[str]:
    """The trace ids on the exemplars of a histogram family's buckets (OpenMetrics)."""
    found = re.findall(
        rf'^{family}_bucket{{[^}}]*}} \S+ # {{[^}}]*trace_id="([0-9a-f]{{32}})"', text, re.M
    )
    return set(found)


def scrape(url: str, accept: str) -> tuple[str, str]:
    request = urllib.request.Request(f"{url}/metrics", headers={"Accept": accept})
    with urllib.request.urlopen(request, timeout=5) as resp:
        return str(resp.headers["Content-Type"]), resp.read().decode()


def test_each_pod_is_one_trace_across_the_three_services_as_the_collector_wrote_it(
    exported: Exported, kube_api: client.ApiClient, namespace: str
) -> None:
    kube.create_pods(
        kube_api, namespace=namespace, pods=[kube.make_pod(n, cpu="100m") for n in PODS]
    )
    core = client.CoreV1Api(kube_api)

    def bound() -> dict[str, str] | None:
        pods = core.list_namespaced_pod(namespace).items
        nodes = {p.metadata.name: p.spec.node_name for p in pods if p.spec.node_name}
        return nodes if len(nodes) == len(PODS) else None

    placed = kube.wait_for(bound, timeout=60, interval=0.5, message="pods bound")

    def written() -> dict[str, Span] | None:
        spans = exported.collector.spans()
        roots = {n: attempt_root(spans, namespace, n) for n in PODS}
        return {n: r for n, r in roots.items() if r is not None} if all(roots.values()) else None

    roots = kube.wait_for(written, timeout=60, interval=0.5, message="every pod's trace written")
    spans = exported.collector.spans()
    for name, root in roots.items():
        check_trace(spans, root, name, namespace, placed[name])
    assert len({r.trace_id for r in roots.values()}) == len(PODS)

    # The bind latency observations carry the traces' ids; the plain format stays plain.
    binder = exported.stack.binder_services[0]
    content_type, text = scrape(binder.http_url, OPENMETRICS)
    assert content_type.startswith("application/openmetrics-text"), content_type
    assert text.rstrip().endswith("# EOF")
    traces = {r.trace_id for r in roots.values()}
    linked = exemplar_trace_ids(text, "splitsched_binder_bind_duration_seconds")
    assert linked & traces, (linked, traces)
    text = scrape(exported.stack.scheduler.http_url, OPENMETRICS)[1]
    linked = exemplar_trace_ids(text, "scheduler_pod_scheduling_sli_duration_seconds")
    assert linked & traces, (linked, traces)
    content_type, plain = scrape(binder.http_url, "text/plain")
    assert content_type.startswith("text/plain"), content_type
    assert "splitsched_binder_bind_duration_seconds_bucket" in plain and "trace_id" not in plain

    # Once the services have exported everything and the collector flushed, every parent a
    # span names is in the file: none was lost on the way or at shutdown.
    exported.stack.stop()
    exported.collector.stop()
    spans = exported.collector.spans()
    ids = {s.span_id for s in spans} | {""}
    assert [(s.service, s.name, s.pod) for s in spans if s.parent_span_id not in ids] == []


def check_trace(spans: list[Span], root: Span, pod: str, namespace: str, node: str) -> None:
    """The tree and attributes of docs/observability.md "What a trace contains"."""
    trace = [s for s in spans if s.trace_id == root.trace_id]
    assert {s.service for s in trace} == SERVICES, pod
    assert [s.name for s in trace if s.name == "schedule_pod"] == ["schedule_pod"], pod
    assert root.service == "splitsched-scheduler" and root.status != "ERROR", pod
    assert root.attributes["k8s.namespace.name"] == namespace
    assert root.attributes["k8s.node.name"] == node
    assert root.attributes["splitsched.attempt"] == 1  # an int, through the collector's JSON
    assert root.attributes["splitsched.profile"] == "splitsched"
    watch = next(s for s in trace if s.span_id == root.parent_span_id)
    assert (watch.service, watch.name, watch.kind, watch.parent_span_id) == (
        "splitsched-watcher",
        "watch_event",
        "PRODUCER",
        "",
    )
    steps = {s.name: s for s in trace if s.parent_span_id == root.span_id}
    assert set(steps) == STEPS, pod
    assert int(steps["filter"].attributes["splitsched.feasible_nodes"]) >= 2
    assert steps["bind_request"].kind == "PRODUCER"
    (bind,) = [s for s in trace if s.name == "bind"]
    assert (bind.service, bind.kind) == ("splitsched-binder", "CONSUMER")
    assert bind.parent_span_id == steps["bind_request"].span_id
    assert bind.attributes["splitsched.bind.result"] == "BOUND"
    calls = [s for s in trace if s.parent_span_id == bind.span_id]
    assert [c.attributes["http.response.status_code"] for c in calls] == [201], pod
    assert calls[0].kind == "CLIENT"
