"""splitsched-scheduler: the stateful service that holds the cluster view and decides.

Subscribes to a watcher's event stream (reconnecting with backoff, resuming from the last
applied sequence), runs the scheduling loop one pod at a time through the pure core, sends
decisions to binders (client-side round robin), and serves the Scheduler API. Holds no
Kubernetes credentials, except, with `--leader-elect`, the right to its Lease
(`services.scheduler.leader`): then only the replica holding it schedules, and a standby
keeps a warm view, reports not ready and refuses binders' reports. When it starts
leading, it waits `--settle-seconds` (3 s by default with leader election) after its view
is synced and binders can reach it, before deciding anything, so binders' re-reports of
the decisions still in flight are adopted first.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import os
import secrets
import signal
import socket
import sys
import time
from collections.abc import Coroutine, Sequence
from pathlib import Path
from typing import Any

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from services.scheduler import leader
from services.scheduler.api import SchedulerApi
from services.scheduler.state import (
    Decision,
    DecisionEvent,
    EventKind,
    SchedulerState,
    Unschedulable,
)
from services.scheduler.traces import SchedulingTraces
from splitsched import wire
from splitsched.core import algorithm, models, profiles
from splitsched.core.cache import SchedulerCache
from splitsched.core.clock import SystemClock
from splitsched.core.observer import NO_OBSERVER
from splitsched.core.queue import SchedulingQueue
from splitsched.runtime import (
    config,
    eventloop,
    grpcsrv,
    httpsrv,
    kubeclient,
    logs,
    security,
    tracing,
)
from splitsched.v1 import (
    binder_pb2,
    binder_pb2_grpc,
    scheduler_pb2,
    scheduler_pb2_grpc,
    watcher_pb2,
    watcher_pb2_grpc,
)

log = logging.getLogger("splitsched.scheduler")
SERVICE = scheduler_pb2.DESCRIPTOR.services_by_name["Scheduler"]
#: What `--trusted-clients` guards unless `--restrict-rpcs` says otherwise.
RESTRICTED_RPCS = ("ReportBindingOutcome", "Simulate")

_EVENT_KIND = {
    watcher_pb2.ClusterEvent.SNAPSHOT: "ADDED",
    watcher_pb2.ClusterEvent.ADDED: "ADDED",
    watcher_pb2.ClusterEvent.MODIFIED: "MODIFIED",
    watcher_pb2.ClusterEvent.DELETED: "DELETED",
}
SLICE_SECONDS = 0.02  # how long the scheduling loop runs before yielding to I/O
MAX_BATCH = 128  # decisions per BindBatch call


# kube-scheduler's buckets (ExponentialBuckets(0.001, 2, 15) and (0.01, 2, 20)); the cycle's
# gets three sub-millisecond buckets in front, as ours take a fraction of a millisecond.
CYCLE_BUCKETS = (0.0001, 0.00025, 0.0005, *(0.001 * 2**i for i in range(15)))
SLI_BUCKETS = tuple(0.01 * 2**i for i in range(20))
BINDER_PROBE_SECONDS = 2.0


def _not_received(exc: grpc.aio.AioRpcError) -> bool:
    """Whether a failed call to a binder certainly never reached it: no connection could be
    made, or it does not serve the method. Anything else (a deadline, a connection lost
    mid-call, a cancellation) may come after the binder took the decision."""
    if exc.code() is grpc.StatusCode.UNIMPLEMENTED:
        return True
    details = (exc.details() or "").lower()
    return exc.code() is grpc.StatusCode.UNAVAILABLE and (
        "failed to connect to all addresses" in details or "connection refused" in details
    )


def _attempts_label(attempts: int) -> str:
    """kube-scheduler's `attempts` label, capped so a pod retried forever adds no series."""
    return str(attempts) if attempts < 10 else "10+"


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
            "Scheduling cycle latency (filter, score, assume), by result and profile",
            ["result", "profile"],
            buckets=CYCLE_BUCKETS,
            registry=r,
        )
        self.e2e = Histogram(
            "scheduler_pod_scheduling_sli_duration_seconds",
            "From the pod entering the scheduling queue to its bound confirmation, by the "
            "number of attempts it took",
            ["attempts"],
            buckets=SLI_BUCKETS,
            registry=r,
        )
        self.created_to_bound = Histogram(
            "splitsched_pod_creation_to_bound_seconds",
            "From the pod's creationTimestamp to its bound confirmation",
            buckets=SLI_BUCKETS,
            registry=r,
        )
        self.pod_attempts = Histogram(
            "scheduler_pod_scheduling_attempts",
            "Scheduling attempts a pod took until it was bound",
            buckets=(1, 2, 4, 8, 16),
            registry=r,
        )
        self.binders_reachable = Gauge(
            "splitsched_scheduler_binders_reachable",
            "1 when a binder answered the last gRPC health check SERVING, else 0",
            registry=r,
        )
        self.pending = Gauge("scheduler_pending_pods", "Pods in each queue", ["queue"], registry=r)
        self.outcomes = Counter(
            "splitsched_scheduler_binding_outcomes_total",
            "Decisions resolved, by result: BOUND (by a binder's report or the watch), "
            "BIND_FAILED, CONFLICT, POD_GONE",
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
        self.leader = Gauge(
            "splitsched_scheduler_leader",
            "1 while this replica may schedule (holds the Lease, or leader election is off)",
            registry=r,
        )
        self.adopted = Counter(
            "splitsched_scheduler_adopted_decisions_total",
            "Decisions a binder re-reported in flight that this replica did not make "
            "(its predecessor's, after a failover or restart), adopted",
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
        # Tracing off: None, the core's observer does nothing and the loops skip every
        # tracing step.
        self.traces: SchedulingTraces | None = None
        if tracing.enabled():
            self.traces = SchedulingTraces(queued_of=lambda uid: self.state.queue.get(uid))
        algo = algorithm.FrameworkAlgorithm(
            cache=SchedulerCache(clock=clock), profiles=profs, observer=self.traces or NO_OBSERVER
        )
        queue = SchedulingQueue(clock=clock)
        self.state = SchedulerState(
            algo=algo,
            queue=queue,
            clock=clock,
            scheduler_id=args.scheduler_id,
            bind_timeout=args.bind_timeout,
            leading=not args.leader_elect,
            # Unique per process: a restarted scheduler must not reuse a decision id that a
            # binder still remembers (it would answer with the old decision's outcome).
            decision_prefix=f"{args.scheduler_id}.{secrets.token_hex(3)}",
        )
        self.elector: leader.LeaderElector | None = None
        self.lease_client: kubeclient.KubeClient | None = None
        if args.leader_elect:
            self.lease_client = kubeclient.KubeClient(_lease_endpoint(args.kubeconfig))
            self.elector = leader.LeaderElector(
                client=self.lease_client,
                namespace=args.lease_namespace,
                name=args.lease_name,
                identity=args.scheduler_id,
                lease_duration=args.lease_duration,
                renew_deadline=args.renew_deadline,
                retry_period=args.retry_period,
            )
        # Scheduling starts at this monotonic time: set when leading with a synced view and
        # serving (binders can reach us: since `serving_since`).
        self.settle_until: float | None = None
        self.serving_since: float | None = None
        self.exit_code = 0
        self.metrics = Metrics()
        self.metrics.leader.set(1 if self.state.leading else 0)
        self.wake = asyncio.Event()
        self.stopping = asyncio.Event()
        self.last_sequence = 0
        self.security = security.from_args(args, service=SERVICE)
        self.binders_channel = grpcsrv.channel(
            args.binders, round_robin=True, tls=self.security.peer
        )
        self.binder = binder_pb2_grpc.BinderStub(self.binders_channel)
        self.inflight_sends: set[asyncio.Task[None]] = set()
        self.state.listeners.append(self._observe)
        self.binders_ok = False

    def _observe(self, event: DecisionEvent) -> None:
        kind = event.kind
        if kind is EventKind.SCHEDULED and event.adopted:
            self.metrics.adopted.inc()
        if kind.is_outcome:
            self.metrics.outcomes.labels(kind).inc()
        if kind is EventKind.BOUND:
            self.metrics.bound.inc()
            pod = event.pod
            if pod.creation_timestamp:
                self.metrics.created_to_bound.observe(
                    max(0.0, time.time() - pod.creation_timestamp)
                )
            rec = self.state.records.get(pod.uid)
            if rec is not None and rec.first_seen:
                attempts = max(1, rec.scheduling_attempts)
                self.metrics.e2e.labels(_attempts_label(attempts)).observe(
                    max(0.0, self.state.clock.now() - rec.first_seen)
                )
                self.metrics.pod_attempts.observe(attempts)
        if self.traces is not None and event.decision_id:
            self.traces.outcome(
                event.pod.uid, event.decision_id, kind=kind, message=event.message,
                binder_id=event.binder_id,
            )  # fmt: skip

    def poke(self) -> None:
        self.wake.set()

    def ready(self) -> bool:
        """/readyz: leading, a synced view of the cluster and at least one binder SERVING
        (a standby is not ready, so a Service sends binders and tools to the leader; with
        `--standby-ready` it is, for Deployments whose rollouts wait for readiness, and
        only gRPC health tells the leader apart)."""
        leading = self.state.leading or self.args.standby_ready
        return leading and self.state.synced and self.binders_ok

    def _leading(self) -> bool:
        return self.elector is None or self.elector.is_leading()

    def _may_schedule(self) -> bool:
        """Leading, synced, and settled: once binders can reach us (gRPC SERVING), wait
        `--settle-seconds` so they re-report (and we adopt) what the previous leader or
        process left in flight."""
        if not (self.state.synced and self.state.leading and self._leading()):
            return False
        if self.args.settle_seconds <= 0:
            return True
        if self.settle_until is None:
            if self.serving_since is None:
                return False
            self.settle_until = self.serving_since + self.args.settle_seconds
            log.info(
                "leading with a synced view: adopting decisions in flight for %.1fs "
                "before scheduling",
                self.args.settle_seconds,
            )
        return time.monotonic() >= self.settle_until

    def _started_leading(self) -> None:
        self.state.set_leading(True)
        self.settle_until = None
        self.metrics.leader.set(1)
        log.info("leading (%s): scheduling once synced and settled", self._lease_name())
        self.poke()

    def _stopped_leading(self) -> None:
        """Lost the Lease: stop deciding at once, and exit non-zero so Kubernetes restarts
        a clean standby (like kube-scheduler)."""
        self.state.set_leading(False)
        self.metrics.leader.set(0)
        log.error("lost %s: stopping; exit code 1", self._lease_name())
        self.exit_code = 1
        self.stopping.set()

    def _lease_name(self) -> str:
        return f"lease {self.args.lease_namespace}/{self.args.lease_name}"

    # ---- the watch -----------------------------------------------------------------------
    async def watch_loop(self) -> None:
        backoff = 0.2
        while not self.stopping.is_set():
            channel = grpcsrv.channel(self.args.watcher, tls=self.security.peer)
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
            pod = wire.pod_from_proto(event.pod)
            self.state.apply_pod(kind, pod)
            if self.traces is not None:
                if kind == "DELETED" or pod.is_terminal:
                    self.traces.gone(pod.uid)
                elif pod.node_name:
                    self.traces.confirmed(pod.uid, pod.node_name)
                elif event.trace_context:
                    self.traces.observed(pod.uid, event.trace_context)
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
            if not self._may_schedule():
                wait = 1.0
                if self.settle_until is not None and self.state.leading:
                    wait = min(wait, max(0.01, self.settle_until - time.monotonic()))
                await self._sleep_until_woken(wait)
                continue
            decisions: list[Decision] = self.state.take_ready_binds()
            if self.traces is not None:
                for d in decisions:
                    self.traces.rebind(d.pod.uid, d.decision_id)
            reports: list[Unschedulable] = []
            started = time.perf_counter()
            while time.perf_counter() - started < SLICE_SECONDS:
                t0 = time.perf_counter()
                if self.traces is not None:
                    self.traces.begin()
                outcomes = self.state.schedule_one()
                if outcomes is None:
                    break
                elapsed = time.perf_counter() - t0
                if self.traces is not None:
                    self._trace_attempts(self.traces, outcomes)
                for outcome in outcomes:
                    profile = outcome.pod.scheduler_name
                    if isinstance(outcome, Decision) and outcome.is_preemption:
                        self.metrics.attempts.labels("preempting", profile).inc()
                        self._spawn(self._preempt(outcome))
                    elif isinstance(outcome, Decision):
                        decisions.append(outcome)
                        self.metrics.attempts.labels("scheduled", profile).inc()
                        self.metrics.cycle.labels("scheduled", profile).observe(elapsed)
                    else:
                        self.metrics.attempts.labels("unschedulable", profile).inc()
                        self.metrics.cycle.labels("unschedulable", profile).observe(elapsed)
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

    @staticmethod
    def _trace_attempts(
        traces: SchedulingTraces, outcomes: Sequence[Decision | Unschedulable]
    ) -> None:
        for outcome in outcomes:
            if isinstance(outcome, Decision):
                traces.attempt(
                    outcome.pod,
                    result="preempting" if outcome.is_preemption else "scheduled",
                    queued=outcome.queued,
                    decision_id=outcome.decision_id,
                    node=outcome.node,
                )
            else:
                traces.attempt(outcome.pod, result="unschedulable", message=outcome.message)

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
            if self.traces is not None:
                req.trace_context.update(self.traces.bind_request(d.pod.uid, d.decision_id))
            # The binder gives up a little before we would, so its report wins the race.
            wire.timestamp_from_float(
                d.deadline + wall - self.args.bind_timeout * 0.2, req.deadline
            )
        try:
            response = await self.binder.BindBatch(request, timeout=10.0)
        except grpc.aio.AioRpcError as exc:
            refused = _not_received(exc)
            log.warning(
                "BindBatch failed (%s): %s %d decisions", exc.code().name,
                "requeueing" if refused else "holding until an outcome, the watch or the "
                "deadline resolves", len(decisions),
            )  # fmt: skip
            for d in decisions:
                if refused:
                    self.state.refused(d, f"binder unreachable: {exc.code().name}")
                else:
                    self.state.unsure(d, f"BindBatch {exc.code().name}")
                if self.traces is not None:
                    self.traces.bind_sent(
                        d.pod.uid, d.decision_id, accepted=False, reason=exc.code().name
                    )
            self.poke()
            return
        by_id = {r.decision_id: r for r in response.responses}
        for d in decisions:
            r = by_id.get(d.decision_id)
            accepted = r is not None and r.accepted
            if self.traces is not None:
                why = r.reason if r is not None else "no answer"
                self.traces.bind_sent(d.pod.uid, d.decision_id, accepted=accepted, reason=why)
            if not accepted:
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
        uid, did = decision.pod.uid, decision.decision_id
        if self.traces is not None:
            request.trace_context.update(self.traces.bind_request(uid, did, method="Preempt"))
        try:
            ack = await self.binder.Preempt(request, timeout=10.0)
        except grpc.aio.AioRpcError as exc:
            if self.traces is not None:
                self.traces.bind_sent(uid, did, accepted=False, reason=exc.code().name)
            if _not_received(exc):
                self.state.refused(decision, f"binder unreachable: {exc.code().name}")
            else:
                self.state.unsure(decision, f"Preempt {exc.code().name}")
            self.poke()
            return
        if self.traces is not None:
            self.traces.bind_sent(uid, did, accepted=ack.accepted, reason=ack.reason)
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
            active = self.state.synced and self.state.leading
            expired = self.state.expire_overdue() if active else 0
            if expired:
                log.warning("%d decisions passed their bind deadline unbound: requeued", expired)
            if moved or expired:
                self.poke()

    # ---- run -----------------------------------------------------------------------------
    async def run(self) -> int:
        api = SchedulerApi(
            state=self.state,
            on_change=self.poke,
            trace_id_of=self.traces.trace_id if self.traces is not None else None,
        )
        server = await grpcsrv.serve(
            listen=self.args.listen,
            servicers=[(scheduler_pb2_grpc.add_SchedulerServicer_to_server, api)],
            service_names=["splitsched.v1.Scheduler"],
            tls=self.security.server,
            interceptors=self.security.interceptors,
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
            asyncio.create_task(self.binder_probe_loop()),
        ]
        if self.elector is not None:
            log.info("standby until %s is ours (identity %s)", self._lease_name(),
                     self.args.scheduler_id)  # fmt: skip
            tasks.append(asyncio.create_task(self._campaign(self.elector)))
        await self.stopping.wait()
        log.info("shutting down")
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        if self.elector is not None and self.exit_code == 0:
            await self.elector.release()
        if self.lease_client is not None:
            await self.lease_client.close()
        await server.stop(2.0)
        await runner.cleanup()
        await self.binders_channel.close()
        return self.exit_code

    async def _campaign(self, elector: leader.LeaderElector) -> None:
        await elector.run(
            on_started_leading=self._started_leading, on_stopped_leading=self._stopped_leading
        )

    async def binder_probe_loop(self) -> None:
        """Readiness needs a binder: ask the binders' target for its gRPC health every
        couple of seconds (round robin spreads the checks; one SERVING answer is enough).
        Logs the first result (a binder never reached, say a TLS name mismatch, must not
        leave the scheduler unready without a word), then every change."""
        stub = health_pb2_grpc.HealthStub(self.binders_channel)
        request = health_pb2.HealthCheckRequest(service="splitsched.v1.Binder")
        logged: bool | None = None
        while not self.stopping.is_set():
            ok = False
            for _ in range(3):  # a NOT_SERVING binder: ask again, maybe another one
                try:
                    resp = await stub.Check(request, timeout=BINDER_PROBE_SECONDS)
                except grpc.aio.AioRpcError as exc:
                    why = f"{exc.code().name}: {exc.details()}"
                    break
                if resp.status == health_pb2.HealthCheckResponse.SERVING:
                    ok = True
                    break
                why = health_pb2.HealthCheckResponse.ServingStatus.Name(resp.status)
            if ok != logged:
                logged = ok
                if ok:
                    log.info("a binder at %s is SERVING", self.args.binders)
                else:
                    log.warning("no binder SERVING at %s (%s)", self.args.binders, why)
            self.binders_ok = ok
            self.metrics.binders_reachable.set(1 if ok else 0)
            await asyncio.sleep(BINDER_PROBE_SECONDS)

    async def _serving_follows_sync(self, server: grpcsrv.GrpcServer) -> None:
        serving = False
        while True:
            # A standby is NOT_SERVING: binders' health-checked channels skip it.
            want = self.state.synced and self.state.leading
            if want != serving:
                serving = want
                await server.set_serving(serving)
                self.serving_since = time.monotonic() if serving else None
                self.poke()
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
    p.add_argument(
        "--settle-seconds",
        type=float,
        default=None,
        help="after the view is synced and this replica leads, wait this long before the "
        "first decision so binders' in-flight decisions are adopted first (default: 3 with "
        "--leader-elect, else 0)",
    )
    ha = p.add_argument_group("leader election (high availability)")
    ha.add_argument(
        "--leader-elect",
        action="store_true",
        default=False,
        help="run as one of several replicas; only the holder of the Lease schedules",
    )
    ha.add_argument(
        "--kubeconfig",
        help="kubeconfig used ONLY for the Lease (default: in-cluster config)",
    )
    ha.add_argument("--lease-name", default="splitsched-scheduler")
    ha.add_argument(
        "--lease-namespace",
        default=os.environ.get("POD_NAMESPACE") or "kube-system",
        help="default: $POD_NAMESPACE, else kube-system",
    )
    ha.add_argument("--lease-duration", type=float, default=10.0, help="seconds")
    ha.add_argument(
        "--renew-deadline",
        type=float,
        default=7.0,
        help="seconds the leader may fail to renew before it stops (< --lease-duration)",
    )
    ha.add_argument("--retry-period", type=float, default=2.0, help="seconds between tries")
    ha.add_argument(
        "--standby-ready",
        action="store_true",
        default=False,
        help="report /readyz ok on a synced standby too (gRPC health stays NOT_SERVING): "
        "a rolling update waits for new pods to be ready, and a standby never leads while "
        "the old leader runs; binders then find the leader by gRPC health checking",
    )
    security.add_flags(p, restricted=RESTRICTED_RPCS)
    return p


def _lease_endpoint(kubeconfig: str | None) -> kubeclient.KubeEndpoint:
    try:
        return kubeclient.load_endpoint(kubeconfig)
    except Exception as exc:  # the kubernetes config loader raises several kinds
        where = kubeconfig or "the in-cluster config"
        raise leader.LeaderElectionError(f"cannot load {where}: {exc}") from exc


def main(argv: Sequence[str] | None = None) -> int:
    args = config.parse_args(build_parser(), argv, env_prefix="SPLITSCHED_SCHEDULER")
    logs.setup("scheduler", json_lines=bool(args.log_json), level=args.log_level)
    if args.settle_seconds is None:
        args.settle_seconds = 3.0 if args.leader_elect else 0.0
    return eventloop.run_service(
        "scheduler",
        _run(args),
        errors=(profiles.ProfileError, OSError, leader.LeaderElectionError, config.ConfigError),
    )


async def _run(args: argparse.Namespace) -> int:
    # Built inside the running loop: gRPC aio channels and asyncio events bind to it.
    return await SchedulerService(args).run()


if __name__ == "__main__":
    sys.exit(main())
