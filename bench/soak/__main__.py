"""CLI of the soak (``python -m bench.soak --minutes N``, ``make soak MINUTES=N``).

Prints progress, then the slopes table and any broken promise. With ``--record`` writes
``bench/results/soak-<time>.json``, ``.md`` (the table, the checks, the rounds, the
disruptions, the machine's load) and ``.svg`` (the plot). Exit status 1 if a promise
broke or (in a run long enough to have a window after the warm-up) a goal was missed.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import sys
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path

from bench.soak import report
from bench.soak.run import Options, Soak, SoakResult

RESULTS = Path(__file__).resolve().parents[1] / "results"


def build_parser() -> argparse.ArgumentParser:
    d = Options()
    p = argparse.ArgumentParser(prog="python -m bench.soak", description=__doc__)
    p.add_argument("--minutes", type=float, default=d.minutes, help="how long to churn")
    p.add_argument("--nodes", type=int, default=d.nodes, help="kwok nodes in all")
    p.add_argument("--seed", type=int, default=d.seed)
    p.add_argument("--record", action="store_true", help="write the result to --results-dir")
    p.add_argument("--results-dir", type=Path, default=RESULTS)
    p.add_argument("--workdir", type=Path, help="logs and state (default: a temp dir)")
    p.add_argument("--keep", action="store_true", help="keep the control plane's state dir")
    p.add_argument(
        "--watcher-ring-size",
        type=int,
        default=d.watcher_ring_size,
        help="the watcher's --ring-size: small enough to fill in the warm-up (0: its default)",
    )
    return p


def markdown(result: SoakResult, *, command: str) -> str:
    """The recorded summary: how it ran, the slopes table, the checks and the rounds."""
    o = result.options
    loads = [float(load.split()[0]) for _, load in result.load]
    checks_ok = sum(1 for c in result.checks if c.ok)
    lines = [
        f"# Soak {result.started_at}: {o.minutes:g} minutes on {o.nodes} kwok nodes",
        "",
        f"`{command}` at commit {result.commit}; warm-up {o.warmup_minutes:g} min; "
        f"watcher ring {o.watcher_ring_size or 'default'} deltas{_ring_full(result)}; "
        f"{result.seconds / 60:.1f} min in all with setup and teardown.",
        f"Machine load (1-min loadavg at each check, {os.cpu_count()} cores, shared): "
        f"min {min(loads):.2f}, max {max(loads):.2f}, mean {sum(loads) / len(loads):.2f}.",
        "",
        "## Slopes after the warm-up (least squares; fitted start→end, per minute)",
        "",
        report.table(result.reports),
        "",
        f"## Checks: {checks_ok} of {len(result.checks)} held (every 30 s)",
        "",
        *[f"- {f}" for f in result.invariant_failures()[:20]],
        f"Preemption rounds: {len(result.rounds)}, "
        f"{sum(1 for r in result.rounds if not r.failures)} clean; pods evicted in all: "
        f"{sum(r.evicted for r in result.rounds)}.",
        *_late_records(result),
        "",
        "Churn actions: " + ", ".join(f"{k} {v}" for k, v in sorted(result.churn.items())),
        "",
        "## Disruptions",
        "",
        *[f"- {t / 60:.1f} min: {what}" for t, what in result.disruptions],
        "",
    ]
    return "\n".join(lines)


def _ring_full(result: SoakResult) -> str:
    size = result.options.watcher_ring_size
    full = [s.t for s in result.samples if s.ring is not None and size and s.ring >= size]
    return f", full from minute {min(full) / 60:.1f}" if full else ", never full"


def _late_records(result: SoakResult) -> list[str]:
    """Rounds whose pending pods got their FailedScheduling reason late (best effort: a
    report dropped by a restarting binder is made again at the pod's next attempt)."""
    late = [
        f"round {r.number}: {', '.join(r.recorded_late)}" for r in result.rounds if r.recorded_late
    ]
    end = [
        f"round {r.number}: {', '.join(r.unrecorded_at_end)}"
        for r in result.rounds
        if r.unrecorded_at_end
    ]
    out = (
        [f"FailedScheduling reason late (seconds after settling): {'; '.join(late)}."]
        if late
        else []
    )
    if end:
        out.append(
            f"Still without a reason when the run ended (within the grace): {'; '.join(end)}."
        )
    return out


def write(result: SoakResult, results_dir: Path, *, command: str) -> Path:
    stem = results_dir / f"soak-{dt.datetime.now(dt.UTC).strftime('%Y-%m-%dT%H%M')}"
    results_dir.mkdir(parents=True, exist_ok=True)
    stem.with_suffix(".md").write_text(markdown(result, command=command))
    payload = asdict(result)
    payload["reports"] = report.as_json(result.reports)
    payload["churn"] = dict(result.churn)  # asdict makes a Counter of its (key, count) pairs
    payload["invariant_failures"] = result.invariant_failures()
    payload["goal_failures"] = result.goal_failures()
    stem.with_suffix(".json").write_text(json.dumps(payload, indent=1, default=str) + "\n")
    o = result.options
    title = f"soak {result.started_at}: {o.minutes:g} min, {o.nodes} nodes"
    report.plot(
        result.samples, stem.with_suffix(".svg"), warmup_s=60 * o.warmup_minutes, title=title
    )
    return stem


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    opts = Options(minutes=args.minutes, nodes=args.nodes, seed=args.seed, workdir=args.workdir,
                   keep=args.keep, watcher_ring_size=args.watcher_ring_size)  # fmt: skip
    result = Soak(opts, progress=lambda line: print(line, flush=True)).run()
    print(report.table(result.reports))
    broken, missed = result.invariant_failures(), result.goal_failures()
    for line in broken + missed:
        print(f"FAILED: {line}")
    if args.record:
        command = "python -m bench.soak " + " ".join(sys.argv[1:] if argv is None else argv)
        print(f"recorded {write(result, args.results_dir, command=command)}.{{json,md,svg}}")
    return 1 if broken or missed else 0


if __name__ == "__main__":
    sys.exit(main())
