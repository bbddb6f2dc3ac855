"""The workloads, in scheduler_perf's shapes scaled to a 2-core machine.

Called by ``bench.sidebyside.runner``. Every workload runs on the same kwok nodes
(scheduler_perf's node-default: 4 cpu, 32Gi, 110 pods), spread over three zones
(``topology.kubernetes.io/zone=zone-0|1|2``, node ``i`` in zone ``i % 3``), and starts from
the same load: ``init_pods`` pods created already bound (``spec.nodeName`` round-robin over
the nodes), identical for every contender, so the contenders differ only in how they place
the measured pods. Pods are scheduler_perf's pod-default (pause, 100m cpu, 500Mi).

* ``basic`` -- SchedulingBasic: measured pods created up front, then the scheduler starts.
* ``affinity`` -- SchedulingNodeAffinity: the same, each pod with a required node affinity
  ``topology.kubernetes.io/zone In [zone-0, zone-1]`` (two thirds of the nodes feasible).
* ``spread`` -- TopologySpreading: the same, each pod with a zone topology spread
  constraint (maxSkew 1, DoNotSchedule) over its own label. Not in the default set.
* ``devices`` -- Dynamic Resource Allocation: the same as ``basic``, each pod with one
  ResourceClaim of one GPU from a ResourceClaimTemplate with a CEL selector; every node has
  8 GPUs (``bench.sidebyside.devices``). Pods at most 8 per node. Not in the default set.
* ``idle`` -- no measured pods: the nodes and the init pods bound, the contender started
  and settled, then every process's CPU over an idle window (``idle_seconds``) and its
  peak RSS: what a scheduler costs a cluster when nothing is pending.
* ``rate`` -- a fixed arrival rate (e.g. 100 pods/s for 20 s) with the scheduler already
  running: reports creation-to-bound latency.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from bench.sidebyside import devices
from splitsched.testing import kube

ZONE_LABEL = "topology.kubernetes.io/zone"
ZONES = ("zone-0", "zone-1", "zone-2")
NODE_CPU = "4"
NODE_MEMORY = "32Gi"
NODE_PODS = 110
POD_CPU = "100m"
POD_MEMORY = "500Mi"
BENCH_LABEL = "splitsched.io/bench"

Manifest = dict[str, Any]


@dataclass(frozen=True)
class Workload:
    """One workload: how many pods, how they arrive, and what each measured pod asks for."""

    name: str
    description: str
    init_pods: int
    pods: int
    #: Pods/s for the fixed-arrival-rate workload; 0 means all created before the start.
    rate: float = 0.0
    affinity: bool = False
    spread: bool = False
    #: Seconds of the idle window (the idle workload); 0 for every other workload.
    idle_seconds: float = 0.0
    #: Each measured pod claims one GPU (``bench.sidebyside.devices``).
    devices: bool = False

    @property
    def idle(self) -> bool:
        return self.idle_seconds > 0

    @property
    def upfront(self) -> bool:
        return self.rate <= 0

    def init_pod(self, index: int, *, node: str, scheduler_name: str) -> Manifest:
        """An already-bound pod: load on the nodes, placed identically for every contender."""
        pod = kube.make_pod(
            f"init-{index}",
            scheduler_name=scheduler_name,
            cpu=POD_CPU,
            memory=POD_MEMORY,
            labels={BENCH_LABEL: "init"},
        )
        pod["spec"]["nodeName"] = node
        return pod

    def measured_pod(self, index: int, *, scheduler_name: str) -> Manifest:
        affinity: Manifest | None = None
        if self.affinity:
            term = {"key": ZONE_LABEL, "operator": "In", "values": list(ZONES[:2])}
            affinity = {
                "nodeAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": {
                        "nodeSelectorTerms": [{"matchExpressions": [term]}]
                    }
                }
            }
        pod = kube.make_pod(
            f"pod-{index}",
            scheduler_name=scheduler_name,
            cpu=POD_CPU,
            memory=POD_MEMORY,
            labels={BENCH_LABEL: "measured", "app": self.name},
            affinity=affinity,
        )
        if self.devices:
            devices.with_claim(pod)
        if self.spread:
            pod["spec"]["topologySpreadConstraints"] = [
                {
                    "maxSkew": 1,
                    "topologyKey": ZONE_LABEL,
                    "whenUnsatisfiable": "DoNotSchedule",
                    "labelSelector": {"matchLabels": {"app": self.name}},
                }
            ]
        return pod


def build(
    names: Sequence[str],
    *,
    init_pods: int,
    pods: int,
    rate: float,
    rate_seconds: float,
    idle_seconds: float = 60.0,
) -> list[Workload]:
    """The named workloads at the given sizes (unknown names raise ValueError)."""
    known = {
        "basic": Workload(
            "basic", "SchedulingBasic: pods created up front", init_pods=init_pods, pods=pods
        ),
        "affinity": Workload(
            "affinity",
            "SchedulingNodeAffinity: required zone In [zone-0, zone-1], created up front",
            init_pods=init_pods,
            pods=pods,
            affinity=True,
        ),
        "spread": Workload(
            "spread",
            "TopologySpreading: zone maxSkew 1 DoNotSchedule, created up front",
            init_pods=init_pods,
            pods=pods,
            spread=True,
        ),
        "devices": Workload(
            "devices",
            "DRA: each pod claims 1 GPU from a template (CEL selector), created up front",
            init_pods=init_pods,
            pods=pods,
            devices=True,
        ),
        "idle": Workload(
            "idle",
            f"idle: {init_pods} pods bound, none pending; CPU over {idle_seconds:g} s",
            init_pods=init_pods,
            pods=0,
            idle_seconds=idle_seconds,
        ),
        "rate": Workload(
            "rate",
            f"fixed arrival rate: {rate:g} pods/s for {rate_seconds:g} s, scheduler running",
            init_pods=init_pods,
            pods=max(1, round(rate * rate_seconds)),
            rate=rate,
        ),
    }
    unknown = [n for n in names if n not in known]
    if unknown:
        raise ValueError(f"unknown workloads {unknown}; choose from {sorted(known)}")
    return [known[n] for n in names]


def node_groups(count: int) -> list[tuple[str, int, dict[str, str]]]:
    """(name prefix, how many, labels) per zone: node ``i`` of the run goes to zone ``i % 3``."""
    groups = []
    for z, zone in enumerate(ZONES):
        n = len(range(z, count, len(ZONES)))
        if n:
            groups.append((f"bench-{zone}", n, {ZONE_LABEL: zone}))
    return groups
