"""splitsched-scheduler: the stateful service that holds the cluster view and decides.

Subscribes to a watcher's event stream (reconnecting with backoff, resuming from the last
applied sequence), runs the scheduling loop one pod at a time through the pure core, sends
decisions to binders (client-side round robin), and serves the Scheduler API. Holds no
Kubernetes credentials.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import os
import signal
import socket
import sys
import time
from collections.abc import Coroutine, Sequence
from pathlib import Path
from typing import Any

import grpc
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from services.scheduler.api import SchedulerApi
from services.scheduler.state import Decision, SchedulerState, Unschedulable
from splitsched import wire
from splitsched.core import algorithm, models, profiles
from splitsched.core.cache import SchedulerCache
from splitsched.core.clock import SystemClock
from splitsched.core.queue import SchedulingQueue
from splitsched.runtime import config, grpcsrv, httpsrv, logs
from splitsched.v1 import (
    binder_pb2,
    binder_pb2_grpc,
    scheduler_pb2_grpc,
    watcher_pb2,
    watcher_pb2_grpc,
)

log = logging.getLogger("splitsched.scheduler")

_EVENT_KIND = {
    watcher_pb2.ClusterEvent.SNAPSHOT: "ADDED",
    watcher_pb2.ClusterEvent.ADDED: "ADDED",
    watcher_pb2.ClusterEvent.MODIFIED: "MODIFIED",
    watcher_pb2.ClusterEvent.DELETED: "DELETED",
}
SLICE_SECONDS = 0.02  # how long the scheduling loop runs before yielding to I/O
MAX_BATCH = 128  # decisions per BindBatch call


class Metrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        self.attempts = Counter(
            "scheduler_schedule_attempts_total",
            "Scheduling attempts by result (scheduled, unschedulable, error)",
            ["result", "profile"],
            registry=r,
        )
        self.cycle = Histogram(
            "scheduler_scheduling_attempt_duration_seconds",
            "Scheduling cycle latency (filter, score, assume)",
            ["result"],
            buckets=(0.0001, 0.0002, 0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.5, 1),
            registry=r,
        )
        self.e2e = Histogram(
            "scheduler_pod_scheduling_sli_duration_seconds",
            "From the pod's creation to its bound confirmation",
            buckets=(0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300),
            registry=r,
        )
        self.pending = Gauge("scheduler_pending_pods", "Pods in each queue", ["queue"], registry=r)
        self.outcomes = Counter(
            "splitsched_scheduler_binding_outcomes_total",
            "Binding outcomes reported by binders",
            ["result"],
            registry=r,
        )
        self.bound = Counter(
            "splitsched_scheduler_pods_bound_total", "Pods confirmed bound", registry=r
        )
        self.reconnects = Counter(
            "splitsched_grpc_stream_reconnects_total",
            "Reconnections of a gRPC stream",
            ["stream"],
            registry=r,
        )
        self.watch_events = Counter(
            "splitsched_scheduler_watch_events_total",
            "Cluster events applied",
            ["type"],
            registry=r,
        )


class SchedulerService:
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        text = Path(args.profiles).read_text(encoding="utf-8") if args.profiles else ""
        profs = profiles.load_profiles_yaml(text)
        clock = SystemClock()
        algo = algorithm.FrameworkAlgorithm(cache=SchedulerCache(clock=clock), profiles=profs)
        queue = SchedulingQueue(clock=clock)
        self.state = SchedulerState(
            algo=algo,
            queue=queue,
            clock=clock,
            scheduler_id=args.scheduler_id,
            bind_timeout=args.bind_timeout,
        )
        self.metrics = Metrics()
        self.wake = asyncio.Event()
        self.stopping = asyncio.Event()
        self.last_sequence = 0
        self.binders_channel = grpcsrv.channel(args.binders, round_robin=True)
        self.binder = binder_pb2_grpc.BinderStub(self.binders_channel)
        self.inflight_sends: set[asyncio.Task[None]] = set()
        self.state.listeners.append(self._observe)

    def _observe(self, event: object) -> None:
        kind = getattr(event, "kind", "")
        if kind == "BOUND":
            self.metrics.bound.inc()
            pod = getattr(event, "pod", None)
            created = getattr(pod, "creation_timestamp", 0.0)
            if created:
                self.metrics.e2e.observe(max(0.0, time.time() - created))

    def poke(self) -> None:
        self.wake.set()

    def ready(self) -> bool:
        return self.state.synced

    # ---- the watch -----------------------------------------------------------------------
    async def watch_loop(self) -> None:
        backoff = 0.2
        while not self.stopping.is_set():
            channel = grpcsrv.channel(self.args.watcher)
            stub = watcher_pb2_grpc.WatcherStub(channel)
            try:
                request = watcher_pb2.StreamClusterEventsRequest(
                    from_sequence=self.last_sequence,
                    subscriber=self.args.scheduler_id,
                    scheduler_names=list(self.state.algo.profiles),
                )
                async for batch in stub.StreamClusterEvents(request):
                    backoff = 0.2
                    for event in batch.events:
                        self._apply(event)
                    self.poke()
            except grpc.aio.AioRpcError as exc:
                log.warning("watcher stream ended: %s %s", exc.code().name, exc.details())
            finally:
                await channel.close()
            if self.stopping.is_set():
                return
            self.metrics.reconnects.labels("watcher").inc()
            await asyncio.sleep(backoff)
            backoff = min(backoff * 2, 10.0)

    def _apply(self, event: watcher_pb2.ClusterEvent) -> None:
        etype = event.type
        self.last_sequence = event.sequence or self.last_sequence
        self.metrics.watch_events.labels(watcher_pb2.ClusterEvent.Type.Name(etype)).inc()
        if etype == watcher_pb2.ClusterEvent.SNAPSHOT_BEGIN:
            log.info("snapshot begins at sequence %d: rebuilding the view", event.sequence)
            self.state.reset()
            return
        if etype == watcher_pb2.ClusterEvent.SYNCED:
            self.state.mark_synced()
            log.info(
                "view synced: %d nodes, %d pods in cache, %d pending",
                self.state.cache.table.n,
                len(self.state.cache),
                len(self.state.queue),
            )
            return
        kind = _EVENT_KIND.get(etype)
        if kind is None:
            return
        which = event.WhichOneof("object")
        if which == "node":
            self.state.apply_node(kind, wire.node_from_proto(event.node))
        elif which == "pod":
            self.state.apply_pod(kind, wire.pod_from_proto(event.pod))
        elif which == "pdb":
            pdb = event.pdb
            self.state.apply_pdb(
                kind,
                models.PodDisruptionBudget(
                    namespace=pdb.namespace,
                    name=pdb.name,
                    selector=wire.label_selector_from_proto(pdb.selector)
                    if pdb.HasField("selector")
                    else None,
                    disruptions_allowed=pdb.disruptions_allowed,
                ),
            )

    # ---- scheduling ----------------------------------------------------------------------
    async def schedule_loop(self) -> None:
        while not self.stopping.is_set():
            if not self.state.synced:
                await self._sleep_until_woken(1.0)
                continue
            decisions: list[Decision] = self.state.take_ready_binds()
            reports: list[Unschedulable] = []
            started = time.perf_counter()
            while time.perf_counter() - started < SLICE_SECONDS:
                t0 = time.perf_counter()
                outcomes = self.state.schedule_one()
                if outcomes is None:
                    break
                elapsed = time.perf_counter() - t0
                for outcome in outcomes:
                    profile = outcome.pod.scheduler_name
                    if isinstance(outcome, Decision) and outcome.is_preemption:
                        self.metrics.attempts.labels("preempting", profile).inc()
                        self._spawn(self._preempt(outcome))
                    elif isinstance(outcome, Decision):
                        decisions.append(outcome)
                        self.metrics.attempts.labels("scheduled", profile).inc()
                        self.metrics.cycle.labels("scheduled").observe(elapsed)
                    else:
                        self.metrics.attempts.labels("unschedulable", profile).inc()
                        self.metrics.cycle.labels("unschedulable").observe(elapsed)
                        if outcome.report:
                            reports.append(outcome)
                if len(decisions) >= MAX_BATCH:
                    self._send(decisions)
                    decisions = []
            if decisions:
                self._send(decisions)
            for report in reports:
                self._spawn(self._report_unschedulable(report))
            self._update_queue_gauges()
            if self.state.queue.lengths().get("active", 0) == 0:
                await self._sleep_until_woken(1.0)
            else:
                await asyncio.sleep(0)

    async def _sleep_until_woken(self, seconds: float) -> None:
        self.wake.clear()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self.wake.wait(), seconds)

    def _update_queue_gauges(self) -> None:
        for name, n in self.state.queue.lengths().items():
            self.metrics.pending.labels(name).set(n)

    def _spawn(self, coro: Coroutine[Any, Any, None]) -> None:
        task = asyncio.create_task(coro)
        self.inflight_sends.add(task)
        task.add_done_callback(self.inflight_sends.discard)

    def _send(self, decisions: list[Decision]) -> None:
        self._spawn(self._send_batch(decisions))

    async def _send_batch(self, decisions: list[Decision]) -> None:
        wall = time.time() - self.state.clock.now()
        request = binder_pb2.BindBatchRequest()
        for d in decisions:
            req = request.requests.add(
                decision_id=d.decision_id,
                node=d.node,
                node_version=d.node_version,
                max_attempts=self.args.bind_attempts,
                scheduler_id=self.state.scheduler_id,
                profile=d.pod.scheduler_name,
            )
            req.pod.CopyFrom(wire.pod_ref(d.pod))
            # The binder gives up a little before we would, so its report wins the race.
            wire.timestamp_from_float(
                d.deadline + wall - self.args.bind_timeout * 0.2, req.deadline
            )
        try:
            response = await self.binder.BindBatch(request, timeout=10.0)
        except grpc.aio.AioRpcError as exc:
            log.warning(
                "binders unreachable (%s): requeueing %d decisions", exc.code().name, len(decisions)
            )
            for d in decisions:
                self.state.refused(d, f"binder unreachable: {exc.code().name}")
            self.poke()
            return
        by_id = {r.decision_id: r for r in response.responses}
        for d in decisions:
            r = by_id.get(d.decision_id)
            if r is None or not r.accepted:
                self.state.refused(d, r.reason if r is not None else "no answer for this decision")
        self.poke()

    async def _preempt(self, decision: Decision) -> None:
        """Ask a binder to nominate the preemptor and evict the victims; the room stays
        held (assumed) until the victims are gone or the preemption fails."""
        request = binder_pb2.PreemptRequest(
            decision_id=decision.decision_id,
            node=decision.node,
            message=f"preempted by {decision.pod.key} on node {decision.node}",
        )
        request.preemptor.CopyFrom(wire.pod_ref(decision.pod))
        for victim in decision.victims:
            request.victims.append(wire.pod_ref(victim))
        try:
            ack = await self.binder.Preempt(request, timeout=10.0)
        except grpc.aio.AioRpcError as exc:
            self.state.refused(decision, f"binder unreachable: {exc.code().name}")
            self.poke()
            return
        if not ack.accepted:
            self.state.refused(decision, ack.reason)
            self.poke()

    async def _report_unschedulable(self, report: Unschedulable) -> None:
        request = binder_pb2.UnschedulableReport(
            message=report.message, reason="Unschedulable", profile=report.pod.scheduler_name
        )
        request.pod.CopyFrom(wire.pod_ref(report.pod))
        try:
            await self.binder.ReportUnschedulable(request, timeout=5.0)
        except grpc.aio.AioRpcError as exc:
            log.debug("could not report %s unschedulable: %s", report.pod.key, exc.code().name)

    async def housekeeping_loop(self) -> None:
        while not self.stopping.is_set():
            await asyncio.sleep(1.0)
            moved = self.state.queue.flush()
            expired = self.state.expire_overdue() if self.state.synced else 0
            if expired:
                log.warning("%d decisions passed their bind deadline unbound: requeued", expired)
            if moved or expired:
                self.poke()

    # ---- run -----------------------------------------------------------------------------
    async def run(self) -> int:
        api = SchedulerApi(state=self.state, on_change=self.poke)
        server = await grpcsrv.serve(
            listen=self.args.listen,
            servicers=[(scheduler_pb2_grpc.add_SchedulerServicer_to_server, api)],
            service_names=["splitsched.v1.Scheduler"],
        )
        host, port = httpsrv.split_listen(self.args.http_listen)
        runner, http_port = await httpsrv.serve_http(
            host=host, port=port, ready=self.ready, metrics=self.metrics.registry
        )
        grpc_addr = grpcsrv.host_port(self.args.listen, server.port)
        print(
            f"splitsched-scheduler listening grpc={grpc_addr} "
            f"http={host}:{http_port} watcher={self.args.watcher} binders={self.args.binders}",
            flush=True,
        )
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, self.stopping.set)
        tasks = [
            asyncio.create_task(self.watch_loop()),
            asyncio.create_task(self.schedule_loop()),
            asyncio.create_task(self.housekeeping_loop()),
            asyncio.create_task(self._serving_follows_sync(server)),
        ]
        await self.stopping.wait()
        log.info("shutting down")
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await server.stop(2.0)
        await runner.cleanup()
        await self.binders_channel.close()
        return 0

    async def _serving_follows_sync(self, server: grpcsrv.GrpcServer) -> None:
        serving = False
        while True:
            if self.state.synced != serving:
                serving = self.state.synced
                await server.set_serving(serving)
            await asyncio.sleep(0.5)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="splitsched-scheduler", description=__doc__.split("\n\n")[0])
    p.add_argument("--listen", default="0.0.0.0:50050", help="gRPC address (Scheduler API)")
    p.add_argument("--http-listen", default="0.0.0.0:9090", help="HTTP health and metrics")
    p.add_argument("--watcher", default="127.0.0.1:50051", help="the watcher's gRPC target")
    p.add_argument(
        "--binders",
        default="127.0.0.1:50052",
        help="binders' gRPC target: dns:///svc:port (headless Service) or ipv4:a:p,b:p",
    )
    p.add_argument("--profiles", help="scheduler profiles YAML (default: one 'splitsched')")
    p.add_argument("--scheduler-id", default=f"{socket.gethostname()}-{os.getpid()}")
    p.add_argument("--bind-timeout", type=float, default=30.0, help="seconds per decision")
    p.add_argument("--bind-attempts", type=int, default=5, help="Binding API attempts")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = config.parse_args(build_parser(), argv, env_prefix="SPLITSCHED_SCHEDULER")
    logs.setup("scheduler", json_lines=bool(args.log_json), level=args.log_level)
    try:
        return asyncio.run(_run(args))
    except (profiles.ProfileError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


async def _run(args: argparse.Namespace) -> int:
    # Built inside the running loop: gRPC aio channels and asyncio events bind to it.
    return await SchedulerService(args).run()


if __name__ == "__main__":
    sys.exit(main())
