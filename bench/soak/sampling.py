"""Samples of each service process, every 10 s: resident memory, open file descriptors
and threads (from ``/proc/PID``) and asyncio tasks (``splitsched_asyncio_tasks`` on its
/metrics). A restarted process is a new series: its PID changes.
"""

from __future__ import annotations

import os
import re
import urllib.error
from dataclasses import dataclass

from splitsched.launch.processes import Service
from splitsched.runtime import tasksgauge

PAGE_KIB = os.sysconf("SC_PAGE_SIZE") // 1024
_TASKS = re.compile(rf"^{tasksgauge.NAME} ([0-9.e+]+)$", re.MULTILINE)
#: The watcher's ring (deltas held): its memory grows until the ring is full.
_RING = re.compile(r"^splitsched_watcher_ring_events ([0-9.e+]+)$", re.MULTILINE)


@dataclass(frozen=True)
class Sample:
    t: float
    name: str
    pid: int
    rss_mib: float
    fds: int
    threads: int
    tasks: float | None
    #: The watcher's deltas in its ring (None for the others).
    ring: float | None = None

    @property
    def series(self) -> str:
        """One process: its name and PID (a restart makes a new series)."""
        return f"{self.name}[{self.pid}]"


def proc_stats(pid: int) -> tuple[float, int, int] | None:
    """(RSS MiB, open fds, threads) of a live process, None once it is gone."""
    try:
        with open(f"/proc/{pid}/statm") as f:
            rss_pages = int(f.read().split()[1])
        with open(f"/proc/{pid}/status") as f:
            threads = next(int(line.split()[1]) for line in f if line.startswith("Threads:"))
        fds = len(os.listdir(f"/proc/{pid}/fd"))
    except (OSError, StopIteration, ValueError):
        return None
    return rss_pages * PAGE_KIB / 1024, fds, threads


def gauges(svc: Service) -> tuple[float | None, float | None]:
    """(asyncio tasks, ring events) from the service's /metrics (None where absent)."""
    try:
        text = svc.metrics()
    except (urllib.error.URLError, OSError):
        return None, None
    return _value(_TASKS, text), _value(_RING, text)


def _value(pattern: re.Pattern[str], text: str) -> float | None:
    m = pattern.search(text)
    return float(m.group(1)) if m else None


def sample(services: list[Service], t: float) -> list[Sample]:
    """One sample of every running service at ``t`` seconds."""
    out = []
    for svc in services:
        if svc.proc is None or not svc.alive():
            continue
        stats = proc_stats(svc.proc.pid)
        if stats is None:
            continue
        tasks, ring = gauges(svc)
        rss, fds, threads = stats
        out.append(
            Sample(round(t, 1), svc.name, svc.proc.pid, round(rss, 2), fds, threads, tasks, ring)
        )
    return out
