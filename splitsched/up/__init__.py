"""`splitsched up --kubeconfig PATH [--context NAME] [--binders N] [--config FILE]`: run
the watcher, the scheduler and N binders as local processes against any cluster the
kubeconfig reaches (kind, minikube, a real one, the local control plane).

It first asks the API server, with SelfSubjectAccessReviews, whether the kubeconfig's
identity may do everything the watcher and the binders need; if not, it lists what is
missing, prints the RBAC to grant (ClusterRole and ClusterRoleBinding, on stdout) and
starts nothing. Every gRPC hop is mutual TLS with certificates made at each start in the
state dir, where the CLI's ``ops`` certificate and ``cli.env`` (its settings, to source)
are too. Ctrl-C or SIGTERM stops every process it started; so does its own death
(`splitsched.launch.orphanguard`).

Exit codes: 0 stopped by Ctrl-C or SIGTERM once running, 1 a service died, 2 bad input
(kubeconfig, context, --config, a busy state dir or address), 3 the cluster could not be
reached or the services did not become ready, 5 rights are missing, 130 interrupted
while starting.

`register` adds the subcommand to the CLI's parser; the rest is imported when it runs.
"""

from __future__ import annotations

import argparse
from typing import Any


def register(sub: Any) -> None:
    """Add ``up`` to the CLI's subcommands."""
    p = sub.add_parser(
        "up",
        help="run the watcher, the scheduler and the binders locally against a cluster",
        description="Run the watcher, the scheduler and N binders as local processes "
        "against the cluster a kubeconfig reaches, once the API server says its identity "
        "may do what they need (else: what is missing, and the RBAC to grant on stdout). "
        "Ctrl-C or SIGTERM stops them all.",
        epilog="Exit codes: 0 stopped by Ctrl-C or SIGTERM, 1 a service died, 2 bad input, "
        "3 the cluster unreachable or the services not ready, 5 rights missing, 130 "
        "interrupted while starting.",
    )
    p.add_argument(
        "--kubeconfig",
        help="kubeconfig file (default: $KUBECONFIG, else ~/.kube/config, as kubectl)",
    )
    p.add_argument("--context", help="the kubeconfig's context (default: its current one)")
    p.add_argument("--binders", type=int, default=2, help="binder processes (default 2)")
    p.add_argument(
        "--config",
        help="scheduler profiles (KubeSchedulerConfiguration YAML; default: one profile, "
        "schedulerName splitsched)",
    )
    p.add_argument(
        "--listen",
        default="127.0.0.1:50050",
        help="the Scheduler API's address (default 127.0.0.1:50050, where the CLI looks)",
    )
    p.add_argument(
        "--state-dir",
        help="certificates, logs and the CLI's settings (default: "
        "$XDG_STATE_HOME/splitsched/up, else ~/.local/state/splitsched/up)",
    )
    p.add_argument(
        "--insecure",
        action="store_true",
        help="plaintext gRPC between the services and for the CLI: debugging only, any "
        "local process could then make the binders bind and evict",
    )
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from splitsched.up import command

    return command.run(args)
