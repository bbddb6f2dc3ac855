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

This module wires the parts together and holds the flags and the probes; each job has its
own module: `ingest` (the watch), `loops` (scheduling and housekeeping), `dispatch` (the
binder client and probe), `leadership` (the Lease, settling, gRPC health), `metrics`,
`state` (the decisions) and `api` (the Scheduler API).
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import secrets
import signal
import socket
import sys
from collections.abc import Sequence
from pathlib import Path

from aiohttp import web

from services.scheduler import leader
from services.scheduler.api import SchedulerApi
from services.scheduler.dispatch import BinderDispatch
from services.scheduler.ingest import WatchIngest
from services.scheduler.leadership import Leadership
from services.scheduler.loops import SchedulingLoop
from services.scheduler.metrics import SchedulerMetrics
from services.scheduler.state import DecisionEvent, Listener, SchedulerState
from services.scheduler.traces import SchedulingTraces
from splitsched.core import algorithm, profiles
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
from splitsched.v1 import scheduler_pb2, scheduler_pb2_grpc

log = logging.getLogger("splitsched.scheduler")
SERVICE = scheduler_pb2.DESCRIPTOR.services_by_name["Scheduler"]
#: What `--trusted-clients` guards unless `--restrict-rpcs` says otherwise.
RESTRICTED_RPCS = ("ReportBindingOutcome", "Simulate")
#: Seconds the gRPC server lets calls in progress finish on shutdown.
GRPC_GRACE_SECONDS = 2.0


class SchedulerService:
    """One scheduler process: the state and its loops, servers and peers."""

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
        elector = _elector(args)
        queue = SchedulingQueue(clock=clock)
        self.state = SchedulerState(
            algo=algo,
            queue=queue,
            clock=clock,
            scheduler_id=args.scheduler_id,
            bind_timeout=args.bind_timeout,
            leading=elector is None,
            # Unique per process: a restarted scheduler must not reuse a decision id that a
            # binder still remembers (it would answer with the old decision's outcome).
            decision_prefix=f"{args.scheduler_id}.{secrets.token_hex(3)}",
        )
        self.metrics = SchedulerMetrics()
        self.state.listeners.append(self.metrics.decision_listener(self.state))
        self.wake = asyncio.Event()
        self.stopping = asyncio.Event()
        self.security = security.from_args(args, service=SERVICE)
        if self.traces is not None:
            self.state.listeners.append(_trace_outcomes(self.traces))
        self.binders_ok = False
        self._build_parts(elector)

    def _build_parts(self, elector: leader.LeaderElector | None) -> None:
        """The jobs around the state, each in its own module."""
        args = self.args
        self.leadership = Leadership(
            state=self.state,
            metrics=self.metrics,
            elector=elector,
            settle_seconds=args.settle_seconds,
            poke=self.poke,
            stopping=self.stopping,
        )
        self.dispatch = BinderDispatch(
            state=self.state,
            metrics=self.metrics,
            target=args.binders,
            tls=self.security.peer,
            bind_attempts=args.bind_attempts,
            bind_timeout=args.bind_timeout,
            poke=self.poke,
            traces=self.traces,
        )
        self.ingest = WatchIngest(
            state=self.state,
            metrics=self.metrics,
            target=args.watcher,
            subscriber=args.scheduler_id,
            tls=self.security.peer,
            poke=self.poke,
            stopping=self.stopping,
            traces=self.traces,
        )
        self.scheduling = SchedulingLoop(
            state=self.state,
            metrics=self.metrics,
            dispatch=self.dispatch,
            leadership=self.leadership,
            wake=self.wake,
            stopping=self.stopping,
            poke=self.poke,
            traces=self.traces,
        )

    def poke(self) -> None:
        """Wake the scheduling loop: something it waits for may have changed."""
        self.wake.set()

    # ---- probes --------------------------------------------------------------------------
    def ready(self) -> bool:
        """/readyz: leading, a synced view of the cluster and at least one binder SERVING
        (a standby is not ready, so a Service sends binders and tools to the leader; with
        `--standby-ready` it is, for Deployments whose rollouts wait for readiness, and
        only gRPC health tells the leader apart)."""
        leading = self.state.leading or self.args.standby_ready
        return leading and self.state.synced and self.binders_ok

    async def binder_probe_loop(self) -> None:
        """Keep `binders_ok` (what readiness reads) in line with the binders' gRPC health."""
        await self.dispatch.probe_loop(self.stopping, on_result=self._binders_answered)

    def _binders_answered(self, ok: bool) -> None:
        self.binders_ok = ok

    # ---- run -----------------------------------------------------------------------------
    async def run(self) -> int:
        server = await self._serve_grpc()
        runner = await self._serve_http(server)
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, self.stopping.set)
        tasks = [
            asyncio.create_task(self.ingest.run()),
            asyncio.create_task(self.scheduling.run()),
            asyncio.create_task(self.scheduling.housekeeping()),
            asyncio.create_task(self.leadership.serving_follows_sync(server)),
            asyncio.create_task(self.binder_probe_loop()),
            asyncio.create_task(self.leadership.campaign(self.args.scheduler_id)),
        ]
        await self.stopping.wait()
        log.info("shutting down")
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await self.leadership.close()
        await server.stop(GRPC_GRACE_SECONDS)
        await runner.cleanup()
        await self.dispatch.close()
        return self.leadership.exit_code

    async def _serve_grpc(self) -> grpcsrv.GrpcServer:
        """The Scheduler API (NOT_SERVING until leadership says otherwise)."""
        api = SchedulerApi(
            state=self.state,
            on_change=self.poke,
            trace_id_of=self.traces.trace_id if self.traces is not None else None,
        )
        return await grpcsrv.serve(
            listen=self.args.listen,
            servicers=[(scheduler_pb2_grpc.add_SchedulerServicer_to_server, api)],
            service_names=["splitsched.v1.Scheduler"],
            tls=self.security.server,
            interceptors=self.security.interceptors,
        )

    async def _serve_http(self, server: grpcsrv.GrpcServer) -> web.AppRunner:
        """Health, readiness and metrics; prints what the service listens on."""
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
        return runner


def _trace_outcomes(traces: SchedulingTraces) -> Listener:
    """A state listener that closes a decision's trace with its outcome."""

    def listener(event: DecisionEvent) -> None:
        if event.decision_id:
            traces.outcome(
                event.pod.uid, event.decision_id, kind=event.kind, message=event.message,
                binder_id=event.binder_id,
            )  # fmt: skip

    return listener


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


def _elector(args: argparse.Namespace) -> leader.LeaderElector | None:
    """The Lease's elector with `--leader-elect`, else None (this replica always leads)."""
    if not args.leader_elect:
        return None
    return leader.LeaderElector(
        client=kubeclient.KubeClient(_lease_endpoint(args.kubeconfig)),
        namespace=args.lease_namespace,
        name=args.lease_name,
        identity=args.scheduler_id,
        lease_duration=args.lease_duration,
        renew_deadline=args.renew_deadline,
        retry_period=args.retry_period,
    )


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
