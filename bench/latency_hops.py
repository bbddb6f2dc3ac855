"""Where one pod's time goes at a steady rate: a per-hop table for splitsched (issue 19).

Runs the side-by-side harness's ``rate`` workload for splitsched alone, with tracing on
at a sampling ratio (0.1 by default: at 1 the tracing alone saturates two cores at
100 pods/s) into an in-process OTLP receiver, then joins, per traced pod, the harness's
create acknowledgement and bind watch with the services' spans (all wall clock, one
machine) and prints the median and p99 of each hop::

    .venv/bin/python -m bench.latency_hops --rate 100 --rate-seconds 20 [--sample 0.1]

Tracing costs CPU of its own (bench/results/tracecost-2026-11-27.md): read the hops as
shares of the path, and take end-to-end figures from ``bench.sidebyside`` with tracing off.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import time
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from bench.sidebyside import measure, runner, workloads
from splitsched.testing.otlp import OtlpReceiver, Span

#: The hops of one pod, each between two of the instants `instants` finds.
HOPS = (
    ("API -> watcher (watch delivery)", "created", "observed"),
    ("watcher -> scheduler (stream, ingest)", "observed", "queued"),
    ("queue wait", "queued", "popped"),
    ("scheduling (filter, score, assume)", "popped", "decided"),
    ("decided -> BindBatch sent", "decided", "sent"),
    ("scheduler -> binder (BindBatch)", "sent", "accepted"),
    ("binder queue + admission reads", "accepted", "post_start"),
    ("Binding POST", "post_start", "post_end"),
    ("watch back to the harness", "post_end", "bound"),
    ("total (created -> bound)", "created", "bound"),
)


class TracedBench(runner.Bench):
    """The harness, keeping each run (its create and bind times) for the join."""

    runs: list[runner.OneRun]

    async def run_one(self, io: Any, wl: workloads.Workload, name: str) -> runner.RunResult:
        self.runs = getattr(self, "runs", [])
        original = runner.OneRun.__post_init__

        def keep(one: runner.OneRun) -> None:
            original(one)
            self.runs.append(one)

        runner.OneRun.__post_init__ = keep  # type: ignore[method-assign,assignment]
        try:
            return await super().run_one(io, wl, name)
        finally:
            runner.OneRun.__post_init__ = original  # type: ignore[method-assign]


def instants(spans: Iterable[Span]) -> dict[str, dict[str, float]]:
    """Pod name -> named wall-clock instants (seconds) of its first attempt."""
    out: dict[str, dict[str, float]] = {}

    def first(pod: str, key: str, ns: int) -> None:
        if pod:
            slot = out.setdefault(pod, {})
            slot[key] = min(slot.get(key, ns / 1e9), ns / 1e9)

    by_trace_pod: dict[str, str] = {}
    spans = list(spans)
    for s in spans:
        if s.pod:
            by_trace_pod[s.trace_id] = s.pod
    for s in spans:
        pod = s.pod or by_trace_pod.get(s.trace_id, "")
        if s.name == "watch_event":
            first(pod, "observed", s.start_ns)
        elif s.name == "schedule_pod":
            first(pod, "queued", s.start_ns)
        elif s.name == "queue_wait":
            first(pod, "popped", s.end_ns)
        elif s.name == "assume":
            first(pod, "decided", s.end_ns)
        elif s.name == "bind_request":
            first(pod, "sent", s.start_ns)
        elif s.name == "bind" and s.service.endswith("binder"):
            first(pod, "accepted", s.start_ns)
        elif s.name.startswith("POST") and "binding" in s.name:
            first(pod, "post_start", s.start_ns)
            first(pod, "post_end", s.end_ns)
    return out


def table(points: Mapping[str, Mapping[str, float]]) -> list[dict[str, Any]]:
    """One row per hop: pods measured, median and p99 in milliseconds."""
    rows = []
    for label, a, b in HOPS:
        values = sorted((p[b] - p[a]) * 1000 for p in points.values() if a in p and b in p)
        if not values:
            rows.append({"hop": label, "pods": 0})
            continue
        rows.append(
            {
                "hop": label,
                "pods": len(values),
                "p50_ms": round(measure.nearest_rank(values, 50), 1),
                "p99_ms": round(measure.nearest_rank(values, 99), 1),
            }
        )
    return rows


def markdown(rows: list[dict[str, Any]]) -> str:
    lines = ["| hop | pods | p50 ms | p99 ms |", "| --- | ---: | ---: | ---: |"]
    for r in rows:
        p50, p99 = r.get("p50_ms", ""), r.get("p99_ms", "")
        lines.append(f"| {r['hop']} | {r['pods']} | {p50} | {p99} |")
    return "\n".join(lines)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--rate", type=float, default=100.0)
    p.add_argument("--rate-seconds", type=float, default=20.0)
    p.add_argument("--nodes", type=int, default=500)
    p.add_argument("--binders", type=int, default=2)
    p.add_argument(
        "--sample", type=float, default=0.1, help="share of pods traced (1 saturates 2 cores)"
    )
    p.add_argument("--output", type=Path, help="write the rows and load as JSON here")
    args = p.parse_args()
    receiver = OtlpReceiver().start()
    os.environ.update(
        {
            "OTEL_EXPORTER_OTLP_ENDPOINT": receiver.endpoint,
            "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc",
            "OTEL_TRACES_SAMPLER": "parentbased_traceidratio",
            "OTEL_TRACES_SAMPLER_ARG": str(args.sample),
            "OTEL_BSP_SCHEDULE_DELAY": "200",
            "OTEL_BSP_MAX_QUEUE_SIZE": "200000",
            "OTEL_BSP_MAX_EXPORT_BATCH_SIZE": "2048",
        }
    )
    options = runner.Options(
        nodes=args.nodes,
        rate=args.rate,
        rate_seconds=args.rate_seconds,
        workloads=("rate",),
        contenders=(f"splitsched-{args.binders}",),
    )
    load = os.getloadavg()
    bench = TracedBench(options)
    results = asyncio.run(bench.run())
    run = bench.runs[-1]
    time.sleep(1.0)
    spans = receiver.spans()
    receiver.stop()
    points = instants(spans)
    for name, t in run.created.items():
        points.setdefault(name, {})["created"] = t + run.wall_offset
    for name, t in run.watch.bound.items():
        points.setdefault(name, {})["bound"] = t + run.wall_offset
    points = {k: v for k, v in points.items() if "created" in v and "observed" in v}
    rows = table(points)
    print(
        f"load average at start {load[0]:.2f}, at end {os.getloadavg()[0]:.2f}; "
        f"{len(spans)} spans; {runner.summary_line(results[-1])}"
    )
    print(markdown(rows))
    if args.output:
        args.output.write_text(json.dumps({"load": load, "rows": rows}, indent=1))


if __name__ == "__main__":
    main()
