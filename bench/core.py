"""Core benchmark: scheduler_perf's SchedulingBasic shape, in-process, no API server.

5,000 nodes (4 cpu, 32Gi, 110 pods, as scheduler_perf's node-default.yaml), 1,000
initial pods, then 10,000 measured pods (100m cpu, 500Mi, as pod-default.yaml) through
the full default profile: every node filtered and scored, no sampling. Prints pods/s and
writes bench/results/core-<date>.json. Run: `make bench-core` or
`python -m bench.core --nodes 5000 --pods 10000`.

`--shape mixed` sends pods that differ from one another (bench/core_shapes.py), and
`--bound-pods N` starts from a full cluster: the view is built from N bound pods (timed,
with the RSS) before the measured pods arrive, e.g.
`python -m bench.core --shape mixed --nodes 15000 --bound-pods 150000 --init-pods 0 --pods 5000`.
"""

from __future__ import annotations

import argparse
import cProfile
import datetime as dt
import hashlib
import json
import os
import platform
import pstats
import resource
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from bench import core_shapes
from splitsched.core import algorithm, batch, models, profiles

RESULTS = Path(__file__).resolve().parent / "results"


def run(
    nodes: int,
    pods: int,
    init_pods: int,
    *,
    profile: bool,
    shape: str = "basic",
    bound_pods: int = 0,
) -> dict[str, object]:
    """Build the view from `bound_pods` already bound (timed), schedule `init_pods`
    (untimed), then time `pods` measured pods."""
    profs = profiles.load_profiles(None)
    node_list = core_shapes.make_nodes(nodes, shape=shape)
    snapshot = core_shapes.bind_round(
        core_shapes.make_pods(bound_pods, shape=shape, prefix="bound"), node_list
    )
    rss_before_build = _rss_mib()
    started = time.perf_counter()
    algo = batch.build(nodes=node_list, bound_pods=snapshot, profiles=profs)
    build_seconds = time.perf_counter() - started
    del snapshot
    list(batch.schedule_all(algo, core_shapes.make_pods(init_pods, shape=shape, prefix="init")))
    measured = core_shapes.make_pods(pods, shape=shape, prefix="pod", start=init_pods)
    placements, elapsed = _timed_schedule(algo, measured, profile=profile)
    placed = sum(1 for _, node in placements if node)
    per_node = np.array([len(p) for p in algo.table.pods])
    return {
        "benchmark": f"core {shape} (in-process, no API server)",
        "shape": shape,
        "nodes": nodes,
        "bound_pods": bound_pods,
        "init_pods": init_pods,
        "measured_pods": pods,
        "placed": placed,
        "seconds": round(elapsed, 3),
        "pods_per_second": round(pods / elapsed, 1),
        "view_build_seconds": round(build_seconds, 3),
        "rss_mib_before_build": rss_before_build,
        "peak_rss_mib": _peak_rss_mib(),
        "pods_per_node_min_max": [int(per_node.min()), int(per_node.max())],
        "placements_digest": placements_digest(placements),
        "machine": f"{platform.machine()}, {os.cpu_count()} cpus",
        "python": platform.python_version(),
        "load_average_1m_at_end": round(os.getloadavg()[0], 2),
        "numpy": np.__version__,
        "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "command": "python -m bench.core " + " ".join(sys.argv[1:]),
    }


def placements_digest(placements: Sequence[tuple[str, str | None]]) -> str:
    """A short hash of pod -> node, in scheduling order: two runs of one command with the
    same digest placed every pod alike (how a speed-up shows it changed no placement)."""
    text = "".join(f"{pod}\t{node or '-'}\n" for pod, node in placements)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _timed_schedule(
    algo: algorithm.FrameworkAlgorithm, measured: list[models.Pod], *, profile: bool
) -> tuple[list[tuple[str, str | None]], float]:
    prof = cProfile.Profile() if profile else None
    started = time.perf_counter()
    if prof:
        prof.enable()
    placed = [(p.pod.uid, p.node) for p in batch.schedule_all(algo, measured)]
    if prof:
        prof.disable()
    elapsed = time.perf_counter() - started
    if prof:
        pstats.Stats(prof).sort_stats("cumulative").print_stats(25)
    return placed, elapsed


def _rss_mib() -> int:
    """Resident set size now (Linux: /proc/self/statm)."""
    pages = int(Path("/proc/self/statm").read_text().split()[1])
    return pages * os.sysconf("SC_PAGE_SIZE") // 2**20


def _peak_rss_mib() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--pods", type=int, default=10000)
    parser.add_argument("--init-pods", type=int, default=1000, help="scheduled, untimed")
    parser.add_argument(
        "--bound-pods",
        type=int,
        default=0,
        help="already bound: the snapshot the view is built from",
    )
    parser.add_argument("--shape", choices=core_shapes.SHAPES, default="basic")
    parser.add_argument("--profile", action="store_true", help="print a cProfile summary")
    parser.add_argument("--no-record", action="store_true", help="don't write bench/results")
    args = parser.parse_args(argv)
    result = run(
        args.nodes,
        args.pods,
        args.init_pods,
        profile=args.profile,
        shape=args.shape,
        bound_pods=args.bound_pods,
    )
    print(json.dumps(result, indent=2))
    if not args.no_record:
        RESULTS.mkdir(parents=True, exist_ok=True)
        stem = "core" if args.shape == "basic" else f"core-{args.shape}-{args.nodes}"
        out = RESULTS / f"{stem}-{dt.date.today().isoformat()}.json"
        out.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
        print(
            f"recorded in {out.relative_to(Path.cwd()) if out.is_relative_to(Path.cwd()) else out}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
