"""CLI of the side-by-side benchmark (``python -m bench.sidebyside``, ``make bench``).

Prints the table and the ratios, writes ``<results-dir>/sidebyside-<time>.json`` and
``.png``. Exit status 1 if any run did not bind all its pods or broke an invariant.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import json
import logging
import os
import signal
import sys
from collections.abc import Sequence
from pathlib import Path

from bench.sidebyside import contenders, devices, report, runner, workloads

RESULTS = Path(__file__).resolve().parents[1] / "results"


#: Named sizes (scheduler_perf's headline and twice it): nodes, pods bound up front and
#: measured pods, on the workloads where scale shows. Explicit flags still win.
NAMED_SIZES: dict[str, dict[str, object]] = {
    "5k": {
        "nodes": 5000,
        "init_pods": 5000,
        "pods": 10000,
        "workloads": ("basic", "spread", "affinity"),
    },
    "10k": {
        "nodes": 10000,
        "init_pods": 10000,
        "pods": 10000,
        "workloads": ("basic", "spread", "affinity"),
    },
}


def _csv(text: str) -> tuple[str, ...]:
    return tuple(part.strip() for part in text.split(",") if part.strip())


def build_parser() -> argparse.ArgumentParser:
    d = runner.Options()
    p = argparse.ArgumentParser(
        prog="python -m bench.sidebyside",
        description="splitsched side by side with kube-scheduler on one local control plane",
    )
    p.add_argument(
        "--size",
        choices=sorted(NAMED_SIZES),
        help="a named size: 5k = 5,000 nodes, 5,000 bound and 10,000 measured pods; 10k = "
        "10,000 nodes and pods bound, 10,000 measured (basic,spread,affinity unless "
        "--workloads); other flags override",
    )
    p.add_argument("--nodes", type=int, default=d.nodes, help="kwok nodes (4 cpu, 32Gi)")
    p.add_argument("--init-pods", type=int, default=d.init_pods, help="pods bound up front")
    p.add_argument("--pods", type=int, default=d.pods, help="measured pods (up-front loads)")
    p.add_argument("--rate", type=float, default=d.rate, help="rate workload: pods/s")
    p.add_argument("--rate-seconds", type=float, default=d.rate_seconds, help="... for s")
    p.add_argument(
        "--workloads",
        type=_csv,
        default=d.workloads,
        help="basic,affinity,spread,rate,idle,devices",
    )
    p.add_argument(
        "--idle-seconds", type=float, default=d.idle_seconds, help="idle workload: window (s)"
    )
    p.add_argument(
        "--contenders",
        type=_csv,
        default=d.contenders,
        help="kube-scheduler,kube-scheduler-defaults,kube-scheduler-score-all,splitsched-<N>",
    )
    p.add_argument("--results-dir", type=Path, default=RESULTS)
    p.add_argument("--output", type=Path, help="result path stem (default: timestamped)")
    p.add_argument("--no-record", action="store_true", help="print only; write no files")
    p.add_argument("--state-dir", type=Path, help="control-plane dir (default: temp)")
    p.add_argument("--keep-state", action="store_true", help="keep logs and state dirs")
    p.add_argument("--profile-dir", type=Path, help="py-spy profiles of splitsched here")
    p.add_argument("--timeout", type=float, help="seconds per run to bind all pods")
    p.add_argument("--repeat", type=int, default=1, help="rounds per workload (median kept)")
    p.add_argument(
        "--replot", type=Path, help="print the tables and redraw the PNG of a recorded JSON"
    )
    return p


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    """The options, with a named `--size` filling in what the other flags leave out."""
    parser = build_parser()
    named = parser.parse_known_args(argv)[0].size
    if named:
        parser.set_defaults(**NAMED_SIZES[named])
    return parser.parse_args(argv)


def replot(path: Path) -> int:
    doc = json.loads(path.read_text())
    results = [runner.RunResult.from_json(r) for r in doc["results"]]
    print(f"{doc['command']}  ({doc['started_at']}, load {doc['load_average']})\n")
    print(report.table(results))
    print()
    print(report.summary_text(results))
    report.plot(results, path.with_suffix(".png"))
    print(f"\ndrew {path.with_suffix('.png')}")
    return 0


async def _until_stopped(bench: runner.Bench) -> list[runner.RunResult]:
    """The bench, cancelled by SIGTERM as asyncio.run cancels it on Ctrl-C, so its
    clean-up (contenders, control plane, temp dir) runs either way. (A KeyboardInterrupt
    raised from a plain signal handler would escape the loop and skip it.)"""
    task = asyncio.current_task()
    assert task is not None
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, task.cancel)
    return await bench.run()


def _run_bench(bench: runner.Bench) -> tuple[list[runner.RunResult], bool]:
    """The bench's results, and whether Ctrl-C or SIGTERM stopped it (after its clean-up):
    then the runs it finished, which are recorded all the same (a 5k run takes hours, and
    one stopped in its last workload should keep the others)."""
    try:
        return asyncio.run(_until_stopped(bench)), False
    except (KeyboardInterrupt, asyncio.CancelledError):
        print(
            f"interrupted: the contenders and the control plane were stopped; "
            f"{len(bench.results)} finished runs kept",
            file=sys.stderr,
        )
        return list(bench.results), True


def _print_report(results: list[runner.RunResult], *, repeat: int) -> None:
    print()
    print(report.table(results))
    if repeat > 1:
        print(f"\nmedian of {repeat} rounds:")
        print(report.table(report.representative(results)))
    print()
    print("CPU seconds per process:")
    print(report.cpu_table(results))
    print()
    print(report.summary_text(results))


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    if args.replot:
        return replot(args.replot)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    # Creating nodes from 16 threads overflows the client's pool of 10: harmless, noisy.
    logging.getLogger("urllib3.connectionpool").setLevel(logging.ERROR)
    try:
        contenders.validate(args.contenders)
        workloads.build(args.workloads, init_pods=0, pods=0, rate=1, rate_seconds=1)
        if "devices" in args.workloads and args.pods > args.nodes * devices.GPUS_PER_NODE:
            raise ValueError(
                f"devices: {args.pods} pods want more GPUs than {args.nodes} nodes have"
                f" ({devices.GPUS_PER_NODE} each)"
            )
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    options = runner.Options(
        nodes=args.nodes,
        init_pods=args.init_pods,
        pods=args.pods,
        rate=args.rate,
        rate_seconds=args.rate_seconds,
        idle_seconds=args.idle_seconds,
        workloads=args.workloads,
        contenders=args.contenders,
        state_dir=args.state_dir,
        keep_state=args.keep_state,
        profile_dir=args.profile_dir,
        timeout=args.timeout,
        repeat=max(1, args.repeat),
    )
    started = dt.datetime.now(dt.UTC)
    load_before = os.getloadavg()
    bench = runner.Bench(options, progress=lambda line: print(line, flush=True))
    results, interrupted = _run_bench(bench)
    if not results:
        return 130
    _print_report(results, repeat=options.repeat)
    doc = report.document(
        results,
        options=options,
        command=report.command_line(),
        started=started,
        load_before=load_before,
        node_seconds=bench.node_seconds,
    )
    doc["interrupted"] = interrupted
    if not args.no_record:
        stem = args.output or report.default_stem(args.results_dir, started)
        stem.parent.mkdir(parents=True, exist_ok=True)
        json_path = stem.with_suffix(".json")
        json_path.write_text(json.dumps(doc, indent=1, allow_nan=True) + "\n")
        report.plot(results, stem.with_suffix(".png"))
        print(f"\nrecorded {json_path} and {stem.with_suffix('.png')}")
    ok = all(r.complete and not r.overcommitted and not r.placement_violations for r in results)
    return 130 if interrupted else 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
