"""The watcher process: `splitsched-watcher` / `python -m services.watcher`.

Wires the list/watch loops (`services.watcher.listwatch`) into the hub
(`services.watcher.ring`) and serves it over gRPC (`services.watcher.server`), with the
health service, /healthz, /readyz and /metrics. Ready (gRPC SERVING, /readyz 200) once the
initial LIST of nodes and pods is in the view.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import functools
import logging
import signal
import sys
from collections.abc import Sequence

import aiohttp
from prometheus_client import CollectorRegistry, Gauge

from services.watcher import listwatch, ring, server
from splitsched.runtime import config, eventloop, grpcsrv, httpsrv, logs, security
from splitsched.v1 import watcher_pb2

log = logging.getLogger("services.watcher")
ENV_PREFIX = "SPLITSCHED_WATCHER"
SERVICE = watcher_pb2.DESCRIPTOR.services_by_name["Watcher"]


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="splitsched-watcher",
        description="List+watch the cluster and stream it to schedulers over gRPC.",
    )
    p.add_argument("--kubeconfig", default=None, help="kubeconfig (default: in-cluster)")
    p.add_argument("--listen", default="0.0.0.0:50051", help="gRPC host:port")
    p.add_argument("--http-listen", default="0.0.0.0:9091", help="health/metrics host:port")
    p.add_argument("--ring-size", type=int, default=100_000, help="deltas kept for resume")
    p.add_argument("--page-size", type=int, default=500, help="LIST page size (limit)")
    p.add_argument(
        "--watch-timeout", type=int, default=300, help="server-side WATCH timeoutSeconds"
    )
    p.add_argument(
        "--scheduler-names",
        nargs="*",
        default=[],
        help="stream pending pods only for these schedulerNames (assigned pods always)",
    )
    p.add_argument("--no-pdbs", action="store_true", help="do not list/watch PodDisruptionBudgets")
    # Its one RPC streams the cluster's pods and nodes: only the scheduler needs it.
    security.add_flags(p, restricted=[m.name for m in SERVICE.methods], peers=False)
    return p


async def run(args: argparse.Namespace) -> int:
    sec = security.from_args(args, service=SERVICE)
    registry = CollectorRegistry()
    hub = ring.ClusterHub(ring_size=args.ring_size)
    metrics = listwatch.Metrics(registry)
    Gauge(
        "splitsched_watcher_ring_events", "Deltas held in the ring buffer", registry=registry
    ).set_function(lambda: hub.ring_events)
    service = server.WatcherService(hub, registry=registry)
    access = listwatch.KubeAccess.load(args.kubeconfig)
    names = [n for part in args.scheduler_names for n in str(part).split(",") if n]
    converter = listwatch.Converter(scheduler_names=names)

    grpc_server = await grpcsrv.serve(
        listen=args.listen,
        servicers=[(service.add_to_server, service)],
        service_names=[server.SERVICE_NAME],
        tls=sec.server,
        interceptors=sec.interceptors,
    )
    http_host, http_port = httpsrv.split_listen(args.http_listen)
    tasks: list[asyncio.Task[None]] = []

    def healthy() -> bool:
        return all(not t.done() for t in tasks)

    http_runner, bound_http = await httpsrv.serve_http(
        host=http_host, port=http_port, ready=lambda: hub.synced, metrics=registry,
        healthy=healthy,
    )  # fmt: skip

    required = {"nodes", "pods"}
    background: set[asyncio.Task[None]] = set()
    loop = asyncio.get_running_loop()

    def on_synced(resource: str) -> None:
        required.discard(resource)
        if not required and not hub.synced:
            hub.mark_synced()
            log.info("initial list complete: %d objects; serving", len(hub))
            background.add(loop.create_task(grpc_server.set_serving(True)))

    resources = [listwatch.NODES, listwatch.PODS]
    if not args.no_pdbs:
        resources.append(listwatch.PDBS)
    connector = aiohttp.TCPConnector(ssl=access.ssl_context, limit=0)
    session = aiohttp.ClientSession(connector=connector)
    for res in resources:
        reflector = listwatch.Reflector(
            resource=res,
            hub=hub,
            converter=converter,
            access=access,
            session=session,
            metrics=metrics,
            page_size=args.page_size,
            watch_timeout=args.watch_timeout,
            on_synced=functools.partial(on_synced, res.name),
        )
        tasks.append(asyncio.create_task(reflector.run(), name=f"reflector-{res.name}"))

    stop = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    print(
        f"splitsched-watcher listening grpc={grpcsrv.host_port(args.listen, grpc_server.port)} "
        f"http={http_host}:{bound_http} api={access.host}",
        flush=True,
    )
    await stop.wait()
    log.info("shutting down")
    await grpc_server.set_serving(False)
    for t in tasks:
        t.cancel()
    for t in tasks:
        with contextlib.suppress(asyncio.CancelledError):
            await t
    await grpc_server.stop(1.0)
    await http_runner.cleanup()
    await session.close()
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = config.parse_args(parser, argv, env_prefix=ENV_PREFIX)
    logs.setup("watcher", json_lines=bool(args.log_json), level=args.log_level)
    if args.ring_size < 1 or args.page_size < 1:
        parser.error("--ring-size and --page-size must be at least 1")
    return eventloop.run_service("watcher", run(args))


if __name__ == "__main__":
    sys.exit(main())
