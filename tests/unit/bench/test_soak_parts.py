"""The soak's pure parts: the least-squares slope and the goals' verdicts, the 30-second
"nothing lost" rule, and when the disruptions fall."""

from __future__ import annotations

import datetime as dt

import pytest

from bench.soak import checks, report
from bench.soak.disruptions import Timeline
from bench.soak.sampling import Sample


def test_fit_recovers_a_line() -> None:
    a, b = report.fit([(t, 3.0 + 0.5 * t) for t in range(10)])
    assert a == pytest.approx(3.0) and b == pytest.approx(0.5)
    assert report.fit([(1.0, 4.0)]) == (4.0, 0.0)


def _samples(
    name: str, pid: int, rss: list[float], fds: int = 40, start: float = 0.0
) -> list[Sample]:
    return [Sample(start + 60.0 * i, name, pid, r, fds + i, 12, 20.0) for i, r in enumerate(rss)]


def test_goals_judge_only_processes_alive_through_the_window() -> None:
    growing = _samples("watcher", 10, [100.0 + 2 * i for i in range(31)], fds=40)
    flat = _samples("scheduler-1", 11, [100.0] * 31, fds=40)
    short = _samples("binder-0", 12, [100.0 + 10 * i for i in range(3)], start=600.0)
    reports = {
        r.name: r for r in report.analyse(growing + flat + short, warmup_s=300.0, end_s=1800.0)
    }
    assert reports["watcher"].verdict is not None
    assert any("RSS grew" in v for v in reports["watcher"].verdict)
    assert any("fds grew" in v for v in reports["watcher"].verdict)
    assert reports["binder-0"].verdict is None  # restarted: no verdict
    # fds +1 a minute breaks "no growth" even with RSS flat.
    assert reports["scheduler-1"].verdict == ["fds grew +25.0 (mean 57.5)"]
    unjudged = report.analyse(flat, warmup_s=300.0, end_s=1800.0, judge=False)
    assert unjudged[0].verdict is None


def _pod(name: str, *, age: float, now: dt.datetime, **extra: object) -> dict[str, object]:
    created = (now - dt.timedelta(seconds=age)).isoformat().replace("+00:00", "Z")
    pod: dict[str, object] = {
        "metadata": {"namespace": "soak-x", "name": name, "creationTimestamp": created},
        "spec": {},
        "status": {"phase": "Pending"},
    }
    pod.update(extra)
    return pod


def test_lost_is_pending_past_the_grace_without_a_reason() -> None:
    now = dt.datetime(2026, 11, 27, 12, 0, tzinfo=dt.UTC)
    unschedulable = {"phase": "Pending",
                     "conditions": [{"type": "PodScheduled", "status": "False"}]}  # fmt: skip
    pods = [
        _pod("young", age=10, now=now),
        _pod("old", age=500, now=now),
        _pod("reasoned", age=500, now=now, status=unschedulable),
        _pod("bound", age=500, now=now, spec={"nodeName": "n1"}),
        _pod("done", age=500, now=now, status={"phase": "Succeeded"}),
    ]
    lost = checks.lost(pods, now=now)
    assert len(lost) == 1 and lost[0].startswith("soak-x/old")


def test_timeline_hands_over_once_and_repeats_the_rest() -> None:
    t = Timeline(minutes=30)
    assert t.handover_at == 180.0 and t.restart_every == 300.0 and t.cut_every == 180.0
    fired = [(s, name) for s in range(0, 1800, 10) for name in t.due(float(s))]
    assert [s for s, n in fired if n == "handover"] == [180]
    assert [s for s, n in fired if n == "restart"] == [300, 600, 900, 1200, 1500]
