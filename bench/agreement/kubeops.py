"""What a run does to the API server: nodes, namespaces and pods, and each pod's outcome.

A pod's outcome is what the API shows, never what a scheduler says of itself: bound
(``spec.nodeName``) or a FailedScheduling Event (its message is what is compared; the
scheduler that wrote it is checked too). Polls every 50 ms: one pod at a time, so the
lists are small.
"""

from __future__ import annotations

import copy
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from kubernetes import client
from kubernetes.client.rest import ApiException

from splitsched.testing import invariants, kube

Manifest = dict[str, Any]

POLL = 0.05
#: Taints the node lifecycle controller adds while a node is new or not ready.
TRANSIENT_TAINTS = frozenset({"node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable"})


@dataclass(frozen=True)
class Observed:
    """One pod's first outcome as the API shows it."""

    node: str | None
    message: str | None  # the FailedScheduling Event's message
    reporter: str = ""  # who wrote that Event (reportingController / source)
    timed_out: bool = False


def create_nodes(api: client.ApiClient, manifests: Sequence[Manifest], *, timeout: float) -> None:
    """Create the nodes, wait until kwok has them Ready and no transient taint is left."""
    core = client.CoreV1Api(api)
    for node in manifests:
        core.create_node(node)
    names = {n["metadata"]["name"] for n in manifests}
    kube.wait_nodes_ready(api, names=names, timeout=timeout)

    def settled() -> bool:
        items = invariants.list_json(api, "/api/v1/nodes")
        return not any(
            t.get("key") in TRANSIENT_TAINTS
            for n in items
            if n["metadata"]["name"] in names
            for t in (n.get("spec") or {}).get("taints") or []
        )

    kube.wait_for(settled, timeout=timeout, interval=0.2, message="nodes without transient taints")


def node_taints(api: client.ApiClient, names: Iterable[str]) -> dict[str, list[Manifest]]:
    """The taints the API shows on each named node (what both schedulers see)."""
    wanted = set(names)
    return {
        n["metadata"]["name"]: [
            {k: v for k, v in t.items() if k != "timeAdded"}
            for t in (n.get("spec") or {}).get("taints") or []
        ]
        for n in invariants.list_json(api, "/api/v1/nodes")
        if n["metadata"]["name"] in wanted
    }


def node_names(api: client.ApiClient) -> set[str]:
    return {n["metadata"]["name"] for n in invariants.list_json(api, "/api/v1/nodes")}


def create_pod(api: client.ApiClient, manifest: Manifest) -> str:
    """Create the pod in its metadata.namespace; returns its uid."""
    ns = manifest["metadata"]["namespace"]
    created = client.CoreV1Api(api).create_namespaced_pod(ns, manifest)
    return str(created.metadata.uid)


def pinned(manifest: Manifest, node: str, *, suffix: str = "-pin") -> Manifest:
    """A copy of the pod already on ``node`` (spec.nodeName): what the other run placed."""
    out = copy.deepcopy(manifest)
    out["metadata"]["name"] += suffix
    out["spec"]["nodeName"] = node
    return out


def ungated(manifest: Manifest) -> Manifest:
    """The pod without scheduling gates (the manifest itself if it has none)."""
    if not manifest["spec"].get("schedulingGates"):
        return manifest
    out = copy.deepcopy(manifest)
    del out["spec"]["schedulingGates"]
    return out


def hold_gated(
    api: client.ApiClient, namespace: str, name: str, uid: str, *, seconds: float
) -> bool:
    """Watch a gated pod for ``seconds``, then remove its gates. True if nothing touched it
    meanwhile: not bound, no FailedScheduling Event, PodScheduled still the API server's
    False/SchedulingGated."""
    core = client.CoreV1Api(api)
    deadline = time.monotonic() + seconds
    kept = True
    while kept and time.monotonic() < deadline:
        time.sleep(POLL)
        pod = core.read_namespaced_pod(name, namespace)
        reasons = [c.reason for c in pod.status.conditions or [] if c.type == "PodScheduled"]
        kept = (
            not pod.spec.node_name
            and reasons == ["SchedulingGated"]
            and failed_scheduling(api, namespace, uid) is None
        )
    core.patch_namespaced_pod(name, namespace, {"spec": {"schedulingGates": None}})
    return kept


def delete_pod(api: client.ApiClient, namespace: str, name: str, *, timeout: float = 30) -> None:
    """Delete at once (grace 0) and wait until the API no longer has it."""
    core = client.CoreV1Api(api)
    try:
        core.delete_namespaced_pod(name, namespace, grace_period_seconds=0)
    except ApiException as exc:
        if exc.status != 404:
            raise

    def gone() -> bool:
        try:
            core.read_namespaced_pod(name, namespace)
        except ApiException as exc:
            if exc.status == 404:
                return True
            raise
        return False

    kube.wait_for(gone, timeout=timeout, interval=POLL, message=f"pod {namespace}/{name} gone")


def failed_scheduling(api: client.ApiClient, namespace: str, uid: str) -> Mapping[str, Any] | None:
    """The pod's first FailedScheduling Event (core/v1 view of either Event API), or None."""
    selector = f"involvedObject.uid={uid},reason=FailedScheduling"
    items = invariants.list_json(
        api, f"/api/v1/namespaces/{namespace}/events?fieldSelector={selector}"
    )
    if not items:
        return None
    return min(
        items,
        key=lambda e: (e.get("eventTime") or e.get("firstTimestamp") or "", e["metadata"]["name"]),
    )


def wait_outcome(
    api: client.ApiClient, namespace: str, name: str, uid: str, *, timeout: float
) -> Observed:
    """Poll until the pod is bound or has a FailedScheduling Event (whichever the API shows
    first); ``timed_out`` when neither came within ``timeout`` seconds."""
    core = client.CoreV1Api(api)
    deadline = time.monotonic() + timeout
    while True:
        pod = core.read_namespaced_pod(name, namespace)
        if pod.spec.node_name:
            return Observed(node=pod.spec.node_name, message=None)
        event = failed_scheduling(api, namespace, uid)
        if event is not None:
            reporter = event.get("reportingComponent") or (event.get("source") or {}).get(
                "component", ""
            )
            return Observed(node=None, message=str(event.get("message") or ""), reporter=reporter)
        if time.monotonic() > deadline:
            return Observed(node=None, message=None, timed_out=True)
        time.sleep(POLL)
