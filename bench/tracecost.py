"""What tracing costs the scheduler per pod, in process: the scheduler's state and core
with its `SchedulingTraces`, driven as its loops drive them (schedule, trace the
attempt, send the decision, see it confirmed), with no network and no API server.

Modes: `off` (no tracing, no store: the baseline and the default), `store` (tracing off,
the GetPodTrace store on: `--trace-store-pods N`), head sampling at 0, 1 and 100%
(parent-based ratio) with tail keeping and the store on (the default with tracing on), and
`1%-nostore` (`--trace-store-pods 0`). Spans go to an exporter that encodes them as OTLP
protobuf and sends nothing, through the synchronous processor (each span encoded alone:
an upper bound on the batching exporter's cost). CPU is the process's (every thread),
per pod, over `--pods` pods after a warm-up; each mode runs `--runs` times, interleaved.
A share (`--unschedulable`) of the pods fits nowhere, so tail keeping has something to
keep. Run: `.venv/bin/python -m bench.tracecost --pods 2000 --runs 5`.
"""

from __future__ import annotations

import argparse
import random
import statistics
import time
from collections.abc import Sequence

from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult
from opentelemetry.sdk.trace.sampling import ParentBased, TraceIdRatioBased

from services.scheduler.attempts import AttemptStore
from services.scheduler.loops import trace_attempts
from services.scheduler.state import Decision, SchedulerState
from services.scheduler.traces import SchedulingTraces
from splitsched.core import algorithm, models, profiles
from splitsched.core.cache import SchedulerCache
from splitsched.core.clock import SystemClock
from splitsched.core.observer import NO_OBSERVER
from splitsched.core.queue import SchedulingQueue
from splitsched.runtime import tracing
from splitsched.runtime.tailkeep import TailRule

MODES = ("off", "store", "0%", "1%", "100%", "1%-nostore")
RATIO = {"0%": 0.0, "1%": 0.01, "100%": 1.0, "1%-nostore": 0.01}
GI = 1024**3


class EncodingExporter(SpanExporter):
    """Encodes every span it is given as OTLP protobuf, and drops it."""

    def __init__(self) -> None:
        self.spans = 0

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        encode_spans(spans).SerializeToString()
        self.spans += len(spans)
        return SpanExportResult.SUCCESS

    def shutdown(self) -> None:
        return None


def _state(nodes: int, traces: SchedulingTraces | None) -> SchedulerState:
    clock = SystemClock()
    algo = algorithm.FrameworkAlgorithm(
        cache=SchedulerCache(clock=clock),
        profiles=profiles.load_profiles(None),
        rng=random.Random(0),
        observer=traces or NO_OBSERVER,
    )
    state = SchedulerState(algo=algo, queue=SchedulingQueue(clock=clock), clock=clock,
                           scheduler_id="bench")  # fmt: skip
    state.mark_synced()
    for i in range(nodes):
        state.apply_node("ADDED", models.Node(
            name=f"n{i}", labels={"kubernetes.io/hostname": f"n{i}"},
            allocatable={models.CPU: 64_000, models.MEMORY: 256 * GI, models.PODS: 500},
        ))  # fmt: skip
    return state


def _pod(i: int, unschedulable: bool) -> models.Pod:
    cpu = 1_000_000 if unschedulable else 10
    return models.Pod(
        uid=f"uid-{i}", namespace="bench", name=f"p{i}", scheduler_name="splitsched",
        containers=(models.Container(name="c", requests={models.CPU: cpu}),),
    )  # fmt: skip


def _drive(state: SchedulerState, traces: SchedulingTraces | None, pods: list[models.Pod]) -> None:
    """Each pod as the loops handle it: queued, scheduled, its decision sent and confirmed."""
    for pod in pods:
        state.apply_pod("ADDED", pod)
        if traces is not None:
            traces.begin()
        outcomes = state.schedule_one() or []
        if traces is None:
            continue
        trace_attempts(traces, outcomes)
        for d in outcomes:
            if isinstance(d, Decision):
                traces.bind_request(d.pod.uid, d.decision_id)
                traces.bind_sent(d.pod.uid, d.decision_id, accepted=True)
                traces.confirmed(d.pod.uid, d.node)


def run(mode: str, *, pods: int, nodes: int, unschedulable: float) -> tuple[float, int]:
    """CPU seconds per pod of one run of `mode`, and the spans exported."""
    exporter = EncodingExporter()
    if mode in RATIO:
        sampler = ParentBased(TraceIdRatioBased(RATIO[mode]))
        tracing.setup("scheduler", exporter=exporter, sampler=sampler, tail=TailRule())
    if mode not in ("off", "1%-nostore"):
        tracing.record_locally(AttemptStore())
    try:
        traces = SchedulingTraces() if tracing.enabled() else None
        state = _state(nodes, traces)
        rng = random.Random(1)
        batch = [_pod(i, rng.random() < unschedulable) for i in range(pods + 200)]
        _drive(state, traces, batch[:200])  # warm-up
        started = time.process_time()
        _drive(state, traces, batch[200:])
        return (time.process_time() - started) / pods, exporter.spans
    finally:
        tracing.shutdown()


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="bench.tracecost", description=__doc__.split("\n\n")[0])
    p.add_argument("--pods", type=int, default=2000)
    p.add_argument("--nodes", type=int, default=100)
    p.add_argument("--runs", type=int, default=5)
    p.add_argument("--unschedulable", type=float, default=0.02, help="share that fits nowhere")
    args = p.parse_args(argv)
    per_pod: dict[str, list[float]] = {m: [] for m in MODES}
    exported: dict[str, int] = {}
    for _ in range(args.runs):
        for mode in MODES:
            cpu, spans = run(mode, pods=args.pods, nodes=args.nodes,
                             unschedulable=args.unschedulable)  # fmt: skip
            per_pod[mode].append(cpu)
            exported[mode] = spans
    base = statistics.median(per_pod["off"])
    print(f"{args.pods} pods, {args.nodes} nodes, {args.unschedulable:.0%} unschedulable, "
          f"{args.runs} runs; CPU per pod (median, min-max), +us over `off`")  # fmt: skip
    print(f"{'mode':<10} {'median us':>10} {'min-max us':>16} {'+us':>8} {'spans exported':>15}")
    for mode in MODES:
        xs = [x * 1e6 for x in per_pod[mode]]
        med = statistics.median(xs)
        print(f"{mode:<10} {med:>10.0f} {min(xs):>7.0f}-{max(xs):<8.0f} {med - base * 1e6:>8.0f} "
              f"{exported.get(mode, 0):>15}")  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
