"""What the scheduler is told: its flags (`build_parser`; the Helm chart, docker-compose
and the test stacks pass them) and `SchedulerSettings`, the frozen value
`SchedulerSettings.load` builds from them once (flags > ``SPLITSCHED_SCHEDULER_*`` >
``--config`` file > defaults).

Besides the shared part (listen addresses, TLS, logging, and the kubeconfig, used only
for the leader Lease): where the watcher and the binders are, the profiles file, this
replica's id, how long and how often a decision is tried (a decision whose binder binds
volumes first has its own, longer deadline), and leader election. Resolved here rather
than later: ``--settle-seconds`` (3 with ``--leader-elect``, else 0), and the checks, with
an error that names the flags: the Lease timings (duration > renew deadline > retry
period > 0) and a positive ``--volume-bind-timeout``.
"""

from __future__ import annotations

import argparse
import os
import socket
from dataclasses import dataclass
from typing import Self

from splitsched.runtime import security
from splitsched.runtime import settings as shared
from splitsched.runtime.config import ConfigError
from splitsched.v1 import scheduler_pb2

ENV_PREFIX = "SPLITSCHED_SCHEDULER"
SERVICE = scheduler_pb2.DESCRIPTOR.services_by_name["Scheduler"]
#: What `--trusted-clients` guards unless `--restrict-rpcs` says otherwise.
RESTRICTED_RPCS = ("ReportBindingOutcome", "Simulate")
#: Seconds a leader waits before its first decision when ``--settle-seconds`` is not given.
LEADER_SETTLE_SECONDS = 3.0
#: Pods whose last attempts GetPodTrace can show, by default with tracing on.
TRACE_STORE_PODS = 2000
#: kube-scheduler's default VolumeBindingArgs.bindTimeoutSeconds.
VOLUME_BIND_TIMEOUT = 600.0
#: --max-decisions-in-flight: one binder's default --max-pending, so the cap alone never
#: fills even a single binder's intake; the window below it does the pacing.
MAX_DECISIONS_IN_FLIGHT = 10_000


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="splitsched-scheduler",
        description="splitsched-scheduler: the stateful service that holds the cluster view "
        "and decides.",
    )
    p.add_argument("--listen", default="0.0.0.0:50050", help="gRPC address (Scheduler API)")
    p.add_argument("--http-listen", default="0.0.0.0:9090", help="HTTP health and metrics")
    p.add_argument("--watcher", default="127.0.0.1:50051", help="the watcher's gRPC target")
    p.add_argument(
        "--binders",
        default="127.0.0.1:50052",
        help="binders' gRPC target: dns:///svc:port (headless Service) or ipv4:a:p,b:p",
    )
    p.add_argument(
        "--profiles",
        help="an unmodified KubeSchedulerConfiguration v1 file (default: one profile, splitsched)",
    )
    p.add_argument("--scheduler-id", default=f"{socket.gethostname()}-{os.getpid()}")
    p.add_argument("--bind-timeout", type=float, default=30.0, help="seconds per decision")
    p.add_argument("--bind-attempts", type=int, default=5, help="Binding API attempts")
    p.add_argument(
        "--max-decisions-in-flight",
        type=int,
        default=MAX_DECISIONS_IN_FLIGHT,
        help="the most bindings handed to binders and not yet resolved; below it a window "
        "follows the binders' pace (grows while they bind in time, halves when they "
        "refuse or miss deadlines) and the loop waits while the window is full",
    )
    p.add_argument(
        "--volume-bind-timeout",
        type=float,
        default=None,
        help="seconds per decision whose binder binds volumes first and waits for the PV "
        "controller (default: the profiles' VolumeBinding bindTimeoutSeconds, else "
        f"{VOLUME_BIND_TIMEOUT:g}, as kube-scheduler)",
    )
    p.add_argument(
        "--settle-seconds",
        type=float,
        default=None,
        help="after the view is synced and this replica leads, wait this long before the "
        "first decision so binders' in-flight decisions are adopted first (default: 3 with "
        "--leader-elect, else 0)",
    )
    p.add_argument(
        "--trace-store-pods",
        type=int,
        default=None,
        help="remember the last attempts of this many pods as span trees, for the API's "
        "GetPodTrace (`splitsched trace POD`), also with tracing off (spans are then built "
        f"for it alone); 0: none (default: {TRACE_STORE_PODS} with tracing on, 0 with it off)",
    )
    _add_leader_election_flags(p)
    security.add_flags(p, restricted=RESTRICTED_RPCS)
    return p


def _add_leader_election_flags(p: argparse.ArgumentParser) -> None:
    """The leader election group: the Lease, its timings, its kubeconfig and readiness
    of a standby."""
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


@dataclass(frozen=True)
class SchedulerSettings(shared.ServiceSettings, env_prefix=ENV_PREFIX, parser=build_parser):
    """Everything the scheduler is told: the shared part (`common`; its kubeconfig is
    the Lease's) and where its peers are, how it decides and how it elects a leader."""

    #: The watcher's gRPC target (the cluster's event stream).
    watcher: str
    #: The binders' gRPC target (a headless Service's ``dns:///`` name or ``ipv4:`` list).
    binders: str
    #: The KubeSchedulerConfiguration file (None: one profile, 'splitsched').
    profiles: str | None
    #: This replica's id: in decisions, as the watch subscriber and as the Lease holder.
    scheduler_id: str
    #: Seconds a decision may take to be bound, and Binding API attempts per decision.
    bind_timeout: float
    bind_attempts: int
    #: Seconds a decision with volume bindings may take: its binder waits for the PV
    #: controller (and a provisioner) before the Binding.
    #: --volume-bind-timeout; None: the profiles' VolumeBinding bindTimeoutSeconds.
    volume_bind_timeout: float | None
    #: Seconds a new leader with a synced view waits before its first decision.
    settle_seconds: float
    #: Whether only the holder of the Lease schedules (several replicas).
    leader_elect: bool
    #: The Lease: its name, namespace and timings (seconds).
    lease_name: str
    lease_namespace: str
    lease_duration: float
    renew_deadline: float
    retry_period: float
    #: Whether a synced standby reports /readyz ok too.
    standby_ready: bool
    #: Pods whose last attempts the scheduler remembers for GetPodTrace (0: none; None:
    #: TRACE_STORE_PODS with tracing on, none with it off).
    trace_store_pods: int | None = None
    #: The flow window's cap: bindings in flight to the binders at most.
    max_decisions_in_flight: int = MAX_DECISIONS_IN_FLIGHT

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> Self:
        """From resolved options; raises ConfigError naming the flag."""
        if args.leader_elect:
            check_lease_timings(args.lease_duration, args.renew_deadline, args.retry_period)
        if args.volume_bind_timeout is not None and not args.volume_bind_timeout > 0:
            raise ConfigError(
                f"--volume-bind-timeout must be positive, got {args.volume_bind_timeout:g}"
            )
        if args.trace_store_pods is not None and args.trace_store_pods < 0:
            raise ConfigError(f"--trace-store-pods must be 0 or more, got {args.trace_store_pods}")
        if args.max_decisions_in_flight < 1:
            raise ConfigError(
                f"--max-decisions-in-flight must be at least 1, got {args.max_decisions_in_flight}"
            )
        settle = args.settle_seconds
        if settle is None:
            settle = LEADER_SETTLE_SECONDS if args.leader_elect else 0.0
        return cls(
            common=shared.common_from_args(args, service=SERVICE),
            watcher=args.watcher,
            binders=args.binders,
            profiles=args.profiles or None,
            scheduler_id=args.scheduler_id,
            bind_timeout=args.bind_timeout,
            bind_attempts=args.bind_attempts,
            volume_bind_timeout=args.volume_bind_timeout,
            settle_seconds=settle,
            leader_elect=bool(args.leader_elect),
            lease_name=args.lease_name,
            lease_namespace=args.lease_namespace,
            lease_duration=args.lease_duration,
            renew_deadline=args.renew_deadline,
            retry_period=args.retry_period,
            standby_ready=bool(args.standby_ready),
            trace_store_pods=args.trace_store_pods,
            max_decisions_in_flight=args.max_decisions_in_flight,
        )


def check_lease_timings(lease_duration: float, renew_deadline: float, retry_period: float) -> None:
    """The leader must give up before anyone else may claim the Lease, and get at least
    one retry before it does: ConfigError naming the flags otherwise."""
    if not lease_duration > renew_deadline > retry_period > 0:
        raise ConfigError(
            "need --lease-duration > --renew-deadline > --retry-period > 0, got "
            f"{lease_duration:g} > {renew_deadline:g} > {retry_period:g}"
        )
