"""CLI: ``python -m bench.agreement --seed N [--seeds K]``.

Starts its own control plane, kube-scheduler and splitsched, runs seeds N..N+K-1, prints
one table per seed (the pods that disagree; ``--all-pods`` for every pod) and the
summary, and with ``--record`` writes ``bench/results/agreement-<time>.json`` (or
``--output``). Exit status 0 when every pod of every seed agrees, 1 otherwise, 2 for bad
arguments.
"""

from __future__ import annotations

import argparse
import datetime as dt
import io
import logging
import os
import signal
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bench.agreement import features, report, runner, scenario
from splitsched.testing import controlplane

RESULTS = Path(__file__).resolve().parents[1] / "results"


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m bench.agreement",
        description="kube-scheduler as the oracle: random clusters and workloads through "
        "both schedulers on one control plane, compared pod by pod",
    )
    p.add_argument("--seed", type=int, default=1, help="first seed (default 1)")
    p.add_argument("--seeds", type=int, default=1, help="how many seeds from --seed")
    p.add_argument("--nodes", type=int, default=scenario.DEFAULT_NODES, help="nodes per seed")
    p.add_argument("--pods", type=int, default=scenario.DEFAULT_PODS, help="pods per seed")
    p.add_argument(
        "--features",
        default="",
        help="comma-separated; names replace the default set, +name/-name edit it (default: "
        f"{','.join(sorted(features.DEFAULT_FEATURES))}; every one: {','.join(features.FEATURES)})",
    )
    p.add_argument("--all-pods", action="store_true", help="list every pod, not only disagreements")
    p.add_argument("--record", action="store_true", help="write the JSON under bench/results")
    p.add_argument("--output", type=Path, help="write the JSON here (implies --record)")
    p.add_argument(
        "--self-check",
        action="store_true",
        help="run kube-scheduler against itself: where it disagrees, it is nondeterministic",
    )
    p.add_argument("--keep-state", action="store_true", help="keep the work dir (logs, state)")
    return p


def _meta(args: argparse.Namespace, chosen: frozenset[str], argv: Sequence[str]) -> dict[str, Any]:
    commit = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=False
    ).stdout.strip()
    return {
        "command": "python -m bench.agreement " + " ".join(argv),
        "started_at": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "git_commit": commit,
        "versions": controlplane.binary_versions(),
        "load_average": os.getloadavg(),
        "nodes": args.nodes,
        "pods": args.pods,
        "features": sorted(chosen),
        "second_run": "kube-scheduler" if args.self_check else "splitsched",
    }


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    args = build_parser().parse_args(argv)
    try:
        chosen = features.parse(args.features)
        if not 1 <= args.nodes <= 50 or args.pods < 1 or args.seeds < 1:
            raise ValueError(
                "--nodes must be 1..50 (Simulate lists at most 50), --pods and --seeds >= 1"
            )
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    # Stop cleanly (processes, temp dir) on SIGTERM, and on SIGINT even when started in the
    # background, where the shell ignores SIGINT.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    signal.signal(signal.SIGINT, signal.default_int_handler)
    if isinstance(sys.stdout, io.TextIOWrapper):
        sys.stdout.reconfigure(line_buffering=True)  # progress shows up in a log file too
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    logging.getLogger("urllib3.connectionpool").setLevel(logging.ERROR)
    meta = _meta(args, chosen, argv)
    scenes = [
        scenario.build(seed, nodes=args.nodes, pods=args.pods, chosen=chosen)
        for seed in range(args.seed, args.seed + args.seeds)
    ]
    try:
        with runner.Session(keep=args.keep_state) as session:
            print(f"control plane, kube-scheduler and splitsched up ({session.workdir})")
            results = runner.run_seeds(
                session,
                scenes,
                self_check=args.self_check,
                progress=print,
            )
    except KeyboardInterrupt:
        print("interrupted: everything started was stopped", file=sys.stderr)
        return 130
    for result in results:
        print()
        print(report.seed_table(result, all_pods=args.all_pods))
    print(report.summary(results))
    if args.record or args.output:
        stamp = dt.datetime.now().strftime("%Y-%m-%dT%H%M")
        path = args.output or RESULTS / f"agreement-{stamp}"
        path = path.with_suffix(".json")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(report.dumps(report.to_json(results, meta)))
        print(f"wrote {path}")
    agreed = all(not r.error and r.tally.agreed == r.tally.pods for r in results)
    return 0 if agreed else 1


if __name__ == "__main__":
    sys.exit(main())
