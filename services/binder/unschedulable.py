"""The scheduler's unschedulable reports, written so that a failing or throttling API
server delays them but does not lose them: the FailedScheduling Event and PodScheduled=False
are the only way a user learns why a pod waits.

One task per pod: a newer report for a pod replaces an older one not written yet. A round
reads the pod (``Admission.unschedulable``) and writes what is still missing
(``Recorder.unschedulable``, each write with its own retries). A report the round could
not finish (the pod unreadable, a write not landed) is tried again after ``ROUND_PAUSE``,
at most ``ROUNDS`` rounds, without writing a part twice.

Why rounds on top of each write's retries: a binder the API server throttles narrows how
many requests it has in flight (``splitsched.runtime.ratelimit``), and the pod's read and
the two writes wait their turn behind the bindings. A whole round's retries can pass
without a turn: the faults tier's mixed test lost FailedScheduling records that way.

A report may carry ResourceClaims to deallocate (the scheduler's DynamicResources
PostFilter gave them back): ``ClaimDeallocator.run`` deallocates them once, before the
report's first round; a newer report replacing one not taken up yet keeps its claims.

Used by ``services.binder.worker`` for every ``ReportUnschedulable``.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from services.binder import recorder as recording
from services.binder.admission import ReportCheck
from services.binder.jobs import ClaimWrite, PodKey

log = logging.getLogger(__name__)

#: Rounds a report gets before it is given up (the scheduler reports a pod again when it
#: tries it again, so a report given up is not the last word).
ROUNDS = 4
#: Seconds between a round that did not finish its report and the next.
ROUND_PAUSE = 5.0


class PodCheck(Protocol):
    """``services.binder.admission.Admission``, as far as reports need it."""

    async def unschedulable(self, pod: PodKey, *, deadline: float, caller: str) -> ReportCheck: ...


class ReportWriter(Protocol):
    """``services.binder.recorder.Recorder``, as far as reports need it."""

    async def unschedulable(
        self, pod: PodKey, *, message: str, reason: str, profile: str, parts: frozenset[str]
    ) -> frozenset[str]: ...


class ClaimDeallocator(Protocol):
    """``services.binder.deallocation.Deallocator``, as far as reports need it."""

    async def run(self, pod: PodKey, claims: Sequence[ClaimWrite], *, caller: str = "") -> None: ...


@dataclass(frozen=True)
class Report:
    """What the scheduler asked to be written about one pod; ``deallocate``: the claims
    its DynamicResources PostFilter gave back, deallocated before the report's writes."""

    pod: PodKey
    message: str
    reason: str
    profile: str
    caller: str = ""
    deallocate: tuple[ClaimWrite, ...] = ()


class UnschedulableReports:
    """Writes reports in the background: ``spawn`` runs a task (the pool's side tasks, so
    shutdown waits for and cancels them); ``stopping`` tells when not to try again."""

    def __init__(
        self,
        *,
        admission: PodCheck | None,
        recorder: ReportWriter,
        clock: Callable[[], float],
        sleep: Callable[[float], Awaitable[None]],
        spawn: Callable[[Coroutine[Any, Any, None]], None],
        stopping: Callable[[], bool],
        deallocator: ClaimDeallocator | None = None,
    ) -> None:
        self._admission = admission
        self._deallocator = deallocator
        self._recorder = recorder
        self._clock = clock
        self._sleep = sleep
        self._spawn = spawn
        self._stopping = stopping
        self._latest: dict[tuple[str, str], Report] = {}  # not taken up yet, by pod
        self._writing: set[tuple[str, str]] = set()  # pods with a task

    def writing(self, report: Report) -> bool:
        """True when a task already writes reports about ``report``'s pod."""
        return _key(report) in self._writing

    def submit(self, report: Report) -> None:
        key = _key(report)
        replaced = self._latest.get(key)
        if replaced is not None and replaced.deallocate and not report.deallocate:
            report = dataclasses.replace(report, deallocate=replaced.deallocate)  # not lost
        self._latest[key] = report
        if key not in self._writing:
            self._writing.add(key)
            self._spawn(self._write(key))

    async def _write(self, key: tuple[str, str]) -> None:
        report: Report | None = None
        failed, written = 0, frozenset[str]()
        try:
            while (latest := self._latest.pop(key, None)) is not None:
                if latest != report:
                    report, failed, written = latest, 0, frozenset()
                    if report.deallocate and self._deallocator is not None:
                        await self._deallocator.run(
                            report.pod, report.deallocate, caller=report.caller
                        )
                done = await self._round(report, missing=recording.UNSCHEDULABLE_PARTS - written)
                if done is None:
                    continue  # nothing to write about this pod (a newer report may be)
                written |= done
                if written == recording.UNSCHEDULABLE_PARTS:
                    continue
                failed += 1
                if failed >= ROUNDS or self._stopping():
                    self._give_up(report, written, rounds=failed)
                    continue
                self._latest.setdefault(key, report)  # again, unless a newer one came
                await self._sleep(ROUND_PAUSE)
        finally:
            self._writing.discard(key)
            self._latest.pop(key, None)

    async def _round(self, report: Report, *, missing: frozenset[str]) -> frozenset[str] | None:
        """The parts written; None when nothing is to be written (the pod gone, or not
        ours), empty when the pod could not be read."""
        if self._admission is not None:
            deadline = self._clock() + recording.UNSCHEDULABLE_WRITE_SECONDS
            check = await self._admission.unschedulable(
                report.pod, deadline=deadline, caller=report.caller
            )
            if check is ReportCheck.SKIP:
                return None
            if check is ReportCheck.UNREADABLE:
                return frozenset()
        return await self._recorder.unschedulable(
            report.pod, message=report.message, reason=report.reason,
            profile=report.profile, parts=missing,
        )  # fmt: skip

    @staticmethod
    def _give_up(report: Report, written: frozenset[str], *, rounds: int) -> None:
        missing = sorted(recording.UNSCHEDULABLE_PARTS - written)
        log.warning(
            "FailedScheduling report for %s given up after %d rounds: %s not written",
            report.pod, rounds, " and ".join(missing),
        )  # fmt: skip


def _key(report: Report) -> tuple[str, str]:
    return report.pod.namespace, report.pod.name
