"""Core benchmark: scheduler_perf's SchedulingBasic shape, in-process, no API server.

5,000 nodes (4 cpu, 32Gi, 110 pods, as scheduler_perf's node-default.yaml), 1,000
initial pods, then 10,000 measured pods (100m cpu, 500Mi, as pod-default.yaml) through
the full default profile: every node filtered and scored, no sampling. Prints pods/s and
writes bench/results/core-<date>.json. Run: `make bench-core` or
`python -m bench.core --nodes 5000 --pods 10000`.
"""

from __future__ import annotations

import argparse
import cProfile
import datetime as dt
import json
import os
import platform
import pstats
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from splitsched.core import batch, models, profiles

RESULTS = Path(__file__).resolve().parent / "results"
GI = 1024**3
MI = 1024**2


def make_nodes(count: int) -> list[models.Node]:
    return [
        models.Node(
            name=f"node-{i}",
            labels={
                "kubernetes.io/hostname": f"node-{i}",
                "topology.kubernetes.io/zone": f"zone-{i % 3}",
            },
            allocatable={models.CPU: 4000, models.MEMORY: 32 * GI, models.PODS: 110},
        )
        for i in range(count)
    ]


def make_pods(count: int, *, prefix: str, start: int = 0) -> list[models.Pod]:
    requests = {models.CPU: 100, models.MEMORY: 500 * MI}
    return [
        models.Pod(
            uid=f"{prefix}-{i}",
            namespace="sched-perf",
            name=f"{prefix}-{i}",
            scheduler_name="splitsched",
            containers=(models.Container(name="pause", requests=requests),),
            creation_timestamp=float(start + i),
        )
        for i in range(count)
    ]


def run(nodes: int, pods: int, init_pods: int, *, profile: bool) -> dict[str, object]:
    profs = profiles.load_profiles(None)
    algo = batch.build(nodes=make_nodes(nodes), bound_pods=[], profiles=profs)
    list(batch.schedule_all(algo, make_pods(init_pods, prefix="init")))
    measured = make_pods(pods, prefix="pod", start=init_pods)
    prof = cProfile.Profile() if profile else None
    started = time.perf_counter()
    if prof:
        prof.enable()
    placed = sum(1 for p in batch.schedule_all(algo, measured) if p.node)
    if prof:
        prof.disable()
    elapsed = time.perf_counter() - started
    if prof:
        pstats.Stats(prof).sort_stats("cumulative").print_stats(25)
    per_node = np.array([len(p) for p in algo.table.pods])
    return {
        "benchmark": "core SchedulingBasic (in-process, no API server)",
        "nodes": nodes,
        "init_pods": init_pods,
        "measured_pods": pods,
        "placed": placed,
        "seconds": round(elapsed, 3),
        "pods_per_second": round(pods / elapsed, 1),
        "pods_per_node_min_max": [int(per_node.min()), int(per_node.max())],
        "machine": f"{platform.machine()}, {os.cpu_count()} cpus",
        "python": platform.python_version(),
        "load_average_1m_at_end": round(os.getloadavg()[0], 2),
        "numpy": np.__version__,
        "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "command": "python -m bench.core " + " ".join(sys.argv[1:]),
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--pods", type=int, default=10000)
    parser.add_argument("--init-pods", type=int, default=1000)
    parser.add_argument("--profile", action="store_true", help="print a cProfile summary")
    parser.add_argument("--no-record", action="store_true", help="don't write bench/results")
    args = parser.parse_args(argv)
    result = run(args.nodes, args.pods, args.init_pods, profile=args.profile)
    print(json.dumps(result, indent=2))
    if not args.no_record:
        RESULTS.mkdir(parents=True, exist_ok=True)
        out = RESULTS / f"core-{dt.date.today().isoformat()}.json"
        out.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
        print(
            f"recorded in {out.relative_to(Path.cwd()) if out.is_relative_to(Path.cwd()) else out}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
