"""The binder client: hands decisions, preemptions and FailedScheduling reports to binders.

One channel to the binders' target with client-side round robin (a headless Service's DNS
name or a static list), so every binder replica gets work. Sends run as background tasks
(the scheduling loop never waits on a binder); what a failed call means for a decision
is decided here: a call that certainly never reached a binder (`not_received`) gives the
decision back to the state (`refused`: requeued), while any other failure leaves it held
(`unsure`) until an outcome report, the watch or its deadline resolves it, because the
binder may have taken it. Also probes the binders' gRPC health for readiness.
Created by `services.scheduler.main`; driven by the scheduling loop.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Coroutine
from typing import Any

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from services.scheduler.metrics import SchedulerMetrics
from services.scheduler.state import Decision, SchedulerState, Unschedulable
from services.scheduler.traces import SchedulingTraces
from splitsched import wire, wire_devices, wire_storage
from splitsched.runtime import grpcsrv, tlsreload
from splitsched.v1 import binder_pb2, binder_pb2_grpc

log = logging.getLogger("splitsched.scheduler")

MAX_BATCH = 128  # decisions per BindBatch call
BINDER_PROBE_SECONDS = 2.0
CALL_TIMEOUT = 10.0  # BindBatch and Preempt
REPORT_TIMEOUT = 5.0  # ReportUnschedulable
#: The share of the bind timeout the binder's deadline is set before ours: the binder
#: gives up a little before we would, so its report wins the race.
BINDER_DEADLINE_MARGIN = 0.2
#: How a binder's refusal begins when its intake is full (`BindingPool.submit`): the
#: binders are congested, nothing is wrong with the pod.
QUEUE_FULL = "binder queue full"


def not_received(exc: grpc.aio.AioRpcError) -> bool:
    """Whether a failed call to a binder certainly never reached it: no connection could be
    made, or it does not serve the method. Anything else (a deadline, a connection lost
    mid-call, a cancellation) may come after the binder took the decision."""
    if exc.code() is grpc.StatusCode.UNIMPLEMENTED:
        return True
    details = (exc.details() or "").lower()
    return exc.code() is grpc.StatusCode.UNAVAILABLE and (
        "failed to connect to all addresses" in details or "connection refused" in details
    )


class BinderDispatch:
    """Sends to the binders at `target` and resolves failed sends in `state`."""

    def __init__(
        self,
        *,
        state: SchedulerState,
        metrics: SchedulerMetrics,
        target: str,
        tls: grpcsrv.ClientTls | None,
        bind_attempts: int,
        bind_timeout: float,
        poke: Callable[[], None],
        traces: SchedulingTraces | None = None,
    ) -> None:
        self.state = state
        self.metrics = metrics
        self.target = target
        self.bind_attempts = bind_attempts
        self.bind_timeout = bind_timeout
        self.poke = poke
        self.traces = traces
        #: Made again when the TLS files change (`tlsreload`).
        self.channels: tlsreload.ReloadingChannel[binder_pb2_grpc.BinderAsyncStub]
        self.channels = tlsreload.ReloadingChannel(
            target,
            open_channel=lambda t: grpcsrv.channel(t, round_robin=True, tls=tls),
            make_stub=lambda channel: binder_pb2_grpc.BinderStub(channel),
            tls=tls,
        )
        #: Sends in progress (kept referenced until done).
        self.inflight: set[asyncio.Task[None]] = set()

    @property
    def stub(self) -> binder_pb2_grpc.BinderAsyncStub:
        return self.channels.stub

    async def close(self) -> None:
        await self.channels.close()

    # ---- background sends (what the scheduling loop calls) ------------------------------
    def spawn(self, coro: Coroutine[Any, Any, None]) -> None:
        task = asyncio.create_task(coro)
        self.inflight.add(task)
        task.add_done_callback(self.inflight.discard)

    def send(self, decisions: list[Decision]) -> None:
        self.spawn(self.send_batch(decisions))

    def send_preemption(self, decision: Decision) -> None:
        self.spawn(self.preempt(decision))

    def send_report(self, report: Unschedulable) -> None:
        self.spawn(self.report_unschedulable(report))

    # ---- bindings ------------------------------------------------------------------------
    async def send_batch(self, decisions: list[Decision]) -> None:
        """One BindBatch call; decisions a binder did not accept go back to the state."""
        request = self._batch_request(decisions)
        try:
            response = await self.stub.BindBatch(request, timeout=CALL_TIMEOUT)
        except grpc.aio.AioRpcError as exc:
            self._batch_failed(decisions, exc)
        else:
            self._batch_answered(decisions, response)
        self.poke()

    def _batch_request(self, decisions: list[Decision]) -> binder_pb2.BindBatchRequest:
        wall = time.time() - self.state.clock.now()
        request = binder_pb2.BindBatchRequest()
        for d in decisions:
            req = request.requests.add(
                decision_id=d.decision_id,
                node=d.node,
                node_version=d.node_version,
                max_attempts=self.bind_attempts,
                scheduler_id=self.state.scheduler_id,
                profile=d.pod.scheduler_name,
            )
            req.pod.CopyFrom(wire.pod_ref(d.pod))
            if d.volume_bindings:
                wire_storage.bindings_to_proto(d.volume_bindings, req.volume_bindings)
            for write in d.claim_writes:
                wire_devices.claim_write_to_proto(write, req.claim_writes.add())
            if self.traces is not None:
                req.trace_context.update(self.traces.bind_request(d.pod.uid, d.decision_id))
            deadline = d.deadline + wall - self.bind_timeout * BINDER_DEADLINE_MARGIN
            wire.timestamp_from_float(deadline, req.deadline)
        return request

    def _batch_failed(self, decisions: list[Decision], exc: grpc.aio.AioRpcError) -> None:
        refused = not_received(exc)
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

    def _batch_answered(
        self, decisions: list[Decision], response: binder_pb2.BindBatchResponse
    ) -> None:
        by_id = {r.decision_id: r for r in response.responses}
        for d in decisions:
            r = by_id.get(d.decision_id)
            accepted = r is not None and r.accepted
            if self.traces is not None:
                why = r.reason if r is not None else "no answer"
                self.traces.bind_sent(d.pod.uid, d.decision_id, accepted=accepted, reason=why)
            if not accepted:
                log.debug("decision %s refused: %s", d.decision_id, r.reason if r else "no answer")
            if r is None:
                self.state.refused(d, "no answer for this decision")
            elif not accepted:
                self.state.refused(d, r.reason, congested=r.reason.startswith(QUEUE_FULL))

    # ---- preemptions and reports --------------------------------------------------------
    async def preempt(self, decision: Decision) -> None:
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
            ack = await self.stub.Preempt(request, timeout=CALL_TIMEOUT)
        except grpc.aio.AioRpcError as exc:
            if self.traces is not None:
                self.traces.bind_sent(uid, did, accepted=False, reason=exc.code().name)
            if not_received(exc):
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

    async def report_unschedulable(self, report: Unschedulable) -> None:
        """Ask a binder to write the FailedScheduling Event, and deallocate the claims
        DynamicResources' PostFilter gave back (best effort: the next attempt reports
        again)."""
        request = binder_pb2.UnschedulableReport(
            message=report.message, reason=report.reason, profile=report.pod.scheduler_name
        )
        request.pod.CopyFrom(wire.pod_ref(report.pod))
        for ref in report.deallocate:
            request.deallocate_claims.add(namespace=ref.namespace, name=ref.name, uid=ref.uid)
        try:
            await self.stub.ReportUnschedulable(request, timeout=REPORT_TIMEOUT)
        except grpc.aio.AioRpcError as exc:
            log.debug("could not report %s unschedulable: %s", report.pod.key, exc.code().name)

    # ---- readiness -----------------------------------------------------------------------
    async def probe_loop(self, stopping: asyncio.Event, on_result: Callable[[bool], None]) -> None:
        """Readiness needs a binder: ask the binders' target for its gRPC health every
        couple of seconds (round robin spreads the checks; one SERVING answer is enough)
        and pass the answer to `on_result`. Logs the first result (a binder never reached,
        say a TLS name mismatch, must not leave the scheduler unready without a word),
        then every change."""
        logged: bool | None = None
        while not stopping.is_set():
            ok, why = await self._probe(health_pb2_grpc.HealthStub(self.channels.current()))
            if ok != logged:
                logged = ok
                if ok:
                    log.info("a binder at %s is SERVING", self.target)
                else:
                    log.warning("no binder SERVING at %s (%s)", self.target, why)
            on_result(ok)
            self.metrics.binders_reachable.set(1 if ok else 0)
            await asyncio.sleep(BINDER_PROBE_SECONDS)

    @staticmethod
    async def _probe(stub: health_pb2_grpc.HealthStub) -> tuple[bool, str]:
        """One round: whether a binder is SERVING, else why not."""
        request = health_pb2.HealthCheckRequest(service="splitsched.v1.Binder")
        why = ""
        for _ in range(3):  # a NOT_SERVING binder: ask again, maybe another one
            try:
                resp = await stub.Check(request, timeout=BINDER_PROBE_SECONDS)
            except grpc.aio.AioRpcError as exc:
                return False, f"{exc.code().name}: {exc.details()}"
            if resp.status == health_pb2.HealthCheckResponse.SERVING:
                return True, ""
            why = health_pb2.HealthCheckResponse.ServingStatus.Name(resp.status)
        return False, why
