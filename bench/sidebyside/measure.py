"""Numbers from timestamps: scheduler_perf's throughput, latency percentiles, CPU seconds.

Pure functions over the bind times the harness's watch recorded (``runner``), plus a
``/proc`` reader for per-process CPU. Called by ``bench.sidebyside.runner`` and the
smoke test; no I/O apart from ``/proc``.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def nearest_rank(sorted_values: Sequence[float], percent: float) -> float:
    """scheduler_perf's percentile: ``sorted[ceil(n * p / 100) - 1]`` (NaN when empty)."""
    n = len(sorted_values)
    if n == 0:
        return math.nan
    return float(sorted_values[max(0, math.ceil(n * percent / 100) - 1)])


def throughput_samples(
    bind_times: Sequence[float], *, start: float, end: float, interval: float = 1.0
) -> list[float]:
    """Per-interval bind rates exactly as scheduler_perf's throughputCollector takes them.

    A ticker fires every ``interval`` from ``start``; the first tick that sees any bound
    pod only sets the baseline (it is an outlier: sampling and scheduling start
    independently); an interval with no new binds is merged into the next one, and the
    merged rate is recorded once per interval it spans; the collector stops at ``end``
    (all pods bound), so the last partial interval is dropped.
    """
    times = sorted(bind_times)
    samples: list[float] = []
    idx = 0  # binds at or before the current tick
    started = False
    last_count = 0
    last_tick = start
    skipped = 0
    tick = start + interval
    while tick <= end + 1e-9:
        while idx < len(times) and times[idx] <= tick:
            idx += 1
        if idx == 0:
            tick += interval
            continue
        if not started:
            started = True
            last_count, last_tick = idx, tick
            tick += interval
            continue
        new = idx - last_count
        if new == 0:
            skipped += 1
            tick += interval
            continue
        rate = new / (tick - last_tick)
        samples.extend([rate] * (skipped + 1))
        last_count, last_tick, skipped = idx, tick, 0
        tick += interval
    return samples


@dataclass(frozen=True)
class Throughput:
    """scheduler_perf's SchedulingThroughput summary (pods/s)."""

    average: float
    p50: float
    p90: float
    p99: float
    samples: int
    #: Bound pods / (last bind - first bind): the fallback when a run is too short to sample.
    overall: float

    @classmethod
    def from_binds(cls, bind_times: Sequence[float], *, start: float) -> Throughput:
        if not bind_times:
            return cls(math.nan, math.nan, math.nan, math.nan, 0, math.nan)
        end = max(bind_times)
        samples = sorted(throughput_samples(bind_times, start=start, end=end))
        span = end - min(bind_times)
        overall = len(bind_times) / span if span > 0 else math.nan
        if not samples:
            return cls(overall, math.nan, math.nan, math.nan, 0, overall)
        return cls(
            average=sum(samples) / len(samples),
            p50=nearest_rank(samples, 50),
            p90=nearest_rank(samples, 90),
            p99=nearest_rank(samples, 99),
            samples=len(samples),
            overall=overall,
        )


def pair_latencies(refs: Mapping[str, float], binds: Mapping[str, float]) -> list[float]:
    """Seconds from each pod's reference time to its bind (pods in both maps)."""
    return [max(0.0, binds[k] - refs[k]) for k in binds if k in refs]


@dataclass(frozen=True)
class Latency:
    """Seconds from a pod's reference time (creation, or the run's start) to its bind."""

    p50: float
    p90: float
    p99: float
    max: float
    count: int

    @classmethod
    def from_pairs(cls, refs: Mapping[str, float], binds: Mapping[str, float]) -> Latency:
        return cls.from_values(pair_latencies(refs, binds))

    @classmethod
    def from_values(cls, latencies: Iterable[float]) -> Latency:
        """Nearest-rank percentiles of these latencies (seconds)."""
        values = sorted(latencies)
        if not values:
            return cls(math.nan, math.nan, math.nan, math.nan, 0)
        return cls(
            p50=nearest_rank(values, 50),
            p90=nearest_rank(values, 90),
            p99=nearest_rank(values, 99),
            max=values[-1],
            count=len(values),
        )


def cpu_seconds(pid: int) -> float | None:
    """utime + stime of ``pid`` from ``/proc/<pid>/stat`` (None when it is gone)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text(encoding="ascii")
    except OSError:
        return None
    # The command name (field 2) may hold spaces; fields after ")" are fixed.
    fields = stat.rsplit(")", 1)[1].split()
    utime, stime = int(fields[11]), int(fields[12])
    return (utime + stime) / CLOCK_TICKS


def snapshot(
    pids: Mapping[str, int], read: Callable[[int], float | None] = cpu_seconds
) -> dict[str, float]:
    """``read`` (CPU seconds so far by default, or ``peak_rss_mib``) of each named process;
    processes that are gone are left out."""
    out: dict[str, float] = {}
    for name, pid in pids.items():
        value = read(pid)
        if value is not None:
            out[name] = value
    return out


def peak_rss_mib(pid: int) -> float | None:
    """The process's peak resident set size so far (VmHWM), in MiB; None when it is gone."""
    try:
        status = Path(f"/proc/{pid}/status").read_text(encoding="ascii")
    except OSError:
        return None
    for line in status.splitlines():
        if line.startswith("VmHWM:"):
            return round(int(line.split()[1]) / 1024, 1)
    return None


def cpu_delta(before: Mapping[str, float], after: Mapping[str, float]) -> dict[str, float]:
    """CPU seconds used between two snapshots, per process present in both."""
    return {k: round(after[k] - before[k], 2) for k in after if k in before}
