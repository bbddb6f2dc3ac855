"""What the watcher is told: its flags (`build_parser`; the Helm chart and docker-compose
pass them) and `WatcherSettings`, the frozen value `WatcherSettings.load` builds from
them once (flags > ``SPLITSCHED_WATCHER_*`` > ``--config`` file > defaults).

Besides the shared part (listen addresses, TLS, logging, kubeconfig): the ring's size,
the LIST page size, the WATCH timeout, the schedulerNames whose pending pods are
streamed and whether PodDisruptionBudgets are watched.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from typing import Self

from splitsched.runtime import security
from splitsched.runtime import settings as shared
from splitsched.v1 import watcher_pb2

#: Its one RPC streams the cluster's pods and nodes: only the scheduler needs it, and
#: with ``--trusted-clients`` only the scheduler may call it.
SERVICE = watcher_pb2.DESCRIPTOR.services_by_name["Watcher"]
ENV_PREFIX = "SPLITSCHED_WATCHER"


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="splitsched-watcher",
        description="List+watch the cluster and stream it to schedulers over gRPC.",
    )
    shared.add_flags(
        p,
        listen="0.0.0.0:50051",
        http_listen="0.0.0.0:9091",
        kubeconfig="kubeconfig (default: in-cluster)",
    )
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
    # No --peer-* flags: the watcher dials no gRPC peer.
    security.add_flags(p, restricted=[m.name for m in SERVICE.methods], peers=False)
    return p


@dataclass(frozen=True)
class WatcherSettings(shared.ServiceSettings, env_prefix=ENV_PREFIX, parser=build_parser):
    """Everything the watcher is told: the shared part (`common`) and how it lists,
    watches and keeps the cluster, resolved and checked."""

    #: Deltas the ring keeps for subscribers that resume.
    ring_size: int
    #: LIST page size (``limit``).
    page_size: int
    #: Server-side WATCH ``timeoutSeconds``.
    watch_timeout: int
    #: Pending pods are streamed only for these schedulerNames (all when empty).
    scheduler_names: tuple[str, ...]
    #: Whether PodDisruptionBudgets are listed and watched (``--no-pdbs`` turns it off).
    pdbs: bool

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> Self:
        """From resolved options; raises ConfigError naming the flag."""
        shared.at_least(args.ring_size, 1, flag="--ring-size")
        shared.at_least(args.page_size, 1, flag="--page-size")
        return cls(
            common=shared.common_from_args(args, service=SERVICE),
            ring_size=args.ring_size,
            page_size=args.page_size,
            watch_timeout=args.watch_timeout,
            scheduler_names=shared.split_names(args.scheduler_names),
            pdbs=not args.no_pdbs,
        )
