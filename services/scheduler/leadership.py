"""Leadership: whether this replica may decide now, and what changes when that changes.

Without `--leader-elect` the replica always leads. With it, a `leader.LeaderElector`
campaigns for the Lease; only the holder schedules, a standby keeps a warm view. Either
way the replica serves gRPC health SERVING only while it leads with a synced view
(binders' health-checked channels skip a standby), and once it is SERVING it waits
`--settle-seconds` before its first decision, so binders re-report (and it adopts) what
the previous leader or process left in flight. Losing the Lease stops the service with
exit code 1, so Kubernetes restarts a clean standby (like kube-scheduler).
Created by `services.scheduler.main`; asked by the scheduling loop before every slice.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable

from services.scheduler import leader
from services.scheduler.metrics import SchedulerMetrics
from services.scheduler.state import SchedulerState
from splitsched.runtime import grpcsrv

log = logging.getLogger("splitsched.scheduler")

#: How often gRPC health is brought in line with "synced and leading".
SERVING_CHECK_SECONDS = 0.5
#: The longest the scheduling loop sleeps while it may not schedule (a poke wakes it).
IDLE_SECONDS = 1.0


class Leadership:
    """Leading, settled and serving state of one replica (see the module docstring)."""

    def __init__(
        self,
        *,
        state: SchedulerState,
        metrics: SchedulerMetrics,
        elector: leader.LeaderElector | None,
        settle_seconds: float,
        poke: Callable[[], None],
        stop: Callable[[], None],
    ) -> None:
        self.state = state
        self.metrics = metrics
        self.elector = elector
        self.settle_seconds = settle_seconds
        self.poke = poke
        #: Asks the service to stop (what losing the Lease does).
        self.stop = stop
        # Scheduling starts at this monotonic time: set when leading with a synced view and
        # serving (binders can reach us: since `serving_since`).
        self.settle_until: float | None = None
        self.serving_since: float | None = None
        #: The service's exit code: 1 after losing the Lease.
        self.exit_code = 0
        metrics.leader.set(1 if state.leading else 0)

    def _leading(self) -> bool:
        return self.elector is None or self.elector.is_leading()

    def may_schedule(self) -> bool:
        """Leading, synced, and settled: once binders can reach us (gRPC SERVING), wait
        `settle_seconds` so they re-report (and we adopt) what the previous leader or
        process left in flight."""
        if not (self.state.synced and self.state.leading and self._leading()):
            return False
        if self.settle_seconds <= 0:
            return True
        if self.settle_until is None:
            if self.serving_since is None:
                return False
            self.settle_until = self.serving_since + self.settle_seconds
            log.info(
                "leading with a synced view: adopting decisions in flight for %.1fs "
                "before scheduling",
                self.settle_seconds,
            )
        return time.monotonic() >= self.settle_until

    def idle_wait(self) -> float:
        """How long the scheduling loop sleeps when it may not schedule: until the settle
        period ends, if that is sooner."""
        if self.settle_until is not None and self.state.leading:
            return min(IDLE_SECONDS, max(0.01, self.settle_until - time.monotonic()))
        return IDLE_SECONDS

    # ---- the Lease -----------------------------------------------------------------------
    async def campaign(self, identity: str) -> None:
        """Run for the Lease until leadership is lost (no-op without leader election)."""
        if self.elector is None:
            return
        log.info("standby until %s is ours (identity %s)", self.elector.description, identity)
        await self.elector.run(
            on_started_leading=self.started_leading, on_stopped_leading=self.stopped_leading
        )

    def started_leading(self) -> None:
        self.state.set_leading(True)
        self.settle_until = None
        self.metrics.leader.set(1)
        log.info("leading (%s): scheduling once synced and settled", self._lease_name())
        self.poke()

    def stopped_leading(self) -> None:
        """Lost the Lease: stop deciding at once, and exit non-zero so Kubernetes restarts
        a clean standby (like kube-scheduler)."""
        self.state.set_leading(False)
        self.metrics.leader.set(0)
        log.error("lost %s: stopping; exit code 1", self._lease_name())
        self.exit_code = 1
        self.stop()

    def _lease_name(self) -> str:
        return self.elector.description if self.elector is not None else "no lease"

    async def close(self) -> None:
        """Release the Lease on a graceful stop (a standby takes over at its next read)."""
        if self.elector is None:
            return
        if self.exit_code == 0:
            await self.elector.release()
        await self.elector.client.close()

    # ---- gRPC health ---------------------------------------------------------------------
    async def serving_follows_sync(self, server: grpcsrv.GrpcServer) -> None:
        """Keep gRPC health SERVING exactly while synced and leading: a standby is
        NOT_SERVING, so binders' health-checked channels skip it."""
        serving = False
        while True:
            want = self.state.synced and self.state.leading
            if want != serving:
                serving = want
                await server.set_serving(serving)
                self.serving_since = time.monotonic() if serving else None
                self.poke()
            await asyncio.sleep(SERVING_CHECK_SECONDS)
