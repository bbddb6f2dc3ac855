"""The binder's flags (`build_parser`: the Helm chart, docker-compose and the test
stacks pass them; each is also ``SPLITSCHED_BINDER_<NAME>`` or a ``--config`` key) and
`BinderSettings`, resolved once by `BinderSettings.load`.

Checked when built, with errors that name the flag: a binder needs the scheduler's
address to report to, at least one worker, a positive preemption deadline and at least one
profile it serves (``--scheduler-names``). The
replica id is fixed here (hostname-pid unless ``--binder-id``).
"""

from __future__ import annotations

import argparse
import os
import socket
from dataclasses import dataclass
from typing import Self

from services.binder import guard
from splitsched.runtime import security
from splitsched.runtime import settings as shared
from splitsched.runtime.config import ConfigError
from splitsched.v1 import binder_pb2

ENV_PREFIX = "SPLITSCHED_BINDER"
SERVICE = binder_pb2.DESCRIPTOR.services_by_name["Binder"]
SERVICE_NAME = SERVICE.full_name


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="splitsched-binder",
        description="Performs the scheduler's decisions: Bindings, Events, PodScheduled, "
        "preemptions (nominatedNodeName, Evictions).",
    )
    shared.add_flags(
        parser,
        listen="0.0.0.0:50052",
        http_listen="0.0.0.0:9092",
        kubeconfig="kubeconfig file (default: in-cluster config)",
    )
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
    parser.add_argument(
        "--scheduler-names",
        nargs="*",
        default=list(guard.DEFAULT_PROFILES),
        help="the profiles (schedulerNames) served: a pod with another spec.schedulerName "
        "is refused (comma- or space-separated; default: splitsched)",
    )
    # Every Binder RPC acts on the cluster: with --trusted-clients, only the scheduler's.
    security.add_flags(parser, restricted=[m.name for m in SERVICE.methods])
    return parser


@dataclass(frozen=True)
class BinderSettings(shared.ServiceSettings, env_prefix=ENV_PREFIX, parser=build_parser):
    """Everything the binder is told, resolved and checked."""

    #: The scheduler's gRPC target, where outcomes are reported.
    scheduler: str
    #: This replica's id in outcomes and Events (default: hostname-pid).
    binder_id: str
    #: Bindings worked at once, and decisions queued before new ones are refused.
    workers: int
    max_pending: int
    #: Client-side API rate limit (qps 0: none) and burst.
    qps: float
    burst: int
    #: Seconds running bindings get at shutdown.
    shutdown_grace: float
    #: Seconds a preemption (nomination and evictions, retries included) may take.
    preempt_deadline: float
    #: Seconds to deliver buffered outcomes at shutdown.
    report_flush_timeout: float
    #: Outcomes buffered for the scheduler before workers wait.
    max_report_buffer: int
    #: The profiles served: pods (and preemptors) with another schedulerName are refused.
    scheduler_names: tuple[str, ...]

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> Self:
        """From resolved options; raises ConfigError naming the flag."""
        if not args.scheduler:
            raise ConfigError(f"--scheduler (or ${ENV_PREFIX}_SCHEDULER) is required")
        shared.at_least(args.workers, 1, flag="--workers")
        shared.at_least(args.max_pending, 1, flag="--max-pending")
        if args.preempt_deadline <= 0:
            raise ConfigError("--preempt-deadline must be positive")
        scheduler_names = shared.split_names(args.scheduler_names)
        if not scheduler_names:
            raise ConfigError("--scheduler-names must name at least one profile")
        return cls(
            common=shared.common_from_args(args, service=SERVICE),
            scheduler=args.scheduler,
            binder_id=args.binder_id or f"{socket.gethostname()}-{os.getpid()}",
            workers=args.workers,
            max_pending=args.max_pending,
            qps=args.qps,
            burst=args.burst,
            shutdown_grace=args.shutdown_grace,
            preempt_deadline=args.preempt_deadline,
            report_flush_timeout=args.report_flush_timeout,
            max_report_buffer=args.max_report_buffer,
            scheduler_names=scheduler_names,
        )
