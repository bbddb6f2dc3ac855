"""What `kubectl splitsched` asks the Kubernetes API: the namespace of the kubeconfig's
context, and, to reach the chart's scheduler, its pods, the Lease naming the leader, the
ops certificate's Secret, and a port-forward to the chosen pod (`portforward.Relay`).

`scheduler_endpoint` yields the server and the certificate files the CLI then uses; the
certificate is written to a private temporary directory removed on exit. Failures are
`ReachError`s whose message says what to do instead.
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from splitsched.kubectl import chart, portforward
from splitsched.kubectl.flags import KubectlFlags


class ReachError(Exception):
    """The scheduler cannot be reached through the Kubernetes API (exit 3)."""


def context_namespace(flags: KubectlFlags) -> str:
    """``-n``, else the namespace of the kubeconfig's context, else ``default``."""
    if flags.namespace:
        return flags.namespace
    from kubernetes import config as kube_config

    try:
        contexts, current = kube_config.list_kube_config_contexts(config_file=flags.kubeconfig)
    except Exception:  # no kubeconfig at all: a --server user needs none
        return "default"
    chosen = next((c for c in contexts or [] if c["name"] == flags.context), None)
    if flags.context and chosen is None:
        raise ReachError(f"the kubeconfig has no context {flags.context!r}")
    context = (chosen or current or {}).get("context") or {}
    return str(context.get("namespace") or "default")


@contextlib.contextmanager
def scheduler_endpoint(flags: KubectlFlags, args: argparse.Namespace) -> Iterator[None]:
    """Point ``args`` (the CLI's: server, ca, cert, key, server_name) at the chart's
    scheduler through a port-forward, for the duration of the block."""
    from kubernetes import config as kube_config

    try:
        api = kube_config.new_client_from_config(
            config_file=flags.kubeconfig, context=flags.context, persist_config=False
        )
    except Exception as exc:
        raise ReachError(f"kubeconfig: {exc}") from None
    with api:
        target = _find(api, flags.splitsched_namespace)
        with contextlib.ExitStack() as stack:
            if target.ops_secret and not (args.ca or args.cert):
                args.ca, args.cert, args.key = _ops_certificate(api, target, stack)
            if target.ops_secret:
                # The chart's certificates name localhost (for port-forwards), not 127.0.0.1.
                args.server_name = args.server_name or "localhost"
            dial = portforward.pod_dialer(
                api, namespace=target.namespace, pod=target.pod, port=target.port
            )
            relay = stack.enter_context(portforward.Relay(dial))
            args.server = f"127.0.0.1:{relay.port}"
            yield


def _find(api: Any, namespace: str | None) -> chart.Scheduler:
    """The scheduler pod to reach: in ``namespace``, else in any namespace."""
    from kubernetes import client
    from kubernetes.client.rest import ApiException

    core = client.CoreV1Api(api)
    where = f"namespace {namespace}" if namespace else "any namespace"
    try:
        if namespace:
            found = core.list_namespaced_pod(namespace, label_selector=chart.SELECTOR)
        else:
            found = core.list_pod_for_all_namespaces(label_selector=chart.SELECTOR)
    except ApiException as exc:
        hint = "" if namespace else "; give --splitsched-namespace (where the chart is)"
        raise ReachError(f"cannot list pods in {where}: {exc.status} {exc.reason}{hint}") from None
    pods = [api.sanitize_for_serialization(p) for p in found.items]
    try:
        candidates = chart.choose(pods, where=where)
    except chart.ChartError as exc:
        raise ReachError(str(exc)) from None
    holder = None
    first = candidates[0]
    if len(candidates) > 1 and first.lease:
        leases = client.CoordinationV1Api(api)
        with contextlib.suppress(ApiException):  # no right to read it: any replica answers
            lease = leases.read_namespaced_lease(first.lease, first.namespace)
            holder = lease.spec.holder_identity if lease.spec else None
    return chart.leader(candidates, holder)


def _ops_certificate(
    api: Any, target: chart.Scheduler, stack: contextlib.ExitStack
) -> tuple[str, str, str]:
    """The ops Secret's ca.crt, tls.crt and tls.key as files in a private temporary
    directory (removed when ``stack`` closes); their paths."""
    from kubernetes import client
    from kubernetes.client.rest import ApiException

    assert target.ops_secret is not None
    name = f"{target.namespace}/{target.ops_secret}"
    try:
        secret = client.CoreV1Api(api).read_namespaced_secret(target.ops_secret, target.namespace)
    except ApiException as exc:
        raise ReachError(
            f"cannot read Secret {name} (the chart's ops certificate): {exc.status} "
            f"{exc.reason}; give --ca --cert --key instead"
        ) from None
    data = secret.data or {}
    missing = [k for k in ("ca.crt", "tls.crt", "tls.key") if k not in data]
    if missing:
        raise ReachError(f"Secret {name} has no {', '.join(missing)}")
    directory = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="kubectl-splitsched-")))
    paths = []
    for key in ("ca.crt", "tls.crt", "tls.key"):
        path = directory / key
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "wb") as f:
            f.write(base64.b64decode(data[key]))
        paths.append(str(path))
    return paths[0], paths[1], paths[2]
