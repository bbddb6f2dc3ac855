"""The pod and node streams `bench.core` schedules.

* ``basic``: scheduler_perf's SchedulingBasic: every node and every pod alike. Easy for
  us: consecutive pods are identical, so the score memo rescores only what changed.
* ``mixed``: what a real cluster sends: consecutive pods differ. Requests drawn from four
  sizes; about 30% spread over zones, 20% with required node affinity to two of four
  pools, 10% with pod anti-affinity on the hostname. Nodes carry a zone (one of 10) and a
  pool label. Bound pods come from the same draw, so spread and anti-affinity count real
  neighbours.

Bound pods are placed by a stride over the nodes (a snapshot, as the watcher would stream
it), not scheduled: building the view from them is measured on its own.
"""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Sequence

from splitsched.core import models

GI = 1024**3
MI = 1024**2
SHAPES = ("basic", "mixed")
NAMESPACE = "sched-perf"

#: (cpu milli, memory bytes, weight): small pods dominate, as in most clusters.
SIZES = ((100, 256 * MI, 4), (250, 512 * MI, 3), (500, 1 * GI, 2), (1000, 4 * GI, 1))
ZONES = 10
POOLS = 4
SPREAD_APPS = 20
ANTI_APPS = 2000


def make_nodes(count: int, *, shape: str) -> list[models.Node]:
    zones = 3 if shape == "basic" else ZONES
    nodes = []
    for i in range(count):
        labels = {
            "kubernetes.io/hostname": f"node-{i}",
            "topology.kubernetes.io/zone": f"zone-{i % zones}",
        }
        if shape == "mixed":
            labels["pool"] = f"pool-{(i // zones) % POOLS}"
        nodes.append(
            models.Node(
                name=f"node-{i}",
                labels=labels,
                allocatable={models.CPU: 4000, models.MEMORY: 32 * GI, models.PODS: 110},
            )
        )
    return nodes


def make_pods(
    count: int, *, shape: str, prefix: str, start: int = 0, seed: int = 0
) -> list[models.Pod]:
    """Pending pods (no node name), in creation order."""
    rng = random.Random(f"{seed}-{prefix}")
    make = _basic_pod if shape == "basic" else _mixed_pod
    return [make(rng, f"{prefix}-{i}", float(start + i)) for i in range(count)]


def bind_round(pods: Sequence[models.Pod], nodes: Sequence[models.Node]) -> list[models.Pod]:
    """The pods as bound: pod i on node (i * stride) mod nodes, with a stride coprime to the
    node count so neighbours spread over zones and pools."""
    stride = next(s for s in range(7919, 7919 + len(nodes) + 2) if _coprime(s, len(nodes)))
    return [
        dataclasses.replace(pod, node_name=nodes[(i * stride) % len(nodes)].name, phase="Running")
        for i, pod in enumerate(pods)
    ]


def _coprime(a: int, b: int) -> bool:
    while b:
        a, b = b, a % b
    return a == 1


def _basic_pod(rng: random.Random, name: str, created: float) -> models.Pod:
    requests = {models.CPU: 100, models.MEMORY: 500 * MI}
    return _pod(name, created, requests)


def _mixed_pod(rng: random.Random, name: str, created: float) -> models.Pod:
    cpu, memory, _ = rng.choices(SIZES, weights=[s[2] for s in SIZES])[0]
    requests = {models.CPU: cpu, models.MEMORY: memory}
    labels: dict[str, str] = {}
    spread: tuple[models.TopologySpreadConstraint, ...] = ()
    affinity = anti = None
    if rng.random() < 0.30:
        labels["spread"] = f"s{rng.randrange(SPREAD_APPS)}"
        spread = (
            models.TopologySpreadConstraint(
                max_skew=1,
                topology_key="topology.kubernetes.io/zone",
                when_unsatisfiable="DoNotSchedule",
                label_selector=models.LabelSelector(match_labels=(("spread", labels["spread"]),)),
            ),
        )
    if rng.random() < 0.20:
        pools = tuple(sorted(rng.sample([f"pool-{p}" for p in range(POOLS)], 2)))
        term = models.NodeSelectorTerm(
            match_expressions=(models.NodeSelectorRequirement("pool", "In", pools),)
        )
        affinity = models.NodeAffinity(required=(term,))
    if rng.random() < 0.10:
        labels["anti"] = f"a{rng.randrange(ANTI_APPS)}"
        anti_term = models.PodAffinityTerm(
            label_selector=models.LabelSelector(match_labels=(("anti", labels["anti"]),)),
            topology_key="kubernetes.io/hostname",
        )
        anti = models.PodAffinity(required=(anti_term,))
    return _pod(
        name,
        created,
        requests,
        labels=labels,
        topology_spread_constraints=spread,
        node_affinity=affinity,
        pod_anti_affinity=anti,
    )


def _pod(name: str, created: float, requests: dict[str, int], **extra: object) -> models.Pod:
    return models.Pod(
        uid=name,
        namespace=NAMESPACE,
        name=name,
        scheduler_name="splitsched",
        containers=(models.Container(name="pause", requests=requests),),
        creation_timestamp=created,
        **extra,  # type: ignore[arg-type]
    )
