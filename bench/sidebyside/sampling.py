"""What a run samples and derives while it is measured: every process's CPU over time,
and the bind times turned into per-second counts and a thinned curve (used by
``bench.sidebyside.runner``)."""

from __future__ import annotations

import asyncio
import datetime as dt
import time
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from bench.sidebyside import measure

#: At most this many points of a run's bound-pods curve are kept.
CURVE_POINTS = 300


class CpuSampler:
    """Samples the CPU seconds of every process every ``interval`` seconds, so the CPU of a
    window that began before anyone knew it had (the first bind) can be taken afterwards."""

    def __init__(
        self,
        pids: Callable[[], dict[str, int]],
        *,
        interval: float = 0.2,
        on_pids: Callable[[], None] | None = None,
    ) -> None:
        self.pids = pids
        self.interval = interval
        self.on_pids = on_pids
        self.samples: list[tuple[float, dict[str, float]]] = []

    def sample(self) -> None:
        self.samples.append((time.monotonic(), measure.snapshot(self.pids())))
        if self.on_pids is not None:
            self.on_pids()

    async def run(self) -> None:
        while True:
            self.sample()
            await asyncio.sleep(self.interval)

    def window(self, start: float, end: float | None = None) -> dict[str, float]:
        """CPU seconds from the last sample at or before ``start`` to the last sample at or
        before ``end`` (default: the last sample)."""
        if not self.samples:
            return {}
        before = after = self.samples[0][1]
        for t, snap in self.samples:
            if t <= start:
                before = snap
            if end is None or t <= end:
                after = snap
        return measure.cpu_delta(before, after)


def server_bind_times(pods: Sequence[dict[str, Any]]) -> dict[str, float]:
    """Pod name -> wall time (whole seconds) of its PodScheduled=True condition, which the
    API server stamps in the same write that sets spec.nodeName."""
    out: dict[str, float] = {}
    for pod in pods:
        for cond in (pod.get("status") or {}).get("conditions") or []:
            if cond.get("type") == "PodScheduled" and cond.get("status") == "True":
                stamp = cond.get("lastTransitionTime")
                if stamp:
                    when = dt.datetime.fromisoformat(stamp.replace("Z", "+00:00"))
                    out[pod["metadata"]["name"]] = when.timestamp()
    return out


def per_second(times: Iterable[float]) -> list[int]:
    seconds = [int(t) for t in times]
    if not seconds:
        return []
    counts = Counter(seconds)
    return [counts.get(sec, 0) for sec in range(min(seconds), max(seconds) + 1)]


def thin_curve(binds: Sequence[float], t0: float) -> list[tuple[float, int]]:
    times = sorted(binds)
    if not times:
        return []
    step = max(1, len(times) // CURVE_POINTS)
    points = [(round(t - t0, 3), i + 1) for i, t in enumerate(times) if i % step == 0]
    if points[-1][1] != len(times):
        points.append((round(times[-1] - t0, 3), len(times)))
    return points
