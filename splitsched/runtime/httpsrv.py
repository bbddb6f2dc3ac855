"""The HTTP side of every service: /healthz (the process lives), /readyz (it can do its
job) and /metrics, served by aiohttp. /metrics answers in the format the scraper's Accept
header asks for: OpenMetrics (which alone carries exemplars, the trace ids on latency
histograms) or the Prometheus text format (the default)."""

from __future__ import annotations

from collections.abc import Callable

from aiohttp import web
from prometheus_client import CollectorRegistry
from prometheus_client.exposition import choose_encoder


async def serve_http(
    *,
    host: str,
    port: int,
    ready: Callable[[], bool],
    metrics: CollectorRegistry,
    healthy: Callable[[], bool] = lambda: True,
) -> tuple[web.AppRunner, int]:
    """Start the endpoints; returns the runner (call `cleanup()` to stop) and the bound
    port (useful with port 0)."""

    async def healthz(_: web.Request) -> web.Response:
        ok = healthy()
        return web.Response(status=200 if ok else 503, text="ok\n" if ok else "unhealthy\n")

    async def readyz(_: web.Request) -> web.Response:
        ok = ready()
        return web.Response(status=200 if ok else 503, text="ok\n" if ok else "not ready\n")

    async def metrics_handler(request: web.Request) -> web.Response:
        encode, content_type = choose_encoder(request.headers.get("Accept", ""))
        return web.Response(body=encode(metrics), headers={"Content-Type": content_type})

    app = web.Application()
    app.router.add_get("/healthz", healthz)
    app.router.add_get("/livez", healthz)
    app.router.add_get("/readyz", readyz)
    app.router.add_get("/metrics", metrics_handler)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, host, port)
    await site.start()
    bound = port
    sockets = getattr(site._server, "sockets", None)
    if sockets:
        bound = int(sockets[0].getsockname()[1])
    return runner, bound


def split_listen(listen: str) -> tuple[str, int]:
    """ "host:port" -> (host, port); an empty host means every address."""
    host, _, port = listen.rpartition(":")
    return host or "0.0.0.0", int(port)
