"""`make demo`: splitsched scheduling real pods, start to finish.

Starts the local control plane (etcd, kube-apiserver, kwok), 50 kwok nodes of mixed sizes
(some tainted for GPUs, labelled by zone), the three services with 2 binders, and 1,000
pods of mixed shapes with `schedulerName: splitsched`; shows progress while they bind,
then a summary: bound and pending counts, pods per node, creation-to-bound latency,
how the binders shared the work, and why the unfit pods wait (from the Scheduler API).
Stops everything it started on exit or Ctrl-C.

`--offline` runs the pure core on examples/sample-cluster.yaml instead: no processes.
"""

from __future__ import annotations

import argparse
import re
import sys
import threading
import time
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from splitsched.core import batch, convert, models, profiles

REPO = Path(__file__).resolve().parents[1]
SAMPLE = REPO / "examples" / "sample-cluster.yaml"
ZONES = ("zone-a", "zone-b", "zone-c")


def _bar(fraction: float, width: int = 20) -> str:
    filled = max(0, min(width, round(fraction * width)))
    return "#" * filled + "." * (width - filled)


def run_offline(path: Path) -> int:
    nodes, pods = convert.load_cluster(path.read_text(encoding="utf-8"))
    profs = profiles.load_profiles(None)
    bound, pending = batch.split_pods(
        pods, scheduler_names=set(profs), all_pending=False, default="splitsched"
    )
    algo = batch.build(nodes=nodes, bound_pods=bound, profiles=profs)
    print(f"splitsched demo (offline core) on {path.name}")
    print(f"  {len(nodes)} nodes, {len(bound)} pods already bound, {len(pending)} pending\n")
    started = time.perf_counter()
    placements = list(batch.schedule_all(algo, pending))
    elapsed = time.perf_counter() - started
    placed = [p for p in placements if p.node]
    unplaced = [p for p in placements if not p.node]
    print(f"placed {len(placed)}/{len(pending)} pending pods in {elapsed * 1000:.0f} ms\n")
    table = algo.table
    print(f"  {'node':<9} {'zone':<7} {'type':<9} {'pods':>4}  cpu used              memory used")
    cpu_col, mem_col = table.column(models.CPU), table.column(models.MEMORY)
    assert cpu_col is not None and mem_col is not None
    for row, name in sorted(enumerate(table.names), key=lambda x: x[1]):
        node = table.nodes[row]
        alloc, req = table.allocatable[row], table.requested[row]
        cpu = req[cpu_col] / alloc[cpu_col] if alloc[cpu_col] else 0.0
        mem = req[mem_col] / alloc[mem_col] if alloc[mem_col] else 0.0
        flags = " cordoned" if node.unschedulable else ""
        flags += " tainted" if node.taints else ""
        print(
            f"  {name:<9} {node.labels.get('topology.kubernetes.io/zone', '-'):<7} "
            f"{node.labels.get('node.kubernetes.io/instance-type', '-'):<9} "
            f"{len(table.pods[row]):>4}  {_bar(cpu)} {cpu:4.0%} {_bar(mem)} {mem:4.0%}{flags}"
        )
    if unplaced:
        print(f"\n{len(unplaced)} pods stay pending:")
        for p in unplaced:
            print(f"  {p.pod.key:<22} {p.summary}")
    return 0


# ---- live ---------------------------------------------------------------------------------


def demo_nodes() -> list[dict[str, Any]]:
    """50 nodes: 30 small, 14 large, 6 GPU (tainted); zones round-robin."""
    from splitsched.testing import kube

    out = []
    for i in range(50):
        zone = ZONES[i % 3]
        if i < 30:
            kind, cpu, mem, extra, taints = "small", "4", "16Gi", None, None
        elif i < 44:
            kind, cpu, mem, extra, taints = "large", "16", "64Gi", None, None
        else:
            kind, cpu, mem = "gpu", "16", "64Gi"
            extra = {"nvidia.com/gpu": "4"}
            taints = [{"key": "nvidia.com/gpu", "value": "true", "effect": "NoSchedule"}]
        labels = {"topology.kubernetes.io/zone": zone, "node.kubernetes.io/instance-type": kind}
        if i % 5 == 0:
            labels["disktype"] = "ssd"
        out.append(
            kube.make_node(
                f"demo-{kind}-{i:02d}",
                cpu=cpu,
                memory=mem,
                labels=labels,
                taints=taints,
                extended=extra,
            )
        )
    return out


def demo_pods() -> tuple[list[dict[str, Any]], set[str]]:
    from splitsched.testing import kube

    pods: list[dict[str, Any]] = []
    spread = [
        {
            "maxSkew": 1,
            "topologyKey": "topology.kubernetes.io/zone",
            "whenUnsatisfiable": "DoNotSchedule",
            "labelSelector": {"matchLabels": {"app": "web"}},
        }
    ]
    anti = {
        "podAntiAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {
                    "labelSelector": {"matchLabels": {"app": "cache"}},
                    "topologyKey": "kubernetes.io/hostname",
                }
            ]
        }
    }
    gpu_tol = [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]
    for i in range(560):
        p = kube.make_pod(f"web-{i}", cpu="100m", memory="128Mi", labels={"app": "web"})
        p["spec"]["topologySpreadConstraints"] = spread
        pods.append(p)
    for i in range(300):
        cpu = ("250m", "500m", "1")[i % 3]
        pods.append(kube.make_pod(f"batch-{i}", cpu=cpu, memory="512Mi", labels={"app": "batch"}))
    for i in range(60):
        pods.append(
            kube.make_pod(f"db-{i}", cpu="250m", memory="1Gi", node_selector={"disktype": "ssd"})
        )
    for i in range(40):
        pods.append(
            kube.make_pod(
                f"cache-{i}", cpu="50m", memory="64Mi", labels={"app": "cache"}, affinity=anti
            )
        )
    for i in range(20):
        pods.append(
            kube.make_pod(
                f"train-{i}",
                cpu="2",
                memory="4Gi",
                extended={"nvidia.com/gpu": "1"},
                tolerations=gpu_tol,
            )
        )
    unfit = {f"huge-{i}" for i in range(8)} | {f"nozone-{i}" for i in range(6)}
    unfit |= {f"notol-{i}" for i in range(6)}
    pods += [kube.make_pod(f"huge-{i}", cpu="64", memory="1Gi") for i in range(8)]
    pods += [
        kube.make_pod(f"nozone-{i}", node_selector={"topology.kubernetes.io/zone": "zone-x"})
        for i in range(6)
    ]
    pods += [kube.make_pod(f"notol-{i}", extended={"nvidia.com/gpu": "1"}) for i in range(6)]
    return pods, unfit


def _percentile(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def run_live(*, keep: bool) -> int:
    import grpc
    from kubernetes import client, watch

    from splitsched.testing import controlplane, kube, stack
    from splitsched.v1 import scheduler_pb2, scheduler_pb2_grpc

    state_dir = REPO / ".local-cluster" / "demo"
    cp = controlplane.ControlPlane(state_dir)
    print("starting the local control plane (etcd, kube-apiserver, kwok)...", flush=True)
    cp.up()
    running: stack.Stack | None = None
    try:
        api = kube.api_client_from_kubeconfig(cp.kubeconfig_path)
        core = client.CoreV1Api(api)
        print(f"  kube-apiserver at {cp.server_url}; kubeconfig {cp.kubeconfig_path}")
        existing = {n.metadata.name for n in core.list_node().items}
        nodes = [n for n in demo_nodes() if n["metadata"]["name"] not in existing]
        for n in nodes:
            core.create_node(n)
        names = [n["metadata"]["name"] for n in demo_nodes()]
        kube.wait_nodes_ready(api, names=names, timeout=120)
        print(f"  {len(names)} kwok nodes ready (30 small, 14 large, 6 GPU tainted; 3 zones)")
        namespace = kube.create_namespace(api, prefix="demo")
        sa_ns = kube.create_namespace(api, prefix="splitsched-system")
        workdir = state_dir / "services"
        configs = stack.component_kubeconfigs(api, namespace=sa_ns, directory=workdir)
        running = stack.Stack(
            workdir=workdir,
            watcher_kubeconfig=configs["watcher"],
            binder_kubeconfig=configs["binder"],
            binders=2,
        )
        print("starting watcher, scheduler and 2 binders...", flush=True)
        running.start(timeout=90)
        print(
            f"  scheduler API at {running.scheduler.grpc_target} (logs in {workdir})\n", flush=True
        )
        manifests, unfit = demo_pods()
        created: dict[str, float] = {}
        bound_at: dict[str, float] = {}
        node_of: dict[str, str] = {}
        stop = threading.Event()

        def follow() -> None:
            """Record when each pod is first seen bound; re-watch if the stream ends."""
            version = ""
            while not stop.is_set():
                w = watch.Watch()
                try:
                    for ev in w.stream(
                        core.list_namespaced_pod,
                        namespace,
                        resource_version=version,
                        timeout_seconds=60,
                    ):
                        pod = ev["object"]
                        version = pod.metadata.resource_version
                        if pod.spec.node_name and pod.metadata.name not in bound_at:
                            bound_at[pod.metadata.name] = time.monotonic()
                            node_of[pod.metadata.name] = pod.spec.node_name
                        if stop.is_set():
                            w.stop()
                except client.ApiException:
                    version = ""  # 410 Gone: list again from now

        def catch_up() -> None:
            """A list is the truth: count binds the watch has not shown yet."""
            for pod in core.list_namespaced_pod(namespace).items:
                if pod.spec.node_name and pod.metadata.name not in bound_at:
                    bound_at[pod.metadata.name] = time.monotonic()
                    node_of[pod.metadata.name] = pod.spec.node_name

        follower = threading.Thread(target=follow, daemon=True)
        follower.start()
        time.sleep(0.5)
        print(f"creating {len(manifests)} pods with schedulerName: splitsched...", flush=True)
        t0 = time.monotonic()

        def create(m: dict[str, Any]) -> None:
            created[m["metadata"]["name"]] = time.monotonic()
            core.create_namespaced_pod(namespace, m)

        from concurrent.futures import ThreadPoolExecutor

        pool = ThreadPoolExecutor(8)
        creating = [pool.submit(create, m) for m in manifests]
        fit = len(manifests) - len(unfit)
        while len(bound_at) < fit and time.monotonic() - t0 < 300:
            done = sum(1 for f in creating if f.done())
            print(
                f"  {time.monotonic() - t0:5.1f}s  created {done:4d}/{len(manifests)}"
                f"  bound {len(bound_at):4d}/{fit}",
                flush=True,
            )
            time.sleep(1.0)
            if time.monotonic() - t0 > 5:
                catch_up()
        pool.shutdown(wait=True)
        elapsed = time.monotonic() - t0
        stop.set()
        latencies = [bound_at[n] - created[n] for n in bound_at if n in created]
        print(f"\nbound {len(bound_at)}/{len(manifests)} pods in {elapsed:.1f}s; ", end="")
        print(f"{len(manifests) - len(bound_at)} pending")
        print(
            f"creation to bound: p50 {_percentile(latencies, 0.5) * 1000:.0f} ms, "
            f"p99 {_percentile(latencies, 0.99) * 1000:.0f} ms"
        )
        per_node = Counter(node_of.values())
        print("\npods per node:")
        for name in sorted(per_node):
            print(f"  {name:<18} {per_node[name]:4d} {'#' * (per_node[name] // 2)}")
        print("\nhow the binders shared the work:")
        for svc in running.binder_services:
            found = re.findall(
                r'splitsched_binder_outcomes_total\{result="BOUND"\} (\S+)', svc.metrics()
            )
            print(f"  {svc.name}: {int(float(found[0])) if found else 0} bindings")
        print("\nwhy the unfit pods are pending (Scheduler.GetPod):")
        with grpc.insecure_channel(running.scheduler.grpc_target) as channel:
            api_stub = scheduler_pb2_grpc.SchedulerStub(channel)
            shown: set[str] = set()
            for name in sorted(unfit):
                kind = name.split("-")[0]
                if kind in shown:
                    continue
                shown.add(kind)
                status = api_stub.GetPod(
                    scheduler_pb2.GetPodRequest(namespace=namespace, name=name), timeout=5
                )
                print(f"  {name:<10} {status.message}")
        print(
            f"\ntry it yourself: splitsched pods --server {running.scheduler.grpc_target}; "
            f"KUBECONFIG={cp.kubeconfig_path} kubectl -n {namespace} get pods"
        )
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


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m splitsched.demo", description=__doc__)
    parser.add_argument("--offline", action="store_true", help="pure core on a sample file")
    parser.add_argument("--cluster", type=Path, default=SAMPLE, help="with --offline")
    parser.add_argument("--keep", action="store_true", help="leave it running until Ctrl-C")
    args = parser.parse_args(argv)
    if args.offline:
        return run_offline(args.cluster)
    return run_live(keep=args.keep)


if __name__ == "__main__":
    sys.exit(main())
