"""Kubernetes helpers for tests, the demo and the benchmarks, on the real control plane.

Callers: ``tests/support/fixtures.py`` (the ``namespace`` fixture), the integration and e2e
tests, ``splitsched.demo`` and ``bench``. Everything here talks to a kube-apiserver through
the official ``kubernetes`` client with plain dict manifests:

* ``create_kwok_nodes`` creates Nodes that kwok manages (annotation
  ``kwok.x-k8s.io/node=fake``, label ``type=kwok``) and waits until kwok marks them Ready;
* ``make_pod`` / ``make_pods`` / ``create_pods`` build and create pending pods addressed to
  a scheduler (``schedulerName: splitsched`` by default; the builders live in
  ``splitsched.testing.manifests`` and are re-exported here);
* ``create_namespace`` / ``delete_namespace`` give each test its own namespace (and finalize
  it, since there is no kube-controller-manager to do so);
* ``bind_pod`` POSTs a ``Binding`` (the client cannot decode that response, so it is read raw);
* ``service_account_kubeconfig`` writes a kubeconfig for a ServiceAccount with exactly the
  RBAC rules given, using a TokenRequest token (``splitsched.testing.serviceaccounts``);
* ``create_priority_classes`` / ``create_pdb`` set up preemption
  tests (the PDB with the status a disruption controller would publish: none runs here).
"""

from __future__ import annotations

import functools
import time
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar, Unpack

from kubernetes import client
from kubernetes.client.rest import ApiException

from splitsched.testing.manifests import (
    DEFAULT_SCHEDULER_NAME,
    PAUSE_IMAGE,
    TEST_NAMESPACE_LABEL,
    Manifest,
    NodeShape,
    make_node,
    make_pod,
    make_pods,
)
from splitsched.testing.serviceaccounts import service_account_kubeconfig

T = TypeVar("T")

__all__ = [
    "DEFAULT_SCHEDULER_NAME",
    "PAUSE_IMAGE",
    "TEST_NAMESPACE_LABEL",
    "Manifest",
    "NodeShape",
    "WaitTimeout",
    "api_client_from_kubeconfig",
    "bind_pod",
    "create_kwok_nodes",
    "create_namespace",
    "create_pdb",
    "create_pods",
    "create_priority_classes",
    "delete_namespace",
    "delete_nodes",
    "delete_priority_classes",
    "get_pod",
    "make_node",
    "make_pod",
    "make_pods",
    "node_is_ready",
    "service_account_kubeconfig",
    "wait_for",
    "wait_nodes_ready",
    "wait_pdb_observed",
]


class WaitTimeout(AssertionError):
    """A condition did not become true in time (an AssertionError, so tests fail on it)."""


def wait_for(
    predicate: Callable[[], T | None],
    *,
    timeout: float = 30.0,
    interval: float = 0.2,
    message: str = "condition",
) -> T:
    """Poll ``predicate`` until it returns something truthy and return that."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise WaitTimeout(f"timed out after {timeout:.0f}s waiting for {message}")
        time.sleep(interval)


def api_client_from_kubeconfig(path: Path | str) -> client.ApiClient:
    """An ``ApiClient`` for one kubeconfig file (never touches the global default config)."""
    from kubernetes import config as kube_config

    return kube_config.new_client_from_config(config_file=str(path))


# -- nodes ---------------------------------------------------------------------------------


def node_is_ready(node: Any) -> bool:
    """True when a V1Node (client model) has condition Ready=True."""
    conditions = (node.status.conditions if node.status else None) or []
    return any(c.type == "Ready" and c.status == "True" for c in conditions)


def create_kwok_nodes(
    api: client.ApiClient,
    count: int,
    *,
    name_prefix: str = "kwok-node",
    wait_ready: bool = True,
    timeout: float = 120.0,
    workers: int = 8,
    **shape: Unpack[NodeShape],
) -> list[str]:
    """Create ``count`` kwok Nodes ``<name_prefix>-<i>`` shaped by ``make_node(**shape)``
    and (by default) wait until Ready."""
    core = client.CoreV1Api(api)
    names = [f"{name_prefix}-{i}" for i in range(count)]

    def create(name: str) -> None:
        core.create_node(make_node(name, **shape))

    _parallel(create, names, workers=workers)
    if wait_ready:
        wait_nodes_ready(api, names=names, timeout=timeout)
    return names


def wait_nodes_ready(api: client.ApiClient, *, names: Iterable[str], timeout: float) -> None:
    """Wait until every named node (kwok's or a real kubelet's) reports Ready=True."""
    core = client.CoreV1Api(api)
    pending = set(names)

    def all_ready() -> bool:
        for node in core.list_node().items:
            if node.metadata.name in pending and node_is_ready(node):
                pending.discard(node.metadata.name)
        return not pending

    wait_for(all_ready, timeout=timeout, interval=0.5, message=f"{len(pending)} nodes Ready")


def delete_nodes(api: client.ApiClient, names: Iterable[str], *, workers: int = 8) -> None:
    """Delete nodes (missing ones are ignored)."""
    core = client.CoreV1Api(api)

    def delete(name: str) -> None:
        try:
            core.delete_node(name)
        except ApiException as exc:
            if exc.status != 404:
                raise

    _parallel(delete, list(names), workers=workers)


# -- pods ----------------------------------------------------------------------------------


def create_pods(
    api: client.ApiClient,
    *,
    namespace: str,
    pods: Sequence[Manifest],
    workers: int = 8,
) -> list[str]:
    """Create the pod manifests in ``namespace``; returns their names."""
    core = client.CoreV1Api(api)

    def create(pod: Manifest) -> None:
        core.create_namespaced_pod(namespace, pod)

    _parallel(create, list(pods), workers=workers)
    return [str(p["metadata"]["name"]) for p in pods]


def get_pod(api: client.ApiClient, *, namespace: str, name: str) -> Any:
    """The V1Pod (client model)."""
    return client.CoreV1Api(api).read_namespaced_pod(name, namespace)


def bind_pod(api: client.ApiClient, *, namespace: str, pod: str, node: str) -> int:
    """POST ``pods/<pod>/binding`` to ``node``; returns the HTTP status (201).

    Raises ``ApiException`` (``.status`` 409 when already bound, 403 when not allowed).
    """
    body = {
        "apiVersion": "v1",
        "kind": "Binding",
        "metadata": {"name": pod, "namespace": namespace},
        "target": {"apiVersion": "v1", "kind": "Node", "name": node},
    }
    # The generated client cannot deserialize the Binding response (V1Binding.target is
    # "required" but the response is a Status); read the raw response instead.
    resp = client.CoreV1Api(api).create_namespaced_binding(namespace, body, _preload_content=False)
    status: int = resp.status
    _ = resp.data  # drain the body so the pooled connection can be reused
    resp.release_conn()
    return status


# -- namespaces ----------------------------------------------------------------------------


def create_namespace(
    api: client.ApiClient, *, prefix: str = "test", labels: Mapping[str, str] | None = None
) -> str:
    """Create a uniquely named namespace ``<prefix>-<random>``; returns its name."""
    name = f"{prefix}-{uuid.uuid4().hex[:8]}"[:63].rstrip("-")
    client.CoreV1Api(api).create_namespace(
        {"apiVersion": "v1", "kind": "Namespace",
         "metadata": {"name": name, "labels": dict(labels or {})}}
    )  # fmt: skip
    return name


def delete_namespace(
    api: client.ApiClient, name: str, *, wait: bool = True, timeout: float = 30.0
) -> None:
    """Delete a namespace and what tests put in it, then finalize it.

    Without kube-controller-manager nothing empties a deleted namespace or removes its
    ``kubernetes`` finalizer, so this does both (and deletes cluster-scoped RBAC objects
    labelled ``splitsched.io/test-namespace=<name>``).
    """
    core = client.CoreV1Api(api)
    rbac = client.RbacAuthorizationV1Api(api)
    selector = f"{TEST_NAMESPACE_LABEL}={name}"
    for deleter in (
        rbac.delete_collection_cluster_role_binding,
        rbac.delete_collection_cluster_role,
    ):
        _ignore_404(functools.partial(deleter, label_selector=selector))
    _delete_pods_in_pages(core, name, timeout=timeout)
    for ns_deleter in (
        core.delete_collection_namespaced_service_account,
        core.delete_collection_namespaced_config_map,
        core.delete_collection_namespaced_secret,
        rbac.delete_collection_namespaced_role_binding,
        rbac.delete_collection_namespaced_role,
    ):
        _ignore_404(functools.partial(ns_deleter, name, grace_period_seconds=0))
    _ignore_404(lambda: core.delete_namespace(name, grace_period_seconds=0))

    def finalize() -> None:
        ns = core.read_namespace(name)
        if ns.spec and ns.spec.finalizers:
            ns.spec.finalizers = []
            core.replace_namespace_finalize(name, ns)

    _ignore_404(finalize)
    if wait:

        def gone() -> bool:
            try:
                core.read_namespace(name)
            except ApiException as exc:
                if exc.status == 404:
                    return True
                raise
            return False

        wait_for(gone, timeout=timeout, message=f"namespace {name} to be deleted")


#: Pods deleted per request when a namespace is emptied. One delete-collection of 20,000
#: pods outlasts the API server's request timeout: it answers 5xx and leaves the rest.
POD_DELETE_PAGE = 1000


def _delete_pods_in_pages(core: client.CoreV1Api, namespace: str, *, timeout: float) -> None:
    """Delete a namespace's pods a page at a time (the server honours ``limit`` on a
    delete-collection), retrying a 5xx or 429, until none is left or `timeout` passes."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            resp = core.delete_collection_namespaced_pod(
                namespace, grace_period_seconds=0, limit=POD_DELETE_PAGE, _preload_content=False
            )
            _ = resp.data  # drain the body (the deleted pods) so the connection is reused
            resp.release_conn()
            if not core.list_namespaced_pod(namespace, limit=1).items:
                return
        except ApiException as exc:
            if exc.status == 404:
                return
            retryable = exc.status is not None and (exc.status >= 500 or exc.status == 429)
            if not retryable or time.monotonic() > deadline:
                raise
            time.sleep(1.0)


# -- preemption ----------------------------------------------------------------------------


def create_priority_classes(
    api: client.ApiClient, classes: Mapping[str, tuple[int, str]], *, prefix: str
) -> dict[str, str]:
    """One PriorityClass per key of `classes` (value, preemptionPolicy), named
    ``<prefix>-<key>-<random>`` (they are cluster-scoped); returns key -> class name."""
    sched = client.SchedulingV1Api(api)
    suffix = uuid.uuid4().hex[:5]
    names = {}
    for key, (value, policy) in classes.items():
        name = f"{prefix}-{key}-{suffix}"
        sched.create_priority_class(
            {
                "apiVersion": "scheduling.k8s.io/v1",
                "kind": "PriorityClass",
                "metadata": {"name": name},
                "value": value,
                "preemptionPolicy": policy,
            }
        )
        names[key] = name
    return names


def delete_priority_classes(api: client.ApiClient, names: Mapping[str, str]) -> None:
    sched = client.SchedulingV1Api(api)
    for name in names.values():
        sched.delete_priority_class(name)


def create_pdb(
    api: client.ApiClient,
    *,
    namespace: str,
    name: str,
    spec: Manifest,
    allowed: int | None = None,
    timeout: float = 30.0,
) -> None:
    """A PodDisruptionBudget (`spec`: its selector and minAvailable or maxUnavailable);
    returns once kube-controller-manager's disruption controller has computed its status
    (the Eviction API refuses evictions under a PDB it has not observed), and, with
    ``allowed``, once that status allows exactly that many disruptions."""
    client.PolicyV1Api(api).create_namespaced_pod_disruption_budget(
        namespace,
        {
            "apiVersion": "policy/v1",
            "kind": "PodDisruptionBudget",
            "metadata": {"name": name},
            "spec": spec,
        },
    )
    wait_pdb_observed(api, namespace=namespace, name=name, allowed=allowed, timeout=timeout)


def wait_pdb_observed(
    api: client.ApiClient,
    *,
    namespace: str,
    name: str,
    allowed: int | None = None,
    timeout: float = 30.0,
) -> None:
    """Wait until the disruption controller has observed the PDB's current generation
    (and, with ``allowed``, computed that many allowed disruptions)."""
    policy = client.PolicyV1Api(api)

    def observed() -> bool:
        pdb = policy.read_namespaced_pod_disruption_budget(name, namespace)
        status = pdb.status
        if status is None or (status.observed_generation or 0) < pdb.metadata.generation:
            return False
        return allowed is None or status.disruptions_allowed == allowed

    wanted = "observed" if allowed is None else f"allowing {allowed} disruption(s)"
    wait_for(observed, timeout=timeout, message=f"PDB {namespace}/{name} {wanted}")


# -- internals -----------------------------------------------------------------------------


def _parallel(fn: Callable[[T], None], items: Sequence[T], *, workers: int) -> None:
    if len(items) <= 1 or workers <= 1:
        for item in items:
            fn(item)
        return
    with ThreadPoolExecutor(max_workers=min(workers, len(items))) as pool:
        for _ in pool.map(fn, items):
            pass


def _ignore_404(fn: Callable[[], object]) -> None:
    try:
        fn()
    except ApiException as exc:
        if exc.status != 404:
            raise
