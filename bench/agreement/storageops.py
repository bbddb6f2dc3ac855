"""Creates a run's storage (``storage.Storage``) and removes it, completing the pre-bound
claims as kube-controller-manager's PV binder would.

A claim made with ``spec.volumeName`` and the bind-completed annotation, and its PV with a
``claimRef`` carrying the claim's uid, both with phase Bound, is what the PV binder
leaves behind after binding; when it runs it finds them consistent and keeps them.
Removal deletes first and strips the protection finalizers after: the protection
controllers put a finalizer back on an object that is not being deleted, and a Bound PV
kept "being deleted" blocks the next run's PV of the same name (409 AlreadyExists). It
then waits until each object is gone.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from functools import partial
from typing import Any

from kubernetes import client
from kubernetes.client.rest import ApiException

from bench.agreement import scenario, storage

Manifest = dict[str, Any]


def create(
    api: client.ApiClient, volumes: storage.Storage, prefix: str, namespaces: Mapping[str, str]
) -> list[Manifest]:
    """Create classes, claims, PVs (bound ones after their claim) and CSINodes; returns what
    was created, for ``remove``."""
    core, store = client.CoreV1Api(api), client.StorageV1Api(api)
    made: list[Manifest] = []
    uids: dict[tuple[str, str], str] = {}
    for obj in (o for o in volumes.objects if o["kind"] == "StorageClass"):
        made.append(_create(store.create_storage_class, scenario.render(obj, prefix, namespaces)))
    for claim in volumes.claims:
        body = scenario.render(claim, prefix, namespaces)
        created = core.create_namespaced_persistent_volume_claim(
            body["metadata"]["namespace"], body
        )
        uids[(created.metadata.namespace, created.metadata.name)] = created.metadata.uid
        made.append(body)
    for obj in volumes.objects:
        body = scenario.render(obj, prefix, namespaces)
        if obj["kind"] == "PersistentVolume":
            made.append(_create_pv(core, body, uids))
        elif obj["kind"] == "CSINode":
            made.append(_create(store.create_csi_node, body))
    return made


def _create(create: Any, body: Manifest) -> Manifest:
    create(body)
    return body


def _create_pv(
    core: client.CoreV1Api, pv: Manifest, uids: Mapping[tuple[str, str], str]
) -> Manifest:
    ref = pv["spec"].get("claimRef")
    if ref:
        ref["uid"] = uids[(ref["namespace"], ref["name"])]
    core.create_persistent_volume(pv)
    if ref:
        name = pv["metadata"]["name"]
        core.patch_persistent_volume_status(name, {"status": {"phase": "Bound"}})
        status = {
            "phase": "Bound",
            "accessModes": pv["spec"]["accessModes"],
            "capacity": pv["spec"]["capacity"],
        }
        core.patch_namespaced_persistent_volume_claim_status(
            ref["name"], ref["namespace"], {"status": status}
        )
    return pv


#: How long ``remove`` waits for deleted objects to be gone.
GONE_TIMEOUT = 30.0


def remove(
    api: client.ApiClient, made: Sequence[Manifest], *, timeout: float = GONE_TIMEOUT
) -> None:
    """Delete what ``create`` made (claims included), protection finalizers stripped, and
    wait until every object is gone. Raises ``TimeoutError`` naming what stayed."""
    for obj in reversed(made):
        for step in _removal(api, obj):
            _ignoring_missing(step)
    deadline = time.monotonic() + timeout
    left = [obj for obj in made if obj["kind"] != "StorageClass"]
    while left := [obj for obj in left if _exists(api, obj)]:
        if time.monotonic() > deadline:
            names = ", ".join(f"{o['kind']} {o['metadata']['name']}" for o in left)
            raise TimeoutError(f"still there {timeout:.0f}s after deletion: {names}")
        for obj in left:  # a controller may have put a finalizer back before the delete
            for step in _removal(api, obj)[1:]:
                _ignoring_missing(step)
        time.sleep(0.2)


def _ignoring_missing(step: Callable[[], object]) -> None:
    try:
        step()
    except ApiException as exc:
        if exc.status != 404:
            raise


def _exists(api: client.ApiClient, obj: Manifest) -> bool:
    core, store = client.CoreV1Api(api), client.StorageV1Api(api)
    name, ns = obj["metadata"]["name"], obj["metadata"].get("namespace")
    read: Callable[[], object] = {
        "PersistentVolumeClaim": partial(core.read_namespaced_persistent_volume_claim, name, ns),
        "PersistentVolume": partial(core.read_persistent_volume, name),
        "CSINode": partial(store.read_csi_node, name),
    }[obj["kind"]]
    try:
        read()
    except ApiException as exc:
        if exc.status == 404:
            return False
        raise
    return True


def _removal(api: client.ApiClient, obj: Manifest) -> list[Callable[[], object]]:
    """The object's delete, then (where it has one) the patch lifting its finalizers."""
    core, store = client.CoreV1Api(api), client.StorageV1Api(api)
    name, ns = obj["metadata"]["name"], obj["metadata"].get("namespace")
    unprotect = {"metadata": {"finalizers": None}}
    if obj["kind"] == "PersistentVolumeClaim":
        return [
            partial(core.delete_namespaced_persistent_volume_claim, name, ns),
            partial(core.patch_namespaced_persistent_volume_claim, name, ns, unprotect),
        ]
    if obj["kind"] == "PersistentVolume":
        return [
            partial(core.delete_persistent_volume, name),
            partial(core.patch_persistent_volume, name, unprotect),
        ]
    if obj["kind"] == "CSINode":
        return [partial(store.delete_csi_node, name)]
    return [partial(store.delete_storage_class, name)]
