"""The binder process (``splitsched-binder``, ``python -m services.binder``).

Wires the pieces: the Kubernetes client (``kubeapi``), the outcome reporter to the
scheduler (``reporter``), the worker pool (``worker``) and the ``Binder`` gRPC servicer
(``server``), plus ``/healthz``, ``/readyz`` (the API server answers) and ``/metrics``.
On SIGTERM/SIGINT it shuts down gracefully: health NOT_SERVING, new work refused, queued
decisions reported FAILED ("binder shutting down") so the scheduler requeues them at once,
running bindings given ``--shutdown-grace`` seconds, outcomes flushed, then exit.
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
from collections.abc import Sequence

from services.binder.kubeapi import KubeClient, load_endpoint
from services.binder.metrics import BinderMetrics
from services.binder.reporter import CHANNEL_OPTIONS, OutcomeReporter
from services.binder.server import BinderServicer
from services.binder.worker import BindingPool
from splitsched.runtime import config, eventloop, grpcsrv, httpsrv, logs, security
from splitsched.v1 import binder_pb2, binder_pb2_grpc

log = logging.getLogger("splitsched.binder")

ENV_PREFIX = "SPLITSCHED_BINDER"
SERVICE = binder_pb2.DESCRIPTOR.services_by_name["Binder"]
SERVICE_NAME = SERVICE.full_name
#: How often readiness re-checks the API server (seconds).
PROBE_INTERVAL = 2.0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="splitsched-binder",
        description="Performs the scheduler's decisions: Bindings, Events, PodScheduled, "
        "preemptions (nominatedNodeName, Evictions).",
    )
    parser.add_argument("--kubeconfig", help="kubeconfig file (default: in-cluster config)")
    parser.add_argument("--listen", default="0.0.0.0:50052", help="gRPC host:port")
    parser.add_argument("--http-listen", default="0.0.0.0:9092", help="health/metrics host:port")
    parser.add_argument("--scheduler", help="the scheduler's gRPC target, e.g. 127.0.0.1:50050")
    parser.add_argument("--binder-id", help="this replica's id (default: hostname-pid)")
    parser.add_argument("--workers", type=int, default=64, help="concurrent bindings")
    parser.add_argument("--max-pending", type=int, default=10_000, help="queued decisions")
    parser.add_argument("--qps", type=float, default=0.0, help="API requests/s (0 = no limit)")
    parser.add_argument("--burst", type=int, default=0, help="API request burst")
    parser.add_argument(
        "--shutdown-grace", type=float, default=20.0, help="seconds for running bindings"
    )
    parser.add_argument(
        "--preempt-deadline",
        type=float,
        default=30.0,
        help="seconds a preemption (nomination and evictions, retries included) may take",
    )
    parser.add_argument(
        "--report-flush-timeout",
        type=float,
        default=10.0,
        help="seconds to deliver buffered outcomes at shutdown",
    )
    parser.add_argument(
        "--max-report-buffer",
        type=int,
        default=100_000,
        help="outcomes buffered for the scheduler before workers wait",
    )
    # Every Binder RPC acts on the cluster: with --trusted-clients, only the scheduler's.
    security.add_flags(parser, restricted=[m.name for m in SERVICE.methods])
    return parser


async def run(args: argparse.Namespace) -> int:
    """Serve until SIGTERM/SIGINT; returns the exit code."""
    sec = security.from_args(args, service=SERVICE)
    binder_id = args.binder_id or f"{socket.gethostname()}-{os.getpid()}"
    try:
        endpoint = load_endpoint(args.kubeconfig)
    except Exception as exc:
        log.error("cannot load Kubernetes config %s: %s", args.kubeconfig or "(in-cluster)", exc)
        return 2
    metrics = BinderMetrics()
    kube = KubeClient(
        endpoint, qps=args.qps, burst=args.burst, max_connections=2 * max(1, args.workers)
    )
    await kube.start()
    reporter = OutcomeReporter(
        target=args.scheduler,
        binder_id=binder_id,
        metrics=metrics,
        max_buffer=args.max_report_buffer,
        channel_factory=lambda target: grpcsrv.open_channel(
            target, options=CHANNEL_OPTIONS, tls=sec.peer
        ),
    )
    await reporter.start()
    pool = BindingPool(
        kube=kube,
        reporter=reporter,
        metrics=metrics,
        binder_id=binder_id,
        workers=args.workers,
        max_pending=args.max_pending,
        preempt_deadline=args.preempt_deadline,
    )
    pool.start()
    grpc_server = await grpcsrv.serve(
        listen=args.listen,
        servicers=[(binder_pb2_grpc.add_BinderServicer_to_server, BinderServicer(pool))],
        service_names=[SERVICE_NAME],
        max_connection_age_s=30.0,
        tls=sec.server,
        interceptors=sec.interceptors,
    )
    api_ready = False

    def ready() -> bool:
        return api_ready and not pool.shutting_down

    http_host, http_port = httpsrv.split_listen(args.http_listen)
    http_runner, bound_http = await httpsrv.serve_http(
        host=http_host, port=http_port, ready=ready, metrics=metrics.registry
    )

    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)

    async def probe_loop() -> None:
        nonlocal api_ready
        while True:
            was = api_ready
            api_ready = await kube.probe()
            if api_ready != was:
                log.info("API server %s %s", endpoint.host,
                         "reachable" if api_ready else "unreachable")  # fmt: skip
            if not pool.shutting_down:
                await grpc_server.set_serving(api_ready)
            await asyncio.sleep(PROBE_INTERVAL)

    prober = asyncio.create_task(probe_loop(), name="api-probe")
    print(
        f"splitsched-binder listening "
        f"grpc={grpcsrv.host_port(args.listen, grpc_server.port)} "
        f"http={http_host}:{bound_http} binder_id={binder_id} "
        f"api={endpoint.host} scheduler={args.scheduler}",
        flush=True,
    )
    await stop.wait()

    log.info("shutting down: %d decisions in flight", pool.inflight)
    await grpc_server.set_serving(False)
    await pool.shutdown(args.shutdown_grace)
    prober.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await prober
    if not await reporter.flush(within=args.report_flush_timeout):
        log.warning("%d outcomes not delivered to the scheduler", reporter.backlog)
    await reporter.close()
    await grpc_server.stop(1.0)
    await http_runner.cleanup()
    await kube.close()
    log.info("stopped; %d outcomes delivered", reporter.delivered)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = config.parse_args(parser, argv, env_prefix=ENV_PREFIX)
    logs.setup("binder", json_lines=bool(args.log_json), level=args.log_level)
    if not args.scheduler:
        parser.error("--scheduler (or $SPLITSCHED_BINDER_SCHEDULER) is required")
    if args.workers < 1 or args.max_pending < 1:
        parser.error("--workers and --max-pending must be at least 1")
    if args.preempt_deadline <= 0:
        parser.error("--preempt-deadline must be positive")
    return eventloop.run_service("binder", run(args))


if __name__ == "__main__":
    sys.exit(main())
