"""Delivers binding outcomes to ``Scheduler.ReportBindingOutcome`` in batches.

Used by ``services.binder.worker`` (``put`` after every decision) and
``services.binder.main`` (``flush`` at shutdown). Outcomes stay in a bounded buffer until
the scheduler acknowledges them: while it is unreachable they accumulate (workers block
when the buffer is full -- nothing is ever dropped) and the batch is retried with
exponential backoff and full jitter; when it is back, everything unacknowledged is sent
again in order. The scheduler treats reports idempotently, so a batch whose
acknowledgement was lost is simply sent twice.

Every `in_progress_interval` seconds it also sends what `in_progress_source` (set by
``services.binder.worker.BindingPool``) says is still in flight, as IN_PROGRESS reports:
best-effort, never buffered (the next round sends a fresh list), serialized with the
batches and never for a decision whose final outcome is already queued, so an IN_PROGRESS
never arrives after its decision's final outcome. A scheduler that took over or restarted
adopts what it did not know. With several scheduler replicas (``ipv4:a,b`` or a DNS name)
the channel round-robins over those whose gRPC health is SERVING: only the leader. With
TLS the channel is made again when the certificate files change (`tlsreload`).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import logging
import random
from collections import deque
from collections.abc import Callable, Sequence

import grpc

from services.binder.metrics import BinderMetrics
from splitsched.runtime import grpcsrv, tlsreload
from splitsched.runtime.retry import backoff_delay
from splitsched.v1 import scheduler_pb2, scheduler_pb2_grpc

log = logging.getLogger(__name__)

#: IN_PROGRESS reports per RPC (each is ~100 bytes; far below the message size limit).
IN_PROGRESS_BATCH = 2000

#: Round robin over the scheduler replicas whose gRPC health is SERVING (a standby under
#: leader election is NOT_SERVING), so reports reach the leader; a server without the
#: health service counts as healthy.
SERVICE_CONFIG = json.dumps(
    {
        "loadBalancingConfig": [{"round_robin": {}}],
        "healthCheckConfig": {"serviceName": "splitsched.v1.Scheduler"},
    }
)
#: gRPC channel options: reconnect quickly once the scheduler is back (gRPC's defaults
#: back off up to two minutes) and allow large batches.
CHANNEL_OPTIONS: list[tuple[str, int | str]] = [
    ("grpc.service_config", SERVICE_CONFIG),
    ("grpc.initial_reconnect_backoff_ms", 100),
    ("grpc.min_reconnect_backoff_ms", 100),
    ("grpc.max_reconnect_backoff_ms", 2000),
    ("grpc.max_send_message_length", 8 * 1024 * 1024),
    ("grpc.max_receive_message_length", 8 * 1024 * 1024),
    ("grpc.keepalive_time_ms", 30_000),
    ("grpc.keepalive_timeout_ms", 10_000),
]


def default_channel(target: str) -> grpc.aio.Channel:
    """An insecure channel to the scheduler with fast reconnects."""
    return grpc.aio.insecure_channel(target, options=CHANNEL_OPTIONS)


class OutcomeReporter:
    """A bounded, ordered buffer of outcomes and the task that delivers it."""

    def __init__(
        self,
        *,
        target: str,
        binder_id: str,
        metrics: BinderMetrics,
        max_buffer: int = 100_000,
        batch_size: int = 200,
        flush_interval: float = 0.02,
        rpc_timeout: float = 5.0,
        backoff_base: float = 0.1,
        backoff_cap: float = 5.0,
        channel_factory: Callable[[str], grpc.aio.Channel] = default_channel,
        tls: grpcsrv.ClientTls | None = None,
        rng: random.Random | None = None,
        in_progress_interval: float = 2.0,
    ) -> None:
        self._target = target
        self._binder_id = binder_id
        self._metrics = metrics
        self._max_buffer = max(1, max_buffer)
        self._batch_size = max(1, batch_size)
        self._flush_interval = flush_interval
        self._rpc_timeout = rpc_timeout
        self._backoff_base = backoff_base
        self._backoff_cap = backoff_cap
        self._channel_factory = channel_factory
        self._tls = tls
        self._rng = rng or random.Random()
        self._buffer: deque[scheduler_pb2.BindingOutcome] = deque()
        self._cond = asyncio.Condition()
        #: Made again when the TLS files `tls` names change (`tlsreload`).
        self._channels: tlsreload.ReloadingChannel[scheduler_pb2_grpc.SchedulerAsyncStub] | None
        self._channels = None
        self._task: asyncio.Task[None] | None = None
        self._heartbeat: asyncio.Task[None] | None = None
        self._in_progress_interval = in_progress_interval
        #: What is still in flight (IN_PROGRESS outcomes); None = nothing to re-report.
        self.in_progress_source: Callable[[], Sequence[scheduler_pb2.BindingOutcome]] | None = None
        #: Held while a report RPC is in flight: batches and IN_PROGRESS rounds never
        #: overlap, so their order is the order the scheduler sees.
        self._sending = asyncio.Lock()
        #: IN_PROGRESS reports the scheduler acknowledged (for tests and logs).
        self.in_progress_delivered = 0
        self._closing = False
        self._failures = 0
        #: Count of outcomes the scheduler acknowledged (for tests and logs).
        self.delivered = 0

    @property
    def backlog(self) -> int:
        return len(self._buffer)

    @property
    def connected(self) -> bool:
        """False after a failed delivery until the next one succeeds."""
        return self._failures == 0

    async def start(self) -> None:
        if self._task is None:
            self._channels = tlsreload.ReloadingChannel(
                self._target,
                open_channel=self._channel_factory,
                make_stub=lambda channel: scheduler_pb2_grpc.SchedulerStub(channel),
                tls=self._tls,
            )
            self._task = asyncio.create_task(self._run(), name="outcome-reporter")
            if self._in_progress_interval > 0:
                self._heartbeat = asyncio.create_task(
                    self._report_in_progress(), name="in-progress-reporter"
                )

    async def put(self, outcome: scheduler_pb2.BindingOutcome) -> None:
        """Queue one outcome; waits while the buffer is full (back-pressure on workers)."""
        async with self._cond:
            await self._cond.wait_for(lambda: len(self._buffer) < self._max_buffer)
            self._buffer.append(outcome)
            self._metrics.report_backlog.set(len(self._buffer))
            self._cond.notify_all()

    async def flush(self, within: float) -> bool:
        """Wait until every queued outcome is acknowledged; False on timeout."""
        try:
            async with asyncio.timeout(within), self._cond:
                await self._cond.wait_for(lambda: not self._buffer)
        except TimeoutError:
            return False
        return True

    async def close(self) -> None:
        """Stop delivering (call ``flush`` first to deliver what is queued)."""
        self._closing = True
        for task in (self._task, self._heartbeat):
            if task is not None:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
        self._task = self._heartbeat = None
        if self._channels is not None:
            await self._channels.close()
            self._channels = None

    def _backoff(self) -> float:
        return backoff_delay(
            self._failures, base=self._backoff_base, cap=self._backoff_cap, rng=self._rng
        )

    async def _run(self) -> None:
        while not self._closing:
            async with self._cond:
                await self._cond.wait_for(lambda: bool(self._buffer))
            if len(self._buffer) < self._batch_size and self._flush_interval > 0:
                # Let a batch accumulate (a no-op delay for a full batch).
                await asyncio.sleep(self._flush_interval)
            batch = list(itertools.islice(self._buffer, self._batch_size))
            request = scheduler_pb2.ReportBindingOutcomeRequest(
                outcomes=batch, binder_id=self._binder_id
            )
            assert self._channels is not None
            try:
                async with self._sending:
                    stub = self._channels.stub
                    await stub.ReportBindingOutcome(request, timeout=self._rpc_timeout)
            except Exception as exc:  # AioRpcError, or anything else: never lose the batch
                self._failures += 1
                delay = self._backoff()
                if self._failures == 1 or self._failures % 20 == 0:
                    why = (
                        f"{exc.code().name}: {exc.details()}"
                        if isinstance(exc, grpc.aio.AioRpcError)
                        else repr(exc)
                    )
                    log.warning(
                        "cannot report %d outcomes to the scheduler at %s (%s); "
                        "%d buffered, retrying in %.2fs",
                        len(batch), self._target, why, len(self._buffer), delay,
                    )  # fmt: skip
                await asyncio.sleep(delay)
                continue
            if self._failures:
                log.info(
                    "scheduler at %s reachable again after %d failed deliveries; "
                    "re-sending %d unacknowledged outcomes",
                    self._target, self._failures, len(self._buffer),
                )  # fmt: skip
                self._failures = 0
                self._metrics.reconnects.labels("scheduler").inc()
            async with self._cond:
                # Only this task removes items, and new ones are appended at the right,
                # so the batch is exactly the leftmost len(batch) items.
                for _ in batch:
                    self._buffer.popleft()
                self.delivered += len(batch)
                self._metrics.report_backlog.set(len(self._buffer))
                self._cond.notify_all()

    async def _report_in_progress(self) -> None:
        """Every interval, one best-effort round of IN_PROGRESS reports (see the module
        docstring); failures are only logged at debug level: the next round retries."""
        while not self._closing:
            await asyncio.sleep(self._in_progress_interval)
            source = self.in_progress_source
            if source is None or self._channels is None:
                continue
            channels = self._channels
            async with self._sending:
                # Built under the lock: a decision finishing from now on queues its final
                # outcome behind this round; one already queued is left out.
                queued = {o.decision_id for o in self._buffer}
                outcomes = [o for o in source() if o.decision_id not in queued]
                for start in range(0, len(outcomes), IN_PROGRESS_BATCH):
                    chunk = outcomes[start : start + IN_PROGRESS_BATCH]
                    request = scheduler_pb2.ReportBindingOutcomeRequest(
                        outcomes=chunk, binder_id=self._binder_id
                    )
                    try:
                        await channels.stub.ReportBindingOutcome(
                            request, timeout=min(self._rpc_timeout, self._in_progress_interval)
                        )
                    except Exception as exc:  # best effort: the next round sends afresh
                        why = exc.code().name if isinstance(exc, grpc.aio.AioRpcError) else exc
                        log.debug("IN_PROGRESS reports not delivered: %s", why)
                        break
                    self.in_progress_delivered += len(chunk)
