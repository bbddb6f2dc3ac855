"""One trace per pod, end to end: the three services as real processes export their spans
over OTLP/gRPC to a receiver started by this test (splitsched/testing/otlp.py), against the real
control plane. The binders talk to the API server through a fault-injecting proxy that
answers 500 to the first Binding POST of one chosen pod, so that pod's bind needs a retry.

Checked from the received spans only: per pod, watcher, scheduler and binder spans share
one trace id, with the structure described in splitsched/runtime/tracing.py, and the
failing pod's bind span has two attempt children (500, then 201). Its binder log line about
the retry carries the same trace id. A pod that waits for a node gets a second, linked
trace that starts once the node arrives, not when its first attempt failed. The spans are
dumped to `spans.json` in the stack's work dir (and to $SPLITSCHED_TRACE_DUMP when set) for
scripts/render-trace.py.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import ssl
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import aiohttp
import pytest
import yaml
from aiohttp import web
from kubernetes import client

from splitsched.testing import kube, stack
from splitsched.testing.otlp import OtlpReceiver, Span

pytestmark = pytest.mark.e2e

BINDING = re.compile(r"^/api/v1/namespaces/([^/]+)/pods/([^/]+)/binding$")
#: The profile of `tail_traced`'s scheduler.
TAIL_SCHEDULER = "tail-keeping"
PASSED_HEADERS = ("Content-Type", "Retry-After", "Audit-Id")
INJECTED = {
    "kind": "Status",
    "apiVersion": "v1",
    "status": "Failure",
    "message": "injected fault",
    "reason": "InternalError",
    "code": 500,
}


@dataclass
class FaultProxy:
    """Plain HTTP in front of the HTTPS API server (for the binders only): forwards every
    request with its bearer token, except the first Binding POST of each pod named in
    `fail_once`, which gets a 500 Status. Runs its own event loop on a thread."""

    upstream: str
    ca_file: str | None
    fail_once: set[tuple[str, str]] = field(default_factory=set)
    bindings: list[tuple[str, str, int]] = field(default_factory=list)  # (ns, pod, status)
    port: int = 0
    _loop: asyncio.AbstractEventLoop | None = None
    _thread: threading.Thread | None = None
    _runner: web.AppRunner | None = None
    _session: aiohttp.ClientSession | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def fail_first_binding(self, namespace: str, pod: str) -> None:
        with self._lock:
            self.fail_once.add((namespace, pod))

    def binding_statuses(self, namespace: str, pod: str) -> list[int]:
        with self._lock:
            return [s for ns, name, s in self.bindings if (ns, name) == (namespace, pod)]

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        body = await request.read()
        match = BINDING.match(request.path)
        key = (match.group(1), match.group(2)) if match and request.method == "POST" else None
        if key is not None:
            with self._lock:
                inject = key in self.fail_once
                self.fail_once.discard(key)
            if inject:
                with self._lock:
                    self.bindings.append((*key, 500))
                return web.json_response(INJECTED, status=500)
        assert self._session is not None
        headers = {k: v for k, v in request.headers.items() if k.lower() != "host"}
        if request.query.get("watch") in ("1", "true"):
            return await self._stream(request, headers)
        async with self._session.request(
            request.method, self.upstream + request.path_qs, data=body, headers=headers
        ) as upstream:
            data = await upstream.read()
            if key is not None:
                with self._lock:
                    self.bindings.append((*key, upstream.status))
            out = {k: v for k, v in upstream.headers.items() if k in PASSED_HEADERS}
            return web.Response(status=upstream.status, body=data, headers=out)

    async def _stream(self, request: web.Request, headers: dict[str, str]) -> web.StreamResponse:
        """A watch (the binders' watch of their pending pods) passed on as it comes."""
        assert self._session is not None
        timeout = aiohttp.ClientTimeout(total=None, sock_read=None)
        async with self._session.get(
            self.upstream + request.path_qs, headers=headers, timeout=timeout
        ) as upstream:
            response = web.StreamResponse(status=upstream.status)
            response.content_type = upstream.content_type
            await response.prepare(request)
            async for chunk in upstream.content.iter_any():
                await response.write(chunk)
            return response

    async def _start(self) -> None:
        ctx = ssl.create_default_context(cafile=self.ca_file)
        self._session = aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=ctx))
        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", self._handle)
        # A watch held open must not hold the clean-up.
        self._runner = web.AppRunner(app, access_log=None, shutdown_timeout=1.0)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        self.port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]

    async def _stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
        if self._session is not None:
            await self._session.close()

    def start(self) -> FaultProxy:
        loop = self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=loop.run_forever, name="fault-proxy", daemon=True)
        self._thread.start()
        asyncio.run_coroutine_threadsafe(self._start(), loop).result(10)
        return self

    def stop(self) -> None:
        if self._loop is None or self._thread is None:
            return
        asyncio.run_coroutine_threadsafe(self._stop(), self._loop).result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)
        self._loop.close()


def proxied_kubeconfig(original: Path, server: str, directory: Path) -> Path:
    """The binder's ServiceAccount kubeconfig, pointed at the plain-HTTP proxy."""
    doc = yaml.safe_load(original.read_text())
    for entry in doc["clusters"]:
        entry["cluster"] = {"server": server}
    path = directory / f"proxied-{original.name}"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    path.chmod(0o600)
    return path


@dataclass
class Traced:
    stack: stack.Stack
    receiver: OtlpReceiver
    proxy: FaultProxy
    workdir: Path


@contextlib.contextmanager
def traced_stack(
    kube_api: client.ApiClient,
    workdir: Path,
    *,
    env: dict[str, str],
    scheduler_args: list[str],
    binder_args: list[str],
) -> Iterator[Traced]:
    """Watcher, two binders (through the proxy) and a scheduler exporting to a receiver,
    with `env` besides the OTLP endpoint."""
    receiver = OtlpReceiver().start()
    sa_namespace = kube.create_namespace(kube_api, prefix="splitsched-system")
    proxy: FaultProxy | None = None
    running: stack.Stack | None = None
    try:
        configs = stack.component_kubeconfigs(kube_api, namespace=sa_namespace, directory=workdir)
        conf = kube_api.configuration
        proxy = FaultProxy(upstream=str(conf.host).rstrip("/"), ca_file=conf.ssl_ca_cert).start()
        env = {
            "OTEL_EXPORTER_OTLP_ENDPOINT": receiver.endpoint,
            "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc",
            "OTEL_BSP_SCHEDULE_DELAY": "200",
            **env,
        }
        running = stack.Stack(
            workdir=workdir,
            watcher_kubeconfig=configs["watcher"],
            binder_kubeconfig=proxied_kubeconfig(configs["binder"], proxy.url, workdir),
            binders=2,
            scheduler_args=["--log-json", *scheduler_args],
            binder_args=["--log-json", *binder_args],
            env=env,
        )
        running.start(timeout=90)
        yield Traced(running, receiver, proxy, workdir)
    finally:
        if running is not None:
            running.stop()
        if proxy is not None:
            proxy.stop()
        receiver.stop()
        receiver.dump(workdir / "spans.json")
        kube.delete_namespace(kube_api, sa_namespace)


@pytest.fixture(scope="module")
def traced(
    kube_api: client.ApiClient, e2e_nodes: list[str], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Traced]:
    """Every attempt sampled (the spans are dumped to $SPLITSCHED_TRACE_DUMP too)."""
    workdir: Path = tmp_path_factory.mktemp("traced")
    env = {"OTEL_TRACES_SAMPLER": "parentbased_always_on"}
    with traced_stack(kube_api, workdir, env=env, scheduler_args=[], binder_args=[]) as running:
        try:
            yield running
        finally:
            if dump := os.environ.get("SPLITSCHED_TRACE_DUMP"):
                running.receiver.dump(Path(dump))


@pytest.fixture(scope="module")
def tail_traced(
    kube_api: client.ApiClient, e2e_nodes: list[str], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Traced]:
    """No attempt head-sampled (ratio 0), tail keeping on (the default), one Binding call
    per decision (so one injected 500 fails the bind)."""
    workdir: Path = tmp_path_factory.mktemp("tail")
    # Its own profile name: `traced`'s scheduler, running beside it, leaves its pods alone.
    config = workdir / "profiles.yaml"
    config.write_text(
        "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n"
        f"profiles:\n- schedulerName: {TAIL_SCHEDULER}\n"
    )
    env = {"OTEL_TRACES_SAMPLER": "parentbased_traceidratio", "OTEL_TRACES_SAMPLER_ARG": "0"}
    args = ["--bind-attempts", "1", "--profiles", str(config)]
    served = ["--scheduler-names", TAIL_SCHEDULER]
    with traced_stack(kube_api, workdir, env=env, scheduler_args=args, binder_args=served) as t:
        yield t


def in_trace(spans: list[Span], trace_id: str) -> list[Span]:
    return [s for s in spans if s.trace_id == trace_id]


def children(spans: list[Span], parent: Span) -> list[Span]:
    return sorted(
        (s for s in spans if s.parent_span_id == parent.span_id), key=lambda s: s.start_ns
    )


def finished_attempt(spans: list[Span], namespace: str, pod: str) -> Span | None:
    """The pod's confirmed scheduling attempt (root `schedule_pod` with a `confirm` child
    and a binder `bind` span in its trace), once all of them have been exported."""
    for root in spans:
        if (
            root.name == "schedule_pod"
            and root.pod == pod
            and root.attributes.get("k8s.namespace.name") == namespace
        ):
            trace = in_trace(spans, root.trace_id)
            if any(s.name == "confirm" for s in trace) and any(s.name == "bind" for s in trace):
                return root
    return None


def test_each_pod_is_one_trace_across_the_three_services(
    traced: Traced, kube_api: client.ApiClient, namespace: str
) -> None:
    names = ["web-0", "web-1", "web-2", "flaky"]
    traced.proxy.fail_first_binding(namespace, "flaky")
    kube.create_pods(
        kube_api, namespace=namespace, pods=[kube.make_pod(n, cpu="100m") for n in names]
    )
    core = client.CoreV1Api(kube_api)

    def bound() -> dict[str, str] | None:
        pods = core.list_namespaced_pod(namespace).items
        nodes = {p.metadata.name: p.spec.node_name for p in pods if p.spec.node_name}
        return nodes if len(nodes) == len(names) else None

    placed = kube.wait_for(bound, timeout=60, interval=0.5, message="pods bound")

    def exported() -> dict[str, Span] | None:
        spans = traced.receiver.spans()
        roots = {n: finished_attempt(spans, namespace, n) for n in names}
        return {n: r for n, r in roots.items() if r is not None} if all(roots.values()) else None

    roots = kube.wait_for(exported, timeout=60, interval=0.5, message="every pod's trace")
    spans = traced.receiver.spans()
    assert traced.proxy.binding_statuses(namespace, "flaky") == [500, 201]

    for name, root in roots.items():
        trace = in_trace(spans, root.trace_id)
        assert root.service == "splitsched-scheduler"
        assert root.status != "ERROR", (name, root.status_message)
        assert root.attributes["k8s.pod.name"] == name
        assert root.attributes["k8s.namespace.name"] == namespace
        assert root.attributes["splitsched.profile"] == "splitsched"
        assert root.attributes["splitsched.attempt"] == 1
        assert root.attributes["k8s.node.name"] == placed[name]

        # The trace starts at the watcher's event for this pod.
        watch = next(s for s in trace if s.span_id == root.parent_span_id)
        assert (watch.service, watch.name, watch.kind) == (
            "splitsched-watcher",
            "watch_event",
            "PRODUCER",
        )
        assert watch.pod == name and watch.parent_span_id == ""

        # The scheduler's cycle, its request to a binder and the confirmation.
        steps = {s.name: s for s in children(spans, root)}
        assert set(steps) == {
            "queue_wait",
            "filter",
            "score",
            "assume",
            "bind_request",
            "confirm",
        }, name
        assert int(steps["filter"].attributes["splitsched.feasible_nodes"]) >= 2
        assert steps["assume"].attributes["k8s.node.name"] == placed[name]
        assert steps["bind_request"].kind == "PRODUCER"
        assert steps["confirm"].attributes["k8s.node.name"] == placed[name]
        assert all(s.service == "splitsched-scheduler" for s in steps.values())

        # The binder continues the same trace under the request.
        binds = [s for s in trace if s.name == "bind"]
        assert len(binds) == 1, name
        bind = binds[0]
        assert bind.service == "splitsched-binder" and bind.kind == "CONSUMER"
        assert bind.parent_span_id == steps["bind_request"].span_id
        assert bind.attributes["k8s.node.name"] == placed[name]
        assert bind.attributes["splitsched.bind.result"] == "BOUND"
        attempts = children(spans, bind)
        assert all(a.kind == "CLIENT" and a.service == "splitsched-binder" for a in attempts)
        codes = [a.attributes["http.response.status_code"] for a in attempts]
        if name == "flaky":
            assert codes == [500, 201]
            assert attempts[0].status == "ERROR"
            assert float(attempts[0].attributes["splitsched.retry_delay_seconds"]) >= 0
            assert attempts[1].attributes["http.request.resend_count"] == 1
            assert bind.attributes["splitsched.bind.attempts"] == 2
        else:
            assert codes == [201]
            assert bind.attributes["splitsched.bind.attempts"] == 1

    # Different pods, different traces.
    assert len({r.trace_id for r in roots.values()}) == len(names)

    # The binder's log line about the retry carries the trace and the bind span.
    flaky = roots["flaky"]
    bind_span = next(s for s in in_trace(spans, flaky.trace_id) if s.name == "bind")
    lines = [
        json.loads(line)
        for svc in traced.stack.binder_services
        for line in svc.log_path.read_text(errors="replace").splitlines()
        if line.startswith("{")
    ]
    retry_lines = [
        doc for doc in lines if f"{namespace}/flaky" in doc["msg"] and "attempt 2" in doc["msg"]
    ]
    assert len(retry_lines) == 1, retry_lines
    assert retry_lines[0]["trace_id"] == flaky.trace_id
    assert retry_lines[0]["span_id"] == bind_span.span_id


def test_gang_members_keep_one_trace_each_linked_through_the_gang_cycle(
    traced: Traced, kube_api: client.ApiClient, namespace: str
) -> None:
    names = [f"member-{i}" for i in range(3)]
    pods = []
    for name in names:
        pod = kube.make_pod(name, cpu="100m")
        pod["metadata"]["annotations"] = {
            "splitsched.io/group": "trio",
            "splitsched.io/min-member": "3",
        }
        pods.append(pod)
    kube.create_pods(kube_api, namespace=namespace, pods=pods)

    def exported() -> dict[str, Span] | None:
        spans = traced.receiver.spans()
        roots = {n: finished_attempt(spans, namespace, n) for n in names}
        return {n: r for n, r in roots.items() if r is not None} if all(roots.values()) else None

    roots = kube.wait_for(exported, timeout=60, interval=0.5, message="every member's trace")
    spans = traced.receiver.spans()
    assert len({r.trace_id for r in roots.values()}) == 3  # one trace per member
    cycles = {}
    for name, root in roots.items():
        assert root.attributes["splitsched.gang.group"] == f"{namespace}/trio"
        (cycle,) = [s for s in children(spans, root) if s.name == "gang_cycle"]
        assert cycle.attributes["splitsched.gang.result"] == "placed"
        assert int(cycle.attributes["splitsched.gang.placed"]) == 3
        assert int(cycle.attributes["splitsched.gang.min_member"]) == 3
        cycles[name] = cycle
    # One member's cycle span has no link; the others link to that member's root.
    (first,) = [n for n, c in cycles.items() if not c.links]
    for name, cycle in cycles.items():
        if name != first:
            assert [(link.trace_id, link.span_id) for link in cycle.links] == [
                (roots[first].trace_id, roots[first].span_id)
            ]


def test_a_retry_trace_starts_when_room_appeared_not_when_the_first_attempt_failed(
    traced: Traced, kube_api: client.ApiClient, namespace: str
) -> None:
    # Issue 21: after a node was added, a retry's trace started when its first attempt
    # ended, so it lasted as long as the pod had waited for room.
    pool = f"retry-{namespace}"
    kube.create_pods(
        kube_api, namespace=namespace, pods=[kube.make_pod("waiter", node_selector={"pool": pool})]
    )

    def attempts() -> list[Span]:
        return [
            s
            for s in traced.receiver.spans()
            if s.name == "schedule_pod"
            and s.pod == "waiter"
            and s.attributes.get("k8s.namespace.name") == namespace
        ]

    tried = kube.wait_for(attempts, timeout=60, interval=0.5, message="first attempt")
    first = min(tried, key=lambda s: s.start_ns)
    assert first.status == "ERROR" and first.attributes["splitsched.attempt"] == 1
    room_added = time.time_ns()  # the first attempt has ended: it was exported
    node = kube.create_kwok_nodes(
        kube_api, 1, name_prefix=pool, cpu="2", memory="4Gi", labels={"pool": pool}
    )
    try:
        retry = kube.wait_for(
            lambda: finished_attempt(traced.receiver.spans(), namespace, "waiter"),
            timeout=60,
            interval=0.5,
            message="the retry's trace",
        )
    finally:
        kube.delete_nodes(kube_api, node)
    spans = traced.receiver.spans()
    # The first attempt, and any other before the node came.
    failed = sorted((s for s in attempts() if s != retry), key=lambda s: s.end_ns)
    assert all(s.status == "ERROR" for s in failed) and first in failed
    assert retry.attributes["splitsched.attempt"] == len(failed) + 1
    assert retry.attributes["k8s.node.name"] == node[0]
    assert retry.parent_span_id == "" and retry.trace_id != first.trace_id
    links = {link.attributes["splitsched.link"]: link for link in retry.links}
    assert links["previous_attempt"].span_id == failed[-1].span_id
    (wait,) = [s for s in children(spans, retry) if s.name == "queue_wait"]
    assert wait.start_ns == retry.start_ns
    # The node event let the pod back into the active queue, so its trace starts after the
    # node was created: the time it waited for room is in no attempt's trace.
    assert retry.start_ns > room_added > first.end_ns


def test_at_sampling_ratio_0_failed_and_retried_attempts_are_kept_and_a_fast_one_is_not(
    tail_traced: Traced, kube_api: client.ApiClient, namespace: str
) -> None:
    # Issue 21, tail keeping: "unfit" fits nowhere; "flaky"'s only Binding call of its
    # first attempt gets a 500, so that bind fails and the retry binds it; "fast" binds.
    tail_traced.proxy.fail_first_binding(namespace, "flaky")
    pods = [
        kube.make_pod(name, cpu=cpu, scheduler_name=TAIL_SCHEDULER)
        for name, cpu in (("fast", "100m"), ("flaky", "100m"), ("unfit", "100"))
    ]
    kube.create_pods(kube_api, namespace=namespace, pods=pods)

    def roots(name: str) -> list[Span]:
        return sorted(
            (s for s in tail_traced.receiver.spans() if s.name == "schedule_pod"
             and s.pod == name and s.attributes.get("k8s.namespace.name") == namespace),
            key=lambda s: s.start_ns,
        )  # fmt: skip

    def flaky_done() -> list[Span] | None:
        found = roots("flaky")
        done = len(found) >= 2 and finished_attempt(
            tail_traced.receiver.spans(), namespace, "flaky"
        )
        return found if done and roots("unfit") else None

    flaky = kube.wait_for(flaky_done, timeout=90, interval=0.5, message="the kept traces")
    spans = tail_traced.receiver.spans()
    assert tail_traced.proxy.binding_statuses(namespace, "flaky") == [500, 201]
    unfit = roots("unfit")[0]
    assert unfit.status == "ERROR" and unfit.attributes["splitsched.kept"] == "failed"
    assert {s.name for s in children(spans, unfit)} >= {"queue_wait", "filter"}

    # The failed bind: the scheduler's attempt and the binder's bind, one trace.
    failed, retry = flaky[0], flaky[-1]
    assert failed.status == "ERROR" and failed.attributes["splitsched.kept"] == "failed"
    failed_trace = in_trace(spans, failed.trace_id)
    (bind,) = [s for s in failed_trace if s.name == "bind"]
    assert bind.service == "splitsched-binder" and bind.status == "ERROR"
    assert bind.attributes["splitsched.kept"] == "failed"
    request = next(s for s in failed_trace if s.name == "bind_request")
    assert bind.parent_span_id == request.span_id
    # The retry: kept by the scheduler, and the binder followed (told by the flag).
    assert retry.attributes["splitsched.kept"] == "retry"
    assert retry.attributes["splitsched.attempt"] == 2
    retry_trace = in_trace(spans, retry.trace_id)
    assert [s.attributes["splitsched.bind.result"] for s in retry_trace if s.name == "bind"] == [
        "BOUND"
    ]

    # The fast pod was bound and exported nothing: no span of the scheduler or binder.
    core = client.CoreV1Api(kube_api)
    assert core.read_namespaced_pod("fast", namespace).spec.node_name
    # It was bound before flaky's retry was exported (batch delay 0.2 s): had anything of
    # it been kept, it would be here by now; a second more for slow machines.
    time.sleep(1.0)
    assert [s for s in tail_traced.receiver.spans() if s.pod == "fast"] == []
