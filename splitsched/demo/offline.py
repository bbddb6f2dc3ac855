"""``python -m splitsched.demo --offline``: the pure core on a cluster dump, no processes.
Schedules the sample cluster's pending pods and prints where they went, node by node."""

from __future__ import annotations

import time
from pathlib import Path

from splitsched.core import batch, convert, models, profiles

REPO = Path(__file__).resolve().parents[2]
SAMPLE = REPO / "examples" / "sample-cluster.yaml"


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
