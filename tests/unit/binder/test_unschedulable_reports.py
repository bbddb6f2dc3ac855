"""An unschedulable report the API server keeps from landing (the pod unreadable, a write
not landed) is tried again in later rounds rather than lost, without writing a part twice;
a newer report for the same pod replaces the older; a pod gone or not ours gets nothing;
rounds are bounded (``services.binder.unschedulable``)."""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any

import pytest

from services.binder import unschedulable
from services.binder.admission import ReportCheck
from services.binder.jobs import PodKey
from services.binder.recorder import CONDITION, EVENT, UNSCHEDULABLE_PARTS
from services.binder.unschedulable import Report, UnschedulableReports

POD = PodKey("ns", "p1", "uid-1")


class FakeAdmission:
    """Answers each read with the next of ``answers`` (the last one from then on)."""

    def __init__(self, *answers: ReportCheck) -> None:
        self.answers = list(answers)
        self.reads = 0

    async def unschedulable(self, pod: PodKey, *, deadline: float, caller: str) -> ReportCheck:
        self.reads += 1
        return self.answers.pop(0) if len(self.answers) > 1 else self.answers[0]


class FakeRecorder:
    """Lands, in each call, the parts asked for that ``lands`` lets through this call."""

    def __init__(self, *lands: frozenset[str]) -> None:
        self.lands = list(lands)
        self.asked: list[tuple[str, frozenset[str]]] = []
        self.written: list[tuple[str, str]] = []

    async def unschedulable(
        self, pod: PodKey, *, message: str, reason: str, profile: str, parts: frozenset[str]
    ) -> frozenset[str]:
        self.asked.append((message, parts))
        allowed = self.lands.pop(0) if len(self.lands) > 1 else self.lands[0]
        landed = parts & allowed
        self.written += [(message, part) for part in sorted(landed)]
        return landed


class Rig:
    def __init__(self, admission: FakeAdmission | None, recorder: FakeRecorder) -> None:
        self.tasks: list[asyncio.Task[None]] = []
        self.pauses: list[float] = []
        self.stopping = False
        self.pause_gate: asyncio.Event | None = None
        self.paused = asyncio.Event()
        self.reports = UnschedulableReports(
            admission=admission, recorder=recorder, clock=lambda: 0.0, sleep=self.sleep,
            spawn=self.spawn, stopping=lambda: self.stopping,
        )  # fmt: skip

    def spawn(self, coro: Coroutine[Any, Any, None]) -> None:
        self.tasks.append(asyncio.ensure_future(coro))

    async def sleep(self, delay: float) -> None:
        self.pauses.append(delay)
        self.paused.set()
        if self.pause_gate is not None:
            await self.pause_gate.wait()

    async def drain(self) -> None:
        while not all(task.done() for task in self.tasks):
            await asyncio.gather(*self.tasks)


def report(message: str = "0/3 nodes are available") -> Report:
    return Report(POD, message=message, reason="Unschedulable", profile="splitsched")


def test_an_unreadable_pod_is_read_again_in_a_later_round() -> None:
    admission = FakeAdmission(ReportCheck.UNREADABLE, ReportCheck.UNREADABLE, ReportCheck.WRITE)
    recorder = FakeRecorder(UNSCHEDULABLE_PARTS)

    async def body() -> None:
        rig = Rig(admission, recorder)
        rig.reports.submit(report())
        await rig.drain()
        assert admission.reads == 3
        assert rig.pauses == [unschedulable.ROUND_PAUSE] * 2
        assert sorted(part for _, part in recorder.written) == sorted(UNSCHEDULABLE_PARTS)

    asyncio.run(body())


def test_a_part_that_landed_is_not_written_again() -> None:
    recorder = FakeRecorder(frozenset({EVENT}), frozenset({CONDITION}))

    async def body() -> None:
        rig = Rig(FakeAdmission(ReportCheck.WRITE), recorder)
        rig.reports.submit(report())
        await rig.drain()
        assert [parts for _, parts in recorder.asked] == [UNSCHEDULABLE_PARTS, {CONDITION}]
        assert [part for _, part in recorder.written] == [EVENT, CONDITION]

    asyncio.run(body())


def test_rounds_are_bounded_and_the_give_up_is_logged(caplog: pytest.LogCaptureFixture) -> None:
    recorder = FakeRecorder(frozenset({CONDITION}))  # the event never lands

    async def body() -> None:
        rig = Rig(FakeAdmission(ReportCheck.WRITE), recorder)
        rig.reports.submit(report())
        await rig.drain()
        assert len(recorder.asked) == unschedulable.ROUNDS
        assert recorder.written == [(report().message, CONDITION)]
        assert not rig.reports.writing(report())

    asyncio.run(body())
    assert any("given up after 4 rounds" in m and EVENT in m for m in caplog.messages)


def test_a_pod_gone_or_not_ours_gets_nothing_and_no_second_round() -> None:
    recorder = FakeRecorder(UNSCHEDULABLE_PARTS)

    async def body() -> None:
        rig = Rig(FakeAdmission(ReportCheck.SKIP), recorder)
        rig.reports.submit(report())
        await rig.drain()
        assert recorder.asked == [] and rig.pauses == []

    asyncio.run(body())


def test_a_newer_report_replaces_one_waiting_to_be_tried_again() -> None:
    """One task per pod: the report arriving during the pause is the one written next,
    in full (its message is new), and the older one is not tried again."""
    recorder = FakeRecorder(frozenset(), UNSCHEDULABLE_PARTS)

    async def body() -> None:
        rig = Rig(FakeAdmission(ReportCheck.WRITE), recorder)
        rig.pause_gate = asyncio.Event()
        rig.reports.submit(report("old"))
        await rig.paused.wait()
        rig.reports.submit(report("new"))
        assert len(rig.tasks) == 1
        rig.pause_gate.set()
        await rig.drain()
        assert recorder.asked == [("old", UNSCHEDULABLE_PARTS), ("new", UNSCHEDULABLE_PARTS)]
        assert {message for message, _ in recorder.written} == {"new"}

    asyncio.run(body())


def test_nothing_is_tried_again_once_the_binder_is_stopping() -> None:
    recorder = FakeRecorder(frozenset())

    async def body() -> None:
        rig = Rig(FakeAdmission(ReportCheck.WRITE), recorder)
        rig.stopping = True
        rig.reports.submit(report())
        await rig.drain()
        assert len(recorder.asked) == 1 and rig.pauses == []

    asyncio.run(body())


def test_without_admission_the_report_is_written_unread() -> None:
    recorder = FakeRecorder(UNSCHEDULABLE_PARTS)

    async def body() -> None:
        rig = Rig(None, recorder)
        rig.reports.submit(report())
        await rig.drain()
        assert len(recorder.written) == 2

    asyncio.run(body())
