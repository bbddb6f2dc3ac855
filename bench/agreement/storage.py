"""Storage for a scenario (features ``storage``, ``csi-limits``). Pure.

What works without a PV controller, so both schedulers can be compared today (once
splitsched streams storage) and kube-scheduler against itself (``--self-check``):

* claims already bound to a PV (the run completes the binding as the PV controller would:
  ``pvc.spec.volumeName``, the bind-completed annotation, ``pv.spec.claimRef`` with the
  claim's uid, both Bound), the PV pinned to one node (hostname affinity), to a zone
  (zone label and affinity) or to no node; some ReadWriteOncePod (VolumeBinding,
  VolumeZone, VolumeRestrictions);
* a claim of an Immediate class that no PV matches (stays unbound: "pod has unbound
  immediate PersistentVolumeClaims"); a claim naming a StorageClass that does not exist;
  a pod naming a claim that does not exist;
* with ``csi-limits``: bound CSI volumes of one driver and a CSINode per node with an
  attach limit (NodeVolumeLimits).

Not yet: unbound WaitForFirstConsumer claims on static PVs. Binding them needs
kube-controller-manager's PV binder in the control plane and splitsched's volume step,
and a run that diverges on a PV cannot be realigned by moving the pod; the PVC/PV binding
comparison comes with them.

Names: cluster-scoped objects are ``@pv03``, ``@sc-bound``... (each run prefixes them);
claims are ``c03`` in a namespace slot.
"""

from __future__ import annotations

import random
from collections.abc import Sequence, Set
from dataclasses import dataclass
from typing import Any

from bench.agreement import cluster

Manifest = dict[str, Any]

CSI_DRIVER = "csi.example.com"
BOUND_CLASS = "@sc-bound"
IMMEDIATE_CLASS = "@sc-immediate"  # no PV of this class: its claims stay unbound
MISSING_CLASS = "@sc-missing"  # never created
ANN_BIND_COMPLETED = "pv.kubernetes.io/bind-completed"
ANN_BOUND_BY_CONTROLLER = "pv.kubernetes.io/bound-by-controller"


@dataclass(frozen=True)
class Storage:
    #: StorageClasses, PVs and CSINodes, in creation order (cluster-scoped).
    objects: tuple[Manifest, ...] = ()
    #: PVCs (namespace slot in metadata.namespace); bound ones name their PV.
    claims: tuple[Manifest, ...] = ()


def generate(rng: random.Random, nodes: Sequence[Manifest], features: Set[str]) -> Storage:
    """The classes, the pre-bound PV/claim pairs, a few claims that cannot bind, and
    (csi-limits) CSINodes; nothing without ``storage``."""
    if "storage" not in features:
        return Storage()
    objects = [
        _class(BOUND_CLASS, "example.com/static"),
        _class(IMMEDIATE_CLASS, "example.com/none"),
    ]
    claims: list[Manifest] = []
    csi = "csi-limits" in features
    for i in range(rng.randint(4, 8)):
        pv, claim = _bound_pair(rng, i, nodes, csi=csi and rng.random() < 0.5)
        objects.append(pv)
        claims.append(claim)
    base = len(claims)
    claims.append(_claim(f"c{base:02d}", IMMEDIATE_CLASS, ["ReadWriteOnce"]))
    claims.append(_claim(f"c{base + 1:02d}", MISSING_CLASS, ["ReadWriteOnce"]))
    if csi:
        objects += [_csinode(rng, n["metadata"]["name"]) for n in nodes]
    return Storage(objects=tuple(objects), claims=tuple(claims))


def _class(name: str, provisioner: str) -> Manifest:
    return {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "StorageClass",
        "metadata": {"name": name},
        "provisioner": provisioner,
        "volumeBindingMode": "Immediate",
    }


def _claim(name: str, storage_class: str, modes: list[str], size: str = "1Gi") -> Manifest:
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": name, "namespace": "@ns0"},
        "spec": {
            "storageClassName": storage_class,
            "accessModes": modes,
            "resources": {"requests": {"storage": size}},
        },
    }


def _bound_pair(
    rng: random.Random, index: int, nodes: Sequence[Manifest], *, csi: bool
) -> tuple[Manifest, Manifest]:
    """A PV and the claim bound to it: on one node, in one zone, or anywhere."""
    pv_name, claim_name = f"@pv{index:02d}", f"c{index:02d}"
    modes = ["ReadWriteOncePod"] if rng.random() < 0.25 else ["ReadWriteOnce"]
    pv: Manifest = {
        "apiVersion": "v1",
        "kind": "PersistentVolume",
        "metadata": {"name": pv_name, "labels": {}},
        "spec": {
            "capacity": {"storage": "1Gi"},
            "accessModes": modes,
            "storageClassName": BOUND_CLASS,
            "persistentVolumeReclaimPolicy": "Retain",
            "claimRef": {"kind": "PersistentVolumeClaim", "namespace": "@ns0", "name": claim_name},
        },
    }
    if csi:
        pv["spec"]["csi"] = {"driver": CSI_DRIVER, "volumeHandle": f"handle-{index}"}
    else:
        pv["spec"]["local"] = {"path": f"/mnt/disk{index}"}
    where = rng.random()
    if where < 0.4 or not csi:
        node = rng.choice(nodes)["metadata"]["name"]
        pv["spec"]["nodeAffinity"] = _affinity(cluster.HOSTNAME_LABEL, f"@{node}")
    elif where < 0.8:
        zone = rng.choice(cluster.ZONES)
        pv["metadata"]["labels"][cluster.ZONE_LABEL] = zone
        pv["spec"]["nodeAffinity"] = _affinity(cluster.ZONE_LABEL, zone)
    claim = _claim(claim_name, BOUND_CLASS, modes)
    claim["spec"]["volumeName"] = pv_name
    claim["metadata"]["annotations"] = {ANN_BIND_COMPLETED: "yes", ANN_BOUND_BY_CONTROLLER: "yes"}
    return pv, claim


def _affinity(key: str, value: str) -> Manifest:
    term = {"matchExpressions": [{"key": key, "operator": "In", "values": [value]}]}
    return {"required": {"nodeSelectorTerms": [term]}}


def _csinode(rng: random.Random, node: str) -> Manifest:
    driver: Manifest = {"name": CSI_DRIVER, "nodeID": node}
    if rng.random() < 0.8:
        driver["allocatable"] = {"count": rng.randint(1, 3)}
    return {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "CSINode",
        "metadata": {"name": f"@{node}"},
        "spec": {"drivers": [driver]},
    }


def attach(rng: random.Random, pods: Sequence[Manifest], storage: Storage) -> None:
    """Give some pods volumes: claims of the pool (several pods may share one), or a claim
    that does not exist. Pods move to the namespace slot of their claims (@ns0)."""
    if not storage.claims:
        return
    names = [c["metadata"]["name"] for c in storage.claims] + ["c-missing"]
    for pod in pods:
        if rng.random() >= 0.35:
            continue
        chosen = sorted(set(rng.sample(names, k=rng.choice((1, 1, 2)))))
        pod["metadata"]["namespace"] = "@ns0"
        pod["spec"]["volumes"] = [
            {"name": f"v{i}", "persistentVolumeClaim": {"claimName": name}}
            for i, name in enumerate(chosen)
        ]
