"""Once a second: every process's memory (``/proc/<pid>/status``) and the services'
gauges and request counters (their ``/metrics``), kept as time series for the report."""

from __future__ import annotations

import asyncio
import time
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass, field

from prometheus_client.parser import text_string_to_metric_families

#: Gauges read from each service's /metrics, summed over their labels but ``queue``.
GAUGES = (
    "splitsched_watcher_ring_events",
    "splitsched_watcher_subscriber_lag_events",
    "scheduler_pending_pods",
    "splitsched_scheduler_binder_calls_in_flight",
    "splitsched_scheduler_decisions_in_flight",
    "splitsched_binder_inflight",
    "splitsched_binder_queued",
    "splitsched_binder_side_writes",
    "splitsched_binder_report_backlog",
    "splitsched_scheduler_flow_window",
    # Counters: their peak is their total.
    "splitsched_scheduler_flow_waits_total",
)
#: Counters kept per label value, like ``scheduler_pending_pods`` per queue: the label.
BY_LABEL = {
    "scheduler_pending_pods": "queue",
    "splitsched_scheduler_binding_outcomes_total": "result",
}
REQUESTS = "splitsched_binder_api_requests_total"


def memory_kib(pid: int) -> dict[str, int]:
    """VmRSS and VmHWM (the kernel's peak RSS) of ``pid`` in KiB; {} once it is gone."""
    out: dict[str, int] = {}
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                key, _, value = line.partition(":")
                if key in ("VmRSS", "VmHWM"):
                    out[key] = int(value.split()[0])
    except OSError:
        return {}
    return out


def parse_metrics(text: str) -> dict[str, float]:
    """The gauges (``scheduler_pending_pods`` per queue as ``..{queue}``, the outcomes
    per result likewise) and the request counter of one /metrics page."""
    out: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            name = sample.name
            if name in BY_LABEL:
                name = f"{name}{{{sample.labels.get(BY_LABEL[name], '')}}}"
            elif name not in GAUGES and name != REQUESTS:
                continue
            out[name] = out.get(name, 0.0) + sample.value
    return out


def scrape(url: str) -> tuple[float, dict[str, float]]:
    """The page's values and when they arrived (monotonic): a busy service answers late,
    so its counters are dated by their arrival, not by when the tick began."""
    try:
        with urllib.request.urlopen(f"{url}/metrics", timeout=5) as resp:
            text = resp.read().decode()
    except OSError:
        return time.monotonic(), {}
    return time.monotonic(), parse_metrics(text)


@dataclass
class Sampler:
    """Samples ``pids`` (name -> pid) and ``services`` (name -> http URL) every second."""

    pids: Mapping[str, int]
    services: Mapping[str, str]
    interval: float = 1.0
    #: One row per tick: t (seconds since start), rss_kib {name}, metrics {service} and
    #: at {service} (when that service's page arrived).
    rows: list[dict[str, object]] = field(default_factory=list)
    peak_rss_kib: dict[str, int] = field(default_factory=dict)

    def _memory(self) -> dict[str, int]:
        rss: dict[str, int] = {}
        for name, pid in self.pids.items():
            mem = memory_kib(pid)
            if mem:
                rss[name] = mem.get("VmRSS", 0)
                peak = max(mem.get("VmHWM", 0), rss[name])
                self.peak_rss_kib[name] = max(self.peak_rss_kib.get(name, 0), peak)
        return rss

    async def tick(self, start: float) -> None:
        names = list(self.services)
        pages = await asyncio.gather(*(asyncio.to_thread(scrape, self.services[n]) for n in names))
        self.rows.append(
            {
                "t": round(time.monotonic() - start, 2),
                "rss_kib": self._memory(),
                "metrics": {n: page for n, (_, page) in zip(names, pages, strict=True)},
                "at": {n: round(at - start, 3) for n, (at, _) in zip(names, pages, strict=True)},
            }
        )

    async def run(self, start: float, stop: asyncio.Event) -> None:
        while not stop.is_set():
            began = time.monotonic()
            await self.tick(start)
            await asyncio.sleep(max(0.0, self.interval - (time.monotonic() - began)))
        await self.tick(start)  # the last row sees the final counters
