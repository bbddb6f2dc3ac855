"""Write examples/sample-cluster.yaml: a deterministic cluster dump for the offline demo.

Shaped like `kubectl get nodes,pods -A -o yaml`: 40 nodes in three zones (some large, some
GPU nodes tainted, two cordoned) and 360 pods: some already bound by another scheduler,
the rest pending for splitsched with a mix of requests, selectors, tolerations, spread
constraints, anti-affinity and priorities, and a few that cannot fit anywhere.
Run: .venv/bin/python scripts/make-sample-cluster.py
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import yaml

OUT = Path(__file__).resolve().parents[1] / "examples" / "sample-cluster.yaml"
ZONES = ("zone-a", "zone-b", "zone-c")


def node(i: int, rng: random.Random) -> dict[str, Any]:
    kind = "gpu" if i % 10 == 9 else ("large" if i % 4 == 3 else "standard")
    cpu, mem = {"gpu": ("16", "64Gi"), "large": ("16", "64Gi"), "standard": ("4", "16Gi")}[kind]
    labels = {
        "kubernetes.io/hostname": f"node-{i:02d}",
        "topology.kubernetes.io/zone": ZONES[i % 3],
        "node.kubernetes.io/instance-type": kind,
    }
    if rng.random() < 0.5:
        labels["disktype"] = "ssd"
    allocatable = {"cpu": cpu, "memory": mem, "pods": "110", "ephemeral-storage": "100Gi"}
    spec: dict[str, Any] = {}
    if kind == "gpu":
        allocatable["nvidia.com/gpu"] = "4"
        spec["taints"] = [{"key": "nvidia.com/gpu", "value": "true", "effect": "NoSchedule"}]
    if i in (5, 17):
        spec["unschedulable"] = True
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": f"node-{i:02d}", "uid": f"node-uid-{i}", "labels": labels},
        "spec": spec,
        "status": {
            "allocatable": allocatable,
            "capacity": allocatable,
            "conditions": [{"type": "Ready", "status": "True"}],
        },
    }


def pod(
    name: str, *, ns: str, t: int, cpu: str, mem: str, extra: dict[str, Any] | None = None
) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "schedulerName": "splitsched",
        "containers": [
            {
                "name": "main",
                "image": "registry.k8s.io/pause:3.10",
                "resources": {"requests": {"cpu": cpu, "memory": mem}},
            }
        ],
    }
    labels = {"app": name.rsplit("-", 1)[0]}
    spec.update(extra or {})
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": ns,
            "uid": f"uid-{ns}-{name}",
            "labels": labels,
            "creationTimestamp": f"2026-11-01T10:{t // 60:02d}:{t % 60:02d}Z",
        },
        "spec": spec,
        "status": {"phase": "Pending"},
    }


def main() -> None:
    rng = random.Random(7)
    items: list[dict[str, Any]] = [node(i, rng) for i in range(40)]
    t = 0
    # Already running, placed by kube-scheduler: they hold capacity.
    for i in range(60):
        p = pod(f"legacy-{i}", ns="legacy", t=t, cpu="500m", mem="1Gi")
        p["spec"]["schedulerName"] = "default-scheduler"
        p["spec"]["nodeName"] = f"node-{(i * 7) % 40:02d}"
        p["status"]["phase"] = "Running"
        items.append(p)
        t += 1
    spread = {
        "topologySpreadConstraints": [
            {
                "maxSkew": 1,
                "topologyKey": "topology.kubernetes.io/zone",
                "whenUnsatisfiable": "DoNotSchedule",
                "labelSelector": {"matchLabels": {"app": "web"}},
            }
        ]
    }
    for i in range(120):
        items.append(pod(f"web-{i}", ns="shop", t=t, cpu="250m", mem="512Mi", extra=spread))
        t += 1
    for i in range(80):
        cpu, mem = rng.choice([("1", "2Gi"), ("2", "4Gi"), ("500m", "1Gi")])
        items.append(pod(f"batch-{i}", ns="batch", t=t, cpu=cpu, mem=mem))
        t += 1
    gpu_extra = {
        "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
    }
    for i in range(12):
        p = pod(f"train-{i}", ns="ml", t=t, cpu="2", mem="8Gi", extra=gpu_extra)
        p["spec"]["containers"][0]["resources"]["requests"]["nvidia.com/gpu"] = "1"
        p["spec"]["priority"] = 1000
        items.append(p)
        t += 1
    for i in range(20):
        items.append(
            pod(
                f"db-{i}",
                ns="shop",
                t=t,
                cpu="1",
                mem="4Gi",
                extra={"nodeSelector": {"disktype": "ssd"}},
            )
        )
        t += 1
    anti = {
        "affinity": {
            "podAntiAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": [
                    {
                        "labelSelector": {"matchLabels": {"app": "cache"}},
                        "topologyKey": "kubernetes.io/hostname",
                    }
                ]
            }
        }
    }
    for i in range(50):
        items.append(pod(f"cache-{i}", ns="shop", t=t, cpu="100m", mem="256Mi", extra=anti))
        t += 1
    # Cannot fit: too big, a zone that doesn't exist, a GPU without the toleration.
    for i in range(6):
        items.append(pod(f"huge-{i}", ns="batch", t=t, cpu="64", mem="256Gi"))
        t += 1
    for i in range(6):
        items.append(
            pod(
                f"lost-{i}",
                ns="batch",
                t=t,
                cpu="100m",
                mem="128Mi",
                extra={"nodeSelector": {"topology.kubernetes.io/zone": "zone-d"}},
            )
        )
        t += 1
    for i in range(6):
        p = pod(f"gpu-notol-{i}", ns="ml", t=t, cpu="1", mem="1Gi")
        p["spec"]["containers"][0]["resources"]["requests"]["nvidia.com/gpu"] = "1"
        items.append(p)
        t += 1
    doc = {"apiVersion": "v1", "kind": "List", "metadata": {"resourceVersion": ""}, "items": items}
    OUT.write_text(yaml.safe_dump(doc, sort_keys=False), encoding="utf-8")
    print(f"wrote {OUT} ({len(items)} objects)")


if __name__ == "__main__":
    main()
