"""The sampled series turned into the verdict (pure: no I/O): each gauge's peak, each
binder's request rate against its ``--qps``/``--burst``, and the markdown table."""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from bench.backpressure.sampling import REQUESTS

Row = Mapping[str, Any]
#: The window the limit is checked over, and the shorter one reported.
CHECK_SECONDS = 60.0
SHORT_SECONDS = 10.0
#: The binder counts a request when its answer arrives, at most this long after it took
#: its token (the binder's longest request budget, which includes the wait for a token):
#: a window's answers were sent in it or up to this long before it.
LATENCY_BOUND = 10.0


@dataclass(frozen=True)
class Window:
    end: float
    seconds: float
    requests: float

    @property
    def rate(self) -> float:
        return self.requests / self.seconds if self.seconds > 0 else 0.0


def gauge_peaks(rows: Sequence[Row]) -> dict[str, dict[str, float]]:
    """service -> gauge -> its largest sampled value."""
    peaks: dict[str, dict[str, float]] = {}
    for row in rows:
        for service, metrics in row["metrics"].items():
            mine = peaks.setdefault(service, {})
            for name, value in metrics.items():
                if name != REQUESTS:
                    mine[name] = max(mine.get(name, 0.0), value)
    return peaks


def _counts(rows: Sequence[Row], service: str) -> list[tuple[float, float]]:
    out = []
    for row in rows:
        value = row["metrics"].get(service, {}).get(REQUESTS)
        if value is not None:
            out.append((float(row.get("at", {}).get(service, row["t"])), float(value)))
    return out


def _window_rates(counts: Sequence[tuple[float, float]], seconds: float) -> list[Window]:
    """For each sample, the requests since the latest sample at least `seconds` before it."""
    out = []
    for i, (t1, c1) in enumerate(counts):
        earlier = [(t0, c0) for t0, c0 in counts[:i] if t1 - t0 >= seconds]
        if earlier:
            t0, c0 = earlier[-1]
            out.append(Window(t1, t1 - t0, c1 - c0))
    return out


def request_rate(rows: Sequence[Row], service: str, *, qps: float, burst: int) -> dict[str, Any]:
    """The binder's request rate against its limit (docs/backpressure.md): the largest
    rate over one sampling interval, over ``SHORT_SECONDS`` and ``CHECK_SECONDS``, the
    average while it worked, and the windows of ``CHECK_SECONDS`` with more answers than
    the token bucket can have let through, ``qps * (seconds + LATENCY_BOUND) + burst``."""
    counts = _counts(rows, service)
    short = [w for w in _window_rates(counts, 0.0) if w.seconds >= 0.5]
    windows = _window_rates(counts, CHECK_SECONDS)
    over = [
        {"t": w.end, "seconds": round(w.seconds, 2), "requests": w.requests}
        for w in windows
        if w.requests > qps * (w.seconds + LATENCY_BOUND) + burst
    ]
    busy = [t for (t, c), (_, nxt) in itertools.pairwise(counts) if nxt > c]
    total = counts[-1][1] if counts else 0.0
    first = next((c for t, c in counts if busy and t >= busy[0]), 0.0)
    average = (total - first) / (busy[-1] - busy[0] + 1.0) if len(busy) > 1 else 0.0
    top = {
        f"max_rate_{name}": round(max((w.rate for w in ws), default=0.0), 1)
        for name, ws in (
            ("1s", short),
            ("10s", _window_rates(counts, SHORT_SECONDS)),
            ("60s", windows),
        )
    }
    return {
        "requests": total,
        **top,
        "average_rate_while_busy": round(average, 1),
        "windows_over_limit": over,
    }


def markdown(result: Mapping[str, Any]) -> str:
    """The short table recorded beside the JSON."""
    checks, opts = result["checks"], result["options"]
    lines = [
        f"# Back-pressure: {opts['pods']} pods at once on {opts['nodes']} nodes",
        "",
        f"`{result['command']}` at commit {result['commit']}, {result['started']}; "
        f"{result['machine']}.",
        "",
        f"- created in {result['create_seconds']:.0f} s, all settled in "
        f"{result['settle_seconds']:.0f} s: {checks['bound']} bound, {checks['with_reason']} "
        f"with their reason ({checks['with_failed_scheduling_event']} with a FailedScheduling "
        f"Event), {checks['neither_count']} neither",
        f"- nodes over allocatable: {len(checks['over_allocatable'])}; pods bound twice: "
        f"{len(checks['bound_twice'])}",
        _given_up(result["gauge_peaks"].get("scheduler", {}), checks["bound"]),
        "",
        "| process | peak RSS (MiB, VmHWM) |",
        "|---|---|",
    ]
    for name, kib in sorted(result["peak_rss_kib"].items()):
        lines.append(f"| {name} | {kib / 1024:.0f} |")
    lines += [
        "",
        "| binder | --qps / --burst | requests | max rate, 1 s / 10 s / 60 s "
        "| average while busy | 60 s windows over the limit |",
        "|---|---|---|---|---|---|",
    ]
    for name, rate in sorted(result["binder_rates"].items()):
        lines.append(
            f"| {name} | {opts['qps']:g} / {opts['burst']} | {rate['requests']:.0f} | "
            f"{rate['max_rate_1s']} / {rate['max_rate_10s']} / {rate['max_rate_60s']} | "
            f"{rate['average_rate_while_busy']} | {len(rate['windows_over_limit'])} |"
        )
    lines += ["", "| service | gauge | peak |", "|---|---|---|"]
    for service, gauges in sorted(result["gauge_peaks"].items()):
        for name, value in sorted(gauges.items()):
            lines.append(f"| {service} | `{name}` | {value:.0f} |")
    return "\n".join(lines) + "\n"


GIVEN_UP = "splitsched_scheduler_binding_outcomes_total{BIND_FAILED}"


def _given_up(scheduler: Mapping[str, float], bound: int) -> str:
    """The churn line: decisions the scheduler gave up (a binder's DEADLINE_EXCEEDED or
    FAILED, or its own deadline) per pod bound, from its last sampled counter."""
    given_up = scheduler.get(GIVEN_UP, 0.0)
    per_pod = given_up / bound if bound else 0.0
    return f"- decisions given up (BIND_FAILED): {given_up:.0f}, {per_pod:.2f} per pod bound"
