"""A stack of the three services for one e2e module alone (a test that rewrites its
certificates, say), on kwok nodes of its own, with least-privilege ServiceAccounts; all of
it removed afterwards."""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Iterator
from pathlib import Path

from kubernetes import client

from splitsched.testing import kube, stack


@contextlib.contextmanager
def own_stack(
    api: client.ApiClient,
    workdir: Path,
    *,
    name: str,
    nodes: int = 4,
    cpu: str = "4",
    memory: str = "8Gi",
    binders: int = 2,
) -> Iterator[stack.Stack]:
    """The stack (mutual TLS, its certificates in `workdir/tls`) on `nodes` new kwok nodes
    named `<name>-<random>-<i>` with `cpu` and `memory` each, running until the end of the
    `with`."""
    names = kube.create_kwok_nodes(
        api, nodes, name_prefix=f"{name}-{uuid.uuid4().hex[:5]}", cpu=cpu, memory=memory
    )
    sa_namespace = kube.create_namespace(api, prefix=f"splitsched-{name}")
    configs = stack.component_kubeconfigs(api, namespace=sa_namespace, directory=workdir)
    running = stack.Stack(
        workdir=workdir,
        watcher_kubeconfig=configs["watcher"],
        binder_kubeconfig=configs["binder"],
        binders=binders,
    )
    try:
        running.start(timeout=90)
        yield running
    finally:
        running.stop()
        kube.delete_namespace(api, sa_namespace)
        kube.delete_nodes(api, names)
