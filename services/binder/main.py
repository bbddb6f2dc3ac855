"""The binder process (``splitsched-binder``, ``python -m services.binder``).

Wires the pieces: the Kubernetes client (``kubeapi``), the outcome reporter to the
scheduler (``reporter``), the worker pool (``worker``), the watch of the pending pods its
checks read (``pendingpods``) and the ``Binder`` gRPC servicer (``server``), plus
``/healthz``, ``/readyz`` (the API server answers) and ``/metrics``, through the runtime's
service skeleton (``splitsched.runtime.service``). Its flags and settings:
``services.binder.settings``.
On SIGTERM/SIGINT it shuts down gracefully: health NOT_SERVING, new work refused, queued
decisions reported FAILED ("binder shutting down") so the scheduler requeues them at once,
running bindings given ``--shutdown-grace`` seconds, outcomes flushed, then exit.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import sys
from collections.abc import Sequence

from services.binder.kubeapi import KubeClient
from services.binder.metrics import BinderMetrics
from services.binder.pendingpods import PendingPods, PodWatch
from services.binder.reporter import CHANNEL_OPTIONS, OutcomeReporter
from services.binder.server import BinderServicer
from services.binder.settings import SERVICE_NAME, BinderSettings
from services.binder.worker import BindingPool
from splitsched.runtime import grpcsrv, kubeclient, service, tasksgauge
from splitsched.v1 import binder_pb2_grpc

log = logging.getLogger("splitsched.binder")

#: How often readiness re-checks the API server (seconds).
PROBE_INTERVAL = 2.0


class Binder:
    """The binder as the service skeleton drives it. Ready while the API server answers
    and the pool takes work."""

    def __init__(self, settings: BinderSettings) -> None:
        self.settings = settings
        self.metrics = BinderMetrics()
        tasksgauge.register(self.metrics.registry)
        self.api_ready = False
        self._kube: KubeClient | None = None
        self._reporter: OutcomeReporter | None = None
        self._pool: BindingPool | None = None
        self._prober: asyncio.Task[None] | None = None
        self.pending = PendingPods()
        self._pod_watch: asyncio.Task[None] | None = None

    @property
    def kube(self) -> KubeClient:
        assert self._kube is not None, "open() first"
        return self._kube

    @property
    def reporter(self) -> OutcomeReporter:
        assert self._reporter is not None, "open() first"
        return self._reporter

    @property
    def pool(self) -> BindingPool:
        assert self._pool is not None, "open() first"
        return self._pool

    def ready(self) -> bool:
        return self.api_ready and not self.pool.shutting_down

    async def open(self) -> service.Exposed:
        settings = self.settings
        try:
            endpoint = kubeclient.load_endpoint(
                settings.common.kubeconfig, context=settings.common.kube_context
            )
        except kubeclient.KubeConfigError as exc:
            log.error("cannot load Kubernetes config %s: %s",
                      settings.common.kubeconfig or "(in-cluster)", exc.problem)  # fmt: skip
            raise service.StartupFailed(2) from exc
        metrics = self.metrics
        kube = self._kube = KubeClient(
            endpoint,
            qps=settings.qps,
            burst=settings.burst,
            max_connections=2 * max(1, settings.workers),
            requests=metrics.api_requests,
            on_throttled=lambda _retry_after: metrics.api_throttled.inc(),
        )
        await kube.start()
        reporter = self._reporter = OutcomeReporter(
            target=settings.scheduler,
            binder_id=settings.binder_id,
            metrics=metrics,
            max_buffer=settings.max_report_buffer,
            channel_factory=lambda target: grpcsrv.open_channel(
                target, options=CHANNEL_OPTIONS, tls=settings.common.security.peer
            ),
            tls=settings.common.security.peer,
        )
        await reporter.start()
        pool = BindingPool(
            kube=kube,
            reporter=reporter,
            metrics=metrics,
            binder_id=settings.binder_id,
            workers=settings.workers,
            max_pending=settings.max_pending,
            preempt_deadline=settings.preempt_deadline,
            profiles=settings.scheduler_names,
            pending=self.pending,
        )
        self._pool = pool
        pool.start()
        return service.Exposed(
            servicers=[(binder_pb2_grpc.add_BinderServicer_to_server, BinderServicer(pool))],
            service_names=[SERVICE_NAME],
            metrics=metrics.registry,
            ready=self.ready,
            max_connection_age_s=30.0,
        )

    async def start(self, running: service.Running) -> None:
        self._prober = asyncio.create_task(self._probe_loop(running), name="api-probe")
        watch = PodWatch(self.kube, self.pending, self.settings.scheduler_names)
        self._pod_watch = asyncio.create_task(watch.run(), name="pending-pods")

    async def _probe_loop(self, running: service.Running) -> None:
        """Readiness and gRPC health follow whether the API server answers."""
        while True:
            was = self.api_ready
            self.api_ready = await self.kube.probe()
            if self.api_ready != was:
                log.info("API server %s %s", self.kube.endpoint.host,
                         "reachable" if self.api_ready else "unreachable")  # fmt: skip
            if not self.pool.shutting_down and not running.stopping():
                await running.grpc.set_serving(self.api_ready)
            await asyncio.sleep(PROBE_INTERVAL)

    def describe(self, running: service.Running) -> str:
        return (
            f"splitsched-binder listening grpc={running.grpc_address} "
            f"http={running.http_address} binder_id={self.settings.binder_id} "
            f"api={self.kube.endpoint.host} scheduler={self.settings.scheduler}"
        )

    async def drain(self) -> None:
        """Refuse new work, report queued decisions, give running bindings their grace
        and deliver the outcomes."""
        log.info("shutting down: %d decisions in flight", self.pool.inflight)
        await self.pool.shutdown(self.settings.shutdown_grace)
        for task in (self._prober, self._pod_watch):
            if task is not None:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
        if not await self.reporter.flush(within=self.settings.report_flush_timeout):
            log.warning("%d outcomes not delivered to the scheduler", self.reporter.backlog)
        await self.reporter.close()

    async def close(self) -> int:
        if self._kube is not None:
            await self._kube.close()
        if self._reporter is not None:
            log.info("stopped; %d outcomes delivered", self._reporter.delivered)
        return 0


async def serve(settings: BinderSettings) -> int:
    """Run the binder until SIGTERM/SIGINT; returns the exit code."""
    return await service.serve(Binder(settings), settings.common)


def main(argv: Sequence[str] | None = None) -> int:
    return service.main("binder", load=lambda: BinderSettings.load(argv), serve=serve)


if __name__ == "__main__":
    sys.exit(main())
