"""Priority preemption against PDB-guarded pods, and gangs, round after round: each round
is ``splitsched.testing.mixedload``'s workload in a namespace of its own on the
preemption pool (fillers, a quarter of them under a PDB that allows no disruption, then
high- and mid-priority pods that fit only by preempting, polite pods that never may,
gangs that fit, one too big, one short of its minMember, plain pods), checked by
``mixedload.check`` once settled (no pod lost, no wrongful eviction, no partial gang, no
node over allocatable, placements right), then deleted.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from kubernetes import client

from bench.soak.cluster import ROUND_PLAN
from splitsched.testing import kube, mixedload

#: Seconds a round's fillers get to be bound, and its contenders to settle.
FILL_TIMEOUT = 120.0
SETTLE_TIMEOUT = 180.0
#: A pending pod's FailedScheduling report is best effort (a binder restarting may drop
#: it); the scheduler reports again at the pod's next attempt, at the latest when the
#: unschedulable queue is flushed (300 s). A pod still without a reason after this many
#: seconds from settling is a failure; one that got it late is noted.
RECORD_GRACE = 330.0
#: Seconds between rounds.
PAUSE = 20.0


@dataclass
class RoundResult:
    """What one round's ``mixedload.check`` found."""

    number: int
    pods: int
    bound: int
    evicted: int
    pending: int
    settled: bool
    seconds: float
    failures: list[str] = field(default_factory=list)
    #: Pending pods whose FailedScheduling reason came late (within ``RECORD_GRACE``).
    recorded_late: list[str] = field(default_factory=list)
    #: Pending pods still without a reason when the run ended inside ``RECORD_GRACE``.
    unrecorded_at_end: list[str] = field(default_factory=list)


@dataclass
class Rounds:
    api: client.ApiClient
    pool: mixedload.Pool
    classes: dict[str, str]
    profiles: Path
    stop: threading.Event = field(default_factory=threading.Event)
    results: list[RoundResult] = field(default_factory=list)

    def run_one(self) -> RoundResult:
        """One round in a fresh namespace, deleted afterwards."""
        number = len(self.results) + 1
        started = time.monotonic()
        namespace = kube.create_namespace(self.api, prefix=f"soak-round{number}")
        try:
            created = self._fill(namespace)
            contenders = mixedload.contenders(ROUND_PLAN, self.pool, self.classes, seed=number)
            kube.create_pods(self.api, namespace=namespace, pods=contenders, workers=4)
            created.update({p["metadata"]["name"]: p for p in contenders})
            settled = mixedload.wait_settled(
                self.api, namespace, ROUND_PLAN, timeout=SETTLE_TIMEOUT
            )
            report, late, waiting = self._check(namespace, created)
        finally:
            kube.delete_namespace(self.api, namespace, timeout=120.0)
        failures = report.failures(allow_unrecorded=True)
        if not report.evicted:
            failures.append("nothing was evicted: no preemption happened")
        if report.unrecorded and not waiting:
            failures.append(f"unrecorded after {RECORD_GRACE:.0f}s: {report.unrecorded}")
        result = RoundResult(
            number=number, pods=report.pods, bound=report.bound, evicted=len(report.evicted),
            pending=len(report.pending), settled=settled,
            seconds=round(time.monotonic() - started, 1), failures=failures,
            recorded_late=late, unrecorded_at_end=report.unrecorded if waiting else [],
        )  # fmt: skip
        self.results.append(result)
        return result

    def _check(
        self, namespace: str, created: dict[str, mixedload.Json]
    ) -> tuple[mixedload.Report, list[str], bool]:
        """``mixedload.check``, again every 5 s while pending pods lack a reason (up to
        ``RECORD_GRACE``, or the run's end); returns the last report, the pods whose reason
        came late (with how late) and whether the run ended while still waiting."""
        since = time.monotonic()
        first: list[str] | None = None
        while True:
            report = mixedload.check(
                self.api, namespace=namespace, pool=self.pool, created=created,
                profiles_yaml=self.profiles.read_text(),
            )  # fmt: skip
            waited = time.monotonic() - since
            first = report.unrecorded if first is None else first
            if not report.unrecorded or waited > RECORD_GRACE or self.stop.wait(5.0):
                break
        late = [f"{u.split(':')[0]} ({waited:.0f}s)" for u in first if u not in report.unrecorded]
        waiting = bool(report.unrecorded) and waited <= RECORD_GRACE
        return report, late, waiting

    def _fill(self, namespace: str) -> dict[str, mixedload.Json]:
        """The guard PDB, then the fillers, bound before anything contends for room."""
        mixedload.create_guard_pdb(self.api, namespace)
        pods = mixedload.fillers(ROUND_PLAN, self.pool, self.classes)
        kube.create_pods(self.api, namespace=namespace, pods=pods, workers=4)
        kube.wait_for(
            lambda: not any(mixedload.pending_names(self.api, namespace)),
            timeout=FILL_TIMEOUT,
            interval=0.5,
            message=f"{len(pods)} fillers bound",
        )
        return {p["metadata"]["name"]: p for p in pods}
