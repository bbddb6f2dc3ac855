"""One skeleton for every service process: settings, logging, the gRPC and HTTP servers,
signals and the order of shutdown.

A service's ``main`` calls `main` with how to load its settings and how to serve them;
serving is `serve` over an object that follows the `Service` protocol. The skeleton does,
in this order:

1. ``open()``: the service builds what it needs inside the event loop (clients, pools,
   background state) and says what to expose (`Exposed`: servicers, readiness, metrics);
2. starts the gRPC server (health NOT_SERVING until the service says otherwise) and the
   HTTP server (/healthz, /readyz, /metrics), and turns SIGTERM and SIGINT into a stop;
3. ``start(running)``: the service starts its loops (it may call ``running.stop()``
   itself, say when it loses leadership);
4. prints ``describe(running)``, the one "listening" line tools wait for;
5. on stop: gRPC health NOT_SERVING, ``drain()`` (the service finishes or hands back its
   work), the gRPC server stopped with the service's grace, the HTTP server stopped;
6. ``close()``: the service closes its clients and returns the exit code.

`main` maps errors to exit codes: 2 for a configuration error (`ConfigError` or `TlsError`,
printed as ``error: ...``), the code of a `StartupFailed` (raised after the service
logged why), 130 for Ctrl-C.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import sys
from collections.abc import Callable, Coroutine, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from prometheus_client import CollectorRegistry

from splitsched.runtime import config, eventloop, grpcsrv, httpsrv, logs, tlsreload
from splitsched.runtime import settings as shared

#: The signals that stop a service gracefully.
STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)
#: Settings that cannot be used (each message names the flag, or the file and field).
CONFIG_ERRORS: tuple[type[Exception], ...] = (config.ConfigError, grpcsrv.TlsError)


def _always() -> bool:
    return True


@dataclass(frozen=True)
class Exposed:
    """What a service serves: its gRPC servicers (``(add_*_to_server, servicer)``) and
    their full names for health and reflection, its metrics, its readiness and liveness,
    ``max_connection_age_s`` (see `grpcsrv.serve`) and the seconds running RPCs get when
    the gRPC server stops."""

    servicers: Sequence[tuple[grpcsrv.AddServicer, Any]]
    service_names: Sequence[str]
    metrics: CollectorRegistry
    ready: Callable[[], bool]
    healthy: Callable[[], bool] = _always
    max_connection_age_s: float | None = None
    grace: float = 1.0


@dataclass(frozen=True)
class Running:
    """The started servers, as the service sees them after ``open``."""

    grpc: grpcsrv.GrpcServer
    #: ``host:port`` as bound (the real port when the setting was 0).
    grpc_address: str
    http_address: str
    #: Ask for a graceful stop (what SIGTERM does).
    stop: Callable[[], None]
    #: Whether a stop was asked for (loops check it so they do not undo the shutdown,
    #: say a probe setting health SERVING again).
    stopping: Callable[[], bool]


class Service(Protocol):
    """A service process as the skeleton drives it (see the module docstring for the
    order). Its constructor binds nothing to an event loop; `open` does."""

    async def open(self) -> Exposed: ...

    async def start(self, running: Running) -> None: ...

    def describe(self, running: Running) -> str: ...

    async def drain(self) -> None: ...

    async def close(self) -> int: ...


class StartupFailed(Exception):
    """Raised by ``open`` after the service logged why it cannot start: exit with `code`."""

    def __init__(self, code: int) -> None:
        super().__init__(f"exit {code}")
        self.code = code


class HasCommon(Protocol):
    """A service's settings: whatever else it holds, the shared part."""

    @property
    def common(self) -> shared.Common: ...


S = TypeVar("S", bound=HasCommon)


async def serve(service: Service, common: shared.Common) -> int:
    """Run `service` until a stop signal (or ``running.stop()``); returns its exit code."""
    try:
        exposed = await service.open()
    except StartupFailed as failed:
        return failed.code
    try:
        await _serve_opened(service, exposed, common)
    except BaseException:
        with contextlib.suppress(Exception):
            await service.close()
        raise
    return await service.close()


async def _serve_opened(service: Service, exposed: Exposed, common: shared.Common) -> None:
    serving, tls = common.serving, common.security
    grpc_server = await grpcsrv.serve(
        listen=serving.listen,
        servicers=exposed.servicers,
        service_names=exposed.service_names,
        max_connection_age_s=exposed.max_connection_age_s,
        tls=tls.server,
        interceptors=tls.interceptors,
    )
    if tls.server is not None or tls.peer is not None:
        exposed.metrics.register(tlsreload.ExpiryCollector())
    try:
        http_runner, http_port = await httpsrv.serve_http(
            host=serving.http_host,
            port=serving.http_port,
            ready=exposed.ready,
            metrics=exposed.metrics,
            healthy=exposed.healthy,
        )
    except BaseException:
        await grpc_server.stop(0)
        raise
    stop = asyncio.Event()
    running = Running(
        grpc=grpc_server,
        grpc_address=grpcsrv.host_port(serving.listen, grpc_server.port),
        http_address=f"{serving.http_host}:{http_port}",
        stop=stop.set,
        stopping=stop.is_set,
    )
    try:
        with _on_signals(stop.set):
            await service.start(running)
            print(service.describe(running), flush=True)
            await stop.wait()
            await grpc_server.set_serving(False)
            await service.drain()
    finally:
        await grpc_server.stop(exposed.grace)
        await http_runner.cleanup()


@contextlib.contextmanager
def _on_signals(handler: Callable[[], None]) -> Iterator[None]:
    """`handler` on SIGTERM and SIGINT while inside; the previous handling afterwards."""
    loop = asyncio.get_running_loop()
    for sig in STOP_SIGNALS:
        loop.add_signal_handler(sig, handler)
    try:
        yield
    finally:
        for sig in STOP_SIGNALS:
            loop.remove_signal_handler(sig)


def main(
    name: str,
    *,
    load: Callable[[], S],
    serve: Callable[[S], Coroutine[Any, Any, int]],
    errors: tuple[type[Exception], ...] = (),
) -> int:
    """A service's whole ``main``: settings (exit 2 with ``error: ...`` when they cannot
    be used), logging, then `serve` on the event loop with tracing set up around it
    (`eventloop.run_service`: exit 2 on a ConfigError or one of `errors`, 130 on Ctrl-C)."""
    try:
        settings = load()
    except CONFIG_ERRORS as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    logs.setup(
        name, json_lines=settings.common.logging.json_lines, level=settings.common.logging.level
    )
    return eventloop.run_service(name, serve(settings), errors=(*CONFIG_ERRORS, *errors))
