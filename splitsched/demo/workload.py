"""What the live demo creates: 50 kwok nodes of three kinds in three zones and 1,000 pods
of mixed shapes in the namespace ``shop``, 20 of which fit nowhere on purpose (so the
summary can show why), and one more held by a scheduling gate. docs/api.md's examples name
these. Pure manifests (``splitsched.testing.manifests``); ``splitsched.demo.live`` creates
them.
"""

from __future__ import annotations

from typing import Any

from splitsched.testing.manifests import Manifest, make_node, make_pod

NAMESPACE = "shop"
ZONES = ("zone-a", "zone-b", "zone-c")
GPU_TAINT = {"key": "nvidia.com/gpu", "value": "true", "effect": "NoSchedule"}
GPU_TOLERATION = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}


def demo_nodes() -> list[Manifest]:
    """50 nodes: 30 small, 14 large, 6 GPU (tainted); zones round-robin."""
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
            taints = [GPU_TAINT]
        labels = {"topology.kubernetes.io/zone": zone, "node.kubernetes.io/instance-type": kind}
        if i % 5 == 0:
            labels["disktype"] = "ssd"
        out.append(
            make_node(
                f"demo-{kind}-{i:02d}",
                cpu=cpu,
                memory=mem,
                labels=labels,
                taints=taints,
                extended=extra,
            )
        )
    return out


def demo_pods() -> tuple[list[Manifest], set[str]]:
    """The 1,000 pods, and the names of those that fit nowhere: too big for any node,
    selecting a zone no node has, or asking for a GPU without tolerating the GPU taint."""
    pods = [*_web(560), *_batch(300), *_db(60), *_cache(40), *_train(20)]
    unfit = {f"huge-{i}" for i in range(8)} | {f"nozone-{i}" for i in range(6)}
    unfit |= {f"notol-{i}" for i in range(6)}
    pods += [make_pod(f"huge-{i}", cpu="64", memory="1Gi") for i in range(8)]
    pods += [
        make_pod(f"nozone-{i}", node_selector={"topology.kubernetes.io/zone": "zone-x"})
        for i in range(6)
    ]
    pods += [make_pod(f"notol-{i}", extended={"nvidia.com/gpu": "1"}) for i in range(6)]
    return pods, unfit


def gated_pod() -> Manifest:
    """A pod an admission tool (Kueue) holds back: never tried while its gate is on."""
    pod = make_pod("train-gated", cpu="2", memory="4Gi")
    pod["spec"]["schedulingGates"] = [{"name": "kueue.x-k8s.io/admission"}]
    return pod


def _web(count: int) -> list[Manifest]:
    """Spread evenly over the zones (topology spread, max skew 1)."""
    spread: list[dict[str, Any]] = [
        {
            "maxSkew": 1,
            "topologyKey": "topology.kubernetes.io/zone",
            "whenUnsatisfiable": "DoNotSchedule",
            "labelSelector": {"matchLabels": {"app": "web"}},
        }
    ]
    pods = []
    for i in range(count):
        p = make_pod(f"web-{i}", cpu="100m", memory="128Mi", labels={"app": "web"})
        p["spec"]["topologySpreadConstraints"] = spread
        pods.append(p)
    return pods


def _batch(count: int) -> list[Manifest]:
    return [
        make_pod(f"batch-{i}", cpu=("250m", "500m", "1")[i % 3], memory="512Mi",
                 labels={"app": "batch"})
        for i in range(count)
    ]  # fmt: skip


def _db(count: int) -> list[Manifest]:
    """On SSD nodes only (a node selector)."""
    return [
        make_pod(f"db-{i}", cpu="250m", memory="1Gi", node_selector={"disktype": "ssd"})
        for i in range(count)
    ]


def _cache(count: int) -> list[Manifest]:
    """At most one per node (required pod anti-affinity on the host name)."""
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
    return [
        make_pod(f"cache-{i}", cpu="50m", memory="64Mi", labels={"app": "cache"}, affinity=anti)
        for i in range(count)
    ]


def _train(count: int) -> list[Manifest]:
    """One GPU each, tolerating the GPU nodes' taint."""
    return [
        make_pod(f"train-{i}", cpu="2", memory="4Gi", extended={"nvidia.com/gpu": "1"},
                 tolerations=[GPU_TOLERATION])
        for i in range(count)
    ]  # fmt: skip
