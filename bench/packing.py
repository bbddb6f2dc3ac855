"""Topology-aware packing against kube's allocator: how many 8-GPU claims still fit.

    python -m bench.packing --seed 1 --nodes 32 --arrivals 1500 [--same-root] [--out FILE]

An in-process simulation with the core alone (FrameworkAlgorithm and its DeviceView; no
API server, no binder): nodes of 8 GPUs on two PCIe roots of 4 (attribute
`gpu.example.com/pcieRoot`), and one random stream of pods, each with one claim for 1, 2,
4 or 8 GPUs (weights 4:3:2:1), arriving as a Poisson process and leaving after an
exponential lifetime, the offered load `--load` of the cluster's GPUs. A pod that fits
nowhere when it arrives is dropped (no retry, no preemption). `--same-root` makes the 2-
and 4-GPU claims ask for one PCIe root (matchAttribute), as NCCL-minded users do.

The same stream is scheduled three times: with the default profile, which is
kube-scheduler's own allocator semantics as ported here (`splitsched.core.devices.allocator`:
the first allocation in device order; node ties broken at random), with DevicePacking
enabled (weight 5), and with its in-node choice alone (PreFilter only, no Score).
Printed, per run: the fraction of 8-GPU claims that fit when they arrived, and of all
claims. Timing is not measured.
"""

from __future__ import annotations

import argparse
import dataclasses
import random
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from splitsched.core import algorithm, models, profiles
from splitsched.core.cache import SchedulerCache
from splitsched.core.devices import model

DRIVER = "gpu.example.com"
GPU_CLASS = model.DeviceClass("gpu", (f'device.driver == "{DRIVER}"',))
SIZES = ((1, 4), (2, 3), (4, 2), (8, 1))  # (GPUs, weight)
MEAN_LIFETIME = 1.0
ROOM = {models.CPU: 64_000, models.MEMORY: 512 * 2**30, models.PODS: 110}
PACKING_PROFILE: dict[str, Any] = {
    "plugins": {"multiPoint": {"enabled": [{"name": "DevicePacking", "weight": 5}]}}
}
#: DevicePacking's in-node choice without its Score: how much of the gain is the choice.
CHOICE_ONLY_PROFILE: dict[str, Any] = {
    "plugins": {"preFilter": {"enabled": [{"name": "DevicePacking"}]}}
}


@dataclass(frozen=True, slots=True)
class Arrival:
    index: int
    at: float
    gpus: int
    leaves_at: float


@dataclass(slots=True)
class Tally:
    offered: dict[int, int] = dataclasses.field(default_factory=dict)
    placed: dict[int, int] = dataclasses.field(default_factory=dict)

    def fraction(self, gpus: int | None = None) -> float:
        keys = [gpus] if gpus is not None else list(self.offered)
        offered = sum(self.offered.get(k, 0) for k in keys)
        return sum(self.placed.get(k, 0) for k in keys) / offered if offered else 0.0


def stream(seed: int, nodes: int, arrivals: int, load: float) -> list[Arrival]:
    """The arrivals, with the rate that offers `load` of the GPUs on average."""
    rng = random.Random(seed)
    sizes, weights = zip(*SIZES, strict=True)
    mean_size = sum(s * w for s, w in SIZES) / sum(weights)
    rate = load * 8 * nodes / (mean_size * MEAN_LIFETIME)
    now, out = 0.0, []
    for i in range(arrivals):
        now += rng.expovariate(rate)
        gpus = rng.choices(sizes, weights)[0]
        out.append(Arrival(i, now, gpus, now + rng.expovariate(1 / MEAN_LIFETIME)))
    return out


def gpu_slice(node: str) -> model.ResourceSlice:
    devices = tuple(
        model.Device(f"gpu-{i}", {f"{DRIVER}/pcieRoot": f"{node}-root-{i // 4}"}) for i in range(8)
    )
    return model.ResourceSlice(f"{node}-gpus", DRIVER, node, 1, 1, node_name=node, devices=devices)


def build(nodes: int, spec: dict[str, Any] | None, seed: int) -> algorithm.FrameworkAlgorithm:
    cache = SchedulerCache()
    for i in range(nodes):
        name = f"node-{i:03d}"
        cache.add_node(models.Node(name, labels={"kubernetes.io/hostname": name}, allocatable=ROOM))
        cache.table.devices.set(gpu_slice(name))
    cache.table.devices.set(GPU_CLASS)
    config = profiles.load({"profiles": [spec]} if spec is not None else None)
    return algorithm.FrameworkAlgorithm(
        cache=cache, profiles=config.profiles, rng=random.Random(seed)
    )


def claim_for(a: Arrival, same_root: bool) -> model.ResourceClaim:
    request = model.DeviceRequest("gpu", model.RequestSpec("gpu", "gpu", count=a.gpus))
    constraints = (
        (model.MatchAttribute(f"{DRIVER}/pcieRoot"),) if same_root and a.gpus in (2, 4) else ()
    )
    return model.ResourceClaim(
        "bench", f"c-{a.index}", f"uid-c-{a.index}", requests=(request,), constraints=constraints
    )


def pod_for(a: Arrival) -> models.Pod:
    return models.Pod(
        f"uid-p-{a.index}", "bench", f"p-{a.index}", scheduler_name=profiles.DEFAULT_SCHEDULER_NAME,
        resource_claims=(models.PodResourceClaim("gpu", f"c-{a.index}"),),
    )  # fmt: skip


def run(
    arrivals: Sequence[Arrival], nodes: int, spec: dict[str, Any] | None, seed: int, same_root: bool
) -> Tally:
    """Schedule the stream; each placed pod's claim is written as the binder would, and
    taken away (claim and pod) when it leaves."""
    algo = build(nodes, spec, seed)
    view = algo.cache.table.devices
    running: list[tuple[float, model.ResourceClaim, str]] = []
    tally = Tally()
    for a in arrivals:
        for gone in [r for r in running if r[0] <= a.at]:
            running.remove(gone)
            view.remove(gone[1])
            algo.forget(gone[2])
        claim, pod = claim_for(a, same_root), pod_for(a)
        view.set(claim)
        tally.offered[a.gpus] = tally.offered.get(a.gpus, 0) + 1
        result = algo.schedule(pod)
        if result.bind is None or not algo.assume(pod, result.bind.node, result.state).ok:
            view.remove(claim)
            continue
        (write,) = algo.prebind_claims(pod.uid)
        consumer = model.ConsumerRef("pods", pod.name, pod.uid)
        written = dataclasses.replace(claim, allocation=write.allocation, reserved_for=(consumer,))
        view.set(written)
        algo.confirm(pod.uid)
        running.append((a.leaves_at, written, pod.uid))
        tally.placed[a.gpus] = tally.placed.get(a.gpus, 0) + 1
    return tally


def table(rows: Sequence[tuple[int, Tally, Tally, Tally]]) -> str:
    lines = [
        "| seed | 8-GPU claims fit: kube's allocator | DevicePacking | its choice only"
        " | all claims fit: kube's | DevicePacking | its choice only |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for seed, *tallies in rows:
        eights = [
            f"{t.fraction(8):.1%} ({t.placed.get(8, 0)}/{t.offered.get(8, 0)})" for t in tallies
        ]
        alls = [f"{t.fraction():.1%}" for t in tallies]
        lines.append(f"| {seed} | {' | '.join(eights)} | {' | '.join(alls)} |")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> str:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, action="append", help="repeatable; default 1 2 3")
    parser.add_argument("--nodes", type=int, default=32)
    parser.add_argument("--arrivals", type=int, default=1500)
    parser.add_argument("--load", type=float, default=0.85)
    parser.add_argument("--same-root", action="store_true")
    parser.add_argument("--out", help="also write the table to this file")
    args = parser.parse_args(argv)
    rows = []
    for seed in args.seed or (1, 2, 3):
        arrivals = stream(seed, args.nodes, args.arrivals, args.load)
        kube = run(arrivals, args.nodes, None, seed, args.same_root)
        packed = run(arrivals, args.nodes, PACKING_PROFILE, seed, args.same_root)
        choice = run(arrivals, args.nodes, CHOICE_ONLY_PROFILE, seed, args.same_root)
        rows.append((seed, kube, packed, choice))
    text = table(rows)
    print(text)
    if args.out:
        with open(args.out, "w", encoding="utf-8") as f:
            f.write(text + "\n")
    return text


if __name__ == "__main__":
    main()
