"""The ``devices`` workload's cluster: GPUs published by a stand-in DRA driver, a claim
template per run, and the check that every pod got a GPU of its node, none twice.

Called by ``bench.sidebyside.runner``. Before the first run, every kwok node gets one
ResourceSlice (its own pool) of ``GPUS_PER_NODE`` GPUs on two PCIe roots, with a model
attribute and 80Gi of memory, and the DeviceClass ``bench-gpu`` selects them (CEL). Each
run's namespace gets the ResourceClaimTemplate ``one-gpu`` (one GPU of the class whose model
is "H100"); kube-controller-manager's resourceclaim controller makes each measured pod's
claim from it, and the harness waits for all of them before it starts the contender, so
both contenders start from the same claims. kube-scheduler (its DynamicResources plugin, on
by default in 1.36) and splitsched each allocate the GPUs and write the claims' status
before the Binding. After the run every claim must hold one GPU of its pod's node and be
reserved for the pod, and no GPU may be in two claims, or the run fails. Then the harness
deletes the pods and deallocates and deletes the claims itself (`release`), before the
namespace goes.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from kubernetes import client

from bench.sidebyside import kubeio

DEVICE_CLASS = "bench-gpu"
DRIVER = "gpu.bench.example.com"
TEMPLATE = "one-gpu"
GPUS_PER_NODE = 8
MODEL_SELECTOR = f'device.attributes["{DRIVER}"].model == "H100"'


def slice_for(node: str) -> dict[str, Any]:
    """The node's ResourceSlice: GPUs 0-3 on PCIe root 0, 4-7 on root 1."""
    half = GPUS_PER_NODE // 2
    devices = [
        {
            "name": f"gpu-{i}",
            "attributes": {
                "model": {"string": "H100"},
                "pcieRoot": {"string": f"root-{i // half}"},
            },
            "capacity": {"memory": {"value": "80Gi"}},
        }
        for i in range(GPUS_PER_NODE)
    ]
    pool = {"name": node, "generation": 1, "resourceSliceCount": 1}
    spec = {"driver": DRIVER, "nodeName": node, "pool": pool, "devices": devices}
    return {"metadata": {"name": f"bench-gpus-{node}"}, "spec": spec}


def publish(api: client.ApiClient, nodes: Sequence[str]) -> None:
    """The DeviceClass and every node's slice (a slice already there is kept)."""
    resource = client.ResourceV1Api(api)
    selector = {"cel": {"expression": f'device.driver == "{DRIVER}"'}}
    _created(resource.create_device_class,
             {"metadata": {"name": DEVICE_CLASS}, "spec": {"selectors": [selector]}})  # fmt: skip
    for node in nodes:
        _created(resource.create_resource_slice, slice_for(node))


def _created(create: Any, body: dict[str, Any]) -> None:
    try:
        create(body)
    except client.ApiException as exc:
        if exc.status != 409:
            raise


def create_template(api: client.ApiClient, namespace: str) -> None:
    exactly = {
        "deviceClassName": DEVICE_CLASS,
        "selectors": [{"cel": {"expression": MODEL_SELECTOR}}],
    }
    body = {
        "metadata": {"name": TEMPLATE},
        "spec": {"spec": {"devices": {"requests": [{"name": "gpu", "exactly": exactly}]}}},
    }
    client.ResourceV1Api(api).create_namespaced_resource_claim_template(namespace, body)


def with_claim(pod: dict[str, Any]) -> dict[str, Any]:
    """The measured pod, with one claim from the run's template."""
    pod["spec"]["resourceClaims"] = [{"name": "gpu", "resourceClaimTemplateName": TEMPLATE}]
    pod["spec"]["containers"][0]["resources"]["claims"] = [{"name": "gpu"}]
    return pod


async def wait_claims_made(io: kubeio.KubeIO, namespace: str, count: int, *, within: float) -> None:
    """Until every measured pod's status names the claim kube-controller-manager made."""
    deadline = time.monotonic() + within
    while True:
        listing = await io.list_pods(namespace, label_selector="splitsched.io/bench=measured")
        made = sum(1 for p in listing["items"] if _claim_name(p))
        if made >= count:
            return
        if time.monotonic() > deadline:
            raise TimeoutError(f"{made}/{count} pods' claims made after {within:.0f}s")
        await asyncio.sleep(0.5)


def _claim_name(pod: dict[str, Any]) -> str:
    statuses = (pod.get("status") or {}).get("resourceClaimStatuses") or []
    return next((str(s["resourceClaimName"]) for s in statuses if s.get("resourceClaimName")), "")


def allocation_problems(api: client.ApiClient, namespace: str) -> list[str]:
    """What is wrong with the run's claims: a bound pod whose claim holds no GPU of its
    node or is not reserved for it, a GPU in two claims."""
    core, resource = client.CoreV1Api(api), client.ResourceV1Api(api)
    claims = {c.metadata.name: c for c in resource.list_namespaced_resource_claim(namespace).items}
    pods = core.list_namespaced_pod(namespace, label_selector="splitsched.io/bench=measured")
    problems, holders = [], dict[tuple[str, str], str]()
    for pod in pods.items:
        statuses = pod.status.resource_claim_statuses or []
        claim = claims.get(statuses[0].resource_claim_name) if statuses else None
        if claim is None or claim.status is None or claim.status.allocation is None:
            problems.append(f"pod {pod.metadata.name}: claim not allocated")
            continue
        results = claim.status.allocation.devices.results
        if len(results) != 1 or results[0].pool != pod.spec.node_name:
            problems.append(f"pod {pod.metadata.name} on {pod.spec.node_name}: {results}")
        if [r.uid for r in claim.status.reserved_for or []] != [pod.metadata.uid]:
            problems.append(f"pod {pod.metadata.name}: claim not reserved for it alone")
        for r in results:
            other = holders.setdefault((r.pool, r.device), pod.metadata.name)
            if other != pod.metadata.name:
                problems.append(f"{r.pool}/{r.device} given to {other} and {pod.metadata.name}")
    return problems


def release(api: client.ApiClient, namespace: str, *, within: float = 300.0) -> None:
    """Delete the run's pods, then deallocate and delete its claims, before its namespace
    goes: the harness finalizes a deleted namespace itself (``kube.delete_namespace``), and
    a claim left allocated there, with its finalizer, would hold its GPU for the runs
    after. The pods go first, so that no controller makes their claims again."""
    deadline = time.monotonic() + within
    core = client.CoreV1Api(api)
    core.delete_collection_namespaced_pod(namespace, grace_period_seconds=0)
    _wait_until(lambda: not core.list_namespaced_pod(namespace, limit=1).items, deadline,
                f"pods of {namespace} not deleted")  # fmt: skip
    custom = client.CustomObjectsApi(api)
    args = ("resource.k8s.io", "v1", namespace, "resourceclaims")

    def free(claim: dict[str, Any]) -> None:
        name = claim["metadata"]["name"]
        cleared = {"status": {"allocation": None, "reservedFor": None}}
        _ignore_missing(custom.patch_namespaced_custom_object_status, *args, name, cleared)
        unprotected = {"metadata": {"finalizers": None}}
        _ignore_missing(custom.patch_namespaced_custom_object, *args, name, unprotected)
        _ignore_missing(custom.delete_namespaced_custom_object, *args, name)

    with ThreadPoolExecutor(max_workers=16) as pool:
        list(pool.map(free, custom.list_namespaced_custom_object(*args)["items"]))
    _wait_until(lambda: not custom.list_namespaced_custom_object(*args, limit=1)["items"],
                deadline, f"claims of {namespace} not deleted")  # fmt: skip


def _wait_until(done: Callable[[], bool], deadline: float, failure: str) -> None:
    while not done():
        if time.monotonic() > deadline:
            raise TimeoutError(failure)
        time.sleep(0.5)


def _ignore_missing(call: Any, *args: Any) -> None:
    try:
        call(*args)
    except client.ApiException as exc:
        if exc.status != 404:
            raise


def withdraw(api: client.ApiClient, nodes: Sequence[str]) -> None:
    resource = client.ResourceV1Api(api)
    for name in [f"bench-gpus-{n}" for n in nodes]:
        _deleted(resource.delete_resource_slice, name)
    _deleted(resource.delete_device_class, DEVICE_CLASS)


def _deleted(delete: Any, name: str) -> None:
    try:
        delete(name)
    except client.ApiException as exc:
        if exc.status != 404:
            raise
