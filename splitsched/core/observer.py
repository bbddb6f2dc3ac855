"""What a scheduling cycle tells whoever watches it: the hook tracing is built on.

`FrameworkAlgorithm` takes a `CycleObserver` as a constructor argument and calls it around
the steps of a cycle, the way kube-scheduler's framework takes its metrics recorder as an
option instead of having it patched on. The core reads no clock for it: each call says
only *what* happens, and an observer that wants timings reads its own clock when called.

The calls come in start/finish pairs, on the thread that runs the cycle, and nest:

    schedule_started(pod)                 one cycle of `schedule` (Filter, then Score or
      score_started(pod)                  PostFilter); Score only with 2+ feasible nodes
      score_finished(pod)
    schedule_finished(pod, result)
    assume_started(pod, node)             assume in the cache, Reserve, Permit
    assume_finished(pod, node, status)

and a gang placed in one cycle wraps its members' pairs:

    gang_started(members)
      (schedule..., assume...) per member until one fits nowhere
    gang_finished(members, placed, blocking)

`NO_OBSERVER` (the default) does nothing; `RecordingObserver` is the fake beside it, as
`FakeClock` is beside `Clock`: it writes down every call so a test can read the sequence.
The scheduler service's tracing (`services.scheduler.traces.SchedulingTraces`) is the one
real observer.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

from splitsched.core import framework, models

if TYPE_CHECKING:
    from splitsched.core.results import ScheduleResult


#: What a gang's cycle placed: (member, node) pairs.
Placements = Sequence[tuple[models.Pod, str]]


class CycleObserver(Protocol):
    """Told about each step of a scheduling cycle (see the module docstring for the order).
    Must not change the pod, the cache or the result: it watches, the core decides. Each
    method does nothing by default, so an observer subclasses this and overrides only the
    steps it cares about (or matches it structurally)."""

    def schedule_started(self, pod: models.Pod) -> None:
        """`schedule` begins for `pod` (PreFilter and Filter come first)."""
        return None

    def schedule_finished(self, pod: models.Pod, result: ScheduleResult) -> None:
        """`schedule` decided: bind, preempt or wait, as `result` says."""
        return None

    def score_started(self, pod: models.Pod) -> None:
        """Scoring of the feasible nodes begins, inside `schedule` (2+ feasible nodes)."""
        return None

    def score_finished(self, pod: models.Pod) -> None:
        """Scoring is done (the node is then picked and `schedule` finishes)."""
        return None

    def assume_started(self, pod: models.Pod, node: str) -> None:
        """`assume` begins: the pod goes into the cache on `node`, then Reserve, Permit."""
        return None

    def assume_finished(self, pod: models.Pod, node: str, status: framework.Status) -> None:
        """`assume` is done; a `status` not ok means it was undone (WAIT: held)."""
        return None

    def gang_started(self, pods: Sequence[models.Pod]) -> None:
        """`place_gang` begins for these members, in the order it tries them."""
        return None

    def gang_finished(
        self, pods: Sequence[models.Pod], placed: Placements, blocking: models.Pod | None
    ) -> None:
        """`place_gang` is done: all placed, or none (`blocking` fit nowhere)."""
        return None


class NoObserver(CycleObserver):
    """Watches nothing: the cost of an unobserved cycle is a few empty calls."""


NO_OBSERVER: CycleObserver = NoObserver()


@dataclass(frozen=True, slots=True)
class Observed:
    """One call a `RecordingObserver` saw: the method's name, the pod's name (a gang's
    calls: its members' names, comma-separated) and what the call said, in short."""

    call: str
    pod: str
    detail: str = ""


def _outcome(result: ScheduleResult) -> str:
    """ "bind n1", "preempt n1" or "wait": what a cycle decided."""
    if result.bind is not None:
        return f"bind {result.bind.node}"
    if result.preempt is not None:
        return f"preempt {result.preempt.node}"
    return "wait"


@dataclass
class RecordingObserver(CycleObserver):
    """Writes down every call, in order, for tests (`calls`); `results` keeps the
    `ScheduleResult` each `schedule_finished` carried."""

    calls: list[Observed] = field(default_factory=list)
    results: list[ScheduleResult] = field(default_factory=list)

    def names(self) -> list[str]:
        """Just the methods called, in order."""
        return [c.call for c in self.calls]

    def schedule_started(self, pod: models.Pod) -> None:
        self.calls.append(Observed("schedule_started", pod.name))

    def schedule_finished(self, pod: models.Pod, result: ScheduleResult) -> None:
        self.results.append(result)
        self.calls.append(Observed("schedule_finished", pod.name, _outcome(result)))

    def score_started(self, pod: models.Pod) -> None:
        self.calls.append(Observed("score_started", pod.name))

    def score_finished(self, pod: models.Pod) -> None:
        self.calls.append(Observed("score_finished", pod.name))

    def assume_started(self, pod: models.Pod, node: str) -> None:
        self.calls.append(Observed("assume_started", pod.name, node))

    def assume_finished(self, pod: models.Pod, node: str, status: framework.Status) -> None:
        verdict = "ok" if status.ok else status.code.value
        self.calls.append(Observed("assume_finished", pod.name, f"{node} {verdict}"))

    def gang_started(self, pods: Sequence[models.Pod]) -> None:
        self.calls.append(Observed("gang_started", ",".join(p.name for p in pods)))

    def gang_finished(
        self, pods: Sequence[models.Pod], placed: Placements, blocking: models.Pod | None
    ) -> None:
        detail = f"placed {len(placed)}/{len(pods)}"
        if blocking is not None:
            detail += f", blocked by {blocking.name}"
        self.calls.append(Observed("gang_finished", ",".join(p.name for p in pods), detail))
