"""A random cluster from a seed: kwok nodes with zones, sizes, labels, taints, cordons,
extended resources and images. Pure: ``nodes(rng, count, features)`` returns manifests.

Nodes are named ``n00``, ``n01``, ... here; each run renames them with its own prefix
(``scenario.render``), so references to a node (``@n03`` in a pod) follow.
"""

from __future__ import annotations

import random
from collections.abc import Set
from typing import Any

from splitsched.testing.manifests import make_node

Manifest = dict[str, Any]

ZONE_LABEL = "topology.kubernetes.io/zone"
HOSTNAME_LABEL = "kubernetes.io/hostname"
ZONES = ("zone-a", "zone-b", "zone-c")
DISK_LABEL = "example.com/disk"
RANK_LABEL = "example.com/rank"  # an integer, for Gt/Lt
GPU = "example.com/gpu"
UNSCHEDULABLE_TAINT = "node.kubernetes.io/unschedulable"

TAINTS: tuple[Manifest, ...] = (
    {"key": "dedicated", "value": "infra", "effect": "NoSchedule"},
    {"key": "dedicated", "value": "gpu", "effect": "NoSchedule"},
    {"key": "maintenance", "effect": "NoExecute"},
    {"key": "spot", "value": "true", "effect": "PreferNoSchedule"},
)

IMAGES = (
    ("docker.io/library/nginx:1.27", 180_000_000),
    ("registry.example.com/team/api:v2", 450_000_000),
    ("docker.io/library/redis:latest", 120_000_000),
    ("quay.io/example/big-model:3", 2_500_000_000),
)


def local_name(index: int) -> str:
    return f"n{index:02d}"


def nodes(rng: random.Random, count: int, features: Set[str]) -> list[Manifest]:
    """``count`` node manifests; what each carries depends on ``features``."""
    return [_node(rng, i, features) for i in range(count)]


def _node(rng: random.Random, index: int, features: Set[str]) -> Manifest:
    labels: dict[str, str] = {RANK_LABEL: str(rng.randint(1, 5))}
    # One node in twelve has no zone: spread over zones cannot count it.
    if rng.random() < 11 / 12:
        labels[ZONE_LABEL] = ZONES[index % len(ZONES)] if index < 3 else rng.choice(ZONES)
    if rng.random() < 0.4:
        labels[DISK_LABEL] = rng.choice(("ssd", "hdd"))
    taints: list[Manifest] = []
    if "taints" in features and rng.random() < 0.3:
        # The API refuses two taints with one key and effect.
        first, *rest = rng.sample(TAINTS, k=len(TAINTS))
        taints = [first]
        if rng.random() < 0.3:
            taints += [
                t for t in rest if (t["key"], t["effect"]) != (first["key"], first["effect"])
            ][:1]
    extended = {}
    if "extended" in features and rng.random() < 0.3:
        extended[GPU] = rng.choice(("1", "2"))
    pods = 110
    if "pod-count" in features and rng.random() < 0.15:
        pods = rng.randint(1, 3)
    node = make_node(
        local_name(index),
        cpu=rng.choice(("1", "2", "4", "8")),
        memory=rng.choice(("2Gi", "4Gi", "8Gi", "16Gi")),
        pods=pods,
        labels=labels,
        taints=taints,
        extended=extended,
    )
    if "cordon" in features and rng.random() < 0.1:
        node["spec"]["unschedulable"] = True
    if "images" in features:
        chosen = rng.sample(IMAGES, k=rng.randint(0, 2))
        node["status"]["images"] = [{"names": [n], "sizeBytes": size} for n, size in chosen]
    return node
