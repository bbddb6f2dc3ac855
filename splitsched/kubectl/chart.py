"""Where the Helm chart's scheduler is, read from its pods (as API JSON): which pod to
reach (a ready one; of several, the Lease holder), on which port, and with which
certificate (the release's ops Secret, found beside the scheduler's own). Pure.

The chart (helm/splitsched) labels the scheduler's pods ``app.kubernetes.io/name:
splitsched`` and ``app.kubernetes.io/component: scheduler``, names the gRPC port
``grpc``, mounts the scheduler's certificate Secret ``<fullname>-scheduler-tls`` (or the
shared ``tls.secretName``) as the volume ``tls`` when TLS is on, and passes
``--lease-name`` under leader election, where a pod's scheduler id is its name.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

SELECTOR = "app.kubernetes.io/name=splitsched,app.kubernetes.io/component=scheduler"
INSTANCE_LABEL = "app.kubernetes.io/instance"
DEFAULT_PORT = 50050
_OWN_SECRET_SUFFIX = "-scheduler-tls"

Pod = Mapping[str, Any]


class ChartError(Exception):
    """The chart's scheduler cannot be found or chosen: the message says why and what to
    give instead."""


@dataclass(frozen=True)
class Scheduler:
    """The scheduler pod to reach and how."""

    namespace: str
    pod: str
    port: int
    #: The Secret with the ops certificate (ca.crt, tls.crt, tls.key); None: plaintext.
    ops_secret: str | None
    #: The leader election Lease's name, when the release runs under leader election.
    lease: str | None


def ready(pod: Pod) -> bool:
    """Running, and its Ready condition is True."""
    status = pod.get("status") or {}
    conditions = status.get("conditions") or []
    ready_now = any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)
    return bool(status.get("phase") == "Running" and ready_now)


def describe(pod: Pod) -> Scheduler:
    """How to reach this scheduler pod."""
    meta = pod.get("metadata") or {}
    spec = pod.get("spec") or {}
    containers = spec.get("containers") or [{}]
    container = next((c for c in containers if c.get("name") == "scheduler"), containers[0])
    args = [str(a) for a in container.get("args") or []]
    port = next(
        (int(p["containerPort"]) for p in container.get("ports") or [] if p.get("name") == "grpc"),
        DEFAULT_PORT,
    )
    return Scheduler(
        namespace=str(meta.get("namespace") or ""),
        pod=str(meta.get("name") or ""),
        port=port,
        ops_secret=_ops_secret(spec, args),
        lease=_flag(args, "--lease-name") if "--leader-elect" in args else None,
    )


def choose(pods: Sequence[Pod], *, where: str) -> list[Scheduler]:
    """The ready scheduler pods of the one release among ``pods`` (several: a leader and
    standbys); ChartError when there is none or several releases. ``where`` names the
    namespaces looked in, for the message."""
    live = [p for p in pods if ready(p)]
    if not live:
        seen = f" ({len(pods)} not ready)" if pods else ""
        raise ChartError(
            f"no ready splitsched scheduler pod in {where}{seen}: install the chart, or give "
            "--server (e.g. what `splitsched up` printed)"
        )
    releases = sorted({_release(p) for p in live})
    if len(releases) > 1:
        raise ChartError(
            f"several splitsched releases in {where} ({', '.join(releases)}): give "
            "--splitsched-namespace, or --server"
        )
    return sorted((describe(p) for p in live), key=lambda s: s.pod)


def leader(candidates: Sequence[Scheduler], holder: str | None) -> Scheduler:
    """The Lease holder among ``candidates`` (it alone decides and streams decisions),
    else the first: a standby answers the read RPCs from its own view."""
    return next((s for s in candidates if s.pod == holder), candidates[0])


def _release(pod: Pod) -> str:
    meta = pod.get("metadata") or {}
    labels = meta.get("labels") or {}
    return f"{meta.get('namespace')}/{labels.get(INSTANCE_LABEL, '?')}"


def _flag(args: Sequence[str], flag: str) -> str | None:
    """The value of ``--flag=value`` or ``--flag value`` in a container's args."""
    for i, arg in enumerate(args):
        if arg.startswith(f"{flag}="):
            return arg.partition("=")[2]
        if arg == flag and i + 1 < len(args):
            return args[i + 1]
    return None


def _ops_secret(spec: Mapping[str, Any], args: Sequence[str]) -> str | None:
    """The ops certificate's Secret: beside the scheduler's own (``<fullname>-ops-tls``),
    or the shared one itself; None when the scheduler serves plaintext."""
    if not any(a == "--tls-cert" or a.startswith("--tls-cert=") for a in args):
        return None
    own = next(
        (
            str((v.get("secret") or {}).get("secretName") or "")
            for v in spec.get("volumes") or []
            if v.get("name") == "tls"
        ),
        "",
    )
    if not own:
        raise ChartError(
            "the scheduler serves TLS but mounts no 'tls' Secret: give --ca --cert --key"
        )
    if own.endswith(_OWN_SECRET_SUFFIX):
        return own.removesuffix(_OWN_SECRET_SUFFIX) + "-ops-tls"
    return own  # tls.secretName: one Secret, one identity for everyone
