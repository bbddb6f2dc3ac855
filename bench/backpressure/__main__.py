"""CLI of the back-pressure bench (``python -m bench.backpressure``).

Prints the summary table; with ``--record`` writes
``bench/results/backpressure-<time>.json`` (every sample) and ``.md`` (the table).
Exit status 1 when a check failed (see ``run.passed``).
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import json
import logging
import shlex
import signal
import sys
from pathlib import Path
from typing import Any

from bench.backpressure import analysis, run

RESULTS = Path(__file__).resolve().parents[1] / "results"


def build_parser() -> argparse.ArgumentParser:
    d = run.Options()
    p = argparse.ArgumentParser(
        prog="python -m bench.backpressure",
        description="every pod at once on kwok nodes; bounded buffers, rate-limited binders",
    )
    p.add_argument("--pods", type=int, default=d.pods)
    p.add_argument("--nodes", type=int, default=d.nodes)
    p.add_argument("--node-pods", type=int, default=d.node_pods, help="pods per node")
    p.add_argument("--binders", type=int, default=d.binders)
    p.add_argument("--qps", type=float, default=d.qps, help="each binder's --qps")
    p.add_argument("--burst", type=int, default=d.burst, help="each binder's --burst")
    p.add_argument("--create-concurrency", type=int, default=d.create_concurrency)
    p.add_argument("--timeout", type=float, default=d.timeout, help="seconds to settle")
    p.add_argument("--record", action="store_true", help="write the JSON and markdown")
    p.add_argument("--logs", type=Path, help="copy the services' logs here")
    p.add_argument("--results-dir", type=Path, default=RESULTS)
    return p


async def _until_stopped(bench: run.Run) -> dict[str, Any]:
    """The run, cancelled by SIGTERM as by Ctrl-C, so its clean-up runs either way."""
    task = asyncio.current_task()
    assert task is not None
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, task.cancel)
    return await bench.run()


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    # Creating nodes from 16 threads overflows the client's pool of 10: harmless, noisy.
    logging.getLogger("urllib3.connectionpool").setLevel(logging.ERROR)
    opts = run.Options(
        pods=args.pods, nodes=args.nodes, node_pods=args.node_pods, binders=args.binders,
        qps=args.qps, burst=args.burst, create_concurrency=args.create_concurrency,
        timeout=args.timeout, logs=args.logs,
    )  # fmt: skip
    started = dt.datetime.now(dt.UTC)
    try:
        result = asyncio.run(_until_stopped(run.Run(opts)))
    except (KeyboardInterrupt, asyncio.CancelledError):
        print("interrupted: the services and the control plane were stopped", file=sys.stderr)
        return 130
    result["started"] = started.strftime("%Y-%m-%dT%H:%MZ")
    result["command"] = "python -m bench.backpressure " + shlex.join(argv or sys.argv[1:])
    table = analysis.markdown(result)
    print(table)
    if args.record:
        stem = args.results_dir / f"backpressure-{started.strftime('%Y-%m-%dT%H%M')}"
        stem.with_suffix(".json").write_text(json.dumps(result, indent=1) + "\n")
        stem.with_suffix(".md").write_text(table)
        print(f"recorded {stem}.json and .md")
    problems = run.passed(result)
    for problem in problems:
        print(f"FAILED: {problem}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
