"""Storage on the real control plane for tests, the demo and the benchmarks: manifests of
StorageClasses, PersistentVolumes, PersistentVolumeClaims and CSINodes, pods that use
claims, binding a claim to a volume as the PV controller does, and cleaning it all up.

``make_*`` build plain dict manifests; ``create`` posts any of them; ``bind`` makes a
claim and a volume bound to each other the way kube-controller-manager's PV controller
leaves them (the volume's claimRef with the claim's uid, the claim's volumeName and
bind-completed annotation, both phases Bound), with merge patches, so it agrees with a PV
controller doing the same at the same time; ``cleanup`` deletes what a test made, its
protection finalizers first (the StorageObjectInUseProtection admission plugin adds them,
and they hold the objects until kube-controller-manager's protection controllers see no
pod using them).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from kubernetes import client
from kubernetes.client.rest import ApiException

from splitsched.testing.manifests import Manifest

NO_PROVISIONER = "kubernetes.io/no-provisioner"
WAIT_FOR_FIRST_CONSUMER = "WaitForFirstConsumer"
IMMEDIATE = "Immediate"
HOSTNAME = "kubernetes.io/hostname"
ZONE = "topology.kubernetes.io/zone"


def make_storage_class(
    name: str,
    *,
    provisioner: str = NO_PROVISIONER,
    mode: str = WAIT_FOR_FIRST_CONSUMER,
    allowed_topologies: Mapping[str, Sequence[str]] | None = None,
) -> Manifest:
    sc: Manifest = {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "StorageClass",
        "metadata": {"name": name},
        "provisioner": provisioner,
        "volumeBindingMode": mode,
    }
    if allowed_topologies:
        expressions = [{"key": k, "values": list(v)} for k, v in allowed_topologies.items()]
        sc["allowedTopologies"] = [{"matchLabelExpressions": expressions}]
    return sc


def make_pv(
    name: str,
    *,
    storage_class: str = "",
    capacity: str = "1Gi",
    access_modes: Sequence[str] = ("ReadWriteOnce",),
    node_affinity: Mapping[str, Sequence[str]] | None = None,
    labels: Mapping[str, str] | None = None,
    csi_driver: str = "",
    claim_ref: tuple[str, str] | None = None,
) -> Manifest:
    """A volume: a CSI one when `csi_driver` is given, else a hostPath one; `node_affinity`
    requires each key In its values; `claim_ref` (namespace, name) pre-binds it to a claim,
    so the PV controller binds that claim and no other to it."""
    source: Manifest = (
        {"csi": {"driver": csi_driver, "volumeHandle": f"handle-{name}"}}
        if csi_driver
        else {"hostPath": {"path": f"/tmp/{name}"}}
    )
    spec: Manifest = {
        "capacity": {"storage": capacity},
        "accessModes": list(access_modes),
        "persistentVolumeReclaimPolicy": "Retain",
        "storageClassName": storage_class,
        **source,
    }
    if claim_ref is not None:
        spec["claimRef"] = {"kind": "PersistentVolumeClaim", "apiVersion": "v1",
                            "namespace": claim_ref[0], "name": claim_ref[1]}  # fmt: skip
    if node_affinity:
        expressions = [
            {"key": k, "operator": "In", "values": list(v)} for k, v in node_affinity.items()
        ]
        spec["nodeAffinity"] = {"required": {"nodeSelectorTerms": [{"matchExpressions":
                                                                    expressions}]}}  # fmt: skip
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolume",
        "metadata": {"name": name, "labels": dict(labels or {})},
        "spec": spec,
    }


def make_pvc(
    name: str,
    *,
    storage_class: str | None = "",
    request: str = "1Gi",
    access_modes: Sequence[str] = ("ReadWriteOnce",),
    volume_name: str = "",
) -> Manifest:
    """A claim; `storage_class` None leaves the class unset (the default class, if any)."""
    spec: Manifest = {
        "accessModes": list(access_modes),
        "resources": {"requests": {"storage": request}},
    }
    if storage_class is not None:
        spec["storageClassName"] = storage_class
    if volume_name:
        spec["volumeName"] = volume_name
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": name},
        "spec": spec,
    }


def make_csi_node(node: str, drivers: Mapping[str, int | None]) -> Manifest:
    """The node's CSINode: per driver its allocatable count (None: no count)."""
    entries = []
    for driver, count in drivers.items():
        entry: Manifest = {"name": driver, "nodeID": f"{node}-{driver}"}
        if count is not None:
            entry["allocatable"] = {"count": count}
        entries.append(entry)
    return {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "CSINode",
        "metadata": {"name": node},
        "spec": {"drivers": entries},
    }


def with_claims(pod: Manifest, claims: Iterable[str], *, ephemeral: Iterable[str] = ()) -> Manifest:
    """The pod with a persistentVolumeClaim volume per claim (mounted by its container) and
    a generic ephemeral volume per name in `ephemeral`."""
    volumes: list[Manifest] = [
        {"name": f"v-{c}", "persistentVolumeClaim": {"claimName": c}} for c in claims
    ]
    volumes += [
        {"name": e, "ephemeral": {"volumeClaimTemplate": {"spec": {
            "accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}}}}
        for e in ephemeral
    ]  # fmt: skip
    pod["spec"]["volumes"] = volumes
    pod["spec"]["containers"][0]["volumeMounts"] = [
        {"name": v["name"], "mountPath": f"/data/{v['name']}"} for v in volumes
    ]
    return pod


def create(api: client.ApiClient, manifest: Manifest, *, namespace: str = "") -> Any:
    """Create one storage object (or pod) of the manifests above."""
    kind = manifest["kind"]
    core, storage_api = client.CoreV1Api(api), client.StorageV1Api(api)
    if kind == "StorageClass":
        return storage_api.create_storage_class(manifest)
    if kind == "CSINode":
        return storage_api.create_csi_node(manifest)
    if kind == "PersistentVolume":
        return core.create_persistent_volume(manifest)
    if kind == "PersistentVolumeClaim":
        return core.create_namespaced_persistent_volume_claim(namespace, manifest)
    if kind == "Pod":
        return core.create_namespaced_pod(namespace, manifest)
    raise ValueError(f"cannot create a {kind}")


def bind(api: client.ApiClient, *, namespace: str, claim: str, volume: str) -> None:
    """Bind the claim and the volume to each other as the PV controller does."""
    core = client.CoreV1Api(api)
    pvc = core.read_namespaced_persistent_volume_claim(claim, namespace)
    yes = {"pv.kubernetes.io/bound-by-controller": "yes"}
    core.patch_persistent_volume(volume, {
        "metadata": {"annotations": yes},
        "spec": {"claimRef": {"kind": "PersistentVolumeClaim", "apiVersion": "v1",
                              "namespace": namespace, "name": claim,
                              "uid": pvc.metadata.uid}},
    })  # fmt: skip
    core.patch_persistent_volume_status(volume, {"status": {"phase": "Bound"}})
    core.patch_namespaced_persistent_volume_claim(claim, namespace, {
        "metadata": {"annotations": {**yes, "pv.kubernetes.io/bind-completed": "yes"}},
        "spec": {"volumeName": volume},
    })  # fmt: skip
    pv = core.read_persistent_volume(volume)
    status = {"phase": "Bound", "accessModes": pv.spec.access_modes,
              "capacity": pv.spec.capacity}  # fmt: skip
    core.patch_namespaced_persistent_volume_claim_status(claim, namespace, {"status": status})


def claim_phase(api: client.ApiClient, *, namespace: str, claim: str) -> str:
    pvc = client.CoreV1Api(api).read_namespaced_persistent_volume_claim(claim, namespace)
    return str(pvc.status.phase or "")


def cleanup(
    api: client.ApiClient,
    *,
    namespace: str = "",
    volumes: Iterable[str] = (),
    classes: Iterable[str] = (),
    csi_nodes: Iterable[str] = (),
) -> None:
    """Delete the namespace's claims and the named cluster-scoped objects, finalizers
    first (missing ones are ignored)."""
    core, storage_api = client.CoreV1Api(api), client.StorageV1Api(api)
    unfinalized: Manifest = {"metadata": {"finalizers": None}}
    if namespace:
        for pvc in core.list_namespaced_persistent_volume_claim(namespace).items:
            name = pvc.metadata.name
            _ignore_404(lambda n=name: core.patch_namespaced_persistent_volume_claim(
                n, namespace, unfinalized))  # fmt: skip
            _ignore_404(lambda n=name: core.delete_namespaced_persistent_volume_claim(
                n, namespace))  # fmt: skip
    for name in volumes:
        _ignore_404(lambda n=name: core.patch_persistent_volume(n, unfinalized))
        _ignore_404(lambda n=name: core.delete_persistent_volume(n))
    for name in classes:
        _ignore_404(lambda n=name: storage_api.delete_storage_class(n))
    for name in csi_nodes:
        _ignore_404(lambda n=name: storage_api.delete_csi_node(n))


def _ignore_404(call: Any) -> None:
    try:
        call()
    except ApiException as exc:
        if exc.status != 404:
            raise
