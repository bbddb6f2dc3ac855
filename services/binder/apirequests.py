"""Every request the binder makes to the API server, built as a value before it is sent.

An ``ApiRequest`` holds the method, path and body, and what its answer means: which
answers are worth another try (``retryable``) and which besides a 2xx mean the write is
done (``done_codes``). ``services.binder.kubeapi.KubeClient.send`` sends one;
``services.binder.retrying`` retries one. No I/O here (lightkube's split between
``prepare_request`` and sending).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

from services.binder import classify
from services.binder.claims import BOUND_BY_CONTROLLER, SELECTED_NODE, ClaimRef
from services.binder.deviceclaims import unreserve_patch
from services.binder.events import micro_time
from services.binder.jobs import BindJob, ClaimWrite, PodKey, VolumeBinding

JSON = "application/json"
#: A list as a ``meta.k8s.io/v1`` Table (what ``kubectl get`` reads), JSON.
TABLE = "application/json;as=Table;v=v1;g=meta.k8s.io"
STRATEGIC_MERGE_PATCH = "application/strategic-merge-patch+json"
MERGE_PATCH = "application/merge-patch+json"


@dataclass(frozen=True)
class ApiRequest:
    """One API request and the meaning of its answers."""

    method: str
    path: str
    body: Any = None
    content_type: str = JSON
    #: Which answers are worth trying again (the retry loop's question).
    retryable: Callable[[classify.Answer], bool] = classify.retryable_status
    #: Answers besides 2xx that mean the write is done.
    done_codes: frozenset[int] = frozenset()
    #: What the request does, for log lines ("event FailedScheduling for ns/p").
    what: str = ""
    #: The Accept header when not plain JSON.
    accept: str = ""

    def done(self, answer: classify.Answer) -> bool:
        return answer.status < 300 or answer.status in self.done_codes


def _pod_path(namespace: str, name: str, sub: str = "") -> str:
    path = f"/api/v1/namespaces/{quote(namespace)}/pods/{quote(name)}"
    return f"{path}/{sub}" if sub else path


def binding(job: BindJob) -> ApiRequest:
    """POST pods/{name}/binding with the pod's uid as a precondition."""
    body = {
        "apiVersion": "v1",
        "kind": "Binding",
        "metadata": {"name": job.name, "namespace": job.namespace, "uid": job.uid},
        "target": {"apiVersion": "v1", "kind": "Node", "name": job.node},
    }
    path = _pod_path(job.namespace, job.name, "binding")
    return ApiRequest("POST", path, body, what=f"binding {job.pod} to {job.node}")


def read_pod(namespace: str, name: str, *, cached: bool = False) -> ApiRequest:
    """GET the pod; ``cached``: from the API server's watch cache (``resourceVersion=0``,
    no etcd read; it may lag the newest write a little)."""
    path = _pod_path(namespace, name) + ("?resourceVersion=0" if cached else "")
    return ApiRequest("GET", path, what=f"pod {namespace}/{name}")


def read_node(name: str, *, cached: bool = False) -> ApiRequest:
    """GET the node; ``cached`` as for ``read_pod``."""
    path = f"/api/v1/nodes/{quote(name)}" + ("?resourceVersion=0" if cached else "")
    return ApiRequest("GET", path, what=f"node {name}")


def list_node_names() -> ApiRequest:
    """LIST the nodes from the API server's watch cache as a Table without the objects: a
    row of short cells per node, the name first (150 bytes a node; metadata alone is 2 KB,
    most of it managedFields: 0.75 MB against 10 MB at 5,000 kwok nodes)."""
    path = "/api/v1/nodes?resourceVersion=0&includeObject=None"
    return ApiRequest("GET", path, accept=TABLE, what="node names")


def table_names(body: Any) -> list[str] | None:
    """The name cell of each row of a ``meta.k8s.io`` Table (the column whose format is
    ``name``); None when ``body`` is no such table."""
    columns = body.get("columnDefinitions") if isinstance(body, dict) else None
    rows = body.get("rows") if isinstance(body, dict) else None
    if not isinstance(columns, list) or not isinstance(rows, list):
        return None
    formats = [c.get("format") if isinstance(c, dict) else None for c in columns]
    if "name" not in formats:
        return None
    at = formats.index("name")
    names = []
    for row in rows:
        cells = row.get("cells") if isinstance(row, dict) else None
        if isinstance(cells, list) and len(cells) > at and isinstance(cells[at], str):
            names.append(cells[at])
    return names


def create_event(event: dict[str, Any]) -> ApiRequest:
    """Create an ``events.k8s.io/v1`` Event (a 409: an earlier try whose answer was lost
    created it, the name being the same)."""
    namespace = event["metadata"]["namespace"]
    regarding = event["regarding"]["name"]
    return ApiRequest(
        "POST", f"/apis/events.k8s.io/v1/namespaces/{quote(namespace)}/events", event,
        retryable=classify.retryable_create, done_codes=frozenset({409}),
        what=f"event {event['reason']} for {namespace}/{regarding}",
    )  # fmt: skip


def unschedulable_condition(pod: PodKey, *, reason: str, message: str, now: float) -> ApiRequest:
    """A strategic-merge PATCH of pods/{name}/status setting PodScheduled=False."""
    condition = {
        "type": "PodScheduled",
        "status": "False",
        "reason": reason,
        "message": message,
        "lastProbeTime": None,
        "lastTransitionTime": micro_time(now)[:19] + "Z",
    }
    return ApiRequest(
        "PATCH", _pod_path(pod.namespace, pod.name, "status"),
        {"status": {"conditions": [condition]}}, STRATEGIC_MERGE_PATCH,
        what=f"PodScheduled condition of {pod}",
    )  # fmt: skip


def nomination(preemptor: PodKey, node: str) -> ApiRequest:
    """A merge PATCH of the preemptor's ``status.nominatedNodeName``. metadata.uid in a
    merge patch is checked: another uid is refused (422, immutable)."""
    patch = {"metadata": {"uid": preemptor.uid}, "status": {"nominatedNodeName": node}}
    return ApiRequest(
        "PATCH", _pod_path(preemptor.namespace, preemptor.name, "status"), patch, MERGE_PATCH,
        what=f"nominatedNodeName of {preemptor}",
    )  # fmt: skip


def eviction(victim: PodKey) -> ApiRequest:
    """POST a policy/v1 Eviction, the pod's uid as a precondition. The API server checks
    PodDisruptionBudgets: 429 when one forbids the eviction."""
    body = {
        "apiVersion": "policy/v1",
        "kind": "Eviction",
        "metadata": {"name": victim.name, "namespace": victim.namespace},
        "deleteOptions": {"preconditions": {"uid": victim.uid}},
    }
    return ApiRequest(
        "POST", _pod_path(victim.namespace, victim.name, "eviction"), body,
        retryable=classify.retryable_eviction, what=f"eviction of {victim}",
    )  # fmt: skip


def _claim_path(namespace: str, name: str) -> str:
    return f"/api/v1/namespaces/{quote(namespace)}/persistentvolumeclaims/{quote(name)}"


def read_claim(volume: VolumeBinding) -> ApiRequest:
    """GET the claim from etcd (not the watch cache): the volume step decides on it."""
    return ApiRequest("GET", _claim_path(volume.namespace, volume.claim), what=f"claim {volume}")


def read_pv(name: str) -> ApiRequest:
    return ApiRequest("GET", f"/api/v1/persistentvolumes/{quote(name)}", what=f"PV {name}")


def bind_pv(
    pv: str, *, resource_version: str, claim: ClaimRef, bound_by_controller: bool
) -> ApiRequest:
    """A merge PATCH of the PV's ``spec.claimRef`` to ``claim``, as kube-scheduler's
    volume binder writes it (``GetBindVolumeToClaim``: the claim's reference, and the
    ``bound-by-controller`` annotation unless the PV was pre-bound to the claim by name).
    ``resource_version`` makes it conditional like kube's Update: 409 if the PV changed
    since it was read. The PV controller then binds the claim."""
    meta: dict[str, Any] = {"resourceVersion": resource_version}
    if bound_by_controller:
        meta["annotations"] = {BOUND_BY_CONTROLLER: "yes"}
    claim_ref = {
        "kind": "PersistentVolumeClaim",
        "apiVersion": "v1",
        "namespace": claim.namespace,
        "name": claim.name,
        "uid": claim.uid,
        "resourceVersion": claim.resource_version,
        "fieldPath": None,  # a merge patch keeps fields it does not name: clear the rest
    }
    return ApiRequest(
        "PATCH", f"/api/v1/persistentvolumes/{quote(pv)}",
        {"metadata": meta, "spec": {"claimRef": claim_ref}}, MERGE_PATCH,
        retryable=classify.retryable_create,
        what=f"claimRef of PV {pv} to {claim.namespace}/{claim.name}",
    )  # fmt: skip


def select_node(volume: VolumeBinding, *, node: str, resource_version: str) -> ApiRequest:
    """A merge PATCH annotating the claim ``volume.kubernetes.io/selected-node=<node>``
    for its provisioner (kube-scheduler updates the claim the same way, 409 if it
    changed since it was read)."""
    patch = {"metadata": {"resourceVersion": resource_version,
                          "annotations": {SELECTED_NODE: node}}}  # fmt: skip
    return ApiRequest(
        "PATCH", _claim_path(volume.namespace, volume.claim), patch, MERGE_PATCH,
        retryable=classify.retryable_create, what=f"selected-node of claim {volume}",
    )  # fmt: skip


def _resource_claim_path(write: ClaimWrite, sub: str = "") -> str:
    path = (
        f"/apis/resource.k8s.io/v1/namespaces/{quote(write.namespace)}/resourceclaims/"
        f"{quote(write.name)}"
    )
    return f"{path}/{sub}" if sub else path


def read_resource_claim(write: ClaimWrite) -> ApiRequest:
    """GET the ResourceClaim from etcd (not the watch cache): the device step decides on it."""
    return ApiRequest("GET", _resource_claim_path(write), what=f"resourceclaim {write}")


def update_resource_claim(write: ClaimWrite, body: Any) -> ApiRequest:
    """PUT the claim as read with the finalizer added: kube-scheduler's Update, conditional
    on the body's resourceVersion (409 when the claim changed since it was read)."""
    return ApiRequest(
        "PUT", _resource_claim_path(write), body, retryable=classify.retryable_create,
        what=f"finalizer of resourceclaim {write}",
    )  # fmt: skip


def update_resource_claim_status(write: ClaimWrite, body: Any, *, allocates: bool) -> ApiRequest:
    """PUT the claim's status (kube-scheduler's UpdateStatus): the allocation when
    ``allocates``, and the pod appended to reservedFor; conditional like the update."""
    what = "allocation and reservation" if allocates else "reservation"
    return ApiRequest(
        "PUT", _resource_claim_path(write, "status"), body, retryable=classify.retryable_create,
        what=f"{what} of resourceclaim {write}",
    )  # fmt: skip


def deallocate_resource_claim(claim: ClaimWrite, body: Any) -> ApiRequest:
    """PUT the claim's status with its allocation and reservations cleared (kube-scheduler's
    PostFilter deallocation); conditional on the body's resourceVersion."""
    return ApiRequest(
        "PUT", _resource_claim_path(claim, "status"), body, retryable=classify.retryable_create,
        what=f"deallocation of resourceclaim {claim}",
    )  # fmt: skip


def unreserve_resource_claim(write: ClaimWrite, pod: PodKey) -> ApiRequest:
    """kube-scheduler's Unreserve: a strategic-merge PATCH of the claim's status removing
    ``pod`` from reservedFor (``deviceclaims.unreserve_patch``)."""
    return ApiRequest(
        "PATCH", _resource_claim_path(write, "status"), unreserve_patch(write.uid, pod),
        STRATEGIC_MERGE_PATCH, retryable=classify.retryable_create,
        what=f"reservation of resourceclaim {write} for {pod}",
    )  # fmt: skip
