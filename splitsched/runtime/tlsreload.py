"""A long-lived client channel that follows its TLS files.

A gRPC channel keeps the credentials it was created with, so when the CA bundle, client
certificate or key change (a rotated Secret), new connections would still trust the old
CA and present the old certificate. `ReloadingChannel` checks the files (stats only, see
`tlsfiles`) each time its stub is taken, and when they changed opens a new channel and
stub for the calls from then on; the old channel closes once its calls in flight end
(after `grace` at most), so no call is cut by the swap.

Used by the scheduler's channel to the binders (`services.scheduler.dispatch`) and the
binders' channel to the scheduler (`services.binder.reporter`). Channels made per stream
(the scheduler's watch of the watcher) and the CLI's one-shot channels read the current
files when they are made and need nothing more.

`ExpiryCollector` exports the notAfter of the certificates in use, registered by
`splitsched.runtime.service` when a service runs with TLS.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Iterator
from typing import Generic, TypeVar

import grpc
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from splitsched.runtime import grpcsrv, tlsfiles

log = logging.getLogger(__name__)

Stub = TypeVar("Stub")
#: Seconds an old channel's calls in flight get to finish after a swap: longer than the
#: deadline of any call on the services' channels (BindBatch and Preempt 10 s, outcome
#: reports 5 s), so a swap never cuts one.
DEFAULT_GRACE = 15.0


class ReloadingChannel(Generic[Stub]):
    """`open(target)` made again when `tls`'s files change; `stub` is `make_stub` over the
    current channel (take it for each call rather than keeping it)."""

    def __init__(
        self,
        target: str,
        *,
        open_channel: Callable[[str], grpc.aio.Channel],
        make_stub: Callable[[grpc.aio.Channel], Stub],
        tls: grpcsrv.ClientTls | None,
        grace: float = DEFAULT_GRACE,
    ) -> None:
        self.target = target
        self._open = open_channel
        self._make_stub = make_stub
        self._files = tls.files() if tls is not None else None
        self._material = self._files.check() if self._files is not None else None
        self._grace = grace
        self.channel = open_channel(target)
        self._stub = make_stub(self.channel)
        #: The tasks closing old channels (kept referenced until done).
        self._retiring: set[asyncio.Task[None]] = set()
        #: How many times the channel was made again (for tests and logs).
        self.swaps = 0

    @property
    def stub(self) -> Stub:
        self.current()
        return self._stub

    def current(self) -> grpc.aio.Channel:
        """The channel to use now: a new one when the files changed since the last."""
        if self._files is not None:
            material = self._files.check()
            if material is not self._material:
                self._material = material
                self._swap()
        return self.channel

    def _swap(self) -> None:
        old = self.channel
        self.channel = self._open(self.target)
        self._stub = self._make_stub(self.channel)
        self.swaps += 1
        task = asyncio.get_running_loop().create_task(self._retire(old))
        self._retiring.add(task)
        task.add_done_callback(self._retiring.discard)
        log.info("TLS files changed: new channel to %s (the old one closes when its "
                 "calls end, within %.0fs)", self.target, self._grace)  # fmt: skip

    async def _retire(self, old: grpc.aio.Channel) -> None:
        with contextlib.suppress(Exception):
            await old.close(self._grace)

    async def close(self) -> None:
        """Close the channel, and wait for the old ones to finish their calls (bounded by
        the calls' deadlines and the grace). An old channel's graceful close cannot be cut
        short: once gRPC's close began, a second close returns at once."""
        await self.channel.close()
        if self._retiring:
            await asyncio.wait(set(self._retiring))


class ExpiryCollector(Collector):
    """`splitsched_tls_certificate_expiry_seconds{role}`: the notAfter of the certificate
    this process serves with (role="server") and presents to its peers (role="client");
    of several, the soonest. Absent without TLS (or a client without a certificate)."""

    def collect(self) -> Iterator[GaugeMetricFamily]:
        gauge = GaugeMetricFamily(
            "splitsched_tls_certificate_expiry_seconds",
            "notAfter (seconds since the epoch) of the TLS certificate in use",
            labels=["role"],
        )
        soonest: dict[str, float] = {}
        for w in tlsfiles.watched():
            end = w.current.not_after
            if end is not None:
                soonest[w.paths.role] = min(end, soonest.get(w.paths.role, end))
        for role, end in sorted(soonest.items()):
            gauge.add_metric([role], end)
        yield gauge
