"""The Kubernetes calls `splitsched up` makes before it starts anything: open the
kubeconfig (and its context), ask who the identity is (SelfSubjectReview) and whether it
may do each thing the services need (one SelfSubjectAccessReview per `access.Access`).

Every failure is an `UpError` whose message names the kubeconfig, the context or the
server, and whose code is the command's exit code.
"""

from __future__ import annotations

from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import urllib3
from kubernetes import client
from kubernetes import config as kube_config
from kubernetes.client.rest import ApiException

from splitsched.apiclient import EXIT_BAD_INPUT, EXIT_UNAVAILABLE
from splitsched.up import access


class UpError(Exception):
    """`splitsched up` cannot go on: the message for the user and the exit code."""

    def __init__(self, message: str, code: int) -> None:
        super().__init__(message)
        self.code = code


@dataclass(frozen=True)
class Cluster:
    """An API client for one kubeconfig context, and what to call it in messages."""

    api: client.ApiClient
    server: str
    context: str


def connect(kubeconfig: Path, context: str | None) -> Cluster:
    """A client for ``context`` (default: the current one) of ``kubeconfig``; UpError
    (bad input) naming what is wrong with the file or the context."""
    where = f"kubeconfig {kubeconfig}"
    if not kubeconfig.is_file():
        raise UpError(f"{where}: no such file", EXIT_BAD_INPUT)
    try:
        contexts, current = kube_config.list_kube_config_contexts(config_file=str(kubeconfig))
    except Exception as exc:  # the loader raises several kinds
        raise UpError(f"{where}: {exc}", EXIT_BAD_INPUT) from None
    names = [c["name"] for c in contexts or []]
    chosen = context or (current or {}).get("name")
    if chosen not in names:
        has = ", ".join(names) or "none"
        what = f"no context {chosen!r}" if chosen else "no current context (give --context)"
        raise UpError(f"{where}: {what}; it has: {has}", EXIT_BAD_INPUT)
    try:
        api = kube_config.new_client_from_config(
            config_file=str(kubeconfig), context=chosen, persist_config=False
        )
    except Exception as exc:
        raise UpError(f"{where} (context {chosen}): {exc}", EXIT_BAD_INPUT) from None
    return Cluster(api=api, server=str(api.configuration.host), context=str(chosen))


def who_am_i(cluster: Cluster) -> str | None:
    """The user name the API server knows this identity by (SelfSubjectReview,
    Kubernetes 1.28+); None when it will not say."""
    body = {"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"}
    try:
        answer = _call(
            cluster, client.AuthenticationV1Api(cluster.api).create_self_subject_review, body
        )
    except ApiException:
        return None
    user = answer.status.user_info if answer.status else None
    return str(user.username) if user and user.username else None


def missing(cluster: Cluster, wanted: Sequence[access.Access]) -> list[access.Access]:
    """Those of ``wanted`` the API server does not allow this identity, in order."""
    authz = client.AuthorizationV1Api(cluster.api)

    def allowed(a: access.Access) -> bool:
        try:
            answer = _call(cluster, authz.create_self_subject_access_review, access.review(a))
        except ApiException as exc:
            raise UpError(
                f"{cluster.server}: cannot review this identity's rights "
                f"(SelfSubjectAccessReview: {exc.status} {exc.reason})",
                EXIT_UNAVAILABLE,
            ) from None
        return bool(answer.status and answer.status.allowed)

    with ThreadPoolExecutor(max_workers=8) as pool:
        verdicts = list(pool.map(allowed, wanted))
    return [a for a, ok in zip(wanted, verdicts, strict=True) if not ok]


def _call(cluster: Cluster, method: Any, body: Any) -> Any:
    """``method(body)``, with a network failure as an UpError naming the server."""
    try:
        return method(body, _request_timeout=30)
    except (urllib3.exceptions.HTTPError, OSError) as exc:
        reason = getattr(exc, "reason", None) or exc
        raise UpError(
            f"cannot reach the API server at {cluster.server} (context {cluster.context}): "
            f"{reason}",
            EXIT_UNAVAILABLE,
        ) from None
