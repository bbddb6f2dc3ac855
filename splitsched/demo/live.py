"""``python -m splitsched.demo``: the live run, the path a user takes. Starts the local
control plane and the demo's nodes, then `splitsched up` against it (as a ServiceAccount
with exactly the rights `up` checks for: `splitsched.demo.upprocess`), creates the demo's
pods while a watch records when each is bound, then prints the summary; stops everything
it started on exit, Ctrl-C or SIGTERM (`splitsched.launch.interrupts`).
"""

from __future__ import annotations

import re
import threading
import time
import urllib.request
from collections import Counter
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from kubernetes import client, watch

from splitsched.demo import workload
from splitsched.demo.offline import REPO
from splitsched.demo.upprocess import UpProcess
from splitsched.launch import processes
from splitsched.testing import controlplane, kube
from splitsched.testing.manifests import Manifest
from splitsched.v1 import scheduler_pb2, scheduler_pb2_grpc

STATE_DIR = REPO / ".local-cluster" / "demo"
#: The scheduler's port when free: the default of the CLI and of docs/api.md's examples.
SCHEDULER_PORT = 50050
#: How long the demo waits for the pods that fit to be bound.
BIND_BUDGET_SECONDS = 300


def run_live(*, keep: bool, tls: bool = True) -> int:
    cp = controlplane.ControlPlane(STATE_DIR)
    print("starting the local control plane (etcd, kube-apiserver, kwok)...", flush=True)
    running: UpProcess | None = None
    try:
        cp.up()
        api = kube.api_client_from_kubeconfig(cp.kubeconfig_path)
        print(f"  kube-apiserver at {cp.server_url}; kubeconfig {cp.kubeconfig_path}")
        _create_nodes(api)
        namespace = _create_namespace(api)
        running = _start_services(api, tls=tls)
        manifests, unfit = workload.demo_pods()
        bound = BoundPods(client.CoreV1Api(api), namespace).start()
        time.sleep(0.5)
        gated = workload.gated_pod()
        client.CoreV1Api(api).create_namespaced_pod(namespace, gated)
        created, elapsed = _create_pods(
            api, namespace, manifests, bound, fit=len(manifests) - len(unfit)
        )
        bound.stop()
        _print_summary(running, bound, created, elapsed, pods=len(manifests))
        _print_pending(running, namespace, [*_one_of_each_kind(unfit), gated["metadata"]["name"]])
        _print_try_it(running, cp, namespace)
        if keep:
            print("\n--keep: leaving everything running; Ctrl-C to stop")
            while True:
                time.sleep(3600)
        return 0
    except KeyboardInterrupt:
        print("\ninterrupted")
        return 130
    finally:
        print("stopping services and the control plane...", flush=True)
        if running is not None:
            running.stop()
        cp.down()


def _create_nodes(api: client.ApiClient) -> None:
    """The demo's nodes (those a kept run left behind are reused), once kwok has them Ready."""
    core = client.CoreV1Api(api)
    existing = {n.metadata.name for n in core.list_node().items}
    nodes = workload.demo_nodes()
    for n in nodes:
        if n["metadata"]["name"] not in existing:
            core.create_node(n)
    names = [n["metadata"]["name"] for n in nodes]
    kube.wait_nodes_ready(api, names=names, timeout=120)
    print(f"  {len(names)} kwok nodes ready (30 small, 14 large, 6 GPU tainted; 3 zones)")


def _create_namespace(api: client.ApiClient) -> str:
    """``shop``, the namespace docs/api.md's examples name; emptied first when a control
    plane left running by an earlier run still has it."""
    kube.delete_namespace(api, workload.NAMESPACE)
    client.CoreV1Api(api).create_namespace(
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": workload.NAMESPACE}}
    )
    return workload.NAMESPACE


def _print_try_it(running: UpProcess, cp: controlplane.ControlPlane, namespace: str) -> None:
    """The commands that reach what runs: the CLI as the ``ops`` identity (with TLS), in a
    shell where docs/api.md's examples then run as written."""
    env = running.cli_env()
    print("\ntry it yourself (docs/api.md's examples run as written in a shell with these):")
    print("  export " + " ".join(f"{k}={v}" for k, v in env.items()))
    print(f"  export KUBECONFIG={cp.kubeconfig_path}")
    print(f"  splitsched pods --pending; kubectl -n {namespace} get pods")


def _start_services(api: client.ApiClient, *, tls: bool) -> UpProcess:
    """`splitsched up` with 2 binders, as a user runs it: as a ServiceAccount holding
    exactly the rights it checks for, every hop mutual TLS (unless ``tls`` is off)."""
    listen = f"127.0.0.1:{processes.free_port(preferred=SCHEDULER_PORT)}"
    print("starting `splitsched up` (watcher, scheduler, 2 binders)...", flush=True)
    running = UpProcess.start(api, state_dir=STATE_DIR, listen=listen, binders=2, tls=tls)
    print(f"  scheduler API at {listen} (`up`'s output: {running.log_path})", flush=True)
    if tls:
        print(f"  mutual TLS; certificates in {running.layout.tls_dir} (yours: ops.crt)\n")
    else:
        print("  --insecure: plaintext, any local process may bind and evict\n", flush=True)
    return running


class BoundPods:
    """When each pod of a namespace was first seen bound, and to which node: a watch in a
    background thread (listed again when the stream ends), and ``catch_up`` from a list."""

    def __init__(self, core: client.CoreV1Api, namespace: str) -> None:
        self.bound_at: dict[str, float] = {}
        self.node_of: dict[str, str] = {}
        self._core = core
        self._namespace = namespace
        self._stop = threading.Event()

    def start(self) -> BoundPods:
        threading.Thread(target=self._follow, daemon=True).start()
        return self

    def stop(self) -> None:
        self._stop.set()

    def catch_up(self) -> None:
        """A list is the truth: count binds the watch has not shown yet."""
        for pod in self._core.list_namespaced_pod(self._namespace).items:
            self._see(pod)

    def _see(self, pod: Any) -> None:
        if pod.spec.node_name and pod.metadata.name not in self.bound_at:
            self.bound_at[pod.metadata.name] = time.monotonic()
            self.node_of[pod.metadata.name] = pod.spec.node_name

    def _follow(self) -> None:
        version = ""
        while not self._stop.is_set():
            w = watch.Watch()
            try:
                for ev in w.stream(
                    self._core.list_namespaced_pod,
                    self._namespace,
                    resource_version=version,
                    timeout_seconds=60,
                ):
                    pod = ev["object"]
                    version = pod.metadata.resource_version
                    self._see(pod)
                    if self._stop.is_set():
                        w.stop()
            except client.ApiException:
                version = ""  # 410 Gone: list again from now


def _create_pods(
    api: client.ApiClient,
    namespace: str,
    manifests: Sequence[Manifest],
    bound: BoundPods,
    *,
    fit: int,
) -> tuple[dict[str, float], float]:
    """Create the pods from 8 threads and show progress each second until the ``fit`` ones
    are bound (or the budget is spent); returns each pod's creation time and the seconds
    it all took."""
    core = client.CoreV1Api(api)
    print(f"creating {len(manifests)} pods with schedulerName: splitsched...", flush=True)
    created: dict[str, float] = {}
    t0 = time.monotonic()

    def create(m: Manifest) -> None:
        created[m["metadata"]["name"]] = time.monotonic()
        core.create_namespaced_pod(namespace, m)

    pool = ThreadPoolExecutor(8)
    creating = [pool.submit(create, m) for m in manifests]
    while len(bound.bound_at) < fit and time.monotonic() - t0 < BIND_BUDGET_SECONDS:
        done = sum(1 for f in creating if f.done())
        print(
            f"  {time.monotonic() - t0:5.1f}s  created {done:4d}/{len(manifests)}"
            f"  bound {len(bound.bound_at):4d}/{fit}",
            flush=True,
        )
        time.sleep(1.0)
        if time.monotonic() - t0 > 5:
            bound.catch_up()
    pool.shutdown(wait=True)
    return created, time.monotonic() - t0


def _percentile(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def _print_summary(
    running: UpProcess, bound: BoundPods, created: dict[str, float], elapsed: float, *, pods: int
) -> None:
    """Bound and pending counts, creation-to-bound latency, pods per node, and how many
    bindings each binder made (from its /metrics)."""
    bound_at = bound.bound_at
    latencies = [bound_at[n] - created[n] for n in bound_at if n in created]
    print(f"\nbound {len(bound_at)}/{pods} pods in {elapsed:.1f}s; ", end="")
    print(f"{pods - len(bound_at)} pending")
    print(
        f"creation to bound: p50 {_percentile(latencies, 0.5) * 1000:.0f} ms, "
        f"p99 {_percentile(latencies, 0.99) * 1000:.0f} ms"
    )
    per_node = Counter(bound.node_of.values())
    print("\npods per node:")
    for name in sorted(per_node):
        print(f"  {name:<18} {per_node[name]:4d} {'#' * (per_node[name] // 2)}")
    print("\nhow the binders shared the work:")
    for name, url in sorted(running.binder_urls.items()):
        with urllib.request.urlopen(f"{url}/metrics", timeout=5) as resp:
            text = resp.read().decode()
        found = re.findall(r'splitsched_binder_outcomes_total\{result="BOUND"\} (\S+)', text)
        print(f"  {name}: {int(float(found[0])) if found else 0} bindings")


def _one_of_each_kind(names: set[str]) -> list[str]:
    """The first name (sorted) of each kind, the part before the first ``-``."""
    first: dict[str, str] = {}
    for name in sorted(names):
        first.setdefault(name.split("-")[0], name)
    return list(first.values())


def _print_pending(running: UpProcess, namespace: str, names: Sequence[str]) -> None:
    """The scheduler's own words (Scheduler.GetPod) for ``names``: why each waits."""
    print("\nwhy these pods are pending (Scheduler.GetPod):")
    with running.channel() as channel:
        api_stub = scheduler_pb2_grpc.SchedulerStub(channel)
        for name in names:
            status = api_stub.GetPod(
                scheduler_pb2.GetPodRequest(namespace=namespace, name=name), timeout=5
            )
            print(f"  {name:<12} {status.message}")
